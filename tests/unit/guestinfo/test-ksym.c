// SPDX-License-Identifier: MIT
// Kernel symbols from maps and from kallsyms tables: synthetic tables in both table orders
// (<= 6.3: offsets first; 6.4+: offsets after the token index) and both address modes, hostile
// variants, map parsing; then the real test kernel and Debian's stock kernels when present
// (tests/fixtures/get-stock-kernel.sh), each skipping with the reason when a file is missing.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>

#include "gi_internal.h"
#include "kimage_internal.h"
#include "oneloop.h"
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

/* ---------------------------------------------------------------- real kernels */

static int stock_file(const char *flavour, const char *name, char *path, size_t size)
{
	const char *cache = getenv("HVPROF_CACHE");
	const char *home = getenv("HOME");
	struct stat st;

	if (cache && *cache)
		snprintf(path, size, "%s/stock-kernel/%s/%s", cache, flavour, name);
	else
		snprintf(path, size, "%s/.cache/hvprof/stock-kernel/%s/%s", home ? home : "/root",
			 flavour, name);
	if (stat(path, &st) != 0) {
		printf("# skip: %s missing (run tests/fixtures/get-stock-kernel.sh)\n", path);
		return -1;
	}
	return 0;
}

static int image_read(void *ctx, uint64_t kva, void *dst, size_t len)
{
	return gi_kimage_read_kva(ctx, kva, dst, len);
}

/* The site's bytes, checked independently of capstone: sysretq 48 0f 07, sysretl 0f 07,
 * iretq 48 cf (SDM vol. 2). */
static int check_site_bytes(const struct gi_kimage *img, const struct gi_exit_site *s)
{
	uint8_t b[3] = { 0 };

	if (gi_kimage_read_kva(img, s->kva, b, sizeof(b)) != 0)
		return -1;
	switch (s->kind) {
	case GI_EXIT_SYSRETQ:
		return b[0] == 0x48 && b[1] == 0x0f && b[2] == 0x07 ? 0 : -1;
	case GI_EXIT_SYSRETL:
		return b[0] == 0x0f && b[1] == 0x07 ? 0 : -1;
	case GI_EXIT_IRETQ:
		return b[0] == 0x48 && b[1] == 0xcf ? 0 : -1;
	}
	return -1;
}

/* pahole's offset of the task_struct line ending in @decl (" pid;", " comm[16];"), or -1. */
static long pahole_offset(const char *elf_path, const char *decl)
{
	char cmd[1200], line[512];
	long off = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "pahole -F btf -C task_struct '%s' 2>/dev/null", elf_path);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		/* "\tpid_t    pid;    / *  2416     4 * /": the first number is the offset */
		char *hit = strstr(line, decl), *c;

		if (hit && (c = strstr(hit, "/*")) && off < 0)
			off = strtol(c + 2, NULL, 10);
	}
	pclose(p);
	return off;
}

static int stock_kernel(const char *flavour)
{
	char vmlinuz[4096], tmp[64];
	struct gi_kimage *img = NULL;
	struct symtab *st = NULL;
	enum symtab_source src;
	struct gi_exit_site sites[16];
	struct gi_layout l;
	const void *btf;
	size_t btf_size, n = 0, elf_len;
	uint64_t stext, etext, entry, addr, off;
	const char *name;
	const uint8_t *elf;
	int kinds = 0, fd;
	long pid_off, comm_off;

	if (stock_file(flavour, "vmlinuz", vmlinuz, sizeof(vmlinuz)))
		return TEST_SKIP;
	ASSERT_EQ_INT(gi_kimage_open(vmlinuz, &img), 0);
	ASSERT_TRUE(gi_kimage_is_bzimage(img));
	/* The stock image has no symtab: symbols come from its own kallsyms tables. */
	ASSERT_EQ_INT(symtab_open_kernel(vmlinuz, &st, &src), 0);
	ASSERT_EQ_INT(src, SYMTAB_SRC_KALLSYMS);
	printf("# %s: %s, %zu code symbols\n", flavour, gi_kimage_header_version(img),
	       symtab_count(st));
	ASSERT_TRUE(symtab_count(st) > 30000);
	ASSERT_EQ_INT(symtab_find(st, "_stext", &stext), 0);
	ASSERT_EQ_INT(symtab_find(st, "_etext", &etext), 0);
	ASSERT_EQ_INT(symtab_find(st, "entry_SYSCALL_64", &entry), 0);
	/* kallsyms semantics: text at the link address, entry code inside it, aligned. */
	ASSERT_EQ_U64(stext, 0xffffffff81000000ull);
	ASSERT_TRUE(entry > stext && entry < etext && entry % 16 == 0);
	/* Names and addresses agree both ways for the functions hvprof relies on. */
	static const char *const fns[] = { "entry_SYSCALL_64", "asm_exc_page_fault", "schedule",
					   "do_syscall_64", "native_irq_return_iret" };
	for (size_t i = 0; i < ARRAY_SIZE(fns); i++) {
		ASSERT_EQ_INT(symtab_find(st, fns[i], &addr), 0);
		ASSERT_TRUE(addr >= stext && addr < etext);
		ASSERT_EQ_INT(symtab_lookup(st, addr, &name, &off), 0);
		ASSERT_EQ_U64(off, 0);
		if (strcmp(name, fns[i]) != 0) { /* an alias at the same address is fine */
			uint64_t a2;

			ASSERT_EQ_INT(symtab_find(st, name, &a2), 0);
			ASSERT_EQ_U64(a2, addr);
		}
	}
	/* The linux_banner symbol points at the banner text. */
	ASSERT_EQ_INT(symtab_find(st, "linux_banner", &addr), 0);
	{
		char b[14] = { 0 };

		ASSERT_EQ_INT(gi_kimage_read_kva(img, addr, b, 13), 0);
		ASSERT_EQ_STR(b, "Linux version");
	}

	/* Exit sites: with symbols, and from the entry address alone (the LSTAR route). */
	ASSERT_EQ_INT(gi_exit_sites(st, image_read, img, NULL, 0, 0, sites, 16, &n), 0);
	for (size_t i = 0; i < n && i < 16; i++) {
		printf("# site 0x%llx %s %s+0x%llx\n", (unsigned long long)sites[i].kva,
		       gi_exit_kind_name(sites[i].kind), sites[i].symbol,
		       (unsigned long long)sites[i].sym_off);
		ASSERT_EQ_INT(check_site_bytes(img, &sites[i]), 0);
		kinds |= 1 << sites[i].kind;
	}
	ASSERT_TRUE(kinds & (1 << GI_EXIT_SYSRETQ));
	ASSERT_TRUE(kinds & (1 << GI_EXIT_IRETQ));
	{
		struct gi_exit_site nosym[16];
		size_t m = 0;

		ASSERT_EQ_INT(gi_exit_sites(NULL, image_read, img, &entry, 1, 0x200000, nosym, 16,
					    &m), 0);
		kinds = 0;
		for (size_t i = 0; i < m && i < 16; i++) {
			ASSERT_EQ_STR(nosym[i].symbol, "");
			kinds |= 1 << nosym[i].kind;
			/* every site found from LSTAR alone is one of the symbol-guided ones */
			int found = 0;

			for (size_t k = 0; k < n; k++)
				found |= sites[k].kva + 0x200000 == nosym[i].kva;
			ASSERT_TRUE(found);
		}
		ASSERT_TRUE(kinds & (1 << GI_EXIT_SYSRETQ));
		ASSERT_TRUE(kinds & (1 << GI_EXIT_IRETQ));
	}

	/* BTF from the image itself, against pahole on the same bytes. */
	ASSERT_EQ_INT(gi_kimage_btf(img, &btf, &btf_size), 0);
	ASSERT_EQ_INT(gi_layout_from_btf_data(btf, btf_size, &l), 0);
	ASSERT_EQ_INT(l.task_comm_len, 16);
	ASSERT_EQ_INT(l.task_tgid, l.task_pid + 4);
	/* The exit-work loop: Debian's kernels are CONFIG_PARAVIRT_XXL, their loop headed by a
	 * call of pv_ops.irq.irq_enable (slot from BTF), found so; its clear as hvprof completes
	 * it (lock and byte [reg], 0xfd) */
	{
		struct gi_pv_irq pv;
		struct gi_exit_work w, bare;
		uint8_t b[16];

		ASSERT_TRUE(l.pv_irq_enable != UINT32_MAX && l.pv_irq_disable != UINT32_MAX);
		gi_pv_irq_slots(st, &l, &pv);
		ASSERT_TRUE(pv.enable != 0 && pv.disable == pv.enable - 8);
		if (!strcmp(flavour, "newer")) {
			/* 6.12: exit_to_user_mode_loop is __always_inline, each exit path holds
			 * its own copy and the out-of-line one is called by nothing: not taken
			 * (one breakpoint on that copy would see no return; marks trap) */
			uint64_t at, after, end;

			ASSERT_EQ_INT(one_loop(st, image_read, img, &pv, &w), -ENOTSUP);
			ASSERT_EQ_U64(w.clear, 0);
			ASSERT_EQ_INT(gi_call_site(st, image_read, img, "syscall_exit_to_user_mode",
						   "exit_to_user_mode_loop", &at, &after, &end),
				      -ENOENT);
			ASSERT_EQ_INT(gi_call_site(st, image_read, img,
						   "irqentry_exit_to_user_mode",
						   "exit_to_user_mode_loop", &at, &after, &end),
				      -ENOENT);
			/* ... each path holds its own copy, with its own clear: the loops hvprof
			 * traps, one breakpoint each */
			{
				static const char *const paths[2] = {
					"syscall_exit_to_user_mode", "irqentry_exit_to_user_mode"
				};
				struct gi_exit_work cp[GI_EW_COPIES];
				size_t n_cp = 0;

				ASSERT_EQ_INT(gi_exit_work_loops(st, image_read, img, &pv, cp, &n_cp),
					      0);
				ASSERT_EQ_INT((int)n_cp, 2);
				for (size_t k = 0; k < n_cp; k++) {
					const char *in;
					uint64_t at_off, fn;

					ASSERT_EQ_INT(symtab_lookup(st, cp[k].clear, &in, &at_off), 0);
					printf("# 6.12's copy %zu: clear at %s+0x%llx, irq disable "
					       "before the first read at +0x%llx\n", k, in,
					       (unsigned long long)at_off,
					       (unsigned long long)(cp[k].prep_cli ? cp[k].prep_cli -
										     cp[k].func_start
										   : 0));
					ASSERT_TRUE(!strcmp(in, paths[k]));
					ASSERT_EQ_INT(symtab_find(st, paths[k], &fn), 0);
					ASSERT_EQ_U64(cp[k].func_start, fn);
					ASSERT_TRUE(cp[k].head < cp[k].clear &&
						    cp[k].clear < cp[k].loop_end);
					ASSERT_TRUE(cp[k].loop_cli > cp[k].head &&
						    cp[k].loop_cli < cp[k].loop_end);
					ASSERT_TRUE(cp[k].clear_base != 0 && cp[k].clear_size == 1);
					ASSERT_EQ_INT(gi_kimage_read_kva(img, cp[k].clear, b,
									 cp[k].clear_end -
										 cp[k].clear), 0);
					ASSERT_TRUE(!memcmp(b, cp[k].clear_bytes,
							    cp[k].clear_end - cp[k].clear));
				}
				/* the body of each copy: its head, clear and last cli, and the
				 * call of task_work_run out of line past its end (it jumps back
				 * in); not the call of __ct_user_enter (context tracking, after the
				 * last read, reached by a static key) that lies between its head
				 * and its end */
				for (size_t k = 0; k < n_cp; k++) {
					uint64_t ct_at, ct_after, ct_end, tw_at;
					bool head_in = false, clear_in = false, cli_in = false,
					     ct_in = false, tw_in = false;

					ASSERT_EQ_INT(gi_call_site(st, image_read, img, paths[k],
								   "__ct_user_enter", &ct_at,
								   &ct_after, &ct_end), 0);
					ASSERT_EQ_INT(gi_call_site(st, image_read, img, paths[k],
								   "task_work_run", &tw_at,
								   &ct_after, &ct_end), 0);
					ASSERT_TRUE(tw_at >= cp[k].loop_end);
					ASSERT_TRUE(ct_at > cp[k].head && ct_at < cp[k].loop_end);
					ASSERT_TRUE(cp[k].n_body >= 1 && cp[k].n_body <= GI_EW_BODY);
					for (unsigned int r = 0; r < cp[k].n_body; r++) {
						const uint64_t *b2 = cp[k].body[r];

						printf("# 6.12's copy %zu: body [+0x%llx, +0x%llx)\n", k,
						       (unsigned long long)(b2[0] - cp[k].func_start),
						       (unsigned long long)(b2[1] - cp[k].func_start));
						ASSERT_TRUE(b2[0] >= cp[k].func_start &&
							    b2[1] <= cp[k].func_end);
						head_in |= cp[k].head >= b2[0] && cp[k].head < b2[1];
						clear_in |= cp[k].clear >= b2[0] && cp[k].clear < b2[1];
						cli_in |= cp[k].loop_cli >= b2[0] && cp[k].loop_cli < b2[1];
						ct_in |= ct_at >= b2[0] && ct_at < b2[1];
						tw_in |= tw_at >= b2[0] && tw_at < b2[1];
					}
					ASSERT_TRUE(head_in && clear_in && cli_in && !ct_in && tw_in);
				}
				/* the static keys' sites in the system call path, from the
				 * kernel's __jump_table: nops or jumps in the image, one of them
				 * the way to context tracking's user entry */
				{
					struct gi_jump_label jl[64];
					size_t n_jl = 0;
					bool to_ct = false;
					uint64_t ct_at0, ct_after0, ct_end0;

					ASSERT_EQ_INT(gi_call_site(st, image_read, img, paths[0],
								   "__ct_user_enter", &ct_at0,
								   &ct_after0, &ct_end0), 0);

					ASSERT_EQ_INT(gi_jump_labels(st, image_read, img,
								     cp[0].func_start,
								     cp[0].func_end, jl, 64, &n_jl),
						      0);
					printf("# 6.12's system call path: %zu static keys' sites\n",
					       n_jl);
					ASSERT_TRUE(n_jl >= 3);
					for (size_t j = 0; j < n_jl; j++) {
						ASSERT_EQ_INT(gi_kimage_read_kva(img, jl[j].code, b, 5),
							      0);
						ASSERT_TRUE(!memcmp(b, "\x0f\x1f\x44\x00\x00", 5) ||
							    !memcmp(b, "\x66\x90", 2) ||
							    b[0] == 0xe9 || b[0] == 0xeb);
						to_ct |= jl[j].target <= ct_at0 &&
							 ct_at0 - jl[j].target < 16;
					}
					ASSERT_TRUE(to_ct);
				}
				/* the system call path disables interrupts (a pv_ops call) after
				 * its exit work, then reads the flags; the interrupt path, entered
				 * with them disabled, reads them at once */
				ASSERT_TRUE(cp[0].prep_cli > cp[0].func_start &&
					    cp[0].prep_cli < cp[0].head);
				ASSERT_EQ_INT(gi_kimage_read_kva(img, cp[0].prep_cli, b, 6), 0);
				ASSERT_TRUE(b[0] == 0xff && b[1] == 0x15);
				ASSERT_EQ_U64(cp[1].prep_cli, 0);
			}
			goto loop_done;
		}
		ASSERT_EQ_INT(one_loop(st, image_read, img, &pv, &w), 0);
		{ /* 6.1: both paths call exit_to_user_mode_prepare: that one loop */
			struct gi_exit_work cp[GI_EW_COPIES];
			size_t n_cp = 9;

			ASSERT_EQ_INT(gi_exit_work_loops(st, image_read, img, &pv, cp, &n_cp), 0);
			ASSERT_EQ_INT((int)n_cp, 1);
			ASSERT_EQ_U64(cp[0].clear, w.clear);
			ASSERT_EQ_U64(cp[0].prep_cli, 0);
		}
		printf("# exit-work loop [0x%llx, 0x%llx), clear at 0x%llx, last irq disable 0x%llx; "
		       "without the pv_ops slots: %s\n", (unsigned long long)w.head,
		       (unsigned long long)w.loop_end, (unsigned long long)w.clear,
		       (unsigned long long)w.loop_cli,
		       one_loop(st, image_read, img, NULL, &bare) ? "not found" : "found");
		ASSERT_TRUE(w.head < w.clear && w.clear < w.loop_end && w.loop_cli > w.head);
		/* 6.1's loop: its head, clear and last cli, and its call of task_work_run out of
		 * line past its end; not the exit work after the read that lies between its head
		 * and its end (switch_fpu_return's call), nor what only a static key reaches */
		{
			bool head_in = false, clear_in = false, cli_in = false, tw_in = false;
			bool fpu_in = false;
			uint64_t tw_at, tw_after, tw_end, fpu_at;

			ASSERT_EQ_INT(gi_call_site(st, image_read, img, "exit_to_user_mode_prepare",
						   "task_work_run", &tw_at, &tw_after, &tw_end), 0);
			ASSERT_TRUE(tw_at >= w.loop_end);
			ASSERT_EQ_INT(gi_call_site(st, image_read, img, "exit_to_user_mode_prepare",
						   "switch_fpu_return", &fpu_at, &tw_after, &tw_end),
				      0);
			ASSERT_TRUE(fpu_at > w.head && fpu_at < w.loop_end);

			ASSERT_TRUE(w.n_body >= 1 && w.n_body <= GI_EW_BODY);
			for (unsigned int r = 0; r < w.n_body; r++) {
				printf("# 6.1's loop body [+0x%llx, +0x%llx)\n",
				       (unsigned long long)(w.body[r][0] - w.func_start),
				       (unsigned long long)(w.body[r][1] - w.func_start));
				head_in |= w.head >= w.body[r][0] && w.head < w.body[r][1];
				clear_in |= w.clear >= w.body[r][0] && w.clear < w.body[r][1];
				cli_in |= w.loop_cli >= w.body[r][0] && w.loop_cli < w.body[r][1];
				tw_in |= tw_at >= w.body[r][0] && tw_at < w.body[r][1];
				fpu_in |= fpu_at >= w.body[r][0] && fpu_at < w.body[r][1];
			}
			ASSERT_TRUE(head_in && clear_in && cli_in && tw_in && !fpu_in);
		}
		ASSERT_TRUE(w.clear_base != 0 && w.clear_size == 1 && (w.clear_imm & 0xff) == 0xfd);
		ASSERT_EQ_INT(gi_kimage_read_kva(img, w.clear, b, w.clear_end - w.clear), 0);
		ASSERT_TRUE(b[0] == 0xf0 && !memcmp(b, w.clear_bytes, w.clear_end - w.clear));
	}
loop_done:
	elf = gi_kimage_elf(img, &elf_len);
	snprintf(tmp, sizeof(tmp), "/tmp/hvprof-test-vmlinux-XXXXXX");
	fd = mkstemp(tmp);
	ASSERT_TRUE(fd >= 0);
	ASSERT_TRUE(write(fd, elf, elf_len) == (ssize_t)elf_len);
	close(fd);
	pid_off = pahole_offset(tmp, " pid;");
	comm_off = pahole_offset(tmp, " comm[16];");
	unlink(tmp);
	if (pid_off < 0 || comm_off < 0) {
		printf("# pahole not available: BTF offsets pid=%u comm=%u not compared\n",
		       l.task_pid, l.task_comm);
	} else {
		printf("# pahole: task_struct.pid %ld comm %ld; ours %u %u\n", pid_off, comm_off,
		       l.task_pid, l.task_comm);
		ASSERT_EQ_INT(l.task_pid, pid_off);
		ASSERT_EQ_INT(l.task_comm, comm_off);
	}
	symtab_free(st);
	gi_kimage_free(img);
	return TEST_OK;
}

static int test_stock_61(void)
{
	return stock_kernel("6.1");
}

static int test_stock_newer(void)
{
	return stock_kernel("newer");
}

/*
 * Debian's 6.12, its loops inlined into the exit paths @w (link-time; the slide placed at 0):
 * the exit tail around each copy. The system call path before its irq disable (its exit work)
 * reads the flags still; from there to the loop, and after it, it has read them; the loop's
 * body reads them again, its bottom from the last cli may have done so; a frame called from
 * the body is before the read whatever its callers.
 */
static int stock_612_tail(struct gi *gi, const struct gi_exit_work *w, const char *vmlinuz)
{
	uint64_t sched, callers[2], ct_at, ct_after, dosys_at, dosys_after, tw_at, tw_after, end;
	struct gi_kimage *img = NULL;

	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "schedule", &sched), 0);
	ASSERT_EQ_INT(gi_kimage_open(vmlinuz, &img), 0);
	ASSERT_EQ_INT(gi_call_site(gi_symtab(gi), image_read, img, "syscall_exit_to_user_mode",
				   "__ct_user_enter", &ct_at, &ct_after, &end), 0);
	ASSERT_EQ_INT(gi_call_site(gi_symtab(gi), image_read, img, "do_syscall_64",
				   "syscall_exit_to_user_mode", &dosys_at, &dosys_after, &end), 0);
	ASSERT_EQ_INT(gi_call_site(gi_symtab(gi), image_read, img, "syscall_exit_to_user_mode",
				   "task_work_run", &tw_at, &tw_after, &end), 0);
	gi_kimage_free(img);
	gi_kaslr_placed(gi, 0);
	for (size_t k = 0; k < 2; k++) {
		ASSERT_TRUE(!gi_chain_in_exit_tail(gi, w[k].head, NULL, 0));
		ASSERT_TRUE(!gi_chain_in_exit_tail(gi, w[k].loop_cli - 1, NULL, 0));
		ASSERT_TRUE(gi_chain_in_exit_tail(gi, w[k].loop_cli, NULL, 0));
		ASSERT_TRUE(gi_chain_in_exit_tail(gi, w[k].loop_end, NULL, 0));
		ASSERT_TRUE(gi_chain_in_exit_tail(gi, w[k].head - 1, NULL, 0));
		callers[0] = w[k].head + 6; /* returning into the body, after its sti call */
		callers[1] = w[k].loop_end + 1;
		ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4, callers, 2));
	}
	/* syscall_exit_to_user_mode: its exit work, then the irq disable and the read */
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, w[0].func_start + 1, NULL, 0));
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, w[0].prep_cli - 1, NULL, 0));
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, w[0].prep_cli, NULL, 0));
	callers[0] = w[0].prep_cli; /* the return of the call before it */
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4, callers, 1));
	callers[0] = w[0].prep_cli + 6; /* past the disable: a call after the read */
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, sched + 4, callers, 1));
	/* irqentry_exit_to_user_mode reads them at once: all before its loop is tail */
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, w[1].func_start + 1, NULL, 0));
	/* context tracking's user entry (nohz_full), called between the copy's head and its end
	 * but after the last read: not the loop's, so the outer frame, do_syscall_64 after its
	 * call of the exit path, decides (tail) */
	ASSERT_TRUE(ct_at > w[0].head && ct_at < w[0].loop_end);
	callers[0] = ct_after;
	callers[1] = dosys_after;
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, sched + 4, callers, 2));
	/* ... and so does that frame alone (the walk stopped there): it is in the exit path
	 * outside the loop's body, past the first read */
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, sched + 4, callers, 1));
	/* a loop whose body is not known holds nothing before the read: its head is tail */
	{
		unsigned int nb = gi->exit_work[0].n_body;

		gi->exit_work[0].n_body = 0;
		gi_exit_ranges(gi);
		ASSERT_TRUE(gi_chain_in_exit_tail(gi, w[0].head, NULL, 0));
		gi->exit_work[0].n_body = nb;
		gi_exit_ranges(gi);
		ASSERT_TRUE(!gi_chain_in_exit_tail(gi, w[0].head, NULL, 0));
	}
	callers[0] = w[0].head + 6; /* from the loop's body: before the read, whatever is outer */
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4, callers, 2));
	callers[0] = tw_after; /* task work, run out of line past the loop's end: the same */
	ASSERT_TRUE(tw_after > w[0].loop_end);
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4, callers, 2));
	return TEST_OK;
}

/* gi_open on the stock bzImage alone: symbols, BTF, current task, sites; no other file. */
static int test_stock_gi_open(void)
{
	static const char *const flavours[] = { "6.1", "newer" };
	int ran = 0;

	for (size_t i = 0; i < ARRAY_SIZE(flavours); i++) {
		char vmlinuz[4096];
		struct gi_config cfg = { 0 };
		struct gi *gi = NULL;
		size_t n = 0;

		if (stock_file(flavours[i], "vmlinuz", vmlinuz, sizeof(vmlinuz)))
			continue;
		cfg.vmlinux = vmlinuz;
		ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
		ASSERT_EQ_INT(gi_symbol_source(gi), SYMTAB_SRC_KALLSYMS);
		(void)gi_exit_sites_of(gi, &n);
		ASSERT_TRUE(n >= 2);
		/* the exit-work loop, through pv_ops, on 6.1 (both gi_open and kernel-info find
		 * it); inlined into each exit path on 6.12: a loop per path */
		{
			struct gi_kernel_desc d;
			struct gi_exit_work w[GI_EW_COPIES];
			bool inlined = !strcmp(flavours[i], "newer");
			size_t n_w = 9;

			ASSERT_EQ_INT(gi_exit_work(gi, w, &n_w), -EAGAIN); /* no slide yet */
			ASSERT_EQ_INT((int)n_w, 0);
			ASSERT_EQ_INT(gi_exit_work_link(gi, w, &n_w), 0);
			ASSERT_EQ_INT((int)n_w, inlined ? 2 : 1);
			ASSERT_EQ_INT(gi_kernel_describe(vmlinuz, NULL, NULL, &d), 0);
			ASSERT_EQ_INT(d.ew_loops_err, 0);
			ASSERT_EQ_INT((int)d.n_ew_loops, (int)n_w);
			for (size_t k = 0; k < n_w; k++) {
				ASSERT_EQ_U64(d.ew_loops[k].clear, w[k].clear);
				/* 6.12's both exit paths' own copies; 6.1's the function's */
				ASSERT_TRUE(d.ew_loops[k].inlined == inlined && w[k].inlined == inlined);
			}
			if (inlined)
				ASSERT_TRUE(!strcmp(d.ew_loop_symbol[0], "syscall_exit_to_user_mode") &&
					    !strcmp(d.ew_loop_symbol[1], "irqentry_exit_to_user_mode"));
			else
				ASSERT_TRUE(!strcmp(d.ew_loop_symbol[0], "exit_to_user_mode_prepare"));
			if (inlined)
				ASSERT_EQ_INT(stock_612_tail(gi, w, vmlinuz), TEST_OK);
		}
		gi_close(gi);
		ran++;
	}
	return ran ? TEST_OK : TEST_SKIP;
}

/* The test kernel: exit sites guided by its symtab, agreeing with System.map. */
static int no_memory(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	(void)ctx;
	(void)gpa;
	(void)dst;
	(void)len;
	return -EFAULT;
}

static int test_image_kernel(void)
{
	const char *cache = getenv("HVPROF_CACHE"), *home = getenv("HOME");
	char vmlinux[4096], map[4096];
	struct gi_kimage *img = NULL;
	struct symtab *st = NULL, *mst = NULL;
	struct gi_exit_site sites[16];
	size_t n = 0;
	int kinds = 0;
	struct stat sb;

	snprintf(vmlinux, sizeof(vmlinux), "%s/images/default/vmlinux",
		 cache && *cache ? cache : home ? "" : "/root");
	if (!(cache && *cache))
		snprintf(vmlinux, sizeof(vmlinux), "%s/.cache/hvprof/images/default/vmlinux",
			 home ? home : "/root");
	snprintf(map, sizeof(map), "%.*s/System.map", (int)(strlen(vmlinux) - 8), vmlinux);
	if (stat(vmlinux, &sb) != 0 || stat(map, &sb) != 0) {
		printf("# skip: %s or System.map missing (images/build-image.sh)\n", vmlinux);
		return TEST_SKIP;
	}
	ASSERT_EQ_INT(gi_kimage_open(vmlinux, &img), 0);
	ASSERT_EQ_INT(symtab_open_elf(vmlinux, &st), 0);
	ASSERT_EQ_INT(symtab_open_map(map, &mst), 0);
	ASSERT_EQ_INT(gi_exit_sites(st, image_read, img, NULL, 0, 0, sites, 16, &n), 0);
	for (size_t i = 0; i < n && i < 16; i++) {
		const char *name;
		uint64_t off;

		printf("# site 0x%llx %s %s+0x%llx\n", (unsigned long long)sites[i].kva,
		       gi_exit_kind_name(sites[i].kind), sites[i].symbol,
		       (unsigned long long)sites[i].sym_off);
		ASSERT_EQ_INT(check_site_bytes(img, &sites[i]), 0);
		kinds |= 1 << sites[i].kind;
		/* System.map names the same place. */
		ASSERT_EQ_INT(symtab_lookup(mst, sites[i].kva, &name, &off), 0);
		ASSERT_EQ_U64(off, sites[i].sym_off);
	}
	ASSERT_TRUE(kinds & (1 << GI_EXIT_SYSRETQ));
	ASSERT_TRUE(kinds & (1 << GI_EXIT_IRETQ));
	symtab_free(st);
	symtab_free(mst);
	gi_kimage_free(img);
	{
		/* Its bzImage (a legacy boot sector: code and text, no NUL in the first 256
		 * bytes) is an image, not a map file: report names kernel frames from its
		 * kallsyms tables, as record does. */
		char bz[4096];
		enum symtab_source src = SYMTAB_SRC_NONE;
		const char *name;
		uint64_t addr, off;

		snprintf(bz, sizeof(bz), "%.*s/bzImage", (int)(strlen(vmlinux) - 8), vmlinux);
		if (stat(bz, &sb) == 0) {
			ASSERT_EQ_INT(symtab_open_kernel(bz, &st, &src), 0);
			ASSERT_EQ_INT(src, SYMTAB_SRC_KALLSYMS);
			ASSERT_EQ_INT(symtab_find(st, "entry_SYSCALL_64", &addr), 0);
			ASSERT_EQ_INT(symtab_lookup(st, addr + 1, &name, &off), 0);
			ASSERT_EQ_STR(name, "entry_SYSCALL_64");
			symtab_free(st);
			{
				/* no BTF inside (the test kernel's is a separate file): a
				 * session with symbols only, no thread identity */
				struct gi_config cfg = { .vmlinux = bz };
				struct gmem mem = { .read = no_memory };
				struct gi_paging pg = { 0 };
				struct hvp_process proc;
				struct hvp_thread thr;
				struct gi *gi = NULL;

				ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
				ASSERT_TRUE(!gi_has_btf(gi));
				ASSERT_EQ_INT(gi_symbol_source(gi), SYMTAB_SRC_KALLSYMS);
				ASSERT_EQ_INT(gi_task_identity(gi, &mem, &pg, 0xffff888000100000ull,
							       &thr, NULL),
					      -ENODATA);
				ASSERT_EQ_INT(gi_process_info(gi, &mem, &pg, 0xffff888000100000ull,
							      &proc),
					      -ENODATA);
				gi_close(gi);
			}
		}
	}
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "kallsyms: synthetic tables, both orders and modes", test_kallsyms_synthetic },
	{ "kallsyms: damaged tables refused", test_kallsyms_damaged },
	{ "map lines", test_map_parse },
	{ "map files (System.map, stub, kptr_restrict)", test_map_files },
	{ "stock Debian 6.1 bzImage", test_stock_61 },
	{ "stock Debian newer (6.12) bzImage", test_stock_newer },
	{ "gi_open on a stock bzImage alone", test_stock_gi_open },
	{ "test kernel exit sites", test_image_kernel },
};

TEST_MAIN(tests)
