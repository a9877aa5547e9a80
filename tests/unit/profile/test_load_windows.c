// SPDX-License-Identifier: MIT
// Unit tests of profile_stacks_load_windows() (issue 16: diff reads a record --repeat recording
// once for all its runs): each window's set equals profile_stacks_load() of that window alone,
// stack for stack and in the same order, under every filter, with overlapping windows, deferred
// user stacks joined across a window's edge, comm changes and --max-stack; and its errors.
// With an argument, the same check on that recording (its workload windows, else 4 slices).
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/profile.h>

#include "profile_internal.h"
#include "rec_helpers.h"
#include "test.h"

#define MS 1000000ull
#define N_WIN 4

/* The stacks of @s in their order, "name;name;... COUNT\n" each, then the total. */
static char *dump(const struct profile_stacks *s)
{
	struct str_sink ss = { 0 };
	char num[64];

	for (size_t i = 0; i < s->stacks.n; i++) {
		uint32_t len;
		const uint64_t *k = seqtab_key(&s->stacks, i, &len);

		for (uint32_t f = 0; f < len; f++) {
			const char *nm = strpool_get(&s->names, (uint32_t)k[f]);

			if (f && str_sink_write(&ss, ";", 1))
				goto fail;
			if (str_sink_write(&ss, nm, strlen(nm)))
				goto fail;
		}
		snprintf(num, sizeof(num), " %" PRIu64 "\n", s->stacks.e[i].count);
		if (str_sink_write(&ss, num, strlen(num)))
			goto fail;
	}
	snprintf(num, sizeof(num), "total %" PRIu64 "\n", s->total);
	if (!str_sink_write(&ss, num, strlen(num)))
		return ss.s;
fail:
	free(ss.s);
	return NULL;
}

/* A deterministic pseudo-random number below @n. */
static uint32_t rnd(uint64_t *state, uint32_t n)
{
	*state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(*state >> 33) % n;
}

/*
 * record --repeat 4: windows at 1, 3, 5, 7 s of 1 s each, the third without its end (it stops
 * where the fourth starts: a sample at 7 s is in both), 2400 samples from 0 to 9.6 s of two
 * processes (pids 10 and 11 of "work", whose stacks merge by name; 20 "other", renamed
 * "renamed" at 4.5 s) in kernel, user, deferred (some USER_STACKs come after a window's end or
 * never) and lost form.
 */
static int write_repeat(int fd)
{
	static const uint64_t kips[][3] = { { 0xffffffff81001000ULL, 0xffffffff81002000ULL, 0 },
					    { 0xffffffff81003000ULL, 0 },
					    { 0xffffffff81004000ULL, 0xffffffff81002000ULL, 0 } };
	static const uint64_t uips[][4] = { { 0x401000, 0x402000, 0x403000, 0 },
					    { 0x404000, 0x403000, 0 },
					    { 0x405000, 0 } };
	static const int32_t pids[] = { 10, 11, 20 };
	struct hvp_thread t10 = mk_thread(10, 10, "work", 0), t11 = mk_thread(11, 10, "work", 0);
	struct hvp_thread t20 = mk_thread(20, 20, "other", 0), t20b = mk_thread(20, 20, "renamed", 0);
	struct hvp_process p10 = mk_process(10, "/bin/work", 0x400000, 0x410000);
	struct hvp_user_stack *us = malloc(sizeof(*us));
	struct hvp_sample *s = malloc(sizeof(*s));
	struct recfile_writer *w = NULL;
	uint64_t st = 42, cookie = 1, owed = 0, owed_pid = 0;
	int err = !s || !us ? -ENOMEM : recfile_writer_open(fd, &w);

	err = err ? err : recfile_write_meta(w, "counter", "cpu-clock");
	err = err ? err : recfile_write_thread(w, &t10);
	err = err ? err : recfile_write_thread(w, &t11);
	err = err ? err : recfile_write_thread(w, &t20);
	err = err ? err : recfile_write_process(w, &p10);
	for (int i = 0; i < 2400 && !err; i++) {
		uint64_t t = (uint64_t)i * 4 * MS; /* 0 .. 9.6 s */
		uint32_t form = rnd(&st, 5), kk = rnd(&st, 3), uu = rnd(&st, 3);
		int32_t pid = pids[rnd(&st, 3)];

		/* the window edges: start at 1, 3, 5, 7 s, end at 2, 4, 8 s (a sample on each) */
		if (t == 1000 * MS || t == 3000 * MS || t == 5000 * MS || t == 7000 * MS) {
			struct hvp_event ev = { .time_ns = t, .kind = HVP_EVENT_WORKLOAD_START };

			err = recfile_write_event(w, &ev);
		}
		if (!err && (t == 2000 * MS || t == 4000 * MS || t == 8000 * MS)) {
			struct hvp_event ev = { .time_ns = t, .kind = HVP_EVENT_WORKLOAD_END };

			err = recfile_write_event(w, &ev);
		}
		if (!err && t == 4500 * MS)
			err = recfile_write_thread(w, &t20b);
		if (!err && owed && form != 2) { /* the deferred one's walk, some samples later */
			struct hvp_user_stack u = mk_user_stack((int32_t)owed_pid, owed,
							       HVP_WALK_END, uips[uu]);

			*us = u;
			err = recfile_write_user_stack(w, us);
			owed = 0;
		}
		if (err)
			break;
		if (form == 0) /* kernel */
			mk_sample(s, pid, pid == 11 ? 10 : pid, 0, HVP_WALK_NONE, 0, kips[kk], NULL);
		else if (form == 1) /* user */
			mk_sample(s, pid, pid == 11 ? 10 : pid, 3, HVP_WALK_END, 0, NULL, uips[uu]);
		else if (form == 2) /* deferred: its USER_STACK comes later, or never (at the end) */
			mk_sample(s, pid, pid == 11 ? 10 : pid, 0, HVP_WALK_DEFERRED, ++cookie,
				  kips[kk], NULL);
		else if (form == 3) /* kernel and user at once */
			mk_sample(s, pid, pid == 11 ? 10 : pid, 0, HVP_WALK_END, 0, kips[kk],
				  uips[uu]);
		else
			mk_sample(s, pid, pid == 11 ? 10 : pid, 0, HVP_WALK_LOST, 0, kips[kk], NULL);
		s->time_ns = t;
		if (form == 2) {
			owed = cookie;
			owed_pid = (uint64_t)pid;
		}
		err = recfile_write_sample(w, s);
	}
	err = err ? err : recfile_write_end(w, HVP_END_EXIT_DEVICE, 0);
	if (w) {
		int cerr = recfile_writer_close(w);

		err = err ? err : cerr;
	}
	free(us);
	free(s);
	return err;
}

/*
 * profile_stacks_load_windows() of @path over @wins (@n) against profile_stacks_load() of each
 * window alone under @o ({0, UINT64_MAX}: no window at all). 0, or -1 (said, naming @what).
 */
static int same_as_single(const char *path, const struct profile_options *o,
			  const struct profile_time_window *wins, size_t n, const char *what)
{
	struct profile_stacks **outs = calloc(n, sizeof(*outs));
	char errbuf[256] = "";
	int bad = 0, err;

	if (!outs)
		return -1;
	err = profile_stacks_load_windows(path, o, wins, n, outs, errbuf, sizeof(errbuf));
	if (err) {
		fprintf(stderr, "%s: load_windows: %d %s\n", what, err, errbuf);
		free(outs);
		return -1;
	}
	for (size_t k = 0; k < n; k++) {
		struct profile_options ok = *o;
		struct profile_stacks *one = NULL;
		char *a = NULL, *b = NULL;

		if (wins[k].start_ns || wins[k].end_ns != UINT64_MAX) {
			ok.window_set = 1;
			ok.window_start_ns = wins[k].start_ns;
			ok.window_end_ns = wins[k].end_ns;
		}
		err = profile_stacks_load(path, &ok, &one, errbuf, sizeof(errbuf));
		if (!err) {
			a = dump(outs[k]);
			b = dump(one);
		}
		if (err || !a || !b || strcmp(a, b)) {
			fprintf(stderr, "%s: window %zu [%" PRIu64 ", %" PRIu64 "]: %d %s\n"
				"--- one read:\n%.2000s--- alone:\n%.2000s", what, k,
				wins[k].start_ns, wins[k].end_ns, err, errbuf, a ? a : "?",
				b ? b : "?");
			bad = 1;
		}
		free(a);
		free(b);
		profile_stacks_free(one);
	}
	for (size_t k = 0; k < n; k++)
		profile_stacks_free(outs[k]);
	free(outs);
	return bad ? -1 : 0;
}

/* The workload windows of the recording at @path (or @n_slices even slices of 0..@span_ns). */
static size_t windows_of(const char *path, struct profile_time_window *wins, size_t n_slices,
			 uint64_t span_ns)
{
	struct profile_scan *scan = malloc(sizeof(*scan));
	size_t n = 0;

	if (scan && profile_scan_recording(path, scan, NULL, 0) == 0 && scan->n_windows > 1) {
		for (size_t k = 0; k < scan->n_windows && n < PROFILE_MAX_WINDOWS; k++)
			if (profile_scan_window_at(scan, k, &wins[n].start_ns,
						   &wins[n].end_ns) == 0)
				n++;
	} else {
		for (; n < n_slices; n++)
			wins[n] = (struct profile_time_window){ n * (span_ns / n_slices),
								 (n + 1) * (span_ns / n_slices) };
	}
	free(scan);
	return n;
}

/* Every filter of diff, each window against its own load. */
static int check_recording(const char *path, int no_symbols, uint64_t span_ns)
{
	struct profile_time_window wins[PROFILE_MAX_WINDOWS + 2];
	const struct {
		const char *what, *comm, *pid, *tid, *time;
		int only;
		unsigned int max_stack;
	} cases[] = {
		{ "no filter", NULL, NULL, NULL, NULL, 0, 0 },
		{ "--kernel-only", NULL, NULL, NULL, NULL, PROFILE_ONLY_KERNEL, 0 },
		{ "--user-only", NULL, NULL, NULL, NULL, PROFILE_ONLY_USER, 0 },
		{ "--comm work,renamed", "work,renamed", NULL, NULL, NULL, 0, 0 },
		{ "--pid 10 --tid 11", NULL, "10", "11", NULL, 0, 0 },
		{ "--time 3.5,7.2", NULL, NULL, NULL, "3.5,7.2", 0, 0 },
		{ "--max-stack 2", NULL, NULL, NULL, NULL, 0, 2 },
	};
	size_t n = windows_of(path, wins, N_WIN, span_ns);

	/* the whole recording, and one window over two of the others: overlapping */
	wins[n++] = (struct profile_time_window){ 0, UINT64_MAX };
	wins[n] = (struct profile_time_window){ wins[0].start_ns, wins[1].end_ns };
	n++;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct profile_options o = {
			.size = sizeof(o), .no_symbols = no_symbols, .filter_comm = cases[i].comm,
			.filter_pid = cases[i].pid, .filter_tid = cases[i].tid,
			.filter_time = cases[i].time, .filter_only = cases[i].only,
			.max_stack = cases[i].max_stack,
		};

		if (same_as_single(path, &o, wins, n, cases[i].what))
			return TEST_FAIL;
		/* one window alone: the same path as a run of a file given once */
		if (same_as_single(path, &o, wins + 1, 1, cases[i].what))
			return TEST_FAIL;
	}
	return TEST_OK;
}

static int test_same_as_each_window(void)
{
	struct profile_scan scan;
	char path[64];
	int fd = mem_file(), ret;

	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(write_repeat(fd), 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ASSERT_EQ_INT(profile_scan_recording(path, &scan, NULL, 0), 0);
	ASSERT_EQ_U64(scan.n_windows, N_WIN);
	ASSERT_TRUE(!scan.windows[2].has_end && scan.windows[3].has_end);
	ret = check_recording(path, 1, 0);
	close(fd);
	return ret;
}

/* The windows of one read add up as they should: a sample in two windows counts in both. */
static int test_counts(void)
{
	struct profile_options o = { .size = sizeof(o), .no_symbols = 1 };
	const struct profile_time_window wins[] = {
		{ 0, 4500 * MS }, { 4500 * MS, UINT64_MAX }, { 0, UINT64_MAX }, { 9 * MS, 9 * MS },
	};
	struct profile_stacks *outs[ARRAY_SIZE(wins)] = { 0 };
	char path[64];
	int fd = mem_file();

	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(write_repeat(fd), 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ASSERT_EQ_INT(profile_stacks_load_windows(path, &o, wins, ARRAY_SIZE(wins), outs, NULL, 0),
		      0);
	/* 2400 samples, 4 ms apart: 4.5 s is sample 1125, in both halves */
	ASSERT_EQ_U64(profile_stacks_total(outs[2]), 2400);
	ASSERT_EQ_U64(profile_stacks_total(outs[0]), 1126);
	ASSERT_EQ_U64(profile_stacks_total(outs[1]), 1275);
	ASSERT_EQ_U64(profile_stacks_total(outs[3]), 0); /* no sample at 9 ms exactly */
	for (size_t k = 0; k < ARRAY_SIZE(wins); k++)
		profile_stacks_free(outs[k]);
	close(fd);
	return TEST_OK;
}

static int test_errors(void)
{
	struct profile_options o = { .size = sizeof(o), .no_symbols = 1 };
	struct profile_time_window win = { 0, UINT64_MAX }, bad = { 2, 1 };
	/* a sentinel: a failing call must leave the caller's pointer alone */
	struct profile_stacks *const sentinel = (struct profile_stacks *)&win, *out = sentinel;
	char path[64], folded[64], errbuf[256];
	int fd = mem_file(), ffd = mem_file_from("a;b 3\n", 6);

	ASSERT_TRUE(fd >= 0 && ffd >= 0);
	ASSERT_EQ_INT(write_repeat(fd), 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	snprintf(folded, sizeof(folded), "/proc/self/fd/%d", ffd);
	ASSERT_EQ_INT(profile_stacks_load_windows(path, &o, &win, 0, &out, NULL, 0), -EINVAL);
	ASSERT_TRUE(out == sentinel);
	ASSERT_EQ_INT(profile_stacks_load_windows(path, &o, NULL, 1, &out, NULL, 0), -EINVAL);
	ASSERT_TRUE(out == sentinel);
	ASSERT_EQ_INT(profile_stacks_load_windows(path, &o, &bad, 1, &out, NULL, 0), -EINVAL);
	ASSERT_TRUE(out == sentinel);
	o.keep_samples = 1;
	ASSERT_EQ_INT(profile_stacks_load_windows(path, &o, &win, 1, &out, NULL, 0), -EINVAL);
	ASSERT_TRUE(out == sentinel);
	o.keep_samples = 0;
	o.filter_pid = "x";
	ASSERT_EQ_INT(profile_stacks_load_windows(path, &o, &win, 1, &out, errbuf,
						  sizeof(errbuf)), -EINVAL);
	ASSERT_TRUE(out == sentinel);
	ASSERT_TRUE(strstr(errbuf, "--pid 'x'"));
	o.filter_pid = NULL;
	ASSERT_EQ_INT(profile_stacks_load_windows(folded, &o, &win, 1, &out, errbuf,
						  sizeof(errbuf)), -EBADMSG);
	ASSERT_TRUE(out == sentinel);
	ASSERT_TRUE(strstr(errbuf, "not a recording"));
	ASSERT_EQ_INT(profile_stacks_load_windows("/nonexistent/x.data", &o, &win, 1, &out,
						  errbuf, sizeof(errbuf)), -ENOENT);
	ASSERT_TRUE(out == sentinel);
	ASSERT_TRUE(strstr(errbuf, "/nonexistent/x.data"));
	close(fd);
	close(ffd);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "each window of one read = that window loaded alone", test_same_as_each_window },
	{ "counts: overlapping windows, a sample on the edge", test_counts },
	{ "errors", test_errors },
};

int main(int argc, char **argv)
{
	/* test-load-windows REC [SPAN_S]: check a real recording (symbolized as found) */
	if (argc > 1) {
		int ret = check_recording(argv[1], 0,
					  (uint64_t)(argc > 2 ? atof(argv[2]) : 60) * 1000 * MS);

		printf("%s: %s\n", ret == TEST_OK ? "ok" : "FAIL", argv[1]);
		return ret;
	}
	return test_run_all(tests, ARRAY_SIZE(tests));
}
