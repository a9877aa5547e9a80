// SPDX-License-Identifier: MIT
// The PVM SYSCALL fix-up (../shared/pvm-facts.md, "The SYSCALL quirk"): on a PVM host a SYSCALL
// from CPL3 loads RIP = MSR_LSTAR but leaves the vCPU at CPL3, so the fetch faults (#PF, error
// code 0x15, CR2 = LSTAR). A hardware breakpoint on the guest's #PF entry sees that fault; the VMM
// then completes the SYSCALL transition itself (CPL0 CS/SS from MSR_STAR, RIP = LSTAR) and lets
// every other page fault through by stepping over the entry's first instruction.
#define pr_fmt(fmt) "vmm: pvm: " fmt
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "vmm_internal.h"

#define MSR_STAR 0xc0000081
#define MSR_LSTAR 0xc0000082
#define MSR_SYSCALL_MASK 0xc0000084
#define RFLAGS_RF (1ull << 16)
#define RFLAGS_DF (1ull << 10)
#define PF_ERR_SYSCALL_QUIRK 0x15 /* present | user | instruction fetch */
#define USER_CS 0x33
#define USER_SS 0x2b

int pvm_fixup_setup(struct vmm *vm)
{
	const struct symtab *st;
	uint64_t kva;

	if (!vm->is_pvm)
		return 0;
	if (!vm->gi) {
		pr_warn("no kernel symbols: the PVM SYSCALL fix-up is off, guest programs cannot "
			"make system calls on this host");
		return 0;
	}
	st = gi_symtab(vm->gi);
	if (symtab_find(st, "asm_exc_page_fault", &kva) != 0 &&
	    symtab_find(st, "page_fault", &kva) != 0) {
		pr_warn("kernel has no asm_exc_page_fault symbol: the PVM SYSCALL fix-up is off");
		return 0;
	}
	vm->pvm.pf_entry_kva = kva;
	vm->pvm.enabled = true;
	return 0;
}

static int read_syscall_msrs(struct vcpu *vcpu, uint64_t *star, uint64_t *lstar, uint64_t *sfmask)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e[3];
	} m;

	memset(&m, 0, sizeof(m));
	m.hdr.nmsrs = 3;
	m.e[0].index = MSR_STAR;
	m.e[1].index = MSR_LSTAR;
	m.e[2].index = MSR_SYSCALL_MASK;
	if (ioctl(vcpu->fd, KVM_GET_MSRS, &m) != 3)
		return -EIO;
	*star = m.e[0].data;
	*lstar = m.e[1].data;
	*sfmask = m.e[2].data;
	return 0;
}

/* How to get past the #PF entry's first instruction: it is ASM_CLAC, patched to a NOP at boot
 * (or a CLD when CLAC is not patched in). Decided from the bytes in guest memory. */
static int first_insn(struct vcpu *vcpu, const struct gi_paging *pg)
{
	struct pvm_fixup *p = &vcpu->vm->pvm;
	uint8_t b[5];

	if (p->step_len)
		return 0;
	if (gi_read_gva(&vcpu->vm->gmem, pg, p->pf_entry_kva, b, sizeof(b)) != 0)
		return -EFAULT;
	if (b[0] == 0x90)
		p->step_len = 1;
	else if (b[0] == 0x66 && b[1] == 0x90)
		p->step_len = 2;
	else if (b[0] == 0x0f && b[1] == 0x1f && b[2] == 0x00)
		p->step_len = 3;
	else if (b[0] == 0x0f && b[1] == 0x1f && b[2] == 0x40 && b[3] == 0x00)
		p->step_len = 4;
	else if (b[0] == 0x0f && b[1] == 0x1f && b[2] == 0x44 && b[3] == 0x00 && b[4] == 0x00)
		p->step_len = 5;
	else if (b[0] == 0xfc) {
		p->step_len = 1;
		p->step_is_cld = true;
	} else {
		pr_err("#PF entry 0x%llx starts with %02x %02x %02x: cannot step over it",
		       (unsigned long long)p->pf_entry_kva, b[0], b[1], b[2]);
		return -ENOTSUP;
	}
	return 0;
}

static void set_cpl0_segments(struct kvm_sregs *sregs, uint64_t star)
{
	uint16_t cs_sel = (uint16_t)((star >> 32) & 0xfffc);

	memset(&sregs->cs, 0, sizeof(sregs->cs));
	sregs->cs.selector = cs_sel;
	sregs->cs.limit = 0xffffffff;
	sregs->cs.type = 0xb; /* execute/read, accessed */
	sregs->cs.s = 1;
	sregs->cs.present = 1;
	sregs->cs.l = 1;
	sregs->cs.g = 1;
	memset(&sregs->ss, 0, sizeof(sregs->ss));
	sregs->ss.selector = (uint16_t)(cs_sel + 8);
	sregs->ss.limit = 0xffffffff;
	sregs->ss.type = 0x3; /* read/write, accessed */
	sregs->ss.s = 1;
	sregs->ss.present = 1;
	sregs->ss.db = 1;
	sregs->ss.g = 1;
}

int pvm_fixup_hit(struct vcpu *vcpu)
{
	struct vmm *vm = vcpu->vm;
	struct pvm_fixup *p = &vm->pvm;
	struct kvm_regs *regs;
	struct kvm_sregs *sregs;
	struct gi_paging pg;
	uint64_t frame[6]; /* error code, RIP, CS, RFLAGS, RSP, SS (SDM vol. 3A, 6.14.2) */
	int err;

	if (!p->enabled || vcpu->run->debug.arch.pc != p->pf_entry_kva) {
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: unexpected debug exit at 0x%llx",
			vcpu->index, (unsigned long long)vcpu->run->debug.arch.pc);
		return 1;
	}
	err = vcpu_get_regs_rw(vcpu, &regs, &sregs);
	if (err)
		goto fail;
	pg = vcpu_paging(vm, sregs);
	err = gi_read_gva(&vm->gmem, &pg, regs->rsp, frame, sizeof(frame));
	if (err == 0 && frame[0] == PF_ERR_SYSCALL_QUIRK && frame[2] == USER_CS &&
	    frame[5] == USER_SS && frame[1] == sregs->cr2) {
		uint64_t star, lstar, sfmask;

		err = read_syscall_msrs(vcpu, &star, &lstar, &sfmask);
		if (err)
			goto fail;
		/* A real SYSCALL masked RFLAGS with SFMASK (so IF=0); a user jump to LSTAR did not,
		 * and must get its SIGSEGV. */
		if (frame[1] == lstar && !(frame[3] & sfmask & ~RFLAGS_RF)) {
			regs->rip = lstar;
			regs->rsp = frame[4]; /* SYSCALL does not switch stacks */
			regs->rflags = (frame[3] & ~RFLAGS_RF) | 0x2;
			/* RCX and R11 already hold the user RIP and RFLAGS. */
			set_cpl0_segments(sregs, star);
			vcpu_mark_regs_dirty(vcpu, true, true);
			vcpu->c.syscall_fixups++;
			return 0;
		}
	}
	/* An ordinary page fault: step over the first instruction (RF is ignored here). */
	err = first_insn(vcpu, &pg);
	if (err)
		goto fail;
	regs->rip += p->step_len;
	if (p->step_is_cld)
		regs->rflags &= ~RFLAGS_DF;
	vcpu_mark_regs_dirty(vcpu, true, false);
	vcpu->c.pf_steps++;
	return 0;
fail:
	vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: PVM SYSCALL fix-up failed at #PF entry: %s",
		vcpu->index, hvp_strerror(err));
	return 1;
}
