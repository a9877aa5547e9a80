// SPDX-License-Identifier: MIT
// Kernel symbols from whatever the user has: a vmlinux symtab, System.map, a /proc/kallsyms
// copy, or the kallsyms tables inside a stripped vmlinux or bzImage. One struct symtab for all.
#define pr_fmt(fmt) "ksym: " fmt

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/file.h>
#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "kimage_internal.h"

#define KSYM_MAP_MAX_FILE (256u << 20)
#define KSYM_NAME_MAX 512

const char *symtab_source_name(enum symtab_source src)
{
	switch (src) {
	case SYMTAB_SRC_ELF:
		return "vmlinux symtab";
	case SYMTAB_SRC_MAP:
		return "System.map/kallsyms file";
	case SYMTAB_SRC_KALLSYMS:
		return "kallsyms tables in the image";
	default:
		return "none";
	}
}

static bool ksym_hex(const char *s, size_t n, uint64_t *v)
{
	uint64_t x = 0;

	if (n == 0 || n > 16)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		unsigned int d;

		if (c >= '0' && c <= '9')
			d = (unsigned int)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned int)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (unsigned int)(c - 'A' + 10);
		else
			return false;
		x = x << 4 | d;
	}
	*v = x;
	return true;
}

int ksym_parse_map(const char *text, size_t len, struct ksym_entry **out, size_t *n_out,
		   size_t *bad)
{
	struct ksym_entry *e = NULL;
	size_t n = 0, cap = 0, n_bad = 0, pos = 0;

	if ((!text && len) || !out || !n_out)
		return -EINVAL;
	while (pos < len) {
		const char *line = text + pos, *nl = memchr(line, '\n', len - pos);
		size_t ll = nl ? (size_t)(nl - line) : len - pos, a_len, name_len;
		const char *p, *name;
		uint64_t addr;
		char type;

		pos += ll + (nl ? 1 : 0);
		if (ll && line[ll - 1] == '\r')
			ll--;
		if (ll == 0)
			continue;
		/* "ADDR TYPE NAME" then, in /proc/kallsyms, "\t[module]" for module symbols. */
		p = memchr(line, ' ', ll);
		a_len = p ? (size_t)(p - line) : ll;
		if (!p || !ksym_hex(line, a_len, &addr) || (size_t)(p - line) + 3 >= ll ||
		    p[2] != ' ') {
			n_bad++;
			continue;
		}
		type = p[1];
		name = p + 3;
		name_len = ll - (size_t)(name - line);
		{
			const char *tab = memchr(name, '\t', name_len);

			if (tab) {
				n_bad += 0; /* a module symbol: not part of the kernel image */
				continue;
			}
		}
		if (name_len == 0 || name_len >= KSYM_NAME_MAX || memchr(name, ' ', name_len) ||
		    !((type >= 'a' && type <= 'z') || (type >= 'A' && type <= 'Z') || type == '?')) {
			n_bad++;
			continue;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 4096;
			struct ksym_entry *ne = realloc(e, ncap * sizeof(*e));

			if (!ne)
				goto err_nomem;
			e = ne;
			cap = ncap;
		}
		e[n].addr = addr;
		e[n].type = type;
		e[n].name = strndup(name, name_len);
		if (!e[n].name)
			goto err_nomem;
		n++;
	}
	*out = e;
	*n_out = n;
	if (bad)
		*bad = n_bad;
	return 0;

err_nomem:
	ksym_entries_free(e, n);
	return -ENOMEM;
}

/* The map file's text (NUL-terminated); -EBADMSG for anything but a regular file that fits. */
static int ksym_read_text(const char *path, char **buf, size_t *len)
{
	int err = hvp_read_file(path, 0, KSYM_MAP_MAX_FILE, (void **)buf, len);

	return err == -EINVAL || err == -EFBIG ? -EBADMSG : err;
}

int symtab_open_map(const char *path, struct symtab **out)
{
	struct ksym_entry *e = NULL;
	size_t n = 0, bad = 0, nonzero = 0;
	char *text = NULL;
	size_t len = 0;
	int err;

	if (!path || !out)
		return -EINVAL;
	err = ksym_read_text(path, &text, &len);
	if (err) {
		pr_debug(LOG_KSYM, "cannot read %s: %s", path, hvp_strerror(err));
		return err;
	}
	if (memchr(text, '\0', len)) {
		free(text);
		return -EBADMSG; /* binary: not a map */
	}
	err = ksym_parse_map(text, len, &e, &n, &bad);
	free(text);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++)
		nonzero += e[i].addr != 0;
	if (n == 0) {
		/* Debian's /boot/System.map is one line: "ffffffffffffffff B The real ..." */
		pr_info("%s: no symbol lines (%zu other lines): a stub System.map?", path, bad);
		err = bad ? -ENODATA : -EBADMSG;
		goto out;
	}
	if (nonzero == 0) {
		pr_warn("%s: every address is 0 (a /proc/kallsyms copy read without "
			"CAP_SYSLOG or with kptr_restrict set)",
			path);
		err = -ENODATA;
		goto out;
	}
	err = symtab_from_entries(e, n, out);
	if (!err)
		pr_debug(LOG_KSYM, "%s: %zu map lines, %zu skipped", path, n, bad);
out:
	ksym_entries_free(e, n);
	return err;
}

int symtab_from_kimage(const struct gi_kimage *img, struct symtab **out, char *layout,
		       size_t layout_size)
{
	const struct kimage_sec *ro;
	struct ksym_entry *e = NULL;
	size_t n = 0;
	int err;

	if (!img || !out)
		return -EINVAL;
	ro = kimage_section(img, ".rodata");
	if (!ro || !ro->data)
		return -ENODATA;
	err = kallsyms_decode(ro->data, ro->size, &e, &n, layout, layout_size);
	if (err)
		return err == -ENOENT ? -ENODATA : err;
	err = symtab_from_entries(e, n, out);
	ksym_entries_free(e, n);
	return err;
}

static bool ksym_is_text_file(const char *path)
{
	char buf[256];
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	r = read(fd, buf, sizeof(buf));
	close(fd);
	if (r <= 0)
		return false;
	/* System.map and kallsyms copies are ASCII; a legacy bzImage boot sector has no NUL in
	 * its first 256 bytes, but code bytes above 0x7e */
	for (ssize_t i = 0; i < r; i++)
		if (buf[i] == '\0' || (unsigned char)buf[i] > 0x7e ||
		    ((unsigned char)buf[i] < 0x20 && buf[i] != '\n' && buf[i] != '\t' &&
		     buf[i] != '\r'))
			return false;
	return true;
}

int symtab_open_kernel(const char *path, struct symtab **out, enum symtab_source *src)
{
	struct gi_kimage *img = NULL;
	const uint8_t *elf;
	size_t elf_len;
	int err;

	if (!path || !out)
		return -EINVAL;
	if (ksym_is_text_file(path)) {
		err = symtab_open_map(path, out);
		if (!err && src)
			*src = SYMTAB_SRC_MAP;
		return err;
	}
	err = gi_kimage_open(path, &img);
	if (err)
		return err;
	elf = gi_kimage_elf(img, &elf_len);
	err = symtab_open_elf_mem(elf, elf_len, path, out);
	if (!err) {
		if (src)
			*src = SYMTAB_SRC_ELF;
		goto out;
	}
	if (err != -ENODATA)
		goto out;
	/* A stripped image: the kernel's own kallsyms tables. */
	err = symtab_from_kimage(img, out, NULL, 0);
	if (!err && src)
		*src = SYMTAB_SRC_KALLSYMS;
out:
	gi_kimage_free(img);
	return err;
}
