/* SPDX-License-Identifier: MIT */
/* libhvdistro: the shared library of hvprof-distro, holding its hot functions (a checksum and a
 * sort that calls back into the program). */
#ifndef HVDISTRO_H
#define HVDISTRO_H

#include <stddef.h>
#include <stdint.h>

struct hvd_record {
	char name[24];
	uint64_t key;
};

typedef int (*hvd_cmp_fn)(const void *a, const void *b);

/* Checksum of @len bytes at @buf, in 4 KiB blocks (hvd_checksum -> mix_block, both in the
 * library). */
uint64_t hvd_checksum(const uint8_t *buf, size_t len);

/* Sort @n records with libc's qsort, comparing with @cmp: the program's callback runs under
 * qsort, under this library. Returns the number of pairs still out of order (0). */
size_t hvd_sort_records(struct hvd_record *recs, size_t n, hvd_cmp_fn cmp);

#endif /* HVDISTRO_H */
