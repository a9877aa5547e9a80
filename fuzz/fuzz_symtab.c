// SPDX-License-Identifier: MIT
// Fuzz target: ELF symbol tables (symtab_open_elf_mem: libelf, .symtab/.dynsym, sections,
// program headers, build-id note), then lookups.
// Invariants: a found symbol has a NUL-terminated name and an offset inside its range; a name
// found by symtab_find() maps back to an address.
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fuzz.h"

static void fz_lookup(const struct symtab *st, uint64_t addr)
{
	const char *name = NULL;
	uint64_t off = UINT64_MAX, back;

	if (symtab_lookup(st, addr, &name, &off) != 0)
		return;
	FUZZ_CHECK(name != NULL);
	FUZZ_CHECK(off <= addr);
	/* The name is a C string owned by the table: finding it again must work. */
	(void)strlen(name);
	FUZZ_CHECK(symtab_find(st, name, &back) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct symtab *st = NULL;
	unsigned int e_type;
	uint64_t text_vaddr, addr;
	const char *bid;
	int err;

	err = symtab_open_elf_mem(data, size, "fuzz input", &st);
	FUZZ_CHECK(err == 0 || err == -EBADMSG || err == -ENODATA || err == -ENOMEM ||
		   err == -ENOTSUP || err == -EINVAL);
	FUZZ_LOG("symtab: %d, %zu code addresses\n", err, err ? 0 : symtab_count(st));
	if (err)
		return 0;
	symtab_elf_info(st, &e_type, &text_vaddr);
	bid = symtab_build_id(st);
	FUZZ_CHECK(bid != NULL && strlen(bid) <= 2 * 64);
	fz_lookup(st, text_vaddr);
	fz_lookup(st, text_vaddr + 0x10);
	for (size_t i = 0; i + 8 <= size && i < 4096; i += 64)
		fz_lookup(st, fuzz_get64(data + i));
	if (symtab_find(st, "main", &addr) == 0)
		fz_lookup(st, addr);
	if (symtab_find(st, "_start", &addr) == 0)
		fz_lookup(st, addr);
	(void)symtab_count(st);
	symtab_free(st);
	return 0;
}
