// SPDX-License-Identifier: MIT
// User IPs to frames by the mapping they fall in (MAPPING snapshots, addrspace.h): the file's
// symbols at the file vaddr the PT_LOAD headers give, else its name and an offset, never a
// guessed name.
#define pr_fmt(fmt) "symbolize: " fmt

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "symbolize_internal.h"

#define UNKNOWN "[unknown]"
#define ANON_DSO "[anon]"
#define VDSO_DSO "[vdso]"
#define VDSO_MAX_SIZE VDSO_MAX_IMAGE /* the x86-64 vDSO is 1 or 2 pages; vvar 4 */
#define VDSO_SYMBOL "vdso_image_64"   /* arch/x86/entry/vdso/vdso-image-64.c (vdso2c) */
#define VVAR_MAX_SIZE 0x100000ull

/*
 * Whether anonymous mapping @m of @as is the vDSO: the recording names no file for it (it is a
 * special mapping), so recognise its shape: small, executable, not writable, and right after
 * the vvar area (anonymous, read-only, small), which the kernel maps just below it
 * (arch/x86/entry/vdso/vma.c map_vdso()). Anonymous JIT code is not laid out that way.
 */
static int is_vdso(const struct addrspace *as, const struct as_mapping *m)
{
	const struct as_mapping *prev = m > as->maps ? m - 1 : NULL;

	if ((m->prot & (HVP_PROT_EXEC | HVP_PROT_WRITE | HVP_PROT_SHARED)) != HVP_PROT_EXEC ||
	    m->end - m->start > VDSO_MAX_SIZE || !prev || prev->file || prev->end != m->start)
		return 0;
	return (prev->prot & (HVP_PROT_EXEC | HVP_PROT_WRITE)) == 0 &&
	       prev->end - prev->start <= VVAR_MAX_SIZE;
}

/* The file vaddr of file offset @off: by the PT_LOAD whose file bytes hold it. 0: found. */
static int file_vaddr(const struct ff_file *ff, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < ff->n_loads; i++) {
		const struct ff_load *l = &ff->loads[i];

		if (off >= l->off && off - l->off < l->filesz) {
			*vaddr = off - l->off + l->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

static int offset_frame(struct symbolizer *s, const char *fmt_dso, const char *dso,
			uint64_t off, uint32_t *frame)
{
	char name[300];

	if (fmt_dso)
		snprintf(name, sizeof(name), "[%s+0x%" PRIx64 "]", fmt_dso, off);
	else
		snprintf(name, sizeof(name), "0x%" PRIx64, off);
	return profile_frame(s->p, FRAME_USER, name, dso, 0, frame);
}

/*
 * The guest's vDSO image (vdso.c), read out of the kernel's vmlinux on the first call: *@out
 * NULL when there is none (no kernel symbols, symbols not from a vmlinux, e.g. a bzImage's
 * kallsyms, or an image refused), said once with -v. Return: 0; -ENOMEM.
 */
static int vdso_get(struct symbolizer *s, const struct vdso_file **out)
{
	uint64_t kva;
	int err;

	*out = NULL;
	if (s->vdso_tried)
		goto done;
	s->vdso_tried = 1;
	if (!s->kernel || s->kernel_src != SYMTAB_SRC_ELF || !s->kernel_path) {
		pr_info("the kernel's symbols are not from a vmlinux ELF: no vDSO image, [vdso] "
			"frames stay offsets");
		return 0;
	}
	if (symtab_find(s->kernel, VDSO_SYMBOL, &kva)) {
		pr_info("%s: no symbol %s: no vDSO image, [vdso] frames stay offsets",
			s->kernel_path, VDSO_SYMBOL);
		return 0;
	}
	err = vdso_extract(s->kernel_path, kva, &s->vdso);
	if (err == -ENOMEM)
		return err;
	if (err) {
		pr_info("%s: no vDSO image (%s): [vdso] frames stay offsets", s->kernel_path,
			hvp_strerror(err));
		return 0;
	}
	err = profile_mapping_note(s->p, VDSO_DSO, s->kernel_path,
				   s->vdso.st ? symtab_build_id(s->vdso.st) : "");
	if (err)
		return err;
	pr_info("%s: the vDSO image (%" PRIu64 " bytes) names [vdso] frames", s->kernel_path,
		s->vdso.size);
done:
	if (s->vdso.fd >= 0)
		*out = &s->vdso;
	return 0;
}

/*
 * Whether anonymous mapping @m of @as is the vDSO and @v its image: the shape says vDSO and the
 * mapping is exactly the image's pages (map_vdso() maps image->size bytes of text).
 */
static int vdso_agrees(const struct addrspace *as, const struct as_mapping *m,
		       const struct vdso_file *v)
{
	return v && is_vdso(as, m) && m->pgoff == 0 && m->end - m->start == v->size;
}

int symbolizer_vdso_file(struct symbolizer *s, const struct addrspace *as,
			 const struct as_mapping *m, int *fd)
{
	const struct vdso_file *v;
	int err;

	if (!s || !as || !m || !fd)
		return -EINVAL;
	if (m->file || s->no_symbols || !is_vdso(as, m))
		return -ENOENT;
	err = vdso_get(s, &v);
	if (err)
		return err;
	if (!vdso_agrees(as, m, v))
		return -ENOENT;
	*fd = v->fd;
	return 0;
}

/* A frame for @ip in the vDSO mapping @m: its symbol when the image agrees, else its offset. */
static int vdso_frame(struct symbolizer *s, const struct addrspace *as,
		      const struct as_mapping *m, uint64_t ip, uint32_t *frame, uint64_t *sym_off)
{
	const struct vdso_file *v = NULL;
	const char *name;
	uint64_t sym;
	int err = s->no_symbols ? 0 : vdso_get(s, &v);

	if (err)
		return err;
	/* SAFETY: start <= ip < end (as_find), so ip - start does not wrap and is < size. */
	if (vdso_agrees(as, m, v) && v->st &&
	    !symtab_lookup(v->st, ip - m->start + v->vaddr0, &name, &sym)) {
		*sym_off = sym;
		return profile_frame(s->p, FRAME_USER, name, VDSO_DSO, 1, frame);
	}
	return offset_frame(s, "vdso", VDSO_DSO, ip - m->start, frame);
}

/* Say once which file and build-id the frames of @ff's DSO name come from. */
static int note_file(struct symbolizer *s, const struct as_file *f, struct ff_file *ff)
{
	char hex[2 * AS_BUILD_ID_MAX + 1] = "";

	if (ff->noted)
		return 0;
	ff->noted = 1;
	for (size_t i = 0; i < f->build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", f->build_id[i]);
	return profile_mapping_note(s->p, ff->base, f->path, hex);
}

int symbolize_user_as(struct symbolizer *s, const struct addrspace *as, uint64_t ip,
		      uint32_t *frame, uint64_t *sym_off)
{
	const struct as_mapping *m;
	uint64_t off, vaddr, sym;
	struct ff_file *ff;
	const char *name;
	int err;

	*sym_off = UINT64_MAX;
	if (as && !as->has_maps)
		return symbolize_user(s, as->id, as->exe, as->start_code, as->end_code, ip, frame,
				      sym_off);
	m = as_find(as, ip);
	if (!m) {
		char buf[32];

		snprintf(buf, sizeof(buf), "0x%" PRIx64, ip);
		return profile_frame(s->p, FRAME_USER, buf, UNKNOWN, 0, frame);
	}
	if (!m->file) {
		if (is_vdso(as, m))
			return vdso_frame(s, as, m, ip, frame, sym_off);
		/* SAFETY: start <= ip < end (as_find), so ip - start does not wrap. */
		return offset_frame(s, NULL, ANON_DSO, ip - m->start, frame);
	}
	off = ip - m->start + m->pgoff; /* wraps only for a bogus guest pgoff: then no PT_LOAD */
	err = filefind_get(s, m->file, &ff);
	if (!err)
		err = note_file(s, m->file, ff);
	if (err)
		return err;
	if (ff->st && !file_vaddr(ff, off, &vaddr) && !symtab_lookup(ff->st, vaddr, &name, &sym)) {
		*sym_off = sym;
		return profile_frame(s->p, FRAME_USER, name, ff->base, 1, frame);
	}
	return offset_frame(s, ff->base, ff->base, off, frame);
}
