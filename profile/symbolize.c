// SPDX-License-Identifier: MIT
// IPs to frames: the guest kernel through its vmlinux; user IPs of recordings without MAPPING
// records through the process's executable found on the host (META `add`, META `rootfs`,
// --symfs), one symtab per file. User IPs by mapping: symbolize_map.c and filefind.c.
#define pr_fmt(fmt) "symbolize: " fmt

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "symbolize_internal.h"

#define ET_DYN_TYPE 3
#define MAX_SYMLINKS 40 /* as the kernel's MAXSYMLINKS */

#define KERNEL_DSO "[kernel.kallsyms]"
#define UNKNOWN "[unknown]"
#define EARLY_BOOT "[early boot]" /* kernel mode at an identity-mapped (lower-half) address */

/* Join @a and @b with exactly one '/' between them. */
char *path_join(const char *a, const char *b)
{
	size_t la = strlen(a);
	char *out;

	while (la > 1 && a[la - 1] == '/')
		la--;
	while (*b == '/')
		b++;
	if (asprintf(&out, "%.*s/%s", (int)la, a, b) < 0)
		return NULL;
	return out;
}

int resolve_in_root(const char *root, const char *guest_path, char **out)
{
	/* cur: the resolved part, relative to root ("" or "/a/b"); rest: what is left to walk. */
	char cur[PATH_MAX] = "", rest[PATH_MAX], target[PATH_MAX], *host;
	unsigned int links = 0;
	size_t rlen;

	if (!root || !guest_path || !out)
		return -EINVAL;
	if (snprintf(rest, sizeof(rest), "%s", guest_path) >= (int)sizeof(rest))
		return -ENAMETOOLONG;
	while (rest[0]) {
		char comp[NAME_MAX + 1], cand[PATH_MAX], *full;
		size_t clen = strcspn(rest, "/");
		struct stat stbuf;
		ssize_t tlen;

		if (clen > NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(comp, rest, clen);
		comp[clen] = '\0';
		memmove(rest, rest + clen + (rest[clen] == '/'), strlen(rest + clen) + 1 -
			(rest[clen] == '/'));
		if (!clen || strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			/* ".." of the root is the root: nothing leaves it. */
			char *slash = strrchr(cur, '/');

			if (slash)
				*slash = '\0';
			continue;
		}
		if (snprintf(cand, sizeof(cand), "%s/%s", cur, comp) >= (int)sizeof(cand))
			return -ENAMETOOLONG;
		full = path_join(root, cand);
		if (!full)
			return -ENOMEM;
		if (lstat(full, &stbuf) < 0) {
			int err = -errno;

			free(full);
			return err;
		}
		if (!S_ISLNK(stbuf.st_mode)) {
			free(full);
			memcpy(cur, cand, sizeof(cand));
			continue;
		}
		if (++links > MAX_SYMLINKS) {
			free(full);
			return -ELOOP;
		}
		tlen = readlink(full, target, sizeof(target) - 1);
		if (tlen < 0) {
			int err = -errno;

			free(full);
			return err;
		}
		free(full);
		target[tlen] = '\0';
		/* The link's target, then what was left: rest = target + "/" + rest. */
		rlen = strlen(rest);
		if ((size_t)tlen + 1 + rlen + 1 > sizeof(rest))
			return -ENAMETOOLONG;
		memmove(rest + tlen + 1, rest, rlen + 1);
		memcpy(rest, target, (size_t)tlen);
		rest[tlen] = '/';
		/* An absolute target is absolute in the guest: it restarts at the root. */
		if (target[0] == '/')
			cur[0] = '\0';
	}
	host = path_join(root, cur[0] ? cur : "/");
	if (!host)
		return -ENOMEM;
	*out = host;
	return 0;
}

static int parse_adds(struct symbolizer *s)
{
	const char *key, *value;

	for (size_t i = 0; !profile_meta_at(s->p, i, &key, &value); i++) {
		struct add_map *na;
		char *host, *sep;

		if (strcmp(key, "add") != 0)
			continue;
		host = strdup(value);
		if (!host)
			return -ENOMEM;
		/* HOST_PATH:GUEST_PATH, the guest path absolute: split at the last ":/". */
		sep = NULL;
		for (char *c = strchr(host, ':'); c; c = strchr(c + 1, ':'))
			if (c[1] == '/')
				sep = c;
		if (!sep || sep == host) {
			pr_warn("META add \"%s\" is not HOST_PATH:GUEST_PATH; ignored", value);
			free(host);
			continue;
		}
		*sep = '\0';
		na = realloc(s->adds, (s->n_adds + 1) * sizeof(*na));
		if (!na) {
			free(host);
			return -ENOMEM;
		}
		s->adds = na;
		s->adds[s->n_adds++] = (struct add_map){ .host = host, .guest = sep + 1 };
	}
	return 0;
}

/* The symbols of executable @path (an ELF file); @what names it in messages. */
static int open_symtab(const char *path, const char *what, struct symtab **st)
{
	int err = symtab_open_elf(path, st);

	/* a stripped executable (no .symtab nor .dynsym) is normal, e.g. Debian's busybox: say it
	 * with -v; a missing or unreadable file is worth a warning */
	if (err == -ENODATA)
		pr_info("no symbols for %s in %s (stripped)", what, path);
	else if (err)
		pr_warn("no symbols for %s from %s: %s", what, path, hvp_strerror(err));
	return err;
}

/* The kernel's symbols from @path, remembering the file (the vDSO image is read out of it). */
static void open_kernel_at(struct symbolizer *s, const char *path)
{
	int err = symtab_open_kernel(path, &s->kernel, &s->kernel_src);

	if (err == -ENODATA)
		pr_info("no symbols for the kernel in %s (stripped)", path);
	else if (err)
		pr_warn("no symbols for the kernel from %s: %s", path, hvp_strerror(err));
	else if (!(s->kernel_path = strdup(path)))
		pr_warn("%s: out of memory: no vDSO image from it", path);
}

void symbolizer_read_slide(struct symbolizer *s)
{
	const char *slide = profile_meta(s->p, "kernel_slide");

	s->kernel_slide = slide ? strtoull(slide, NULL, 0) : 0;
}

static void open_kernel(struct symbolizer *s, const struct sym_config *cfg)
{
	const char *meta = profile_meta(s->p, "kernel");
	char *symfs_vmlinux = NULL;

	symbolizer_read_slide(s);
	if (cfg->vmlinux) {
		open_kernel_at(s, cfg->vmlinux);
		return;
	}
	if (cfg->symfs) {
		symfs_vmlinux = path_join(cfg->symfs, "vmlinux");
		if (symfs_vmlinux && access(symfs_vmlinux, R_OK) == 0) {
			open_kernel_at(s, symfs_vmlinux);
			free(symfs_vmlinux);
			return;
		}
		free(symfs_vmlinux);
	}
	if (meta && meta[0])
		open_kernel_at(s, meta);
	else
		s->kernel_unnamed = true; /* said if a kernel frame comes (symbolize_kernel) */
}

/* The kernel's mapping: the ELF that symbolizes it and its build-id, when it was opened. */
static int note_kernel_mapping(struct symbolizer *s, const struct sym_config *cfg)
{
	const char *path = cfg->vmlinux ? cfg->vmlinux : profile_meta(s->p, "kernel");

	if (!s->kernel)
		return 0;
	return profile_mapping_note(s->p, KERNEL_DSO, path ? path : "vmlinux",
				    symtab_build_id(s->kernel));
}

int symbolizer_create(struct profile *p, const struct sym_config *cfg, struct symbolizer **out)
{
	struct symbolizer *s;
	const char *rootfs;
	int err;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->p = p;
	s->vdso.fd = -1;
	s->no_symbols = cfg->no_symbols;
	rootfs = cfg->rootfs ? cfg->rootfs : profile_meta(p, "rootfs");
	if ((rootfs && rootfs[0] && !(s->rootfs = strdup(rootfs))) ||
	    (cfg->symfs && !(s->symfs = strdup(cfg->symfs)))) {
		err = -ENOMEM;
		goto err_free;
	}
	err = parse_adds(s);
	if (err)
		goto err_free;
	if (!s->no_symbols)
		open_kernel(s, cfg);
	err = note_kernel_mapping(s, cfg);
	if (!err)
		err = filefind_init(s);
	if (err)
		goto err_free;
	*out = s;
	return 0;

err_free:
	symbolizer_free(s);
	return err;
}

void symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return;
	filefind_free(s);
	for (size_t i = 0; i < s->n_adds; i++)
		free(s->adds[i].host);
	free(s->adds);
	for (size_t i = 0; i < s->n_dsos; i++) {
		free(s->dsos[i].host_path);
		free(s->dsos[i].short_name);
		symtab_free(s->dsos[i].st);
	}
	free(s->dsos);
	symtab_free(s->kernel);
	free(s->kernel_path);
	if (s->vdso.fd >= 0)
		close(s->vdso.fd);
	symtab_free(s->vdso.st);
	u64map_free(&s->dso_of_exe);
	free(s->symfs);
	free(s->rootfs);
	free(s);
}

int find_host_path(struct symbolizer *s, const char *exe, char **host)
{
	for (size_t i = s->n_adds; i-- > 0;) {
		if (strcmp(s->adds[i].guest, exe) == 0) {
			*host = strdup(s->adds[i].host);
			return *host ? 0 : -ENOMEM;
		}
	}
	if (s->rootfs && !resolve_in_root(s->rootfs, exe, host))
		return 0;
	if (s->symfs && !resolve_in_root(s->symfs, exe, host))
		return 0;
	return -ENOENT;
}

static int get_dso(struct symbolizer *s, uint32_t exe_id, struct dso **out)
{
	const char *exe = strpool_get(&s->p->strs, exe_id);
	const char *base;
	struct dso *d;
	uint64_t val;
	int err;

	if (!u64map_get(&s->dso_of_exe, exe_id, &val)) {
		*out = &s->dsos[val];
		return 0;
	}
	if (s->n_dsos == s->cap_dsos) {
		struct dso *nd = array_grow(s->dsos, &s->cap_dsos, sizeof(*nd), 16);

		if (!nd)
			return -ENOMEM;
		s->dsos = nd;
	}
	d = &s->dsos[s->n_dsos];
	memset(d, 0, sizeof(*d));
	d->exe = exe_id;
	base = strrchr(exe, '/');
	d->short_name = strdup(base && base[1] ? base + 1 : exe[0] ? exe : UNKNOWN);
	if (!d->short_name)
		return -ENOMEM;
	err = u64map_put(&s->dso_of_exe, exe_id, s->n_dsos);
	if (err) {
		free(d->short_name);
		return err;
	}
	s->n_dsos++;
	*out = d;
	if (s->no_symbols || !exe[0])
		return 0;
	err = find_host_path(s, exe, &d->host_path);
	if (err == -ENOMEM)
		return err;
	if (err) {
		pr_warn("%s: not found on the host (among the files given with --add, in the "
			"image's root tree, or under --symfs DIR; this recording has no MAPPING "
			"records, so disk images are not searched): its frames stay unresolved", exe);
		return 0;
	}
	if (open_symtab(d->host_path, exe, &d->st) == 0) {
		symtab_elf_info(d->st, &d->e_type, &d->text_vaddr);
		return profile_mapping_note(s->p, d->short_name, exe, symtab_build_id(d->st));
	}
	return 0;
}

static int addr_frame(struct symbolizer *s, enum frame_kind kind, const char *dso, uint64_t ip,
		      uint32_t *frame)
{
	char name[32];

	snprintf(name, sizeof(name), "0x%" PRIx64, ip);
	return profile_frame(s->p, kind, name, dso, 0, frame);
}

int symbolize_kernel(struct symbolizer *s, uint64_t ip, uint32_t *frame, uint64_t *sym_off)
{
	const char *name;
	uint64_t off;

	*sym_off = UINT64_MAX;
	if (s->kernel && !symtab_lookup(s->kernel, ip - s->kernel_slide, &name, &off)) {
		*sym_off = off;
		return profile_frame(s->p, FRAME_KERNEL, name, KERNEL_DSO, 1, frame);
	}
	/* Kernel-mode code in the lower half runs identity-mapped: a bzImage's decompressor, the
	 * kernel's startup_64 before it jumps to its high mapping, real-mode trampolines. */
	if (ip < 0x0000800000000000ull)
		return profile_frame(s->p, FRAME_KERNEL, EARLY_BOOT, KERNEL_DSO, 0, frame);
	if (s->kernel)
		return profile_frame(s->p, FRAME_KERNEL, UNKNOWN, KERNEL_DSO, 0, frame);
	if (s->kernel_unnamed) {
		pr_warn("no kernel image named (META kernel, --vmlinux or --symfs): kernel frames "
			"stay unresolved");
		s->kernel_unnamed = false;
	}
	return addr_frame(s, FRAME_KERNEL, KERNEL_DSO, ip, frame);
}

int symbolize_user(struct symbolizer *s, uint32_t image, const char *exe, uint64_t start_code,
		   uint64_t end_code, uint64_t ip, uint32_t *frame, uint64_t *sym_off)
{
	uint64_t vaddr, off;
	uint32_t exe_id;
	const char *name;
	struct dso *d;
	int err;

	*sym_off = UINT64_MAX;
	if (image == UINT32_MAX || !exe[0] || ip < start_code || ip >= end_code)
		/* Outside the executable (a shared library, the vDSO, JIT code): no DSO known. */
		return addr_frame(s, FRAME_USER, UNKNOWN, ip, frame);
	err = strpool_intern(&s->p->strs, exe, strlen(exe), &exe_id);
	if (!err)
		err = get_dso(s, exe_id, &d);
	if (err)
		return err;
	if (!d->st && s->no_symbols)
		return addr_frame(s, FRAME_USER, d->short_name, ip, frame);
	if (!d->st)
		return profile_frame(s->p, FRAME_USER, UNKNOWN, d->short_name, 0, frame);
	/* A PIE is loaded at a random base: map the GVA back to the file's vaddrs. */
	vaddr = d->e_type == ET_DYN_TYPE ? ip - start_code + d->text_vaddr : ip;
	if (!symtab_lookup(d->st, vaddr, &name, &off)) {
		*sym_off = off;
		return profile_frame(s->p, FRAME_USER, name, d->short_name, 1, frame);
	}
	return profile_frame(s->p, FRAME_USER, UNKNOWN, d->short_name, 0, frame);
}
