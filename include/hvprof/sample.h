/* SPDX-License-Identifier: MIT */
/*
 * What the VMM produces and the recording stores: samples, threads, processes, end-of-run
 * facts. The vmm layer fills these; profile/recfile writes and reads them (docs/recording-format.md).
 */
#ifndef HVPROF_SAMPLE_H
#define HVPROF_SAMPLE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HVP_MAX_CALLCHAIN 128 /* frames per callchain part (kernel or user) */
#define HVP_COMM_LEN 16       /* TASK_COMM_LEN of Linux */

/* Why a callchain walk ended (recorded per part, reported as a counted reason). */
enum hvp_walk_stop {
	HVP_WALK_END = 0,      /* reached the outermost frame (frame pointer 0 or outside the stack) */
	HVP_WALK_DEPTH = 1,    /* HVP_MAX_CALLCHAIN frames taken */
	HVP_WALK_FAULT = 2,    /* a frame was not mapped or outside guest RAM */
	HVP_WALK_BAD_FP = 3,   /* frame pointer not aligned, not increasing, or non-canonical */
	HVP_WALK_NONE = 4,     /* not walked (no user part: kernel thread, or not available) */
	HVP_WALK_DEFERRED = 5, /* user part is in a USER_STACK record with the sample's cookie */
	HVP_WALK_LOST = 6,     /* user part was deferred and then lost (see counters) */
};

/* Sample flags. */
#define HVP_SAMPLE_USER 0x1      /* CPL 3 at the sample */
#define HVP_SAMPLE_KTHREAD 0x2   /* the task is a kernel thread (hvp_thread.kthread) */
#define HVP_SAMPLE_NO_TASK 0x4   /* the current task could not be identified (counted) */

/**
 * struct hvp_sample - one sample of one vCPU.
 * @time_ns: CLOCK_MONOTONIC of the host at the exit, ns since the recording started.
 * @vcpu: vCPU index. @cpl: 0 or 3. @flags: HVP_SAMPLE_*.
 * @rip: guest RIP (GVA). @cr3: guest CR3 at the sample.
 * @task: GVA of the guest task_struct (0 if unknown). @pid/@tgid: guest thread and process ids
 *   (-1 if unknown).
 * @cookie: joins this sample to a deferred USER_STACK record (0: none).
 * @period: events this sample stands for (ns of vCPU time for the clock counter).
 * @kernel_ips/@n_kernel: kernel callchain, innermost first (rip first), GVAs.
 * @user_ips/@n_user: user callchain, innermost first, GVAs.
 * @kernel_stop/@user_stop: enum hvp_walk_stop for each part.
 */
struct hvp_sample {
	uint64_t time_ns;
	uint32_t vcpu;
	uint8_t cpl;
	uint8_t flags;
	uint8_t kernel_stop;
	uint8_t user_stop;
	uint64_t rip;
	uint64_t cr3;
	uint64_t task;
	int32_t pid;
	int32_t tgid;
	uint64_t cookie;
	uint64_t period;
	uint16_t n_kernel;
	uint16_t n_user;
	uint64_t kernel_ips[HVP_MAX_CALLCHAIN];
	uint64_t user_ips[HVP_MAX_CALLCHAIN];
};

/**
 * struct hvp_thread - a guest thread as first seen, or seen again with another comm.
 * @task: task_struct GVA. @pid/@tgid: ids. @comm: NUL-terminated. @kthread: a kernel thread
 * (PF_KTHREAD, or no mm and not exiting).
 */
struct hvp_thread {
	uint64_t time_ns;
	uint64_t task;
	int32_t pid;
	int32_t tgid;
	uint8_t kthread;
	char comm[HVP_COMM_LEN];
};

/**
 * struct hvp_process - the executable of a guest process (tgid), for user symbolization.
 * @mm: mm_struct GVA. @start_code/@end_code: GVAs of the text of the executable (mm fields).
 * @exe: guest path of the executable, NUL-terminated ("" if unknown).
 */
struct hvp_process {
	uint64_t time_ns;
	int32_t tgid;
	uint32_t pad;
	uint64_t mm;
	uint64_t start_code;
	uint64_t end_code;
	char exe[256];
};

/**
 * struct hvp_user_stack - the deferred user callchain for every sample with @cookie.
 */
struct hvp_user_stack {
	uint64_t time_ns;
	uint64_t cookie;
	int32_t pid;
	uint32_t vcpu;
	uint8_t stop; /* enum hvp_walk_stop */
	uint16_t n_user;
	uint64_t user_ips[HVP_MAX_CALLCHAIN];
};

/* Protection bits of a mapping (hvp_mapping.prot): vm_flags' low bits. */
#define HVP_PROT_READ 0x1
#define HVP_PROT_WRITE 0x2
#define HVP_PROT_EXEC 0x4
#define HVP_PROT_SHARED 0x8

/**
 * struct hvp_mapping - one mapping (VMA) of a guest process, as recorded (MAPPING record).
 * @tgid: the process. @index/@count: its place in the process's snapshot of @count mappings:
 *   index 0 starts a new snapshot, which replaces every earlier mapping of @tgid.
 * @start/@end: [start, end) GVAs. @pgoff: file offset of @start in bytes. @ino/@dev: the file's
 * inode and device (0: anonymous). @prot: HVP_PROT_*. @build_id/@build_id_len: the GNU build-id
 * of the file, read from its first page in guest memory (on the mapping at file offset 0).
 * @path: NUL-terminated, "" if anonymous.
 */
struct hvp_mapping {
	uint64_t time_ns;
	int32_t tgid;
	uint16_t index, count;
	uint64_t start, end, pgoff, ino;
	uint32_t dev, prot;
	uint8_t build_id_len; /* 0: unknown (not an ELF, not resident, or not the file's start) */
	uint8_t build_id[20];
	char path[256];
};

/* How a run ended (END record). */
enum hvp_end_reason {
	HVP_END_EXIT_DEVICE = 1, /* the guest wrote its exit status to the exit register */
	HVP_END_RESET = 2,       /* the guest reset (reboot or panic=-1) without an exit status */
	HVP_END_SHUTDOWN = 3,    /* triple fault */
	HVP_END_DURATION = 4,    /* --duration elapsed */
	HVP_END_SIGNAL = 5,      /* SIGINT/SIGTERM to hvprof */
	HVP_END_ERROR = 6,       /* an exit hvprof does not handle, or an internal error */
};

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_SAMPLE_H */
