// SPDX-License-Identifier: MIT
// The flag strategy's read-back (issue 17: evidence, from the guest's own memory, that the flags
// hvprof sets are cleared): the tasks it flagged are kept in a small ledger, and at each detach
// and at the end of the run their thread_info.flags are read again. hvprof never clears
// TIF_NOTIFY_RESUME itself (docs/guest-interface.md); the kernel does, in the exit-work loop, at
// the thread's next return to user mode. So a flagged task whose return hvprof saw reads clear,
// unless the kernel set the flag again for itself (task work queued: task->task_works; rseq: a
// thread that registered an area, task->rseq, gets the flag at each of its context switches,
// task->nvcsw + nivcsw, and one came after the return); one with no return seen since its flag
// (in the kernel: blocked, or its mark expired) may read set. Set after a return seen for
// neither reason is what hvprof would have left (or another of the kernel's reasons: memcg,
// blkcg). (task->rseq_event_mask tells nothing: 6.1 sets its bits at every switch of every task
// and clears them only for a registered thread preempted inside a critical section, at execve
// and at a fork.)
#include <errno.h>
#include <string.h>

#include "sampler_internal.h"

#define PF_EXITING 0x00000004u /* task_struct.flags (include/linux/sched.h) */

/* The flag_scan counters, in the enum's order (sampler_get_counters copies them by index). */
#define AT(kind, field)                                                                   \
	_Static_assert(offsetof(struct sampler_counters, field) ==                        \
			       offsetof(struct sampler_counters, flag_scans) +             \
				       sizeof(uint64_t) * (kind),                          \
		       #field " is counter " #kind)
AT(FLAG_SCAN_TASKS, flag_scan_tasks);
AT(FLAG_SCAN_CLEAR, flag_scan_clear);
AT(FLAG_SCAN_SET_UNRETURNED, flag_scan_set_unreturned);
AT(FLAG_SCAN_SET_KERNEL, flag_scan_set_kernel);
AT(FLAG_SCAN_SET_OTHER, flag_scan_set_other);
AT(FLAG_SCAN_GONE, flag_scan_gone);
#undef AT

/* The GPA of the @size-byte field at byte @off of @task (through @pg); aligned to its size, so
 * within one page. Return: 0; -EINVAL no such field, misaligned or not a kernel GVA; a walk's
 * errors (gi_gva_to_gpa). */
static int field_gpa(const struct sampler *s, const struct gi_paging *pg, uint64_t task,
		     uint32_t off, uint32_t size, uint64_t *gpa)
{
	uint64_t kva, page_size;

	if (off == UINT32_MAX || __builtin_add_overflow(task, (uint64_t)off, &kva) ||
	    (kva & (size - 1)) || !gi_is_kernel_gva(pg, kva))
		return -EINVAL;
	return gi_gva_to_gpa(s->mem, pg, kva, gpa, &page_size, NULL);
}

struct flag_ledger_entry *flag_ledger_slot(struct flag_ledger *l, uint64_t task)
{
	/* task_structs sit a few to a slab (6.1: 5 of 6 464 bytes in 32 KiB): their low bits
	 * take few values, so the address is hashed (Fibonacci hashing: the top 8 bits of the
	 * product). SAFETY: the index is below 256 = FLAG_LEDGER_SLOTS. */
	_Static_assert(FLAG_LEDGER_SLOTS == 256, "the hash gives 8 bits");
	return &l->e[((task >> 6) * 0x9e3779b97f4a7c15ull) >> 56];
}

/* @e's task's context switches so far (nvcsw + nivcsw) in *@n, in one 16-byte read: the two
 * words are neighbours in task_struct (include/linux/sched.h; flag_ledger_note keeps their GPA
 * only then). Return: false where they cannot be read. */
static bool read_switches(const struct sampler *s, const struct flag_ledger_entry *e,
			  uint64_t *n)
{
	uint64_t w[2];

	if (!e->nvcsw_gpa || gmem_read(s->mem, e->nvcsw_gpa, w, sizeof(w)))
		return false;
	*n = w[0] + w[1];
	return true;
}

/* Did the kernel set @e's flag for itself since the return noted? Task work queued
 * (task->task_works not NULL; TWA_SIGNAL's sets TIF_NOTIFY_SIGNAL instead, so this may
 * overlook a flag hvprof left), or rseq: the task has an area registered (task->rseq not
 * NULL), and since the return a context switch came (rseq_preempt() flags every switch out of
 * such a task, and a migration needs one) or the area was registered anew (sys_rseq flags the
 * caller: glibc registers again after an execve, which unregisters it); switches not known:
 * any may have. Not told: membarrier's rseq IPI, which flags a running thread with no switch.
 * False where neither can be read. */
static bool kernel_reason(const struct sampler *s, const struct flag_ledger_entry *e)
{
	uint64_t works = 0, rseq = 0, now;

	if (e->task_works_gpa &&
	    gmem_read(s->mem, e->task_works_gpa, &works, sizeof(works)) == 0 && works)
		return true;
	if (!e->rseq_gpa || gmem_read(s->mem, e->rseq_gpa, &rseq, sizeof(rseq)) || !rseq)
		return false;
	return !e->switches_known || rseq != e->rseq_at_return || !read_switches(s, e, &now) ||
	       now != e->switches;
}

void flag_ledger_note(struct svcpu *sv, uint64_t task, int32_t pid, const struct gi_paging *pg,
		      bool was_set)
{
	struct sampler *s = sv->s;
	const struct gi_layout *l;
	struct flag_ledger_entry *e, n = { .task = task, .pid = pid };

	if (!s->ledger || !task)
		return;
	e = flag_ledger_slot(s->ledger, task);
	if (e->task == task && e->pid == pid) {
		/* its earlier flag met a return: the kernel cleared it, unless it set its own */
		if (e->returned) {
			if (!was_set)
				sv->c.flags_seen_clear++;
			else if (kernel_reason(s, e))
				sv->c.flags_seen_kernel++;
			else
				sv->c.flags_seen_set++;
		}
		e->returned = false;
		return; /* its fields found already */
	}
	l = gi_layout(s->gi);
	if (!l || field_gpa(s, pg, task, l->task_ti_flags, 8, &n.ti_flags_gpa) ||
	    field_gpa(s, pg, task, l->task_pid, 4, &n.pid_gpa) ||
	    field_gpa(s, pg, task, l->task_flags, 4, &n.task_flags_gpa))
		return; /* not read back: the scan counts only what it can read */
	/* optional: without them a flag set after a return counts as "other" */
	if (field_gpa(s, pg, task, l->task_task_works, 8, &n.task_works_gpa))
		n.task_works_gpa = 0;
	if (field_gpa(s, pg, task, l->task_rseq, 8, &n.rseq_gpa))
		n.rseq_gpa = 0;
	/* nvcsw and nivcsw read together (read_switches): not kept where they are not
	 * neighbours, or where the two words would cross a page */
	if (l->task_nivcsw != l->task_nvcsw + 8 || ((task + l->task_nvcsw) & 0xfff) > 0xff0 ||
	    field_gpa(s, pg, task, l->task_nvcsw, 8, &n.nvcsw_gpa))
		n.nvcsw_gpa = 0;
	*e = n;
}

void flag_ledger_returned(struct sampler *s, uint64_t task, int32_t pid)
{
	struct flag_ledger_entry *e;

	if (!s->ledger)
		return;
	e = flag_ledger_slot(s->ledger, task);
	if (e->task != task || e->pid != pid)
		return;
	e->returned = true;
	/* only a registered rseq thread needs them (kernel_reason): none without CONFIG_RSEQ
	 * (no task->rseq), and none for a thread with no area now (any registration from now on
	 * flags it: kernel_reason sees the area changed, switches or not) */
	e->switches_known = e->rseq_gpa &&
			    gmem_read(s->mem, e->rseq_gpa, &e->rseq_at_return,
				      sizeof(e->rseq_at_return)) == 0 &&
			    (!e->rseq_at_return || read_switches(s, e, &e->switches));
}

void flag_ledger_unmarked(struct svcpu *sv, uint64_t task, int32_t pid)
{
	const struct flag_ledger_entry *e;

	if (!sv->s->ledger)
		return;
	e = flag_ledger_slot(sv->s->ledger, task);
	if (e->task != task || e->pid != pid) {
		sv->c.no_mark_unflagged++;
		return;
	}
	if (!e->returned)
		sv->c.no_mark_flagged_late++;
	else if (kernel_reason(sv->s, e))
		sv->c.no_mark_kernel++;
	else
		sv->c.no_mark_other++;
	/* this hit is a return too: the kernel clears the flag now (a later one is set anew) */
	flag_ledger_returned(sv->s, task, pid);
}

/* What @e reads as now: an enum flag_scan_kind from FLAG_SCAN_CLEAR on. */
static enum flag_scan_kind scan_one(struct sampler *s, const struct flag_ledger_entry *e)
{
	uint64_t ti_flags;
	int32_t pid;
	uint32_t flags;

	if (gmem_read(s->mem, e->pid_gpa, &pid, sizeof(pid)) ||
	    gmem_read(s->mem, e->task_flags_gpa, &flags, sizeof(flags)) ||
	    gmem_read(s->mem, e->ti_flags_gpa, &ti_flags, sizeof(ti_flags)))
		return FLAG_SCAN_GONE;
	if (pid != e->pid || (flags & PF_EXITING))
		return FLAG_SCAN_GONE; /* freed and reused, or exiting: it never returns to user */
	if (!(ti_flags & (1ull << s->traps.ew[0].notify_bit)))
		return FLAG_SCAN_CLEAR;
	if (!e->returned)
		return FLAG_SCAN_SET_UNRETURNED;
	if (kernel_reason(s, e))
		return FLAG_SCAN_SET_KERNEL;
	return FLAG_SCAN_SET_OTHER;
}

void flag_ledger_scan(struct sampler *s)
{
	uint64_t n[FLAG_SCAN_N] = { 0 };

	if (!s->ledger || !s->traps.flag)
		return;
	pthread_mutex_lock(&s->marks.lock);
	for (unsigned int i = 0; i < FLAG_LEDGER_SLOTS; i++) {
		if (!s->ledger->e[i].task)
			continue;
		n[FLAG_SCAN_TASKS]++;
		n[scan_one(s, &s->ledger->e[i])]++;
	}
	/* the next scan reads back the tasks flagged from now on (the next window's) */
	memset(s->ledger, 0, sizeof(*s->ledger));
	pthread_mutex_unlock(&s->marks.lock);
	n[FLAG_SCANS] = 1;
	for (unsigned int k = 0; k < FLAG_SCAN_N; k++)
		atomic_fetch_add(&s->flag_scan[k], n[k]);
}
