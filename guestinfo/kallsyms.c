// SPDX-License-Identifier: MIT
// The kallsyms tables embedded in a kernel image (scripts/kallsyms.c output), found by their
// structure and decoded, so a stripped kernel still names its functions.
//
// What the tables are (scripts/kallsyms.c, write_src; every label ".balign 8" on 64-bit):
//   kallsyms_num_syms      .long N, immediately followed by
//   kallsyms_names         N entries: length (1 byte, or 2 bytes ULEB128 when > 0x7f, 6.1+),
//                          then that many token indices; the first expanded char is the type
//   kallsyms_markers       .long offset into names of every 256th entry
//   kallsyms_token_table   256 NUL-terminated strings, immediately followed by
//   kallsyms_token_index   256 .short offsets of those strings
//   kallsyms_offsets       N .long, and kallsyms_relative_base .quad: address of entry i is
//                          base + (u32)off (relative mode) or, with KALLSYMS_ABSOLUTE_PERCPU,
//                          off when off >= 0 and base - 1 - off otherwise
//   kallsyms_seqs_of_names (6.2+; also in Debian's 6.1.1xx) name-sorted order: not needed here
// The order of the tables changed across versions (offsets first up to 6.3, last from 6.4 on;
// seqs_of_names 3 bytes or 4), so nothing below depends on where one table sits relative to
// another, except the pairs that never change: num_syms right before names, and token_table
// right before token_index.
#define pr_fmt(fmt) "kallsyms: " fmt

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/log.h>

#include "kimage_internal.h"

#define KALLSYMS_ALIGN 8
#define KALLSYMS_MAX_SYMS (1u << 22)  /* 6.12 stock: ~200k; 4M is far beyond any kernel */
/* Fewer would make a chance match in other data plausible; every kernel has tens of thousands. */
#define KALLSYMS_MIN_SYMS 256
#define KALLSYMS_NAME_MAX 512         /* KSYM_NAME_LEN is 512 since 6.1 */
#define KALLSYMS_PROBE 256            /* names checked before a full parse */

struct ks_tokens {
	size_t table_off;  /* of kallsyms_token_table in buf */
	size_t index_off;  /* of kallsyms_token_index */
	uint16_t idx[256];
	uint8_t len[256];  /* length of each token */
};

/*
 * Is there a token table that ends just before a token index at @p? The index is 256
 * increasing u16 starting at 0; the strings are printable, non-empty and NUL-terminated at
 * exactly the offsets the index gives; between the last one and the index there are only the
 * zero bytes of the alignment.
 */
static bool ks_tokens_at(const uint8_t *buf, size_t len, size_t p, struct ks_tokens *t)
{
	size_t e, s, tab;

	if (p + 512 > len || gi_le16(buf + p) != 0)
		return false;
	for (int i = 0; i < 256; i++) {
		t->idx[i] = gi_le16(buf + p + 2 * i);
		if (i && (t->idx[i] <= t->idx[i - 1] || t->idx[i] - t->idx[i - 1] > 255))
			return false;
	}
	/* Step back over the padding and the last string's NUL, then over the last string. */
	e = p;
	while (e > 0 && p - e < KALLSYMS_ALIGN + 1 && buf[e - 1] == 0)
		e--;
	if (e == p || p - e > KALLSYMS_ALIGN)
		return false;
	s = e;
	while (s > 0 && e - s < 256 && buf[s - 1] != 0)
		s--;
	if (s == e || s < t->idx[255])
		return false;
	tab = s - t->idx[255];
	if (tab % KALLSYMS_ALIGN)
		return false;
	for (int i = 0; i < 256; i++) {
		size_t start = tab + t->idx[i];
		size_t end = i < 255 ? tab + t->idx[i + 1] - 1 : e;

		/* SAFETY: start < end <= p <= len by the checks above. */
		if (end <= start || buf[end] != 0 || end - start > 255)
			return false;
		for (size_t k = start; k < end; k++)
			if (buf[k] < 0x20 || buf[k] > 0x7e)
				return false;
		t->len[i] = (uint8_t)(end - start);
	}
	t->table_off = tab;
	t->index_off = p;
	return true;
}

static int ks_find_tokens(const uint8_t *buf, size_t len, struct ks_tokens *t)
{
	for (size_t p = KALLSYMS_ALIGN; p + 512 <= len; p += KALLSYMS_ALIGN)
		if (ks_tokens_at(buf, len, p, t))
			return 0;
	return -ENOENT;
}

/*
 * Parse one names entry at @off: *@sym_len token bytes follow *@hdr length bytes.
 * Return: false when the entry does not fit in @len or has length 0.
 */
static bool ks_entry(const uint8_t *buf, size_t len, size_t off, size_t *hdr, size_t *sym_len)
{
	size_t l;

	if (off >= len)
		return false;
	l = buf[off];
	*hdr = 1;
	if (l & 0x80) {
		if (off + 1 >= len)
			return false;
		l = (l & 0x7f) | (size_t)buf[off + 1] << 7;
		*hdr = 2;
	}
	/* SAFETY: the whole entry must lie inside the buffer. */
	if (l == 0 || off + *hdr + l > len)
		return false;
	*sym_len = l;
	return true;
}

static bool ks_is_type(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '?';
}

/* Expand one entry's tokens into @out (NUL-terminated; @out_size >= 2). */
static size_t ks_expand(const uint8_t *buf, const struct ks_tokens *t, size_t off, size_t n,
			char *out, size_t out_size)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t tok = buf[off + i];
		/* SAFETY: tok < 256 indexes idx/len; the token lies inside the checked table. */
		const uint8_t *src = buf + t->table_off + t->idx[tok];

		for (size_t k = 0; k < t->len[tok] && o + 1 < out_size; k++)
			out[o++] = (char)src[k];
	}
	out[o] = '\0';
	return o;
}

struct ks_names {
	size_t num_off;    /* of kallsyms_num_syms */
	size_t names_off;  /* of kallsyms_names */
	size_t markers_off;
	uint32_t n;
};

/*
 * Does kallsyms_num_syms sit at @q? N fits, the names that follow expand to a type letter and
 * printable text, and kallsyms_markers right after the names (aligned) holds exactly the offset
 * of every 256th entry.
 */
static bool ks_names_at(const uint8_t *buf, size_t len, size_t q, const struct ks_tokens *t,
			struct ks_names *out)
{
	uint32_t n = gi_le32(buf + q), n_markers;
	size_t off, names, m, hdr, sl;
	char first[KALLSYMS_NAME_MAX];

	if (n < KALLSYMS_MIN_SYMS || n > KALLSYMS_MAX_SYMS || gi_le32(buf + q + 4) != 0)
		return false;
	names = q + 8;
	off = names;
	for (uint32_t i = 0; i < n && i < KALLSYMS_PROBE; i++) {
		if (!ks_entry(buf, len, off, &hdr, &sl))
			return false;
		ks_expand(buf, t, off + hdr, sl, first, sizeof(first));
		if (!ks_is_type(first[0]) || !first[1])
			return false;
		off += hdr + sl;
	}
	/* The full walk; markers are checked afterwards against the offsets seen. */
	off = names;
	for (uint32_t i = 0; i < n; i++) {
		if (!ks_entry(buf, len, off, &hdr, &sl))
			return false;
		off += hdr + sl;
	}
	m = (off + KALLSYMS_ALIGN - 1) & ~(size_t)(KALLSYMS_ALIGN - 1);
	n_markers = (n + 255) / 256;
	if (m > len || (size_t)n_markers * 4 > len - m)
		return false;
	off = names;
	for (uint32_t i = 0; i < n; i++) {
		if (i % 256 == 0 && gi_le32(buf + m + 4 * (i / 256)) != off - names)
			return false;
		(void)ks_entry(buf, len, off, &hdr, &sl);
		off += hdr + sl;
	}
	out->num_off = q;
	out->names_off = names;
	out->markers_off = m;
	out->n = n;
	return true;
}

static int ks_find_names(const uint8_t *buf, size_t len, const struct ks_tokens *t,
			 struct ks_names *out)
{
	for (size_t q = 0; q + 16 <= len; q += KALLSYMS_ALIGN)
		if (ks_names_at(buf, len, q, t, out))
			return 0;
	return -ENOENT;
}

enum ks_mode { KS_RELATIVE, KS_ABSOLUTE_PERCPU };

static uint64_t ks_addr(enum ks_mode mode, uint64_t base, int32_t off)
{
	if (mode == KS_RELATIVE)
		return base + (uint32_t)off;
	return off >= 0 ? (uint64_t)off : base - 1 - (uint64_t)(int64_t)off;
}

/*
 * Is kallsyms_relative_base at @r (with kallsyms_offsets right before it)? The base is a
 * kernel-half address, the decoded addresses never decrease (the table is sorted by address),
 * and the first relative entry is the base itself (record_relative_base()).
 */
static bool ks_offsets_at(const uint8_t *buf, size_t r, uint32_t n, enum ks_mode mode,
			  size_t *off_out)
{
	uint64_t base = gi_le64(buf + r), prev = 0;
	size_t bytes = ((size_t)n * 4 + KALLSYMS_ALIGN - 1) & ~(size_t)(KALLSYMS_ALIGN - 1);
	size_t o;
	bool seen_rel = false;

	if (base >> 47 != 0x1ffff || r < bytes)
		return false;
	o = r - bytes;
	for (uint32_t i = 0; i < n; i++) {
		int32_t v = (int32_t)gi_le32(buf + o + 4 * (size_t)i);
		uint64_t a = ks_addr(mode, base, v);
		bool rel = mode == KS_RELATIVE || v < 0;

		if (i && a < prev)
			return false;
		if (rel && !seen_rel) {
			if (a != base)
				return false;
			seen_rel = true;
		}
		prev = a;
	}
	if (!seen_rel)
		return false;
	*off_out = o;
	return true;
}

static int ks_find_offsets(const uint8_t *buf, size_t len, uint32_t n, size_t *offsets_off,
			   size_t *base_off, enum ks_mode *mode)
{
	for (size_t r = KALLSYMS_ALIGN; r + 8 <= len; r += KALLSYMS_ALIGN) {
		if (gi_le64(buf + r) >> 47 != 0x1ffff)
			continue;
		for (int m = KS_RELATIVE; m <= KS_ABSOLUTE_PERCPU; m++) {
			if (ks_offsets_at(buf, r, n, (enum ks_mode)m, offsets_off)) {
				*base_off = r;
				*mode = (enum ks_mode)m;
				return 0;
			}
		}
	}
	return -ENOENT;
}

void ksym_entries_free(struct ksym_entry *e, size_t n)
{
	for (size_t i = 0; e && i < n; i++)
		free(e[i].name);
	free(e);
}

int kallsyms_decode(const uint8_t *buf, size_t len, struct ksym_entry **out, size_t *n_out,
		    char *layout, size_t layout_size)
{
	struct ks_tokens tok;
	struct ks_names names;
	struct ksym_entry *e;
	size_t offsets_off, base_off, off, hdr, sl;
	enum ks_mode mode;
	uint64_t base;
	char name[KALLSYMS_NAME_MAX];
	int err;

	if (!buf || !out || !n_out)
		return -EINVAL;
	err = ks_find_tokens(buf, len, &tok);
	if (err) {
		pr_debug(LOG_KSYM, "no kallsyms_token_table/kallsyms_token_index");
		return err;
	}
	err = ks_find_names(buf, len, &tok, &names);
	if (err) {
		pr_debug(LOG_KSYM, "no kallsyms_num_syms/kallsyms_names/kallsyms_markers");
		return err;
	}
	err = ks_find_offsets(buf, len, names.n, &offsets_off, &base_off, &mode);
	if (err) {
		pr_debug(LOG_KSYM, "no kallsyms_offsets/kallsyms_relative_base for %u symbols",
			 names.n);
		return err;
	}
	base = gi_le64(buf + base_off);
	e = calloc(names.n, sizeof(*e));
	if (!e)
		return -ENOMEM;
	off = names.names_off;
	for (uint32_t i = 0; i < names.n; i++) {
		/* SAFETY: every entry was bounds-checked by ks_names_at. */
		(void)ks_entry(buf, len, off, &hdr, &sl);
		ks_expand(buf, &tok, off + hdr, sl, name, sizeof(name));
		off += hdr + sl;
		e[i].type = name[0];
		e[i].addr = ks_addr(mode, base, (int32_t)gi_le32(buf + offsets_off + 4 * (size_t)i));
		e[i].name = strdup(name + 1);
		if (!e[i].name) {
			ksym_entries_free(e, i);
			return -ENOMEM;
		}
	}
	if (layout && layout_size)
		snprintf(layout, layout_size,
			 "num_syms@+0x%zx (%u) names@+0x%zx markers@+0x%zx token_table@+0x%zx "
			 "token_index@+0x%zx offsets@+0x%zx relative_base@+0x%zx (0x%llx, %s); "
			 "offsets %s names",
			 names.num_off, names.n, names.names_off, names.markers_off, tok.table_off,
			 tok.index_off, offsets_off, base_off, (unsigned long long)base,
			 mode == KS_RELATIVE ? "relative" : "absolute-percpu",
			 offsets_off < names.num_off ? "before (<= 6.3 layout)"
						     : "after (6.4+ layout)");
	pr_debug(LOG_KSYM, "%u symbols, relative_base 0x%llx", names.n, (unsigned long long)base);
	*out = e;
	*n_out = names.n;
	return 0;
}
