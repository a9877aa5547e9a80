// SPDX-License-Identifier: MIT
// Fuzz target: kernel symbols from the kallsyms tables inside an image (kallsyms_decode, found
// by structure alone) and from System.map / /proc/kallsyms text (ksym_parse_map), each turned
// into a symtab (symtab_from_entries) and looked up.
// Input: byte 0 even: the rest is .rodata-like bytes for kallsyms_decode; odd: map text.
// Invariants: decoded entries are sorted by address as the tables are; names are C strings;
// lookups return names the table can find again.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fuzz.h"
#include "kimage_internal.h"

static void fz_symtab(const struct ksym_entry *e, size_t n)
{
	struct symtab *st = NULL;
	const char *name;
	uint64_t off, addr;
	int err;

	err = symtab_from_entries(e, n, &st);
	FUZZ_CHECK(err == 0 || err == -ENODATA || err == -ENOMEM);
	if (err)
		return;
	for (size_t i = 0; i < n && i < 512; i++) {
		if (symtab_lookup(st, e[i].addr, &name, &off) == 0) {
			FUZZ_CHECK(off == 0 || e[i].addr >= off);
			FUZZ_CHECK(symtab_find(st, name, &addr) == 0);
		}
	}
	symtab_free(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ksym_entry *e = NULL;
	size_t n = 0, bad = 0;
	char layout[512];
	int err;

	if (size < 1)
		return 0;
	if (!(data[0] & 1)) {
		err = kallsyms_decode(data + 1, size - 1, &e, &n, layout, sizeof(layout));
		FUZZ_CHECK(err == 0 || err == -ENOENT || err == -ENOMEM);
		if (!err) {
			FUZZ_CHECK(memchr(layout, '\0', sizeof(layout)) != NULL);
			for (size_t i = 0; i < n; i++) {
				FUZZ_CHECK(e[i].name != NULL);
				FUZZ_CHECK(strlen(e[i].name) < 512);
			}
		}
	} else {
		err = ksym_parse_map((const char *)data + 1, size - 1, &e, &n, &bad);
		FUZZ_CHECK(err == 0 || err == -ENOMEM);
	}
	FUZZ_LOG("%s: %d, %zu entries\n", data[0] & 1 ? "map" : "kallsyms", err, n);
	if (!err)
		fz_symtab(e, n);
	ksym_entries_free(e, n);
	return 0;
}
