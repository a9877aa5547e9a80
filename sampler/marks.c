// SPDX-License-Identifier: MIT
// Marks of deferred user callchains (../shared/DESIGN.md, mechanism 2-4): a table keyed by guest
// thread, shared by all vCPU threads under one mutex. A kernel-mode sample marks its thread and
// gets the mark's cookie; the thread's return to user (trap.c: the exit-work loop for a flagged
// thread, else sysretq/iretq) resolves the mark by walking the user stack; a mark that waits
// too long, or is still pending at the end, is resolved from the user registers saved at kernel
// entry. The mark walks at once only where the stack may be gone before that (walk_at_mark).
// Every mark ends in exactly one USER_STACK record.
#define pr_fmt(fmt) "sampler: marks: " fmt
#include <string.h>

#include <hvprof/log.h>

#include "sampler_internal.h"

#define MARKS_EXPIRE_PER_CALL 4 /* slots looked at per sample: bounded work */

static int emit_saved_entry_walk(struct svcpu *sv, const struct mark *mk,
				 const struct gi_user_regs *now, const struct gi_paging *pg,
				 uint64_t mm);
static void emit_execve(struct svcpu *sv, const struct mark *mk);
static void emit_lost(struct svcpu *sv, const struct mark *mk);

void marks_init(struct marks *m, uint64_t timeout_ns)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	m->next_cookie = 1;
	m->timeout_ns = timeout_ns;
	m->cycle_min_ns = UINT64_MAX;
}

/* t_ns + timeout_ns, or UINT64_MAX past it (no mark ever times out). */
static uint64_t due_after(const struct marks *m, uint64_t t_ns)
{
	uint64_t due;

	return __builtin_add_overflow(t_ns, m->timeout_ns, &due) ? UINT64_MAX : due;
}

/* A mark's t_ns was set (under the lock): the timeout scan's bound and its cycle see it. */
static void note_t_ns(struct marks *m, uint64_t t_ns)
{
	uint64_t due = due_after(m, t_ns);

	if (t_ns < m->cycle_min_ns)
		m->cycle_min_ns = t_ns;
	if (due < atomic_load_explicit(&m->due_ns, memory_order_relaxed))
		atomic_store_explicit(&m->due_ns, due, memory_order_relaxed);
}

void marks_destroy(struct marks *m)
{
	pthread_mutex_destroy(&m->lock);
}

static struct mark *find(struct marks *m, uint64_t task, int32_t pid)
{
	if (!m->n_used)
		return NULL;
	/* SAFETY: n_slots <= MARKS_MAX (mark_new, release). */
	for (unsigned int i = 0; i < m->n_slots; i++)
		if (m->key[i].used && m->key[i].task == task && m->key[i].pid == pid)
			return &m->slot[i];
	return NULL;
}

static void release(struct svcpu *sv, struct marks *m, struct mark *mk)
{
	/* SAFETY: @mk is an element of m->slot (every caller passes one) */
	m->key[mk - m->slot].used = false;
	m->n_used--;
	while (m->n_slots && !m->key[m->n_slots - 1].used)
		m->n_slots--;
	atomic_store(&m->pending, m->n_used);
	if (mk->trap && --m->n_trap == 0 && m->on_last)
		m->on_last(sv);
	if (mk->flag)
		m->n_flag--;
	mk->trap = mk->flag = false;
}

void marks_loop_idle(struct svcpu *sv)
{
	struct marks *m = &sv->s->marks;

	pthread_mutex_lock(&m->lock);
	if (m->n_flag == 0 && m->on_flag_idle)
		m->on_flag_idle(sv);
	pthread_mutex_unlock(&m->lock);
}

/* Leave @mk to the sysretq/iretq trap: the first such mark arms it on every vCPU. */
static void mark_trap(struct svcpu *sv, struct marks *m, struct mark *mk)
{
	if (mk->trap)
		return;
	mk->trap = true;
	if (m->flag_marks)
		sv->c.marks_trapped++;
	if (m->n_trap++ == 0 && m->on_first)
		m->on_first(sv); /* the thread may return to user on any vCPU: arm them all */
}

/*
 * Guest-visible marks: set TIF_NOTIFY_RESUME on the marked task (again, when the mark exists:
 * the kernel may have cleared it already in this very exit's loop), so that it takes the
 * exit-work loop, whose breakpoint resolves the mark. A sample in the exit tail may come after
 * the thread read its flags for the last time (the flag would only act at its next exit): the
 * caller resolves that mark at once, from the registers the thread returns with (pt_regs: no
 * work is left before the return), so nothing is set for it. A flag that cannot be written
 * falls back to the trap.
 */
static void mark_kind(struct svcpu *sv, struct marks *m, struct mark *mk,
		      const struct mark_req *req)
{
	bool was_set = false;

	if (req->exit_tail)
		return; /* resolved by the caller, now */
	if (!m->flag_marks || mk->trap) {
		mark_trap(sv, m, mk);
		return;
	}
	if (m->set_flag(sv, req->task, req->pg, &was_set) != 0) {
		sv->c.flag_set_failed++;
		mark_trap(sv, m, mk);
		return;
	}
	sv->c.marks_flagged++;
	flag_ledger_note(sv, req->task, req->pid, req->pg, was_set);
	if (!mk->flag) {
		mk->flag = true;
		if (m->n_flag++ == 0 && m->on_flag_first)
			m->on_flag_first(sv);
	}
}

/* x86-64 system calls after which a thread may never return to the address space it entered
 * from, or returns with other registers by design (rt_sigreturn: the interrupted context's)
 * (arch/x86/entry/syscalls/syscall_64.tbl). */
#define NR_RT_SIGRETURN 15
#define NR_EXECVE 59
#define NR_EXIT 60
#define NR_EXIT_GROUP 231
#define NR_EXECVEAT 322
#define NR_LIMIT 512 /* x86-64 numbers are below; an exception or interrupt entry has orig_ax -1 */

/*
 * Walk the user stack when the mark is taken? Only where the stack may be gone when the mark is
 * resolved otherwise than by its return: a thread already exiting, execve or exit by the system
 * call's number, rt_sigreturn (its return restores another context: the entry's is the handler's
 * call path), and any entry that is not a system call's or cannot be told (an interrupt or
 * exception: orig_ax -1; no pt_regs.orig_ax in the BTF; a 32-bit task). Interrupt entries stay
 * walked at the mark: in the demo (2 vCPUs) a few of their returns showed other registers with
 * no signal frame, where the walk made at the mark is the right answer. Everywhere else the
 * return walks the same registers (the same chain, one walk instead of two), and a mark whose
 * return shows other registers is walked then only where a signal frame shows the stack is
 * still the entry's (emit_saved_entry_walk).
 */
static bool walk_at_mark(const struct mark_req *req, const struct gi_user_regs *e)
{
	if (req->exiting || !e->entry_known || (e->cs & 0xffff) != SAMPLER_USER_CS_64 ||
	    e->orig_ax >= NR_LIMIT)
		return true;
	switch (e->orig_ax) {
	case NR_RT_SIGRETURN:
	case NR_EXECVE:
	case NR_EXIT:
	case NR_EXIT_GROUP:
	case NR_EXECVEAT:
		return true;
	default:
		return false;
	}
}

/* Record @entry as the mark's entry registers, and walk the user stack from them now if
 * walk_at_mark() says so. */
static void set_entry(struct svcpu *sv, struct mark *mk, const struct mark_req *req,
		      const struct gi_user_regs *entry)
{
	unsigned int n = 0;

	mk->pg = *req->pg;
	mk->pg.cache = NULL; /* the cache is the sampling vCPU's own: not for later, other threads */
	mk->entry = *entry;
	mk->entry_known = true;
	/* rt_sigreturn returns to the context it restores: nothing to check its registers by */
	mk->window = req->window && entry->orig_ax != NR_RT_SIGRETURN;
	mk->walked = walk_at_mark(req, entry);
	mk->n_entry = 0;
	mk->entry_stop = HVP_WALK_LOST;
	if (!mk->walked)
		return;
	sv->c.marks_walked_at_mark++;
	/* bounded: at most HVP_MAX_CALLCHAIN frames, each a bounded page walk */
	mk->entry_stop = (uint8_t)gi_unwind_user(sv->s->mem, req->pg, entry->ip, entry->sp,
						 entry->bp, mk->entry_ips, HVP_MAX_CALLCHAIN, &n);
	mk->n_entry = (uint16_t)n;
}

/*
 * Count a mark in its class's figures (struct stay_stat), once its entry's registers @e are
 * known: at the mark, or at the later sample that brought them (an entry-window mark). Under
 * the marks lock.
 */
static void stay_count_mark(struct sampler *s, struct mark *mk, const struct gi_user_regs *e)
{
	struct stay_stat *st;
	atomic_uint *made, *other;
	unsigned int limit;
	int cls = stay_class(e);

	if (cls < 0 || mk->stay_class >= 0)
		return;
	mk->stay_class = (int16_t)cls; /* 0..STAY_CLASS_IRQ (stay_class) */
	st = &s->stay[cls];
	made = mk->explore ? &st->xmade : &st->made;
	other = mk->explore ? &st->xjoined : &st->joins;
	limit = mk->explore ? STAY_XDECAY : STAY_DECAY;
	if (atomic_fetch_add_explicit(made, 1, memory_order_relaxed) + 1 >= limit) {
		atomic_store_explicit(made, limit / 2, memory_order_relaxed);
		atomic_store_explicit(other, atomic_load_explicit(other, memory_order_relaxed) / 2,
				      memory_order_relaxed);
	}
}

/* A later sample of the stay joined @mk: count it (struct stay_stat). Under the marks lock. */
static void stay_count_join(struct sampler *s, struct mark *mk)
{
	struct stay_stat *st;

	if (mk->stay_class < 0)
		return;
	st = &s->stay[mk->stay_class]; /* 0..STAY_CLASS_IRQ: set by stay_count_mark only */
	if (!mk->explore)
		atomic_fetch_add_explicit(&st->joins, 1, memory_order_relaxed);
	else if (!mk->joined)
		atomic_fetch_add_explicit(&st->xjoined, 1, memory_order_relaxed);
	mk->joined = true;
}

/* A free slot for a new mark of @req (under the lock), or NULL when the table is full. */
static struct mark *mark_new(struct svcpu *sv, struct marks *m, const struct mark_req *req)
{
	for (unsigned int i = 0; i < MARKS_MAX; i++) {
		struct mark *mk = &m->slot[i];

		if (m->key[i].used)
			continue;
		m->key[i] = (struct mark_key){ .task = req->task, .pid = req->pid, .used = true };
		mk->task = req->task;
		mk->pid = req->pid;
		mk->vcpu = sv->index;
		mk->cookie = m->next_cookie++;
		mk->t_ns = req->now_ns ? req->now_ns : vmm_now_ns();
		note_t_ns(m, mk->t_ns);
		mk->pg = *req->pg;
		mk->pg.cache = NULL;
		mk->mm = req->mm;
		mk->n_entry = 0;
		mk->entry_stop = HVP_WALK_LOST;
		mk->entry_known = false;
		mk->window = false;
		mk->walked = false;
		mk->exiting = req->exiting;
		memset(&mk->entry, 0, sizeof(mk->entry));
		mk->trap = mk->flag = false;
		mk->stay_class = -1;
		mk->explore = req->explore;
		mk->joined = false;
		if (mk->explore)
			sv->c.stay_explore_marks++;
		if (req->entry_known) {
			stay_count_mark(sv->s, mk, req->entry);
			set_entry(sv, mk, req, req->entry);
		}
		m->n_used++;
		if (i >= m->n_slots)
			m->n_slots = i + 1;
		atomic_store(&m->pending, m->n_used);
		mark_kind(sv, m, mk, req);
		sv->c.marks++;
		return mk;
	}
	return NULL;
}

/*
 * A mark outlived a return to user that no breakpoint saw: its thread, in the same mm, was
 * sampled in a later kernel entry. Rare while breakpoints fire (a return taken before the flag
 * or the trap was armed); if BP_DEAD_UNSEEN such returns come before any breakpoint hit, the
 * host does not deliver them, and kernel samples are walked at once from then on
 * (user_part_of_kernel_sample), counted once in bp_never_fired.
 */
static void note_unseen_return(struct svcpu *sv)
{
	struct sampler *s = sv->s;

	sv->c.returns_unseen++;
	if (atomic_load_explicit(&s->bp_fired, memory_order_relaxed))
		return;
	if (atomic_fetch_add(&s->returns_unseen, 1) + 1 >= BP_DEAD_UNSEEN &&
	    !atomic_exchange(&s->bp_dead, true))
		sv->c.bp_never_fired++;
}

static bool sigframe_saved(struct svcpu *sv, const struct gi_paging *pg, uint64_t frame,
			   uint64_t sc[2]);
static bool signal_frame_saved(struct svcpu *sv, const struct gi_paging *pg,
			       const struct gi_user_regs *now, const struct gi_user_regs *entry);

/*
 * Did the kernel itself change the user registers of this stay from @entry to @now (through
 * @pg), with no return between? A 64-bit rt_sigreturn's entry returns to the context its frame
 * holds (at the entry's RSP - 8: the handler's return popped pretcode); a signal's delivery on
 * the way out points them at a handler whose frame saved @entry (signal_frame_saved); a system
 * call restarted without a handler returns to its own SYSCALL instruction, two bytes back, on
 * the same stack with the same orig_ax (arch/x86/kernel/signal.c). Those are not returns no
 * breakpoint saw (nested runs: every "unseen return" left of the trap strategy's, once samples
 * in sync_regs() read the entry's registers, was one of these). @handler: what the caller
 * found of the handler's frame at @now's RSP already (emit_saved_entry_walk: 1 it saved
 * @entry, 0 it did not, -1 not looked at). At most one 16-byte read.
 */
static bool rewritten_in_stay(struct svcpu *sv, const struct gi_user_regs *entry,
			      const struct gi_user_regs *now, const struct gi_paging *pg,
			      int handler)
{
	uint64_t sc[2];

	if (entry->orig_ax == NR_RT_SIGRETURN)
		return (entry->cs & 0xffff) == SAMPLER_USER_CS_64 && entry->sp >= 8 &&
		       sigframe_saved(sv, pg, entry->sp - 8, sc) && sc[0] == now->sp &&
		       sc[1] == now->ip;
	if (entry->orig_ax < NR_LIMIT && now->orig_ax == entry->orig_ax &&
	    now->sp == entry->sp && now->ip == entry->ip - 2)
		return true;
	return handler >= 0 ? handler == 1 : signal_frame_saved(sv, pg, now, entry);
}

/*
 * Sampling is off (a detach switched it off; under the marks lock): a vCPU still building a
 * sample the detach stopped waiting for must not make a mark after marks_drop_all, or mark_new
 * would arm the return-to-user breakpoints again after the detach disarmed them, with nothing
 * left to resolve the mark and disarm them.
 */
static bool refused_off(struct svcpu *sv)
{
	if (atomic_load(&sv->s->sampling_start))
		return false;
	sv->c.marks_refused_off++;
	return true;
}

uint64_t marks_take(struct svcpu *sv, const struct mark_req *req)
{
	struct marks *m = &sv->s->marks;
	struct mark *mk, old;
	uint64_t cookie = 0;

	pthread_mutex_lock(&m->lock);
	if (refused_off(sv)) {
		pthread_mutex_unlock(&m->lock);
		return 0;
	}
	mk = find(m, req->task, req->pid);
	if (mk && !mk->entry_known && mk->mm != req->mm && !mk->exiting && !req->exiting) {
		/* Marked in the entry window with no walk, and execve has switched the task to
		 * another mm since: pt_regs hold the old program's registers (not walkable in
		 * this mm) or, past start_thread, the new one's (not the marked samples' path,
		 * and the reader names the mark's chain in the old address space). The mark ends
		 * with its reason; this sample starts a new one (none while the new mm is
		 * building: the caller records EXECVE). */
		old = *mk;
		release(sv, m, mk);
		pthread_mutex_unlock(&m->lock);
		emit_execve(sv, &old);
		sv->c.dropped_no_regs++;
		pthread_mutex_lock(&m->lock);
		mk = NULL;
	} else if (mk && req->entry_known && !mk->entry_known) {
		/* marked in the entry code: this later sample knows the entry's registers (not
		 * when they are an execve's old program's: this mm is not theirs to walk in) */
		if (!req->execve) {
			set_entry(sv, mk, req, req->entry);
			stay_count_mark(sv->s, mk, req->entry);
		}
	} else if (mk && req->entry_known && !mk->exiting &&
		   (mk->entry.ip != req->entry->ip || mk->entry.sp != req->entry->sp)) {
		/* Same stay in the kernel, other user registers: execve set up the new program,
		 * the kernel rewrote them (a signal's delivery, rt_sigreturn, a restart), or the
		 * mark outlived an unseen return. The old mark ends with its walk; this sample
		 * starts a new one. */
		int handler;

		old = *mk;
		release(sv, m, mk);
		pthread_mutex_unlock(&m->lock);
		handler = emit_saved_entry_walk(sv, &old, req->entry, req->pg, req->mm);
		sv->c.resolved_stale++;
		if (old.mm == req->mm &&
		    rewritten_in_stay(sv, &old.entry, req->entry, req->pg, handler))
			sv->c.marks_regs_rewritten++;
		else if (old.mm == req->mm)
			note_unseen_return(sv);
		pthread_mutex_lock(&m->lock);
		mk = NULL;
	}
	if (mk) {
		/* exit_group marked it in the system call; exit_mmap now tears its memory down:
		 * the walk already made is the one to keep. Likewise execve: the mark was made
		 * under the old mm, this sample sees the new one (exec_mmap switched it, the old
		 * one is being torn down: begin_new_exec -> mmput -> exit_mmap) while pt_regs
		 * still hold the old program's registers, the mark's own: its walk is kept, and
		 * the return (other registers: the new program's) emits it. */
		if (mk->mm != req->mm && !mk->exiting && !req->exiting) {
			sv->c.marks_execve_kept++;
			/* sampled running past the switch: its timeout starts again. Expiry is
			 * for a thread that does not return; this one returns when the exec is
			 * done (tearing a large mm down takes longer than the timeout), and an
			 * expired mark would leave the rest of the stay without its walk. */
			mk->t_ns = req->now_ns ? req->now_ns : vmm_now_ns();
			note_t_ns(m, mk->t_ns);
		}
		mk->exiting |= req->exiting;
		cookie = mk->cookie;
		sv->c.marks_reused++;
		stay_count_join(sv->s, mk);
		if (m->flag_marks)
			mark_kind(sv, m, mk, req);
	} else if (req->execve) {
		/* The task already runs on the mm execve is building, with the old program's
		 * registers in pt_regs and no mark made under the old mm: nothing here can be
		 * walked (the caller records the user part as lost, HVP_WALK_EXECVE). */
	} else if (!refused_off(sv)) { /* again: the lock was let go for a stale mark */
		mk = mark_new(sv, m, req);
		if (mk)
			cookie = mk->cookie;
		else
			sv->c.dropped_table_full++;
	}
	pthread_mutex_unlock(&m->lock);
	return cookie;
}

int stay_class(const struct gi_user_regs *e)
{
	if (!e->entry_known)
		return -1;
	if (e->orig_ax < STAY_STATS_N)
		return (int)e->orig_ax;
	/* the entry code of interrupts and exceptions leaves -1 (an exception's error code is
	 * moved out of the slot before the handler runs) */
	return e->orig_ax == UINT64_MAX ? STAY_CLASS_IRQ : -1;
}

bool stay_walk_now(struct svcpu *sv, const struct gi_user_regs *e, bool *explore)
{
	struct sampler *s = sv->s;
	struct stay_stat *st;
	uint64_t made, joins, xmade, xjoined;
	int cls;

	*explore = false;
	if (!s->stay_adaptive || (cls = stay_class(e)) < 0)
		return false;
	st = &s->stay[cls]; /* 0..STAY_CLASS_IRQ (stay_class) */
	made = atomic_load_explicit(&st->made, memory_order_relaxed);
	joins = atomic_load_explicit(&st->joins, memory_order_relaxed);
	/* samples per stay = (made + joins) / made: a mark pays at stay_pays or more */
	if (made < STAY_MIN_MARKS || made + joins >= (uint64_t)s->stay_pays * made)
		return false;
	xmade = atomic_load_explicit(&st->xmade, memory_order_relaxed);
	xjoined = atomic_load_explicit(&st->xjoined, memory_order_relaxed);
	if (xmade >= STAY_MIN_MARKS && xjoined <= xmade &&
	    xmade >= (uint64_t)s->stay_pays * (xmade - xjoined)) {
		/* the exploration marks say the stays grew (xmade / unjoined >= stay_pays):
		 * mark again, and learn again from marks at the stays' first samples */
		atomic_store_explicit(&st->made, 0, memory_order_relaxed);
		atomic_store_explicit(&st->joins, 0, memory_order_relaxed);
		atomic_store_explicit(&st->xmade, 0, memory_order_relaxed);
		atomic_store_explicit(&st->xjoined, 0, memory_order_relaxed);
		sv->c.stay_back_to_marks++;
		return false;
	}
	/* every STAY_EXPLORE-th still marks: a change of the class's stays shows */
	if ((atomic_fetch_add_explicit(&st->inline_walks, 1, memory_order_relaxed) + 1) %
	    STAY_EXPLORE != 0)
		return true;
	*explore = true;
	return false;
}

bool marks_has(struct svcpu *sv, uint64_t task, int32_t pid)
{
	struct marks *m = &sv->s->marks;
	bool found;

	if (!atomic_load(&m->pending))
		return false; /* no mark anywhere: no lock */
	pthread_mutex_lock(&m->lock);
	found = find(m, task, pid) != NULL;
	pthread_mutex_unlock(&m->lock);
	return found;
}

void marks_resolve_at_return(struct svcpu *sv, uint64_t task, int32_t pid, uint64_t mm,
			     const struct gi_paging *pg, const struct gi_user_regs *ur)
{
	struct marks *m = &sv->s->marks;
	struct mark *mk, copy;

	if (!atomic_load(&m->pending)) {
		sv->c.traps_no_mark++;
		return;
	}
	pthread_mutex_lock(&m->lock);
	mk = find(m, task, pid);
	if (!mk) {
		if (sv->in_loop_hit) /* its flag brought it here: who set it, if hvprof knows */
			flag_ledger_unmarked(sv, task, pid);
		pthread_mutex_unlock(&m->lock);
		sv->c.traps_no_mark++;
		return;
	}
	copy = *mk;
	release(sv, m, mk);
	flag_ledger_returned(sv->s, task, pid); /* a flag read back now is the kernel's */
	pthread_mutex_unlock(&m->lock);

	if (copy.window && mm == copy.mm) {
		/* the entry window's registers against those the thread returns with: they differ
		 * only where a signal frame was set up, or where the window's were wrong */
		sv->c.marks_window_returns++;
		if (ur->ip != copy.entry.ip || ur->sp != copy.entry.sp)
			sv->c.marks_window_other_regs++;
	}
	/* The registers about to be restored are those saved at the kernel entry we marked,
	 * unless that entry ended unseen (another vCPU had not armed yet), a signal frame was set
	 * up, or execve replaced the address space: then the walk made when the mark was taken
	 * tells the call path of the marked samples. */
	if (!copy.entry_known && mm != copy.mm) {
		/* marked in the entry window, and execve switched the mm before any sample saw
		 * the entry's registers: @ur are the new program's, @pg its page tables, and the
		 * mark's chain is named in the old program's address space */
		emit_execve(sv, &copy);
		sv->c.dropped_no_regs++;
	} else if (!copy.entry_known || (ur->ip == copy.entry.ip && ur->sp == copy.entry.sp)) {
		emit_user_stack(sv, copy.cookie, pid, pg, ur, task, mm);
		sv->c.resolved_at_return++;
	} else {
		emit_saved_entry_walk(sv, &copy, ur, pg, mm);
		sv->c.resolved_stale++;
	}
}

/* x86-64 struct rt_sigframe at a signal handler's RSP (arch/x86/include/asm/sigframe.h):
 * pretcode (8 bytes), struct ucontext: uc_flags, uc_link (8 each), uc_stack (24), then
 * uc_mcontext, struct sigcontext (arch/x86/include/uapi/asm/sigcontext.h): r8-r15, di, si, bp,
 * bx, dx, ax, cx, sp, ip, ... : where the interrupted RSP, and right after it RIP, are saved. */
#define SIGFRAME_SC_SP (8 + 8 + 8 + 24 + 15 * 8)

/*
 * Do @now (the user registers a thread returns with, through @pg) enter a signal handler whose
 * frame saved @entry? Then the kernel only pushed the frame below the entry's stack (or on an
 * alternate stack): the stack above entry->sp is still the entry's, walkable now. A system call
 * restarted after the handler is saved at its own SYSCALL instruction, entry->ip - 2
 * (arch/x86/kernel/signal.c). One 16-byte guest read; any failure says no.
 */
static bool signal_frame_saved(struct svcpu *sv, const struct gi_paging *pg,
			       const struct gi_user_regs *now, const struct gi_user_regs *entry)
{
	uint64_t sc[2];

	if (!sigframe_saved(sv, pg, now->sp, sc))
		return false;
	return sc[0] == entry->sp && (sc[1] == entry->ip || sc[1] == entry->ip - 2);
}

/* @sc: the RSP and RIP saved in the struct rt_sigframe at user GVA @frame (through @pg). One
 * 16-byte guest read; false where it fails or @frame is not a user address. */
static bool sigframe_saved(struct svcpu *sv, const struct gi_paging *pg, uint64_t frame,
			   uint64_t sc[2])
{
	uint64_t at;

	return !gi_is_kernel_gva(pg, frame) &&
	       !__builtin_add_overflow(frame, (uint64_t)SIGFRAME_SC_SP, &at) &&
	       gi_read_gva(sv->s->mem, pg, at, sc, 2 * sizeof(sc[0])) == 0;
}

/*
 * The walk from the mark's entry registers as its USER_STACK record: the one made when the mark
 * was taken or, when none was (walk_at_mark), one made now if @now (the thread's user registers
 * now, through @pg, in address space @mm; NULL: not known) enter a signal handler whose frame
 * saved them. Else the stack may have changed or gone since: the user part is lost (counted).
 * Return: 1 the handler's frame at @now's RSP saved the mark's entry registers, 0 it did not,
 * -1 it was not looked at (rewritten_in_stay's @handler).
 */
static int emit_saved_entry_walk(struct svcpu *sv, const struct mark *mk,
				 const struct gi_user_regs *now, const struct gi_paging *pg,
				 uint64_t mm)
{
	struct hvp_user_stack *u = &sv->ustack;
	int handler = -1;

	if (mk->entry_known && !mk->walked && now && mm == mk->mm) {
		handler = signal_frame_saved(sv, pg, now, &mk->entry);
		if (handler) {
			/* the stack above the entry's RSP is intact: the walk the return would
			 * have made */
			emit_user_stack(sv, mk->cookie, mk->pid, pg, &mk->entry, mk->task, mk->mm);
			sv->c.marks_walked_late++;
			return handler;
		}
	}
	if (mk->entry_known && !mk->walked) {
		/* no walk, so no USER_REGS either (one per user walk) */
		sv->c.marks_walk_lost++;
		emit_lost(sv, mk);
		return handler;
	}
	u->time_ns = vmm_now_ns() - sampler_start_ns(sv->s);
	u->cookie = mk->cookie;
	u->pid = mk->pid;
	u->vcpu = sv->index;
	u->stop = mk->entry_stop;
	u->n_user = mk->n_entry;
	/* SAFETY: n_entry <= HVP_MAX_CALLCHAIN, the size of both arrays. */
	memcpy(u->user_ips, mk->entry_ips, mk->n_entry * sizeof(u->user_ips[0]));
	/* the entry's registers; its stack is gone (exit tears it down, execve replaced it) */
	if (mk->entry_known) {
		user_regs_take(sv, &sv->ustack_regs, sv->ustack_stack, NULL, &mk->pg, &mk->entry,
			       false, 0);
		sampler_emit_user_stack(sv, u, &sv->ustack_regs);
	} else {
		sampler_emit_user_stack(sv, u, NULL);
	}
	return handler;
}

/* @mk ends with no walk: execve replaced its address space before its registers were known. */
static void emit_execve(struct svcpu *sv, const struct mark *mk)
{
	struct hvp_user_stack u = { .time_ns = vmm_now_ns() - sampler_start_ns(sv->s),
				    .cookie = mk->cookie, .pid = mk->pid, .vcpu = sv->index,
				    .stop = HVP_WALK_EXECVE };

	sampler_emit_user_stack(sv, &u, NULL);
}

static void emit_lost(struct svcpu *sv, const struct mark *mk)
{
	struct hvp_user_stack u = { .time_ns = vmm_now_ns() - sampler_start_ns(sv->s),
				    .cookie = mk->cookie, .pid = mk->pid, .vcpu = sv->index,
				    .stop = HVP_WALK_LOST };

	sampler_emit_user_stack(sv, &u, NULL);
}

/* Resolve @mk (already released) from its entry registers; check the task is still the same. */
static void resolve_from_entry(struct svcpu *sv, const struct mark *mk)
{
	struct sampler *s = sv->s;
	struct gi_user_regs entry = mk->entry;
	struct hvp_thread t;
	uint64_t mm = 0;

	if (mk->exiting && mk->entry_known) {
		/* its user memory is being torn down: the walk taken while it existed */
		emit_saved_entry_walk(sv, mk, NULL, NULL, 0);
		sv->c.resolved_exiting++;
		return;
	}
	if (gi_task_identity(s->gi, s->mem, &mk->pg, mk->task, &t, &mm) != 0 ||
	    t.pid != mk->pid) {
		sv->c.dropped_exited++;
		emit_lost(sv, mk);
		return;
	}
	if (mm != mk->mm && mm) {
		/* execve replaced the address space since the mark: the mark's page tables may
		 * be freed, and pt_regs hold the old program's registers or the new one's: the
		 * walk made under the mark's mm, if any, tells the marked samples' call path */
		if (mk->entry_known) {
			emit_saved_entry_walk(sv, mk, NULL, NULL, 0);
			sv->c.resolved_stale++;
		} else {
			emit_execve(sv, mk);
			sv->c.dropped_no_regs++; /* every mark ends in one resolved_ or dropped_ */
		}
		return;
	}
	if (!mk->entry_known && gi_task_user_regs(s->gi, s->mem, &mk->pg, mk->task, &entry) != 0) {
		sv->c.dropped_no_regs++;
		emit_lost(sv, mk);
		return;
	}
	/* the thread is still in the kernel: pt_regs is complete now, and so is its memory */
	emit_user_stack(sv, mk->cookie, mk->pid, &mk->pg, &entry, mk->task, mm);
	sv->c.resolved_from_ptregs++;
}

void marks_expire(struct svcpu *sv, uint64_t now_ns)
{
	struct marks *m = &sv->s->marks;
	struct mark expired[MARKS_EXPIRE_PER_CALL];
	unsigned int n = 0;

	/* nothing pending, or nothing can be old yet: no lock, no slot touched (the common
	 * case: a mark lives from a sample to the thread's return, far shorter than the timeout) */
	if (!atomic_load(&m->pending) ||
	    now_ns <= atomic_load_explicit(&m->due_ns, memory_order_relaxed))
		return;
	pthread_mutex_lock(&m->lock);
	for (unsigned int k = 0; k < MARKS_EXPIRE_PER_CALL && m->n_slots; k++) {
		struct mark *mk;

		if (m->scan_next >= m->n_slots) {
			/* a cycle ended: every slot in use was seen, or made since (note_t_ns);
			 * the oldest of them bounds the next timeout */
			uint64_t due = due_after(m, m->cycle_min_ns);

			atomic_store_explicit(&m->due_ns, due, memory_order_relaxed);
			m->cycle_min_ns = UINT64_MAX;
			m->scan_next = 0;
			if (now_ns <= due)
				break;
		}
		/* SAFETY: scan_next < n_slots <= MARKS_MAX (checked above; mark_new, release) */
		mk = &m->slot[m->scan_next];
		if (!m->key[m->scan_next++].used)
			continue;
		/* @now_ns is the caller's sample start, read before its identity and walks:
		 * another vCPU may have made or refreshed a mark since, with a later t_ns (its
		 * own sample's start); such a mark is not old, and the unsigned difference
		 * would wrap to a huge age */
		if (now_ns > mk->t_ns && now_ns - mk->t_ns > m->timeout_ns) {
			expired[n++] = *mk;
			release(sv, m, mk);
		} else if (mk->t_ns < m->cycle_min_ns) {
			m->cycle_min_ns = mk->t_ns;
		}
	}
	pthread_mutex_unlock(&m->lock);
	for (unsigned int i = 0; i < n; i++)
		resolve_from_entry(sv, &expired[i]);
}

void marks_flush(struct svcpu *sv)
{
	struct marks *m = &sv->s->marks;

	for (unsigned int i = 0; i < MARKS_MAX; i++) {
		struct mark copy;

		pthread_mutex_lock(&m->lock);
		if (!m->key[i].used) {
			pthread_mutex_unlock(&m->lock);
			continue;
		}
		copy = m->slot[i];
		release(sv, m, &m->slot[i]);
		pthread_mutex_unlock(&m->lock);
		resolve_from_entry(sv, &copy);
	}
}

unsigned int marks_drop_all(struct marks *m)
{
	unsigned int n;

	pthread_mutex_lock(&m->lock);
	n = m->n_used;
	for (unsigned int i = 0; i < MARKS_MAX; i++) {
		m->key[i].used = false;
		m->slot[i].trap = m->slot[i].flag = false;
	}
	m->n_used = 0;
	m->n_slots = 0;
	m->n_trap = m->n_flag = 0;
	atomic_store(&m->pending, 0);
	pthread_mutex_unlock(&m->lock);
	return n;
}
