// SPDX-License-Identifier: MIT
// Zeroed host memory on transparent huge pages (include/hvprof/hugemem.h says why).
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include <hvprof/hugemem.h>

/* @bytes rounded up to 2 MiB; 0 where that overflows or @bytes is 0 */
static size_t huge_len(size_t bytes)
{
	size_t len;

	if (!bytes || __builtin_add_overflow(bytes, HVP_HUGE_BYTES - 1, &len))
		return 0;
	return len & ~(HVP_HUGE_BYTES - 1);
}

void *hvp_huge_alloc(size_t bytes)
{
	size_t len = huge_len(bytes), map_len;
	uint8_t *raw, *p;

	if (!len || __builtin_add_overflow(len, HVP_HUGE_BYTES, &map_len)) {
		errno = EINVAL;
		return NULL;
	}
	/* one huge page more than needed, so that a 2 MiB-aligned start lies inside; the parts
	 * before and after it are given back */
	raw = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	p = (uint8_t *)(((uintptr_t)raw + HVP_HUGE_BYTES - 1) & ~(uintptr_t)(HVP_HUGE_BYTES - 1));
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	if (p + len < raw + map_len)
		munmap(p + len, (size_t)(raw + map_len - (p + len)));
	/* a hint: its failure (THP not built in) leaves 4 KiB pages, which work the same */
	(void)madvise(p, len, MADV_HUGEPAGE);
	return p; /* anonymous memory is zeroed */
}

void hvp_huge_free(void *p, size_t bytes)
{
	size_t len = huge_len(bytes);

	if (p && len)
		munmap(p, len);
}
