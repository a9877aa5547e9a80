// SPDX-License-Identifier: MIT
// Breakpoints shared by the VMM and its riders: four execute breakpoints (DR0-DR3,
// KVM_SET_GUEST_DEBUG with KVM_GUESTDBG_USE_HW_BP) whose addresses and armed bits are VM-wide;
// every vCPU applies them before its next KVM_RUN. Slot 0 is the PVM SYSCALL fix-up's. Getting
// past a breakpoint: RFLAGS.RF where the host honours it (VMX/SVM), probed at the first step; on
// hosts that ignore it (PVM) the rider completes the instruction itself. On hosts whose DR7
// breakpoints never fire (the rider finds out), slots 1.. become INT3 bytes written into guest
// RAM (vmm_bp_use_int3), whose hits the rider completes the same way.
#define pr_fmt(fmt) "vmm: debug: " fmt
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#include <hvprof/log.h>

#include "vmm_internal.h"

#define RFLAGS_RF (1ull << 16)
#define DR7_FIXED (1ull << 10)
#define INT3 0xcc

int vmm_bp_alloc(struct vmm *vm)
{
	for (int slot = 1; slot < VMM_BP_SLOTS; slot++) {
		if (!(vm->bp_used & (1u << slot))) {
			vm->bp_used |= 1u << slot;
			return slot;
		}
	}
	return -ENOSPC;
}

void vmm_bp_set_addr(struct vmm *vm, int slot, uint64_t gva)
{
	if (slot < 0 || slot >= VMM_BP_SLOTS)
		return;
	if (slot > 0 && atomic_load(&vm->bp_int3))
		return; /* an INT3 slot's byte is where its GPA says: fixed (vmm_bp_use_int3) */
	atomic_store(&vm->bp_addr[slot], gva);
	atomic_fetch_add(&vm->bp_gen, 1);
}

/* INT3 slots (1..) in @mask armed or disarmed: the bytes in guest RAM and the armed bits. A
 * byte is written before its bit is set and put back before its bit is cleared, so a hit on an
 * INT3 whose slot is not armed (int3_exit) means the byte is back already. */
static void int3_arm(struct vmm *vm, unsigned int mask, bool armed)
{
	pthread_mutex_lock(&vm->bp_lock);
	for (int slot = 1; slot < VMM_BP_SLOTS; slot++) {
		unsigned int bit = 1u << slot;
		uint8_t *hva;

		if (!(mask & bit) || !!(atomic_load(&vm->bp_armed) & bit) == armed)
			continue;
		hva = vm->bp_gpa[slot] ? ram_gpa_to_hva(&vm->ram, vm->bp_gpa[slot], 1) : NULL;
		if (armed) {
			atomic_fetch_or(&vm->bp_armed, bit);
			if (hva)
				__atomic_store_n(hva, (uint8_t)INT3, __ATOMIC_RELEASE);
		} else {
			if (hva)
				__atomic_store_n(hva, vm->bp_orig[slot], __ATOMIC_RELEASE);
			atomic_fetch_and(&vm->bp_armed, ~bit);
		}
	}
	pthread_mutex_unlock(&vm->bp_lock);
}

void vmm_bp_arm(struct vmm *vm, unsigned int mask, bool armed, const struct vmm_vcpu *self)
{
	mask &= (1u << VMM_BP_SLOTS) - 1;
	if (atomic_load(&vm->bp_int3) && (mask & ~1u)) {
		/* guest RAM is the same for every vCPU: no kick */
		int3_arm(vm, mask & ~1u, armed);
		mask &= 1u;
		if (!mask)
			return;
	}
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

	if (atomic_load(&vm->bp_int3))
		armed &= 1u; /* slots 1.. are INT3 bytes, not debug registers */
	for (int slot = 0; slot < VMM_BP_SLOTS; slot++)
		if ((armed & (1u << slot)) && atomic_load(&vm->bp_addr[slot]))
			mask |= 1u << slot;
	return mask;
}

static int set_guest_debug(struct vmm_vcpu *vcpu, unsigned int mask, unsigned int gen, bool int3)
{
	struct vmm *vm = vcpu->vm;
	struct kvm_guest_debug dbg;
	uint64_t t0;
	int r;

	memset(&dbg, 0, sizeof(dbg));
	if (int3) {
		/* every #BP exits to the VMM; the guest's own are given back (INJECT_BP) */
		dbg.control = KVM_GUESTDBG_ENABLE | KVM_GUESTDBG_USE_SW_BP;
		if (vcpu->inject_bp)
			dbg.control |= KVM_GUESTDBG_INJECT_BP;
	}
	if (mask) {
		uint64_t dr7 = DR7_FIXED;

		dbg.control |= KVM_GUESTDBG_ENABLE | KVM_GUESTDBG_USE_HW_BP;
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
	vcpu->int3_applied = int3;
	vcpu->inject_bp = false;
	vcpu->debug_armed = mask != 0 || int3;
	return 0;
}

int vcpu_debug_update(struct vmm_vcpu *vcpu)
{
	unsigned int gen = atomic_load(&vcpu->vm->bp_gen);
	unsigned int mask = wanted_mask(vcpu->vm);
	bool int3 = atomic_load(&vcpu->vm->bp_int3);

	if (mask == vcpu->bp_mask_applied && (!mask || gen == vcpu->bp_gen_applied) &&
	    int3 == vcpu->int3_applied && !vcpu->inject_bp)
		return 0;
	return set_guest_debug(vcpu, mask, gen, int3);
}

/* Every INT3 byte put back (the run's end); each slot's byte is checked after. */
static void int3_restore_all(struct vmm *vm)
{
	pthread_mutex_lock(&vm->bp_lock);
	for (int slot = 1; slot < VMM_BP_SLOTS; slot++) {
		uint8_t *hva = vm->bp_gpa[slot] ? ram_gpa_to_hva(&vm->ram, vm->bp_gpa[slot], 1)
						 : NULL;

		if (!hva)
			continue;
		__atomic_store_n(hva, vm->bp_orig[slot], __ATOMIC_RELEASE);
		atomic_fetch_and(&vm->bp_armed, ~(1u << slot));
		if (*hva != vm->bp_orig[slot] && vm->n_vcpus)
			vm->vcpus[0].c.traps_armed_at_end++;
	}
	pthread_mutex_unlock(&vm->bp_lock);
}

void vcpu_debug_disarm(struct vmm_vcpu *vcpu)
{
	if (atomic_load(&vcpu->vm->bp_int3) && vcpu->index == 0)
		int3_restore_all(vcpu->vm);
	if (vcpu->fd >= 0 && vcpu->debug_armed && set_guest_debug(vcpu, 0, 0, false) != 0)
		return;
	if (vcpu->debug_armed)
		vcpu->c.traps_armed_at_end++;
}

int vmm_bp_use_int3(struct vmm *vm, const uint64_t gpa[VMM_BP_SLOTS])
{
	uint8_t orig[VMM_BP_SLOTS] = { 0 };

	if (!vm || !gpa)
		return -EINVAL;
	if (vm->is_pvm)
		return -ENOTSUP; /* INT3 at CPL0 is not emulated there (pvm-facts.md) */
	if (atomic_load(&vm->bp_int3))
		return -EALREADY;
	for (int slot = 1; slot < VMM_BP_SLOTS; slot++) {
		const uint8_t *hva;

		if (!(vm->bp_used & (1u << slot)) || !atomic_load(&vm->bp_addr[slot]))
			continue;
		hva = ram_gpa_to_hva(&vm->ram, gpa[slot], 1);
		if (!hva)
			return -EFAULT;
		orig[slot] = *hva;
		if (orig[slot] == INT3)
			return -EBADMSG; /* an INT3 there already: not the instruction the slot names */
	}
	pthread_mutex_lock(&vm->bp_lock);
	for (int slot = 1; slot < VMM_BP_SLOTS; slot++) {
		uint8_t *hva;

		if (!(vm->bp_used & (1u << slot)) || !atomic_load(&vm->bp_addr[slot]))
			continue;
		vm->bp_gpa[slot] = gpa[slot];
		vm->bp_orig[slot] = orig[slot];
		hva = ram_gpa_to_hva(&vm->ram, gpa[slot], 1);
		if (hva && (atomic_load(&vm->bp_armed) & (1u << slot)))
			__atomic_store_n(hva, (uint8_t)INT3, __ATOMIC_RELEASE);
	}
	atomic_store(&vm->bp_int3, true);
	pthread_mutex_unlock(&vm->bp_lock);
	pr_info("breakpoints are INT3 bytes in guest RAM from now on (the debug registers' never "
		"fired here)");
	vmm_kick_all(vm); /* every vCPU intercepts #BP before it runs again */
	return 0;
}

bool vmm_bp_int3(const struct vmm *vm)
{
	return vm && atomic_load(&((struct vmm *)vm)->bp_int3);
}

int vmm_bp_step(struct vmm_vcpu *vcpu)
{
	struct kvm_regs *regs;
	int err;

	if (atomic_load(&vcpu->vm->rf) == VMM_RF_IGNORED || atomic_load(&vcpu->vm->bp_int3))
		return -ENOTSUP;
	err = vmm_vcpu_regs_rw(vcpu, &regs, NULL);
	if (err)
		return err;
	/* Resume with RF; if the very next exit is this breakpoint again, RF failed. */
	regs->rflags |= RFLAGS_RF;
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
 * failure makes completion by the rider the rule from now on. */
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
	if (atomic_exchange(&vcpu->vm->rf, VMM_RF_IGNORED) != VMM_RF_IGNORED)
		pr_info("RFLAGS.RF does not step over breakpoints here: the instructions under "
			"them are completed by hvprof");
	vcpu->rf_probe_pc = 0;
	return true;
}

/*
 * A #BP exit (INT3 breakpoints): @pc the INT3's own address. One of ours, armed: the rider's hit
 * (it completes the instruction); ours but disarmed since the vCPU fetched it: the byte is back,
 * so the same RIP runs the instruction; anything else is the guest's own INT3 (kprobes, a
 * debugger in the guest): given back to it at the next KVM_RUN.
 */
static int int3_exit(struct vmm_vcpu *vcpu, uint64_t pc)
{
	struct vmm *vm = vcpu->vm;

	for (int slot = 1; slot < VMM_BP_SLOTS; slot++) {
		if (!vm->bp_gpa[slot] || pc != atomic_load(&vm->bp_addr[slot]))
			continue;
		if (!(atomic_load(&vm->bp_armed) & (1u << slot)) || !vm->hooks.debug) {
			vcpu->c.int3_stale++;
			return 0;
		}
		return vm->hooks.debug(vm->hooks.ctx, vcpu, slot, pc, false);
	}
	vcpu->c.int3_guest++;
	vcpu->inject_bp = true;
	return 0;
}

int debug_exit(struct vmm_vcpu *vcpu)
{
	struct vmm *vm = vcpu->vm;
	uint64_t pc = vcpu->run->debug.arch.pc;
	unsigned int applied = vcpu->bp_mask_applied;
	bool repeat;

	if (vcpu->run->debug.arch.exception == BP_VECTOR && vcpu->int3_applied)
		return int3_exit(vcpu, pc);

	if (!applied) {
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: debug exit at 0x%llx before any breakpoint "
			"was set", vcpu->index, (unsigned long long)pc);
		return 1;
	}
	if ((applied & (1u << VMM_BP_PVM)) && pc == atomic_load(&vm->bp_addr[VMM_BP_PVM])) {
		rf_probe_check(vcpu);
		return pvm_fixup_hit(vcpu);
	}
	repeat = rf_failed_here(vcpu, pc);
	for (int slot = 1; slot < VMM_BP_SLOTS; slot++) {
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
