// SPDX-License-Identifier: MIT
// The return-to-user trap (../shared/DESIGN.md, mechanism 3): while any thread is marked, a
// hardware breakpoint sits on the guest kernel's sysretq and iretq exit instructions of every
// vCPU. A hit takes the user registers about to be restored, resolves the thread's mark, and
// gets past the instruction by the method this host supports, probed at the first hit:
// RFLAGS.RF (VMX/SVM), or, where RF is ignored (PVM), by completing sysretq/iretq in the VMM
// (SDM vol. 2B, SYSRET and IRET, 64-bit mode).
#define pr_fmt(fmt) "vmm: trap: " fmt
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#include <hvprof/log.h>

#include "vmm_internal.h"

#define MSR_STAR 0xc0000081
#define RFLAGS_RF (1ull << 16)
#define SYSRET_RFLAGS_MASK 0x3c7fd7ull /* bits SYSRET loads from R11 */
#define DR7_L0 (1ull << 0)
#define DR7_L1 (1ull << 2)
#define DR7_L2 (1ull << 4)
#define DR7_FIXED (1ull << 10)

static bool is_canonical(uint64_t va)
{
	return va < 0x0000800000000000ull || va >= 0xffff800000000000ull;
}

/* Exit sites from the kernel's symbols: sysretq is the last instruction before
 * entry_SYSRETQ_end (after swapgs and the VERW alternative), iretq is native_irq_return_iret.
 * The bytes are checked in guest memory at the first hit (sites_verified). */
int traps_setup(struct vmm *vm)
{
	const struct symtab *st;
	uint64_t kva;

	if (!vm->gi)
		return 0;
	st = gi_symtab(vm->gi);
	{
		struct entry_window *w = &vm->entry_window;
		uint64_t a, b;

		if (symtab_find(st, "__entry_text_start", &w->text_start) != 0 ||
		    symtab_find(st, "__entry_text_end", &w->text_end) != 0)
			w->text_start = w->text_end = 0;
		if (symtab_find(st, "syscall_return_via_sysret", &a) == 0 &&
		    symtab_find(st, "entry_SYSRETQ_end", &b) == 0) {
			w->exit1_start = a;
			w->exit1_end = b;
		}
		if (symtab_find(st, "swapgs_restore_regs_and_return_to_usermode", &a) == 0 &&
		    symtab_find(st, "native_irq_return_iret", &b) == 0) {
			w->exit2_start = a;
			w->exit2_end = b + 2;
		}
	}
	if (vm->callchain == VMM_CALLCHAIN_EAGER)
		return 0;
	if (symtab_find(st, "entry_SYSRETQ_end", &kva) == 0)
		vm->traps.sysret_kva = kva - 3; /* sysretq is 48 0f 07 */
	if (symtab_find(st, "native_irq_return_iret", &kva) == 0)
		vm->traps.iret_kva = kva;
	if (!vm->traps.sysret_kva || !vm->traps.iret_kva) {
		pr_warn("the kernel's return-to-user instructions were not found: deferred user "
			"callchains fall back to eager");
		vm->callchain = VMM_CALLCHAIN_EAGER;
		return 0;
	}
	vm->traps.available = true;
	return 0;
}

/* Check once, in guest memory, that the sites hold sysretq (48 0f 07) and iretq (48 cf). */
static bool sites_verified(struct vcpu *vcpu, const struct gi_paging *pg)
{
	static const uint8_t sysretq[3] = { 0x48, 0x0f, 0x07 }, iretq[2] = { 0x48, 0xcf };
	struct vmm *vm = vcpu->vm;
	uint8_t b[3];

	if (gi_read_gva(&vm->gmem, pg, vm->traps.sysret_kva, b, 3) != 0 || memcmp(b, sysretq, 3) ||
	    gi_read_gva(&vm->gmem, pg, vm->traps.iret_kva, b, 2) != 0 || memcmp(b, iretq, 2))
		return false;
	return true;
}

static uint64_t wanted_dr7(struct vcpu *vcpu)
{
	struct vmm *vm = vcpu->vm;
	uint64_t dr7 = 0;

	/* Until the KASLR slide is known the sites' addresses are not final (kaslr.c). */
	if (!atomic_load_explicit(&vm->sites_ready, memory_order_acquire))
		return 0;
	if (vm->pvm.enabled)
		dr7 |= DR7_L0;
	if (vm->traps.available && atomic_load(&vm->marks.pending))
		dr7 |= DR7_L1 | DR7_L2;
	return dr7;
}

static int set_guest_debug(struct vcpu *vcpu, uint64_t dr7)
{
	struct vmm *vm = vcpu->vm;
	struct kvm_guest_debug dbg;

	memset(&dbg, 0, sizeof(dbg));
	if (dr7) {
		dbg.control = KVM_GUESTDBG_ENABLE | KVM_GUESTDBG_USE_HW_BP;
		dbg.arch.debugreg[0] = vm->pvm.pf_entry_kva;
		dbg.arch.debugreg[1] = vm->traps.sysret_kva;
		dbg.arch.debugreg[2] = vm->traps.iret_kva;
		dbg.arch.debugreg[7] = dr7 | DR7_FIXED; /* execute, 1 byte: R/W and LEN bits 0 */
	}
	if (ioctl(vcpu->fd, KVM_SET_GUEST_DEBUG, &dbg) < 0) {
		int err = -errno;

		pr_err("vCPU %u: KVM_SET_GUEST_DEBUG: %s", vcpu->index, hvp_strerror(err));
		return err;
	}
	vcpu->dr7_applied = dr7;
	vcpu->debug_armed = dr7 != 0;
	return 0;
}

int vcpu_debug_update(struct vcpu *vcpu)
{
	uint64_t dr7 = wanted_dr7(vcpu);

	if (dr7 == vcpu->dr7_applied && (vcpu->debug_armed || !dr7))
		return 0;
	return set_guest_debug(vcpu, dr7);
}

void vcpu_debug_disarm(struct vcpu *vcpu)
{
	if (vcpu->fd >= 0 && vcpu->debug_armed && set_guest_debug(vcpu, 0) != 0)
		return;
	if (vcpu->debug_armed)
		vcpu->c.traps_armed_at_end++;
}

/* A segment register from its GDT descriptor (SDM vol. 3A, 3.4.5), for IRET's CS and SS. */
static int segment_from_gdt(struct vcpu *vcpu, const struct kvm_sregs *sregs,
			    const struct gi_paging *pg, uint16_t sel, struct kvm_segment *seg)
{
	uint8_t d[8];
	uint32_t limit;

	if ((sel & ~3u) == 0 || (sel & 4) || (uint32_t)(sel | 7) > sregs->gdt.limit)
		return -EINVAL; /* null, LDT, or beyond the GDT */
	if (gi_read_gva(&vcpu->vm->gmem, pg, sregs->gdt.base + (sel & ~7u), d, sizeof(d)) != 0)
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

static int read_star(struct vcpu *vcpu, uint64_t *star)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e;
	} m;

	if (vcpu->vm->traps.star) {
		*star = vcpu->vm->traps.star;
		return 0;
	}
	memset(&m, 0, sizeof(m));
	m.hdr.nmsrs = 1;
	m.e.index = MSR_STAR;
	if (ioctl(vcpu->fd, KVM_GET_MSRS, &m) != 1)
		return -EIO;
	vcpu->vm->traps.star = m.e.data;
	*star = m.e.data;
	return 0;
}

/* SYSRET to 64-bit user mode: RIP = RCX, RFLAGS from R11, CS/SS from STAR[63:48]. */
static int complete_sysret(struct vcpu *vcpu, struct kvm_regs *regs, struct kvm_sregs *sregs)
{
	uint64_t star;
	uint16_t base;
	int err;

	if (!is_canonical(regs->rcx))
		return -EINVAL; /* the CPU would #GP in the kernel: Linux never does this */
	err = read_star(vcpu, &star);
	if (err)
		return err;
	base = (uint16_t)(star >> 48);
	regs->rip = regs->rcx;
	regs->rflags = (regs->r11 & SYSRET_RFLAGS_MASK) | 2;
	user_segment(&sregs->cs, (uint16_t)((base + 16) | 3), true);
	user_segment(&sregs->ss, (uint16_t)((base + 8) | 3), false);
	vcpu_mark_regs_dirty(vcpu, true, true);
	return 0;
}

/* IRET in 64-bit mode: pop RIP, CS, RFLAGS, RSP, SS (all five, any privilege change). */
static int complete_iret(struct vcpu *vcpu, struct kvm_regs *regs, struct kvm_sregs *sregs,
			 const struct gi_paging *pg, const uint64_t frame[5])
{
	struct kvm_segment cs, ss;
	uint16_t cs_sel = (uint16_t)frame[1], ss_sel = (uint16_t)frame[4];
	int err;

	if (!is_canonical(frame[0]) || !is_canonical(frame[3]))
		return -EINVAL;
	err = segment_from_gdt(vcpu, sregs, pg, cs_sel, &cs);
	if (err)
		return err;
	if ((ss_sel & ~3u) == 0 && (cs_sel & 3) == 0) {
		/* A null SS is legal for a return to CPL0 in 64-bit mode: keep the descriptor,
		 * change the selector. */
		ss = sregs->ss;
		ss.selector = ss_sel;
	} else {
		err = segment_from_gdt(vcpu, sregs, pg, ss_sel, &ss);
		if (err)
			return err;
	}
	regs->rip = frame[0];
	regs->rflags = (frame[2] & 0x3f7fd5ull) | 2;
	regs->rsp = frame[3];
	sregs->cs = cs;
	sregs->ss = ss;
	vcpu_mark_regs_dirty(vcpu, true, true);
	return 0;
}

static int trap_hit(struct vcpu *vcpu, bool is_sysret)
{
	struct vmm *vm = vcpu->vm;
	struct kvm_regs *regs;
	struct kvm_sregs *sregs;
	struct gi_paging pg;
	struct user_regs ur;
	uint64_t frame[5], t0 = vmm_now_ns();
	bool to_user = true;
	int err;

	vcpu->c.traps_hit++;
	err = vcpu_get_regs_rw(vcpu, &regs, &sregs);
	if (err)
		goto fail;
	/* Under PTI, CR3 is already the user one here (not at an iretq back to the kernel, where
	 * the probe decides nothing). */
	pti_probe(vcpu, sregs);
	pg = vcpu_paging(vm, sregs);
	if (is_sysret) {
		ur = (struct user_regs){ regs->rcx, regs->rsp, regs->rbp };
	} else {
		err = gi_read_gva(&vm->gmem, &pg, regs->rsp, frame, sizeof(frame));
		if (err)
			goto fail;
		to_user = (frame[1] & 3) == 3;
		ur = (struct user_regs){ frame[0], frame[3], regs->rbp };
		if (hvp_log_enabled(HVP_LOG_DEBUG, LOG_VMM)) {
			uint64_t orig_ax = 0;

			if (gi_read_gva(&vm->gmem, &pg, regs->rsp - 8, &orig_ax, 8) != 0)
				orig_ax = 0;
			pr_debug(LOG_VMM, "vCPU %u: iretq orig_ax 0x%llx", vcpu->index,
				 (unsigned long long)orig_ax);
		}
		pr_debug(LOG_VMM, "vCPU %u: iretq at rsp 0x%llx: rip 0x%llx cs 0x%llx rflags 0x%llx "
			 "rsp 0x%llx ss 0x%llx", vcpu->index, (unsigned long long)regs->rsp,
			 (unsigned long long)frame[0], (unsigned long long)frame[1],
			 (unsigned long long)frame[2], (unsigned long long)frame[3],
			 (unsigned long long)frame[4]);
	}

	if (vcpu->rf_probe_pc == regs->rip && vcpu->rf_probe_rsp == regs->rsp) {
		/* The same breakpoint again, with no other exit, right after resuming with RF:
		 * RF did not step over it. Seen on PVM for iretq back to kernel mode while RF
		 * worked for other hits, so one failure makes completion the rule from now on. */
		if (atomic_exchange(&vm->traps.step, TRAP_STEP_COMPLETE) != TRAP_STEP_COMPLETE)
			pr_info("RFLAGS.RF does not step over breakpoints here: sysretq/iretq are "
				"completed by hvprof");
		vcpu->rf_probe_pc = 0;
		vcpu->c.traps_hit--; /* counted at the first exit */
	} else if (to_user) {
		struct gi_regs gr = { .rip = regs->rip, .rsp = regs->rsp, .rbp = regs->rbp,
				      .cpl = 0, .gs_base = sregs->gs.base,
				      .kernel_gs_base = vcpu->percpu_base, .pg = pg };
		struct hvp_thread t;
		uint64_t task;

		if (gi_current_task(vm->gi, &vm->gmem, &gr, &task) == 0 &&
		    gi_task_identity(vm->gi, &vm->gmem, &pg, task, &t, NULL) == 0)
			marks_resolve_at_return(vcpu, task, t.pid, &pg, &ur);
		else
			vcpu->c.traps_no_mark++;
	} else {
		vcpu->c.traps_to_kernel++;
	}

	switch (atomic_load(&vm->traps.step)) {
	case TRAP_STEP_UNKNOWN:
	case TRAP_STEP_RF:
		/* Resume with RF; if the very next exit is this breakpoint again, RF failed. */
		regs->rflags |= RFLAGS_RF;
		vcpu_mark_regs_dirty(vcpu, true, false);
		vcpu->rf_probe_pc = regs->rip;
		vcpu->rf_probe_rsp = regs->rsp;
		break;
	default:
		err = is_sysret ? complete_sysret(vcpu, regs, sregs)
				: complete_iret(vcpu, regs, sregs, &pg, frame);
		if (err)
			goto fail;
		pr_debug(LOG_VMM, "vCPU %u: completed %s: rip 0x%llx rsp 0x%llx cs 0x%x ss 0x%x "
			 "rflags 0x%llx", vcpu->index, is_sysret ? "sysretq" : "iretq",
			 (unsigned long long)regs->rip, (unsigned long long)regs->rsp,
			 sregs->cs.selector, sregs->ss.selector, (unsigned long long)regs->rflags);
	}
	vcpu->c.trap_ns_total += vmm_now_ns() - t0;
	return 0;
fail:
	vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: return-to-user trap at 0x%llx failed: %s",
		vcpu->index, (unsigned long long)vcpu->run->debug.arch.pc, hvp_strerror(err));
	return 1;
}

void trap_rf_probe_check(struct vcpu *vcpu)
{
	struct kvm_regs *regs;
	int unknown = TRAP_STEP_UNKNOWN;

	if (!vcpu->rf_probe_pc || vcpu_get_regs(vcpu, &regs, NULL) != 0)
		return;
	if (regs->rip != vcpu->rf_probe_pc || regs->rsp != vcpu->rf_probe_rsp) {
		/* The guest moved past the breakpoint: RF stepped over it (this time). */
		atomic_compare_exchange_strong(&vcpu->vm->traps.step, &unknown, TRAP_STEP_RF);
		vcpu->rf_probe_pc = 0;
	}
}

int debug_exit(struct vcpu *vcpu)
{
	struct vmm *vm = vcpu->vm;
	uint64_t pc = vcpu->run->debug.arch.pc;

	if (!atomic_load_explicit(&vm->sites_ready, memory_order_acquire)) {
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: debug exit at 0x%llx before any breakpoint "
			"was set", vcpu->index, (unsigned long long)pc);
		return 1;
	}
	if (vm->pvm.enabled && pc == vm->pvm.pf_entry_kva) {
		trap_rf_probe_check(vcpu);
		return pvm_fixup_hit(vcpu);
	}
	if (vcpu->rf_probe_pc && pc != vcpu->rf_probe_pc)
		trap_rf_probe_check(vcpu);
	if (vm->traps.available && (pc == vm->traps.sysret_kva || pc == vm->traps.iret_kva)) {
		if (!vm->traps.verified) {
			struct kvm_sregs *sregs;
			struct gi_paging pg;

			if (vcpu_get_regs(vcpu, NULL, &sregs) != 0)
				return 1;
			pg = vcpu_paging(vm, sregs);
			if (!sites_verified(vcpu, &pg)) {
				vmm_end(vm, HVP_END_ERROR, -1,
					"the return-to-user sites 0x%llx/0x%llx do not hold "
					"sysretq/iretq in guest memory",
					(unsigned long long)vm->traps.sysret_kva,
					(unsigned long long)vm->traps.iret_kva);
				return 1;
			}
			vm->traps.verified = true;
		}
		return trap_hit(vcpu, pc == vm->traps.sysret_kva);
	}
	vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: unexpected debug exit at 0x%llx", vcpu->index,
		(unsigned long long)pc);
	return 1;
}
