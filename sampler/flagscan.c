// SPDX-License-Identifier: MIT
// The flag strategy's read-back (issue 17: evidence, from the guest's own memory, that the flags
// hvprof sets are cleared): the tasks it flagged are kept in a small ledger, and at each detach
// and at the end of the run their thread_info.flags are read again. hvprof never clears
// TIF_NOTIFY_RESUME itself (docs/guest-interface.md); the kernel does, in the exit-work loop, at
// the thread's next return to user mode. So a flagged task whose return a trap saw reads clear,
// unless the kernel set the flag again for itself (task work queued: task->task_works); one
// with no return seen since its flag (in the kernel: blocked, or its mark expired) may read
// set. Set after a return seen and with no task work is what hvprof would have left.
#include <errno.h>
#include <string.h>

#include "sampler_internal.h"

#define PF_EXITING 0x00000004u /* task_struct.flags (include/linux/sched.h) */

_Static_assert(offsetof(struct sampler_counters, flag_scan_gone) -
			       offsetof(struct sampler_counters, flag_scans) ==
		       sizeof(uint64_t) * FLAG_SCAN_GONE,
	       "the flag_scan counters are contiguous, in enum flag_scan_kind's order");

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

static struct flag_ledger_entry *slot_of(struct flag_ledger *l, uint64_t task)
{
	/* SAFETY: modulo FLAG_LEDGER_SLOTS (task_structs are 64-byte aligned: the bits above
	 * those spread them) */
	return &l->e[(task >> 6) % FLAG_LEDGER_SLOTS];
}

/* Has @e's task work queued (task->task_works not NULL)? False where it cannot be read. */
static bool task_work_queued(const struct sampler *s, const struct flag_ledger_entry *e)
{
	uint64_t works = 0;

	return e->task_works_gpa &&
	       gmem_read(s->mem, e->task_works_gpa, &works, sizeof(works)) == 0 && works;
}

void flag_ledger_note(struct svcpu *sv, uint64_t task, int32_t pid, const struct gi_paging *pg,
		      int was_set)
{
	struct sampler *s = sv->s;
	const struct gi_layout *l;
	struct flag_ledger_entry *e, n = { .task = task, .pid = pid };

	if (!s->ledger || !task)
		return;
	e = slot_of(s->ledger, task);
	if (e->task == task && e->pid == pid) {
		/* its earlier flag met a return: the kernel cleared it, unless it set its own */
		if (was_set >= 0 && e->returned) {
			if (!was_set)
				sv->c.flags_seen_clear++;
			else if (task_work_queued(s, e))
				sv->c.flags_seen_task_work++;
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
	if (field_gpa(s, pg, task, l->task_task_works, 8, &n.task_works_gpa))
		n.task_works_gpa = 0; /* set flags after a return are then all "other" */
	*e = n;
}

void flag_ledger_returned(struct sampler *s, uint64_t task, int32_t pid)
{
	struct flag_ledger_entry *e;

	if (!s->ledger)
		return;
	pthread_mutex_lock(&s->marks.lock);
	e = slot_of(s->ledger, task);
	if (e->task == task && e->pid == pid)
		e->returned = true;
	pthread_mutex_unlock(&s->marks.lock);
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
	if (!(ti_flags & (1ull << s->traps.ew.notify_bit)))
		return FLAG_SCAN_CLEAR;
	if (!e->returned)
		return FLAG_SCAN_SET_UNRETURNED;
	if (task_work_queued(s, e))
		return FLAG_SCAN_SET_TASK_WORK;
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
