// SPDX-License-Identifier: MIT
// The flag strategy's read-back (sampler/flagscan.c) over the fake kernel: the tasks flagged are
// read back from guest RAM and each counted as clear (the kernel cleared its flag), set with its
// mark pending (still in the kernel), set with none (left), or gone (another pid, exiting).
#include <stdlib.h>
#include <string.h>

#include "sampler_fixture.h"
#include "test.h"

#define TIF_NOTIFY_RESUME_BIT 1

static struct fakemem *fm; /* the fixture's guest RAM */

/* As sampler.c's set_notify_resume, on the fake's RAM: OR the bit into thread_info.flags. */
static int flag_set(struct svcpu *sv, uint64_t task, const struct gi_paging *pg,
		    bool *was_set)
{
	uint64_t gpa, old;
	int err = gi_task_flags_gpa(sv->s->gi, sv->s->mem, pg, task, &gpa);

	if (err)
		return err;
	old = fakemem_r64(fm, gpa);
	*was_set = old & 1ull << TIF_NOTIFY_RESUME_BIT;
	fakemem_w64(fm, gpa, old | 1ull << TIF_NOTIFY_RESUME_BIT);
	return 0;
}

static void kernel_clears(struct fixture *f)
{
	uint64_t gpa = FK_TASK_GPA + gi_layout(f->fk.gi)->task_ti_flags;

	fakemem_w64(fm, gpa, fakemem_r64(fm, gpa) & ~(1ull << TIF_NOTIFY_RESUME_BIT));
}

/* One flagged mark of the fake task (resolved at its return unless @pending), then a scan:
 * the counters as they are after it. */
static int flag_then_scan(struct fixture *f, bool pending, bool cleared,
			  struct sampler_counters *c)
{
	struct svcpu *sv = &f->s->vcpus[0];
	struct mark_req req = req_of(f, FK_PID, &f->entry);

	ASSERT_TRUE(marks_take(sv, &req) != 0);
	if (!pending)
		marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg,
					&f->entry);
	if (cleared)
		kernel_clears(f);
	flag_ledger_scan(f->s);
	sampler_get_counters(f->s, c);
	if (pending)
		marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg,
					&f->entry);
	return TEST_OK;
}

#define SCAN_COUNTS(c, scans, tasks, clear, pend, other, gone)            \
	do {                                                                \
		ASSERT_EQ_U64((c).flag_scans, (scans));                     \
		ASSERT_EQ_U64((c).flag_scan_tasks, (tasks));                \
		ASSERT_EQ_U64((c).flag_scan_clear, (clear));                \
		ASSERT_EQ_U64((c).flag_scan_set_pending, (pend));           \
		ASSERT_EQ_U64((c).flag_scan_set_other, (other));            \
		ASSERT_EQ_U64((c).flag_scan_gone, (gone));                  \
	} while (0)

static int test_flag_scan(void)
{
	struct fixture f;
	struct sampler_counters c;
	uint64_t pid_gpa, flags_gpa;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		goto fini;
	fm = &f.fk.fm;
	pid_gpa = FK_TASK_GPA + gi_layout(f.fk.gi)->task_pid;
	flags_gpa = FK_TASK_GPA + gi_layout(f.fk.gi)->task_flags;
	f.s->marks.flag_marks = true;
	f.s->marks.set_flag = flag_set;
	f.s->traps.flag = true;
	f.s->traps.ew.notify_bit = TIF_NOTIFY_RESUME_BIT;
	f.s->ledger = calloc(1, sizeof(*f.s->ledger));
	ASSERT_TRUE(f.s->ledger != NULL);

	/* flagged, still in the kernel (its mark pending): set, explained */
	ASSERT_EQ_INT(flag_then_scan(&f, true, false, &c), TEST_OK);
	SCAN_COUNTS(c, 1, 1, 0, 1, 0, 0);
	/* the scan empties the ledger: the next reads back only what is flagged after it */
	flag_ledger_scan(f.s);
	sampler_get_counters(f.s, &c);
	SCAN_COUNTS(c, 2, 1, 0, 1, 0, 0);
	/* flagged, back in user mode, the kernel cleared it: clear */
	ASSERT_EQ_INT(flag_then_scan(&f, false, true, &c), TEST_OK);
	SCAN_COUNTS(c, 3, 2, 1, 1, 0, 0);
	/* resolved but the flag still set, no mark pending: left (the kernel's own, or ours) */
	ASSERT_EQ_INT(flag_then_scan(&f, false, false, &c), TEST_OK);
	SCAN_COUNTS(c, 4, 3, 1, 1, 1, 0);
	/* exiting (PF_EXITING) or another pid in its place: gone, whatever its flags */
	fakemem_w32(fm, flags_gpa, 0x00400104);
	ASSERT_EQ_INT(flag_then_scan(&f, true, false, &c), TEST_OK);
	SCAN_COUNTS(c, 5, 4, 1, 1, 1, 1);
	fakemem_w32(fm, flags_gpa, 0x00400100);
	{
		struct mark_req req = req_of(&f, FK_PID, &f.entry);

		ASSERT_TRUE(marks_take(&f.s->vcpus[0], &req) != 0);
		fakemem_w32(fm, pid_gpa, FK_PID + 1); /* freed, reused */
		flag_ledger_scan(f.s);
		fakemem_w32(fm, pid_gpa, FK_PID);
		marks_resolve_at_return(&f.s->vcpus[0], f.fk.task_kva, FK_PID, f.fk.mm_kva,
					&f.fk.fm.pg, &f.entry);
		sampler_get_counters(f.s, &c);
		SCAN_COUNTS(c, 6, 5, 1, 1, 1, 2);
	}
	/* the same task_struct, another thread's now, flagged: read back under its new pid */
	{
		struct mark_req req = req_of(&f, FK_PID, &f.entry);
		struct mark_req req2 = req_of(&f, FK_PID + 1, &f.entry);

		ASSERT_TRUE(marks_take(&f.s->vcpus[0], &req) != 0);
		marks_resolve_at_return(&f.s->vcpus[0], f.fk.task_kva, FK_PID, f.fk.mm_kva,
					&f.fk.fm.pg, &f.entry);
		fakemem_w32(fm, pid_gpa, FK_PID + 1);
		ASSERT_TRUE(marks_take(&f.s->vcpus[0], &req2) != 0);
		flag_ledger_scan(f.s);
		marks_resolve_at_return(&f.s->vcpus[0], f.fk.task_kva, FK_PID + 1, f.fk.mm_kva,
					&f.fk.fm.pg, &f.entry);
		fakemem_w32(fm, pid_gpa, FK_PID);
		sampler_get_counters(f.s, &c);
		SCAN_COUNTS(c, 7, 6, 1, 2, 1, 2);
	}
	/* a new mark's flag on a task flagged before: found clear (the kernel cleared the
	 * earlier one at its return) or set (it did not, or set its own); a mark flagged again
	 * in its stay is not counted (its flag may well be set still) */
	{
		struct svcpu *sv = &f.s->vcpus[0];
		struct mark_req req = req_of(&f, FK_PID, &f.entry);

		ASSERT_TRUE(marks_take(sv, &req) != 0); /* enters the ledger */
		ASSERT_TRUE(marks_take(sv, &req) != 0); /* the same stay: flagged again */
		marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg,
					&f.entry);
		kernel_clears(&f);
		ASSERT_TRUE(marks_take(sv, &req) != 0);
		marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg,
					&f.entry);
		ASSERT_TRUE(marks_take(sv, &req) != 0); /* the kernel did not clear it */
		marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg,
					&f.entry);
		kernel_clears(&f);
		sampler_get_counters(f.s, &c);
		ASSERT_EQ_U64(c.flags_seen_clear, 1);
		ASSERT_EQ_U64(c.flags_seen_set, 1);
		flag_ledger_scan(f.s);
	}
	/* not the flag strategy: no scan */
	f.s->traps.flag = false;
	flag_ledger_scan(f.s);
	sampler_get_counters(f.s, &c);
	SCAN_COUNTS(c, 8, 7, 2, 2, 1, 2);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

static const struct test_case tests[] = {
	{ "flag strategy: flagged tasks read back (clear, set and pending, set and left, gone)",
	  test_flag_scan },
};

TEST_MAIN(tests)
