// SPDX-License-Identifier: MIT
// libhvdistro.so.1: the hot code of hvprof-distro, in a shared library as distributions ship
// code (built with dpkg-buildflags: -O2, no frame pointers, PIC; see images/debian/build.sh).
#include <stdlib.h>

#include "hvdistro.h"

#define BLOCK 4096

/* Not exported: a frame inside the library that only its unwind tables describe. */
static __attribute__((noinline)) uint64_t mix_block(const uint8_t *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
		h ^= h >> 29;
	}
	return h;
}

uint64_t hvd_checksum(const uint8_t *buf, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t off = 0; off < len; off += BLOCK)
		h = mix_block(buf + off, len - off < BLOCK ? len - off : BLOCK, h);
	return h;
}

size_t hvd_sort_records(struct hvd_record *recs, size_t n, hvd_cmp_fn cmp)
{
	size_t bad = 0;

	qsort(recs, n, sizeof(*recs), cmp);
	/* Checking the order afterwards also keeps qsort from being a tail call (this frame stays). */
	for (size_t i = 1; i < n; i++)
		bad += cmp(&recs[i - 1], &recs[i]) > 0;
	return bad;
}
