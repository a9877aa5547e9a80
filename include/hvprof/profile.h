/* SPDX-License-Identifier: MIT */
/*
 * profile: the recording file (writer, reader; docs/recording-format.md), loading a recording
 * into an aggregated, symbolized profile (cookie join, comm/exe tracking), its exporters
 * (perf-style report, folded stacks, SVG flamegraph, speedscope, pprof, perf script; see
 * docs/export-formats.md) and the comparison of two profiles (docs/diff.md).
 *
 * Errors (negative errno): -EINVAL bad argument; -ENOMEM; -EBADMSG malformed recording;
 * -ENOTSUP recording of a newer format version; I/O errors of read(2)/write(2) as they come
 * (-ENOSPC, -EIO, ...). Nothing here prints: messages go through hvprof/log.h, and every
 * output goes through an fd or a write callback (struct profile_sink).
 */
#ifndef HVPROF_PROFILE_H
#define HVPROF_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>
#include <hvprof/sample.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- recording file (recfile_*.c) */

#define RECFILE_VERSION 2          /* format version this code writes and the newest it reads
				    * (1: one CRC per record; 2: CRC-checked blocks of records) */
#define RECFILE_HEADER_SIZE 16     /* bytes of the file header written by this version */
#define RECFILE_MAX_RECORD 1048576 /* largest record size a reader accepts (bytes) */
#define RECFILE_MAX_BLOCK (16 + 2 * RECFILE_MAX_RECORD) /* largest block a reader accepts */
#define RECFILE_MAX_KEY 255        /* longest META key, COUNTER name (bytes, no NUL) */
#define RECFILE_MAX_VALUE 32768    /* longest META value (bytes, no NUL) */
#define RECFILE_BUFFER 131072      /* the writer's blocks: at most 16 + this many bytes; it
				    * holds the largest pair of records the writer makes at once
				    * (a SAMPLE and a USER_REGS with HVP_USER_STACK_MAX bytes) */
#define RECFILE_WRITER_MAX_RECORD (8 + 176 + HVP_USER_STACK_MAX) /* largest record written */

/* Record types (the u32 type field). Readers skip types they do not know (and count them). */
enum recfile_type {
	RECFILE_META = 1,
	RECFILE_SAMPLE = 2,
	RECFILE_THREAD = 3,
	RECFILE_PROCESS = 4,
	RECFILE_USER_STACK = 5,
	RECFILE_COUNTER = 6,
	RECFILE_END = 7,
	RECFILE_MAPPING = 8,
	RECFILE_USER_REGS = 9,
	RECFILE_EVENT = 10,
};

struct recfile_writer;

/**
 * recfile_writer_open - start a recording on @fd: writes the 16-byte file header at once
 * (unbuffered, so even an empty recording is a valid file) and starts the writer's thread,
 * which alone writes to @fd from then on (signals blocked; it ends in recfile_writer_close()).
 * @fd: any writable fd (file, pipe, socket), positioned where the file starts; not owned:
 *   the caller closes it after recfile_writer_close().
 * @out: the writer; free with recfile_writer_close().
 * Return: 0; -EINVAL @fd < 0 or @out NULL; -ENOMEM; -EAGAIN no thread; the errno of write(2)
 * (-ENOSPC, -EPIPE...).
 */
int recfile_writer_open(int fd, struct recfile_writer **out) __must_check;

/**
 * recfile_write_meta - append a META record (a fact about the run: `kernel`, `rootfs`, `add`,
 * `counter`, ... see docs/recording-format.md). Keys may repeat (`add`).
 * @key: 1..RECFILE_MAX_KEY bytes. @value: 0..RECFILE_MAX_VALUE bytes. Both NUL-terminated.
 * Return: 0; -EINVAL bad lengths or NULL; the sticky write error, if any write failed before.
 * Thread-safety: all recfile_write_*() and recfile_writer_flush() may run concurrently on one
 * writer, with no lock on the way: each thread appends to its own buffer (allocated at its first
 * record, 256 KiB, freed by recfile_writer_close()), and the file holds the records in the order
 * the calls took their place (one atomic add each), whichever thread made them.
 */
int recfile_write_meta(struct recfile_writer *w, const char *key, const char *value) __must_check;

/**
 * recfile_write_sample - append a SAMPLE record; only the @s->n_kernel and @s->n_user first
 * ips of each callchain are stored.
 * Return: 0; -EINVAL n_kernel or n_user > HVP_MAX_CALLCHAIN; the sticky write error.
 */
int recfile_write_sample(struct recfile_writer *w, const struct hvp_sample *s) __must_check;

/**
 * recfile_write_thread - append a THREAD record (@t->comm is stored up to its first NUL, at
 * most HVP_COMM_LEN - 1 bytes). Return: 0; -EINVAL; the sticky write error.
 */
int recfile_write_thread(struct recfile_writer *w, const struct hvp_thread *t) __must_check;

/**
 * recfile_write_process - append a PROCESS record (@p->exe up to its first NUL, at most 255
 * bytes). Return: 0; -EINVAL; the sticky write error.
 */
int recfile_write_process(struct recfile_writer *w, const struct hvp_process *p) __must_check;

/**
 * recfile_write_mapping - append a MAPPING record (@m->path up to its first NUL, at most 255
 * bytes). Return: 0; -EINVAL (@m->index >= @m->count, start >= end); the sticky write error.
 */
int recfile_write_mapping(struct recfile_writer *w, const struct hvp_mapping *m) __must_check;

/**
 * recfile_write_user_stack - append a USER_STACK record (the first @u->n_user ips).
 * Return: 0; -EINVAL n_user > HVP_MAX_CALLCHAIN; the sticky write error.
 */
int recfile_write_user_stack(struct recfile_writer *w, const struct hvp_user_stack *u)
	__must_check;

/**
 * recfile_write_user_regs - append a USER_REGS record (@r->stack_len bytes of @r->stack) on its
 * own. The sampler uses the pair writers below instead, so that a USER_REGS record always
 * follows its SAMPLE or USER_STACK directly; this one is for tests and tools.
 * Return: 0; -EINVAL (@r->follows not 2 or 5, @r->stack_len > HVP_USER_STACK_MAX, or a
 * stack_len without @r->stack); the sticky write error.
 */
int recfile_write_user_regs(struct recfile_writer *w, const struct hvp_user_regs *r)
	__must_check;

/**
 * recfile_write_sample_regs - append a SAMPLE record and, when @r is not NULL, its USER_REGS
 * record right after it, as one entry of the calling thread's buffer with one place in the
 * file's order: no other thread's record comes between them.
 * @r->follows must be RECFILE_SAMPLE. Return: as recfile_write_sample() and
 * recfile_write_user_regs(); nothing is written on -EINVAL.
 */
int recfile_write_sample_regs(struct recfile_writer *w, const struct hvp_sample *s,
			      const struct hvp_user_regs *r) __must_check;

/**
 * recfile_write_user_stack_regs - as recfile_write_sample_regs() for a USER_STACK record and
 * its USER_REGS (@r->follows RECFILE_USER_STACK; @r may be NULL).
 */
int recfile_write_user_stack_regs(struct recfile_writer *w, const struct hvp_user_stack *u,
				  const struct hvp_user_regs *r) __must_check;

/**
 * recfile_write_counter - append a COUNTER record: a named total (`samples_dropped`, ...).
 * @name: 1..RECFILE_MAX_KEY bytes. A later COUNTER of the same name replaces the earlier one.
 * Return: 0; -EINVAL; the sticky write error.
 */
int recfile_write_counter(struct recfile_writer *w, const char *name, uint64_t value)
	__must_check;

/**
 * recfile_write_event - append an EVENT record: a guest event (init, workload start or end) or
 * hvprof's start of sampling, at @e->time_ns (struct hvp_event). Thread-safe.
 * Return: 0; -EINVAL; the sticky write error.
 */
int recfile_write_event(struct recfile_writer *w, const struct hvp_event *e) __must_check;

/**
 * recfile_write_end - append the END record: how the run ended and the guest's exit status
 * (meaningful for HVP_END_EXIT_DEVICE; 0 otherwise).
 * Return: 0; -EINVAL unknown @reason; the sticky write error.
 */
int recfile_write_end(struct recfile_writer *w, enum hvp_end_reason reason, int32_t exit_status)
	__must_check;

/**
 * recfile_writer_flush - write every record accepted before the call to the fd, and wait until
 * it is there (the writer's own thread also writes by itself, at least every 10 ms and when a
 * thread's buffer is half full: docs/recording-format.md, "The writer").
 * Return: 0; the sticky write error (the first write(2) failure; once set, every later call
 * returns it and nothing more is written).
 * Thread-safety: as every recfile_write_*(); it blocks the calling thread until the write.
 */
int recfile_writer_flush(struct recfile_writer *w) __must_check;

/** recfile_writer_records - records accepted so far (thread-safe). */
uint64_t recfile_writer_records(struct recfile_writer *w);

/**
 * recfile_writer_close - flush and free @w (NULL is fine, returns 0). Does not close the fd.
 * Return: 0, or the sticky write error (-ENOSPC, -EIO, ...): the recording is incomplete.
 * Thread-safety: no other thread may use @w during or after the call.
 */
int recfile_writer_close(struct recfile_writer *w) __must_check;

/* The fields of a META record, as read. Strings are owned by the reader. */
struct recfile_meta {
	const char *key;
	const char *value;
};

/* The fields of a COUNTER record, as read. @name is owned by the reader. */
struct recfile_counter {
	const char *name;
	uint64_t value;
};

/* The fields of an END record. @reason: enum hvp_end_reason (unchecked: may be unknown). */
struct recfile_end {
	uint32_t reason;
	int32_t exit_status;
};

/**
 * struct recfile_record - one record as read: @type selects the union member.
 * @offset: file offset of the record's first byte. Strings and the record itself stay valid
 * until the next recfile_reader_next() or recfile_reader_close().
 */
struct recfile_record {
	enum recfile_type type;
	uint64_t offset;
	union {
		struct recfile_meta meta;
		struct hvp_sample sample;
		struct hvp_thread thread;
		struct hvp_process process;
		struct hvp_user_stack user_stack;
		struct recfile_counter counter;
		struct recfile_end end;
		struct hvp_mapping mapping;
		struct hvp_user_regs user_regs; /* .stack points into the reader's buffer */
		struct hvp_event event;
	};
};

struct recfile_reader;

/**
 * recfile_reader_open - open the recording at @path and check its file header.
 * @errbuf/@errbuf_len: optional; on failure, one line saying what is wrong with which file
 *   ("rec.hvp: bad magic (not an hvprof recording)").
 * @out: the reader; free with recfile_reader_close().
 * Return: 0; -ENOENT/-EACCES... (open); -EBADMSG bad magic, header size, or a file shorter
 * than its header; -ENOTSUP a format version newer than RECFILE_VERSION; -ENOMEM.
 */
int recfile_reader_open(const char *path, struct recfile_reader **out, char *errbuf,
			size_t errbuf_len) __must_check;

/**
 * recfile_reader_open_fd - as recfile_reader_open() on an fd positioned at the file header.
 * @fd is not owned (not closed by recfile_reader_close()); @name is used in messages only
 * (copied; NULL: "fd N").
 */
int recfile_reader_open_fd(int fd, const char *name, struct recfile_reader **out, char *errbuf,
			   size_t errbuf_len) __must_check;

/**
 * recfile_reader_next - read the next intact record into @rec (records of unknown type are
 * skipped and counted).
 * Return: 1 a record; 0 end of file after an intact record; -EBADMSG the file is damaged at
 * the record at recfile_reader_offset(): bad CRC, impossible size field, a record cut short
 * by the end of the file, or fields that contradict the size (recfile_reader_error() says
 * which, with the offset); read(2) errors. After an error every later call returns it again:
 * what was returned before stays valid.
 */
int recfile_reader_next(struct recfile_reader *r, struct recfile_record *rec) __must_check;

/**
 * recfile_reader_error - what stopped the reader, one line naming the file offset
 * ("offset 4242: CRC mismatch in a SAMPLE record (size 96)"), or NULL while none did.
 * Owned by the reader.
 */
const char *recfile_reader_error(const struct recfile_reader *r);

/** recfile_reader_records - intact records returned so far. */
uint64_t recfile_reader_records(const struct recfile_reader *r);

/** recfile_reader_offset - file offset just past the last intact record (or the header). */
uint64_t recfile_reader_offset(const struct recfile_reader *r);

/** recfile_reader_skipped - intact records of unknown type skipped so far. */
uint64_t recfile_reader_skipped(const struct recfile_reader *r);

/** recfile_reader_version - format version from the file header. */
uint32_t recfile_reader_version(const struct recfile_reader *r);

/** recfile_reader_close - free @r and close the fd it opened itself (NULL is fine). */
void recfile_reader_close(struct recfile_reader *r);

/** recfile_type_name - "META", "SAMPLE", ... or "unknown" (static strings). */
const char *recfile_type_name(uint32_t type);

/** recfile_end_reason_name - "guest exit", "reset", ... for enum hvp_end_reason, or "unknown". */
const char *recfile_end_reason_name(uint32_t reason);

/** recfile_walk_stop_name - "end", "depth", "fault", ... for enum hvp_walk_stop, or "unknown". */
const char *recfile_walk_stop_name(uint32_t stop);

/* ---------------------------------------------------------------- loaded profile (profile.c) */

struct profile;

/**
 * struct profile_options - how to load and symbolize a recording. Zero-initialize, set @size to
 * sizeof(struct profile_options), then set what you need; NULL options mean all defaults.
 * @vmlinux: host path of the guest kernel ELF; overrides META `kernel` and @symfs.
 * @symfs: host directory: @symfs/vmlinux is tried for the kernel (before META `kernel`), and
 *   @symfs + guest path for executables (after META `add` and `rootfs`).
 * @rootfs: host directory of the guest's root tree; overrides META `rootfs`.
 * @no_symbols: nonzero: do not open any ELF; every frame is shown as an address.
 * @keep_samples: nonzero: also keep every sample (time, vCPU, period and its stack: 24 bytes
 *   each), which profile_perf_script() needs; memory then grows with samples.
 * @max_stack: nonzero: cut each callchain to its @max_stack innermost frames (kernel and user
 *   ips together, counted from the leaf, as `perf report --max-stack`) and mark the cut with a
 *   `[truncated at N frames]` frame at its root; 0: no bound.
 * Sample filters (docs/export-formats.md, "Filters"; each NULL or 0: none). A sample is kept
 * when it passes all of them; the profile, its statistics and every output then hold only the
 * kept samples, and profile_stats.filtered_out counts the others. Syntax: profile_filter_check().
 * @filter_comm: comma list of comms; the thread's comm at the sample, as the folded output's
 *   first frame shows it (":PID" or "[unknown]" for a thread the recording never named).
 * @filter_pid: comma list of process ids (tgid, as `perf report --pid`).
 * @filter_tid: comma list of thread ids.
 * @filter_time: "START,END", seconds since the recording started (each side optional,
 *   decimals allowed, both ends included), as `perf report --time`.
 * @filter_only: enum profile_only: PROFILE_ONLY_KERNEL keeps the samples taken in the kernel
 *   (CPL 0) and shows only the kernel part of their callchains; PROFILE_ONLY_USER keeps those
 *   taken in user mode (CPL 3) and shows only the user part.
 * @window_set/@window_start_ns/@window_end_ns: nonzero: keep only the samples of that time
 *   range too (ns since the recording started, both ends included: a workload window from
 *   profile_scan_window()); it joins @filter_time (a sample must be in both) and the filters'
 *   description says "--window START,END" in seconds.
 */
struct profile_options {
	size_t size;
	const char *vmlinux;
	const char *symfs;
	const char *rootfs;
	int no_symbols;
	int keep_samples;
	unsigned int max_stack;
	const char *filter_comm;
	const char *filter_pid;
	const char *filter_tid;
	const char *filter_time;
	int filter_only;
	int window_set;
	uint64_t window_start_ns;
	uint64_t window_end_ns;
};

/* profile_options.filter_only: which samples, and which part of their callchains. */
enum profile_only {
	PROFILE_ONLY_ALL = 0,
	PROFILE_ONLY_KERNEL = 1, /* --kernel-only */
	PROFILE_ONLY_USER = 2,   /* --user-only */
};

/**
 * profile_filter_check - validate the filters of @opts (profile_load() checks them too):
 * @filter_comm a comma list of names (no empty one); @filter_pid and @filter_tid comma lists
 * of whole numbers 0..2147483647; @filter_time "START,END" with START and END seconds (digits,
 * optionally a '.' and up to 9 decimals), either one empty, END not before START;
 * @filter_only one of enum profile_only.
 * @errbuf/@errbuf_len: optional; on -EINVAL, one line naming the option as the CLI spells it
 *   ("--time '3,1': END before START", "--pid 'x': not a number").
 * Return: 0; -EINVAL a bad filter (or NULL @opts).
 */
int profile_filter_check(const struct profile_options *opts, char *errbuf, size_t errbuf_len)
	__must_check;

/**
 * profile_load - read a whole recording, join deferred user stacks to their kernel samples by
 * cookie, symbolize every frame, and aggregate samples by distinct (pid, comm, stack); memory
 * grows with distinct stacks, not with samples.
 * A recording that is damaged after its header still loads: everything up to the last intact
 * record is kept, and profile_read_error() says where and why reading stopped.
 * Missing ELF files are warned about once each (pr_warn) and their frames stay unresolved.
 * @errbuf/@errbuf_len: optional; on failure, one line saying what went wrong.
 * @out: the profile; free with profile_free().
 * Return: 0 (also when the file is damaged after its header: see profile_read_error());
 * errors of recfile_reader_open() (-ENOENT, -EACCES, -EBADMSG bad magic, -ENOTSUP newer
 * version); -EINVAL NULL @path or @out, or a bad filter (see profile_filter_check(), whose
 * line goes to @errbuf); -ENOMEM. Fields of @opts beyond @opts->size take their defaults.
 */
int profile_load(const char *path, const struct profile_options *opts, struct profile **out,
		 char *errbuf, size_t errbuf_len) __must_check;

/**
 * profile_load_fd - as profile_load() from an fd positioned at the file header (not closed);
 * @name is used in messages only (NULL: "fd N").
 */
int profile_load_fd(int fd, const char *name, const struct profile_options *opts,
		    struct profile **out, char *errbuf, size_t errbuf_len) __must_check;

/** profile_free - free @p (NULL is fine). */
void profile_free(struct profile *p);

/**
 * profile_read_error - why reading stopped before the end of the file ("offset 4242: CRC
 * mismatch in a SAMPLE record (size 96)"), or NULL when the whole file was intact. Owned by @p.
 */
const char *profile_read_error(const struct profile *p);

/**
 * profile_meta - the last value of META @key, or NULL. Owned by @p.
 * For repeated keys (`add`) use profile_meta_at().
 */
const char *profile_meta(const struct profile *p, const char *key);

/**
 * profile_meta_at - the @idx-th META record (in file order): 0 and the key and value through @key and @value (owned by @p),
 * or -ENOENT past the last one.
 */
int profile_meta_at(const struct profile *p, size_t idx, const char **key, const char **value)
	__must_check;

/**
 * profile_counter - the value of COUNTER @name: 0 and *@value, or -ENOENT.
 */
int profile_counter(const struct profile *p, const char *name, uint64_t *value) __must_check;

/**
 * struct profile_window - the workload's window, from the recording's EVENT records: the first
 * workload start and the first workload end after it (docs/recording-format.md).
 * @start_ns: ns since the run started. @has_end: the workload end was recorded: @end_ns and
 * the command's @exit_status; else the window runs to the end of the recording.
 * @has_sampling_start/@sampling_start_ns: sampling started late (record --from), at that time.
 */
struct profile_window {
	uint64_t start_ns;
	int has_end;
	uint64_t end_ns;
	int32_t exit_status;
	int has_sampling_start;
	uint64_t sampling_start_ns;
};

/**
 * profile_workload_window - the workload's window of @p (filled in by profile_load()).
 * Return: 0 and *@out; -ENOENT the recording has no workload start (an image whose init writes
 * no events, or a recording made before EVENT records).
 */
int profile_workload_window(const struct profile *p, struct profile_window *out) __must_check;

#define PROFILE_MAX_WINDOWS 128 /* workload windows kept per recording (record --repeat: 100) */

/**
 * profile_workload_window_count - how many workload windows @p holds (record --repeat N: N;
 * the first PROFILE_MAX_WINDOWS are kept): each workload start opens one, the first workload end
 * after it closes it. 0 without a workload start.
 */
size_t profile_workload_window_count(const struct profile *p);

/**
 * profile_workload_window_at - workload window @idx (0-based, in time order) of @p. A window
 * whose end never came (another start came first, or the recording stopped) has no @has_end.
 * The sampling start fields are the recording's. Return: 0 and *@out; -ENOENT no such window.
 */
int profile_workload_window_at(const struct profile *p, size_t idx, struct profile_window *out)
	__must_check;

/**
 * struct profile_stats - what loading found.
 * @records: intact records read. @samples: SAMPLE records (with filters, those kept: so are
 * all the per-sample counts). @kernel_samples/@user_samples: by CPL. @kthread_samples: of
 * kernel threads. @deferred: samples whose user part was deferred.
 * @joined: deferred samples that found their USER_STACK. @lost_user: samples shown with a
 * `[user stack lost: ...]` frame. @orphan_user_stacks: USER_STACK records no sample claimed.
 * @period_total: sum of sample periods. @stacks: distinct (pid, comm, stack) entries.
 * @frames: distinct frames. @unresolved: distinct frames with no symbol.
 * @has_end/@end_reason/@exit_status: the END record, if any.
 * Files behind the mappings (docs/symbolization.md), one count per distinct mapped file:
 * @files_disk/@files_rootfs/@files_symfs/@files_buildid/@files_debuginfod: found (the runnable
 * file, else its debug file) in a disk image, the root tree or META add, --symfs, a build-id
 * directory, debuginfod; @files_not_found: neither; @files_debug: with a separate debug file;
 * @files_build_id_mismatch: candidates refused because their build-id differs from the
 * guest's; @debuginfod_queries: requests made to debuginfod. @truncated: samples whose
 * callchain shows `[truncated at N frames]` (the walk's depth bound, or max_stack).
 * @mapping_bad_records: MAPPING records out of their snapshot's sequence (ignored).
 */
#define PROFILE_UNWIND_STOPS 7 /* profile_stats.dwarf_stop[] entries */

struct profile_stats {
	uint64_t records;
	uint64_t samples;
	uint64_t kernel_samples;
	uint64_t user_samples;
	uint64_t kthread_samples;
	uint64_t deferred;
	uint64_t joined;
	uint64_t lost_user;
	uint64_t orphan_user_stacks;
	uint64_t mappings;          /* MAPPING records */
	uint64_t mapping_snapshots; /* ... that started a process's snapshot (index 0) */
	uint64_t period_total;
	uint64_t stacks;
	uint64_t frames;
	uint64_t unresolved;
	int has_end;
	uint32_t end_reason;
	int32_t exit_status;
	uint64_t files_disk;
	uint64_t files_rootfs;
	uint64_t files_symfs;
	uint64_t files_buildid;
	uint64_t files_debuginfod;
	uint64_t files_not_found;
	uint64_t files_debug;
	uint64_t files_build_id_mismatch;
	uint64_t debuginfod_queries;
	uint64_t truncated;
	uint64_t mapping_bad_records;
	/* USER_REGS (--call-graph): chains unwound from CFI, by why they ended (index: end, depth,
	 * no module, outside the stack copy, no CFI, bad registers, other error), how many equal
	 * the frame-pointer chain recorded beside them, how many kept the fp chain because CFI
	 * stopped early where the fp chain agreed and went further; fp mode's leaf frames checked
	 * against their CFI, mended (the direct caller inserted), or not checkable; USER_REGS
	 * records that completed no record. */
	uint64_t dwarf_unwinds;
	uint64_t dwarf_stop[PROFILE_UNWIND_STOPS];
	uint64_t dwarf_fp_agree;
	uint64_t dwarf_fp_extended;
	uint64_t leaf_checked;
	uint64_t leaf_fixed;
	uint64_t leaf_unchecked;
	uint64_t user_regs_orphans;
	uint64_t eager_compared;    /* --callchain-mode both, DWARF: deferred chains compared */
	uint64_t eager_equal;       /* ... equal to the eager chain of the same kernel entry */
	uint64_t eager_no_stack;    /* ... not compared: one side copied no stack */
	/* Sample filters (profile_options.filter_*): every count above is of the kept samples */
	uint64_t filtered_out;      /* samples the filters dropped */
};

/** profile_get_stats - copy the load statistics of @p into @out. */
void profile_get_stats(const struct profile *p, struct profile_stats *out);

/* ---------------------------------------------------------------- outputs (report.c, folded.c, flamegraph.c) */

/**
 * profile_write_fn - an output sink: write all @len bytes of @buf.
 * Return: 0, or a negative errno that stops the export and is returned by it.
 */
typedef int (*profile_write_fn)(void *ctx, const void *buf, size_t len);

/* Where an export goes: @write(@ctx, ...) is called with chunks of up to 64 KiB. */
struct profile_sink {
	profile_write_fn write;
	void *ctx;
};

/**
 * profile_sink_fd - a sink that writes to @fd (write(2), retried on EINTR and short writes;
 * the fd is not owned). Return: the sink, by value.
 */
struct profile_sink profile_sink_fd(int fd);

/**
 * profile_sort_check - validate a sort-key list for profile_report(): a comma list of
 * `comm`, `pid`, `dso`, `sym` (each at most once, no empty key).
 * @bad_key/@bad_key_len: optional; on -EINVAL, the offending key (NUL-terminated, truncated to
 *   fit) so the CLI can name it.
 * Return: 0; -EINVAL unknown, repeated or empty key, or NULL @sort.
 */
int profile_sort_check(const char *sort, char *bad_key, size_t bad_key_len) __must_check;

/* Output formats of profile_report(). */
enum profile_report_format {
	PROFILE_REPORT_STDIO = 0, /* the text table */
	PROFILE_REPORT_JSON = 1,  /* one JSON object (docs/export-formats.md, "report --format json") */
};

/**
 * struct profile_report_options - @size: sizeof(struct profile_report_options).
 * @sort: sort keys (see profile_sort_check); NULL: "comm,dso,sym" (as perf).
 * @max_rows: print at most this many rows (0: all). @min_percent: hide rows below this
 * overhead in percent (0: show all); with @children, the children share is compared.
 * @children: nonzero: add a Children column (share of the samples whose stack contains a frame
 *   with the row's keys, each sample counted once per row), show rows that have only children
 *   samples, and sort by children first (as `perf report --children`).
 * @format: enum profile_report_format.
 */
struct profile_report_options {
	size_t size;
	const char *sort;
	unsigned int max_rows;
	double min_percent;
	int children;
	int format;
};

/**
 * profile_report - write a `perf report --stdio`-like table of self overhead: header lines
 * (`# ...`) with the run's facts (samples, lost user stacks, counter and rate, kernel, vCPUs,
 * end reason, every counter as `name=value` over `# Counters:` lines of at most 100 columns),
 * then one row per distinct value of the sort keys over the innermost frame of each sample:
 * Overhead (share of the total period, or of samples when periods are 0; 2 decimals), Samples,
 * then one column per key: Command, Pid, Shared Object, Symbol (`[k] name` kernel, `[.] name`
 * user). Rows are sorted by overhead desc, samples desc, then the key columns ascending (byte
 * order), so output is deterministic. With @opts->children a Children column comes before
 * Overhead (renamed Self), and rows sort by children first.
 * With PROFILE_REPORT_JSON: {"facts": [...], "meta": {...}, "counters": {"name": value, ...},
 * "weight": "period"|"samples", "total_samples", "total_weight", "sort": [...], "rows":
 * [{"samples", "weight", "self", "children", "comm", "pid", "dso", "sym", "kernel"}...]} with
 * percentages as numbers (keys not sorted on are absent; "children" only with
 * @opts->children).
 * Return: 0; -EINVAL bad @opts->sort (see profile_sort_check), unknown format or NULL
 * arguments; -ENOMEM; the sink's error.
 */
int profile_report(const struct profile *p, const struct profile_report_options *opts,
		   const struct profile_sink *sink) __must_check;

/**
 * profile_folded - write folded stacks (the input format of flamegraph.pl): one line per
 * distinct (comm, stack), `comm;outer;...;inner COUNT\n`, root first; user frames outer to
 * inner, then kernel frames outer to inner, kernel frames suffixed `_[k]`; COUNT is samples.
 * `;` in names becomes `:`, and control characters become `?`. Lines are sorted by COUNT desc,
 * then by the line text ascending (byte order).
 * Return: 0; -EINVAL NULL arguments; -ENOMEM; the sink's error.
 */
int profile_folded(const struct profile *p, const struct profile_sink *sink) __must_check;

/**
 * struct profile_flamegraph_options - @size: sizeof(struct profile_flamegraph_options).
 * @title: NULL: "hvprof: " + META `image` or `cmdline`. @width: image width in pixels
 * (0: 1200). @min_width: frames narrower than this many pixels are left out (0: 0.1).
 */
struct profile_flamegraph_options {
	size_t size;
	const char *title;
	unsigned int width;
	double min_width;
};

/**
 * profile_flamegraph - write a self-contained interactive SVG flamegraph (no external file or
 * script): root at the bottom, one box per frame of each distinct stack (children ordered by
 * name), user and kernel frames in two colour families; a subtitle with the run's facts;
 * embedded JavaScript: hovering shows name, samples and percent; a click zooms into a frame;
 * "Reset Zoom"; "Search" takes a regular expression (or a substring when it is not a valid
 * one), highlights the matches and shows the matched share. Every name is XML-escaped.
 * Return: 0; -EINVAL NULL arguments; -ENOMEM; the sink's error.
 */
int profile_flamegraph(const struct profile *p, const struct profile_flamegraph_options *opts,
		       const struct profile_sink *sink) __must_check;

/* ---------------------------------------------------------------- more exporters */

/**
 * profile_speedscope - write speedscope's JSON file format (schema
 * https://www.speedscope.app/file-format-schema.json): one "sampled" profile per comm (named
 * "COMM (N samples)", largest first) over one shared frame table; each distinct stack is one
 * sample (root first, frames: "name" and "file" = the DSO; kernel frames' names end in
 * " [k]") with its weight; unit "nanoseconds" and weights the period when the recording has
 * periods, else "none" and weights the sample counts. Names are JSON-escaped (invalid UTF-8
 * becomes U+FFFD).
 * Return: 0; -EINVAL NULL arguments; -ENOMEM; the sink's error.
 */
int profile_speedscope(const struct profile *p, const struct profile_sink *sink) __must_check;

/**
 * profile_pprof - write a gzip-compressed pprof profile.proto (perftools.profiles.Profile,
 * encoded with protobuf-c): sample types samples/count and cpu/nanoseconds (the period; the
 * counter's unit for a hardware event: events/count); one Sample per distinct location stack
 * (leaf first) with labels "thread" (pid, numeric), "process" (tgid, numeric) and "comm"; one
 * Location per distinct (frame, address), one Function per distinct (name, DSO), one Mapping
 * per DSO with its file and GNU build-id where the ELF file was found; period_type and period
 * from META period_ns; comments with the run's facts.
 * Return: 0; -EINVAL NULL arguments; -ENOMEM; -EIO zlib failure; the sink's error.
 */
int profile_pprof(const struct profile *p, const struct profile_sink *sink) __must_check;

/**
 * profile_perf_script - write text in the default format of `perf script` for a sampled
 * callchain event: per sample, "COMM PID/TID [CPU] SECS.USECS: PERIOD EVENT:" then one line
 * per frame, leaf first, "\t ADDR SYM+0xOFF (DSO)" (SYM without offset when unknown,
 * "[unknown]" when unresolved), then a blank line; samples in time order. COMM is the comm
 * with control bytes as '?' and a leading space dropped ("[unknown]" when empty); CPU is the
 * vCPU; EVENT is META counter (or "cpu-clock"). Lost user stacks appear as a frame at address 0
 * named "[user stack lost: ...]".
 * Return: 0; -EINVAL NULL arguments; -ENODATA @p was loaded without
 * profile_options.keep_samples; -ENOMEM; the sink's error.
 */
int profile_perf_script(const struct profile *p, const struct profile_sink *sink) __must_check;

/* The comparison of profiles (diff) is declared in <hvprof/profile_diff.h>, included below. */

#ifdef __cplusplus
}
#endif

#include <hvprof/profile_diff.h>

#endif /* HVPROF_PROFILE_H */
