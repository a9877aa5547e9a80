/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the recording tests that edit files at the byte level (docs/recording-format.md):
 * walk the blocks of a version-2 file, seal them again after an edit, and turn a version-2 file
 * into the version-1 file of the same records (a CRC per record), to test the reader of the
 * older version on any recording the writer makes. Needs zlib. The test host is little-endian.
 */
#ifndef HVPROF_TEST_REC_BLOCKS_H
#define HVPROF_TEST_REC_BLOCKS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <hvprof/profile.h>

#define TEST_BLOCK_HDR 16 /* "BLCK", u32 size, u32 records, u32 crc */

static inline uint32_t rb_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* The CRC a version-2 block at @b (size taken from its header) must carry. */
static inline uint32_t rb_block_crc(const uint8_t *b)
{
	uint32_t size = rb_get32(b + 4);
	uLong crc = crc32(0L, Z_NULL, 0);

	crc = crc32(crc, b, 12);
	return (uint32_t)crc32(crc, b + TEST_BLOCK_HDR, size - TEST_BLOCK_HDR);
}

/* Seal again every block of a version-2 file whose size field fits in @len bytes. */
static inline void rb_fix_blocks(uint8_t *b, size_t len)
{
	size_t off = RECFILE_HEADER_SIZE;

	while (off + TEST_BLOCK_HDR <= len) {
		uint32_t size = rb_get32(b + off + 4), crc;

		if (size < TEST_BLOCK_HDR || size > len - off)
			break;
		crc = rb_block_crc(b + off);
		memcpy(b + off + 12, &crc, 4);
		off += size;
	}
}

/*
 * The version-1 file of the records of the version-2 file @in (@len bytes, intact): header
 * with version 1, then each record with its own CRC. Return it (malloc'ed, *@out_len bytes) or
 * NULL when @in is not an intact version-2 file.
 */
static inline uint8_t *rb_to_v1(const uint8_t *in, size_t len, size_t *out_len)
{
	uint8_t *out = malloc(len * 2 + 16);
	size_t off = RECFILE_HEADER_SIZE, o = RECFILE_HEADER_SIZE;
	uint32_t one = 1;

	if (!out || len < RECFILE_HEADER_SIZE || rb_get32(in + 8) != 2) {
		free(out);
		return NULL;
	}
	memcpy(out, in, RECFILE_HEADER_SIZE);
	memcpy(out + 8, &one, 4);
	while (off < len) {
		uint32_t size = rb_get32(in + off + 4), n = rb_get32(in + off + 8);
		size_t p = off + TEST_BLOCK_HDR;

		if (off + TEST_BLOCK_HDR > len || size > len - off || rb_block_crc(in + off) !=
									 rb_get32(in + off + 12)) {
			free(out);
			return NULL;
		}
		for (uint32_t i = 0; i < n; i++) {
			uint32_t rsize = rb_get32(in + p + 4), v1size = rsize + 4, crc;

			memcpy(out + o, in + p, 4);
			memcpy(out + o + 4, &v1size, 4);
			memcpy(out + o + 8, in + p + 8, rsize - 8);
			crc = (uint32_t)crc32(0L, out + o, rsize);
			memcpy(out + o + rsize, &crc, 4);
			o += v1size;
			p += rsize;
		}
		off += size;
	}
	*out_len = o;
	return out;
}

#endif /* HVPROF_TEST_REC_BLOCKS_H */
