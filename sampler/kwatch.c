// SPDX-License-Identifier: MIT
// Watching the guest kernel from the VMM's exits: its KASLR slide (known before it runs when the
// VMM placed the kernel, else found from MSR_LSTAR; guestinfo decides, docs/kaslr.md) and its
// page-table isolation (decided once from a user-mode CR3). Once the slide is known, the
// addresses that depend on it are handed out: the return-to-user sites to the trap slots and
// the #PF entry to the VMM's PVM fix-up.
#define pr_fmt(fmt) "sampler: kwatch: " fmt
#include <errno.h>

#include <hvprof/log.h>

#include "sampler_internal.h"

#define MSR_LSTAR 0xc0000082
/* At most one look per vCPU per this many ns from I/O exits: early boot writes the console a
 * byte per exit, and each look costs a KVM_GET_MSRS (and without sync-regs a GET_SREGS). */
#define KWATCH_IO_INTERVAL_NS 1000000ull
/* ... and from samples when hvprof placed the kernel (the slide is known, the look only
 * confirms it): the guest sets MSR_LSTAR seconds into an emulated boot, and a KVM_GET_MSRS at
 * every kernel sample until then cost ~8 us each on a nested PVM host. */
#define KWATCH_CONFIRM_INTERVAL_NS 10000000ull

/* The slide is known (or known not to be findable): place what depends on it. Idempotent. */
static void slide_settled(struct sampler *s)
{
	uint64_t pf_entry;

	traps_place(s);
	if (s->vm && vmm_is_pvm(s->vm) && !atomic_load(&s->pf_entry_set) &&
	    gi_pf_entry(s->gi, &pf_entry) == 0) {
		vmm_pvm_fixup_enable(s->vm, pf_entry);
		atomic_store(&s->pf_entry_set, true);
	}
}

void kwatch_setup(struct sampler *s)
{
	uint64_t pf_entry;

	if (!s->gi) {
		if (s->vm && vmm_is_pvm(s->vm))
			pr_warn("no kernel symbols: the PVM SYSCALL fix-up is off, guest programs "
				"cannot make system calls on this host");
		return;
	}
	if (s->vm && vmm_is_pvm(s->vm)) {
		if (gi_pf_entry(s->gi, &pf_entry) == -ENOENT)
			pr_warn("kernel has no asm_exc_page_fault symbol: the PVM SYSCALL fix-up "
				"is off");
		else
			vmm_pvm_fixup_enable(s->vm, 0); /* the address follows with the slide */
	}
	if (!s->placed.slide_known) {
		pr_info("the guest's decompressor chooses the KASLR slide: breakpoints wait until "
			"MSR_LSTAR tells it");
		return;
	}
	gi_kaslr_placed(s->gi, s->placed.slide);
	slide_settled(s);
	if (s->placed.relocated)
		pr_info("KASLR: kernel relocated by hvprof to slide 0x%llx (%zu relocations)",
			(unsigned long long)s->placed.slide, s->placed.n_relocs);
}

static void report(const struct svcpu *sv, uint64_t lstar, const struct gi_kaslr_observation *o)
{
	unsigned long long placed = o->placed, slide = o->slide;

	if (o->idt < 0 && o->check != GI_KASLR_FAILED)
		pr_warn("vCPU %u: the IDT's #PF gate 0x%llx is not asm_exc_page_fault at slide "
			"0x%llx (MSR_LSTAR and the kernel text agree on it)",
			sv->index, (unsigned long long)o->gate, slide);
	switch (o->check) {
	case GI_KASLR_FAILED:
		if (o->placed_known)
			pr_warn("vCPU %u: MSR_LSTAR 0x%llx does not match the kernel image (%s): the "
				"slide 0x%llx hvprof placed the kernel at is not confirmed",
				sv->index, (unsigned long long)lstar, hvp_strerror(o->err), placed);
		else
			pr_warn("vCPU %u: MSR_LSTAR 0x%llx does not match the kernel image (%s): "
				"kernel symbols assume no KASLR slide",
				sv->index, (unsigned long long)lstar, hvp_strerror(o->err));
		break;
	case GI_KASLR_FOUND:
		pr_info("vCPU %u: KASLR slide 0x%llx found from MSR_LSTAR 0x%llx%s", sv->index,
			slide, (unsigned long long)lstar, o->idt > 0 ? " and the IDT" : "");
		break;
	case GI_KASLR_CONFIRMED:
		pr_info("vCPU %u: MSR_LSTAR 0x%llx confirms the KASLR slide 0x%llx%s", sv->index,
			(unsigned long long)lstar, slide,
			o->idt > 0 ? " (the IDT's #PF gate agrees)" : "");
		break;
	case GI_KASLR_MISMATCH:
		/* Symbols follow what the guest really runs; the breakpoints, already placed, stay. */
		pr_warn("vCPU %u: MSR_LSTAR 0x%llx says the KASLR slide is 0x%llx, not the 0x%llx "
			"hvprof placed the kernel at: symbols use 0x%llx",
			sv->index, (unsigned long long)lstar, slide, placed, slide);
		break;
	default:
		break;
	}
}

/*
 * One look at a vCPU in kernel mode while the check is pending (the callers decide when): a
 * KVM_GET_MSRS of MSR_LSTAR, checked against the kernel image. Before the guest has set
 * MSR_LSTAR (early boot), or while the slid entry is not mapped through this CR3, nothing is
 * decided and a later call tries again.
 */
static void look(struct svcpu *sv, const struct kvm_sregs *sregs)
{
	struct sampler *s = sv->s;
	struct gi_kaslr_observation o;
	struct gi_paging pg;
	uint64_t lstar;

	sv->c.kaslr_looks++;
	if (!sv->v || vmm_vcpu_get_msr(sv->v, MSR_LSTAR, &lstar) != 0)
		return;
	pg = sampler_paging(s, sregs);
	if (gi_kaslr_observe(s->gi, s->mem, &pg, lstar, sregs->idt.base, sregs->idt.limit,
			     &o) != 0)
		return;
	report(sv, lstar, &o);
	slide_settled(s);
}

/*
 * From a kernel-mode sample (or a guest event written in kernel mode): a look while the check is
 * pending, at most every KWATCH_CONFIRM_INTERVAL_NS when hvprof placed the kernel (its own time
 * stamp: I/O exits cannot hold it off). Once decided, a per-vCPU flag answers.
 */
void kwatch_kernel(struct svcpu *sv, const struct kvm_sregs *sregs)
{
	struct sampler *s = sv->s;
	uint64_t now;

	if (sv->kaslr_decided)
		return;
	if (!s->gi || gi_kaslr_checked(s->gi, NULL, NULL) != GI_KASLR_PENDING) {
		/* decided for good (guestinfo never goes back to pending): from now on this
		 * vCPU's own flag answers, not a line of the shared gi */
		sv->kaslr_decided = s->gi != NULL;
		return;
	}
	if (s->placed.slide_known) {
		/* symbols already use the slide placed: a look only confirms it, not every sample */
		now = vmm_now_ns();
		if (sv->kaslr_confirm_ns && now - sv->kaslr_confirm_ns < KWATCH_CONFIRM_INTERVAL_NS)
			return;
		sv->kaslr_confirm_ns = now;
	}
	look(sv, sregs);
}

void kwatch_io(struct svcpu *sv)
{
	struct sampler *s = sv->s;
	struct kvm_sregs *sregs;
	uint64_t now;

	if (!s->gi || gi_kaslr_checked(s->gi, NULL, NULL) != GI_KASLR_PENDING)
		return;
	now = vmm_now_ns();
	if (now - sv->kaslr_poll_ns < KWATCH_IO_INTERVAL_NS)
		return;
	sv->kaslr_poll_ns = now;
	if (vmm_vcpu_regs(sv->v, NULL, &sregs) != 0 || (sregs->cs.selector & 3))
		return;
	look(sv, sregs);
}

void kwatch_user(struct svcpu *sv, const struct kvm_sregs *sregs)
{
	struct sampler *s = sv->s;
	struct gi_paging pg = { .cr0 = sregs->cr0, .cr3 = sregs->cr3, .cr4 = sregs->cr4,
				.efer = sregs->efer, .maxphyaddr = s->maxphyaddr };
	enum gi_pti found;
	int unknown = GI_PTI_UNKNOWN;

	if (!s->gi || atomic_load_explicit(&s->pti, memory_order_relaxed) != GI_PTI_UNKNOWN)
		return;
	found = gi_pti_probe(s->gi, s->mem, &pg, (sregs->cs.selector & 3) == 3);
	if (found == GI_PTI_UNKNOWN || !atomic_compare_exchange_strong(&s->pti, &unknown, found))
		return;
	if (found == GI_PTI_ON)
		pr_info("vCPU %u: page-table isolation: the kernel is read through CR3 - 4 KiB "
			"(user CR3 0x%llx; init_task checks out there)",
			sv->index, (unsigned long long)sregs->cr3);
	else if (found == GI_PTI_NOT_FOUND)
		pr_warn("vCPU %u: user-mode CR3 0x%llx does not map the kernel, and CR3 - 4 KiB is "
			"not the kernel's page tables: samples in user mode may have no thread",
			sv->index, (unsigned long long)sregs->cr3);
	else if (found == GI_PTI_OFF)
		pr_debug(LOG_VMM, "user-mode CR3 0x%llx maps the kernel: no page-table isolation",
			 (unsigned long long)sregs->cr3);
}
