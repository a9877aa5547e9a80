/* SPDX-License-Identifier: MIT */
/* Private to guestinfo: kernel image sections, kernel symbol entries and the symtab builder. */
#ifndef HVPROF_GUESTINFO_KIMAGE_INTERNAL_H
#define HVPROF_GUESTINFO_KIMAGE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hvprof/guestinfo.h>

#define KIMAGE_MAX_SECS 128

/* Little-endian fields of the image formats (the setup header, kallsyms tables, lz4 frames),
 * read from bytes that need not be aligned. */
static inline uint16_t gi_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t gi_le32(const uint8_t *p)
{
	return (uint32_t)gi_le16(p) | (uint32_t)gi_le16(p + 2) << 16;
}

static inline uint64_t gi_le64(const uint8_t *p)
{
	return (uint64_t)gi_le32(p) | (uint64_t)gi_le32(p + 4) << 32;
}

/* One allocated section of the vmlinux ELF: link-time [kva, kva + size), file bytes or NULL. */
struct kimage_sec {
	char name[48];
	uint64_t kva;
	uint64_t size;
	const uint8_t *data; /* NULL for SHT_NOBITS */
	bool exec;
};

/* Largest decompressed bzImage payload accepted (the 6.12 stock vmlinux is ~70 MB). */
#define KIMAGE_MAX_PAYLOAD (1024u << 20)

/* kimage_payload_kind - the compression of a bzImage payload @p (@len bytes) by its magic:
 * "xz", "zstd", "gzip", "lz4" (legacy frame), "lzo" (lzop), "bzip2", "lzma" (LZMA alone),
 * "none" (an ELF as is), the kinds Linux builds (arch/x86/boot/compressed/Makefile); NULL:
 * none of them. A static string. */
const char *kimage_payload_kind(const uint8_t *p, size_t len);

/* kimage_decompress - decompress the @kind payload @in (@in_len bytes, its 4-byte size trailer
 * included: never read) into *@out (malloc'd, *@out_len bytes; freed by the caller, also on
 * error); @hint: the trailer's size, the first allocation when plausible (at most 16 times
 * @in_len; else 1 MiB), grown by doubling (kdecomp.c). Return: 0; -ENOTSUP a kind without a
 * decoder here (lzo); -EBADMSG corrupt or truncated; -EFBIG over KIMAGE_MAX_PAYLOAD, or a
 * dictionary or window no kernel build uses (xz and lzma over 256 MiB of decoder memory, zstd
 * over a 2^27-byte window); -ENOMEM; -EINVAL. */
int kimage_decompress(const char *kind, const uint8_t *in, size_t in_len, size_t hint,
		      uint8_t **out, size_t *out_len);

/* The section called @name, or NULL. Owned by @img. */
const struct kimage_sec *kimage_section(const struct gi_kimage *img, const char *name);

/* A kernel symbol as System.map, /proc/kallsyms and the kallsyms tables give it. */
struct ksym_entry {
	uint64_t addr;
	char type;   /* nm type letter: t/T code, d/D/b/B/r/R data, a/A absolute, w/W weak */
	char *name;  /* malloc'd */
};

/* Free the names and the array of @n entries (NULL is fine). */
void ksym_entries_free(struct ksym_entry *e, size_t n);

/*
 * kallsyms_decode - find and decode the kallsyms tables in @buf (the .rodata of a vmlinux, or
 * any byte range holding them) by their structure alone. Return: 0 and a malloc'd array of
 * *@n entries in table order (sorted by address); -ENOENT tables not found; -ENOMEM.
 * @layout: out, optional: a one-line description of what was found (offsets of the tables,
 * address mode), NUL-terminated, at most @layout_size bytes.
 */
int kallsyms_decode(const uint8_t *buf, size_t len, struct ksym_entry **out, size_t *n,
		    char *layout, size_t layout_size) __must_check;

/*
 * symtab_from_entries - a symtab from kernel symbol entries: t/T (and w/W inside the text)
 * are code; everything else is kept for symtab_find(). Code ranges: [_stext or _text, _etext)
 * and [_sinittext, _einittext) when those symbols exist, else the span of the code symbols.
 * Ownership: @e is only read. Return: 0 and *@out; -ENODATA no code symbol; -ENOMEM.
 */
int symtab_from_entries(const struct ksym_entry *e, size_t n, struct symtab **out) __must_check;

/* Parse System.map / /proc/kallsyms text ("ADDR TYPE NAME [\t[module]]"). Module symbols and
 * lines that do not parse are skipped (counted in *@bad). */
int ksym_parse_map(const char *text, size_t len, struct ksym_entry **out, size_t *n,
		   size_t *bad) __must_check;

#endif /* HVPROF_GUESTINFO_KIMAGE_INTERNAL_H */
