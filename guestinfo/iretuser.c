// SPDX-License-Identifier: MIT
// The branch to the interrupt return's iretq that only returns to user mode take. x86-64 Linux
// has one iretq (native_irq_return_iret) for interrupt and exception returns to user and to
// kernel mode alike (arch/x86/entry/entry_64.S, common_interrupt_return): a breakpoint there,
// armed while marks wait, also hits every interrupt that returns to the kernel. The way to user
// mode (swapgs_restore_regs_and_return_to_usermode) pops the registers, copies the IRET frame
// to the trampoline stack where it switches, swaps GS and jumps to the iretq (past the ESPFIX
// test of the frame's SS, where configured); from its `swapgs` on nothing changes a
// general-purpose register or RSP, so a breakpoint on that last jump sees what one on the iretq
// would, on returns to user only. Found here with capstone in the image, following the jumps
// from the symbol (the alternatives as the image holds them: jumps over the CR3 switch and
// over VERW where the running kernel has not patched them, which it does in place).
#define pr_fmt(fmt) "iretuser: " fmt

#include <capstone/capstone.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "gi_internal.h"

#define IU_INSNS_MAX 96   /* instructions followed from the symbol at most */
#define IU_NEAR_IRET 16   /* a branch target at most this far before the iretq (ESPFIX: 11) */
#define IU_SPAN (4u << 10) /* jumps followed only within this distance of the symbol */

/* After the swapgs only these may stand before the branch, or between its target and the
 * iretq: they write no general-purpose register and no RSP (VERW: CLEAR_CPU_BUFFERS). */
static bool iu_harmless(unsigned int id)
{
	switch (id) {
	case X86_INS_NOP:
	case X86_INS_VERW:
	case X86_INS_TEST:
	case X86_INS_CMP:
	case X86_INS_LFENCE:
		return true;
	default:
		return false;
	}
}

/* Decode one instruction at @pc into @insn. Return: 0; -EFAULT unreadable or undecodable. */
static int iu_decode(csh cs, gi_kva_read_fn read, void *ctx, uint64_t pc, cs_insn *insn)
{
	uint8_t buf[16];
	const uint8_t *code = buf;
	size_t avail = sizeof(buf);
	uint64_t addr = pc;

	if (read(ctx, pc, buf, sizeof(buf)) != 0)
		return -EFAULT;
	return cs_disasm_iter(cs, &code, &avail, &addr, insn) ? 0 : -EFAULT;
}

/* From @target to @iret: harmless instructions and conditional jumps (away: the ESPFIX path)
 * only. */
static bool iu_clean_to_iret(csh cs, gi_kva_read_fn read, void *ctx, cs_insn *insn,
			     uint64_t target, uint64_t iret)
{
	uint64_t pc = target;

	while (pc < iret) {
		if (iu_decode(cs, read, ctx, pc, insn) != 0)
			return false;
		if (!iu_harmless(insn->id) &&
		    !(cs_insn_group(cs, insn, X86_GRP_JUMP) && insn->id != X86_INS_JMP))
			return false;
		pc += insn->size;
	}
	return pc == iret;
}

static int iu_walk(csh cs, cs_insn *insn, gi_kva_read_fn read, void *ctx, uint64_t start,
		   uint64_t iret, struct gi_branch *out)
{
	bool swapped = false;
	uint64_t pc = start;

	for (unsigned int n = 0; n < IU_INSNS_MAX; n++) {
		uint64_t t;
		int err = iu_decode(cs, read, ctx, pc, insn);

		if (err)
			return err;
		t = gi_insn_target(insn);
		if (insn->id == X86_INS_SWAPGS) {
			if (swapped)
				return -ENOENT;
			swapped = true;
		} else if (t && swapped && t <= iret && iret - t <= IU_NEAR_IRET &&
			   (insn->id == X86_INS_JMP || insn->id == X86_INS_JNE) &&
			   insn->size <= sizeof(out->bytes)) {
			struct gi_branch b = { .kva = pc, .target = t, .len = (uint8_t)insn->size,
					       .cond = insn->id == X86_INS_JNE ? GI_BRANCH_NZ
									: GI_BRANCH_ALWAYS };

			/* SAFETY: insn->size <= sizeof(b.bytes) (checked above) */
			memcpy(b.bytes, insn->bytes, insn->size);
			/* a jne's fall-through is the kernel's assertion (ud2): no way past it */
			if (b.cond == GI_BRANCH_NZ &&
			    (iu_decode(cs, read, ctx, pc + b.len, insn) != 0 ||
			     insn->id != X86_INS_UD2))
				return -ENOENT;
			if (!iu_clean_to_iret(cs, read, ctx, insn, t, iret))
				return -ENOENT;
			*out = b;
			return 0;
		} else if (insn->id == X86_INS_JMP) {
			/* an unconditional jump is followed (direct only, near the symbol) */
			if (!t || (t > start ? t - start : start - t) > IU_SPAN)
				return -ENOENT;
			if (swapped && t > iret)
				return -ENOENT;
			pc = t;
			continue;
		} else if (swapped && !iu_harmless(insn->id)) {
			return -ENOENT; /* a register may change, or a branch leave, after the swapgs */
		} else if (cs_insn_group(cs, insn, X86_GRP_RET) ||
			   cs_insn_group(cs, insn, X86_GRP_IRET) || insn->id == X86_INS_UD2 ||
			   insn->id == X86_INS_SYSRET || insn->id == X86_INS_INT3) {
			return -ENOENT;
		}
		pc += insn->size; /* before the swapgs, conditional jumps: the fall-through */
	}
	return -ENOENT;
}

int gi_iret_user_branch_find(const struct symtab *st, gi_kva_read_fn read, void *ctx,
			     uint64_t iret, struct gi_branch *out)
{
	uint64_t start;
	cs_insn *insn;
	csh cs;
	int err;

	if (!st || !read || !out || !iret)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (symtab_find(st, "swapgs_restore_regs_and_return_to_usermode", &start) != 0 ||
	    start >= iret || iret - start > IU_SPAN)
		return -ENOENT;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return -ENOMEM;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	if (!insn) {
		cs_close(&cs);
		return -ENOMEM;
	}
	err = iu_walk(cs, insn, read, ctx, start, iret, out);
	cs_free(insn, 1);
	cs_close(&cs);
	return err;
}
