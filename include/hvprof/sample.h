/* SPDX-License-Identifier: MIT */
/*
 * What the VMM produces and the recording stores: samples, threads, processes, end-of-run
 * facts. The vmm layer fills these; profile/recfile writes and reads them (docs/recording-format.md).
 */
#ifndef HVPROF_SAMPLE_H
#define HVPROF_SAMPLE_H

#include <stdint.h>
#include <string.h>

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
	HVP_WALK_EXECVE = 7,   /* not walked: the user registers are those of the program an
				* execve is replacing, the task already runs on the new mm */
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

/*
 * User registers and a copy of the user stack (USER_REGS record, docs/recording-format.md), for
 * unwinding from CFI (--call-graph dwarf) and for mending the frame-pointer walk's leaf hole
 * (--call-graph fp: a small window of stack above RSP).
 */
#define HVP_USER_NREGS 17              /* regs[] entries: DWARF x86-64 registers 0..16 */
#define HVP_USER_STACK_MAX 65528       /* most stack bytes a USER_REGS record carries */
#define HVP_USER_STACK_DEFAULT 8192    /* --call-graph dwarf without SIZE */
#define HVP_USER_STACK_FP_WINDOW 64    /* stack bytes copied in --call-graph fp mode */
/* most pieces of a stack read in place: one per 4 KiB page the largest stack can touch */
#define HVP_USER_STACK_SEGS (HVP_USER_STACK_MAX / 4096 + 2)
#define HVP_USER_REGS_AFTER_SAMPLE 2     /* hvp_user_regs.follows: RECFILE_SAMPLE */
#define HVP_USER_REGS_AFTER_USER_STACK 5 /* hvp_user_regs.follows: RECFILE_USER_STACK */

/* Index into hvp_user_regs.regs: the DWARF register numbers of the x86-64 System V psABI. */
enum hvp_dwarf_reg {
	HVP_REG_RAX = 0, HVP_REG_RDX = 1, HVP_REG_RCX = 2, HVP_REG_RBX = 3,
	HVP_REG_RSI = 4, HVP_REG_RDI = 5, HVP_REG_RBP = 6, HVP_REG_RSP = 7,
	HVP_REG_R8 = 8,  HVP_REG_R9 = 9,  HVP_REG_R10 = 10, HVP_REG_R11 = 11,
	HVP_REG_R12 = 12, HVP_REG_R13 = 13, HVP_REG_R14 = 14, HVP_REG_R15 = 15,
	HVP_REG_RIP = 16,
};

/**
 * struct hvp_user_regs - the user registers of a user walk and the stack above RSP (USER_REGS).
 * Always written right after the SAMPLE or USER_STACK record it completes (@follows), under
 * the same writer lock hold, so the two are adjacent in the file.
 * @time_ns/@cookie/@pid: those of the record it follows (@cookie may be 0 after a SAMPLE).
 * @vcpu: the vCPU that took them. @follows: RECFILE type of that record, 2 (SAMPLE) or 5
 * (USER_STACK). @regs: DWARF-numbered user registers (enum hvp_dwarf_reg), GVAs and values.
 * @stack_size: bytes asked (the mode's SIZE). @stack_len: bytes copied from regs[HVP_REG_RSP]
 * upward (0..@stack_size; shorter when the stack ended at an unmapped or non-user page, 0 when
 * RSP was not a user address).
 * @stack: @stack_len bytes. Writer: the caller's buffer, read during the call. Reader: points
 *   into the reader's buffer, valid until the next recfile_reader_next().
 * @stack_segs/@n_stack_segs: writer only, instead of @stack (then NULL): the @stack_len bytes
 *   in @n_stack_segs pieces, in order (the sampler's guest stack pages read in place, valid
 *   during the call: hvp_user_regs_stack_copy() gathers them). 0 pieces: @stack is the bytes.
 */
struct hvp_bytes {
	const uint8_t *p;
	uint32_t len;
};

struct hvp_user_regs {
	uint64_t time_ns;
	uint64_t cookie;
	int32_t pid;
	uint32_t vcpu;
	uint8_t follows;
	uint32_t stack_len;
	uint32_t stack_size;
	uint64_t regs[HVP_USER_NREGS];
	const uint8_t *stack;
	const struct hvp_bytes *stack_segs;
	uint32_t n_stack_segs;
};

/*
 * hvp_user_regs_stack_copy - copy @len bytes of @r's stack from byte @off on into @dst, from
 * @r->stack or its pieces. Return: bytes copied (fewer when the stack holds fewer past @off).
 */
static inline size_t hvp_user_regs_stack_copy(const struct hvp_user_regs *r, size_t off,
					      void *dst, size_t len)
{
	uint8_t *out = (uint8_t *)dst;
	size_t done = 0;

	if (!r->n_stack_segs) {
		if (off >= r->stack_len || !r->stack)
			return 0;
		done = r->stack_len - off < len ? r->stack_len - off : len;
		memcpy(out, r->stack + off, done);
		return done;
	}
	for (uint32_t i = 0; i < r->n_stack_segs && done < len; i++) {
		const struct hvp_bytes *b = &r->stack_segs[i];
		size_t n;

		if (off >= b->len) {
			off -= b->len;
			continue;
		}
		n = b->len - off < len - done ? b->len - off : len - done;
		memcpy(out + done, b->p + off, n);
		done += n;
		off = 0;
	}
	return done;
}

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

/**
 * enum hvp_event_kind - what an EVENT record tells (docs/recording-format.md). Kinds 1..255 are
 * the guest's own events, as its init wrote them to the exit register (docs/guest-interface.md,
 * "Events"); kinds from 256 are hvprof's.
 * @HVP_EVENT_INIT: the guest's init started. @HVP_EVENT_WORKLOAD_START: the --run command is
 * about to start. @HVP_EVENT_WORKLOAD_END: it ended, value: its exit status (0..255).
 * @HVP_EVENT_BENCH_PHASE: hvprof-bench's phase (value 0: no sampling, 1: bare exits, 2:
 * sampling), acted on only by `record --bench-phases` (docs/guest-interface.md, "Events").
 * @HVP_EVENT_SAMPLING_START: hvprof armed the sampling counters (`record --from` later than
 * boot); no sample is older.
 */
enum hvp_event_kind {
	HVP_EVENT_INIT = 1,
	HVP_EVENT_WORKLOAD_START = 2,
	HVP_EVENT_WORKLOAD_END = 3,
	HVP_EVENT_BENCH_PHASE = 16,
	HVP_EVENT_SAMPLING_START = 256,
};

/**
 * struct hvp_event - one event of the run (EVENT record).
 * @time_ns: host CLOCK_MONOTONIC ns since the run started, as a sample's. @kind: enum
 * hvp_event_kind (or another guest kind 1..255). @value: the event's value (a status), else 0.
 */
struct hvp_event {
	uint64_t time_ns;
	uint32_t kind;
	int32_t value;
};

/* How a run ended (END record). */
enum hvp_end_reason {
	HVP_END_EXIT_DEVICE = 1, /* the guest wrote its exit status to the exit register */
	HVP_END_RESET = 2,       /* the guest reset (reboot or panic=-1) without an exit status */
	HVP_END_SHUTDOWN = 3,    /* triple fault */
	HVP_END_DURATION = 4,    /* --duration elapsed */
	HVP_END_SIGNAL = 5,      /* SIGINT/SIGTERM to hvprof */
	HVP_END_ERROR = 6,       /* an exit hvprof does not handle, or an internal error */
	HVP_END_DETACHED = 7,    /* record --attach detached; the guest runs on (recordings only) */
};

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_SAMPLE_H */
