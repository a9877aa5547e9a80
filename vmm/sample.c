// SPDX-License-Identifier: MIT
// Turning a KVM_EXIT_INTR into a sample: registers (sync regs), the current guest task and its
// identity (guestinfo), callchains, and the THREAD/PROCESS records the first time an identity is
// seen. Nothing here logs per sample: failures are counted.
#define pr_fmt(fmt) "vmm: sample: " fmt
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <hvprof/log.h>

#include "vmm_internal.h"

#define MSR_KERNEL_GS_BASE 0xc0000102
#define IDENT_SLOTS 4096        /* direct-mapped; a collision only re-emits a record */

struct ident_thread {
	int32_t pid;
	int32_t tgid;
	uint64_t task;
	char comm[HVP_COMM_LEN];
};

struct ident_process {
	int32_t tgid;
	uint64_t mm;
};

struct ident_cache {
	struct ident_thread threads[IDENT_SLOTS];
	struct ident_process procs[IDENT_SLOTS];
};

int ident_cache_create(struct vmm *vm)
{
	vm->ident = calloc(1, sizeof(*vm->ident));
	if (!vm->ident)
		return -ENOMEM;
	for (int i = 0; i < IDENT_SLOTS; i++) {
		vm->ident->threads[i].pid = -1;
		vm->ident->procs[i].tgid = -1;
	}
	pthread_mutex_init(&vm->ident_lock, NULL);
	return 0;
}

void ident_cache_destroy(struct vmm *vm)
{
	if (vm->ident)
		pthread_mutex_destroy(&vm->ident_lock);
	free(vm->ident);
	vm->ident = NULL;
}

static bool is_kernel_va(uint64_t va)
{
	return va >= 0xffff800000000000ull;
}

static uint64_t kernel_gs_base(struct vcpu *vcpu, const struct kvm_sregs *sregs, uint8_t cpl)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e;
	} m;

	/* The per-CPU base of a vCPU does not change after boot: remember it once seen. */
	if (cpl == 0 && is_kernel_va(sregs->gs.base))
		vcpu->percpu_base = sregs->gs.base;
	if (vcpu->percpu_base)
		return vcpu->percpu_base;
	memset(&m, 0, sizeof(m));
	m.hdr.nmsrs = 1;
	m.e.index = MSR_KERNEL_GS_BASE;
	if (ioctl(vcpu->fd, KVM_GET_MSRS, &m) == 1 && is_kernel_va(m.e.data))
		vcpu->percpu_base = m.e.data;
	return vcpu->percpu_base;
}

/* Emit THREAD (and PROCESS) records when this identity was not seen before. */
static void note_identity(struct vcpu *vcpu, const struct hvp_thread *t, uint64_t mm,
			  const struct gi_paging *pg)
{
	struct vmm *vm = vcpu->vm;
	const struct vmm_sink *sink = vm->cfg.sink;
	struct ident_thread *it;
	struct ident_process *ip;
	bool new_thread, new_proc = false;

	pthread_mutex_lock(&vm->ident_lock);
	/* SAFETY: pid was validated (0..4194304) by gi_task_identity; the modulo bounds it. */
	it = &vm->ident->threads[(uint32_t)t->pid % IDENT_SLOTS];
	new_thread = it->pid != t->pid || it->task != t->task || it->tgid != t->tgid ||
		     strncmp(it->comm, t->comm, HVP_COMM_LEN) != 0;
	if (new_thread) {
		it->pid = t->pid;
		it->tgid = t->tgid;
		it->task = t->task;
		memcpy(it->comm, t->comm, HVP_COMM_LEN);
	}
	if (!t->kthread && mm) {
		ip = &vm->ident->procs[(uint32_t)t->tgid % IDENT_SLOTS];
		new_proc = ip->tgid != t->tgid || ip->mm != mm;
	}
	if (new_thread) {
		struct hvp_thread rec = *t;

		rec.time_ns = vmm_now_ns() - vm->t_start_ns;
		vcpu->c.threads++;
		if (sink->thread && sink->thread(sink->ctx, &rec))
			vcpu->c.samples_sink_errors++;
	}
	if (new_proc) {
		struct hvp_process proc;

		memset(&proc, 0, sizeof(proc));
		/* During exec the new mm exists before its code range and exe are set: such a
		 * process is not remembered, so a later sample reads it again. */
		if (gi_process_info(vm->gi, &vm->gmem, pg, mm, &proc) == 0 && proc.start_code &&
		    proc.end_code > proc.start_code && proc.exe[0]) {
			ip->tgid = t->tgid;
			ip->mm = mm;
			proc.tgid = t->tgid;
			proc.time_ns = vmm_now_ns() - vm->t_start_ns;
			vcpu->c.processes++;
			if (sink->process && sink->process(sink->ctx, &proc))
				vcpu->c.samples_sink_errors++;
		}
	}
	pthread_mutex_unlock(&vm->ident_lock);
}

static void count_stop(struct vcpu *vcpu, enum hvp_walk_stop why, bool user)
{
	switch (why) {
	case HVP_WALK_FAULT:
		user ? vcpu->c.user_walk_fault++ : vcpu->c.kernel_walk_fault++;
		break;
	case HVP_WALK_BAD_FP:
		user ? vcpu->c.user_walk_bad_fp++ : vcpu->c.kernel_walk_bad_fp++;
		break;
	case HVP_WALK_DEPTH:
		user ? vcpu->c.user_walk_depth++ : vcpu->c.kernel_walk_depth++;
		break;
	default:
		break;
	}
}

/*
 * In the kernel's entry code, before the C handler runs, pt_regs at the top of the task stack
 * may still hold the user registers of the previous kernel entry. The exit paths read a complete
 * pt_regs, so they are not in the window.
 */
static bool in_entry_window(const struct vmm *vm, uint64_t rip)
{
	const struct entry_window *w = &vm->entry_window;

	if (!atomic_load_explicit(&vm->sites_ready, memory_order_acquire))
		return false; /* addresses not slid yet: the slide is unknown (kaslr.c) */
	if (rip < w->text_start || rip >= w->text_end)
		return false;
	if (rip >= w->exit1_start && rip < w->exit1_end)
		return false;
	if (rip >= w->exit2_start && rip < w->exit2_end)
		return false;
	return true;
}

/*
 * The user part of a kernel-mode sample of a user thread. Deferred: mark the thread and leave
 * the walk to its return to user (the sample carries the mark's cookie); eager, or when no mark
 * is free: walk now. @entry: the user registers of the kernel entry if already known (SYSCALL
 * caught at CPL3), else they are read from pt_regs.
 */
static void user_part_of_kernel_sample(struct vcpu *vcpu, struct hvp_sample *s, uint64_t task,
				       const struct gi_paging *pg, const struct user_regs *entry)
{
	struct vmm *vm = vcpu->vm;
	struct user_regs ur;
	enum hvp_walk_stop why;
	unsigned int n = 0;
	bool is_new, known = true;

	if (entry)
		ur = *entry;
	else if (user_regs_at_entry(vm, pg, task, &ur) != 0) {
		vcpu->c.user_regs_unreadable++;
		return;
	} else if (in_entry_window(vm, s->rip)) {
		known = false;
	}
	if (vm->callchain != VMM_CALLCHAIN_EAGER) {
		s->cookie = marks_take(vcpu, task, s->pid, pg, &ur, known, &is_new);
		if (s->cookie && !known) {
			/* the eager walk would read a stale pt_regs: only the return tells */
			s->user_stop = HVP_WALK_DEFERRED;
			s->n_user = 0;
			return;
		}
		if (s->cookie && vm->callchain == VMM_CALLCHAIN_DEFERRED) {
			s->user_stop = HVP_WALK_DEFERRED;
			s->n_user = 0;
			return;
		}
	}
	why = gi_unwind_user(&vm->gmem, pg, ur.ip, ur.sp, ur.bp, s->user_ips, HVP_MAX_CALLCHAIN,
			     &n);
	s->n_user = (uint16_t)n;
	s->user_stop = (uint8_t)why;
	count_stop(vcpu, why, true);
	if (s->cookie) /* both: the eager walk stays in the sample as a cross-check */
		s->user_stop = HVP_WALK_DEFERRED;
}

void sample_take(struct vcpu *vcpu)
{
	struct vmm *vm = vcpu->vm;
	const struct vmm_sink *sink = vm->cfg.sink;
	struct hvp_sample *s = &vcpu->sample;
	struct kvm_regs *regs;
	struct kvm_sregs *sregs;
	struct gi_regs gr;
	struct hvp_thread thr;
	uint64_t t0 = vmm_now_ns(), task = 0, mm = 0;
	unsigned int n;
	enum hvp_walk_stop why;

	uint64_t t1, t2, t3, t4;

	if (!vm->gi || !sink || vcpu_get_regs(vcpu, &regs, &sregs) != 0)
		return;
	if (!(sregs->efer & (1ull << 10))) {
		/* not in long mode yet (an AP before its startup IPI): no guest to sample */
		vcpu->c.samples_not_long_mode++;
		return;
	}
	t1 = vmm_now_ns();
	vcpu->c.sample_ns_regs += t1 - t0;
	if ((sregs->cs.selector & 3) == 0)
		kaslr_check(vcpu, sregs);
	else
		pti_probe(vcpu, sregs);
	s->time_ns = t0 - vm->t_start_ns;
	s->vcpu = vcpu->index;
	s->cpl = (uint8_t)(sregs->cs.selector & 3);
	s->flags = s->cpl == 3 ? HVP_SAMPLE_USER : 0;
	s->rip = regs->rip;
	s->cr3 = sregs->cr3;
	s->task = 0;
	s->pid = s->tgid = -1;
	s->cookie = 0;
	s->period = vm->counter == VMM_COUNTER_CPU_CLOCK ? 1000000000ull / vm->cfg.sample_hz : 0;
	s->n_kernel = s->n_user = 0;
	s->kernel_stop = s->user_stop = HVP_WALK_NONE;

	memset(&gr, 0, sizeof(gr));
	gr.rip = regs->rip;
	gr.rsp = regs->rsp;
	gr.rbp = regs->rbp;
	gr.cpl = s->cpl;
	gr.gs_base = sregs->gs.base;
	gr.kernel_gs_base = kernel_gs_base(vcpu, sregs, s->cpl);
	gr.r10 = regs->r10; /* where ORC may find the caller's stack (entry code, alignment) */
	gr.r13 = regs->r13;
	gr.rdx = regs->rdx;
	gr.rdi = regs->rdi;
	gr.have_scratch = true;
	gr.pg = vcpu_paging(vm, sregs);
	/* The vCPU is stopped while its sample is taken: its page tables' translations hold for
	 * the whole sample (other vCPUs' changes within these microseconds are not seen). */
	pgwalk_cache_invalidate(&vcpu->tcache);
	gr.pg.cache = &vcpu->tcache;

	if (gi_current_task(vm->gi, &vm->gmem, &gr, &task) == 0 &&
	    gi_task_identity(vm->gi, &vm->gmem, &gr.pg, task, &thr, &mm) == 0) {
		s->task = task;
		s->pid = thr.pid;
		s->tgid = thr.tgid;
		if (thr.kthread)
			s->flags |= HVP_SAMPLE_KTHREAD;
		note_identity(vcpu, &thr, mm, &gr.pg);
	} else {
		s->flags |= HVP_SAMPLE_NO_TASK;
		vcpu->c.samples_no_task++;
		task = 0;
	}
	t2 = vmm_now_ns();
	vcpu->c.sample_ns_identity += t2 - t1;
	t3 = t2;

	if (s->cpl == 3 && is_kernel_va(regs->rip)) {
		/* CPL3 with RIP in the kernel: a SYSCALL caught between the instruction and the
		 * VMM's completion of it (PVM). It is a kernel entry: RIP = LSTAR, and the user
		 * state is RCX (return address), RSP and RBP. */
		s->cpl = 0;
		s->flags &= (uint8_t)~HVP_SAMPLE_USER;
		s->kernel_ips[0] = regs->rip;
		s->n_kernel = 1;
		s->kernel_stop = HVP_WALK_END;
		vcpu->c.samples_kernel++;
		if (task && !(s->flags & HVP_SAMPLE_KTHREAD)) {
			struct user_regs ur = { regs->rcx, regs->rsp, regs->rbp };

			user_part_of_kernel_sample(vcpu, s, task, &gr.pg, &ur);
		}
	} else if (s->cpl == 3) {
		why = gi_unwind_user(&vm->gmem, &gr.pg, regs->rip, regs->rsp, regs->rbp,
				     s->user_ips, HVP_MAX_CALLCHAIN, &n);
		s->n_user = (uint16_t)n;
		s->user_stop = (uint8_t)why;
		count_stop(vcpu, why, true);
		vcpu->c.samples_user++;
		if (!atomic_load(&vm->first_user_ns))
			atomic_store(&vm->first_user_ns, s->time_ns);
	} else {
		why = gi_unwind_kernel(vm->gi, &vm->gmem, &gr, task, s->kernel_ips,
				       HVP_MAX_CALLCHAIN, &n);
		s->n_kernel = (uint16_t)n;
		s->kernel_stop = (uint8_t)why;
		count_stop(vcpu, why, false);
		vcpu->c.samples_kernel++;
		t3 = vmm_now_ns();
		vcpu->c.sample_ns_kernel_unwind += t3 - t2;
		if (task && !(s->flags & HVP_SAMPLE_KTHREAD))
			user_part_of_kernel_sample(vcpu, s, task, &gr.pg, NULL);
	}

	vcpu->c.samples++;
	marks_expire(vcpu, t0);
	t4 = vmm_now_ns();
	vcpu->c.sample_ns_user += t4 - t3;
	if (sink->sample && sink->sample(sink->ctx, s) != 0) {
		vcpu->c.samples_sink_errors++;
		vmm_end(vm, HVP_END_ERROR, -1, "the recording could not be written");
	}
	t1 = vmm_now_ns();
	vcpu->c.sample_ns_write += t1 - t4;
	vcpu->c.sample_ns_total += t1 - t0;
}
