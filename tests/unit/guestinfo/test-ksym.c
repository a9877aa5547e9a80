// SPDX-License-Identifier: MIT
// Kernel symbols from maps and from kallsyms tables: synthetic tables in both table orders
// (<= 6.3: offsets first; 6.4+: offsets after the token index) and both address modes, hostile
// variants, map parsing. The real kernels' symbols: test-kernels.c.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>

#include "gi_internal.h"
#include "kimage_internal.h"
#include "test.h"

/* ---------------------------------------------------------------- synthetic kallsyms tables */

#define SYN_N 300
#define SYN_BASE 0xffffffff81000000ull

struct syn_sym {
	uint64_t addr;
	char type;
	char name[300];
	int absolute; /* per-CPU symbol kept absolute (KALLSYMS_ABSOLUTE_PERCPU) */
};

struct syn {
	uint8_t *buf;
	size_t len, cap;
};

static void syn_put(struct syn *s, const void *p, size_t n)
{
	if (s->len + n > s->cap) {
		s->cap = (s->len + n) * 2;
		s->buf = realloc(s->buf, s->cap);
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
}

static void syn_u8(struct syn *s, uint8_t v) { syn_put(s, &v, 1); }
static void syn_u16(struct syn *s, uint16_t v) { syn_put(s, &v, 2); }
static void syn_u32(struct syn *s, uint32_t v) { syn_put(s, &v, 4); }
static void syn_u64(struct syn *s, uint64_t v) { syn_put(s, &v, 8); }

static void syn_align(struct syn *s)
{
	while (s->len % 8)
		syn_u8(s, 0);
}

/* Tokens: every printable byte stands for itself; the others expand to "x" + a letter. */
static void syn_token(int i, char *out)
{
	if (i > 0x20 && i < 0x7f) {
		out[0] = (char)i;
		out[1] = '\0';
	} else {
		out[0] = 'x';
		out[1] = (char)('a' + i % 26);
		out[2] = '\0';
	}
}

static void syn_symbols(struct syn_sym *sy, int absolute_percpu)
{
	int i = 0;

	if (absolute_percpu) {
		sy[i++] = (struct syn_sym){ 0x0, 'A', "fixed_percpu_data", 1 };
		sy[i++] = (struct syn_sym){ 0x1fb80, 'A', "current_task", 1 };
	}
	sy[i++] = (struct syn_sym){ SYN_BASE, 'T', "_text", 0 };
	sy[i++] = (struct syn_sym){ SYN_BASE, 'T', "_stext", 0 };
	for (int k = 0; i < SYN_N - 2; i++, k++) {
		sy[i].addr = SYN_BASE + 0x10 + (uint64_t)k * 0x40;
		sy[i].type = k % 3 ? 't' : 'T';
		sy[i].absolute = 0;
		if (k == 100) {
			/* a "big" symbol: 2-byte length (Rust names in 6.1+) */
			memset(sy[i].name, 'r', 250);
			sy[i].name[250] = '\0';
		} else {
			snprintf(sy[i].name, sizeof(sy[i].name), "func_%d", k);
		}
	}
	sy[i] = (struct syn_sym){ sy[i - 1].addr + 0x40, 'T', "entry_SYSCALL_64", 0 };
	i++;
	sy[i] = (struct syn_sym){ sy[i - 1].addr + 0x1000, 'T', "_etext", 0 };
}

/* Build the tables as scripts/kallsyms.c does, in the <= 6.3 or the 6.4+ order. */
static struct syn syn_build(int new_order, int absolute_percpu, size_t noise)
{
	struct syn_sym *sy = calloc(SYN_N, sizeof(*sy));
	struct syn s = { 0 }, names = { 0 }, offsets = { 0 }, tokens = { 0 };
	uint32_t markers[(SYN_N + 255) / 256];
	uint16_t idx[256];
	char tok[4];

	syn_symbols(sy, absolute_percpu);
	for (int i = 0; i < SYN_N; i++) {
		size_t l = strlen(sy[i].name) + 1; /* type + name */

		if (i % 256 == 0)
			markers[i / 256] = (uint32_t)names.len;
		if (l > 0x7f) {
			syn_u8(&names, (uint8_t)((l & 0x7f) | 0x80));
			syn_u8(&names, (uint8_t)(l >> 7));
		} else {
			syn_u8(&names, (uint8_t)l);
		}
		syn_u8(&names, (uint8_t)sy[i].type);
		syn_put(&names, sy[i].name, l - 1);
		if (!absolute_percpu)
			syn_u32(&offsets, (uint32_t)(sy[i].addr - SYN_BASE));
		else if (sy[i].absolute)
			syn_u32(&offsets, (uint32_t)sy[i].addr);
		else
			syn_u32(&offsets, (uint32_t)(int32_t)(SYN_BASE - sy[i].addr - 1));
	}
	for (int i = 0; i < 256; i++) {
		idx[i] = (uint16_t)tokens.len;
		syn_token(i, tok);
		syn_put(&tokens, tok, strlen(tok) + 1);
	}
	/* Noise first: bytes a scanner must not mistake for tables. */
	for (size_t i = 0; i < noise; i++)
		syn_u8(&s, (uint8_t)(i * 37 + 11));
	syn_align(&s);
	if (!new_order) {
		syn_put(&s, offsets.buf, offsets.len);
		syn_align(&s);
		syn_u64(&s, SYN_BASE);
		syn_align(&s);
	}
	syn_u32(&s, SYN_N);
	syn_align(&s);
	syn_put(&s, names.buf, names.len);
	syn_align(&s);
	syn_put(&s, markers, sizeof(markers));
	syn_align(&s);
	if (!new_order) { /* kallsyms_seqs_of_names, 3 bytes each (6.2-6.3) */
		for (int i = 0; i < SYN_N * 3; i++)
			syn_u8(&s, (uint8_t)i);
		syn_align(&s);
	}
	syn_put(&s, tokens.buf, tokens.len);
	syn_align(&s);
	for (int i = 0; i < 256; i++)
		syn_u16(&s, idx[i]);
	syn_align(&s);
	if (new_order) {
		syn_put(&s, offsets.buf, offsets.len);
		syn_align(&s);
		syn_u64(&s, SYN_BASE);
		syn_align(&s);
		for (int i = 0; i < SYN_N; i++) /* seqs_of_names as .long */
			syn_u32(&s, (uint32_t)i);
	}
	for (size_t i = 0; i < 64; i++)
		syn_u8(&s, 0xcc);
	free(names.buf);
	free(offsets.buf);
	free(tokens.buf);
	free(sy);
	return s;
}

struct syn_case {
	const char *name;
	int new_order;
	int absolute_percpu;
	size_t noise;
};

static const struct syn_case syn_cases[] = {
	{ "6.1-6.3 order, absolute-percpu", 0, 1, 100 },
	{ "6.1-6.3 order, relative", 0, 0, 3 },
	{ "6.4+ order, absolute-percpu", 1, 1, 4096 },
	{ "6.4+ order, relative", 1, 0, 0 },
};

static int test_kallsyms_synthetic(void)
{
	for (size_t c = 0; c < ARRAY_SIZE(syn_cases); c++) {
		const struct syn_case *tc = &syn_cases[c];
		struct syn s = syn_build(tc->new_order, tc->absolute_percpu, tc->noise);
		struct syn_sym want[SYN_N];
		struct ksym_entry *e = NULL;
		struct symtab *st = NULL;
		size_t n = 0;
		char layout[512];
		const char *name;
		uint64_t addr, off;

		printf("# %s\n", tc->name);
		syn_symbols(want, tc->absolute_percpu);
		ASSERT_EQ_INT(kallsyms_decode(s.buf, s.len, &e, &n, layout, sizeof(layout)), 0);
		printf("# %s\n", layout);
		ASSERT_EQ_INT(n, SYN_N);
		for (size_t i = 0; i < n; i++) {
			ASSERT_EQ_U64(e[i].addr, want[i].addr);
			ASSERT_EQ_INT(e[i].type, want[i].type);
			ASSERT_EQ_STR(e[i].name, want[i].name);
		}
		ASSERT_TRUE(strstr(layout, tc->new_order ? "6.4+" : "<= 6.3") != NULL);
		ASSERT_EQ_INT(symtab_from_entries(e, n, &st), 0);
		ASSERT_EQ_INT(symtab_find(st, "entry_SYSCALL_64", &addr), 0);
		ASSERT_EQ_INT(symtab_lookup(st, addr + 5, &name, &off), 0);
		ASSERT_EQ_STR(name, "entry_SYSCALL_64");
		ASSERT_EQ_U64(off, 5);
		/* _etext ends the text: nothing is named there. */
		ASSERT_EQ_INT(symtab_find(st, "_etext", &addr), 0);
		ASSERT_TRUE(symtab_lookup(st, addr, &name, &off) == -ENOENT);
		/* An address before the text is nobody's. */
		ASSERT_TRUE(symtab_lookup(st, SYN_BASE - 1, &name, &off) == -ENOENT);
		if (tc->absolute_percpu) {
			ASSERT_EQ_INT(symtab_find(st, "current_task", &addr), 0);
			ASSERT_EQ_U64(addr, 0x1fb80);
		}
		symtab_free(st);
		ksym_entries_free(e, n);
		free(s.buf);
	}
	return TEST_OK;
}

/* Hostile and damaged tables: every damage is refused, nothing is read out of bounds. */
static int test_kallsyms_damaged(void)
{
	struct syn s = syn_build(1, 1, 64);
	struct ksym_entry *e = NULL;
	size_t n = 0, names_at, i;
	uint8_t *copy;

	char layout[512];
	const char *rb;
	size_t needed;

	/* 6.4+ order: relative_base is the last table needed (seqs_of_names is not used). */
	ASSERT_EQ_INT(kallsyms_decode(s.buf, s.len, &e, &n, layout, sizeof(layout)), 0);
	ksym_entries_free(e, n);
	rb = strstr(layout, "relative_base@+0x");
	ASSERT_TRUE(rb != NULL);
	needed = strtoul(rb + strlen("relative_base@+0x"), NULL, 16) + 8;
	/* Truncations every 97 bytes: refused until every needed table is whole. */
	for (i = 0; i < s.len; i += 97) {
		int r = kallsyms_decode(s.buf, i, &e, &n, NULL, 0);

		if (i >= needed) {
			ASSERT_EQ_INT(r, 0);
			ksym_entries_free(e, n);
		} else {
			ASSERT_EQ_INT(r, -ENOENT);
		}
	}
	/* Find kallsyms_num_syms (SYN_N followed by 4 zero bytes) and break things after it. */
	for (names_at = 0; names_at + 8 <= s.len; names_at += 8) {
		uint32_t v;

		memcpy(&v, s.buf + names_at, 4);
		if (v == SYN_N)
			break;
	}
	ASSERT_TRUE(names_at + 8 < s.len);
	copy = malloc(s.len);
	/* A zero-length name entry. */
	memcpy(copy, s.buf, s.len);
	copy[names_at + 8] = 0;
	ASSERT_EQ_INT(kallsyms_decode(copy, s.len, &e, &n, NULL, 0), -ENOENT);
	/* A name length running past the buffer. */
	memcpy(copy, s.buf, s.len);
	copy[names_at + 8] = 0xff;
	copy[names_at + 9] = 0x7f;
	ASSERT_EQ_INT(kallsyms_decode(copy, s.len, &e, &n, NULL, 0), -ENOENT);
	/* num_syms larger than the names (the markers stop matching). */
	memcpy(copy, s.buf, s.len);
	copy[names_at] = (uint8_t)(SYN_N + 1);
	ASSERT_EQ_INT(kallsyms_decode(copy, s.len, &e, &n, NULL, 0), -ENOENT);
	/* num_syms absurdly large. */
	memcpy(copy, s.buf, s.len);
	memset(copy + names_at, 0xff, 4);
	ASSERT_EQ_INT(kallsyms_decode(copy, s.len, &e, &n, NULL, 0), -ENOENT);
	free(copy);
	ASSERT_EQ_INT(kallsyms_decode(NULL, 0, &e, &n, NULL, 0), -EINVAL);
	free(s.buf);
	return TEST_OK;
}

/* ---------------------------------------------------------------- System.map / kallsyms text */

struct map_case {
	const char *name;
	const char *text;
	size_t n;     /* entries parsed */
	size_t bad;   /* lines skipped as malformed */
	const char *first;
	uint64_t first_addr;
};

static const struct map_case map_cases[] = {
	{ "System.map", "ffffffff81000000 T _text\nffffffff81000000 T _stext\n", 2, 0, "_text",
	  0xffffffff81000000ull },
	{ "kallsyms with modules", "ffffffff81000000 T _stext\nffffffffc0000000 t foo\t[ext4]\n",
	  1, 0, "_stext", 0xffffffff81000000ull },
	{ "CRLF and blank lines", "\r\n0000000000001000 A current_task\r\n\n", 1, 0,
	  "current_task", 0x1000 },
	{ "Debian stub", "ffffffffffffffff B The real System.map is in the linux-image-<version>-dbg package\n",
	  0, 1, NULL, 0 },
	{ "no name", "ffffffff81000000 T \n", 0, 1, NULL, 0 },
	{ "bad address", "zz T x\nffffffff8100000000 T toolong\n", 0, 2, NULL, 0 },
	{ "bad type", "ffffffff81000000 % x\n", 0, 1, NULL, 0 },
	{ "no trailing newline", "1 t a", 1, 0, "a", 1 },
	{ "empty", "", 0, 0, NULL, 0 },
};

static int test_map_parse(void)
{
	for (size_t c = 0; c < ARRAY_SIZE(map_cases); c++) {
		const struct map_case *tc = &map_cases[c];
		struct ksym_entry *e = NULL;
		size_t n = 99, bad = 99;

		printf("# %s\n", tc->name);
		ASSERT_EQ_INT(ksym_parse_map(tc->text, strlen(tc->text), &e, &n, &bad), 0);
		ASSERT_EQ_INT(n, tc->n);
		ASSERT_EQ_INT(bad, tc->bad);
		if (tc->first) {
			ASSERT_EQ_STR(e[0].name, tc->first);
			ASSERT_EQ_U64(e[0].addr, tc->first_addr);
		}
		ksym_entries_free(e, n);
	}
	return TEST_OK;
}

static int write_tmp(const char *text, char *path, size_t size)
{
	int fd;

	snprintf(path, size, "/tmp/hvprof-test-ksym-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int test_map_files(void)
{
	static const struct {
		const char *text;
		int err;
	} rows[] = {
		{ "ffffffff81000000 T _stext\nffffffff81000100 t f\nffffffff81000200 T _etext\n", 0 },
		{ "ffffffffffffffff B The real System.map is in the linux-image-<version>-dbg package\n",
		  -ENODATA },
		{ "0000000000000000 T _stext\n0000000000000000 t f\n", -ENODATA }, /* kptr_restrict */
	};
	char path[64];

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct symtab *st = NULL;
		enum symtab_source src = SYMTAB_SRC_NONE;
		const char *name;
		uint64_t off;
		int r;

		ASSERT_EQ_INT(write_tmp(rows[i].text, path, sizeof(path)), 0);
		r = symtab_open_kernel(path, &st, &src);
		unlink(path);
		ASSERT_EQ_INT(r, rows[i].err);
		if (r == 0) {
			ASSERT_EQ_INT(src, SYMTAB_SRC_MAP);
			ASSERT_EQ_INT(symtab_lookup(st, 0xffffffff81000180ull, &name, &off), 0);
			ASSERT_EQ_STR(name, "f");
			ASSERT_EQ_U64(off, 0x80);
			ASSERT_EQ_INT(symtab_lookup(st, 0xffffffff81000200ull, &name, &off), -ENOENT);
		}
		symtab_free(st);
	}
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "kallsyms: synthetic tables, both orders and modes", test_kallsyms_synthetic },
	{ "kallsyms: damaged tables refused", test_kallsyms_damaged },
	{ "map lines", test_map_parse },
	{ "map files (System.map, stub, kptr_restrict)", test_map_files },
};

TEST_MAIN(tests)
