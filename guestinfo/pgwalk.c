// SPDX-License-Identifier: MIT
// GVA->GPA translation by walking x86-64 long-mode page tables (4- and 5-level) in guest memory.
#define pr_fmt(fmt) "pgwalk: " fmt

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "pgwalk_internal.h"

/* Control-register and EFER bits (SDM vol. 3A, 2.5 and 2.2.1). */
#define CR0_PG (1ull << 31)
#define CR4_PAE (1ull << 5)
#define CR4_LA57 (1ull << 12)
#define CR4_PCIDE (1ull << 17)
#define EFER_LMA (1ull << 10)
#define EFER_NXE (1ull << 11)

/* Paging-structure entry bits (SDM vol. 3A, 4.5, tables 4-15 .. 4-20). */
#define PTE_P (1ull << 0)
#define PTE_US (1ull << 2)
#define PTE_PS (1ull << 7)
#define PTE_NX (1ull << 63)
/* Bits 51:12 hold the physical address of the next table or of the page. */
#define PTE_ADDR_MASK 0x000ffffffffff000ull

#define PAGE_SHIFT_4K 12
#define PAGE_SIZE_4K (1ull << 12)
#define PAGE_SIZE_2M (1ull << 21)
#define PAGE_SIZE_1G (1ull << 30)

/*
 * Reserved bits of a large-page entry between bit 12 (PAT) and the page frame:
 * bits 20:13 of a 2 MiB PDE, bits 29:13 of a 1 GiB PDPTE.
 */
#define PDE_2M_RSVD 0x00000000001fe000ull
#define PDPTE_1G_RSVD 0x000000003fffe000ull

bool pgwalk_gva_is_canonical(const struct gi_paging *pg, uint64_t gva)
{
	unsigned int va_bits = (pg->cr4 & CR4_LA57) ? 57 : 48;
	/* Bits 63:va_bits-1 must all equal bit va_bits-1. */
	int64_t sext = (int64_t)(gva << (64 - va_bits)) >> (64 - va_bits);

	return (uint64_t)sext == gva;
}

/* MAXPHYADDR as used for masks: 0 (unknown) means the architectural maximum, 52. */
static unsigned int pgwalk_maxphyaddr(const struct gi_paging *pg)
{
	return pg->maxphyaddr ? pg->maxphyaddr : 52;
}

_Static_assert(sizeof(struct pgwalk_cache_slot) == 64, "a translation is one cache line");

/* The set of @c that holds the translations of @gva's page. */
static struct pgwalk_cache_slot *cache_set(struct pgwalk_cache *c, uint64_t gva)
{
	/* SAFETY: the set index is reduced modulo PGWALK_CACHE_SETS. */
	return c->slot[(gva >> 12) % PGWALK_CACHE_SETS];
}

/* A translation of this epoch (walked since the last invalidation)? */
static bool slot_now(const struct pgwalk_cache *c, const struct pgwalk_cache_slot *e)
{
	return e->epoch == c->epoch;
}

/* A kept translation still valid (not flushed since)? */
static bool slot_kept(const struct pgwalk_cache *c, const struct pgwalk_cache_slot *e)
{
	return e->kept && e->gen == c->gen;
}

/* The slot of the translation cache (struct pgwalk_cache) that answers @gva under root @cr3
 * (bits 11:0 clear) and @cr4, counted as a hit, or NULL (a miss). @want_access: the access bits
 * are wanted too (then only a translation of this epoch answers: a kept one's permissions may
 * have changed). */
static inline struct pgwalk_cache_slot *cache_find(struct pgwalk_cache *c, uint64_t cr3,
						   uint64_t cr4, uint64_t gva, bool want_access)
{
	struct pgwalk_cache_slot *set = cache_set(c, gva);

	for (unsigned int w = 0; w < PGWALK_CACHE_WAYS; w++) {
		struct pgwalk_cache_slot *e = &set[w];
		bool now = slot_now(c, e) && e->cr3 == cr3;
		/* kept: the direct map, the same under every process's root (struct pgwalk_cache) */
		bool kept = !want_access && slot_kept(c, e);

		if (!(now || kept) || e->cr4 != cr4 || e->gva_page != (gva & ~0xfffull))
			continue;
		c->hits++;
		if (!now)
			c->kept_hits++;
		return e;
	}
	c->misses++;
	return NULL;
}

/* Where a translation of @gva goes in @set: a way that holds @gva's page already (this exit's,
 * perhaps of another root, or a kept one), else a free one (neither of this epoch nor kept), else @seed: NULL (a seed
 * evicts nothing), else a way of this epoch that is not kept (a kept translation serves every
 * later exit, one of this exit only this one), else the last way. */
static struct pgwalk_cache_slot *cache_victim(const struct pgwalk_cache *c,
					      struct pgwalk_cache_slot *set, uint64_t gva,
					      bool seed)
{
	struct pgwalk_cache_slot *unkept = NULL;

	for (unsigned int w = 0; w < PGWALK_CACHE_WAYS; w++)
		if (set[w].gva_page == (gva & ~0xfffull) && (slot_now(c, &set[w]) ||
							       slot_kept(c, &set[w])))
			return seed ? NULL : &set[w];
	for (unsigned int w = 0; w < PGWALK_CACHE_WAYS; w++) {
		if (!slot_now(c, &set[w]) && !slot_kept(c, &set[w]))
			return &set[w];
		if (!unkept && !slot_kept(c, &set[w]))
			unkept = &set[w];
	}
	if (seed)
		return NULL;
	return unkept ? unkept : &set[PGWALK_CACHE_WAYS - 1];
}

/* The HVA of slot @e's 4 KiB guest page through @mem (which has map_page), kept in @e from its
 * first read in place on (see struct pgwalk_cache): NULL where the page is not all guest RAM.
 * A gmem of another ctx than the one the slots' HVAs came from drops those first. */
static const uint8_t *slot_hva(struct pgwalk_cache *c, struct pgwalk_cache_slot *e,
			       const struct gmem *mem)
{
	if (__builtin_expect(c->hva_ctx != mem->ctx, 0)) {
		for (unsigned int i = 0; i < PGWALK_CACHE_SETS; i++)
			for (unsigned int w = 0; w < PGWALK_CACHE_WAYS; w++)
				c->slot[i][w].hva_page = NULL;
		c->hva_ctx = mem->ctx;
	}
	if (!e->hva_page)
		e->hva_page = mem->map_page(mem->ctx, e->gpa_page, PAGE_SIZE_4K);
	return e->hva_page;
}

static void cache_fill(const struct pgwalk_cache *c, struct pgwalk_cache_slot *e,
		       uint64_t cr3, uint64_t cr4, uint64_t gva, uint64_t gpa, uint64_t size,
		       uint8_t access)
{
	e->hva_page = NULL; /* taken at its first read in place (slot_hva) */
	e->epoch = c->epoch;
	e->gen = c->gen;
	/* kept only where the caller says the translation is fixed: its linear range, upper half */
	e->kept = c->keep && (gva >> 63) &&
		  (gva & ~0xfffull) - (gpa & ~0xfffull) == c->keep_delta;
	e->cr3 = cr3;
	e->cr4 = cr4;
	e->gva_page = gva & ~0xfffull;
	e->gpa_page = gpa & ~0xfffull;
	e->page_size = (uint32_t)size; /* at most 1 GiB */
	e->access = access;
}

static void cache_store(struct pgwalk_cache *c, uint64_t cr3, uint64_t cr4, uint64_t gva,
			uint64_t gpa, uint64_t size, uint8_t access)
{
	cache_fill(c, cache_victim(c, cache_set(c, gva), gva, false), cr3, cr4, gva, gpa, size,
		   access);
}

/* The root table a walk of @gva starts from: each half through its own tables when they differ
 * (PTI, see struct gi_paging). */
static uint64_t walk_cr3(const struct gi_paging *pg, uint64_t gva)
{
	if (gva >> 63)
		return pg->kernel_cr3 ? pg->kernel_cr3 : pg->cr3;
	return pg->user_cr3 ? pg->user_cr3 : pg->cr3;
}

bool pgwalk_cache_seed(const struct gi_paging *pg, uint64_t gva, uint64_t gpa, uint8_t access)
{
	struct pgwalk_cache *c;
	struct pgwalk_cache_slot *e;

	if (!pg || !pg->cache || !pg->cache->epoch || !(gva >> 63) || !(gpa & ~0xfffull))
		return false;
	c = pg->cache;
	/* a set whose ways are all of this exit or kept: not evicted for a seed */
	e = cache_victim(c, cache_set(c, gva), gva, true);
	if (!e)
		return false;
	cache_fill(c, e, walk_cr3(pg, gva) & ~0xfffull, pg->cr4, gva, gpa, 4096,
		   (uint8_t)(access & ~PGWALK_ACC_USER));
	return true;
}

bool pgwalk_cache_peek(const struct gi_paging *pg, uint64_t gva, uint64_t *gpa, uint8_t *access)
{
	struct pgwalk_cache_slot *set;

	if (!pg || !pg->cache || !pg->cache->epoch || !gpa || !access)
		return false;
	set = cache_set(pg->cache, gva);
	for (unsigned int w = 0; w < PGWALK_CACHE_WAYS; w++) {
		const struct pgwalk_cache_slot *e = &set[w];

		if (!slot_now(pg->cache, e) || e->cr3 != (walk_cr3(pg, gva) & ~0xfffull) ||
		    e->cr4 != pg->cr4 || e->gva_page != (gva & ~0xfffull))
			continue;
		*gpa = e->gpa_page | (gva & 0xfff);
		*access = e->access;
		return true;
	}
	return false;
}

static struct pgwalk_memo *memo_set(struct pgwalk_cache *c, uint64_t cr3, uint64_t gva)
{
	/* SAFETY: reduced modulo PGWALK_MEMO_SETS. */
	return c->memo[((gva >> 12) ^ (cr3 >> 12)) % PGWALK_MEMO_SETS];
}

static bool memo_is(const struct pgwalk_memo *m, uint64_t cr3, uint64_t gva)
{
	return m->levels && m->cr3 == cr3 && m->gva_page == (gva & ~0xfffull);
}

/* Where the walk of @gva under root @cr3 is remembered: its own way, else the one that
 * answered least recently (empty ways first: used 0). */
static struct pgwalk_memo *memo_victim(struct pgwalk_cache *c, uint64_t cr3, uint64_t gva)
{
	struct pgwalk_memo *set = memo_set(c, cr3, gva), *old = &set[0];

	for (unsigned int w = 0; w < PGWALK_MEMO_WAYS; w++) {
		if (memo_is(&set[w], cr3, gva))
			return &set[w];
		if ((set[w].levels ? set[w].used : 0) < (old->levels ? old->used : 0))
			old = &set[w];
	}
	return old;
}

/* Entries a walk need not read again: read at the addresses it would read them from. */
struct memo_pre {
	unsigned int n;
	uint64_t gpa[PGWALK_MAX_LEVELS], val[PGWALK_MAX_LEVELS];
};

/*
 * The remembered walk of @gva under @pg (struct pgwalk_memo), when every entry it read still
 * holds its value. Each entry is read and compared in turn; the reads do not wait for each
 * other all the same (their addresses are known, and the comparisons predict equal). Where one
 * changed (or cannot be read), the walk is forgotten and NULL returned, with the entries up to
 * and including that one in @pre: the walk that follows takes them from there, so a walk
 * still reads each level once (the bound of struct pgwalk_memo).
 */
static const struct pgwalk_memo *memo_find(const struct gmem *mem, const struct gi_paging *pg,
					   uint64_t cr3, uint64_t gva, struct memo_pre *pre)
{
	struct pgwalk_cache *c = pg->cache;
	struct pgwalk_memo *set = memo_set(c, cr3, gva), *m = NULL;

	pre->n = 0;
	for (unsigned int w = 0; w < PGWALK_MEMO_WAYS && !m; w++)
		if (memo_is(&set[w], cr3, gva))
			m = &set[w];
	if (!m || m->cr4 != pg->cr4 || m->efer != pg->efer || m->maxphyaddr != pg->maxphyaddr)
		return NULL;
	for (unsigned int i = 0; i < m->levels; i++) {
		uint64_t v;

		if (gmem_read(mem, m->entry_gpa[i], &v, sizeof(v)) != 0) {
			m->levels = 0; /* the walk reads it again and fails as it must */
			return NULL;
		}
		pre->gpa[i] = m->entry_gpa[i];
		pre->val[i] = v;
		pre->n = i + 1;
		if (v != m->entry[i]) {
			c->memo_stale++;
			m->levels = 0;
			return NULL;
		}
	}
	c->memo_hits++;
	m->used = c->epoch;
	return m;
}

/* All of the 4 KiB page at @gpa_page is guest RAM (a remembered walk answers for any byte of
 * it without the walk's probe of one), as @mem's map tells without a read; false without one
 * (then no walk is remembered: the bound of reads per walk holds). */
static bool page_is_ram(const struct gmem *mem, uint64_t gpa_page)
{
	return mem->map && gmem_map(mem, gpa_page, PAGE_SIZE_4K) != NULL;
}

/* The walk of @gva under @pg (walk(), below) where @pg->cache had no translation of it: the
 * remembered walk, else the tables read level by level. Out of line: its frame is large, and
 * most translations are hits. */
static __attribute__((noinline)) int walk_tables(const struct gmem *mem,
						 const struct gi_paging *pg, uint64_t gva,
						 uint64_t *gpa, uint64_t *page_size,
						 struct pgwalk_trace *trace, uint8_t *access)
{
	unsigned int levels, maxphy, step;
	uint64_t pa_limit_mask, table_gpa, entry = 0, cr3 = walk_cr3(pg, gva);
	uint64_t seen_gpa[PGWALK_MAX_LEVELS], seen[PGWALK_MAX_LEVELS]; /* steps 0..step */
	struct memo_pre pre; /* its entries 0..n-1 only (memo_find) */
	uint8_t probe, acc = PGWALK_ACC_USER;
	int err;

	pre.n = 0;
	if (trace)
		trace->levels = 0;

	/* Long mode = CR0.PG and EFER.LMA (which implies CR4.PAE); nothing else is supported. */
	if (!(pg->cr0 & CR0_PG) || !(pg->efer & EFER_LMA) || !(pg->cr4 & CR4_PAE))
		return -ENOTSUP;

	maxphy = pgwalk_maxphyaddr(pg);
	if (maxphy < 32 || maxphy > 52)
		return -EINVAL;
	/* Physical-address bits at or above MAXPHYADDR (within 51:12) must be zero. */
	pa_limit_mask = PTE_ADDR_MASK & ~((1ull << maxphy) - 1);

	levels = (pg->cr4 & CR4_LA57) ? 5 : 4;
	if (!pgwalk_gva_is_canonical(pg, gva))
		return -EINVAL;

	/*
	 * CR3[11:0] are PCID bits when CR4.PCIDE=1 and PWT/PCD/ignored otherwise: never address
	 * bits. CR3[63] is the "no flush" hint of MOV to CR3 and bits 62:MAXPHYADDR are reserved
	 * (or LAM controls on newer CPUs); the table address is bits MAXPHYADDR-1:12.
	 */
	if (cr3 & pa_limit_mask)
		return -ERANGE;
	table_gpa = cr3 & PTE_ADDR_MASK;
	/* not in this epoch's translations: a walk remembered from an earlier one, whose entries
	 * are all read at once, answers if they still hold (struct pgwalk_memo) */
	if (pg->cache && !trace && pg->cache->epoch) {
		const struct pgwalk_memo *m = memo_find(mem, pg, cr3 & ~0xfffull, gva, &pre);

		if (m) {
			uint64_t size = m->page_size;

			*gpa = m->gpa_page | (gva & (size - 1));
			if (page_size)
				*page_size = size;
			if (access)
				*access = m->access;
			cache_store(pg->cache, cr3 & ~0xfffull, pg->cr4, gva, *gpa, size,
				    m->access);
			return 0;
		}
	}

	/* One step per level; at most PGWALK_MAX_LEVELS reads, so a looping table terminates. */
	for (step = 0; step < levels; step++) {
		/* Level number as the SDM counts it: 5 = PML5, 4 = PML4, 3 = PDPT, 2 = PD, 1 = PT. */
		unsigned int level = levels - step;
		unsigned int shift = PAGE_SHIFT_4K + 9 * (level - 1);
		/* SAFETY: idx < 512, so entry_off < 4096 and table_gpa + entry_off cannot wrap. */
		uint64_t idx = (gva >> shift) & 0x1ff;
		uint64_t entry_gpa = table_gpa + idx * 8;
		uint64_t size, base;

		/* an entry the remembered walk just read here is not read twice */
		err = step < pre.n && entry_gpa == pre.gpa[step]
			      ? (entry = pre.val[step], 0)
			      : gmem_read(mem, entry_gpa, &entry, sizeof(entry));
		if (err) {
			pr_debug(LOG_PGWALK, "gva 0x%llx: level %u table entry at gpa 0x%llx: %s",
				 (unsigned long long)gva, level, (unsigned long long)entry_gpa,
				 hvp_strerror(err));
			return err;
		}
		if (trace) {
			trace->entry_gpa[step] = entry_gpa;
			trace->entry[step] = entry;
			trace->levels = step + 1;
		}
		seen_gpa[step] = entry_gpa;
		seen[step] = entry;

		if (!(entry & PTE_P))
			return -EFAULT;
		if (!(entry & PTE_US))
			acc &= (uint8_t)~PGWALK_ACC_USER;
		if ((entry & PTE_NX) && (pg->efer & EFER_NXE))
			acc |= PGWALK_ACC_NX;
		/* XD is reserved unless EFER.NXE; when allowed it only restricts execution. */
		if ((entry & PTE_NX) && !(pg->efer & EFER_NXE))
			return -EFAULT;
		if (entry & pa_limit_mask) {
			pr_debug(LOG_PGWALK, "gva 0x%llx: level %u entry 0x%llx above MAXPHYADDR %u",
				 (unsigned long long)gva, level, (unsigned long long)entry, maxphy);
			return -ERANGE;
		}

		if (level == 1) {
			size = PAGE_SIZE_4K;
		} else if (entry & PTE_PS) {
			/* PS is reserved in PML5E/PML4E; it maps 1 GiB in a PDPTE, 2 MiB in a PDE. */
			if (level == 3 && !(entry & PDPTE_1G_RSVD))
				size = PAGE_SIZE_1G;
			else if (level == 2 && !(entry & PDE_2M_RSVD))
				size = PAGE_SIZE_2M;
			else
				return -EFAULT;
		} else {
			table_gpa = entry & PTE_ADDR_MASK;
			continue;
		}

		base = entry & PTE_ADDR_MASK & ~(size - 1);
		/* SAFETY: base is size-aligned and below 2^52, so base + offset stays below 2^52. */
		base |= gva & (size - 1);
		/* The result must be guest RAM too (-ERANGE otherwise): probe one byte. */
		err = gmem_read(mem, base, &probe, 1);
		if (err)
			return err;
		*gpa = base;
		if (page_size)
			*page_size = size;
		if (access)
			*access = acc;
		if (pg->cache && !trace && pg->cache->epoch)
			cache_store(pg->cache, cr3 & ~0xfffull, pg->cr4, gva, base, size, acc);
		/* remembered only where all of the 4 KiB result page is RAM: a remembered walk
		 * answers for every byte of it without the probe */
		if (pg->cache && !trace && pg->cache->epoch && page_is_ram(mem, base & ~0xfffull)) {
			struct pgwalk_memo *m = memo_victim(pg->cache, cr3 & ~0xfffull, gva);

			*m = (struct pgwalk_memo){ .cr3 = cr3 & ~0xfffull, .cr4 = pg->cr4,
						   .efer = pg->efer, .gva_page = gva & ~0xfffull,
						   .gpa_page = base & ~(size - 1), .page_size = size,
						   .maxphyaddr = pg->maxphyaddr,
						   .used = pg->cache->epoch,
						   .levels = (uint8_t)(step + 1), .access = acc };
			/* SAFETY: step < levels <= PGWALK_MAX_LEVELS entries were read */
			memcpy(m->entry_gpa, seen_gpa, (step + 1) * sizeof(seen_gpa[0]));
			memcpy(m->entry, seen, (step + 1) * sizeof(seen[0]));
		}
		return 0;
	}
	/* Not reached: level 1 always returns. */
	return -ELOOP;
}

/* @pg->cache's slot for @gva (a hit), or NULL: none, or no cache to ask. The cache is keyed by
 * the root table (kept entries answer under any: struct pgwalk_cache): PCID bits (11:0) do not
 * change a walk. */
static inline struct pgwalk_cache_slot *walk_cached(const struct gi_paging *pg, uint64_t gva,
						    bool want_access)
{
	if (!pg->cache || !pg->cache->epoch)
		return NULL;
	return cache_find(pg->cache, walk_cr3(pg, gva) & ~0xfffull, pg->cr4, gva, want_access);
}

static int walk(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva, uint64_t *gpa,
		uint64_t *page_size, struct pgwalk_trace *trace, uint8_t *access)
{
	const struct pgwalk_cache_slot *e;

	if (!mem || !mem->read || !pg || !gpa)
		return -EINVAL;
	e = trace ? NULL : walk_cached(pg, gva, access != NULL);
	if (!e)
		return walk_tables(mem, pg, gva, gpa, page_size, trace, access);
	*gpa = e->gpa_page | (gva & 0xfff);
	if (page_size)
		*page_size = e->page_size;
	if (access)
		*access = e->access;
	return 0;
}

int gi_gva_to_gpa(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva, uint64_t *gpa,
		  uint64_t *page_size, struct pgwalk_trace *trace)
{
	return walk(mem, pg, gva, gpa, page_size, trace, NULL);
}

int gi_gva_to_gpa_access(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva,
			 uint64_t *gpa, uint64_t *page_size, uint8_t *access)
{
	uint8_t acc = 0;
	int err;

	if (!access)
		return -EINVAL;
	err = walk(mem, pg, gva, gpa, page_size, NULL, &acc);
	if (!err)
		*access = acc;
	return err;
}

int gi_read_gva(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva, void *dst,
		size_t len)
{
	uint8_t *out = dst;
	uint64_t last;

	if (!mem || !mem->read || !pg || (!dst && len))
		return -EINVAL;
	if (len == 0)
		return 0;
	if (__builtin_add_overflow(gva, (uint64_t)len - 1, &last))
		return -ERANGE;

	while (len) {
		struct pgwalk_cache_slot *e = walk_cached(pg, gva, false);
		const uint8_t *hva = e && mem->map_page ? slot_hva(pg->cache, e, mem) : NULL;
		uint64_t gpa, page_size, chunk;
		int err;

		if (hva) {
			/* in place (struct pgwalk_cache): the slot's 4 KiB page was checked to be
			 * guest RAM when its HVA was taken; the copy stays inside it */
			chunk = 4096 - (gva & 0xfff);
			if (chunk > len)
				chunk = len;
			memcpy(out, hva + (gva & 0xfff), chunk);
			pg->cache->hva_reads++;
		} else {
			if (e) {
				gpa = e->gpa_page | (gva & 0xfff);
				page_size = e->page_size;
			} else {
				err = walk_tables(mem, pg, gva, &gpa, &page_size, NULL, NULL);
				if (err)
					return err;
			}
			/* SAFETY: chunk <= bytes left in this page and <= len: dst stays in bounds */
			chunk = page_size - (gva & (page_size - 1));
			if (chunk > len)
				chunk = len;
			err = gmem_read(mem, gpa, out, chunk);
			if (err)
				return err;
		}
		out += chunk;
		len -= chunk;
		gva += chunk; /* cannot wrap: checked against last above */
	}
	return 0;
}
