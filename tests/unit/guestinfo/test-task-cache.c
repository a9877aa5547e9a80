// SPDX-License-Identifier: MIT
// Unit tests of the per-reader task identity cache (gi_current_thread_cached) and of the
// translations pgwalk keeps across invalidations (pgwalk_cache_keep_linear), on a fake guest.
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fakekernel.h"
#include "pgwalk_internal.h"
#include "test.h"

/* One sample: invalidate the translations as the sampler does, then read the current thread. */
static int sample(struct fakekernel *fk, struct pgwalk_cache *tc, struct gi_task_cache *c,
		  struct hvp_thread *t, struct gi_thread_state *st)
{
	struct gi_regs regs = fk->regs;
	uint64_t task = 0;
	int err;

	pgwalk_cache_invalidate(tc);
	regs.pg.cache = tc;
	err = gi_current_thread_cached(fk->gi, &fk->fm.mem, &regs, c, &task, t, st);
	if (!err && task != fk->task_kva)
		return -EBADMSG;
	return err;
}

static int setup(struct fakekernel *fk, struct pgwalk_cache *tc, struct gi_task_cache *c)
{
	memset(tc, 0, sizeof(*tc));
	memset(c, 0, sizeof(*c));
	return fakekernel_init(fk, 4);
}

/* setup(), and @pg: the fake guest's paging through @tc, a new sample, the direct map kept. */
static int setup_kept(struct fakekernel *fk, struct pgwalk_cache *tc, struct gi_task_cache *c,
		      struct gi_paging *pg)
{
	if (setup(fk, tc, c))
		return -1;
	*pg = fk->fm.pg;
	pg->cache = tc;
	pgwalk_cache_invalidate(tc);
	pgwalk_cache_keep_linear(tc, FK_DIRECT);
	return 0;
}

#define TASK_GPA(field) (FK_TASK_GPA + fk.layout.field)

/* The same task again: the remembered identity, one miss then hits. */
static int test_hits(void)
{
	struct fakekernel fk;
	struct pgwalk_cache tc;
	struct gi_task_cache c;
	struct hvp_thread t;
	struct gi_thread_state st;

	if (setup(&fk, &tc, &c))
		return TEST_FAIL;
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_TRUE(!st.cached);
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
		ASSERT_TRUE(st.cached);
		ASSERT_EQ_INT(t.pid, FK_PID);
		ASSERT_EQ_INT(t.tgid, FK_TGID);
		ASSERT_TRUE(!strcmp(t.comm, FK_COMM));
		ASSERT_TRUE(st.mm == fk.mm_kva && !st.exiting && !t.kthread);
	}
	ASSERT_TRUE(c.hits == 3 && c.misses == 1);
	/* a tgid changed behind the cache's back is not seen (it cannot change alone): proves
	 * that the hit did not read it */
	fakemem_w32(&fk.fm, TASK_GPA(task_tgid), FK_TGID + 1);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_TRUE(st.cached && t.tgid == FK_TGID);
	gi_task_cache_reset(&c);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_TRUE(!st.cached && t.tgid == FK_TGID + 1);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/* The task_struct freed and given to another task: new pid (and tgid), same address. */
static int test_pid_reuse(void)
{
	struct fakekernel fk;
	struct pgwalk_cache tc;
	struct gi_task_cache c;
	struct hvp_thread t;
	struct gi_thread_state st;

	if (setup(&fk, &tc, &c))
		return TEST_FAIL;
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	fakemem_w32(&fk.fm, TASK_GPA(task_pid), 4321);
	fakemem_w32(&fk.fm, TASK_GPA(task_tgid), 4321);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_TRUE(!st.cached && t.pid == 4321 && t.tgid == 4321);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_TRUE(st.cached && t.pid == 4321);
	/* a hostile pid is validated again, never given from the cache */
	fakemem_w32(&fk.fm, TASK_GPA(task_pid), 0x7fffffff);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), -EBADMSG);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/* prctl(PR_SET_NAME): a new comm, also when only its last bytes change. */
static int test_comm_rename(void)
{
	static const char *const names[] = { "worker", "hvprof-demo-XYZ", "hvprof-demo-XYW" };
	struct fakekernel fk;
	struct pgwalk_cache tc;
	struct gi_task_cache c;
	struct hvp_thread t;
	struct gi_thread_state st;

	if (setup(&fk, &tc, &c))
		return TEST_FAIL;
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		char comm[16] = { 0 };

		strcpy(comm, names[i]);
		fakemem_wbytes(&fk.fm, TASK_GPA(task_comm), comm, sizeof(comm));
		ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
		ASSERT_TRUE(!st.cached && !strcmp(t.comm, names[i]));
		ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
		ASSERT_TRUE(st.cached && !strcmp(t.comm, names[i]));
	}
	/* an unterminated comm is refused, not taken from the cache */
	fakemem_wbytes(&fk.fm, TASK_GPA(task_comm), "0123456789abcdef", 16);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), -EBADMSG);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/* execve: a new mm (comm unchanged yet); exit_mm: no mm, PF_EXITING decides. */
static int test_mm_change(void)
{
	struct fakekernel fk;
	struct pgwalk_cache tc;
	struct gi_task_cache c;
	struct hvp_thread t;
	struct gi_thread_state st;
	uint64_t mm2 = fk_kva(FK_MM_GPA + 0x1000);

	if (setup(&fk, &tc, &c))
		return TEST_FAIL;
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	fakemem_w64(&fk.fm, TASK_GPA(task_mm), mm2);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_TRUE(!st.cached && st.mm == mm2 && !t.kthread);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_TRUE(st.cached && st.mm == mm2);
	/* exit_mm with PF_EXITING: an exiting user thread, cached as such */
	fakemem_w64(&fk.fm, TASK_GPA(task_mm), 0);
	fakemem_w32(&fk.fm, TASK_GPA(task_flags), 0x00400104);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_TRUE(!st.cached && st.exiting && !t.kthread);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_TRUE(st.cached && st.exiting && !t.kthread);
	/* no mm: the flags are checked too (PF_EXITING gone: a kernel thread now) */
	fakemem_w32(&fk.fm, TASK_GPA(task_flags), 0x00400100);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_TRUE(!st.cached && !st.exiting && t.kthread);
	/* a hostile mm is refused */
	fakemem_w64(&fk.fm, TASK_GPA(task_mm), 0x00007fff00001000ull);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), -EBADMSG);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/* Entries are keyed by task: two tasks alternate, each a hit once seen. */
static int test_two_tasks(void)
{
	struct fakekernel fk;
	struct pgwalk_cache tc;
	struct gi_task_cache c;
	struct hvp_thread t;
	struct gi_thread_state st;
	uint64_t task2 = fk_kva(FK_TASK2_GPA), task;

	if (setup(&fk, &tc, &c))
		return TEST_FAIL;
	/* task 2: a copy of task 1 with pid 77 */
	memcpy(fk.fm.ram + FK_TASK2_GPA, fk.fm.ram + FK_TASK_GPA, 0x2000);
	fakemem_w32(&fk.fm, FK_TASK2_GPA + fk.layout.task_pid, 77);
	for (int round = 0; round < 3; round++) {
		for (int k = 0; k < 2; k++) {
			struct gi_regs regs = fk.regs;

			fakemem_w64(&fk.fm, FK_PERCPU_GPA + FK_CURRENT_TASK_OFF,
				    k ? task2 : fk.task_kva);
			pgwalk_cache_invalidate(&tc);
			regs.pg.cache = &tc;
			ASSERT_EQ_INT(gi_current_thread_cached(fk.gi, &fk.fm.mem, &regs, &c, &task,
							       &t, &st), 0);
			ASSERT_TRUE(task == (k ? task2 : fk.task_kva));
			ASSERT_EQ_INT(t.pid, k ? 77 : FK_PID);
			ASSERT_TRUE(st.cached == (round > 0));
		}
	}
	ASSERT_TRUE(c.misses == 2 && c.hits == 4);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/*
 * Kept translations: the direct map's (gva - gpa == FK_DIRECT) outlive an invalidation and
 * answer under any root table (every process shares the kernel half), a vmalloc'ed stack page's
 * do not (remapped to another page: the new data is read).
 */
static int test_kept_translations(void)
{
	struct fakekernel fk;
	struct pgwalk_cache tc;
	struct gi_task_cache c;
	struct gi_paging pg;
	uint64_t gpa, v, pte_gpa, misses;

	if (setup_kept(&fk, &tc, &c, &pg))
		return TEST_FAIL;
	ASSERT_EQ_INT(gi_gva_to_gpa(&fk.fm.mem, &pg, fk.task_kva, &gpa, NULL, NULL), 0);
	ASSERT_EQ_INT(gi_gva_to_gpa(&fk.fm.mem, &pg, FK_STACK, &gpa, NULL, NULL), 0);
	ASSERT_TRUE(gpa == FK_STACK_GPA);
	pgwalk_cache_invalidate(&tc);
	/* the direct map: kept (a hit on a kept entry, no walk) */
	ASSERT_EQ_INT(gi_gva_to_gpa(&fk.fm.mem, &pg, fk.task_kva + 8, &gpa, NULL, NULL), 0);
	ASSERT_TRUE(gpa == FK_TASK_GPA + 8 && tc.kept_hits == 1);
	/* the stack page moves to another physical page: walked again, the new page read */
	pte_gpa = fakemem_entry_gpa(&fk.fm, FK_STACK, 1);
	ASSERT_TRUE(pte_gpa != 0);
	fakemem_w64(&fk.fm, pte_gpa, (FK_STACK_GPA + 0x3000) | 0x3);
	fakemem_w64(&fk.fm, FK_STACK_GPA + 0x3000, 0x5555);
	ASSERT_EQ_INT(gi_read_gva(&fk.fm.mem, &pg, FK_STACK, &v, sizeof(v)), 0);
	ASSERT_TRUE(v == 0x5555 && tc.kept_hits == 1);
	/* another root (another process: the same kernel half): a kept entry answers without a
	 * walk; a translation of this sample that is not kept (the stack page) does not */
	pg.cr3 += 0x1000;
	misses = tc.misses;
	ASSERT_EQ_INT(gi_gva_to_gpa(&fk.fm.mem, &pg, fk.task_kva, &gpa, NULL, NULL), 0);
	ASSERT_TRUE(gpa == FK_TASK_GPA && tc.kept_hits == 2 && tc.misses == misses);
	ASSERT_TRUE(gi_gva_to_gpa(&fk.fm.mem, &pg, FK_STACK, &gpa, NULL, NULL) != 0 &&
		    tc.misses == misses + 1); /* walked under that root, which maps nothing */
	pg.cr3 -= 0x1000;
	/* PCID bits do not matter */
	pg.cr3 |= 5;
	ASSERT_EQ_INT(gi_gva_to_gpa(&fk.fm.mem, &pg, fk.task_kva, &gpa, NULL, NULL), 0);
	ASSERT_TRUE(tc.kept_hits == 3);
	pg.cr3 &= ~0xfffull;
	/* a flush (or another delta) forgets them */
	pgwalk_cache_flush(&tc);
	ASSERT_EQ_INT(gi_gva_to_gpa(&fk.fm.mem, &pg, fk.task_kva, &gpa, NULL, NULL), 0);
	ASSERT_TRUE(tc.kept_hits == 3);
	pgwalk_cache_invalidate(&tc);
	pgwalk_cache_keep_linear(&tc, FK_DIRECT + (1ull << 30));
	ASSERT_EQ_INT(gi_gva_to_gpa(&fk.fm.mem, &pg, fk.task_kva, &gpa, NULL, NULL), 0);
	pgwalk_cache_invalidate(&tc);
	ASSERT_EQ_INT(gi_gva_to_gpa(&fk.fm.mem, &pg, fk.task_kva, &gpa, NULL, NULL), 0);
	ASSERT_TRUE(tc.kept_hits == 3);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/*
 * Permissions through the cache (gi_gva_to_gpa_access: user walks ask whether a return address
 * is executable and a stack page user-accessible): stored by the walk, answered within the
 * epoch, walked again after an invalidation (the PTE changed); a kept direct-map translation
 * answers addresses only, never permissions.
 */
static int test_access_bits(void)
{
	struct fakekernel fk;
	struct pgwalk_cache tc;
	struct gi_task_cache c;
	struct gi_paging pg;
	uint64_t gpa, pte_gpa, pte, misses;
	uint8_t acc = 0xff;

	if (setup_kept(&fk, &tc, &c, &pg))
		return TEST_FAIL;
	/* user text: user, executable; user stack: user, NX; a kernel stack page: neither */
	ASSERT_EQ_INT(gi_gva_to_gpa_access(&fk.fm.mem, &pg, FK_USER_TEXT + 8, &gpa, NULL, &acc), 0);
	ASSERT_TRUE(acc == PGWALK_ACC_USER && gpa == FK_USER_TEXT_GPA + 8);
	/* the same page again in this epoch: a hit, same answer */
	misses = tc.misses;
	ASSERT_EQ_INT(gi_gva_to_gpa_access(&fk.fm.mem, &pg, FK_USER_TEXT + 16, &gpa, NULL, &acc), 0);
	ASSERT_TRUE(acc == PGWALK_ACC_USER && tc.misses == misses);
	ASSERT_EQ_INT(gi_gva_to_gpa_access(&fk.fm.mem, &pg, FK_USER_STACK, &gpa, NULL, &acc), 0);
	ASSERT_TRUE(acc == (PGWALK_ACC_USER | PGWALK_ACC_NX));
	ASSERT_EQ_INT(gi_gva_to_gpa_access(&fk.fm.mem, &pg, FK_STACK, &gpa, NULL, &acc), 0);
	ASSERT_TRUE(!(acc & PGWALK_ACC_USER));
	/* the guest makes the text page NX (mprotect) and then unmaps it: seen after the
	 * invalidation of the next sample */
	pte_gpa = fakemem_entry_gpa(&fk.fm, FK_USER_TEXT, 1);
	ASSERT_TRUE(pte_gpa != 0);
	memcpy(&pte, fk.fm.ram + pte_gpa, sizeof(pte));
	fakemem_w64(&fk.fm, pte_gpa, pte | FPTE_NX);
	pgwalk_cache_invalidate(&tc);
	ASSERT_EQ_INT(gi_gva_to_gpa_access(&fk.fm.mem, &pg, FK_USER_TEXT, &gpa, NULL, &acc), 0);
	ASSERT_TRUE(acc == (PGWALK_ACC_USER | PGWALK_ACC_NX));
	fakemem_w64(&fk.fm, pte_gpa, 0);
	pgwalk_cache_invalidate(&tc);
	ASSERT_EQ_INT(gi_gva_to_gpa_access(&fk.fm.mem, &pg, FK_USER_TEXT, &gpa, NULL, &acc),
		      -EFAULT);
	/* a kept direct-map translation: an address-only lookup hits it, a permission lookup
	 * walks (and finds the supervisor page) */
	ASSERT_EQ_INT(gi_gva_to_gpa(&fk.fm.mem, &pg, fk.task_kva, &gpa, NULL, NULL), 0);
	pgwalk_cache_invalidate(&tc);
	misses = tc.misses;
	ASSERT_EQ_INT(gi_gva_to_gpa(&fk.fm.mem, &pg, fk.task_kva, &gpa, NULL, NULL), 0);
	ASSERT_TRUE(tc.kept_hits == 1 && tc.misses == misses);
	ASSERT_EQ_INT(gi_gva_to_gpa_access(&fk.fm.mem, &pg, fk.task_kva, &gpa, NULL, &acc), 0);
	ASSERT_TRUE(tc.kept_hits == 1 && tc.misses == misses + 1 && !(acc & PGWALK_ACC_USER));
	ASSERT_EQ_INT(gi_gva_to_gpa_access(&fk.fm.mem, &pg, fk.task_kva, &gpa, NULL, NULL),
		      -EINVAL);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/* task->stack set to @bad: seen, read through and learned from, it never gets seeded. */
static int stack_refused(struct fakekernel *fk, struct pgwalk_cache *tc, struct gi_task_cache *c,
			 struct gi_paging *pg, uint64_t bad)
{
	struct hvp_thread t;
	struct gi_thread_state st;
	uint64_t v, stack = 1;

	fakemem_w64(&fk->fm, FK_TASK_GPA + fk->layout.task_stack, bad);
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ_INT(sample(fk, tc, c, &t, &st), 0);
		ASSERT_EQ_INT(gi_task_stack_seed(fk->gi, &fk->fm.mem, pg, c, fk->task_kva, &stack),
			      0);
		ASSERT_EQ_U64(stack, 0); /* not handed on to the pt_regs read either */
		ASSERT_EQ_INT(gi_read_gva(&fk->fm.mem, pg, bad, &v, sizeof(v)), 0);
		gi_task_stack_learn(pg, c, fk->task_kva);
	}
	return TEST_OK;
}

/*
 * A task's kernel stack translations (gi_task_stack_seed / gi_task_stack_learn): learned from
 * one sample's walks, seeded into the next samples' caches (stack reads walk no page tables and
 * read the right bytes), forgotten when task->stack changes or is not a stack, or when the
 * identity is read again; nothing for a task the cache does not hold.
 */
static int test_stack_translations(void)
{
	struct fakekernel fk;
	struct pgwalk_cache tc;
	struct gi_task_cache c;
	struct hvp_thread t;
	struct gi_thread_state st;
	struct gi_paging pg;
	uint64_t v, misses, stack = 0;

	if (setup(&fk, &tc, &c))
		return TEST_FAIL;
	pg = fk.fm.pg;
	pg.cache = &tc;
	ASSERT_EQ_INT(fk_w64(&fk, FK_STACK + 0x3f00, 0x1111), 0);
	ASSERT_EQ_INT(fk_w64(&fk, FK_STACK + 0x1f00, 0x2222), 0);
	/* a first sample: the stack is learned, its pages walked and remembered */
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_EQ_INT(gi_task_stack_seed(fk.gi, &fk.fm.mem, &pg, &c, fk.task_kva, &stack), 0);
	ASSERT_EQ_U64(stack, FK_STACK); /* handed on even when nothing is seeded yet */
	ASSERT_EQ_INT(gi_read_gva(&fk.fm.mem, &pg, FK_STACK + 0x3f00, &v, sizeof(v)), 0);
	gi_task_stack_learn(&pg, &c, fk.task_kva);
	/* the next sample: one page seeded, read without a walk; another page still walked */
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_TRUE(st.cached);
	ASSERT_EQ_INT(gi_task_stack_seed(fk.gi, &fk.fm.mem, &pg, &c, fk.task_kva, NULL), 1);
	misses = tc.misses;
	ASSERT_EQ_INT(gi_read_gva(&fk.fm.mem, &pg, FK_STACK + 0x3f00, &v, sizeof(v)), 0);
	ASSERT_EQ_U64(v, 0x1111);
	ASSERT_EQ_U64(tc.misses, misses);
	ASSERT_EQ_INT(gi_read_gva(&fk.fm.mem, &pg, FK_STACK + 0x1f00, &v, sizeof(v)), 0);
	ASSERT_EQ_U64(v, 0x2222);
	ASSERT_EQ_U64(tc.misses, misses + 1);
	gi_task_stack_learn(&pg, &c, fk.task_kva);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_EQ_INT(gi_task_stack_seed(fk.gi, &fk.fm.mem, &pg, &c, fk.task_kva, NULL), 2);
	/* another task is not seeded from this one's entry */
	ASSERT_EQ_INT(gi_task_stack_seed(fk.gi, &fk.fm.mem, &pg, &c, fk_kva(FK_TASK2_GPA), NULL), 0);
	/* task->stack points elsewhere (another stack): forgotten, learned again */
	fakemem_w64(&fk.fm, TASK_GPA(task_stack), FK_IRQ_STACK);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_EQ_INT(gi_task_stack_seed(fk.gi, &fk.fm.mem, &pg, &c, fk.task_kva, NULL), 0);
	gi_task_stack_learn(&pg, &c, fk.task_kva); /* nothing walked: nothing learned */
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_EQ_INT(gi_task_stack_seed(fk.gi, &fk.fm.mem, &pg, &c, fk.task_kva, NULL), 0);
	/* hostile: a stack pointer that is not THREAD_SIZE-aligned, or a user address: never
	 * learned, however often seen and read through */
	ASSERT_EQ_INT(stack_refused(&fk, &tc, &c, &pg, FK_STACK + 0x1000), TEST_OK);
	ASSERT_EQ_INT(stack_refused(&fk, &tc, &c, &pg, FK_USER_STACK), TEST_OK);
	/* back to its stack, learned again; then the identity changes (pid reuse): forgotten */
	fakemem_w64(&fk.fm, TASK_GPA(task_stack), FK_STACK);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_EQ_INT(gi_task_stack_seed(fk.gi, &fk.fm.mem, &pg, &c, fk.task_kva, NULL), 0);
	ASSERT_EQ_INT(gi_read_gva(&fk.fm.mem, &pg, FK_STACK + 0x3f00, &v, sizeof(v)), 0);
	gi_task_stack_learn(&pg, &c, fk.task_kva);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_EQ_INT(gi_task_stack_seed(fk.gi, &fk.fm.mem, &pg, &c, fk.task_kva, NULL), 1);
	/* page-table isolation: the kernel half is read through the kernel CR3 (the sample's CR3
	 * is the user one): seeded under that root, read without a walk */
	pg.kernel_cr3 = pg.cr3;
	pg.cr3 |= 0x1000;
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_EQ_INT(gi_task_stack_seed(fk.gi, &fk.fm.mem, &pg, &c, fk.task_kva, NULL), 1);
	misses = tc.misses;
	ASSERT_EQ_INT(gi_read_gva(&fk.fm.mem, &pg, FK_STACK + 0x3f00, &v, sizeof(v)), 0);
	ASSERT_TRUE(v == 0x1111 && tc.misses == misses);
	pg = fk.fm.pg;
	pg.cache = &tc;
	fakemem_w32(&fk.fm, TASK_GPA(task_pid), FK_PID + 1);
	ASSERT_EQ_INT(sample(&fk, &tc, &c, &t, &st), 0);
	ASSERT_TRUE(!st.cached);
	ASSERT_EQ_INT(gi_task_stack_seed(fk.gi, &fk.fm.mem, &pg, &c, fk.task_kva, NULL), 0);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/*
 * The seed never evicts: a set whose two ways hold translations of this sample or kept ones
 * stays as it is (a seed of another page there is dropped), a page already there is not
 * seeded again; a user address or GPA 0 is never seeded, and a seeded kernel page never answers
 * that user mode may access it.
 */
static int test_seed_slots(void)
{
	struct fakekernel fk;
	struct pgwalk_cache tc;
	struct gi_task_cache c;
	struct gi_paging pg;
	const uint64_t set_stride = 4096ull * PGWALK_CACHE_SETS; /* the next page of the same set */
	uint64_t gpa, task_kva;
	uint8_t acc;

	if (setup_kept(&fk, &tc, &c, &pg))
		return TEST_FAIL;
	task_kva = fk_kva(FK_TASK_GPA);
	ASSERT_TRUE(!pgwalk_cache_seed(&pg, FK_USER_STACK, FK_USER_STACK_GPA, PGWALK_ACC_USER));
	ASSERT_TRUE(!pgwalk_cache_seed(&pg, FK_STACK, 0, 0));
	ASSERT_TRUE(pgwalk_cache_seed(&pg, FK_STACK, FK_STACK_GPA, PGWALK_ACC_USER));
	ASSERT_TRUE(pgwalk_cache_peek(&pg, FK_STACK + 8, &gpa, &acc));
	ASSERT_TRUE(gpa == FK_STACK_GPA + 8 && !(acc & PGWALK_ACC_USER));
	/* the same page again: not replaced; the same set: its second way, then full */
	ASSERT_TRUE(!pgwalk_cache_seed(&pg, FK_STACK, FK_IRQ_STACK_GPA, 0));
	ASSERT_TRUE(pgwalk_cache_seed(&pg, FK_STACK + set_stride, FK_IRQ_STACK_GPA, 0));
	ASSERT_TRUE(!pgwalk_cache_seed(&pg, FK_STACK + 2 * set_stride, FK_IRQ_STACK_GPA, 0));
	ASSERT_TRUE(pgwalk_cache_peek(&pg, FK_STACK, &gpa, &acc) && gpa == FK_STACK_GPA);
	ASSERT_TRUE(pgwalk_cache_peek(&pg, FK_STACK + set_stride, &gpa, &acc) &&
		    gpa == FK_IRQ_STACK_GPA);
	/* a kept direct-map translation in a set: a seed takes the other way, never its way */
	ASSERT_EQ_INT(gi_gva_to_gpa(&fk.fm.mem, &pg, task_kva, &gpa, NULL, NULL), 0);
	pgwalk_cache_invalidate(&tc);
	ASSERT_TRUE(pgwalk_cache_seed(&pg, task_kva + set_stride, FK_STACK_GPA, 0));
	ASSERT_TRUE(!pgwalk_cache_seed(&pg, task_kva + 2 * set_stride, FK_STACK_GPA, 0));
	ASSERT_EQ_INT(gi_gva_to_gpa(&fk.fm.mem, &pg, task_kva, &gpa, NULL, NULL), 0);
	ASSERT_TRUE(gpa == FK_TASK_GPA && tc.kept_hits == 1);
	fakekernel_fini(&fk);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "task cache: the same task hits", test_hits },
	{ "task cache: pid reuse at the same address", test_pid_reuse },
	{ "task cache: comm renamed (prctl)", test_comm_rename },
	{ "task cache: mm changed (execve, exit_mm)", test_mm_change },
	{ "task cache: two tasks", test_two_tasks },
	{ "pgwalk: direct map kept, stacks walked again", test_kept_translations },
	{ "pgwalk: permissions through the cache, never from a kept entry", test_access_bits },
	{ "task cache: kernel stack translations learned, seeded, forgotten",
	  test_stack_translations },
	{ "pgwalk: a seed evicts nothing, never a user address or user access", test_seed_slots },
};

TEST_MAIN(tests)
