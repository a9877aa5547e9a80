/* SPDX-License-Identifier: MIT */
/*
 * Host memory for data read on every sample, on transparent huge pages where the host gives
 * them. Between two exits of a vCPU the guest runs, and the host's TLB may no longer hold the
 * ~35 pages of hvprof's own data a sample touches (the sampler, its vCPUs' caches, the
 * recording's rings): each is then a page walk before its first line, and with
 * two-dimensional paging (hvprof in a VM) a long one. On 2 MiB pages they are a few TLB
 * entries (README, "Hosts": huge pages).
 */
#ifndef HVPROF_HUGEMEM_H
#define HVPROF_HUGEMEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The huge page size these functions align to: 2 MiB, x86-64's PMD mapping. */
#define HVP_HUGE_BYTES ((size_t)2 << 20)

/**
 * hvp_huge_alloc - @bytes of zeroed anonymous host memory, 2 MiB-aligned, its mapping rounded
 * up to a multiple of 2 MiB and marked MADV_HUGEPAGE (a hint: where transparent huge pages are
 * off or none is free, the host gives 4 KiB pages, and nothing else differs).
 * Return: the memory, or NULL with errno set (@bytes 0 or too large: EINVAL; mmap's: ENOMEM).
 * Free it with hvp_huge_free(p, @bytes), the same @bytes. Thread-safe (mmap, munmap, madvise).
 * Cost: a huge page is a whole 2 MiB of host memory once touched, whatever @bytes asked.
 */
void *hvp_huge_alloc(size_t bytes);

/** hvp_huge_free - unmap what hvp_huge_alloc(@bytes) returned; @p NULL: nothing. */
void hvp_huge_free(void *p, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_HUGEMEM_H */
