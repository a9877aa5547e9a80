// SPDX-License-Identifier: MIT
// The prologue tables of the default image's vmlinux (frame pointers): the one gi_open makes
// from its CFI, and the one made from its code alone (capstone), checked against the compiler's
// own call-frame information of the same vmlinux (.debug_frame, read here with libdw): wherever the table says "nothing pushed" (or a ret, at an instruction boundary,
// found with capstone from the CFI row's start), the CFA must be RSP + 8, and where it says "RBP
// pushed", RSP + 16. Also how much of the code whose CFA is RSP-based (where a
// frame-pointer walk would skip the caller) the table covers. Skips, with the reason, without
// the image ($HVPROF_IMAGE_DIR, else the default image in the cache).
#include <capstone/capstone.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>

#include "gi_internal.h"
#include "imagefile.h"
#include "test.h"

#define DWARF_RBP 6
#define DWARF_RSP 7

struct tally {
	uint64_t claimed[4]; /* bytes the table claims, by enum gi_frame_state */
	uint64_t rets;	     /* ret claims at an instruction boundary (the others: inside one) */
	uint64_t wrong;	     /* ... where the CFI disagrees */
	uint64_t rsp_based;  /* bytes whose CFA is RSP + 8 or RSP + 16 */
	uint64_t covered;    /* ... of those, claimed by the table */
	uint64_t first_wrong;
};

/* The CFA rule of a frame: 0 and *@reg, *@off when it is a register plus an offset. */
static int cfa_rule(Dwarf_Frame *frame, unsigned int *reg, int64_t *off)
{
	Dwarf_Op *ops;
	size_t nops;

	if (dwarf_frame_cfa(frame, &ops, &nops) != 0 || nops != 1 || ops[0].atom != DW_OP_bregx)
		return -1;
	*reg = (unsigned int)ops[0].number;
	*off = (int64_t)ops[0].number2;
	return 0;
}

struct code {
	struct gi_kimage *img;
	csh cs;
	cs_insn *insn;
};

/* Does an instruction start at @a, decoding from @from (an instruction boundary)? */
static bool boundary(const struct code *c, uint64_t from, uint64_t a)
{
	uint8_t buf[8192];
	const uint8_t *p = buf;
	size_t avail = a - from + 1;
	uint64_t addr = from;

	if (a - from >= sizeof(buf) || gi_kimage_read_kva(c->img, from, buf, avail) != 0)
		return false;
	while (addr < a && cs_disasm_iter(c->cs, &p, &avail, &addr, c->insn))
		;
	return addr == a;
}

/* Every byte of [@lo, @hi) that has CFI: the table's state against the CFA rule. */
static void compare(const struct gi_prologues *p, Dwarf_CFI *cfi, const struct code *c, uint64_t lo,
		    uint64_t hi, struct tally *t)
{
	uint64_t a = lo;

	while (a < hi) {
		Dwarf_Frame *frame = NULL;
		Dwarf_Addr start, end;
		unsigned int reg;
		int64_t off;
		bool rsp8, rsp16;

		if (dwarf_cfi_addrframe(cfi, a, &frame) != 0) {
			a++; /* padding, or code without CFI (asm) */
			continue;
		}
		if (dwarf_frame_info(frame, &start, &end, NULL) < 0 || end <= a) {
			free(frame);
			a++;
			continue;
		}
		rsp8 = rsp16 = false;
		if (cfa_rule(frame, &reg, &off) == 0 && reg == DWARF_RSP) {
			rsp8 = off == 8;
			rsp16 = off == 16;
		}
		for (; a < end && a < hi; a++) {
			enum gi_frame_state st = gi_prologue_at(p, a);

			if (st == GI_FRAME_AT_RET) {
				if (!boundary(c, start, a))
					continue; /* a c3 byte inside an instruction: never a RIP */
				t->rets++;
			}
			t->claimed[st]++;
			if (((st == GI_FRAME_AT_ENTRY || st == GI_FRAME_AT_RET) && !rsp8) ||
			    (st == GI_FRAME_PUSHED && !rsp16)) {
				if (!t->wrong)
					t->first_wrong = a;
				t->wrong++;
			}
			if (rsp8 || rsp16) {
				t->rsp_based++;
				t->covered += st != GI_FRAME_BUILT;
			}
		}
		free(frame);
	}
}

/* In the functions @cfi has nothing for (asm), @u claims what @code claims (rets aside). */
static int check_union(const struct gi_prologues *u, const struct gi_prologues *code,
		       const struct symtab *st_syms, Dwarf_CFI *cfi, uint64_t lo, uint64_t hi)
{
	uint64_t checked = 0;

	for (uint64_t a = lo; a < hi; a++) {
		enum gi_frame_state st = gi_prologue_at(code, a);
		Dwarf_Frame *frame = NULL;
		const char *name;
		uint64_t off;

		if (st == GI_FRAME_BUILT || st == GI_FRAME_AT_RET ||
		    symtab_lookup(st_syms, a, &name, &off) != 0)
			continue;
		if (dwarf_cfi_addrframe(cfi, a - off, &frame) == 0) {
			free(frame);
			continue;
		}
		checked++;
		if (gi_prologue_at(u, a) != st) {
			printf("# 0x%llx: the code says %d, gi_open's table %d\n",
			       (unsigned long long)a, st, gi_prologue_at(u, a));
			return TEST_FAIL;
		}
	}
	printf("# without CFI: %llu bytes the code claims, all in gi_open's table\n",
	       (unsigned long long)checked);
	ASSERT_TRUE(checked > 1000);
	return TEST_OK;
}

static int kimage_read(void *ctx, uint64_t kva, void *dst, size_t len)
{
	return gi_kimage_read_kva(ctx, kva, dst, len);
}

/* Compare @p with @cfi over the text, print the tally with @what, and check it: nothing wrong,
 * rets (code tables) among the claims, at least @min_pct of the RSP-based code covered. */
static int check_table(const char *what, const struct gi_prologues *p, Dwarf_CFI *cfi,
		       const struct code *c, uint64_t stext, uint64_t etext, double min_pct)
{
	struct tally t = {0};
	size_t n_cfi, n_code;
	double pct;

	compare(p, cfi, c, stext, etext, &t);
	pct = t.rsp_based ? 100.0 * (double)t.covered / (double)t.rsp_based : 0.0;
	printf("# %s: %zu stretches; bytes claimed: nothing pushed %llu, RBP pushed %llu, rets "
	       "%llu; against the CFI: %llu wrong (first at 0x%llx); RSP-based CFA: %llu bytes, "
	       "%.1f%% covered\n",
	       what, gi_prologues_count(p), (unsigned long long)t.claimed[GI_FRAME_AT_ENTRY],
	       (unsigned long long)t.claimed[GI_FRAME_PUSHED], (unsigned long long)t.rets,
	       (unsigned long long)t.wrong, (unsigned long long)t.first_wrong,
	       (unsigned long long)t.rsp_based, pct);
	ASSERT_TRUE(t.rsp_based > 0);
	ASSERT_EQ_U64(t.wrong, 0);
	gi_prologues_functions(p, &n_cfi, &n_code);
	/* a table from the CFI claims no ret there (the rows hold them); one from the code does */
	ASSERT_TRUE(n_cfi ? t.rets == 0 : t.rets > 1000);
	ASSERT_TRUE(pct >= min_pct);
	return TEST_OK;
}

/*
 * gi_open's table (from the CFI: all of the RSP-based code), and the table made from the code
 * alone, as for an image without CFI (a bzImage's stripped vmlinux), both against the CFI.
 */
static int test_against_cfi(void)
{
	char vmlinux[4096], btf[4096];
	struct gi_config cfg = {0};
	struct gi_prologues *code_table = NULL;
	struct code c = {0};
	struct gi *gi = NULL;
	uint64_t stext, etext, brk, fn;
	size_t n_cfi, n_code;
	Dwarf_CFI *cfi;
	Dwarf *dw;
	Elf *elf;
	int fd;

	if (test_image_config(vmlinux, btf, &cfg))
		return TEST_SKIP;
	ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
	if (gi->orc) {
		printf("# skip: %s has ORC tables: no prologue table is made\n", vmlinux);
		gi_close(gi);
		return TEST_SKIP;
	}
	ASSERT_TRUE(gi->prologues != NULL);
	gi_kernel_text(gi, &stext, &etext);
	elf_version(EV_CURRENT);
	fd = open(vmlinux, O_RDONLY);
	ASSERT_TRUE(fd >= 0);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	ASSERT_TRUE(elf != NULL);
	dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	cfi = dw ? dwarf_getcfi(dw) : NULL;
	if (!cfi) {
		printf("# skip: %s has no .debug_frame (%s)\n", vmlinux, dwarf_errmsg(-1));
		if (dw)
			dwarf_end(dw);
		elf_end(elf);
		close(fd);
		gi_close(gi);
		return TEST_SKIP;
	}
	gi_prologues_functions(gi->prologues, &n_cfi, &n_code);
	printf("# gi_open's table: %zu functions from CFI, %zu from code (asm)\n", n_cfi, n_code);
	ASSERT_TRUE(n_cfi > 10000 && n_code > 10);
	ASSERT_EQ_INT(gi_kimage_open(vmlinux, &c.img), 0);
	ASSERT_TRUE(cs_open(CS_ARCH_X86, CS_MODE_64, &c.cs) == CS_ERR_OK);
	c.insn = cs_malloc(c.cs);
	ASSERT_TRUE(c.insn != NULL);
	ASSERT_EQ_INT(gi_prologues_build(gi_symtab(gi), kimage_read, c.img, stext, etext,
					 &code_table),
		      0);
	gi_prologues_functions(code_table, &n_cfi, &n_code);
	ASSERT_TRUE(n_cfi == 0 && n_code > 10000);
	/* the function of the execve sample that lost its caller (load_elf_binary) */
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "arch_randomize_brk", &brk), 0);
	for (int i = 0; i < 2; i++) {
		const struct gi_prologues *p = i ? code_table : gi->prologues;

		ASSERT_EQ_INT(gi_prologue_at(p, brk), GI_FRAME_AT_ENTRY);
		ASSERT_EQ_INT(gi_prologue_at(p, brk + 8), GI_FRAME_PUSHED);
		ASSERT_EQ_INT(gi_prologue_at(p, brk + 0x10), GI_FRAME_BUILT);
		ASSERT_TRUE(gi_prologue_at(p, brk + 0x16) != GI_FRAME_BUILT); /* its ret */
	}
	/* the CFI's own rows: everything; the code's: most */
	ASSERT_EQ_INT(check_table("from CFI", gi->prologues, cfi, &c, stext, etext, 99.9), TEST_OK);
	ASSERT_EQ_INT(check_table("from code", code_table, cfi, &c, stext, etext, 80.0), TEST_OK);
	/* where the image has no CFI (asm), gi_open's table is the code's */
	ASSERT_EQ_INT(check_union(gi->prologues, code_table, gi_symtab(gi), cfi, stext, etext),
		      TEST_OK);
	/* the hottest asm leaves among them: a sample in clear_page_erms keeps its caller */
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "clear_page_erms", &fn), 0);
	ASSERT_EQ_INT(gi_prologue_at(gi->prologues, fn), GI_FRAME_AT_ENTRY);
	ASSERT_EQ_INT(gi_prologue_at(gi->prologues, fn + 5), GI_FRAME_AT_ENTRY);
	/* the int3 entry gi_open found: asm_exc_int3, up to the next symbol */
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "asm_exc_int3", &fn), 0);
	ASSERT_EQ_U64(gi->int3_entry[0], fn);
	ASSERT_TRUE(gi->int3_entry[1] > fn && gi->int3_entry[1] - fn <= 0x100);
	gi_prologues_free(code_table);
	cs_free(c.insn, 1);
	cs_close(&c.cs);
	gi_kimage_free(c.img);
	dwarf_end(dw);
	elf_end(elf);
	close(fd);
	gi_close(gi);
	return TEST_OK;
}

static const struct test_case tests[] = {
    {"prologue tables of the default image (from CFI, from code) against its CFI",
     test_against_cfi},
};

TEST_MAIN(tests)
