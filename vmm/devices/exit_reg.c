// SPDX-License-Identifier: MIT
// The hvprof exit register (docs/guest-interface.md): a 4-byte MMIO register at
// VMM_EXIT_REG_GPA; the guest's /init writes 0x4856XXXX to end the run with status XX. Reads
// return 0; other writes are counted and ignored.
#define pr_fmt(fmt) "vmm: exit-reg: " fmt
#include <string.h>

#include "../vmm_internal.h"

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
	vcpu->c.mmio_unhandled++;
	return 0;
}
