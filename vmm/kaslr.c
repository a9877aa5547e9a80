// SPDX-License-Identifier: MIT
// The guest kernel's KASLR slide, found once from the running guest: MSR_LSTAR (where the
// guest's SYSCALL entry really is) minus entry_SYSCALL_64 in the image, cross-checked by
// guestinfo against the kernel text bytes at the slid addresses.
#define pr_fmt(fmt) "vmm: kaslr: " fmt
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#include <hvprof/log.h>

#include "vmm_internal.h"

#define MSR_LSTAR 0xc0000082

/*
 * Called for a kernel-mode sample until the slide is known (or known to be unfindable): a
 * no-op after that. Before the guest has set MSR_LSTAR (early boot) nothing is decided, and
 * the next kernel-mode sample tries again.
 */
void kaslr_check(struct vcpu *vcpu, const struct kvm_sregs *sregs)
{
	struct vmm *vm = vcpu->vm;
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e;
	} m;
	struct gi_paging pg;
	uint64_t slide;
	int err;

	if (!vm->gi || gi_kaslr_state(vm->gi) != GI_SLIDE_UNKNOWN)
		return;
	memset(&m, 0, sizeof(m));
	m.hdr.nmsrs = 1;
	m.e.index = MSR_LSTAR;
	if (ioctl(vcpu->fd, KVM_GET_MSRS, &m) != 1 || m.e.data == 0)
		return;
	pg = vcpu_paging(vm, sregs);
	err = gi_kaslr_slide_from_lstar(vm->gi, &vm->gmem, &pg, m.e.data, &slide);
	if (err == -EFAULT || err == -ERANGE) {
		/* Not mapped through this CR3 (a user CR3 under PTI), or LSTAR not final yet. */
		return;
	}
	if (err) {
		pr_warn("vCPU %u: MSR_LSTAR 0x%llx does not match the kernel image (%s): kernel "
			"symbols assume no KASLR slide",
			vcpu->index, (unsigned long long)m.e.data, hvp_strerror(err));
		gi_set_kaslr_failed(vm->gi);
		return;
	}
	if (gi_kaslr_state(vm->gi) == GI_SLIDE_UNKNOWN) {
		gi_set_kaslr_slide(vm->gi, slide);
		pr_info("vCPU %u: KASLR slide 0x%llx (MSR_LSTAR 0x%llx)", vcpu->index,
			(unsigned long long)slide, (unsigned long long)m.e.data);
	}
}

int vmm_kernel_slide(const struct vmm *vm, uint64_t *slide)
{
	if (!vm || !slide)
		return -EINVAL;
	if (!vm->gi || gi_kaslr_state(vm->gi) != GI_SLIDE_KNOWN)
		return -ENODATA;
	*slide = gi_kaslr_slide(vm->gi);
	return 0;
}
