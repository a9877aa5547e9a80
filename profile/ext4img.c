// SPDX-License-Identifier: MIT
// Files read out of a guest's ext2/3/4 disk image with libext2fs: no mount, no copy on disk.
// The image is opened read-only (a VM may use it at the same time: in snapshot mode it does not
// change; a read-write guest may leave a journal not yet replayed, whose latest changes are then
// not seen). Paths resolve inside the image, symlinks included (absolute ones from its root).
#define pr_fmt(fmt) "ext4img: " fmt

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ext2fs/ext2fs.h>

#include <hvprof/log.h>

#include "symbolize_internal.h"

#define EXT4IMG_MAX_FILE (1ull << 30) /* bytes: larger files are not ELF files we symbolize */
#define EXT4IMG_CHUNK 65536

struct ext4img {
	ext2_filsys fs;
	char *path;
};

/* errno of a libext2fs error code: those below 256 are errno values, the rest EXT2_ET_*. */
static int ext4img_errno(errcode_t ec)
{
	if (ec > 0 && ec < 256)
		return -(int)ec;
	if (ec == EXT2_ET_FILE_NOT_FOUND || ec == EXT2_ET_NO_DIRECTORY)
		return -ENOENT;
	if (ec == EXT2_ET_NO_MEMORY)
		return -ENOMEM;
	if (ec == EXT2_ET_SYMLINK_LOOP)
		return -ELOOP;
	return -EBADMSG;
}

int ext4img_open(const char *path, struct ext4img **out)
{
	struct ext4img *img;
	errcode_t ec;

	img = calloc(1, sizeof(*img));
	if (!img)
		return -ENOMEM;
	img->path = strdup(path);
	if (!img->path) {
		free(img);
		return -ENOMEM;
	}
	/* read-only (no EXT2_FLAG_RW); checksum errors do not hide the rest of the image */
	ec = ext2fs_open2(path, NULL, EXT2_FLAG_64BITS | EXT2_FLAG_IGNORE_CSUM_ERRORS, 0, 0,
			  unix_io_manager, &img->fs);
	if (ec) {
		int err = ext4img_errno(ec);

		pr_info("%s: not an ext2/3/4 image readable by libext2fs: %s", path,
			error_message(ec));
		free(img->path);
		free(img);
		return err;
	}
	*out = img;
	return 0;
}

void ext4img_close(struct ext4img *img)
{
	if (!img)
		return;
	if (img->fs)
		ext2fs_close_free(&img->fs);
	free(img->path);
	free(img);
}

/* Copy the @size bytes of @file into the memfd @fd. */
static int ext4img_copy(ext2_file_t file, uint64_t size, int fd)
{
	char *buf = malloc(EXT4IMG_CHUNK);
	uint64_t done = 0;
	int err = 0;

	if (!buf)
		return -ENOMEM;
	while (done < size && !err) {
		unsigned int want = size - done > EXT4IMG_CHUNK ? EXT4IMG_CHUNK
								: (unsigned int)(size - done);
		unsigned int got = 0;
		errcode_t ec = ext2fs_file_read(file, buf, want, &got);

		if (ec)
			err = ext4img_errno(ec);
		else if (!got)
			err = -EBADMSG; /* shorter than its inode says */
		else if (write(fd, buf, got) != (ssize_t)got)
			err = -EIO;
		done += got;
	}
	free(buf);
	return err;
}

int ext4img_read_file(struct ext4img *img, const char *guest_path, int *fd_out)
{
	struct ext2_inode inode;
	ext2_file_t file;
	ext2_ino_t ino;
	uint64_t size;
	errcode_t ec;
	int fd, err;

	if (!img || !guest_path || guest_path[0] != '/' || !fd_out)
		return -EINVAL;
	/* follows every symlink, the last component's too (at most EXT2FS_MAX_NESTED_LINKS) */
	ec = ext2fs_namei_follow(img->fs, EXT2_ROOT_INO, EXT2_ROOT_INO, guest_path, &ino);
	if (ec)
		return ext4img_errno(ec);
	ec = ext2fs_read_inode(img->fs, ino, &inode);
	if (ec)
		return ext4img_errno(ec);
	if (!LINUX_S_ISREG(inode.i_mode))
		return -ENOENT;
	size = EXT2_I_SIZE(&inode);
	if (size > EXT4IMG_MAX_FILE)
		return -EFBIG;
	ec = ext2fs_file_open(img->fs, ino, 0, &file);
	if (ec)
		return ext4img_errno(ec);
	fd = memfd_create("hvprof-ext4img", MFD_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		goto out_close;
	}
	err = ext4img_copy(file, size, fd);
	if (err) {
		close(fd);
		goto out_close;
	}
	*fd_out = fd;
out_close:
	ext2fs_file_close(file);
	return err;
}
