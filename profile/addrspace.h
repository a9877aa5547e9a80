/* SPDX-License-Identifier: MIT */
/*
 * Private to profile/: a guest process's address space as the recording saw it (MAPPING
 * snapshots, docs/recording-format.md), and the files behind its mappings. The loader keeps every
 * snapshot (addrspace.c); the symbolizer (symbolize.c, filefind.c) and the DWARF unwinder
 * (unwind_dwarf.c) read them. Everything here comes from the guest: paths and build-ids are
 * bounded copies, and mappings may overlap (as_find() then answers for one of them).
 */
#ifndef HVPROF_ADDRSPACE_H
#define HVPROF_ADDRSPACE_H

#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>
#include <hvprof/sample.h>

#include "containers_internal.h"

#define AS_BUILD_ID_MAX 20 /* bytes of a GNU build-id a MAPPING record holds */

/*
 * One mapped file, shared by every mapping of the same (path, build-id, inode, device).
 * @id: dense index (0, 1, ...) in the loader's file table: per-file caches index by it.
 * @path: the guest path from the root of its file system (NUL-terminated, < 256 bytes, never
 * ""), owned by the profile's string pool. @build_id/@build_id_len: the GNU build-id the guest's
 * page showed (0: unknown). @ino/@dev: as recorded.
 */
struct as_file {
	uint32_t id;
	const char *path;
	uint8_t build_id[AS_BUILD_ID_MAX];
	uint8_t build_id_len;
	uint64_t ino;
	uint32_t dev;
};

/*
 * One mapping: GVAs [@start, @end), @pgoff the file offset (bytes) of @start, @prot HVP_PROT_*,
 * @file the file (NULL: anonymous memory, the vDSO included: the recording has no path for it).
 */
struct as_mapping {
	uint64_t start, end;
	uint64_t pgoff;
	uint32_t prot;
	const struct as_file *file;
};

/*
 * One address-space snapshot of process @tgid: what was mapped from one MAPPING snapshot (or
 * PROCESS record) to the next. @id: its index in the loader's table, stable (the raw stack key
 * holds id + 1). @exe/@start_code/@end_code: the executable and text range of the last PROCESS
 * record (exe "" when none): what old recordings without MAPPING records are symbolized by.
 * @maps: @n_maps mappings sorted by start (empty when @has_maps is 0: PROCESS only).
 * Stable once loading is done; while loading, the current snapshot of a tgid may still grow
 * (the MAPPING records of one snapshot may interleave with other records).
 */
struct addrspace {
	uint32_t id;
	int32_t tgid;
	const char *exe;
	uint64_t start_code, end_code;
	int has_maps;
	struct as_mapping *maps;
	size_t n_maps, cap_maps;
	uint32_t expect; /* the index of the next MAPPING record of this snapshot */
	uint32_t count;  /* the snapshot's count */
};

/* The mapping of @as that contains @gva, or NULL (none, or @as NULL). O(log n). */
const struct as_mapping *as_find(const struct addrspace *as, uint64_t gva);

/*
 * The loader's table: every snapshot (@as, by id) and file (@files, by id), each individually
 * allocated so pointers stay valid while the table grows; @cur: tgid -> id of its current
 * snapshot. Zeroed is empty.
 */
struct as_table {
	struct addrspace **as;
	size_t n, cap;
	struct as_file **files;
	size_t n_files, cap_files;
	struct seqtab file_ids; /* key [path strpool id, ino, dev, len, id bytes as 3 words] */
	struct u64map cur;
	uint64_t bad_records;   /* MAPPING records out of sequence (ignored) */
};

/*
 * A PROCESS record: @tgid gets a new current snapshot with @pr's executable and no mappings
 * (a new executable; its MAPPING snapshot follows). @sp interns the exe path.
 * Return: 0, or -ENOMEM.
 */
int as_table_process(struct as_table *t, struct strpool *sp, const struct hvp_process *pr)
	__must_check;
/*
 * A MAPPING record: index 0 starts a new current snapshot of its tgid (keeping the exe of the
 * previous one); a later index is added to the current snapshot when it is the next expected
 * one, else ignored and counted in t->bad_records. Return: 0, or -ENOMEM.
 */
int as_table_mapping(struct as_table *t, struct strpool *sp, const struct hvp_mapping *m)
	__must_check;
/* The current snapshot of @tgid, or NULL (no PROCESS nor MAPPING record of it yet). */
const struct addrspace *as_table_current(const struct as_table *t, int32_t tgid);
/* The snapshot of id @id (< t->n). */
static inline const struct addrspace *as_table_get(const struct as_table *t, uint32_t id)
{
	return t->as[id];
}
void as_table_free(struct as_table *t);

/* ---- for the DWARF unwinder, during loading (load.c) */
struct loader;
struct symbolizer;

/*
 * The address space process @tgid has at the point of the recording the loader has reached
 * (the snapshot a sample read now belongs to), or NULL. Owned by the loader, valid until
 * loading ends (the profile does not keep address spaces).
 */
const struct addrspace *loader_current_as(const struct loader *ld, int32_t tgid);

/*
 * The loader's symbolizer, created on the first call (after the recording's META records, which
 * come first in a file; symbolize_pass() then uses the same one). Owned by the loader.
 * Return: 0 and *@out; -ENOMEM; errors of symbolizer_create().
 */
int loader_symbolizer(struct loader *ld, struct symbolizer **out) __must_check;

/*
 * The files behind mapping @m (filefind.c; docs/symbolization.md gives the search order and the
 * build-id rule): the first call for a file searches, later calls return the cached result.
 * *@fd: an open read-only fd of the runnable ELF (a host file opened O_RDONLY, or a memfd with
 * the bytes read out of a disk image), or -1 when only a debug file was found; *@name: its
 * host-visible name for messages ("rootfs.ext4:/usr/lib/x86_64-linux-gnu/libc.so.6", a host
 * path); *@debug_fd (optional): an fd of the separate debug file found by build-id, or -1.
 * The fds and name are owned by @s and stay open until symbolizer_free(); do not close them,
 * and read with pread() (they are shared).
 * Return: 0 (at least one of *@fd, *@debug_fd is >= 0); -ENOENT anonymous mapping, no file
 * found, every candidate refused (build-id mismatch), or symbols disabled (--no-symbols);
 * -ENOMEM.
 */
int symbolizer_mapping_file(struct symbolizer *s, const struct as_mapping *m, int *fd,
			    const char **name, int *debug_fd) __must_check;

/*
 * The guest's vDSO image for mapping @m of @as (docs/symbolization.md): when @m has the vDSO's
 * shape (anonymous, read+execute, right after the vvar area) and exactly the size of the image
 * read out of the kernel's vmlinux (symbol vdso_image_64; read on the first call), *@fd is a
 * memfd holding the image (an ELF shared object whose PT_LOAD at offset 0 is mapped at
 * m->start). The fd is owned by @s, open until symbolizer_free(); read it with pread().
 * Return: 0; -ENOENT not the vDSO, no vmlinux (e.g. a bzImage's kallsyms), an image refused,
 * or the sizes disagree; -EINVAL; -ENOMEM.
 */
int symbolizer_vdso_file(struct symbolizer *s, const struct addrspace *as,
			 const struct as_mapping *m, int *fd) __must_check;

#endif /* HVPROF_ADDRSPACE_H */
