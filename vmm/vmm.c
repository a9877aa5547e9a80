// SPDX-License-Identifier: MIT
// The VM's life: create (KVM, RAM, irqchip, PIT, devices, vCPUs, kernel), run (one thread per
// vCPU and a monitor), end (first reason wins), destroy (tolerates partial creation).
#define pr_fmt(fmt) "vmm: " fmt
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "vmm_internal.h"
#include "devices/virtio.h"

#define VMM_MIN_MEM (64ull << 20)

const char *const vmm_counter_names[] = {
#define VMM_COUNTER_NAME(name) #name,
	VMM_COUNTER_LIST(VMM_COUNTER_NAME)
#undef VMM_COUNTER_NAME
};
_Static_assert(sizeof(vmm_counter_names) / sizeof(vmm_counter_names[0]) == VMM_N_COUNTERS,
	       "one name per counter");

int vmm_sig_overflow;
int vmm_sig_kick;

static atomic_int requested_stop;

uint64_t vmm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void vmm_strategy_update(struct vmm *vm)
{
	snprintf(vm->strategy, sizeof(vm->strategy), "%s, regs=%s, syscall-fixup=%s, seccomp=%s",
		 vm->is_pvm ? "pvm" : "hardware virtualization",
		 vm->sync_regs ? "sync-regs read, ioctl write" : "ioctl",
		 vm->pvm.enabled ? "breakpoint-on-#PF" : "none",
		 vm->unconfined ? "off" : "vcpu threads");
}

const char *vmm_strategy(const struct vmm *vm)
{
	return vm->strategy;
}

void vmm_kick_vcpu(struct vmm *vm, unsigned int i)
{
	struct vmm_vcpu *v;

	if (i >= vm->n_vcpus)
		return;
	v = &vm->vcpus[i];
	/* first the flag: a thread not started (or not marked started) yet sees it before its
	 * first KVM_RUN; then the signal, for one inside KVM_RUN */
	atomic_store(&v->kick_pending, true);
	pthread_mutex_lock(&vm->kick_lock);
	/* started and not being joined (the joiner clears the flag under this lock first), so
	 * the thread ID is valid; a thread that has returned but is not joined yet is still a
	 * valid target (ESRCH at worst, ignored) */
	if (atomic_load(&v->thread_started) && pthread_kill(v->thread, vmm_sig_kick) != 0) {
		/* ended already: it needs no kick */
	}
	pthread_mutex_unlock(&vm->kick_lock);
}

void vmm_kick_all(struct vmm *vm)
{
	for (unsigned int i = 0; i < vm->n_vcpus; i++) {
		struct vmm_vcpu *v = &vm->vcpus[i];

		if (v->run)
			v->run->immediate_exit = 1;
		vmm_kick_vcpu(vm, i);
	}
}

void vmm_kick(struct vmm *vm, const struct vmm_vcpu *self)
{
	for (unsigned int i = 0; vm && i < vm->n_vcpus; i++)
		if (!self || i != self->index)
			vmm_kick_vcpu(vm, i);
}

bool vmm_stopping(const struct vmm *vm)
{
	return atomic_load(&vm->stop_reason) != 0;
}

uint64_t vmm_start_ns(const struct vmm *vm)
{
	return atomic_load(&((struct vmm *)vm)->t_start_ns);
}

bool vmm_is_pvm(const struct vmm *vm)
{
	return vm->is_pvm;
}

/* The 8-aligned word of guest RAM at @gpa, or NULL (a bad argument, or not RAM). */
static uint64_t *gpa_word(struct vmm *vm, uint64_t gpa)
{
	if (!vm || (gpa & 7))
		return NULL;
	/* SAFETY: gpa is 8-aligned and the RAM mapping page-aligned: the word is aligned */
	return ram_gpa_to_hva(&vm->ram, gpa, sizeof(uint64_t));
}

int vmm_gpa_or64(struct vmm *vm, uint64_t gpa, uint64_t bits, uint64_t *old)
{
	uint64_t *p = gpa_word(vm, gpa), v;

	if (!p)
		return !vm || (gpa & 7) ? -EINVAL : -ERANGE;
	v = __atomic_fetch_or(p, bits, __ATOMIC_SEQ_CST);
	if (old)
		*old = v;
	return 0;
}

int vmm_gpa_and64(struct vmm *vm, uint64_t gpa, uint64_t mask, uint64_t *old)
{
	uint64_t *p = gpa_word(vm, gpa), v;

	if (!p)
		return !vm || (gpa & 7) ? -EINVAL : -ERANGE;
	v = __atomic_fetch_and(p, mask, __ATOMIC_SEQ_CST);
	if (old)
		*old = v;
	return 0;
}

const struct gmem *vmm_gmem(const struct vmm *vm)
{
	return &vm->gmem;
}

unsigned int vmm_maxphyaddr(const struct vmm *vm)
{
	return vm->maxphyaddr;
}

unsigned int vmm_vcpu_count(const struct vmm *vm)
{
	return vm->n_vcpus;
}

unsigned int vmm_vcpu_index(const struct vmm_vcpu *v)
{
	return v->index;
}

int vmm_vcpu_tid(const struct vmm_vcpu *v)
{
	return v->tid;
}

int vmm_overflow_signal(void)
{
	return vmm_sig_overflow;
}

int vmm_set_hooks(struct vmm *vm, const struct vmm_hooks *hooks)
{
	if (!vm || !hooks)
		return -EINVAL;
	if (atomic_load(&vm->running))
		return -EBUSY;
	vm->hooks = *hooks;
	return 0;
}

void vmm_placement(const struct vmm *vm, struct vmm_placement *out)
{
	memset(out, 0, sizeof(*out));
	out->slide_known = vm->boot.slide_known;
	out->relocated = vm->boot.slide_applied;
	out->slide = vm->boot.slide;
	out->n_relocs = vm->boot.n_relocs;
}

void vmm_end(struct vmm *vm, int reason, int exit_status, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&vm->end_lock);
	if (!atomic_load(&vm->stop_reason)) {
		vm->exit_status = exit_status;
		va_start(ap, fmt);
		vsnprintf(vm->end_message, sizeof(vm->end_message), fmt, ap);
		va_end(ap);
		atomic_store(&vm->stop_reason, reason);
	}
	pthread_mutex_unlock(&vm->end_lock);
	vmm_kick_all(vm);
}

void vmm_request_stop(struct vmm *vm, int reason)
{
	(void)vm;
	atomic_store(&requested_stop, reason);
}

/* The serial ports' interrupt lines (ISA IRQs on the in-kernel PIC and IOAPIC). Called on vCPU
 * threads (allowed by the seccomp filter) and on vmm_cmd_send's caller's thread. */
static void set_irq_line(void *ctx, unsigned int irq, int level)
{
	struct vmm *vm = ctx;
	struct kvm_irq_level l = { .irq = irq, .level = (uint32_t)level };

	ioctl(vm->vm_fd, KVM_IRQ_LINE, &l);
}


static int check_cap(struct vmm *vm, long cap, const char *name, bool required)
{
	int r = ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, cap);

	if (r <= 0 && required) {
		pr_err("host KVM lacks %s", name);
		return -ENOTSUP;
	}
	return r > 0;
}

static int vcpu_create(struct vmm *vm, struct vmm_vcpu *vcpu, unsigned int index, int mmap_size)
{
	int err;

	vcpu->vm = vm;
	vcpu->index = index;
	vcpu->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)index);
	if (vcpu->fd < 0) {
		err = -errno;
		vcpu->fd = -1;
		pr_err("KVM_CREATE_VCPU %u: %s", index, hvp_strerror(err));
		return err;
	}
	vcpu->run = mmap(NULL, mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu->fd, 0);
	if (vcpu->run == MAP_FAILED) {
		err = -errno;
		vcpu->run = NULL;
		pr_err("vCPU %u: mmap of kvm_run: %s", index, hvp_strerror(err));
		return err;
	}
	vcpu->run_size = (size_t)mmap_size;
	if (vm->sync_regs)
		vcpu->run->kvm_valid_regs = KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS;
	return vcpu_init_regs(vm, vcpu);
}

/* Open /dev/kvm and probe the capabilities the VM needs (and the optional ones it uses). */
static int kvm_open(struct vmm *vm)
{
	int err;

	vm->kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (vm->kvm_fd < 0) {
		err = -errno;
		/* what a user can do about it, by cause */
		pr_err("cannot open /dev/kvm: %s%s", hvp_strerror(err),
		       err == -ENOENT ? " (no KVM on this host: load kvm_intel, kvm_amd or kvm_pvm; "
					"inside a VM, its hypervisor must offer nested "
					"virtualization)"
		       : err == -EACCES || err == -EPERM
			       ? " (no permission: run as root or as a member of the device's group, "
				 "usually kvm)"
			       : "");
		return err;
	}
	if (ioctl(vm->kvm_fd, KVM_GET_API_VERSION, 0) != KVM_API_VERSION) {
		pr_err("/dev/kvm speaks an unknown KVM API version");
		return -ENOTSUP;
	}
	err = check_cap(vm, KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP", true);
	if (err < 0)
		return err;
	err = check_cap(vm, KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY", true);
	if (err < 0)
		return err;
	err = check_cap(vm, KVM_CAP_SYNC_REGS, "KVM_CAP_SYNC_REGS", false);
	vm->sync_regs = err > 0;
	vm->sregs2 = check_cap(vm, KVM_CAP_SREGS2, "KVM_CAP_SREGS2", false) > 0;
	vm->is_pvm = vmm_host_is_pvm();
	return 0;
}


/* Guest RAM, and its slots given to KVM. */
static int ram_register(struct vmm *vm)
{
	int err;

	err = ram_create(&vm->ram, vm->cfg.mem_bytes);
	if (err)
		return err;
	for (unsigned int i = 0; i < vm->ram.n_slots; i++) {
		struct kvm_userspace_memory_region r = {
			.slot = i,
			.guest_phys_addr = vm->ram.slots[i].gpa,
			.memory_size = vm->ram.slots[i].size,
			.userspace_addr = (uint64_t)(uintptr_t)vm->ram.slots[i].hva,
		};

		if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0) {
			err = -errno;
			pr_err("KVM_SET_USER_MEMORY_REGION slot %u: %s", i, hvp_strerror(err));
			return err;
		}
	}
	return 0;
}

int vmm_create(const struct vmm_config *cfg, struct vmm **out)
{
	struct vmm *vm;
	int err, mmap_size;

	if (!cfg || !cfg->kernel || cfg->cpus == 0 || cfg->cpus > VMM_MAX_VCPUS ||
	    cfg->mem_bytes < VMM_MIN_MEM || (cfg->mem_bytes & ((2ull << 20) - 1))) {
		pr_err("invalid configuration (kernel, 1..%d vCPUs, >= 64 MiB in 2 MiB units)",
		       VMM_MAX_VCPUS);
		return -EINVAL;
	}
	if (cfg->cmd_channel) {
		err = serial_cmd_fd_check(cfg->cmd_out_fd);
		if (err)
			return err;
	}
	vm = calloc(1, sizeof(*vm));
	if (!vm)
		return -ENOMEM;
	vm->cfg = *cfg;
	vm->kvm_fd = vm->vm_fd = -1;
	pthread_mutex_init(&vm->end_lock, NULL);
	pthread_mutex_init(&vm->kick_lock, NULL);
	/* The overflow and kick signals: consumed with sigtimedwait on the vCPU threads. */
	vmm_sig_overflow = SIGRTMIN + 1;
	vmm_sig_kick = SIGRTMIN + 2;
	if (cfg->cmdline) {
		vm->cmdline = strdup(cfg->cmdline);
		if (!vm->cmdline) {
			err = -ENOMEM;
			goto err_destroy;
		}
		vm->cfg.cmdline = vm->cmdline;
	}
	vm->cfg.initrd = NULL; /* only used during boot_load below, from cfg */

	err = kvm_open(vm);
	if (err)
		goto err_destroy;
	vm->vm_fd = ioctl(vm->kvm_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0) {
		err = -errno;
		pr_err("KVM_CREATE_VM: %s", hvp_strerror(err));
		goto err_destroy;
	}
	if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)VMM_TSS_GPA) < 0)
		pr_debug(LOG_VMM, "KVM_SET_TSS_ADDR failed (not needed on this host)");
	err = ram_register(vm);
	if (err)
		goto err_destroy;
	vm->gmem = (struct gmem){ .read = ram_read, .ctx = &vm->ram, .map = ram_map,
				  .map_page = ram_map };
	if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0) {
		err = -errno;
		pr_err("KVM_CREATE_IRQCHIP: %s", hvp_strerror(err));
		goto err_destroy;
	}
	{
		struct kvm_pit_config pit = { .flags = 0 };

		if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0) {
			err = -errno;
			pr_err("KVM_CREATE_PIT2: %s", hvp_strerror(err));
			goto err_destroy;
		}
	}
	serial_init(&vm->com1, SERIAL_COM1_IRQ, cfg->console_fd, set_irq_line, vm);
	/* initialised either way (vmm_cmd_send and exit_io look at cfg.cmd_channel) */
	serial_init(&vm->com2, SERIAL_COM2_IRQ, cfg->cmd_channel ? cfg->cmd_out_fd : -1,
		    set_irq_line, vm);
	serial_set_tx_hold(&vm->com2); /* the reader drains and kicks (vmm_cmd_tx_kick) */
	err = disks_create(vm); /* also declares them on vm->cmdline */
	vm->cfg.disks = NULL;    /* the caller's array: read only above */
	if (err)
		goto err_destroy;

	{
		struct vmm_config boot_cfg = *cfg;

		boot_cfg.cmdline = vm->cmdline;
		err = boot_load(&vm->ram, &boot_cfg, &vm->boot);
	}
	if (err)
		goto err_destroy;

	err = cpu_setup_cpuid(vm);
	if (err)
		goto err_destroy;

	mmap_size = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (mmap_size < (int)sizeof(struct kvm_run)) {
		err = mmap_size < 0 ? -errno : -EINVAL;
		pr_err("KVM_GET_VCPU_MMAP_SIZE: %s", hvp_strerror(err));
		goto err_destroy;
	}
	vm->vcpus = calloc(cfg->cpus, sizeof(*vm->vcpus));
	if (!vm->vcpus) {
		err = -ENOMEM;
		goto err_destroy;
	}
	for (unsigned int i = 0; i < cfg->cpus; i++)
		vm->vcpus[i].fd = -1;
	vm->n_vcpus = cfg->cpus;
	for (unsigned int i = 0; i < cfg->cpus; i++) {
		err = vcpu_create(vm, &vm->vcpus[i], i, mmap_size);
		if (err)
			goto err_destroy;
	}
	vmm_strategy_update(vm);
	*out = vm;
	return 0;

err_destroy:
	vmm_destroy(vm);
	return err;
}

/* Block the overflow and kick signals in this thread except inside KVM_RUN (KVM_SET_SIGNAL_MASK),
 * where a pending one ends the run at once: no overflow is lost while the VMM handles another
 * exit. They are consumed with sigtimedwait, which tells which one arrived. */
static int vcpu_signals_setup(struct vmm_vcpu *vcpu, sigset_t *block)
{
	sigset_t in_guest;
	struct {
		struct kvm_signal_mask hdr;
		uint8_t set[8];
	} kmask;

	sigemptyset(block);
	sigaddset(block, vmm_sig_overflow);
	sigaddset(block, vmm_sig_kick);
	pthread_sigmask(SIG_BLOCK, block, &in_guest);
	sigdelset(&in_guest, vmm_sig_overflow);
	sigdelset(&in_guest, vmm_sig_kick);
	kmask.hdr.len = 8;
	memcpy(kmask.set, &in_guest, 8);
	if (ioctl(vcpu->fd, KVM_SET_SIGNAL_MASK, &kmask) < 0)
		return -errno;
	return 0;
}

/* One KVM_RUN. Return: 0 and *@overflow (the counter's signal arrived), or -errno. */
static int vcpu_run_once(struct vmm_vcpu *vcpu, const sigset_t *block, bool *overflow)
{
	const struct timespec zero = { 0, 0 };
	int r, err, sig;

	*overflow = false;
	/* a kick sent while this thread was outside KVM_RUN, even before it was marked started
	 * (its signal then never came): end this KVM_RUN at once, as the signal would have */
	if (atomic_load(&vcpu->kick_pending))
		vcpu->run->immediate_exit = 1;
	r = ioctl(vcpu->fd, KVM_RUN, 0);
	err = r < 0 ? -errno : 0;
	vcpu->regs_valid = vcpu->sregs_valid = vcpu->regs_ioctl = false;
	/* KVM stores the sync regs on every return from KVM_RUN, EINTR included, and has applied
	 * (and cleared) the dirty ones: none may be applied twice */
	vcpu->sync_filled = true;
	vcpu->run->kvm_dirty_regs = 0;
	if (err != -EINTR && err != -EAGAIN)
		return err;
	/* Interrupted: by the counter's overflow (a sample), or by a kick (another vCPU wants
	 * this one to apply its breakpoints, or the run ends) or immediate_exit: no sample. The
	 * exit is handled as a kick: the pending flag is cleared first, so a kick that comes
	 * after this point (flag, then signal) ends the next KVM_RUN again. */
	atomic_store(&vcpu->kick_pending, false);
	while ((sig = sigtimedwait(block, NULL, &zero)) > 0)
		if (sig == vmm_sig_overflow)
			*overflow = true;
	vcpu->run->immediate_exit = 0;
	vcpu->run->exit_reason = KVM_EXIT_INTR;
	return 0;
}

static void vcpu_trail(struct vmm_vcpu *vcpu)
{
	/* SAFETY: trail_next is reduced modulo the array size. */
	unsigned int t = vcpu->trail_next++ % ARRAY_SIZE(vcpu->trail);

	vcpu->trail[t].reason = vcpu->run->exit_reason;
	vcpu->trail[t].rip = vcpu->run->s.regs.regs.rip;
	vcpu->trail[t].rsp = vcpu->run->s.regs.regs.rsp;
	vcpu->trail[t].rcx = vcpu->run->s.regs.regs.rcx;
	vcpu->trail[t].cs = vcpu->run->s.regs.sregs.cs.selector;
}

int vcpu_loop_once(struct vmm_vcpu *vcpu, const sigset_t *block)
{
	struct vmm *vm = vcpu->vm;
	bool overflow;
	int err;

	if (vcpu_debug_update(vcpu) != 0) {
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: cannot set its breakpoints", vcpu->index);
		return 1;
	}
	err = vcpu_put_dirty(vcpu);
	if (err) {
		/* the guest cannot go on with registers it was not given: end the run */
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: cannot write its registers back: %s",
			vcpu->index, hvp_strerror(err));
		return 1;
	}
	err = vcpu_run_once(vcpu, block, &overflow);
	if (err) {
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: KVM_RUN: %s", vcpu->index,
			hvp_strerror(err));
		return 1;
	}
	if (vm->sync_regs)
		vcpu_trail(vcpu);
	return exit_handle(vcpu, overflow);
}

static void *vcpu_thread(void *arg)
{
	struct vmm_vcpu *vcpu = arg;
	struct vmm *vm = vcpu->vm;
	sigset_t block;
	int err;

	vcpu->tid = (pid_t)syscall(SYS_gettid);
	err = vcpu_signals_setup(vcpu, &block);
	if (err) {
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u: KVM_SET_SIGNAL_MASK: %s", vcpu->index,
			hvp_strerror(err));
		return NULL;
	}
	err = vcpu_debug_update(vcpu);
	if (!err && vm->hooks.vcpu_start)
		err = vm->hooks.vcpu_start(vm->hooks.ctx, vcpu);
	/* set up: from here on the thread runs guest-driven code, confined */
	if (!err && !vm->unconfined)
		err = vmm_seccomp_confine();
	if (err) {
		vmm_end(vm, HVP_END_ERROR, -1, "vCPU %u could not start: %s", vcpu->index,
			hvp_strerror(err));
		return NULL;
	}

	while (!atomic_load(&vm->stop_reason))
		if (vcpu_loop_once(vcpu, &block) != 0)
			break;
	if (vm->hooks.vcpu_stop)
		vm->hooks.vcpu_stop(vm->hooks.ctx, vcpu);
	{
		struct timespec ts;

		if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
			vcpu->c.vcpu_cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
	return NULL;
}

/* What is left when the vCPUs have stopped: pending marks resolved from the registers saved at
 * kernel entry, and no breakpoint left armed (each vCPU's are cleared and checked). */
static void run_epilogue(struct vmm *vm)
{
	if (vm->n_vcpus && hvp_log_enabled(HVP_LOG_DEBUG, LOG_EXIT)) {
		struct vmm_vcpu *v = &vm->vcpus[0];

		for (unsigned int i = 0; i < ARRAY_SIZE(v->trail); i++) {
			unsigned int t = (v->trail_next + i) % ARRAY_SIZE(v->trail);

			pr_debug(LOG_EXIT, "vCPU 0 trail: reason %u rip 0x%llx cs 0x%x rsp 0x%llx",
				 v->trail[t].reason, (unsigned long long)v->trail[t].rip,
				 v->trail[t].cs, (unsigned long long)v->trail[t].rsp);
		}
	}
	if (vm->n_vcpus && vm->hooks.run_end)
		vm->hooks.run_end(vm->hooks.ctx, &vm->vcpus[0]);
	for (unsigned int i = 0; i < vm->n_vcpus; i++)
		vcpu_debug_disarm(&vm->vcpus[i]);
}

/* A guest silent for this long gets a hint naming its command line. */
#define SILENT_HINT_NS (120ull * 1000000000ull)

/* The monitor: duration, stop requests (signals), a hint for a silent guest, the rider's tick,
 * and the end of every vCPU thread. */
static void monitor(struct vmm *vm)
{
	bool hinted = false;

	while (!atomic_load(&vm->stop_reason)) {
		const struct timespec tick = { 0, 20 * 1000 * 1000 };
		int req = atomic_load(&requested_stop);
		uint64_t ran = vmm_now_ns() - atomic_load(&vm->t_start_ns);

		if (req) {
			vmm_end(vm, req, -1, "stopped by a signal");
			break;
		}
		if (vm->cfg.duration_ns && ran >= vm->cfg.duration_ns) {
			vmm_end(vm, HVP_END_DURATION, -1, "duration of %.1f s elapsed",
				(double)vm->cfg.duration_ns / 1e9);
			break;
		}
		if (!hinted && ran >= SILENT_HINT_NS && !atomic_load(&vm->com1.tx_bytes)) {
			hinted = true;
			pr_warn("the guest has printed nothing on its serial console (ttyS0) in %llu s; "
				"its command line was: %s",
				(unsigned long long)(SILENT_HINT_NS / 1000000000ull),
				vm->cfg.cmdline ? vm->cfg.cmdline : "(none)");
		}
		if (vm->hooks.tick)
			vm->hooks.tick(vm->hooks.ctx, ran);
		nanosleep(&tick, NULL);
	}
}

int vmm_run(struct vmm *vm, struct vmm_result *res)
{
	int err = 0;

	memset(res, 0, sizeof(*res));
	atomic_store(&requested_stop, 0);
	atomic_store(&vm->running, true);
	atomic_store(&vm->t_start_ns, vmm_now_ns());
	for (unsigned int i = 0; i < vm->n_vcpus; i++) {
		err = -pthread_create(&vm->vcpus[i].thread, NULL, vcpu_thread, &vm->vcpus[i]);
		if (err) {
			pr_err("cannot start the thread of vCPU %u: %s", i, hvp_strerror(err));
			vmm_end(vm, HVP_END_ERROR, -1, "thread creation failed");
			break;
		}
		pthread_mutex_lock(&vm->kick_lock);
		atomic_store(&vm->vcpus[i].thread_started, true);
		pthread_mutex_unlock(&vm->kick_lock);
	}
	monitor(vm);
	vmm_kick_all(vm);
	for (unsigned int i = 0; i < vm->n_vcpus; i++) {
		struct vmm_vcpu *v = &vm->vcpus[i];
		bool started;

		/* no kick may signal the thread once it is being joined (its ID dies with it) */
		pthread_mutex_lock(&vm->kick_lock);
		started = atomic_exchange(&v->thread_started, false);
		pthread_mutex_unlock(&vm->kick_lock);
		/* A vCPU blocked in the guest's HLT returned on the kick signal above. */
		if (started)
			pthread_join(v->thread, NULL);
	}
	run_epilogue(vm);
	res->reason = atomic_load(&vm->stop_reason);
	res->exit_status = vm->exit_status;
	res->runtime_ns = vmm_now_ns() - atomic_load(&vm->t_start_ns);
	snprintf(res->message, sizeof(res->message), "%s", vm->end_message);
	return err;
}

void vmm_get_counters(const struct vmm *vm, struct vmm_counters *out)
{
	uint64_t *dst = (uint64_t *)out;

	memset(out, 0, sizeof(*out));
	for (unsigned int i = 0; i < vm->n_vcpus; i++) {
		const uint64_t *src = (const uint64_t *)&vm->vcpus[i].c;

		for (size_t k = 0; k < VMM_N_COUNTERS; k++)
			dst[k] += src[k];
	}
	disks_add_counters(vm, out);
	serial_add_counters(vm, out);
}

void vmm_destroy(struct vmm *vm)
{
	if (!vm)
		return;
	if (vm->vcpus) {
		for (unsigned int i = 0; i < vm->n_vcpus; i++) {
			struct vmm_vcpu *v = &vm->vcpus[i];

			if (vm->hooks.vcpu_stop)
				vm->hooks.vcpu_stop(vm->hooks.ctx, v);
			if (v->run)
				munmap(v->run, v->run_size);
			if (v->fd >= 0)
				close(v->fd);
		}
		free(vm->vcpus);
	}
	free(vm->cpuid);
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	disks_destroy(vm);
	ram_destroy(&vm->ram);
	free(vm->cmdline);
	pthread_mutex_destroy(&vm->end_lock);
	pthread_mutex_destroy(&vm->kick_lock);
	free(vm);
}
