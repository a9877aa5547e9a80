// SPDX-License-Identifier: MIT
// The flag strategy's read-back (sampler/flagscan.c) over the fake kernel: the tasks flagged are
// read back from guest RAM and each counted as clear (the kernel cleared its flag), set with no
// return seen (still in the kernel), set with task work queued (the kernel's own), set with
// neither (left), or gone (another pid, exiting, unreadable); and a new mark's flag on a task
// whose return was seen says whether the kernel had cleared the earlier one.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gi_internal.h"
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

static uint64_t field(struct fixture *f, uint32_t off)
{
	return FK_TASK_GPA + off;
}

static void kernel_clears(struct fixture *f)
{
	uint64_t gpa = field(f, gi_layout(f->fk.gi)->task_ti_flags);

	fakemem_w64(fm, gpa, fakemem_r64(fm, gpa) & ~(1ull << TIF_NOTIFY_RESUME_BIT));
}

/* The fixture with the flag strategy: the flag written into the fake's RAM (flag_set) and a
 * ledger. Return: 0, or -1 (the fixture is failed; fixture_fini it all the same). */
static int flag_fixture_init(struct fixture *f)
{
	if (fixture_init(f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		return -1;
	fm = &f->fk.fm;
	f->s->marks.flag_marks = true;
	f->s->marks.set_flag = flag_set;
	f->s->traps.flag = true;
	f->s->traps.ew[0].notify_bit = TIF_NOTIFY_RESUME_BIT;
	f->s->ledger = calloc(1, sizeof(*f->s->ledger));
	return f->s->ledger ? 0 : -1;
}

/* A new flagged mark of the fake task (pid @pid). */
static int flag(struct fixture *f, int32_t pid)
{
	struct mark_req req = req_of(f, pid, &f->entry);

	ASSERT_TRUE(marks_take(&f->s->vcpus[0], &req) != 0);
	return TEST_OK;
}

/* Its mark resolved: at its return (@seen: a trap's, or a sample past its last read of the
 * flags), or from its entry registers with no return seen (marks_flush: as a mark that expired
 * while its thread blocked, or one pending at the end). */
static int resolve_mark(struct fixture *f, int32_t pid, bool seen)
{
	struct svcpu *sv = &f->s->vcpus[0];

	ASSERT_TRUE(marks_has(sv, f->fk.task_kva, pid));
	if (seen)
		marks_resolve_at_return(sv, f->fk.task_kva, pid, f->fk.mm_kva, &f->fk.fm.pg,
					&f->entry);
	else
		marks_flush(sv);
	ASSERT_TRUE(!marks_has(sv, f->fk.task_kva, pid));
	return TEST_OK;
}

#define FLAG(f, pid) ASSERT_EQ_INT(flag((f), (pid)), TEST_OK)

/* A flag of the fake task, its mark resolved (the return seen by a trap, or not), then a scan
 * with the 8-byte word at @gpa (when not 0) holding @value, put back to 0 after. */
static int flag_scan_with(struct fixture *f, bool seen, uint64_t gpa, uint64_t value)
{
	ASSERT_EQ_INT(flag(f, FK_PID), TEST_OK);
	ASSERT_EQ_INT(resolve_mark(f, FK_PID, seen), TEST_OK);
	if (gpa)
		fakemem_w64(fm, gpa, value);
	flag_ledger_scan(f->s);
	if (gpa)
		fakemem_w64(fm, gpa, 0);
	return TEST_OK;
}

#define SCAN_WITH(f, seen, gpa, value) \
	ASSERT_EQ_INT(flag_scan_with((f), (seen), (gpa), (value)), TEST_OK)
#define resolve(f, pid, seen) ASSERT_EQ_INT(resolve_mark((f), (pid), (seen)), TEST_OK)

/* The flag_scan counters since the start, by name: scans, tasks, then clear, unreturned,
 * the kernel's own, other, gone. */
static int counts(struct fixture *f, const uint64_t want[FLAG_SCAN_N])
{
	struct sampler_counters c;

	sampler_get_counters(f->s, &c);
	ASSERT_EQ_U64(c.flag_scans, want[FLAG_SCANS]);
	ASSERT_EQ_U64(c.flag_scan_tasks, want[FLAG_SCAN_TASKS]);
	ASSERT_EQ_U64(c.flag_scan_clear, want[FLAG_SCAN_CLEAR]);
	ASSERT_EQ_U64(c.flag_scan_set_unreturned, want[FLAG_SCAN_SET_UNRETURNED]);
	ASSERT_EQ_U64(c.flag_scan_set_kernel, want[FLAG_SCAN_SET_KERNEL]);
	ASSERT_EQ_U64(c.flag_scan_set_other, want[FLAG_SCAN_SET_OTHER]);
	ASSERT_EQ_U64(c.flag_scan_gone, want[FLAG_SCAN_GONE]);
	return TEST_OK;
}

#define COUNTS(f, ...) ASSERT_EQ_INT(counts((f), (const uint64_t[FLAG_SCAN_N]){ __VA_ARGS__ }), \
				     TEST_OK)

static int flag_scans(struct fixture *f)
{
	const struct gi_layout *l = gi_layout(f->fk.gi);
	uint64_t pid_gpa = field(f, l->task_pid), flags_gpa = field(f, l->task_flags);
	uint64_t works_gpa = field(f, l->task_task_works);
	uint64_t rseq_gpa = field(f, l->task_rseq), nivcsw_gpa = field(f, l->task_nivcsw);
	struct sampler_counters c;

	/* flagged, its mark pending: set, no return seen (in the kernel) */
	FLAG(f, FK_PID);
	flag_ledger_scan(f->s);
	COUNTS(f, 1, 1, 0, 1, 0, 0, 0);
	resolve(f, FK_PID, true);
	/* the scan emptied the ledger: the next reads back only what was flagged since */
	flag_ledger_scan(f->s);
	COUNTS(f, 2, 1, 0, 1, 0, 0, 0);
	/* flagged, its return seen, the kernel cleared it: clear */
	FLAG(f, FK_PID);
	resolve(f, FK_PID, true);
	kernel_clears(f);
	flag_ledger_scan(f->s);
	COUNTS(f, 3, 2, 1, 1, 0, 0, 0);
	/* its return seen but still set: the kernel's task work queued, or rseq (a registered
	 * thread, task->rseq, switched out since the return: rseq_preempt() flags it), or
	 * neither: left */
	SCAN_WITH(f, true, works_gpa, 0xffff888000360000ull);
	COUNTS(f, 4, 3, 1, 1, 1, 0, 0);
	fakemem_w64(fm, rseq_gpa, FK_USER_STACK); /* registered */
	SCAN_WITH(f, true, nivcsw_gpa, 1);        /* a switch after the return: rseq's */
	COUNTS(f, 5, 4, 1, 1, 2, 0, 0);
	SCAN_WITH(f, true, 0, 0);                 /* none since: not rseq's */
	COUNTS(f, 6, 5, 1, 1, 2, 1, 0);
	/* its switches unreadable at the return (readable again at the scan): any may have come
	 * after */
	FLAG(f, FK_PID);
	flag_ledger_slot(f->s->ledger, f->fk.task_kva)->nvcsw_gpa ^= 1ull << 40;
	resolve(f, FK_PID, true);
	flag_ledger_slot(f->s->ledger, f->fk.task_kva)->nvcsw_gpa ^= 1ull << 40;
	flag_ledger_scan(f->s);
	COUNTS(f, 7, 6, 1, 1, 3, 1, 0);
	/* a kernel without rseq (no task->rseq): the return reads no switches */
	FLAG(f, FK_PID);
	flag_ledger_slot(f->s->ledger, f->fk.task_kva)->rseq_gpa = 0;
	resolve(f, FK_PID, true);
	ASSERT_TRUE(!flag_ledger_slot(f->s->ledger, f->fk.task_kva)->switches_known);
	kernel_clears(f);
	flag_ledger_scan(f->s);
	COUNTS(f, 8, 7, 2, 1, 3, 1, 0);
	fakemem_w64(fm, rseq_gpa, 0);             /* not registered: switches tell nothing */
	SCAN_WITH(f, true, nivcsw_gpa, 1);
	COUNTS(f, 9, 8, 2, 1, 3, 2, 0);
	/* its mark ended with no return seen (expired while blocked): set, explained as such
	 * (before any task work it queued since) */
	SCAN_WITH(f, false, works_gpa, 0xffff888000360000ull);
	COUNTS(f, 10, 9, 2, 2, 3, 2, 0);
	/* exiting (PF_EXITING), another pid in its place, or unreadable: gone */
	fakemem_w32(fm, flags_gpa, 0x00400104);
	FLAG(f, FK_PID);
	flag_ledger_scan(f->s);
	fakemem_w32(fm, flags_gpa, 0x00400100);
	resolve(f, FK_PID, false);
	FLAG(f, FK_PID);
	fakemem_w32(fm, pid_gpa, FK_PID + 1);
	flag_ledger_scan(f->s);
	fakemem_w32(fm, pid_gpa, FK_PID);
	resolve(f, FK_PID, false);
	FLAG(f, FK_PID);
	flag_ledger_slot(f->s->ledger, f->fk.task_kva)->ti_flags_gpa = 1ull << 40;
	flag_ledger_scan(f->s);
	resolve(f, FK_PID, false);
	COUNTS(f, 13, 12, 2, 2, 3, 2, 3);
	/* the same task_struct, another thread's now, flagged: read back under its new pid */
	FLAG(f, FK_PID);
	resolve(f, FK_PID, true);
	kernel_clears(f);
	fakemem_w32(fm, pid_gpa, FK_PID + 1);
	FLAG(f, FK_PID + 1);
	flag_ledger_scan(f->s);
	fakemem_w32(fm, pid_gpa, FK_PID);
	resolve(f, FK_PID + 1, false);
	COUNTS(f, 14, 13, 2, 3, 3, 2, 3);
	/* not a kernel address (a user page mapped in this mm), or misaligned: not kept */
	flag_ledger_note(&f->s->vcpus[0], FK_USER_STACK, FK_PID, &f->fk.fm.pg, -1);
	flag_ledger_note(&f->s->vcpus[0], f->fk.task_kva + 4, FK_PID, &f->fk.fm.pg, -1);
	flag_ledger_scan(f->s);
	COUNTS(f, 15, 13, 2, 3, 3, 2, 3);
	kernel_clears(f);

	/* a new mark's flag on a task whose return was seen: found clear (the kernel cleared
	 * the earlier one) or set; not counted with no return seen since, nor for a mark
	 * flagged again in its stay (its flag may well be set still) */
	FLAG(f, FK_PID);                               /* enters the ledger */
	ASSERT_EQ_INT(flag(f, FK_PID), TEST_OK);       /* the same stay: flagged again */
	resolve(f, FK_PID, true);
	kernel_clears(f);
	FLAG(f, FK_PID);                               /* clear */
	resolve(f, FK_PID, true);
	FLAG(f, FK_PID);                               /* set: not cleared */
	resolve(f, FK_PID, true);
	fakemem_w64(fm, works_gpa, 0xffff888000360000ull);
	FLAG(f, FK_PID);                               /* set, task work queued */
	fakemem_w64(fm, works_gpa, 0);
	resolve(f, FK_PID, true);
	fakemem_w64(fm, rseq_gpa, FK_USER_STACK);      /* registered, */
	fakemem_w64(fm, nivcsw_gpa, 1);                /* switched out since the return */
	FLAG(f, FK_PID);                               /* set: rseq's */
	resolve(f, FK_PID, true);
	FLAG(f, FK_PID);                               /* set, no switch since: not rseq's */
	fakemem_w64(fm, rseq_gpa, 0);
	fakemem_w64(fm, nivcsw_gpa, 0);
	resolve(f, FK_PID, false);
	FLAG(f, FK_PID);                               /* no return seen: not counted */
	ASSERT_EQ_INT(flag(f, FK_PID), TEST_OK);       /* flagged again in its stay: nor this */
	resolve(f, FK_PID, true);
	kernel_clears(f);
	sampler_get_counters(f->s, &c);
	ASSERT_EQ_U64(c.flags_seen_clear, 1);
	ASSERT_EQ_U64(c.flags_seen_kernel, 2);
	ASSERT_EQ_U64(c.flags_seen_set, 2);
	flag_ledger_scan(f->s);
	COUNTS(f, 16, 14, 3, 3, 3, 2, 3);
	/* not the flag strategy: no scan */
	f->s->traps.flag = false;
	flag_ledger_scan(f->s);
	COUNTS(f, 16, 14, 3, 3, 3, 2, 3);
	return TEST_OK;
}

/* @fn on a flag fixture made for it, then freed. */
static int with_flag_fixture(int (*fn)(struct fixture *f))
{
	struct fixture f;
	int ret = TEST_FAIL;

	if (flag_fixture_init(&f) == 0)
		ret = fn(&f);
	fixture_fini(&f);
	return ret;
}

static int test_flag_scan(void)
{
	return with_flag_fixture(flag_scans);
}

/* Through the production path: a kernel sample flags the thread (sample_from_regs), the exit-
 * work loop's hit resolves it (trap_loop_resolve) and notes the return, the kernel clears the
 * flag, and the next stay's flag finds it clear. */
static int test_flag_return_seen_by_trap(void)
{
	struct fixture f;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct gi_paging pg;
	struct sampler_counters c;
	struct svcpu *sv;
	int ret = TEST_FAIL;

	if (flag_fixture_init(&f))
		goto fini;
	sv = &f.s->vcpus[0];
	ASSERT_EQ_INT(fixture_kernel_samples(&f, &regs, &sregs), TEST_OK);
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 1000 * (i + 1), 0), 0);
		ASSERT_TRUE(sv->sample.cookie != 0);
		pg = sampler_exit_paging(sv, &sregs);
		trap_loop_resolve(sv, &regs, &sregs, &pg);
		kernel_clears(&f);
	}
	sampler_get_counters(f.s, &c);
	ASSERT_EQ_U64(c.marks_flagged, 2);
	ASSERT_EQ_U64(c.flags_seen_clear, 1);
	ASSERT_EQ_U64(c.flags_seen_kernel + c.flags_seen_set, 0);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

/* A detach reads the window's flagged tasks back before it drops their marks: a mark pending at
 * the detach leaves its flag set with no return seen; the next window starts an empty ledger. */
static int test_flag_scan_at_detach(void)
{
	struct sampler_window win = { .sample_hz = 500, .call_graph = SAMPLER_CALL_GRAPH_FP };
	struct sampler_detach_info info;
	struct fixture f;
	int ret = TEST_FAIL;

	if (flag_fixture_init(&f))
		goto fini;
	f.s->cfg.start = SAMPLER_START_ATTACH; /* as sampler_new makes it: sampling off */
	atomic_store(&f.s->sampling_start, 0);
	ASSERT_EQ_INT(sampler_attach(f.s, &win), 0);
	FLAG(&f, FK_PID);
	ASSERT_EQ_INT(sampler_detach(f.s, 1000000, &info), 0);
	ASSERT_EQ_INT(info.marks_dropped, 1);
	COUNTS(&f, 1, 1, 0, 1, 0, 0, 0);
	kernel_clears(&f);
	ASSERT_EQ_INT(sampler_attach(f.s, &win), 0);
	ASSERT_EQ_INT(sampler_detach(f.s, 1000000, &info), 0);
	COUNTS(&f, 2, 1, 0, 1, 0, 0, 0);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

/* A hit that finds no mark for its task while another's is pending: a task hvprof never flagged
 * (the kernel's own flag), one whose mark ended with no return seen (hvprof's flag acting late),
 * one flagged and returned since (the kernel set it again: task work queued, or no reason). */
/* The exit-work loop's hit of the fake task, which has no mark (another's is pending): as
 * trap_loop_resolve resolves it. */
static void loop_hit(struct fixture *f)
{
	struct svcpu *sv = &f->s->vcpus[0];

	sv->in_loop_hit = true;
	marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg, &f->entry);
	sv->in_loop_hit = false;
}

/* The no_mark_* counters: unflagged, late, kernel, other. */
static int no_marks(struct fixture *f, uint64_t unflagged, uint64_t late, uint64_t kernel,
		    uint64_t other)
{
	struct sampler_counters c;

	sampler_get_counters(f->s, &c);
	ASSERT_EQ_U64(c.no_mark_unflagged, unflagged);
	ASSERT_EQ_U64(c.no_mark_flagged_late, late);
	ASSERT_EQ_U64(c.no_mark_kernel, kernel);
	ASSERT_EQ_U64(c.no_mark_other, other);
	return TEST_OK;
}

#define NO_MARKS(f, ...) ASSERT_EQ_INT(no_marks((f), __VA_ARGS__), TEST_OK)

static int no_mark_kinds(struct fixture *f)
{
	struct svcpu *sv = &f->s->vcpus[0];
	const struct gi_layout *l = gi_layout(f->fk.gi);
	uint64_t works_gpa = field(f, l->task_task_works), rseq_gpa = field(f, l->task_rseq);
	uint64_t nvcsw_gpa = field(f, l->task_nvcsw);
	struct mark_req other = req_of(f, FK_PID + 7, &f->entry);
	struct sampler_counters c;

	other.task = f->fk.task_kva + 0x10000;
	ASSERT_TRUE(marks_take(sv, &other) != 0);
	loop_hit(f);                    /* never flagged: the kernel's own flag */
	NO_MARKS(f, 1, 0, 0, 0);
	/* a sysretq/iretq hit without a mark: every return hits those, its flag tells nothing */
	marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg, &f->entry);
	NO_MARKS(f, 1, 0, 0, 0);
	FLAG(f, FK_PID);
	marks_flush(sv);                /* its mark (and the other) ended, no return seen */
	ASSERT_TRUE(marks_take(sv, &other) != 0);
	fakemem_w64(fm, works_gpa, 0xffff888000360000ull);
	loop_hit(f);                    /* late, whatever the kernel queued meanwhile */
	fakemem_w64(fm, works_gpa, 0);
	NO_MARKS(f, 1, 1, 0, 0);
	loop_hit(f);                    /* that hit was a return: set again since, no reason */
	NO_MARKS(f, 1, 1, 0, 1);
	fakemem_w64(fm, works_gpa, 0xffff888000360000ull);
	loop_hit(f);                    /* task work queued: the kernel's own */
	fakemem_w64(fm, works_gpa, 0);
	NO_MARKS(f, 1, 1, 1, 1);
	/* rseq: an area registered since the last return (the hit before; sys_rseq flags the
	 * caller), a voluntary switch since, an area registered anew (after an execve), or
	 * none of those */
	fakemem_w64(fm, rseq_gpa, FK_USER_STACK);
	loop_hit(f);
	NO_MARKS(f, 1, 1, 2, 1);
	fakemem_w64(fm, nvcsw_gpa, 5);
	loop_hit(f);
	NO_MARKS(f, 1, 1, 3, 1);
	fakemem_w64(fm, rseq_gpa, FK_USER_STACK + 0x1000);
	loop_hit(f);
	NO_MARKS(f, 1, 1, 4, 1);
	loop_hit(f);
	NO_MARKS(f, 1, 1, 4, 2);
	fakemem_w64(fm, rseq_gpa, 0);
	fakemem_w64(fm, nvcsw_gpa, 0);
	sampler_get_counters(f->s, &c);
	ASSERT_EQ_U64(c.traps_no_mark, 9);
	/* no mark pending at all: an idle hit, not counted by kind */
	marks_flush(sv);
	loop_hit(f);
	NO_MARKS(f, 1, 1, 4, 2);
	return TEST_OK;
}

static int test_no_mark_kinds(void)
{
	return with_flag_fixture(no_mark_kinds);
}

/* nvcsw and nivcsw are kept for one read together: only where they are neighbours and the two
 * words stay in one page. */
static int switches_kept(struct fixture *f)
{
	struct gi_layout *l = &f->fk.gi->layout;

	/* read at a return only from a thread with an rseq area: for one without, any area
	 * registered later tells the kernel's reason by itself */
	for (int registered = 0; registered < 2; registered++) {
		struct flag_ledger_entry *e;
		struct read_counter rc;

		fakemem_w64(fm, field(f, l->task_rseq), registered ? FK_USER_STACK : 0);
		FLAG(f, FK_PID);
		e = flag_ledger_slot(f->s->ledger, f->fk.task_kva);
		ASSERT_TRUE(e->nvcsw_gpa != 0);
		rc = (struct read_counter){ .inner = f->fk.fm.mem, .gpa = e->nvcsw_gpa, .size = 16,
					    .len = 16 };
		f->fk.fm.mem = (struct gmem){ .read = read_counter_read, .ctx = &rc };
		resolve(f, FK_PID, true);
		f->fk.fm.mem = rc.inner;
		ASSERT_EQ_INT((int)rc.n, registered);
		ASSERT_TRUE(e->switches_known);
		kernel_clears(f);
	}
	fakemem_w64(fm, field(f, l->task_rseq), 0);
	flag_ledger_scan(f->s); /* empties the ledger */
	l->task_nivcsw += 8;   /* not neighbours */
	FLAG(f, FK_PID);
	ASSERT_EQ_U64(flag_ledger_slot(f->s->ledger, f->fk.task_kva)->nvcsw_gpa, 0);
	resolve(f, FK_PID, false);
	flag_ledger_scan(f->s);
	l->task_nvcsw = 0xff8; /* the pair would cross the task's first page (page-aligned) */
	l->task_nivcsw = 0x1000;
	ASSERT_EQ_U64(f->fk.task_kva & 0xfff, 0);
	FLAG(f, FK_PID);
	ASSERT_EQ_U64(flag_ledger_slot(f->s->ledger, f->fk.task_kva)->nvcsw_gpa, 0);
	resolve(f, FK_PID, false);
	return TEST_OK;
}

static int test_switches_kept(void)
{
	return with_flag_fixture(switches_kept);
}

/* task_structs sit a few to a slab (6.1: 5 of 6 464 bytes in each 32 KiB-aligned slab): their
 * low address bits take 5 values, and the slots must not follow them (100 tasks of 20 slabs
 * fall in 5 slots by bits 6-13 alone; a fair hash leaves ~83 of 100 distinct). */
static int test_slots_spread(void)
{
	static struct flag_ledger l;
	bool used[FLAG_LEDGER_SLOTS] = { false };
	unsigned int distinct = 0;

	for (uint64_t slab = 0; slab < 20; slab++)
		for (uint64_t i = 0; i < 5; i++) {
			uint64_t task = 0xffff888004000000ull + slab * 0x8000 + i * 6464;
			size_t k = (size_t)(flag_ledger_slot(&l, task) - l.e);

			ASSERT_TRUE(k < FLAG_LEDGER_SLOTS);
			distinct += !used[k];
			used[k] = true;
		}
	printf("# 100 tasks in %u slots\n", distinct);
	ASSERT_TRUE(distinct >= 75);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "flag ledger: hits without a mark, by what set the flag", test_no_mark_kinds },
	{ "flag ledger: the switch counts kept only as one in-page pair", test_switches_kept },
	{ "flag ledger: tasks of the same slabs spread over the slots", test_slots_spread },
	{ "flag ledger: the loop's hit notes the return, the next flag finds it cleared",
	  test_flag_return_seen_by_trap },
	{ "flag ledger: read back at each detach, before the marks are dropped",
	  test_flag_scan_at_detach },
	{ "flag strategy: flagged tasks read back (clear, set: no return seen, task work, left; "
	  "gone), a new flag finding the last one cleared",
	  test_flag_scan },
};

TEST_MAIN(tests)
