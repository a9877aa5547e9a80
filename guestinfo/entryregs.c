// SPDX-License-Identifier: MIT
// The user registers of a kernel entry still being made (a sample in the entry window, where
// pt_regs at the task stack's top may be the previous entry's): from where the entry is
// putting them. SYSCALL's entry by how far it has pushed pt_regs on the task stack; interrupt
// and exception entries by the kernel's ORC tables, else by how far they have pushed on the
// CPU's entry stack. Layouts: arch/x86/entry/entry_64.S and calling.h (Linux 4.15+, x86-64).
#define pr_fmt(fmt) "gi: entryregs: " fmt
#include <errno.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "gi_internal.h"

#define IRET_FRAME_IP 128   /* struct pt_regs: ip, cs, flags, sp, ss from here (x86-64) */
#define USER_CS_64 0x33     /* __USER_CS (arch/x86/include/asm/segment.h) */
#define TSS_SP0 4           /* struct x86_hw_tss: sp0 after a 4-byte reserved field (SDM 8.7) */
#define ENTRY_STACK_SIZE 4096 /* struct entry_stack (arch/x86/include/asm/processor.h) */
/* Words an interrupt or exception entry from user mode has on the entry stack: the iret frame
 * (5), the error code or -1 or vector (1), error_entry's return address (1), then error_entry
 * pushes the 15 general-purpose registers (PUSH_AND_CLEAR_REGS save_ret=1) and clears them. */
#define ENTRY_WORDS_FRAME 5
#define ENTRY_WORDS_SAVED 22

/*
 * Whether @rip (a running GVA) directly follows a call of one of the entry code's functions that
 * save the user registers (error_entry and its kind): "e8 rel32" in the 5 bytes before it,
 * aimed at one of them. Such a call has returned, with the registers saved below the iret
 * frame and the vCPU's own cleared.
 */
static bool after_save_call(const struct gi *gi, const struct gmem *mem,
			    const struct gi_paging *pg, uint64_t rip, uint64_t slide)
{
	uint8_t insn[5];
	int32_t rel;

	if (gi_read_gva(mem, pg, rip - sizeof(insn), insn, sizeof(insn)) != 0 || insn[0] != 0xe8)
		return false;
	memcpy(&rel, insn + 1, sizeof(rel));
	for (size_t i = 0; i < ARRAY_SIZE(gi->save_regs_kva); i++)
		if (gi->save_regs_kva[i] && rip + (uint64_t)(int64_t)rel == gi->save_regs_kva[i] + slide)
			return true;
	return false;
}

/* The whole pt_regs at kernel GVA @kva; one that is not a user entry's is a bad stack here. */
static int whole(const struct gi_layout *l, const struct gmem *mem, const struct gi_paging *pg,
		 uint64_t kva, struct gi_user_regs *out)
{
	int err = gi_read_user_pt_regs(l, mem, pg, kva, out);

	return err == -ENOENT ? -EBADMSG : err;
}

/* @live with ip, cs and sp from the iret frame the CPU pushed at kernel GVA @frame. */
static int from_iret_frame(const struct gmem *mem, const struct gi_paging *pg, uint64_t frame,
			   const struct gi_user_regs *live, struct gi_user_regs *out)
{
	uint64_t f[4]; /* ip, cs, flags, sp */
	int err = gi_read_gva(mem, pg, frame, f, sizeof(f));

	if (err)
		return err;
	if ((f[1] & 3) != 3)
		return -EBADMSG;
	*out = *live;
	out->ip = f[0];
	out->cs = f[1];
	out->sp = f[3];
	out->orig_ax = UINT64_MAX; /* -1: an interrupt or exception, not a system call */
	out->entry_known = true;
	return 0;
}

/* The top of @task's kernel stack (task->stack + THREAD_SIZE), where pt_regs ends. */
static int task_stack_top(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
			  uint64_t task, uint64_t *top)
{
	uint64_t stack;
	int err;

	if (!task || gi->layout.task_stack == UINT32_MAX)
		return -ENODATA;
	err = gi_read_gva(mem, pg, task + gi->layout.task_stack, &stack, sizeof(stack));
	if (err)
		return err;
	if (!gi_is_kernel_gva(pg, stack) || (stack & (GI_THREAD_SIZE - 1)) ||
	    __builtin_add_overflow(stack, (uint64_t)GI_THREAD_SIZE, top))
		return -EBADMSG;
	return 0;
}

/*
 * SYSCALL's entry, from entry_SYSCALL_64 to its exit path: RSP still the user's (before the
 * switch to the task stack; not a CR3 value the PTI switch passes through it); pushes of
 * pt_regs under way on the task stack, where the callee-saved registers are still the vCPU's,
 * RIP in RCX, the user RSP already in pt_regs->sp from the second push on; or pt_regs whole.
 */
static int syscall_entry_regs(const struct gi *gi, const struct gmem *mem,
			      const struct gi_regs *regs, uint64_t task,
			      const struct gi_user_regs *live, struct gi_user_regs *out)
{
	const struct gi_layout *l = &gi->layout;
	const struct gi_paging *pg = &regs->pg;
	uint64_t rsp = regs->rsp, top, pt, sp;
	int err;

	if (!gi_is_kernel_gva(pg, rsp)) {
		if (((rsp ^ pg->cr3) & 0x7fffffffffffe000ull) == 0)
			return -EAGAIN; /* SWITCH_TO_KERNEL_CR3 holds CR3 in RSP */
		*out = *live;
		out->ip = live->cx; /* SYSCALL: return address in RCX, RFLAGS in R11 (SDM) */
		out->sp = rsp;
		out->cs = USER_CS_64;
		out->orig_ax = live->ax; /* the system call's number, as the entry saves it */
		out->entry_known = true;
		return 0;
	}
	err = task_stack_top(gi, mem, pg, task, &top);
	if (err)
		return err;
	pt = top - l->pt_regs_size;
	if (rsp == pt)
		return whole(l, mem, pg, pt, out); /* every push done */
	/* ss, then sp: from the second push on (rsp <= top - 16) the user RSP is in pt_regs */
	if (rsp & 7 || rsp < pt || rsp > top - 16)
		return -EAGAIN;
	err = gi_read_gva(mem, pg, pt + l->pt_regs_sp, &sp, sizeof(sp));
	if (err)
		return err;
	*out = *live;
	out->ip = live->cx;
	out->sp = sp;
	out->cs = USER_CS_64;
	out->orig_ax = live->ax;
	out->entry_known = true;
	return 0;
}

/*
 * An interrupt or exception entry from user mode, without ORC: the CPU switched to the entry
 * stack (TSS.sp0) and pushed the iret frame at its top; until error_entry has pushed all 15
 * registers (it clears them only then) they are the vCPU's, after that (and once it has
 * returned) they are the pt_regs below the frame, and so they are one word deeper, in a function
 * error_entry called with no frame of its own (sync_regs() copying them to the task stack, a
 * return thunk's untraining). Deeper still is not known: a fault on the IRET to user mode is
 * taken on this stack below its frame, and error_entry's fixup_bad_iret() rewrites pt_regs in
 * two copies. RSP elsewhere: on the task stack with pt_regs at its top (sync_regs() has moved
 * them there: whole), in the cpu_entry_area (an IST stack: not known), or a kernel stack the
 * CPU did not switch (an interrupt of kernel mode: -ENOENT).
 */
static int entry_stack_regs(const struct gi *gi, const struct gmem *mem,
			    const struct gi_regs *regs, uint64_t task, uint64_t slide,
			    const struct gi_user_regs *live, struct gi_user_regs *out)
{
	const struct gi_layout *l = &gi->layout;
	const struct gi_paging *pg = &regs->pg;
	uint64_t base, sp0_kva, sp0, top, rsp = regs->rsp, words;
	int err;

	if (gi->tss_off == UINT64_MAX)
		return -ENOTSUP;
	if (gi_percpu_base(regs, &base) != 0 ||
	    __builtin_add_overflow(base, gi->tss_off + TSS_SP0, &sp0_kva))
		return -EAGAIN;
	err = gi_read_gva(mem, pg, sp0_kva, &sp0, sizeof(sp0));
	if (err)
		return err == -ENOENT ? -EFAULT : err;
	if (!gi_is_kernel_gva(pg, sp0) || (sp0 & 7) || sp0 < ENTRY_STACK_SIZE)
		return -EBADMSG;
	if (rsp < sp0 && rsp >= sp0 - ENTRY_STACK_SIZE) {
		words = (sp0 - rsp) / 8;
		if (rsp & 7 || words < ENTRY_WORDS_FRAME || words > ENTRY_WORDS_SAVED + 1)
			return -EAGAIN;
		if (words >= ENTRY_WORDS_SAVED || after_save_call(gi, mem, pg, regs->rip, slide))
			return whole(l, mem, pg, sp0 - 8 * ENTRY_WORDS_FRAME - IRET_FRAME_IP, out);
		return from_iret_frame(mem, pg, sp0 - 8 * ENTRY_WORDS_FRAME, live, out);
	}
	if (task_stack_top(gi, mem, pg, task, &top) == 0 && rsp == top - l->pt_regs_size)
		return whole(l, mem, pg, rsp, out);
	if ((rsp >> 39) == (sp0 >> 39))
		return -EAGAIN; /* the cpu_entry_area's 512 GiB: an IST stack */
	return -ENOENT;
}

/* By the kernel's ORC tables: the entry's frame, wherever it is (ORC_TYPE_REGS, or an iret
 * frame alone at the sampled instruction's own frame). */
static int orc_entry_regs(const struct gi *gi, const struct gmem *mem, const struct gi_regs *regs,
			  uint64_t slide, const struct gi_user_regs *live, struct gi_user_regs *out)
{
	const struct gi_layout *l = &gi->layout;
	struct gi_orc_entry_frame f;
	int err;

	err = gi_orc_entry_frame(gi, mem, regs, &f);
	if (err)
		return err;
	if (!f.user)
		return -ENOENT; /* it interrupted the kernel: the task's pt_regs are its last entry's */
	if (!gi_is_kernel_gva(&regs->pg, f.regs) || (f.regs & 7))
		return -EBADMSG;
	if (f.full)
		return whole(l, mem, &regs->pg, f.regs, out);
	if (!f.first)
		return -EAGAIN; /* inside the call that saves them: which are saved is not known */
	if (after_save_call(gi, mem, &regs->pg, regs->rip, slide))
		return whole(l, mem, &regs->pg, f.regs, out);
	/* Nothing saved yet: the iret frame the CPU pushed, and the vCPU's registers, which the
	 * entry code does not change before it saves them (but for scratch ones on some paths). */
	return from_iret_frame(mem, &regs->pg, f.regs + IRET_FRAME_IP, live, out);
}

/*
 * Which 32-bit system call's entry is @rip (link-time) in: an index of gi->compat_entry (0:
 * entry_INT80_compat), or -1 for none. Every other entry here is an interrupt's or an
 * exception's (SYSCALL's has its own path), whose stub sets pt_regs.orig_ax to -1 once
 * error_entry has returned (arch/x86/entry/entry_64.S, idtentry): until then the slot holds its
 * vector or error code, which would pass for a system call's number (stay_class, walk_at_mark).
 */
static int compat_entry_of(const struct gi *gi, uint64_t rip)
{
	for (size_t i = 0; i < ARRAY_SIZE(gi->compat_entry); i++)
		if (rip >= gi->compat_entry[i][0] && rip < gi->compat_entry[i][1])
			return (int)i;
	return -1;
}

int gi_entry_user_regs(const struct gi *gi, const struct gmem *mem, const struct gi_regs *regs,
		       uint64_t task, const struct gi_user_regs *live, struct gi_user_regs *out)
{
	uint64_t slide, rip;
	int err, compat;

	if (!gi || !mem || !regs || !live || !out)
		return -EINVAL;
	if (!gi_have_pt_regs(&gi->layout) || gi->layout.pt_regs_ip != IRET_FRAME_IP)
		return -ENODATA;
	if (gi_running_slide(gi, &slide) != 0)
		return -ENOTSUP;
	rip = regs->rip - slide; /* link-time */
	if (gi->entry_kva && gi->exit1_start && rip >= gi->entry_kva && rip < gi->exit1_start)
		return syscall_entry_regs(gi, mem, regs, task, live, out);
	err = gi->orc ? orc_entry_regs(gi, mem, regs, slide, live, out) : -ENOTSUP;
	if (err == -ENOTSUP || err == -EAGAIN)
		err = entry_stack_regs(gi, mem, regs, task, slide, live, out);
	if (err)
		return err;
	compat = compat_entry_of(gi, rip);
	if (compat < 0)
		out->orig_ax = UINT64_MAX;
	else if (compat == 0 && out->orig_ax == UINT64_MAX)
		/* entry_INT80_compat on the entry stack (the iret frame, then its pushes of
		 * orig_ax and rdi before it moves them to the task stack; RAX is not touched):
		 * the number is in RAX, which the entry saves zero-extended (movl %eax, %eax;
		 * arch/x86/entry/entry_64_compat.S). Kernels since the int80 IDTENTRY conversion
		 * (6.7, and 6.1.y's backport) have no such entry: asm_int80_emulation is an
		 * idtentry whose orig_ax is -1 until do_int80_emulation() sets it. */
		out->orig_ax = (uint32_t)live->ax;
	return 0;
}
