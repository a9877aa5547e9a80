// SPDX-License-Identifier: MIT
// VM-exit dispatch. exit_io/exit_mmio work on a plain struct kvm_run so tests can fake exits.
#define pr_fmt(fmt) "vmm: exit: " fmt
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include <hvprof/log.h>

#include "vmm_internal.h"
#include "devices/virtio.h"

#define PORT_KBD_CMD 0x64
#define KBD_CMD_RESET 0xfe
#define PORT_POST 0x80
#define PORT_CMOS_INDEX 0x70
#define PORT_CMOS_DATA 0x71
#define RFLAGS_IF (1u << 9)

int exit_io(struct vmm *vm, struct vmm_vcpu *vcpu, struct kvm_run *run)
{
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	bool is_write = run->io.direction == KVM_EXIT_IO_OUT;
	uint16_t port = run->io.port;

	vcpu->c.exits_io++;
	if (run->io.size == 1) {
		struct serial8250 *uart = NULL;
		uint16_t base = 0;

		if (port >= SERIAL_COM1_BASE && port < SERIAL_COM1_BASE + 8) {
			uart = &vm->com1;
			base = SERIAL_COM1_BASE;
		} else if (vm->cfg.cmd_channel && port >= SERIAL_COM2_BASE &&
			   port < SERIAL_COM2_BASE + 8) {
			uart = &vm->com2; /* without the command channel, COM2 floats (below) */
			base = SERIAL_COM2_BASE;
		}
		if (uart) {
			/* SAFETY: KVM puts size * count bytes at data_offset within the run page */
			for (uint32_t i = 0; i < run->io.count; i++)
				serial_io(uart, port - base, is_write, data + i);
			return 0;
		}
	}
	if (port == PORT_KBD_CMD && is_write && run->io.size == 1 && data[0] == KBD_CMD_RESET) {
		/* The 8042 pulses the CPU reset line: Linux's "reboot=k", the x86 default. */
		vmm_end(vm, HVP_END_RESET, -1, "guest reset through the keyboard controller");
		return 1;
	}
	if (port == PORT_POST)
		return 0; /* I/O delay port */
	if (!is_write) {
		/* An absent device floats the bus: all ones (CMOS reads 0: no RTC data). */
		uint8_t v = (port == PORT_CMOS_DATA) ? 0 : 0xff;

		memset(data, v, (size_t)run->io.size * run->io.count);
	}
	if (port != PORT_CMOS_INDEX && port != PORT_CMOS_DATA)
		vcpu->c.io_unhandled++;
	pr_debug(LOG_EXIT, "vCPU %u: unhandled I/O port 0x%x %s size %u", vcpu->index, port,
		 is_write ? "write" : "read", run->io.size);
	return 0;
}

int exit_mmio(struct vmm *vm, struct vmm_vcpu *vcpu, struct kvm_run *run)
{
	uint64_t gpa = run->mmio.phys_addr;

	vcpu->c.exits_mmio++;
	if (gpa == VMM_EXIT_REG_GPA)
		return exit_reg_mmio(vm, vcpu, run);
	if (gpa >= VMM_VIRTIO_GPA && gpa - VMM_VIRTIO_GPA < vm->n_disks * VIRTIO_MMIO_SIZE)
		return disks_mmio(vm, vcpu, run);
	if (!run->mmio.is_write)
		memset(run->mmio.data, 0xff, sizeof(run->mmio.data));
	vcpu->c.mmio_unhandled++;
	pr_debug(LOG_EXIT, "vCPU %u: unhandled MMIO %s at GPA 0x%llx", vcpu->index,
		 run->mmio.is_write ? "write" : "read", (unsigned long long)gpa);
	return 0;
}

/* The instruction bytes of an emulation failure: from KVM if it gave them, else guest memory. */
static unsigned int emulation_bytes(struct vmm_vcpu *vcpu, uint8_t *bytes, unsigned int max)
{
	struct kvm_run *run = vcpu->run;
	struct kvm_regs *regs;
	struct kvm_sregs *sregs;
	unsigned int n = 0;

	if (run->emulation_failure.ndata >= 3 &&
	    (run->emulation_failure.flags & KVM_INTERNAL_ERROR_EMULATION_FLAG_INSTRUCTION_BYTES)) {
		n = run->emulation_failure.insn_size;
		if (n > max)
			n = max;
		if (n > sizeof(run->emulation_failure.insn_bytes))
			n = sizeof(run->emulation_failure.insn_bytes);
		memcpy(bytes, run->emulation_failure.insn_bytes, n);
		if (n)
			return n;
	}
	if (vmm_vcpu_regs(vcpu, &regs, &sregs) == 0) {
		for (n = max; n > 0; n--)
			if (vcpu_read_gva(vcpu, sregs, regs->rip, bytes, n) == 0)
				break;
	}
	return n;
}

static int inject_breakpoint(struct vmm_vcpu *vcpu)
{
	struct kvm_vcpu_events ev;

	if (ioctl(vcpu->fd, KVM_GET_VCPU_EVENTS, &ev) < 0)
		return -errno;
	ev.exception.injected = 1;
	ev.exception.nr = 3; /* #BP */
	ev.exception.has_error_code = 0;
	ev.flags = 0;
	if (ioctl(vcpu->fd, KVM_SET_VCPU_EVENTS, &ev) < 0)
		return -errno;
	return 0;
}

/* For a post-mortem of an emulation failure: registers and the top of the guest stack. */
static void dump_stack_words(struct vmm_vcpu *vcpu, const struct kvm_regs *regs)
{
	struct kvm_sregs *sregs;
	uint64_t words[24] = { 0 };
	size_t len;

	if (vmm_vcpu_regs(vcpu, NULL, &sregs) != 0)
		return;
	pr_info("vCPU %u: rip 0x%llx rsp 0x%llx rbp 0x%llx rax 0x%llx rflags 0x%llx cs 0x%x "
		"cr2 0x%llx cr3 0x%llx",
		vcpu->index, (unsigned long long)regs->rip, (unsigned long long)regs->rsp,
		(unsigned long long)regs->rbp, (unsigned long long)regs->rax,
		(unsigned long long)regs->rflags, sregs->cs.selector,
		(unsigned long long)sregs->cr2, (unsigned long long)sregs->cr3);
	/* up to the end of the stack's page: IST stacks are followed by guard pages */
	len = 4096 - (regs->rsp & 4095);
	if (len > sizeof(words))
		len = sizeof(words);
	if (vcpu_read_gva(vcpu, sregs, regs->rsp, words, len) != 0)
		return;
	for (unsigned int i = 0; i < ARRAY_SIZE(vcpu->trail); i++) {
		unsigned int t = (vcpu->trail_next + i) % ARRAY_SIZE(vcpu->trail);

		pr_info("vCPU %u: exit trail: reason %u rip 0x%llx cs 0x%x rsp 0x%llx rcx 0x%llx",
			vcpu->index, vcpu->trail[t].reason, (unsigned long long)vcpu->trail[t].rip,
			vcpu->trail[t].cs, (unsigned long long)vcpu->trail[t].rsp,
			(unsigned long long)vcpu->trail[t].rcx);
	}
	for (unsigned int i = 0; i < 24; i += 4)
		pr_info("vCPU %u: [rsp+0x%02x] %016llx %016llx %016llx %016llx", vcpu->index,
			i * 8, (unsigned long long)words[i], (unsigned long long)words[i + 1],
			(unsigned long long)words[i + 2], (unsigned long long)words[i + 3]);
}

static int exit_emulation_failure(struct vmm_vcpu *vcpu)
{
	struct vmm *vm = vcpu->vm;
	struct kvm_regs *regs;
	uint8_t bytes[15];
	char hex[3 * sizeof(bytes) + 1] = "";
	unsigned int n;
	int err;

	n = emulation_bytes(vcpu, bytes, sizeof(bytes));
	err = vmm_vcpu_regs_rw(vcpu, &regs, NULL);
	if (err) {
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: cannot read registers: %s", vcpu->index,
			hvp_strerror(err));
		return 1;
	}
	if (n >= 1 && bytes[0] == 0xcc) {
		/* int3 (the kernel's self-test): a trap, so #BP is delivered with RIP after it. */
		regs->rip += 1;
		if (ioctl(vcpu->fd, KVM_SET_REGS, regs) < 0) {
			err = -errno;
			goto fail;
		}
		vcpu->regs_dirty = false;
		err = inject_breakpoint(vcpu);
		if (err)
			goto fail;
		vcpu->c.emulation_int3++;
		return 0;
	}
	if (n >= 1 && bytes[0] == 0x9b) {
		/* fwait: no x87 exception can be pending (the guest never unmasks them here). */
		regs->rip += 1;
		vmm_vcpu_regs_dirty(vcpu, true, false);
		vcpu->c.emulation_fwait++;
		return 0;
	}
	err = -ENOTSUP;
fail:
	if (hvp_log_enabled(HVP_LOG_INFO, LOG_EXIT))
		dump_stack_words(vcpu, regs);
	for (unsigned int i = 0; i < n; i++)
		snprintf(hex + 3 * i, 4, "%02x ", bytes[i]);
	vmm_end(vm, HVP_END_ERROR, -1,
		"vCPU %u: KVM could not emulate the instruction at RIP 0x%llx (bytes: %s)%s%s",
		vcpu->index, (unsigned long long)regs->rip, n ? hex : "unreadable",
		err == -ENOTSUP ? "" : ": ", err == -ENOTSUP ? "" : hvp_strerror(err));
	return 1;
}

static int exit_halt(struct vmm_vcpu *vcpu)
{
	struct kvm_regs *regs;

	if (vmm_vcpu_regs(vcpu, &regs, NULL) == 0 && !(regs->rflags & RFLAGS_IF)) {
		vmm_end(vcpu->vm, HVP_END_RESET, -1,
			"vCPU %u halted with interrupts disabled (guest halt or power-off)",
			vcpu->index);
		return 1;
	}
	return 0;
}

/* KVM_RUN was interrupted: a sample when the counter overflowed, nothing for a kick. */
static int exit_intr(struct vmm_vcpu *vcpu, bool overflow)
{
	struct vmm *vm = vcpu->vm;

	vcpu->c.exits_intr++;
	if (atomic_load(&vm->stop_reason))
		return 1;
	if (!overflow) {
		if (vm->hooks.kick) /* a kick: another thread changed VM-wide state (vmm_kick) */
			vm->hooks.kick(vm->hooks.ctx, vcpu);
		return 0;
	}
	vcpu->c.exits_overflow++;
	if (vm->hooks.overflow && vm->hooks.overflow(vm->hooks.ctx, vcpu) != 0)
		return 1;
	return atomic_load(&vm->stop_reason) ? 1 : 0;
}

int exit_handle(struct vmm_vcpu *vcpu, bool overflow)
{
	struct vmm *vm = vcpu->vm;
	struct kvm_run *run = vcpu->run;

	vcpu->c.exits++;
	if (vcpu->rf_probe_pc && run->exit_reason != KVM_EXIT_DEBUG)
		rf_probe_check(vcpu);
	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		/* a chance for the rider to look at the guest (the KASLR slide must be known
		 * before the first system call, and console output is frequent) */
		if (vm->hooks.io)
			vm->hooks.io(vm->hooks.ctx, vcpu);
		return exit_io(vm, vcpu, run);
	case KVM_EXIT_MMIO:
		return exit_mmio(vm, vcpu, run);
	case KVM_EXIT_INTR:
		return exit_intr(vcpu, overflow);
	case KVM_EXIT_DEBUG:
		vcpu->c.exits_debug++;
		return debug_exit(vcpu);
	case KVM_EXIT_HLT:
		return exit_halt(vcpu);
	case KVM_EXIT_SHUTDOWN:
		vmm_end(vm, HVP_END_SHUTDOWN, -1, "vCPU %u: triple fault (shutdown)", vcpu->index);
		return 1;
	case KVM_EXIT_SYSTEM_EVENT:
		if (run->system_event.type == KVM_SYSTEM_EVENT_RESET)
			vmm_end(vm, HVP_END_RESET, -1, "guest requested a reset");
		else
			vmm_end(vm, HVP_END_RESET, -1, "guest system event %u",
				run->system_event.type);
		return 1;
	case KVM_EXIT_INTERNAL_ERROR:
		if (run->internal.suberror == KVM_INTERNAL_ERROR_EMULATION)
			return exit_emulation_failure(vcpu);
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: KVM internal error, suberror %u",
			vcpu->index, run->internal.suberror);
		return 1;
	case KVM_EXIT_FAIL_ENTRY:
		vmm_end(vm, HVP_END_ERROR, -1,
			"vCPU %u: VM entry failed, hardware reason 0x%llx", vcpu->index,
			(unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		return 1;
	default:
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: unhandled KVM exit reason %u",
			vcpu->index, run->exit_reason);
		return 1;
	}
}
