// SPDX-License-Identifier: MIT
// Unit tests of guestinfo/kimage.c and kdecomp.c: bzImages whose payload is the same small ELF
// (the kimage fuzz seeds, tests/fuzz-corpus/gen-corpus.sh: built by gcc and compressed by the
// gzip, xz, zstd, lz4, lzma and bzip2 tools as Linux's build does) open to that ELF byte for
// byte, with the 8-byte relocation table after it; damaged payloads and lzo are refused with
// their codes. Debian's own kernels (xz, zstd, lz4) are in test-kernels.c.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/file.h>
#include <hvprof/guestinfo.h>

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
	uint8_t *b = NULL;
	size_t len = 0;

	if (seed("seed-bz-lz4", &b, &len) != 0) {
		printf("# skip: %s/seed-bz-lz4 missing\n", seeds());
		return TEST_SKIP;
	}
	free(b);
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

static const struct test_case tests[] = {
	{ "bzImage payloads: none, gzip, xz, zstd, lz4, lzma, bzip2", test_payloads },
	{ "damaged payloads and lzo refused", test_damaged },
};

TEST_MAIN(tests)
