// SPDX-License-Identifier: MIT
// Unit tests of guest-visible marks (sampler/marks.c with flag hooks, sampler/sample.c's exit
// tail) without /dev/kvm: the exit-work loop's breakpoint stays armed across marks; a mark in the
// exit tail sets no flag and is resolved by its sample; in deferred mode an exit-tail sample with
// no mark of its stay is walked into the sample itself; a host that never delivers the
// breakpoints turns marks into walks at the sample.
#include <string.h>

#include "gi_internal.h"
#include "sampler_fixture.h"
#include "test.h"

/* ---------------------------------------------------------------- guest-visible marks */

static int n_flag_arm, n_flag_idle, n_flag_set;

static void flag_arm(struct svcpu *sv)
{
	(void)sv;
	n_flag_arm++;
}

static void flag_idle(struct svcpu *sv)
{
	(void)sv;
	n_flag_idle++;
}

static int flag_set(struct svcpu *sv, uint64_t task, const struct gi_paging *pg,
		    bool *was_set)
{
	(void)sv;
	(void)task;
	(void)pg;
	*was_set = false;
	n_flag_set++;
	return 0;
}

/* A 2-vCPU fixture whose marks are guest-visible (flag) ones, with counting hooks (a 4-page
 * task stack: room for pt_regs at its top, write_pt_regs). */
static int flag_fixture_init(struct fixture *f)
{
	if (fixture_init(f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		return -1;
	n_flag_arm = n_flag_idle = n_flag_set = 0;
	f->s->marks.flag_marks = true;
	f->s->marks.on_flag_first = flag_arm;
	f->s->marks.on_flag_idle = flag_idle;
	f->s->marks.set_flag = flag_set;
	return 0;
}

/*
 * The exit-work loop's breakpoint stays armed across marks that follow each other (no
 * KVM_SET_GUEST_DEBUG per mark): armed by the first flagged mark, not disarmed when the mark is
 * resolved, disarmed by a hit that finds no mark while none is pending, never while a flagged
 * mark is pending, and armed again by the next flagged mark.
 */
static int test_flag_loop_stays_armed(void)
{
	struct fixture f;
	struct mark_req req;
	struct svcpu *sv;
	int ret = TEST_FAIL;

	if (flag_fixture_init(&f))
		goto fini;
	sv = &f.s->vcpus[0];
	req = req_of(&f, FK_PID, &f.entry);
	for (int i = 0; i < 3; i++) {
		/* a system-call loop: marked, resolved at the loop, marked again */
		ASSERT_TRUE(marks_take(sv, &req) != 0);
		marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg,
					&f.entry);
	}
	ASSERT_EQ_INT(n_flag_set, 3);
	ASSERT_EQ_INT(n_flag_arm, 3); /* asked each time: vmm_bp_arm returns early when armed */
	ASSERT_EQ_INT(n_flag_idle, 0);
	ASSERT_EQ_INT(n_last, 0); /* the sysretq/iretq trap was never armed */
	ASSERT_EQ_U64(sv->c.resolved_at_return, 3);
	/* a flagged mark pending: a no-mark hit (another thread's own flag) leaves it armed */
	ASSERT_TRUE(marks_take(sv, &req) != 0);
	marks_loop_idle(sv);
	ASSERT_EQ_INT(n_flag_idle, 0);
	/* none pending: the next no-mark hit disarms */
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	marks_loop_idle(sv);
	ASSERT_EQ_INT(n_flag_idle, 1);
	ASSERT_TRUE(marks_take(sv, &req) != 0);
	ASSERT_EQ_INT(n_flag_arm, 5);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

/*
 * A flag mark taken in the exit tail (the thread may have read its flags for the last time)
 * sets no flag and arms nothing: the sample resolves it at once (sample.c). A mark of the same
 * stay flagged earlier keeps its flag and is resolved the same way.
 */
static int test_flag_exit_tail(void)
{
	struct fixture f;
	struct mark_req req;
	struct svcpu *sv;
	uint64_t c;
	int ret = TEST_FAIL;

	if (flag_fixture_init(&f))
		goto fini;
	sv = &f.s->vcpus[0];
	req = req_of(&f, FK_PID, &f.entry);
	req.exit_tail = true;
	c = marks_take(sv, &req);
	ASSERT_TRUE(c != 0);
	ASSERT_EQ_INT(n_flag_set, 0);
	ASSERT_EQ_INT(n_flag_arm, 0);
	ASSERT_EQ_INT(n_first, 0); /* the sysretq/iretq trap is not armed */
	ASSERT_EQ_U64(sv->c.marks_trapped, 0);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 1);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	ASSERT_EQ_INT(n_recs, 1);
	ASSERT_EQ_INT(check_good_walk(&recs[0], c), TEST_OK);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 0);
	/* flagged at an earlier sample of the stay, then sampled in the tail: no second flag */
	req.exit_tail = false;
	c = marks_take(sv, &req);
	ASSERT_EQ_INT(n_flag_set, 1);
	req.exit_tail = true;
	ASSERT_EQ_U64(marks_take(sv, &req), c);
	ASSERT_EQ_INT(n_flag_set, 1);
	ASSERT_EQ_INT(n_first, 0);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

/* Make [@start, @end) of the fake kernel's text its whole exit tail (gi_chain_in_exit_tail). */
static void fake_exit_tail(struct fixture *f, uint64_t start, uint64_t end)
{
	struct gi *gi = f->fk.gi;

	/* the loop's own code, where no sample of the test stands */
	gi->exit_work[0].head = FK_STEXT + 0x10000;
	gi->exit_work[0].loop_end = FK_STEXT + 0x10010;
	gi->exit_work[0].loop_cli = 0;
	gi->n_exit_work = 1;
	memset(&gi->tail, 0, sizeof(gi->tail));
	gi_ranges_add(&gi->tail, start, end);
}

/* A kernel sample of the fake task at @rip (one kernel frame), for user_part_of_kernel_sample. */
static void tail_sample(struct hvp_sample *smp, uint64_t rip)
{
	memset(smp, 0, sizeof(*smp));
	smp->pid = FK_PID;
	smp->rip = rip;
	smp->kernel_ips[0] = rip;
	smp->n_kernel = 1;
}

/* ... with a caller frame returning to @frame (an interrupt taken there: its frame exactly on
 * the instruction, or a call ending before it). */
static void framed_sample(struct hvp_sample *smp, uint64_t rip, uint64_t frame)
{
	tail_sample(smp, rip);
	smp->kernel_ips[1] = frame;
	smp->n_kernel = 2;
}

/* A flag fixture whose exit tail is [@start, @end), flag marks on, the task's pt_regs written
 * from f->entry; its vCPU 0 in *@sv. 0, or -1 (the fixture may need fixture_fini). */
static int tail_fixture_init(struct fixture *f, struct svcpu **sv, uint64_t start, uint64_t end)
{
	if (flag_fixture_init(f))
		return -1;
	*sv = &f->s->vcpus[0];
	f->s->traps.flag = true;
	f->s->traps.n_loops = 1;
	fake_exit_tail(f, start, end);
	return write_pt_regs(f, &f->entry) == 0 ? 0 : -1;
}

/* The user part of kernel sample @smp of the fixture's task (its pt_regs, its mm). */
static void user_sample(struct fixture *f, struct svcpu *sv, struct hvp_sample *smp)
{
	user_part_of_kernel_sample(sv, smp, f->fk.task_kva, &f->fk.fm.pg, NULL, false, f->fk.mm_kva,
				   false);
}

/*
 * Deferred mode: a sample in the exit tail of a thread with no mark of its stay walks pt_regs
 * into the sample itself (the registers the return would walk): no mark, no USER_STACK. A tail
 * sample of a stay that already has a mark shares the mark and resolves it at once. In "both"
 * mode the tail sample still makes its mark: the deferred walk is cross-checked there.
 */
static int test_flag_exit_tail_inline(void)
{
	const uint64_t tail = FK_STEXT + 0x100, body = FK_STEXT + 0x400;
	struct fixture f;
	struct hvp_sample smp;
	struct svcpu *sv;
	uint64_t c;
	int ret = TEST_FAIL;

	if (tail_fixture_init(&f, &sv, tail, tail + 0x100))
		goto fini;
	ASSERT_TRUE(gi_chain_in_exit_tail(f.fk.gi, tail, NULL, 0));
	ASSERT_TRUE(!gi_chain_in_exit_tail(f.fk.gi, body, NULL, 0));

	/* no mark of the stay: walked into the sample */
	tail_sample(&smp, tail);
	user_sample(&f, sv, &smp);
	ASSERT_EQ_U64(smp.cookie, 0);
	ASSERT_EQ_INT(smp.n_user, 4); /* ip + 3 frames: the fixture's good chain */
	ASSERT_EQ_U64(smp.user_ips[0], f.entry.ip);
	ASSERT_TRUE(smp.user_stop != HVP_WALK_DEFERRED);
	ASSERT_TRUE(sv->sample_has_regs);
	ASSERT_EQ_INT(n_recs, 0);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 0);
	ASSERT_EQ_U64(sv->c.tail_walked_inline, 1);
	ASSERT_EQ_U64(sv->c.marks_resolved_in_tail, 0);
	ASSERT_EQ_INT(n_flag_set, 0);

	/* an earlier sample of the stay flagged a mark: the tail sample joins and resolves it */
	tail_sample(&smp, body);
	user_sample(&f, sv, &smp);
	c = smp.cookie;
	ASSERT_TRUE(c != 0);
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_INT(n_flag_set, 1);
	tail_sample(&smp, tail);
	user_sample(&f, sv, &smp);
	ASSERT_EQ_U64(smp.cookie, c);
	ASSERT_EQ_INT(n_recs, 1);
	ASSERT_EQ_INT(check_good_walk(&recs[0], c), TEST_OK);
	ASSERT_EQ_U64(sv->c.marks_resolved_in_tail, 1);
	ASSERT_EQ_U64(sv->c.tail_walked_inline, 1);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 0);

	/* "both": the tail sample makes its mark (resolved at once) beside its eager walk */
	f.s->callchain = SAMPLER_CALLCHAIN_BOTH;
	tail_sample(&smp, tail);
	user_sample(&f, sv, &smp);
	ASSERT_TRUE(smp.cookie != 0 && smp.cookie != c);
	ASSERT_EQ_INT(n_recs, 2);
	ASSERT_EQ_INT(check_good_walk(&recs[1], smp.cookie), TEST_OK);
	ASSERT_EQ_INT(smp.n_user, 4);
	ASSERT_EQ_U64(sv->c.marks_resolved_in_tail, 2);
	ASSERT_EQ_U64(sv->c.tail_walked_inline, 1);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

/*
 * An exception or interrupt returning to user mode (error_return, after irqentry_exit's exit
 * work): with RSP at the task's outermost pt_regs it is the exit tail (walked into the sample, no
 * flag set that would act only at the next exit); lower on the stack (an exception taken in
 * kernel mode) it is not, and the sample flags a mark.
 */
static int test_flag_exception_return(void)
{
	const uint64_t tail = FK_STEXT + 0x100, err_ret = FK_STEXT + 0x800;
	struct fixture f;
	struct hvp_sample smp;
	struct gi_regs gr;
	struct svcpu *sv;
	int ret = TEST_FAIL;

	/* error_return is outside the chain's ranges */
	if (tail_fixture_init(&f, &sv, tail, tail + 0x100))
		goto fini;
	f.fk.gi->exc_ret_start = err_ret;
	f.fk.gi->exc_ret_end = err_ret + 0x10;
	ASSERT_TRUE(!gi_chain_in_exit_tail(f.fk.gi, err_ret + 4, NULL, 0));
	gr = f.fk.regs;
	gr.rsp = FK_STACK + 16384 - f.fk.layout.pt_regs_size;
	sv->sample_gi_regs = &gr;
	sv->sample_kstack_kva = FK_STACK;
	sv->sample_kstack_task = f.fk.task_kva;

	tail_sample(&smp, err_ret + 4);
	user_sample(&f, sv, &smp);
	ASSERT_EQ_U64(smp.cookie, 0);
	ASSERT_EQ_INT(smp.n_user, 4);
	ASSERT_EQ_U64(smp.user_ips[0], f.entry.ip);
	ASSERT_EQ_U64(sv->c.tail_walked_inline, 1);
	ASSERT_EQ_INT(n_flag_set, 0);

	/* an exception taken in kernel mode returns from lower on the stack: not the tail */
	gr.rsp -= 8;
	tail_sample(&smp, err_ret + 4);
	user_sample(&f, sv, &smp);
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_U64(sv->c.tail_walked_inline, 1);
	ASSERT_EQ_INT(n_flag_set, 1);
	ret = TEST_OK;
fini:
	if (f.s)
		f.s->vcpus[0].sample_gi_regs = NULL;
	fixture_fini(&f);
	return ret;
}

/*
 * The IDT handlers' code after their call of irqentry_exit (gi->epilogues): a leaf there, with
 * no kernel frame below its stub's, has done its exit work (in the nested runs, a sample in
 * exc_page_fault's epilogue flagged a mark that acted one exit late); one entered from kernel
 * mode returns to its stay; a caller frame whose return address starts the span is still
 * inside irqentry_exit, before the read, and does not decide.
 */
static int test_flag_handler_epilogue(void)
{
	const uint64_t after = FK_STEXT + 0x3000, body = FK_STEXT + 0x400;
	uint64_t span[1][2] = { { after, after + 7 } }, callers[1] = { after };
	const uint64_t stub[2] = { FK_STEXT + 0x5008, body }; /* the stub's return, a kernel frame */
	struct fixture f;
	int ret = TEST_FAIL;

	if (flag_fixture_init(&f))
		goto fini;
	fake_exit_tail(&f, FK_STEXT + 0x100, FK_STEXT + 0x200);
	ASSERT_TRUE(!gi_chain_in_exit_tail(f.fk.gi, after, NULL, 0));
	f.fk.gi->epilogues = (struct gi_spans){ .r = span, .n = 1, .lo = after, .hi = after + 7 };
	ASSERT_TRUE(gi_chain_in_exit_tail(f.fk.gi, after, NULL, 0));
	ASSERT_TRUE(gi_chain_in_exit_tail(f.fk.gi, after + 6, NULL, 0));
	ASSERT_TRUE(!gi_chain_in_exit_tail(f.fk.gi, after + 7, NULL, 0));
	ASSERT_TRUE(!gi_chain_in_exit_tail(f.fk.gi, body, callers, 1));
	/* below the handler only its stub (an entry from user mode): the tail; an interrupted
	 * kernel frame below that (from kernel mode, back to the stay): not */
	ASSERT_TRUE(gi_chain_in_exit_tail(f.fk.gi, after + 2, stub, 1));
	ASSERT_TRUE(!gi_chain_in_exit_tail(f.fk.gi, after + 2, stub, 2));
	ret = TEST_OK;
fini:
	if (f.fk.gi)
		f.fk.gi->epilogues = (struct gi_spans){ 0 }; /* not allocated: not for gi_close */
	fixture_fini(&f);
	return ret;
}

/* A sample at @rip resolved at once as on a stepped site, the @stepped-th so counted. */
static int at_once(struct fixture *f, struct svcpu *sv, uint64_t rip, uint64_t stepped)
{
	struct hvp_sample smp;

	tail_sample(&smp, rip);
	user_sample(f, sv, &smp);
	ASSERT_EQ_U64(smp.cookie, 0);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, stepped);
	return TEST_OK;
}

/* A sample at @rip that flags a mark (the @flags-th flag set), resolved then by its return. */
static int flagged(struct fixture *f, struct svcpu *sv, uint64_t rip, int flags)
{
	struct hvp_sample smp;

	tail_sample(&smp, rip);
	user_sample(f, sv, &smp);
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_INT(n_flag_set, flags);
	marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg, &f->entry);
	return TEST_OK;
}

/*
 * When the flag strategy is refused, and why (the strategy line's reason): no loop, a path
 * without one, a clear hvprof cannot complete on PVM, too few breakpoint slots for the loops
 * (6.12's two on PVM, which keeps one of four for its SYSCALL fix-up; VMX/SVM leaves two after
 * sysretq and iretq).
 */
static int test_flag_refusal(void)
{
	struct gi_exit_work ew[GI_EW_COPIES];
	const char *why;

	memset(ew, 0, sizeof(ew));
	ew[0].clear_base = ew[1].clear_base = 13; /* [r12]: completable */
	ASSERT_TRUE(flag_refusal(-ENOENT, ew, 0, false, 4) != NULL);
	why = flag_refusal(-ENOTSUP, ew, 0, false, 4);
	ASSERT_TRUE(why && strstr(why, "exit path"));
	ASSERT_TRUE(flag_refusal(-EFAULT, ew, 0, false, 4) != NULL);
	ASSERT_TRUE(flag_refusal(0, ew, 0, false, 4) != NULL);
	/* one loop: VMX/SVM and PVM alike, given a slot */
	ASSERT_TRUE(flag_refusal(0, ew, 1, false, 2) == NULL);
	ASSERT_TRUE(flag_refusal(0, ew, 1, true, 1) == NULL);
	ASSERT_TRUE(flag_refusal(0, ew, 1, true, 0) != NULL);
	/* two: VMX/SVM (two slots left), not PVM (one) */
	ASSERT_TRUE(flag_refusal(0, ew, 2, false, 2) == NULL);
	why = flag_refusal(0, ew, 2, true, 1);
	ASSERT_TRUE(why && strstr(why, "each exit path holds its own") && strstr(why, "PVM"));
	/* a clear hvprof cannot complete: only where RF is ignored */
	ew[1].clear_base = 0;
	ASSERT_TRUE(flag_refusal(0, ew, 2, false, 2) == NULL);
	why = flag_refusal(0, ew, 2, true, 3);
	ASSERT_TRUE(why && strstr(why, "complete"));
	return TEST_OK;
}

/*
 * Two exit-work loops (each exit path's inlined copy, Debian's 6.12): an interrupt taken on the
 * second one's clear (a chain frame exactly there) is resolved at once as on the first's; with
 * one loop, that address is nothing of hvprof's and the sample flags a mark.
 */
static int test_sample_on_second_loop(void)
{
	const uint64_t clear = FK_STEXT + 0x10008, clear2 = FK_STEXT + 0x10108;
	struct kvm_regs vregs = { .rflags = 0x2 };
	struct fixture f;
	struct hvp_sample smp;
	struct svcpu *sv;
	int ret = TEST_FAIL;

	if (tail_fixture_init(&f, &sv, FK_STEXT + 0x100, FK_STEXT + 0x200))
		goto fini;
	f.s->traps.available = true;
	f.s->traps.sites.sysret = FK_STEXT + 0x20000;
	f.s->traps.sites.iret = FK_STEXT + 0x20100;
	f.s->traps.ew[0].clear = clear;
	f.s->traps.ew[1].clear = clear2;
	f.s->traps.n_loops = 2;
	atomic_store(&f.s->traps.ready, true);
	sv->sample_vcpu_regs = &vregs;
	framed_sample(&smp, FK_STEXT + 0x400, clear2);
	user_sample(&f, sv, &smp);
	ASSERT_EQ_U64(smp.cookie, 0);
	ASSERT_EQ_INT(n_flag_set, 0);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 1);
	/* one loop: the same frame flags a mark */
	f.s->traps.n_loops = 1;
	framed_sample(&smp, FK_STEXT + 0x400, clear2);
	user_sample(&f, sv, &smp);
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_INT(n_flag_set, 1);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 1);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	/* the slots armed and disarmed with the loops: each loop's, with sysretq's and iretq's */
	f.s->traps.slot_sysret = 0;
	f.s->traps.slot_iret = 1;
	f.s->traps.slot_loop[0] = 2;
	f.s->traps.slot_loop[1] = 3;
	f.s->traps.n_loops = 2;
	ASSERT_EQ_INT((int)traps_loop_mask(f.s), 0xc);
	ASSERT_EQ_INT((int)traps_mask(f.s), 0xf);
	f.s->traps.n_loops = 1;
	ASSERT_EQ_INT((int)traps_loop_mask(f.s), 0x4);
	f.s->traps.flag = false;
	ASSERT_EQ_INT((int)traps_loop_mask(f.s), 0);
	ASSERT_EQ_INT((int)traps_mask(f.s), 0x3);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

/*
 * A sample on a return-to-user breakpoint whose hit was taken and is being stepped over (RIP
 * at the loop's clear of TIF_NOTIFY_RESUME or at sysretq/iretq, RFLAGS.RF set): the clear
 * would clear a flag set now itself, sysretq would not hit a trap armed now, and the mark
 * would outlive its return unseen. Resolved at once (walked into the sample: no flag, no
 * trap). Without RF (the hit still to come, or PVM, where the hit completes the instruction)
 * the same RIP flags a mark as usual, and so does an iretq whose hit went back to kernel mode
 * (mid-stay). An interrupt taken on the clear (a chain frame exactly there) is resolved at
 * once whatever RF. With the strategy of traps (no flag marks), sysretq
 * with RF is resolved at once too and arms no trap.
 */
static int test_sample_on_stepped_site(void)
{
	const uint64_t clear = FK_STEXT + 0x10008, sysret = FK_STEXT + 0x20000;
	const uint64_t iret = FK_STEXT + 0x20100;
	struct kvm_regs vregs = { .rflags = 0x2 | (1u << 16) };
	struct fixture f;
	struct hvp_sample smp;
	struct svcpu *sv;
	int ret = TEST_FAIL;

	if (tail_fixture_init(&f, &sv, FK_STEXT + 0x100, FK_STEXT + 0x200)) /* the clear: out */
		goto fini;
	ASSERT_TRUE(!gi_chain_in_exit_tail(f.fk.gi, clear, NULL, 0));
	f.s->traps.available = true;
	f.s->traps.sites.sysret = sysret;
	f.s->traps.sites.iret = iret;
	f.s->traps.ew[0].clear = clear;
	atomic_store(&f.s->traps.ready, true);
	sv->sample_vcpu_regs = &vregs;

	/* placed but not published yet (traps.ready): nothing is taken as stepped */
	sv->stepped_pc = clear;
	atomic_store(&f.s->traps.ready, false);
	framed_sample(&smp, FK_STEXT + 0x400, clear);
	user_sample(&f, sv, &smp);
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 0);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	atomic_store(&f.s->traps.ready, true);
	n_flag_set = 0;
	n_recs = 0;

	/* on the clear its last hit stepped over, RF set: walked into the sample, no flag, no
	 * mark */
	tail_sample(&smp, clear);
	user_sample(&f, sv, &smp);
	ASSERT_EQ_U64(smp.cookie, 0);
	ASSERT_EQ_INT(smp.n_user, 4);
	ASSERT_EQ_U64(smp.user_ips[0], f.entry.ip);
	ASSERT_EQ_INT(n_flag_set, 0);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 0);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 1);
	ASSERT_EQ_U64(sv->c.tail_walked_inline, 1);

	/* on iretq, RF set, its last hit a return to user: the same */
	sv->stepped_pc = iret;
	tail_sample(&smp, iret);
	user_sample(&f, sv, &smp);
	ASSERT_EQ_U64(smp.cookie, 0);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 2);
	/* ... an iretq back to kernel mode (a trap that resolved nothing, stepped_pc 0): mid-stay,
	 * flagged */
	sv->stepped_pc = 0;
	tail_sample(&smp, iret);
	user_sample(&f, sv, &smp);
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_INT(n_flag_set, 1);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 2);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	n_flag_set = 0;
	n_recs = 0;
	sv->stepped_pc = clear;

	/* on the clear, RF clear: the hit is still to come and resolves the flagged mark */
	vregs.rflags &= ~(1ull << 16);
	tail_sample(&smp, clear);
	user_sample(&f, sv, &smp);
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_INT(n_flag_set, 1);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 2);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 0);

	/* an interrupt taken on the clear (a chain frame exactly there), RF clear at the
	 * handler's sample: resolved at once too */
	framed_sample(&smp, FK_STEXT + 0x400, clear);
	user_sample(&f, sv, &smp);
	ASSERT_EQ_U64(smp.cookie, 0);
	ASSERT_EQ_INT(n_flag_set, 1);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 3);
	/* ... but a return address just after it (a call ending there) is no such frame */
	framed_sample(&smp, FK_STEXT + 0x400, clear + 1);
	user_sample(&f, sv, &smp);
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_INT(n_flag_set, 2);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 3);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);

	/* RF set elsewhere (a guest's own IRET with RF): no effect */
	vregs.rflags |= 1ull << 16;
	tail_sample(&smp, FK_STEXT + 0x400);
	user_sample(&f, sv, &smp);
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_INT(n_flag_set, 3);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 3);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &f.entry);

	/* the branch to the iretq (the trap strategy's site): a sample from its target to the
	 * iretq after its hit, RF or not (PVM completes the jump), is past every breakpoint:
	 * resolved at once; before the target, or when the last hit was elsewhere, flagged */
	f.s->traps.sites.iret_user = iret - 0x20;
	f.s->traps.sites.iret_user_target = iret - 7;
	sv->stepped_pc = iret - 0x20;
	vregs.rflags &= ~(1ull << 16);
	ASSERT_EQ_INT(at_once(&f, sv, iret - 2, 4), TEST_OK);
	ASSERT_EQ_INT(at_once(&f, sv, iret, 5), TEST_OK);
	ASSERT_EQ_INT(flagged(&f, sv, iret - 8, 4), TEST_OK);
	sv->stepped_pc = clear;
	ASSERT_EQ_INT(flagged(&f, sv, iret - 2, 5), TEST_OK);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 5);
	/* ... but with RSP at an IRET frame to user mode (the branch taken while not armed, no
	 * hit): past it all the same, resolved at once; one back to kernel mode: flagged */
	vregs.rsp = PT_REGS + 128; /* pt_regs' ip, cs (0x33), flags, sp, ss */
	ASSERT_EQ_INT(at_once(&f, sv, iret - 2, 6), TEST_OK);
	ASSERT_EQ_INT(at_once(&f, sv, iret, 7), TEST_OK);
	ASSERT_EQ_INT(flagged(&f, sv, iret + 2, 6), TEST_OK); /* past the iretq: not this code */
	vregs.rsp = PT_REGS - 64; /* an interrupt's IRET frame back to kernel mode (CS 0x10) */
	ASSERT_EQ_INT(fk_w64(&f.fk, PT_REGS - 56, 0x10), 0);
	ASSERT_EQ_INT(flagged(&f, sv, iret - 2, 7), TEST_OK);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 7);
	vregs.rsp = 0;
	f.s->traps.sites.iret_user = f.s->traps.sites.iret_user_target = 0;
	vregs.rflags |= 1ull << 16;

	/* traps (no flag marks), "both" mode (a mark always made): sysretq with RF is resolved
	 * by the sample and arms no trap */
	f.s->traps.flag = false;
	f.s->marks.flag_marks = false;
	f.s->callchain = SAMPLER_CALLCHAIN_BOTH;
	sv->stepped_pc = sysret;
	tail_sample(&smp, sysret);
	user_sample(&f, sv, &smp);
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_INT(n_first, 0); /* the sysretq/iretq trap was not armed */
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 0);
	ASSERT_EQ_INT(n_recs, 8); /* the seven flagged marks' walks, then this one */
	ASSERT_EQ_INT(check_good_walk(&recs[7], smp.cookie), TEST_OK);
	ASSERT_EQ_U64(sv->c.tail_stepped_site, 8);
	ret = TEST_OK;
fini:
	if (f.s)
		f.s->vcpus[0].sample_vcpu_regs = NULL;
	fixture_fini(&f);
	return ret;
}

/* Guest reads through a gmem, and those of page-table entries (the fake's tables, 1 MiB up). */
struct counting_gmem {
	struct gmem inner;
	uint64_t table_end;
	unsigned int reads, table_reads;
};

static int counting_gmem_read(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	struct counting_gmem *cg = ctx;

	cg->reads++;
	cg->table_reads += gpa >= 0x100000 && gpa < cg->table_end && len == 8;
	return gmem_read(&cg->inner, gpa, dst, len);
}

/*
 * The exit-work loop's hit (trap_loop_resolve) resolves the thread's mark from pt_regs through
 * the exit's translation cache (sampler_exit_paging): the same USER_STACK as without the cache,
 * with each page walked once in the exit instead of once per read (before this, the traps walked
 * every read: the return address of each frame and its stack slot, the identity's fields), and
 * the identity checked through the vCPU's task cache the sample filled. (That loop_hit and
 * trap_hit build their paging with sampler_exit_paging needs a VM to test: the kvm suite.)
 */
static int test_flag_loop_resolve_cached(void)
{
	struct fixture f;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct gi_paging pg;
	struct counting_gmem cg = { 0 };
	struct svcpu *sv;
	unsigned int uncached_reads, uncached_tables;
	uint64_t c1, c2, task_hits;
	int ret = TEST_FAIL;

	if (flag_fixture_init(&f))
		goto fini;
	sv = &f.s->vcpus[0];
	ASSERT_EQ_INT(fixture_kernel_samples(&f, &regs, &sregs), TEST_OK);
	cg.inner = f.fk.fm.mem;
	cg.table_end = f.fk.fm.next_table_gpa;
	f.fk.fm.mem = (struct gmem){ .read = counting_gmem_read, .ctx = &cg };

	/* a kernel sample marks the thread; its return resolves the mark, walking every read */
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 1000, 0), 0);
	c1 = sv->sample.cookie;
	ASSERT_TRUE(c1 != 0);
	cg.reads = cg.table_reads = 0;
	pg = sampler_paging(f.s, &sregs);
	trap_loop_resolve(sv, &regs, &sregs, &pg);
	uncached_reads = cg.reads;
	uncached_tables = cg.table_reads;
	ASSERT_EQ_INT(n_recs, 1);
	ASSERT_EQ_INT(check_good_walk(&recs[0], c1), TEST_OK);

	/* the next stay, resolved through the exit's cache: the same walk, each page walked once */
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 2000, 0), 0);
	c2 = sv->sample.cookie;
	ASSERT_TRUE(c2 != 0 && c2 != c1);
	cg.reads = cg.table_reads = 0;
	task_hits = sv->tasks.hits;
	pg = sampler_exit_paging(sv, &sregs);
	trap_loop_resolve(sv, &regs, &sregs, &pg);
	ASSERT_EQ_U64(sv->tasks.hits, task_hits + 1); /* the identity the sample cached */
	ASSERT_EQ_INT(n_recs, 2);
	ASSERT_EQ_INT(check_good_walk(&recs[1], c2), TEST_OK);
	ASSERT_EQ_U64(sv->c.resolved_at_return, 2);
	ASSERT_EQ_U64(sv->c.traps_no_mark, 0);
	ASSERT_EQ_U64(atomic_load(&f.s->marks.pending), 0);
	/* four pages outside the direct map, each walked once (4 levels): pt_regs' kernel stack
	 * page, the user stack's two (its top, copied for the sample regs, and the frames) and the
	 * user text page of the return addresses; the identity's reads are kept translations */
	ASSERT_TRUE(uncached_tables >= 40);
	ASSERT_TRUE(cg.table_reads <= 4 * 4);
	ASSERT_TRUE(cg.reads * 2 <= uncached_reads);
	ret = TEST_OK;
fini:
	if (cg.inner.read)
		f.fk.fm.mem = cg.inner;
	fixture_fini(&f);
	return ret;
}

/* @k kernel samples of the fixture's thread in the kernel body, each in a new kernel entry (its
 * user registers alternate between two), with no return seen between them: the last sample. */
static void unseen_returns(struct fixture *f, struct svcpu *sv, int k, struct hvp_sample *smp)
{
	struct gi_user_regs other = { 0x400200, U + 0x80, U + 0x3000 };

	for (int i = 0; i < k; i++) {
		tail_sample(smp, FK_STEXT + 0x400);
		user_part_of_kernel_sample(sv, smp, f->fk.task_kva, &f->fk.fm.pg,
					   i % 2 ? &other : &f->entry, false, f->fk.mm_kva, false);
	}
}

/*
 * A host that never delivers the guest-debug breakpoints (QEMU 7.2's emulated SVM): every flagged
 * mark outlives its return, and the thread's next sample in a later kernel entry finds it. After
 * BP_DEAD_UNSEEN such returns with no breakpoint hit, kernel samples are walked at once (no mark,
 * their own user path), counted once. One hit before that keeps the marks, however many
 * returns a race lets pass.
 */
static int test_breakpoints_never_fire(void)
{
	struct fixture f;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct gi_paging pg;
	struct hvp_sample smp;
	struct svcpu *sv;
	int ret = TEST_FAIL;

	if (flag_fixture_init(&f))
		goto fini;
	sv = &f.s->vcpus[0];
	f.s->traps.flag = true;
	f.s->stay_adaptive = false; /* every sample marks: the rule is not what is tested */
	unseen_returns(&f, sv, BP_DEAD_UNSEEN, &smp);
	ASSERT_TRUE(smp.cookie != 0); /* BP_DEAD_UNSEEN - 1 unseen: still marking */
	ASSERT_EQ_INT(smp.user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_U64(sv->c.returns_unseen, BP_DEAD_UNSEEN - 1);
	ASSERT_EQ_U64(sv->c.bp_never_fired, 0);
	unseen_returns(&f, sv, 2, &smp); /* the last mark's return unseen, then walked at once */
	ASSERT_EQ_U64(sv->c.returns_unseen, BP_DEAD_UNSEEN);
	ASSERT_EQ_U64(sv->c.bp_never_fired, 1);
	ASSERT_EQ_U64(smp.cookie, 0);
	ASSERT_TRUE(smp.n_user >= 1);
	ASSERT_EQ_U64(smp.user_ips[0], 0x400200); /* its own entry's registers (the other pair) */
	ASSERT_EQ_U64(sv->c.marks, BP_DEAD_UNSEEN + 1);
	ASSERT_EQ_INT(n_flag_set, BP_DEAD_UNSEEN + 1);
	unseen_returns(&f, sv, 4, &smp); /* no mark, no flag, counted once */
	ASSERT_EQ_U64(sv->c.marks, BP_DEAD_UNSEEN + 1);
	ASSERT_EQ_INT(n_flag_set, BP_DEAD_UNSEEN + 1);
	ASSERT_EQ_U64(sv->c.bp_never_fired, 1);
	fixture_fini(&f);

	/* the loop's breakpoint caught one return (trap_loop_resolve, as loop_hit calls it):
	 * unseen returns after it are counted, and the marks stay */
	if (flag_fixture_init(&f))
		goto fini;
	sv = &f.s->vcpus[0];
	f.s->traps.flag = true;
	ASSERT_EQ_INT(fixture_kernel_samples(&f, &regs, &sregs), TEST_OK);
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 1000, 0), 0);
	ASSERT_TRUE(sv->sample.cookie != 0);
	pg = sampler_exit_paging(sv, &sregs);
	trap_loop_resolve(sv, &regs, &sregs, &pg);
	ASSERT_EQ_U64(sv->c.resolved_at_return, 1);
	unseen_returns(&f, sv, 2 * BP_DEAD_UNSEEN, &smp);
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_U64(sv->c.returns_unseen, 2 * BP_DEAD_UNSEEN - 1);
	ASSERT_EQ_U64(sv->c.bp_never_fired, 0);
	ret = TEST_OK;
fini:
	fixture_fini(&f);
	return ret;
}

static const struct test_case tests[] = {
	{ "flag marks: the loop stays armed across marks, off when idle", test_flag_loop_stays_armed },
	{ "flag marks in the exit tail: no flag, no trap, resolved by the sample", test_flag_exit_tail },
	{ "deferred, exit tail, no mark yet: walked into the sample, no mark",
	  test_flag_exit_tail_inline },
	{ "a leaf in a handler's code after irqentry_exit is the exit tail",
	  test_flag_handler_epilogue },
	{ "a sample on a return breakpoint being stepped over (RF) is resolved at once",
	  test_sample_on_stepped_site },
	{ "... on the second loop's clear too, where each exit path holds one",
	  test_sample_on_second_loop },
	{ "flag strategy refused, and why (two loops: slots on PVM)", test_flag_refusal },
	{ "deferred, an exception's return to user (error_return) is the exit tail",
	  test_flag_exception_return },
	{ "flag marks: the loop's hit resolves through the exit's translation and task caches",
	  test_flag_loop_resolve_cached },
	{ "breakpoints that never fire: walks at the sample after BP_DEAD_UNSEEN unseen returns",
	  test_breakpoints_never_fire },
};

TEST_MAIN(tests)
