// SPDX-License-Identifier: MIT
// A fake guest for guestinfo unit tests: RAM in a byte array, page tables built by hand.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fakemem.h"

#define FAKE_TABLE_AREA 0x100000ull
#define FAKE_ADDR_MASK 0x000ffffffffff000ull

static int fakemem_read(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	struct fakemem *fm = ctx;

	if (gpa >= FAKE_RAM_SIZE || len > FAKE_RAM_SIZE - gpa)
		return -ERANGE;
	memcpy(dst, fm->ram + gpa, len);
	return 0;
}

static const void *fakemem_hva(void *ctx, uint64_t gpa, size_t len)
{
	struct fakemem *fm = ctx;

	if (gpa >= FAKE_RAM_SIZE || len > FAKE_RAM_SIZE - gpa)
		return NULL;
	return fm->ram + gpa;
}

int fakemem_init(struct fakemem *fm, int la57)
{
	memset(fm, 0, sizeof(*fm));
	/* page-aligned, as the VMM's guest RAM: a GPA's offset in its page and 64-byte line is
	 * the HVA's (calloc's 8 MiB come from mmap 16 bytes into a page, and every guest line
	 * straddled two host lines: bench-sample's counts and the census's disagreed) */
	fm->ram = aligned_alloc(4096, FAKE_RAM_SIZE);
	if (!fm->ram)
		return -1;
	memset(fm->ram, 0, FAKE_RAM_SIZE);
	fm->next_table_gpa = FAKE_TABLE_AREA;
	fm->mem.read = fakemem_read;
	fm->mem.map = fakemem_hva; /* as the VMM's: reads in place (tests may clear it) */
	fm->mem.map_page = fakemem_hva; /* and translations' HVAs kept (struct pgwalk_cache) */
	fm->mem.ctx = fm;
	fm->la57 = la57;
	fm->pg.cr0 = (1ull << 31) | 1;          /* PG | PE */
	fm->pg.cr4 = (1ull << 5) | (la57 ? 1ull << 12 : 0); /* PAE, LA57 */
	fm->pg.efer = (1ull << 8) | (1ull << 10) | (1ull << 11); /* LME | LMA | NXE */
	fm->pg.maxphyaddr = 46;
	fm->pg.cr3 = fakemem_alloc_table(fm);
	return 0;
}

void fakemem_fini(struct fakemem *fm)
{
	free(fm->ram);
	fm->ram = NULL;
}

uint64_t fakemem_alloc_table(struct fakemem *fm)
{
	uint64_t gpa = fm->next_table_gpa;

	fm->next_table_gpa += 4096;
	memset(fm->ram + gpa, 0, 4096);
	return gpa;
}

void fakemem_w64(struct fakemem *fm, uint64_t gpa, uint64_t v)
{
	memcpy(fm->ram + gpa, &v, 8);
}

uint64_t fakemem_r64(struct fakemem *fm, uint64_t gpa)
{
	uint64_t v;

	memcpy(&v, fm->ram + gpa, 8);
	return v;
}

void fakemem_w32(struct fakemem *fm, uint64_t gpa, uint32_t v)
{
	memcpy(fm->ram + gpa, &v, 4);
}

void fakemem_wbytes(struct fakemem *fm, uint64_t gpa, const void *src, size_t len)
{
	memcpy(fm->ram + gpa, src, len);
}

static unsigned int fakemem_levels(const struct fakemem *fm)
{
	return fm->la57 ? 5 : 4;
}

uint64_t fakemem_entry_gpa(struct fakemem *fm, uint64_t gva, unsigned int level)
{
	uint64_t table = fm->pg.cr3 & (FAKE_RAM_SIZE - 1) & ~0xfffull;

	for (unsigned int l = fakemem_levels(fm); l >= 1; l--) {
		uint64_t e_gpa = table + ((gva >> (12 + 9 * (l - 1))) & 0x1ff) * 8;
		uint64_t e;

		if (l == level)
			return e_gpa;
		e = fakemem_r64(fm, e_gpa);
		if (!(e & FPTE_P) || (e & FPTE_PS))
			return 0;
		table = e & FAKE_ADDR_MASK;
	}
	return 0;
}

int fakemem_map(struct fakemem *fm, uint64_t gva, uint64_t gpa, uint64_t size, uint64_t flags)
{
	unsigned int leaf = size == (1ull << 30) ? 3 : size == (1ull << 21) ? 2 : 1;
	uint64_t table = fm->pg.cr3 & (FAKE_RAM_SIZE - 1) & ~0xfffull;

	for (unsigned int l = fakemem_levels(fm); l > leaf; l--) {
		uint64_t e_gpa = table + ((gva >> (12 + 9 * (l - 1))) & 0x1ff) * 8;
		uint64_t e = fakemem_r64(fm, e_gpa);

		if (!(e & FPTE_P)) {
			e = fakemem_alloc_table(fm) | FPTE_P | FPTE_RW | FPTE_US;
			fakemem_w64(fm, e_gpa, e);
		} else if (e & FPTE_PS) {
			return -1;
		}
		table = e & FAKE_ADDR_MASK;
	}
	fakemem_w64(fm, table + ((gva >> (12 + 9 * (leaf - 1))) & 0x1ff) * 8,
		    (gpa & FAKE_ADDR_MASK) | FPTE_P | FPTE_RW | (leaf > 1 ? FPTE_PS : 0) | flags);
	return 0;
}

static int counted_read(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	struct counted_gmem *c = ctx;

	c->reads++;
	return gmem_read(c->inner, gpa, dst, len);
}

static const void *counted_map(void *ctx, uint64_t gpa, size_t len)
{
	struct counted_gmem *c = ctx;

	return gmem_map(c->inner, gpa, len);
}

static const void *counted_map_page(void *ctx, uint64_t gpa, size_t len)
{
	struct counted_gmem *c = ctx;

	c->pages++;
	return c->no_pages ? NULL : gmem_map(c->inner, gpa, len);
}

struct gmem counted_gmem_of(struct counted_gmem *c, bool map, bool map_page)
{
	return (struct gmem){ .read = counted_read, .map = map ? counted_map : NULL,
			      .map_page = map_page ? counted_map_page : NULL, .ctx = c };
}
