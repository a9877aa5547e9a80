// SPDX-License-Identifier: MIT
// Unit tests of a whole sample without /dev/kvm (sampler/sample.c: sample_from_regs): from the
// vCPU's registers to the records the sink gets, on the fake kernel's task — identity, kernel
// and user callchains, the mark and its cookie, USER_REGS, the counters — and what a bad
// current-task pointer or a vCPU not in long mode gives.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gi_internal.h"
#include "sampler_fixture.h"
#include "test.h"

#define MAX_GOT 8

static struct hvp_sample got[MAX_GOT];
static bool got_regs[MAX_GOT];
static int n_got, n_threads, n_procs;
static struct hvp_thread last_thread;

static int cap_sample(void *ctx, const struct hvp_sample *s, const struct hvp_user_regs *r)
{
	(void)ctx;
	if (n_got >= MAX_GOT)
		return -1;
	got[n_got] = *s;
	got_regs[n_got++] = r != NULL;
	return 0;
}

static int cap_thread(void *ctx, const struct hvp_thread *t)
{
	(void)ctx;
	last_thread = *t;
	n_threads++;
	return 0;
}

static int cap_process(void *ctx, const struct hvp_process *p)
{
	(void)ctx;
	(void)p;
	n_procs++;
	return 0;
}

static const struct sampler_sink cap_sink = { .sample = cap_sample, .user_stack = sink_user_stack,
					      .thread = cap_thread, .process = cap_process };

static int setup(struct fixture *f, enum sampler_callchain_mode mode)
{
	n_got = n_threads = n_procs = 0;
	if (fixture_init(f, mode, 4) || write_pt_regs(f, &f->entry))
		return -1;
	fixture_process(&f->fk, 0x400000);
	f->s->cfg.sink = &cap_sink;
	return 0;
}

static int sample_at(struct fixture *f, uint8_t cpl, uint64_t period, uint64_t t0)
{
	struct kvm_regs regs;
	struct kvm_sregs sregs;

	if (fixture_vcpu_regs(f, cpl, &regs, &sregs))
		return -1;
	/* stage clock 0: like @t0, long before now (the sample "takes" the whole clock) */
	return sample_from_regs(&f->s->vcpus[0], &regs, &sregs, period, t0, 0);
}

/* A kernel sample's fields: the task's identity, the kernel chain of fixture_vcpu_regs. */
static int check_kernel_sample(const struct hvp_sample *s, uint64_t task)
{
	ASSERT_EQ_INT(s->cpl, 0);
	ASSERT_EQ_U64(s->task, task);
	ASSERT_EQ_INT(s->pid, FK_PID);
	ASSERT_EQ_INT(s->tgid, FK_TGID);
	ASSERT_EQ_INT(s->flags & (HVP_SAMPLE_USER | HVP_SAMPLE_KTHREAD | HVP_SAMPLE_NO_TASK), 0);
	ASSERT_EQ_INT(s->n_kernel, 4);
	ASSERT_EQ_U64(s->kernel_ips[0], FK_STEXT + 0x100);
	ASSERT_EQ_U64(s->kernel_ips[1], KRET(1));
	ASSERT_EQ_U64(s->kernel_ips[3], KRET(3));
	ASSERT_EQ_INT(s->kernel_stop, HVP_WALK_END);
	return TEST_OK;
}

/*
 * Deferred: a kernel sample names the task, walks the kernel stack and marks the thread (a
 * cookie, the user part deferred, no USER_REGS); a second sample in the same kernel entry finds
 * the identity cached and shares the cookie, with no new THREAD record, and reads its kernel
 * stack through the translation the first one walked; a user-mode sample walks
 * the user stack where it is and carries its USER_REGS.
 */
static int sample_deferred(struct fixture *f)
{
	struct svcpu *sv = &f->s->vcpus[0];
	struct read_counter fc;
	uint64_t misses;

	ASSERT_EQ_INT(sample_at(f, 0, 1000000, 5000), 0);
	ASSERT_EQ_INT(n_got, 1);
	ASSERT_EQ_INT(check_kernel_sample(&got[0], f->fk.task_kva), TEST_OK);
	ASSERT_TRUE(got[0].cookie != 0);
	ASSERT_EQ_INT(got[0].user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_INT(got[0].n_user, 0);
	ASSERT_TRUE(!got_regs[0]);
	ASSERT_EQ_U64(got[0].period, 1000000);
	ASSERT_EQ_U64(got[0].time_ns, 5000);
	ASSERT_EQ_INT(n_threads, 1);
	ASSERT_EQ_INT(last_thread.pid, FK_PID);
	ASSERT_TRUE(strcmp(last_thread.comm, FK_COMM) == 0);
	ASSERT_EQ_INT(n_procs, 1);
	ASSERT_EQ_U64(sv->c.ident_cache_misses, 1);
	ASSERT_EQ_U64(sv->c.samples_kernel, 1);
	ASSERT_EQ_U64(sv->c.marks, 1);

	ASSERT_EQ_U64(sv->c.samples_in_workload, 0); /* no WORKLOAD_START yet */
	ASSERT_EQ_U64(sv->c.sample_ns_in_workload, 0);
	atomic_store(&f->s->in_workload, true); /* what the WORKLOAD_START event's hook sets */
	misses = sv->tcache.misses;
	/* the reads overlapping the 8-byte task->stack */
	fc = (struct read_counter){ .inner = f->fk.fm.mem,
				    .gpa = FK_TASK_GPA + f->fk.layout.task_stack, .size = 8 };
	f->fk.fm.mem = (struct gmem){ .read = read_counter_read, .ctx = &fc };
	ASSERT_EQ_INT(sample_at(f, 0, 999000, 6000), 0);
	f->fk.fm.mem = fc.inner;
	/* task->stack read once, by the seed: not again by the frame-pointer unwinder for its
	 * bounds (gi_regs.task_stack) nor for pt_regs (gi_stack_user_regs) */
	ASSERT_EQ_INT(fc.n, 1);
	ASSERT_EQ_U64(sv->c.samples_in_workload, 1);
	ASSERT_TRUE(sv->c.sample_ns_in_workload > 0 &&
		    sv->c.sample_ns_in_workload < sv->c.sample_ns_total);
	/* t0 6000 ns: the sample "took" the whole clock, more than 32 us: the last bucket */
	ASSERT_EQ_U64(sv->c.workload_sample_over_32000ns, 1);
	ASSERT_EQ_U64(sv->c.workload_sample_le_250ns + sv->c.workload_sample_le_32000ns, 0);
	atomic_store(&f->s->in_workload, false);
	ASSERT_EQ_INT(n_got, 2);
	ASSERT_EQ_INT(check_kernel_sample(&got[1], f->fk.task_kva), TEST_OK);
	ASSERT_EQ_U64(got[1].cookie, got[0].cookie);
	ASSERT_EQ_U64(got[1].period, 999000);
	ASSERT_EQ_INT(n_threads, 1);
	ASSERT_EQ_U64(sv->c.ident_cache_hits, 1);
	ASSERT_EQ_U64(sv->c.marks, 1);
	/* the stack page the first sample walked (frames and pt_regs) was not walked again */
	ASSERT_EQ_U64(sv->c.kstack_pages_seeded, 1);
	ASSERT_EQ_U64(sv->tcache.misses - misses, 1); /* one walk (not of the stack) */

	ASSERT_EQ_INT(sample_at(f, 3, 1000000, 7000), 0);
	ASSERT_EQ_INT(n_got, 3);
	ASSERT_EQ_INT(got[2].cpl, 3);
	ASSERT_TRUE(got[2].flags & HVP_SAMPLE_USER);
	ASSERT_EQ_INT(got[2].pid, FK_PID);
	ASSERT_EQ_INT(got[2].n_user, 4);
	ASSERT_EQ_U64(got[2].user_ips[0], f->entry.ip);
	ASSERT_EQ_U64(got[2].user_ips[3], URET(3));
	ASSERT_EQ_INT(got[2].n_kernel, 0);
	ASSERT_TRUE(got_regs[2]);
	ASSERT_EQ_U64(sv->c.samples_user, 1);
	ASSERT_EQ_U64(sv->c.samples, 3);
	ASSERT_EQ_U64(sv->c.samples_in_workload, 1); /* the window closed before it */
	ASSERT_EQ_U64(sv->c.samples_in_workload_user, 0); /* the one in it was a kernel sample */
	ASSERT_EQ_U64(sv->c.sample_ns_in_workload_user, 0);

	/* a user-mode sample in a window: counted apart too */
	atomic_store(&f->s->in_workload, true);
	ASSERT_EQ_INT(sample_at(f, 3, 1000000, 8000), 0);
	atomic_store(&f->s->in_workload, false);
	ASSERT_EQ_U64(sv->c.samples_in_workload, 2);
	ASSERT_EQ_U64(sv->c.samples_in_workload_user, 1);
	ASSERT_TRUE(sv->c.sample_ns_in_workload_user > 0 &&
		    sv->c.sample_ns_in_workload_user < sv->c.sample_ns_in_workload);
	return TEST_OK;
}

/* Eager: the kernel sample walks the user stack from pt_regs at once, USER_REGS included. */
static int sample_eager(struct fixture *f)
{
	ASSERT_EQ_INT(sample_at(f, 0, 1000000, 0), 0);
	ASSERT_EQ_INT(n_got, 1);
	ASSERT_EQ_INT(check_kernel_sample(&got[0], f->fk.task_kva), TEST_OK);
	ASSERT_EQ_U64(got[0].cookie, 0);
	ASSERT_EQ_INT(got[0].user_stop, HVP_WALK_END);
	ASSERT_EQ_INT(got[0].n_user, 4);
	ASSERT_EQ_U64(got[0].user_ips[0], f->entry.ip);
	ASSERT_EQ_U64(got[0].user_ips[1], URET(1));
	ASSERT_TRUE(got_regs[0]);
	ASSERT_EQ_U64(f->s->vcpus[0].c.user_regs, 1);
	return TEST_OK;
}

/*
 * Hostile and early states: a current-task pointer that is not a task (misaligned) gives a
 * sample without a thread, its kernel chain still walked; a vCPU not in long mode gives none.
 */
static int sample_bad_states(struct fixture *f)
{
	struct svcpu *sv = &f->s->vcpus[0];
	struct kvm_regs regs;
	struct kvm_sregs sregs;

	fakemem_w64(&f->fk.fm, FK_PERCPU_GPA + FK_CURRENT_TASK_OFF, f->fk.task_kva + 3);
	ASSERT_EQ_INT(sample_at(f, 0, 1000000, 0), 0);
	ASSERT_EQ_INT(n_got, 1);
	ASSERT_TRUE(got[0].flags & HVP_SAMPLE_NO_TASK);
	ASSERT_EQ_INT(got[0].pid, -1);
	ASSERT_EQ_U64(got[0].cookie, 0);
	ASSERT_EQ_INT(got[0].n_kernel, 4);
	ASSERT_EQ_U64(sv->c.samples_no_task, 1);
	ASSERT_EQ_INT(n_threads, 0);

	ASSERT_EQ_INT(fixture_vcpu_regs(f, 0, &regs, &sregs), 0);
	sregs.efer = 0;
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, 1);
	ASSERT_EQ_U64(sv->c.samples_not_long_mode, 1);
	return TEST_OK;
}

/*
 * A kernel sample's registers in the entry window: pt_regs still holds the previous entry's
 * registers (a good-looking chain one frame off: ip + 0x99), the window put around the vCPU's
 * RIP. at_syscall_entry: that RIP is SYSCALL's entry, at its first instruction: the user's
 * RSP and RBP still live, the return address in RCX.
 */
static int in_entry_window(struct fixture *f, struct kvm_regs *regs, struct kvm_sregs *sregs)
{
	struct gi_user_regs stale = f->entry;
	struct gi *gi = f->s->gi;

	stale.ip = f->entry.ip + 0x99;
	if (write_pt_regs(f, &stale) || fixture_vcpu_regs(f, 0, regs, sregs))
		return -1;
	gi->entry_text_start = regs->rip - 0x40;
	gi->entry_text_end = regs->rip + 0x40;
	return gi_in_entry_window(gi, regs->rip) ? 0 : -1;
}

static void at_syscall_entry(struct fixture *f, struct kvm_regs *regs)
{
	f->s->gi->entry_kva = regs->rip;
	f->s->gi->exit1_start = regs->rip + 0x40; /* its exit path, past the window's end */
	regs->rcx = f->entry.ip;
	regs->rsp = f->entry.sp;
	regs->rbp = f->entry.bp;
}

/* A sample whose entry's registers were not found (the @i-th got, the first counted so): its
 * user part lost, no USER_REGS. */
static int sample_lost(struct svcpu *sv, struct kvm_regs *regs, struct kvm_sregs *sregs, int i)
{
	ASSERT_EQ_INT(sample_from_regs(sv, regs, sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, i + 1);
	ASSERT_EQ_INT(got[i].user_stop, HVP_WALK_LOST);
	ASSERT_EQ_INT(got[i].n_user, 0);
	ASSERT_TRUE(!got_regs[i]);
	ASSERT_EQ_U64(sv->c.user_regs_entry_unsaved, 1);
	return TEST_OK;
}

/*
 * Eager, a sample in the entry window: pt_regs may be the previous entry's, so they are not
 * walked. Where the entry's own registers cannot be found (this kernel has no ORC tables, and
 * no cpu_tss_rw to find its entry stack by) the user part is lost and counted; at SYSCALL's first instruction they are the vCPU's (ip = RCX),
 * and the walk is theirs.
 */
static int sample_entry_window(struct fixture *f)
{
	struct svcpu *sv = &f->s->vcpus[0];
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct gi *gi = f->s->gi;

	ASSERT_EQ_INT(in_entry_window(f, &regs, &sregs), 0);
	ASSERT_EQ_INT(sample_lost(sv, &regs, &sregs, 0), TEST_OK);
	ASSERT_EQ_U64(sv->c.user_regs_entry_found, 0);

	at_syscall_entry(f, &regs);
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, 2);
	ASSERT_EQ_INT(got[1].user_stop, HVP_WALK_END);
	ASSERT_EQ_INT(got[1].n_user, 4);
	ASSERT_EQ_U64(got[1].user_ips[0], f->entry.ip);
	ASSERT_EQ_U64(got[1].user_ips[3], URET(3));
	ASSERT_TRUE(got_regs[1]);
	ASSERT_EQ_U64(sv->c.user_regs_entry_found, 1);
	ASSERT_EQ_U64(sv->c.user_regs_entry_unsaved, 1);

	/* outside the window, pt_regs is the entry's and is walked */
	gi->entry_text_end = gi->entry_text_start;
	ASSERT_EQ_INT(write_pt_regs(f, &f->entry), 0);
	ASSERT_EQ_INT(fixture_vcpu_regs(f, 0, &regs, &sregs), 0);
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, 3);
	ASSERT_EQ_INT(got[2].n_user, 4);
	ASSERT_EQ_U64(got[2].user_ips[0], f->entry.ip);
	return TEST_OK;
}

/*
 * Eager, a sample in a function the entry's register-saving code called (sync_regs copying
 * pt_regs to the task stack: the sample's first caller is inside error_entry, its RIP outside
 * the entry text): the task stack's pt_regs are the previous entry's, and are not walked, as in
 * the entry window (here nothing finds the entry's own: lost and counted). A caller anywhere
 * else reads them as usual.
 */
static int sample_entry_save_call(struct fixture *f)
{
	struct svcpu *sv = &f->s->vcpus[0];
	struct gi_user_regs stale = f->entry;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct gi *gi = f->s->gi;
	uint64_t caller;

	ASSERT_EQ_INT(sample_at(f, 0, 1000000, 0), 0);
	ASSERT_EQ_INT(n_got, 1);
	ASSERT_TRUE(got[0].n_kernel > 1);
	caller = got[0].kernel_ips[1];
	stale.ip = f->entry.ip + 0x99;
	ASSERT_EQ_INT(write_pt_regs(f, &stale), 0);
	ASSERT_EQ_INT(fixture_vcpu_regs(f, 0, &regs, &sregs), 0);
	ASSERT_TRUE(!gi_in_entry_window(gi, regs.rip));
	/* the save function ends at the caller: the caller is not inside it */
	gi->save_regs_kva[1] = caller - 0x40;
	gi->save_regs_end[1] = caller;
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, 2);
	ASSERT_EQ_U64(got[1].user_ips[0], stale.ip);
	ASSERT_EQ_U64(sv->c.user_regs_entry_unsaved, 0);
	/* it is: the stale registers are not walked */
	gi->save_regs_end[1] = caller + 1;
	ASSERT_EQ_INT(sample_lost(sv, &regs, &sregs, 2), TEST_OK);
	return TEST_OK;
}

/*
 * Both, in the entry window: the mark is made either way; the eager cross-check is walked only
 * from the entry's own registers (here SYSCALL's first instruction), never from the stale
 * pt_regs, and its absence is no loss (the deferred walk stands).
 */
static int sample_entry_window_both(struct fixture *f)
{
	struct svcpu *sv = &f->s->vcpus[0];
	struct kvm_regs regs;
	struct kvm_sregs sregs;

	ASSERT_EQ_INT(in_entry_window(f, &regs, &sregs), 0);
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, 1);
	ASSERT_TRUE(got[0].cookie != 0);
	ASSERT_EQ_INT(got[0].user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_INT(got[0].n_user, 0);
	ASSERT_TRUE(!got_regs[0]);
	ASSERT_EQ_U64(sv->c.user_regs_entry_unsaved, 0);

	marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg, &f->entry);
	at_syscall_entry(f, &regs);
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, 2);
	ASSERT_TRUE(got[1].cookie != 0 && got[1].cookie != got[0].cookie);
	ASSERT_EQ_INT(got[1].user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_INT(got[1].n_user, 4);
	ASSERT_EQ_U64(got[1].user_ips[0], f->entry.ip);
	ASSERT_TRUE(got_regs[1]);
	ASSERT_EQ_U64(sv->c.user_regs_entry_found, 1);
	ASSERT_EQ_U64(sv->c.user_regs_entry_unsaved, 0);
	return TEST_OK;
}

/*
 * Deferred, in SYSCALL's entry window of rt_sigreturn (RAX 15 at the entry's first
 * instruction): the mark takes the entry's own registers and walks at once (its return restores
 * another context, whose walk would be a believable wrong chain); the return, with the
 * restored registers, emits the entry's walk. An entry-window mark whose registers cannot be
 * told is resolved by its return alone.
 */
static int sample_entry_window_deferred(struct fixture *f)
{
	struct svcpu *sv = &f->s->vcpus[0];
	struct gi_user_regs restored = f->entry;
	struct kvm_regs regs;
	struct kvm_sregs sregs;

	ASSERT_EQ_INT(in_entry_window(f, &regs, &sregs), 0);
	at_syscall_entry(f, &regs);
	regs.rax = 15; /* __NR_rt_sigreturn */
	n_recs = 0;
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, 1);
	ASSERT_TRUE(got[0].cookie != 0);
	ASSERT_EQ_INT(got[0].user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_U64(sv->c.user_regs_entry_found, 1);
	ASSERT_EQ_U64(sv->c.marks_walked_at_mark, 1);
	/* the handler's context restored: another ip, sp and frame chain */
	restored.ip = f->entry.ip + 0x99;
	restored.sp = f->entry.sp + 0x40;
	restored.bp = 0;
	marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg, &restored);
	ASSERT_EQ_INT(n_recs, 1);
	ASSERT_EQ_U64(recs[0].cookie, got[0].cookie);
	ASSERT_EQ_INT(recs[0].n, 4);
	ASSERT_EQ_U64(recs[0].ips[0], f->entry.ip);
	ASSERT_EQ_U64(recs[0].ips[3], URET(3));
	/* rt_sigreturn returns elsewhere by design: not checked against its return */
	ASSERT_EQ_U64(sv->c.marks_window_returns, 0);
	ASSERT_EQ_U64(sv->c.marks_window_other_regs, 0);

	/* an ordinary system call's window: the return has the same registers */
	regs.rax = 39; /* __NR_getpid */
	n_recs = 0;
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, 2);
	ASSERT_EQ_U64(sv->c.marks_walked_at_mark, 1);
	marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg, &f->entry);
	ASSERT_EQ_INT(n_recs, 1);
	ASSERT_EQ_U64(recs[0].cookie, got[1].cookie);
	ASSERT_EQ_U64(recs[0].ips[0], f->entry.ip);
	ASSERT_EQ_U64(sv->c.marks_window_returns, 1);
	ASSERT_EQ_U64(sv->c.marks_window_other_regs, 0);
	/* ... and one whose thread returns elsewhere (wrong window registers, or a signal) */
	n_recs = 0;
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, 3);
	marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg, &restored);
	ASSERT_EQ_U64(sv->c.marks_window_returns, 2);
	ASSERT_EQ_U64(sv->c.marks_window_other_regs, 1);

	/* not at SYSCALL's entry, no ORC, no entry stack: not known, the mark has no registers
	 * and no walk (its return tells) */
	f->s->gi->entry_kva = 0;
	ASSERT_EQ_INT(fixture_vcpu_regs(f, 0, &regs, &sregs), 0);
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, 4);
	ASSERT_TRUE(got[3].cookie != 0 && got[3].cookie != got[2].cookie);
	ASSERT_EQ_INT(got[3].user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_U64(sv->c.marks_walked_at_mark, 1);
	ASSERT_EQ_U64(sv->c.user_regs_entry_found, 3);
	marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg, &f->entry);
	ASSERT_EQ_U64(sv->c.marks_window_returns, 2); /* not a window-found entry */
	return TEST_OK;
}

/*
 * A kernel sample of a task never sampled before, in execve past its switch of mm (a caller's
 * return address in the range gi_find_exec_points gives begin_new_exec): pt_regs are the old
 * program's, the page tables the new one's; no mark, no walk: the user part is lost with its
 * reason. The same chain before the switch is marked as usual.
 */
static int sample_past_exec_switch(struct fixture *f)
{
	struct svcpu *sv = &f->s->vcpus[0];
	struct gi *gi = f->s->gi;

	/* the second caller's call is past the switch */
	gi_ranges_add(&gi->exec_past, KRET(2) - 0x10, KRET(2) + 0x10);
	ASSERT_EQ_INT(sample_at(f, 0, 1000000, 0), 0);
	ASSERT_EQ_INT(n_got, 1);
	ASSERT_EQ_INT(check_kernel_sample(&got[0], f->fk.task_kva), TEST_OK);
	ASSERT_EQ_U64(got[0].cookie, 0);
	ASSERT_EQ_INT(got[0].user_stop, HVP_WALK_EXECVE);
	ASSERT_EQ_INT(got[0].n_user, 0);
	ASSERT_TRUE(!got_regs[0]);
	ASSERT_EQ_U64(sv->c.execve_past_switch, 1);
	ASSERT_EQ_U64(sv->c.marks, 0);

	/* that call is before the switch: begin_new_exec runs */
	memset(&gi->exec_past, 0, sizeof(gi->exec_past));
	gi_ranges_add(&gi->exec_past, KRET(2), KRET(2) + 0x10);
	ASSERT_EQ_INT(sample_at(f, 0, 1000000, 0), 0);
	ASSERT_EQ_INT(n_got, 2);
	ASSERT_TRUE(got[1].cookie != 0);
	ASSERT_EQ_INT(got[1].user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_U64(sv->c.execve_past_switch, 1);
	return TEST_OK;
}

/*
 * A kernel sample inside switch_mm: CR3 is already the next task's root (the kernel half shared,
 * nothing of this task's user memory mapped) while current is still this task. Its user walk
 * goes through the task's own mm->pgd (user_root_switched), and a second sample under that
 * root reads nothing again (the per-vCPU memo); a hostile pgd leaves the walk under CR3.
 */
static int sample_other_root(struct fixture *f)
{
	struct svcpu *sv = &f->s->vcpus[0];
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	uint64_t own = f->fk.fm.pg.cr3 & ~0xfffull, next = fakemem_alloc_table(&f->fk.fm);
	uint64_t pgd_slot = f->fk.mm_kva + f->fk.layout.mm_pgd;

	ASSERT_TRUE(next != 0);
	for (unsigned int i = 256; i < 512; i++) /* the kernel half, as every mm has it */
		fakemem_w64(&f->fk.fm, next + 8 * i, fakemem_r64(&f->fk.fm, own + 8 * i));
	ASSERT_EQ_INT(fk_w64(&f->fk, pgd_slot, fk_kva(own)), 0);
	ASSERT_EQ_INT(fixture_vcpu_regs(f, 0, &regs, &sregs), 0);
	sregs.cr3 = next;
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, 1);
	ASSERT_EQ_INT(check_kernel_sample(&got[0], f->fk.task_kva), TEST_OK);
	ASSERT_EQ_INT(got[0].n_user, 4);
	ASSERT_EQ_U64(got[0].user_ips[0], f->entry.ip);
	ASSERT_EQ_U64(got[0].user_ips[3], URET(3));
	ASSERT_EQ_U64(sv->c.user_root_switched, 1);

	/* the task's own root: no switch */
	ASSERT_EQ_INT(sample_at(f, 0, 1000000, 0), 0);
	ASSERT_EQ_INT(got[1].n_user, 4);
	ASSERT_EQ_U64(sv->c.user_root_switched, 1);

	/* a pgd that is not page-aligned: refused, CR3 stands, and its walk finds no user stack
	 * mapped */
	ASSERT_EQ_INT(fk_w64(&f->fk, pgd_slot, fk_kva(own) + 8), 0);
	sv->root_mm = 0;
	ASSERT_EQ_INT(sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0), 0);
	ASSERT_EQ_INT(n_got, 3);
	ASSERT_EQ_INT(got[2].n_user, 1); /* the sampled ip; its frame is not mapped under CR3 */
	ASSERT_EQ_INT(got[2].user_stop, HVP_WALK_FAULT);
	ASSERT_EQ_U64(sv->c.user_root_switched, 1);
	return TEST_OK;
}

/* The workload histogram: each bound belongs to its own bucket, one more ns to the next; the
 * user-mode samples summed apart. */
static int workload_buckets(struct fixture *f)
{
	struct svcpu *sv = &f->s->vcpus[0];
	static const uint64_t ns[] = { 0, 250, 251, 1500, 1501, 32000, 32001, 1000000 };

	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		count_in_workload(sv, ns[i], i % 2 == 1); /* the odd ones user-mode samples */
	ASSERT_EQ_U64(sv->c.samples_in_workload, 8);
	ASSERT_EQ_U64(sv->c.samples_in_workload_user, 4);
	ASSERT_EQ_U64(sv->c.sample_ns_in_workload_user, 250 + 1500 + 32000 + 1000000);
	ASSERT_EQ_U64(sv->c.sample_ns_in_workload, 0 + 250 + 251 + 1500 + 1501 + 32000 + 32001 +
							   1000000);
	ASSERT_EQ_U64(sv->c.workload_sample_le_250ns, 2);
	ASSERT_EQ_U64(sv->c.workload_sample_le_500ns, 1);
	ASSERT_EQ_U64(sv->c.workload_sample_le_1500ns, 1);
	ASSERT_EQ_U64(sv->c.workload_sample_le_1750ns, 1);
	ASSERT_EQ_U64(sv->c.workload_sample_le_32000ns, 1);
	ASSERT_EQ_U64(sv->c.workload_sample_over_32000ns, 2);
	ASSERT_EQ_U64(sv->c.workload_sample_le_1250ns + sv->c.workload_sample_le_16000ns, 0);
	return TEST_OK;
}

/*
 * The KASLR check from kernel samples (kwatch_kernel): while it is pending, every sample looks at
 * MSR_LSTAR when the guest chose the slide; when hvprof placed the kernel, at most one look per
 * 10 ms; once decided, none.
 */
static int kaslr_looks(struct fixture *f)
{
	struct svcpu *sv = &f->s->vcpus[0];
	struct gi_kaslr_observation o;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct gi_paging pg;

	ASSERT_EQ_INT(fixture_vcpu_regs(f, 0, &regs, &sregs), 0);
	ASSERT_EQ_INT(gi_kaslr_checked(f->s->gi, NULL, NULL), GI_KASLR_PENDING);
	f->s->placed.slide_known = false;
	kwatch_kernel(sv, &sregs);
	kwatch_kernel(sv, &sregs);
	ASSERT_EQ_U64(sv->c.kaslr_looks, 2);
	f->s->placed.slide_known = true;
	kwatch_kernel(sv, &sregs);
	kwatch_kernel(sv, &sregs);
	kwatch_kernel(sv, &sregs);
	ASSERT_EQ_U64(sv->c.kaslr_looks, 3);
	sv->kaslr_poll_ns = vmm_now_ns(); /* an I/O exit's look does not hold samples off */
	sv->kaslr_confirm_ns -= 10000001;
	kwatch_kernel(sv, &sregs);
	ASSERT_EQ_U64(sv->c.kaslr_looks, 4);
	/* decided (here: an MSR_LSTAR that is not the kernel's entry): no more looks */
	pg = sampler_paging(f->s, &sregs);
	ASSERT_EQ_INT(gi_kaslr_observe(f->s->gi, &f->fk.fm.mem, &pg, 0xffffffff81abc123ull, 0, 0,
				       &o),
		      0);
	ASSERT_TRUE(gi_kaslr_checked(f->s->gi, NULL, NULL) != GI_KASLR_PENDING);
	sv->kaslr_confirm_ns -= 10000001;
	f->s->placed.slide_known = false;
	kwatch_kernel(sv, &sregs);
	kwatch_kernel(sv, &sregs);
	ASSERT_EQ_U64(sv->c.kaslr_looks, 4);
	ASSERT_TRUE(sv->kaslr_decided);
	return TEST_OK;
}

static int cap_mapping(void *ctx, const struct hvp_mapping *m)
{
	(void)ctx;
	(void)m;
	return 0;
}

/*
 * With MAPPING records (as `hvprof record`), a user-mode sample reads its mm's map count and its
 * walk keeps the text page it found executable: the next sample of the same count takes it from
 * there (user_exec_cache_hits), the same chain; a new count empties it (walked again); without
 * MAPPING records the count is not read and nothing is kept.
 */
static int sample_exec_cache(struct fixture *f)
{
	static const struct sampler_sink map_sink = {
		.sample = cap_sample, .user_stack = sink_user_stack, .thread = cap_thread,
		.process = cap_process, .mapping = cap_mapping
	};
	struct svcpu *sv = &f->s->vcpus[0];
	/* the fake layout's mm_map_count is 0: the count is the mm's first 4 bytes */
	uint64_t count_gpa = f->fk.mm_kva - FK_DIRECT + f->fk.layout.mm_map_count;
	uint64_t hits;

	/* user mode finds its task through the per-CPU base a real vCPU asks MSR_KERNEL_GS_BASE
	 * for, which the fixture has not */
	sv->percpu_base = f->fk.regs.gs_base;
	/* no MAPPING sink: no count, no cache */
	ASSERT_EQ_INT(sample_at(f, 3, 1000000, 0), 0);
	ASSERT_EQ_INT(sample_at(f, 3, 1000000, 0), 0);
	ASSERT_EQ_U64(sv->c.user_exec_cache_hits, 0);
	f->s->cfg.sink = &map_sink;
	sv->maps = calloc(SAMPLER_MAPS_MAX, sizeof(*sv->maps)); /* as sampler_new gives it */
	ASSERT_TRUE(sv->maps != NULL);
	fakemem_w32(&f->fk.fm, count_gpa, 5);
	ASSERT_EQ_INT(sample_at(f, 3, 1000000, 0), 0);
	hits = sv->c.user_exec_cache_hits; /* URET(2), URET(3) share URET(1)'s page */
	ASSERT_EQ_INT(sample_at(f, 3, 1000000, 0), 0);
	ASSERT_EQ_U64(sv->c.user_exec_cache_hits, hits + 3);
	ASSERT_EQ_INT(got[n_got - 1].n_user, 4);
	ASSERT_EQ_U64(got[n_got - 1].user_ips[3], URET(3));
	/* another VMA count: URET(1)'s page walked again */
	fakemem_w32(&f->fk.fm, count_gpa, 6);
	ASSERT_EQ_INT(sample_at(f, 3, 1000000, 0), 0);
	ASSERT_EQ_U64(sv->c.user_exec_cache_hits, hits + 3 + 2);
	ASSERT_EQ_INT(got[n_got - 1].n_user, 4);
	return TEST_OK;
}

static int with_fixture(enum sampler_callchain_mode mode, int (*body)(struct fixture *f))
{
	struct fixture f;
	int ret;

	if (setup(&f, mode)) {
		fprintf(stderr, "fixture set-up failed\n");
		return TEST_FAIL;
	}
	ret = body(&f);
	fixture_fini(&f);
	return ret;
}

static int test_sample_deferred(void)
{
	return with_fixture(SAMPLER_CALLCHAIN_DEFERRED, sample_deferred);
}

static int test_sample_eager(void)
{
	return with_fixture(SAMPLER_CALLCHAIN_EAGER, sample_eager);
}

static int test_sample_entry_window(void)
{
	return with_fixture(SAMPLER_CALLCHAIN_EAGER, sample_entry_window);
}

static int test_sample_entry_save_call(void)
{
	return with_fixture(SAMPLER_CALLCHAIN_EAGER, sample_entry_save_call);
}

static int test_sample_entry_window_deferred(void)
{
	return with_fixture(SAMPLER_CALLCHAIN_DEFERRED, sample_entry_window_deferred);
}

static int test_sample_past_exec_switch(void)
{
	return with_fixture(SAMPLER_CALLCHAIN_DEFERRED, sample_past_exec_switch);
}

static int test_sample_other_root(void)
{
	return with_fixture(SAMPLER_CALLCHAIN_EAGER, sample_other_root);
}

static int test_sample_entry_window_both(void)
{
	return with_fixture(SAMPLER_CALLCHAIN_BOTH, sample_entry_window_both);
}

static int test_sample_bad_states(void)
{
	return with_fixture(SAMPLER_CALLCHAIN_DEFERRED, sample_bad_states);
}

static int test_exec_cache(void)
{
	return with_fixture(SAMPLER_CALLCHAIN_DEFERRED, sample_exec_cache);
}

static int test_kaslr_looks(void)
{
	return with_fixture(SAMPLER_CALLCHAIN_DEFERRED, kaslr_looks);
}

static int test_workload_buckets(void)
{
	return with_fixture(SAMPLER_CALLCHAIN_DEFERRED, workload_buckets);
}

/* Does this host's kernel say it keeps time with an invariant TSC (read apart from the CPUID
 * check stageclock.c makes)? */
static bool host_keeps_time_with_tsc(void)
{
	char src[32] = "", line[4096];
	bool constant = false, nonstop = false;
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");

	if (!f)
		return false;
	if (!fgets(src, sizeof(src), f))
		src[0] = '\0';
	fclose(f);
	f = fopen("/proc/cpuinfo", "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5) != 0)
			continue;
		constant = strstr(line, " constant_tsc") != NULL;
		nonstop = strstr(line, " nonstop_tsc") != NULL;
		break;
	}
	fclose(f);
	return strcmp(src, "tsc\n") == 0 && constant && nonstop;
}

/* The stage counters' clock: its ticks in ns agree with CLOCK_MONOTONIC over a 20 ms sleep
 * (whichever clock this host gives it), and a conversion of a whole day's ticks does not wrap. */
static int test_stage_clock(void)
{
	const struct timespec nap = { 0, 20000000 };
	struct stage_clock c, tsc = { .tsc = true, .mult = (2ull << 32) / 5 }; /* 2.5 GHz */
	uint64_t n0, n1, k0, k1, ns, elapsed;

	stage_clock_init(&c);
	ASSERT_TRUE(!c.tsc || c.mult > 0);
	/* where the host kernel keeps time with an invariant TSC (its own view: clocksource tsc,
	 * cpuinfo flags constant_tsc and nonstop_tsc), the stage clock must be the TSC */
	if (host_keeps_time_with_tsc())
		ASSERT_TRUE(c.tsc);
	n0 = vmm_now_ns();
	k0 = stage_now(&c);
	nanosleep(&nap, NULL);
	k1 = stage_now(&c);
	n1 = vmm_now_ns();
	ns = stage_ns(&c, k1 - k0);
	elapsed = n1 - n0;
	printf("stage clock: %s, %llu ns by it over %llu ns\n", c.tsc ? "TSC" : "vmm_now_ns",
	       (unsigned long long)ns, (unsigned long long)elapsed);
	ASSERT_TRUE(elapsed >= 20000000);
	/* within 2%: the calibration's error is far below; the reads around it differ by ~us */
	ASSERT_TRUE(ns > elapsed - elapsed / 50 && ns < elapsed + elapsed / 50);
	/* 86 400 s at 2.5 GHz: 2.16e14 ticks times a 32.32 multiplier is above 2^64; the
	 * multiplier's truncation (0.4 * 2^32 rounded down) costs 20 us over the day */
	ns = stage_ns(&tsc, 216000000000000ull);
	ASSERT_TRUE(ns <= 86400000000000ull && ns > 86400000000000ull - 100000);
	ASSERT_EQ_U64(stage_ns(&(struct stage_clock){ .tsc = false }, 12345), 12345);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "sample: deferred kernel samples share a mark, a user sample walks in place",
	  test_sample_deferred },
	{ "sample: eager kernel sample walks pt_regs' user stack", test_sample_eager },
	{ "sample: eager in the entry window: not the stale pt_regs (lost, or SYSCALL's registers)",
	  test_sample_entry_window },
	{ "sample: eager in sync_regs (a call of error_entry's): not the stale pt_regs",
	  test_sample_entry_save_call },
	{ "sample: both, in the entry window: the cross-check only from the entry's registers",
	  test_sample_entry_window_both },
	{ "sample: deferred, rt_sigreturn's entry window: the mark walks the entry's registers, "
	  "not the restored context's",
	  test_sample_entry_window_deferred },
	{ "sample: a chain past execve's switch of mm: no mark, the user part lost as execve",
	  test_sample_past_exec_switch },
	{ "sample: CR3 another mm's (inside switch_mm): the user walk through the task's mm->pgd",
	  test_sample_other_root },
	{ "sample: a bad current task, a vCPU not in long mode", test_sample_bad_states },
	{ "sample: user walks keep their executable pages while the map count stays",
	  test_exec_cache },
	{ "sample: the workload's VMM time histogram, bounds inclusive", test_workload_buckets },
	{ "sample: MSR_LSTAR looks while the KASLR check is pending, limited when placed",
	  test_kaslr_looks },
	{ "sample: the stage counters' clock (TSC where the host keeps time with it)",
	  test_stage_clock },
};

TEST_MAIN(tests)
