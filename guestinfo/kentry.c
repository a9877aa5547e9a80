// SPDX-License-Identifier: MIT
// The running kernel's entry and exit: the user registers a task saved at its kernel entry
// (pt_regs), the current thread in one call, the return-to-user sites (from exitsites.c, slid)
// and the entry window where pt_regs may still be stale; the exit-work loop (exitwork.c, slid),
// the exit tail, and where a task's thread-info flags are. The single source for the sampler's
// traps and marks and for kernel-info.
#define pr_fmt(fmt) "gi: kentry: " fmt
#include <errno.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "gi_internal.h"

#define PT_REGS_MAX 512 /* bytes: x86-64 pt_regs is 168 */

bool gi_have_pt_regs(const struct gi_layout *l)
{
	return l->pt_regs_size != UINT32_MAX && l->pt_regs_size != 0 &&
	       l->pt_regs_size <= PT_REGS_MAX && l->pt_regs_ip + 8 <= l->pt_regs_size &&
	       l->pt_regs_sp + 8 <= l->pt_regs_size && l->pt_regs_bp + 8 <= l->pt_regs_size &&
	       l->pt_regs_cs + 8 <= l->pt_regs_size;
}

int gi_task_user_regs(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		      uint64_t task, struct gi_user_regs *out)
{
	uint64_t stack, stack_gva;
	int err;

	if (!gi || !mem || !pg || !out)
		return -EINVAL;
	if (!gi_have_pt_regs(&gi->layout) || gi->layout.task_stack == UINT32_MAX)
		return -ENODATA;
	if (__builtin_add_overflow(task, (uint64_t)gi->layout.task_stack, &stack_gva))
		return -ERANGE;
	err = gi_read_gva(mem, pg, stack_gva, &stack, sizeof(stack));
	return err ?: gi_stack_user_regs(gi, mem, pg, stack, out);
}

int gi_read_user_pt_regs(const struct gi_layout *l, const struct gmem *mem,
			     const struct gi_paging *pg, uint64_t regs_kva, struct gi_user_regs *out)
{
	uint64_t cs;
	uint8_t buf[PT_REGS_MAX];
	int err;

	/* SAFETY: pt_regs_size <= sizeof(buf) and every field offset + 8 <= pt_regs_size. */
	err = gi_read_gva(mem, pg, regs_kva, buf, l->pt_regs_size);
	if (err)
		return err;
	memcpy(&cs, buf + l->pt_regs_cs, 8);
	if ((cs & 3) != 3)
		return -ENOENT; /* not entered from user mode (kernel thread, or not yet) */
	memcpy(&out->ip, buf + l->pt_regs_ip, 8);
	memcpy(&out->sp, buf + l->pt_regs_sp, 8);
	memcpy(&out->bp, buf + l->pt_regs_bp, 8);
	/* SAFETY: each field is read only when its offset + 8 <= pt_regs_size <= sizeof(buf). */
#define KENTRY_READ_GPR(name)                                                   \
	do {                                                                    \
		uint32_t off_ = l->pt_regs_##name;                              \
									\
		out->name = 0;                                                  \
		if (off_ != UINT32_MAX && (uint64_t)off_ + 8 <= l->pt_regs_size) \
			memcpy(&out->name, buf + off_, 8);                      \
	} while (0);
	GI_PT_REGS_GPRS(KENTRY_READ_GPR)
#undef KENTRY_READ_GPR
	out->cs = cs;
	out->orig_ax = 0;
	out->entry_known = false;
	if (l->pt_regs_orig_ax != UINT32_MAX &&
	    (uint64_t)l->pt_regs_orig_ax + 8 <= l->pt_regs_size) {
		memcpy(&out->orig_ax, buf + l->pt_regs_orig_ax, 8);
		out->entry_known = true;
	}
	return 0;
}

int gi_stack_user_regs(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		       uint64_t stack_kva, struct gi_user_regs *out)
{
	if (!gi || !mem || !pg || !out)
		return -EINVAL;
	if (!gi_have_pt_regs(&gi->layout))
		return -ENODATA;
	if (!gi_is_kernel_gva(pg, stack_kva) || (stack_kva & (GI_THREAD_SIZE - 1)))
		return -EBADMSG;
	return gi_read_user_pt_regs(&gi->layout, mem, pg,
				    stack_kva + GI_THREAD_SIZE - gi->layout.pt_regs_size, out);
}

int gi_current_thread_cached(const struct gi *gi, const struct gmem *mem,
			     const struct gi_regs *regs, struct gi_task_cache *cache,
			     uint64_t *task, struct hvp_thread *out, struct gi_thread_state *st)
{
	uint64_t t, mm = 0;
	uint32_t flags = 0;
	bool cached = false;
	int err;

	if (!task || !out)
		return -EINVAL;
	err = gi_current_task(gi, mem, regs, &t);
	if (err)
		return err;
	err = gi_task_identity_cached(gi, mem, &regs->pg, cache, t, out, &mm, &flags, &cached);
	if (err)
		return err;
	*task = t;
	if (st) {
		st->mm = mm;
		st->exiting = !out->kthread && !mm && (flags & GI_PF_EXITING);
		st->cached = cached;
	}
	return 0;
}

int gi_current_thread(const struct gi *gi, const struct gmem *mem, const struct gi_regs *regs,
		      uint64_t *task, struct hvp_thread *out, struct gi_thread_state *st)
{
	return gi_current_thread_cached(gi, mem, regs, NULL, task, out, st);
}

int gi_running_slide(const struct gi *gi, uint64_t *slide)
{
	switch (gi_kaslr_state(gi)) {
	case GI_SLIDE_KNOWN:
		*slide = gi_slide(gi);
		return 0;
	case GI_SLIDE_FAILED:
		*slide = 0; /* the image does not match: link-time addresses are the best guess */
		return 0;
	default:
		return -EAGAIN;
	}
}

uint64_t gi_iret_site_of(const struct gi_exit_site *sites, size_t n)
{
	uint64_t iret = 0;

	for (size_t i = 0; i < n; i++) {
		const struct gi_exit_site *site = &sites[i];

		/* the interrupt return; other iretqs (NMI) are the fallback */
		if (site->kind == GI_EXIT_IRETQ &&
		    (!iret || !strcmp(site->symbol, "native_irq_return_iret")))
			iret = site->kva;
	}
	return iret;
}

int gi_return_sites(const struct gi *gi, struct gi_return_sites *out)
{
	uint64_t sysret = 0, iret, slide;
	int err;

	if (!gi || !out)
		return -EINVAL;
	for (size_t i = 0; i < gi->n_sites && !sysret; i++)
		if (gi->sites[i].kind == GI_EXIT_SYSRETQ)
			sysret = gi->sites[i].kva;
	iret = gi_iret_site_of(gi->sites, gi->n_sites);
	if (!sysret || !iret)
		return -ENOENT;
	err = gi_running_slide(gi, &slide);
	if (err)
		return err;
	memset(out, 0, sizeof(*out));
	out->sysret = sysret + slide;
	out->iret = iret + slide;
	if (gi->iret_user.kva) {
		out->iret_user = gi->iret_user.kva + slide;
		out->iret_user_target = gi->iret_user.target + slide;
		out->iret_user_len = gi->iret_user.len;
		out->iret_user_cond = gi->iret_user.cond;
		memcpy(out->iret_user_bytes, gi->iret_user.bytes, sizeof(out->iret_user_bytes));
	}
	return 0;
}

bool gi_has_iret_user_branch(const struct gi *gi)
{
	return gi && gi->iret_user.kva;
}

int gi_pf_entry(const struct gi *gi, uint64_t *gva)
{
	uint64_t slide;
	int err;

	if (!gi || !gva)
		return -EINVAL;
	if (!gi->pf_entry_kva)
		return -ENOENT;
	err = gi_running_slide(gi, &slide);
	if (err)
		return err;
	*gva = gi->pf_entry_kva + slide;
	return 0;
}

/* @rip (link-time) past an exception's or interrupt's C handler: error_return, or a stub's jump
 * to it (gi->exc_ret_jmps, ascending). */
static bool in_exc_return(const struct gi *gi, uint64_t rip)
{
	unsigned int lo = 0, hi = gi->n_exc_ret_jmps;

	if (rip >= gi->exc_ret_start && rip < gi->exc_ret_end)
		return true;
	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (gi->exc_ret_jmps[mid] == rip)
			return true;
		if (gi->exc_ret_jmps[mid] < rip)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

bool gi_in_entry_window(const struct gi *gi, uint64_t rip)
{
	uint64_t slide;

	if (!gi || !gi->entry_text_end || gi_running_slide(gi, &slide) != 0)
		return false;
	rip -= slide; /* link-time from here on */
	if (rip < gi->entry_text_start || rip >= gi->entry_text_end)
		return false;
	if (rip >= gi->exit1_start && rip < gi->exit1_end)
		return false;
	if (rip >= gi->exit2_start && rip < gi->exit2_end)
		return false;
	if (in_exc_return(gi, rip))
		return false; /* after the C handler: pt_regs complete */
	return true;
}

bool gi_in_entry_save_call(const struct gi *gi, uint64_t ret)
{
	uint64_t slide;

	if (!gi || gi_running_slide(gi, &slide) != 0)
		return false;
	ret -= slide; /* link-time from here on */
	for (size_t i = 0; i < ARRAY_SIZE(gi->save_regs_kva); i++)
		if (gi->save_regs_kva[i] && ret > gi->save_regs_kva[i] &&
		    ret < gi->save_regs_end[i])
			return true;
	return false;
}

bool gi_at_user_exception_return(const struct gi *gi, uint64_t rip, uint64_t rsp,
				 uint64_t stack_kva)
{
	uint64_t slide;

	if (!gi || !gi->exc_ret_end || !stack_kva || !gi->have_layout ||
	    !gi_have_pt_regs(&gi->layout) || gi_running_slide(gi, &slide) != 0)
		return false;
	return in_exc_return(gi, rip - slide) &&
	       rsp == stack_kva + GI_THREAD_SIZE - gi->layout.pt_regs_size;
}

int gi_exit_work_link(const struct gi *gi, struct gi_exit_work out[GI_EW_COPIES], size_t *n)
{
	if (!gi || !out || !n)
		return -EINVAL;
	*n = 0;
	if (gi->exit_work_err == -ENOTSUP) /* n_exit_work 0 then (gi_exit_work_loops) */
		return -ENOTSUP;
	if (!gi->n_exit_work || !gi->have_layout || gi->layout.task_ti_flags == UINT32_MAX)
		return -ENOENT;
	memcpy(out, gi->exit_work, gi->n_exit_work * sizeof(out[0]));
	*n = gi->n_exit_work;
	return 0;
}

int gi_exit_work(const struct gi *gi, struct gi_exit_work out[GI_EW_COPIES], size_t *n)
{
	uint64_t slide;
	int err;

	err = gi_exit_work_link(gi, out, n);
	err = err ?: gi_running_slide(gi, &slide);
	if (err) {
		if (n)
			*n = 0;
		return err;
	}
	for (size_t i = 0; i < *n; i++) {
		struct gi_exit_work *w = &out[i];

		w->func_start += slide;
		w->func_end += slide;
		w->head += slide;
		w->loop_end += slide;
		w->clear += slide;
		w->clear_end += slide;
		if (w->loop_cli)
			w->loop_cli += slide;
		if (w->prep_cli)
			w->prep_cli += slide;
		for (unsigned int k = 0; k < w->n_body && k < GI_EW_BODY; k++) {
			w->body[k][0] += slide;
			w->body[k][1] += slide;
		}
	}
	return 0;
}

/* @at (link-time) where the thread reads its work flags again after it: a loop's body (not the
 * code between its head and its end that is not the loop's, 6.12's context tracking after the
 * read; its out-of-line blocks past its end, task work, are; a body not known holds nothing),
 * its function before the irq disable that comes before its first read (prep_cli: 6.12's
 * system call exit work), or an exit function before it calls a loop's function
 * (exit_before): gi_exit_ranges' before_read. */
static bool before_read(const struct gi *gi, uint64_t at)
{
	return gi_ranges_has(&gi->before_read, at);
}

/* Is @at (link-time) in a loop's function (the exit-work function, or an exit path holding
 * its copy)? Outside the loop's body and before its first read, the thread there may have read
 * its flags for the last time. */
static bool in_exit_function(const struct gi *gi, uint64_t at)
{
	return gi_ranges_has(&gi->ew_funcs, at);
}

/* The leaf @at (link-time) at a loop's bottom, from its last cli: its last read of the flags
 * may be done. */
static bool at_loop_bottom(const struct gi *gi, uint64_t at)
{
	for (size_t i = 0; i < gi->n_exit_work; i++) {
		const struct gi_exit_work *w = &gi->exit_work[i];

		if (w->loop_cli && at >= w->loop_cli && at < w->loop_end)
			return true;
	}
	return false;
}

bool gi_chain_in_exit_tail(const struct gi *gi, uint64_t rip, const uint64_t *callers,
			   unsigned int n)
{
	uint64_t slide;

	if (!gi || !gi->n_exit_work || gi_running_slide(gi, &slide) != 0)
		return false;
	if (gi_ranges_has(&gi->tail, rip - slide))
		return true;
	/* an IDT handler after irqentry_exit, entered from user mode: no interrupted kernel frame
	 * below its stub's (from kernel mode the thread returns to its stay, not to user) */
	if (n <= 1 && gi_spans_has(&gi->epilogues, rip - slide))
		return true;
	/* the leaf at the loop's bottom: its last read of the flags may be done */
	if (at_loop_bottom(gi, rip - slide))
		return true;
	if (before_read(gi, rip - slide))
		return false;
	if (in_exit_function(gi, rip - slide))
		return true;
	for (unsigned int i = 0; i < n; i++) {
		uint64_t at = callers[i] - 1 - slide;

		/* called from the loop's body (schedule(), signal delivery, task work), or from an
		 * exit function before its call of the loop's function (the system call's exit
		 * work): the flags are read after this call returns, so the outer frames (all in
		 * the tail: the exit functions' callers after their call) do not decide; from
		 * anywhere else in a loop's function (6.12's context tracking), they are read */
		if (before_read(gi, at))
			return false;
		if (in_exit_function(gi, at) || gi_ranges_has(&gi->tail, at))
			return true;
	}
	return false;
}

int gi_task_flags_gpa(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		      uint64_t task, uint64_t *gpa)
{
	uint64_t kva, page_size;
	int err;

	if (!gi || !mem || !pg || !gpa)
		return -EINVAL;
	if (!gi->have_layout || gi->layout.task_ti_flags == UINT32_MAX)
		return -ENODATA;
	if (__builtin_add_overflow(task, (uint64_t)gi->layout.task_ti_flags, &kva))
		return -ERANGE;
	if ((kva & 7) || !gi_is_kernel_gva(pg, kva))
		return -EINVAL; /* an unsigned long is 8-aligned; and only a kernel address */
	err = gi_gva_to_gpa(mem, pg, kva, gpa, &page_size, NULL);
	return err;
}
