// SPDX-License-Identifier: MIT
// ORC unwinding: the real tables of Debian's 6.1 and 6.12 kernels (two entry layouts) decoded
// and checked against a fact every C function has (at its first instruction the caller's SP is
// SP + 8: {CALL, SP, 8}), and table-driven walks over a fake guest stack, hostile ones included.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <hvprof/guestinfo.h>

#include "fakemem.h"
#include "gi_internal.h"
#include "test.h"

/* C functions present in both kernels. */
static const char *const functions[] = {
	"start_kernel", "schedule",	  "do_exit",	     "copy_process", "handle_mm_fault",
	"ksys_read",	"vfs_read",	  "vfs_write",	     "kfree",	     "do_sys_openat2",
	"filp_close",	"wake_up_process", "kernel_clone",   "do_group_exit", "__x64_sys_getppid",
};

static int entry_stats(const char *which, enum gi_orc_layout right, enum gi_orc_layout wrong)
{
	const char *cache = getenv("HVPROF_CACHE"), *home = getenv("HOME");
	struct gi_orc *orc = NULL, *bad = NULL;
	struct gi_kimage *img = NULL;
	struct symtab *st = NULL;
	char path[4096];
	struct stat sb;
	size_t ok = 0, ok_wrong = 0, found = 0;

	if (cache && *cache)
		snprintf(path, sizeof(path), "%s/stock-kernel/%s/vmlinuz", cache, which);
	else
		snprintf(path, sizeof(path), "%s/.cache/hvprof/stock-kernel/%s/vmlinuz",
			 home ? home : "/root", which);
	if (stat(path, &sb) != 0) {
		printf("# skip: %s missing (tests/fixtures/get-stock-kernel.sh)\n", path);
		return TEST_SKIP;
	}
	ASSERT_EQ_INT(gi_kimage_open(path, &img), 0);
	ASSERT_EQ_INT(symtab_open_kernel(path, &st, NULL), 0);
	ASSERT_EQ_INT(gi_orc_load(img, right, &orc), 0);
	ASSERT_EQ_INT(gi_orc_load(img, wrong, &bad), 0);
	printf("# %s: %zu ORC entries, %s\n", which, gi_orc_count(orc), gi_orc_layout_name(right));
	ASSERT_TRUE(gi_orc_count(orc) > 100000);
	for (size_t i = 0; i < ARRAY_SIZE(functions); i++) {
		struct gi_orc_entry e;
		uint64_t kva;

		if (symtab_find(st, functions[i], &kva) != 0)
			continue;
		found++;
		ASSERT_EQ_INT(gi_orc_find(orc, kva, &e), 0);
		ok += e.type == GI_ORC_CALL && e.sp_reg == 5 /* ORC_REG_SP */ && e.sp_offset == 8;
		ASSERT_EQ_INT(gi_orc_find(bad, kva, &e), 0);
		ok_wrong += e.type == GI_ORC_CALL && e.sp_reg == 5 && e.sp_offset == 8;
	}
	printf("# %s: %zu of %zu function entries are {CALL, SP, 8}; %zu with the other layout\n",
	       which, ok, found, ok_wrong);
	ASSERT_TRUE(found >= 12);
	ASSERT_EQ_U64(ok, found);
	ASSERT_EQ_U64(ok_wrong, 0); /* the layout matters: decoded wrongly, no entry is a call */
	gi_orc_free(orc);
	gi_orc_free(bad);
	symtab_free(st);
	gi_kimage_free(img);
	return TEST_OK;
}

static int test_debian_61(void)
{
	ASSERT_EQ_INT(gi_orc_layout_for(6, 1), GI_ORC_LAYOUT_6_1);
	return entry_stats("6.1", GI_ORC_LAYOUT_6_1, GI_ORC_LAYOUT_6_4);
}

static int test_debian_newer(void)
{
	ASSERT_EQ_INT(gi_orc_layout_for(6, 12), GI_ORC_LAYOUT_6_4);
	ASSERT_EQ_INT(gi_orc_layout_for(6, 3), GI_ORC_LAYOUT_6_3);
	return entry_stats("newer", GI_ORC_LAYOUT_6_4, GI_ORC_LAYOUT_6_1);
}

/*
 * A fake kernel: functions C (innermost) <- B <- A, called from entry code E whose frame is a
 * pt_regs (an interrupt that hit D, the outermost, which ends the stack).
 */
#define TEXT 0xffffffff81000000ull
#define FN_A (TEXT + 0x1000)
#define FN_B (TEXT + 0x2000)
#define FN_C (TEXT + 0x3000)
#define FN_D (TEXT + 0x4000)
#define FN_E (TEXT + 0x5000)
#define TEXT_END (TEXT + 0x6000)
#define STACK 0xffffc90000004000ull /* a kernel stack page */
#define STACK_GPA 0x200000ull

static const uint64_t orc_ips[] = { FN_A, FN_B, FN_C, FN_D, FN_E, TEXT_END };
#define E(t, reg, off) { .type = (t), .sp_reg = (reg), .sp_offset = (off), .bp_reg = 0 }

enum damage { NONE, RET_OUTSIDE_TEXT, STACK_DOWN, REGS_USER, UNMAPPED, LOOP_REGS };

struct walk_case {
	const char *name;
	enum damage damage;
	enum hvp_walk_stop want;
	unsigned int frames;
};

static const struct walk_case walk_cases[] = {
	{ "C <- B <- A <- interrupt in D (end)", NONE, HVP_WALK_END, 5 },
	{ "a return address outside kernel text", RET_OUTSIDE_TEXT, HVP_WALK_BAD_FP, 1 },
	{ "a call frame below the previous one", STACK_DOWN, HVP_WALK_BAD_FP, 1 },
	{ "the interrupt came from user mode", REGS_USER, HVP_WALK_END, 4 },
	{ "the stack is not mapped", UNMAPPED, HVP_WALK_FAULT, 1 },
	{ "pt_regs that point back at themselves", LOOP_REGS, HVP_WALK_BAD_FP, 8 },
};

static int test_walks(void)
{
	for (size_t c = 0; c < ARRAY_SIZE(walk_cases); c++) {
		const struct walk_case *tc = &walk_cases[c];
		struct gi_orc_entry ent[6] = {
			E(GI_ORC_CALL, 5, 8),  /* A: plain call frame */
			E(GI_ORC_CALL, 5, 24), /* B: 16 bytes of locals */
			E(GI_ORC_CALL, 5, 16), /* C: one push */
			E(GI_ORC_END, 0, 0),   /* D: the outermost */
			E(GI_ORC_REGS, 5, 0),  /* E: pt_regs at SP */
			E(GI_ORC_UNDEFINED, 0, 0),
		};
		struct gi_layout l;
		struct gi_regs r;
		struct fakemem fm;
		struct gi *gi = NULL;
		uint64_t ips[16], regs_gva;
		unsigned int n = 0;

		printf("# %s\n", tc->name);
		memset(&l, 0xff, sizeof(l));
		if (tc->damage == STACK_DOWN)
			ent[2].sp_offset = -8;
		if (tc->damage == LOOP_REGS)
			ent[3] = (struct gi_orc_entry)E(GI_ORC_REGS, 5, 0); /* D "is" entry code too */
		ASSERT_EQ_INT(gi_new_raw(&l, TEXT, TEXT_END, 0, &gi), 0);
		ASSERT_EQ_INT(gi_orc_new(orc_ips, ent, 6, &gi->orc), 0);
		ASSERT_EQ_INT(fakemem_init(&fm, 0), 0);
		if (tc->damage != UNMAPPED)
			ASSERT_EQ_INT(fakemem_map(&fm, STACK, STACK_GPA, 4096, FPTE_NX), 0);
		/* C's frame: [sp] pushed, [sp+8] return into B; B's: 16 bytes, return into A; A's
		 * return into E; E's frame: pt_regs of the interrupted D. */
		fakemem_w64(&fm, STACK_GPA + 0x108, tc->damage == RET_OUTSIDE_TEXT ? 0x401000
									   : FN_B + 0x20);
		fakemem_w64(&fm, STACK_GPA + 0x120, FN_A + 0x10);
		fakemem_w64(&fm, STACK_GPA + 0x128, FN_E + 0x30);
		regs_gva = STACK + 0x130;
		fakemem_w64(&fm, STACK_GPA + 0x130 + 128, FN_D + 0x5);		/* ip */
		fakemem_w64(&fm, STACK_GPA + 0x130 + 136, tc->damage == REGS_USER ? 0x33 : 0x10);
		fakemem_w64(&fm, STACK_GPA + 0x130 + 152,			/* sp */
			    tc->damage == LOOP_REGS ? regs_gva : STACK + 0x800);
		memset(&r, 0, sizeof(r));
		r.rip = FN_C + 0x40;
		r.rsp = STACK + 0x100;
		r.pg = fm.pg;
		ASSERT_EQ_INT(gi_unwind_kernel(gi, &fm.mem, &r, 0, ips, 16, &n), tc->want);
		ASSERT_EQ_INT(n, tc->frames);
		ASSERT_EQ_U64(ips[0], FN_C + 0x40);
		if (tc->damage == NONE) {
			ASSERT_EQ_U64(ips[1], FN_B + 0x20);
			ASSERT_EQ_U64(ips[2], FN_A + 0x10);
			ASSERT_EQ_U64(ips[3], FN_E + 0x30);
			ASSERT_EQ_U64(ips[4], FN_D + 0x5);
		}
		fakemem_fini(&fm);
		gi_close(gi);
	}
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "Debian 6.1's ORC tables", test_debian_61 },
	{ "Debian 6.12's ORC tables", test_debian_newer },
	{ "ORC walks over a fake stack", test_walks },
};

TEST_MAIN(tests)
