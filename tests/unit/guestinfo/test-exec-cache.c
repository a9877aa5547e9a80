// SPDX-License-Identifier: MIT
// Unit tests of struct gi_exec_cache: user walks' executable pages kept across exits for one
// address space and VMA count (gi_exec_cache_use, gi_unwind_user_cached).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fakekernel.h"
#include "fakemem.h"
#include "test.h"

#define SP (FK_USER_STACK + 0x100)
#define ROOT 0x123000ull

struct xfixture {
	struct fakekernel fk;
	struct pgwalk_cache *tcache;
	struct gi_paging pg;
	struct counted_gmem cnt; /* a map, so that walks are remembered as the VMM's are; no
				  * map_page: every read is seen */
	struct gmem mem;
	struct gi_exec_cache xc;
};

static int setup(struct xfixture *f)
{
	memset(f, 0, sizeof(*f));
	f->tcache = calloc(1, sizeof(*f->tcache));
	if (!f->tcache || fakekernel_init(&f->fk, 4) || fk_uchain(&f->fk, SP + 0x20, 3))
		return -1;
	f->pg = f->fk.fm.pg;
	f->pg.cache = f->tcache;
	f->cnt.inner = &f->fk.fm.mem;
	f->mem = counted_gmem_of(&f->cnt, true, false);
	return 0;
}

static void teardown(struct xfixture *f)
{
	fakekernel_fini(&f->fk);
	free(f->tcache);
}

/* One exit's walk: a new epoch of the translation cache, reads counted from zero. */
static enum hvp_walk_stop exit_walk(struct xfixture *f, struct gi_exec_cache *xc, uint64_t *ips,
				    unsigned int *n)
{
	pgwalk_cache_invalidate(f->tcache);
	f->cnt.reads = 0;
	return gi_unwind_user_cached(&f->mem, &f->pg, 0x400100, SP, SP + 0x20, NULL, xc, ips, 8,
				     n);
}

/*
 * The first exit walks the text page of the return addresses (and finds it executable); the
 * next exits of the same address space and VMA count take it from the cache: the same frames,
 * fewer guest reads (no page-table entries of the text page), counted as hits.
 */
static int test_kept_across_exits(void)
{
	struct xfixture f;
	uint64_t ips[8];
	unsigned int n = 0, plain_reads;

	ASSERT_EQ_INT(setup(&f), 0);
	/* without a cache, at each exit after the first (whose walks are remembered) */
	ASSERT_EQ_INT(exit_walk(&f, NULL, ips, &n), HVP_WALK_END);
	ASSERT_EQ_INT(exit_walk(&f, NULL, ips, &n), HVP_WALK_END);
	plain_reads = f.cnt.reads;
	ASSERT_TRUE(gi_exec_cache_use(&f.xc, f.fk.mm_kva, ROOT, 7) == &f.xc);
	ASSERT_EQ_INT(exit_walk(&f, &f.xc, ips, &n), HVP_WALK_END);
	ASSERT_EQ_INT(n, 4);
	ASSERT_EQ_U64(ips[1], FK_URET(1));
	ASSERT_EQ_U64(ips[3], FK_URET(3));
	ASSERT_EQ_U64(f.xc.hits, 2); /* URET(2), URET(3): the page URET(1) found */
	ASSERT_EQ_U64(f.xc.misses, 1);
	ASSERT_EQ_INT(f.cnt.reads, plain_reads);
	ASSERT_TRUE(gi_exec_cache_use(&f.xc, f.fk.mm_kva, ROOT, 7) == &f.xc);
	ASSERT_EQ_INT(exit_walk(&f, &f.xc, ips, &n), HVP_WALK_END);
	ASSERT_EQ_INT(n, 4);
	ASSERT_EQ_U64(ips[2], FK_URET(2));
	ASSERT_EQ_U64(f.xc.hits, 5);
	ASSERT_EQ_U64(f.xc.misses, 1);
	/* the text page's walk (remembered: its four entries read again) is not made */
	ASSERT_EQ_INT(f.cnt.reads, plain_reads - 4);
	teardown(&f);
	return TEST_OK;
}

/*
 * Another VMA count, mm or root empties the cache (the page is walked again); an unknown count
 * or no mm gives no cache at all. A page found not executable is never kept: a return address
 * there ends the walk at every exit.
 */
static int test_emptied_and_refused(void)
{
	struct xfixture f;
	uint64_t ips[8], pte;
	unsigned int n = 0;

	ASSERT_EQ_INT(setup(&f), 0);
	ASSERT_TRUE(gi_exec_cache_use(&f.xc, f.fk.mm_kva, ROOT, 7) == &f.xc);
	ASSERT_EQ_INT(exit_walk(&f, &f.xc, ips, &n), HVP_WALK_END);
	ASSERT_EQ_U64(f.xc.misses, 1);
	/* the VMA count moved (mmap, munmap, a VMA split): walked again */
	ASSERT_TRUE(gi_exec_cache_use(&f.xc, f.fk.mm_kva, ROOT, 8) == &f.xc);
	ASSERT_EQ_INT(exit_walk(&f, &f.xc, ips, &n), HVP_WALK_END);
	ASSERT_EQ_U64(f.xc.misses, 2);
	/* another root (a new process at a freed mm's address) */
	ASSERT_TRUE(gi_exec_cache_use(&f.xc, f.fk.mm_kva, ROOT + 0x2000, 8) == &f.xc);
	ASSERT_EQ_INT(exit_walk(&f, &f.xc, ips, &n), HVP_WALK_END);
	ASSERT_EQ_U64(f.xc.misses, 3);
	/* another mm */
	ASSERT_TRUE(gi_exec_cache_use(&f.xc, f.fk.mm_kva + 0x400, ROOT + 0x2000, 8) == &f.xc);
	ASSERT_EQ_INT(exit_walk(&f, &f.xc, ips, &n), HVP_WALK_END);
	ASSERT_EQ_U64(f.xc.misses, 4);
	ASSERT_TRUE(gi_exec_cache_use(&f.xc, f.fk.mm_kva, ROOT, -1) == NULL);
	ASSERT_TRUE(gi_exec_cache_use(&f.xc, 0, ROOT, 7) == NULL);
	ASSERT_TRUE(gi_exec_cache_use(NULL, f.fk.mm_kva, ROOT, 7) == NULL);
	/* the text page made NX, with a new count as the kernel's mprotect of part of a VMA
	 * gives: the first return address ends the walk, and nothing is kept for it */
	pte = fakemem_entry_gpa(&f.fk.fm, FK_USER_TEXT + 0x1000, 1);
	ASSERT_TRUE(pte != 0);
	fakemem_w64(&f.fk.fm, pte, fakemem_r64(&f.fk.fm, pte) | FPTE_NX);
	for (int exit = 0; exit < 2; exit++) {
		ASSERT_TRUE(gi_exec_cache_use(&f.xc, f.fk.mm_kva, ROOT, 9) == &f.xc);
		ASSERT_EQ_INT(exit_walk(&f, &f.xc, ips, &n), HVP_WALK_BAD_FP);
		ASSERT_EQ_INT(n, 1);
	}
	ASSERT_EQ_U64(f.xc.misses, 6);
	teardown(&f);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "exec cache: a text page found executable is kept across exits", test_kept_across_exits },
	{ "exec cache: emptied for another count, mm or root; an NX page never kept",
	  test_emptied_and_refused },
};

TEST_MAIN(tests)
