// SPDX-License-Identifier: MIT
// The hvprof exit register (docs/guest-interface.md): a 4-byte MMIO register at
// VMM_EXIT_REG_GPA. The guest's init writes 0x4856XXXX to end the run with status XX, and (events,
// protocol version 1) 0x4845KKVV to tell event KK with value VV (enum vmm_guest_event), which the
// rider's guest_event hook gets; the VMM only counts it. Reads return 0; other writes are counted
// and ignored.
#define pr_fmt(fmt) "vmm: exit-reg: " fmt
#include <string.h>

#include "../vmm_internal.h"

/* An event write: the rider's hook decides (its 1 stops this vCPU: it ended the run). */
static int exit_reg_event(struct vmm *vm, struct vmm_vcpu *vcpu, uint32_t v)
{
	uint32_t kind = (v >> 8) & 0xff, value = v & 0xff;
	uint64_t now = vmm_now_ns();

	if (!kind) { /* kind 0 is no event (a zeroed value with the magic) */
		vcpu->c.mmio_unhandled++;
		return 0;
	}
	vcpu->c.guest_events++;
	if (!vm->hooks.guest_event)
		return 0;
	/* the run's clock: vm->t_start_ns is set before the vCPU threads start */
	return vm->hooks.guest_event(vm->hooks.ctx, vcpu, kind, value,
				     now > vm->t_start_ns ? now - vm->t_start_ns : 0) != 0;
}

int exit_reg_mmio(struct vmm *vm, struct vmm_vcpu *vcpu, struct kvm_run *run)
{
	uint32_t v = 0;

	if (!run->mmio.is_write) {
		memset(run->mmio.data, 0, sizeof(run->mmio.data));
		return 0;
	}
	memcpy(&v, run->mmio.data, run->mmio.len < 4 ? run->mmio.len : 4);
	if (run->mmio.len == 4 && (v & 0xffff0000u) == VMM_EXIT_MAGIC) {
		vmm_end(vm, HVP_END_EXIT_DEVICE, (int)(v & 0xff), "guest reported exit status %u",
			v & 0xff);
		return 1;
	}
	if (run->mmio.len == 4 && (v & 0xffff0000u) == VMM_GUEST_EVENT_MAGIC)
		return exit_reg_event(vm, vcpu, v);
	vcpu->c.mmio_unhandled++;
	return 0;
}
