// SPDX-License-Identifier: MIT
// The parts of `hvprof record --attach` (cli/record_attach.c) that unit tests run without a VM
// (tests/unit/control): removing a recording that was never started, with the checks that make
// it never remove a path the client does not own; waiting for the VM without losing a Ctrl-C.
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "control.h"

int ctl_output_discard(const char *path, int fd, bool created)
{
	struct stat by_fd, by_path;

	if (!path || fd < 0)
		return -EINVAL;
	if (!created)
		return -EPERM; /* it was there before us (/dev/null, a FIFO, someone's file) */
	if (fstat(fd, &by_fd) != 0 || lstat(path, &by_path) != 0)
		return -errno;
	/* the same regular file we created: not replaced, not a link to something else */
	if (!S_ISREG(by_path.st_mode) || by_fd.st_dev != by_path.st_dev ||
	    by_fd.st_ino != by_path.st_ino)
		return -ESTALE;
	if (by_path.st_size != 0)
		return -ENOTEMPTY; /* somebody wrote to it: a recording, or not ours to judge */
	return unlink(path) == 0 ? 0 : -errno;
}

int ctl_wait_readable(int fd, uint64_t timeout_ms, const sigset_t *wait_mask)
{
	struct pollfd p = { fd, POLLIN, 0 };
	struct timespec ts;
	int r;

	if (timeout_ms > INT_MAX)
		timeout_ms = INT_MAX; /* the caller loops until its deadline */
	ts.tv_sec = (time_t)(timeout_ms / 1000);
	ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000l;
	/* the signals are unblocked only inside ppoll, atomically: one that came since the
	 * caller's check is pending and ends the wait at once (a poll after the check loses it) */
	r = ppoll(&p, 1, &ts, wait_mask);
	if (r < 0)
		return -errno;
	return r > 0 ? 1 : 0;
}
