// SPDX-License-Identifier: MIT
// The PVM SYSCALL fix-up (../shared/pvm-facts.md, "The SYSCALL quirk"): on a PVM host a SYSCALL
// from CPL3 loads RIP = MSR_LSTAR but leaves the vCPU at CPL3, so the fetch faults (#PF, error
// code 0x15, CR2 = LSTAR). A hardware breakpoint on the guest's #PF entry sees that fault; the VMM
// then completes the SYSCALL transition itself (CPL0 CS/SS from MSR_STAR, RIP = LSTAR) and lets
// every other page fault through by stepping over the entry's first instruction.
#define pr_fmt(fmt) "vmm: pvm: " fmt
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "vmm_internal.h"

#define MSR_STAR 0xc0000081
#define MSR_LSTAR 0xc0000082
#define MSR_SYSCALL_MASK 0xc0000084
#define RFLAGS_DF (1ull << 10)
#define PF_ERR_SYSCALL_QUIRK 0x15 /* present | user | instruction fetch */
#define USER_CS 0x33
#define USER_SS 0x2b

bool vmm_host_is_pvm(void)
{
	/* PVM is a kernel module of its own; VMX/SVM hosts never load it. Built in, it shows in
	 * /sys/module even where it did not bind (a kernel that is itself a PVM guest: "this
	 * kernel is itself a kvm-pvm guest; not binding"), and then there is no /dev/kvm. */
	return access("/sys/module/kvm_pvm", F_OK) == 0 && access("/dev/kvm", F_OK) == 0;
}

/*
 * What a Linux guest needs on a PVM host (../shared/pvm-facts.md): its kernel code is emulated,
 * and a few instructions are not (XRSTOR, POPCNT, CLAC, ...), the LAPIC timer storms, and without
 * early output a slow boot looks dead. @alt: another word that decides the same thing.
 */
static const struct {
	const char *word, *alt;
} pvm_words[] = {
	{ "earlyprintk=serial,ttyS0", NULL },
	{ "nolapic", "nolapic_timer" },
	{ "noxsave", NULL },
	{ "clearcpuid=erms,fsrm,popcnt,smap,smep,avx,avx2,pku,rdrand,rdseed,pcid,invpcid", NULL },
	{ "tsc=reliable", NULL },
};

/* Whether @cmdline has a word whose key (up to '=') is @word's. */
static bool has_key(const char *cmdline, const char *word)
{
	size_t klen = strcspn(word, "=");

	for (const char *p = cmdline; p && *p;) {
		size_t len;

		p += strspn(p, " ");
		len = strcspn(p, " ");
		if (len >= klen && !strncmp(p, word, klen) && (len == klen || p[klen] == '='))
			return true;
		p += len;
	}
	return false;
}

int vmm_guest_cmdline(const char *cmdline, unsigned int cpus, bool pvm, char **out, char **added)
{
	size_t cap = (cmdline ? strlen(cmdline) : 0) + 1;
	char *line, *add;

	for (size_t i = 0; i < ARRAY_SIZE(pvm_words); i++)
		cap += strlen(pvm_words[i].word) + 8;
	line = calloc(1, cap);
	add = calloc(1, cap);
	if (!line || !add) {
		free(line);
		free(add);
		return -ENOMEM;
	}
	strcpy(line, cmdline ? cmdline : "");
	for (size_t i = 0; pvm && i < ARRAY_SIZE(pvm_words); i++) {
		/* with several vCPUs the local APICs are needed for IPIs: only their timer is off
		 * (docs/smp-on-pvm.md) */
		const char *w = i == 1 && cpus > 1 ? "nolapic_timer" : pvm_words[i].word;

		if (has_key(line, pvm_words[i].word) ||
		    (pvm_words[i].alt && has_key(line, pvm_words[i].alt)))
			continue;
		/* SAFETY: cap counts every word with its space. */
		strcat(strcat(line, *line ? " " : ""), w);
		strcat(strcat(add, *add ? " " : ""), w);
	}
	*out = line;
	*added = add;
	return 0;
}

void vmm_pvm_fixup_enable(struct vmm *vm, uint64_t pf_entry)
{
	if (!vm->is_pvm)
		return;
	if (!vm->pvm.enabled) { /* before vmm_run: the strategy line is read then */
		vm->pvm.enabled = true;
		vmm_strategy_update(vm);
	}
	if (!pf_entry)
		return; /* the address follows once the KASLR slide is known */
	vmm_bp_set_addr(vm, VMM_BP_PVM, pf_entry);
	vmm_bp_arm(vm, 1u << VMM_BP_PVM, true, NULL);
}

static int read_syscall_msrs(struct vmm_vcpu *vcpu, uint64_t *star, uint64_t *lstar, uint64_t *sfmask)
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
static int first_insn(struct vmm_vcpu *vcpu, const struct kvm_sregs *sregs, uint64_t pf_entry)
{
	struct pvm_fixup *p = &vcpu->vm->pvm;
	uint8_t b[5];

	if (p->step_len)
		return 0;
	if (vcpu_read_gva(vcpu, sregs, pf_entry, b, sizeof(b)) != 0)
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
		       (unsigned long long)pf_entry, b[0], b[1], b[2]);
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

int pvm_fixup_hit(struct vmm_vcpu *vcpu)
{
	struct vmm *vm = vcpu->vm;
	struct pvm_fixup *p = &vm->pvm;
	struct kvm_regs *regs;
	struct kvm_sregs *sregs;
	uint64_t frame[6]; /* error code, RIP, CS, RFLAGS, RSP, SS (SDM vol. 3A, 6.14.2) */
	uint64_t pf_entry = atomic_load(&vm->bp_addr[VMM_BP_PVM]);
	int err;

	if (!p->enabled || vcpu->run->debug.arch.pc != pf_entry) {
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: unexpected debug exit at 0x%llx",
			vcpu->index, (unsigned long long)vcpu->run->debug.arch.pc);
		return 1;
	}
	err = vmm_vcpu_regs_rw(vcpu, &regs, &sregs);
	if (err)
		goto fail;
	/* the frame is on the entry stack, mapped in every CR3 (also the user half under PTI) */
	err = vcpu_read_gva(vcpu, sregs, regs->rsp, frame, sizeof(frame));
	if (err == 0 && frame[0] == PF_ERR_SYSCALL_QUIRK && frame[2] == USER_CS &&
	    frame[5] == USER_SS && frame[1] == sregs->cr2) {
		/* The kernel writes the three together, once per CPU (syscall_init): kept, and
		 * read again (a vCPU ioctl: ~10 us on a nested host) only for a SYSCALL that did
		 * not land on the LSTAR kept. */
		if (!vcpu->sc_msrs_valid || frame[1] != vcpu->sc_lstar) {
			err = read_syscall_msrs(vcpu, &vcpu->sc_star, &vcpu->sc_lstar,
						&vcpu->sc_sfmask);
			vcpu->sc_msrs_valid = err == 0;
			if (err)
				goto fail;
			vcpu->c.syscall_msr_reads++;
		}
		/* A real SYSCALL masked RFLAGS with SFMASK (so IF=0); a user jump to LSTAR did not,
		 * and must get its SIGSEGV. */
		if (frame[1] == vcpu->sc_lstar && !(frame[3] & vcpu->sc_sfmask & ~VMM_RFLAGS_RF)) {
			uint64_t star = vcpu->sc_star;

			regs->rip = vcpu->sc_lstar;
			regs->rsp = frame[4]; /* SYSCALL does not switch stacks */
			regs->rflags = (frame[3] & ~VMM_RFLAGS_RF) | 0x2;
			/* RCX and R11 already hold the user RIP and RFLAGS. */
			set_cpl0_segments(sregs, star);
			vmm_vcpu_regs_dirty(vcpu, true, true);
			vcpu->c.syscall_fixups++;
			return 0;
		}
	}
	/* An ordinary page fault: step over the first instruction (RF is ignored here). */
	err = first_insn(vcpu, sregs, pf_entry);
	if (err)
		goto fail;
	regs->rip += p->step_len;
	if (p->step_is_cld)
		regs->rflags &= ~RFLAGS_DF;
	vmm_vcpu_regs_dirty(vcpu, true, false);
	vcpu->c.pf_steps++;
	return 0;
fail:
	vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: PVM SYSCALL fix-up failed at #PF entry: %s",
		vcpu->index, hvp_strerror(err));
	return 1;
}
