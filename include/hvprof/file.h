/* SPDX-License-Identifier: MIT */
/* Reading a whole host file, shared by every hvprof component (kernels, initrds, XML, images). */
#ifndef HVPROF_FILE_H
#define HVPROF_FILE_H

#include <stddef.h>

#include <hvprof/compiler.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * hvp_read_file - read the whole regular file at @path.
 * @min_size/@max_size: accepted sizes in bytes (inclusive).
 * @buf: out: malloc'd contents followed by one NUL byte (not counted in *@len), so text can be
 *   used as a string; the caller frees it. Written only on success.
 * @len: out: bytes read.
 * Return: 0; the -errno of open/fstat/read (-ENOENT, -EACCES, -EIO...); -EINVAL not a regular
 * file; -EFBIG size outside [@min_size, @max_size]; -ENOMEM. Prints nothing.
 */
int hvp_read_file(const char *path, size_t min_size, size_t max_size, void **buf, size_t *len)
	__must_check;

/**
 * hvp_write_all - write all @len bytes of @buf to @fd, retrying on EINTR and short writes.
 * Return: 0; the -errno of write(2) (-ENOSPC, -EPIPE, -EFBIG...); -EIO if write returned 0.
 */
int hvp_write_all(int fd, const void *buf, size_t len) __must_check;

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_FILE_H */
