// SPDX-License-Identifier: MIT
// The recording file of `record`: written under a temporary name beside it until the guest has
// started (or the VM accepted the attach), then put in place, an existing recording kept as
// FILE.old, as perf does. A run that never starts leaves every file as it was.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "cli.h"

int record_output_open(struct record_output *o, const char *path)
{
	struct stat st;
	int fd, err;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	if (snprintf(o->path, sizeof(o->path), "%s", path) >= (int)sizeof(o->path)) {
		cli_error("cannot create recording %s: %s", path, hvp_strerror(-ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		cli_error("cannot create recording %s: %s", path, hvp_strerror(-EISDIR));
		return -EISDIR;
	}
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* /dev/null, a FIFO, a terminal: written as it is, nothing to keep */
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0) {
			err = -errno;
			cli_error("cannot create recording %s: %s", path, hvp_strerror(err));
			return err;
		}
		o->fd = fd;
		return 0;
	}
	/* a name of our own beside it (same directory: the rename stays atomic) */
	for (unsigned int i = 0;; i++) {
		if (snprintf(o->tmp, sizeof(o->tmp), "%s.partial-%d-%u", path, (int)getpid(), i) >=
		    (int)sizeof(o->tmp)) {
			o->tmp[0] = '\0';
			cli_error("cannot create recording %s: %s", path,
				  hvp_strerror(-ENAMETOOLONG));
			return -ENAMETOOLONG;
		}
		fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST || i >= 100)
			break;
	}
	if (fd < 0) {
		err = -errno;
		o->tmp[0] = '\0';
		cli_error("cannot create recording %s: %s", path, hvp_strerror(err));
		return err;
	}
	o->fd = fd;
	return 0;
}

int record_output_commit(struct record_output *o)
{
	char old[PATH_MAX + 8];
	struct stat st;
	int err;

	if (!o->tmp[0])
		return 0; /* written in place, or already committed */
	/* Keep an existing recording as .old, as perf does, but only a regular, non-empty file. */
	if (stat(o->path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		snprintf(old, sizeof(old), "%s.old", o->path);
		if (rename(o->path, old) != 0) {
			err = -errno;
			cli_error("cannot move the previous %s to %s: %s", o->path, old,
				  hvp_strerror(err));
			return err;
		}
	}
	if (rename(o->tmp, o->path) != 0) {
		err = -errno;
		cli_error("cannot create recording %s (from %s): %s", o->path, o->tmp,
			  hvp_strerror(err));
		return err;
	}
	o->tmp[0] = '\0';
	return 0;
}

void record_output_discard(struct record_output *o)
{
	if (o->tmp[0] && unlink(o->tmp) != 0)
		cli_error("cannot remove %s: %s", o->tmp, hvp_strerror(-errno));
	o->tmp[0] = '\0';
}
