// SPDX-License-Identifier: MIT
// Unit tests of the marks table (sampler/marks.c) without /dev/kvm: mark, reuse of a cookie
// within one kernel stay, resolve at the return on another vCPU, stale registers, expiry from
// pt_regs, the table full, a thread that exits, execve during a stay in the kernel.
#include <string.h>

#include "sampler_fixture.h"
#include "test.h"

/* ---------------------------------------------------------------- marks */

static int test_mark_reuse_resolve(void)
{
	struct fixture f;
	struct mark_req req;
	struct svcpu *sv0, *sv1;
	uint64_t c1, c2;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		return TEST_FAIL;
	sv0 = &f.s->vcpus[0];
	sv1 = &f.s->vcpus[1];
	req = req_of(&f, FK_PID, &f.entry);
	c1 = marks_take(sv0, &req);
	c2 = marks_take(sv0, &req); /* a second sample of the same stay in the kernel */
	if (c1 == 0 || c2 != c1 || sv0->c.marks != 1 || sv0->c.marks_reused != 1 ||
	    atomic_load(&f.s->marks.pending) != 1 || n_first != 1 || n_recs != 0) {
		fprintf(stderr, "take: cookies %llu %llu marks %llu reused %llu first %d\n",
			(unsigned long long)c1, (unsigned long long)c2,
			(unsigned long long)sv0->c.marks, (unsigned long long)sv0->c.marks_reused,
			n_first);
		goto out;
	}
	/* the thread returns to user on the other vCPU with the registers of its entry */
	marks_resolve_at_return(sv1, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	if (n_recs != 1 || check_good_walk(&recs[0], c1) != TEST_OK ||
	    sv1->c.resolved_at_return != 1 || atomic_load(&f.s->marks.pending) != 0 ||
	    n_last != 1)
		goto out;
	/* nothing left for a second return */
	marks_resolve_at_return(sv1, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	if (n_recs != 1 || sv1->c.traps_no_mark != 1)
		goto out;
	/* a new stay gets a new cookie */
	if (marks_take(sv0, &req) == c1)
		goto out;
	ret = TEST_OK;
out:
	fixture_fini(&f);
	return ret;
}

static int test_stale_registers(void)
{
	struct fixture f;
	struct gi_user_regs other = { 0x400200, U + 0x80, U + 0x3000 }, third = { 0x400300,
										  U + 0x40, 0 };
	struct mark_req req;
	struct svcpu *sv;
	uint64_t c1, c2;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		return TEST_FAIL;
	sv = &f.s->vcpus[0];
	req = req_of(&f, FK_PID, &f.entry);
	c1 = marks_take(sv, &req);
	/* same stay, other user registers (execve set up the new program): the old mark ends
	 * with the walk made when it was taken, this sample starts a new one */
	req.entry = &other;
	c2 = marks_take(sv, &req);
	if (!c1 || !c2 || c2 == c1 || n_recs != 1 || check_good_walk(&recs[0], c1) != TEST_OK ||
	    sv->c.resolved_stale != 1)
		goto out;
	/* the return shows yet other registers (a signal frame): the saved walk answers */
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &third);
	if (n_recs != 2 || recs[1].cookie != c2 || recs[1].ips[0] != 0x400200 ||
	    sv->c.resolved_stale != 2 || sv->c.resolved_at_return != 0)
		goto out;
	ret = TEST_OK;
out:
	fixture_fini(&f);
	return ret;
}

/*
 * execve: a mark made under the old mm keeps its walk through samples that see the new mm
 * (exec_mmap switched it; pt_regs still hold the old program's registers), and the return
 * with the new program's registers emits it. A sample already past the switch with no mark
 * of its stay, or in eager mode, has its user part lost (HVP_WALK_EXECVE), never walked in
 * the new mm; a mark whose task changed mm before it expired ends with its saved walk, or
 * lost when it had none.
 */
static int test_execve(void)
{
	struct fixture f;
	struct gi_user_regs started = { 0x401000, U + 0x800, 0 }; /* start_thread's */
	const uint64_t old_mm = 0xffff888000aa0000ull;
	struct mark_req req;
	struct hvp_sample smp;
	struct svcpu *sv;
	uint64_t c1;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4) || write_pt_regs(&f, &f.entry))
		goto fini;
	sv = &f.s->vcpus[0];
	req = req_of(&f, FK_PID, &f.entry);
	req.mm = old_mm;
	req.now_ns = vmm_now_ns() - 5000000; /* bprm_execve, before exec_mmap, 5 ms ago */
	c1 = marks_take(sv, &req);
	req.now_ns = 0;
	req.mm = f.fk.mm_kva;
	req.execve = true; /* exit_mmap of the old mm: the new one has no code range yet */
	ASSERT_EQ_U64(marks_take(sv, &req), c1);
	/* sampled running past the switch: not expired (the timeout is 1 ms) */
	for (unsigned int i = 0; i < MARKS_MAX; i++)
		marks_expire(sv, vmm_now_ns());
	ASSERT_EQ_INT(n_recs, 0);
	req.execve = false; /* load_elf_binary set the code range, start_thread not yet */
	ASSERT_EQ_U64(marks_take(sv, &req), c1);
	ASSERT_EQ_U64(sv->c.marks_execve_kept, 2);
	ASSERT_EQ_INT(n_recs, 0);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &started);
	ASSERT_EQ_INT(n_recs, 1);
	ASSERT_EQ_INT(check_good_walk(&recs[0], c1), TEST_OK);
	ASSERT_EQ_U64(sv->c.resolved_stale, 1);

	/* the first sample of a stay is already past the switch: no mark, nothing walked */
	req.execve = true;
	ASSERT_EQ_U64(marks_take(sv, &req), 0);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 0);
	memset(&smp, 0, sizeof(smp));
	smp.pid = FK_PID;
	smp.rip = FK_STEXT + 0x100;
	user_part_of_kernel_sample(sv, &smp, f.fk.task_kva, &f.fk.fm.pg, NULL, false, f.fk.mm_kva,
				   true);
	ASSERT_EQ_U64(smp.cookie, 0);
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_EXECVE);
	ASSERT_EQ_INT(smp.n_user, 0);
	ASSERT_TRUE(!sv->sample_has_regs);
	ASSERT_EQ_U64(sv->c.user_execve, 1);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 0);

	/* a mark made under the old mm times out after the switch: its saved walk */
	req.execve = false;
	req.mm = old_mm;
	c1 = marks_take(sv, &req);
	for (unsigned int i = 0; i < MARKS_MAX; i++)
		marks_expire(sv, vmm_now_ns() + 10000000);
	ASSERT_EQ_INT(n_recs, 2);
	ASSERT_EQ_INT(check_good_walk(&recs[1], c1), TEST_OK);
	ASSERT_EQ_U64(sv->c.resolved_stale, 2);
	ASSERT_EQ_U64(sv->c.resolved_from_ptregs, 0);
	/* ... and one marked in the entry window had none: lost, with its reason */
	req.entry_known = false;
	c1 = marks_take(sv, &req);
	for (unsigned int i = 0; i < MARKS_MAX; i++)
		marks_expire(sv, vmm_now_ns() + 10000000);
	ASSERT_EQ_INT(n_recs, 3);
	ASSERT_EQ_U64(recs[2].cookie, c1);
	ASSERT_EQ_INT(recs[2].stop, HVP_WALK_EXECVE);
	ASSERT_EQ_INT(recs[2].n, 0);
	ASSERT_EQ_U64(sv->c.dropped_no_regs, 1);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

static int test_eager_execve(void)
{
	struct fixture f;
	struct hvp_sample smp = { .pid = FK_PID, .rip = FK_STEXT + 0x100 };
	struct svcpu *sv;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_EAGER, 4) || write_pt_regs(&f, &f.entry))
		goto fini;
	sv = &f.s->vcpus[0];
	user_part_of_kernel_sample(sv, &smp, f.fk.task_kva, &f.fk.fm.pg, NULL, false, f.fk.mm_kva,
				   true);
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_EXECVE);
	ASSERT_EQ_INT(smp.n_user, 0);
	ASSERT_TRUE(!sv->sample_has_regs);
	ASSERT_EQ_U64(sv->c.user_execve, 1);
	/* the same registers with a complete mm: walked */
	user_part_of_kernel_sample(sv, &smp, f.fk.task_kva, &f.fk.fm.pg, NULL, false, f.fk.mm_kva,
				   false);
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_END);
	ASSERT_EQ_INT(smp.n_user, 4);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

static int test_expire_from_pt_regs(void)
{
	struct fixture f;
	struct mark_req req;
	struct svcpu *sv;
	uint64_t c1, c2;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4) || write_pt_regs(&f, &f.entry))
		goto fini;
	sv = &f.s->vcpus[0];
	req = req_of(&f, FK_PID, &f.entry);
	c1 = marks_take(sv, &req);
	/* marked in the entry window: the registers are not known until pt_regs is complete */
	req.pid = FK_PID + 1;
	req.entry_known = false;
	c2 = marks_take(sv, &req);
	marks_expire(sv, vmm_now_ns()); /* not old enough */
	if (n_recs != 0)
		goto fini;
	/* 10 ms later both time out; each call looks at a few slots (bounded work per sample) */
	for (unsigned int i = 0; i < MARKS_MAX; i++)
		marks_expire(sv, vmm_now_ns() + 10000000);
	if (n_recs != 2 || sv->c.resolved_from_ptregs != 1 || sv->c.dropped_exited != 1)
		goto fini;
	/* the first from its entry registers; the second's task no longer has that pid */
	if (check_good_walk(&recs[0], c1) != TEST_OK || recs[1].cookie != c2 ||
	    recs[1].stop != HVP_WALK_LOST || atomic_load(&f.s->marks.pending) != 0)
		goto fini;
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

static int test_thread_exit_and_pt_regs(void)
{
	struct fixture f;
	struct mark_req req;
	struct svcpu *sv;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4) || write_pt_regs(&f, &f.entry))
		goto fini;
	sv = &f.s->vcpus[0];
	/* marked before pt_regs was complete; at the flush it is: walked from it */
	req = req_of(&f, FK_PID, &f.entry);
	req.entry_known = false;
	if (!marks_take(sv, &req))
		goto fini;
	marks_flush(sv);
	if (n_recs != 1 || recs[0].ips[0] != 0x400100 || recs[0].n != 4 ||
	    sv->c.resolved_from_ptregs != 1)
		goto fini;
	/* a thread that is gone (its task reused by another pid) by the flush */
	req.entry_known = true;
	if (!marks_take(sv, &req) || fk_w32(&f.fk, f.fk.task_kva + f.fk.layout.task_pid, 4321))
		goto fini;
	marks_flush(sv);
	if (n_recs != 2 || recs[1].stop != HVP_WALK_LOST || recs[1].n != 0 ||
	    sv->c.dropped_exited != 1)
		goto fini;
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

static int test_exiting_thread(void)
{
	struct fixture f;
	struct mark_req req;
	struct svcpu *sv;
	uint64_t c1;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		goto fini;
	sv = &f.s->vcpus[0];
	/* exit_group marks the thread while its memory exists ... */
	req = req_of(&f, FK_PID, &f.entry);
	c1 = marks_take(sv, &req);
	/* ... exit_mmap tears it down: a later sample says so, the walk is kept */
	req.exiting = true;
	if (!c1 || marks_take(sv, &req) != c1 || fk_frame(&f.fk, U + 0x3000, 0x13, 0))
		goto fini;
	marks_flush(sv);
	if (n_recs != 1 || check_good_walk(&recs[0], c1) != TEST_OK ||
	    sv->c.resolved_exiting != 1 || sv->c.resolved_from_ptregs != 0)
		goto fini;
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

static int test_table_full(void)
{
	struct fixture f;
	struct mark_req req;
	struct svcpu *sv;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		goto fini;
	sv = &f.s->vcpus[0];
	req = req_of(&f, 0, &f.entry);
	for (int pid = 1; pid <= MARKS_MAX; pid++) {
		req.pid = pid;
		if (!marks_take(sv, &req))
			goto fini;
	}
	req.pid = MARKS_MAX + 1;
	if (marks_take(sv, &req) != 0 || sv->c.dropped_table_full != 1 || n_first != 1)
		goto fini;
	marks_flush(sv); /* every mark ends in exactly one record */
	if (n_recs != MARKS_MAX || atomic_load(&f.s->marks.pending) != 0 || n_last != 1)
		goto fini;
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

/*
 * Lookups and the timeout scan stop at the highest slot in use (n_slots): marks released below
 * it leave holes that are still skipped, a mark above a hole is still found, the bound comes
 * down when the top marks go, and expiry still reaches every mark in use.
 */
static int test_slot_bound(void)
{
	struct fixture f;
	struct mark_req req;
	struct svcpu *sv;
	uint64_t c[4];
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		goto fini;
	sv = &f.s->vcpus[0];
	req = req_of(&f, 0, &f.entry);
	for (int i = 0; i < 4; i++) {
		req.pid = 100 + i;
		c[i] = marks_take(sv, &req);
		if (!c[i])
			goto fini;
	}
	if (f.s->marks.n_slots != 4)
		goto fini;
	/* 101 and 102 return: a hole below 103, which is still found */
	marks_resolve_at_return(sv, f.fk.task_kva, 101, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	marks_resolve_at_return(sv, f.fk.task_kva, 102, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	req.pid = 103;
	if (f.s->marks.n_slots != 4 || marks_take(sv, &req) != c[3] || n_recs != 2)
		goto fini;
	/* 103 returns: the bound comes down past the hole, to 100's slot */
	marks_resolve_at_return(sv, f.fk.task_kva, 103, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	if (f.s->marks.n_slots != 1 || n_recs != 3)
		goto fini;
	/* a new mark takes the lowest free slot */
	req.pid = 104;
	if (!marks_take(sv, &req) || f.s->marks.n_slots != 2)
		goto fini;
	/* a pid never marked is not found beyond the bound either */
	marks_resolve_at_return(sv, f.fk.task_kva, 101, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	if (sv->c.traps_no_mark != 1 || n_recs != 3)
		goto fini;
	/* expiry (timeout 1 ms) reaches both marks in use, then nothing is left */
	if (write_pt_regs(&f, &f.entry))
		goto fini;
	marks_expire(sv, vmm_now_ns() + 10000000);
	if (atomic_load(&f.s->marks.pending) != 0 || f.s->marks.n_slots != 0 || n_recs != 5)
		goto fini;
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

/* Another vCPU made (or refreshed) a mark after this vCPU's sample started: marks_expire gets that
 * start, older than the mark, which is not expired (the unsigned age wrapped: expired at once). */
static int test_expire_newer_mark(void)
{
	struct fixture f;
	struct mark_req req;
	struct svcpu *sv0, *sv1;
	uint64_t t0, c1;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4) || write_pt_regs(&f, &f.entry))
		goto fini;
	sv0 = &f.s->vcpus[0];
	sv1 = &f.s->vcpus[1];
	t0 = vmm_now_ns(); /* vCPU 0's sample starts */
	req = req_of(&f, FK_PID, &f.entry);
	req.now_ns = t0 + 2000; /* vCPU 1's sample, 2 us later, marks */
	c1 = marks_take(sv1, &req);
	ASSERT_TRUE(c1 != 0);
	for (unsigned int i = 0; i < MARKS_MAX; i++)
		marks_expire(sv0, t0); /* vCPU 0 reaches marks_expire(sv, t0) */
	ASSERT_EQ_INT(n_recs, 0);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 1);
	ASSERT_EQ_U64(sv0->c.resolved_from_ptregs, 0);
	/* the same mark past its timeout (1 ms) does expire */
	for (unsigned int i = 0; i < MARKS_MAX; i++)
		marks_expire(sv0, t0 + 2000 + 1000001);
	ASSERT_EQ_INT(n_recs, 1);
	ASSERT_EQ_INT(check_good_walk(&recs[0], c1), TEST_OK);
	ASSERT_EQ_U64(sv0->c.resolved_from_ptregs, 1);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

/*
 * The timeout scan's bound (marks.due_ns): marks of 20 threads made 1 us apart, 1 ms timeout.
 * Before the oldest is due nothing expires, and once a scan cycle has seen them the bound is the
 * oldest's due time. Each then expires within one scan cycle (20 slots, 4 per call) of its own
 * due time, oldest first, and no younger one with it. The bound may lag low (a cycle counts the
 * marks it saw, also those that expired since), never high: a mark made later by another vCPU
 * with an older sample start lowers it, and expires on time.
 */
static int test_expire_due(void)
{
	const uint64_t timeout = 1000000, n = 20;
	struct fixture f;
	struct mark_req req;
	uint64_t t0, cookie[20], ca, cb;
	unsigned int scan;
	struct svcpu *sv;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4) || write_pt_regs(&f, &f.entry))
		goto fini;
	sv = &f.s->vcpus[0];
	ASSERT_EQ_U64(f.s->marks.timeout_ns, timeout);
	t0 = vmm_now_ns();
	req = req_of(&f, FK_PID, &f.entry);
	for (unsigned int i = 0; i < n; i++) {
		req.task = f.fk.task_kva + 0x10000 * i; /* 20 threads: 20 marks */
		req.pid = FK_PID + (int32_t)i;
		req.now_ns = t0 + 1000 * i;
		cookie[i] = marks_take(sv, &req);
		ASSERT_TRUE(cookie[i] != 0);
	}
	ASSERT_EQ_U64(f.s->marks.n_slots, n);
	for (unsigned int k = 0; k < 2 * n; k++)
		marks_expire(sv, t0 + timeout); /* the oldest is exactly timeout old: not expired */
	ASSERT_EQ_INT(n_recs, 0);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.due_ns), t0 + timeout);
	/* before the bound the scan does not run: its position stays where it is */
	scan = f.s->marks.scan_next;
	for (unsigned int k = 0; k < 2 * n; k++)
		marks_expire(sv, t0 + timeout - k);
	ASSERT_EQ_U64(f.s->marks.scan_next, scan);
	for (unsigned int j = 0; j < n; j++) {
		for (unsigned int k = 0; k < n / 4 + 1; k++)
			marks_expire(sv, t0 + 1000 * j + timeout + 1);
		ASSERT_EQ_INT(n_recs, (int)j + 1);
		ASSERT_EQ_U64(recs[j].cookie, cookie[j]);
	}
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 0);
	/* mark A now; a scan cycle bounds the table by A's due time; vCPU 1 then marks B with
	 * its sample's start 50 us before A's */
	req.task = f.fk.task_kva;
	req.pid = FK_PID;
	req.now_ns = t0 + 100000;
	ca = marks_take(sv, &req);
	marks_expire(sv, t0 + 100000 + timeout); /* A is exactly timeout old: not expired */
	marks_expire(sv, t0 + 100000 + timeout);
	ASSERT_EQ_INT(n_recs, (int)n);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.due_ns), t0 + 100000 + timeout);
	req.task = f.fk.task_kva + 0x10000;
	req.pid = FK_PID + 1;
	req.now_ns = t0 + 50000;
	cb = marks_take(&f.s->vcpus[1], &req);
	ASSERT_TRUE(ca != 0 && cb != 0);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.due_ns), t0 + 50000 + timeout);
	for (unsigned int k = 0; k < 2; k++)
		marks_expire(sv, t0 + 50000 + timeout + 1);
	ASSERT_EQ_INT(n_recs, (int)n + 1);
	ASSERT_EQ_U64(recs[n].cookie, cb);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 1);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

/*
 * A mark made in the entry window of execve (no entry registers known, no walk) under the old mm:
 * past the switch, neither the old program's registers (pt_regs until start_thread) nor the new
 * one's are its path, and the reader names its chain in the old address space. It ends as
 * HVP_WALK_EXECVE (dropped_no_regs: one end per mark), whichever comes first: the return in the
 * new mm, a sample of the building mm, a sample past start_thread (which starts a new mark).
 */
static int test_entry_window_execve(void)
{
	struct fixture f;
	struct gi_user_regs started = { 0x401000, U + 0x800, 0 }; /* start_thread's */
	const uint64_t old_mm = 0xffff888000aa0000ull;
	struct mark_req req;
	struct hvp_sample smp;
	struct svcpu *sv;
	uint64_t c1, c2;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4) || write_pt_regs(&f, &f.entry))
		goto fini;
	sv = &f.s->vcpus[0];

	/* the return, in the new program: not walked under the old cookie */
	req = req_of(&f, FK_PID, &f.entry);
	req.mm = old_mm;
	req.entry_known = false;
	c1 = marks_take(sv, &req);
	ASSERT_TRUE(c1 != 0);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &started);
	ASSERT_EQ_INT(n_recs, 1);
	ASSERT_EQ_U64(recs[0].cookie, c1);
	ASSERT_EQ_INT(recs[0].stop, HVP_WALK_EXECVE);
	ASSERT_EQ_INT(recs[0].n, 0);
	ASSERT_TRUE(!recs[0].has_regs);
	ASSERT_EQ_U64(sv->c.resolved_at_return, 0);
	ASSERT_EQ_U64(sv->c.dropped_no_regs, 1);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 0);

	/* a sample of the building mm (old registers): the mark ends, none is made, the sample's
	 * own user part is EXECVE */
	c1 = marks_take(sv, &req);
	memset(&smp, 0, sizeof(smp));
	smp.pid = FK_PID;
	smp.rip = FK_STEXT + 0x100;
	user_part_of_kernel_sample(sv, &smp, f.fk.task_kva, &f.fk.fm.pg, NULL, false, f.fk.mm_kva,
				   true);
	ASSERT_EQ_U64(smp.cookie, 0);
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_EXECVE);
	ASSERT_EQ_U64(sv->c.user_execve, 1);
	ASSERT_EQ_INT(n_recs, 2);
	ASSERT_EQ_U64(recs[1].cookie, c1);
	ASSERT_EQ_INT(recs[1].stop, HVP_WALK_EXECVE);
	ASSERT_EQ_INT(recs[1].n, 0);
	ASSERT_EQ_U64(sv->c.dropped_no_regs, 2);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 0);

	/* a sample past start_thread (complete mm, the new program's registers): the old mark
	 * ends, a new one is made with those registers, and the return walks them under it */
	c1 = marks_take(sv, &req);
	req.entry_known = true;
	req.mm = f.fk.mm_kva;
	c2 = marks_take(sv, &req);
	ASSERT_TRUE(c2 != 0 && c2 != c1);
	ASSERT_EQ_INT(n_recs, 3);
	ASSERT_EQ_U64(recs[2].cookie, c1);
	ASSERT_EQ_INT(recs[2].stop, HVP_WALK_EXECVE);
	ASSERT_EQ_U64(sv->c.dropped_no_regs, 3);
	ASSERT_EQ_U64(sv->c.marks_execve_kept, 0);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	ASSERT_EQ_INT(n_recs, 4);
	ASSERT_EQ_INT(check_good_walk(&recs[3], c2), TEST_OK);
	ASSERT_EQ_U64(sv->c.resolved_at_return, 1);

	/* an entry-window mark with no switch still takes the later sample's entry registers */
	req.entry_known = false;
	c1 = marks_take(sv, &req);
	req.entry_known = true;
	ASSERT_EQ_U64(marks_take(sv, &req), c1);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	ASSERT_EQ_INT(n_recs, 5);
	ASSERT_EQ_INT(check_good_walk(&recs[4], c1), TEST_OK);
	ASSERT_EQ_U64(sv->c.dropped_no_regs, 3);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

/* The mark of cookie @c, or NULL. */
static const struct mark *mark_of(struct fixture *f, uint64_t c)
{
	for (unsigned int i = 0; i < MARKS_MAX; i++)
		if (f->s->marks.key[i].used && f->s->marks.slot[i].cookie == c)
			return &f->s->marks.slot[i];
	return NULL;
}

/* A fresh mark of @req, with (@walked) or without the walk at the mark; the return resolves
 * it with @ret_regs. Return the cookie, 0 on a mismatch. */
static uint64_t take_and_return(struct fixture *f, struct svcpu *sv, struct mark_req *req,
				bool walked, const struct gi_user_regs *ret_regs)
{
	const struct mark *mk;
	uint64_t c = marks_take(sv, req);

	mk = mark_of(f, c);
	if (!c || !mk || mk->walked != walked || (mk->n_entry != 0) != walked) {
		fprintf(stderr, "mark %llu: walked %d n_entry %u, want walked %d\n",
			(unsigned long long)c, mk ? mk->walked : -1, mk ? mk->n_entry : 0, walked);
		return 0;
	}
	marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg, ret_regs);
	return c;
}

/*
 * The walk at the mark only where the stack may go before the return: a read(2) entry is walked
 * by its return only; rt_sigreturn, execve, exit, exit_group, execveat, an interrupt, a 32-bit
 * task and an entry of unknown kind are walked at the mark. A lazy mark whose return (or a
 * later sample) shows other registers is walked from the entry's registers only at a signal
 * frame that saved them (also at ip - 2: a restarted system call); otherwise, and for a thread
 * that exits, its user part is lost and counted, never a walk of a stack that may have changed.
 */
static int test_walk_at_mark(void)
{
	struct fixture f;
	struct gi_user_regs e = { 0x400100, U + 0x1000, U + 0x3000 }, w;
	struct gi_user_regs handler = { 0x400900, U + 0x800, 0 }, other = { 0x400200, U + 0x900, 0 };
	static const uint64_t nr_walked[] = { 15, 59, 60, 231, 322 };
	struct mark_req req, req2;
	struct svcpu *sv;
	uint64_t c;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		return TEST_FAIL;
	sv = &f.s->vcpus[0];
	e.entry_known = true;
	e.cs = 0x33;
	e.orig_ax = 0; /* read(2) */
	req = req_of(&f, FK_PID, &e);
	c = take_and_return(&f, sv, &req, false, &e);
	if (!c || n_recs != 1 || check_good_walk(&recs[0], c) != TEST_OK ||
	    sv->c.marks_walked_at_mark != 0 || sv->c.resolved_at_return != 1)
		goto out;
	for (size_t i = 0; i < 8; i++) {
		w = e;
		if (i < 5)
			w.orig_ax = nr_walked[i];
		else if (i == 5)
			w.cs = 0x23; /* a 32-bit task */
		else if (i == 6)
			w.orig_ax = UINT64_MAX; /* an interrupt or exception: orig_ax -1 */
		else
			w.entry_known = false; /* no pt_regs.orig_ax */
		req2 = req_of(&f, FK_PID, &w);
		c = take_and_return(&f, sv, &req2, true, &w);
		if (!c || n_recs != 2 + (int)i || check_good_walk(&recs[n_recs - 1], c) != TEST_OK ||
		    sv->c.marks_walked_at_mark != i + 1)
			goto out;
	}
	/* a signal handler's frame saved the entry's registers: walked at that return */
	if (fk_w64(&f.fk, U + 0x800 + 168, e.sp) || fk_w64(&f.fk, U + 0x800 + 176, e.ip))
		goto out;
	c = take_and_return(&f, sv, &req, false, &handler);
	if (!c || n_recs != 10 || check_good_walk(&recs[9], c) != TEST_OK ||
	    sv->c.marks_walked_late != 1 || sv->c.resolved_stale != 1)
		goto out;
	/* ... saved at the SYSCALL instruction (a system call restarted after the handler) */
	if (fk_w64(&f.fk, U + 0x800 + 176, e.ip - 2))
		goto out;
	c = take_and_return(&f, sv, &req, false, &handler);
	if (!c || n_recs != 11 || check_good_walk(&recs[10], c) != TEST_OK ||
	    sv->c.marks_walked_late != 2)
		goto out;
	/* ... but in another address space than the mark's: not walked (lost, counted) */
	c = marks_take(sv, &req);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva + 0x1000, &f.fk.fm.pg,
				&handler);
	if (!c || n_recs != 12 || recs[11].cookie != c || recs[11].stop != HVP_WALK_LOST ||
	    sv->c.marks_walked_late != 2 || sv->c.marks_walk_lost != 1)
		goto out;
	/* no frame saved them (the entry ended unseen): lost, not a walk of today's stack */
	n_recs = 11;
	c = take_and_return(&f, sv, &req, false, &other);
	if (!c || n_recs != 12 || recs[11].cookie != c || recs[11].stop != HVP_WALK_LOST ||
	    recs[11].n != 0 || sv->c.marks_walk_lost != 2 || sv->c.resolved_stale != 4)
		goto out;
	/* a later sample of the same stay sees the handler's registers: walked there too */
	c = marks_take(sv, &req);
	req2 = req_of(&f, FK_PID, &handler);
	if (!c || marks_take(sv, &req2) == c || n_recs != 13 ||
	    check_good_walk(&recs[12], c) != TEST_OK || sv->c.marks_walked_late != 3)
		goto out;
	marks_flush(sv);
	/* the thread exits after a mark without a walk: lost, counted */
	c = marks_take(sv, &req);
	req2 = req;
	req2.exiting = true;
	if (marks_take(sv, &req2) != c)
		goto out;
	n_recs = 0;
	marks_flush(sv);
	if (n_recs != 1 || recs[0].cookie != c || recs[0].stop != HVP_WALK_LOST ||
	    sv->c.marks_walk_lost != 3 || sv->c.resolved_exiting != 1)
		goto out;
	ret = TEST_OK;
out:
	fixture_fini(&f);
	return ret;
}

static const struct test_case tests[] = {
	{ "marks: take, reuse within one stay, resolve on another vCPU", test_mark_reuse_resolve },
	{ "marks: other user registers end a mark with its saved walk", test_stale_registers },
	{ "marks: expiry from entry registers, a reused pid is lost", test_expire_from_pt_regs },
	{ "marks: a mark newer than the expiring sample's start is not expired",
	  test_expire_newer_mark },
	{ "marks: the timeout scan runs past its bound only, which new marks lower",
	  test_expire_due },
	{ "marks: flush from pt_regs, a thread gone", test_thread_exit_and_pt_regs },
	{ "marks: an exiting thread keeps the walk made while its memory existed",
	  test_exiting_thread },
	{ "marks: execve keeps the walk made under the old mm, never walks the new one",
	  test_execve },
	{ "marks: an entry-window mark across execve ends as EXECVE, never walked in the new mm",
	  test_entry_window_execve },
	{ "eager: an execve's old registers are not walked in the new mm", test_eager_execve },
	{ "marks: table full falls back, every mark ends in one record", test_table_full },
	{ "marks: lookups and expiry bounded by the highest slot in use", test_slot_bound },
	{ "marks: the walk at the mark only where the stack may go first", test_walk_at_mark },
};

TEST_MAIN(tests)
