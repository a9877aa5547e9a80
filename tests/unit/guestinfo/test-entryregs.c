// SPDX-License-Identifier: MIT
// gi_entry_user_regs (guestinfo/entryregs.c): the user registers of a kernel entry still being
// made, over a fake guest: an exception entry at each stage (nothing saved, the save function
// part-way and done, after it returned, a function it called), with ORC and without (by the
// entry stack's depth), an
// interrupt of kernel mode, SYSCALL's entry (user RSP, CR3 in RSP, pushes, pt_regs whole) and
// the refusals. The registers the stale pt_regs would give are never the answer.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>

#include "fakemem.h"
#include "gi_internal.h"
#include "test.h"

/* Fake entry text: an exception stub S (iret frame + error code at SP + 8 in ORC) whose call of
 * the save function R returns at S + 0x20; R ({CALL, SP, 8} at its first instruction, {CALL, SP,
 * 24} while it pushes, {REGS, SP, 8} once all is saved); a function C that R calls then (sync_regs,
 * {CALL, SP, 8}); SYSCALL's entry Y up to its exit X. */
#define TEXT 0xffffffff81000000ull
#define FN_C (TEXT + 0x1000)
#define FN_S (TEXT + 0x6000)
#define FN_R (TEXT + 0x7000)
#define FN_Y (TEXT + 0x8000)
#define FN_X (TEXT + 0x8800)
#define ETEXT (TEXT + 0x9000)
#define TEXT_GPA 0x300000ull
#define STACK 0xffffc90000004000ull /* the entry stack's page; its top: SP0 */
#define STACK_GPA 0x200000ull
#define SP0 (STACK + 0x228)
#define FRAME (SP0 - 40)            /* the iret frame the CPU pushed */
#define PCPU 0xffff888000340000ull  /* the per-CPU area: cpu_tss_rw at + TSS_OFF */
#define PCPU_GPA 0x340000ull
#define TSS_OFF 0x100ull
#define TASK 0xffff888000350000ull
#define TASK_GPA 0x350000ull
#define TSTACK 0xffffc90000010000ull /* task->stack (16 KiB aligned); its last page mapped */
#define TSTACK_GPA 0x360000ull
#define TTOP (TSTACK + 0x4000)
#define UIP 0x401234ull
#define USP 0x7ffd0000ull
#define USP2 0x7ffd1000ull
#define STALE 0x5a5a5a5aull
#define E(t, reg, off) { .type = (t), .sp_reg = (reg), .sp_offset = (off), .bp_reg = 0 }

enum stage { AT_STUB, AFTER_SAVE, IN_SAVE_PUSHES, SAVED_FULL, IN_SAVE_CALLEE, DEEPER, IN_COMPAT,
	     IN_INT80, IN_INT80_SAVED, IN_SYSENTER_FRAME, FROM_KERNEL, SYSCALL_FIRST,
	     SYSCALL_CR3, SYSCALL_PUSHING, SYSCALL_SS_ONLY, SYSCALL_WHOLE, SYSCALL_NO_TASK,
	     STACK_UNMAPPED,
	     NO_LAYOUT };

struct entry_want {
	const char *name;
	enum stage stage;
	bool orc;   /* the kernel has ORC tables */
	int err;
	uint64_t ip, sp, bx; /* when err == 0 */
};

static const struct entry_want cases[] = {
	{ "ORC, the stub, nothing saved: iret frame + vCPU", AT_STUB, true, 0, UIP, USP, 0xb0 },
	{ "no ORC, the same by the entry stack's depth", AT_STUB, false, 0, UIP, USP, 0xb0 },
	{ "ORC, after the save call: the pt_regs below the frame", AFTER_SAVE, true, 0, UIP, USP,
	  0xb1 },
	{ "no ORC, the same", AFTER_SAVE, false, 0, UIP, USP, 0xb1 },
	{ "ORC, the save function part-way: by the entry stack", IN_SAVE_PUSHES, true, 0, UIP, USP,
	  0xb0 },
	{ "no ORC, the same", IN_SAVE_PUSHES, false, 0, UIP, USP, 0xb0 },
	{ "ORC, the save function after its pushes: pt_regs", SAVED_FULL, true, 0, UIP, USP, 0xb1 },
	{ "no ORC, the same by depth", SAVED_FULL, false, 0, UIP, USP, 0xb1 },
	{ "ORC, in sync_regs called by the save function: its pt_regs", IN_SAVE_CALLEE, true, 0,
	  UIP, USP, 0xb1 },
	{ "no ORC, the same by depth (below the saved words)", IN_SAVE_CALLEE, false, 0, UIP, USP,
	  0xb1 },
	{ "no ORC, a word deeper still (a fault on IRET, fixup_bad_iret): not known", DEEPER, false,
	  -EAGAIN, 0, 0, 0 },
	{ "no ORC, a 32-bit system call's entry: orig_ax kept", IN_COMPAT, false, 0, UIP, USP,
	  0xb1 },
	{ "no ORC, int $0x80's entry before its switch of stacks: orig_ax from RAX", IN_INT80,
	  false, 0, UIP, USP, 0xb0 },
	{ "no ORC, int $0x80's entry with pt_regs saved: orig_ax as saved", IN_INT80_SAVED, false,
	  0, UIP, USP, 0xb1 },
	{ "no ORC, another 32-bit entry's range at the same depth: RAX is int $0x80's rule only",
	  IN_SYSENTER_FRAME, false, 0, UIP, USP, 0xb0 },
	{ "ORC, an interrupt of kernel mode", FROM_KERNEL, true, -ENOENT, 0, 0, 0 },
	{ "no ORC, an interrupt of kernel mode", FROM_KERNEL, false, -ENOENT, 0, 0, 0 },
	{ "SYSCALL's first instruction: RCX and RSP", SYSCALL_FIRST, true, 0, UIP + 2, USP, 0xb0 },
	{ "SYSCALL with CR3 in RSP (PTI)", SYSCALL_CR3, false, -EAGAIN, 0, 0, 0 },
	{ "SYSCALL pushing pt_regs: RCX, pt_regs->sp", SYSCALL_PUSHING, false, 0, UIP + 2, USP2,
	  0xb0 },
	{ "SYSCALL with only ss pushed (RSP in a per-CPU scratch slot)", SYSCALL_SS_ONLY, false,
	  -EAGAIN, 0, 0, 0 },
	{ "SYSCALL with pt_regs whole", SYSCALL_WHOLE, false, 0, UIP + 3, USP2, 0xb1 },
	{ "SYSCALL pushing, the task unknown", SYSCALL_NO_TASK, false, -ENODATA, 0, 0, 0 },
	{ "the entry stack is not mapped", STACK_UNMAPPED, true, -EFAULT, 0, 0, 0 },
	{ "no pt_regs layout", NO_LAYOUT, true, -ENODATA, 0, 0, 0 },
};

static void layout(struct gi_layout *l)
{
	memset(l, 0xff, sizeof(*l));
	l->pt_regs_size = 168, l->pt_regs_ip = 128, l->pt_regs_sp = 152, l->pt_regs_bp = 32;
	l->pt_regs_cs = 136, l->pt_regs_orig_ax = 120, l->pt_regs_r15 = 0, l->pt_regs_r14 = 8;
	l->pt_regs_r13 = 16, l->pt_regs_r12 = 24, l->pt_regs_bx = 40, l->pt_regs_r11 = 48;
	l->pt_regs_r10 = 56, l->pt_regs_r9 = 64, l->pt_regs_r8 = 72, l->pt_regs_ax = 80;
	l->pt_regs_cx = 88, l->pt_regs_dx = 96, l->pt_regs_si = 104, l->pt_regs_di = 112;
	l->task_stack = 32;
}

/* A whole pt_regs at @gpa: this entry's (bx 0xb1, ip/sp given) above stale words. */
static void pt_regs_at(struct fakemem *fm, uint64_t gpa, uint64_t ip, uint64_t sp)
{
	for (unsigned int off = 0; off < 128; off += 8)
		fakemem_w64(fm, gpa + off, STALE);
	fakemem_w64(fm, gpa + 40, 0xb1);
	fakemem_w64(fm, gpa + 128, ip);
	fakemem_w64(fm, gpa + 136, 0x33);
	fakemem_w64(fm, gpa + 152, sp);
}

/* The guest as the entry has built it at @w's stage, and the vCPU's registers there. */
static void build(const struct entry_want *w, struct fakemem *fm, struct gi_regs *r)
{
	uint8_t call[5] = { 0xe8 };
	int32_t rel = (int32_t)(FN_R - (FN_S + 0x20));

	memcpy(call + 1, &rel, sizeof(rel));
	fakemem_wbytes(fm, TEXT_GPA + 0x20 - sizeof(call), call, sizeof(call)); /* call R */
	fakemem_w64(fm, PCPU_GPA + TSS_OFF + 4, w->stage == FROM_KERNEL ? 0xfffffe0000010000ull
								     : SP0);
	fakemem_w64(fm, TASK_GPA + 32, TSTACK);
	/* the iret frame: ip, cs, flags, sp, ss; below it, stale words until the entry saves */
	fakemem_w64(fm, STACK_GPA + 0x200, UIP);
	fakemem_w64(fm, STACK_GPA + 0x208, w->stage == FROM_KERNEL ? 0x10 : 0x33);
	fakemem_w64(fm, STACK_GPA + 0x210, 0x246);
	fakemem_w64(fm, STACK_GPA + 0x218, USP);
	fakemem_w64(fm, STACK_GPA + 0x220, 0x2b);
	for (unsigned int off = 0; off < 128; off += 8)
		fakemem_w64(fm, STACK_GPA + 0x200 - 128 + off, STALE);
	if (w->stage == AFTER_SAVE || w->stage == SAVED_FULL || w->stage == IN_SAVE_CALLEE ||
	    w->stage == IN_COMPAT || w->stage == IN_INT80_SAVED)
		fakemem_w64(fm, STACK_GPA + 0x200 - 128 + 40, 0xb1); /* bx, saved */
	/* the task stack's pt_regs: the previous entry's, but for what this one pushed */
	pt_regs_at(fm, TSTACK_GPA + 0x1000 - 168, UIP + 0x99, USP + 0x99);
	memset(r, 0, sizeof(*r));
	r->pg = fm->pg;
	r->have_scratch = true;
	r->gs_base = PCPU;
	r->rsp = FRAME - 8; /* the error code pushed, nothing more */
	switch (w->stage) {
	case AT_STUB: case FROM_KERNEL: case STACK_UNMAPPED: case NO_LAYOUT:
		r->rip = FN_S + 0x4;
		break;
	case AFTER_SAVE:
		r->rip = FN_S + 0x20;
		break;
	case IN_SAVE_PUSHES: /* R's return address at SP + 16, into S + 0x20 */
		r->rip = FN_R + 0x8;
		r->rsp = FRAME - 8 - 8 - 16;
		fakemem_w64(fm, STACK_GPA + 0x200 - 8 - 8, FN_S + 0x20);
		break;
	case IN_COMPAT: /* as SAVED_FULL, in a 32-bit system call's entry (gi->compat_entry) */
	case IN_INT80_SAVED:
	case SAVED_FULL: /* pt_regs at SP + 8 (below it R's return address) */
		r->rip = FN_R + 0x40;
		r->rsp = FRAME - 128 - 8;
		break;
	case IN_SAVE_CALLEE: /* C's return address at SP, into R after its pushes; R's above it */
		r->rip = FN_C + 0x1e;
		r->rsp = FRAME - 128 - 16;
		fakemem_w64(fm, STACK_GPA + 0x200 - 128 - 16, FN_R + 0x44);
		fakemem_w64(fm, STACK_GPA + 0x200 - 128 - 8, FN_S + 0x20);
		break;
	case IN_INT80: /* the iret frame (no error code), orig_ax and rdi pushed */
	case IN_SYSENTER_FRAME:
		r->rip = FN_S + 0x4;
		r->rsp = FRAME - 16;
		break;
	case DEEPER: /* as IN_SAVE_CALLEE, a word further down */
		r->rip = FN_C + 0x1e;
		r->rsp = FRAME - 128 - 24;
		break;
	case SYSCALL_FIRST:
		r->rip = FN_Y;
		r->rsp = USP;
		break;
	case SYSCALL_CR3:
		r->rip = FN_Y + 0x10;
		r->rsp = fm->pg.cr3 | 0x800;
		break;
	case SYSCALL_PUSHING: case SYSCALL_NO_TASK: /* ss, sp, flags, cs pushed */
		r->rip = FN_Y + 0x30;
		r->rsp = TTOP - 32;
		fakemem_w64(fm, TSTACK_GPA + 0x1000 - 16, USP2);
		break;
	case SYSCALL_SS_ONLY:
		r->rip = FN_Y + 0x2a;
		r->rsp = TTOP - 8;
		break;
	case SYSCALL_WHOLE:
		r->rip = FN_Y + 0x60;
		r->rsp = TTOP - 168;
		pt_regs_at(fm, TSTACK_GPA + 0x1000 - 168, UIP + 3, USP2);
		break;
	}
}

static int one(const struct entry_want *w)
{
	static const uint64_t ips[] = { FN_C, FN_S, FN_S + 0x20, FN_R, FN_R + 0x4, FN_R + 0x40,
					FN_Y, ETEXT };
	const struct gi_orc_entry ent[] = {
		E(GI_ORC_CALL, 5, 8), E(GI_ORC_REGS_PARTIAL, 5, 8), E(GI_ORC_REGS_PARTIAL, 5, 8),
		E(GI_ORC_CALL, 5, 8), E(GI_ORC_CALL, 5, 24), E(GI_ORC_REGS, 5, 8),
		E(GI_ORC_END, 0, 0),
		E(GI_ORC_UNDEFINED, 0, 0),
	};
	struct gi_user_regs live = { .bp = 0xbb, .bx = 0xb0, .cx = UIP + 2, .ax = 39 }, out;
	struct gi_layout l;
	struct gi_regs r;
	struct fakemem fm;
	struct gi *gi = NULL;
	int err;

	printf("# %s\n", w->name);
	layout(&l);
	if (w->stage == NO_LAYOUT)
		l.pt_regs_size = UINT32_MAX;
	ASSERT_EQ_INT(gi_new_raw(&l, TEXT, ETEXT, 0, &gi), 0);
	if (w->orc)
		ASSERT_EQ_INT(gi_orc_new(ips, ent, ARRAY_SIZE(ips), &gi->orc), 0);
	gi->entry_kva = FN_Y;
	gi->exit1_start = FN_X;
	gi->save_regs_kva[0] = FN_R;
	gi->tss_off = TSS_OFF;
	if (w->stage == IN_COMPAT || w->stage == IN_INT80_SAVED) {
		gi->compat_entry[w->stage == IN_COMPAT ? 1 : 0][0] = FN_R;
		gi->compat_entry[w->stage == IN_COMPAT ? 1 : 0][1] = FN_R + 0x100;
	} else if (w->stage == IN_INT80 || w->stage == IN_SYSENTER_FRAME) {
		/* entry_INT80_compat, or entry_SYSENTER_compat */
		gi->compat_entry[w->stage == IN_INT80 ? 0 : 1][0] = FN_S;
		gi->compat_entry[w->stage == IN_INT80 ? 0 : 1][1] = FN_S + 0x10;
		live.ax = 0xdead00000000ull | 11; /* the number in EAX; the upper half the user's */
	} else if (w->stage == SAVED_FULL) { /* one starting right after the sampled RIP */
		gi->compat_entry[1][0] = FN_R + 0x41;
		gi->compat_entry[1][1] = FN_R + 0x100;
	}
	ASSERT_EQ_INT(fakemem_init(&fm, 0), 0);
	if (w->stage != STACK_UNMAPPED)
		ASSERT_EQ_INT(fakemem_map(&fm, STACK, STACK_GPA, 4096, FPTE_NX), 0);
	ASSERT_EQ_INT(fakemem_map(&fm, FN_S, TEXT_GPA, 4096, 0), 0);
	ASSERT_EQ_INT(fakemem_map(&fm, PCPU, PCPU_GPA, 4096, FPTE_NX), 0);
	ASSERT_EQ_INT(fakemem_map(&fm, TASK, TASK_GPA, 4096, FPTE_NX), 0);
	ASSERT_EQ_INT(fakemem_map(&fm, TTOP - 4096, TSTACK_GPA, 4096, FPTE_NX), 0);
	build(w, &fm, &r);
	live.ip = r.rip;
	live.sp = r.rsp;
	memset(&out, 0x77, sizeof(out));
	err = gi_entry_user_regs(gi, &fm.mem, &r, w->stage == SYSCALL_NO_TASK ? 0 : TASK, &live,
				 &out);
	ASSERT_EQ_INT(err, w->err);
	if (!err) {
		ASSERT_EQ_U64(out.ip, w->ip);
		ASSERT_EQ_U64(out.sp, w->sp);
		ASSERT_EQ_U64(out.cs, 0x33);
		ASSERT_EQ_U64(out.bx, w->bx);
		ASSERT_TRUE(out.entry_known);
		ASSERT_TRUE(out.ip != UIP + 0x99 && out.sp != USP + 0x99); /* never the stale ones */
		if (w->bx == 0xb0) /* the vCPU's registers: not saved yet */
			ASSERT_EQ_U64(out.bp, 0xbb);
		else /* read from the saved pt_regs, as they are there */
			ASSERT_EQ_U64(out.r12, STALE);
		if (w->stage == SYSCALL_FIRST || w->stage == SYSCALL_PUSHING)
			ASSERT_EQ_U64(out.orig_ax, 39);
		else if (w->stage == IN_COMPAT || w->stage == IN_INT80_SAVED)
			ASSERT_EQ_U64(out.orig_ax, STALE); /* its system call's number, as read */
		else if (w->stage == IN_INT80)
			ASSERT_EQ_U64(out.orig_ax, 11); /* as the entry will push it: 32 bits */
		else if (w->stage < SYSCALL_FIRST) /* the slot's vector or error code: no number */
			ASSERT_EQ_U64(out.orig_ax, UINT64_MAX);
	}
	fakemem_fini(&fm);
	gi_close(gi);
	return TEST_OK;
}

static int test_entry_regs(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		if (one(&cases[i]) != TEST_OK)
			return TEST_FAIL;
	return TEST_OK;
}

/*
 * The ranges by symbol (gi_find_exit_paths, from a System.map): a 32-bit entry runs past its own
 * inner labels (entry_SYSCALL_compat_after_hwframe) to the next other symbol; error_entry ends at
 * the next function. A sample's first return address inside error_entry is a call it made
 * (gi_in_entry_save_call: not at its first byte, not at its end).
 */
static int test_ranges_by_symbol(void)
{
	static const char map[] = "ffffffff81000000 T _stext\n"
				  "ffffffff81001000 T entry_SYSCALL_compat\n"
				  "ffffffff81001040 T entry_SYSCALL_compat_safe_stack\n"
				  "ffffffff81001050 T entry_SYSCALL_compat_after_hwframe\n"
				  "ffffffff810010a0 T entry_SYSRETL_compat_unsafe_stack\n"
				  "ffffffff810010c0 T entry_SYSRETL_compat_end\n"
				  "ffffffff81001100 T entry_INT80_compat\n"
				  "ffffffff81001180 t error_entry\n"
				  "ffffffff81001280 T sync_regs\n"
				  "ffffffff81001300 T _etext\n";
	char path[] = "/tmp/hvprof-entryregs-XXXXXX";
	struct gi_layout l;
	struct gi *gi = NULL;
	int fd = mkstemp(path), ok;

	ASSERT_TRUE(fd >= 0);
	ok = write(fd, map, sizeof(map) - 1) == (ssize_t)(sizeof(map) - 1);
	close(fd);
	layout(&l);
	if (!ok || gi_new_raw(&l, TEXT, ETEXT, 0, &gi) != 0 ||
	    symtab_open_map(path, &gi->st) != 0) {
		unlink(path);
		gi_close(gi);
		return TEST_FAIL;
	}
	unlink(path);
	gi_find_exit_paths(gi);
	ASSERT_EQ_U64(gi->compat_entry[2][0], 0xffffffff81001000ull);
	ASSERT_EQ_U64(gi->compat_entry[2][1], 0xffffffff810010a0ull);
	ASSERT_EQ_U64(gi->compat_entry[0][0], 0xffffffff81001100ull);
	ASSERT_EQ_U64(gi->compat_entry[0][1], 0xffffffff81001180ull);
	ASSERT_EQ_U64(gi->compat_entry[1][0], 0); /* no entry_SYSENTER_compat */
	ASSERT_EQ_U64(gi->save_regs_kva[0], 0xffffffff81001180ull);
	ASSERT_EQ_U64(gi->save_regs_end[0], 0xffffffff81001280ull);
	ASSERT_TRUE(!gi_in_entry_save_call(gi, 0xffffffff81001180ull));
	ASSERT_TRUE(gi_in_entry_save_call(gi, 0xffffffff81001181ull));
	ASSERT_TRUE(gi_in_entry_save_call(gi, 0xffffffff8100127full));
	ASSERT_TRUE(!gi_in_entry_save_call(gi, 0xffffffff81001280ull));
	gi_close(gi);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "the user registers of an entry being made", test_entry_regs },
	{ "the entry functions' ranges by symbol", test_ranges_by_symbol },
};

TEST_MAIN(tests)
