// SPDX-License-Identifier: MIT
// The guest kernel's KASLR slide. Known before the guest runs when hvprof placed the kernel
// itself (a vmlinux at its link address, or a bzImage hvprof decompressed and relocated);
// otherwise (the guest's own decompressor chose it) found from the running guest: MSR_LSTAR
// (where the guest's SYSCALL entry really is) minus entry_SYSCALL_64 in the image,
// cross-checked by guestinfo against the kernel text bytes at the slid addresses. The same
// detection confirms a known slide.
#define pr_fmt(fmt) "vmm: kaslr: " fmt
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#include <hvprof/log.h>

#include "vmm_internal.h"

#define MSR_LSTAR 0xc0000082

/*
 * Move every kernel address the VMM traps on or compares with (link-time addresses from the
 * symbols) by @slide, then publish them: breakpoints and entry-window checks wait for
 * sites_ready (acquire), so no vCPU sees a half-moved set. Called once: at set-up when the
 * slide is known, else by the vCPU whose detection decided it.
 */
void kaslr_sites_rebase(struct vmm *vm, uint64_t slide)
{
	struct entry_window *w = &vm->entry_window;

	if (vm->pvm.enabled)
		vm->pvm.pf_entry_kva += slide;
	if (vm->traps.available) {
		vm->traps.sysret_kva += slide;
		vm->traps.iret_kva += slide;
	}
	if (w->text_end) {
		w->text_start += slide;
		w->text_end += slide;
		w->exit1_start += slide;
		w->exit1_end += slide;
		w->exit2_start += slide;
		w->exit2_end += slide;
	}
	atomic_store_explicit(&vm->sites_ready, true, memory_order_release);
}

void kaslr_setup(struct vmm *vm)
{
	if (!vm->gi)
		return;
	if (!vm->boot.slide_known) {
		pr_info("the guest's decompressor chooses the KASLR slide: breakpoints wait until "
			"MSR_LSTAR tells it");
		return;
	}
	gi_set_kaslr_slide(vm->gi, vm->boot.slide);
	kaslr_sites_rebase(vm, vm->boot.slide);
	if (vm->boot.slide_applied)
		pr_info("KASLR: kernel relocated by hvprof to slide 0x%llx (%zu relocations)",
			(unsigned long long)vm->boot.slide, vm->boot.n_relocs);
}

/*
 * A second witness: the guest IDT's #PF gate must point at asm_exc_page_fault + @slide.
 * 1 agrees, -1 disagrees, 0 cannot tell (no symbol, no IDT loaded yet, gate unreadable).
 */
static int idt_witness(struct vmm *vm, const struct gi_paging *pg,
		       const struct kvm_sregs *sregs, uint64_t slide, uint64_t *gate)
{
	uint64_t pf;

	if (symtab_find(gi_symtab(vm->gi), "asm_exc_page_fault", &pf) != 0 ||
	    gi_idt_gate(&vm->gmem, pg, sregs->idt.base, sregs->idt.limit, GI_VEC_PAGE_FAULT,
			gate) != 0)
		return 0;
	return *gate == pf + slide ? 1 : -1;
}

/* Decide the outcome once (first vCPU wins); false when another vCPU already did. */
static bool kaslr_decide(struct vmm *vm, int outcome)
{
	int pending = KASLR_CHECK_PENDING;

	return atomic_compare_exchange_strong(&vm->kaslr_check, &pending, outcome);
}

/*
 * Called for kernel-mode samples and port I/O from the kernel until the check is decided: a
 * no-op after that. Before the guest has set MSR_LSTAR (early boot), or while the slid entry
 * is not mapped through this CR3, nothing is decided and a later call tries again.
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

	if (!vm->gi || atomic_load(&vm->kaslr_check) != KASLR_CHECK_PENDING)
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
		if (!kaslr_decide(vm, KASLR_CHECK_FAILED))
			return;
		if (vm->boot.slide_known) {
			pr_warn("vCPU %u: MSR_LSTAR 0x%llx does not match the kernel image (%s): the "
				"slide 0x%llx hvprof placed the kernel at is not confirmed",
				vcpu->index, (unsigned long long)m.e.data, hvp_strerror(err),
				(unsigned long long)vm->boot.slide);
			return;
		}
		pr_warn("vCPU %u: MSR_LSTAR 0x%llx does not match the kernel image (%s): kernel "
			"symbols assume no KASLR slide",
			vcpu->index, (unsigned long long)m.e.data, hvp_strerror(err));
		gi_set_kaslr_failed(vm->gi);
		kaslr_sites_rebase(vm, 0);
		return;
	}
	vm->kaslr_detected = slide;
	{
		uint64_t gate = 0;

		vm->kaslr_idt = idt_witness(vm, &pg, sregs, slide, &gate);
		if (vm->kaslr_idt < 0)
			pr_warn("vCPU %u: the IDT's #PF gate 0x%llx is not asm_exc_page_fault at "
				"slide 0x%llx (MSR_LSTAR and the kernel text agree on it)",
				vcpu->index, (unsigned long long)gate, (unsigned long long)slide);
	}
	if (!vm->boot.slide_known) {
		if (!kaslr_decide(vm, KASLR_CHECK_FOUND))
			return;
		gi_set_kaslr_slide(vm->gi, slide);
		kaslr_sites_rebase(vm, slide);
		pr_info("vCPU %u: KASLR slide 0x%llx found from MSR_LSTAR 0x%llx%s", vcpu->index,
			(unsigned long long)slide, (unsigned long long)m.e.data,
			vm->kaslr_idt > 0 ? " and the IDT" : "");
		return;
	}
	if (slide == vm->boot.slide) {
		if (kaslr_decide(vm, KASLR_CHECK_CONFIRMED))
			pr_info("vCPU %u: MSR_LSTAR 0x%llx confirms the KASLR slide 0x%llx%s",
				vcpu->index, (unsigned long long)m.e.data,
				(unsigned long long)slide,
				vm->kaslr_idt > 0 ? " (the IDT's #PF gate agrees)" : "");
		return;
	}
	if (!kaslr_decide(vm, KASLR_CHECK_MISMATCH))
		return;
	/* Symbols follow what the guest really runs; the breakpoints, already armed, stay. */
	gi_set_kaslr_slide(vm->gi, slide);
	pr_warn("vCPU %u: MSR_LSTAR 0x%llx says the KASLR slide is 0x%llx, not the 0x%llx hvprof "
		"placed the kernel at: symbols use 0x%llx",
		vcpu->index, (unsigned long long)m.e.data, (unsigned long long)slide,
		(unsigned long long)vm->boot.slide, (unsigned long long)slide);
}

/* At most one look per vCPU per this many ns from I/O exits: early boot writes the console
 * a byte per exit, and each look costs a KVM_GET_MSRS (and without sync-regs a GET_SREGS). */
#define KASLR_POLL_INTERVAL_NS 1000000ull

void kaslr_poll(struct vcpu *vcpu)
{
	struct kvm_sregs *sregs;
	uint64_t now;

	if (atomic_load_explicit(&vcpu->vm->kaslr_check, memory_order_relaxed) !=
		    KASLR_CHECK_PENDING ||
	    !vcpu->vm->gi)
		return;
	now = vmm_now_ns();
	if (now - vcpu->kaslr_poll_ns < KASLR_POLL_INTERVAL_NS)
		return;
	vcpu->kaslr_poll_ns = now;
	if (vcpu_get_regs(vcpu, NULL, &sregs) != 0 || (sregs->cs.selector & 3))
		return;
	kaslr_check(vcpu, sregs);
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

int vmm_kaslr_info(const struct vmm *vm, struct vmm_kaslr_info *out)
{
	if (!vm || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->placed = vm->boot.slide_known;
	out->relocated = vm->boot.slide_applied;
	out->placed_slide = vm->boot.slide;
	out->n_relocs = vm->boot.n_relocs;
	out->check = atomic_load((atomic_int *)&vm->kaslr_check);
	out->detected_slide = vm->kaslr_detected;
	out->idt = vm->kaslr_idt;
	out->slide_known = vmm_kernel_slide(vm, &out->slide) == 0;
	return 0;
}

const char *vmm_kaslr_check_name(int check)
{
	switch (check) {
	case KASLR_CHECK_PENDING:
		return "not checked (MSR_LSTAR not read from kernel mode)";
	case KASLR_CHECK_CONFIRMED:
		return "confirmed from MSR_LSTAR";
	case KASLR_CHECK_FOUND:
		return "found from MSR_LSTAR";
	case KASLR_CHECK_MISMATCH:
		return "MSR_LSTAR disagrees";
	case KASLR_CHECK_FAILED:
		return "MSR_LSTAR does not match the image";
	default:
		return "?";
	}
}
