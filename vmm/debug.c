// SPDX-License-Identifier: MIT
// Hardware breakpoints shared by the VMM and its riders: four execute breakpoints (DR0-DR3,
// KVM_SET_GUEST_DEBUG with KVM_GUESTDBG_USE_HW_BP) whose addresses and armed bits are VM-wide;
// every vCPU applies them before its next KVM_RUN. Slot 0 is the PVM SYSCALL fix-up's on PVM
// hosts, a rider's elsewhere. Getting past a breakpoint: RFLAGS.RF where the host honours it
// (VMX/SVM), probed at the first step; on hosts that ignore it (PVM) the rider completes the
// instruction itself.
#define pr_fmt(fmt) "vmm: debug: " fmt
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#include <hvprof/log.h>

#include "vmm_internal.h"

#define DR7_FIXED (1ull << 10)

/* The slots riders may have: all four, but slot 0 on PVM, where the SYSCALL fix-up holds it. */
static int first_rider_slot(const struct vmm *vm)
{
	return vm->is_pvm ? VMM_BP_PVM + 1 : 0;
}

int vmm_bp_alloc(struct vmm *vm)
{
	for (int slot = first_rider_slot(vm); slot < VMM_BP_SLOTS; slot++) {
		if (!(vm->bp_used & (1u << slot))) {
			vm->bp_used |= 1u << slot;
			return slot;
		}
	}
	return -ENOSPC;
}

unsigned int vmm_bp_free_slots(const struct vmm *vm)
{
	unsigned int n = 0;

	for (int slot = first_rider_slot(vm); slot < VMM_BP_SLOTS; slot++)
		n += !(vm->bp_used & (1u << slot));
	return n;
}

void vmm_bp_set_addr(struct vmm *vm, int slot, uint64_t gva)
{
	if (slot < 0 || slot >= VMM_BP_SLOTS)
		return;
	atomic_store(&vm->bp_addr[slot], gva);
	atomic_fetch_add(&vm->bp_gen, 1);
}

void vmm_bp_arm(struct vmm *vm, unsigned int mask, bool armed, const struct vmm_vcpu *self)
{
	mask &= (1u << VMM_BP_SLOTS) - 1;
	if (!armed) {
		atomic_fetch_and(&vm->bp_armed, ~mask);
		return;
	}
	if ((atomic_fetch_or(&vm->bp_armed, mask) & mask) == mask)
		return;
	/* The other vCPUs arm at their next exit: make it now (a kick, never a sample). */
	for (unsigned int i = 0; i < vm->n_vcpus; i++)
		if (!self || i != self->index)
			vmm_kick_vcpu(vm, i);
}

unsigned int vmm_bp_armed(const struct vmm *vm)
{
	return vm ? atomic_load(&((struct vmm *)vm)->bp_armed) : 0;
}

/* DR7 local-enable bits of the slots armed with an address (execute, 1 byte: R/W, LEN 0). */
static unsigned int wanted_mask(const struct vmm *vm)
{
	unsigned int armed = atomic_load(&vm->bp_armed), mask = 0;

	for (int slot = 0; slot < VMM_BP_SLOTS; slot++)
		if ((armed & (1u << slot)) && atomic_load(&vm->bp_addr[slot]))
			mask |= 1u << slot;
	return mask;
}

static int set_guest_debug(struct vmm_vcpu *vcpu, unsigned int mask, unsigned int gen)
{
	struct vmm *vm = vcpu->vm;
	struct kvm_guest_debug dbg;
	uint64_t t0;
	int r;

	memset(&dbg, 0, sizeof(dbg));
	if (mask) {
		uint64_t dr7 = DR7_FIXED;

		dbg.control = KVM_GUESTDBG_ENABLE | KVM_GUESTDBG_USE_HW_BP;
		for (int slot = 0; slot < VMM_BP_SLOTS; slot++) {
			if (!(mask & (1u << slot)))
				continue;
			dbg.arch.debugreg[slot] = atomic_load(&vm->bp_addr[slot]);
			dr7 |= 1ull << (2 * slot); /* Ln */
		}
		dbg.arch.debugreg[7] = dr7;
	}
	t0 = vmm_now_ns();
	vcpu->c.debug_sets++;
	r = ioctl(vcpu->fd, KVM_SET_GUEST_DEBUG, &dbg);
	vcpu->c.debug_set_ns += vmm_now_ns() - t0;
	if (r < 0) {
		int err = -errno;

		pr_err("vCPU %u: KVM_SET_GUEST_DEBUG: %s", vcpu->index, hvp_strerror(err));
		return err;
	}
	vcpu->bp_mask_applied = mask;
	vcpu->bp_gen_applied = gen;
	vcpu->debug_armed = mask != 0;
	return 0;
}

int vcpu_debug_update(struct vmm_vcpu *vcpu)
{
	unsigned int gen = atomic_load(&vcpu->vm->bp_gen);
	unsigned int mask = wanted_mask(vcpu->vm);

	if (mask == vcpu->bp_mask_applied && (!mask || gen == vcpu->bp_gen_applied))
		return 0;
	return set_guest_debug(vcpu, mask, gen);
}

void vcpu_debug_disarm(struct vmm_vcpu *vcpu)
{
	if (vcpu->fd >= 0 && vcpu->debug_armed && set_guest_debug(vcpu, 0, 0) != 0)
		return;
	if (vcpu->debug_armed)
		vcpu->c.traps_armed_at_end++;
}

int vmm_bp_step(struct vmm_vcpu *vcpu)
{
	struct kvm_regs *regs;
	int err;

	if (atomic_load(&vcpu->vm->rf) == VMM_RF_IGNORED)
		return -ENOTSUP;
	err = vmm_vcpu_regs_rw(vcpu, &regs, NULL);
	if (err)
		return err;
	/* Resume with RF; if the very next exit is this breakpoint again, RF failed. */
	regs->rflags |= VMM_RFLAGS_RF;
	vmm_vcpu_regs_dirty(vcpu, true, false);
	vcpu->rf_probe_pc = regs->rip;
	vcpu->rf_probe_rsp = regs->rsp;
	return 0;
}

void rf_probe_check(struct vmm_vcpu *vcpu)
{
	struct kvm_regs *regs;
	int unknown = VMM_RF_UNKNOWN;

	if (!vcpu->rf_probe_pc || vmm_vcpu_regs(vcpu, &regs, NULL) != 0)
		return;
	if (regs->rip != vcpu->rf_probe_pc || regs->rsp != vcpu->rf_probe_rsp) {
		/* The guest moved past the breakpoint: RF stepped over it (this time). */
		atomic_compare_exchange_strong(&vcpu->vm->rf, &unknown, VMM_RF_WORKS);
		vcpu->rf_probe_pc = 0;
	}
}

/* The same breakpoint again, with no other exit, right after resuming with RF: RF did not step
 * over it. Seen on PVM for iretq back to kernel mode while RF worked for other hits, so one
 * failure makes completion by the rider the rule from now on. On VMX/SVM the hit may also be a
 * new one: a thread whose system calls return to user with the same RSP reaches sysretq again
 * without any exit between (no exit for a system call there). The CPU clears RF once an
 * instruction completes (SDM vol. 3B, 18.3.1.1), so there a hit with RF clear in the live
 * RFLAGS came after the instruction ran: RF worked. (On PVM, where RF is ignored, whether it
 * stays set is not known: the same pc and RSP decide there, as before.) */
static bool rf_failed_here(struct vmm_vcpu *vcpu, uint64_t pc)
{
	struct kvm_regs *regs;

	if (!vcpu->rf_probe_pc)
		return false;
	if (pc != vcpu->rf_probe_pc || vmm_vcpu_regs(vcpu, &regs, NULL) != 0 ||
	    regs->rsp != vcpu->rf_probe_rsp) {
		rf_probe_check(vcpu);
		return false;
	}
	if (!vcpu->vm->is_pvm && !(regs->rflags & VMM_RFLAGS_RF)) {
		int unknown = VMM_RF_UNKNOWN;

		atomic_compare_exchange_strong(&vcpu->vm->rf, &unknown, VMM_RF_WORKS);
		vcpu->rf_probe_pc = 0;
		return false;
	}
	if (atomic_exchange(&vcpu->vm->rf, VMM_RF_IGNORED) != VMM_RF_IGNORED)
		pr_info("RFLAGS.RF does not step over breakpoints here: the instructions under "
			"them are completed by hvprof");
	vcpu->rf_probe_pc = 0;
	return true;
}

int debug_exit(struct vmm_vcpu *vcpu)
{
	struct vmm *vm = vcpu->vm;
	uint64_t pc = vcpu->run->debug.arch.pc;
	unsigned int applied = vcpu->bp_mask_applied;
	bool repeat;

	if (!applied) {
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: debug exit at 0x%llx before any breakpoint "
			"was set", vcpu->index, (unsigned long long)pc);
		return 1;
	}
	if (vm->is_pvm && (applied & (1u << VMM_BP_PVM)) &&
	    pc == atomic_load(&vm->bp_addr[VMM_BP_PVM])) {
		rf_probe_check(vcpu);
		return pvm_fixup_hit(vcpu);
	}
	repeat = rf_failed_here(vcpu, pc);
	for (int slot = first_rider_slot(vm); slot < VMM_BP_SLOTS; slot++) {
		if (!(applied & (1u << slot)) || pc != atomic_load(&vm->bp_addr[slot]))
			continue;
		if (!vm->hooks.debug)
			break;
		return vm->hooks.debug(vm->hooks.ctx, vcpu, slot, pc, repeat);
	}
	vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: unexpected debug exit at 0x%llx", vcpu->index,
		(unsigned long long)pc);
	return 1;
}
