/* SPDX-License-Identifier: MIT */
/* For the exit-work loop's tests: the one loop every exit path reaches, through
 * gi_exit_work_loops. */
#ifndef HVPROF_TESTS_ONELOOP_H
#define HVPROF_TESTS_ONELOOP_H

#include <errno.h>
#include <string.h>

#include <hvprof/guestinfo.h>

/* The loop gi_exit_work_loops finds when it is one loop, the loop's own function's, that every
 * exit path reaches (6.1), in *@w (zeroed otherwise). Return: 0; -ENOTSUP it gives none such
 * (an exit path's own copy among them, 6.12) or refuses so; its other errors. */
static inline int one_loop(const struct symtab *st, gi_kva_read_fn read, void *ctx,
			   const struct gi_pv_irq *pv, struct gi_exit_work *w)
{
	struct gi_exit_work l[GI_EW_COPIES];
	size_t n = 0;
	int err = gi_exit_work_loops(st, read, ctx, pv, l, &n);

	memset(w, 0, sizeof(*w));
	if (err)
		return err;
	if (n != 1 || l[0].inlined)
		return -ENOTSUP;
	*w = l[0];
	return 0;
}

#endif
