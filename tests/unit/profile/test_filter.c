// SPDX-License-Identifier: MIT
// Unit tests of the sample filters (profile_options.filter_*, profile/filter.c): exact kept
// counts for each filter and combinations on a hand-built recording (two processes, threads,
// kernel and user samples, deferred ones joined later), the report's "Filtered:" line, the
// same numbers as filtering the unfiltered folded output by hand, diff's sides, and the
// syntax checks.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/profile.h>

#include "rec_helpers.h"
#include "test.h"

#define K1 0xffffffff81001000ULL
#define K2 0xffffffff81002000ULL
#define MS 1000000ull

/* One line of the scenario: @n samples of thread @pid at @ms ms. */
struct srow {
	int n;
	int32_t pid, tgid;
	uint64_t ms;
	uint8_t cpl, stop;
	uint64_t cookie;
	int kernel, user; /* with a kernel part (K1, K2) / a user part walked at once */
};

/*
 * python3: tgid 100, threads 100 and 101; sh: tgid 200, threads 200 and 201; kworker: 3.
 * Deferred samples: cookie 1 joined by a USER_STACK written after them, cookie 2 joined to a
 * walk that found no frame, cookie 3 never joined.
 */
static const struct srow rows[] = {
	{ 3, 100, 100, 500, 3, HVP_WALK_END, 0, 0, 1 },
	{ 2, 101, 100, 1000, 0, HVP_WALK_DEFERRED, 1, 1, 0 },
	{ 4, 200, 200, 1500, 0, HVP_WALK_END, 0, 1, 1 },
	{ 5, 200, 200, 2000, 3, HVP_WALK_END, 0, 0, 1 },
	{ 1, 100, 100, 2500, 0, HVP_WALK_DEFERRED, 2, 1, 0 },
	{ 2, 3, 3, 3000, 0, HVP_WALK_NONE, 0, 1, 0 },
	{ 1, 101, 100, 3000, 0, HVP_WALK_DEFERRED, 3, 1, 0 },
	{ 1, 201, 200, 3500, 3, HVP_WALK_END, 0, 0, 1 },
};
#define TOTAL 19

static int write_rows(struct recfile_writer *w)
{
	static const uint64_t kips[] = { K1, K2, 0 }, u_py[] = { 0x401020, 0x401010, 0 },
			      u_sh[] = { 0x501020, 0x501010, 0 };
	struct hvp_sample *s = malloc(sizeof(*s));
	int err = 0;

	if (!s)
		return -ENOMEM;
	for (size_t r = 0; r < ARRAY_SIZE(rows) && !err; r++) {
		const struct srow *sr = &rows[r];

		mk_sample(s, sr->pid, sr->tgid, sr->cpl, sr->stop, sr->cookie,
			  sr->kernel ? kips : NULL,
			  sr->user ? (sr->tgid == 100 ? u_py : u_sh) : NULL);
		s->time_ns = sr->ms * MS;
		s->flags = sr->pid == 3 ? HVP_SAMPLE_KTHREAD : 0;
		for (int i = 0; i < sr->n && !err; i++)
			err = recfile_write_sample(w, s);
	}
	free(s);
	return err;
}

static int write_scenario(int fd)
{
	static const uint64_t u_j[] = { 0x401030, 0x401010, 0 };
	struct hvp_thread th[] = {
		mk_thread(100, 100, "python3", 0), mk_thread(101, 100, "python3", 0),
		mk_thread(200, 200, "sh", 0), mk_thread(201, 200, "sh", 0),
		mk_thread(3, 3, "kworker/0:1", 1),
	};
	struct hvp_process p_py = mk_process(100, "/usr/bin/python3", 0x401000, 0x402000);
	struct hvp_process p_sh = mk_process(200, "/bin/sh", 0x501000, 0x502000);
	struct hvp_user_stack us1 = mk_user_stack(101, 1, HVP_WALK_END, u_j);
	struct hvp_user_stack us2 = mk_user_stack(100, 2, HVP_WALK_FAULT, NULL);
	struct recfile_writer *w;
	int err, close_err;

	err = recfile_writer_open(fd, &w);
	if (err)
		return err;
	err = recfile_write_meta(w, "counter", "cpu-clock");
	for (size_t i = 0; i < ARRAY_SIZE(th) && !err; i++)
		err = recfile_write_thread(w, &th[i]);
	err = err ? err : recfile_write_process(w, &p_py);
	err = err ? err : recfile_write_process(w, &p_sh);
	err = err ? err : write_rows(w);
	err = err ? err : recfile_write_user_stack(w, &us1);
	err = err ? err : recfile_write_user_stack(w, &us2);
	err = err ? err : recfile_write_end(w, HVP_END_EXIT_DEVICE, 0);
	close_err = recfile_writer_close(w);
	return err ? err : close_err;
}

/* The scenario in a memfd, positioned at 0 (-1 on failure). */
static int scenario_fd(void)
{
	int fd = mem_file();

	if (fd < 0)
		return -1;
	if (write_scenario(fd) || lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Filters in the order comm, pid, tid, time, only (NULL/0: none). */
struct fcase {
	const char *comm, *pid, *tid, *time;
	int only;
	uint64_t kept;
	uint64_t deferred, joined, lost_user;
};

static const struct fcase fcases[] = {
	{ NULL, NULL, NULL, NULL, 0, TOTAL, 4, 3, 2 },
	{ "python3", NULL, NULL, NULL, 0, 7, 4, 3, 2 },
	{ "sh", NULL, NULL, NULL, 0, 10, 0, 0, 0 },
	{ "python3,kworker/0:1", NULL, NULL, NULL, 0, 9, 4, 3, 2 },
	{ "nosuch", NULL, NULL, NULL, 0, 0, 0, 0, 0 },
	{ NULL, "100", NULL, NULL, 0, 7, 4, 3, 2 },
	{ NULL, "200,3", NULL, NULL, 0, 12, 0, 0, 0 },
	{ NULL, "101", NULL, NULL, 0, 0, 0, 0, 0 },     /* a thread, not a process */
	{ NULL, NULL, "101", NULL, 0, 3, 3, 2, 1 },
	{ NULL, NULL, "100,201", NULL, 0, 5, 1, 1, 1 },
	{ NULL, NULL, NULL, "1,2", 0, 11, 2, 2, 0 },     /* both ends included */
	{ NULL, NULL, NULL, "1.0000001,2", 0, 9, 0, 0, 0 },
	{ NULL, NULL, NULL, "2.5,", 0, 5, 2, 1, 2 },
	{ NULL, NULL, NULL, ",0.5", 0, 3, 0, 0, 0 },
	{ NULL, NULL, NULL, ",.75", 0, 3, 0, 0, 0 },
	{ NULL, NULL, NULL, NULL, PROFILE_ONLY_KERNEL, 10, 4, 3, 0 }, /* no user part: no lost */
	{ NULL, NULL, NULL, NULL, PROFILE_ONLY_USER, 9, 0, 0, 0 },
	{ "sh", NULL, NULL, NULL, PROFILE_ONLY_KERNEL, 4, 0, 0, 0 },
	{ "python3", NULL, NULL, NULL, PROFILE_ONLY_USER, 3, 0, 0, 0 },
	{ NULL, "100", NULL, "1,3", 0, 4, 4, 3, 2 },
	{ "python3", "100", "101", "1,1", PROFILE_ONLY_KERNEL, 2, 2, 2, 0 },
	{ "sh", "100", NULL, NULL, 0, 0, 0, 0, 0 },       /* contradicting filters */
};

static struct profile_options fcase_opts(const struct fcase *c)
{
	return (struct profile_options){ .size = sizeof(struct profile_options),
					 .no_symbols = 1, .filter_comm = c->comm,
					 .filter_pid = c->pid, .filter_tid = c->tid,
					 .filter_time = c->time, .filter_only = c->only };
}

/* Load the scenario with @opts. */
static int load_with(const struct profile_options *opts, struct profile **p)
{
	char errbuf[256] = "";
	int fd = scenario_fd(), err;

	if (fd < 0)
		return -EIO;
	err = profile_load_fd(fd, "filters", opts, p, errbuf, sizeof(errbuf));
	if (err)
		fprintf(stderr, "load: %s\n", errbuf);
	close(fd);
	return err;
}

static char *folded_of(const struct profile *p)
{
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };

	if (profile_folded(p, &sink)) {
		free(ss.s);
		return NULL;
	}
	return ss.s ? ss.s : strdup("");
}

/* The sum of the counts of the folded lines in @folded. */
static uint64_t folded_total(const char *folded)
{
	uint64_t total = 0;

	for (const char *l = folded; *l;) {
		const char *nl = strchr(l, '\n'), *sp;

		if (!nl)
			break;
		for (sp = nl; sp > l && sp[-1] != ' '; sp--)
			;
		total += strtoull(sp, NULL, 10);
		l = nl + 1;
	}
	return total;
}

static int test_kept_counts(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(fcases); i++) {
		const struct fcase *c = &fcases[i];
		struct profile_options o = fcase_opts(c);
		struct profile_stats st;
		struct profile *p;
		char *folded;

		ASSERT_EQ_INT(load_with(&o, &p), 0);
		profile_get_stats(p, &st);
		folded = folded_of(p);
		ASSERT_TRUE(folded);
		if (st.samples != c->kept || st.deferred != c->deferred || st.joined != c->joined ||
		    st.lost_user != c->lost_user || folded_total(folded) != c->kept)
			fprintf(stderr, "case %zu: kept %" PRIu64 " deferred %" PRIu64
				" joined %" PRIu64 " lost %" PRIu64 "\n%s", i, st.samples,
				st.deferred, st.joined, st.lost_user, folded);
		ASSERT_EQ_U64(st.samples, c->kept);
		ASSERT_EQ_U64(st.filtered_out, TOTAL - c->kept);
		ASSERT_EQ_U64(st.kernel_samples + st.user_samples, c->kept);
		ASSERT_EQ_U64(st.deferred, c->deferred);
		ASSERT_EQ_U64(st.joined, c->joined);
		ASSERT_EQ_U64(st.lost_user, c->lost_user);
		ASSERT_EQ_U64(folded_total(folded), c->kept);
		/* the join is not disturbed by dropping: no orphan user-stack record */
		ASSERT_EQ_U64(st.orphan_user_stacks, 0);
		free(folded);
		profile_free(p);
	}
	return TEST_OK;
}

/* --kernel-only shows kernel frames only, --user-only user frames only. */
static int test_only_frames(void)
{
	struct profile_options o = { .size = sizeof(o), .no_symbols = 1,
				     .filter_only = PROFILE_ONLY_KERNEL };
	struct profile *p;
	char *folded;

	ASSERT_EQ_INT(load_with(&o, &p), 0);
	folded = folded_of(p);
	ASSERT_TRUE(folded);
	ASSERT_TRUE(strstr(folded, "python3;0xffffffff81002000_[k];0xffffffff81001000_[k] 4\n"));
	ASSERT_TRUE(strstr(folded, "sh;0xffffffff81002000_[k];0xffffffff81001000_[k] 4\n"));
	ASSERT_TRUE(!strstr(folded, "0x40") && !strstr(folded, "0x50"));
	ASSERT_TRUE(!strstr(folded, "[user stack lost"));
	free(folded);
	profile_free(p);

	o.filter_only = PROFILE_ONLY_USER;
	ASSERT_EQ_INT(load_with(&o, &p), 0);
	folded = folded_of(p);
	ASSERT_TRUE(folded);
	ASSERT_EQ_STR(folded, "sh;0x501010;0x501020 6\n"
			      "python3;0x401010;0x401020 3\n");
	free(folded);
	profile_free(p);
	return TEST_OK;
}

/*
 * Filtering by comm with the option gives the same lines as keeping the unfiltered folded
 * output's lines whose first frame is that comm (by hand: grep '^COMM;').
 */
static int test_same_as_folded_by_hand(void)
{
	static const char *const comms[] = { "python3", "sh", "kworker/0:1" };
	struct profile_options all = { .size = sizeof(all), .no_symbols = 1 };
	struct profile *p;
	char *folded;

	ASSERT_EQ_INT(load_with(&all, &p), 0);
	folded = folded_of(p);
	profile_free(p);
	ASSERT_TRUE(folded);
	for (size_t i = 0; i < ARRAY_SIZE(comms); i++) {
		struct profile_options o = all;
		size_t plen = strlen(comms[i]), n = 0;
		char *by_hand = calloc(1, strlen(folded) + 1), *filtered;

		ASSERT_TRUE(by_hand);
		for (const char *l = folded; *l;) {
			const char *nl = strchr(l, '\n');
			size_t len = nl ? (size_t)(nl - l) + 1 : strlen(l);

			if (!strncmp(l, comms[i], plen) && l[plen] == ';') {
				memcpy(by_hand + n, l, len);
				n += len;
			}
			l += len;
		}
		o.filter_comm = comms[i];
		ASSERT_EQ_INT(load_with(&o, &p), 0);
		filtered = folded_of(p);
		ASSERT_TRUE(filtered);
		ASSERT_EQ_STR(filtered, by_hand);
		ASSERT_EQ_U64(folded_total(filtered), folded_total(by_hand));
		free(filtered);
		free(by_hand);
		profile_free(p);
	}
	free(folded);
	return TEST_OK;
}

static int test_report_header(void)
{
	struct profile_options o = { .size = sizeof(o), .no_symbols = 1, .filter_comm = "python3",
				     .filter_time = "1," };
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile *p;

	ASSERT_EQ_INT(load_with(&o, &p), 0);
	ASSERT_EQ_INT(profile_report(p, NULL, &sink), 0);
	ASSERT_TRUE(strstr(ss.s, "# Samples: 4 (kernel 4, user 0, kernel threads 0)\n"
				 "# Filtered: --comm python3 --time 1,: kept 4 of 19 samples "
				 "(21.1%)\n"));
	profile_free(p);
	free(ss.s);
	ss = (struct str_sink){ 0 };

	o = (struct profile_options){ .size = sizeof(o), .no_symbols = 1 };
	ASSERT_EQ_INT(load_with(&o, &p), 0);
	ASSERT_EQ_INT(profile_report(p, NULL, &sink), 0);
	ASSERT_TRUE(!strstr(ss.s, "Filtered"));
	profile_free(p);
	free(ss.s);
	ss = (struct str_sink){ 0 };

	o.filter_only = PROFILE_ONLY_USER;
	o.filter_pid = "200";
	o.filter_tid = "200";
	ASSERT_EQ_INT(load_with(&o, &p), 0);
	ASSERT_EQ_INT(profile_report(p, NULL, &sink), 0);
	ASSERT_TRUE(strstr(ss.s, "# Filtered: --pid 200 --tid 200 --user-only: kept 5 of 19 "
				 "samples (26.3%)\n"));
	profile_free(p);
	free(ss.s);
	return TEST_OK;
}

/* diff's sides: a recording's stacks are filtered; folded text given filters is refused. */
static int test_diff_sides(void)
{
	struct profile_options o = { .size = sizeof(o), .no_symbols = 1, .filter_comm = "sh" };
	struct profile_stacks *s;
	char path[64], errbuf[256] = "";
	int fd = scenario_fd(), ffd;

	ASSERT_TRUE(fd >= 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ASSERT_EQ_INT(profile_stacks_load(path, &o, &s, errbuf, sizeof(errbuf)), 0);
	ASSERT_EQ_U64(profile_stacks_total(s), 10);
	profile_stacks_free(s);
	close(fd);

	ffd = mem_file_from("sh;a;b 3\npython3;c 2\n", 21);
	ASSERT_TRUE(ffd >= 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", ffd);
	ASSERT_EQ_INT(profile_stacks_load(path, &o, &s, errbuf, sizeof(errbuf)), -EINVAL);
	ASSERT_TRUE(strstr(errbuf, "folded stacks cannot be filtered (--comm sh)"));
	o.filter_comm = NULL;
	ASSERT_EQ_INT(profile_stacks_load(path, &o, &s, errbuf, sizeof(errbuf)), 0);
	ASSERT_EQ_U64(profile_stacks_total(s), 5);
	profile_stacks_free(s);
	close(ffd);
	return TEST_OK;
}

struct check_case {
	const char *comm, *pid, *tid, *time;
	int only;
	const char *msg; /* NULL: valid */
};

static const struct check_case checks[] = {
	{ "a,b", "1,2", "3", "1.5,3", 1, NULL },
	{ NULL, NULL, NULL, "1.5,", 2, NULL },
	{ NULL, NULL, NULL, ",3", 0, NULL },
	{ NULL, NULL, NULL, "2,2", 0, NULL },
	{ NULL, NULL, NULL, "0.000000001,1.", 0, NULL },
	{ NULL, NULL, NULL, "3,1", 0, "--time '3,1': END before START" },
	{ NULL, NULL, NULL, "3", 0, "--time '3': want START,END" },
	{ NULL, NULL, NULL, ",", 0, "--time ',': want START,END" },
	{ NULL, NULL, NULL, "1,2,3", 0, "--time '1,2,3': want START,END" },
	{ NULL, NULL, NULL, "a,3", 0, "--time 'a,3': not a number of seconds" },
	{ NULL, NULL, NULL, "-1,3", 0, "--time '-1,3': not a number of seconds" },
	{ NULL, NULL, NULL, "1.0000000001,", 0, "--time '1.0000000001,': not a number" },
	{ NULL, NULL, NULL, "99999999999999999999,", 0, "--time '99999999999999999999,': too "
							      "large" },
	{ NULL, "x", NULL, NULL, 0, "--pid 'x': not a number" },
	{ NULL, "1,x2", NULL, NULL, 0, "--pid 'x2': not a number" },
	{ NULL, "-1", NULL, NULL, 0, "--pid '-1': not a number" },
	{ NULL, "2147483648", NULL, NULL, 0, "--pid '2147483648': out of range" },
	{ NULL, NULL, "1,,2", NULL, 0, "--tid '1,,2': empty item in the list" },
	{ NULL, NULL, "", NULL, 0, "--tid '': empty list" },
	{ "a,", NULL, NULL, NULL, 0, "--comm 'a,': empty item in the list" },
	{ NULL, NULL, NULL, NULL, 3, "filter_only 3" },
};

static int test_check(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
		const struct check_case *c = &checks[i];
		struct profile_options o = { .size = sizeof(o), .filter_comm = c->comm,
					     .filter_pid = c->pid, .filter_tid = c->tid,
					     .filter_time = c->time, .filter_only = c->only };
		char errbuf[256] = "";
		int err = profile_filter_check(&o, errbuf, sizeof(errbuf));

		if (c->msg ? !strstr(errbuf, c->msg) : err != 0)
			fprintf(stderr, "check %zu: %d '%s'\n", i, err, errbuf);
		ASSERT_EQ_INT(err, c->msg ? -EINVAL : 0);
		if (c->msg)
			ASSERT_TRUE(strstr(errbuf, c->msg) == errbuf);
	}
	/* profile_load refuses them too, with the same line */
	{
		struct profile_options o = { .size = sizeof(o), .filter_time = "3,1" };
		char errbuf[256] = "";
		struct profile *p = NULL;
		int fd = scenario_fd();

		ASSERT_TRUE(fd >= 0);
		ASSERT_EQ_INT(profile_load_fd(fd, "x", &o, &p, errbuf, sizeof(errbuf)), -EINVAL);
		ASSERT_EQ_STR(errbuf, "--time '3,1': END before START");
		close(fd);
	}
	/* an older caller's smaller options struct has no filters */
	{
		struct profile_options o = { .size = offsetof(struct profile_options, filter_comm),
					     .filter_comm = "sh" };
		struct profile_stats st;
		struct profile *p;

		ASSERT_EQ_INT(load_with(&o, &p), 0);
		profile_get_stats(p, &st);
		ASSERT_EQ_U64(st.samples, TOTAL);
		profile_free(p);
	}
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "kept counts of each filter and combinations", test_kept_counts },
	{ "--kernel-only and --user-only frames", test_only_frames },
	{ "--comm equals grepping the folded output", test_same_as_folded_by_hand },
	{ "report header says what was filtered", test_report_header },
	{ "diff sides: recordings filtered, folded refused", test_diff_sides },
	{ "filter syntax checks", test_check },
};

TEST_MAIN(tests)
