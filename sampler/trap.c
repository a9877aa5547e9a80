// SPDX-License-Identifier: MIT
// The return-to-user traps (../shared/DESIGN.md, mechanism 3). Guest-visible marks: a marked
// thread has TIF_NOTIFY_RESUME set, so it enters the exit-work loop, whose clear of that flag
// holds a hardware breakpoint from a flagged mark until a hit finds no mark (loop_hit).
// Otherwise (or for a sample in the exit tail), while any thread is marked, a breakpoint sits on
// the guest kernel's sysretq of every vCPU, and on its iretq, or where the image has it on the
// branch to that iretq which only returns to user mode take (the iretq serves returns to the
// kernel too). A hit takes the user registers about to be restored, resolves the thread's mark,
// and gets past the instruction by the method this host supports (vmm_bp_step): RFLAGS.RF
// (VMX/SVM), or, where RF is ignored (PVM), by completing sysretq/iretq/the jump here (SDM vol.
// 2B, SYSRET and IRET, 64-bit mode; vol. 2A, Jcc). The sites come from guestinfo
// (gi_return_sites).
#define pr_fmt(fmt) "sampler: trap: " fmt
#include <errno.h>
#include <string.h>

#include <hvprof/log.h>

#include "sampler_internal.h"

#define MSR_STAR 0xc0000081
#define SYSRET_RFLAGS_MASK 0x3c7fd7ull /* bits SYSRET loads from R11 */
#define RFLAGS_ZF (1ull << 6)

void traps_place(struct sampler *s)
{
	struct gi_exit_work ew[GI_EW_COPIES];
	size_t n;

	if (!s->traps.available || atomic_load(&s->traps.ready) ||
	    atomic_exchange(&s->traps.placing, true))
		return; /* placed, or being placed by another vCPU (which publishes ready) */
	if (gi_return_sites(s->gi, &s->traps.sites) != 0) {
		atomic_store(&s->traps.placing, false); /* the slide is not known yet: later */
		return;
	}
	if (s->traps.flag) {
		if (gi_exit_work(s->gi, ew, &n) != 0 || n != s->traps.n_loops) {
			atomic_store(&s->traps.placing, false);
			return; /* the slide is known for both or neither */
		}
		for (size_t i = 0; i < n; i++)
			vmm_bp_set_addr(s->vm, s->traps.slot_loop[i], ew[i].clear);
		/* set_flag reads ew[0].clear (under the marks lock, after these stores: a mark
		 * taken before them is trapped instead) */
		pthread_mutex_lock(&s->marks.lock);
		memcpy(s->traps.ew, ew, n * sizeof(ew[0]));
		pthread_mutex_unlock(&s->marks.lock);
	}
	vmm_bp_set_addr(s->vm, s->traps.slot_sysret, s->traps.sites.sysret);
	/* interrupt returns: on the branch to the iretq that only returns to user mode take,
	 * where the image has one (not on every interrupt return to the kernel too) */
	vmm_bp_set_addr(s->vm, s->traps.slot_iret, trap_iret_site(&s->traps.sites));
	atomic_store(&s->traps.ready, true);
}

uint64_t trap_iret_site(const struct gi_return_sites *r)
{
	return r->iret_user ? r->iret_user : r->iret;
}

bool trap_sites_verified(const struct sampler *s, const struct gi_paging *pg)
{
	static const uint8_t sysretq[3] = { 0x48, 0x0f, 0x07 }, iretq[2] = { 0x48, 0xcf };
	const struct gi_return_sites *r = &s->traps.sites;
	uint8_t b[sizeof(r->iret_user_bytes)];

	if (gi_read_gva(s->mem, pg, r->sysret, b, 3) != 0 || memcmp(b, sysretq, 3))
		return false;
	if (r->iret_user)
		/* SAFETY: iret_user_len <= sizeof(iret_user_bytes) = sizeof(b) (iretuser.c) */
		return r->iret_user_len >= 2 && r->iret_user_len <= sizeof(b) &&
		       gi_read_gva(s->mem, pg, r->iret_user, b, r->iret_user_len) == 0 &&
		       !memcmp(b, r->iret_user_bytes, r->iret_user_len);
	return gi_read_gva(s->mem, pg, r->iret, b, 2) == 0 && !memcmp(b, iretq, 2);
}

/* A segment register from its GDT descriptor (SDM vol. 3A, 3.4.5), for IRET's CS and SS. */
static int segment_from_gdt(const struct sampler *s, const struct kvm_sregs *sregs,
			    const struct gi_paging *pg, uint16_t sel, struct kvm_segment *seg)
{
	uint8_t d[8];
	uint32_t limit;

	if ((sel & ~3u) == 0 || (sel & 4) || (uint32_t)(sel | 7) > sregs->gdt.limit)
		return -EINVAL; /* null, LDT, or beyond the GDT */
	if (gi_read_gva(s->mem, pg, sregs->gdt.base + (sel & ~7u), d, sizeof(d)) != 0)
		return -EFAULT;
	memset(seg, 0, sizeof(*seg));
	limit = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)(d[6] & 0xf) << 16;
	seg->selector = sel;
	seg->base = (uint64_t)d[2] | (uint64_t)d[3] << 8 | (uint64_t)d[4] << 16 |
		    (uint64_t)d[7] << 24;
	seg->type = d[5] & 0xf;
	seg->s = (d[5] >> 4) & 1;
	seg->dpl = (d[5] >> 5) & 3;
	seg->present = d[5] >> 7;
	seg->avl = (d[6] >> 4) & 1;
	seg->l = (d[6] >> 5) & 1;
	seg->db = (d[6] >> 6) & 1;
	seg->g = d[6] >> 7;
	seg->limit = seg->g ? (limit << 12) | 0xfff : limit;
	if (!seg->present || !seg->s)
		return -EINVAL;
	return 0;
}

static void user_segment(struct kvm_segment *seg, uint16_t sel, bool code)
{
	memset(seg, 0, sizeof(*seg));
	seg->selector = sel;
	seg->limit = 0xffffffff;
	seg->type = code ? 0xb : 0x3;
	seg->s = 1;
	seg->dpl = 3;
	seg->present = 1;
	seg->l = code;
	seg->db = !code;
	seg->g = 1;
}

static int read_star(struct svcpu *sv, uint64_t *star)
{
	struct traps *t = &sv->s->traps;
	int err;

	if (t->star) {
		*star = t->star;
		return 0;
	}
	err = vmm_vcpu_get_msr(sv->v, MSR_STAR, star);
	if (!err)
		t->star = *star;
	return err;
}

/* SYSRET to 64-bit user mode: RIP = RCX, RFLAGS from R11, CS/SS from STAR[63:48]. */
static int complete_sysret(struct svcpu *sv, struct kvm_regs *regs, struct kvm_sregs *sregs,
			   const struct gi_paging *pg)
{
	uint64_t star;
	uint16_t base;
	int err;

	if (!pgwalk_gva_is_canonical(pg, regs->rcx))
		return -EINVAL; /* the CPU would #GP in the kernel: Linux never does this */
	err = read_star(sv, &star);
	if (err)
		return err;
	base = (uint16_t)(star >> 48);
	regs->rip = regs->rcx;
	regs->rflags = (regs->r11 & SYSRET_RFLAGS_MASK) | 2;
	user_segment(&sregs->cs, (uint16_t)((base + 16) | 3), true);
	user_segment(&sregs->ss, (uint16_t)((base + 8) | 3), false);
	vmm_vcpu_regs_dirty(sv->v, true, true);
	return 0;
}

/* IRET in 64-bit mode: pop RIP, CS, RFLAGS, RSP, SS (all five, any privilege change). */
static int complete_iret(struct svcpu *sv, struct kvm_regs *regs, struct kvm_sregs *sregs,
			 const struct gi_paging *pg, const uint64_t frame[5])
{
	struct kvm_segment cs, ss;
	uint16_t cs_sel = (uint16_t)frame[1], ss_sel = (uint16_t)frame[4];
	int err;

	if (!pgwalk_gva_is_canonical(pg, frame[0]) || !pgwalk_gva_is_canonical(pg, frame[3]))
		return -EINVAL;
	err = segment_from_gdt(sv->s, sregs, pg, cs_sel, &cs);
	if (err)
		return err;
	if ((ss_sel & ~3u) == 0 && (cs_sel & 3) == 0) {
		/* A null SS is legal for a return to CPL0 in 64-bit mode: keep the descriptor,
		 * change the selector. */
		ss = sregs->ss;
		ss.selector = ss_sel;
	} else {
		err = segment_from_gdt(sv->s, sregs, pg, ss_sel, &ss);
		if (err)
			return err;
	}
	regs->rip = frame[0];
	regs->rflags = (frame[2] & 0x3f7fd5ull) | 2;
	regs->rsp = frame[3];
	sregs->cs = cs;
	sregs->ss = ss;
	vmm_vcpu_regs_dirty(sv->v, true, true);
	return 0;
}

uint64_t trap_branch_next(const struct gi_return_sites *r, uint64_t rflags)
{
	bool taken = r->iret_user_cond == GI_BRANCH_ALWAYS || !(rflags & RFLAGS_ZF);

	return taken ? r->iret_user_target : r->iret_user + r->iret_user_len;
}

/* The branch to the iretq (gi_return_sites.iret_user) where RF is ignored: done here. */
static int complete_branch(struct svcpu *sv, struct kvm_regs *regs)
{
	regs->rip = trap_branch_next(&sv->s->traps.sites, regs->rflags);
	vmm_vcpu_regs_dirty(sv->v, true, false);
	return 0;
}

enum trap_action trap_decide(bool is_sysret, bool repeat, const struct kvm_regs *regs,
			     const uint64_t frame[5], struct gi_user_regs *ur)
{
	/* The live registers, not pt_regs: at sysretq and iretq the exit path has restored every
	 * general-purpose register from pt_regs already (POP_REGS), so they are the user values
	 * and need no guest read; SYSRET takes RIP from RCX (and RFLAGS from R11, which hold the
	 * same in pt_regs: Linux takes this path only when regs->cx == ip and r11 == flags), IRET
	 * takes RIP and RSP from its frame. */
	if (is_sysret) {
		user_regs_from_vcpu(regs, regs->rcx, regs->rsp, ur);
	} else {
		user_regs_from_vcpu(regs, frame[0], frame[3], ur);
		if (!repeat && (frame[1] & 3) != 3)
			return TRAP_TO_KERNEL;
	}
	return repeat ? TRAP_REPEAT : TRAP_RESOLVE;
}

/* A hit (not a repeat) while the guest's workload runs: traps_in_workload, and whether it found
 * no mark (traps_no_mark moved past @no_mark, its value before the hit). */
static void count_hit_in_workload(struct svcpu *sv, uint64_t no_mark)
{
	if (!atomic_load_explicit(&sv->s->in_workload, memory_order_relaxed))
		return;
	sv->c.traps_in_workload++;
	sv->c.traps_no_mark_in_workload += sv->c.traps_no_mark != no_mark;
}

/* The thread returning to user on @sv: resolve its mark with @ur, or (NULL) with the user
 * registers in its pt_regs. No thread, no pt_regs: traps_no_mark. */
static void resolve(struct svcpu *sv, const struct kvm_sregs *sregs, const struct kvm_regs *regs,
		    const struct gi_paging *pg, const struct gi_user_regs *ur)
{
	struct sampler *s = sv->s;
	struct gi_regs gr = { .rip = regs->rip, .rsp = regs->rsp, .rbp = regs->rbp, .cpl = 0,
			      .gs_base = sregs->gs.base, .kernel_gs_base = sv->percpu_base,
			      .pg = *pg };
	struct gi_thread_state st;
	struct gi_user_regs pt;
	struct hvp_thread t;
	uint64_t task;

	/* a breakpoint caught a return: the host delivers them (sampler_internal.h,
	 * BP_DEAD_UNSEEN); one relaxed load once it is known */
	if (!atomic_load_explicit(&s->bp_fired, memory_order_relaxed))
		atomic_store(&s->bp_fired, true);
	if (gi_current_thread_cached(s->gi, s->mem, &gr, &sv->tasks, &task, &t, &st) != 0 ||
	    (!ur && gi_task_user_regs(s->gi, s->mem, pg, task, &pt) != 0)) {
		sv->c.traps_no_mark++;
		return;
	}
	marks_resolve_at_return(sv, task, t.pid, st.mm, pg, ur ? ur : &pt);
}

void trap_loop_resolve(struct svcpu *sv, const struct kvm_regs *regs,
		       const struct kvm_sregs *sregs, const struct gi_paging *pg)
{
	sv->in_loop_hit = true;
	resolve(sv, sregs, regs, pg, NULL);
	sv->in_loop_hit = false;
}

static int trap_hit(struct svcpu *sv, bool is_sysret, bool repeat)
{
	struct sampler *s = sv->s;
	struct kvm_regs *regs;
	struct kvm_sregs *sregs;
	struct gi_paging pg;
	struct gi_user_regs ur;
	uint64_t frame[5] = { 0 }, k0 = stage_now(&s->clock), no_mark = sv->c.traps_no_mark;
	int err;

	if (!repeat) /* a repeat was counted at its first exit */
		sv->c.traps_hit++;
	err = vmm_vcpu_regs_rw(sv->v, &regs, &sregs);
	if (err)
		goto fail;
	/* Under PTI, CR3 is already the user one here (not at an iretq back to the kernel, where
	 * the probe decides nothing). */
	kwatch_user(sv, sregs);
	pg = sampler_exit_paging(sv, sregs);
	if (!is_sysret) {
		err = gi_read_gva(s->mem, &pg, regs->rsp, frame, sizeof(frame));
		if (err)
			goto fail;
	}
	switch (trap_decide(is_sysret, repeat, regs, frame, &ur)) {
	case TRAP_RESOLVE:
		resolve(sv, sregs, regs, &pg, &ur);
		sv->stepped_pc = regs->rip;
		break;
	case TRAP_TO_KERNEL:
		sv->c.traps_to_kernel++;
		sv->stepped_pc = 0; /* back to the kernel: a sample here is mid-stay */
		break;
	case TRAP_REPEAT:
		break;
	}
	if (!repeat)
		count_hit_in_workload(sv, no_mark);
	/* Past the instruction: RF where the host honours it, else complete it here. */
	err = vmm_bp_step(sv->v);
	if (err == -ENOTSUP)
		err = is_sysret		       ? complete_sysret(sv, regs, sregs, &pg)
		      : s->traps.sites.iret_user ? complete_branch(sv, regs)
						 : complete_iret(sv, regs, sregs, &pg, frame);
	if (err)
		goto fail;
	sv->c.trap_ns_total += stage_ns(&s->clock, stage_now(&s->clock) - k0);
	return 0;
fail:
	vmm_end(s->vm, HVP_END_ERROR, -1, "vCPU %u: return-to-user trap failed: %s", sv->index,
		hvp_strerror(err));
	return 1;
}

/* The kvm_regs field of GPR number @n (x86 encoding: 0 rax, 1 rcx, ... 15 r15). */
static __u64 *gpr(struct kvm_regs *r, int n)
{
	__u64 *const f[16] = { &r->rax, &r->rcx, &r->rdx, &r->rbx, &r->rsp, &r->rbp, &r->rsi,
				  &r->rdi, &r->r8,  &r->r9,  &r->r10, &r->r11, &r->r12, &r->r13,
				  &r->r14, &r->r15 };

	return f[n & 15];
}

/*
 * Complete the loop's `[lock] and [base + disp], imm` (byte or qword) where the host ignores
 * RFLAGS.RF (PVM): the AND done atomically on guest RAM, RFLAGS as AND sets them (CF = OF = 0;
 * SF, ZF, PF from the result; AF undefined, kept), RIP past it (SDM vol. 2A, AND).
 */
static int complete_clear(struct svcpu *sv, const struct gi_exit_work *w, struct kvm_regs *regs,
			  const struct gi_paging *pg)
{
	uint64_t gva = *gpr(regs, w->clear_base - 1) + (uint64_t)w->clear_disp, gpa, word, old, r;
	unsigned int shift;
	int err;

	if (!w->clear_base)
		return -ENOTSUP;
	err = gi_gva_to_gpa(sv->s->mem, pg, gva, &gpa, NULL, NULL);
	if (err)
		return err;
	if (w->clear_size == 8) {
		if (gpa & 7)
			return -EINVAL;
		err = vmm_gpa_and64(sv->s->vm, gpa, w->clear_imm, &old);
		r = old & w->clear_imm;
	} else {
		word = gpa & ~7ull;
		shift = (unsigned int)(gpa & 7) * 8;
		err = vmm_gpa_and64(sv->s->vm, word, ~((~w->clear_imm & 0xffull) << shift), &old);
		r = (old >> shift) & w->clear_imm & 0xff;
	}
	if (err)
		return err;
	regs->rflags &= ~(uint64_t)(1u << 0 | 1u << 2 | 1u << 6 | 1u << 7 | 1u << 11);
	if (!r)
		regs->rflags |= RFLAGS_ZF;
	if (r >> (w->clear_size * 8 - 1) & 1)
		regs->rflags |= 1u << 7; /* SF */
	if (!(__builtin_popcount((unsigned int)(r & 0xff)) & 1))
		regs->rflags |= 1u << 2; /* PF: even parity of the low byte */
	regs->rip += w->clear_end - w->clear;
	/* RIP and RFLAGS, in the loop's body: no KVM_SET_REGS ioctl where sync regs exist */
	vmm_vcpu_regs_dirty_in_kernel(sv->v);
	return 0;
}

/*
 * The exit-work loop's clear of TIF_NOTIFY_RESUME (guest-visible marks): only a thread with the
 * flag gets there, pt_regs holding the user registers of its kernel entry. Resolve its mark
 * from pt_regs, then get past the instruction: RF where the host honours it, else completed
 * here. A mark taken while the thread was already in this loop (a sample in schedule() called
 * from it) is caught as well: its flag is either seen by this pass's clear or, set after it, by
 * the loop's next pass. @loop: which of the loops (traps.ew), where each exit path holds its own.
 */
static int loop_hit(struct svcpu *sv, unsigned int loop, bool repeat)
{
	struct sampler *s = sv->s;
	const struct gi_exit_work *w = &s->traps.ew[loop];
	struct kvm_regs *regs;
	struct kvm_sregs *sregs;
	struct gi_paging pg;
	uint64_t k0 = stage_now(&s->clock);
	uint8_t b[sizeof(w->clear_bytes)];
	int err;

	err = vmm_vcpu_regs_rw(sv->v, &regs, &sregs);
	if (err)
		goto fail;
	pg = sampler_exit_paging(sv, sregs);
	if (!s->traps.loop_verified[loop]) {
		size_t n = (size_t)(w->clear_end - w->clear);

		bool same = n <= sizeof(b) && gi_read_gva(s->mem, &pg, regs->rip, b, n) == 0;

		/* a uniprocessor kernel turns lock prefixes (f0) into ds (3e) in place
		 * (alternatives_smp_unlock): the same instruction for us */
		if (same && b[0] == 0x3e && w->clear_bytes[0] == 0xf0)
			b[0] = 0xf0;
		if (!same || memcmp(b, w->clear_bytes, n)) {
			vmm_end(s->vm, HVP_END_ERROR, -1, "the exit-work loop's clear of "
				"TIF_NOTIFY_RESUME at 0x%llx is not in guest memory as in the image",
				(unsigned long long)regs->rip);
			return 1;
		}
		s->traps.loop_verified[loop] = true;
	}
	if (!repeat) {
		uint64_t no_mark = sv->c.traps_no_mark;
		bool pending = atomic_load(&s->marks.pending) != 0;

		sv->c.traps_hit++;
		sv->c.loop_hits++;
		sv->c.loop_hits_path2 += loop == 1;
		/* the loop stays armed across marks: with none pending, the kernel's own flag */
		if (!pending)
			sv->c.traps_no_mark++;
		else
			trap_loop_resolve(sv, regs, sregs, &pg);
		if (sv->c.traps_no_mark != no_mark) {
			if (!pending)
				sv->c.loop_hits_idle++;
			else
				sv->c.loop_hits_unmarked++;
			marks_loop_idle(sv); /* armed for nothing: off until the next flagged mark */
		}
		count_hit_in_workload(sv, no_mark);
	}
	sv->stepped_pc = regs->rip;
	err = vmm_bp_step(sv->v);
	if (err == -ENOTSUP)
		err = complete_clear(sv, w, regs, &pg);
	if (err)
		goto fail;
	sv->c.trap_ns_total += stage_ns(&s->clock, stage_now(&s->clock) - k0);
	return 0;
fail:
	vmm_end(s->vm, HVP_END_ERROR, -1, "vCPU %u: exit-work loop trap failed: %s", sv->index,
		hvp_strerror(err));
	return 1;
}

int trap_debug_hook(void *ctx, struct vmm_vcpu *v, int slot, uint64_t pc, bool repeat)
{
	struct sampler *s = ctx;
	unsigned int i = vmm_vcpu_index(v);
	struct svcpu *sv;

	for (unsigned int k = 0; i < s->n_vcpus && s->traps.flag && k < s->traps.n_loops &&
				 k < GI_EW_COPIES; k++)
		if (slot == s->traps.slot_loop[k]) {
			/* SAFETY: i < n_vcpus. */
			s->vcpus[i].v = v;
			return loop_hit(&s->vcpus[i], k, repeat);
		}
	if (i >= s->n_vcpus || !s->traps.available ||
	    (slot != s->traps.slot_sysret && slot != s->traps.slot_iret)) {
		vmm_end(s->vm, HVP_END_ERROR, -1, "vCPU %u: unexpected debug exit at 0x%llx", i,
			(unsigned long long)pc);
		return 1;
	}
	/* SAFETY: i < n_vcpus. */
	sv = &s->vcpus[i];
	sv->v = v;
	if (!s->traps.verified) {
		struct kvm_sregs *sregs;
		struct gi_paging pg;

		if (vmm_vcpu_regs(v, NULL, &sregs) != 0)
			return 1;
		pg = sampler_paging(s, sregs);
		if (!trap_sites_verified(s, &pg)) {
			vmm_end(s->vm, HVP_END_ERROR, -1,
				"the return-to-user sites 0x%llx/0x%llx do not hold "
				"sysretq/%s in guest memory",
				(unsigned long long)s->traps.sites.sysret,
				(unsigned long long)trap_iret_site(&s->traps.sites),
				s->traps.sites.iret_user ? "the image's branch to iretq" : "iretq");
			return 1;
		}
		s->traps.verified = true;
	}
	return trap_hit(sv, slot == s->traps.slot_sysret, repeat);
}
