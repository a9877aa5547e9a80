/* SPDX-License-Identifier: MIT */
/*
 * pgwalk: x86-64 guest page walks (GVA -> GPA through the guest's own page tables, SDM vol. 3A,
 * chapter 4) and the shape of addresses. Architecture only: no Linux knowledge.
 * Part of guestinfo (<hvprof/guestinfo.h> includes it); errors as described there.
 */
#ifndef HVPROF_PGWALK_H
#define HVPROF_PGWALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>
#include <hvprof/gmem.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- page walks (pgwalk.c) */

#define PGWALK_MAX_LEVELS 5

/**
 * struct gi_paging - the vCPU state that defines GVA->GPA translation.
 * @cr0, @cr3, @cr4, @efer: control registers (CR3 may carry PCID bits: masked when CR4.PCIDE).
 * @maxphyaddr: physical address width in bits (CPUID 0x80000008 EAX[7:0]); 0 means 52.
 * @kernel_cr3/@user_cr3: optional: the page tables for upper-half (kernel) and lower-half
 *   (user) addresses when they are not @cr3's. Under page-table isolation a user-mode CR3 maps
 *   little of the kernel, and a kernel-mode CR3 maps user memory NX (so user code does not
 *   look executable there): the caller gives the other half of the pair. 0: @cr3.
 */
struct pgwalk_cache;

struct gi_paging {
	uint64_t cr0;
	uint64_t cr3;
	uint64_t cr4;
	uint64_t efer;
	unsigned int maxphyaddr;
	uint64_t kernel_cr3;
	uint64_t user_cr3;
	/* optional: translations remembered until pgwalk_cache_invalidate(); NULL: none. The
	 * cache belongs to one thread (one vCPU): never share a gi_paging that points to it. */
	struct pgwalk_cache *cache;
};

#define PGWALK_CACHE_SETS 64 /* sets, indexed by GVA page number modulo this */
#define PGWALK_CACHE_WAYS 2  /* translations per set */

/* One translation of a struct pgwalk_cache (64 bytes; a set is 128 bytes). */
struct pgwalk_cache_slot {
	uint64_t epoch; /* valid when equal to the cache's epoch (which starts at 1) */
	uint64_t gen;   /* or, when @kept, when equal to the cache's gen */
	uint64_t cr3;       /* the root table's GPA (CR3 bits 11:0 cleared) */
	uint64_t cr4;
	uint64_t gva_page;  /* GVA & ~0xfff */
	uint64_t gpa_page;  /* GPA & ~0xfff */
	/* the HVA of the 4 KiB guest page at @gpa_page, from the map_page of the gmem of
	 * struct pgwalk_cache's @hva_ctx; NULL: not asked yet, or not all guest RAM */
	const uint8_t *hva_page;
	uint32_t page_size; /* bytes of the page that maps it: 4 KiB, 2 MiB or 1 GiB */
	bool kept;
	uint8_t access; /* PGWALK_ACC_* of the walk that filled it */
};

/* Walks remembered across epochs (struct pgwalk_memo): PGWALK_MEMO_SETS sets, indexed by
 * root and GVA page, of PGWALK_MEMO_WAYS (a stack page and a text page of one process may share
 * a set). */
#define PGWALK_MEMO_SETS 32
#define PGWALK_MEMO_WAYS 2

/*
 * A walk as it went: the entries it read (GPA and value, root first) and what it gave, in the
 * set of its root and GVA page (the newest walk of a page; a new page replaces the way that
 * answered least recently). Kept across epochs, since user pages (a thread's stack, its
 * program's text) are walked again at every exit: a remembered walk answers only after every
 * entry, read anew, still has its value. That is the walk itself, exactly: a walk is a function
 * of CR3, CR4, EFER, MAXPHYADDR, the entries it reads (each entry's address given by the one
 * before) and the extent of guest RAM, so equal entries walk alike, to the same page with the
 * same access bits; and a walk is remembered only when all of its 4 KiB result page is guest
 * RAM (gmem's map says so without a read; without a map nothing is remembered), so that the
 * probe of one byte a walk makes is not needed for any other byte of the page. With the
 * addresses known the reads need not wait for each other: the guest's page-table lines, cold
 * after the guest ran, are fetched together rather than one after another. An entry that
 * changed forgets the walk (@memo_stale), and the walk that follows takes the entries already
 * read up to it: each level is still read once per translation.
 * @cr3: the root's GPA (CR3 bits 11:0 cleared); @gva_page: GVA & ~0xfff; @gpa_page: the GPA of
 * the page that maps it (of @page_size bytes: 4 KiB, 2 MiB or 1 GiB); @used: the epoch it last
 * answered in or was made; @levels: entries read (0: empty); @access: PGWALK_ACC_*.
 */
struct pgwalk_memo {
	uint64_t cr3, cr4, efer, gva_page;
	uint64_t gpa_page, page_size;
	uint64_t entry_gpa[PGWALK_MAX_LEVELS], entry[PGWALK_MAX_LEVELS];
	unsigned int maxphyaddr;
	uint64_t used;
	uint8_t levels;
	uint8_t access;
};

/**
 * struct pgwalk_cache - GVA->GPA translations of 4 KiB slices, two-way set-associative (a
 * translation of one exit does not evict a kept one of the same set, nor the reverse, unless
 * the set is full), keyed by the root
 * table (CR3 without its PCID bits 11:0; not for kept entries, below) and CR4, valid for one
 * epoch. Callers invalidate it
 * whenever the guest may have changed its page tables (hvprof: at every exit that reads guest
 * memory, a sample or a return trap, since the vCPU is stopped for the whole exit). Zero-initialise before use.
 *
 * Kept translations: after pgwalk_cache_keep_linear(@c, delta), a translation of the upper
 * half with gva - gpa == delta outlives pgwalk_cache_invalidate() (until
 * pgwalk_cache_flush() or another delta). The caller names a range whose translation is fixed by
 * construction: for Linux, the direct map (delta = page_offset_base). Architecture alone cannot
 * tell: a vmalloc page (a VMAP_STACK task stack) can be unmapped and its address given to
 * another page, so only the delta decides, never the half or the page size. A kept entry
 * answers under any root table: every process's page tables share the kernel half (Linux copies
 * init_mm's kernel PGD entries into each new PGD: pgd_alloc, and with PTI the kernel half of the
 * pair), so the direct map translates alike whichever process is current; a guest whose tables
 * differ there gets the page the direct map names, never more.
 *
 * Reads in place: when the gmem gi_read_gva reads through has map_page, a translation that
 * answers it keeps the HVA of its 4 KiB guest page (map_page's, asked once: NULL unless the
 * whole page is guest RAM), and this and later hits copy their bytes from there, never past
 * that page, instead of calling the gmem's read: the bounds check of each such read is the one
 * made for the page. The HVAs are those of one gmem (@hva_ctx): a read through a gmem of
 * another ctx drops them all first; a gmem without map_page reads through its read.
 * @hits/@misses: counters; @kept_hits: hits on a translation kept from an earlier epoch;
 * @memo: walks remembered across epochs and checked before use (struct pgwalk_memo).
 */
struct pgwalk_cache {
	uint64_t epoch;
	uint64_t gen;        /* kept entries are valid while their gen is this */
	uint64_t keep_delta; /* gva - gpa of the translations kept; with @keep */
	bool keep;
	uint64_t hits;
	uint64_t misses;
	uint64_t kept_hits;
	uint64_t memo_hits;  /* misses (not in this epoch's translations) answered by a
			      * remembered walk whose entries held (struct pgwalk_memo) */
	uint64_t memo_stale; /* ... whose entries had changed: walked again */
	uint64_t hva_reads;  /* gi_read_gva reads served in place through a slot's HVA */
	const void *hva_ctx; /* the gmem ctx whose map_page gave the slots' HVAs */
	struct pgwalk_cache_slot slot[PGWALK_CACHE_SETS][PGWALK_CACHE_WAYS];
	struct pgwalk_memo memo[PGWALK_MEMO_SETS][PGWALK_MEMO_WAYS];
};

/* What every level of a walk allowed (SDM vol. 3A, 4.6): gi_gva_to_gpa_access. */
#define PGWALK_ACC_USER 0x1 /* U/S set at every level: user-mode accesses allowed */
#define PGWALK_ACC_NX 0x2   /* XD set at some level (and EFER.NXE): not executable */

/** pgwalk_cache_invalidate - forget every translation of @c but the kept ones (O(1)). */
static inline void pgwalk_cache_invalidate(struct pgwalk_cache *c)
{
	c->epoch++;
}

/** pgwalk_cache_flush - forget every translation of @c, kept ones too (O(1)). */
static inline void pgwalk_cache_flush(struct pgwalk_cache *c)
{
	c->epoch++;
	c->gen++;
}

/**
 * pgwalk_cache_keep_linear - keep, across pgwalk_cache_invalidate(), the upper-half translations
 * of @c with gva - gpa == @delta (see struct pgwalk_cache); a new @delta forgets the kept ones.
 */
static inline void pgwalk_cache_keep_linear(struct pgwalk_cache *c, uint64_t delta)
{
	if (c->keep && c->keep_delta == delta)
		return;
	pgwalk_cache_flush(c);
	c->keep_delta = delta;
	c->keep = true;
}

/**
 * struct pgwalk_trace - every level a walk visited (for tests and debug output).
 * @levels: entries filled; @entry_gpa[i]: GPA of the entry read at step i; @entry[i]: its value.
 */
struct pgwalk_trace {
	unsigned int levels;
	uint64_t entry_gpa[PGWALK_MAX_LEVELS];
	uint64_t entry[PGWALK_MAX_LEVELS];
};

/**
 * gi_gva_to_gpa - translate @gva through the page tables of @pg (4-level, or 5-level when
 * CR4.LA57; 1 GiB and 2 MiB pages; SDM vol. 3A, 4.5).
 * @page_size: out, optional: bytes of the page that maps @gva (4096, 2 MiB, 1 GiB).
 * @trace: out, optional (a walk with a trace bypasses @pg->cache).
 * Return: 0 and *@gpa; -EINVAL non-canonical @gva (48-bit, or 57-bit with CR4.LA57), bad
 * argument or @pg->maxphyaddr outside 32..52; -EFAULT an entry is not present or has reserved
 * bits set (PS in a PML5E/PML4E, bits 20:13 of a 2 MiB PDE or 29:13 of a 1 GiB PDPTE, XD
 * without EFER.NXE; XD itself only forbids execution and does not stop the walk); -ERANGE a
 * table or the result lies outside guest RAM (by @mem), or CR3 or an entry has address bits
 * at or above MAXPHYADDR; -ENOTSUP paging off or not in long mode (CR0.PG, EFER.LMA, CR4.PAE).
 * Every walk reads at most PGWALK_MAX_LEVELS entries, so a looping table terminates.
 * Thread-safety: reentrant; only reads through @mem.
 */
int gi_gva_to_gpa(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva, uint64_t *gpa,
		  uint64_t *page_size, struct pgwalk_trace *trace) __must_check;

/**
 * gi_gva_to_gpa_access - gi_gva_to_gpa, and in *@access the PGWALK_ACC_* bits of the
 * translation (U/S at every level; XD at some level, counted only with EFER.NXE). Answered by
 * @pg->cache when it holds a translation of this epoch (the walk that filled it stored them),
 * or by a walk remembered from an earlier one whose entries all still hold (struct
 * pgwalk_memo: they carry the bits); a translation kept from an earlier epoch (the direct map)
 * is walked again, since only its address is fixed, not its permissions. Return: as
 * gi_gva_to_gpa.
 */
int gi_gva_to_gpa_access(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva,
			 uint64_t *gpa, uint64_t *page_size, uint8_t *access) __must_check;

/**
 * gi_read_gva - copy @len bytes at @gva (may cross pages) into @dst.
 * Return: 0, or an error of gi_gva_to_gpa / the gmem read for the first page that fails.
 */
int gi_read_gva(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva, void *dst,
		size_t len) __must_check;

/**
 * pgwalk_gva_is_canonical - @gva is canonical for the paging mode of @pg: 48 bits, or 57 with
 * CR4.LA57 (SDM vol. 3A, 4.5).
 */
bool pgwalk_gva_is_canonical(const struct gi_paging *pg, uint64_t gva);

/**
 * gi_is_kernel_gva - @gva is a canonical address of the upper (kernel) half for the paging mode
 * of @pg: >= 0xffff800000000000 with 4-level paging, >= 0xff00000000000000 with 5-level paging
 * (where Linux puts its direct map at 0xff11000000000000).
 */
static inline bool gi_is_kernel_gva(const struct gi_paging *pg, uint64_t gva)
{
	return (gva >> 63) && pgwalk_gva_is_canonical(pg, gva);
}

/** gi_is_user_gva - @gva is a canonical address of the lower (user) half for @pg. */
static inline bool gi_is_user_gva(const struct gi_paging *pg, uint64_t gva)
{
	return !(gva >> 63) && pgwalk_gva_is_canonical(pg, gva);
}

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_PGWALK_H */
