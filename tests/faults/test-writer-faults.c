// SPDX-License-Identifier: MIT
// The recording writer when the output fails: a full disk at the first write (/dev/full), a disk
// that fills during the run (RLIMIT_FSIZE), a reader that went away (EPIPE). The first error is
// sticky and returned by every later call, and everything written before it reads back intact.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <hvprof/profile.h>

#include "test.h"

static void fill_sample(struct hvp_sample *s, uint64_t i)
{
	memset(s, 0, sizeof(*s));
	s->time_ns = i;
	s->rip = 0xffffffff81000000ull + i;
	s->pid = 1;
	s->tgid = 1;
	s->period = 1000000;
	s->n_kernel = 16;
	for (unsigned int k = 0; k < 16; k++)
		s->kernel_ips[k] = 0xffffffff81000000ull + 0x10 * k;
}

/* A full disk before anything is written: the error comes at once, before any guest runs. */
static int test_dev_full(void)
{
	struct recfile_writer *w = NULL;
	int fd = open("/dev/full", O_WRONLY | O_CLOEXEC), err;

	if (fd < 0) {
		printf("SKIP: no /dev/full: %s\n", strerror(errno));
		return TEST_SKIP;
	}
	err = recfile_writer_open(fd, &w);
	close(fd);
	ASSERT_EQ_INT(err, -ENOSPC);
	ASSERT_TRUE(w == NULL);
	return TEST_OK;
}

/*
 * The disk fills during the run: the file may not grow past @limit bytes. Samples go in until a
 * flush fails; that error sticks; the file holds every record of the flushes that succeeded, and
 * loading it keeps them (the damaged tail is reported, not fatal).
 */
static int test_disk_fills(void)
{
	char path[] = "/tmp/hvprof-faults-XXXXXX";
	const rlim_t limit = 200000; /* about three writer buffers */
	struct recfile_writer *w = NULL;
	struct recfile_reader *r = NULL;
	struct recfile_record rec;
	struct rlimit old, lim;
	struct sigaction sa, old_sa;
	struct hvp_sample s;
	uint64_t written = 0, read_back = 0, i;
	int fd, err = 0, ret = TEST_FAIL, n;

	fd = mkstemp(path);
	ASSERT_TRUE(fd >= 0);
	/* Past RLIMIT_FSIZE, write(2) fails with EFBIG once SIGXFSZ is ignored. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGXFSZ, &sa, &old_sa);
	getrlimit(RLIMIT_FSIZE, &old);
	lim = old;
	lim.rlim_cur = limit;
	if (setrlimit(RLIMIT_FSIZE, &lim) != 0) {
		printf("SKIP: setrlimit(RLIMIT_FSIZE): %s\n", strerror(errno));
		ret = TEST_SKIP;
		goto out;
	}
	if (recfile_writer_open(fd, &w) != 0)
		goto out_rlimit;
	for (i = 0; i < 10000; i++) {
		fill_sample(&s, i);
		err = recfile_write_sample(w, &s);
		if (err)
			break;
		written++;
	}
	printf("disk full after %llu samples accepted: %s\n", (unsigned long long)written,
	       strerror(-err));
	if (err != -EFBIG) {
		fprintf(stderr, "expected EFBIG, got %d\n", err);
		goto out_writer;
	}
	/* Sticky: every later call returns the same error, and close reports it. */
	if (recfile_write_end(w, HVP_END_SIGNAL, 0) != -EFBIG ||
	    recfile_writer_flush(w) != -EFBIG) {
		fprintf(stderr, "the write error is not sticky\n");
		goto out_writer;
	}
	err = recfile_writer_close(w);
	w = NULL;
	if (err != -EFBIG) {
		fprintf(stderr, "close returned %d, not the sticky -EFBIG\n", err);
		goto out_rlimit;
	}
	setrlimit(RLIMIT_FSIZE, &old);

	/* What reached the disk reads back: whole records up to where the disk filled. */
	if (recfile_reader_open(path, &r, NULL, 0) != 0)
		goto out_rlimit;
	while ((n = recfile_reader_next(r, &rec)) > 0)
		read_back += rec.type == RECFILE_SAMPLE;
	printf("read back %llu samples; reader: %s\n", (unsigned long long)read_back,
	       recfile_reader_error(r) ? recfile_reader_error(r) : "clean end");
	recfile_reader_close(r);
	/* At least the two buffers flushed before the failing one, and no more than accepted. */
	if (read_back == 0 || read_back > written ||
	    read_back * (72 + 12 + 16 * 8) < limit - 2 * 65536) {
		fprintf(stderr, "%llu of %llu samples survived\n", (unsigned long long)read_back,
			(unsigned long long)written);
		goto out_rlimit;
	}
	ret = TEST_OK;
	goto out_rlimit;

out_writer:
	if (recfile_writer_close(w)) { /* already failing */ }
out_rlimit:
	setrlimit(RLIMIT_FSIZE, &old);
out:
	sigaction(SIGXFSZ, &old_sa, NULL);
	close(fd);
	unlink(path);
	return ret;
}

/* The reader of a pipe went away (hvprof record -o /dev/stdout | head): EPIPE, sticky. */
static int test_broken_pipe(void)
{
	struct recfile_writer *w = NULL;
	struct sigaction sa, old_sa;
	struct hvp_sample s;
	int p[2], err = 0;
	uint64_t i;

	ASSERT_TRUE(pipe(p) == 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, &old_sa);
	ASSERT_EQ_INT(recfile_writer_open(p[1], &w), 0);
	close(p[0]);
	for (i = 0; i < 10000 && !err; i++) {
		fill_sample(&s, i);
		err = recfile_write_sample(w, &s);
	}
	ASSERT_EQ_INT(err, -EPIPE);
	ASSERT_EQ_INT(recfile_write_counter(w, "samples", i), -EPIPE);
	ASSERT_EQ_INT(recfile_writer_close(w), -EPIPE);
	close(p[1]);
	sigaction(SIGPIPE, &old_sa, NULL);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "/dev/full: the error comes at open", test_dev_full },
	{ "disk fills mid-recording: sticky error, records before it kept", test_disk_fills },
	{ "broken pipe: sticky EPIPE", test_broken_pipe },
};

TEST_MAIN(tests)
