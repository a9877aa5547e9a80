// SPDX-License-Identifier: MIT
// Unit tests of diff's moderated t over repeated runs (issue 16 item 2's power at 3 runs a side,
// docs/diff.md): digamma and trigamma against reference values, an entry's dispersion, the
// prior's fit and the moderated t against values computed by hand (mpmath, 30 digits, with the
// formulas of docs/diff.md: limma's prior, Smyth 2004), a 3-against-3 shift of a big function that Welch's test misses and
// the moderated one catches, identical runs that raise no alarm, and the workload windows of a
// recording made with record --repeat.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/profile.h>

#include "diff_internal.h"
#include "rec_helpers.h"
#include "test.h"

#define MS 1000000ull
#define NEAR(a, b, tol) (fabs((a) - (b)) <= (tol) * fmax(1, fabs((double)(b))))

static int test_gamma(void)
{
	/* mpmath psi(0, x), psi(1, x) */
	ASSERT_TRUE(NEAR(diff_digamma(1), -0.577215664901532860606, 1e-12));
	ASSERT_TRUE(NEAR(diff_digamma(0.5), -1.963510026021423479441, 1e-12));
	ASSERT_TRUE(NEAR(diff_digamma(7.3), 1.917820335637986072291, 1e-12));
	ASSERT_TRUE(NEAR(diff_trigamma(1), 1.644934066848226436472, 1e-12));
	ASSERT_TRUE(NEAR(diff_trigamma(0.5), 4.934802200544679309417, 1e-12));
	ASSERT_TRUE(NEAR(diff_trigamma(13.7), 0.075721415822623895965, 1e-12));
	ASSERT_TRUE(NEAR(diff_trigamma_inv(1.644934066848226436472), 1, 1e-9));
	ASSERT_TRUE(NEAR(diff_trigamma_inv(0.0171348986690150163), 58.858998997889467, 1e-8));
	ASSERT_TRUE(isnan(diff_digamma(0)) && isnan(diff_trigamma(-1)) &&
		    isnan(diff_trigamma_inv(0)));
	return TEST_OK;
}

/* b: 40, 50, 60 of 1000; n: 66 of 1100, 45 and 65 of 1000 (hand: docs/diff.md's formulas) */
static int test_runs_stat(void)
{
	static const uint64_t counts[] = { 40, 50, 60, 66, 45, 65 };
	static const uint64_t totals[] = { 1000, 1000, 1000, 1100, 1000, 1000 };
	struct diff_side_counts b = { counts, totals, 3 }, n = { counts + 3, totals + 3, 3 };
	struct diff_prior none = { .d0 = 0 };
	struct diff_runs r;
	double shares[6], t, df;

	ASSERT_EQ_INT(diff_runs_stat(&b, &n, shares, &r), 0);
	ASSERT_TRUE(NEAR(r.m_base, 0.05, 1e-12) && NEAR(r.m_new, 0.0566666666666667, 1e-12));
	ASSERT_TRUE(NEAR(r.pool, 0.053442622950819675, 1e-12));
	ASSERT_TRUE(NEAR(r.unit, 3.321336449689043e-05, 1e-10));
	ASSERT_TRUE(NEAR(r.phi, 2.0646699387447525, 1e-10) && r.d == 4);
	/* without a prior: the entry's own dispersion, d degrees of freedom */
	diff_moderated_t(&r, &none, &t, &df);
	ASSERT_TRUE(NEAR(t, (r.m_new - r.m_base) / sqrt(r.phi * r.unit), 1e-12) && df == 4);
	/* one run a side: no dispersion of its own */
	b.n = n.n = 1;
	ASSERT_EQ_INT(diff_runs_stat(&b, &n, shares, &r), 0);
	ASSERT_TRUE(isnan(r.phi) && r.d == 0);
	b.n = 0;
	ASSERT_EQ_INT(diff_runs_stat(&b, &n, shares, &r), -EINVAL);
	return TEST_OK;
}

static int test_prior(void)
{
	static const uint64_t counts[] = { 40, 50, 60, 66, 45, 65 };
	static const uint64_t totals[] = { 1000, 1000, 1000, 1100, 1000, 1000 };
	struct diff_side_counts b = { counts, totals, 3 }, n = { counts + 3, totals + 3, 3 };
	double phi[60], shares[6], t, df;
	struct diff_prior pr;
	struct diff_runs r;

	/* log phi = log 2 +- 0.8: var(e) = 0.64 60/59, d0 = 2 trigamma^-1(0.650847 - trigamma(2))
	 * = 339.214, phi0 = exp(log 2 - digamma(2) + log 2 + digamma(d0/2) - log(d0/2)) = 2.61316 */
	for (int i = 0; i < 60; i++)
		phi[i] = 2 * exp(i % 2 ? 0.8 : -0.8);
	ASSERT_EQ_INT(diff_prior_fit(phi, 60, 4, &pr), 0);
	ASSERT_EQ_U64(pr.n_fit, 60);
	ASSERT_TRUE(NEAR(pr.d0, 339.21444358870490, 1e-6));
	ASSERT_TRUE(NEAR(pr.phi0, 2.6131571895797756, 1e-7));
	/* the moderated t of the entry above against that prior: phi~ = (d0 phi0 + 4 phi) /
	 * (d0 + 4), t = 0.716476 on 343.214 df */
	ASSERT_EQ_INT(diff_runs_stat(&b, &n, shares, &r), 0);
	diff_moderated_t(&r, &pr, &t, &df);
	ASSERT_TRUE(NEAR(t, 0.71647555636578533, 1e-7) && NEAR(df, 343.21444358870490, 1e-6));

	/* every entry at phi 3: no spread beyond the estimates' own, d0 infinite, and phi0 =
	 * 3 e^-(digamma(2) - log 2) = 3.93132 (e is unbiased for log phi, not log phi itself) */
	for (int i = 0; i < 60; i++)
		phi[i] = 3;
	ASSERT_EQ_INT(diff_prior_fit(phi, 60, 4, &pr), 0);
	ASSERT_TRUE(isinf(pr.d0) && NEAR(pr.phi0, 3.9313195548966214, 1e-9));
	diff_moderated_t(&r, &pr, &t, &df);
	ASSERT_TRUE(isinf(df) && NEAR(t, (r.m_new - r.m_base) / sqrt(pr.phi0 * r.unit), 1e-12));

	/* fewer than DIFF_PRIOR_MIN_ENTRIES usable entries (zeros and NaN left out): no prior */
	for (int i = 0; i < 60; i++)
		phi[i] = i < 15 ? 0 : i < 20 ? NAN : 3;
	ASSERT_EQ_INT(diff_prior_fit(phi, 60, 4, &pr), 0);
	ASSERT_TRUE(pr.d0 == 0 && pr.n_fit == 40);
	return TEST_OK;
}

/* A deterministic normal deviate (LCG and Box-Muller). */
static double gauss(uint64_t *st)
{
	double u1, u2;

	*st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
	u1 = ((double)(*st >> 11) + 1) / 9007199254740993.0;
	*st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
	u2 = (double)(*st >> 11) / 9007199254740992.0;
	return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

/*
 * One run of a workload of 20 000 samples: "hot" holds @hot of the work, 150 other functions
 * share the rest (1/k); every share wanders 5% from run to run (the host), then sampling noise.
 */
static struct profile_stacks *run_of(double hot, uint64_t *st)
{
	size_t cap = 150 * 40 + 64, len = 0;
	char *text = malloc(cap);
	struct profile_stacks *s = NULL;
	double rest = 0, w;
	int fd;

	if (!text)
		return NULL;
	for (int k = 1; k <= 150; k++)
		rest += 1.0 / k;
	for (int k = 0; k <= 150; k++) {
		double p = k ? (1 - hot) / (k * rest) : hot, c;

		w = p * (1 + 0.05 * gauss(st));
		c = 20000 * w + sqrt(20000 * w) * gauss(st);
		len += (size_t)snprintf(text + len, cap - len, k ? "main;f%d %.0f\n" : "main;hot%d %.0f\n",
					k, c > 0 ? c : 0);
	}
	fd = mem_file_from(text, len);
	free(text);
	if (fd < 0)
		return NULL;
	if (profile_stacks_read_folded(fd, "x", &s, NULL, 0))
		s = NULL;
	close(fd);
	return s;
}

/* @hot_b and @hot_n shares, three runs a side; the diff into *@d. */
static int three_v_three(double hot_b, double hot_n, uint64_t seed, struct profile_diff **d)
{
	struct profile_stacks *bs[3] = { 0 }, *ns[3] = { 0 };
	uint64_t st = seed;
	int err = 0;

	for (int i = 0; i < 3; i++) {
		err |= !(bs[i] = run_of(hot_b, &st));
		err |= !(ns[i] = run_of(hot_n, &st));
	}
	if (!err)
		err = profile_diff_compute_runs((const struct profile_stacks *const *)bs, 3,
						(const struct profile_stacks *const *)ns, 3, NULL, d);
	for (int i = 0; i < 3; i++) {
		profile_stacks_free(bs[i]);
		profile_stacks_free(ns[i]);
	}
	return err;
}

static int test_power(void)
{
	const struct profile_diff_entry *e;
	struct profile_diff *d = NULL;
	size_t n, m;

	/*
	 * hot 50% -> 60% (a function of half the window made 50% slower: 1.5 x 0.5 / (1.5 x 0.5 +
	 * 0.5)). Every function's work wanders 5% from run to run, so hot's share scatters ~1.3
	 * points a side: on its own 4 degrees of freedom a t needs p <= 1% / 454; the prior,
	 * fitted on all 454 entries, adds its d0 degrees of freedom.
	 */
	for (uint64_t seed = 1; seed <= 5; seed++) {
		ASSERT_EQ_INT(three_v_three(0.5, 0.6, seed, &d), 0);
		e = profile_diff_entries(d, 1, &n);
		ASSERT_TRUE(n >= 1 && e[0].kind == PROFILE_DIFF_SELF && !strcmp(e[0].name, "hot0"));
		ASSERT_TRUE(e[0].df > 4 && e[0].p_value <= 0.01 / 450.0);
		ASSERT_TRUE(profile_diff_worst_regression(d) > 10);
		profile_diff_free(d);
	}
	/* identical workloads, five seeds: nothing reported, either way */
	for (uint64_t seed = 11; seed <= 15; seed++) {
		ASSERT_EQ_INT(three_v_three(0.5, 0.5, seed, &d), 0);
		profile_diff_entries(d, 1, &n);
		profile_diff_entries(d, 0, &m);
		ASSERT_EQ_U64(n + m, 0);
		profile_diff_free(d);
	}
	return TEST_OK;
}

/* A recording of @n windows of @per samples each (--repeat), the last without its end when
 * @open_last, a start while the second is open when @lie. */
static int write_repeats(int fd, int n, int per, int open_last, int lie)
{
	struct recfile_writer *w = NULL;
	int err = recfile_writer_open(fd, &w);

	for (int i = 0; i < n && !err; i++) {
		uint64_t t0 = (uint64_t)(1000 + 2000 * i) * MS;
		struct hvp_event st = { .time_ns = t0, .kind = HVP_EVENT_WORKLOAD_START };
		struct hvp_event en = { .time_ns = t0 + 1000 * MS, .kind = HVP_EVENT_WORKLOAD_END };
		static const uint64_t k[] = { 0xffffffff81001000ULL, 0 };
		struct hvp_sample s;

		err = recfile_write_event(w, &st);
		mk_sample(&s, 3, 3, 0, HVP_WALK_NONE, 0, k, NULL);
		for (int j = 0; j < per && !err; j++) {
			s.time_ns = t0 + (uint64_t)j * 100000;
			err = recfile_write_sample(w, &s);
		}
		if (!err && !(open_last && i == n - 1) && !(lie && i == 1))
			err = recfile_write_event(w, &en);
	}
	if (!err)
		err = recfile_write_end(w, HVP_END_EXIT_DEVICE, 0);
	if (recfile_writer_close(w) && !err)
		err = -EIO;
	return err;
}

static int test_windows(void)
{
	struct profile_scan *scan = malloc(sizeof(*scan));
	uint64_t a, b;
	char path[64];
	int fd = mem_file();

	ASSERT_TRUE(scan && fd >= 0);
	ASSERT_EQ_INT(write_repeats(fd, 3, 1200, 0, 0), 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ASSERT_EQ_INT(profile_scan_recording(path, scan, NULL, 0), 0);
	ASSERT_EQ_U64(scan->n_windows, 3);
	ASSERT_EQ_U64(scan->windows_seen, 3);
	ASSERT_EQ_INT(profile_scan_window_at(scan, 2, &a, &b), 0);
	ASSERT_EQ_U64(a, 5000 * MS);
	ASSERT_EQ_U64(b, 6000 * MS);
	ASSERT_EQ_INT(profile_scan_window_at(scan, 3, &a, &b), -ENOENT);
	/* the first window is still the one profile_scan_window gives */
	ASSERT_EQ_INT(profile_scan_window(scan, &a, &b), 0);
	ASSERT_TRUE(a == 1000 * MS && b == 2000 * MS);
	close(fd);

	/* a start while window 2 is open: window 2 stops at window 3's start; the last one,
	 * never ended, runs to the end */
	fd = mem_file();
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(write_repeats(fd, 4, 10, 1, 1), 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ASSERT_EQ_INT(profile_scan_recording(path, scan, NULL, 0), 0);
	ASSERT_EQ_U64(scan->n_windows, 4);
	ASSERT_TRUE(!scan->windows[1].has_end && scan->windows[2].has_end);
	ASSERT_EQ_INT(profile_scan_window_at(scan, 1, &a, &b), 0);
	ASSERT_TRUE(a == 3000 * MS && b == 5000 * MS);
	ASSERT_EQ_INT(profile_scan_window_at(scan, 3, &a, &b), 0);
	ASSERT_TRUE(a == 7000 * MS && b == UINT64_MAX);
	close(fd);
	free(scan);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "digamma, trigamma and its inverse", test_gamma },
	{ "an entry's runs: shares, sampling unit, dispersion", test_runs_stat },
	{ "the prior's fit and the moderated t (hand-computed)", test_prior },
	{ "3 vs 3: a 50% slower big function caught, identical runs quiet", test_power },
	{ "record --repeat: every workload window of a recording", test_windows },
};

TEST_MAIN(tests)
