// SPDX-License-Identifier: MIT
// vCPU set-up: CPUID (what the guest may see), and the register state of the 64-bit entry
// (Linux boot protocol, "64-bit boot protocol": paging on, flat GDT, RSI = boot_params).
#define pr_fmt(fmt) "vmm: cpu: " fmt
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <hvprof/log.h>

#include <hvprof/pgwalk.h> /* gi_read_gva: the x86 page walk */

#include "vmm_internal.h"

#define CPUID_MAX_ENTRIES 256

/* Leaf 1 ECX/EDX and leaf 7 bits (SDM vol. 2A, CPUID) hidden from the guest. Instructions the
 * PVM emulator lacks (cmpxchg16b, xsave/xrstor, popcnt, clac/stac) must not be chosen by the
 * guest kernel; the kernel command line (clearcpuid=, noxsave) backs this up where PVM ignores
 * the mask. */
#define CPUID1_ECX_CX16 (1u << 13)
#define CPUID1_ECX_POPCNT (1u << 23)
#define CPUID1_ECX_XSAVE (1u << 26)
#define CPUID1_ECX_OSXSAVE (1u << 27)
#define CPUID1_ECX_AVX (1u << 28)
#define CPUID1_ECX_RDRAND (1u << 30)
#define CPUID1_ECX_HYPERVISOR (1u << 31)
#define CPUID7_EBX_SMEP (1u << 7)
#define CPUID7_EBX_ERMS (1u << 9)
#define CPUID7_EBX_INVPCID (1u << 10)
#define CPUID7_EBX_RDSEED (1u << 18)
#define CPUID7_EBX_SMAP (1u << 20)
#define CPUID7_EBX_AVX2 (1u << 5)
#define CPUID7_EDX_FSRM (1u << 4)
/* KVM paravirtual features (CPUID 0x40000001 EAX, Documentation/virt/kvm/x86/cpuid.rst) that
 * an SMP guest would use in place of native IPIs. On PVM hosts the hypercall behind PV IPIs
 * (KVM_HC_SEND_IPI) never completed: a 2-vCPU boot hung in kvm_hypercall4 from
 * native_smp_send_reschedule with the runqueue lock held, the AP spinning on it. PV sched
 * yield and PV unhalt are hypercalls too; PV TLB flush defers flushes of preempted vCPUs to the
 * host. Hidden, the guest uses plain IPIs through the in-kernel local APIC. */
#define KVM_CPUID_FEATURES_LEAF 0x40000001u
#define KVM_FEATURE_PV_UNHALT_BIT (1u << 7)
#define KVM_FEATURE_PV_TLB_FLUSH_BIT (1u << 9)
#define KVM_FEATURE_PV_SEND_IPI_BIT (1u << 11)
#define KVM_FEATURE_PV_SCHED_YIELD_BIT (1u << 13)

int cpu_setup_cpuid(struct vmm *vm)
{
	struct kvm_cpuid2 *cpuid;
	int err;

	cpuid = calloc(1, sizeof(*cpuid) + CPUID_MAX_ENTRIES * sizeof(struct kvm_cpuid_entry2));
	if (!cpuid)
		return -ENOMEM;
	cpuid->nent = CPUID_MAX_ENTRIES;
	if (ioctl(vm->kvm_fd, KVM_GET_SUPPORTED_CPUID, cpuid) < 0) {
		err = -errno;
		pr_err("KVM_GET_SUPPORTED_CPUID: %s", hvp_strerror(err));
		free(cpuid);
		return err;
	}
	vm->maxphyaddr = 36;
	for (unsigned int i = 0; i < cpuid->nent; i++) {
		struct kvm_cpuid_entry2 *e = &cpuid->entries[i];

		switch (e->function) {
		case 1:
			e->ecx &= ~(CPUID1_ECX_CX16 | CPUID1_ECX_POPCNT | CPUID1_ECX_XSAVE |
				    CPUID1_ECX_OSXSAVE | CPUID1_ECX_AVX | CPUID1_ECX_RDRAND);
			e->ecx |= CPUID1_ECX_HYPERVISOR;
			break;
		case 7:
			if (e->index == 0) {
				e->ebx &= ~(CPUID7_EBX_SMEP | CPUID7_EBX_ERMS | CPUID7_EBX_INVPCID |
					    CPUID7_EBX_RDSEED | CPUID7_EBX_SMAP | CPUID7_EBX_AVX2);
				e->edx &= ~CPUID7_EDX_FSRM;
			}
			break;
		case 0xd: /* XSAVE state enumeration: nothing, since XSAVE is hidden */
			e->eax = e->ebx = e->ecx = e->edx = 0;
			break;
		case KVM_CPUID_FEATURES_LEAF:
			e->eax &= ~(KVM_FEATURE_PV_UNHALT_BIT | KVM_FEATURE_PV_TLB_FLUSH_BIT |
				    KVM_FEATURE_PV_SEND_IPI_BIT | KVM_FEATURE_PV_SCHED_YIELD_BIT);
			break;
		case 0x80000008:
			if ((e->eax & 0xff) >= 32 && (e->eax & 0xff) <= 52)
				vm->maxphyaddr = e->eax & 0xff;
			break;
		default:
			break;
		}
	}
	vm->cpuid = cpuid;
	return 0;
}

/* Per-vCPU CPUID: the APIC ID in leaf 1 EBX[31:24] and leaf 0xb EDX. */
static int vcpu_set_cpuid(struct vmm *vm, struct vmm_vcpu *vcpu)
{
	size_t size = sizeof(*vm->cpuid) + vm->cpuid->nent * sizeof(struct kvm_cpuid_entry2);
	struct kvm_cpuid2 *c = malloc(size);
	int err = 0;

	if (!c)
		return -ENOMEM;
	memcpy(c, vm->cpuid, size);
	for (unsigned int i = 0; i < c->nent; i++) {
		struct kvm_cpuid_entry2 *e = &c->entries[i];

		if (e->function == 1) {
			e->ebx = (e->ebx & 0x0000ffff) | (vcpu->index << 24) |
				 ((vm->n_vcpus & 0xff) << 16);
			if (vm->n_vcpus > 1)
				e->edx |= 1u << 28; /* HTT: EBX[23:16] is valid */
		} else if (e->function == 0xb || e->function == 0x1f) {
			e->edx = vcpu->index;
		}
	}
	if (ioctl(vcpu->fd, KVM_SET_CPUID2, c) < 0) {
		err = -errno;
		pr_err("vCPU %u: KVM_SET_CPUID2: %s", vcpu->index, hvp_strerror(err));
	}
	free(c);
	return err;
}

static void seg64(struct kvm_segment *s, uint16_t sel, uint8_t type, bool code)
{
	memset(s, 0, sizeof(*s));
	s->selector = sel;
	s->base = 0;
	s->limit = 0xffffffff;
	s->type = type;
	s->present = 1;
	s->dpl = 0;
	s->s = 1;
	s->g = 1;
	s->l = code ? 1 : 0;
	s->db = code ? 0 : 1;
}

int vcpu_init_regs(struct vmm *vm, struct vmm_vcpu *vcpu)
{
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	int err;

	err = vcpu_set_cpuid(vm, vcpu);
	if (err)
		return err;
	if (vcpu->index != 0)
		return 0; /* APs start when the guest sends INIT/SIPI (in-kernel LAPIC) */

	if (ioctl(vcpu->fd, KVM_GET_SREGS, &sregs) < 0) {
		err = -errno;
		pr_err("vCPU %u: KVM_GET_SREGS: %s", vcpu->index, hvp_strerror(err));
		return err;
	}
	seg64(&sregs.cs, 0x10, 0xb, true);
	seg64(&sregs.ds, 0x18, 0x3, false);
	sregs.es = sregs.fs = sregs.gs = sregs.ss = sregs.ds;
	sregs.gdt.base = VMM_GDT_GPA;
	sregs.gdt.limit = 4 * 8 - 1;
	sregs.cr3 = VMM_PML4_GPA;
	sregs.cr4 = 1u << 5;                      /* PAE */
	sregs.cr0 = (1u << 0) | (1u << 4) | (1u << 31); /* PE, ET, PG */
	sregs.efer = (1u << 8) | (1u << 10);      /* LME, LMA */
	if (ioctl(vcpu->fd, KVM_SET_SREGS, &sregs) < 0) {
		err = -errno;
		pr_err("vCPU %u: KVM_SET_SREGS: %s", vcpu->index, hvp_strerror(err));
		return err;
	}
	memset(&regs, 0, sizeof(regs));
	regs.rflags = 0x2;
	regs.rip = vm->boot.entry_gpa;
	regs.rsi = VMM_ZERO_PAGE_GPA;
	regs.rsp = 0x8ff0;
	regs.rbp = 0x8ff0;
	if (ioctl(vcpu->fd, KVM_SET_REGS, &regs) < 0) {
		err = -errno;
		pr_err("vCPU %u: KVM_SET_REGS: %s", vcpu->index, hvp_strerror(err));
		return err;
	}
	return 0;
}

int vmm_vcpu_regs(struct vmm_vcpu *vcpu, struct kvm_regs **regs, struct kvm_sregs **sregs)
{
	if (vcpu->vm->sync_regs && !vcpu->regs_dirty && !vcpu->sregs_dirty) {
		/* KVM_CAP_SYNC_REGS: KVM copied them into kvm_run at the exit (~0.1 us). */
		if (regs)
			*regs = &vcpu->run->s.regs.regs;
		if (sregs)
			*sregs = &vcpu->run->s.regs.sregs;
		return 0;
	}
	return vmm_vcpu_regs_rw(vcpu, regs, sregs);
}

int vmm_vcpu_regs_rw(struct vmm_vcpu *vcpu, struct kvm_regs **regs, struct kvm_sregs **sregs)
{
	/* The copies to modify come from the sync-regs area KVM filled at the exit, where there
	 * is one: each vCPU ioctl costs a vcpu_load, which on a nested PVM host reads MSRs
	 * through the outer hypervisor (~10 us each there: counters regs_write_ns and
	 * debug_set_ns; seen with host perf as native_read_msr under kvm_arch_vcpu_load).
	 * Writes stay ioctls (vmm_vcpu_regs_dirty). */
	bool sync = vcpu->vm->sync_regs && vcpu->sync_filled;

	if (regs && !vcpu->regs_valid) {
		if (sync)
			vcpu->regs = vcpu->run->s.regs.regs;
		else if (ioctl(vcpu->fd, KVM_GET_REGS, &vcpu->regs) < 0)
			return -errno;
		vcpu->regs_valid = true;
	}
	if (sregs && !vcpu->sregs_valid) {
		if (sync)
			vcpu->sregs = vcpu->run->s.regs.sregs;
		else if (ioctl(vcpu->fd, KVM_GET_SREGS, &vcpu->sregs) < 0)
			return -errno;
		vcpu->sregs_valid = true;
	}
	if (regs)
		*regs = &vcpu->regs;
	if (sregs)
		*sregs = &vcpu->sregs;
	return 0;
}

/*
 * Write back the segment and control registers. KVM_SET_SREGS also takes an interrupt bitmap
 * and re-queues any interrupt KVM_GET_SREGS reported as injected: at a breakpoint on iretq that
 * re-delivered the same interrupt forever. KVM_SET_SREGS2 (KVM_CAP_SREGS2) has no bitmap; where
 * it is missing the bitmap is cleared.
 */
static int vcpu_put_sregs(struct vmm_vcpu *vcpu)
{
	const struct kvm_sregs *s = &vcpu->sregs;

	if (vcpu->vm->sregs2) {
		struct kvm_sregs2 s2;

		memset(&s2, 0, sizeof(s2));
		s2.cs = s->cs;
		s2.ds = s->ds;
		s2.es = s->es;
		s2.fs = s->fs;
		s2.gs = s->gs;
		s2.ss = s->ss;
		s2.tr = s->tr;
		s2.ldt = s->ldt;
		s2.gdt = s->gdt;
		s2.idt = s->idt;
		s2.cr0 = s->cr0;
		s2.cr2 = s->cr2;
		s2.cr3 = s->cr3;
		s2.cr4 = s->cr4;
		s2.cr8 = s->cr8;
		s2.efer = s->efer;
		s2.apic_base = s->apic_base;
		if (ioctl(vcpu->fd, KVM_SET_SREGS2, &s2) < 0)
			return -errno;
		return 0;
	}
	memset(vcpu->sregs.interrupt_bitmap, 0, sizeof(vcpu->sregs.interrupt_bitmap));
	if (ioctl(vcpu->fd, KVM_SET_SREGS, &vcpu->sregs) < 0)
		return -errno;
	return 0;
}

void vmm_vcpu_regs_dirty(struct vmm_vcpu *vcpu, bool regs, bool sregs)
{
	/* Written back with KVM_SET_REGS/KVM_SET_SREGS before the next KVM_RUN, never through
	 * the sync-regs dirty bits: on PVM hosts a sync-regs write after an exception delivered
	 * from user mode was seen to restore a stale RSP (guest double fault at 1 kHz sampling),
	 * while the ioctls are right. */
	vcpu->regs_dirty |= regs;
	vcpu->sregs_dirty |= sregs;
	vcpu->regs_ioctl |= regs;
}

void vmm_vcpu_regs_dirty_in_kernel(struct vmm_vcpu *vcpu)
{
	vcpu->regs_dirty = true;
}

int vcpu_put_dirty(struct vmm_vcpu *vcpu)
{
	uint64_t t0;

	if (!vcpu->regs_dirty && !vcpu->sregs_dirty)
		return 0;
	if (vcpu->regs_dirty && !vcpu->regs_ioctl && !vcpu->sregs_dirty && vcpu->vm->sync_regs &&
	    vcpu->sync_filled) {
		/* KVM applies them at the start of the next KVM_RUN and clears the bit */
		vcpu->run->s.regs.regs = vcpu->regs;
		vcpu->run->kvm_dirty_regs |= KVM_SYNC_X86_REGS;
		vcpu->regs_dirty = false;
		vcpu->c.regs_sync_writes++;
		return 0;
	}
	t0 = vmm_now_ns();
	if (vcpu->regs_dirty) {
		vcpu->c.regs_writes++;
		if (ioctl(vcpu->fd, KVM_SET_REGS, &vcpu->regs) < 0)
			return -errno;
	}
	vcpu->regs_dirty = false;
	if (vcpu->sregs_dirty) {
		int err;

		vcpu->c.regs_writes++;
		err = vcpu_put_sregs(vcpu);
		if (err)
			return err;
	}
	vcpu->sregs_dirty = false;
	vcpu->c.regs_write_ns += vmm_now_ns() - t0;
	return 0;
}

int vmm_vcpu_get_msr(struct vmm_vcpu *vcpu, uint32_t index, uint64_t *value)
{
	struct {
		struct kvm_msrs hdr;
		struct kvm_msr_entry e;
	} m;

	memset(&m, 0, sizeof(m));
	m.hdr.nmsrs = 1;
	m.e.index = index;
	if (ioctl(vcpu->fd, KVM_GET_MSRS, &m) != 1)
		return -EIO;
	*value = m.e.data;
	return 0;
}

int vcpu_read_gva(struct vmm_vcpu *vcpu, const struct kvm_sregs *sregs, uint64_t gva, void *dst,
		  size_t len)
{
	/* The vCPU's own CR3 (the x86 page walk lives in guestinfo/pgwalk.c). */
	struct gi_paging pg = { .cr0 = sregs->cr0, .cr3 = sregs->cr3, .cr4 = sregs->cr4,
				.efer = sregs->efer, .maxphyaddr = vcpu->vm->maxphyaddr };

	return gi_read_gva(&vcpu->vm->gmem, &pg, gva, dst, len);
}
