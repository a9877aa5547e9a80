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

/*
 * gi_entry_user_regs: the user registers of an entry still being made, from its own frame. A
 * fake entry text: an exception stub S (iret frame + error code at SP + 8) whose call of a
 * save function R returns at S + 0x20; R itself ({CALL, SP, 8} at its first instruction, then
 * {CALL, SP, 24} while it pushes, then {REGS, SP, 8}: the whole pt_regs saved); SYSCALL's
 * entry Y, undescribed (ORC END) at its first instructions.
 */
#define FN_S (TEXT + 0x6000)
#define FN_R (TEXT + 0x7000)
#define FN_Y (TEXT + 0x8000)
#define ETEXT2 (TEXT + 0x9000)
#define TEXT_GPA 0x300000ull
#define UIP 0x401234ull
#define USP 0x7ffd0000ull
#define STALE 0x5a5a5a5aull

enum entry_case { AT_STUB, AFTER_SAVE, IN_SAVE_PUSHES, SAVED_FULL, FROM_KERNEL, SYSCALL_FIRST,
		  SYSCALL_LATER, STACK_UNMAPPED, NO_LAYOUT };

struct entry_want {
	const char *name;
	enum entry_case c;
	int err;
	uint64_t ip, sp, bx; /* when err == 0 */
};

static const struct entry_want entry_cases[] = {
	{ "the stub, nothing saved: iret frame + the vCPU's registers", AT_STUB, 0, UIP, USP, 0xb0 },
	{ "the stub after the save call: the pt_regs below the frame", AFTER_SAVE, 0, UIP, USP,
	  0xb1 },
	{ "the save function part-way through its pushes", IN_SAVE_PUSHES, -EAGAIN, 0, 0, 0 },
	{ "the save function after its pushes: the whole pt_regs", SAVED_FULL, 0, UIP, USP, 0xb1 },
	{ "an interrupt of kernel mode", FROM_KERNEL, -ENOENT, 0, 0, 0 },
	{ "SYSCALL's first instruction: RCX and RSP", SYSCALL_FIRST, 0, UIP + 2, USP, 0xb0 },
	{ "SYSCALL's entry further on (not described)", SYSCALL_LATER, -EAGAIN, 0, 0, 0 },
	{ "the entry stack is not mapped", STACK_UNMAPPED, -EFAULT, 0, 0, 0 },
	{ "no pt_regs layout", NO_LAYOUT, -ENODATA, 0, 0, 0 },
};

static void entry_layout(struct gi_layout *l)
{
	memset(l, 0xff, sizeof(*l));
	*l = (struct gi_layout){ .pt_regs_size = 168, .pt_regs_ip = 128, .pt_regs_sp = 152,
				 .pt_regs_bp = 32, .pt_regs_cs = 136, .pt_regs_orig_ax = 120,
				 .pt_regs_r15 = 0, .pt_regs_r14 = 8, .pt_regs_r13 = 16,
				 .pt_regs_r12 = 24, .pt_regs_bx = 40, .pt_regs_r11 = 48,
				 .pt_regs_r10 = 56, .pt_regs_r9 = 64, .pt_regs_r8 = 72,
				 .pt_regs_ax = 80, .pt_regs_cx = 88, .pt_regs_dx = 96,
				 .pt_regs_si = 104, .pt_regs_di = 112 };
}

/* One case: the stack at STACK + 0x100 upwards, as the entry has built it so far. */
static int entry_case(const struct entry_want *w)
{
	static const uint64_t ips[] = { FN_S, FN_S + 0x20, FN_R, FN_R + 0x4, FN_R + 0x40, FN_Y,
					ETEXT2 };
	const struct gi_orc_entry ent[] = {
		E(GI_ORC_REGS_PARTIAL, 5, 8), E(GI_ORC_REGS_PARTIAL, 5, 8), E(GI_ORC_CALL, 5, 8),
		E(GI_ORC_CALL, 5, 24), E(GI_ORC_REGS, 5, 8), E(GI_ORC_END, 0, 0),
		E(GI_ORC_UNDEFINED, 0, 0),
	};
	const uint64_t frame = STACK + 0x200; /* the iret frame: pt_regs at frame - 128 */
	uint8_t call[5] = { 0xe8 };
	struct gi_user_regs live = { .ip = 0, .sp = 0, .bp = 0xbb, .bx = 0xb0, .cx = UIP + 2,
				     .ax = 39 }, out;
	struct gi_layout l;
	struct gi_regs r;
	struct fakemem fm;
	struct gi *gi = NULL;
	int32_t rel = (int32_t)(FN_R - (FN_S + 0x20));
	int err;

	printf("# %s\n", w->name);
	entry_layout(&l);
	if (w->c == NO_LAYOUT)
		l.pt_regs_size = UINT32_MAX;
	ASSERT_EQ_INT(gi_new_raw(&l, TEXT, ETEXT2, 0, &gi), 0);
	ASSERT_EQ_INT(gi_orc_new(ips, ent, ARRAY_SIZE(ips), &gi->orc), 0);
	gi->entry_kva = FN_Y;
	gi->save_regs_kva[0] = FN_R;
	ASSERT_EQ_INT(fakemem_init(&fm, 0), 0);
	if (w->c != STACK_UNMAPPED)
		ASSERT_EQ_INT(fakemem_map(&fm, STACK, STACK_GPA, 4096, FPTE_NX), 0);
	ASSERT_EQ_INT(fakemem_map(&fm, FN_S, TEXT_GPA, 4096, 0), 0);
	memcpy(call + 1, &rel, sizeof(rel));
	fakemem_wbytes(&fm, TEXT_GPA + 0x20 - sizeof(call), call, sizeof(call)); /* call R */
	/* the iret frame the CPU pushed: ip, cs, flags, sp, ss */
	fakemem_w64(&fm, STACK_GPA + 0x200, UIP);
	fakemem_w64(&fm, STACK_GPA + 0x208, w->c == FROM_KERNEL ? 0x10 : 0x33);
	fakemem_w64(&fm, STACK_GPA + 0x210, 0x246);
	fakemem_w64(&fm, STACK_GPA + 0x218, USP);
	fakemem_w64(&fm, STACK_GPA + 0x220, 0x2b);
	/* below it, where the save function puts the other registers: stale until it has (the
	 * previous entry's), this entry's after */
	for (unsigned int off = 0; off < 128; off += 8)
		fakemem_w64(&fm, STACK_GPA + 0x200 - 128 + off, STALE);
	if (w->c == AFTER_SAVE || w->c == SAVED_FULL)
		fakemem_w64(&fm, STACK_GPA + 0x200 - 128 + 40, 0xb1); /* bx */
	memset(&r, 0, sizeof(r));
	r.pg = fm.pg;
	r.have_scratch = true;
	switch (w->c) {
	case AT_STUB: case FROM_KERNEL: case STACK_UNMAPPED: case NO_LAYOUT:
		r.rip = FN_S + 0x4; /* the error code is at SP */
		r.rsp = frame - 8;
		break;
	case AFTER_SAVE:
		r.rip = FN_S + 0x20;
		r.rsp = frame - 8;
		break;
	case IN_SAVE_PUSHES: /* R's return address at SP + 16, into S + 0x20 */
		r.rip = FN_R + 0x8;
		r.rsp = frame - 8 - 8 - 16;
		fakemem_w64(&fm, STACK_GPA + 0x200 - 8 - 8, FN_S + 0x20);
		break;
	case SAVED_FULL: /* pt_regs at SP + 8 (below it R's return address) */
		r.rip = FN_R + 0x40;
		r.rsp = frame - 128 - 8;
		break;
	case SYSCALL_FIRST:
		r.rip = FN_Y;
		r.rsp = USP;
		break;
	case SYSCALL_LATER:
		r.rip = FN_Y + 0x10;
		r.rsp = USP;
		break;
	}
	live.ip = r.rip;
	live.sp = r.rsp;
	memset(&out, 0x77, sizeof(out));
	err = gi_entry_user_regs(gi, &fm.mem, &r, &live, &out);
	ASSERT_EQ_INT(err, w->err);
	if (!err) {
		ASSERT_EQ_U64(out.ip, w->ip);
		ASSERT_EQ_U64(out.sp, w->sp);
		ASSERT_EQ_U64(out.cs, 0x33);
		ASSERT_EQ_U64(out.bx, w->bx);
		ASSERT_TRUE(out.entry_known);
		if (w->c == SYSCALL_FIRST)
			ASSERT_EQ_U64(out.orig_ax, 39);
		if (w->c == AT_STUB)
			ASSERT_EQ_U64(out.bp, 0xbb); /* the vCPU's: not saved yet */
		else
			ASSERT_TRUE(out.bp != 0x77777777777777ull);
		if (w->c == AFTER_SAVE || w->c == SAVED_FULL)
			ASSERT_EQ_U64(out.r12, STALE); /* as the fake stack holds it: read, not made */
	}
	fakemem_fini(&fm);
	gi_close(gi);
	return TEST_OK;
}

static int test_entry_regs(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(entry_cases); i++)
		if (entry_case(&entry_cases[i]) != TEST_OK)
			return TEST_FAIL;
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "Debian 6.1's ORC tables", test_debian_61 },
	{ "Debian 6.12's ORC tables", test_debian_newer },
	{ "ORC walks over a fake stack", test_walks },
	{ "the user registers of an entry being made", test_entry_regs },
};

TEST_MAIN(tests)
