/* SPDX-License-Identifier: MIT */
/*
 * sampler: the profiler riding on the VMM's exits (../shared/DESIGN.md, mechanism 1-4). A
 * per-vCPU counter whose overflows become samples (registers, guest thread, callchains), marks
 * and cookies for the user part of kernel samples, return-to-user traps on the VMM's breakpoint
 * slots, and watching the guest for its KASLR slide and page-table isolation. What it knows of
 * Linux it asks guestinfo; what it knows of the machine it asks the VMM.
 */
#ifndef HVPROF_SAMPLER_H
#define HVPROF_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>
#include <hvprof/sample.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gi;
struct vmm;
struct sampler;

/**
 * struct sampler_sink - where samples and identity records go. Every callback may be called
 * from several vCPU threads at once: the sink serialises. A callback returning non-zero
 * (-errno) stops the run with HVP_END_ERROR after the current exit. All pointers are valid only
 * during the call.
 * @sample/@user_stack: @r, when not NULL, is the USER_REGS of that user walk (registers and
 *   stack copy): the sink must store it right after @s / @u, with no other record between
 *   (recfile_write_sample_regs / recfile_write_user_stack_regs).
 */
struct sampler_sink {
	int (*sample)(void *ctx, const struct hvp_sample *s, const struct hvp_user_regs *r);
	int (*thread)(void *ctx, const struct hvp_thread *t);
	int (*process)(void *ctx, const struct hvp_process *p);
	int (*user_stack)(void *ctx, const struct hvp_user_stack *u, const struct hvp_user_regs *r);
	int (*mapping)(void *ctx, const struct hvp_mapping *m); /* optional */
	int (*event)(void *ctx, const struct hvp_event *e);     /* optional; also from the VMM's
								   monitor thread */
	void *ctx;
};

/* When sampling starts (`record --from`). */
enum sampler_start {
	SAMPLER_START_BOOT = 0,  /* at the first instruction */
	SAMPLER_START_EVENT = 1, /* at the guest event start_event (enum hvp_event_kind 1..255) */
	SAMPLER_START_AFTER = 2, /* start_after_ns after the run started (20 ms resolution) */
	SAMPLER_START_ATTACH = 3, /* only between sampler_attach() and sampler_detach() (`run
				   * --control`: docs/control-protocol.md) */
};

/* Sampling counter actually used (probed at start-up). */
enum sampler_counter_kind {
	SAMPLER_COUNTER_NONE = 0,
	SAMPLER_COUNTER_CYCLES = 1,    /* PERF_TYPE_HARDWARE cycles, exclude_host=1 */
	SAMPLER_COUNTER_CPU_CLOCK = 2, /* PERF_COUNT_SW_CPU_CLOCK of the vCPU thread */
};

/* How the user part of a kernel-mode sample is taken. */
enum sampler_callchain_mode {
	SAMPLER_CALLCHAIN_DEFERRED = 0, /* mark the thread, walk its user stack at its return */
	SAMPLER_CALLCHAIN_EAGER = 1,    /* walk at sample time from the user registers in pt_regs */
	SAMPLER_CALLCHAIN_BOTH = 2,     /* deferred, and the eager walk kept in the sample as a
					 * cross-check (docs/recording-format.md, SAMPLE) */
};

/*
 * How a marked thread's return to user is caught (deferred callchains; docs/guest-interface.md
 * "What hvprof writes into the guest").
 */
enum sampler_marks {
	SAMPLER_MARKS_AUTO = 0, /* flag where the kernel allows it (probed), else trap */
	SAMPLER_MARKS_FLAG = 1, /* guest-visible: TIF_NOTIFY_RESUME on the marked task and a
				 * breakpoint on the exit-work loop only flagged threads enter */
	SAMPLER_MARKS_TRAP = 2, /* breakpoints on sysretq/iretq, hit by every return to user
				 * while any thread is marked */
};

/* What each user walk records besides its frame-pointer chain (USER_REGS records). */
enum sampler_call_graph {
	SAMPLER_CALL_GRAPH_FP = 0,    /* registers and HVP_USER_STACK_FP_WINDOW bytes of stack */
	SAMPLER_CALL_GRAPH_DWARF = 1, /* registers and up to stack_size bytes of stack */
};

/**
 * struct sampler_config - how to sample. Zero-initialise, then set fields.
 * @sample_hz: samples per second per vCPU; 0: no counter, no samples, only watching the guest
 *   (KASLR slide, the PVM fix-up's #PF entry), which is what `hvprof run` needs.
 * @sink: receives the records (required when @sample_hz > 0).
 * @force_counter: SAMPLER_COUNTER_NONE to probe (cycles, else cpu-clock), or one to insist on.
 * @callchain_mode: enum sampler_callchain_mode. Deferred falls back to eager where the host
 *   cannot trap the guest's return to user (no breakpoint slot, no return sites found).
 * @marks: enum sampler_marks (AUTO: flag when the kernel's exit-work loop and the layout of its
 *   thread-info flags are found, else trap; FLAG falls back to trap, with a warning, as well).
 * @mark_timeout_ns: a mark not resolved at the return to user within this long is resolved from
 *   the registers saved at kernel entry (0: 100 ms).
 * @call_graph: enum sampler_call_graph. @stack_size: bytes of user stack each walk copies in
 *   SAMPLER_CALL_GRAPH_DWARF mode (8..HVP_USER_STACK_MAX, a multiple of 8; 0: 8192).
 * @bare_exits: benchmarking only: each overflow is counted as a sample and nothing else is done
 *   (no registers, no record): the floor hvprof's cost is compared to.
 * @bench_phases: benchmarking only (`record --bench-phases`): the guest's HVP_EVENT_BENCH_PHASE
 *   events switch sampling between off (value 0: counters disabled, no exit), bare exits (1:
 *   each overflow counted in bench_bare_exits, nothing else done) and on (2), so that one boot
 *   holds all three (bench/overhead.py --phases). Needs @start SAMPLER_START_EVENT with
 *   @start_event HVP_EVENT_BENCH_PHASE, and not @bare_exits.
 * @mark_every_stay: deferred mode marks every kernel sample's stay; without it, a sample of a
 *   kind of entry whose stays see too few samples for a mark to pay is walked from pt_regs at
 *   once (the return would walk the same registers, and its exit costs more than the walks it
 *   saves: sampler_internal.h, struct stay_stat).
 * @start/@start_event/@start_after_ns: when sampling starts (enum sampler_start). Until then no
 *   vCPU's counter is enabled (no overflow, no exit for it); the guest is still watched (KASLR
 *   slide, PVM fix-up) and its events recorded.
 */
struct sampler_config {
	unsigned int sample_hz;
	const struct sampler_sink *sink;
	enum sampler_counter_kind force_counter;
	enum sampler_callchain_mode callchain_mode;
	enum sampler_marks marks;
	uint64_t mark_timeout_ns;
	enum sampler_call_graph call_graph;
	uint32_t stack_size;
	bool bare_exits;
	bool bench_phases;
	bool mark_every_stay;
	enum sampler_start start;
	uint32_t start_event;
	uint64_t start_after_ns;
};

/*
 * The sampler's counters, one list for the struct fields and their names (as recordings and
 * `report` show them; README "Counters").
 */
#define SAMPLER_COUNTER_LIST(X)                                                              \
	X(samples) X(samples_user) X(samples_kernel) X(samples_no_task) X(samples_sink_errors)   \
	X(samples_not_long_mode) /* overflows before the vCPU reached long mode */             \
	X(samples_exiting)       /* kernel samples of a user thread whose mm is gone (exit) */ \
	X(kernel_walk_fault) X(kernel_walk_bad_fp) X(kernel_walk_depth)                         \
	X(user_walk_fault) X(user_walk_bad_fp) X(user_walk_depth)                               \
	X(task_invalid) X(threads) X(processes)                                                 \
	X(marks)                /* kernel entries marked (one cookie each) */                   \
	X(marks_reused)         /* samples that joined an existing mark's cookie */             \
	X(resolved_at_return)   /* user stack walked at the return to user */                   \
	X(resolved_from_ptregs) /* timed out or at stop: walked from pt_regs of entry */        \
	X(resolved_stale)       /* returned with other user registers: walked from entry */     \
	X(resolved_exiting)     /* the thread exits: the walk taken at its first sample */      \
	X(marks_walked_at_mark) /* marks whose entry walk was made when taken (execve, exit...) */ \
	X(marks_walked_late)    /* stale or signalled marks walked from their entry registers at \
				 * a signal frame that saved them */                             \
	X(marks_walk_lost)      /* stale or exiting marks without a walk: the stack went first \
				 * (in resolved_stale / resolved_exiting; user part lost) */     \
	X(marks_execve_kept)    /* samples after execve switched the mm: the mark's walk kept */ \
	X(user_execve)          /* user parts lost: pt_regs of a program execve replaced */     \
	X(dropped_table_full)   /* no free mark: walked eagerly instead */                      \
	X(dropped_exited)       /* the task was gone when the mark was resolved */              \
	X(dropped_no_regs)      /* a mark whose entry registers could not be read (or, marked \
				 * in the entry window, whose task execve moved to a new mm) */  \
	X(traps_hit)            /* return-to-user breakpoint hits */                            \
	X(traps_no_mark)        /* hits whose thread had no mark */                             \
	X(traps_to_kernel)      /* iretq hits returning to kernel mode (0 where the branch to \
				 * the iretq that only returns to user take holds the trap) */ \
	X(marks_flagged)        /* TIF_NOTIFY_RESUME set on a marked task (flag marks) */        \
	X(marks_trapped)        /* flag marks left to the sysretq/iretq trap (the flag could not \
				 * be set) */                                                   \
	X(marks_resolved_in_tail) /* flag marks resolved at a sample in the exit tail, where    \
				 * the thread may have read its flags for the last time: from \
				 * pt_regs, as its return would (in resolved_at_return/_stale) */ \
	X(marks_window_returns) /* marks whose entry registers came from the entry window    \
				 * (gi_entry_user_regs), resolved at their return in the same mm */ \
	X(marks_window_other_regs) /* ... whose thread returned with another ip or sp (a     \
				 * signal frame, or wrong entry-window registers): ground truth; \
				 * rt_sigreturn's marks, which return elsewhere by design, and    \
				 * entries from kernel mode (pt_regs) are in neither count */     \
	X(execve_past_switch)   /* kernel samples whose chain was past execve's point of no   \
				 * return (gi_chain_past_exec_switch): no user walk of pt_regs */ \
	X(user_root_switched)   /* kernel samples whose CR3 was not their task's mm (inside   \
				 * switch_mm): user walks went through mm->pgd instead */      \
	X(tail_stepped_site)    /* kernel samples, not in the exit tail already, on a return-  \
				 * to-user breakpoint being stepped over (RIP where the vCPU's \
				 * last hit resolved a return, RFLAGS.RF set) or in an        \
				 * interrupt taken at the loop's clear: a flag or trap set    \
				 * now would not act; resolved as in the exit tail */          \
	X(tail_walked_inline)   /* deferred kernel samples in the exit tail with no mark of     \
				 * their stay: walked into the sample itself, no mark made */    \
	X(stay_walked_inline)   /* deferred kernel samples of a kind of entry whose stays see  \
				 * too few samples for a mark to pay: walked into the sample */ \
	X(stay_explore_marks)   /* ... the marks still made for such kinds, to see their stays \
				 * (every STAY_EXPLORE-th sample) */                            \
	X(stay_back_to_marks)   /* kinds whose exploration marks showed long stays again: marked \
				 * again from then on */                                        \
	X(loop_hits)            /* exit-work loop breakpoint hits (in traps_hit too) */          \
	X(loop_hits_path2)      /* ... on the second loop, where each exit path holds its own  \
				 * copy (Debian's 6.12: interrupts and exceptions) */           \
	X(loop_hits_idle)       /* ... with no mark pending: the loop is disarmed (in          \
				 * traps_no_mark) */                                            \
	X(loop_hits_unmarked)   /* ... of a thread without a mark while others were pending:   \
				 * the kernel's own TIF_NOTIFY_RESUME (in traps_no_mark) */     \
	X(no_mark_flagged_late) /* trap hits without a mark while others were pending, of a  \
				 * task hvprof flagged whose mark ended with no return seen  \
				 * (expired, flushed): its flag acting late (flag strategy) */ \
	X(no_mark_unflagged)    /* ... of a task not in the flag ledger: not flagged by hvprof \
				 * since the last read-back (or its slot taken since) */      \
	X(no_mark_kernel)       /* ... of a task flagged and returned since, with the kernel's \
				 * own reason: task work queued (a close()'s fput), rseq */   \
	X(no_mark_other)        /* ... flagged and returned since, for no reason the guest  \
				 * shows */                                                    \
	X(traps_in_workload)    /* traps_hit between the guest's WORKLOAD_START and END */      \
	X(traps_no_mark_in_workload) /* ... and traps_no_mark */                               \
	X(returns_unseen)       /* marks that outlived a return to user no breakpoint saw (a  \
				 * later kernel entry of the same thread and mm was sampled) */ \
	X(marks_regs_rewritten) /* marks of a stay whose user registers the kernel rewrote    \
				 * (a signal's delivery, rt_sigreturn, a restart): ended with \
				 * their entry's walk at the next sample (not returns_unseen) */ \
	X(bp_never_fired)       /* 1: BP_DEAD_UNSEEN returns went unseen before any breakpoint \
				 * hit, and later kernel samples were walked at once (eager) */ \
	X(flag_set_failed)      /* the task's flags could not be written: trapped instead */     \
	X(trap_ns_total)        /* host ns spent in trap handling */                            \
	X(user_regs_unreadable) /* kernel samples of user threads without pt_regs */            \
	X(user_regs_entry_found) /* kernel samples in the entry window (pt_regs maybe stale) \
				 * whose user registers were told there (the entry's own frame; \
				 * pt_regs where it came from kernel mode): walked or marked */ \
	X(user_regs_entry_unsaved) /* ... not to be told there (an IST stack, CR3 in RSP, \
				 * the first pushes of SYSCALL's): user part lost */             \
	X(sample_ns_total)      /* host ns spent building samples (regs to sink) */             \
	X(sample_ns_regs) X(sample_ns_identity) X(sample_ns_kernel_unwind) X(sample_ns_user)   \
	X(sample_ns_write)                                                                      \
	X(tcache_hits)          /* GVA->GPA translations answered by the per-exit cache */      \
	X(tcache_misses)        /* ... and walked (or answered by tcache_memo_hits) */          \
	X(mapping_snapshots)    /* address spaces recorded (a process first seen, or changed) */ \
	X(mappings)             /* MAPPING records written */                                   \
	X(mapping_build_ids)    /* ... with the file's build-id read from guest memory */      \
	X(mapping_errors)       /* address spaces that could not be read (counted, skipped) */ \
	X(user_regs)            /* USER_REGS records written (one per user walk) */             \
	X(user_stack_copies)    /* user stacks copied for them */                               \
	X(user_stack_bytes)     /* ... bytes copied */                                          \
	X(user_stack_short)     /* ... shorter than asked: the stack ended (unmapped page) */   \
	X(user_stack_bounded)   /* ... ended at the process's initial RSP (mm->start_stack) plus \
				 * SAMPLER_USTACK_END_SLACK: the main thread's frames end there */ \
	X(user_stack_refused)   /* ... not copied: RSP not an aligned canonical user address */ \
	X(user_stack_not_copied) /* walks saved at the mark (exit, exec): registers, no stack */ \
	X(user_stack_copy_ns)   /* host ns spent copying user stacks */                         \
	X(events)               /* EVENT records written (guest events, sampling start) */      \
	X(events_dropped)       /* guest events past SAMPLER_MAX_EVENTS, or the sink failed */ \
	X(marks_dropped_detach) /* marks pending at a detach: dropped, no USER_STACK record */ \
	X(marks_refused_off)    /* kernel samples of a late vCPU after sampling stopped: no mark */ \
	X(flags_seen_clear)     /* a new mark's flag on a task whose return hvprof saw since \
				 * its last flag (flag strategy): TIF_NOTIFY_RESUME found clear, \
				 * as the kernel left it */                                     \
	X(flags_seen_kernel)    /* ... found set, with task work queued, or rseq's (a registered \
				 * thread switched out since the return): the kernel's own */  \
	X(flags_seen_set)       /* ... found set for neither (another of the kernel's reasons, \
				 * or one hvprof left) */                                        \
	X(flag_scans)           /* read-backs of the flagged tasks' TIF_NOTIFY_RESUME (flag \
				 * strategy: at each detach and at the end of the run) */      \
	X(flag_scan_tasks)      /* ... tasks read back (the latest flagged per slot, 256 slots) */ \
	X(flag_scan_clear)      /* ... with the flag clear: the guest kernel cleared it */      \
	X(flag_scan_set_unreturned) /* ... set, no return seen since the flag (still in the \
				     * kernel, blocked: it clears the flag at its return) */    \
	X(flag_scan_set_kernel) /* ... set after a return seen, with task work queued or rseq's \
				 * switch since the return (the kernel's own flag) */          \
	X(flag_scan_set_other)  /* ... set after a return seen for neither: left by hvprof, or \
				 * read between a loop hit and its clear (0, or 1 at most) */   \
	X(flag_scan_gone)       /* ... exited or exiting (PF_EXITING, or another pid there now), \
				 * or unreadable */                                              \
	X(bench_bare_exits)     /* overflows in a bare-exit phase of --bench-phases (not samples) */ \
	X(overflows_merged)     /* overflows merged into a sample (period ~ k x nominal: k-1) */ \
	X(period_fallbacks)     /* samples given the nominal period (count unread or absurd) */ \
	X(period_total)         /* the samples' periods added up (counter units: with cpu-clock, \
				 * ns of vCPU time sampled) */                                  \
	X(ident_cache_hits)     /* identities from the vCPU's task cache (pid, comm, mm re-read) */ \
	X(ident_cache_misses)   /* ... read in full (task new to the cache, or changed) */      \
	X(tcache_kept_hits)     /* translations kept from an earlier sample (the direct map) */ \
	X(tcache_memo_hits)     /* tcache_misses answered by a walk remembered from an earlier \
				 * exit whose page-table entries, read again at once, held */   \
	X(tcache_memo_stale)    /* ... whose entries had changed: walked anew */               \
	X(tcache_hva_reads)     /* guest reads served in place through a translation's kept HVA \
				 * (struct pgwalk_cache), not through struct gmem's read */      \
	X(user_exec_cache_hits) /* return addresses of user walks in a page found executable at \
				 * an earlier exit, same mm and map count (struct gi_exec_cache) */ \
	X(period_reads)         /* samples whose count was read(2), not in the ring buffer */ \
	X(kstack_pages_seeded)  /* kernel stack page translations of a known task put back from \
				 * the task cache (not walked when the sample reads them) */     \
	X(kaslr_looks)          /* MSR_LSTAR looks (KVM_GET_MSRS) while the KASLR check was \
				 * pending: every kernel sample, or every 10 ms when hvprof placed \
				 * the kernel, and I/O exits at most every ms */                 \
	X(samples_in_workload)  /* samples taken while the guest's workload ran (between its \
				 * WORKLOAD_START and WORKLOAD_END events) */                    \
	X(sample_ns_in_workload) /* ... their host ns (as sample_ns_total): the profiled \
				  * program's cost, boot and shutdown left out */                \
	X(samples_in_workload_user) /* ... of them, the samples of user mode (CPL3; a \
				     * SYSCALL caught at CPL3 is a kernel sample) */           \
	X(sample_ns_in_workload_user) /* ... their host ns: the kernel samples' are the \
				       * rest (a kernel sample also walks the kernel stack \
				       * and reads pt_regs: about twice a user one's) */      \
	/* ... and how many took (previous bound, N] ns (not cumulative: a histogram whose \
	 * median stands where a preempted vCPU thread's tail moves the mean) */           \
	X(workload_sample_le_250ns) X(workload_sample_le_500ns) X(workload_sample_le_750ns) \
	X(workload_sample_le_1000ns) X(workload_sample_le_1250ns) X(workload_sample_le_1500ns) \
	X(workload_sample_le_1750ns) X(workload_sample_le_2000ns) X(workload_sample_le_2500ns) \
	X(workload_sample_le_3000ns) X(workload_sample_le_4000ns) X(workload_sample_le_6000ns) \
	X(workload_sample_le_8000ns) X(workload_sample_le_16000ns)                          \
	X(workload_sample_le_32000ns) X(workload_sample_over_32000ns)

/** struct sampler_counters - what the sampler counted, summed over the vCPUs. */
struct sampler_counters {
#define SAMPLER_COUNTER_FIELD(name) uint64_t name;
	SAMPLER_COUNTER_LIST(SAMPLER_COUNTER_FIELD)
#undef SAMPLER_COUNTER_FIELD
};

/* sampler_counter_names[i] names the i-th uint64_t of struct sampler_counters. */
extern const char *const sampler_counter_names[];
#define SAMPLER_N_COUNTERS (sizeof(struct sampler_counters) / sizeof(uint64_t))

/**
 * sampler_create - a sampler for @vm's guest, whose kernel @gi describes, installed on @vm's
 * hooks and breakpoint slots. Probes the counter (cycles, else cpu-clock), the return-to-user
 * sites and the #PF entry for the PVM fix-up, and takes the KASLR placement from the VMM.
 * @gi: borrowed, must outlive the sampler; NULL only with @cfg->sample_hz 0 (nothing to watch).
 * Return: 0 and *@out (free with sampler_destroy after vmm_run); -EINVAL bad configuration;
 * -ENOTSUP no counter can be opened; -ENOMEM.
 */
int sampler_create(const struct sampler_config *cfg, struct gi *gi, struct vmm *vm,
		   struct sampler **out) __must_check;

/** sampler_destroy - free @s (NULL is fine); its hooks must not run any more. */
void sampler_destroy(struct sampler *s);

/** sampler_get_counters - sum of the per-vCPU counters (final after vmm_run). */
void sampler_get_counters(const struct sampler *s, struct sampler_counters *out);

/** sampler_counter_kind - the sampling counter in use. */
enum sampler_counter_kind sampler_counter_kind(const struct sampler *s);

/** sampler_counter_name - "cycles", "cpu-clock" or "none" (static strings). */
const char *sampler_counter_name(enum sampler_counter_kind kind);

/** sampler_callchain_mode_name - "deferred", "eager" or "both": the mode in effect. */
const char *sampler_callchain_mode_name(const struct sampler *s);

/** sampler_strategy - ", user-callchains=..., kernel-callchains=..." (appended to the VMM's). */
const char *sampler_strategy(const struct sampler *s);

/**
 * sampler_sampling_start - when the counters were armed: 0 and *@time_ns (ns since the run
 * started; 0 for SAMPLER_START_BOOT); -ENODATA not (yet): the event never came, or the run ended
 * first; -EINVAL. Any thread.
 */
int sampler_sampling_start(const struct sampler *s, uint64_t *time_ns) __must_check;

/**
 * struct sampler_window - what one attached window samples (SAMPLER_START_ATTACH samplers).
 * @sample_hz: samples per second per vCPU (1..100000). @call_graph/@stack_size: as in struct
 * sampler_config (@stack_size 0: 8192).
 */
struct sampler_window {
	unsigned int sample_hz;
	enum sampler_call_graph call_graph;
	uint32_t stack_size;
};

/**
 * sampler_attach - start a sampling window on a sampler created with SAMPLER_START_ATTACH
 * (counters open and disabled since each vCPU started): the identity caches are emptied (the
 * new recording gets its own THREAD/PROCESS records), @w applied, and every vCPU enables its
 * counter at its next exit (the others are kicked), as for a late start (start.c). The sink
 * must be ready before the call. Not on a vCPU thread; one caller at a time (the control
 * thread). Return: 0; -EINVAL not an attach sampler, or a bad @w; -EBUSY a window is open, or
 * the last detach timed out and a running vCPU has not acknowledged it yet (it is still in a
 * sample; try again); -ENODATA no kernel symbols (nothing to sample with).
 */
int sampler_attach(struct sampler *s, const struct sampler_window *w) __must_check;

/**
 * struct sampler_detach_info - what a detach did.
 * @marks_dropped: pending marks dropped (their samples keep their kernel part; also counted in
 *   marks_dropped_detach). @vcpus_late: vCPUs that had not disabled their counter within the
 *   timeout (0 normally; such a vCPU disables it at its next exit, and its overflows meanwhile
 *   are ignored).
 */
struct sampler_detach_info {
	unsigned int marks_dropped;
	unsigned int vcpus_late;
};

/**
 * sampler_detach - end the window: sampling stops (overflows from now on are ignored), every
 * running vCPU disables its counter on its own thread (kicked; waited for up to @timeout_ns),
 * then the pending marks are dropped and counted and the return-to-user breakpoints disarmed
 * on every vCPU (kicked again: none enters the guest with them armed). After it returns no
 * sampler record is sent to the sink except EVENT records of guest events (the sink drops
 * them); a vCPU that did not answer in time makes no mark (sampling is off), and when it
 * answers the marks are dropped and the breakpoints disarmed again. Same thread rules as sampler_attach. Return: 0 and *@out (may be NULL); -EINVAL;
 * -EALREADY no window is open; -ETIMEDOUT a vCPU did not answer (*@out says how many; the rest
 * was done).
 */
int sampler_detach(struct sampler *s, uint64_t timeout_ns, struct sampler_detach_info *out)
	__must_check;

/**
 * sampler_window_error - the open (or last) attach window's first counter failure: a vCPU's
 * counter could not take the window's rate (PERF_EVENT_IOC_PERIOD) or be enabled. The window
 * cannot be trusted (that vCPU does not sample): its owner ends it; the VM goes on. Reset by
 * sampler_attach. Any thread. Return: 0 none; -errno of the ioctl.
 */
int sampler_window_error(const struct sampler *s);

/** sampler_first_user_ns - ns from the run's start to the first CPL3 sample (0: none seen). */
uint64_t sampler_first_user_ns(const struct sampler *s);

/**
 * sampler_kernel_slide - the guest kernel's KASLR slide in bytes, the one kernel symbols are
 * looked up with (docs/kaslr.md). Return: 0 and *@slide; -ENODATA not known; -EINVAL.
 */
int sampler_kernel_slide(const struct sampler *s, uint64_t *slide) __must_check;

/**
 * struct sampler_kaslr_info - where the guest kernel runs, and how hvprof knows.
 * @placed: the VMM placed the kernel (@placed_slide, bytes); @relocated: it applied the image's
 *   relocation table (@n_relocs entries). @check: enum gi_kaslr_check; @detected_slide valid for
 *   confirmed, found and mismatch. @idt: the guest IDT's #PF gate agrees (1), not (-1), unknown (0).
 * @slide_known/@slide: the slide kernel symbols are looked up with.
 */
struct sampler_kaslr_info {
	bool placed, relocated, slide_known;
	uint64_t placed_slide, detected_slide, slide;
	size_t n_relocs;
	int check;
	int idt;
};

/** sampler_kaslr_info - fill @out (final after vmm_run). Return: 0; -EINVAL. */
int sampler_kaslr_info(const struct sampler *s, struct sampler_kaslr_info *out) __must_check;

/** sampler_pti_name - a phrase for the guest's page-table isolation as found (static string). */
const char *sampler_pti_name(const struct sampler *s);

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_SAMPLER_H */
