/* SPDX-License-Identifier: MIT */
/*
 * Private to the symbolizer (symbolize.c, symbolize_map.c, filefind.c, ext4img.c): its state,
 * the per-file cache of the files behind mappings, and the ext4 image reader.
 */
#ifndef HVPROF_SYMBOLIZE_INTERNAL_H
#define HVPROF_SYMBOLIZE_INTERNAL_H

#include <stdint.h>

#include <hvprof/compiler.h>
#include <hvprof/kimage.h>

#include "addrspace.h"
#include "profile_internal.h"

/* ---- ext4img.c: files read out of an ext2/3/4 image (libext2fs), read-only. */
struct ext4img;

/* Open the image at host @path. Return: 0; -ENOMEM; -EBADMSG not ext2/3/4; open errors. */
int ext4img_open(const char *path, struct ext4img **out) __must_check;
/*
 * The regular file at absolute @guest_path in the image (symlinks followed inside it) into a
 * new memfd (*@fd_out, owned by the caller, positioned at its end: read it with pread/mmap).
 * Return: 0; -ENOENT no such file (or not a regular file); -ELOOP; -EFBIG above 1 GiB;
 * -EBADMSG damaged image; -ENOMEM; -EINVAL.
 */
int ext4img_read_file(struct ext4img *img, const char *guest_path, int *fd_out) __must_check;
void ext4img_close(struct ext4img *img);

/* ---- vdso.c: the guest's 64-bit vDSO image, out of its vmlinux. */
#define VDSO_MAX_IMAGE 0x10000ull /* bytes: the x86-64 vDSO is 1 or 2 pages */

/*
 * An extracted vDSO image: @fd a memfd holding its @size bytes (a multiple of 4096, at most
 * VDSO_MAX_IMAGE), -1 when none; @vaddr0 the p_vaddr of its PT_LOAD at file offset 0 (a GVA in
 * the vDSO mapping is then ip - start + vaddr0); @st its symbols (.symtab, else .dynsym: the
 * kernel's image is stripped to .dynsym), NULL when it has none.
 */
struct vdso_file {
	int fd;
	uint64_t size;
	uint64_t vaddr0;
	struct symtab *st;
};

/*
 * Read the vDSO image the kernel maps into every 64-bit process out of the vmlinux ELF at host
 * path @vmlinux: @image_kva is the link-time address of its `struct vdso_image vdso_image_64`
 * (from the kernel's symbols), whose first fields `void *data; unsigned long size;`
 * (arch/x86/include/asm/vdso.h) give the image's link-time address and size. Both are read
 * through the file's section headers (PROGBITS, allocated) and refused unless the size is a
 * non-zero multiple of 4096 of at most VDSO_MAX_IMAGE and the bytes are an x86-64 ELF64 shared
 * object (warned). *@out: on success only; the caller closes out->fd and frees out->st.
 * Return: 0; -EBADMSG not an ELF, no such section, an absurd size, not a vDSO image; -EINVAL;
 * -ENOMEM; open/read/memfd errors.
 */
int vdso_extract(const char *vmlinux, uint64_t image_kva, struct vdso_file *out) __must_check;

/* Where a file was found (the order of the search, docs/symbolization.md). */
enum ff_source {
	FF_NONE = 0,
	FF_DISK,       /* read out of a disk image (META disk) */
	FF_ROOTFS,     /* META add, META rootfs */
	FF_SYMFS,      /* --symfs DIR */
	FF_BUILDID,    /* a build-id directory */
	FF_DEBUGINFOD, /* libdebuginfod */
};

/* A PT_LOAD segment: file bytes [off, off + filesz) are at vaddr. */
struct ff_load {
	uint64_t off, filesz, vaddr;
};

/*
 * What was found for one as_file (cached by its id). @tried: the search ran. @fd/@name: the
 * runnable file (-1/NULL none); @debug_fd/@debug_name: the separate debug file (-1/NULL);
 * @st: the symbols (from the debug file's .symtab when it has one, else the runnable's .symtab
 * or .dynsym; NULL none); @loads: the PT_LOADs (runnable's, else the debug file's, which keeps
 * them); @src: where the runnable (else the debug file) came from; @base: the DSO name (the
 * basename of the guest path).
 */
struct ff_file {
	int tried;
	int fd, debug_fd;
	char *name, *debug_name;
	struct symtab *st;
	struct ff_load *loads;
	size_t n_loads;
	enum ff_source src;
	char *base;
	int noted; /* profile_mapping_note() done */
};

struct add_map {
	char *host;
	const char *guest; /* points into host's allocation */
};

/* An executable found by the PROCESS path (recordings without MAPPING records). */
struct dso {
	uint32_t exe;      /* strpool id of the guest path */
	char *host_path;
	struct symtab *st;
	unsigned int e_type;
	uint64_t text_vaddr;
	char *short_name;  /* basename of the guest path, for the Shared Object column */
};

struct symbolizer {
	struct profile *p;
	int no_symbols;
	bool kernel_unnamed; /* no kernel image was named: warned at the first kernel frame */
	char *symfs;
	char *rootfs;
	struct add_map *adds;
	size_t n_adds;
	struct symtab *kernel;
	char *kernel_path;        /* the file s->kernel was read from */
	enum symtab_source kernel_src;
	uint64_t kernel_slide;
	int vdso_tried;           /* vdso_get() ran */
	struct vdso_file vdso;    /* the vDSO image out of kernel_path (fd -1: none) */
	struct dso *dsos;
	size_t n_dsos, cap_dsos;
	struct u64map dso_of_exe; /* exe strpool id -> index in dsos */
	/* the files behind mappings (filefind.c) */
	struct ff_file *files;    /* by as_file id */
	size_t cap_files;
	char **disks;             /* host paths of META disk images */
	struct ext4img **imgs;    /* opened on first use; NULL: not yet or not readable */
	int *img_failed;
	size_t n_disks;
	char **bid_dirs;          /* build-id directories (their .build-id/ parent) */
	size_t n_bid_dirs;
	int debuginfod;           /* DEBUGINFOD_URLS is set (non-empty) */
	void *dbgd;               /* debuginfod_client *, created on first use */
};

/* Set up the file search from the profile's META (disk, image) and the environment. */
int filefind_init(struct symbolizer *s) __must_check;
/* Close and free what filefind holds (files, images, debuginfod client). */
void filefind_free(struct symbolizer *s);
/*
 * The cached search result for @f (searching on the first call). *@out: never NULL on 0.
 * Return: 0; -ENOMEM.
 */
int filefind_get(struct symbolizer *s, const struct as_file *f, struct ff_file **out)
	__must_check;

/* Where the guest file @exe is on the host (META add, rootfs, --symfs): 0 and *@host
 * (malloc'ed), -ENOENT, or -ENOMEM. */
int find_host_path(struct symbolizer *s, const char *exe, char **host) __must_check;
/* Join @a and @b with exactly one '/' between them (malloc'ed, NULL: -ENOMEM). */
char *path_join(const char *a, const char *b);

#endif /* HVPROF_SYMBOLIZE_INTERNAL_H */
