// SPDX-License-Identifier: MIT
// The flag strategy's read-back (issue 17: evidence, from the guest's own memory, that the flags
// hvprof sets are cleared): the tasks it flagged are kept in a small ledger, and at each detach
// and at the end of the run their thread_info.flags are read again. hvprof never clears
// TIF_NOTIFY_RESUME itself (docs/guest-interface.md); the kernel does, in the exit-work loop, at
// the thread's next return to user mode. So a flagged task that went back to user mode since
// reads clear; one still in the kernel since its flag (blocked: its mark pending) reads set; a
// set flag with no mark pending is the kernel's own (task work queued now) or one hvprof left.
#include <errno.h>
#include <string.h>

#include "sampler_internal.h"

#define PF_EXITING 0x00000004u /* task_struct.flags (include/linux/sched.h) */

enum { SCANS, TASKS, CLEAR, SET_PENDING, SET_OTHER, GONE };

/* The GPA of the field at byte @off of @task (through @pg); @size bytes within one page. */
static int field_gpa(const struct sampler *s, const struct gi_paging *pg, uint64_t task,
		     uint32_t off, uint32_t size, uint64_t *gpa)
{
	uint64_t kva, page_size;

	if (off == UINT32_MAX || __builtin_add_overflow(task, (uint64_t)off, &kva) ||
	    (kva & (size - 1)) || !gi_is_kernel_gva(pg, kva))
		return -EINVAL;
	return gi_gva_to_gpa(s->mem, pg, kva, gpa, &page_size, NULL);
}

void flag_ledger_note(struct svcpu *sv, uint64_t task, int32_t pid, const struct gi_paging *pg,
		      int was_set)
{
	struct sampler *s = sv->s;
	const struct gi_layout *l;
	struct flag_ledger_entry *e, n = { .task = task, .pid = pid };

	if (!s->ledger || !task)
		return;
	/* SAFETY: the index is taken modulo FLAG_LEDGER_SLOTS (task_structs are 64-byte
	 * aligned: the bits above those spread them) */
	e = &s->ledger->e[(task >> 6) % FLAG_LEDGER_SLOTS];
	if (e->task == task && e->pid == pid) {
		/* flagged before, and since returned to user mode (a new mark: a new stay), or its
		 * mark ended otherwise: the kernel has cleared that flag, unless it set its own */
		if (was_set >= 0)
			was_set ? sv->c.flags_seen_set++ : sv->c.flags_seen_clear++;
		return; /* its fields found already */
	}
	l = gi_layout(s->gi);
	if (!l || field_gpa(s, pg, task, l->task_ti_flags, 8, &n.ti_flags_gpa) ||
	    field_gpa(s, pg, task, l->task_pid, 4, &n.pid_gpa) ||
	    field_gpa(s, pg, task, l->task_flags, 4, &n.task_flags_gpa))
		return; /* not read back: the scan counts only what it can read */
	*e = n;
}

/* What @e reads as now: one of CLEAR, SET_PENDING, SET_OTHER, GONE. */
static int scan_one(struct sampler *s, const struct flag_ledger_entry *e)
{
	uint64_t ti_flags;
	int32_t pid;
	uint32_t flags;

	if (gmem_read(s->mem, e->pid_gpa, &pid, sizeof(pid)) ||
	    gmem_read(s->mem, e->task_flags_gpa, &flags, sizeof(flags)) ||
	    gmem_read(s->mem, e->ti_flags_gpa, &ti_flags, sizeof(ti_flags)))
		return GONE;
	if (pid != e->pid || (flags & PF_EXITING))
		return GONE; /* freed and reused, or exiting: it never returns to user mode */
	if (!(ti_flags & (1ull << s->traps.ew.notify_bit)))
		return CLEAR;
	return marks_flag_pending(&s->marks, e->task, e->pid) ? SET_PENDING : SET_OTHER;
}

void flag_ledger_scan(struct sampler *s)
{
	uint64_t n[GONE + 1] = { 0 };

	if (!s->ledger || !s->traps.flag)
		return;
	pthread_mutex_lock(&s->marks.lock);
	for (unsigned int i = 0; i < FLAG_LEDGER_SLOTS; i++) {
		if (!s->ledger->e[i].task)
			continue;
		n[TASKS]++;
		n[scan_one(s, &s->ledger->e[i])]++;
	}
	/* the next scan reads back the tasks flagged from now on (the next window's) */
	memset(s->ledger, 0, sizeof(*s->ledger));
	pthread_mutex_unlock(&s->marks.lock);
	n[SCANS] = 1;
	for (unsigned int k = 0; k <= GONE; k++)
		atomic_fetch_add(&s->flag_scan[k], n[k]);
}
