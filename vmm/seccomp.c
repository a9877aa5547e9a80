// SPDX-License-Identifier: MIT
// Confining the threads that run guest-driven code (vCPU threads, device threads), as Firecracker
// does: once set up, each loads a seccomp filter (libseccomp) that allows only the system calls a
// running VMM thread makes — KVM and perf ioctls, reading and writing its open files (console,
// recording, disk images), memory management, futexes, signals and its own exit — and refuses
// everything else with EPERM. A compromised thread cannot open files, create processes or
// sockets, map executable memory from a new file, or change the filter. The main thread (which
// opens files and writes the recording's end) is not filtered.
#define pr_fmt(fmt) "vmm: seccomp: " fmt
#include <errno.h>
#include <linux/kvm.h>
#include <linux/perf_event.h>
#include <seccomp.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <hvprof/log.h>
#include <hvprof/vmm.h>

#include "vmm_internal.h"

/* System calls allowed with any arguments. */
static const int allowed[] = {
	/* files already open: console, recording, disk images, eventfds */
	SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev),
	SCMP_SYS(pread64), SCMP_SYS(pwrite64), SCMP_SYS(preadv), SCMP_SYS(pwritev),
	SCMP_SYS(fsync), SCMP_SYS(fdatasync), SCMP_SYS(lseek), SCMP_SYS(close),
	SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(ppoll), SCMP_SYS(poll),
	SCMP_SYS(fallocate),
	/* memory (malloc, thread stacks; sanitizer runtimes) */
	SCMP_SYS(brk), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(madvise),
	/* threads, time, signals */
	SCMP_SYS(futex), SCMP_SYS(sched_yield), SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep),
	SCMP_SYS(clock_gettime), SCMP_SYS(gettimeofday), SCMP_SYS(getpid), SCMP_SYS(gettid),
	SCMP_SYS(tgkill), SCMP_SYS(rt_sigtimedwait), SCMP_SYS(rt_sigprocmask),
	SCMP_SYS(rt_sigreturn), SCMP_SYS(restart_syscall), SCMP_SYS(exit), SCMP_SYS(exit_group),
	SCMP_SYS(sched_getaffinity), SCMP_SYS(getrandom), SCMP_SYS(sigaltstack),
};

/* ioctl requests allowed (argument 1). */
static const unsigned long allowed_ioctls[] = {
	KVM_RUN, KVM_GET_REGS, KVM_SET_REGS, KVM_GET_SREGS, KVM_SET_SREGS, KVM_SET_SREGS2,
	KVM_GET_MSRS, KVM_SET_GUEST_DEBUG, KVM_GET_VCPU_EVENTS, KVM_SET_VCPU_EVENTS,
	KVM_IRQ_LINE, KVM_IRQ_LINE_STATUS, KVM_SIGNAL_MSI, KVM_IRQFD, KVM_IOEVENTFD,
	PERF_EVENT_IOC_ENABLE, PERF_EVENT_IOC_DISABLE,
	PERF_EVENT_IOC_PERIOD, /* an attach window's sampling rate (sampler/attach.c) */
};

int vmm_seccomp_confine(void)
{
	scmp_filter_ctx ctx;
	int err = 0;

	ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return -ENOMEM;
	for (size_t i = 0; i < ARRAY_SIZE(allowed) && !err; i++)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
	for (size_t i = 0; i < ARRAY_SIZE(allowed_ioctls) && !err; i++)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				       SCMP_A1(SCMP_CMP_EQ, allowed_ioctls[i]));
	/* mmap and mprotect, never executable (no new code in a confined thread) */
	if (!err)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
				       SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	if (!err)
		err = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				       SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	/* this thread only: the main thread keeps opening and writing files */
	if (!err)
		err = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 0);
	if (!err)
		err = seccomp_load(ctx);
	if (err)
		pr_err("cannot load the seccomp filter: %s", hvp_strerror(err));
	seccomp_release(ctx);
	return err;
}

void vmm_set_confined(struct vmm *vm, bool on)
{
	vm->unconfined = !on;
	vmm_strategy_update(vm);
}
