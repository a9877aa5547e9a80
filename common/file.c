// SPDX-License-Identifier: MIT
// Reading a whole host file (include/hvprof/file.h).
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/file.h>

int hvp_read_file(const char *path, size_t min_size, size_t max_size, void **buf, size_t *len)
{
	struct stat st;
	size_t size, done = 0;
	char *data;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		err = -errno;
		goto err_close;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EINVAL;
		goto err_close;
	}
	if ((uint64_t)st.st_size < min_size || (uint64_t)st.st_size > max_size ||
	    (uint64_t)st.st_size >= SIZE_MAX) {
		err = -EFBIG;
		goto err_close;
	}
	size = (size_t)st.st_size;
	data = malloc(size + 1);
	if (!data) {
		err = -ENOMEM;
		goto err_close;
	}
	while (done < size) {
		ssize_t n = read(fd, data + done, size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO; /* a file that shrank under us reads short */
			free(data);
			goto err_close;
		}
		done += (size_t)n;
	}
	close(fd);
	data[done] = '\0';
	*buf = data;
	*len = done;
	return 0;

err_close:
	close(fd);
	return err;
}

int hvp_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			int err = -errno;

			if (err == -EINTR)
				continue;
			return err;
		}
		if (n == 0)
			return -EIO; /* write(2) of a non-zero length never returns 0 unless it failed */
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
