// SPDX-License-Identifier: MIT
// The host side of a disk: a raw image file or block device opened, locked against a second
// writer (OFD locks), refused when it is not a raw image (qcow2 by its magic, directories,
// empty files), read and written with preadv/pwritev, and for snapshot disks a private overlay:
// written sectors go to an unlinked sparse temporary file, a bitmap says which, and the image
// is never opened for writing.
#define pr_fmt(fmt) "disk: " fmt
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "../vmm_internal.h"
#include "virtio.h"

#define QCOW_MAGIC "QFI\xfb"

/* The image's size in bytes: a regular file's length or a block device's (BLKGETSIZE64). */
static int disk_size(struct disk *d, const struct stat *st, uint64_t *bytes)
{
	if (S_ISREG(st->st_mode)) {
		*bytes = (uint64_t)st->st_size;
		return 0;
	}
	if (ioctl(d->fd, BLKGETSIZE64, bytes) < 0) {
		int err = -errno;

		pr_err("%s: cannot read the block device's size: %s", d->path, hvp_strerror(err));
		return err;
	}
	return 0;
}

/* Shared for read-only and snapshot disks, exclusive for read-write ones: a second hvprof
 * (or QEMU, which takes the same kind of lock) cannot write an image another one reads. */
static int disk_lock(struct disk *d, bool exclusive)
{
	struct flock fl = { .l_type = exclusive ? F_WRLCK : F_RDLCK, .l_whence = SEEK_SET };

	if (fcntl(d->fd, F_OFD_SETLK, &fl) == 0)
		return 0;
	if (errno == EAGAIN || errno == EACCES) {
		if (exclusive)
			pr_err("%s is in use by another process (it holds a lock on it): stop it, "
			       "or give the disk ',snapshot' or ',ro' here if both only read it",
			       d->path);
		else
			pr_err("%s is being written by another process (it holds a write lock on "
			       "it): stop it first (',snapshot' and ',ro' only read, but not an "
			       "image another one writes)", d->path);
		return -EBUSY;
	}
	return 0; /* a file system without locks: go on unlocked */
}

/* What the first bytes say: a qcow2 image is refused with the command that converts it. */
static int disk_check_format(struct disk *d)
{
	char magic[4];
	ssize_t n = pread(d->fd, magic, sizeof(magic), 0);

	if (n < 0) {
		int err = -errno;

		pr_err("%s: cannot read: %s", d->path, hvp_strerror(err));
		return err;
	}
	if (n == (ssize_t)sizeof(magic) && !memcmp(magic, QCOW_MAGIC, 4)) {
		pr_err("%s is a qcow2 image; hvprof boots raw images: convert it with "
		       "'qemu-img convert -O raw %s %s.raw'", d->path, d->path, d->path);
		return -ENOTSUP;
	}
	return 0;
}

static int disk_open_fd(struct disk *d, bool writable)
{
	int err;

	d->fd = open(d->path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (d->fd >= 0)
		return 0;
	err = -errno;
	if (err == -EISDIR)
		pr_err("%s is a directory, not a disk image", d->path);
	else if (writable && (err == -EACCES || err == -EROFS))
		pr_err("cannot open %s for writing: %s (add ',ro' or ',snapshot')", d->path,
		       hvp_strerror(err));
	else
		pr_err("cannot open disk image %s: %s", d->path, hvp_strerror(err));
	return err;
}

int disk_open(struct disk *d, const struct vmm_disk *cfg)
{
	bool writable = !cfg->readonly && !cfg->snapshot;
	uint64_t bytes = 0;
	struct stat st;
	int err;

	memset(d, 0, sizeof(*d));
	d->fd = d->overlay_fd = -1;
	d->readonly = cfg->readonly;
	d->path = strdup(cfg->path ? cfg->path : "");
	if (!d->path)
		return -ENOMEM;
	err = disk_open_fd(d, writable);
	if (err)
		goto err_close;
	if (fstat(d->fd, &st) != 0) {
		err = -errno;
		pr_err("%s: cannot stat: %s", d->path, hvp_strerror(err));
		goto err_close;
	}
	if (S_ISDIR(st.st_mode)) {
		pr_err("%s is a directory, not a disk image", d->path);
		err = -EISDIR;
		goto err_close;
	}
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		pr_err("%s is neither a regular file nor a block device", d->path);
		err = -EINVAL;
		goto err_close;
	}
	err = disk_size(d, &st, &bytes);
	if (!err)
		err = disk_lock(d, writable);
	if (!err)
		err = disk_check_format(d);
	if (err)
		goto err_close;
	if (bytes < DISK_SECTOR) {
		pr_err("%s is %s: a disk image holds at least one 512-byte sector", d->path,
		       bytes ? "smaller than a sector" : "empty");
		err = -ENODATA;
		goto err_close;
	}
	d->sectors = bytes / DISK_SECTOR;
	d->tail_bytes = (unsigned int)(bytes % DISK_SECTOR);
	return 0;

err_close:
	disk_close(d);
	return err;
}

/* The overlay of a snapshot disk: an unlinked sparse file in $TMPDIR (else /var/tmp). */
int disk_overlay(struct disk *d)
{
	const char *dir = getenv("TMPDIR");
	char tmpl[PATH_MAX];
	int err;

	if (!dir || !dir[0])
		dir = "/var/tmp";
	d->overlay_fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (d->overlay_fd < 0) {
		/* a file system without O_TMPFILE: a named file, unlinked at once */
		snprintf(tmpl, sizeof(tmpl), "%s/hvprof-overlay-XXXXXX", dir);
		d->overlay_fd = mkostemp(tmpl, O_CLOEXEC);
		if (d->overlay_fd < 0) {
			err = -errno;
			pr_err("%s: cannot create the snapshot overlay in %s: %s", d->path, dir,
			       hvp_strerror(err));
			return err;
		}
		unlink(tmpl);
	}
	if (ftruncate(d->overlay_fd, (off_t)(d->sectors * DISK_SECTOR)) != 0) {
		err = -errno;
		pr_err("%s: cannot size the snapshot overlay in %s: %s", d->path, dir,
		       hvp_strerror(err));
		return err;
	}
	d->written = calloc((d->sectors + 63) / 64, sizeof(*d->written));
	return d->written ? 0 : -ENOMEM;
}

void disk_close(struct disk *d)
{
	if (d->fd >= 0)
		close(d->fd); /* releases the OFD lock */
	if (d->overlay_fd >= 0)
		close(d->overlay_fd);
	free(d->written);
	free(d->path);
	memset(d, 0, sizeof(*d));
	d->fd = d->overlay_fd = -1;
}

/* preadv/pwritev until @len bytes moved (short transfers and EINTR resumed). */
static int io_full(int fd, const struct iovec *iov, unsigned int n, uint64_t off, uint64_t len,
		   bool write)
{
	struct iovec cur[VIRTQ_MAX_SEGS];
	uint64_t done = 0;

	while (done < len) {
		int cnt = iov_slice(iov, n, done, len - done, cur, VIRTQ_MAX_SEGS);
		ssize_t r;

		if (cnt < 0)
			return cnt;
		r = write ? pwritev(fd, cur, cnt, (off_t)(off + done))
			  : preadv(fd, cur, cnt, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO; /* the image shrank under us */
		done += (uint64_t)r;
	}
	return 0;
}

static bool sector_written(const struct disk *d, uint64_t s)
{
	/* SAFETY: s < d->sectors; the bitmap has (sectors + 63) / 64 words. */
	return d->written[s / 64] & (1ull << (s % 64));
}

int disk_read(struct disk *d, const struct iovec *iov, unsigned int n, uint64_t off,
	      uint64_t len)
{
	struct iovec part[VIRTQ_MAX_SEGS];
	uint64_t s, end;

	if (!d->written)
		return io_full(d->fd, iov, n, off, len, false);
	/* snapshot: runs of sectors from the overlay or from the image */
	s = off / DISK_SECTOR;
	end = (off + len) / DISK_SECTOR;
	while (s < end) {
		bool ov = sector_written(d, s);
		uint64_t e = s + 1;
		int cnt, err;

		while (e < end && sector_written(d, e) == ov)
			e++;
		cnt = iov_slice(iov, n, s * DISK_SECTOR - off, (e - s) * DISK_SECTOR, part,
				VIRTQ_MAX_SEGS);
		if (cnt < 0)
			return cnt;
		err = io_full(ov ? d->overlay_fd : d->fd, part, (unsigned int)cnt,
			      s * DISK_SECTOR, (e - s) * DISK_SECTOR, false);
		if (err)
			return err;
		s = e;
	}
	return 0;
}

int disk_write(struct disk *d, const struct iovec *iov, unsigned int n, uint64_t off,
	       uint64_t len)
{
	int err;

	if (d->readonly)
		return -EROFS;
	err = io_full(d->written ? d->overlay_fd : d->fd, iov, n, off, len, true);
	if (err || !d->written)
		return err;
	for (uint64_t s = off / DISK_SECTOR; s < (off + len) / DISK_SECTOR; s++)
		d->written[s / 64] |= 1ull << (s % 64); /* SAFETY: s < sectors (caller's check) */
	return 0;
}

int disk_flush(struct disk *d)
{
	if (d->written || d->readonly)
		return 0; /* the overlay dies with the run; a read-only image has nothing */
	return fdatasync(d->fd) == 0 ? 0 : -errno;
}
