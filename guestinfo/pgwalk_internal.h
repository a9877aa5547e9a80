/* SPDX-License-Identifier: MIT */
/* Address-shape helpers of the guestinfo files: now public in <hvprof/guestinfo.h>
 * (pgwalk_gva_is_canonical, gi_is_kernel_gva, gi_is_user_gva); kept as the include point. */
#ifndef HVPROF_GUESTINFO_PGWALK_INTERNAL_H
#define HVPROF_GUESTINFO_PGWALK_INTERNAL_H

#include <hvprof/guestinfo.h>

#endif /* HVPROF_GUESTINFO_PGWALK_INTERNAL_H */
