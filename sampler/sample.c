// SPDX-License-Identifier: MIT
// Turning a counter overflow into a sample: registers (sync regs), the current guest thread and
// its identity (guestinfo), callchains, and the THREAD/PROCESS records the first time an
// identity is seen. Nothing here logs per sample: failures are counted.
#define pr_fmt(fmt) "sampler: sample: " fmt
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <hvprof/log.h>

#include "sampler_internal.h"

#define MSR_KERNEL_GS_BASE 0xc0000102
#define EFER_LMA (1ull << 10)

/* The per-CPU base (kernel GS) of this vCPU: it does not change after boot, so once seen it is
 * remembered; until then MSR_KERNEL_GS_BASE is asked. */
static uint64_t kernel_gs_base(struct svcpu *sv, const struct gi_paging *pg,
			       const struct kvm_sregs *sregs, uint8_t cpl)
{
	uint64_t v;

	if (cpl == 0 && gi_is_kernel_gva(pg, sregs->gs.base))
		sv->percpu_base = sregs->gs.base;
	if (sv->percpu_base)
		return sv->percpu_base;
	if (sv->v && vmm_vcpu_get_msr(sv->v, MSR_KERNEL_GS_BASE, &v) == 0 &&
	    gi_is_kernel_gva(pg, v))
		sv->percpu_base = v;
	return sv->percpu_base;
}

void count_walk_stop(struct svcpu *sv, enum hvp_walk_stop why, bool user)
{
	switch (why) {
	case HVP_WALK_FAULT:
		user ? sv->c.user_walk_fault++ : sv->c.kernel_walk_fault++;
		break;
	case HVP_WALK_BAD_FP:
		user ? sv->c.user_walk_bad_fp++ : sv->c.kernel_walk_bad_fp++;
		break;
	case HVP_WALK_DEPTH:
		user ? sv->c.user_walk_depth++ : sv->c.kernel_walk_depth++;
		break;
	default:
		break;
	}
}

/*
 * Guest-visible marks: has the thread of this kernel sample read its work flags for the last
 * time on this exit, or will it clear TIF_NOTIFY_RESUME before reading them again? Then a flag
 * set now would act at its next exit only (with other user registers): the mark takes the trap.
 * The leaf and every caller count: a caller's return address R continues at R, so R - 1 (inside
 * its call instruction) tells where it stands; a sample in schedule() called from the exit-work
 * loop before the loop clears the flag is one (the "flagged again inside the loop").
 */
static bool in_exit_tail(const struct svcpu *sv, const struct hvp_sample *smp, uint64_t task)
{
	const struct sampler *s = sv->s;

	if (gi_chain_in_exit_tail(s->gi, smp->rip, smp->kernel_ips + 1,
				  smp->n_kernel > 1 ? smp->n_kernel - 1u : 0u))
		return true;
	/* error_return on its way to user mode: irqentry_exit did the exit work already */
	return sv->sample_gi_regs && sv->sample_kstack_task == task &&
	       gi_at_user_exception_return(s->gi, smp->rip, sv->sample_gi_regs->rsp,
					   sv->sample_kstack_kva);
}

/*
 * The user registers of a kernel sample in the entry window: pt_regs (@ur as read) may still
 * be the previous entry's, whose walk would be a wrong chain that looks right. They come from
 * the entry's own frame (gi_entry_user_regs); when the entry interrupted kernel mode, @ur is
 * the task's last user entry's and stands. *@own: @ur is the entry's own frame's. False: not
 * known (a mark is then resolved by the thread's return alone; a walk now loses the user part,
 * counted).
 */
static bool entry_user_regs(struct svcpu *sv, uint64_t task, struct gi_user_regs *ur, bool *own)
{
	struct gi_user_regs live, built;
	int err = -ENOTSUP;

	if (sv->sample_vcpu_regs && sv->sample_gi_regs) {
		user_regs_from_vcpu(sv->sample_vcpu_regs, sv->sample_vcpu_regs->rip,
				    sv->sample_vcpu_regs->rsp, &live);
		err = gi_entry_user_regs(sv->s->gi, sv->s->mem, sv->sample_gi_regs, task, &live,
					 &built);
	}
	*own = false;
	if (err == -ENOENT)
		return true;
	if (err)
		return false;
	*ur = built;
	*own = true;
	sv->c.user_regs_entry_found++;
	return true;
}

/*
 * Is this sample's thread on a return-to-user breakpoint that will not fire for it: RIP where
 * this vCPU's last hit on a thread's way to user mode was (the exit-work loop's clear of
 * TIF_NOTIFY_RESUME, sysretq/iretq to user mode, or the branch to that iretq:
 * sv->stepped_pc) with RF set by that hit's step over it (VMX/SVM; where RF is ignored, PVM, the
 * hit completes the instruction and RIP is past it), or on its way from that branch's target to
 * the iretq with an IRET frame to user mode (no breakpoint there: a mark made now would outlive
 * the return, whether the branch was hit or not armed when the thread took it; the same code
 * serves returns to the kernel, which the frame's CS tells apart: one 8-byte read), or an
 * interrupt taken at the clear (a chain frame exactly there: the
 * event came before the stepped clear ran, its frame keeps RF, and its IRET passes the clear
 * with no hit)? The instruction runs next, with no hit: it clears a flag set now itself, and a
 * trap armed now is not hit by it, so a mark made now would outlive its return unseen (nested
 * runs: 156 of 160 unseen returns were samples on the clear, most of the rest interrupts taken
 * there). Such a sample is resolved at once, as one in the exit tail: pt_regs are what the
 * thread returns with or, on the loop's clear, the entry's registers its samples belong to.
 * An interrupted clear whose frame had no RF is hit after all and finds no mark (one no-mark
 * hit); so is a clear right after a call, whose return address would look the same (not the
 * 6.1 loop's: a jcc precedes it). Either way the walk made is the right one.
 */
static bool on_stepped_site(const struct svcpu *sv, const struct hvp_sample *smp,
			    const struct gi_paging *pg)
{
	const struct sampler *s = sv->s;

	if (!s->traps.available || !atomic_load_explicit(&s->traps.ready, memory_order_acquire))
		return false;
	if (sv->stepped_pc && smp->rip == sv->stepped_pc && sv->sample_vcpu_regs &&
	    (sv->sample_vcpu_regs->rflags & VMM_RFLAGS_RF))
		return true;
	/* from the target of the branch to the iretq (the trap strategy's site where the image
	 * has it) to the iretq nothing more is hit: past it once this vCPU's last hit stepped or
	 * completed that branch, or (the branch not armed when the thread took it) when the IRET
	 * frame at RSP goes to user mode; the same code returns to the kernel too */
	if (s->traps.sites.iret_user && smp->rip >= s->traps.sites.iret_user_target &&
	    smp->rip <= s->traps.sites.iret) {
		uint64_t cs, at;

		if (sv->stepped_pc == s->traps.sites.iret_user)
			return true;
		if (sv->sample_vcpu_regs &&
		    !__builtin_add_overflow(sv->sample_vcpu_regs->rsp, 8, &at) &&
		    gi_read_gva(s->mem, pg, at, &cs, sizeof(cs)) == 0 && (cs & 3) == 3)
			return true;
	}
	for (unsigned int k = 0; s->traps.flag && k < s->traps.n_loops && k < GI_EW_COPIES; k++) {
		uint64_t clear = s->traps.ew[k].clear;

		for (unsigned int i = 1; clear && i < smp->n_kernel && i < HVP_MAX_CALLCHAIN; i++)
			if (smp->kernel_ips[i] == clear)
				return true;
	}
	return false;
}

/*
 * The user part of a kernel-mode sample of a user thread. Deferred: mark the thread and leave
 * the walk to its return to user (the sample carries the mark's cookie); eager, or when no mark
 * is free: walk now. @entry: the user registers of the kernel entry if already known (SYSCALL
 * caught at CPL3), else they are read from pt_regs. @exiting: the thread's mm is gone (it is in
 * exit_mmap: its user memory is being torn down and it never returns to user): the mark keeps
 * the walk made at its first sample, while the stack still exists.
 */
void user_part_of_kernel_sample(struct svcpu *sv, struct hvp_sample *smp, uint64_t task,
				const struct gi_paging *pg, const struct gi_user_regs *entry,
				bool exiting, uint64_t mm, bool execve)
{
	struct sampler *s = sv->s;
	struct gi_user_regs ur;
	struct gi_paging upg;
	struct mark_req req = { .task = task, .pid = smp->pid, .pg = pg, .entry = &ur,
				.entry_known = true, .exiting = exiting, .mm = mm, .execve = execve,
				.exit_tail = s->traps.flag && in_exit_tail(sv, smp, task),
				.now_ns = smp->time_ns + sampler_start_ns(s) };
	/* deferred unless the host never delivered a breakpoint (marks.c, note_unseen_return) */
	bool defer = s->callchain != SAMPLER_CALLCHAIN_EAGER &&
		     !atomic_load_explicit(&s->bp_dead, memory_order_relaxed);
	enum hvp_walk_stop why;
	unsigned int n = 0;

	/* Between switch_mm's CR3 write and switch_to's update of current, CR3 is already the next
	 * task's: this task's user memory is read through its own mm->pgd. An mm's pgd is set at
	 * its creation and kept for its life, so a CR3 that is the root last read for this mm
	 * needs no read (the common case: one compare). */
	if (mm && !entry) {
		uint64_t root, cur = pg->user_cr3 ? pg->user_cr3 : pg->cr3;

		if (atomic_load_explicit(&s->pti, memory_order_relaxed) == GI_PTI_ON)
			cur &= ~GI_PTI_USER_BIT;
		cur &= 0x000ffffffffff000ull;
		if ((mm != sv->root_mm || cur != sv->root_gpa) &&
		    gi_mm_user_root(s->gi, s->mem, pg, mm, &root) == 0) {
			sv->root_mm = mm;
			sv->root_gpa = root;
			if (root != cur) {
				upg = *pg;
				upg.user_cr3 = root;
				pg = &upg;
				req.pg = pg;
				sv->c.user_root_switched++;
			}
		}
	}
	if (entry)
		ur = *entry;
	else if ((sv->sample_kstack_kva && sv->sample_kstack_task == task
			  ? gi_stack_user_regs(s->gi, s->mem, pg, sv->sample_kstack_kva, &ur)
			  : gi_task_user_regs(s->gi, s->mem, pg, task, &ur)) != 0) {
		sv->c.user_regs_unreadable++;
		if (exiting) /* the README promises a visible frame for every missing user part */
			smp->user_stop = HVP_WALK_LOST;
		return;
	} else if (gi_in_entry_window(s->gi, smp->rip) ||
		   (smp->n_kernel > 1 && gi_in_entry_save_call(s->gi, smp->kernel_ips[1]))) {
		/* pt_regs may still be the previous entry's (in the entry code, or in sync_regs()
		 * while it copies them there: a sample in the copy read the previous entry's, and
		 * the next sample of the same entry took the new ones for a return no breakpoint
		 * saw): the entry's own frame tells (in every mode: a deferred mark needs the
		 * system call's number too, walk_at_mark, or an rt_sigreturn's would be resolved
		 * with the restored context) */
		req.entry_known = entry_user_regs(sv, task, &ur, &req.window);
	}
	if (!req.exit_tail && on_stepped_site(sv, smp, pg)) {
		req.exit_tail = true;
		sv->c.tail_stepped_site++;
	}
	if (defer && req.entry_known && !execve && !exiting &&
	    s->callchain == SAMPLER_CALLCHAIN_DEFERRED &&
	    (req.exit_tail || stay_walk_now(sv, &ur, &req.explore)) &&
	    !marks_has(sv, task, smp->pid)) {
		/* No mark of this stay, and either past its last read of the flags (the exit
		 * tail: the registers it returns with are @ur, and the return would walk them as
		 * they are now) or an entry whose stays see too few samples for a mark to pay
		 * (struct stay_stat: the return's exit costs more than the walks it saves, and
		 * pt_regs are what it returns with). The walk goes into the sample itself, as an
		 * eager one: no mark, no exit, no USER_STACK record. In "both" mode the mark is
		 * kept, so that the deferred walk is cross-checked. */
		if (req.exit_tail)
			sv->c.tail_walked_inline++;
		else
			sv->c.stay_walked_inline++;
	} else if (defer) {
		smp->cookie = marks_take(sv, &req);
		if (!smp->cookie && !atomic_load(&s->sampling_start))
			return; /* sampling stopped (a detach): this sample goes nowhere */
		if (smp->cookie && req.exit_tail && !execve && !exiting) {
			/* past its last read of the flags, the thread returns with pt_regs as
			 * they are now: its return resolves the mark, here (one walk, as at
			 * the return; no breakpoint to arm) */
			marks_resolve_at_return(sv, task, smp->pid, mm, pg, &ur);
			sv->c.marks_resolved_in_tail++;
		}
		if (smp->cookie && (!req.entry_known || execve ||
				    s->callchain == SAMPLER_CALLCHAIN_DEFERRED)) {
			/* not known: the eager walk would read a stale pt_regs, only the return tells */
			smp->user_stop = HVP_WALK_DEFERRED;
			smp->n_user = 0;
			return;
		}
	}
	if (execve) {
		/* The old program's registers (pt_regs until start_thread) would be walked through
		 * the new program's page tables, and named by whichever program's mappings are
		 * current: garbage that changes from run to run. The user part is lost, with its
		 * reason (a deferred mark made before the switch keeps its walk: marks_take). */
		smp->user_stop = HVP_WALK_EXECVE;
		smp->n_user = 0;
		sv->c.user_execve++;
		return;
	}
	if (!req.entry_known) {
		sv->c.user_regs_entry_unsaved++;
		smp->user_stop = HVP_WALK_LOST;
		smp->n_user = 0;
		return;
	}
	sample_regs_take(sv, pg, &ur, task, mm); /* pt_regs (or the caught SYSCALL's) */
	why = user_walk(sv, pg, &ur, &sv->sample_regs, smp->user_ips, &n, true);
	smp->n_user = (uint16_t)n;
	smp->user_stop = (uint8_t)why;
	if (smp->cookie) /* both: the eager walk stays in the sample as a cross-check */
		smp->user_stop = HVP_WALK_DEFERRED;
}

/* The guest registers a sample reads, from the vCPU's registers. */
static void regs_of(struct svcpu *sv, const struct kvm_regs *regs, const struct kvm_sregs *sregs,
		    uint8_t cpl, struct gi_regs *gr)
{
	memset(gr, 0, sizeof(*gr));
	gr->rip = regs->rip;
	gr->rsp = regs->rsp;
	gr->rbp = regs->rbp;
	gr->cpl = cpl;
	gr->gs_base = sregs->gs.base;
	gr->pg = sampler_exit_paging(sv, sregs);
	gr->kernel_gs_base = kernel_gs_base(sv, &gr->pg, sregs, cpl);
	gr->r10 = regs->r10; /* where ORC may find the caller's stack (entry code, alignment) */
	gr->r13 = regs->r13;
	gr->rdx = regs->rdx;
	gr->rdi = regs->rdi;
	gr->have_scratch = true;
	/* gr->pg walks through the vCPU's translation cache (sampler_exit_paging). Between exits
	 * only the direct map's translations are kept (learn_direct_map): everything else,
	 * vmalloc'ed task stacks (VMAP_STACK) and per-CPU chunks, module and user pages, is
	 * walked again. */
}

#define GIB (1ull << 30)
#define KERNEL_IMAGE_MAP 0xffffffff80000000ull /* __START_KERNEL_map, 4- and 5-level */

/*
 * The direct map's offset (page_offset_base), learned from a task's translation: a task_struct
 * is a slab object, and slab pages are always in the direct map, where gva - gpa is that offset
 * for all of RAM and never changes (pages may be made not present there, for secretmem or
 * vmalloc aliases, but never mapped elsewhere; a read through a kept translation names the
 * same physical page as the kernel's own alias). The range [offset, offset + RAM) holds nothing
 * else (the KASLR regions do not overlap), so any translation with that gva - gpa is the direct
 * map's, and pgwalk keeps exactly those across samples. Guarded against a task that is not a
 * slab object: pid 0 (CPU 0's idle task is init_task, in the kernel image), and the offset must
 * be 1 GiB-aligned (KASLR places the regions at PUD_SIZE) and below the kernel image mapping.
 * Learned once per vCPU; the guest cannot move its direct map without rebooting.
 */
static void learn_direct_map(struct svcpu *sv, const struct gi_paging *pg, uint64_t task,
			     int32_t pid)
{
	uint64_t gpa, delta;

	if (sv->tcache.keep || pid <= 0 || gi_gva_to_gpa(sv->s->mem, pg, task, &gpa, NULL,
							    NULL) != 0)
		return;
	delta = task - gpa;
	if (!gi_is_kernel_gva(pg, delta) || (delta & (GIB - 1)) || delta >= KERNEL_IMAGE_MAP)
		return;
	pgwalk_cache_keep_linear(&sv->tcache, delta);
}

static void sample_init(struct svcpu *sv, struct hvp_sample *smp, uint64_t t0, uint64_t period,
			const struct kvm_regs *regs, const struct kvm_sregs *sregs)
{
	struct sampler *s = sv->s;

	smp->time_ns = t0 - sampler_start_ns(s);
	smp->vcpu = sv->index;
	smp->cpl = (uint8_t)(sregs->cs.selector & 3);
	smp->flags = smp->cpl == 3 ? HVP_SAMPLE_USER : 0;
	smp->rip = regs->rip;
	smp->cr3 = sregs->cr3;
	smp->task = 0;
	smp->pid = smp->tgid = -1;
	smp->cookie = 0;
	smp->period = period; /* the counter's count since the vCPU's previous sample */
	smp->n_kernel = smp->n_user = 0;
	smp->kernel_stop = smp->user_stop = HVP_WALK_NONE;
	sv->sample_has_regs = false;
	sv->sample_kstack_kva = sv->sample_kstack_task = 0;
}

/* The callchains of a sample whose thread is known (@task 0: not known). @k_now: now (stage
 * clock ticks), the start of the kernel unwind's time. */
static void callchains(struct svcpu *sv, struct hvp_sample *smp, const struct kvm_regs *regs,
		       const struct gi_regs *gr, uint64_t task, bool exiting, uint64_t k_now,
		       uint64_t mm, bool execve)
{
	struct sampler *s = sv->s;
	bool user_thread = task && !(smp->flags & HVP_SAMPLE_KTHREAD);
	enum hvp_walk_stop why;
	unsigned int n = 0;

	if (smp->cpl == 3 && gi_is_kernel_gva(&gr->pg, regs->rip)) {
		/* CPL3 with RIP in the kernel: a SYSCALL caught between the instruction and the
		 * VMM's completion of it (PVM). It is a kernel entry: RIP = LSTAR, and the user
		 * state is RCX (return address), RSP and RBP. */
		struct gi_user_regs ur;

		user_regs_from_vcpu(regs, regs->rcx, regs->rsp, &ur);
		/* a 64-bit SYSCALL (LSTAR is the 64-bit entry): RAX holds the system call number
		 * the kernel will save as pt_regs.orig_ax */
		ur.orig_ax = regs->rax;
		ur.cs = SAMPLER_USER_CS_64;
		ur.entry_known = true;
		smp->cpl = 0;
		smp->flags &= (uint8_t)~HVP_SAMPLE_USER;
		smp->kernel_ips[0] = regs->rip;
		smp->n_kernel = 1;
		smp->kernel_stop = HVP_WALK_END;
		sv->c.samples_kernel++;
		if (user_thread)
			user_part_of_kernel_sample(sv, smp, task, &gr->pg, &ur, exiting, mm,
						   execve);
	} else if (smp->cpl == 3) {
		struct gi_user_regs ur;

		user_regs_from_vcpu(regs, regs->rip, regs->rsp, &ur);
		sample_regs_take(sv, &gr->pg, &ur, task, mm);
		why = user_walk(sv, &gr->pg, &ur, &sv->sample_regs, smp->user_ips, &n, true);
		smp->n_user = (uint16_t)n;
		smp->user_stop = (uint8_t)why;
		sv->c.samples_user++;
		if (!atomic_load(&s->first_user_ns))
			atomic_store(&s->first_user_ns, smp->time_ns);
	} else {
		why = gi_unwind_kernel(s->gi, s->mem, gr, task, smp->kernel_ips, HVP_MAX_CALLCHAIN,
				       &n);
		smp->n_kernel = (uint16_t)n;
		smp->kernel_stop = (uint8_t)why;
		count_walk_stop(sv, why, false);
		sv->c.samples_kernel++;
		sv->c.sample_ns_kernel_unwind += stage_ns(&s->clock, stage_now(&s->clock) - k_now);
		if (user_thread && !execve &&
		    gi_chain_past_exec_switch(s->gi, smp->rip, smp->kernel_ips + 1,
					      smp->n_kernel > 1 ? smp->n_kernel - 1u : 0u)) {
			/* a task never sampled before its execve's switch of mm (note_identity
			 * had no old mm to compare with): pt_regs are the old program's */
			execve = true;
			sv->c.execve_past_switch++;
		}
		if (user_thread) {
			sv->sample_vcpu_regs = regs;
			sv->sample_gi_regs = gr;
			user_part_of_kernel_sample(sv, smp, task, &gr->pg, NULL, exiting, mm,
						   execve);
			sv->sample_vcpu_regs = NULL;
			sv->sample_gi_regs = NULL;
		}
	}
}

/* The SAMPLE record, and right after it the USER_REGS of its user walk if one was made. */
static void write_sample(struct svcpu *sv, const struct hvp_sample *smp)
{
	const struct sampler_sink *sink = sv->s->cfg.sink;
	struct hvp_user_regs *r = sv->sample_has_regs ? &sv->sample_regs : NULL;

	if (r) {
		r->time_ns = smp->time_ns;
		r->cookie = smp->cookie;
		r->pid = smp->pid;
		r->follows = HVP_USER_REGS_AFTER_SAMPLE;
	}
	if (sink->sample(sink->ctx, smp, r) != 0) {
		sv->c.samples_sink_errors++;
		sampler_fail(sv->s, "the recording could not be written");
	} else if (r) {
		sv->c.user_regs++;
	}
}

/* The upper bounds (ns) of the workload_sample_le_* counters, in their order; the last counter,
 * workload_sample_over_32000ns, takes the rest. */
static const uint64_t workload_bucket_ns[] = { 250,  500,  750,  1000, 1250, 1500, 1750,  2000,
					       2500, 3000, 4000, 6000, 8000, 16000, 32000 };

_Static_assert(offsetof(struct sampler_counters, workload_sample_over_32000ns) -
			       offsetof(struct sampler_counters, workload_sample_le_250ns) ==
		       sizeof(uint64_t) * (sizeof(workload_bucket_ns) / sizeof(uint64_t)),
	       "one workload_sample_le_* counter per bound, in order, then the over counter");

void count_in_workload(struct svcpu *sv, uint64_t ns, bool user)
{
	/* the counters as the uint64_t array they are (as sampler_get_counters sums them) */
	uint64_t *bucket = (uint64_t *)&sv->c +
			   offsetof(struct sampler_counters, workload_sample_le_250ns) /
				   sizeof(uint64_t);
	size_t i = 0;

	sv->c.samples_in_workload++;
	sv->c.sample_ns_in_workload += ns;
	if (user) {
		sv->c.samples_in_workload_user++;
		sv->c.sample_ns_in_workload_user += ns;
	}
	while (i < sizeof(workload_bucket_ns) / sizeof(workload_bucket_ns[0]) &&
	       ns > workload_bucket_ns[i])
		i++;
	/* SAFETY: i <= 15, and the 16 counters from workload_sample_le_250ns are contiguous
	 * uint64_t fields of the struct (static assertion above). */
	bucket[i]++;
}

int sample_take(struct svcpu *sv)
{
	struct kvm_regs *regs;
	struct kvm_sregs *sregs;
	uint64_t t0 = vmm_now_ns(), period;
	/* without the TSC the stage clock is vmm_now_ns(): t0 itself, not a second read */
	uint64_t k0 = sv->s->clock.tsc ? stage_tsc() : t0;

	if (!sv->s->gi || !sv->s->cfg.sink || vmm_vcpu_regs(sv->v, &regs, &sregs) != 0)
		return 0;
	/* read for every overflow, recorded or not: the next sample weighs only what follows */
	period = counter_period(sv).period;
	return sample_from_regs(sv, regs, sregs, period, t0, k0);
}

int sample_from_regs(struct svcpu *sv, const struct kvm_regs *regs,
		     const struct kvm_sregs *sregs, uint64_t period, uint64_t t0, uint64_t k0)
{
	struct sampler *s = sv->s;
	const struct sampler_sink *sink = s->cfg.sink;
	struct hvp_sample *smp = &sv->sample;
	struct gi_regs gr;
	struct hvp_thread thr;
	struct gi_thread_state st = { 0 };
	uint64_t k1, k2, ns, task = 0;
	bool exiting = false, execve = false;

	if (!s->gi || !sink)
		return 0;
	if (!(sregs->efer & EFER_LMA)) {
		/* not in long mode yet (an AP before its startup IPI): no guest to sample */
		sv->c.samples_not_long_mode++;
		return 0;
	}
	k1 = stage_now(&s->clock);
	sv->c.sample_ns_regs += stage_ns(&s->clock, k1 - k0);
	if ((sregs->cs.selector & 3) == 0)
		kwatch_kernel(sv, sregs);
	else
		kwatch_user(sv, sregs);
	sample_init(sv, smp, t0, period, regs, sregs);
	regs_of(sv, regs, sregs, smp->cpl, &gr);

	sv->sample_map_count = -1; /* note_identity reads it */
	if (gi_current_thread_cached(s->gi, s->mem, &gr, &sv->tasks, &task, &thr, &st) == 0) {
		st.cached ? sv->c.ident_cache_hits++ : sv->c.ident_cache_misses++;
		/* also on a cached identity: a return trap may have filled the task cache first */
		learn_direct_map(sv, &gr.pg, task, thr.pid);
		smp->task = task;
		smp->pid = thr.pid;
		smp->tgid = thr.tgid;
		if (thr.kthread)
			smp->flags |= HVP_SAMPLE_KTHREAD;
		exiting = st.exiting;
		execve = note_identity(sv, &thr, st.mm, &gr.pg);
		if (smp->cpl == 0) { /* its kernel stack: known pages are not walked again */
			sv->c.kstack_pages_seeded +=
				gi_task_stack_seed(s->gi, s->mem, &gr.pg, &sv->tasks, task,
						   &sv->sample_kstack_kva);
			sv->sample_kstack_task = task;
			gr.task_stack = sv->sample_kstack_kva; /* the unwind's, read once */
		}
	} else {
		smp->flags |= HVP_SAMPLE_NO_TASK;
		sv->c.samples_no_task++;
		task = 0;
	}
	k2 = stage_now(&s->clock);
	sv->c.sample_ns_identity += stage_ns(&s->clock, k2 - k1);
	if (exiting && smp->cpl == 0)
		sv->c.samples_exiting++;

	{
		uint64_t unwind_ns = sv->c.sample_ns_kernel_unwind;

		callchains(sv, smp, regs, &gr, task, exiting, k2, st.mm, execve);
		if (smp->cpl == 0 && task)
			gi_task_stack_learn(&gr.pg, &sv->tasks, task);
		sv->c.samples++;
		sv->c.period_total += period;
		marks_expire(sv, t0);
		k1 = stage_now(&s->clock);
		unwind_ns = sv->c.sample_ns_kernel_unwind - unwind_ns;
		ns = stage_ns(&s->clock, k1 - k2);
		/* the unwind's own reading of the clock may round a tick above the whole */
		sv->c.sample_ns_user += ns > unwind_ns ? ns - unwind_ns : 0;
	}
	if (sink->sample)
		write_sample(sv, smp);
	k2 = stage_now(&s->clock);
	sv->c.tcache_kept_hits = sv->tcache.kept_hits;
	sv->c.tcache_memo_hits = sv->tcache.memo_hits;
	sv->c.tcache_memo_stale = sv->tcache.memo_stale;
	sv->c.tcache_hva_reads = sv->tcache.hva_reads;
	sv->c.sample_ns_write += stage_ns(&s->clock, k2 - k1);
	ns = stage_ns(&s->clock, k2 - k0);
	sv->c.sample_ns_total += ns;
	if (atomic_load_explicit(&s->in_workload, memory_order_relaxed))
		count_in_workload(sv, ns, smp->cpl == 3);
	return s->vm && vmm_stopping(s->vm) ? 1 : 0;
}
