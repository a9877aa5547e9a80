// SPDX-License-Identifier: MIT
// The statistics of hvprof diff: the two-proportion z test (sampling noise), the moderated t
// test on per-run shares (run-to-run noise: each entry's dispersion over the binomial, shrunk
// toward a prior fitted across all entries, Smyth 2004) with the Student t distribution from
// the regularized incomplete beta function, and the Bonferroni bound of both (docs/diff.md).
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

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

/*
 * The digamma function psi(x) = d/dx ln Gamma(x), x > 0: the recurrence psi(x) = psi(x + 1) - 1/x
 * up to x >= 10, then the asymptotic series (Abramowitz & Stegun 6.3.18); error < 1e-12.
 */
double diff_digamma(double x)
{
	double r = 0, x2;

	if (!(x > 0))
		return NAN;
	for (; x < 10; x += 1)
		r -= 1 / x;
	x2 = 1 / (x * x);
	return r + log(x) - 0.5 / x -
	       x2 * (1.0 / 12 - x2 * (1.0 / 120 - x2 * (1.0 / 252 - x2 * (1.0 / 240))));
}

/*
 * The trigamma function psi'(x), x > 0: psi'(x) = psi'(x + 1) + 1/x^2 up to x >= 10, then
 * 1/x + 1/(2x^2) + sum B_2k / x^(2k+1) (A&S 6.4.12, Bernoulli numbers 1/6, -1/30, 1/42, -1/30).
 */
double diff_trigamma(double x)
{
	double r = 0, x2;

	if (!(x > 0))
		return NAN;
	for (; x < 10; x += 1)
		r += 1 / (x * x);
	x2 = 1 / (x * x);
	return r + 1 / x + x2 / 2 +
	       x2 / x * (1.0 / 6 - x2 * (1.0 / 30 - x2 * (1.0 / 42 - x2 * (1.0 / 30))));
}

double diff_trigamma_inv(double y)
{
	double lo = 1e-8, hi = 1e8;

	/* trigamma decreases from +inf to 0 over (0, inf): bisection in log space */
	if (!(y > 0) || y > diff_trigamma(lo))
		return NAN;
	for (int i = 0; i < 200; i++) {
		double mid = sqrt(lo * hi);

		if (diff_trigamma(mid) > y)
			lo = mid;
		else
			hi = mid;
	}
	return sqrt(lo * hi);
}

int diff_runs_stat(const struct diff_side_counts *b, const struct diff_side_counts *n,
		   double *shares, struct diff_runs *out)
{
	const struct diff_side_counts *side[2] = { b, n };
	double mean[2] = { 0, 0 }, hsum[2] = { 0, 0 }, c = 0, tot = 0, ss = 0, pool;
	size_t k = 0;

	if (!b->n || !n->n)
		return -EINVAL;
	for (int s = 0; s < 2; s++) {
		for (size_t i = 0; i < side[s]->n; i++, k++) {
			double N = (double)side[s]->totals[i];

			shares[k] = N > 0 ? (double)side[s]->counts[i] / N : 0;
			mean[s] += shares[k];
			hsum[s] += N > 0 ? 1 / N : 0;
			c += (double)side[s]->counts[i];
			tot += N;
		}
		mean[s] /= (double)side[s]->n;
	}
	pool = tot > 0 ? c / tot : 0;
	*out = (struct diff_runs){ .m_base = mean[0], .m_new = mean[1], .pool = pool,
				   .d = (double)(b->n + n->n) - 2, .phi = NAN };
	/* var(m_new - m_base) under binomial sampling alone, the pooled share for both sides */
	out->unit = pool * (1 - pool) *
		    (hsum[0] / (double)(b->n * b->n) + hsum[1] / (double)(n->n * n->n));
	if (out->d < 1 || !(pool > 0 && pool < 1))
		return 0;
	/* Pearson's dispersion: sum (p_j - m_side)^2 / (pool (1 - pool) / N_j) over d df */
	k = 0;
	for (int s = 0; s < 2; s++)
		for (size_t i = 0; i < side[s]->n; i++, k++)
			ss += (shares[k] - mean[s]) * (shares[k] - mean[s]) *
			      (double)side[s]->totals[i];
	out->phi = ss / (pool * (1 - pool)) / out->d;
	return 0;
}

int diff_prior_fit(const double *phi, size_t n, double d, struct diff_prior *out)
{
	double corr, mean = 0, ss = 0, s2;
	size_t m = 0;

	*out = (struct diff_prior){ .d0 = 0 };
	if (!(d >= 1))
		return 0;
	/* e_i = log phi_i - E[log(chi2_d / d)]: unbiased for the log of the true dispersion
	 * (Smyth 2004, section 6.2); their mean and variance (Welford) */
	corr = diff_digamma(d / 2) - log(d / 2);
	for (size_t i = 0; i < n; i++) {
		double e, delta;

		if (!(phi[i] > 0 && isfinite(phi[i])))
			continue;
		e = log(phi[i]) - corr;
		m++;
		delta = e - mean;
		mean += delta / (double)m;
		ss += delta * (e - mean);
	}
	out->n_fit = m;
	if (m < DIFF_PRIOR_MIN_ENTRIES)
		return 0;
	out->mean_e = mean;
	/* var(e) = trigamma(d/2) + trigamma(d0/2) (Smyth 2004, eq. 6.3) */
	s2 = ss / (double)(m - 1) - diff_trigamma(d / 2);
	out->d0 = s2 > 0 ? 2 * diff_trigamma_inv(s2) : INFINITY;
	if (isnan(out->d0))
		out->d0 = INFINITY; /* s2 beyond trigamma's range: no spread left */
	/* s0^2 = exp(mean e + digamma(d0/2) - log(d0/2)) (Smyth 2004, eq. 6.4) */
	out->phi0 = exp(mean + (isfinite(out->d0) ? diff_digamma(out->d0 / 2) -
						    log(out->d0 / 2) : 0));
	return 0;
}

void diff_moderated_t(const struct diff_runs *r, const struct diff_prior *pr, double *t,
		      double *df)
{
	double phi, own = isfinite(r->phi) && r->d >= 1 ? r->phi : NAN;

	if (pr->d0 > 0 && isinf(pr->d0)) {
		phi = pr->phi0;
		*df = INFINITY;
	} else if (pr->d0 > 0 && isfinite(own)) {
		/* the posterior mean of 1/phi's inverse (Smyth 2004, eq. 6.1) */
		phi = (pr->d0 * pr->phi0 + r->d * own) / (pr->d0 + r->d);
		*df = pr->d0 + r->d;
	} else if (pr->d0 > 0) {
		phi = pr->phi0;
		*df = pr->d0;
	} else {
		phi = own;
		*df = r->d;
	}
	/* a share cannot scatter less than sampling makes it; NaN (no runs to tell): sampling */
	phi = isnan(phi) || phi < 1 ? 1 : phi;
	*t = r->unit > 0 ? (r->m_new - r->m_base) / sqrt(phi * r->unit) : 0;
	if (!(*df >= 1))
		*df = 1;
}
