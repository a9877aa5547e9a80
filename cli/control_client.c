// SPDX-License-Identifier: MIT
// The parts of `hvprof record --attach` (cli/record_attach.c) that unit tests run without a VM
// (tests/unit/control): removing a recording that was never started, with the checks that make
// it never remove a path the client does not own.
#include <errno.h>
#include <sys/stat.h>
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
