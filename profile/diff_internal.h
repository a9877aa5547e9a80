// SPDX-License-Identifier: MIT
// What diff.c (the comparison), diff_stats.c (its statistics) and diff_write.c (its text and
// JSON) share.
#ifndef HVPROF_DIFF_INTERNAL_H
#define HVPROF_DIFF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "profile_internal.h"

#define DIFF_FAMILY_ALPHA 0.01 /* family-wise false-alarm rate of the Bonferroni bound */

struct profile_diff {
	struct profile_diff_entry *reg, *imp;
	size_t n_reg, n_imp, cap_reg, cap_imp;
	char **names; /* owned blocks: an entry's per-run shares, then its name */
	size_t n_names, cap_names;
	size_t n_base, n_new;        /* runs per side */
	uint64_t *run_totals;        /* samples of each run, BASE runs first */
	uint64_t base_total, new_total; /* pooled over the side's runs */
	size_t base_stacks, new_stacks; /* distinct stacks of each side (pooled) */
	uint64_t min_samples;
	double threshold;
	double z_crit;   /* the |z| an entry needs (diff_z_crit() of the entries tested) */
	double alpha;    /* the p an entry needs under Welch's test (diff_alpha()) */
	double run_factor; /* one run a side: the sampling se is multiplied by this */
	double max_abs_z;  /* the largest sampling |z| of a tested entry (how far noise went) */
	size_t tested;   /* entries with enough samples, i.e. tested against noise */
	unsigned int max_rows;
};

/* One side's counts of an entry: @counts[i] samples of @totals[i] in run i, @n runs. */
struct diff_side_counts {
	const uint64_t *counts;
	const uint64_t *totals;
	size_t n;
};

/* Welch's test of an entry: @t, @df (Welch-Satterthwaite), two-sided @p, and the difference
 * of the mean per-run shares (fractions, not percent). */
struct diff_welch {
	double t, df, p, mean_diff;
};

/* ---- diff_stats.c */
/* The per-test level of the Bonferroni bound over @tested entries: DIFF_FAMILY_ALPHA / tested. */
double diff_alpha(size_t tested);
/* The regularized incomplete beta function I_x(a, b) (NaN for a or b <= 0). */
double diff_betai(double a, double b, double x);
/* P(|T| >= |t|) for Student's t with @df (> 0, maybe fractional; INFINITY: normal). */
double diff_t_two_sided_p(double t, double df);
/*
 * Welch's t test of the per-run shares of an entry, BASE @b against NEW @n: each side's
 * variance is the unbiased variance of its per-run shares, floored at their binomial sampling
 * variance; a side of one run borrows the other side's variance and degrees of freedom.
 * @shares: room for b->n + n->n per-run shares (fractions), filled BASE first.
 * Return: 0 and *@out; -EINVAL a side without runs.
 */
int diff_welch(const struct diff_side_counts *b, const struct diff_side_counts *n,
	       double *shares, struct diff_welch *out);

#endif /* HVPROF_DIFF_INTERNAL_H */
