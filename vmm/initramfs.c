// SPDX-License-Identifier: MIT
// Extra initramfs content (hvprof --add HOST:GUEST): a newc cpio archive written with libarchive
// and appended to the image's initramfs; the kernel unpacks concatenated archives in order.
#define pr_fmt(fmt) "vmm: initramfs: " fmt
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/log.h>
#include <hvprof/vmm.h>

struct growbuf {
	uint8_t *data;
	size_t len;
	size_t cap;
	int err;
};

static la_ssize_t growbuf_write(struct archive *a, void *ctx, const void *buf, size_t n)
{
	struct growbuf *g = ctx;

	(void)a;
	if (g->len + n > g->cap) {
		size_t cap = g->cap ? g->cap : 65536;
		uint8_t *p;

		while (cap < g->len + n)
			cap *= 2;
		p = realloc(g->data, cap);
		if (!p) {
			g->err = -ENOMEM;
			return -1;
		}
		g->data = p;
		g->cap = cap;
	}
	memcpy(g->data + g->len, buf, n);
	g->len += n;
	return (la_ssize_t)n;
}

static int guest_path_ok(const char *p)
{
	return p && p[0] == '/' && p[1] && !strstr(p, "/../") && strcmp(p + strlen(p) - 3, "/..") &&
	       strlen(p) < 4096;
}

static int add_dir(struct archive *a, const char *path)
{
	struct archive_entry *e = archive_entry_new();
	int r;

	if (!e)
		return -ENOMEM;
	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, AE_IFDIR);
	archive_entry_set_perm(e, 0755);
	archive_entry_set_size(e, 0);
	r = archive_write_header(a, e);
	archive_entry_free(e);
	if (r != ARCHIVE_OK) {
		pr_err("cannot add directory %s: %s", path, archive_error_string(a));
		return -EIO;
	}
	return 0;
}

/* Directory entries for every parent of @guest_path ("/a/b/c" -> "a", "a/b"). */
static int add_parents(struct archive *a, const char *guest_path)
{
	char tmp[4096];
	int err;

	snprintf(tmp, sizeof(tmp), "%s", guest_path + 1);
	for (char *s = strchr(tmp, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		err = add_dir(a, tmp);
		*s = '/';
		if (err)
			return err;
	}
	return 0;
}

static int add_file(struct archive *a, const struct vmm_initramfs_file *f)
{
	struct archive_entry *e;
	struct stat st;
	uint8_t *data;
	ssize_t n;
	size_t done = 0;
	int fd, err = 0;

	fd = open(f->host_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		pr_err("cannot open %s (for %s in the guest): %s", f->host_path, f->guest_path,
		       hvp_strerror(err));
		return err;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		pr_err("%s is not a regular file", f->host_path);
		close(fd);
		return -EINVAL;
	}
	data = malloc(st.st_size ? st.st_size : 1);
	if (!data) {
		close(fd);
		return -ENOMEM;
	}
	while (done < (size_t)st.st_size) {
		n = read(fd, data + done, st.st_size - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			pr_err("cannot read %s: %s", f->host_path, hvp_strerror(err));
			goto out;
		}
		done += (size_t)n;
	}
	err = add_parents(a, f->guest_path);
	if (err)
		goto out;
	e = archive_entry_new();
	if (!e) {
		err = -ENOMEM;
		goto out;
	}
	archive_entry_set_pathname(e, f->guest_path + 1);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, st.st_mode & 0777);
	archive_entry_set_size(e, (la_int64_t)done);
	if (archive_write_header(a, e) != ARCHIVE_OK ||
	    archive_write_data(a, data, done) != (la_ssize_t)done) {
		pr_err("cannot add %s: %s", f->guest_path, archive_error_string(a));
		err = -EIO;
	}
	archive_entry_free(e);
out:
	free(data);
	close(fd);
	return err;
}

int vmm_initramfs_append(void **buf, size_t *len, const struct vmm_initramfs_file *files,
			 size_t n_files)
{
	struct growbuf g = { 0 };
	struct archive *a;
	uint8_t *joined;
	size_t pad, base = *len;
	int err = 0;

	for (size_t i = 0; i < n_files; i++) {
		if (!guest_path_ok(files[i].guest_path)) {
			pr_err("guest path '%s' must be absolute, without '..'",
			       files[i].guest_path ? files[i].guest_path : "");
			return -EINVAL;
		}
	}
	a = archive_write_new();
	if (!a)
		return -ENOMEM;
	if (archive_write_set_format_cpio_newc(a) != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(a, 0) != ARCHIVE_OK ||
	    archive_write_open(a, &g, NULL, growbuf_write, NULL) != ARCHIVE_OK) {
		pr_err("libarchive: %s", archive_error_string(a));
		archive_write_free(a);
		return -EIO;
	}
	for (size_t i = 0; i < n_files && !err; i++)
		err = add_file(a, &files[i]);
	if (archive_write_close(a) != ARCHIVE_OK && !err)
		err = g.err ? g.err : -EIO;
	archive_write_free(a);
	if (err)
		goto out;
	/* newc archives are 4-byte aligned; the kernel skips zero padding between archives. */
	pad = (4 - (base & 3)) & 3;
	joined = realloc(*buf, base + pad + g.len);
	if (!joined) {
		err = -ENOMEM;
		goto out;
	}
	memset(joined + base, 0, pad);
	memcpy(joined + base + pad, g.data, g.len);
	*buf = joined;
	*len = base + pad + g.len;
out:
	free(g.data);
	return err;
}
