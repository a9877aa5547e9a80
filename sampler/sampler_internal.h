/* SPDX-License-Identifier: MIT */
/* Private definitions of the sampler: its per-vCPU state, the marks table, the traps. */
#ifndef HVPROF_SAMPLER_INTERNAL_H
#define HVPROF_SAMPLER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <hvprof/guestinfo.h>
#include <hvprof/sampler.h>
#include <hvprof/vmm.h>

#include "period.h"

struct sampler;

/* ---------------------------------------------------------------- stage clock */

/*
 * The clock of the sampler's stage counters (sample_ns_*, trap_ns_total, user_stack_copy_ns),
 * read several times per sample: the TSC (RDTSC, ~10 ns) where the host kernel keeps its own time
 * with it (clocksource "tsc": invariant, synchronized across CPUs), its rate measured against
 * CLOCK_MONOTONIC when the sampler is made (stageclock.c); else vmm_now_ns() (~25 ns through the
 * vDSO on the PVM host where it was measured: a tenth of a warm sample's time with seven reads).
 * Times written into records stay vmm_now_ns(): the recording is ordered by that clock.
 */
struct stage_clock {
	bool tsc;      /* ticks are TSC cycles; false: ticks are ns (vmm_now_ns) */
	uint64_t mult; /* with tsc: ns = ticks * mult >> 32 */
};

/* Fill @c: TSC where the host keeps time with it (after a 1 ms calibration), else ns. */
void stage_clock_init(struct stage_clock *c);

static inline uint64_t stage_tsc(void)
{
#if defined(__x86_64__)
	return __builtin_ia32_rdtsc();
#else
	return 0;
#endif
}

/* Now, in @c's ticks. */
static inline uint64_t stage_now(const struct stage_clock *c)
{
	return c->tsc ? stage_tsc() : vmm_now_ns();
}

/* @ticks of @c in ns. */
static inline uint64_t stage_ns(const struct stage_clock *c, uint64_t ticks)
{
	return c->tsc ? (uint64_t)(((unsigned __int128)ticks * c->mult) >> 32) : ticks;
}

/* ---------------------------------------------------------------- per vCPU */

/* An identity as note_identity (identity.c) saw it: thread, mm, the mm's map count. */
struct ident_last {
	bool valid;
	uint64_t gen; /* sampler.ident_gen after it was noted */
	uint64_t task, mm;
	int32_t pid, tgid, map_count;
	uint8_t kthread;
	char comm[HVP_COMM_LEN];
};

/**
 * struct svcpu - what the sampler keeps for one vCPU, used only on that vCPU's thread (and at
 * the end, after the threads stopped).
 * @v: the VMM's vCPU (NULL in unit tests that drive the logic without a VM).
 */
/* The 64-bit user code segment selector (__USER_CS, arch/x86/include/asm/segment.h). */
#define SAMPLER_USER_CS_64 0x33

struct svcpu {
	struct sampler *s;
	struct vmm_vcpu *v;
	unsigned int index;
	int perf_fd;
	bool counting;          /* perf_fd is enabled (start.c: only this vCPU's thread enables it) */
	unsigned int bench_phase_applied; /* record --bench-phases: the phase the counter follows */
	unsigned int hz_applied; /* the rate perf_fd samples at (attach windows may change it) */
	atomic_uint seen_epoch; /* the last s->epoch this vCPU's thread applied (attach.c) */
	atomic_bool running;    /* between vcpu_start and vcpu_stop */
	uint64_t percpu_base;   /* per-CPU base (kernel GS) seen on this vCPU, 0 until known */
	bool kaslr_decided;     /* the KASLR check is no longer pending (kwatch.c) */
	uint64_t kaslr_poll_ns; /* last MSR_LSTAR look from an I/O exit (kwatch.c) */
	uint64_t kaslr_confirm_ns; /* ... from a sample, when hvprof placed the kernel (0: none) */
	struct sampler_counters c;
	struct hvp_sample sample;     /* scratch for building a sample */
	struct hvp_user_stack ustack; /* scratch for a USER_STACK record */
	struct pgwalk_cache tcache;   /* this vCPU's translations, invalidated at each exit but
				       * the direct map's (kept: sample.c, learn_direct_map) */
	struct gi_task_cache tasks;   /* identities of the tasks this vCPU sampled or saw return
				       * to user (sample.c, trap.c) */
	/* the identity this vCPU's previous sample noted, when that left nothing to do for the
	 * same one again while s->ident_gen stays @gen (identity.c: note_identity) */
	struct ident_last ident_last;
	struct gi_mapping *maps;      /* scratch for an address space: SAMPLER_MAPS_MAX entries */
	/* USER_REGS scratch: one for the sample being built, one for USER_STACK records (a sample
	 * may resolve marks, and write their USER_STACKs, before it is itself written); each with
	 * a stack buffer of s->ustack_size bytes */
	struct hvp_user_regs sample_regs, ustack_regs;
	uint8_t *sample_stack, *ustack_stack;
	struct hvp_bytes sample_segs[HVP_USER_STACK_SEGS], ustack_segs[HVP_USER_STACK_SEGS];
	bool sample_has_regs;         /* sample_regs belongs to the sample being built */
	/* a hit of the exit-work loop's breakpoint is being resolved (trap_loop_resolve): a
	 * thread reaches it only with its TIF_NOTIFY_RESUME set, so one without a mark tells
	 * what set the flag (flag_ledger_unmarked); a sysretq/iretq hit tells nothing of it */
	bool in_loop_hit;
	/* task->stack (a KVA) of the task sample_kstack_task as read and checked this sample
	 * (gi_task_stack_seed; 0: not read): the pt_regs read uses it for that task only */
	uint64_t sample_kstack_kva, sample_kstack_task;
	/* the last mm whose mm->pgd this vCPU read, and that root table's GPA: a sample whose CR3
	 * is that root needs no read (user_part_of_kernel_sample) */
	uint64_t root_mm, root_gpa;
	/* the mm of the sample being built and its map_count as note_identity read it (-1: not
	 * read this sample); the pages its user walks found executable (gi_exec_cache_use) */
	uint64_t sample_mm;
	int32_t sample_map_count;
	struct gi_exec_cache xcache;
	/* the vCPU's registers of the kernel sample being built (callchains(); NULL outside it):
	 * a sample in the entry window finds its user registers from them (gi_entry_user_regs) */
	const struct kvm_regs *sample_vcpu_regs;
	const struct gi_regs *sample_gi_regs;
	/* where this vCPU's last breakpoint hit on a thread's way to user mode was stepped over
	 * (the loop's clear, a sysretq/iretq to user mode or the branch to that iretq; 0: none,
	 * or the last was an iretq back to kernel mode): a sample still there with RF set, or
	 * between that branch's target and the iretq, is in the exit tail (sample.c,
	 * on_stepped_site) */
	uint64_t stepped_pc;

	/* ---- the sample's period (period.c, counter.c: counter_period) */
	struct period_base period_base; /* the counter's count at the last sample or enable */
	void *ring;                     /* the counter's ring buffer (counter.c), or NULL */
	size_t ring_len;
	uint64_t ring_page, ring_data_size; /* its data area: at ring_page, ring_data_size bytes */
};

#define SAMPLER_MAPS_MAX 1024 /* mappings of one process recorded at most (more: counted error) */

/* ---------------------------------------------------------------- marks (marks.c) */

/*
 * A mark: a guest thread sampled in the kernel whose user stack is still to be walked, keyed by
 * the thread (task GVA + pid), never by vCPU: the thread may return to user on another vCPU.
 * All samples of one stay in the kernel share its cookie.
 */
#define MARKS_MAX 512
/*
 * Marks that outlived a return to user before the first breakpoint hit, after which deferred
 * marks give way to walks at the sample: the host does not deliver the guest-debug breakpoints
 * (seen with QEMU 7.2's emulated SVM, whose VMRUN loads DR7 without arming it). With working
 * breakpoints the first hit comes at the first flagged or trapped return, long before this.
 */
#define BP_DEAD_UNSEEN 32

struct mark {
	uint64_t task;
	int32_t pid;
	uint32_t vcpu;
	uint64_t cookie;
	struct gi_paging pg; /* translation of the thread's process at the sample */
	uint64_t mm;         /* task->mm at the first sample: the address space of the walks */
	struct gi_user_regs entry; /* user registers saved at kernel entry (pt_regs), the fallback */
	bool entry_known;  /* false: marked in the kernel entry code, before pt_regs was complete */
	bool window;       /* @entry came from the entry window (mark_req.window): its return
			    * checks them (marks_window_returns, marks_window_other_regs) */
	bool exiting;      /* the thread's mm is gone (exit): it never returns to user */
	uint64_t t_ns;     /* host time of the first sample */
	bool trap;         /* resolved by the sysretq/iretq trap (counted in marks.n_trap) */
	bool flag;         /* TIF_NOTIFY_RESUME set: the exit-work loop resolves it (n_flag) */
	/* the walk from the entry registers, made when the mark was taken if the address space
	 * may go before the return (@walked: execve, exit, an exiting thread, an entry not known
	 * to be another system call; marks.c: walk_at_mark): the answer when the return shows
	 * other registers (execve replaced the address space, a signal frame was set up, or the
	 * entry ended unseen), and for a thread that exits. Not @walked: made later, from @entry,
	 * only where the stack is still the entry's (a signal frame that saved @entry) */
	bool walked;
	int16_t stay_class; /* stay_class() of the entry, -1 none (struct stay_stat) */
	bool explore;      /* made by an exploration turn of stay_walk_now (xmade) */
	bool joined;       /* a later sample joined it */
	uint8_t entry_stop;
	uint16_t n_entry;
	uint64_t entry_ips[HVP_MAX_CALLCHAIN];
};

/**
 * struct marks - the marks table, shared by every vCPU under @lock.
 * @pending: == n_used, readable without the lock. @on_first/@on_last: called under @lock when
 * the first mark appears / the last one goes (arm and disarm the traps); may be NULL.
 */
struct marks {
	pthread_mutex_t lock;
	struct mark slot[MARKS_MAX];
	/* slot[i] is in use when key[i].used, for thread key[i].task/pid (== slot[i]'s): the
	 * lookups and the search for a free slot read these, 4 to a cache line, not the
	 * ~1.3 KiB slots (a thread blocked in the kernel keeps its mark: many may be pending) */
	struct mark_key {
		uint64_t task;
		int32_t pid;
		bool used;
	} key[MARKS_MAX];
	unsigned int n_used;
	unsigned int n_slots;   /* every slot at or above this index is free: lookups and the
				 * timeout scan stop there (a slot is ~1.3 KiB: 512 of them are
				 * 170 pages to touch per sample) */
	unsigned int scan_next; /* the timeout scan's next slot: 0 up to n_slots, a cycle */
	atomic_uint pending;
	/* No mark can time out at or before host time @due_ns: a lower bound of the oldest t_ns
	 * plus timeout_ns, lowered by each mark made, raised when a cycle of the scan ends (to
	 * @cycle_min_ns, the oldest t_ns that cycle saw or made, plus timeout_ns). marks_expire
	 * reads it without the lock and scans only past it. */
	_Atomic uint64_t due_ns;
	uint64_t cycle_min_ns;
	uint64_t next_cookie;
	uint64_t timeout_ns;
	void (*on_first)(struct svcpu *sv);
	void (*on_last)(struct svcpu *sv);
	/* guest-visible marks (traps.flag): n_trap/n_flag marks of each kind pending;
	 * on_flag_first arms the exit-work loop's breakpoint, on_flag_idle disarms it (at a hit
	 * that found no mark with none pending: marks_loop_idle), so that it stays armed across
	 * marks that follow each other (on_first/on_last follow n_trap instead of n_used);
	 * set_flag writes TIF_NOTIFY_RESUME (0, or -errno: trapped), *@was_set: it was set
	 * already */
	bool flag_marks;
	unsigned int n_trap, n_flag;
	void (*on_flag_first)(struct svcpu *sv);
	void (*on_flag_idle)(struct svcpu *sv);
	int (*set_flag)(struct svcpu *sv, uint64_t task, const struct gi_paging *pg,
			bool *was_set);
};

/*
 * The tasks the flag strategy flagged (flagscan.c), read back at each detach and at the end of
 * the run: is TIF_NOTIFY_RESUME still set in their thread_info.flags? One entry per slot,
 * slot by the task's address: the latest task flagged there. The GPAs of its fields are found
 * once, when it enters (task_struct is one slab object in the direct map: they stay valid
 * while it lives; the pid read back tells whether it still does, but for a pid reused in the
 * same object). @returned: a trap saw the task return to user mode since its last flag.
 */
#define FLAG_LEDGER_SLOTS 256
struct flag_ledger {
	struct flag_ledger_entry {
		uint64_t task;          /* GVA; 0: free */
		int32_t pid;
		bool returned;
		uint64_t ti_flags_gpa;  /* task->thread_info.flags */
		uint64_t pid_gpa;       /* task->pid */
		uint64_t task_flags_gpa; /* task->flags (PF_EXITING) */
		uint64_t task_works_gpa; /* task->task_works; 0: not known */
		uint64_t rseq_gpa;      /* task->rseq; 0: not known (no CONFIG_RSEQ) */
		uint64_t nvcsw_gpa;     /* task->nvcsw, nivcsw after it; 0: not known */
		/* nvcsw + nivcsw and task->rseq when @returned was set (a kernel with rseq);
		 * @switches_known false: not read */
		uint64_t switches, rseq_at_return;
		bool switches_known;
	} e[FLAG_LEDGER_SLOTS];
};

/* The flag_scan counters, in the order of their fields in struct sampler_counters. */
enum flag_scan_kind {
	FLAG_SCANS, FLAG_SCAN_TASKS, FLAG_SCAN_CLEAR, FLAG_SCAN_SET_UNRETURNED,
	FLAG_SCAN_SET_KERNEL, FLAG_SCAN_SET_OTHER, FLAG_SCAN_GONE, FLAG_SCAN_N
};

/* The ledger's slot for @task (a hash of its address). */
struct flag_ledger_entry *flag_ledger_slot(struct flag_ledger *l, uint64_t task);

/* Note @task (@pid, through @pg) as flagged now by @sv; a no-op without a ledger or a field's
 * GPA. @was_set: the flag as the write found it; a task whose return was seen since its last
 * flag counts it in flags_seen_clear, flags_seen_kernel or flags_seen_set (a mark flagged again
 * in its stay has seen no return). Under the marks lock. */
void flag_ledger_note(struct svcpu *sv, uint64_t task, int32_t pid, const struct gi_paging *pg,
		      bool was_set);

/* A mark of @task (@pid) was resolved at its return to user mode (a trap, or a sample past the
 * thread's last read of its flags): the kernel has cleared, or is clearing, its flag. On a
 * kernel with rseq its context switches so far are read too (two 8-byte reads): one after this
 * is when rseq sets the flag again. Under the marks lock. */
void flag_ledger_returned(struct sampler *s, uint64_t task, int32_t pid);

/* A trap hit of @task (@pid) found no mark while marks were pending: count whether hvprof had
 * flagged it (no_mark_flagged_late: its mark ended with no return seen) or not
 * (no_mark_unflagged), and for a task flagged and returned since, whether the kernel shows a
 * reason to have set the flag again (no_mark_kernel: task work, rseq) or not (no_mark_other).
 * A no-op without a ledger. Under the marks lock. */
void flag_ledger_unmarked(struct svcpu *sv, uint64_t task, int32_t pid);

/* Read the ledger's tasks back from guest RAM, add what was found to the flag_scan counters
 * (s->flag_scan, enum flag_scan_kind) and empty the ledger. Takes the marks lock: call with no
 * mark being made (the end of the run; a detach, once sampling is off). */
void flag_ledger_scan(struct sampler *s);

void marks_init(struct marks *m, uint64_t timeout_ns);
void marks_destroy(struct marks *m);

/* What marks_take is told of the sample. */
struct mark_req {
	uint64_t task;
	int32_t pid;
	const struct gi_paging *pg;
	const struct gi_user_regs *entry; /* the user registers of the kernel entry */
	bool entry_known; /* false: in the entry window, pt_regs may be stale */
	bool window;      /* @entry was found by a sample in the entry window
			   * (gi_entry_user_regs: the entry's own frame, or pt_regs where the
			   * entry came from kernel mode) */
	bool exiting;     /* the thread's mm is gone */
	uint64_t mm;      /* task->mm at the sample */
	bool execve;      /* @mm is one execve is building: @entry is the old program's
			   * (note_identity), never to be walked in @mm */
	bool exit_tail;   /* the sample is where the thread may have read its flags for the last
			   * time (gi_chain_in_exit_tail), or on a return breakpoint being
			   * stepped over (on_stepped_site): a flag would act too late, and the
			   * registers it returns with are @entry; the caller resolves the mark at
			   * once (marks_resolve_at_return), neither flag nor trap is set (in
			   * deferred mode a thread with no mark yet is walked into the sample
			   * instead, with no mark: user_part_of_kernel_sample) */
	uint64_t now_ns;  /* host time of the sample (vmm_now_ns); 0: read it */
	bool explore;     /* a new mark is an exploration turn (stay_walk_now) */
};

/*
 * A kernel-mode sample of a user thread: join its mark or create one (the entry walk is made
 * now when the entry is known and its stack may be gone before the return: marks.c,
 * walk_at_mark). Return: the cookie (> 0), or 0 when the table is full (the
 * caller walks eagerly), sampling is off (a late sample of a detached window: counted in
 * marks_refused_off; the sample is not recorded), or @req->execve and no mark of this stay
 * was made before the switch (counted in user_execve: the caller records the user part as
 * lost, HVP_WALK_EXECVE). A mark made in the entry window (no walk) under another mm than
 * @req->mm ends here as HVP_WALK_EXECVE (dropped_no_regs); this sample makes a new one.
 */
uint64_t marks_take(struct svcpu *sv, const struct mark_req *req);
/* Has the thread @task/@pid a pending mark? Marks of a thread are made by its own samples, on
 * the vCPU it runs on: while that vCPU is stopped, the answer cannot change under the caller
 * (another vCPU's expiry or flush can only end one). No lock when no mark is pending at all. */
bool marks_has(struct svcpu *sv, uint64_t task, int32_t pid);
/* Should a kernel sample of a stay entered with the user registers @e (pt_regs: orig_ax) walk
 * at once instead of marking (struct stay_stat)? false with *@explore set: mark, as the
 * class's exploration turn (mark_req.explore). Counts the decision. */
bool stay_walk_now(struct svcpu *sv, const struct gi_user_regs *e, bool *explore);
/* The thread @task/@pid is about to return to user with @ur in the address space @mm (its
 * task->mm, page tables @pg): resolve its mark, if any. A mark with no entry registers whose mm
 * is not @mm (execve switched it) ends as HVP_WALK_EXECVE, not walked. The flag ledger notes
 * the return (flag_ledger_returned). */
void marks_resolve_at_return(struct svcpu *sv, uint64_t task, int32_t pid, uint64_t mm,
			     const struct gi_paging *pg, const struct gi_user_regs *ur);
/* Resolve marks older than the timeout (at most a few per call) from their entry registers. */
void marks_expire(struct svcpu *sv, uint64_t now_ns);
/* A hit of the exit-work loop found no mark: disarm the loop if no flagged mark is pending. */
void marks_loop_idle(struct svcpu *sv);
/* At the end of the run: resolve every pending mark. */
void marks_flush(struct svcpu *sv);
/* Drop every pending mark without resolving it (a detach); on_last is not called. Return: how
 * many. */
unsigned int marks_drop_all(struct marks *m);

/* ---------------------------------------------------------------- return-to-user traps (trap.c) */

/**
 * struct traps - breakpoints on the return-to-user instructions while any mark is pending.
 * @available: sites and breakpoint slots exist (deferred callchains possible).
 * @ready: the sites' slid addresses are set on the slots. @verified: their bytes were checked.
 */
struct traps {
	bool available;
	atomic_bool ready;
	atomic_bool placing; /* a vCPU is in traps_place: the others leave it the work */
	bool verified;
	int slot_sysret, slot_iret;
	struct gi_return_sites sites;
	/* guest-visible marks: the exit-work loops (slid, once placed; one, or each exit path's
	 * inlined copy) ew[i] on slot_loop[i], i < n_loops */
	bool flag;
	const char *flag_refused; /* why not, when the flag strategy was looked for (static) */
	unsigned int n_loops;
	int slot_loop[GI_EW_COPIES];
	struct gi_exit_work ew[GI_EW_COPIES];
	bool loop_verified[GI_EW_COPIES];
	uint64_t star;        /* MSR_STAR, read at the first sysretq completion */
};

/**
 * flag_refusal - why guest-visible marks cannot take the exit-work loops @ew[0..@n) that
 * gi_exit_work_link gave (its return @err) on a host that is PVM (@pvm: RF ignored, so each
 * clear must be one hvprof can complete) with @free_slots breakpoint slots left (one per loop):
 * a static reason for the strategy line, or NULL when they can.
 */
const char *flag_refusal(int err, const struct gi_exit_work *ew, size_t n, bool pvm,
			 unsigned int free_slots);

/* The breakpoint slots of the traps (sysretq, iretq, and the exit-work loop with flag marks). */
static inline unsigned int traps_mask(const struct sampler *s);

/* Set the slid sites on the breakpoint slots once the slide is known (kwatch.c calls it). */
void traps_place(struct sampler *s);
/* The VMM's debug hook. */
int trap_debug_hook(void *ctx, struct vmm_vcpu *v, int slot, uint64_t pc, bool repeat);
/*
 * The exit-work loop's hit of a flagged thread on @sv while marks are pending: the thread
 * running there (its identity through @sv's task cache) returns to user with the registers in
 * its pt_regs: resolve its mark with them, or count traps_no_mark when it has none or cannot be
 * read. @regs, @sregs: the vCPU's, stopped at the loop's clear; @pg: this exit's paging
 * (sampler_exit_paging). Bounded: an identity check, one pt_regs read and one user walk.
 */
void trap_loop_resolve(struct svcpu *sv, const struct kvm_regs *regs,
		       const struct kvm_sregs *sregs, const struct gi_paging *pg);

/* Where the interrupt-return breakpoint goes: @r's branch to the iretq taken on returns to user
 * mode only (iret_user) where the image has one, else the iretq (slid GVAs). */
uint64_t trap_iret_site(const struct gi_return_sites *r);

/* Whether guest memory (through @pg) holds sysretq (48 0f 07) at the traps' sysretq site and,
 * at the interrupt-return site, the image's branch to the iretq (its iret_user_len bytes, 2 to
 * 6) where it has one, else iretq (48 cf): checked once, at the first hit, before a hit is
 * trusted. */
bool trap_sites_verified(const struct sampler *s, const struct gi_paging *pg);

/* Where the CPU goes from @r's iret_user branch with @rflags: its target when its condition
 * holds (jmp; jne: ZF clear), else past it (SDM vol. 2A, Jcc and JMP). Pure: unit-tested. */
uint64_t trap_branch_next(const struct gi_return_sites *r, uint64_t rflags);

/* What to do at a trap hit, decided from the registers (pure: unit-tested). */
enum trap_action {
	TRAP_RESOLVE,    /* a return to user: resolve the thread's mark with the user registers */
	TRAP_TO_KERNEL,  /* an iretq back to kernel mode */
	TRAP_REPEAT,     /* the same hit again after RF: only get past it */
};

/**
 * trap_decide - the user registers about to be restored at a sysretq (RCX, RSP, RBP) or an
 * iretq (@frame: RIP, CS, RFLAGS, RSP, SS at RSP; RBP), and what to do.
 */
enum trap_action trap_decide(bool is_sysret, bool repeat, const struct kvm_regs *regs,
			     const uint64_t frame[5], struct gi_user_regs *ur);

/* ---------------------------------------------------------------- the sampler */

/*
 * Which stays are worth a mark (marks.c: stay_walk_now). A mark costs the return's exit (a loop
 * or trap hit) plus one walk, and serves every sample of its stay; walking each sample from
 * pt_regs at once costs one walk per sample and no exit. So a mark pays when the stays it is
 * made for see, on average, at least 1 + (exit cost / walk cost) samples: struct sampler's
 * stay_pays, from the host (STAY_PAYS_PVM, STAY_PAYS_HW). Per class of kernel entry (the
 * system call number pt_regs.orig_ax < STAY_STATS_N; STAY_CLASS_IRQ for interrupts and
 * exceptions, orig_ax -1; a guest's syscall(-1) lands there too, and 32-bit numbers share the
 * table: they only skew the estimate):
 * - @made, @joins: marks made at a stay's first sample, and every later sample that joined one;
 *   samples per stay = (made + joins) / made. With STAY_MIN_MARKS or more marks averaging fewer
 *   than stay_pays, a sample of that class walks pt_regs into itself (as an eager one) instead
 *   of marking, except every STAY_EXPLORE-th sample, which marks as an exploration turn.
 * - @xmade, @xjoined: those exploration marks, and how many a later sample joined. An
 *   exploration mark falls on a sample, not a stay: a stay of n samples is picked n times as
 *   often, and its mark is joined unless it was the stay's last sample (1 in n): so the
 *   fraction never joined is exactly 1 / mean samples per stay, and the mean is
 *   xmade / (xmade - xjoined). Once STAY_MIN_MARKS exploration marks show stay_pays or more,
 *   every figure restarts and the class marks again (and learns again).
 * Halved at STAY_DECAY marks, STAY_XDECAY exploration marks (old behaviour fades: the
 * exploration figures of a kind walked at once for a long time would otherwise hide for
 * thousands of samples that its stays grew). Counted under the marks lock; stay_walk_now
 * reads and restarts them without it: a decay or restart seen half done, or a count lost to
 * it, only moves a decision by a sample or two.
 */
#define STAY_STATS_N 512 /* system call numbers followed (x86-64 has < 512) */
#define STAY_CLASS_IRQ STAY_STATS_N /* entered by an interrupt or exception (orig_ax -1) */
#define STAY_MIN_MARKS 32
#define STAY_EXPLORE 32
#define STAY_DECAY 256
#define STAY_XDECAY 64
/* Samples per stay at which a mark pays: PVM, where a breakpoint hit with its exit costs 20-60 us
 * of guest time (../shared/pvm-facts.md; bench/results/overhead_phases_*.json) against ~2-3 us
 * for a walk (with the DWARF stack copy); VMX/SVM, where an exit to the VMM costs a few us (not
 * measurable here: the value keeps marks for any stay that often sees a second sample). */
#define STAY_PAYS_PVM 16
#define STAY_PAYS_HW 3
struct stay_stat {
	atomic_uint made, joins, xmade, xjoined, inline_walks;
};
/* The stay_stat class of a kernel entry whose registers are @e (-1: none, always marked). */
int stay_class(const struct gi_user_regs *e);

struct sampler {
	struct sampler_config cfg;
	struct gi *gi;             /* borrowed */
	struct vmm *vm;            /* borrowed; NULL in unit tests */
	const struct gmem *mem;
	unsigned int maxphyaddr;
	struct vmm_placement placed;
	unsigned int n_vcpus;
	struct svcpu *vcpus;
	enum sampler_counter_kind counter;
	enum sampler_callchain_mode callchain;
	uint32_t ustack_size;      /* stack bytes each user walk copies (64 in fp mode) */
	struct stage_clock clock;  /* of the stage counters */
	char strategy[768];
	struct marks marks;
	struct traps traps;
	atomic_int pti;            /* enum gi_pti */
	atomic_bool pf_entry_set;  /* the PVM fix-up has its #PF entry */
	atomic_uint_fast64_t first_user_ns;
	/* when sampling started (start.c): 0 not yet, else its ns since the run's start + 1; set
	 * once, by the thread that starts it */
	atomic_uint_fast64_t sampling_start;
	atomic_uint_fast64_t events, events_dropped; /* EVENT records (any thread: not per vCPU) */
	atomic_uint guest_events_seen;
	/* between the guest's WORKLOAD_START and WORKLOAD_END events (start.c): the samples taken
	 * meanwhile are counted apart (samples_in_workload) */
	atomic_bool in_workload;
	/* `record --bench-phases` (start.c): the guest's last phase, enum bench_phase */
	atomic_uint bench_phase;
	struct stay_stat stay[STAY_STATS_N + 1]; /* per stay_class (marks.c) */
	bool stay_adaptive; /* walk short stays' samples at once (not cfg.mark_every_stay) */
	unsigned int stay_pays; /* samples per stay at which a mark pays (STAY_PAYS_*) */
	/* attach windows (attach.c, SAMPLER_START_ATTACH): bumped after every change of
	 * sampling_start, acknowledged by each vCPU thread in seen_epoch once applied */
	atomic_uint epoch;
	atomic_bool window_open;
	atomic_uint hz;            /* the sampling rate of the window (cfg.sample_hz otherwise) */
	atomic_uint_fast64_t marks_dropped_detach;
	struct flag_ledger *ledger; /* flag strategy: the tasks flagged (NULL: none kept) */
	atomic_uint_fast64_t flag_scan[FLAG_SCAN_N]; /* enum flag_scan_kind (flagscan.c) */
	/* a detach whose wait timed out: disarm the return-to-user breakpoints again (and drop
	 * the marks) once every running vCPU acknowledged, or at the next attach */
	atomic_bool retry_disarm;
	/* the open window's first counter failure (-errno; 0: none): in attach mode a vCPU whose
	 * counter cannot take the window's rate fails the window, never the VM */
	atomic_int window_err;
	/* identity caches (thread/process records are emitted once per change) */
	pthread_mutex_t ident_lock;
	struct ident_cache *ident;
	/* bumped (under ident_lock) at every change of the identity caches: a vCPU's ident_last
	 * holds only while it is unchanged (identity.c) */
	atomic_uint_fast64_t ident_gen;
	/* whether breakpoints are delivered (marks.c, note_unseen_return): a return to user
	 * caught by a trap or the loop with marks pending (trap.c, resolve); marks that
	 * outlived a return no breakpoint saw; and, once BP_DEAD_UNSEEN of those came before
	 * any catch, walks at the sample from then on */
	atomic_bool bp_fired;
	atomic_uint returns_unseen;
	atomic_bool bp_dead;
};

/*
 * sampler_new - the sampler's state without a VM (sampler_create adds the VM, the counter, the
 * traps and the hooks; unit tests drive the logic on this alone): marks, identity caches, and
 * @n_vcpus per-vCPU states reading guest memory through @mem. Return: 0 and *@out; -EINVAL;
 * -ENOMEM.
 */
int sampler_new(const struct sampler_config *cfg, struct gi *gi, const struct gmem *mem,
		unsigned int maxphyaddr, unsigned int n_vcpus, struct sampler **out) __must_check;

/* The breakpoint slots of the exit-work loops (0 without the flag strategy). */
static inline unsigned int traps_loop_mask(const struct sampler *s)
{
	unsigned int m = 0;

	for (unsigned int i = 0; s->traps.flag && i < s->traps.n_loops && i < GI_EW_COPIES; i++)
		m |= 1u << s->traps.slot_loop[i];
	return m;
}

static inline unsigned int traps_mask(const struct sampler *s)
{
	return 1u << s->traps.slot_sysret | 1u << s->traps.slot_iret | traps_loop_mask(s);
}

/* The sampler's state of the VMM's vCPU @v (NULL: not one of ours). */
static inline struct svcpu *svcpu_of(struct sampler *s, struct vmm_vcpu *v)
{
	unsigned int i = vmm_vcpu_index(v);

	/* SAFETY: the VMM's vCPU indexes are < vmm_vcpu_count() == n_vcpus. */
	return i < s->n_vcpus ? &s->vcpus[i] : NULL;
}

/*
 * The translation state of a vCPU, from its segment/control registers. Under page-table
 * isolation each half of the address space goes through its half of the PGD pair: kernel
 * addresses through the kernel's, user addresses through the user's (where user code is
 * executable), whichever of the two the vCPU is on.
 */
struct gi_paging sampler_paging(const struct sampler *s, const struct kvm_sregs *sregs);

/*
 * sampler_paging() for the exit being handled on @sv's thread, through @sv's translation cache:
 * the vCPU is stopped for the whole exit, so a translation walked once answers again for the
 * rest of it (other vCPUs' page-table changes within these microseconds are not seen); the
 * cache is invalidated first, keeping only the direct map's translations (sample.c:
 * learn_direct_map), which never change. The returned paging is for this exit only: it must
 * not be stored (a mark copies it with the cache cleared).
 */
struct gi_paging sampler_exit_paging(struct svcpu *sv, const struct kvm_sregs *sregs);

/* The end of the run with an error (no-op without a VM: unit tests). */
void sampler_fail(struct sampler *s, const char *what);

/*
 * Send one USER_STACK record to the sink, with its USER_REGS @r (NULL: none; its time, cookie
 * and pid are set from @u here), counting a failure (and ending the run: the recording is bad).
 */
void sampler_emit_user_stack(struct svcpu *sv, const struct hvp_user_stack *u,
			     struct hvp_user_regs *r);

/*
 * ustack.c: walk @ur's user stack and emit a USER_STACK record for @cookie, with its USER_REGS.
 * @task, @mm: the thread (task GVA) and the address space @pg walks (0: not known), for the
 * copy's bound (ustack_end).
 */
void emit_user_stack(struct svcpu *sv, uint64_t cookie, int32_t pid, const struct gi_paging *pg,
		     const struct gi_user_regs *ur, uint64_t task, uint64_t mm);
/* Bytes of stack a copy keeps above the process's initial RSP (mm->start_stack: argc, then
 * argv): no frame lies there, but an unwinder may look at the outermost frame's CFA. */
#define SAMPLER_USTACK_END_SLACK 64u
/*
 * ustack.c: where a user-stack copy of @task in @mm may end: mm->start_stack (the main thread's
 * frames end below it; gi_task_user_stack_end, remembered in the vCPU's task cache), 0 for no
 * bound (not known, no mm). For walks of threads not in execve.
 */
uint64_t ustack_end(struct svcpu *sv, const struct gi_paging *pg, uint64_t task, uint64_t mm);
/*
 * ustack.c: the USER_REGS of a user walk from @ur into @r (@buf: its stack buffer of
 * s->ustack_size bytes; @segs: HVP_USER_STACK_SEGS pieces, or NULL): the registers in DWARF
 * order and, when @copy, the stack from ur->sp through @pg (counted: copies, bytes, short,
 * bounded, refused, ns): read in place into @segs where guest memory maps (gi_map_user_stack;
 * then the pieces are valid while the vCPU is stopped, and the record must be written before it
 * runs again), else copied into @buf; without @copy, no stack (a walk saved earlier whose stack
 * is gone). The copy is s->ustack_size bytes, or less where @stack_end (ustack_end; 0: none) is
 * closer: up to @stack_end + SAMPLER_USTACK_END_SLACK. time_ns, cookie, pid and follows are the
 * caller's to set.
 */
void user_regs_take(struct svcpu *sv, struct hvp_user_regs *r, uint8_t *buf,
		    struct hvp_bytes *segs, const struct gi_paging *pg,
		    const struct gi_user_regs *ur, bool copy, uint64_t stack_end);
/* The USER_REGS of the sample being built (sv->sample_regs), from @ur of @task in @mm:
 * user_regs_take, bounded by ustack_end. */
void sample_regs_take(struct svcpu *sv, const struct gi_paging *pg, const struct gi_user_regs *ur,
		      uint64_t task, uint64_t mm);
/*
 * ustack.c: the frame-pointer walk of @ur (gi_unwind_user) into @ips (HVP_MAX_CALLCHAIN), its
 * frames read from the stack @r already holds (user_regs_take of the same @ur, this exit) where
 * they lie in it, the rest from the guest; the stop counted (count_walk_stop). @sample_space:
 * the walk is in the address space of the sample being built, whose map count this exit read
 * (sv->sample_mm, sv->sample_map_count): its pages found executable before are not walked
 * again (sv->xcache). Return: the stop; *@n frames.
 */
enum hvp_walk_stop user_walk(struct svcpu *sv, const struct gi_paging *pg,
			     const struct gi_user_regs *ur, const struct hvp_user_regs *r,
			     uint64_t *ips, unsigned int *n, bool sample_space);
/* The user registers as the vCPU holds them (@ip, @sp: where user mode resumes). */
void user_regs_from_vcpu(const struct kvm_regs *regs, uint64_t ip, uint64_t sp,
			 struct gi_user_regs *ur);
void count_walk_stop(struct svcpu *sv, enum hvp_walk_stop why, bool user);

/* ns since the run started (the VMM's clock; 0-based without a VM: unit tests). */
static inline uint64_t sampler_start_ns(const struct sampler *s)
{
	return s->vm ? vmm_start_ns(s->vm) : 0;
}

/* sample.c: an overflow on @sv's vCPU becomes a sample. Return: 0, or 1 to stop the vCPU. */
int sample_take(struct svcpu *sv);
/*
 * The sample of registers @regs/@sregs (a vCPU's, as KVM returns them; unit tests and the
 * sample benchmark pass their own), weighing @period (counter units: ns of vCPU CPU time), the
 * overflow seen at host time @t0 (ns, vmm_now_ns), @k0 in the stage clock's ticks (stage_now:
 * the stage counters run from there). Everything sample_take does after reading the vCPU:
 * identity, callchains, marks, records to the sink, counters. Return as sample_take.
 */
int sample_from_regs(struct svcpu *sv, const struct kvm_regs *regs,
		     const struct kvm_sregs *sregs, uint64_t period, uint64_t t0, uint64_t k0);
/* The user part of a kernel-mode sample of a user thread (deferred: a mark; eager: a walk). */
void user_part_of_kernel_sample(struct svcpu *sv, struct hvp_sample *smp, uint64_t task,
				const struct gi_paging *pg, const struct gi_user_regs *entry,
				bool exiting, uint64_t mm, bool execve);

/* identity.c */
int ident_cache_create(struct sampler *s) __must_check;
void ident_cache_destroy(struct sampler *s);
/* Forget every identity seen (a new attach window: its recording gets its own records). */
void ident_cache_reset(struct sampler *s);
/*
 * Emit THREAD (and PROCESS) records when this identity was not seen before. Return: true when
 * @mm is one an execve is still building (the task runs on it, its program is not loaded yet:
 * no code range), so that the user registers in the task's pt_regs are the old program's and
 * belong to an address space the task no longer has, or when @mm's code range cannot be read
 * (unknown: not walked either); false otherwise.
 */
bool note_identity(struct svcpu *sv, const struct hvp_thread *t, uint64_t mm,
		   const struct gi_paging *pg);

/* counter.c: open (disabled) at the vCPU's start; enable on its own thread (start.c) */
int counter_probe(struct sampler *s) __must_check;
int counter_open_vcpu(struct sampler *s, struct svcpu *sv) __must_check;
int counter_enable_vcpu(struct svcpu *sv) __must_check;
/* Disable this vCPU's counter (its own thread; a detach). Return: 0; -errno of the ioctl. */
int counter_disable_vcpu(struct svcpu *sv) __must_check;
/* Make the (disabled) counter sample at @hz per second (its own thread). Return: 0; -errno. */
int counter_set_rate(struct svcpu *sv, unsigned int hz) __must_check;
void counter_close_vcpu(struct svcpu *sv);

/* start.c: when sampling starts (record --from) */
/* `record --bench-phases`: what the guest's HVP_EVENT_BENCH_PHASE value asks for */
enum bench_phase {
	BENCH_PHASE_OFF = 0,  /* counters disabled: no overflow, no exit */
	BENCH_PHASE_BARE = 1, /* each overflow counted (bench_bare_exits), nothing else done */
	BENCH_PHASE_ON = 2,   /* sampling as configured */
};

#define SAMPLER_MAX_EVENTS 4096 /* EVENT records of guest events kept (the guest writes them) */
/*
 * Make this vCPU's counter follow sampling_start on its own thread: enabled (at the window's
 * rate) once sampling started, disabled once it stopped (a detach); then acknowledge the epoch.
 * Return: 0; -errno of the counter's ioctl.
 */
int sampler_sync_vcpu(struct svcpu *sv) __must_check;
/* attach.c: running vCPUs that have not acknowledged the current epoch (any thread). */
unsigned int sampler_vcpus_behind(struct sampler *s);
/* attach.c: the last straggler of a timed-out detach acknowledged (@self: its thread, NULL:
 * the control thread): drop the marks and disarm the breakpoints again if still owed. */
void sampler_retry_disarm(struct sampler *s, struct svcpu *self);
/* sampler_sync_vcpu, ending the run on a failure (an attach sampler: failing the window). */
void sampler_catch_up(struct svcpu *sv);
/* Start sampling now (first caller wins): from @self's thread (NULL: the monitor's). */
void sampler_begin(struct sampler *s, struct svcpu *self, uint64_t time_ns);
int sampler_hook_guest_event(void *ctx, struct vmm_vcpu *v, uint32_t kind, uint32_t value,
			     uint64_t time_ns);
void sampler_hook_kick(void *ctx, struct vmm_vcpu *v);
void sampler_hook_tick(void *ctx, uint64_t time_ns);

/* sample.c: a sample taken while the guest's workload runs (s->in_workload), which took @ns
 * host ns: samples_in_workload, sample_ns_in_workload and its workload_sample_le_* bucket;
 * @user (a user-mode sample): samples_in_workload_user and sample_ns_in_workload_user too. */
void count_in_workload(struct svcpu *sv, uint64_t ns, bool user);

/* kwatch.c: the KASLR slide and PTI. kwatch_setup: before the vCPUs start. kwatch_kernel: from a
 * kernel-mode sample until the slide is decided (when hvprof placed the kernel, a confirmation:
 * at most every 10 ms). kwatch_io: the same from I/O exits (rate
 * limited). kwatch_user: a user-mode state (PTI). */
void kwatch_setup(struct sampler *s);
void kwatch_kernel(struct svcpu *sv, const struct kvm_sregs *sregs);
void kwatch_io(struct svcpu *sv);
void kwatch_user(struct svcpu *sv, const struct kvm_sregs *sregs);

#endif /* HVPROF_SAMPLER_INTERNAL_H */
