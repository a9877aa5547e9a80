/* SPDX-License-Identifier: MIT */
/*
 * vmm: hvprof's VM. Boots a Linux x86-64 guest on KVM (Linux boot protocol, 64-bit entry),
 * runs its vCPUs, emulates the few devices a console guest needs, samples every vCPU with a
 * per-vCPU-thread counter and hands the samples to a sink.
 */
#ifndef HVPROF_VMM_H
#define HVPROF_VMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>
#include <hvprof/sample.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vmm;

/**
 * struct vmm_sink - where samples and identity records go. Every callback may be called from
 * several vCPU threads at once: the sink serialises. A callback returning non-zero (-errno)
 * stops the run with HVP_END_ERROR after the current exit. All pointers are valid only during
 * the call.
 */
struct vmm_sink {
	int (*sample)(void *ctx, const struct hvp_sample *s);
	int (*thread)(void *ctx, const struct hvp_thread *t);
	int (*process)(void *ctx, const struct hvp_process *p);
	int (*user_stack)(void *ctx, const struct hvp_user_stack *u);
	void *ctx;
};

/* Sampling counter actually used (probed at start-up). */
enum vmm_counter_kind {
	VMM_COUNTER_NONE = 0,
	VMM_COUNTER_CYCLES = 1,    /* PERF_TYPE_HARDWARE cycles, exclude_host=1 */
	VMM_COUNTER_CPU_CLOCK = 2, /* PERF_COUNT_SW_CPU_CLOCK of the vCPU thread */
};

/* How the user part of a kernel-mode sample is taken. */
enum vmm_callchain_mode {
	VMM_CALLCHAIN_DEFERRED = 0, /* mark the thread, walk its user stack at its return to user */
	VMM_CALLCHAIN_EAGER = 1,    /* walk at sample time from the user registers in pt_regs */
	VMM_CALLCHAIN_BOTH = 2,     /* deferred, and the eager walk kept in the sample as a
				     * cross-check (docs/recording-format.md, SAMPLE) */
};

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
 * struct vmm_config - what to boot and how to sample. Zero-initialise, then set fields.
 * @kernel: host path of a vmlinux ELF (PT_LOADs at their physical addresses, entered at its
 *   64-bit entry) or a bzImage (boot protocol 2.12+, 64-bit entry at load address + 0x200).
 * @initrd/@initrd_size: initramfs bytes (concatenated newc archives), may be NULL. Copied.
 * @cmdline: kernel command line (at most 2047 bytes).
 * @mem_bytes: guest RAM in bytes (multiple of 2 MiB, >= 64 MiB).
 * @cpus: number of vCPUs (1..VMM_MAX_VCPUS).
 * @console_fd: where the serial console's output goes (-1: discarded).
 * @duration_ns: stop the guest after this long (0: run until it ends).
 * @sample_hz: sampling frequency per vCPU (0: no sampling).
 * @vmlinux/@btf: host paths for guestinfo (symbols, structure layout) when sampling; the
 *   vmlinux also locates the #PF entry for the PVM SYSCALL fix-up.
 * @sink: receives the records (required when @sample_hz > 0).
 * @force_counter: VMM_COUNTER_NONE to probe (cycles, else cpu-clock), or one to insist on.
 * @callchain_mode: enum vmm_callchain_mode. Deferred falls back to eager where the host
 *   cannot trap the guest's return to user (no hardware breakpoints or no exit sites found).
 * @bare_exits: benchmarking only: the counter makes the vCPUs exit at @sample_hz, and each
 *   exit does nothing else (no registers, no sample): the floor hvprof's cost is compared to.
 * @mark_timeout_ns: a mark not resolved at return to user within this long is resolved from
 *   the registers saved at kernel entry (0: 100 ms).
 * @kaslr/@kaslr_slide: where a relocatable kernel from a bzImage that hvprof decompresses is
 *   placed (enum vmm_kaslr; @kaslr_slide in bytes for VMM_KASLR_SLIDE).
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
	unsigned int sample_hz;
	const char *vmlinux;
	const char *btf;
	const struct vmm_sink *sink;
	enum vmm_counter_kind force_counter;
	enum vmm_callchain_mode callchain_mode;
	uint64_t mark_timeout_ns;
	bool bare_exits;
	enum vmm_kaslr kaslr;
	uint64_t kaslr_slide;
};

#define VMM_MAX_VCPUS 64

/**
 * struct vmm_result - how the run ended.
 * @reason: enum hvp_end_reason. @exit_status: the guest's status for HVP_END_EXIT_DEVICE,
 * else -1. @message: for HVP_END_ERROR, what happened (e.g. the unhandled exit and the
 * instruction bytes), NUL-terminated. @first_user_ns: ns from start to the first CPL3
 * sample (boot-to-/init estimate; 0 if none seen).
 */
struct vmm_result {
	int reason;
	int exit_status;
	uint64_t runtime_ns;
	uint64_t first_user_ns;
	char message[256];
};

/**
 * struct vmm_counters - what the run counted (samples, exits by kind, failures by reason).
 * Names in vmm_counter_names[] in the same order as the fields.
 */
struct vmm_counters {
	uint64_t samples;
	uint64_t samples_user;
	uint64_t samples_kernel;
	uint64_t samples_no_task;
	uint64_t samples_sink_errors;
	uint64_t exits;
	uint64_t exits_io;
	uint64_t exits_mmio;
	uint64_t exits_intr;
	uint64_t exits_debug;
	uint64_t syscall_fixups;
	uint64_t pf_steps;
	uint64_t emulation_int3;
	uint64_t emulation_fwait;
	uint64_t io_unhandled;
	uint64_t mmio_unhandled;
	uint64_t kernel_walk_fault;
	uint64_t kernel_walk_bad_fp;
	uint64_t kernel_walk_depth;
	uint64_t user_walk_fault;
	uint64_t user_walk_bad_fp;
	uint64_t user_walk_depth;
	uint64_t task_invalid;
	uint64_t threads;
	uint64_t processes;
	uint64_t sample_ns_total; /* host ns spent building samples (regs to sink) */
	/* deferred user callchains */
	uint64_t marks;                /* kernel entries marked (one cookie each) */
	uint64_t marks_reused;         /* samples that joined an existing mark's cookie */
	uint64_t resolved_at_return;   /* user stack walked at the return to user */
	uint64_t resolved_from_ptregs; /* timed out or at stop: walked from pt_regs of entry */
	uint64_t resolved_stale;       /* returned with other user registers: walked from entry */
	uint64_t dropped_table_full;   /* no free mark: walked eagerly instead */
	uint64_t dropped_exited;       /* the task was gone when the mark was resolved */
	uint64_t dropped_no_regs;      /* a mark whose entry registers could not be read */
	uint64_t traps_hit;            /* return-to-user breakpoint hits */
	uint64_t traps_no_mark;        /* hits whose thread had no mark */
	uint64_t traps_to_kernel;      /* iretq hits returning to kernel mode */
	uint64_t trap_ns_total;        /* host ns spent in trap handling */
	uint64_t traps_armed_at_end;   /* vCPUs still armed after the run (must be 0) */
	uint64_t user_regs_unreadable; /* kernel samples of user threads without pt_regs (no user part) */
	/* where a sample's host time goes (ns, summed; sample_ns_total is the whole) */
	uint64_t sample_ns_regs;       /* reading registers */
	uint64_t sample_ns_identity;   /* current task, pid/comm, THREAD/PROCESS records */
	uint64_t sample_ns_kernel_unwind; /* kernel callchain */
	uint64_t sample_ns_user;       /* user part: mark or eager walk */
	uint64_t sample_ns_write;      /* the sink (recording) */
	uint64_t vcpu_cpu_ns;          /* CPU time of the vCPU threads: what cpu-clock counts */
	uint64_t samples_not_long_mode;/* counter overflows before the vCPU reached long mode */
	uint64_t tcache_hits;          /* GVA->GPA translations answered by the per-sample cache */
	uint64_t tcache_misses;        /* ... and walked */
};

extern const char *const vmm_counter_names[];
#define VMM_N_COUNTERS (sizeof(struct vmm_counters) / sizeof(uint64_t))

/**
 * vmm_create - open /dev/kvm, create the VM, its RAM, devices and vCPUs, load the kernel.
 * Return: 0 and *@out (free with vmm_destroy); -ENOENT kernel file or /dev/kvm missing;
 * -EACCES no permission; -EBADMSG kernel is neither a usable ELF nor a bzImage; -EINVAL bad
 * configuration (memory size, vCPUs, command line too long, initrd too big); -ENOTSUP the
 * host KVM lacks a required capability; other -errno from KVM ioctls. Messages name the file
 * or the ioctl.
 */
int vmm_create(const struct vmm_config *cfg, struct vmm **out) __must_check;

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

/** vmm_get_counters - copy the counters (after vmm_run returned, or approximately during). */
void vmm_get_counters(const struct vmm *vm, struct vmm_counters *out);

/** vmm_counter_kind - the sampling counter in use (after vmm_create). */
enum vmm_counter_kind vmm_counter_kind(const struct vmm *vm);

/** vmm_counter_name - "cycles", "cpu-clock" or "none". */
const char *vmm_counter_name(enum vmm_counter_kind kind);

/** vmm_callchain_mode_name - "deferred" or "eager" (the mode in effect after vmm_create). */
const char *vmm_callchain_mode_name(const struct vmm *vm);

/** vmm_strategy - one line saying how this host is driven (e.g. "pvm: syscall-fixup=bp"). */
const char *vmm_strategy(const struct vmm *vm);

/**
 * vmm_kernel_slide - the guest kernel's KASLR slide in bytes, the one kernel symbols are
 * looked up with: known at boot when hvprof placed the kernel (docs/kaslr.md), else found from
 * MSR_LSTAR once the guest has set it (vmm/kaslr.c). Return: 0 and *@slide; -ENODATA not
 * known (the guest chose it and has not been seen in kernel mode since, no symbols, or the
 * image does not match the guest); -EINVAL.
 */
int vmm_kernel_slide(const struct vmm *vm, uint64_t *slide) __must_check;

/* Outcome of the MSR_LSTAR check of the KASLR slide (struct vmm_kaslr_info.check). */
enum vmm_kaslr_check {
	KASLR_CHECK_PENDING = 0, /* no kernel-mode look at MSR_LSTAR yet */
	KASLR_CHECK_CONFIRMED,   /* the slide hvprof placed the kernel at, seen in the guest */
	KASLR_CHECK_FOUND,       /* the guest chose the slide; found from MSR_LSTAR */
	KASLR_CHECK_MISMATCH,    /* the guest runs at another slide than hvprof placed it */
	KASLR_CHECK_FAILED,      /* MSR_LSTAR does not point at this image's entry_SYSCALL_64 */
};

/**
 * struct vmm_kaslr_info - where the guest kernel runs, and how hvprof knows (vmm/kaslr.c).
 * @placed: hvprof placed the kernel (a vmlinux at its link address, or a bzImage it
 *   decompressed): @placed_slide is where, in bytes. @relocated: hvprof applied the image's
 *   KASLR relocation table (@n_relocs entries) for a non-zero or requested slide.
 * @check: enum vmm_kaslr_check; @detected_slide valid for CONFIRMED, FOUND and MISMATCH.
 * @idt: the second witness of that check: the guest IDT's #PF gate is asm_exc_page_fault at
 *   the detected slide (1), is not (-1), or could not be read (0).
 * @slide_known/@slide: the slide kernel symbols are looked up with.
 */
struct vmm_kaslr_info {
	bool placed, relocated, slide_known;
	uint64_t placed_slide, detected_slide, slide;
	size_t n_relocs;
	int check;
	int idt;
};

/** vmm_kaslr_info - fill @out (any time; final after vmm_run). Return: 0; -EINVAL. */
int vmm_kaslr_info(const struct vmm *vm, struct vmm_kaslr_info *out) __must_check;

/* Page-table isolation in the guest, as hvprof found it (vmm/pti.c). */
enum vmm_pti {
	VMM_PTI_UNKNOWN = 0,  /* no user-mode CR3 checked yet */
	VMM_PTI_OFF,          /* user-mode CR3s map the kernel */
	VMM_PTI_ON,           /* they do not; the kernel's tables are CR3 - 4 KiB */
	VMM_PTI_NOT_FOUND,    /* they do not, and CR3 - 4 KiB is not the kernel's either */
	VMM_PTI_NOT_CHECKED,  /* no init_task symbol to check with */
};

/** vmm_pti_name - a phrase for the guest's page-table isolation state (static string). */
const char *vmm_pti_name(const struct vmm *vm);

/** vmm_kaslr_check_name - a phrase for enum vmm_kaslr_check (static string). */
const char *vmm_kaslr_check_name(int check);

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

/** vmm_destroy - stop and free everything (NULL and partly created VMs are fine). */
void vmm_destroy(struct vmm *vm);

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_VMM_H */
