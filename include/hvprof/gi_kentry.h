/* SPDX-License-Identifier: MIT */
/*
 * The kernel's entry and exit paths as guestinfo knows them (included by <hvprof/guestinfo.h>,
 * after struct gi_regs and struct gi_user_regs): where threads return to user mode, the entry
 * window where pt_regs may still be the previous entry's, the exit-work loop that guest-visible
 * marks use and the exit tail past its last read of the work flags (kentry.c, entryregs.c,
 * exitwork.c; arch/x86/entry/entry_64.S and kernel/entry/common.c of the guest's kernel).
 */
#ifndef HVPROF_GI_KENTRY_H
#define HVPROF_GI_KENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>
#include <hvprof/gmem.h>
#include <hvprof/kimage.h>
#include <hvprof/pgwalk.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gi;
struct gi_regs;
struct gi_user_regs;

/* The condition of a branch (struct gi_return_sites.iret_user_cond). */
enum gi_branch_cond {
	GI_BRANCH_ALWAYS = 0, /* jmp */
	GI_BRANCH_NZ = 1,     /* jne/jnz: taken when RFLAGS.ZF is clear */
};

/**
 * struct gi_return_sites - where the running guest returns to user mode (slid GVAs), from the
 * sites gi_exit_sites() found at gi_open: @sysret the sysretq of the 64-bit system call exit,
 * @iret the iretq of the interrupt/exception return (native_irq_return_iret where named), which
 * returns to kernel mode too. @iret_user: the branch to that iretq on the way to user mode only
 * (after the `swapgs` of swapgs_restore_regs_and_return_to_usermode; 0: not found,
 * gi_iret_user_branch_find): the registers there are those at the iretq (user GPRs, RSP at the
 * IRET frame), so a breakpoint there sees every interrupt return to user and none to the kernel.
 * It is @iret_user_len bytes, @iret_user_bytes in the image (checked in guest memory before
 * use), and goes to @iret_user_target when @iret_user_cond holds, else falls through.
 */
struct gi_return_sites {
	uint64_t sysret;
	uint64_t iret;
	uint64_t iret_user, iret_user_target;
	uint8_t iret_user_len;  /* 2..6 bytes */
	uint8_t iret_user_cond; /* enum gi_branch_cond */
	uint8_t iret_user_bytes[6];
};

/**
 * gi_return_sites - fill @out. Return: 0; -ENOENT the kernel has no such pair of sites;
 * -EAGAIN the KASLR slide is not known yet (ask again once gi_kaslr_state() is not UNKNOWN; a
 * slide that could not be found counts as 0); -EINVAL.
 */
int gi_return_sites(const struct gi *gi, struct gi_return_sites *out) __must_check;

/**
 * gi_has_iret_user_branch - whether gi_return_sites() gives an iret_user branch (found in the
 * image at gi_open; known before the KASLR slide). False for NULL.
 */
bool gi_has_iret_user_branch(const struct gi *gi);

/**
 * gi_pf_entry - GVA of the kernel's page-fault entry (asm_exc_page_fault; page_fault before
 * 5.8) in the running guest. Return: 0; -ENOENT no such symbol; -EAGAIN slide not known yet.
 */
int gi_pf_entry(const struct gi *gi, uint64_t *gva) __must_check;

/**
 * gi_in_entry_window - @rip is in the kernel entry code before the C handler, where pt_regs at
 * the top of the task stack may still hold the previous entry's user registers
 * ([__entry_text_start, __entry_text_end) less the two exit paths, which read a complete
 * pt_regs). False while the slide is not known, or without those symbols.
 */
bool gi_in_entry_window(const struct gi *gi, uint64_t rip);

/**
 * gi_in_entry_save_call - is @ret (GVA, slid: a kernel sample's first return address) inside
 * one of the entry code's functions that save the user registers below the iret frame
 * (error_entry, paranoid_entry, xen_error_entry; arch/x86/entry/entry_64.S)? Then the sample
 * is in a function that one called: sync_regs() copying pt_regs from the CPU's entry stack to
 * the task stack, a return-thunk's untraining, fixup_bad_iret(); pt_regs at the top of the task
 * stack are not this entry's yet (gi_entry_user_regs finds them, or says they cannot be told).
 * False while the slide is not known, or without the symbols and their ends.
 */
bool gi_in_entry_save_call(const struct gi *gi, uint64_t ret);

/**
 * gi_at_user_exception_return - is a kernel sample at @rip (GVA, slid) with stack pointer @rsp
 * (GVA) in the exit of an exception or interrupt that returns to user mode, past the thread's
 * last read of its work flags? That is error_return (arch/x86/entry/entry_64.S, where every
 * idtentry stub jumps after its C handler, whose irqentry_exit ran the exit work) or a stub's
 * `jmp error_return` itself (found with capstone in the entry text at gi_open), with RSP at
 * the task's outermost pt_regs: the top of its kernel stack @stack_kva (task->stack, GVA) less
 * sizeof(struct pt_regs) — an entry from user mode; an exception taken in kernel mode returns
 * from lower on the stack. A flag set there acts only at the thread's next kernel exit, and
 * pt_regs hold the registers it returns with. False while the slide is not known, without the
 * symbol, @stack_kva 0 or the pt_regs layout.
 */
bool gi_at_user_exception_return(const struct gi *gi, uint64_t rip, uint64_t rsp,
				 uint64_t stack_kva);

/**
 * gi_entry_user_regs - the user registers of the kernel entry a sample in the entry window is
 * in (pt_regs at the task stack's top may be the previous entry's), from where the entry is
 * putting them (guestinfo/entryregs.c; arch/x86/entry/entry_64.S): in SYSCALL's entry, @live
 * (the vCPU's registers as user registers) with ip = RCX while RSP is the user's or pt_regs is
 * being pushed, or pt_regs whole; elsewhere the entry's frame as the kernel's ORC unwinder finds
 * it (unwind_orc.c), or without ORC by how far the entry has pushed on the CPU's entry stack
 * (TSS.sp0): the iret frame's ip, cs and sp with @live's other registers (the entry code changes
 * no callee-saved one before it saves it), or the pt_regs it has saved. @regs: the vCPU's
 * (CPL 0); @task: the sampled task (its kernel stack), 0 if unknown; @out: caller-owned.
 * Return: 0 and *@out (orig_ax -1 for an interrupt or exception, as its stub sets it before the
 * handler, even where the slot still holds the vector or error code; in a 32-bit system call's
 * entry its number: as saved, or from RAX zero-extended while `int $0x80`'s entry is still on
 * the entry stack); -ENOENT the entry interrupted
 * kernel mode (the task's pt_regs are its last user entry's); -EAGAIN the entry is part-way
 * where its registers cannot be told (an IST stack, CR3 held in RSP); -ENOTSUP the slide is
 * not known; -ENODATA no pt_regs layout; -EBADMSG, -ELOOP, read errors: a stack that does not
 * check out.
 */
int gi_entry_user_regs(const struct gi *gi, const struct gmem *mem, const struct gi_regs *regs,
		       uint64_t task, const struct gi_user_regs *live,
		       struct gi_user_regs *out) __must_check;

/**
 * struct gi_exit_work - the exit-work loop of the generic entry code (exitwork.c), link-time
 * kvas from the image or slid ones from gi_exit_work(): @head the loop's first instruction
 * (`sti`: local_irq_enable_exit_to_user); [@head, @loop_end) the loop; @clear the instruction
 * that clears TIF_NOTIFY_RESUME (reached only by a thread with the flag set, once per pass that
 * sees it; [@clear, @clear_end), its bytes @clear_bytes); when it is `[lock] and [base + disp],
 * imm` on a byte or a qword, @clear_base (the base register's x86 encoding number + 1: 1 rax,
 * 2 rcx, 3 rdx, 4 rbx, 5 rsp, 6 rbp, 7 rsi, 8 rdi, 9..16 r8..r15; 0 when not), @clear_disp,
 * @clear_size (bytes) and @clear_imm (sign-extended) say how to complete it; [@func_start, @func_end) the function holding the loop;
 * @notify_bit the bit of TIF_NOTIFY_RESUME in thread_info.flags; @prep_cli the irq disable
 * before the function's first read of the flags (0: none found): where an exit path holds the
 * loop inlined (Linux 6.12's syscall_exit_to_user_mode: local_irq_disable_exit_to_user, then
 * the read), [@func_start, @prep_cli) comes before that read (the system call's exit work);
 * @body[0..@n_body) the loop's code (gi_loop_body): not all of [@head, @loop_end) (6.12 puts
 * context tracking's user entry, after the read, in between) and out-of-line blocks past
 * @loop_end that jump back in (task work); @n_body 0: not known, [@head, @loop_end).
 */
#define GI_EW_BODY 8
struct gi_exit_work {
	uint64_t func_start, func_end, head, loop_end, clear, clear_end, prep_cli;
	uint64_t body[GI_EW_BODY][2];
	unsigned int n_body;
	bool inlined; /* an exit path's own copy (gi_exit_work_loops), not the loop's function */
	/* the loop body's last cli (local_irq_disable_exit_to_user, or its pv_ops call): from
	 * there to loop_end the pass reads the flags for the loop's test, so a sample there may
	 * be past the last read (0: none found). Where the compiler put out-of-line blocks after
	 * it (Debian's 6.1:
	 * schedule()'s return, signal delivery, the clear, task work) a leaf sample in them counts
	 * as past it too: walked from pt_regs at once, as eager mode would, with no mark */
	uint64_t loop_cli;
	uint8_t clear_bytes[16];
	int clear_base;
	int64_t clear_disp;
	unsigned int clear_size;
	uint64_t clear_imm;
	unsigned int notify_bit;
};

/**
 * struct gi_pv_irq - the link-time KVAs of pv_ops.irq.irq_enable and .irq_disable in a kernel
 * whose image enables and disables interrupts by `call *pv_ops...(%rip)` (CONFIG_PARAVIRT_XXL,
 * Debian's stock kernel; the kernel patches those calls into sti and cli at boot on bare metal
 * and KVM, in place); 0 when unknown or not such a kernel.
 */
struct gi_pv_irq {
	uint64_t enable, disable;
};

/* gi_pv_irq_slots - *@out from @st's pv_ops and @l's pv_irq_enable/pv_irq_disable (BTF); zeros
 * where either is missing. */
void gi_pv_irq_slots(const struct symtab *st, const struct gi_layout *l, struct gi_pv_irq *out);

#define GI_EW_COPIES 2 /* exit paths: system calls, interrupts and exceptions */

/**
 * gi_exit_work_loops - the exit-work loops that together serve every return to user mode, one
 * breakpoint each (link-time KVAs), found with capstone through @read: @out[0..*@n). A loop's
 * head is an sti, or where @pv (may be NULL) knows the slot a call of pv_ops.irq.irq_enable (and
 * its last cli one of irq_disable); it clears TIF_NOTIFY_RESUME. Each exit path
 * (syscall_exit_to_user_mode, irqentry_exit_to_user_mode; do_syscall_64, irqentry_exit where
 * those have no symbol) either reaches the loop's own function (exit_to_user_mode_loop, or
 * exit_to_user_mode_prepare into which 6.1 inlines it: a call or jump to it, or to
 * exit_to_user_mode_prepare that calls it), listed once, or holds a loop of its own, inlined
 * (Debian's 6.12: one in each path; @inlined set). Return: 0 and 1..GI_EW_COPIES loops; -ENOENT
 * no loop at all (a pre-5.8 kernel, a paravirt one without BTF); -ENOTSUP a path neither reaches
 * a loop nor holds one, or a loop but no path known; -EFAULT; -ENOMEM; -EINVAL. *@n is 0 on
 * error.
 */
int gi_exit_work_loops(const struct symtab *st, gi_kva_read_fn read, void *ctx,
		       const struct gi_pv_irq *pv, struct gi_exit_work out[GI_EW_COPIES],
		       size_t *n) __must_check;

/**
 * gi_syscall_tail_find - [*@start, *@end): the 64-bit system call entry's code after its C
 * handler returns (after the last call in entry_SYSCALL_64) up to syscall_return_via_sysret:
 * the thread has read its work flags for the last time there (link-time kvas).
 * Return: 0; -ENOENT symbols or call missing; -EFAULT; -ENOMEM; -EINVAL.
 */
/**
 * gi_jumps_to_find - the direct jumps to @target (link-time KVA) in the code [@lo, @hi) read
 * through @read, decoded with capstone from @lo on (a byte that does not decode is stepped
 * over): e.g. every idtentry stub's `jmp error_return` after its C handler. Fills @out (KVAs
 * of the jump instructions, ascending) with at most @max, *@n the count found (> @max: the
 * rest were not stored). Return: 0; -ENOENT none; -E2BIG [@lo, @hi) over 64 KiB; -EFAULT
 * unreadable; -ENOMEM; -EINVAL.
 */
int gi_jumps_to_find(gi_kva_read_fn read, void *ctx, uint64_t lo, uint64_t hi, uint64_t target,
		     uint64_t *out, size_t max, size_t *n) __must_check;

int gi_syscall_tail_find(const struct symtab *st, gi_kva_read_fn read, void *ctx, uint64_t *start,
			 uint64_t *end) __must_check;

/**
 * gi_chain_past_exec_switch - a kernel chain past execve's point of no return (execpoint.c):
 * the task's mm is the new program's while pt_regs still holds the old program's registers
 * (until the loader's start_thread), so its user stack cannot be walked. @rip the sampled
 * instruction, @callers[0..@n) the return addresses of the kernel chain (GVAs, slid). False
 * when the image had no such code or the slide is not known yet.
 */
bool gi_chain_past_exec_switch(const struct gi *gi, uint64_t rip, const uint64_t *callers,
			       unsigned int n);

/**
 * gi_call_site - function @func's first direct call (or jump) to @callee, decoded with capstone
 * in the image read through @read: *@at the call instruction, *@after the instruction after it
 * (a frame's return address there means @callee is running), *@end where decoding stopped:
 * the next symbol, or sooner when the function is over 8 KiB or the image could not be read
 * that far; link-time KVAs. Return: 0; -ENOENT a symbol or the call missing; -EFAULT
 * unreadable; -ENOMEM; -EINVAL.
 */
int gi_call_site(const struct symtab *st, gi_kva_read_fn read, void *ctx, const char *func,
		 const char *callee, uint64_t *at, uint64_t *after, uint64_t *end) __must_check;

/**
 * gi_tail_after_call - [*@start, *@end): the code of function @func from its first direct call
 * (or jump) to @callee (the call instruction included: a caller frame whose return address
 * follows it is inside @callee) up to the next symbol: e.g. do_syscall_64 from its call of
 * syscall_exit_to_user_mode, where the thread reads its work flags for the last time.
 * Return: 0; -ENOENT a symbol or the call missing; -EFAULT; -ENOMEM; -EINVAL.
 */
int gi_tail_after_call(const struct symtab *st, gi_kva_read_fn read, void *ctx, const char *func,
		       const char *callee, uint64_t *start, uint64_t *end) __must_check;

/**
 * gi_exit_work - the running guest's exit-work loops (slid; gi_exit_work_loops): @out[0..*@n),
 * one per breakpoint. Return: 0; -ENOTSUP a return to user mode may pass no loop hvprof knows
 * (gi_exit_work_loops); -ENOENT the kernel has none (or no BTF offset of thread_info.flags);
 * -EAGAIN the KASLR slide is not known yet; -EINVAL. *@n is 0 on error.
 */
int gi_exit_work(const struct gi *gi, struct gi_exit_work out[GI_EW_COPIES],
		 size_t *n) __must_check;

/* gi_exit_work_link - as gi_exit_work, link-time KVAs: known before the KASLR slide is. */
int gi_exit_work_link(const struct gi *gi, struct gi_exit_work out[GI_EW_COPIES],
		      size_t *n) __must_check;

/**
 * gi_chain_in_exit_tail - is a kernel callchain where a thread may already have read its work
 * flags for the last time before returning to user? The leaf @rip (slid) and the @n return
 * addresses @callers (slid; each tested at its address - 1, inside the call instruction, which
 * tells where the caller stands; @callers may be NULL when @n is 0) are looked at from the leaf
 * out. In the tail: the exit-work function outside its loop, and the loop's bottom from its last
 * cli (gi_exit_work.loop_cli) for the leaf; its callers (syscall_exit_to_user_mode[_work],
 * irqentry_exit_to_user_mode, exit_to_user_mode) from their first call of it on, or whole when
 * they do not call it; the C entry points after they called those (do_syscall_64,
 * irqentry_exit, ...); in the entry text the system call's tail and the two exit paths (not the
 * entry code: its thread has all its exit still ahead). Before the read, which ends the look
 * with false whatever the outer frames (all in the tail): the loop's body (schedule(), signal
 * delivery, task work called from it return to another read of the flags) and those callers
 * before their call. A flag set in the tail may only act at the thread's next kernel exit.
 * Conservative otherwise (a leaf in the exit-work function before its first read counts). One
 * slide read for the chain; false while the slide is not known.
 */
bool gi_chain_in_exit_tail(const struct gi *gi, uint64_t rip, const uint64_t *callers,
			   unsigned int n);

/**
 * gi_task_flags_gpa - GPA of @task's thread_info.flags (8 bytes, 8-aligned, inside one page),
 * for an atomic update of guest memory. Return: 0; -ENODATA no BTF offset; -EINVAL misaligned;
 * translation errors.
 */
int gi_task_flags_gpa(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		      uint64_t task, uint64_t *gpa) __must_check;

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_GI_KENTRY_H */
