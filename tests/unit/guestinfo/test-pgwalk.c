// SPDX-License-Identifier: MIT
// Unit tests of gi_gva_to_gpa / gi_read_gva on page tables built in a byte array.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <hvprof/guestinfo.h>

#include "fakemem.h"
#include "test.h"

#define SZ_4K (1ull << 12)
#define SZ_2M (1ull << 21)
#define SZ_1G (1ull << 30)

#define GVA_USER_4K 0x00007f0000001000ull
#define GVA_KERN_2M 0xffff888000200000ull
#define GVA_KERN_1G 0xffff888000000000ull
#define GVA_LA57 0xff11000000001000ull     /* 5-level direct map */
#define GVA_LA57_HIGH 0x0080000000002000ull /* canonical only with 57-bit addresses */

/* Setups: build mappings and tweak state in a fresh 4- or 5-level fakemem. */
static int setup_4k(struct fakemem *fm)
{
	return fakemem_map(fm, GVA_USER_4K, 0x200000, SZ_4K, FPTE_US);
}

static int setup_2m(struct fakemem *fm)
{
	return fakemem_map(fm, GVA_KERN_2M, 0x400000, SZ_2M, 0);
}

static int setup_1g(struct fakemem *fm)
{
	return fakemem_map(fm, GVA_KERN_1G, 0, SZ_1G, 0);
}

static int setup_la57(struct fakemem *fm)
{
	if (fakemem_map(fm, GVA_LA57, 0x300000, SZ_4K, 0))
		return -1;
	return fakemem_map(fm, GVA_LA57_HIGH, 0x301000, SZ_4K, FPTE_US);
}

static int setup_pcid(struct fakemem *fm)
{
	fm->pg.cr4 |= 1ull << 17; /* PCIDE */
	fm->pg.cr3 |= 0x123;      /* PCID 0x123 */
	return setup_4k(fm);
}

static int setup_cr3_low_bits_no_pcide(struct fakemem *fm)
{
	fm->pg.cr3 |= 0x018; /* PWT | PCD */
	return setup_4k(fm);
}

static int setup_cr3_noflush(struct fakemem *fm)
{
	fm->pg.cr4 |= 1ull << 17;
	fm->pg.cr3 |= (1ull << 63) | 0x5; /* no-flush hint, PCID 5 */
	return setup_4k(fm);
}

static int clear_present(struct fakemem *fm, unsigned int level)
{
	uint64_t e_gpa;

	if (setup_4k(fm))
		return -1;
	e_gpa = fakemem_entry_gpa(fm, GVA_USER_4K, level);
	if (!e_gpa)
		return -1;
	fakemem_w64(fm, e_gpa, fakemem_r64(fm, e_gpa) & ~FPTE_P);
	return 0;
}

static int setup_np4(struct fakemem *fm)
{
	return clear_present(fm, 4);
}

static int setup_np3(struct fakemem *fm)
{
	return clear_present(fm, 3);
}

static int setup_np2(struct fakemem *fm)
{
	return clear_present(fm, 2);
}

static int setup_np1(struct fakemem *fm)
{
	return clear_present(fm, 1);
}

static int setup_np5(struct fakemem *fm)
{
	uint64_t e_gpa;

	if (setup_la57(fm))
		return -1;
	e_gpa = fakemem_entry_gpa(fm, GVA_LA57, 5);
	fakemem_w64(fm, e_gpa, fakemem_r64(fm, e_gpa) & ~FPTE_P);
	return 0;
}

static int set_bits(struct fakemem *fm, uint64_t gva, unsigned int level, uint64_t bits)
{
	uint64_t e_gpa = fakemem_entry_gpa(fm, gva, level);

	if (!e_gpa)
		return -1;
	fakemem_w64(fm, e_gpa, fakemem_r64(fm, e_gpa) | bits);
	return 0;
}

static int setup_nx_pml4(struct fakemem *fm)
{
	return setup_4k(fm) || set_bits(fm, GVA_USER_4K, 4, FPTE_NX) ? -1 : 0;
}

static int setup_nx_without_nxe(struct fakemem *fm)
{
	fm->pg.efer &= ~(1ull << 11);
	return setup_nx_pml4(fm);
}

static int setup_pa_above_maxphy(struct fakemem *fm)
{
	/* MAXPHYADDR is 46: bit 47 of the PTE's address field is reserved. */
	return setup_4k(fm) || set_bits(fm, GVA_USER_4K, 1, 1ull << 47) ? -1 : 0;
}

static int setup_pde_above_maxphy(struct fakemem *fm)
{
	return setup_4k(fm) || set_bits(fm, GVA_USER_4K, 2, 1ull << 50) ? -1 : 0;
}

static int setup_maxphy_0(struct fakemem *fm)
{
	fm->pg.maxphyaddr = 0; /* means 52: bit 47 is an address bit then, and outside RAM */
	return setup_pa_above_maxphy(fm);
}

static int setup_cr3_above_maxphy(struct fakemem *fm)
{
	fm->pg.cr3 |= 1ull << 48;
	return setup_4k(fm);
}

static int setup_table_outside_ram(struct fakemem *fm)
{
	uint64_t e_gpa;

	if (setup_4k(fm))
		return -1;
	e_gpa = fakemem_entry_gpa(fm, GVA_USER_4K, 2);
	fakemem_w64(fm, e_gpa, 0x40000000ull | FPTE_P | FPTE_RW); /* PT at 1 GiB: no RAM there */
	return 0;
}

static int setup_leaf_outside_ram(struct fakemem *fm)
{
	return fakemem_map(fm, GVA_USER_4K, 0x10000000ull, SZ_4K, 0);
}

static int setup_2m_reserved(struct fakemem *fm)
{
	return setup_2m(fm) || set_bits(fm, GVA_KERN_2M, 2, 1ull << 13) ? -1 : 0;
}

static int setup_1g_reserved(struct fakemem *fm)
{
	return setup_1g(fm) || set_bits(fm, GVA_KERN_1G, 3, 1ull << 20) ? -1 : 0;
}

static int setup_ps_in_pml4(struct fakemem *fm)
{
	return setup_4k(fm) || set_bits(fm, GVA_USER_4K, 4, FPTE_PS) ? -1 : 0;
}

static int setup_no_paging(struct fakemem *fm)
{
	fm->pg.cr0 &= ~(1ull << 31);
	return setup_4k(fm);
}

static int setup_no_lma(struct fakemem *fm)
{
	fm->pg.efer &= ~(1ull << 10);
	return setup_4k(fm);
}

/* PML4[0x1ed] points back at the PML4 (a recursive slot): the walk still takes 4 steps. */
#define LOOP_IDX 0x1edull
#define GVA_LOOP (0xffff000000000000ull | (LOOP_IDX << 39) | (LOOP_IDX << 30) | (LOOP_IDX << 21) | \
		  (LOOP_IDX << 12) | 0x10)

static int setup_loop(struct fakemem *fm)
{
	uint64_t pml4 = fm->pg.cr3 & ~0xfffull;

	fakemem_w64(fm, pml4 + LOOP_IDX * 8, pml4 | FPTE_P | FPTE_RW);
	return 0;
}

struct pgwalk_row {
	const char *name;
	int la57;
	int (*setup)(struct fakemem *fm);
	uint64_t gva;
	int err;
	uint64_t gpa;       /* when err == 0; UINT64_MAX: the PML4 page + 0x10 (loop row) */
	uint64_t page_size; /* when err == 0 */
	unsigned int levels; /* entries recorded in the trace */
};

static const struct pgwalk_row pgwalk_rows[] = {
	{ "4-level 4K", 0, setup_4k, GVA_USER_4K + 0x234, 0, 0x200234, SZ_4K, 4 },
	{ "4-level 4K last byte", 0, setup_4k, GVA_USER_4K + 0xfff, 0, 0x200fff, SZ_4K, 4 },
	{ "4-level 2M", 0, setup_2m, GVA_KERN_2M + 0x12345, 0, 0x412345, SZ_2M, 3 },
	{ "4-level 1G", 0, setup_1g, GVA_KERN_1G + 0x654321, 0, 0x654321, SZ_1G, 2 },
	{ "5-level 4K", 1, setup_la57, GVA_LA57 + 0x10, 0, 0x300010, SZ_4K, 5 },
	{ "5-level 57-bit user address", 1, setup_la57, GVA_LA57_HIGH + 8, 0, 0x301008, SZ_4K, 5 },
	{ "57-bit address under 4-level paging", 0, setup_4k, GVA_LA57_HIGH, -EINVAL, 0, 0, 0 },
	{ "CR3 with PCID", 0, setup_pcid, GVA_USER_4K + 1, 0, 0x200001, SZ_4K, 4 },
	{ "CR3 with PWT/PCD, no PCIDE", 0, setup_cr3_low_bits_no_pcide, GVA_USER_4K, 0, 0x200000,
	  SZ_4K, 4 },
	{ "CR3 with no-flush bit 63", 0, setup_cr3_noflush, GVA_USER_4K, 0, 0x200000, SZ_4K, 4 },
	{ "not present: PML5E", 1, setup_np5, GVA_LA57, -EFAULT, 0, 0, 1 },
	{ "not present: PML4E", 0, setup_np4, GVA_USER_4K, -EFAULT, 0, 0, 1 },
	{ "not present: PDPTE", 0, setup_np3, GVA_USER_4K, -EFAULT, 0, 0, 2 },
	{ "not present: PDE", 0, setup_np2, GVA_USER_4K, -EFAULT, 0, 0, 3 },
	{ "not present: PTE", 0, setup_np1, GVA_USER_4K, -EFAULT, 0, 0, 4 },
	{ "nothing mapped", 0, setup_4k, 0x1000, -EFAULT, 0, 0, 1 },
	{ "NX in PML4E still translates", 0, setup_nx_pml4, GVA_USER_4K, 0, 0x200000, SZ_4K, 4 },
	{ "NX without EFER.NXE is reserved", 0, setup_nx_without_nxe, GVA_USER_4K, -EFAULT, 0, 0,
	  1 },
	{ "non-canonical low", 0, setup_4k, 0x0000800000000000ull, -EINVAL, 0, 0, 0 },
	{ "non-canonical high", 0, setup_4k, 0xffff7fffffffffffull, -EINVAL, 0, 0, 0 },
	{ "non-canonical 5-level", 1, setup_la57, 0x0100000000000000ull, -EINVAL, 0, 0, 0 },
	{ "PTE address above MAXPHYADDR", 0, setup_pa_above_maxphy, GVA_USER_4K, -ERANGE, 0, 0,
	  4 },
	{ "PDE address above MAXPHYADDR", 0, setup_pde_above_maxphy, GVA_USER_4K, -ERANGE, 0, 0,
	  3 },
	{ "MAXPHYADDR 0 means 52", 0, setup_maxphy_0, GVA_USER_4K, -ERANGE, 0, 0, 4 },
	{ "CR3 above MAXPHYADDR", 0, setup_cr3_above_maxphy, GVA_USER_4K, -ERANGE, 0, 0, 0 },
	{ "page table outside RAM", 0, setup_table_outside_ram, GVA_USER_4K, -ERANGE, 0, 0, 3 },
	{ "page outside RAM", 0, setup_leaf_outside_ram, GVA_USER_4K, -ERANGE, 0, 0, 4 },
	{ "2M PDE with reserved bit 13", 0, setup_2m_reserved, GVA_KERN_2M, -EFAULT, 0, 0, 3 },
	{ "1G PDPTE with reserved bit 20", 0, setup_1g_reserved, GVA_KERN_1G, -EFAULT, 0, 0, 2 },
	{ "PS in PML4E is reserved", 0, setup_ps_in_pml4, GVA_USER_4K, -EFAULT, 0, 0, 1 },
	{ "paging off", 0, setup_no_paging, GVA_USER_4K, -ENOTSUP, 0, 0, 0 },
	{ "not long mode", 0, setup_no_lma, GVA_USER_4K, -ENOTSUP, 0, 0, 0 },
	{ "self-referencing PML4E terminates", 0, setup_loop, GVA_LOOP, 0, UINT64_MAX, SZ_4K, 4 },
};

static int run_pgwalk_row(const struct pgwalk_row *row)
{
	struct pgwalk_trace trace = { .levels = 99 };
	struct fakemem fm;
	uint64_t gpa = 0xdead, page_size = 0;
	int err, ret = TEST_FAIL;

	if (fakemem_init(&fm, row->la57))
		return TEST_FAIL;
	if (row->setup(&fm)) {
		fprintf(stderr, "%s: setup failed\n", row->name);
		goto out;
	}
	err = gi_gva_to_gpa(&fm.mem, &fm.pg, row->gva, &gpa, &page_size, &trace);
	if (err != row->err) {
		fprintf(stderr, "%s: err %d, expected %d\n", row->name, err, row->err);
		goto out;
	}
	if (trace.levels != row->levels) {
		fprintf(stderr, "%s: trace has %u levels, expected %u\n", row->name, trace.levels,
			row->levels);
		goto out;
	}
	if (!err) {
		uint64_t want = row->gpa == UINT64_MAX ? (fm.pg.cr3 & ~0xfffull) + 0x10 : row->gpa;

		if (gpa != want || page_size != row->page_size) {
			fprintf(stderr, "%s: gpa 0x%llx size 0x%llx, expected 0x%llx size 0x%llx\n",
				row->name, (unsigned long long)gpa, (unsigned long long)page_size,
				(unsigned long long)want, (unsigned long long)row->page_size);
			goto out;
		}
		/* The first trace entry is the top-level entry, inside the CR3 table. */
		if ((trace.entry_gpa[0] & ~0xfffull) != (fm.pg.cr3 & 0x000ffffffffff000ull)) {
			fprintf(stderr, "%s: trace[0] gpa 0x%llx not in CR3 table\n", row->name,
				(unsigned long long)trace.entry_gpa[0]);
			goto out;
		}
	}
	ret = TEST_OK;
out:
	fakemem_fini(&fm);
	return ret;
}

static int test_pgwalk_table(void)
{
	int ret = TEST_OK;

	for (size_t i = 0; i < ARRAY_SIZE(pgwalk_rows); i++)
		if (run_pgwalk_row(&pgwalk_rows[i]) != TEST_OK)
			ret = TEST_FAIL;
	return ret;
}

static int test_pgwalk_args(void)
{
	struct fakemem fm;
	uint64_t gpa;

	if (fakemem_init(&fm, 0))
		return TEST_FAIL;
	ASSERT_EQ_INT(gi_gva_to_gpa(NULL, &fm.pg, 0, &gpa, NULL, NULL), -EINVAL);
	ASSERT_EQ_INT(gi_gva_to_gpa(&fm.mem, NULL, 0, &gpa, NULL, NULL), -EINVAL);
	ASSERT_EQ_INT(gi_gva_to_gpa(&fm.mem, &fm.pg, 0, NULL, NULL, NULL), -EINVAL);
	fm.pg.maxphyaddr = 60;
	ASSERT_EQ_INT(gi_gva_to_gpa(&fm.mem, &fm.pg, 0, &gpa, NULL, NULL), -EINVAL);
	fakemem_fini(&fm);
	return TEST_OK;
}

static int test_read_gva_cross_page(void)
{
	const uint64_t gva = 0x400000;
	uint8_t buf[32], want[32];
	struct fakemem fm;
	int ret = TEST_FAIL;

	if (fakemem_init(&fm, 0))
		return TEST_FAIL;
	/* Two virtually adjacent pages on physically distant frames. */
	if (fakemem_map(&fm, gva, 0x200000, SZ_4K, 0) ||
	    fakemem_map(&fm, gva + SZ_4K, 0x380000, SZ_4K, 0))
		goto out;
	for (int i = 0; i < 32; i++)
		want[i] = (uint8_t)(0xa0 + i);
	fakemem_wbytes(&fm, 0x200000 + 4096 - 16, want, 16);
	fakemem_wbytes(&fm, 0x380000, want + 16, 16);

	if (gi_read_gva(&fm.mem, &fm.pg, gva + 4096 - 16, buf, sizeof(buf)) != 0 ||
	    memcmp(buf, want, sizeof(buf)) != 0) {
		fprintf(stderr, "cross-page read returned wrong bytes\n");
		goto out;
	}
	/* Into an unmapped third page: the failing page's error. */
	if (gi_read_gva(&fm.mem, &fm.pg, gva + 2 * SZ_4K - 8, buf, 16) != -EFAULT)
		goto out;
	/* Wrapping around the address space. */
	if (gi_read_gva(&fm.mem, &fm.pg, UINT64_MAX - 3, buf, 8) != -ERANGE)
		goto out;
	/* Zero length reads nothing and succeeds. */
	if (gi_read_gva(&fm.mem, &fm.pg, 0x1234, NULL, 0) != 0)
		goto out;
	ret = TEST_OK;
out:
	fakemem_fini(&fm);
	return ret;
}

static int test_read_gva_large_pages(void)
{
	struct fakemem fm;
	uint64_t v = 0;
	int ret = TEST_FAIL;

	if (fakemem_init(&fm, 0))
		return TEST_FAIL;
	/* Two adjacent 2 MiB pages: a read across the 2 MiB boundary. */
	if (fakemem_map(&fm, GVA_KERN_2M, 0x400000, SZ_2M, 0) ||
	    fakemem_map(&fm, GVA_KERN_2M + SZ_2M, 0x200000, SZ_2M, 0))
		goto out;
	fakemem_w32(&fm, 0x400000 + SZ_2M - 4, 0x11223344);
	fakemem_w32(&fm, 0x200000, 0x55667788);
	if (gi_read_gva(&fm.mem, &fm.pg, GVA_KERN_2M + SZ_2M - 4, &v, 8) != 0 ||
	    v != 0x5566778811223344ull) {
		fprintf(stderr, "2M cross read: 0x%llx\n", (unsigned long long)v);
		goto out;
	}
	ret = TEST_OK;
out:
	fakemem_fini(&fm);
	return ret;
}

/* The translation cache answers repeated translations, and forgets them when invalidated. */
static int test_cache(void)
{
	const uint64_t gva = 0x400000;
	struct pgwalk_cache *cache = calloc(1, sizeof(*cache));
	struct pgwalk_trace trace;
	struct fakemem fm;
	uint64_t gpa = 0;
	int ret = TEST_FAIL;

	if (!cache || fakemem_init(&fm, 0))
		goto out_free;
	if (fakemem_map(&fm, gva, 0x200000, SZ_4K, 0))
		goto out;
	fm.pg.cache = cache;
	/* epoch 0: the cache is off until the first invalidation */
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, gva + 8, &gpa, NULL, NULL) || cache->misses)
		goto out;
	pgwalk_cache_invalidate(cache);
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, gva + 8, &gpa, NULL, NULL) || gpa != 0x200008 ||
	    cache->misses != 1 || cache->hits != 0)
		goto out;
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, gva + 0x10, &gpa, NULL, NULL) || gpa != 0x200010 ||
	    cache->hits != 1)
		goto out;
	/* a walk with a trace bypasses the cache */
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, gva, &gpa, NULL, &trace) || trace.levels != 4 ||
	    cache->hits != 1)
		goto out;
	/* the guest remaps the page: the old translation holds until invalidated */
	if (fakemem_map(&fm, gva, 0x300000, SZ_4K, 0))
		goto out;
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, gva, &gpa, NULL, NULL) || gpa != 0x200000)
		goto out;
	pgwalk_cache_invalidate(cache);
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, gva, &gpa, NULL, NULL) || gpa != 0x300000)
		goto out;
	/* another CR3 never hits an entry of this one */
	{
		uint64_t hits = cache->hits;

		fm.pg.cr3 ^= 0x1000;
		(void)!gi_gva_to_gpa(&fm.mem, &fm.pg, gva, &gpa, NULL, NULL);
		if (cache->hits != hits)
			goto out;
	}
	ret = TEST_OK;
out:
	fakemem_fini(&fm);
out_free:
	free(cache);
	return ret;
}

/*
 * The cache's sets have two ways: a translation of one exit does not evict a kept one of the
 * same set while the other way can take it (with one way per set, every user page that shared a
 * set with a kept direct-map page cost a four-level walk at the next exit), and the next one of
 * that set replaces the exit's translation, never the kept one.
 */
static int test_cache_sets(void)
{
	const uint64_t delta = 0xffff888000000000ull, kgva = delta + 0x40000;
	/* pages 0x40, 0x400, 0x440 and 0x480: one set */
	const uint64_t u1 = 0x400000, u2 = 0x440000, u3 = 0x480000;
	struct pgwalk_cache *cache = calloc(1, sizeof(*cache));
	struct fakemem fm;
	uint64_t gpa = 0;
	int ret = TEST_FAIL;

	if (!cache || fakemem_init(&fm, 0))
		goto out_free;
	if (fakemem_map(&fm, kgva, 0x40000, SZ_4K, 0) || fakemem_map(&fm, u1, 0x200000, SZ_4K, 0) ||
	    fakemem_map(&fm, u2, 0x210000, SZ_4K, 0) || fakemem_map(&fm, u3, 0x220000, SZ_4K, 0))
		goto out;
	fm.pg.cache = cache;
	pgwalk_cache_keep_linear(cache, delta);
	pgwalk_cache_invalidate(cache);
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, kgva, &gpa, NULL, NULL) || gpa != 0x40000)
		goto out;
	/* the next exit: a user page of the same set, then the kept page still answers */
	pgwalk_cache_invalidate(cache);
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, u1 + 8, &gpa, NULL, NULL) || gpa != 0x200008 ||
	    cache->misses != 2)
		goto out;
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, kgva + 16, &gpa, NULL, NULL) || gpa != 0x40010 ||
	    cache->kept_hits != 1 || cache->misses != 2)
		goto out;
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, u1, &gpa, NULL, NULL) || cache->hits != 2)
		goto out;
	/* a second user page of the set replaces the first, not the kept one */
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, u2, &gpa, NULL, NULL) || gpa != 0x210000 ||
	    cache->misses != 3)
		goto out;
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, kgva, &gpa, NULL, NULL) || cache->kept_hits != 2 ||
	    gi_gva_to_gpa(&fm.mem, &fm.pg, u2, &gpa, NULL, NULL) || cache->hits != 4)
		goto out;
	/* the kept page walked again for its permissions (a kept entry never gives them): the
	 * walk replaces its own way, and the exit's page in the other way stays */
	{
		uint8_t acc;

		if (gi_gva_to_gpa_access(&fm.mem, &fm.pg, kgva, &gpa, NULL, &acc) ||
		    gpa != 0x40000 || cache->misses != 4 ||
		    gi_gva_to_gpa(&fm.mem, &fm.pg, u2, &gpa, NULL, NULL) || gpa != 0x210000 ||
		    cache->hits != 5 || cache->misses != 4)
			goto out;
	}
	/* a flush forgets the kept one: two pages of this exit fill the set */
	pgwalk_cache_flush(cache);
	if (gi_gva_to_gpa(&fm.mem, &fm.pg, u2, &gpa, NULL, NULL) ||
	    gi_gva_to_gpa(&fm.mem, &fm.pg, u3, &gpa, NULL, NULL) || cache->misses != 6 ||
	    gi_gva_to_gpa(&fm.mem, &fm.pg, u2, &gpa, NULL, NULL) ||
	    gi_gva_to_gpa(&fm.mem, &fm.pg, u3, &gpa, NULL, NULL) || cache->hits != 7 ||
	    gpa != 0x220000)
		goto out;
	ret = TEST_OK;
out:
	fakemem_fini(&fm);
out_free:
	free(cache);
	return ret;
}

/*
 * Page-table isolation: a PGD pair as Linux allocates it (kernel PGD at an 8 KiB-aligned GPA,
 * user PGD 4 KiB above). The user PGD maps user memory only; the kernel PGD maps the kernel
 * and (NX, as PTI's kernel copy does) the same user page elsewhere.
 */
static int test_pti_kernel_cr3(void)
{
	const uint64_t ugva = 0x401000, kgva = 0xffffffff81000000ull; /* distinct cache slots */
	struct pgwalk_cache cache = { 0 };
	struct gi_paging pg;
	struct fakemem fm;
	uint64_t kpgd, upgd, gpa;

	ASSERT_EQ_INT(fakemem_init(&fm, 0), 0);
	/* 8 KiB-aligned pair from the table area */
	do
		kpgd = fakemem_alloc_table(&fm);
	while (kpgd & 0x1000);
	upgd = fakemem_alloc_table(&fm);
	ASSERT_EQ_U64(upgd, kpgd + 0x1000);
	fm.pg.cr3 = kpgd;
	ASSERT_EQ_INT(fakemem_map(&fm, kgva, 0x600000, 4096, 0), 0);
	ASSERT_EQ_INT(fakemem_map(&fm, ugva, 0x700000, 4096, FPTE_US | FPTE_NX), 0);
	fm.pg.cr3 = upgd;
	ASSERT_EQ_INT(fakemem_map(&fm, ugva, 0x500000, 4096, FPTE_US), 0);
	pg = fm.pg; /* the user CR3, as a vCPU in user mode has it */

	/* Without the kernel's tables: the kernel is not mapped. */
	ASSERT_EQ_INT(gi_gva_to_gpa(&fm.mem, &pg, kgva, &gpa, NULL, NULL), -EFAULT);
	/* With them: kernel addresses through the kernel PGD, user ones through the user PGD. */
	pg.kernel_cr3 = upgd & ~0x1000ull;
	for (int pass = 0; pass < 2; pass++) { /* the second pass through the cache */
		pg.cache = pass ? &cache : NULL;
		pgwalk_cache_invalidate(&cache);
		for (int rep = 0; rep < 2; rep++) {
			ASSERT_EQ_INT(gi_gva_to_gpa(&fm.mem, &pg, kgva + 8, &gpa, NULL, NULL), 0);
			ASSERT_EQ_U64(gpa, 0x600008);
			ASSERT_EQ_INT(gi_gva_to_gpa(&fm.mem, &pg, ugva + 8, &gpa, NULL, NULL), 0);
			ASSERT_EQ_U64(gpa, 0x500008);
		}
	}
	ASSERT_TRUE(cache.hits >= 2);
	/* On the kernel CR3 (kernel mode): user addresses reach the NX kernel copy, unless the
	 * user half of the pair is given, as for user stack walks. */
	pg = fm.pg;
	pg.cr3 = kpgd;
	ASSERT_EQ_INT(gi_gva_to_gpa(&fm.mem, &pg, ugva, &gpa, NULL, NULL), 0);
	ASSERT_EQ_U64(gpa, 0x700000);
	pg.user_cr3 = kpgd | 0x1000;
	ASSERT_EQ_INT(gi_gva_to_gpa(&fm.mem, &pg, ugva, &gpa, NULL, NULL), 0);
	ASSERT_EQ_U64(gpa, 0x500000);
	ASSERT_EQ_INT(gi_gva_to_gpa(&fm.mem, &pg, kgva, &gpa, NULL, NULL), 0);
	ASSERT_EQ_U64(gpa, 0x600000);
	pg = fm.pg;
	/* PCID bits in CR3 (CR4.PCIDE) are not address bits: bit 11 marks Linux's user PCID. */
	pg.cache = NULL;
	pg.cr4 |= 1ull << 17;
	pg.cr3 = upgd | 0x801;
	pg.kernel_cr3 = kpgd | 0x001;
	ASSERT_EQ_INT(gi_gva_to_gpa(&fm.mem, &pg, kgva, &gpa, NULL, NULL), 0);
	ASSERT_EQ_U64(gpa, 0x600000);
	ASSERT_EQ_INT(gi_gva_to_gpa(&fm.mem, &pg, ugva, &gpa, NULL, NULL), 0);
	ASSERT_EQ_U64(gpa, 0x500000);
	fakemem_fini(&fm);
	return TEST_OK;
}

/* A gmem that counts the reads passing through it; its RAM ends at @ram_end (0: the inner
 * one's end), reads in place (maps) are not counted, as the VMM's cost no guest access. */
struct counted {
	const struct gmem *inner;
	unsigned int reads;
	uint64_t ram_end;
};

static bool counted_in(const struct counted *c, uint64_t gpa, size_t len)
{
	return !c->ram_end || (gpa <= c->ram_end && len <= c->ram_end - gpa);
}

static int counted_read(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	struct counted *c = ctx;

	c->reads++;
	return counted_in(c, gpa, len) ? gmem_read(c->inner, gpa, dst, len) : -ERANGE;
}

static const void *counted_map(void *ctx, uint64_t gpa, size_t len)
{
	struct counted *c = ctx;

	return counted_in(c, gpa, len) ? gmem_map(c->inner, gpa, len) : NULL;
}

/* One exit: the cache invalidated, the reads counted from zero; a translation of @gva. */
static int exit_translate(struct counted *cnt, const struct gmem *mem, struct gi_paging *pg,
			  uint64_t gva, uint64_t *gpa, uint8_t *acc)
{
	pgwalk_cache_invalidate(pg->cache);
	cnt->reads = 0;
	return gi_gva_to_gpa_access(mem, pg, gva, gpa, NULL, acc);
}

/*
 * Remembered walks (struct pgwalk_memo): a user page walked at one exit is answered at the
 * next by reading its four entries again (no walk from the root, no probe of the page: four
 * reads, not five), with the same access bits; an entry that changed (the page remapped, made
 * not present) is seen and the page walked anew; another root, another EFER or a traced walk
 * never uses one.
 */
static int test_memo(void)
{
	const uint64_t u = 0x7fff00001000ull;
	struct pgwalk_cache *cache = calloc(1, sizeof(*cache));
	struct fakemem fm;
	struct counted cnt;
	struct gmem mem;
	struct gi_paging pg;
	struct pgwalk_trace tr;
	uint64_t gpa = 0, pte;
	uint8_t acc = 0;

	ASSERT_TRUE(cache != NULL);
	ASSERT_EQ_INT(fakemem_init(&fm, 0), 0);
	ASSERT_EQ_INT(fakemem_map(&fm, u, 0x200000, SZ_4K, FPTE_US | FPTE_NX), 0);
	cnt = (struct counted){ .inner = &fm.mem };
	mem = (struct gmem){ .read = counted_read, .ctx = &cnt, .map = counted_map };
	pg = fm.pg;
	pg.cache = cache;
	/* the first exit walks: four entries and the probe of the page */
	ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, u + 8, &gpa, &acc), 0);
	ASSERT_EQ_U64(gpa, 0x200008);
	ASSERT_EQ_INT(cnt.reads, 5);
	ASSERT_EQ_U64(cache->memo_hits, 0);
	/* the next: the four entries only, the same translation and access bits */
	ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, u + 16, &gpa, &acc), 0);
	ASSERT_EQ_U64(gpa, 0x200010);
	ASSERT_EQ_INT(acc, PGWALK_ACC_USER | PGWALK_ACC_NX);
	ASSERT_EQ_INT(cnt.reads, 4);
	ASSERT_EQ_U64(cache->memo_hits, 1);
	/* within the exit, the translation cache answers (no read) */
	cnt.reads = 0;
	ASSERT_EQ_INT(gi_gva_to_gpa(&mem, &pg, u, &gpa, NULL, NULL), 0);
	ASSERT_EQ_INT(cnt.reads, 0);
	/* the page remapped: the changed leaf is seen, the page walked anew */
	pte = fakemem_entry_gpa(&fm, u, 1);
	ASSERT_TRUE(pte != 0);
	fakemem_w64(&fm, pte, 0x300000 | FPTE_P | FPTE_RW | FPTE_US);
	ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, u, &gpa, &acc), 0);
	ASSERT_EQ_U64(gpa, 0x300000);
	ASSERT_EQ_INT(acc, PGWALK_ACC_USER);
	ASSERT_EQ_U64(cache->memo_stale, 1);
	/* the entries up to the changed one are not read twice: still one read per level */
	ASSERT_EQ_INT(cnt.reads, 4 + 1);
	ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, u, &gpa, &acc), 0);
	ASSERT_EQ_U64(gpa, 0x300000);
	ASSERT_EQ_U64(cache->memo_hits, 2);
	/* a middle level changed (the PMD entry made not present): the walk fails, as it must,
	 * and the stale walk is forgotten (the next exit does not compare it again) */
	{
		uint64_t pmd = fakemem_entry_gpa(&fm, u, 2), v = fakemem_r64(&fm, pmd);

		fakemem_w64(&fm, pmd, v & ~FPTE_P);
		ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, u, &gpa, &acc), -EFAULT);
		ASSERT_EQ_U64(cache->memo_stale, 2);
		ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, u, &gpa, &acc), -EFAULT);
		ASSERT_EQ_U64(cache->memo_stale, 2);
		fakemem_w64(&fm, pmd, v);
	}
	ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, u, &gpa, &acc), 0);
	ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, u, &gpa, &acc), 0);
	ASSERT_EQ_U64(cache->memo_hits, 3);
	/* another EFER (NXE off): not remembered under it, walked (the PTE now has no XD) */
	pg.efer &= ~(1ull << 11);
	ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, u, &gpa, &acc), 0);
	ASSERT_EQ_U64(cache->memo_hits, 3);
	ASSERT_EQ_INT(cnt.reads, 5);
	pg.efer = fm.pg.efer;
	/* another root: its own walk */
	pg.cr3 = fakemem_alloc_table(&fm);
	ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, u, &gpa, &acc), -EFAULT);
	ASSERT_EQ_U64(cache->memo_hits, 3);
	pg.cr3 = fm.pg.cr3;
	/* a traced walk reads every level itself */
	pgwalk_cache_invalidate(cache);
	ASSERT_EQ_INT(gi_gva_to_gpa(&mem, &pg, u, &gpa, NULL, &tr), 0);
	ASSERT_EQ_INT(tr.levels, 4);
	ASSERT_EQ_U64(cache->memo_hits, 3);
	/* three pages of one set (PGWALK_MEMO_SETS pages apart): two are remembered together, a
	 * third replaces the one that answered least recently */
	{
		const uint64_t a = u + 0x1000ull * PGWALK_MEMO_SETS, b = a + 0x1000ull * PGWALK_MEMO_SETS,
			       c = b + 0x1000ull * PGWALK_MEMO_SETS;
		uint64_t hits;

		ASSERT_EQ_INT(fakemem_map(&fm, a, 0x400000, SZ_4K, FPTE_US), 0);
		ASSERT_EQ_INT(fakemem_map(&fm, b, 0x401000, SZ_4K, FPTE_US), 0);
		ASSERT_EQ_INT(fakemem_map(&fm, c, 0x402000, SZ_4K, FPTE_US), 0);
		ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, a, &gpa, &acc), 0);
		ASSERT_EQ_INT(gi_gva_to_gpa_access(&mem, &pg, b, &gpa, NULL, &acc), 0);
		hits = cache->memo_hits;
		ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, a, &gpa, &acc), 0);
		ASSERT_EQ_INT(gi_gva_to_gpa_access(&mem, &pg, b, &gpa, NULL, &acc), 0);
		ASSERT_EQ_U64(gpa, 0x401000);
		ASSERT_EQ_U64(cache->memo_hits, hits + 2);
		ASSERT_EQ_INT(cnt.reads, 8);
		/* a answers again, c is walked: b (answered one exit earlier) makes room */
		ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, a, &gpa, &acc), 0);
		ASSERT_EQ_INT(gi_gva_to_gpa_access(&mem, &pg, c, &gpa, NULL, &acc), 0);
		ASSERT_EQ_U64(gpa, 0x402000);
		ASSERT_EQ_U64(cache->memo_hits, hits + 3);
		ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, c, &gpa, &acc), 0);
		ASSERT_EQ_INT(gi_gva_to_gpa_access(&mem, &pg, a, &gpa, NULL, &acc), 0);
		ASSERT_EQ_U64(cache->memo_hits, hits + 5);
		cnt.reads = 0;
		ASSERT_EQ_INT(gi_gva_to_gpa_access(&mem, &pg, b, &gpa, NULL, &acc), 0);
		ASSERT_EQ_U64(gpa, 0x401000);
		ASSERT_EQ_INT(cnt.reads, 5); /* forgotten: walked */
	}
	/* a 2 MiB page: the remembered walk gives each 4 KiB page's offset in it */
	{
		const uint64_t big = 0x7ffe00000000ull;

		ASSERT_EQ_INT(fakemem_map(&fm, big, 0x600000, SZ_2M, FPTE_US), 0);
		ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, big + 0x12345, &gpa, &acc), 0);
		ASSERT_EQ_U64(gpa, 0x612345);
		ASSERT_EQ_INT(cnt.reads, 3 + 1);
		ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, big + 0x12ff8, &gpa, &acc), 0);
		ASSERT_EQ_U64(gpa, 0x612ff8);
		ASSERT_EQ_INT(cnt.reads, 3);
	}
	/* RAM that ends inside the result page: not remembered (the walk's probe of one byte
	 * cannot answer for the page), so a byte past the end is refused as a walk refuses it */
	{
		const uint64_t e = 0x7fff00100000ull;

		ASSERT_EQ_INT(fakemem_map(&fm, e, 0x700000, SZ_4K, FPTE_US), 0);
		cnt.ram_end = 0x700800;
		ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, e + 0x10, &gpa, &acc), 0);
		ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, e + 0x900, &gpa, &acc), -ERANGE);
		ASSERT_EQ_INT(exit_translate(&cnt, &mem, &pg, e + 0x10, &gpa, &acc), 0);
		ASSERT_EQ_INT(cnt.reads, 5);
		cnt.ram_end = 0;
	}
	fakemem_fini(&fm);
	free(cache);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "pgwalk table", test_pgwalk_table },
	{ "page-table isolation: kernel addresses through the kernel CR3", test_pti_kernel_cr3 },
	{ "pgwalk bad arguments", test_pgwalk_args },
	{ "gi_read_gva across 4K pages", test_read_gva_cross_page },
	{ "gi_read_gva across 2M pages", test_read_gva_large_pages },
	{ "translation cache", test_cache },
	{ "pgwalk: two ways per set: a kept translation outlives the exits' pages", test_cache_sets },
	{ "pgwalk: a walk remembered across exits answers once its entries are read again", test_memo },
};

TEST_MAIN(tests)
