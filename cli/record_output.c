// SPDX-License-Identifier: MIT
// The recording file of `record`: written under a temporary name beside it until the guest has
// started (or the VM accepted the attach), then put in place, an existing recording kept as
// FILE.old, as perf does. A run that never starts leaves every file as it was.
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "cli.h"

/* Open @o->path in place (nothing there to keep: a device, a FIFO, an empty file; @empty: a
 * regular empty one, emptied again by record_output_discard). */
static int open_in_place(struct record_output *o, bool empty)
{
	int fd = open(o->path, O_WRONLY | O_TRUNC | O_CLOEXEC), err;

	if (fd < 0) {
		err = -errno;
		cli_error("cannot create recording %s: %s", o->path, hvp_strerror(err));
		return err;
	}
	o->fd = fd;
	o->in_place_empty = empty;
	return 0;
}

/* Create @o->tmp as "@prefix@sep.partial-PID-N" (O_EXCL, the first N free). */
static int create_tmp(struct record_output *o, const char *prefix, const char *sep)
{
	int fd = -1;

	for (unsigned int i = 0; i <= 100; i++) {
		if (snprintf(o->tmp, sizeof(o->tmp), "%s%s.partial-%d-%u", prefix, sep,
			     (int)getpid(), i) >= (int)sizeof(o->tmp)) {
			errno = ENAMETOOLONG;
			break;
		}
		fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0) {
		o->tmp[0] = '\0';
		return -errno;
	}
	o->fd = fd;
	return 0;
}

int record_output_open(struct record_output *o, const char *path)
{
	char dir[PATH_MAX], old[PATH_MAX + 8];
	struct stat st;
	int err;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	if (snprintf(o->path, sizeof(o->path), "%s", path) >= (int)sizeof(o->path)) {
		cli_error("cannot create recording %s: %s", path, hvp_strerror(-ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			cli_error("cannot create recording %s: %s", path, hvp_strerror(-EISDIR));
			return -EISDIR;
		}
		/* /dev/null, a FIFO, a terminal, an empty file: written as it is, nothing to
		 * keep (an empty file keeps its mode and inode, as before) */
		if (!S_ISREG(st.st_mode) || st.st_size == 0)
			return open_in_place(o, S_ISREG(st.st_mode));
		/* the commit moves it to .old: what would refuse that is said now, before the
		 * guest boots */
		snprintf(old, sizeof(old), "%s.old", path);
		if (stat(old, &st) == 0 && S_ISDIR(st.st_mode)) {
			cli_error("cannot keep the previous %s as %s: %s", path, old,
				  hvp_strerror(-EISDIR));
			return -EISDIR;
		}
	}
	/* a name of our own beside it (same directory: the rename stays atomic); a name near
	 * NAME_MAX leaves no room for the suffix: then a hidden one in the same directory */
	err = create_tmp(o, path, "");
	if (err == -ENAMETOOLONG) {
		snprintf(dir, sizeof(dir), "%s", path);
		err = create_tmp(o, dirname(dir), "/.hvprof");
	}
	if (err) {
		cli_error("cannot create recording %s: %s", path, hvp_strerror(err));
		return err;
	}
	return 0;
}

int record_output_commit(struct record_output *o)
{
	char old[PATH_MAX + 8];
	struct stat st;
	bool moved = false;
	int err;

	o->in_place_empty = false; /* the run's now: what it wrote stays */
	if (!o->tmp[0])
		return 0; /* written in place, or already committed */
	/* Keep an existing recording as .old, as perf does, but only a regular, non-empty file. */
	snprintf(old, sizeof(old), "%s.old", o->path);
	if (stat(o->path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		if (rename(o->path, old) != 0) {
			err = -errno;
			cli_error("cannot move the previous %s to %s: %s", o->path, old,
				  hvp_strerror(err));
			return err;
		}
		moved = true;
	}
	if (rename(o->tmp, o->path) != 0) {
		err = -errno;
		cli_error("cannot create recording %s: %s", o->path, hvp_strerror(err));
		/* put the previous one back; if even that fails, say where it is */
		if (moved && rename(old, o->path) != 0)
			cli_error("the previous %s stays as %s: %s", o->path, old,
				  hvp_strerror(-errno));
		return err;
	}
	o->tmp[0] = '\0';
	return 0;
}

void record_output_keep(struct record_output *o)
{
	if (o->tmp[0])
		fprintf(stderr, "hvprof: the recording stays %s\n", o->tmp);
	o->tmp[0] = '\0';
	o->in_place_empty = false;
}

void record_output_discard(struct record_output *o)
{
	if (o->tmp[0] && unlink(o->tmp) != 0)
		cli_error("cannot remove %s: %s", o->tmp, hvp_strerror(-errno));
	o->tmp[0] = '\0';
	/* the empty file written in place is empty again (its header gone) */
	if (o->in_place_empty && o->fd >= 0 && ftruncate(o->fd, 0) != 0)
		cli_error("cannot empty %s again: %s", o->path, hvp_strerror(-errno));
	o->in_place_empty = false;
}
