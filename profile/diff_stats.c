// SPDX-License-Identifier: MIT
// The statistics of hvprof diff: the two-proportion z test (sampling noise), Welch's t test on
// per-run shares (run-to-run noise) with the Student t distribution from the regularized
// incomplete beta function, and the Bonferroni bound of both (docs/diff.md).
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stddef.h>

#include "diff_internal.h"

double diff_z_crit(size_t tested)
{
	/*
	 * Bonferroni: with @tested entries, each is tested at two-sided level 1% / @tested, so the
	 * chance that any unchanged entry is reported is at most 1%; never below
	 * PROFILE_DIFF_Z. Solve erfc(z / sqrt 2) = 0.01 / tested by bisection (erfc decreases).
	 */
	double target = diff_alpha(tested), lo = 0, hi = 40;

	for (int i = 0; i < 200; i++) {
		double mid = (lo + hi) / 2;

		if (erfc(mid / sqrt(2.0)) > target)
			lo = mid;
		else
			hi = mid;
	}
	return hi > PROFILE_DIFF_Z ? hi : PROFILE_DIFF_Z;
}

double diff_alpha(size_t tested)
{
	return DIFF_FAMILY_ALPHA / (double)(tested ? tested : 1);
}

/*
 * The continued fraction of the incomplete beta function, evaluated by the modified Lentz
 * method (Numerical Recipes in C, 2nd ed., 6.4 "betacf"; the fraction is Abramowitz & Stegun
 * 26.5.8). Converges fast for x < (a + 1) / (a + b + 2); diff_betai() arranges that.
 */
static double betacf(double a, double b, double x)
{
	const double tiny = 1e-300, eps = 1e-15;
	double qab = a + b, qap = a + 1, qam = a - 1, c = 1, d = 1 - qab * x / qap, h;

	if (fabs(d) < tiny)
		d = tiny;
	d = 1 / d;
	h = d;
	for (int m = 1; m <= 300; m++) {
		double m2 = 2.0 * m, aa, del;

		aa = m * (b - m) * x / ((qam + m2) * (a + m2));
		d = 1 + aa * d;
		d = fabs(d) < tiny ? tiny : d;
		c = 1 + aa / c;
		c = fabs(c) < tiny ? tiny : c;
		d = 1 / d;
		h *= d * c;
		aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
		d = 1 + aa * d;
		d = fabs(d) < tiny ? tiny : d;
		c = 1 + aa / c;
		c = fabs(c) < tiny ? tiny : c;
		d = 1 / d;
		del = d * c;
		h *= del;
		if (fabs(del - 1) < eps)
			break;
	}
	return h;
}

double diff_betai(double a, double b, double x)
{
	double front;

	if (!(a > 0 && b > 0) || isnan(x))
		return NAN;
	if (x <= 0)
		return 0;
	if (x >= 1)
		return 1;
	/* I_x(a, b) = x^a (1-x)^b / (a B(a, b)) * cf, B through lgamma (NR 6.4.5-6.4.6). */
	front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
	if (x < (a + 1) / (a + b + 2))
		return front * betacf(a, b, x) / a;
	return 1 - front * betacf(b, a, 1 - x) / b; /* I_x(a, b) = 1 - I_{1-x}(b, a) */
}

double diff_t_two_sided_p(double t, double df)
{
	/*
	 * P(|T| >= |t|) for Student's t with @df degrees of freedom (df need not be whole: Welch's
	 * df is not) = I_{df / (df + t^2)}(df / 2, 1 / 2)  (Abramowitz & Stegun 26.7.1 with 26.5.27).
	 * Infinite @df is the normal distribution.
	 */
	if (isnan(t) || isnan(df) || df <= 0)
		return NAN;
	if (isinf(t))
		return 0;
	if (isinf(df))
		return erfc(fabs(t) / sqrt(2.0));
	return diff_betai(df / 2, 0.5, df / (df + t * t));
}

/* Mean and unbiased variance (n - 1) of @n values (variance 0 for n < 2). */
static void mean_var(const double *x, size_t n, double *mean, double *var)
{
	double m = 0, s = 0;

	for (size_t i = 0; i < n; i++)
		m += x[i];
	m = n ? m / (double)n : 0;
	for (size_t i = 0; i < n; i++)
		s += (x[i] - m) * (x[i] - m);
	*mean = m;
	*var = n > 1 ? s / (double)(n - 1) : 0;
}

/*
 * The sampling variance of one run's share around the side's mean share @p: the binomial
 * p (1 - p) / N_j, averaged over the side's runs of @totals samples each. A per-run share can
 * never vary less than that, so it floors the observed between-run variance (with 2 or 3 runs
 * a side the observed variance is itself noisy, and may be 0 by chance).
 */
static double sampling_var(double p, const uint64_t *totals, size_t n)
{
	double v = 0;

	for (size_t i = 0; i < n; i++)
		v += totals[i] ? p * (1 - p) / (double)totals[i] : 0;
	return n ? v / (double)n : 0;
}

int diff_welch(const struct diff_side_counts *b, const struct diff_side_counts *n,
	       double *shares, struct diff_welch *out)
{
	double mb, vb, mn, vn, sb, sn, db, dn, se2;

	if (!b->n || !n->n)
		return -EINVAL;
	for (size_t i = 0; i < b->n; i++)
		shares[i] = b->totals[i] ? (double)b->counts[i] / (double)b->totals[i] : 0;
	for (size_t i = 0; i < n->n; i++)
		shares[b->n + i] = n->totals[i] ? (double)n->counts[i] / (double)n->totals[i] : 0;
	mean_var(shares, b->n, &mb, &vb);
	mean_var(shares + b->n, n->n, &mn, &vn);
	/* A side of one run has no variance of its own: it borrows the other side's. */
	db = b->n > 1 ? (double)(b->n - 1) : (double)(n->n - 1);
	dn = n->n > 1 ? (double)(n->n - 1) : (double)(b->n - 1);
	if (b->n < 2)
		vb = vn;
	if (n->n < 2)
		vn = vb;
	vb = fmax(vb, sampling_var(mb, b->totals, b->n));
	vn = fmax(vn, sampling_var(mn, n->totals, n->n));
	sb = vb / (double)b->n;
	sn = vn / (double)n->n;
	se2 = sb + sn;
	out->mean_diff = mn - mb;
	if (!(se2 > 0) || db < 1 || dn < 1) {
		out->t = 0;
		out->df = 1;
		out->p = 1;
		return 0;
	}
	/* Welch (1947): t = (mean_new - mean_base) / sqrt(s_b^2/n_b + s_n^2/n_n), and the
	 * Welch-Satterthwaite df = (s_b^2/n_b + s_n^2/n_n)^2 / ((s_b^2/n_b)^2/(n_b-1) +
	 * (s_n^2/n_n)^2/(n_n-1)). */
	out->t = out->mean_diff / sqrt(se2);
	out->df = se2 * se2 / (sb * sb / db + sn * sn / dn);
	out->p = diff_t_two_sided_p(out->t, out->df);
	return 0;
}
