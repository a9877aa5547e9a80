/* SPDX-License-Identifier: MIT */
/* Guest physical memory as guestinfo sees it: a read callback, so tests use plain buffers. */
#ifndef HVPROF_GMEM_H
#define HVPROF_GMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * gmem_read_fn - copy @len bytes of guest physical memory at @gpa into @dst.
 * Return: 0, or -ERANGE when any byte of [gpa, gpa+len) is outside guest RAM (nothing is
 * guaranteed about @dst then). Must not fail for other reasons. Thread-safety: called from
 * vCPU threads concurrently; the reader must not take locks that a vCPU thread holds.
 */
typedef int (*gmem_read_fn)(void *ctx, uint64_t gpa, void *dst, size_t len);

/**
 * gmem_map_fn - the host address (HVA) of [@gpa, @gpa+@len) of guest RAM, to be read in place,
 * or NULL when any byte of it is outside guest RAM (one RAM region: a range across a hole is
 * NULL too). The bytes stay mapped while the VM lives, but the guest may change them at any
 * time (its other vCPUs): read each once, and check what was read as for gmem_read.
 * Thread-safety: as gmem_read_fn.
 */
typedef const void *(*gmem_map_fn)(void *ctx, uint64_t gpa, size_t len);

struct gmem {
	gmem_read_fn read; /* required */
	void *ctx;         /* passed to read and map */
	gmem_map_fn map;   /* optional: NULL, no reads in place (gmem_map returns NULL) */
	/* optional: as @map, called for one whole 4 KiB page (@gpa aligned, @len 4096) whose HVA
	 * a translation cache keeps and reads through later (struct pgwalk_cache); the call
	 * itself reads nothing. The HVA must stay valid while @ctx lives. NULL: every read of
	 * guest memory goes through @read (tests that count reads leave it so). */
	gmem_map_fn map_page;
};

/* Read @len bytes at @gpa through @mem; see gmem_read_fn. */
static inline int gmem_read(const struct gmem *mem, uint64_t gpa, void *dst, size_t len)
{
	return mem->read(mem->ctx, gpa, dst, len);
}

/* The HVA of [@gpa, @gpa+@len) through @mem, or NULL; see gmem_map_fn. */
static inline const void *gmem_map(const struct gmem *mem, uint64_t gpa, size_t len)
{
	return mem->map ? mem->map(mem->ctx, gpa, len) : NULL;
}

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_GMEM_H */
