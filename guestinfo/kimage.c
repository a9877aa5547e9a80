// SPDX-License-Identifier: MIT
// Kernel image files: a vmlinux ELF as is, or a bzImage whose payload (the vmlinux ELF, plus the
// relocation table the decompressor applies for KASLR) is decompressed on the host.
#define pr_fmt(fmt) "kimage: " fmt

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>
#include <hvprof/file.h>
#include <hvprof/log.h>

#include "kimage_internal.h"

/* Largest file accepted (the largest decompressed payload: KIMAGE_MAX_PAYLOAD). */
#define KIMAGE_MAX_FILE (512u << 20)

struct gi_kimage {
	uint8_t *file;     /* the whole file */
	size_t file_len;
	uint8_t *payload;  /* decompressed bzImage payload (NULL for an ELF file) */
	size_t payload_len;
	const uint8_t *elf; /* the vmlinux ELF: file or payload */
	size_t elf_len;    /* bytes of the ELF proper (its last section or header table end) */
	const char *compression;
	char header_version[256];
	struct kimage_sec secs[KIMAGE_MAX_SECS];
	size_t n_secs;
};

static int kimage_read_file(const char *path, uint8_t **buf, size_t *len)
{
	int err = hvp_read_file(path, 1, KIMAGE_MAX_FILE, (void **)buf, len);

	if (err)
		pr_debug(LOG_KSYM, "%s: %s", path,
			 err == -EFBIG || err == -EINVAL ? "not a regular file of 1 byte to 512 MiB"
							 : hvp_strerror(err));
	return err == -EFBIG || err == -EINVAL ? -EBADMSG : err;
}

/* The payload of the bzImage @b (@len bytes, its setup header checked: boot protocol 2.08+)
 * in *@pay, *@pay_len bytes: at payload_offset (0x248) from the protected-mode code at
 * (setup_sects + 1) * 512, payload_length (0x24c) bytes (Documentation/x86/boot.rst).
 * Return: 0; -EBADMSG outside the file or under 8 bytes. */
static int bz_payload(const uint8_t *b, size_t len, const uint8_t **pay, size_t *pay_len)
{
	size_t pm_off = ((size_t)(b[0x1f1] ? b[0x1f1] : 4) + 1) * 512;
	size_t off = gi_le32(b + 0x248), n = gi_le32(b + 0x24c);

	/* SAFETY: the payload range is checked against the file before any read. */
	if (pm_off > len || off > len - pm_off || n > len - pm_off - off || n < 8)
		return -EBADMSG;
	*pay = b + pm_off + off;
	*pay_len = n;
	return 0;
}

bool gi_kimage_host_boots(const char *compression)
{
	return compression && (!strcmp(compression, "xz") || !strcmp(compression, "zstd") ||
			       !strcmp(compression, "gzip") || !strcmp(compression, "none"));
}

const char *gi_bzimage_compression(const uint8_t *file, size_t len)
{
	const uint8_t *pay;
	size_t pay_len;

	if (!file || len < 0x270 || gi_le16(file + 0x1fe) != 0xaa55 ||
	    gi_le32(file + 0x202) != 0x53726448 || gi_le16(file + 0x206) < 0x0208 ||
	    bz_payload(file, len, &pay, &pay_len) != 0)
		return NULL;
	return kimage_payload_kind(pay, pay_len);
}

/*
 * The protected-mode payload of a bzImage (Documentation/x86/boot.rst): the setup header's
 * payload_offset (0x248) and payload_length (0x24c), protocol 2.08+, relative to the
 * protected-mode code at (setup_sects + 1) * 512; its kernel_version string at 0x20e + 0x200.
 */
static int kimage_bzimage_payload(struct gi_kimage *img, const char *path)
{
	const uint8_t *b = img->file;
	size_t len = img->file_len, pay_len, hint = 0;
	const uint8_t *pay;
	uint16_t version, kv;
	int err;

	if (len < 0x270 || gi_le16(b + 0x1fe) != 0xaa55 || gi_le32(b + 0x202) != 0x53726448)
		return -EBADMSG;
	version = gi_le16(b + 0x206);
	kv = gi_le16(b + 0x20e);
	/* SAFETY: kv + 0x200 is bounded by len; the copy stops at a NUL or the buffer end. */
	if (kv && (size_t)kv + 0x200 < len) {
		size_t n = strnlen((const char *)b + kv + 0x200,
				   len - kv - 0x200 < sizeof(img->header_version) - 1
					   ? len - kv - 0x200
					   : sizeof(img->header_version) - 1);

		memcpy(img->header_version, b + kv + 0x200, n);
		img->header_version[n] = '\0';
	}
	if (version < 0x0208) {
		pr_warn("%s: boot protocol %x.%02x has no payload fields", path, version >> 8,
			version & 0xff);
		return -ENOTSUP;
	}
	if (bz_payload(b, len, &pay, &pay_len) != 0) {
		pr_warn("%s: payload 0x%x+0x%x lies outside the file", path,
			gi_le32(b + 0x248), gi_le32(b + 0x24c));
		return -EBADMSG;
	}
	/* The last 4 bytes of a compressed payload: decompressed size (size_append). */
	hint = gi_le32(pay + pay_len - 4);
	img->compression = kimage_payload_kind(pay, pay_len);
	if (!img->compression) {
		pr_warn("%s: payload compression %02x %02x %02x %02x is unknown (xz, zstd, gzip, "
			"lz4, lzo, bzip2, lzma are Linux's)", path, pay[0], pay[1], pay[2], pay[3]);
		return -ENOTSUP;
	}
	if (!strcmp(img->compression, "none")) {
		img->payload = malloc(pay_len);
		if (!img->payload)
			return -ENOMEM;
		memcpy(img->payload, pay, pay_len);
		img->payload_len = pay_len;
		err = 0;
	} else {
		err = kimage_decompress(img->compression, pay, pay_len, hint, &img->payload,
					&img->payload_len);
		if (err == -ENOTSUP) {
			/* lzo (lzop's format): no library here reads it */
			pr_info("%s: %s payload: hvprof decompresses xz, zstd, gzip, lz4, bzip2 "
				"and lzma on the host", path, img->compression);
			return err;
		}
	}
	if (err) {
		pr_warn("%s: cannot decompress the %s payload: %s", path, img->compression,
			hvp_strerror(err));
		return err;
	}
	if (img->payload_len < 64 || memcmp(img->payload, "\177ELF", 4)) {
		pr_warn("%s: the %s payload is not an ELF file", path, img->compression);
		return -EBADMSG;
	}
	img->elf = img->payload;
	img->elf_len = img->payload_len;
	return 0;
}

/* Index the allocated sections of the ELF (name, kva, file range) for reads by kva. */
static int kimage_index_elf(struct gi_kimage *img, const char *path)
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	GElf_Ehdr ehdr;
	size_t shstrndx, shnum, end = 0;
	int err = 0;

	elf_version(EV_CURRENT);
	elf = elf_memory((char *)img->elf, img->elf_len);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr) ||
	    gelf_getclass(elf) != ELFCLASS64 || ehdr.e_machine != EM_X86_64 ||
	    elf_getshdrstrndx(elf, &shstrndx) != 0) {
		pr_warn("%s: not an x86-64 ELF kernel", path);
		err = -EBADMSG;
		goto out;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		struct kimage_sec *s;

		if (!gelf_getshdr(scn, &sh)) {
			err = -EBADMSG;
			goto out;
		}
		if (sh.sh_type != SHT_NOBITS && sh.sh_offset + sh.sh_size > end &&
		    sh.sh_offset <= img->elf_len && sh.sh_size <= img->elf_len - sh.sh_offset)
			end = sh.sh_offset + sh.sh_size;
		if (!(sh.sh_flags & SHF_ALLOC) || img->n_secs >= KIMAGE_MAX_SECS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		s = &img->secs[img->n_secs];
		memset(s, 0, sizeof(*s));
		snprintf(s->name, sizeof(s->name), "%s", name ? name : "");
		s->kva = sh.sh_addr;
		s->size = sh.sh_size;
		s->exec = (sh.sh_flags & SHF_EXECINSTR) != 0;
		if (sh.sh_type != SHT_NOBITS) {
			/* SAFETY: a section's file range must lie inside the ELF bytes. */
			if (sh.sh_offset > img->elf_len || sh.sh_size > img->elf_len - sh.sh_offset) {
				pr_warn("%s: section %s lies outside the file", path, s->name);
				err = -EBADMSG;
				goto out;
			}
			s->data = img->elf + sh.sh_offset;
		}
		img->n_secs++;
	}
	/* The ELF ends at its section header table (vmlinux.bin puts it last); the bzImage
	 * payload continues with the relocation table (arch/x86/boot/compressed/Makefile). The
	 * table is counted as libelf reads it (none when it does not fit: a header's count and
	 * entry size are the file's word) and read with libelf's entry size: one that says
	 * otherwise, or lies over the ELF header or past the bytes, is not a kernel's. So the
	 * ELF's end is 0 (no sections) or past its header, never inside it. */
	if (elf_getshdrnum(elf, &shnum) == 0 && shnum) {
		uint64_t sh_end;

		if (ehdr.e_shentsize != sizeof(Elf64_Shdr) || ehdr.e_shoff < sizeof(Elf64_Ehdr) ||
		    __builtin_mul_overflow((uint64_t)shnum, sizeof(Elf64_Shdr), &sh_end) ||
		    __builtin_add_overflow(sh_end, ehdr.e_shoff, &sh_end) || sh_end > img->elf_len) {
			pr_warn("%s: the section header table (%zu entries of %u bytes at 0x%llx) "
				"is not within the ELF", path, shnum, ehdr.e_shentsize,
				(unsigned long long)ehdr.e_shoff);
			err = -EBADMSG;
			goto out;
		}
		if (sh_end > end)
			end = sh_end;
	}
	if (end && end <= img->elf_len)
		img->elf_len = end;
out:
	if (elf)
		elf_end(elf);
	return err;
}

int gi_kimage_open(const char *path, struct gi_kimage **out)
{
	struct gi_kimage *img;
	int err;

	if (!path || !out)
		return -EINVAL;
	img = calloc(1, sizeof(*img));
	if (!img)
		return -ENOMEM;
	err = kimage_read_file(path, &img->file, &img->file_len);
	if (err)
		goto err_free;
	if (img->file_len >= 4 && !memcmp(img->file, "\177ELF", 4)) {
		img->elf = img->file;
		img->elf_len = img->file_len;
		img->compression = "none";
	} else {
		err = kimage_bzimage_payload(img, path);
		if (err)
			goto err_free;
	}
	err = kimage_index_elf(img, path);
	if (err)
		goto err_free;
	pr_debug(LOG_KSYM, "%s: %s kernel, ELF of %zu bytes, %zu sections", path,
		 img->payload ? img->compression : "ELF", img->elf_len, img->n_secs);
	*out = img;
	return 0;

err_free:
	gi_kimage_free(img);
	return err;
}

void gi_kimage_free(struct gi_kimage *img)
{
	if (!img)
		return;
	free(img->file);
	free(img->payload);
	free(img);
}

const uint8_t *gi_kimage_elf(const struct gi_kimage *img, size_t *len)
{
	if (len)
		*len = img ? img->elf_len : 0;
	return img ? img->elf : NULL;
}

int gi_kimage_relocs(const struct gi_kimage *img, const void **tail, size_t *len)
{
	size_t n;

	if (!img || !tail || !len)
		return -EINVAL;
	if (!img->payload || img->elf_len >= img->payload_len)
		return -ENODATA;
	n = img->payload_len - img->elf_len;
	if (n % 4)
		return -EBADMSG;
	*tail = img->payload + img->elf_len;
	*len = n;
	return 0;
}

bool gi_kimage_is_bzimage(const struct gi_kimage *img)
{
	return img && img->payload;
}

const char *gi_kimage_compression(const struct gi_kimage *img)
{
	return img && img->compression ? img->compression : "none";
}

const char *gi_kimage_header_version(const struct gi_kimage *img)
{
	return img ? img->header_version : "";
}

const struct kimage_sec *kimage_section(const struct gi_kimage *img, const char *name)
{
	for (size_t i = 0; img && i < img->n_secs; i++)
		if (!strcmp(img->secs[i].name, name))
			return &img->secs[i];
	return NULL;
}

int gi_kimage_read_kva(const struct gi_kimage *img, uint64_t kva, void *dst, size_t len)
{
	if (!img || (!dst && len))
		return -EINVAL;
	for (size_t i = 0; i < img->n_secs; i++) {
		const struct kimage_sec *s = &img->secs[i];

		/* SAFETY: [kva, kva+len) must lie inside one section with file bytes. */
		if (!s->data || kva < s->kva || kva - s->kva > s->size || len > s->size - (kva - s->kva))
			continue;
		memcpy(dst, s->data + (kva - s->kva), len);
		return 0;
	}
	return -EFAULT;
}

int gi_kimage_linux_banner(const struct gi_kimage *img, char *buf, size_t size)
{
	const struct kimage_sec *ro = kimage_section(img, ".rodata");
	static const char prefix[] = "Linux version ";

	if (!img || !buf || !size)
		return -EINVAL;
	if (!ro || !ro->data)
		return -ENOENT;
	/* linux_banner (init/version.c) is "Linux version <release> (...) ...\n" in .rodata. */
	for (const uint8_t *p = ro->data; p && p + sizeof(prefix) < ro->data + ro->size;) {
		size_t left = (size_t)(ro->data + ro->size - p), n = 0;

		p = memmem(p, left, prefix, sizeof(prefix) - 1);
		if (!p)
			break;
		left = (size_t)(ro->data + ro->size - p);
		while (n < left && n + 1 < size && p[n] && p[n] != '\n' && p[n] >= 0x20 && p[n] < 0x7f)
			n++;
		/* The banner has a release and "#<build>": a bare format string has "%s". */
		if (n > sizeof(prefix) && p[sizeof(prefix) - 1] >= '0' && p[sizeof(prefix) - 1] <= '9' &&
		    !memchr(p, '%', n)) {
			memcpy(buf, p, n);
			buf[n] = '\0';
			return 0;
		}
		p += sizeof(prefix) - 1;
	}
	return -ENOENT;
}

int gi_kimage_btf(const struct gi_kimage *img, const void **data, size_t *size)
{
	const struct kimage_sec *s;
	Elf *elf;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	int err = -ENODATA;

	if (!img || !data || !size)
		return -EINVAL;
	/* .BTF is allocated in vmlinux (it backs /sys/kernel/btf/vmlinux), but look at every
	 * section in case a linker script made it non-allocated. */
	s = kimage_section(img, ".BTF");
	if (s && s->data && s->size) {
		*data = s->data;
		*size = s->size;
		return 0;
	}
	elf = elf_memory((char *)img->elf, img->elf_len);
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		goto out;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		/* SAFETY: the section's file range is checked against the ELF bytes. */
		if (name && !strcmp(name, ".BTF") && sh.sh_size && sh.sh_offset <= img->elf_len &&
		    sh.sh_size <= img->elf_len - sh.sh_offset) {
			*data = img->elf + sh.sh_offset;
			*size = sh.sh_size;
			err = 0;
			break;
		}
	}
out:
	if (elf)
		elf_end(elf);
	return err;
}
