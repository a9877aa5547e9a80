// SPDX-License-Identifier: MIT
// Unit tests of diff over repeated runs and windows (issue 16): the t distribution against
// tabulated values, identical per-run shares with run-to-run noise that do not alarm, a real
// shift that does and is named first, the one-run factor, the JSON per-run shares, and a
// recording's workload window (profile_scan_recording, the window range of profile_options)
// and its fitness checks.
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

/* Folded text into stacks. */
static struct profile_stacks *folded(const char *text)
{
	struct profile_stacks *s = NULL;
	int fd = mem_file_from(text, strlen(text));

	if (fd < 0)
		return NULL;
	if (profile_stacks_read_folded(fd, "x", &s, NULL, 0))
		s = NULL;
	close(fd);
	return s;
}

/* Two-sided p of Student's t: tabulated values (any statistics table; R's 2*pt(-t, df)). */
static const struct {
	double t, df, p;
} tcases[] = {
	{ 12.706, 1, 0.05 },      { 4.303, 2, 0.05 },   { 2.228, 10, 0.05 },
	{ 2.0, 10, 0.073388 },    { 3.169, 10, 0.01 },  { 8.610, 4, 0.001 },
	{ 0, 5, 1.0 },            { 1.96, INFINITY, 0.05 }, { 2.5, 4.5, 0.060 },
};

static int test_t_dist(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(tcases); i++) {
		double p = diff_t_two_sided_p(tcases[i].t, tcases[i].df);
		double tol = tcases[i].df == 4.5 ? 0.002 : 0.0005 + 0.002 * tcases[i].p;

		if (fabs(p - tcases[i].p) > tol) {
			fprintf(stderr, "t %g df %g: p %g, want %g\n", tcases[i].t, tcases[i].df, p,
				tcases[i].p);
			return TEST_FAIL;
		}
	}
	/* I_x(a, b) symmetry and a closed form: I_x(1, 1) = x, I_x(a, 1) = x^a. */
	ASSERT_TRUE(fabs(diff_betai(1, 1, 0.3) - 0.3) < 1e-12);
	ASSERT_TRUE(fabs(diff_betai(2.5, 1, 0.4) - pow(0.4, 2.5)) < 1e-12);
	ASSERT_TRUE(fabs(diff_betai(3, 7, 0.2) + diff_betai(7, 3, 0.8) - 1) < 1e-12);
	return TEST_OK;
}

/* Runs with f at @f_pct permille... of 10000 samples: "main;f F\nmain;g G\n". */
static struct profile_stacks *run_of(unsigned int f)
{
	char text[128];

	snprintf(text, sizeof(text), "main;f %u\nmain;g %u\n", f, 10000 - f);
	return folded(text);
}

/* A diff of runs with f's counts @b (BASE) and @n (NEW), three each (0: fewer runs). */
static int diff_runs(const unsigned int *b, size_t nb, const unsigned int *n, size_t nn,
		     struct profile_diff **d)
{
	struct profile_stacks *bs[3] = { 0 }, *ns[3] = { 0 };
	int err = 0;

	for (size_t i = 0; i < nb; i++)
		err |= !(bs[i] = run_of(b[i]));
	for (size_t i = 0; i < nn; i++)
		err |= !(ns[i] = run_of(n[i]));
	if (!err)
		err = profile_diff_compute_runs((const struct profile_stacks *const *)bs, nb,
						(const struct profile_stacks *const *)ns, nn, NULL,
						d);
	for (size_t i = 0; i < 3; i++) {
		profile_stacks_free(bs[i]);
		profile_stacks_free(ns[i]);
	}
	return err;
}

static int test_run_noise(void)
{
	/* f's share wanders 36..45% from run to run: the pooled shares differ (40.0 -> 41.7%,
	 * z 4.2 beyond the sampling bound of these 7 entries), the runs say it is noise. */
	static const unsigned int same_b[] = { 4000, 4400, 3600 }, same_n[] = { 4200, 3800, 4500 };
	/* f really grew 40 -> 50% (runs within 1 point). */
	static const unsigned int shift_b[] = { 4000, 4100, 3900 }, shift_n[] = { 5000, 5100, 4900 };
	static const unsigned int big_n[] = { 6000, 6100, 5900 }, huge_n[] = { 8000, 8100, 7900 };
	const struct profile_diff_entry *e;
	struct profile_diff *d = NULL;
	size_t n;

	ASSERT_EQ_INT(diff_runs(same_b, 3, same_n, 3, &d), 0);
	e = profile_diff_entries(d, 1, &n);
	ASSERT_EQ_U64(n, 0);
	e = profile_diff_entries(d, 0, &n);
	ASSERT_EQ_U64(n, 0);
	profile_diff_free(d);

	ASSERT_EQ_INT(diff_runs(shift_b, 3, shift_n, 3, &d), 0);
	e = profile_diff_entries(d, 1, &n);
	ASSERT_TRUE(n >= 1);
	ASSERT_EQ_INT(e[0].kind, PROFILE_DIFF_SELF);
	ASSERT_TRUE(!strcmp(e[0].name, "f"));
	ASSERT_TRUE(e[0].t > 10 && e[0].df == 4); /* 7 entries: no prior, 3 + 3 - 2 df */
	ASSERT_EQ_U64(e[0].n_base_runs, 3);
	ASSERT_EQ_U64(e[0].n_new_runs, 3);
	ASSERT_TRUE(fabs(e[0].run_shares[0] - 40.0) < 1e-9 && fabs(e[0].run_shares[5] - 49.0) < 1e-9);
	ASSERT_TRUE(profile_diff_worst_regression(d) > 20);
	e = profile_diff_entries(d, 0, &n);
	ASSERT_TRUE(n >= 1 && !strcmp(e[0].name, "g"));
	profile_diff_free(d);

	/* Identical counts in every run: the variance is floored at the sampling variance, so a
	 * 0-variance pair of sides still needs a change beyond sampling noise. */
	{
		static const unsigned int flat_b[] = { 4000, 4000, 4000 };
		static const unsigned int flat_n[] = { 4050, 4050, 4050 };

		ASSERT_EQ_INT(diff_runs(flat_b, 3, flat_n, 3, &d), 0);
		profile_diff_entries(d, 1, &n);
		ASSERT_EQ_U64(n, 0);
		profile_diff_free(d);
	}
	/* One run against three: the single side borrows the other's variance. */
	ASSERT_EQ_INT(diff_runs(same_b, 1, same_n, 3, &d), 0);
	profile_diff_entries(d, 1, &n);
	ASSERT_EQ_U64(n, 0);
	profile_diff_free(d);
	/* One run and three have n_b + n_n - 2 = 2 degrees of freedom (7 entries: too few for a
	 * prior, each stands on its own dispersion): 40 -> 60% is t 17 there, p 0.003, not past
	 * 1% / 7; 40 -> 80% is. */
	ASSERT_EQ_INT(diff_runs(shift_b, 1, big_n, 3, &d), 0);
	profile_diff_entries(d, 1, &n);
	ASSERT_EQ_U64(n, 0);
	profile_diff_free(d);
	ASSERT_EQ_INT(diff_runs(shift_b, 1, huge_n, 3, &d), 0);
	e = profile_diff_entries(d, 1, &n);
	ASSERT_TRUE(n >= 1 && !strcmp(e[0].name, "f") && e[0].df == 2);
	profile_diff_free(d);
	return TEST_OK;
}

/* One run a side: the factor divides z; the text says run-to-run noise is unknown. */
static int test_one_run_factor(void)
{
	struct profile_stacks *b = run_of(4000), *n = run_of(4300);
	struct profile_diff_options o = { .size = sizeof(o) };
	struct str_sink txt = { 0 };
	struct profile_sink ts = { .write = str_sink_write, .ctx = &txt };
	const struct profile_diff_entry *e;
	struct profile_diff *d = NULL;
	size_t cnt;

	ASSERT_TRUE(b && n);
	/* 40 -> 43%: z = 4.3, beyond the sampling bound (3.19), not beyond 2 x it. */
	o.run_noise_factor = 1;
	ASSERT_EQ_INT(profile_diff_compute(b, n, &o, &d), 0);
	e = profile_diff_entries(d, 1, &cnt);
	ASSERT_TRUE(cnt >= 1 && !strcmp(e[0].name, "f") && fabs(e[0].t - e[0].z) < 1e-9);
	profile_diff_free(d);
	o.run_noise_factor = 0; /* the default, PROFILE_DIFF_RUN_FACTOR */
	ASSERT_EQ_INT(profile_diff_compute(b, n, &o, &d), 0);
	profile_diff_entries(d, 1, &cnt);
	ASSERT_EQ_U64(cnt, 0);
	ASSERT_EQ_INT(profile_diff_write(d, "a.data", "b.data", 0, &ts), 0);
	ASSERT_TRUE(strstr(txt.s, "# Run-to-run noise is unknown with one run a side: t = z / 3.00"));
	o.run_noise_factor = 0.5;
	profile_diff_free(d);
	d = NULL;
	ASSERT_EQ_INT(profile_diff_compute(b, n, &o, &d), -EINVAL);
	profile_stacks_free(b);
	profile_stacks_free(n);
	free(txt.s);
	return TEST_OK;
}

/* Workqueue workers compared by pool, not by worker number (diff_comm_name). */
static int test_kworker_names(void)
{
	static const struct {
		const char *comm, *want;
	} cases[] = {
		{ "kworker/0:0", "kworker/0:*" },
		{ "kworker/0:12H", "kworker/0:*H" },
		{ "kworker/u4:2", "kworker/u4:*" },
		{ "kworker/u4:2-events_unbound", "kworker/u4:*-events_unbound" },
		{ "kworker/1:1H-kblockd", "kworker/1:*H-kblockd" },
		{ "kworker/R-mm_pe", "kworker/R-mm_pe" }, /* a rescuer: one per workqueue */
		{ "kworker/", "kworker/" },
		{ "kworker/0:", "kworker/0:" },
		{ "kworkers/0:1", "kworkers/0:1" },
		{ "ksoftirqd/0", "ksoftirqd/0" },
		{ "sh", "sh" },
	};
	struct profile_stacks *b = folded("kworker/0:0;process_one_work_[k] 300\nmain;f 2700\n");
	struct profile_stacks *n = folded("kworker/0:1;process_one_work_[k] 300\nmain;f 2700\n");
	struct profile_diff_options o = { .size = sizeof(o), .run_noise_factor = 1 };
	struct profile_diff *d = NULL;
	char buf[32];
	size_t cnt;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = diff_comm_name(cases[i].comm, buf, sizeof(buf));

		if (strcmp(got, cases[i].want)) {
			fprintf(stderr, "'%s': got '%s', want '%s'\n", cases[i].comm, got,
				cases[i].want);
			return TEST_FAIL;
		}
	}
	/* too long for the buffer: the name as it is */
	ASSERT_TRUE(!strcmp(diff_comm_name("kworker/0:1-events", buf, 10), "kworker/0:1-events"));
	ASSERT_TRUE(b && n);
	ASSERT_EQ_INT(profile_diff_compute(b, n, &o, &d), 0);
	for (int k = 0; k < 2; k++) {
		profile_diff_entries(d, k, &cnt);
		ASSERT_EQ_U64(cnt, 0);
	}
	profile_diff_free(d);
	profile_stacks_free(b);
	profile_stacks_free(n);
	return TEST_OK;
}

/* The JSON: runs of each side with their samples, per-run shares of each entry, notes. */
static int test_json_runs(void)
{
	static const unsigned int b[] = { 4000, 4100, 3900 }, n[] = { 5000, 5100, 4900 };
	static const char *const bn[] = { "b1.data", "b2.data", "b3.data" };
	static const char *const nn[] = { "n1.data", "n2.data", "n3.data" };
	static const char *const notes[] = { "recordings compared over their workload window" };
	struct profile_diff_write_options wo = { .size = sizeof(wo), .base_names = bn,
						 .new_names = nn, .json = 1, .notes = notes,
						 .n_notes = 1 };
	struct str_sink js = { 0 }, txt = { 0 };
	struct profile_sink jss = { .write = str_sink_write, .ctx = &js };
	struct profile_sink ts = { .write = str_sink_write, .ctx = &txt };
	struct profile_diff *d = NULL;

	ASSERT_EQ_INT(diff_runs(b, 3, n, 3, &d), 0);
	ASSERT_EQ_INT(profile_diff_write_runs(d, &wo, &jss), 0);
	ASSERT_TRUE(strstr(js.s, "{\"direction\":\"BASE -> NEW\",\"base\":{\"name\":\"b1.data + "
				 "b2.data + b3.data\",\"samples\":30000,\"stacks\":2,\"runs\":[{\"name\":"
				 "\"b1.data\",\"samples\":10000},"));
	ASSERT_TRUE(strstr(js.s, "\"run_noise\":\"moderated\""));
	ASSERT_TRUE(strstr(js.s, "\"notes\":[\"recordings compared over their workload window\"]"));
	ASSERT_TRUE(strstr(js.s, "\"regressions\":[{\"kind\":\"self\",\"name\":\"f\""));
	ASSERT_TRUE(strstr(js.s, "\"base_runs\":[40.0000,41.0000,39.0000],\"new_runs\":[50.0000,"
				 "51.0000,49.0000]}"));
	wo.json = 0;
	ASSERT_EQ_INT(profile_diff_write_runs(d, &wo, &ts), 0);
	ASSERT_TRUE(strstr(txt.s, "# BASE: 3 runs (30000 samples, 2 stacks pooled):\n"
				  "#   b1.data (10000 samples)\n"));
	ASSERT_TRUE(strstr(txt.s, "# Note: recordings compared over their workload window\n"));
	ASSERT_TRUE(strstr(txt.s, "t is the moderated t on the per-run shares"));
	profile_diff_free(d);
	free(js.s);
	free(txt.s);
	return TEST_OK;
}

/*
 * A recording: workload start at 1 s, end at 2 s (when @end_event), @in samples of f inside
 * and @out of g outside (at 0.5 s and 2.5 s); END @reason (0: none).
 */
static int write_windowed(int fd, int end_event, int in, int out, uint32_t reason)
{
	static const uint64_t k_in[] = { 0xffffffff81001000ULL, 0 }, k_out[] = { 0xffffffff81002000ULL, 0 };
	struct hvp_event start = { .time_ns = 1000 * MS, .kind = HVP_EVENT_WORKLOAD_START };
	struct hvp_event end = { .time_ns = 2000 * MS, .kind = HVP_EVENT_WORKLOAD_END };
	struct hvp_sample *s = malloc(sizeof(*s));
	struct recfile_writer *w;
	int err;

	if (!s)
		return -ENOMEM;
	err = recfile_writer_open(fd, &w);
	err = err ? err : recfile_write_meta(w, "counter", "cpu-clock");
	mk_sample(s, 3, 3, 0, HVP_WALK_NONE, 0, k_out, NULL);
	for (int i = 0; i < out / 2 && !err; i++) {
		s->time_ns = 500 * MS;
		err = recfile_write_sample(w, s);
	}
	err = err ? err : recfile_write_event(w, &start);
	mk_sample(s, 3, 3, 0, HVP_WALK_NONE, 0, k_in, NULL);
	for (int i = 0; i < in && !err; i++) {
		s->time_ns = 1000 * MS + (uint64_t)i * 1000; /* both ends included: 1 s itself too */
		err = recfile_write_sample(w, s);
	}
	if (end_event && !err)
		err = recfile_write_event(w, &end);
	mk_sample(s, 3, 3, 0, HVP_WALK_NONE, 0, k_out, NULL);
	for (int i = out / 2; i < out && !err; i++) {
		s->time_ns = 2500 * MS;
		err = recfile_write_sample(w, s);
	}
	if (reason && !err)
		err = recfile_write_end(w, reason, 0);
	free(s);
	if (w) {
		int cerr = recfile_writer_close(w);

		err = err ? err : cerr;
	}
	return err;
}

static int test_window(void)
{
	struct profile_options o = { .size = sizeof(o), .no_symbols = 1 };
	struct profile_stacks *s = NULL;
	struct profile_scan scan;
	char path[64], why[256];
	int fd = mem_file();

	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(write_windowed(fd, 1, 1200, 400, HVP_END_EXIT_DEVICE), 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ASSERT_EQ_INT(profile_scan_recording(path, &scan, NULL, 0), 0);
	ASSERT_EQ_U64(scan.samples, 1600);
	ASSERT_TRUE(scan.has_window && scan.window.has_end && scan.has_end);
	ASSERT_EQ_INT(profile_scan_window(&scan, &o.window_start_ns, &o.window_end_ns), 0);
	ASSERT_EQ_U64(o.window_start_ns, 1000 * MS);
	ASSERT_EQ_U64(o.window_end_ns, 2000 * MS);
	/* the window: only the samples inside it */
	o.window_set = 1;
	ASSERT_EQ_INT(profile_stacks_load(path, &o, &s, NULL, 0), 0);
	ASSERT_EQ_U64(profile_stacks_total(s), 1200);
	ASSERT_EQ_U64(profile_stacks_count(s), 1);
	ASSERT_EQ_INT(profile_scan_check(&scan, profile_stacks_total(s), 1000, why, sizeof(why)), 0);
	ASSERT_EQ_INT(profile_scan_check(&scan, profile_stacks_total(s), 1500, why, sizeof(why)),
		      -ENODATA);
	ASSERT_TRUE(strstr(why, "1200 samples compared (of 1600), fewer than 1500"));
	profile_stacks_free(s);
	/* joined with --time: a sample must be in both */
	o.filter_time = ",1.0005";
	ASSERT_EQ_INT(profile_stacks_load(path, &o, &s, NULL, 0), 0);
	ASSERT_EQ_U64(profile_stacks_total(s), 501);
	profile_stacks_free(s);
	/* --window all: everything */
	o.filter_time = NULL;
	o.window_set = 0;
	ASSERT_EQ_INT(profile_stacks_load(path, &o, &s, NULL, 0), 0);
	ASSERT_EQ_U64(profile_stacks_total(s), 1600);
	profile_stacks_free(s);
	close(fd);

	/* no workload end: the window runs to the end of the recording */
	fd = mem_file();
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(write_windowed(fd, 0, 1200, 400, HVP_END_DURATION), 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ASSERT_EQ_INT(profile_scan_recording(path, &scan, NULL, 0), 0);
	ASSERT_EQ_INT(profile_scan_window(&scan, &o.window_start_ns, &o.window_end_ns), 0);
	ASSERT_EQ_U64(o.window_end_ns, UINT64_MAX);
	o.window_set = 1;
	ASSERT_EQ_INT(profile_stacks_load(path, &o, &s, NULL, 0), 0);
	ASSERT_EQ_U64(profile_stacks_total(s), 1400);
	profile_stacks_free(s);
	ASSERT_EQ_INT(profile_scan_check(&scan, 1400, 1000, why, sizeof(why)), 0);
	close(fd);
	return TEST_OK;
}

/* A broken side: no samples, no END, an END other than a clean exit or --duration. */
static int test_scan_check(void)
{
	static const struct {
		int in, out;
		uint32_t reason;
		int32_t status;
		int err;
		const char *why;
	} cases[] = {
		{ 0, 0, HVP_END_EXIT_DEVICE, 0, -ENODATA, "no samples at all" },
		{ 1200, 0, 0, 0, -ECANCELED, "no END record" },
		{ 1200, 0, HVP_END_SIGNAL, 0, -ECANCELED, "ended by signal" },
		{ 1200, 0, HVP_END_RESET, 0, -ECANCELED, "not a clean guest exit or --duration" },
		{ 1200, 0, HVP_END_EXIT_DEVICE, 3, -ECANCELED, "exited with status 3" },
		{ 1200, 0, HVP_END_DURATION, 0, 0, NULL },
		{ 1200, 0, HVP_END_EXIT_DEVICE, 0, 0, NULL },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct profile_scan scan = { .samples = (uint64_t)cases[i].in,
					     .has_end = cases[i].reason != 0,
					     .end_reason = cases[i].reason,
					     .exit_status = cases[i].status };
		char why[256] = "";
		int err = profile_scan_check(&scan, (uint64_t)cases[i].in, 1000, why, sizeof(why));

		if (err != cases[i].err || (cases[i].why && !strstr(why, cases[i].why))) {
			fprintf(stderr, "scan case %zu: %d '%s'\n", i, err, why);
			return TEST_FAIL;
		}
	}
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "t distribution and incomplete beta", test_t_dist },
	{ "run-to-run noise: no alarm; a real shift named first", test_run_noise },
	{ "one run a side: the noise factor", test_one_run_factor },
	{ "JSON and text with runs: per-run shares", test_json_runs },
	{ "the workload window (scan, range, --time, all)", test_window },
	{ "a broken side", test_scan_check },
	{ "workqueue workers compared by pool", test_kworker_names },
};

TEST_MAIN(tests)
