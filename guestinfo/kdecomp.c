// SPDX-License-Identifier: MIT
// The decompressors of a bzImage's payload, on the host: xz and lzma (liblzma), zstd (libzstd),
// gzip (zlib), bzip2 (libbz2) and lz4 (liblz4's blocks in the kernel's legacy lz4 framing);
// the kinds Linux builds (arch/x86/boot/compressed/Makefile), lzo aside. Each payload is
// followed by 4 bytes of decompressed size (scripts/Makefile.lib size_append), which the
// decoders leave unread; the output grows from that size's hint, bounded by KIMAGE_MAX_PAYLOAD.
#define pr_fmt(fmt) "kimage: " fmt

#include <bzlib.h>
#include <errno.h>
#include <lz4.h>
#include <lzma.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include <hvprof/log.h>

#include "kimage_internal.h"

/* Grow @out to at least @need bytes (doubling); bounded by KIMAGE_MAX_PAYLOAD. */
static int kd_grow(uint8_t **out, size_t *cap, size_t need)
{
	/* the first allocation: what is asked (the payload's size, when plausible), at least
	 * 1 MiB; then doubling */
	size_t ncap = *cap ? *cap : need > (1u << 20) ? need : (1u << 20);
	uint8_t *p;

	if (need > KIMAGE_MAX_PAYLOAD)
		return -EFBIG;
	while (ncap < need)
		ncap *= 2;
	if (ncap > KIMAGE_MAX_PAYLOAD)
		ncap = KIMAGE_MAX_PAYLOAD;
	if (ncap <= *cap)
		return 0;
	p = realloc(*out, ncap);
	if (!p)
		return -ENOMEM;
	*out = p;
	*cap = ncap;
	return 0;
}

/* The decoders' memory: the kernel's xz (scripts/xz_wrap.sh: a 32 MiB dictionary) and lzma
 * (-9: 64 MiB) need under 100 MiB; a header asking more is not a kernel's (a fuzzer's 4 GiB
 * dictionary otherwise) */
#define KD_LZMA_MEMLIMIT (256ull << 20)

/*
 * liblzma's two formats: the kernel's xz payload (one .xz stream: CRC32 check, x86 BCJ +
 * LZMA2) and its lzma one (`lzma -9`: "LZMA alone", a 13-byte header, no check of its own),
 * each followed by the 4-byte size trailer the decoder never reads (it stops at the stream's
 * end; LZMA_FINISH: a cut stream is LZMA_BUF_ERROR).
 */
static int kd_liblzma(const uint8_t *in, size_t in_len, size_t hint, uint8_t **out,
		      size_t *out_len, bool alone)
{
	lzma_stream s = LZMA_STREAM_INIT;
	size_t cap = 0;
	lzma_ret r;
	int err;

	r = alone ? lzma_alone_decoder(&s, KD_LZMA_MEMLIMIT)
		  : lzma_stream_decoder(&s, KD_LZMA_MEMLIMIT, 0);
	if (r != LZMA_OK)
		return -ENOMEM;
	err = kd_grow(out, &cap, hint);
	if (err)
		goto out;
	s.next_in = in;
	s.avail_in = in_len;
	s.next_out = *out;
	s.avail_out = cap;
	for (;;) {
		r = lzma_code(&s, LZMA_FINISH);
		if (r == LZMA_STREAM_END)
			break;
		if (r == LZMA_OK && s.avail_out == 0) {
			size_t done = cap;

			err = kd_grow(out, &cap, cap + 1);
			if (err)
				goto out;
			s.next_out = *out + done;
			s.avail_out = cap - done;
			continue;
		}
		pr_debug(LOG_KSYM, "%s payload: liblzma error %d after %zu bytes",
			 alone ? "lzma" : "xz", (int)r, (size_t)s.total_out);
		err = r == LZMA_MEM_ERROR	 ? -ENOMEM
		      : r == LZMA_MEMLIMIT_ERROR ? -EFBIG /* a dictionary no kernel build asks */
						 : -EBADMSG;
		goto out;
	}
	*out_len = (size_t)s.total_out;
	err = 0;
out:
	lzma_end(&s);
	return err;
}

static int kd_unxz(const uint8_t *in, size_t in_len, size_t hint, uint8_t **out,
		   size_t *out_len)
{
	return kd_liblzma(in, in_len, hint, out, out_len, false);
}

static int kd_unlzma(const uint8_t *in, size_t in_len, size_t hint, uint8_t **out,
		     size_t *out_len)
{
	return kd_liblzma(in, in_len, hint, out, out_len, true);
}

static int kd_unzstd(const uint8_t *in, size_t in_len, size_t hint, uint8_t **out,
			 size_t *out_len)
{
	ZSTD_DStream *ds = ZSTD_createDStream();
	ZSTD_inBuffer ib = { in, in_len, 0 };
	ZSTD_outBuffer ob;
	size_t cap = 0, r;
	int err;

	if (!ds)
		return -ENOMEM;
	/* The kernel compresses with --ultra -22: a window of up to 2^27 bytes; no more. */
	ZSTD_DCtx_setParameter(ds, ZSTD_d_windowLogMax, 27);
	err = kd_grow(out, &cap, hint);
	if (err)
		goto out;
	ob = (ZSTD_outBuffer){ *out, cap, 0 };
	for (;;) {
		r = ZSTD_decompressStream(ds, &ob, &ib);
		if (ZSTD_isError(r)) {
			pr_debug(LOG_KSYM, "zstd payload: %s", ZSTD_getErrorName(r));
			err = -EBADMSG;
			goto out;
		}
		if (r == 0)
			break; /* frame complete; the 4-byte size trailer is left unread */
		if (ob.pos == ob.size) {
			err = kd_grow(out, &cap, cap + 1);
			if (err)
				goto out;
			ob.dst = *out;
			ob.size = cap;
		} else if (ib.pos == ib.size) {
			pr_debug(LOG_KSYM, "zstd payload: truncated");
			err = -EBADMSG;
			goto out;
		}
	}
	*out_len = ob.pos;
	err = 0;
out:
	ZSTD_freeDStream(ds);
	return err;
}

static int kd_gunzip(const uint8_t *in, size_t in_len, size_t hint, uint8_t **out,
			 size_t *out_len)
{
	z_stream z;
	size_t cap = 0;
	int r, err;

	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	err = kd_grow(out, &cap, hint);
	if (err)
		goto out;
	z.next_in = (Bytef *)in;
	z.avail_in = in_len > UINT32_MAX ? UINT32_MAX : (uInt)in_len;
	z.next_out = *out;
	z.avail_out = (uInt)cap;
	for (;;) {
		r = inflate(&z, Z_NO_FLUSH);
		if (r == Z_STREAM_END)
			break;
		if (r == Z_OK && z.avail_out == 0) {
			size_t done = cap;

			err = kd_grow(out, &cap, cap + 1);
			if (err)
				goto out;
			z.next_out = *out + done;
			z.avail_out = (uInt)(cap - done);
			continue;
		}
		err = r == Z_MEM_ERROR ? -ENOMEM : -EBADMSG;
		goto out;
	}
	*out_len = (size_t)z.total_out;
	err = 0;
out:
	inflateEnd(&z);
	return err;
}

static int kd_bunzip2(const uint8_t *in, size_t in_len, size_t hint, uint8_t **out,
		      size_t *out_len)
{
	bz_stream z;
	size_t cap = 0, done = 0;
	int r, err;

	memset(&z, 0, sizeof(z));
	if (in_len > UINT32_MAX)
		return -EFBIG; /* libbz2 counts input in unsigned ints (files are at most 512 MiB) */
	if (BZ2_bzDecompressInit(&z, 0, 0) != BZ_OK)
		return -ENOMEM;
	err = kd_grow(out, &cap, hint);
	if (err)
		goto out;
	z.next_in = (char *)in;
	z.avail_in = (unsigned int)in_len;
	for (;;) {
		z.next_out = (char *)*out + done;
		z.avail_out = (unsigned int)(cap - done);
		r = BZ2_bzDecompress(&z);
		done = cap - z.avail_out;
		if (r == BZ_STREAM_END)
			break;
		if (r == BZ_OK && z.avail_out == 0) {
			err = kd_grow(out, &cap, cap + 1);
			if (err)
				goto out;
			continue;
		}
		if (r == BZ_OK && z.avail_in == 0)
			r = BZ_UNEXPECTED_EOF;
		pr_debug(LOG_KSYM, "bzip2 payload: libbz2 error %d after %zu bytes", r, done);
		err = r == BZ_MEM_ERROR ? -ENOMEM : -EBADMSG;
		goto out;
	}
	*out_len = done;
	err = 0;
out:
	BZ2_bzDecompressEnd(&z);
	return err;
}

#define LZ4_LEGACY_MAGIC 0x184c2102u
#define LZ4_LEGACY_BLOCK (8u << 20) /* uncompressed bytes per block (lz4 -l) */

/*
 * The kernel's lz4 payload (`lz4 -l`, lib/decompress_unlz4.c): the legacy frame's magic, then
 * blocks, each its compressed size (32-bit LE) and LZ4 block data of at most 8 MiB
 * uncompressed; a magic between blocks starts another frame; the last 4 bytes are the size
 * trailer. Each block is decompressed by liblz4 (LZ4_decompress_safe: bounded by its input and
 * output).
 */
static int kd_unlz4(const uint8_t *in, size_t in_len, size_t hint, uint8_t **out,
		    size_t *out_len)
{
	size_t cap = 0, done = 0, pos = 4;
	int err;

	if (in_len < 8 || gi_le32(in) != LZ4_LEGACY_MAGIC)
		return -EBADMSG;
	err = kd_grow(out, &cap, hint);
	if (err)
		return err;
	/* SAFETY: pos <= in_len - 4 throughout: a block's size is read only when more than the
	 * trailer's 4 bytes are left, and its data only when it ends before the trailer */
	while (in_len - pos > 4) {
		uint32_t n = gi_le32(in + pos);
		size_t most;
		int r;

		pos += 4;
		if (n == LZ4_LEGACY_MAGIC)
			continue; /* another frame (lz4 -l of concatenated inputs) */
		if (n == 0 || n > in_len - 4 - pos ||
		    n > (uint32_t)LZ4_compressBound(LZ4_LEGACY_BLOCK)) {
			pr_debug(LOG_KSYM, "lz4 payload: a block of %u bytes at %zu of %zu", n,
				 pos - 4, in_len);
			return -EBADMSG;
		}
		/* room for what the block can hold: at most 8 MiB, and under 256 bytes per byte
		 * (a match's length grows by 255 per extension byte) */
		most = (size_t)n * 256 < LZ4_LEGACY_BLOCK ? (size_t)n * 256 : LZ4_LEGACY_BLOCK;
		err = kd_grow(out, &cap, done + most);
		if (err)
			return err;
		/* SAFETY: n <= LZ4_compressBound(8 MiB) and most <= 8 MiB <= cap - done (kd_grow):
		 * both fit an int; LZ4_decompress_safe writes at most @most bytes */
		r = LZ4_decompress_safe((const char *)in + pos, (char *)*out + done, (int)n,
					(int)most);
		if (r < 0) {
			pr_debug(LOG_KSYM, "lz4 payload: block at %zu does not decompress", pos - 4);
			return -EBADMSG;
		}
		done += (size_t)r;
		pos += n;
	}
	*out_len = done;
	return 0;
}

const char *kimage_payload_kind(const uint8_t *p, size_t len)
{
	static const struct {
		const char *name;
		const char *magic;
		size_t len;
	} kinds[] = {
		{ "xz", "\xfd" "7zXZ\0", 6 }, { "zstd", "\x28\xb5\x2f\xfd", 4 },
		{ "gzip", "\x1f\x8b", 2 },     { "none", "\177ELF", 4 },
		{ "lz4", "\x02\x21\x4c\x18", 4 }, { "lzo", "\x89LZO", 4 },
		{ "bzip2", "BZh", 3 },           { "lzma", "\x5d\x00\x00", 3 },
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (len >= kinds[i].len && !memcmp(p, kinds[i].magic, kinds[i].len))
			return kinds[i].name;
	return NULL;
}

int kimage_decompress(const char *kind, const uint8_t *in, size_t in_len, size_t hint,
		      uint8_t **out, size_t *out_len)
{
	static const struct {
		const char *name;
		int (*fn)(const uint8_t *, size_t, size_t, uint8_t **, size_t *);
	} fns[] = {
		{ "xz", kd_unxz },     { "zstd", kd_unzstd },   { "gzip", kd_gunzip },
		{ "lzma", kd_unlzma }, { "bzip2", kd_bunzip2 }, { "lz4", kd_unlz4 },
	};

	if (!kind || !in || !out || !out_len)
		return -EINVAL;
	/* the trailer is the file's word: a first allocation of at most 16 times the input (the
	 * kernel's payloads shrink 3 to 5 times), grown by doubling from there */
	if (hint > KIMAGE_MAX_PAYLOAD || hint / 16 > in_len)
		hint = in_len * 16 < KIMAGE_MAX_PAYLOAD ? in_len * 16 : 0;
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (!strcmp(kind, fns[i].name))
			return fns[i].fn(in, in_len, hint, out, out_len);
	return -ENOTSUP;
}
