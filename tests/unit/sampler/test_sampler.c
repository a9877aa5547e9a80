// SPDX-License-Identifier: MIT
// Unit tests of the sampler's logic without /dev/kvm: the user part of a kernel sample in each
// callchain mode, the current thread, the trap decisions over hand-filled register states,
// USER_REGS records, record --from and attach windows. The marks table is in test_marks.c, the
// identity records in test_identity.c; the fixture (sampler_fixture.h) is the fake kernel of the
// guestinfo tests (a task, its kernel and user stacks).
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include <unistd.h>

#include "gi_internal.h"
#include "sampler_fixture.h"
#include "test.h"

static int user_part(enum sampler_callchain_mode mode, unsigned int stack_pages, bool exiting,
		     struct hvp_sample *smp)
{
	struct fixture f;
	int ret = TEST_FAIL;

	if (fixture_init(&f, mode, stack_pages) ||
	    (stack_pages == 4 && write_pt_regs(&f, &f.entry)))
		goto fini;
	memset(smp, 0, sizeof(*smp));
	smp->pid = FK_PID;
	smp->rip = FK_STEXT + 0x100;
	smp->user_stop = HVP_WALK_NONE;
	user_part_of_kernel_sample(&f.s->vcpus[0], smp, f.fk.task_kva, &f.fk.fm.pg, NULL,
				   exiting, 0, false);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

static int test_user_part_modes(void)
{
	struct hvp_sample smp;

	ASSERT_EQ_INT(user_part(SAMPLER_CALLCHAIN_DEFERRED, 4, false, &smp), TEST_OK);
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_INT(smp.n_user, 0);
	ASSERT_EQ_INT(user_part(SAMPLER_CALLCHAIN_EAGER, 4, false, &smp), TEST_OK);
	ASSERT_EQ_U64(smp.cookie, 0);
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_END);
	ASSERT_EQ_INT(smp.n_user, 4);
	ASSERT_EQ_U64(smp.user_ips[3], URET(3));
	/* both: deferred, with the eager walk kept as a cross-check */
	ASSERT_EQ_INT(user_part(SAMPLER_CALLCHAIN_BOTH, 4, false, &smp), TEST_OK);
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_INT(smp.n_user, 4);
	/* no pt_regs page: no user part; an exiting thread's sample says it is lost */
	ASSERT_EQ_INT(user_part(SAMPLER_CALLCHAIN_DEFERRED, 1, false, &smp), TEST_OK);
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_NONE);
	ASSERT_EQ_INT(user_part(SAMPLER_CALLCHAIN_DEFERRED, 1, true, &smp), TEST_OK);
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_LOST);
	ASSERT_EQ_U64(smp.cookie, 0);
	return TEST_OK;
}

static int test_current_thread_exiting(void)
{
	struct fakekernel fk;
	struct hvp_thread thr;
	struct gi_thread_state st;
	uint64_t task = 0;
	int ret = TEST_FAIL;

	if (fakekernel_init(&fk, 4))
		return TEST_FAIL;
	if (gi_current_thread(fk.gi, &fk.fm.mem, &fk.regs, &task, &thr, &st) != 0 ||
	    task != fk.task_kva || thr.pid != FK_PID || thr.kthread || st.exiting ||
	    st.mm != fk.mm_kva)
		goto out;
	/* do_exit past exit_mm(): PF_EXITING, no mm, still a user thread */
	if (fk_w64(&fk, fk.task_kva + fk.layout.task_mm, 0) ||
	    fk_w32(&fk, fk.task_kva + fk.layout.task_flags, 0x00400104) ||
	    gi_current_thread(fk.gi, &fk.fm.mem, &fk.regs, &task, &thr, &st) != 0 ||
	    thr.kthread || !st.exiting || st.mm != 0)
		goto out;
	ret = TEST_OK;
out:
	fakekernel_fini(&fk);
	return ret;
}

/* ---------------------------------------------------------------- USER_REGS */

/* Every user walk carries its registers and stack; a saved walk its registers only. */
static int test_user_regs_records(void)
{
	struct fixture f;
	struct gi_user_regs other = { 0x400200, U + 0x80, U + 0x3000 }, bad;
	struct mark_req req;
	struct svcpu *sv;
	uint64_t c1;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		return TEST_FAIL;
	sv = &f.s->vcpus[0];
	f.entry.ax = 0xaa;
	f.entry.r15 = 0xf15;
	if (fk_w64(&f.fk, U + 0x100, 0x1122334455667788ull))
		goto out;
	/* resolved at the return: fp mode, the registers and the 64-byte leaf window */
	req = req_of(&f, FK_PID, &f.entry);
	c1 = marks_take(sv, &req);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	if (n_recs != 1 || !recs[0].has_regs || recs[0].regs.cookie != c1 ||
	    recs[0].regs.pid != FK_PID || recs[0].regs.follows != HVP_USER_REGS_AFTER_USER_STACK ||
	    recs[0].regs.regs[HVP_REG_RIP] != recs[0].ips[0] ||
	    recs[0].regs.regs[HVP_REG_RSP] != U + 0x100 ||
	    recs[0].regs.regs[HVP_REG_RBP] != U + 0x3000 || recs[0].regs.regs[HVP_REG_RAX] != 0xaa ||
	    recs[0].regs.regs[HVP_REG_R15] != 0xf15 || recs[0].regs.stack_size != 64 ||
	    recs[0].regs.stack_len != 64 || recs[0].stack0 != 0x1122334455667788ull ||
	    sv->c.user_regs != 1 || sv->c.user_stack_bytes != 64) {
		fprintf(stderr, "at return: n %d regs %d len %u\n", n_recs, recs[0].has_regs,
			recs[0].regs.stack_len);
		goto out;
	}
	/* a saved walk (execve: other registers in the same stay): registers, no stack */
	c1 = marks_take(sv, &req);
	req.entry = &other;
	(void)marks_take(sv, &req);
	if (n_recs != 2 || !recs[1].has_regs || recs[1].regs.stack_len != 0 ||
	    recs[1].regs.regs[HVP_REG_RSP] != U + 0x100 || recs[1].cookie != c1 ||
	    sv->c.user_stack_not_copied != 1)
		goto out;
	/* a hostile RSP: registers, nothing copied, counted */
	bad = f.entry;
	bad.sp = 0xffff888000000000ull;
	emit_user_stack(sv, 99, FK_PID, &f.fk.fm.pg, &bad, 0, 0);
	if (n_recs != 3 || !recs[2].has_regs || recs[2].regs.stack_len != 0 ||
	    sv->c.user_stack_refused != 1)
		goto out;
	ret = TEST_OK;
out:
	fixture_fini(&f);
	return ret;
}

/* dwarf mode: SIZE bytes of stack, cut where the user stack's pages end. */
static int test_user_regs_dwarf(void)
{
	struct fixture f;
	struct svcpu *sv;
	struct gi_user_regs ur;
	int ret = TEST_FAIL;

	if (fixture_init_cg(&f, SAMPLER_CALLCHAIN_EAGER, 4, SAMPLER_CALL_GRAPH_DWARF, 8192))
		return TEST_FAIL;
	sv = &f.s->vcpus[0];
	ur = f.entry;
	emit_user_stack(sv, 5, FK_PID, &f.fk.fm.pg, &ur, 0, 0); /* 4 pages above U: all 8192 */
	if (n_recs != 1 || recs[0].regs.stack_size != 8192 || recs[0].regs.stack_len != 8192 ||
	    sv->c.user_stack_short != 0)
		goto out;
	/* read in place (the fake guest maps, as the VMM's does): the guest's bytes, in pieces;
	 * without a map: copied, the same bytes */
	{
		static uint8_t want[8192], got[8192];
		uint32_t len = 0;

		if (gi_copy_user_stack(&f.fk.fm.mem, &f.fk.fm.pg, ur.sp, want, 8192, &len) ||
		    len != 8192 || recs[0].regs.n_stack_segs == 0 ||
		    hvp_user_regs_stack_copy(&recs[0].regs, 0, got, 8192) != 8192 ||
		    memcmp(got, want, 8192))
			goto out;
		f.fk.fm.mem.map = NULL;
		user_regs_take(sv, &sv->ustack_regs, sv->ustack_stack, sv->ustack_segs,
			       &f.fk.fm.pg, &ur, true, 0);
		if (sv->ustack_regs.n_stack_segs != 0 || sv->ustack_regs.stack != sv->ustack_stack ||
		    sv->ustack_regs.stack_len != 8192 || memcmp(sv->ustack_stack, want, 8192))
			goto out;
		sv->c.user_stack_copies--; /* the counts below are of the emits */
		sv->c.user_stack_bytes -= 8192;
	}
	ur.sp = U + 0x4000 - 0x100; /* the last 256 bytes of the stack's pages */
	emit_user_stack(sv, 6, FK_PID, &f.fk.fm.pg, &ur, 0, 0);
	if (n_recs != 2 || recs[1].regs.stack_len != 0x100 || sv->c.user_stack_short != 1 ||
	    sv->c.user_stack_copies != 2 || sv->c.user_stack_bytes != 8192 + 0x100)
		goto out;
	/* the eager user part of a kernel sample: the sample's own USER_REGS, from pt_regs */
	if (write_pt_regs(&f, &f.entry))
		goto out;
	{
		struct hvp_sample smp = { .pid = FK_PID, .rip = FK_STEXT + 0x100 };

		user_part_of_kernel_sample(sv, &smp, f.fk.task_kva, &f.fk.fm.pg, NULL, false, 0,
					   false);
		if (!sv->sample_has_regs || sv->sample_regs.regs[HVP_REG_RIP] != smp.user_ips[0] ||
		    sv->sample_regs.regs[HVP_REG_RSP] != U + 0x100 ||
		    sv->sample_regs.stack_len != 8192)
			goto out;
	}
	ret = TEST_OK;
out:
	fixture_fini(&f);
	return ret;
}

/* The copy of a stack of the main thread ends at mm->start_stack (argc) + the slack; the value is
 * remembered per task while its identity holds; a value that is no bound changes nothing. */
static int copy_len(struct fixture *f, struct svcpu *sv, uint64_t sp, uint64_t start_stack,
		    uint32_t *len)
{
	struct gi_user_regs ur = f->entry;
	int before = n_recs;

	ur.sp = sp;
	if (start_stack != 1 &&
	    fk_w64(&f->fk, f->fk.mm_kva + f->fk.layout.mm_start_stack, start_stack))
		return -1;
	emit_user_stack(sv, 7, FK_PID, &f->fk.fm.pg, &ur, f->fk.task_kva, f->fk.mm_kva);
	if (n_recs != before + 1)
		return -1;
	*len = recs[n_recs - 1].regs.stack_len;
	return 0;
}

static int test_user_regs_bounded(void)
{
	struct fixture f;
	struct svcpu *sv;
	struct hvp_thread t;
	uint64_t mm;
	uint32_t len = 0;
	int ret = TEST_FAIL;

	if (fixture_init_cg(&f, SAMPLER_CALLCHAIN_EAGER, 4, SAMPLER_CALL_GRAPH_DWARF, 8192))
		return TEST_FAIL;
	sv = &f.s->vcpus[0];
	/* not in the vCPU's task cache: read at each copy */
	if (copy_len(&f, sv, U + 0x100, U + 0x300, &len) || len != 0x200 + 64 ||
	    sv->c.user_stack_bounded != 1 || sv->c.user_stack_short != 0)
		goto out;
	{ /* the bytes are the guest's, the first 0x240 of the stack */
		static uint8_t want[0x240], got[0x240];
		uint32_t n = 0;

		if (gi_copy_user_stack(&f.fk.fm.mem, &f.fk.fm.pg, U + 0x100, want, sizeof(want),
				       &n) || n != sizeof(want) ||
		    hvp_user_regs_stack_copy(&recs[n_recs - 1].regs, 0, got, sizeof(got)) !=
			    sizeof(got) ||
		    memcmp(got, want, sizeof(want)))
			goto out;
	}
	if (copy_len(&f, sv, U + 0x100, U + 0x303, &len) || len != 0x248) /* rounded up to 8 */
		goto out;
	/* in the cache (the identity read): remembered, a new value unseen until it is forgotten */
	if (gi_task_identity_cached(f.fk.gi, &f.fk.fm.mem, &f.fk.fm.pg, &sv->tasks, f.fk.task_kva,
				    &t, &mm, NULL, NULL) || mm != f.fk.mm_kva ||
	    copy_len(&f, sv, U + 0x100, U + 0x400, &len) || len != 0x300 + 64 ||
	    copy_len(&f, sv, U + 0x100, U + 0x1000, &len) || len != 0x300 + 64)
		goto out;
	gi_task_cache_reset(&sv->tasks);
	if (copy_len(&f, sv, U + 0x100, 1, &len) || len != 0xf00 + 64 ||
	    sv->c.user_stack_bounded != 5)
		goto out;
	/* no bound: a kernel address, below RSP, 0, too far for the slack; the edges */
	if (copy_len(&f, sv, U + 0x100, 0xffff888000001000ull, &len) || len != 8192 ||
	    copy_len(&f, sv, U + 0x100, U + 0x80, &len) || len != 8192 ||
	    copy_len(&f, sv, U + 0x100, 0, &len) || len != 8192 ||
	    copy_len(&f, sv, U + 0x100, U + 0x100 + 8192 - 64, &len) || len != 8192 ||
	    sv->c.user_stack_bounded != 5)
		goto out;
	if (copy_len(&f, sv, U + 0x100, U + 0x100 + 8192 - 72, &len) || len != 8192 - 8 ||
	    copy_len(&f, sv, U + 0x100, U + 0x100, &len) || len != 64 ||
	    sv->c.user_stack_bounded != 7)
		goto out;
	/* in the cache, a value that is no bound is remembered as such: not read again */
	if (gi_task_identity_cached(f.fk.gi, &f.fk.fm.mem, &f.fk.fm.pg, &sv->tasks, f.fk.task_kva,
				    &t, &mm, NULL, NULL) ||
	    copy_len(&f, sv, U + 0x100, 0xffff888000001000ull, &len) || len != 8192 ||
	    copy_len(&f, sv, U + 0x100, U + 0x300, &len) || len != 8192 ||
	    sv->c.user_stack_bounded != 7)
		goto out;
	gi_task_cache_reset(&sv->tasks);
	/* a copy refused (RSP not 8-aligned) is not counted as bounded */
	if (copy_len(&f, sv, U + 0x104, 1, &len) || len != 0 || sv->c.user_stack_bounded != 7 ||
	    copy_len(&f, sv, U + 0x100, 1, &len) || len != 0x200 + 64 ||
	    sv->c.user_stack_bounded != 8)
		goto out;
	ret = TEST_OK;
out:
	if (ret != TEST_OK)
		fprintf(stderr, "bounded copy: len %u, bounded %llu\n", len,
			(unsigned long long)sv->c.user_stack_bounded);
	fixture_fini(&f);
	return ret;
}

/* A stack size the sampler cannot use is refused. */
static int test_user_regs_bad_size(void)
{
	struct fakekernel fk;
	struct sampler_config cfg = { .sample_hz = 1000, .sink = &sink,
				      .call_graph = SAMPLER_CALL_GRAPH_DWARF, .stack_size = 65536 };
	struct sampler *s = NULL;

	ASSERT_EQ_INT(fakekernel_init(&fk, 4), 0);
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), -EINVAL);
	cfg.stack_size = 100; /* not a multiple of 8 */
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), -EINVAL);
	cfg.stack_size = HVP_USER_STACK_MAX;
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), 0);
	sampler_destroy(s);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/* ---------------------------------------------------------------- when sampling starts */

static struct hvp_event events_seen[8];
static int n_events_seen;

static int sink_event_cb(void *ctx, const struct hvp_event *e)
{
	(void)ctx;
	if (n_events_seen < 8)
		events_seen[n_events_seen] = *e;
	n_events_seen++;
	return 0;
}

/* record --from: boot starts at once; an event or a time starts once (the first caller wins,
 * with one SAMPLING_START event); a bad start event is refused. */
static int test_sampling_start(void)
{
	struct sampler_sink esink = sink;
	struct fakekernel fk;
	struct sampler_config cfg = { .sample_hz = 1000, .sink = &esink,
				      .start = SAMPLER_START_EVENT,
				      .start_event = HVP_EVENT_WORKLOAD_START };
	struct sampler_counters c;
	struct sampler *s = NULL;
	uint64_t t = 99;

	esink.event = sink_event_cb;
	n_events_seen = 0;
	ASSERT_EQ_INT(fakekernel_init(&fk, 4), 0);
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), 0);
	ASSERT_EQ_INT(sampler_sampling_start(s, &t), -ENODATA);
	sampler_hook_tick(s, 5000000000ull); /* not a timed start: nothing */
	ASSERT_EQ_INT(sampler_sampling_start(s, &t), -ENODATA);
	sampler_catch_up(&s->vcpus[0]); /* not started, no counter: nothing */
	ASSERT_TRUE(!s->vcpus[0].counting);
	sampler_begin(s, NULL, 12345);
	sampler_begin(s, NULL, 99999); /* a second start is ignored */
	ASSERT_EQ_INT(sampler_sampling_start(s, &t), 0);
	ASSERT_EQ_U64(t, 12345);
	ASSERT_EQ_INT(n_events_seen, 1);
	ASSERT_EQ_INT(events_seen[0].kind, HVP_EVENT_SAMPLING_START);
	ASSERT_EQ_U64(events_seen[0].time_ns, 12345);
	sampler_get_counters(s, &c);
	ASSERT_EQ_U64(c.events, 1);
	sampler_destroy(s);

	/* SECONDS: the monitor's tick starts it once the time has come */
	cfg.start = SAMPLER_START_AFTER;
	cfg.start_after_ns = 2000000000ull;
	n_events_seen = 0;
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), 0);
	sampler_hook_tick(s, 1990000000ull);
	ASSERT_EQ_INT(sampler_sampling_start(s, &t), -ENODATA);
	sampler_hook_tick(s, 2010000000ull);
	sampler_hook_tick(s, 2030000000ull);
	ASSERT_EQ_INT(sampler_sampling_start(s, &t), 0);
	ASSERT_EQ_U64(t, 2010000000ull);
	ASSERT_EQ_INT(n_events_seen, 1);
	sampler_destroy(s);

	/* boot (and 0 seconds): from the first instruction, no SAMPLING_START event */
	cfg.start_after_ns = 0;
	n_events_seen = 0;
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), 0);
	ASSERT_EQ_INT(sampler_sampling_start(s, &t), 0);
	ASSERT_EQ_U64(t, 0);
	sampler_destroy(s);
	cfg.start = SAMPLER_START_BOOT;
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), 0);
	ASSERT_EQ_INT(sampler_sampling_start(s, &t), 0);
	ASSERT_EQ_INT(n_events_seen, 0);
	sampler_destroy(s);

	cfg.start = SAMPLER_START_EVENT;
	cfg.start_event = 0;
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), -EINVAL);
	cfg.start_event = 256; /* hvprof's own kind, not a guest event */
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), -EINVAL);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/* ---------------------------------------------------------------- trap decisions */

struct trap_row {
	const char *name;
	bool is_sysret, repeat;
	struct kvm_regs regs;
	uint64_t frame[5];
	enum trap_action want;
	struct gi_user_regs ur;
};

static const struct trap_row trap_rows[] = {
	{ "sysretq: RCX, RSP, RBP are the user's", true, false,
	  { .rcx = 0x401234, .rsp = 0x7ffff000, .rbp = 0x7ffff100, .rip = 0xffffffff812001a9,
	    .rax = 7, .r15 = 0x1515 },
	  { 0 }, TRAP_RESOLVE, { 0x401234, 0x7ffff000, 0x7ffff100 } },
	{ "iretq to user mode: RIP and RSP from the frame", false, false,
	  { .rsp = 0xffffc90000013f58, .rbp = 0x7ffff200, .rax = 1, .rcx = 2, .r15 = 3 },
	  { 0x402000, 0x33, 0x246, 0x7fffe000, 0x2b }, TRAP_RESOLVE,
	  { 0x402000, 0x7fffe000, 0x7ffff200 } },
	{ "iretq to kernel mode", false, false, { .rsp = 0xffffc90000013f58 },
	  { 0xffffffff81001000, 0x10, 0x46, 0xffffc90000013f80, 0x18 }, TRAP_TO_KERNEL,
	  { 0xffffffff81001000, 0xffffc90000013f80, 0 } },
	{ "the same sysretq again after RF", true, true, { .rcx = 0x401234, .rsp = 0x7ffff000 },
	  { 0 }, TRAP_REPEAT, { 0x401234, 0x7ffff000, 0 } },
	{ "the same iretq to kernel again after RF", false, true, { .rsp = 1 },
	  { 0xffffffff81001000, 0x10, 0x46, 0xffffc90000013f80, 0x18 }, TRAP_REPEAT,
	  { 0xffffffff81001000, 0xffffc90000013f80, 0 } },
};

static int test_trap_decide(void)
{
	for (size_t i = 0; i < sizeof(trap_rows) / sizeof(trap_rows[0]); i++) {
		const struct trap_row *r = &trap_rows[i];
		struct gi_user_regs ur;
		enum trap_action a = trap_decide(r->is_sysret, r->repeat, &r->regs, r->frame, &ur);

		/* every other register as the vCPU holds it: POP_REGS restored them */
		if (a != r->want || ur.ip != r->ur.ip || ur.sp != r->ur.sp || ur.bp != r->ur.bp ||
		    ur.ax != r->regs.rax || ur.cx != r->regs.rcx || ur.r15 != r->regs.r15) {
			fprintf(stderr, "%s: action %d ip 0x%llx sp 0x%llx bp 0x%llx\n", r->name, a,
				(unsigned long long)ur.ip, (unsigned long long)ur.sp,
				(unsigned long long)ur.bp);
			return TEST_FAIL;
		}
	}
	return TEST_OK;
}

/* The branch to the iretq on returns to user (PVM: completed by hvprof): jmp always goes; jne
 * goes when ZF is clear (the `testb $3, 8(%rsp)` before it: a user CS), else falls through;
 * the site where there is no branch is the iretq itself. */
static int test_trap_branch(void)
{
	struct gi_return_sites r = { .iret = 0xffffffff81c01220, .iret_user = 0xffffffff81c011f7,
				     .iret_user_target = 0xffffffff81c01219, .iret_user_len = 2,
				     .iret_user_cond = GI_BRANCH_ALWAYS };

	ASSERT_EQ_U64(trap_branch_next(&r, 0x46), 0xffffffff81c01219);
	ASSERT_EQ_U64(trap_branch_next(&r, 0x02), 0xffffffff81c01219);
	ASSERT_EQ_U64(trap_iret_site(&r), 0xffffffff81c011f7);
	r.iret_user = 0xffffffff81e0187e;
	r.iret_user_target = 0xffffffff81e01921;
	r.iret_user_len = 6;
	r.iret_user_cond = GI_BRANCH_NZ;
	ASSERT_EQ_U64(trap_branch_next(&r, 0x02), 0xffffffff81e01921);     /* ZF clear */
	ASSERT_EQ_U64(trap_branch_next(&r, 0x46), 0xffffffff81e0187e + 6); /* ZF set */
	r.iret_user = 0;
	ASSERT_EQ_U64(trap_iret_site(&r), 0xffffffff81c01220);
	return TEST_OK;
}

/* The sites in guest memory, checked at the first hit: sysretq, then the image's branch to the
 * iretq (its bytes, as many as the image's) where it has one, else iretq; a byte off, a site not
 * mapped, or a branch longer than its bytes refuses. */
static int test_trap_sites_verified(void)
{
	static const uint8_t sysretq[3] = { 0x48, 0x0f, 0x07 }, iretq[2] = { 0x48, 0xcf };
	static const uint8_t jne[6] = { 0x0f, 0x85, 0x9d, 0x00, 0x00, 0x00 };
	const uint64_t page = FK_STEXT + 0x20000, page_gpa = 0x600000;
	struct gi_return_sites *r;
	struct fixture f;
	int ret = TEST_FAIL;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 1) ||
	    fakemem_map(&f.fk.fm, page, page_gpa, 4096, 0) != 0)
		goto fini;
	r = &f.s->traps.sites;
	*r = (struct gi_return_sites){ .sysret = page + 0x10, .iret = page + 0x100 };
	fakemem_wbytes(&f.fk.fm, page_gpa + 0x10, sysretq, sizeof(sysretq));
	ASSERT_TRUE(!trap_sites_verified(f.s, &f.fk.fm.pg)); /* no iretq yet */
	fakemem_wbytes(&f.fk.fm, page_gpa + 0x100, iretq, sizeof(iretq));
	ASSERT_TRUE(trap_sites_verified(f.s, &f.fk.fm.pg));
	fakemem_wbytes(&f.fk.fm, page_gpa + 0x11, "\x05", 1); /* syscall, not sysretq */
	ASSERT_TRUE(!trap_sites_verified(f.s, &f.fk.fm.pg));
	fakemem_wbytes(&f.fk.fm, page_gpa + 0x10, sysretq, sizeof(sysretq));
	fakemem_wbytes(&f.fk.fm, page_gpa + 0x101, "\x00", 1); /* 48 00: not iretq */
	ASSERT_TRUE(!trap_sites_verified(f.s, &f.fk.fm.pg));
	fakemem_wbytes(&f.fk.fm, page_gpa + 0x100, iretq, sizeof(iretq));

	/* the branch: its own bytes at its own site, whatever is at the iretq's */
	r->iret_user = page + 0x80;
	r->iret_user_len = sizeof(jne);
	memcpy(r->iret_user_bytes, jne, sizeof(jne));
	ASSERT_TRUE(!trap_sites_verified(f.s, &f.fk.fm.pg)); /* not in guest memory yet */
	fakemem_wbytes(&f.fk.fm, page_gpa + 0x80, jne, sizeof(jne));
	ASSERT_TRUE(trap_sites_verified(f.s, &f.fk.fm.pg));
	fakemem_wbytes(&f.fk.fm, page_gpa + 0x100, "\x90\x90", 2); /* the iretq's not checked */
	ASSERT_TRUE(trap_sites_verified(f.s, &f.fk.fm.pg));
	fakemem_wbytes(&f.fk.fm, page_gpa + 0x85, "\x01", 1); /* the last byte differs */
	ASSERT_TRUE(!trap_sites_verified(f.s, &f.fk.fm.pg));
	fakemem_wbytes(&f.fk.fm, page_gpa + 0x85, jne + 5, 1);
	r->iret_user_len = sizeof(r->iret_user_bytes) + 1; /* more than it holds */
	ASSERT_TRUE(!trap_sites_verified(f.s, &f.fk.fm.pg));
	r->iret_user_len = 0; /* no bytes to compare: refused, not trusted */
	ASSERT_TRUE(!trap_sites_verified(f.s, &f.fk.fm.pg));
	r->iret_user_len = sizeof(jne);
	r->iret_user = page + 0x1000; /* not mapped */
	ASSERT_TRUE(!trap_sites_verified(f.s, &f.fk.fm.pg));
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

/*
 * Attach windows: a mark is refused while sampling is off (before the first window, and a late
 * vCPU still in the sample a timed-out detach stopped waiting for: mark_new would arm the
 * breakpoints again after the detach disarmed them); no window opens until every running vCPU
 * acknowledged the detach; the owed disarm is made when the last one does.
 */
static int test_attach_refuses_late_marks(void)
{
	struct sampler_window win = { .sample_hz = 500, .call_graph = SAMPLER_CALL_GRAPH_FP };
	struct sampler_detach_info info;
	struct fixture f;
	struct mark_req req;
	struct svcpu *sv;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		return TEST_FAIL;
	f.s->cfg.start = SAMPLER_START_ATTACH; /* as sampler_new makes it: sampling off */
	atomic_store(&f.s->sampling_start, 0);
	sv = &f.s->vcpus[0];
	req = req_of(&f, FK_PID, &f.entry);
	ASSERT_EQ_U64(marks_take(sv, &req), 0); /* no window yet */
	ASSERT_EQ_U64(sv->c.marks_refused_off, 1);
	ASSERT_EQ_INT(n_first, 0);
	ASSERT_EQ_INT(sampler_attach(f.s, &win), 0);
	ASSERT_TRUE(marks_take(sv, &req) != 0);
	ASSERT_EQ_INT(n_first, 1);
	ASSERT_EQ_INT(sampler_detach(f.s, 1000000, &info), 0);
	ASSERT_EQ_INT(info.marks_dropped, 1);
	/* a late vCPU finishes its sample after the marks were dropped: no mark, nothing armed */
	ASSERT_EQ_U64(marks_take(sv, &req), 0);
	ASSERT_EQ_U64(sv->c.marks_refused_off, 2);
	ASSERT_EQ_INT(n_first, 1);
	ASSERT_EQ_INT(atomic_load(&f.s->marks.pending), 0);
	/* ... and it has not acknowledged the detach: the next attach must wait for it */
	atomic_store(&sv->running, true);
	atomic_store(&sv->seen_epoch, atomic_load(&f.s->epoch) - 1);
	atomic_store(&f.s->retry_disarm, true); /* as a detach whose wait timed out leaves it */
	ASSERT_EQ_INT(sampler_attach(f.s, &win), -EBUSY);
	ASSERT_EQ_INT(sampler_sync_vcpu(sv), 0); /* it acknowledges: the owed disarm is made */
	ASSERT_TRUE(!atomic_load(&f.s->retry_disarm));
	ASSERT_EQ_INT(sampler_attach(f.s, &win), 0);
	ASSERT_TRUE(marks_take(sv, &req) != 0);
	atomic_store(&sv->running, false);
	ASSERT_EQ_INT(sampler_detach(f.s, 1000000, &info), 0);
	fixture_fini(&f);
	return TEST_OK;
}

/*
 * record --bench-phases: only with its own start (the first bench-phase event) and without
 * --bare-exits; each vCPU's counter follows the phase (off: disabled; bare and on: enabled), and
 * a change of phase disables and enables it again, so that the first sample of a phase does not
 * count its period over the last one's bare exits. A real counter (task-clock of this thread)
 * stands for the vCPU's.
 */
static int test_bench_phases(void)
{
	struct perf_event_attr attr = { .type = PERF_TYPE_SOFTWARE, .size = sizeof(attr),
					.config = PERF_COUNT_SW_TASK_CLOCK, .disabled = 1 };
	struct sampler_config cfg = { .sample_hz = 1000, .sink = &sink, .bench_phases = true,
				      .start = SAMPLER_START_EVENT,
				      .start_event = HVP_EVENT_BENCH_PHASE };
	struct fakekernel fk;
	struct sampler *s = NULL;
	struct svcpu *sv;
	int fd;

	ASSERT_EQ_INT(fakekernel_init(&fk, 4), 0);
	cfg.bare_exits = true;
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), -EINVAL);
	cfg.bare_exits = false;
	cfg.start_event = HVP_EVENT_WORKLOAD_START;
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), -EINVAL);
	cfg.start_event = HVP_EVENT_BENCH_PHASE;
	cfg.start = SAMPLER_START_BOOT;
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), -EINVAL);
	cfg.start = SAMPLER_START_EVENT;
	ASSERT_EQ_INT(sampler_new(&cfg, fk.gi, &fk.fm.mem, 0, 1, &s), 0);
	fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		printf("# skipped the counter part: perf_event_open(task-clock): %s\n",
		       strerror(errno));
		goto out;
	}
	sv = &s->vcpus[0];
	sv->perf_fd = fd;
	sv->hz_applied = cfg.sample_hz;
	sampler_begin(s, sv, 1000); /* the first phase event starts sampling: phase off */
	ASSERT_TRUE(!sv->counting);
	atomic_store(&s->bench_phase, BENCH_PHASE_BARE);
	ASSERT_EQ_INT(sampler_sync_vcpu(sv), 0);
	ASSERT_TRUE(sv->counting);
	ASSERT_EQ_U64(sv->bench_phase_applied, BENCH_PHASE_BARE);
	sv->period_base.counted = 12345; /* as after samples: the enable below restarts it */
	atomic_store(&s->bench_phase, BENCH_PHASE_ON);
	ASSERT_EQ_INT(sampler_sync_vcpu(sv), 0);
	ASSERT_TRUE(sv->counting);
	ASSERT_EQ_U64(sv->period_base.counted, 0); /* disabled and enabled again */
	ASSERT_EQ_INT(sampler_sync_vcpu(sv), 0); /* the same phase: nothing */
	ASSERT_TRUE(sv->counting);
	atomic_store(&s->bench_phase, BENCH_PHASE_OFF);
	ASSERT_EQ_INT(sampler_sync_vcpu(sv), 0);
	ASSERT_TRUE(!sv->counting);
	close(fd);
	sv->perf_fd = -1;
out:
	sampler_destroy(s);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/* A window's rate the kernel refuses (PERF_EVENT_IOC_PERIOD fails) fails the window, never the
 * VM: sampler_window_error says so, the vCPU is not retried at every exit, attach resets it. */
static int test_attach_rate_refused(void)
{
	struct sampler_window win = { .sample_hz = 500, .call_graph = SAMPLER_CALL_GRAPH_FP };
	struct sampler_detach_info info;
	struct fixture f;
	struct svcpu *sv;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		return TEST_FAIL;
	f.s->cfg.start = SAMPLER_START_ATTACH;
	atomic_store(&f.s->sampling_start, 0);
	sv = &f.s->vcpus[0];
	sv->perf_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* not a perf event: ioctls fail */
	sv->hz_applied = 1000;
	ASSERT_TRUE(sv->perf_fd >= 0);
	ASSERT_EQ_INT(sampler_attach(f.s, &win), 0);
	ASSERT_EQ_INT(sampler_window_error(f.s), 0);
	sampler_catch_up(sv); /* the kick: the rate change fails */
	ASSERT_TRUE(sampler_window_error(f.s) < 0);
	ASSERT_TRUE(!sv->counting);
	ASSERT_EQ_INT(sampler_sync_vcpu(sv), 0); /* failed already: not retried */
	ASSERT_EQ_INT(sampler_detach(f.s, 1000000, &info), 0);
	ASSERT_TRUE(sampler_window_error(f.s) < 0); /* still readable after the detach */
	close(sv->perf_fd);
	sv->perf_fd = -1;
	ASSERT_EQ_INT(sampler_attach(f.s, &win), 0);
	ASSERT_EQ_INT(sampler_window_error(f.s), 0); /* a new window starts clean */
	ASSERT_EQ_INT(sampler_detach(f.s, 1000000, &info), 0);
	fixture_fini(&f);
	return TEST_OK;
}


/* A gmem that counts the reads touching the GPAs [lo, hi), passing every access on. */
struct watch_mem {
	struct gmem inner;
	uint64_t lo, hi;
	unsigned int hits;
};

static int watch_read(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	struct watch_mem *w = ctx;

	if (gpa < w->hi && gpa + len > w->lo)
		w->hits++;
	return gmem_read(&w->inner, gpa, dst, len);
}

static const void *watch_map(void *ctx, uint64_t gpa, size_t len)
{
	struct watch_mem *w = ctx;

	return gmem_map(&w->inner, gpa, len);
}

/*
 * A user-mode sample's frame-pointer walk takes its frames from the stack copy the sample made
 * (no guest read of them), and at the next exit its page walks are answered by the walks
 * remembered from this one (counter tcache_memo_hits): the same chain both times.
 */
static int test_user_walk_from_copy(void)
{
	struct fixture f;
	struct watch_mem w;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct svcpu *sv;
	int ret = TEST_FAIL;

	if (fixture_init_cg(&f, SAMPLER_CALLCHAIN_EAGER, 4, SAMPLER_CALL_GRAPH_DWARF, 8192))
		return TEST_FAIL;
	sv = &f.s->vcpus[0];
	w = (struct watch_mem){ .inner = f.fk.fm.mem, .lo = FK_USER_STACK_GPA + 0x180,
				.hi = FK_USER_STACK_GPA + 0x1d0 };
	fixture_process(&f.fk, 0x400000);
	sv->kaslr_decided = true;
	sv->percpu_base = f.fk.regs.gs_base; /* as learned from a kernel sample or the MSR */
	f.entry = (struct gi_user_regs){ 0x400100, U + 0x100, U + 0x180 };
	if (fk_uchain(&f.fk, U + 0x180, 3) || fixture_vcpu_regs(&f, 3, &regs, &sregs))
		goto out;
	f.fk.fm.mem = (struct gmem){ .read = watch_read, .map = watch_map, .ctx = &w };
	for (int i = 0; i < 2; i++) {
		const struct hvp_sample *smp = &sv->sample;

		if (sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0) != 0 ||
		    !(smp->flags & HVP_SAMPLE_USER) || smp->n_user != 4 ||
		    smp->user_stop != HVP_WALK_END || smp->user_ips[0] != 0x400100 ||
		    smp->user_ips[1] != URET(1) || smp->user_ips[3] != URET(3) ||
		    !sv->sample_has_regs || sv->sample_regs.stack_len < 0x100) {
			fprintf(stderr, "sample %d: n_user %u stop %u\n", i, smp->n_user,
				smp->user_stop);
			goto out;
		}
	}
	if (w.hits != 0 || sv->c.tcache_memo_hits < 1 || sv->c.tcache_memo_stale != 0) {
		fprintf(stderr, "frame reads %u, memo hits %llu\n", w.hits,
			(unsigned long long)sv->c.tcache_memo_hits);
		goto out;
	}
	ret = TEST_OK;
out:
	f.fk.fm.mem = w.inner;
	fixture_fini(&f);
	return ret;
}

static const struct test_case tests[] = {
	{ "record --from: boot, an event, SECONDS; started once", test_sampling_start },
	{ "user part of a kernel sample: deferred, eager, both, no pt_regs, exiting",
	  test_user_part_modes },
	{ "current thread: an exiting user thread is no kernel thread", test_current_thread_exiting },
	{ "trap decisions from sysretq/iretq registers", test_trap_decide },
	{ "the branch to the iretq: where the CPU goes, where the breakpoint sits", test_trap_branch },
	{ "the traps' sites in guest memory: sysretq, the branch or the iretq",
	  test_trap_sites_verified },
	{ "USER_REGS: at return, saved walk, hostile RSP", test_user_regs_records },
	{ "USER_REGS: dwarf mode sizes, the eager part's own", test_user_regs_dwarf },
	{ "USER_REGS: the copy ends at the process's initial RSP", test_user_regs_bounded },
	{ "USER_REGS: bad stack sizes refused", test_user_regs_bad_size },
	{ "user walk: frames from the sample's stack copy, page walks remembered",
	  test_user_walk_from_copy },
	{ "attach: no mark while sampling is off, no window before the late vCPUs acknowledge",
	  test_attach_refuses_late_marks },
	{ "bench phases: config checked, the counter follows off/bare/on, restarted at a change",
	  test_bench_phases },
	{ "attach: a rate the kernel refuses fails the window, not the VM",
	  test_attach_rate_refused },
};

TEST_MAIN(tests)
