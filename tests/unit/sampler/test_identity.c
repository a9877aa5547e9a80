// SPDX-License-Identifier: MIT
// Unit tests of the identity records (sampler/identity.c: note_identity) without /dev/kvm:
// THREAD, PROCESS and address-space walks once per change, and an mm execve is building (or
// that cannot be read) told apart so that its user registers are not walked.
#include <stdio.h>
#include <string.h>

#include "sampler_fixture.h"
#include "test.h"

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
	fixture_process(&f.fk, 0x400000);
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

/* A new mm whose process cannot be read: unknown, so its user registers are not walked (as for
 * one execve is building); not remembered, it is read again and noted once readable. */
static int test_identity_unreadable(void)
{
	struct sampler_config cfg = { .sample_hz = 1000, .sink = &id_sink,
				      .callchain_mode = SAMPLER_CALLCHAIN_DEFERRED,
				      .mark_timeout_ns = 1000000 };
	struct fixture f;
	struct hvp_thread t = { .pid = FK_PID, .tgid = FK_TGID, .comm = FK_COMM };
	struct svcpu *sv;
	int ret = TEST_FAIL;

	memset(&f, 0, sizeof(f));
	n_threads = n_procs = n_maps = 0;
	if (fakekernel_init(&f.fk, 4))
		return TEST_FAIL;
	if (sampler_new(&cfg, f.fk.gi, &f.fk.fm.mem, f.fk.fm.pg.maxphyaddr, 2, &f.s)) {
		fakekernel_fini(&f.fk);
		return TEST_FAIL;
	}
	sv = &f.s->vcpus[0];
	t.task = f.fk.task_kva;
	fixture_process(&f.fk, 0x400000);
	fakemem_w32(&f.fk.fm, FK_MM_GPA, 5);
	/* mm->exe_file not a kernel address: gi_process_info fails (-EBADMSG) */
	fakemem_w64(&f.fk.fm, FK_MM_GPA + 0x388, 0x5000);
	if (!note_identity(sv, &t, f.fk.mm_kva, &f.fk.fm.pg) || !NOTED(1, 0, 0))
		goto out;
	/* start_code > end_code: also unreadable */
	fakemem_w64(&f.fk.fm, FK_MM_GPA + 0x388, fk_kva(FK_FILE_GPA));
	fakemem_w64(&f.fk.fm, FK_MM_GPA + 0x110, 0x403000);
	if (!note_identity(sv, &t, f.fk.mm_kva, &f.fk.fm.pg) || !NOTED(1, 0, 0))
		goto out;
	/* readable now: noted, walked */
	fakemem_w64(&f.fk.fm, FK_MM_GPA + 0x110, 0x400000);
	if (note_identity(sv, &t, f.fk.mm_kva, &f.fk.fm.pg) || !NOTED(1, 1, 1))
		goto out;
	ret = TEST_OK;
out:
	if (ret != TEST_OK)
		fprintf(stderr, "threads %d processes %d walks %llu\\n", n_threads, n_procs,
			(unsigned long long)walks(f.s));
	fixture_fini(&f);
	return ret;
}

static const struct test_case tests[] = {
	{ "identity: a repeat skips the caches, every change is still seen", test_identity_repeat },
	{ "identity: an mm that cannot be read is not walked, and is read again",
	  test_identity_unreadable },
};

TEST_MAIN(tests)
