// SPDX-License-Identifier: MIT
// Fuzz target: folded-stack input (profile_stacks_read_folded) as diff reads it, then the diff
// itself (profile_diff_compute, text and JSON output, differential flamegraph).
// Input: BASE and NEW folded text separated by the first 0xff byte (none: NEW = BASE).
// Invariants: parse errors are the documented ones and come with a message; nothing crashes.
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hvprof/profile.h>

#include "fuzz.h"

static int fz_discard(void *ctx, const void *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	(void)len;
	return 0;
}

static int fz_parse(const uint8_t *d, size_t len, struct profile_stacks **out)
{
	char errbuf[256] = "";
	int fd = memfd_create("fuzz-folded", MFD_CLOEXEC), err;

	if (fd < 0)
		return -EIO;
	if ((len && write(fd, d, len) != (ssize_t)len) || lseek(fd, 0, SEEK_SET)) {
		close(fd);
		return -EIO;
	}
	err = profile_stacks_read_folded(fd, "fuzz", out, errbuf, sizeof(errbuf));
	close(fd);
	FUZZ_LOG("folded: %d %s\n", err, errbuf);
	FUZZ_CHECK(err == 0 || err == -EBADMSG || err == -ERANGE || err == -ENOMEM);
	if (err == -EBADMSG || err == -ERANGE)
		FUZZ_CHECK(errbuf[0] != '\0');
	return err;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *sep = memchr(data, 0xff, size);
	size_t base_len = sep ? (size_t)(sep - data) : size;
	struct profile_stacks *base = NULL, *new_ = NULL;
	struct profile_diff_options dopt = { .size = sizeof(dopt), .threshold_pct = -1 };
	struct profile_diff_svg_options sopt = { .size = sizeof(sopt) };
	struct profile_sink sink = { fz_discard, NULL };
	struct profile_diff *d = NULL;

	if (fz_parse(data, base_len, &base))
		return 0;
	if (sep) {
		if (fz_parse(sep + 1, size - base_len - 1, &new_)) {
			profile_stacks_free(base);
			return 0;
		}
	}
	if (profile_diff_compute(base, new_ ? new_ : base, &dopt, &d) == 0) {
		size_t n;

		(void)profile_diff_entries(d, 1, &n);
		(void)profile_diff_entries(d, 0, &n);
		(void)profile_diff_worst_regression(d);
		if (profile_diff_write(d, "base", "new", 0, &sink)) { /* only crashes are bugs */ }
		if (profile_diff_write(d, "base", "new", 1, &sink)) { }
		profile_diff_free(d);
	}
	if (profile_diff_flamegraph(base, new_ ? new_ : base, &sopt, &sink)) { }
	sopt.reverse = 1;
	sopt.min_samples_set = 1;
	if (profile_diff_flamegraph(base, new_ ? new_ : base, &sopt, &sink)) { }
	profile_stacks_free(new_);
	profile_stacks_free(base);
	return 0;
}
