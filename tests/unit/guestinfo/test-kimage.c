// SPDX-License-Identifier: MIT
// Unit tests of guestinfo/kimage.c and kdecomp.c: bzImages whose payload is the same small ELF
// (the kimage fuzz seeds, tests/fuzz-corpus/gen-corpus.sh: built by gcc and compressed by the
// gzip, xz, zstd, lz4, lzma and bzip2 tools as Linux's build does) open to that ELF byte for
// byte, with the 8-byte relocation table after it; damaged payloads and lzo are refused with
// their codes. Debian's own kernels (xz, zstd, lz4) are in test-kernels.c.
#include <errno.h>
#include <lz4.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/file.h>
#include <hvprof/guestinfo.h>

#include "kimage_internal.h"
#include "test.h"

static const char *seeds(void)
{
	const char *d = getenv("KIMAGE_SEEDS");

	return d && *d ? d : "tests/fuzz-corpus/kimage";
}

/* The whole seed file @name in *@buf (malloc'd), *@len bytes. */
static int seed(const char *name, uint8_t **buf, size_t *len)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", seeds(), name);
	return hvp_read_file(path, 1, 1u << 20, (void **)buf, len);
}

/* Whether seed @name is missing (the skip line printed), for tests that open it by path. */
static bool seed_missing(const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", seeds(), name);
	if (access(path, R_OK) == 0)
		return false;
	printf("# skip: %s/%s missing\n", seeds(), name);
	return true;
}

/* gi_kimage_open on @len bytes of @b written to a temporary file. */
static int open_bytes(const uint8_t *b, size_t len, struct gi_kimage **img)
{
	char tmp[] = "/tmp/hvprof-test-kimage-XXXXXX";
	int fd = mkstemp(tmp), err;

	if (fd < 0)
		return -errno;
	err = write(fd, b, len) == (ssize_t)len ? 0 : -EIO;
	close(fd);
	if (!err)
		err = gi_kimage_open(tmp, img);
	unlink(tmp);
	return err;
}

static int test_payloads(void)
{
	static const char *const kinds[] = { "none", "gzip", "xz", "zstd", "lz4", "lzma", "bzip2" };
	static const uint8_t relocs[8] = { 0x10, 0x00, 0x00, 0x81, 0, 0, 0, 0 };
	uint8_t *elf = NULL;
	size_t elf_len = 0;

	if (seed("seed-elf", &elf, &elf_len) != 0) {
		printf("# skip: %s/seed-elf missing\n", seeds());
		return TEST_SKIP;
	}
	ASSERT_TRUE(gi_bzimage_compression(elf, elf_len) == NULL); /* an ELF, not a bzImage */
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
		char name[64], path[4096];
		struct gi_kimage *img = NULL;
		const uint8_t *got;
		const void *tail;
		size_t n = 0, tail_len = 0;

		snprintf(name, sizeof(name), "seed-bz-%s", kinds[i]);
		snprintf(path, sizeof(path), "%s/%s", seeds(), name);
		/* the kind from the header and the magic alone (vmm/boot.c's choice) */
		{
			uint8_t *file = NULL;
			size_t file_len = 0;

			ASSERT_EQ_INT(seed(name, &file, &file_len), 0);
			ASSERT_EQ_STR(gi_bzimage_compression(file, file_len), kinds[i]);
			ASSERT_TRUE(gi_bzimage_compression(file, 0x26f) == NULL);
			free(file);
		}
		ASSERT_EQ_INT(gi_kimage_open(path, &img), 0);
		ASSERT_TRUE(gi_kimage_is_bzimage(img));
		ASSERT_EQ_STR(gi_kimage_compression(img), kinds[i]);
		ASSERT_EQ_STR(gi_kimage_header_version(img), "6.1.0-fuzz (seed@hvprof) #1 SMP");
		got = gi_kimage_elf(img, &n);
		ASSERT_EQ_U64(n, elf_len);
		ASSERT_TRUE(!memcmp(got, elf, n));
		ASSERT_EQ_INT(gi_kimage_relocs(img, &tail, &tail_len), 0);
		ASSERT_EQ_U64(tail_len, sizeof(relocs));
		ASSERT_TRUE(!memcmp(tail, relocs, sizeof(relocs)));
		gi_kimage_free(img);
	}
	free(elf);
	return TEST_OK;
}

/* The seed @name with @n bytes @v written at file offset @off (its payload starts at 1024:
 * one setup sector), opened: gi_kimage_open's code. */
static int damaged(const char *name, size_t off, const void *v, size_t n)
{
	struct gi_kimage *img = NULL;
	uint8_t *b = NULL;
	size_t len = 0;
	int err;

	if (seed(name, &b, &len) != 0 || off + n > len) {
		free(b);
		return -ENOENT;
	}
	memcpy(b + off, v, n);
	err = open_bytes(b, len, &img);
	if (err)
		err = img ? -EINVAL : err; /* nothing handed out on an error */
	gi_kimage_free(img);
	free(b);
	return err;
}

/* The seed @name with its payload_length (0x24c) cut to half, opened. */
static int truncated(const char *name)
{
	uint8_t *b = NULL;
	size_t len = 0;
	uint32_t pay;
	int err;

	if (seed(name, &b, &len) != 0)
		return -ENOENT;
	memcpy(&pay, b + 0x24c, 4);
	free(b);
	pay /= 2;
	err = damaged(name, 0x24c, &pay, 4);
	return err;
}

static int test_damaged(void)
{
	static const uint8_t zero[4], huge[4] = { 0, 0, 0, 0x7f }, junk[4] = { 0x55, 0x55, 0x55, 0x55 };
	static const uint8_t lzo[4] = { 0x89, 'L', 'Z', 'O' }, token = 0xff;

	if (seed_missing("seed-bz-lz4"))
		return TEST_SKIP;
	/* lz4: the first block's size past the payload, or 0; its first token asking for more
	 * literals than the block has; the payload cut in the middle of a block */
	ASSERT_EQ_INT(damaged("seed-bz-lz4", 1024 + 4, huge, 4), -EBADMSG);
	ASSERT_EQ_INT(damaged("seed-bz-lz4", 1024 + 4, zero, 4), -EBADMSG);
	ASSERT_EQ_INT(damaged("seed-bz-lz4", 1024 + 8, &token, 1), -EBADMSG);
	ASSERT_EQ_INT(truncated("seed-bz-lz4"), -EBADMSG);
	/* the others cut (lzma has no check of its own: cut, not damaged), or damaged after their
	 * headers (bzip2's and xz's CRCs) */
	ASSERT_EQ_INT(truncated("seed-bz-lzma"), -EBADMSG);
	ASSERT_EQ_INT(truncated("seed-bz-bzip2"), -EBADMSG);
	ASSERT_EQ_INT(damaged("seed-bz-bzip2", 1024 + 20, junk, 4), -EBADMSG);
	ASSERT_EQ_INT(damaged("seed-bz-xz", 1024 + 40, junk, 4), -EBADMSG);
	/* lzo (lzop's magic): a kind Linux builds that hvprof does not decompress */
	ASSERT_EQ_INT(damaged("seed-bz-lz4", 1024, lzo, 4), -ENOTSUP);
	return TEST_OK;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/*
 * The ELF's section header table as gi_kimage_open reads it (where the ELF ends, and a bzImage's
 * relocation table begins): entries of another size than Elf64_Shdr's, or a table over the ELF
 * header, are refused; the fuzzer's input whose header claimed 0-byte entries at offset 1
 * (libelf takes that table for none) opens with its whole ELF, never cut to a byte.
 */
static int test_shdr_table(void)
{
	static const uint8_t zero16[2] = { 0, 0 }, off8[8] = { 8 };

	if (seed_missing("seed-elf"))
		return TEST_SKIP;
	ASSERT_EQ_INT(damaged("seed-elf", 0x3a, zero16, 2), -EBADMSG); /* e_shentsize 0 */
	ASSERT_EQ_INT(damaged("seed-elf", 0x28, off8, 8), -EBADMSG);    /* e_shoff 8 */
	{
		struct gi_kimage *img = NULL;
		char path[4096];
		size_t n = 0;

		snprintf(path, sizeof(path), "%s/crash-shdr-table-in-header", seeds());
		ASSERT_EQ_INT(gi_kimage_open(path, &img), 0);
		(void)gi_kimage_elf(img, &n);
		ASSERT_EQ_U64(n, 1151); /* the file, whole */
		gi_kimage_free(img);
	}
	return TEST_OK;
}

/* An lz4 legacy frame (lib/decompress_unlz4.c) of @data[0..@len) in @frame, built with liblz4's
 * compressor: the magic, blocks of at most 8 MiB (each its size, then its data), the magic
 * again after the first block when @second (another frame), the 4-byte size trailer. Returns
 * the frame's size, the trailer's offset in *@trailer; 0 on failure. @frame holds
 * 64 + LZ4_compressBound(@len) bytes (two blocks: two bounds, their sizes, the magics). */
static size_t lz4_frame(const uint8_t *data, size_t len, bool second, uint8_t *frame,
			size_t *trailer)
{
	const size_t block = 8u << 20;
	size_t pos = 4;

	put32(frame, 0x184c2102u);
	for (size_t off = 0; off < len; off += block) {
		size_t chunk = len - off < block ? len - off : block;
		int c = LZ4_compress_default((const char *)data + off, (char *)frame + pos + 4,
					     (int)chunk, LZ4_compressBound((int)chunk));

		if (c <= 0)
			return 0;
		put32(frame + pos, (uint32_t)c);
		pos += 4 + (size_t)c;
		if (off == 0 && second) {
			put32(frame + pos, 0x184c2102u);
			pos += 4;
		}
	}
	put32(frame + pos, (uint32_t)len);
	*trailer = pos;
	return pos + 4;
}

/*
 * kdecomp.c's lz4 on frames built here: 9 MiB in two blocks (the first the 8 MiB maximum) with
 * the frame's magic again between them; then, on a one-block frame, a trailer that reads as the
 * magic or is absurd (it only sizes the first allocation), a block running into the trailer,
 * one of 0 bytes, one over LZ4_compressBound, the magic and trailer alone.
 */
static int test_lz4_frames(void)
{
	const size_t len = (9u << 20) + 1000, small = 100000;
	const int bound = LZ4_compressBound(8 << 20);
	uint8_t *data = malloc(len), *frame = malloc(64 + (size_t)LZ4_compressBound((int)len));
	uint8_t *out = NULL;
	size_t n, tr = 0, out_len = 0;

	ASSERT_TRUE(data && frame);
	for (size_t i = 0; i < len; i++) /* compressible, not trivially so */
		data[i] = (uint8_t)(i % 251 < 16 ? (i * 2654435761u) >> 13 : 0);
	n = lz4_frame(data, len, true, frame, &tr);
	ASSERT_TRUE(n > 0);
	ASSERT_EQ_INT(kimage_decompress("lz4", frame, n, len, &out, &out_len), 0);
	ASSERT_EQ_U64(out_len, len);
	ASSERT_TRUE(!memcmp(out, data, len));
	free(out);
	out = NULL;

	n = lz4_frame(data, small, false, frame, &tr);
	ASSERT_TRUE(n > 0);
	put32(frame + tr, 0x184c2102u); /* the trailer is never read as a block */
	ASSERT_EQ_INT(kimage_decompress("lz4", frame, n, 0, &out, &out_len), 0);
	ASSERT_TRUE(out_len == small && !memcmp(out, data, small));
	free(out);
	out = NULL;
	put32(frame + tr, 0x3fffffffu); /* an absurd trailer */
	ASSERT_EQ_INT(kimage_decompress("lz4", frame, n, 0x3fffffffu, &out, &out_len), 0);
	ASSERT_TRUE(out_len == small && !memcmp(out, data, small));
	free(out);
	out = NULL;
	put32(frame + 4, (uint32_t)(n - 8 - 4 + 1)); /* into the trailer */
	ASSERT_EQ_INT(kimage_decompress("lz4", frame, n, 0, &out, &out_len), -EBADMSG);
	free(out);
	out = NULL;
	put32(frame + 4, 0);
	ASSERT_EQ_INT(kimage_decompress("lz4", frame, n, 0, &out, &out_len), -EBADMSG);
	free(out);
	out = NULL;
	put32(frame + 4, (uint32_t)bound + 1);
	ASSERT_EQ_INT(kimage_decompress("lz4", frame, n, 0, &out, &out_len), -EBADMSG);
	free(out);
	out = NULL;
	put32(frame + 4, (uint32_t)small); /* the magic and a trailer alone: no data */
	ASSERT_EQ_INT(kimage_decompress("lz4", frame, 8, 0, &out, &out_len), 0);
	ASSERT_EQ_U64(out_len, 0);
	free(out);
	free(data);
	free(frame);
	return TEST_OK;
}

/* gi_bzimage_compression's header checks, and which kinds hvprof boots itself. */
static int test_kind_checks(void)
{
	uint8_t *b = NULL;
	size_t len = 0;

	if (seed("seed-bz-xz", &b, &len) != 0) {
		printf("# skip: %s/seed-bz-xz missing\n", seeds());
		return TEST_SKIP;
	}
	ASSERT_EQ_STR(gi_bzimage_compression(b, len), "xz");
	b[0x206] = 0x07; /* boot protocol 2.07: no payload fields */
	ASSERT_TRUE(gi_bzimage_compression(b, len) == NULL);
	b[0x206] = 0x0f;
	b[0x24f] = 0x10; /* payload_length past the file */
	ASSERT_TRUE(gi_bzimage_compression(b, len) == NULL);
	b[0x24f] = 0;
	b[0x1fe] = 0; /* no boot flag */
	ASSERT_TRUE(gi_bzimage_compression(b, len) == NULL);
	free(b);
	ASSERT_TRUE(gi_kimage_host_boots("xz") && gi_kimage_host_boots("zstd") &&
		    gi_kimage_host_boots("gzip") && gi_kimage_host_boots("none"));
	ASSERT_TRUE(!gi_kimage_host_boots("lz4") && !gi_kimage_host_boots("lzma") &&
		    !gi_kimage_host_boots("bzip2") && !gi_kimage_host_boots("lzo") &&
		    !gi_kimage_host_boots(NULL));
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "bzImage payloads: none, gzip, xz, zstd, lz4, lzma, bzip2", test_payloads },
	{ "damaged payloads and lzo refused", test_damaged },
	{ "the section header table: entry size, place, the fuzzer's input", test_shdr_table },
	{ "lz4 legacy frames: blocks, a second frame, the trailer, bad blocks", test_lz4_frames },
	{ "the payload's kind from the header; the kinds hvprof boots itself", test_kind_checks },
};

TEST_MAIN(tests)
