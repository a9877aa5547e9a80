/* SPDX-License-Identifier: MIT */
/* The table of prologue.c, shared with prologue_cfi.c (not part of any API). */
#ifndef HVPROF_GUESTINFO_PROLOGUE_INTERNAL_H
#define HVPROF_GUESTINFO_PROLOGUE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gi_internal.h"

#define PRO_BUCKET_SHIFT 12 /* the lookup's buckets: 4 KiB of text each */
/* A stretch is at most this long (so that the one holding a RIP starts in the RIP's bucket or
 * the one before); longer ones are split. Also the largest frameless function taken whole. */
#define PRO_MAX_STRETCH (1u << PRO_BUCKET_SHIFT)

/* A stretch of code (a function's first bytes, a frameless function, CFI rows): from @off past
 * the table's lo, [0, push_end) nothing pushed, [push_end, mov_end) RBP pushed. */
struct pro_fn {
	uint32_t off;      /* ascending, the stretches do not overlap */
	uint16_t push_end; /* <= mov_end */
	uint16_t mov_end;  /* <= PRO_MAX_STRETCH */
};

struct gi_prologues {
	uint64_t lo, hi;       /* [lo, hi): the link-time text the table covers */
	struct pro_fn *fn;     /* @n stretches by @off (@cap allocated); 8 to a cache line */
	uint32_t n;
	size_t cap;
	size_t n_cfi, n_code;  /* functions taken from the CFI, from the code */
	uint32_t *bucket;      /* n_buckets + 1: first index whose start is in bucket b or after */
	uint32_t n_buckets;
	/* bit (kva - ret_lo) of [ret_lo, ret_hi): a c3 or c2 byte in the body of a function with a
	 * prologue found in its code (NULL: none) */
	uint64_t *ret_bits;
	uint64_t ret_lo, ret_hi;
};

/*
 * pro_add - add [@start, @end) (link-time, within [p->lo, p->hi)) where the CFA is RSP + @cfa
 * (8: nothing pushed, 16: RBP pushed), after every stretch added so far: continues the last one
 * when it can (RBP pushed after anything, nothing pushed after nothing pushed), split at
 * PRO_MAX_STRETCH. Return: 0; -ENOMEM.
 */
int pro_add(struct gi_prologues *p, uint64_t start, uint64_t end, unsigned int cfa) __must_check;

/* pro_index - the lookup's buckets over the stretches added. Return: 0; -ENOMEM. */
int pro_index(struct gi_prologues *p) __must_check;

/* The image's call-frame information (prologue_cfi.c). */
struct pro_cfi;

/*
 * pro_cfi_open - the CFI of the x86-64 ELF @elf_bytes (@elf_len bytes, read in place, kept by
 * the caller until pro_cfi_close): .debug_frame, else .eh_frame; with compressed .debug_*
 * sections, .eh_frame only (libdw would inflate all of them at open). Return: 0 and *@out;
 * -EBADMSG not an ELF; -ENOTSUP not x86-64; -ENODATA no CFI; -ENOMEM.
 */
int pro_cfi_open(const uint8_t *elf_bytes, size_t elf_len, struct pro_cfi **out) __must_check;
void pro_cfi_close(struct pro_cfi *c);

/*
 * pro_cfi_rows - add to @p the rows of @c over [@start, @next) (a code symbol, link-time) whose
 * CFA is RSP + 8 or RSP + 16 (pro_add). Return: 0; -ENOENT no CFI at @start (the caller looks at
 * the code); -ENOMEM.
 */
int pro_cfi_rows(struct pro_cfi *c, struct gi_prologues *p, uint64_t start, uint64_t next)
	__must_check;

/*
 * pro_build - the table over [@lo, @hi) for the code symbols of @st: from @cfi where it has the
 * function (NULL: none), else from the code read through @read. Return: 0 and *@out; -EINVAL;
 * -ENOTSUP capstone without x86; -ENOMEM.
 */
int pro_build(const struct symtab *st, gi_kva_read_fn read, void *ctx, struct pro_cfi *cfi,
	      uint64_t lo, uint64_t hi, struct gi_prologues **out) __must_check;

#endif /* HVPROF_GUESTINFO_PROLOGUE_INTERNAL_H */
