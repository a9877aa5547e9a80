// SPDX-License-Identifier: MIT
// Unit tests of the sampler's logic without /dev/kvm: the marks table (mark, reuse of a cookie
// within one kernel stay, resolve at the return on another vCPU, stale registers, expiry from
// pt_regs, the table full, a thread that exits, a thread whose mm is gone), the user part of a
// kernel sample in each callchain mode, and the trap decisions over hand-filled register states.
// The guest is the fake kernel of the guestinfo tests (a task, its kernel and user stacks).
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "fakekernel.h"
#include "sampler_internal.h"
#include "test.h"

#define U FK_USER_STACK
#define URET(i) FK_URET(i)
#define PT_REGS (FK_STACK + 16384 - 168) /* fakekernel's layout: pt_regs is 168 bytes */

/* ---------------------------------------------------------------- a sink that keeps records */

#define MAX_RECS 600

struct rec {
	uint64_t cookie;
	int32_t pid;
	uint8_t stop;
	uint16_t n;
	uint64_t ips[8];
	bool has_regs; /* a USER_REGS came with it: */
	struct hvp_user_regs regs; /* .stack not kept */
	uint64_t stack0; /* its first 8 stack bytes (0 when fewer) */
};

static struct rec recs[MAX_RECS];
static int n_recs, n_first, n_last;

static int sink_user_stack(void *ctx, const struct hvp_user_stack *u,
			   const struct hvp_user_regs *ur)
{
	struct rec *r;

	(void)ctx;
	if (n_recs >= MAX_RECS)
		return -ENOSPC;
	r = &recs[n_recs++];
	r->cookie = u->cookie;
	r->pid = u->pid;
	r->stop = u->stop;
	r->n = u->n_user;
	memcpy(r->ips, u->user_ips, (u->n_user < 8 ? u->n_user : 8) * sizeof(r->ips[0]));
	r->has_regs = ur != NULL;
	r->stack0 = 0;
	if (ur) {
		r->regs = *ur;
		r->regs.stack = NULL;
		if (ur->stack_len >= 8)
			memcpy(&r->stack0, ur->stack, 8);
	}
	return 0;
}

static int sink_sample(void *ctx, const struct hvp_sample *s, const struct hvp_user_regs *r)
{
	(void)ctx;
	(void)s;
	(void)r;
	return 0;
}

static const struct sampler_sink sink = { .sample = sink_sample,
					  .user_stack = sink_user_stack };

static void on_first(struct svcpu *sv)
{
	(void)sv;
	n_first++;
}

static void on_last(struct svcpu *sv)
{
	(void)sv;
	n_last++;
}

/* ---------------------------------------------------------------- fixture */

struct fixture {
	struct fakekernel fk;
	struct sampler *s;
	struct gi_user_regs entry; /* a good user chain: ip + 3 frames */
};

static int fixture_init_cg(struct fixture *f, enum sampler_callchain_mode mode,
			   unsigned int stack_pages, enum sampler_call_graph cg, uint32_t stack_size)
{
	struct sampler_config cfg = { .sample_hz = 1000, .sink = &sink, .callchain_mode = mode,
				      .mark_timeout_ns = 1000000, .call_graph = cg,
				      .stack_size = stack_size };

	memset(f, 0, sizeof(*f));
	n_recs = n_first = n_last = 0;
	if (fakekernel_init(&f->fk, stack_pages))
		return -1;
	if (sampler_new(&cfg, f->fk.gi, &f->fk.fm.mem, f->fk.fm.pg.maxphyaddr, 2, &f->s)) {
		fakekernel_fini(&f->fk);
		return -1;
	}
	f->s->marks.on_first = on_first;
	f->s->marks.on_last = on_last;
	f->entry = (struct gi_user_regs){ 0x400100, U + 0x100, U + 0x3000 };
	return fk_uchain(&f->fk, U + 0x3000, 3);
}

static int fixture_init(struct fixture *f, enum sampler_callchain_mode mode,
			unsigned int stack_pages)
{
	return fixture_init_cg(f, mode, stack_pages, SAMPLER_CALL_GRAPH_FP, 0);
}

static void fixture_fini(struct fixture *f)
{
	sampler_destroy(f->s);
	fakekernel_fini(&f->fk);
}

static struct mark_req req_of(struct fixture *f, int32_t pid, const struct gi_user_regs *entry)
{
	return (struct mark_req){ .task = f->fk.task_kva, .pid = pid, .pg = &f->fk.fm.pg,
				  .entry = entry, .entry_known = true, .mm = f->fk.mm_kva };
}

/* pt_regs of the fake task: entered from user mode with @ur (CS 0x33). */
static int write_pt_regs(struct fixture *f, const struct gi_user_regs *ur)
{
	return fk_w64(&f->fk, PT_REGS + 128, ur->ip) || fk_w64(&f->fk, PT_REGS + 136, 0x33) ||
	       fk_w64(&f->fk, PT_REGS + 152, ur->sp) || fk_w64(&f->fk, PT_REGS + 32, ur->bp);
}

static int check_good_walk(const struct rec *r, uint64_t cookie)
{
	ASSERT_EQ_U64(r->cookie, cookie);
	ASSERT_EQ_INT(r->pid, FK_PID);
	ASSERT_EQ_INT(r->stop, HVP_WALK_END);
	ASSERT_EQ_INT(r->n, 4);
	ASSERT_EQ_U64(r->ips[0], 0x400100);
	ASSERT_EQ_U64(r->ips[1], URET(1));
	ASSERT_EQ_U64(r->ips[3], URET(3));
	return TEST_OK;
}

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
	marks_resolve_at_return(sv1, f.fk.task_kva, FK_PID, &f.fk.fm.pg, &f.entry);
	if (n_recs != 1 || check_good_walk(&recs[0], c1) != TEST_OK ||
	    sv1->c.resolved_at_return != 1 || atomic_load(&f.s->marks.pending) != 0 ||
	    n_last != 1)
		goto out;
	/* nothing left for a second return */
	marks_resolve_at_return(sv1, f.fk.task_kva, FK_PID, &f.fk.fm.pg, &f.entry);
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
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, &f.fk.fm.pg, &third);
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
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, &f.fk.fm.pg, &started);
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
	marks_resolve_at_return(sv, f.fk.task_kva, 101, &f.fk.fm.pg, &f.entry);
	marks_resolve_at_return(sv, f.fk.task_kva, 102, &f.fk.fm.pg, &f.entry);
	req.pid = 103;
	if (f.s->marks.n_slots != 4 || marks_take(sv, &req) != c[3] || n_recs != 2)
		goto fini;
	/* 103 returns: the bound comes down past the hole, to 100's slot */
	marks_resolve_at_return(sv, f.fk.task_kva, 103, &f.fk.fm.pg, &f.entry);
	if (f.s->marks.n_slots != 1 || n_recs != 3)
		goto fini;
	/* a new mark takes the lowest free slot */
	req.pid = 104;
	if (!marks_take(sv, &req) || f.s->marks.n_slots != 2)
		goto fini;
	/* a pid never marked is not found beyond the bound either */
	marks_resolve_at_return(sv, f.fk.task_kva, 101, &f.fk.fm.pg, &f.entry);
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

/* ---------------------------------------------------------------- identity records */

static int n_threads, n_procs, n_maps;

static int id_thread(void *ctx, const struct hvp_thread *t)
{
	(void)ctx;
	(void)t;
	n_threads++;
	return 0;
}

static int id_process(void *ctx, const struct hvp_process *p)
{
	(void)ctx;
	(void)p;
	n_procs++;
	return 0;
}

static int id_mapping(void *ctx, const struct hvp_mapping *m)
{
	(void)ctx;
	(void)m;
	n_maps++;
	return 0;
}

static const struct sampler_sink id_sink = { .sample = sink_sample, .user_stack = sink_user_stack,
					     .thread = id_thread, .process = id_process,
					     .mapping = id_mapping };

/* Address-space walks tried (the fake mm has no VMA tree: each is a counted error). */
static uint64_t walks(const struct sampler *s)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < s->n_vcpus; i++)
		n += s->vcpus[i].c.mapping_errors + s->vcpus[i].c.mapping_snapshots;
	return n;
}

/* The fake task's process: code range and an executable named /demo (map count at mm + 0). */
static void fake_process(struct fakekernel *fk, uint64_t start_code)
{
	uint64_t dentry = fk_kva(FK_DENTRY_GPA), root = fk_kva(FK_DENTRY_GPA + 0x100);

	fakemem_w64(&fk->fm, FK_MM_GPA + 0x110, start_code);
	fakemem_w64(&fk->fm, FK_MM_GPA + 0x118, 0x402000);
	fakemem_w64(&fk->fm, FK_MM_GPA + 0x388, fk_kva(FK_FILE_GPA));
	fakemem_w64(&fk->fm, FK_FILE_GPA + 16 + 8, dentry);
	fakemem_w64(&fk->fm, FK_DENTRY_GPA + 24, root);
	fakemem_w64(&fk->fm, FK_DENTRY_GPA + 32 + 8, fk_kva(FK_NAMES_GPA));
	fakemem_wbytes(&fk->fm, FK_NAMES_GPA, "demo", 5);
	fakemem_w64(&fk->fm, FK_DENTRY_GPA + 0x100 + 24, root);
}

#define NOTED(th, pr, wk) (n_threads == (th) && n_procs == (pr) && walks(f.s) == (wk))

/*
 * note_identity remembers each vCPU's last identity and skips the shared caches when it comes
 * again unchanged: every change must still be seen — comm, map count, the mm (execve), a
 * process not readable yet, another vCPU's change of the same process (A -> B -> A map counts),
 * a reset of the caches (attach window).
 */
static int test_identity_repeat(void)
{
	struct sampler_config cfg = { .sample_hz = 1000, .sink = &id_sink,
				      .callchain_mode = SAMPLER_CALLCHAIN_DEFERRED,
				      .mark_timeout_ns = 1000000 };
	struct fixture f;
	struct hvp_thread t = { .pid = FK_PID, .tgid = FK_TGID, .comm = FK_COMM };
	struct svcpu *sv0, *sv1;
	uint64_t mm2;
	int ret = TEST_FAIL;

	memset(&f, 0, sizeof(f));
	n_threads = n_procs = n_maps = 0;
	if (fakekernel_init(&f.fk, 4))
		return TEST_FAIL;
	if (sampler_new(&cfg, f.fk.gi, &f.fk.fm.mem, f.fk.fm.pg.maxphyaddr, 2, &f.s)) {
		fakekernel_fini(&f.fk);
		return TEST_FAIL;
	}
	sv0 = &f.s->vcpus[0];
	sv1 = &f.s->vcpus[1];
	t.task = f.fk.task_kva;
	fake_process(&f.fk, 0x400000);
	fakemem_w32(&f.fk.fm, FK_MM_GPA, 5);
	note_identity(sv0, &t, f.fk.mm_kva, &f.fk.fm.pg);
	if (!NOTED(1, 1, 1) || !sv0->ident_last.valid)
		goto out;
	note_identity(sv0, &t, f.fk.mm_kva, &f.fk.fm.pg); /* the same again: nothing */
	if (!NOTED(1, 1, 1))
		goto out;
	/* prctl(PR_SET_NAME): a THREAD record; then nothing */
	strcpy(t.comm, "renamed");
	note_identity(sv0, &t, f.fk.mm_kva, &f.fk.fm.pg);
	note_identity(sv0, &t, f.fk.mm_kva, &f.fk.fm.pg);
	if (!NOTED(2, 1, 1))
		goto out;
	/* mmap: the map count moves, one walk */
	fakemem_w32(&f.fk.fm, FK_MM_GPA, 6);
	note_identity(sv0, &t, f.fk.mm_kva, &f.fk.fm.pg);
	note_identity(sv0, &t, f.fk.mm_kva, &f.fk.fm.pg);
	if (!NOTED(2, 1, 2))
		goto out;
	/* another vCPU sees the process at 7 (a walk), then this one at 6 again: a walk, though
	 * its own last look saw 6 */
	fakemem_w32(&f.fk.fm, FK_MM_GPA, 7);
	note_identity(sv1, &t, f.fk.mm_kva, &f.fk.fm.pg);
	if (!NOTED(2, 1, 3))
		goto out;
	fakemem_w32(&f.fk.fm, FK_MM_GPA, 6);
	note_identity(sv0, &t, f.fk.mm_kva, &f.fk.fm.pg);
	if (!NOTED(2, 1, 4))
		goto out;
	/* another vCPU's new thread changes nothing of this one's */
	t.pid = 77;
	note_identity(sv1, &t, f.fk.mm_kva, &f.fk.fm.pg);
	t.pid = FK_PID;
	note_identity(sv0, &t, f.fk.mm_kva, &f.fk.fm.pg);
	if (!NOTED(3, 1, 4) || !sv0->ident_last.valid)
		goto out;
	/* execve: a new mm, not readable yet (no code range): no PROCESS, tried again next time */
	mm2 = f.fk.mm_kva + 0x1000;
	note_identity(sv0, &t, mm2, &f.fk.fm.pg);
	if (!NOTED(3, 1, 4) || sv0->ident_last.valid)
		goto out;
	fakemem_w64(&f.fk.fm, FK_MM_GPA + 0x1000 + 0x110, 0x400000);
	fakemem_w64(&f.fk.fm, FK_MM_GPA + 0x1000 + 0x118, 0x402000);
	fakemem_w64(&f.fk.fm, FK_MM_GPA + 0x1000 + 0x388, fk_kva(FK_FILE_GPA));
	note_identity(sv0, &t, mm2, &f.fk.fm.pg);
	note_identity(sv0, &t, mm2, &f.fk.fm.pg);
	if (!NOTED(3, 2, 5))
		goto out;
	/* a new attach window: everything once more */
	ident_cache_reset(f.s);
	note_identity(sv0, &t, mm2, &f.fk.fm.pg);
	note_identity(sv0, &t, mm2, &f.fk.fm.pg);
	if (!NOTED(4, 3, 6))
		goto out;
	/* a kernel thread (no mm): its THREAD record once */
	t = (struct hvp_thread){ .task = f.fk.task_kva + 0x2000, .pid = 2, .tgid = 2,
				 .kthread = 1, .comm = "kthreadd" };
	note_identity(sv0, &t, 0, &f.fk.fm.pg);
	note_identity(sv0, &t, 0, &f.fk.fm.pg);
	if (!NOTED(5, 3, 6))
		goto out;
	ret = TEST_OK;
out:
	if (ret != TEST_OK)
		fprintf(stderr, "threads %d processes %d walks %llu\n", n_threads, n_procs,
			(unsigned long long)walks(f.s));
	fixture_fini(&f);
	return ret;
}

/* ---------------------------------------------------------------- the user part of a sample */

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
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, &f.fk.fm.pg, &f.entry);
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
	emit_user_stack(sv, 99, FK_PID, &f.fk.fm.pg, &bad);
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
	emit_user_stack(sv, 5, FK_PID, &f.fk.fm.pg, &ur); /* 4 pages above U: all 8192 */
	if (n_recs != 1 || recs[0].regs.stack_size != 8192 || recs[0].regs.stack_len != 8192 ||
	    sv->c.user_stack_short != 0)
		goto out;
	ur.sp = U + 0x4000 - 0x100; /* the last 256 bytes of the stack's pages */
	emit_user_stack(sv, 6, FK_PID, &f.fk.fm.pg, &ur);
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

static const struct test_case tests[] = {
	{ "record --from: boot, an event, SECONDS; started once", test_sampling_start },
	{ "marks: take, reuse within one stay, resolve on another vCPU", test_mark_reuse_resolve },
	{ "marks: other user registers end a mark with its saved walk", test_stale_registers },
	{ "marks: expiry from entry registers, a reused pid is lost", test_expire_from_pt_regs },
	{ "marks: flush from pt_regs, a thread gone", test_thread_exit_and_pt_regs },
	{ "marks: an exiting thread keeps the walk made while its memory existed",
	  test_exiting_thread },
	{ "marks: execve keeps the walk made under the old mm, never walks the new one",
	  test_execve },
	{ "eager: an execve's old registers are not walked in the new mm", test_eager_execve },
	{ "marks: table full falls back, every mark ends in one record", test_table_full },
	{ "marks: lookups and expiry bounded by the highest slot in use", test_slot_bound },
	{ "identity: a repeat skips the caches, every change is still seen", test_identity_repeat },
	{ "user part of a kernel sample: deferred, eager, both, no pt_regs, exiting",
	  test_user_part_modes },
	{ "current thread: an exiting user thread is no kernel thread", test_current_thread_exiting },
	{ "trap decisions from sysretq/iretq registers", test_trap_decide },
	{ "USER_REGS: at return, saved walk, hostile RSP", test_user_regs_records },
	{ "USER_REGS: dwarf mode sizes, the eager part's own", test_user_regs_dwarf },
	{ "USER_REGS: bad stack sizes refused", test_user_regs_bad_size },
	{ "attach: no mark while sampling is off, no window before the late vCPUs acknowledge",
	  test_attach_refuses_late_marks },
	{ "attach: a rate the kernel refuses fails the window, not the VM",
	  test_attach_rate_refused },
};

TEST_MAIN(tests)
