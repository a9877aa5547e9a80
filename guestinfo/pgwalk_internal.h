/* SPDX-License-Identifier: MIT */
/* Address-shape helpers shared by the guestinfo files (not part of the public API). */
#ifndef HVPROF_GUESTINFO_PGWALK_INTERNAL_H
#define HVPROF_GUESTINFO_PGWALK_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <hvprof/guestinfo.h>

/* pgwalk_gva_is_canonical - @gva is canonical for the paging mode of @pg (48 or 57 bits). */
bool pgwalk_gva_is_canonical(const struct gi_paging *pg, uint64_t gva);

/*
 * gi_is_kernel_gva - @gva is a canonical address of the upper (kernel) half for the paging mode
 * of @pg: >= 0xffff800000000000 with 4-level paging, >= 0xff00000000000000 with 5-level paging
 * (where Linux puts its direct map at 0xff11000000000000).
 */
static inline bool gi_is_kernel_gva(const struct gi_paging *pg, uint64_t gva)
{
	return (gva >> 63) && pgwalk_gva_is_canonical(pg, gva);
}

/* gi_is_user_gva - @gva is a canonical address of the lower (user) half for @pg. */
static inline bool gi_is_user_gva(const struct gi_paging *pg, uint64_t gva)
{
	return !(gva >> 63) && pgwalk_gva_is_canonical(pg, gva);
}

#endif /* HVPROF_GUESTINFO_PGWALK_INTERNAL_H */
