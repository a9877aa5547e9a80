// SPDX-License-Identifier: MIT
// The x86-64 kernel's KASLR relocation table (vmlinux.relocs, written by arch/x86/tools/relocs
// and appended to vmlinux.bin inside a bzImage payload) and its application for a virtual slide,
// as the kernel's decompressor does it (arch/x86/boot/compressed/misc.c, handle_relocations()).
#define pr_fmt(fmt) "krelocs: " fmt

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/guestinfo.h>

/* The kernel's virtual base (arch/x86/include/asm/page_64_types.h). */
#define START_KERNEL_MAP 0xffffffff80000000ull

/* Read the 32-bit little-endian entry @i (0-based from the start) of @tab. */
static int32_t reloc_at(const uint8_t *tab, size_t i)
{
	uint32_t v;

	memcpy(&v, tab + i * 4, 4);
	return (int32_t)v;
}

/*
 * Walk one zero-terminated list backwards from entry @*i (inclusive) down to the terminator;
 * leaves *@i at the terminator. -EBADMSG when the table's first entry is passed without one.
 */
static int walk_list(const uint8_t *tab, size_t *i, size_t *count)
{
	size_t n = 0;

	for (;;) {
		if (reloc_at(tab, *i) == 0)
			break;
		if (*i == 0)
			return -EBADMSG;
		(*i)--;
		n++;
	}
	*count = n;
	return 0;
}

int gi_krelocs_parse(const void *tail, size_t len, struct gi_krelocs *out)
{
	const uint8_t *tab = tail;
	struct gi_krelocs r = { 0 };
	/* In the order they are read, from the end: 32-bit, inverse 32-bit, 64-bit. */
	const uint8_t **starts[3] = { &r.r32, &r.rinv32, &r.r64 };
	size_t *counts[3] = { &r.n32, &r.ninv32, &r.n64 };
	size_t i;
	int err;

	if (!tail || !out || len % 4 != 0)
		return -EINVAL;
	if (len < 12)
		return -ENODATA; /* not even the three terminators: no table */
	/*
	 * From the end backwards (handle_relocations): 32-bit relocations down to a 0, inverse
	 * 32-bit relocations down to a 0, 64-bit relocations down to a 0.
	 */
	i = len / 4 - 1;
	for (int l = 0; l < 3; l++) {
		if (l) {
			if (i == 0)
				return -EBADMSG; /* the previous list's terminator was the first entry */
			i--;
		}
		err = walk_list(tab, &i, counts[l]);
		if (err)
			return -EBADMSG;
		*starts[l] = tab + (i + 1) * 4;
	}
	/* The 64-bit list's terminator is the table's first entry: nothing else may precede it. */
	if (i != 0)
		return -EBADMSG;
	if (r.n32 + r.ninv32 + r.n64 == 0)
		return -ENODATA;
	*out = r;
	return 0;
}

/*
 * Where entry @e of a list points in @image, for a write of @width bytes: the entry is the
 * link-time kernel address of the field, sign-extended from 32 bits.
 */
static int reloc_target(int32_t e, uint64_t image_kva, size_t image_len, size_t width,
			size_t *off)
{
	uint64_t kva = (uint64_t)(int64_t)e;

	/* SAFETY: the field must lie wholly inside the image buffer. */
	if (kva < image_kva || kva - image_kva > image_len || image_len - (kva - image_kva) < width)
		return -ERANGE;
	*off = (size_t)(kva - image_kva);
	return 0;
}

int gi_krelocs_check(const struct gi_krelocs *r, uint64_t image_kva, size_t image_len)
{
	size_t off;

	if (!r)
		return -EINVAL;
	for (size_t k = 0; k < r->n32; k++)
		if (reloc_target(reloc_at(r->r32, k), image_kva, image_len, 4, &off))
			return -ERANGE;
	for (size_t k = 0; k < r->ninv32; k++)
		if (reloc_target(reloc_at(r->rinv32, k), image_kva, image_len, 4, &off))
			return -ERANGE;
	for (size_t k = 0; k < r->n64; k++)
		if (reloc_target(reloc_at(r->r64, k), image_kva, image_len, 8, &off))
			return -ERANGE;
	return 0;
}

int gi_krelocs_apply(const struct gi_krelocs *r, uint8_t *image, uint64_t image_kva,
		     size_t image_len, uint64_t slide)
{
	size_t off = 0;
	int err;

	if (!r || !image || image_kva < START_KERNEL_MAP)
		return -EINVAL;
	/* All or nothing: every target is checked before the first byte changes. */
	err = gi_krelocs_check(r, image_kva, image_len);
	if (err)
		return err;
	if (slide == 0)
		return 0;
	for (size_t k = 0; k < r->n32; k++) {
		uint32_t v;

		(void)reloc_target(reloc_at(r->r32, k), image_kva, image_len, 4, &off);
		memcpy(&v, image + off, 4);
		v += (uint32_t)slide;
		memcpy(image + off, &v, 4);
	}
	for (size_t k = 0; k < r->ninv32; k++) {
		uint32_t v;

		(void)reloc_target(reloc_at(r->rinv32, k), image_kva, image_len, 4, &off);
		memcpy(&v, image + off, 4);
		v -= (uint32_t)slide;
		memcpy(image + off, &v, 4);
	}
	for (size_t k = 0; k < r->n64; k++) {
		uint64_t v;

		(void)reloc_target(reloc_at(r->r64, k), image_kva, image_len, 8, &off);
		memcpy(&v, image + off, 8);
		v += slide;
		memcpy(image + off, &v, 8);
	}
	return 0;
}

int gi_kaslr_pick_slide(uint64_t load_kva, uint64_t image_size, uint64_t align, uint64_t random,
			uint64_t *slide)
{
	uint64_t end, slots;

	if (!slide || align == 0 || (align & (align - 1)) || load_kva < START_KERNEL_MAP ||
	    load_kva % align)
		return -EINVAL;
	/* The whole image must stay inside KERNEL_IMAGE_SIZE above __START_KERNEL_map. */
	if (__builtin_add_overflow(load_kva - START_KERNEL_MAP, image_size, &end) ||
	    end > GI_KERNEL_IMAGE_SIZE)
		return -ERANGE;
	slots = 1 + (GI_KERNEL_IMAGE_SIZE - end) / align; /* find_random_virt_addr() */
	*slide = (random % slots) * align;
	return 0;
}
