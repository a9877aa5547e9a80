// SPDX-License-Identifier: MIT
// Watching the running kernel: where KASLR put it (found or confirmed from MSR_LSTAR and the
// kernel text, the IDT's #PF gate as a second witness; docs/kaslr.md) and whether it isolates
// page tables (PTI). Each is decided once per guest, by whichever vCPU first sees a state that
// tells; the decision is stored with __atomic builtins so every vCPU reads the same.
#define pr_fmt(fmt) "gi: kwatch: " fmt
#include <errno.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "gi_internal.h"

const char *gi_kaslr_check_name(int check)
{
	switch (check) {
	case GI_KASLR_PENDING:
		return "not checked (MSR_LSTAR not read from kernel mode)";
	case GI_KASLR_CONFIRMED:
		return "confirmed from MSR_LSTAR";
	case GI_KASLR_FOUND:
		return "found from MSR_LSTAR";
	case GI_KASLR_MISMATCH:
		return "MSR_LSTAR disagrees";
	case GI_KASLR_FAILED:
		return "MSR_LSTAR does not match the image";
	default:
		return "?";
	}
}

void gi_kaslr_placed(struct gi *gi, uint64_t slide)
{
	if (!gi)
		return;
	gi->placed = true;
	gi->placed_slide = slide;
	gi_set_kaslr_slide(gi, slide);
}

/* 1: the IDT's #PF gate is asm_exc_page_fault + @slide; -1: it is not; 0: cannot tell. */
static int idt_witness(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		       uint64_t idt_base, uint16_t idt_limit, uint64_t slide, uint64_t *gate)
{
	if (!gi->idt_pf_kva ||
	    gi_idt_gate(mem, pg, idt_base, idt_limit, GI_VEC_PAGE_FAULT, gate) != 0)
		return 0;
	return *gate == gi->idt_pf_kva + slide ? 1 : -1;
}

/* Decide once (first caller wins): false when another caller already did. */
static bool decide(struct gi *gi, int check)
{
	int pending = GI_KASLR_PENDING;

	return __atomic_compare_exchange_n(&gi->kaslr_check, &pending, check, false,
					   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

int gi_kaslr_observe(struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		     uint64_t lstar, uint64_t idt_base, uint16_t idt_limit,
		     struct gi_kaslr_observation *obs)
{
	uint64_t slide = 0, gate = 0;
	int err, idt = 0, check;

	if (!gi || !mem || !pg || !obs)
		return -EINVAL;
	if (__atomic_load_n(&gi->kaslr_check, __ATOMIC_ACQUIRE) != GI_KASLR_PENDING)
		return -EALREADY;
	if (lstar == 0)
		return -EAGAIN; /* early boot: the guest has not set MSR_LSTAR yet */
	err = gi_kaslr_slide_from_lstar(gi, mem, pg, lstar, &slide);
	if (err == -EFAULT || err == -ERANGE)
		return -EAGAIN; /* not mapped through this CR3 (a user CR3 under PTI), or not final */
	memset(obs, 0, sizeof(*obs));
	obs->placed_known = gi->placed;
	obs->placed = gi->placed_slide;
	if (err) {
		if (!decide(gi, GI_KASLR_FAILED))
			return -EALREADY;
		if (!gi->placed)
			gi_set_kaslr_failed(gi); /* symbols assume no slide */
		obs->check = GI_KASLR_FAILED;
		obs->err = err;
		return 0;
	}
	idt = idt_witness(gi, mem, pg, idt_base, idt_limit, slide, &gate);
	check = !gi->placed ? GI_KASLR_FOUND
		: slide == gi->placed_slide ? GI_KASLR_CONFIRMED : GI_KASLR_MISMATCH;
	/* the detected slide and the witness are published with the decision (release) */
	gi->kaslr_detected = slide;
	gi->kaslr_idt = idt;
	if (!decide(gi, check))
		return -EALREADY;
	/* FOUND: the slide is known from now on. MISMATCH: symbols follow what the guest runs. */
	if (check != GI_KASLR_CONFIRMED)
		gi_set_kaslr_slide(gi, slide);
	obs->check = check;
	obs->slide = slide;
	obs->idt = idt;
	obs->gate = gate;
	return 0;
}

int gi_kaslr_checked(const struct gi *gi, uint64_t *detected, int *idt)
{
	int check = gi ? __atomic_load_n(&gi->kaslr_check, __ATOMIC_ACQUIRE) : GI_KASLR_PENDING;

	if (detected)
		*detected = check == GI_KASLR_PENDING || !gi ? 0 : gi->kaslr_detected;
	if (idt)
		*idt = check == GI_KASLR_PENDING || !gi ? 0 : gi->kaslr_idt;
	return check;
}

const char *gi_pti_name(enum gi_pti pti)
{
	switch (pti) {
	case GI_PTI_ON:
		return "on: kernel page tables at user CR3 - 4 KiB";
	case GI_PTI_OFF:
		return "off";
	case GI_PTI_NOT_FOUND:
		return "on: kernel page tables not found";
	case GI_PTI_NOT_CHECKED:
		return "not checked (no init_task symbol)";
	default:
		return "not seen (no user-mode sample checked)";
	}
}

/*
 * With PTI a vCPU in user mode (and in the kernel's entry and exit code) runs on the user half
 * of a PGD pair that maps almost nothing of the kernel. Linux allocates the pair as one 8 KiB
 * block, kernel PGD first, and switches by setting bit 12 of CR3; with PCIDs, bit 11 marks the
 * user PCID (masked by the walker with the other PCID bits). So the kernel's tables for a user
 * CR3 are CR3 with bit 12 cleared, checked on a known kernel object: init_task.
 */
enum gi_pti gi_pti_probe(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
			 bool user_mode)
{
	struct gi_paging kpg;
	struct hvp_thread thr;
	uint64_t init_task, gpa;
	int err;

	if (!gi || !mem || !pg || gi_kaslr_state(gi) != GI_SLIDE_KNOWN)
		return GI_PTI_UNKNOWN;
	if (!gi->st || symtab_find(gi->st, "init_task", &init_task) != 0)
		return GI_PTI_NOT_CHECKED;
	init_task += gi_slide(gi);
	err = gi_gva_to_gpa(mem, pg, init_task, &gpa, NULL, NULL);
	if (err == 0) /* only a CR3 the vCPU runs user code on tells: the kernel's maps it */
		return user_mode ? GI_PTI_OFF : GI_PTI_UNKNOWN;
	if (err != -EFAULT || !(pg->cr3 & GI_PTI_USER_BIT))
		return GI_PTI_UNKNOWN; /* a transient state (or not a PTI pair): ask again */
	kpg = *pg;
	kpg.kernel_cr3 = pg->cr3 & ~GI_PTI_USER_BIT;
	kpg.user_cr3 = 0;
	kpg.cache = NULL;
	err = gi_task_identity(gi, mem, &kpg, init_task, &thr, NULL);
	if (err || thr.pid != 0 || strncmp(thr.comm, "swapper", 7) != 0)
		return GI_PTI_NOT_FOUND;
	return GI_PTI_ON;
}
