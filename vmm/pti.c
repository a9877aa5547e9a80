// SPDX-License-Identifier: MIT
// Page-table isolation (PTI, "KPTI") in the guest. With it, a vCPU in user mode (and in the
// kernel's entry and exit code) runs on the user half of a PGD pair that maps almost nothing of
// the kernel: the current task, per-CPU data and task structs are not reachable through that
// CR3. Linux allocates the pair as one 8 KiB-aligned block, kernel PGD first, and switches by
// setting bit 12 of CR3 (PTI_USER_PGTABLE_BIT = PAGE_SHIFT, arch/x86/entry/calling.h; with
// PCIDs, bit 11 marks the user PCID, masked by the walker with the other PCID bits). So the
// kernel's tables for a user CR3 are CR3 with bit 12 cleared: hvprof decides once per guest
// whether that applies, by checking the candidate on a known kernel object.
#define pr_fmt(fmt) "vmm: pti: " fmt
#include <errno.h>
#include <string.h>

#include <hvprof/log.h>

#include "vmm_internal.h"

/*
 * At a user-mode sample (or a trap at the return to user) while undecided: if the CR3 of a
 * vCPU in user mode maps init_task (the slid symbol), the guest does not isolate: PTI off. If
 * not, and CR3 has bit 12 set, CR3 with bit 12 cleared must map an init_task that checks out
 * as pid 0 "swapper": PTI on. Needs the KASLR slide (waits for it) and the init_task symbol.
 */
void pti_probe(struct vcpu *vcpu, const struct kvm_sregs *sregs)
{
	struct vmm *vm = vcpu->vm;
	struct gi_paging pg;
	struct hvp_thread thr;
	uint64_t init_task, gpa;
	int unknown = VMM_PTI_UNKNOWN, err;

	if (atomic_load_explicit(&vm->pti, memory_order_relaxed) != VMM_PTI_UNKNOWN || !vm->gi ||
	    gi_kaslr_state(vm->gi) != GI_SLIDE_KNOWN)
		return;
	if (symtab_find(gi_symtab(vm->gi), "init_task", &init_task) != 0) {
		atomic_compare_exchange_strong(&vm->pti, &unknown, VMM_PTI_NOT_CHECKED);
		return;
	}
	init_task += gi_kaslr_slide(vm->gi);
	pg = vcpu_paging(vm, sregs);
	err = gi_gva_to_gpa(&vm->gmem, &pg, init_task, &gpa, NULL, NULL);
	if (err == 0) {
		/* Only a CR3 the vCPU runs user code on tells: in kernel mode (an iretq back to
		 * the kernel, say) it is the kernel's own. */
		if ((sregs->cs.selector & 3) != 3)
			return;
		if (atomic_compare_exchange_strong(&vm->pti, &unknown, VMM_PTI_OFF))
			pr_debug(LOG_VMM, "user-mode CR3 0x%llx maps the kernel: no page-table "
				 "isolation", (unsigned long long)sregs->cr3);
		return;
	}
	if (err != -EFAULT || !(sregs->cr3 & VMM_PTI_USER_BIT))
		return; /* a transient state (or not a PTI pair): ask again at the next sample */
	pg.kernel_cr3 = sregs->cr3 & ~VMM_PTI_USER_BIT;
	err = gi_task_identity(vm->gi, &vm->gmem, &pg, init_task, &thr, NULL);
	if (err || thr.pid != 0 || strncmp(thr.comm, "swapper", 7) != 0) {
		if (atomic_compare_exchange_strong(&vm->pti, &unknown, VMM_PTI_NOT_FOUND))
			pr_warn("vCPU %u: user-mode CR3 0x%llx does not map the kernel, and CR3 - 4 KiB "
				"is not the kernel's page tables (init_task: %s): samples in user "
				"mode will have no thread",
				vcpu->index, (unsigned long long)sregs->cr3,
				err ? hvp_strerror(err) : "does not check out");
		return;
	}
	if (atomic_compare_exchange_strong(&vm->pti, &unknown, VMM_PTI_ON))
		pr_info("vCPU %u: page-table isolation: the kernel is read through CR3 - 4 KiB "
			"(user CR3 0x%llx; init_task checks out there)",
			vcpu->index, (unsigned long long)sregs->cr3);
}

const char *vmm_pti_name(const struct vmm *vm)
{
	switch (vm ? atomic_load((atomic_int *)&vm->pti) : VMM_PTI_UNKNOWN) {
	case VMM_PTI_ON:
		return "on: kernel page tables at user CR3 - 4 KiB";
	case VMM_PTI_OFF:
		return "off";
	case VMM_PTI_NOT_FOUND:
		return "on: kernel page tables not found";
	case VMM_PTI_NOT_CHECKED:
		return "not checked (no init_task symbol)";
	default:
		return "not seen (no user-mode sample checked)";
	}
}
