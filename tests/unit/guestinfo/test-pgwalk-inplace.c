// SPDX-License-Identifier: MIT
// Unit tests of gi_read_gva's reads in place: a translation cache's hit copies from the HVA its
// slot keeps (gmem's map_page, struct pgwalk_cache) instead of calling the gmem's read.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fakemem.h"
#include "test.h"

#define SZ_4K (1ull << 12)
#define SZ_2M (1ull << 21)

#define U 0x00007f0000001000ull  /* a user 4 KiB page at GPA U_GPA */
#define U_GPA 0x200000ull
#define K 0xffff888000400000ull  /* a kernel 2 MiB page at GPA K_GPA */
#define K_GPA 0x400000ull

struct inplace {
	struct fakemem fm;
	struct pgwalk_cache *cache;
	struct gi_paging pg;
	struct counted_gmem c; /* over fm.mem: map and map_page, as the VMM's */
	struct gmem mem;
};

static int setup(struct inplace *t)
{
	t->cache = calloc(1, sizeof(*t->cache));
	if (!t->cache || fakemem_init(&t->fm, 0) ||
	    fakemem_map(&t->fm, U, U_GPA, SZ_4K, FPTE_US) ||
	    fakemem_map(&t->fm, K, K_GPA, SZ_2M, 0))
		return -1;
	t->pg = t->fm.pg;
	t->pg.cache = t->cache;
	t->c = (struct counted_gmem){ .inner = &t->fm.mem };
	t->mem = counted_gmem_of(&t->c, true, true);
	pgwalk_cache_invalidate(t->cache);
	return 0;
}

static void teardown(struct inplace *t)
{
	fakemem_fini(&t->fm);
	free(t->cache);
}

/*
 * A hit reads in place: no call of the gmem's read, the bytes the guest holds now (a write
 * between two reads is seen), and the kept HVA comes from one map_page call per translation,
 * at its first hit.
 */
static int test_hit_in_place(void)
{
	struct inplace t;
	uint64_t v = 0;

	ASSERT_EQ_INT(setup(&t), 0);
	fakemem_w64(&t.fm, U_GPA + 8, 0x1111);
	fakemem_w64(&t.fm, U_GPA + 16, 0x2222);
	/* the first read walks (four entries, the probe) and reads through the gmem */
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, U + 8, &v, sizeof(v)), 0);
	ASSERT_EQ_U64(v, 0x1111);
	ASSERT_EQ_INT(t.c.reads, 4 + 1 + 1);
	ASSERT_EQ_INT(t.c.pages, 0);
	ASSERT_EQ_U64(t.cache->hva_reads, 0);
	/* the next, of the same page: in place */
	t.c.reads = 0;
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, U + 16, &v, sizeof(v)), 0);
	ASSERT_EQ_U64(v, 0x2222);
	ASSERT_EQ_INT(t.c.reads, 0);
	ASSERT_EQ_INT(t.c.pages, 1);
	ASSERT_EQ_U64(t.cache->hva_reads, 1);
	/* the guest writes: the read in place sees it */
	fakemem_w64(&t.fm, U_GPA + 16, 0x3333);
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, U + 16, &v, sizeof(v)), 0);
	ASSERT_EQ_U64(v, 0x3333);
	/* the last bytes of the page, in place */
	fakemem_w64(&t.fm, U_GPA + 0xff8, 0x4444);
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, U + 0xff8, &v, sizeof(v)), 0);
	ASSERT_EQ_U64(v, 0x4444);
	ASSERT_EQ_INT(t.c.reads, 0);
	ASSERT_EQ_U64(t.cache->hva_reads, 3);
	ASSERT_EQ_INT(t.c.pages, 1);
	teardown(&t);
	return TEST_OK;
}

/*
 * A read across two 4 KiB slices of one 2 MiB page: each slice's bytes come from its own
 * translation, never past the slot's 4 KiB page; right bytes whichever slices are cached.
 */
static int test_across_slices(void)
{
	struct inplace t;
	uint8_t want[32], got[32];

	ASSERT_EQ_INT(setup(&t), 0);
	for (unsigned int i = 0; i < sizeof(want); i++)
		want[i] = (uint8_t)(0xa0 + i);
	memcpy(t.fm.ram + K_GPA + 0x1000 - 16, want, sizeof(want));
	/* a miss: the walk's chunk spans the 2 MiB page, one read through the gmem */
	memset(got, 0, sizeof(got));
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, K + 0x1000 - 16, got, sizeof(got)), 0);
	ASSERT_TRUE(memcmp(got, want, sizeof(want)) == 0);
	ASSERT_EQ_U64(t.cache->hva_reads, 0);
	/* the first slice in place (16 bytes, up to its end), the second walked */
	memset(got, 0, sizeof(got));
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, K + 0x1000 - 16, got, sizeof(got)), 0);
	ASSERT_TRUE(memcmp(got, want, sizeof(want)) == 0);
	ASSERT_EQ_U64(t.cache->hva_reads, 1);
	/* both in place */
	t.c.reads = 0;
	memset(got, 0, sizeof(got));
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, K + 0x1000 - 16, got, sizeof(got)), 0);
	ASSERT_TRUE(memcmp(got, want, sizeof(want)) == 0);
	ASSERT_EQ_U64(t.cache->hva_reads, 3);
	ASSERT_EQ_INT(t.c.reads, 0);
	teardown(&t);
	return TEST_OK;
}

/*
 * Where the HVAs do not apply, every read goes through the gmem: a gmem without map_page; one
 * whose map_page finds no whole page. A gmem of another ctx drops the first one's HVAs and
 * reads in place through its own.
 */
static int test_not_in_place(void)
{
	struct inplace t;
	struct counted_gmem other = { 0 };
	struct gmem mem_other, plain;
	uint64_t v = 0;

	ASSERT_EQ_INT(setup(&t), 0);
	other.inner = &t.fm.mem;
	mem_other = counted_gmem_of(&other, true, true);
	plain = t.mem;
	plain.map_page = NULL;
	fakemem_w64(&t.fm, U_GPA + 8, 0x5555);
	/* no map_page: the translation is cached, its reads are the gmem's */
	ASSERT_EQ_INT(gi_read_gva(&plain, &t.pg, U + 8, &v, sizeof(v)), 0);
	t.c.reads = 0;
	ASSERT_EQ_INT(gi_read_gva(&plain, &t.pg, U + 8, &v, sizeof(v)), 0);
	ASSERT_EQ_U64(v, 0x5555);
	ASSERT_EQ_INT(t.c.reads, 1);
	ASSERT_EQ_INT(t.c.pages, 0);
	/* map_page finds no whole page: none kept, asked again at the next hit */
	t.c.no_pages = true;
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, U + 8, &v, sizeof(v)), 0);
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, U + 8, &v, sizeof(v)), 0);
	ASSERT_EQ_U64(v, 0x5555);
	ASSERT_EQ_INT(t.c.reads, 3);
	ASSERT_EQ_INT(t.c.pages, 2);
	ASSERT_EQ_U64(t.cache->hva_reads, 0);
	t.c.no_pages = false;
	/* now it finds the page: in place */
	t.c.reads = 0;
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, U + 8, &v, sizeof(v)), 0);
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, K + 8, &v, sizeof(v)), 0); /* walked */
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, K + 8, &v, sizeof(v)), 0);
	ASSERT_EQ_U64(t.cache->hva_reads, 2);
	ASSERT_EQ_INT(t.c.pages, 4);
	/* a gmem of another ctx: the first one's HVAs are dropped, its own taken */
	fakemem_w64(&t.fm, U_GPA + 8, 0x7777);
	ASSERT_EQ_INT(gi_read_gva(&mem_other, &t.pg, U + 8, &v, sizeof(v)), 0);
	ASSERT_EQ_U64(v, 0x7777);
	ASSERT_EQ_INT(other.reads, 0);
	ASSERT_EQ_INT(other.pages, 1);
	ASSERT_EQ_U64(t.cache->hva_reads, 3);
	/* ... all of them: K's page is asked again through it */
	ASSERT_EQ_INT(gi_read_gva(&mem_other, &t.pg, K + 8, &v, sizeof(v)), 0);
	ASSERT_EQ_INT(other.pages, 2);
	ASSERT_EQ_INT(t.c.pages, 4);
	/* and back: the first one's again */
	t.c.reads = 0;
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, U + 8, &v, sizeof(v)), 0);
	ASSERT_EQ_INT(t.c.pages, 5);
	ASSERT_EQ_INT(t.c.reads, 0);
	teardown(&t);
	return TEST_OK;
}

/* A kept translation (the direct map's delta) keeps its HVA across epochs; one of an exit's own
 * does not answer at the next (a new walk, a new map_page). */
static int test_kept_across_epochs(void)
{
	struct inplace t;
	uint64_t v = 0;

	ASSERT_EQ_INT(setup(&t), 0);
	pgwalk_cache_keep_linear(t.cache, K - K_GPA);
	fakemem_w64(&t.fm, K_GPA + 0x40, 0x6666);
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, K + 0x40, &v, sizeof(v)), 0);
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, K + 0x40, &v, sizeof(v)), 0);
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, U, &v, sizeof(v)), 0);
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, U, &v, sizeof(v)), 0);
	ASSERT_EQ_INT(t.c.pages, 2);
	ASSERT_EQ_U64(t.cache->hva_reads, 2);
	pgwalk_cache_invalidate(t.cache);
	t.c.reads = 0;
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, K + 0x40, &v, sizeof(v)), 0);
	ASSERT_EQ_U64(v, 0x6666);
	ASSERT_EQ_INT(t.c.reads, 0);
	ASSERT_EQ_U64(t.cache->hva_reads, 3);
	ASSERT_EQ_INT(t.c.pages, 2);
	/* the user page: walked again (remembered: its four entries read again), read through the
	 * gmem; the next hit takes a new HVA */
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, U, &v, sizeof(v)), 0);
	ASSERT_EQ_INT(t.c.reads, 4 + 1);
	ASSERT_EQ_INT(t.c.pages, 2);
	ASSERT_EQ_INT(gi_read_gva(&t.mem, &t.pg, U, &v, sizeof(v)), 0);
	ASSERT_EQ_INT(t.c.pages, 3);
	teardown(&t);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "pgwalk in place: a hit reads the guest page through its kept HVA", test_hit_in_place },
	{ "pgwalk in place: a read across two 4K slices of a 2M page", test_across_slices },
	{ "pgwalk in place: no map_page, no whole page, another gmem", test_not_in_place },
	{ "pgwalk in place: a kept translation keeps its HVA across exits", test_kept_across_epochs },
};

TEST_MAIN(tests)
