// SPDX-License-Identifier: MIT
// KASLR relocation tables (vmlinux.relocs): table-driven parsing of synthetic tables (good and
// hostile), application to a synthetic image, the slide choice, and the real tables inside the
// test kernel's bzImage and Debian's stock kernels (skipped with the reason when missing).
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <hvprof/guestinfo.h>

#include "test.h"

#define KMAP 0xffffffff80000000ull
#define LOAD_KVA (KMAP + 0x1000000ull) /* __START_KERNEL: LOAD_PHYSICAL_ADDR 16 MiB */

/* A table from its entries, as written (the first 0 terminates the 64-bit list). */
#define T(...) ((const uint32_t[]){ __VA_ARGS__ }), sizeof((const uint32_t[]){ __VA_ARGS__ })

struct parse_case {
	const char *name;
	const uint32_t *tab;
	size_t len;
	int want;
	size_t n64, ninv32, n32;
};

#define K(off) ((uint32_t)(LOAD_KVA + (off))) /* a field at image offset @off */

static const struct parse_case parse_cases[] = {
	{ "three lists", T(0, K(0x10), K(0x20), 0, K(0x30), 0, K(0x40), K(0x48), K(0x50)), 0, 2, 1,
	  3 },
	{ "only 32-bit entries", T(0, 0, 0, K(8)), 0, 0, 0, 1 },
	{ "only 64-bit entries", T(0, K(8), 0, 0), 0, 1, 0, 0 },
	{ "no entries at all", T(0, 0, 0), -ENODATA, 0, 0, 0 },
	{ "two terminators only", T(0, 0), -ENODATA, 0, 0, 0 },
	{ "missing the 64-bit terminator", T(K(8), 0, 0, K(8)), -EBADMSG, 0, 0, 0 },
	{ "bytes before the table", T(K(4), 0, K(8), 0, 0, K(8)), -EBADMSG, 0, 0, 0 },
	{ "no terminator anywhere", T(K(4), K(8), K(12), K(16)), -EBADMSG, 0, 0, 0 },
	{ "one terminator", T(K(4), 0, K(12)), -EBADMSG, 0, 0, 0 },
};

static int test_parse(void)
{
	for (size_t c = 0; c < ARRAY_SIZE(parse_cases); c++) {
		const struct parse_case *tc = &parse_cases[c];
		struct gi_krelocs r;

		printf("# %s\n", tc->name);
		memset(&r, 0xa5, sizeof(r));
		ASSERT_EQ_INT(gi_krelocs_parse(tc->tab, tc->len, &r), tc->want);
		if (tc->want)
			continue;
		ASSERT_EQ_U64(r.n64, tc->n64);
		ASSERT_EQ_U64(r.ninv32, tc->ninv32);
		ASSERT_EQ_U64(r.n32, tc->n32);
	}
	{
		static const uint32_t t[] = { 0, 0, 0, K(8) };
		struct gi_krelocs r;

		ASSERT_EQ_INT(gi_krelocs_parse(t, sizeof(t) - 2, &r), -EINVAL); /* not whole entries */
		ASSERT_EQ_INT(gi_krelocs_parse(NULL, 16, &r), -EINVAL);
	}
	return TEST_OK;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static int test_apply(void)
{
	static const uint32_t tab[] = { 0, K(0x10), 0, K(0x20), 0, K(0x30), K(0x38) };
	static const uint32_t outside[] = { 0, K(0x3c), 0, 0 }; /* an 8-byte field at 0x3c of 0x40 */
	static const uint32_t below[] = { 0, 0, 0, (uint32_t)(LOAD_KVA - 4) };
	const uint64_t slide = 0x2a00000, p64 = LOAD_KVA + 0x123456;
	uint8_t img[0x40], orig[0x40];
	struct gi_krelocs r;
	uint32_t p32 = (uint32_t)(LOAD_KVA + 0x777000), pinv = 0x10000000;

	memset(img, 0xcc, sizeof(img));
	memcpy(img + 0x10, &p64, 8);
	memcpy(img + 0x20, &pinv, 4);
	memcpy(img + 0x30, &p32, 4);
	memcpy(img + 0x38, &p32, 4);
	memcpy(orig, img, sizeof(img));
	ASSERT_EQ_INT(gi_krelocs_parse(tab, sizeof(tab), &r), 0);

	/* Slide 0 changes nothing. */
	ASSERT_EQ_INT(gi_krelocs_apply(&r, img, LOAD_KVA, sizeof(img), 0), 0);
	ASSERT_TRUE(memcmp(img, orig, sizeof(img)) == 0);

	ASSERT_EQ_INT(gi_krelocs_apply(&r, img, LOAD_KVA, sizeof(img), slide), 0);
	ASSERT_EQ_U64(get64(img + 0x10), p64 + slide);
	ASSERT_EQ_U64(get32(img + 0x20), pinv - (uint32_t)slide);
	ASSERT_EQ_U64(get32(img + 0x30), (uint32_t)(p32 + slide));
	ASSERT_EQ_U64(get32(img + 0x38), (uint32_t)(p32 + slide));
	/* Bytes that no entry names are untouched. */
	ASSERT_EQ_U64(img[0x18], 0xcc);
	ASSERT_EQ_U64(img[0x34], 0xcc);

	/* A field outside the buffer: refused, and nothing is written. */
	memcpy(img, orig, sizeof(img));
	ASSERT_EQ_INT(gi_krelocs_parse(outside, sizeof(outside), &r), 0);
	ASSERT_EQ_INT(gi_krelocs_apply(&r, img, LOAD_KVA, sizeof(img), slide), -ERANGE);
	ASSERT_TRUE(memcmp(img, orig, sizeof(img)) == 0);
	ASSERT_EQ_INT(gi_krelocs_parse(below, sizeof(below), &r), 0);
	ASSERT_EQ_INT(gi_krelocs_apply(&r, img, LOAD_KVA, sizeof(img), slide), -ERANGE);
	ASSERT_TRUE(memcmp(img, orig, sizeof(img)) == 0);
	/* A load address that is no kernel address. */
	ASSERT_EQ_INT(gi_krelocs_apply(&r, img, 0x1000000, sizeof(img), slide), -EINVAL);
	return TEST_OK;
}

struct slide_case {
	const char *name;
	uint64_t load_kva, size, align, random;
	int want;
	uint64_t slide;
};

static const struct slide_case slide_cases[] = {
	/* 1 GiB - 16 MiB - 30 MiB = 978 MiB above: 490 slots of 2 MiB (0 .. 978 MiB). */
	{ "slot 0", LOAD_KVA, 30 << 20, 2 << 20, 0, 0, 0 },
	{ "slot 1", LOAD_KVA, 30 << 20, 2 << 20, 1, 0, 2 << 20 },
	{ "the last slot", LOAD_KVA, 30 << 20, 2 << 20, 489, 0, 978ull << 20 },
	{ "wraps after the last slot", LOAD_KVA, 30 << 20, 2 << 20, 490, 0, 0 },
	{ "a large random value", LOAD_KVA, 30 << 20, 2 << 20, UINT64_MAX, 0,
	  (UINT64_MAX % 490) * (2 << 20) },
	{ "an image that fills the space", LOAD_KVA, (1ull << 30) - (16 << 20), 2 << 20, 77, 0, 0 },
	{ "an image too large", LOAD_KVA, 1ull << 30, 2 << 20, 0, -ERANGE, 0 },
	{ "alignment not a power of two", LOAD_KVA, 30 << 20, 3 << 20, 0, -EINVAL, 0 },
	{ "no alignment", LOAD_KVA, 30 << 20, 0, 0, -EINVAL, 0 },
	{ "a user address", 0x1000000, 30 << 20, 2 << 20, 0, -EINVAL, 0 },
};

static int test_pick_slide(void)
{
	for (size_t c = 0; c < ARRAY_SIZE(slide_cases); c++) {
		const struct slide_case *tc = &slide_cases[c];
		uint64_t slide = 12345;

		printf("# %s\n", tc->name);
		ASSERT_EQ_INT(gi_kaslr_pick_slide(tc->load_kva, tc->size, tc->align, tc->random,
						  &slide),
			      tc->want);
		if (tc->want == 0)
			ASSERT_EQ_U64(slide, tc->slide);
	}
	return TEST_OK;
}

/* The kernel's loaded image (PT_LOAD segments at their physical offsets from the lowest). */
static int load_image(const uint8_t *elf_bytes, size_t len, uint8_t **img, size_t *img_len)
{
	Elf *elf;
	size_t n;
	uint64_t lo = UINT64_MAX, hi = 0;
	int ret = -1;

	elf_version(EV_CURRENT);
	elf = elf_memory((char *)elf_bytes, len);
	if (!elf || elf_getphdrnum(elf, &n))
		goto out;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
				continue;
			if (pass == 0) {
				lo = ph.p_paddr < lo ? ph.p_paddr : lo;
				hi = ph.p_paddr + ph.p_memsz > hi ? ph.p_paddr + ph.p_memsz : hi;
			} else if (ph.p_offset + ph.p_filesz <= len) {
				memcpy(*img + (ph.p_paddr - lo), elf_bytes + ph.p_offset, ph.p_filesz);
			}
		}
		if (pass == 0) {
			if (hi <= lo || hi - lo > (1u << 30))
				goto out;
			*img_len = hi - lo;
			*img = calloc(1, *img_len);
			if (!*img)
				goto out;
		}
	}
	ret = lo == 0x1000000 ? 0 : -1;
out:
	elf_end(elf);
	return ret;
}

/* Whether @v is a kernel-image address (the relocated fields point into the image). */
static bool in_kernel_map(uint64_t v)
{
	return v >= KMAP && v < KMAP + GI_KERNEL_IMAGE_SIZE;
}

static int check_real(const char *path, const char *what)
{
	struct gi_kimage *img = NULL;
	const uint8_t *elf;
	const void *tail;
	size_t elf_len, tail_len, img_len = 0, n_in = 0, n_all = 0;
	uint8_t *image = NULL;
	struct gi_krelocs r;
	struct stat st;

	if (stat(path, &st) != 0) {
		printf("# skip %s: %s missing\n", what, path);
		return TEST_SKIP;
	}
	ASSERT_EQ_INT(gi_kimage_open(path, &img), 0);
	ASSERT_EQ_INT(gi_kimage_relocs(img, &tail, &tail_len), 0);
	ASSERT_EQ_INT(gi_krelocs_parse(tail, tail_len, &r), 0);
	printf("# %s: %zu 64-bit, %zu inverse 32-bit, %zu 32-bit relocations\n", what, r.n64,
	       r.ninv32, r.n32);
	ASSERT_TRUE(r.n32 > 10000 && r.n64 > 1000 && r.ninv32 > 100);
	elf = gi_kimage_elf(img, &elf_len);
	ASSERT_EQ_INT(load_image(elf, elf_len, &image, &img_len), 0);
	ASSERT_EQ_INT(gi_krelocs_check(&r, LOAD_KVA, img_len), 0);
	/* The unrelocated fields hold kernel-image addresses: 64-bit ones as they are, 32-bit ones
	 * sign-extended (R_X86_64_32S). Mixing up the lists would break this. Not all: head code
	 * holds physical addresses derived from symbols (page-table entries), and 6.12 has ~660
	 * 64-bit fields that are 0 in the image (filled at build or boot time): 99.98% for
	 * Debian 6.1, 99.7% for 6.12. */
	for (size_t k = 0; k < r.n64; k++, n_all++) {
		uint64_t kva = (uint64_t)(int64_t)(int32_t)get32(r.r64 + 4 * k);

		n_in += in_kernel_map(get64(image + (kva - LOAD_KVA)));
	}
	for (size_t k = 0; k < r.n32; k++, n_all++) {
		uint64_t kva = (uint64_t)(int64_t)(int32_t)get32(r.r32 + 4 * k);

		n_in += in_kernel_map((uint64_t)(int64_t)(int32_t)get32(image + (kva - LOAD_KVA)));
	}
	printf("# %s: %zu of %zu relocated fields point into the kernel image\n", what, n_in,
	       n_all);
	ASSERT_TRUE(n_in * 100 >= n_all * 99);
	/* Applied with a slide, every such field moves by exactly the slide. */
	{
		const uint64_t slide = 0x12600000;
		uint64_t kva = (uint64_t)(int64_t)(int32_t)get32(r.r64);
		uint64_t k32 = (uint64_t)(int64_t)(int32_t)get32(r.r32);
		uint64_t kinv = (uint64_t)(int64_t)(int32_t)get32(r.rinv32);
		uint64_t before = get64(image + (kva - LOAD_KVA));
		uint32_t before32 = get32(image + (k32 - LOAD_KVA));
		uint32_t before_inv = get32(image + (kinv - LOAD_KVA));

		ASSERT_EQ_INT(gi_krelocs_apply(&r, image, LOAD_KVA, img_len, slide), 0);
		ASSERT_EQ_U64(get64(image + (kva - LOAD_KVA)), before + slide);
		ASSERT_EQ_U64(get32(image + (k32 - LOAD_KVA)), (uint32_t)(before32 + slide));
		ASSERT_EQ_U64(get32(image + (kinv - LOAD_KVA)), (uint32_t)(before_inv - slide));
	}
	free(image);
	gi_kimage_free(img);
	return TEST_OK;
}

static int test_real_test_kernel(void)
{
	const char *cache = getenv("HVPROF_CACHE"), *home = getenv("HOME");
	char path[4096];

	if (cache && *cache)
		snprintf(path, sizeof(path), "%s/images/default/bzImage", cache);
	else
		snprintf(path, sizeof(path), "%s/.cache/hvprof/images/default/bzImage",
			 home ? home : "/root");
	return check_real(path, "test kernel bzImage");
}

static int stock_path(const char *which, char *path, size_t size)
{
	const char *cache = getenv("HVPROF_CACHE"), *home = getenv("HOME");

	if (cache && *cache)
		return snprintf(path, size, "%s/stock-kernel/%s/vmlinuz", cache, which);
	return snprintf(path, size, "%s/.cache/hvprof/stock-kernel/%s/vmlinuz",
			home ? home : "/root", which);
}

static int test_real_stock_61(void)
{
	char path[4096];

	stock_path("6.1", path, sizeof(path));
	return check_real(path, "Debian 6.1 vmlinuz (tests/fixtures/get-stock-kernel.sh)");
}

static int test_real_stock_newer(void)
{
	char path[4096];

	stock_path("newer", path, sizeof(path));
	return check_real(path, "Debian newer vmlinuz (tests/fixtures/get-stock-kernel.sh)");
}

/* Debian's cloud kernel: the table after an lz4 payload's ELF (kdecomp.c). */
static int test_real_stock_cloud(void)
{
	char path[4096];

	stock_path("cloud", path, sizeof(path));
	return check_real(path, "Debian 6.1 cloud vmlinuz (tests/fixtures/get-stock-kernel.sh)");
}

static const struct test_case tests[] = {
	{ "relocation tables: parsing", test_parse },
	{ "relocation tables: applying", test_apply },
	{ "the slide choice", test_pick_slide },
	{ "the test kernel's table", test_real_test_kernel },
	{ "Debian 6.1's table", test_real_stock_61 },
	{ "Debian newer kernel's table", test_real_stock_newer },
	{ "Debian 6.1 cloud kernel's table (lz4)", test_real_stock_cloud },
};

TEST_MAIN(tests)
