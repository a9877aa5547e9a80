/* SPDX-License-Identifier: MIT */
/* A fake guest for guestinfo unit tests: RAM in a byte array, page tables built by hand. */
#ifndef HVPROF_TESTS_FAKEMEM_H
#define HVPROF_TESTS_FAKEMEM_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include <hvprof/gmem.h>
#include <hvprof/guestinfo.h>

#define FAKE_RAM_SIZE (8u << 20)

#define FPTE_P 0x1ull
#define FPTE_RW 0x2ull
#define FPTE_US 0x4ull
#define FPTE_PS 0x80ull
#define FPTE_NX (1ull << 63)

/**
 * struct fakemem - guest RAM [0, FAKE_RAM_SIZE) and a bump allocator for page-table pages.
 * @next_table_gpa: next free 4 KiB page for tables (tables live from 1 MiB upwards).
 */
struct fakemem {
	uint8_t *ram;
	uint64_t next_table_gpa;
	struct gmem mem;
	struct gi_paging pg;
	int la57;
};

/* fakemem_init - zeroed RAM, an empty top-level table at CR3, long mode (4- or 5-level). */
int fakemem_init(struct fakemem *fm, int la57);
void fakemem_fini(struct fakemem *fm);

/* fakemem_alloc_table - a zeroed 4 KiB page from the table area; returns its GPA. */
uint64_t fakemem_alloc_table(struct fakemem *fm);

/* fakemem_map - map @gva -> @gpa with a page of @size (4 KiB, 2 MiB, 1 GiB); @flags extra bits
 * for the leaf (P|RW always set). Intermediate tables get P|RW|US. Returns 0 or -1. */
int fakemem_map(struct fakemem *fm, uint64_t gva, uint64_t gpa, uint64_t size, uint64_t flags);

/* fakemem_entry_gpa - GPA of the entry for @gva at @level (5..1), or 0 when a table is missing. */
uint64_t fakemem_entry_gpa(struct fakemem *fm, uint64_t gva, unsigned int level);

void fakemem_w64(struct fakemem *fm, uint64_t gpa, uint64_t v);
uint64_t fakemem_r64(struct fakemem *fm, uint64_t gpa);
void fakemem_w32(struct fakemem *fm, uint64_t gpa, uint32_t v);
void fakemem_wbytes(struct fakemem *fm, uint64_t gpa, const void *src, size_t len);

/*
 * struct counted_gmem - a gmem over @inner that counts what passes through it, for tests of how
 * many guest reads a path makes: @reads (its read calls), @pages (its map_page calls);
 * @no_pages: map_page finds no whole page of RAM (returns NULL), as at the end of a region.
 * counted_gmem_of - that gmem: read always; map (walks remembered, as the VMM's) and map_page
 * (translations read in place) when asked. Reads in place through map_page are not counted.
 */
struct counted_gmem {
	const struct gmem *inner;
	unsigned int reads, pages;
	bool no_pages;
};

struct gmem counted_gmem_of(struct counted_gmem *c, bool map, bool map_page);

#endif /* HVPROF_TESTS_FAKEMEM_H */
