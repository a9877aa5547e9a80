/* SPDX-License-Identifier: MIT */
/*
 * vmm: hvprof's VM, and nothing of the profiler. Boots a Linux x86-64 guest on KVM (Linux boot
 * protocol, 64-bit entry), runs its vCPUs, emulates the few devices a console guest needs, and
 * completes SYSCALLs on PVM hosts. Whoever rides on its exits (sampler/) installs a hook table
 * (struct vmm_hooks) and shares the hardware-breakpoint slots.
 */
#ifndef HVPROF_VMM_H
#define HVPROF_VMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

#include <linux/kvm.h>

#include <hvprof/compiler.h>
#include <hvprof/gmem.h>
#include <hvprof/sample.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vmm;

/**
 * enum vmm_kaslr - KASLR for a kernel booted from a bzImage whose payload hvprof decompresses
 * (the kernel's own decompressor, which would randomize it, does not run; see
 * docs/kaslr.md).
 * @VMM_KASLR_AUTO: as a real boot: a random virtual slide when the kernel carries a
 *   relocation table (CONFIG_RANDOMIZE_BASE) and the command line does not say nokaslr.
 * @VMM_KASLR_OFF: the link address. @VMM_KASLR_SLIDE: the given slide.
 */
enum vmm_kaslr {
	VMM_KASLR_AUTO = 0,
	VMM_KASLR_OFF,
	VMM_KASLR_SLIDE,
};

/**
 * struct vmm_disk - a raw disk image the guest sees as a virtio-blk device over virtio-mmio
 * (/dev/vda, /dev/vdb, ... in the order given; docs/guest-interface.md).
 * @path: a host file or block device holding a raw image (qcow2 is refused).
 * @readonly: the guest cannot write it (VIRTIO_BLK_F_RO; a write gets VIRTIO_BLK_S_IOERR).
 * @snapshot: the guest's writes go to a private overlay (an unlinked sparse file in $TMPDIR,
 *   else /var/tmp) that dies with the VM: @path is opened read-only and never modified.
 */
struct vmm_disk {
	const char *path;
	bool readonly;
	bool snapshot;
};

#define VMM_MAX_DISKS 8

/**
 * struct vmm_config - what to boot. Zero-initialise, then set fields.
 * @kernel: host path of a vmlinux ELF (PT_LOADs at their physical addresses, entered at its
 *   64-bit entry) or a bzImage (boot protocol 2.12+, 64-bit entry at load address + 0x200).
 * @initrd/@initrd_size: initramfs bytes (concatenated newc archives), may be NULL. Copied.
 * @cmdline: kernel command line (at most 2047 bytes).
 * @mem_bytes: guest RAM in bytes (multiple of 2 MiB, >= 64 MiB).
 * @cpus: number of vCPUs (1..VMM_MAX_VCPUS).
 * @console_fd: where the serial console's output goes (-1: discarded).
 * @duration_ns: stop the guest after this long (0: run until it ends).
 * @kaslr/@kaslr_slide: where a relocatable kernel from a bzImage that hvprof decompresses is
 *   placed (enum vmm_kaslr; @kaslr_slide in bytes for VMM_KASLR_SLIDE).
 * @disks/@n_disks: disks to attach (at most VMM_MAX_DISKS; the array is read during
 *   vmm_create only). The VMM adds the `virtio_mmio.device=` words that declare them to the
 *   command line.
 * @cmd_channel: the guest gets a second 16550A UART, COM2 at I/O port 0x2f8 on IRQ 3 (Linux's
 *   /dev/ttyS1, found by the 8250 driver's legacy port table with no command-line word), as a
 *   command channel: vmm_cmd_send() queues bytes for the guest to receive, and what the guest
 *   transmits is written to @cmd_out_fd. false: COM2's ports float (reads return 0xff, as on a
 *   PC without the port), so the guest's 8250 probe finds no UART there.
 * @cmd_out_fd: with @cmd_channel, where COM2's transmitted bytes go, one write(2) per byte on
 *   the transmitting vCPU's thread (-1: discarded). The fd stays the caller's (never closed);
 *   make it non-blocking (O_NONBLOCK; vmm_create warns when it is not): what a full fd does not
 *   take waits in the UART, which stops the guest sending (vmm_cmd_tx_kick drains it); only
 *   a guest that sends on regardless loses bytes, counted in cmd_tx_dropped. A pipe whose reader went away raises SIGPIPE:
 *   ignore it in the process. vmm_create fails with -EBADF if the fd is not open for writing.
 */
struct vmm_config {
	const char *kernel;
	const void *initrd;
	size_t initrd_size;
	const char *cmdline;
	uint64_t mem_bytes;
	unsigned int cpus;
	int console_fd;
	uint64_t duration_ns;
	enum vmm_kaslr kaslr;
	uint64_t kaslr_slide;
	const struct vmm_disk *disks;
	size_t n_disks;
	bool cmd_channel;
	int cmd_out_fd;
};

#define VMM_MAX_VCPUS 64

/**
 * struct vmm_result - how the run ended.
 * @reason: enum hvp_end_reason. @exit_status: the guest's status for HVP_END_EXIT_DEVICE,
 * else -1. @runtime_ns: from vmm_run's start to its end. @message: for HVP_END_ERROR, what
 * happened (e.g. the unhandled exit and the instruction bytes), NUL-terminated.
 */
struct vmm_result {
	int reason;
	int exit_status;
	uint64_t runtime_ns;
	char message[256];
};

/*
 * The VMM's counters, one list that generates both the struct fields and their names (the
 * names are what recordings and `report` show).
 */
#define VMM_COUNTER_LIST(X)                                                                  \
	X(exits)              /* every VM exit */                                          \
	X(exits_io)                                                                        \
	X(exits_mmio)                                                                      \
	X(exits_intr)         /* KVM_RUN interrupted by a signal or a kick */              \
	X(exits_overflow)     /* ... of which the sampling counter's overflow signal */    \
	X(exits_debug)                                                                     \
	X(syscall_fixups)     /* PVM: SYSCALLs completed by the VMM */                     \
	X(syscall_msr_reads)  /* ... KVM_GET_MSRS of STAR/LSTAR/SFMASK for them (kept per   \
			       * vCPU until a SYSCALL to another LSTAR: Linux writes the    \
			       * three together, syscall_init) */                          \
	X(pf_steps)           /* PVM: other page faults stepped past the breakpoint */     \
	X(emulation_int3)                                                                  \
	X(emulation_fwait)                                                                 \
	X(io_unhandled)                                                                    \
	X(mmio_unhandled)                                                                  \
	X(traps_armed_at_end) /* vCPUs with a breakpoint still armed after the run (0) */  \
	X(regs_writes)        /* KVM_SET_REGS/SREGS ioctls (registers a rider changed) */  \
	X(regs_write_ns)      /* ... their time (each a vcpu_load: costly on nested hosts) */ \
	X(regs_sync_writes)   /* registers written through the sync-regs area instead */   \
	X(debug_sets)         /* KVM_SET_GUEST_DEBUG ioctls (breakpoints armed, moved) */  \
	X(debug_set_ns)       /* ... their time */                                         \
	X(vcpu_cpu_ns)        /* CPU time of the vCPU threads: what cpu-clock counts */    \
	X(disk_reads)         /* virtio-blk read requests served */                        \
	X(disk_writes)                                                                     \
	X(disk_flushes)                                                                    \
	X(disk_read_bytes)                                                                 \
	X(disk_write_bytes)                                                                \
	X(disk_errors)        /* requests answered with an error status (past the end...) */ \
	X(disk_broken)        /* devices a malformed queue put in DEVICE_NEEDS_RESET */ \
	X(guest_events)       /* event writes to the exit register (enum vmm_guest_event) */ \
	X(cmd_rx_bytes)       /* command channel (COM2): queued bytes the guest read */   \
	X(cmd_rx_flushed)     /* ... queued bytes the guest's driver discarded (FIFO reset) */ \
	X(cmd_tx_bytes)       /* ... bytes the guest transmitted, dropped ones included */ \
	X(cmd_tx_dropped)     /* ... of which a write to cmd_out_fd did not take (EAGAIN) */

/** struct vmm_counters - what the VMM counted, summed over the vCPUs (VMM_COUNTER_LIST). */
struct vmm_counters {
#define VMM_COUNTER_FIELD(name) uint64_t name;
	VMM_COUNTER_LIST(VMM_COUNTER_FIELD)
#undef VMM_COUNTER_FIELD
};

/* vmm_counter_names[i] names the i-th uint64_t of struct vmm_counters. */
extern const char *const vmm_counter_names[];
#define VMM_N_COUNTERS (sizeof(struct vmm_counters) / sizeof(uint64_t))

/**
 * vmm_create - open /dev/kvm, create the VM, its RAM, devices and vCPUs, load the kernel.
 * Return: 0 and *@out (free with vmm_destroy); -ENOENT kernel file or /dev/kvm missing;
 * -EACCES no permission; -EBADMSG kernel is neither a usable ELF nor a bzImage; -EINVAL bad
 * configuration (memory size, vCPUs, command line too long, initrd too big); -ENOTSUP the
 * host KVM lacks a required capability; -EBADF cmd_channel with a cmd_out_fd not open for
 * writing; other -errno from KVM ioctls. Messages name the file or the ioctl.
 */
int vmm_create(const struct vmm_config *cfg, struct vmm **out) __must_check;

/**
 * vmm_disk_probe - check that @d can be attached as vmm_create would attach it (opened
 * read-write unless ro or snapshot, locked, a raw image of at least one sector), and let it go.
 * Logs one error line naming the file and what to do.
 * Return: 0; -ENOENT/-EACCES/... the file; -EISDIR a directory; -EINVAL neither a regular file
 * nor a block device; -ENOTSUP a qcow2 image; -ENODATA empty; -EBUSY locked by another process.
 */
int vmm_disk_probe(const struct vmm_disk *d) __must_check;

/**
 * vmm_run - start every vCPU thread and wait until the guest ends (exit register, reset,
 * triple fault), the duration elapses, vmm_request_stop() is called, or an error occurs.
 * Return: 0 (see @res for the outcome), or -errno when the threads could not start.
 */
int vmm_run(struct vmm *vm, struct vmm_result *res) __must_check;

/**
 * vmm_request_stop - ask a running VM to stop with @reason (HVP_END_SIGNAL from a signal
 * handler). Async-signal-safe: only sets a flag that vmm_run's monitor loop polls.
 */
void vmm_request_stop(struct vmm *vm, int reason);

/**
 * vmm_get_counters - copy the counters (after vmm_run returned, or approximately during). The
 * per-vCPU counters are summed; the disk_* and cmd_* ones are the devices' own (VM-wide).
 */
void vmm_get_counters(const struct vmm *vm, struct vmm_counters *out);

/**
 * vmm_cmd_send - queue @len bytes of @buf for the guest to receive on COM2, the command channel
 * (vmm_config.cmd_channel), in order, after the bytes queued before. The receive buffer holds
 * 4096 bytes the guest has not read yet; what does not fit is not taken: send the rest later
 * (the guest reads when its driver takes the UART's interrupt, or polls LSR). The received-data
 * interrupt (IRQ 3) is raised when the guest enabled it (IER.RDI, with MCR.OUT2).
 * The guest's driver empties the buffer when it opens or closes the port (Linux resets the
 * FIFOs in serial8250_do_startup/shutdown; counted in cmd_rx_flushed), and nobody reads it
 * while /dev/ttyS1 is closed: send once the guest has said, on the channel, that it listens.
 * @vm: a VM created with cmd_channel; before, during or after vmm_run, until vmm_destroy.
 * @buf: @len bytes (copied before the return); may be NULL when @len is 0.
 * Return: the number of bytes accepted, 0..@len (fewer than @len when the buffer filled, 0 when
 * it is full); -EINVAL @vm NULL, or @buf NULL with @len > 0; -ENODEV the VM has no command
 * channel.
 * Thread-safety: any thread, concurrently with the vCPUs (the UART's lock; the IRQ line is set
 * with KVM_IRQ_LINE on the calling thread). Never blocks on the guest.
 */
ssize_t vmm_cmd_send(struct vmm *vm, const void *buf, size_t len) __must_check;

/**
 * vmm_cmd_tx_kick - the reader of vmm_config.cmd_out_fd made room (it read): write what the
 * guest transmitted and the fd could not take then. A non-blocking @cmd_out_fd that is full
 * does not lose bytes: they wait in the UART (4 KiB at most) with its THRE bit clear, so the
 * guest's driver stops sending until this call (or the next transmitted byte) drains them and
 * raises the THRE interrupt. Any thread; nothing to do without a command channel.
 */
void vmm_cmd_tx_kick(struct vmm *vm);

/**
 * vmm_strategy - how this host is driven, one line (static until vmm_destroy), e.g.
 * "pvm, regs=sync-regs read, ioctl write, syscall-fixup=breakpoint-on-#PF".
 */
const char *vmm_strategy(const struct vmm *vm);

/**
 * struct vmm_placement - where the VMM put the kernel (Linux boot protocol; docs/kaslr.md).
 * @slide_known: the kernel's virtual KASLR slide is known before it runs (a vmlinux at its link
 *   address, or a bzImage the VMM decompressed): @slide, in bytes. @relocated: the VMM applied
 *   the image's relocation table (@n_relocs entries).
 */
struct vmm_placement {
	bool slide_known;
	bool relocated;
	uint64_t slide;
	size_t n_relocs;
};

/** vmm_placement - fill @out (after vmm_create). */
void vmm_placement(const struct vmm *vm, struct vmm_placement *out);

/* ---------------------------------------------------------------- for riders on the exits */

struct vmm_vcpu;

/**
 * enum vmm_guest_event - what a guest's init tells the VMM through the exit register, besides
 * its exit status (docs/guest-interface.md, "Events", protocol version 1): a 4-byte write of
 * VMM_GUEST_EVENT_MAGIC | kind << 8 | value (kind 1..255, value 0..255). Kinds this VMM does not
 * name are passed on too: the rider decides.
 * @VMM_GUEST_EVENT_INIT: the image's init started (value 0).
 * @VMM_GUEST_EVENT_WORKLOAD_START: the --run command is about to start (value 0).
 * @VMM_GUEST_EVENT_WORKLOAD_END: the command ended; value: its exit status (0..255).
 */
enum vmm_guest_event {
	VMM_GUEST_EVENT_INIT = 1,
	VMM_GUEST_EVENT_WORKLOAD_START = 2,
	VMM_GUEST_EVENT_WORKLOAD_END = 3,
};

#define VMM_GUEST_EVENT_MAGIC 0x48450000u /* "HE" in the upper half: an event, not an exit */

/**
 * struct vmm_hooks - what a rider (the sampler) is told of the VM's exits. Every callback runs
 * on the vCPU thread of @v, several vCPUs at once; each may be NULL. A callback returning 1
 * stops that vCPU's loop (the rider called vmm_end() first), 0 continues.
 * @vcpu_start: on the vCPU's thread before its first KVM_RUN (open a per-thread counter there);
 *   -errno ends the run with HVP_END_ERROR.
 * @vcpu_stop: on the vCPU's thread after its last KVM_RUN, and from vmm_destroy.
 * @overflow: the overflow signal (vmm_overflow_signal()) arrived on this vCPU's thread while it
 *   ran the guest: take a sample. Kicks and other interruptions never call it.
 * @debug: a debug exit on a breakpoint slot the rider owns (vmm_bp_alloc), at guest RIP @pc.
 *   @repeat: the same breakpoint hit again right after vmm_bp_step() resumed with RFLAGS.RF (the
 *   host ignores RF: the rider must get past the instruction itself; the hit was told already).
 * @io: a port I/O exit: a cheap chance to look at the guest (rate-limit it yourself).
 * @guest_event: the guest wrote event @kind (enum vmm_guest_event, or another kind 1..255) with
 *   @value (0..255) to the exit register, @time_ns after vmm_run started the vCPUs; on the
 *   writing vCPU's thread, with its registers as of the write (vmm_vcpu_regs).
 * @kick: KVM_RUN was interrupted by a kick (vmm_kick(), a breakpoint change, the run's end),
 *   not by the overflow signal: a chance to apply VM-wide state another thread changed.
 * @tick: the exception to "on a vCPU thread": on vmm_run's monitor thread, about every 20 ms
 *   while the run lasts, @time_ns after vmm_run started the vCPUs (timed actions).
 * @run_end: every vCPU thread has stopped, before breakpoints are cleared (flush marks).
 */
struct vmm_hooks {
	void *ctx;
	int (*vcpu_start)(void *ctx, struct vmm_vcpu *v);
	void (*vcpu_stop)(void *ctx, struct vmm_vcpu *v);
	int (*overflow)(void *ctx, struct vmm_vcpu *v);
	int (*debug)(void *ctx, struct vmm_vcpu *v, int slot, uint64_t pc, bool repeat);
	void (*io)(void *ctx, struct vmm_vcpu *v);
	int (*guest_event)(void *ctx, struct vmm_vcpu *v, uint32_t kind, uint32_t value,
			   uint64_t time_ns);
	void (*kick)(void *ctx, struct vmm_vcpu *v);
	void (*tick)(void *ctx, uint64_t time_ns);
	void (*run_end)(void *ctx, struct vmm_vcpu *v0);
};

/** vmm_set_hooks - install @hooks (copied) before vmm_run. Return: 0; -EINVAL; -EBUSY running. */
int vmm_set_hooks(struct vmm *vm, const struct vmm_hooks *hooks) __must_check;

/**
 * vmm_kick - interrupt the KVM_RUN of every vCPU but @self (NULL: all of them); each calls the
 * @kick hook before it runs the guest again. A kick that arrives while a vCPU is outside KVM_RUN
 * stays pending (the signal is blocked there) and ends its next KVM_RUN at once, so no vCPU that
 * had started misses it. Any thread; never a sample.
 */
void vmm_kick(struct vmm *vm, const struct vmm_vcpu *self);

/** vmm_overflow_signal - the signal a rider routes counter overflows to (F_SETSIG). */
int vmm_overflow_signal(void);

/** vmm_now_ns - CLOCK_MONOTONIC in ns. */
uint64_t vmm_now_ns(void);

/** vmm_start_ns - vmm_now_ns() when vmm_run started the vCPUs (0 before). Any thread. */
uint64_t vmm_start_ns(const struct vmm *vm);

/** vmm_stopping - the run is ending (a reason was recorded). */
bool vmm_stopping(const struct vmm *vm);

/** vmm_end - record the end of the run (first caller wins) and kick every vCPU out of KVM_RUN. */
void vmm_end(struct vmm *vm, int reason, int exit_status, const char *fmt, ...) __printf(4, 5);

/** vmm_is_pvm - the host is PVM (kvm_pvm module): see ../shared/pvm-facts.md. */
bool vmm_is_pvm(const struct vmm *vm);

/** vmm_gmem - guest physical memory reader (GPA -> bytes), valid until vmm_destroy. */
const struct gmem *vmm_gmem(const struct vmm *vm);

/**
 * vmm_gpa_or64 - atomically OR @bits into the 8 bytes of guest RAM at @gpa (8-aligned), as a
 * locked instruction of the guest would: the guest's own locked updates of the same word (other
 * vCPUs running) stay coherent with it (the same host memory). *@old (may be NULL): the value
 * before. Any thread. Return: 0; -EINVAL misaligned or NULL @vm; -ERANGE not guest RAM.
 */
int vmm_gpa_or64(struct vmm *vm, uint64_t gpa, uint64_t bits, uint64_t *old) __must_check;

/** vmm_gpa_and64 - the same with an AND of @mask (completing a guest's locked AND). */
int vmm_gpa_and64(struct vmm *vm, uint64_t gpa, uint64_t mask, uint64_t *old) __must_check;

/** vmm_maxphyaddr - the guest's physical address width in bits (CPUID 0x80000008). */
unsigned int vmm_maxphyaddr(const struct vmm *vm);

/** vmm_vcpu_count - number of vCPUs. */
unsigned int vmm_vcpu_count(const struct vmm *vm);

/** vmm_vcpu_index - 0-based index of @v. */
unsigned int vmm_vcpu_index(const struct vmm_vcpu *v);

/** vmm_vcpu_tid - thread id of @v's thread (valid from vcpu_start). */
int vmm_vcpu_tid(const struct vmm_vcpu *v);

/**
 * vmm_vcpu_regs - @v's registers as of its last exit, to read (KVM_CAP_SYNC_REGS copies where
 * available, else KVM_GET_REGS/SREGS). Either pointer may be NULL. Valid until the next KVM_RUN.
 * Return: 0; -errno of the ioctl.
 */
int vmm_vcpu_regs(struct vmm_vcpu *v, struct kvm_regs **regs, struct kvm_sregs **sregs)
	__must_check;

/**
 * vmm_vcpu_regs_rw - @v's registers to modify: copies (of the sync-regs area KVM filled at the
 * exit, where the host has KVM_CAP_SYNC_REGS; else KVM_GET_REGS/SREGS); call
 * vmm_vcpu_regs_dirty() after changing them, and they are written back before the next KVM_RUN
 * (a failed write ends the run). Return: 0; -errno of the ioctl.
 */
int vmm_vcpu_regs_rw(struct vmm_vcpu *v, struct kvm_regs **regs, struct kvm_sregs **sregs)
	__must_check;

/** vmm_vcpu_regs_dirty - the copies from vmm_vcpu_regs_rw() were changed: write them back. */
void vmm_vcpu_regs_dirty(struct vmm_vcpu *v, bool regs, bool sregs);

/**
 * vmm_vcpu_regs_dirty_in_kernel - like vmm_vcpu_regs_dirty(@v, true, false), for a rider that
 * changed only the general-purpose registers, RIP and RFLAGS of a vCPU stopped at a breakpoint
 * in the body of a kernel function (not an entry reached by an exception from user mode, such
 * as the PVM fix-up's page-fault entry): where the host has KVM_CAP_SYNC_REGS they go back
 * through the sync-regs area at the next KVM_RUN (KVM_SYNC_X86_REGS: the same __set_regs as
 * KVM_SET_REGS, without the ioctl's vcpu_load), unless something else in this exit needs the
 * ioctls (counter regs_sync_writes).
 */
void vmm_vcpu_regs_dirty_in_kernel(struct vmm_vcpu *v);

/** vmm_vcpu_get_msr - read MSR @index of @v (KVM_GET_MSRS). Return: 0; -EIO. */
int vmm_vcpu_get_msr(struct vmm_vcpu *v, uint32_t index, uint64_t *value) __must_check;

/* ---------------------------------------------------------------- hardware breakpoints */

/*
 * Four execute breakpoints (DR0-DR3) per vCPU through KVM_SET_GUEST_DEBUG, shared: on a PVM host
 * slot 0 is the SYSCALL fix-up's (vmm_pvm_fixup_enable) and riders get 1..3; elsewhere (VMX/SVM)
 * vmm_bp_alloc hands out all four. An address and an armed bit are VM-wide; every vCPU applies
 * them before its next KVM_RUN.
 */
#define VMM_BP_SLOTS 4

/** vmm_bp_alloc - a free slot for a rider (before vmm_run). Return: 0..3 (1..3 on PVM); -ENOSPC. */
int vmm_bp_alloc(struct vmm *vm) __must_check;

/** vmm_bp_free_slots - how many more slots vmm_bp_alloc would hand out (0..4). */
unsigned int vmm_bp_free_slots(const struct vmm *vm);

/** vmm_bp_set_addr - the GVA slot @slot traps on (0: none). Any thread, any time. */
void vmm_bp_set_addr(struct vmm *vm, int slot, uint64_t gva);

/**
 * vmm_bp_arm - arm (@armed) or disarm the slots in @mask on every vCPU. Arming kicks the vCPUs
 * other than @self (may be NULL) out of KVM_RUN so they arm at once; a kick never samples.
 */
void vmm_bp_arm(struct vmm *vm, unsigned int mask, bool armed, const struct vmm_vcpu *self);

/** vmm_bp_armed - the slots armed VM-wide now (bit N: slot N). Any thread. */
unsigned int vmm_bp_armed(const struct vmm *vm);

/* RFLAGS.RF, the resume flag (SDM vol. 3A, 2.3): instruction breakpoints at RIP do not fire */
#define VMM_RFLAGS_RF (1ull << 16)

/**
 * vmm_bp_step - resume @v past the breakpoint it stopped at with RFLAGS.RF (SDM vol. 3B, 18.3.1.1),
 * unless this host is known to ignore RF. Whether RF worked is seen at @v's next exit.
 * Return: 0 RF set; -ENOTSUP RF is ignored here (PVM): the caller completes the instruction.
 */
int vmm_bp_step(struct vmm_vcpu *v) __must_check;

/* ---------------------------------------------------------------- PVM hosts */

/** vmm_host_is_pvm - /dev/kvm is PVM (the kvm_pvm module), not VMX/SVM. */
bool vmm_host_is_pvm(void);

/**
 * vmm_guest_cmdline - @cmdline (a Linux kernel command line, may be NULL) with what a guest needs
 * on this host added where the line does not decide it already (a word is looked for by its key,
 * up to '='): with @pvm, earlyprintk on ttyS0, nolapic (nolapic_timer with @cpus > 1), noxsave,
 * clearcpuid of the instructions PVM does not emulate, tsc=reliable (../shared/pvm-facts.md).
 * Return: 0, *@out (the whole line) and *@added (the words added, "" when none), both malloc'd
 * (the caller frees); -ENOMEM.
 */
int vmm_guest_cmdline(const char *cmdline, unsigned int cpus, bool pvm, char **out,
		      char **added) __must_check;

/* ---------------------------------------------------------------- the PVM SYSCALL fix-up */

/**
 * vmm_pvm_fixup_enable - on a PVM host, complete SYSCALLs from user mode with a breakpoint on
 * the guest's #PF entry at GVA @pf_entry (../shared/pvm-facts.md). Call it with 0 first when the
 * address is not known yet (the KASLR slide), then again with the address. No-op elsewhere.
 */
void vmm_pvm_fixup_enable(struct vmm *vm, uint64_t pf_entry);

/**
 * struct vmm_initramfs_file - one host file to put into the guest's initramfs.
 * @host_path: file to read. @guest_path: absolute path in the guest (parents are created).
 */
struct vmm_initramfs_file {
	const char *host_path;
	const char *guest_path;
};

/**
 * vmm_initramfs_append - append a newc cpio archive (the initramfs format, Linux
 * Documentation/driver-api/early-userspace/buffer-format.rst) holding @files to the initrd in
 * @buf and @len (which may be empty), padded so the kernel unpacks both archives in turn.
 * Ownership: *@buf is malloc'd and replaced (realloc); the caller frees it.
 * Return: 0; -ENOENT/-EACCES a host file (named in the log); -EINVAL a guest path that is not
 * absolute or has "..". Nothing is changed on error.
 */
int vmm_initramfs_append(void **buf, size_t *len, const struct vmm_initramfs_file *files,
			 size_t n_files) __must_check;

/**
 * vmm_seccomp_confine - load, on the calling thread only, the seccomp filter of the threads that
 * run guest-driven code (vmm/seccomp.c, libseccomp): KVM and perf ioctls, I/O on open files,
 * memory without PROT_EXEC, futexes, signals and exit are allowed; every other system call
 * fails with EPERM. Irreversible for the thread. Return: 0; -errno from libseccomp.
 */
int vmm_seccomp_confine(void) __must_check;

/**
 * vmm_set_confined - whether the vCPU threads (and device threads) load that filter once set up
 * (default: yes). Before vmm_run. The strategy line says which.
 */
void vmm_set_confined(struct vmm *vm, bool on);

/** vmm_destroy - stop and free everything (NULL and partly created VMs are fine). */
void vmm_destroy(struct vmm *vm);

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_VMM_H */
