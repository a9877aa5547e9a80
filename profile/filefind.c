// SPDX-License-Identifier: MIT
// Finding the files behind guest mappings (docs/symbolization.md): the runnable ELF by path in
// the guest's disk images, its root tree and --symfs, then by build-id in build-id directories
// and debuginfod; the separate debug file by build-id. A candidate whose build-id differs from
// the one the guest showed is refused with a warning and the search goes on.
#define pr_fmt(fmt) "symbolize: " fmt

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/debuginfod.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "symbolize_internal.h"

#define FF_MAX_LOADS 64      /* PT_LOADs kept per file: real ones have 2..6 */
#define FF_MAX_ELF (1ull << 30)

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID 3
#endif

/* What a candidate file is: its build-id and PT_LOADs, and whether it has a .symtab. */
struct ff_probe {
	uint8_t bid[AS_BUILD_ID_MAX];
	size_t bid_len;
	struct ff_load *loads;
	size_t n_loads;
	int has_symtab;
};

static void hex(const uint8_t *b, size_t len, char *out)
{
	for (size_t i = 0; i < len; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * len] = '\0';
}

/* The first GNU build-id note in @data (<= AS_BUILD_ID_MAX bytes), into @pr. */
static void probe_notes(Elf_Data *data, struct ff_probe *pr)
{
	size_t off = 0, name_off, desc_off;
	GElf_Nhdr nh;

	while (!pr->bid_len && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
		if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
		    memcmp((const char *)data->d_buf + name_off, "GNU", 4) != 0 ||
		    !nh.n_descsz || nh.n_descsz > AS_BUILD_ID_MAX)
			continue;
		/* SAFETY: gelf_getnote checked desc_off + n_descsz against d_size. */
		memcpy(pr->bid, (const uint8_t *)data->d_buf + desc_off, nh.n_descsz);
		pr->bid_len = nh.n_descsz;
	}
}

static int probe_elf(Elf *elf, struct ff_probe *pr)
{
	Elf_Scn *scn = NULL;
	size_t n_phdr;
	GElf_Ehdr eh;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    elf_getphdrnum(elf, &n_phdr) != 0)
		return -EBADMSG;
	pr->loads = calloc(FF_MAX_LOADS, sizeof(*pr->loads));
	if (!pr->loads)
		return -ENOMEM;
	for (size_t i = 0; i < n_phdr && pr->n_loads < FF_MAX_LOADS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			return -EBADMSG;
		if (ph.p_type == PT_LOAD)
			pr->loads[pr->n_loads++] = (struct ff_load){ .off = ph.p_offset,
				.filesz = ph.p_filesz, .vaddr = ph.p_vaddr };
		if (ph.p_type == PT_NOTE && !pr->bid_len) {
			Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
							   ELF_T_NHDR);

			if (d)
				probe_notes(d, pr);
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			pr->has_symtab = 1;
		if (sh.sh_type == SHT_NOTE && !pr->bid_len && (d = elf_getdata(scn, NULL)))
			probe_notes(d, pr);
	}
	return 0;
}

/* Probe the ELF file open at @fd. Return: 0; -EBADMSG not an ELF; -ENOMEM. */
static int probe_fd(int fd, struct ff_probe *pr)
{
	Elf *elf;
	int err;

	memset(pr, 0, sizeof(*pr));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EBADMSG;
	err = probe_elf(elf, pr);
	elf_end(elf);
	if (err) {
		free(pr->loads);
		pr->loads = NULL;
	}
	return err;
}

/*
 * A separate debug file (objcopy --only-keep-debug) keeps .text as SHT_NOBITS: the symtab code
 * bounds lookups by the executable PROGBITS sections, so mark those sections PROGBITS in our
 * private copy (@buf, @len bytes: a MAP_PRIVATE mapping; the file is not changed). ELF64 only.
 */
static void debug_text_progbits(uint8_t *buf, size_t len)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	uint64_t end;

	if (len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    __builtin_mul_overflow((uint64_t)eh->e_shnum, sizeof(Elf64_Shdr), &end) ||
	    __builtin_add_overflow(end, eh->e_shoff, &end) || end > len || eh->e_shoff % 8)
		return;
	for (size_t i = 0; i < eh->e_shnum; i++) {
		/* SAFETY: e_shoff + e_shnum * sizeof(Elf64_Shdr) <= len, checked above. */
		Elf64_Shdr *sh = (Elf64_Shdr *)(buf + eh->e_shoff) + i;

		if (sh->sh_type == SHT_NOBITS &&
		    (sh->sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) == (SHF_ALLOC | SHF_EXECINSTR))
			sh->sh_type = SHT_PROGBITS;
	}
}

/* The symbols of the ELF file open at @fd (NULL when it has none); @debug: a debug file. */
static struct symtab *symtab_of_fd(int fd, const char *name, int debug)
{
	struct symtab *st = NULL;
	struct stat sb;
	void *buf;

	if (fstat(fd, &sb) < 0 || sb.st_size <= 0 || (uint64_t)sb.st_size > FF_MAX_ELF)
		return NULL;
	buf = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (buf == MAP_FAILED)
		return NULL;
	if (debug)
		debug_text_progbits(buf, (size_t)sb.st_size);
	if (symtab_open_elf_mem(buf, (size_t)sb.st_size, name, &st) == -ENODATA)
		pr_info("%s: no .symtab nor .dynsym (stripped)", name);
	munmap(buf, (size_t)sb.st_size);
	return st;
}

/*
 * Check a candidate for @f: its build-id must equal the guest's when the guest showed one.
 * Return: 0 accepted (*@pr filled: the caller frees pr->loads); -ESTALE refused (build-id
 * mismatch, warned once per candidate); -EBADMSG not an ELF; -ENOMEM.
 */
static int check_candidate(struct symbolizer *s, const struct as_file *f, int fd,
			   const char *name, struct ff_probe *pr)
{
	char want[2 * AS_BUILD_ID_MAX + 1], got[2 * AS_BUILD_ID_MAX + 1];
	int err = probe_fd(fd, pr);

	if (err) {
		if (err != -ENOMEM)
			pr_warn("%s (for the guest's %s): not an ELF file; skipped", name, f->path);
		return err;
	}
	if (!f->build_id_len) {
		pr_info("%s: the guest showed no build-id for %s: found by path alone", name,
			f->path);
		return 0;
	}
	if (pr->bid_len == f->build_id_len && !memcmp(pr->bid, f->build_id, pr->bid_len))
		return 0;
	hex(f->build_id, f->build_id_len, want);
	hex(pr->bid, pr->bid_len, got);
	pr_warn("%s: build-id %s differs from the guest's %s for %s: not used", name,
		pr->bid_len ? got : "(none)", want, f->path);
	s->p->stats.files_build_id_mismatch++;
	free(pr->loads);
	pr->loads = NULL;
	return -ESTALE;
}

/* Take candidate @fd (owned from here) for @ff if it passes check_candidate(). 1: taken. */
static int take(struct symbolizer *s, const struct as_file *f, struct ff_file *ff, int fd,
		char *name, enum ff_source src, int debug)
{
	struct ff_probe pr;
	int err = check_candidate(s, f, fd, name, &pr);

	if (err) {
		close(fd);
		free(name);
		return err == -ENOMEM ? err : 0;
	}
	if (debug) {
		ff->debug_fd = fd;
		ff->debug_name = name;
	} else {
		ff->fd = fd;
		ff->name = name;
	}
	if (!ff->loads || !debug) {
		free(ff->loads);
		ff->loads = pr.loads;
		ff->n_loads = pr.n_loads;
	} else {
		free(pr.loads);
	}
	if (!ff->src)
		ff->src = src;
	return 1;
}

/* Open host file @path (owned) as a candidate. */
static int take_host(struct symbolizer *s, const struct as_file *f, struct ff_file *ff,
		     char *path, enum ff_source src, int debug)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		free(path);
		return 0;
	}
	return take(s, f, ff, fd, path, src, debug);
}

/* @guest_path out of the disk images, in META order. */
static int search_disks(struct symbolizer *s, const struct as_file *f, struct ff_file *ff,
			const char *guest_path, int debug)
{
	for (size_t i = 0; i < s->n_disks; i++) {
		const char *base = strrchr(s->disks[i], '/');
		char *name;
		int fd, err;

		if (!s->imgs[i] && !s->img_failed[i]) {
			err = ext4img_open(s->disks[i], &s->imgs[i]);
			if (err == -ENOMEM)
				return err;
			s->img_failed[i] = err != 0;
		}
		if (!s->imgs[i])
			continue;
		err = ext4img_read_file(s->imgs[i], guest_path, &fd);
		if (err == -ENOMEM)
			return err;
		if (err)
			continue;
		if (asprintf(&name, "%s:%s", base ? base + 1 : s->disks[i], guest_path) < 0) {
			close(fd);
			return -ENOMEM;
		}
		err = take(s, f, ff, fd, name, FF_DISK, debug);
		if (err)
			return err;
	}
	return 0;
}

/* The ".build-id/xx/rest[.debug]" of @f's build-id (malloc'ed) under @dir. */
static char *bid_path(const char *dir, const struct as_file *f, int debug)
{
	char h[2 * AS_BUILD_ID_MAX + 1], *out;

	hex(f->build_id, f->build_id_len, h);
	if (asprintf(&out, "%s%s.build-id/%.2s/%s%s", dir, dir[0] ? "/" : "", h, h + 2,
		     debug ? ".debug" : "") < 0)
		return NULL;
	return out;
}

static debuginfod_client *dbgd(struct symbolizer *s)
{
	if (!s->dbgd)
		s->dbgd = debuginfod_begin();
	return s->dbgd;
}

/* debuginfod, only when DEBUGINFOD_URLS is set; a failure is a warning. */
static int search_debuginfod(struct symbolizer *s, const struct as_file *f, struct ff_file *ff,
			     int debug)
{
	char h[2 * AS_BUILD_ID_MAX + 1];
	char *path = NULL;
	int fd;

	if (!s->debuginfod || !f->build_id_len || !dbgd(s))
		return 0;
	s->p->stats.debuginfod_queries++;
	fd = debug ? debuginfod_find_debuginfo(s->dbgd, f->build_id, (int)f->build_id_len, &path)
		   : debuginfod_find_executable(s->dbgd, f->build_id, (int)f->build_id_len,
						&path);
	if (fd < 0) {
		hex(f->build_id, f->build_id_len, h);
		pr_warn("debuginfod: no %s for build-id %s (%s): %s", debug ? "debuginfo" :
			"executable", h, f->path, hvp_strerror(fd));
		free(path);
		return 0;
	}
	if (!path && !(path = strdup(f->path))) {
		close(fd);
		return -ENOMEM;
	}
	return take(s, f, ff, fd, path, FF_DEBUGINFOD, debug);
}

/* The runnable file: by path (disks, add/rootfs, symfs), then by build-id. 1: found. */
static int search_runnable(struct symbolizer *s, const struct as_file *f, struct ff_file *ff)
{
	char *host;
	int err;

	err = search_disks(s, f, ff, f->path, 0);
	if (err || ff->fd >= 0)
		return err;
	for (size_t i = s->n_adds; i-- > 0 && ff->fd < 0;) {
		if (strcmp(s->adds[i].guest, f->path) != 0)
			continue;
		if (!(host = strdup(s->adds[i].host)))
			return -ENOMEM;
		err = take_host(s, f, ff, host, FF_ROOTFS, 0);
		if (err < 0)
			return err;
	}
	if (ff->fd < 0 && s->rootfs && !resolve_in_root(s->rootfs, f->path, &host) &&
	    (err = take_host(s, f, ff, host, FF_ROOTFS, 0)) < 0)
		return err;
	if (ff->fd < 0 && s->symfs && !resolve_in_root(s->symfs, f->path, &host) &&
	    (err = take_host(s, f, ff, host, FF_SYMFS, 0)) < 0)
		return err;
	for (size_t i = 0; i < s->n_bid_dirs && ff->fd < 0 && f->build_id_len; i++) {
		if (!(host = bid_path(s->bid_dirs[i], f, 0)))
			return -ENOMEM;
		err = take_host(s, f, ff, host, FF_BUILDID, 0);
		if (err < 0)
			return err;
	}
	if (ff->fd < 0)
		return search_debuginfod(s, f, ff, 0);
	return 0;
}

/* The separate debug file, by build-id: in the disks, the build-id dirs, debuginfod. */
static int search_debug(struct symbolizer *s, const struct as_file *f, struct ff_file *ff,
			int runnable_has_symtab)
{
	char *host;
	int err;

	if (!f->build_id_len)
		return 0;
	if (!(host = bid_path("/usr/lib/debug", f, 1)))
		return -ENOMEM;
	err = search_disks(s, f, ff, host, 1);
	free(host);
	if (err < 0)
		return err;
	for (size_t i = 0; i < s->n_bid_dirs && ff->debug_fd < 0; i++) {
		if (!(host = bid_path(s->bid_dirs[i], f, 1)))
			return -ENOMEM;
		err = take_host(s, f, ff, host, FF_BUILDID, 1);
		if (err < 0)
			return err;
	}
	if (ff->debug_fd < 0 && !runnable_has_symtab)
		return search_debuginfod(s, f, ff, 1);
	return 0;
}

static void count_found(struct symbolizer *s, const struct ff_file *ff)
{
	struct profile_stats *st = &s->p->stats;

	switch (ff->src) {
	case FF_DISK: st->files_disk++; break;
	case FF_ROOTFS: st->files_rootfs++; break;
	case FF_SYMFS: st->files_symfs++; break;
	case FF_BUILDID: st->files_buildid++; break;
	case FF_DEBUGINFOD: st->files_debuginfod++; break;
	case FF_NONE: st->files_not_found++; break;
	}
	if (ff->debug_fd >= 0)
		st->files_debug++;
}

static int search(struct symbolizer *s, const struct as_file *f, struct ff_file *ff)
{
	const char *base = strrchr(f->path, '/');
	struct ff_probe pr = { 0 };
	int err;

	ff->tried = 1;
	ff->base = strdup(base && base[1] ? base + 1 : f->path);
	if (!ff->base)
		return -ENOMEM;
	if (s->no_symbols)
		return 0;
	err = search_runnable(s, f, ff);
	if (err < 0)
		return err;
	if (ff->fd >= 0 && probe_fd(ff->fd, &pr) == 0)
		free(pr.loads);
	if (!f->build_id_len && pr.bid_len) {
		/* the guest's page was not resident: the debug file must match the file used */
		struct as_file known = *f;

		memcpy(known.build_id, pr.bid, pr.bid_len);
		known.build_id_len = (uint8_t)pr.bid_len;
		err = search_debug(s, &known, ff, pr.has_symtab);
	} else {
		err = search_debug(s, f, ff, pr.has_symtab);
	}
	if (err < 0)
		return err;
	count_found(s, ff);
	if (ff->debug_fd >= 0)
		ff->st = symtab_of_fd(ff->debug_fd, ff->debug_name, 1);
	if (!ff->st && ff->fd >= 0)
		ff->st = symtab_of_fd(ff->fd, ff->name, 0);
	if (ff->src == FF_NONE)
		pr_warn("%s: not found (%zu disk image%s, META add/rootfs, --symfs, %zu build-id "
			"dir%s%s): its frames show offsets", f->path, s->n_disks,
			s->n_disks == 1 ? "" : "s", s->n_bid_dirs, s->n_bid_dirs == 1 ? "" : "s",
			s->debuginfod ? ", debuginfod" : "");
	else
		pr_info("%s: %s%s%s", f->path, ff->name ? ff->name : "(no runnable file)",
			ff->debug_name ? ", debug file " : "", ff->debug_name ? ff->debug_name : "");
	return 0;
}

int filefind_get(struct symbolizer *s, const struct as_file *f, struct ff_file **out)
{
	struct ff_file *ff;

	if (f->id >= s->cap_files) {
		size_t old = s->cap_files, cap = old ? old : 64;
		struct ff_file *nf;

		while (cap <= f->id)
			cap *= 2;
		nf = realloc(s->files, cap * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		memset(nf + old, 0, (cap - old) * sizeof(*nf));
		for (size_t i = old; i < cap; i++)
			nf[i].fd = nf[i].debug_fd = -1;
		s->files = nf;
		s->cap_files = cap;
	}
	ff = &s->files[f->id];
	*out = ff;
	return ff->tried ? 0 : search(s, f, ff);
}

int symbolizer_mapping_file(struct symbolizer *s, const struct as_mapping *m, int *fd,
			    const char **name, int *debug_fd)
{
	struct ff_file *ff;
	int err;

	if (!s || !m || !fd || !name)
		return -EINVAL;
	if (!m->file)
		return -ENOENT;
	err = filefind_get(s, m->file, &ff);
	if (err)
		return err;
	if (ff->fd < 0 && ff->debug_fd < 0)
		return -ENOENT;
	*fd = ff->fd;
	*name = ff->name ? ff->name : ff->debug_name;
	if (debug_fd)
		*debug_fd = ff->debug_fd;
	return 0;
}

/* Append a copy of @dir to the build-id directories when it is a directory. */
static int add_bid_dir(struct symbolizer *s, const char *dir)
{
	struct stat sb;
	char **nd, *copy;

	if (!dir || stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode))
		return 0;
	for (size_t i = 0; i < s->n_bid_dirs; i++)
		if (!strcmp(s->bid_dirs[i], dir))
			return 0;
	copy = strdup(dir);
	nd = copy ? realloc(s->bid_dirs, (s->n_bid_dirs + 1) * sizeof(*nd)) : NULL;
	if (!nd) {
		free(copy);
		return -ENOMEM;
	}
	s->bid_dirs = nd;
	s->bid_dirs[s->n_bid_dirs++] = copy;
	return 0;
}

/* The image's build-id directory: its manifest's build_id_dir= (relative to the image). */
static int image_bid_dir(struct symbolizer *s, const char *image)
{
	char line[512], *manifest = path_join(image, "manifest"), *dir = NULL;
	FILE *f;
	int err;

	if (!manifest)
		return -ENOMEM;
	f = fopen(manifest, "re");
	free(manifest);
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "build_id_dir=", 13) && line[13]) {
			free(dir);
			dir = line[13] == '/' ? strdup(line + 13) : path_join(image, line + 13);
			if (!dir)
				break;
		}
	}
	if (f)
		fclose(f);
	err = add_bid_dir(s, dir);
	free(dir);
	return err;
}

/* META disk "NAME MODE HOST_PATH" (docs/recording-format.md): the host path, the rest. */
static int add_disk(struct symbolizer *s, const char *value)
{
	const char *sp = strchr(value, ' ');
	char **nd;
	struct ext4img **ni;
	int *nf;

	sp = sp ? strchr(sp + 1, ' ') : NULL;
	if (!sp || !sp[1]) {
		pr_warn("META disk \"%s\" is not NAME MODE HOST_PATH; ignored", value);
		return 0;
	}
	nd = realloc(s->disks, (s->n_disks + 1) * sizeof(*nd));
	if (nd)
		s->disks = nd;
	ni = nd ? realloc(s->imgs, (s->n_disks + 1) * sizeof(*ni)) : NULL;
	if (ni)
		s->imgs = ni;
	nf = ni ? realloc(s->img_failed, (s->n_disks + 1) * sizeof(*nf)) : NULL;
	if (!nf)
		return -ENOMEM;
	s->img_failed = nf;
	s->disks[s->n_disks] = strdup(sp + 1);
	if (!s->disks[s->n_disks])
		return -ENOMEM;
	s->imgs[s->n_disks] = NULL;
	s->img_failed[s->n_disks++] = 0;
	return 0;
}

int filefind_init(struct symbolizer *s)
{
	const char *key, *value, *image = profile_meta(s->p, "image");
	const char *urls = getenv("DEBUGINFOD_URLS");
	char *dir;
	int err = 0;

	for (size_t i = 0; !err && !profile_meta_at(s->p, i, &key, &value); i++)
		if (!strcmp(key, "disk"))
			err = add_disk(s, value);
	if (!err && image && image[0])
		err = image_bid_dir(s, image);
	if (!err && s->rootfs) {
		if (!(dir = path_join(s->rootfs, "usr/lib/debug")))
			return -ENOMEM;
		err = add_bid_dir(s, dir);
		free(dir);
	}
	if (!err && s->symfs) {
		if (!(dir = path_join(s->symfs, "usr/lib/debug")))
			return -ENOMEM;
		err = add_bid_dir(s, dir);
		free(dir);
	}
	if (!err)
		err = add_bid_dir(s, "/usr/lib/debug");
	s->debuginfod = urls && urls[0];
	return err;
}

void filefind_free(struct symbolizer *s)
{
	for (size_t i = 0; i < s->cap_files; i++) {
		struct ff_file *ff = &s->files[i];

		if (ff->fd >= 0)
			close(ff->fd);
		if (ff->debug_fd >= 0)
			close(ff->debug_fd);
		free(ff->name);
		free(ff->debug_name);
		free(ff->loads);
		free(ff->base);
		symtab_free(ff->st);
	}
	free(s->files);
	for (size_t i = 0; i < s->n_disks; i++) {
		ext4img_close(s->imgs ? s->imgs[i] : NULL);
		free(s->disks[i]);
	}
	free(s->disks);
	free(s->imgs);
	free(s->img_failed);
	for (size_t i = 0; i < s->n_bid_dirs; i++)
		free(s->bid_dirs[i]);
	free(s->bid_dirs);
	if (s->dbgd)
		debuginfod_end(s->dbgd);
}
