/* SPDX-License-Identifier: MIT */
/* Address-shape helpers of the guestinfo files: now public in <hvprof/guestinfo.h>
 * (pgwalk_gva_is_canonical, gi_is_kernel_gva, gi_is_user_gva); kept as the include point. */
#ifndef HVPROF_GUESTINFO_PGWALK_INTERNAL_H
#define HVPROF_GUESTINFO_PGWALK_INTERNAL_H

#include <hvprof/guestinfo.h>

/**
 * pgwalk_cache_seed - give @pg->cache (none: nothing happens) the translation of the 4 KiB page
 * of kernel address @gva to the 4 KiB page of @gpa, with access bits @access (PGWALK_ACC_*;
 * the user bit is never stored), as a walk made now under @pg would store it: valid until the
 * next pgwalk_cache_invalidate(). For the caller's own record of a translation that cannot have
 * changed (a live task's kernel stack: gi_task_stack_seed); @gpa one a walk returned. A user
 * address, GPA 0, or a slot that holds a translation of this sample or a kept one (another
 * page's, which seeding would evict) leaves the cache as it was. Every read through the cache
 * still goes through gmem, which refuses addresses outside guest RAM (or in place through the
 * HVA its map_page gives for the whole page: struct pgwalk_cache).
 * Return: true when stored.
 */
bool pgwalk_cache_seed(const struct gi_paging *pg, uint64_t gva, uint64_t gpa, uint8_t access);

/**
 * pgwalk_cache_peek - the translation of @gva's 4 KiB page that a walk under @pg stored in
 * @pg->cache since the last pgwalk_cache_invalidate() (kept ones are not reported), without
 * counting a hit or a miss. Return: true and *@gpa (the page's GPA | @gva's offset), *@access;
 * false when the cache holds none (or @pg has no cache).
 */
bool pgwalk_cache_peek(const struct gi_paging *pg, uint64_t gva, uint64_t *gpa,
		       uint8_t *access);

#endif /* HVPROF_GUESTINFO_PGWALK_INTERNAL_H */
