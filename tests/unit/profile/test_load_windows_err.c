// SPDX-License-Identifier: MIT
// profile_stacks_load_windows() failing after some windows' sets are made (the set of the
// second window cannot be made: profile_stacks_from_profile() is wrapped at link time, meson's
// -Wl,--wrap) leaves the caller's @outs as they were, as its header says: written only on
// success. The sets made before the failure were stored there and freed, and stayed there.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/profile.h>

#include "profile_internal.h"
#include "rec_helpers.h"
#include "test.h"

#define MS 1000000ull

int __real_profile_stacks_from_profile(const struct profile *p, struct profile_stacks **out);
int __wrap_profile_stacks_from_profile(const struct profile *p, struct profile_stacks **out);

static int fail_at = -1; /* the call (0: the first) that fails with -ENOMEM; -1: none */
static int calls;

int __wrap_profile_stacks_from_profile(const struct profile *p, struct profile_stacks **out)
{
	if (calls++ == fail_at)
		return -ENOMEM;
	return __real_profile_stacks_from_profile(p, out);
}

/* 300 kernel samples, one every 10 ms from 0 to 2.99 s, of one thread. */
static int write_rec(const char *path)
{
	static const uint64_t kips[] = { 0xffffffff81001000ULL, 0xffffffff81002000ULL, 0 };
	struct hvp_thread t = mk_thread(10, 10, "work", 0);
	struct hvp_sample *s = malloc(sizeof(*s));
	struct recfile_writer *w = NULL;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int err = fd < 0 || !s ? -EIO : recfile_writer_open(fd, &w);

	err = err ? err : recfile_write_meta(w, "counter", "cpu-clock");
	err = err ? err : recfile_write_thread(w, &t);
	for (int i = 0; i < 300 && !err; i++) {
		mk_sample(s, 10, 10, 0, HVP_WALK_NONE, 0, kips, NULL);
		s->time_ns = (uint64_t)i * 10 * MS;
		err = recfile_write_sample(w, s);
	}
	err = err ? err : recfile_write_end(w, HVP_END_EXIT_DEVICE, 0);
	if (w) {
		int cerr = recfile_writer_close(w);

		err = err ? err : cerr;
	}
	if (fd >= 0)
		close(fd);
	free(s);
	return err;
}

static char rec_path[] = "/tmp/hvprof-test-load-windows-err-XXXXXX";

/* Each failure point: the sets before it were made and are gone; @outs holds what it held. */
static int test_outs_untouched_on_failure(void)
{
	static const struct profile_time_window wins[] = {
		{ 0, 999 * MS }, { 1000 * MS, 1999 * MS }, { 2000 * MS, UINT64_MAX }
	};
	struct profile_stacks *outs[3], *mark = (struct profile_stacks *)&calls;
	struct profile_options o = { .size = sizeof(o) };
	char errbuf[256];

	for (int f = 0; f < 3; f++) {
		for (int k = 0; k < 3; k++)
			outs[k] = mark; /* not a set: freeing it would be caught */
		fail_at = f;
		calls = 0;
		ASSERT_EQ_INT(profile_stacks_load_windows(rec_path, &o, wins, 3, outs, errbuf,
							  sizeof(errbuf)),
			      -ENOMEM);
		ASSERT_EQ_INT(calls, f + 1);
		for (int k = 0; k < 3; k++)
			ASSERT_TRUE(outs[k] == mark);
	}
	fail_at = -1;
	calls = 0;
	ASSERT_EQ_INT(profile_stacks_load_windows(rec_path, &o, wins, 3, outs, errbuf,
						  sizeof(errbuf)),
		      0);
	for (int k = 0; k < 3; k++) {
		ASSERT_TRUE(outs[k] && outs[k] != mark);
		ASSERT_EQ_U64(outs[k]->total, 100);
		profile_stacks_free(outs[k]);
	}
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "a failed load_windows leaves the caller's outs as they were",
	  test_outs_untouched_on_failure },
};

int main(void)
{
	int fd = mkstemp(rec_path), ret;

	if (fd < 0)
		return 1;
	close(fd);
	if (write_rec(rec_path)) {
		unlink(rec_path);
		return 1;
	}
	ret = test_run_all(tests, ARRAY_SIZE(tests));
	unlink(rec_path);
	return ret;
}
