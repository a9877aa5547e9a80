// SPDX-License-Identifier: MIT
// What diff.c (the comparison), diff_stats.c (its statistics) and diff_write.c (its text and
// JSON) share.
#ifndef HVPROF_DIFF_INTERNAL_H
#define HVPROF_DIFF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "profile_internal.h"

#define DIFF_FAMILY_ALPHA 0.01 /* family-wise false-alarm rate of the Bonferroni bound */

/*
 * An entry's runs (diff_runs_stat()); shares are fractions. @m_base/@m_new: the mean per-run
 * share of each side. @pool: the share of the entry in all runs pooled (both sides). @unit: the
 * variance of m_new - m_base under binomial sampling alone, pool (1 - pool) (mean_B(1/N_j) / n_b
 * + mean_N(1/N_j) / n_n). @phi: the entry's own dispersion, Pearson's statistic over its @d =
 * n_b + n_n - 2 degrees of freedom: sum_j (p_j - m_side(j))^2 / (pool (1 - pool) / N_j) / d;
 * NaN when d < 1 or pool is 0 or 1.
 */
struct diff_runs {
	double m_base, m_new, pool, unit, phi, d;
};

/*
 * The prior on the entries' dispersions (diff_prior_fit(), Smyth 2004): @phi0 (s0^2) on @d0
 * degrees of freedom (0: no prior, fewer than DIFF_PRIOR_MIN_ENTRIES entries; INFINITY: the
 * entries scatter no more than their own estimates do). @mean_e: the mean of log phi - E[log
 * chi2_d / d]. @n_fit: the entries it was fitted on.
 */
struct diff_prior {
	double phi0, d0, mean_e;
	size_t n_fit;
};

#define DIFF_PRIOR_MIN_ENTRIES 50 /* fewer tested entries: no prior, each on its own variance */

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
	double alpha;    /* the p an entry needs under the moderated t test (diff_alpha()) */
	struct diff_prior prior; /* the dispersions' prior, with two runs or more on a side */
	double run_factor; /* one run a side: the sampling se is multiplied by this */
	double fail_min_share; /* worst_regression: functions with less of NEW (percent) skipped */
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


/* ---- diff_stats.c */
/* The per-test level of the Bonferroni bound over @tested entries: DIFF_FAMILY_ALPHA / tested. */
double diff_alpha(size_t tested);
/* The regularized incomplete beta function I_x(a, b) (NaN for a or b <= 0). */
double diff_betai(double a, double b, double x);
/* P(|T| >= |t|) for Student's t with @df (> 0, maybe fractional; INFINITY: normal). */
double diff_t_two_sided_p(double t, double df);
/* psi(x), psi'(x) for x > 0 (NaN otherwise), and the x > 0 with psi'(x) = @y (NaN if none). */
double diff_digamma(double x);
double diff_trigamma(double x);
double diff_trigamma_inv(double y);
/*
 * The per-run statistics of an entry, BASE @b against NEW @n (struct diff_runs).
 * @shares: room for b->n + n->n per-run shares (fractions), filled BASE first.
 * Return: 0 and *@out; -EINVAL a side without runs.
 */
int diff_runs_stat(const struct diff_side_counts *b, const struct diff_side_counts *n,
		   double *shares, struct diff_runs *out);
/*
 * Fit the prior to the @n entries' own dispersions @phi (each with @d degrees of freedom),
 * limma's way (Smyth 2004, section 6.2: the moments of log phi). Entries whose phi is 0, NaN or
 * infinite are left out. Return: 0 and *@out (always 0: no allocation).
 */
int diff_prior_fit(const double *phi, size_t n, double d, struct diff_prior *out);
/*
 * The moderated t of entry @r: phi~ = (d0 phi0 + d phi) / (d0 + d) (phi0 alone when d0 is
 * infinite, phi alone without a prior), at least 1; t = (m_new - m_base) / sqrt(phi~ unit) with
 * d0 + d degrees of freedom (Smyth 2004, eq. 6.1 and theorem 2).
 */
void diff_moderated_t(const struct diff_runs *r, const struct diff_prior *pr, double *t,
		      double *df);
#endif /* HVPROF_DIFF_INTERNAL_H */
