// SPDX-License-Identifier: MIT
// Fuzz target: kernel images (gi_kimage_open: a vmlinux ELF, or a bzImage whose setup header
// locates an xz, zstd, gzip, lz4, lzma, bzip2 or uncompressed payload, the Linux boot protocol
// 2.08+), and what is read from one: the ELF, the relocation table after it, the banner, BTF,
// code by KVA and the kallsyms tables (symtab_from_kimage). The input is the file, written to a
// memfd.
// Invariants: the documented errors; an opened image's ELF starts with an ELF header within the
// file or payload; strings are NUL-terminated within their buffers; reads by KVA at each
// allocated section's start and end (the sections found with libelf) read or fail with -EFAULT
// and stay within the image (ASan); the relocation table follows the ELF, whole 32-bit entries,
// and it and the BTF are readable to their last byte (ASan).
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gelf.h>
#include <libelf.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "fuzz.h"

/* Reads by KVA in each allocated section of @img's ELF (found with libelf, independently of
 * kimage.c's index): @len bytes (1..64) at its start and at its end must read, as the file's
 * bytes where it has them; one byte past the end of the last must not (-EFAULT). */
static void fz_reads(const struct gi_kimage *img, size_t len)
{
	size_t elf_len;
	const uint8_t *bytes = gi_kimage_elf(img, &elf_len);
	Elf *elf = elf_memory((char *)bytes, elf_len);
	Elf_Scn *scn = NULL;
	uint8_t buf[64];
	int n = 0;

	if (!elf)
		return;
	while ((scn = elf_nextscn(elf, scn)) && n++ < 64) {
		GElf_Shdr sh;
		int err;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) || sh.sh_size < len ||
		    sh.sh_addr + sh.sh_size < sh.sh_addr)
			continue;
		err = gi_kimage_read_kva(img, sh.sh_addr, buf, len);
		FUZZ_CHECK(err == 0 || err == -EFAULT);
		if (!err && sh.sh_type != SHT_NOBITS && sh.sh_offset <= elf_len &&
		    len <= elf_len - sh.sh_offset)
			FUZZ_LOG("read %zu bytes at 0x%llx: %s\n", len,
				 (unsigned long long)sh.sh_addr,
				 memcmp(buf, bytes + sh.sh_offset, len) ? "differ" : "same");
		err = gi_kimage_read_kva(img, sh.sh_addr + sh.sh_size - len, buf, len);
		FUZZ_CHECK(err == 0 || err == -EFAULT);
	}
	elf_end(elf);
}

/* What an opened image gives. @data: the input (its last byte picks the read length). */
static void fz_image(const struct gi_kimage *img, const uint8_t *data, size_t size)
{
	const char *comp = gi_kimage_compression(img), *hv = gi_kimage_header_version(img);
	const void *tail, *btf;
	struct symtab *st = NULL;
	size_t len = 0, n;
	const uint8_t *elf = gi_kimage_elf(img, &len);
	char banner[256], layout[256];
	volatile uint8_t touch = 0;
	int err;

	FUZZ_CHECK(elf && len >= 64 && !memcmp(elf, "\177ELF", 4)); /* an Elf64_Ehdr at least */
	FUZZ_CHECK(!strcmp(comp, "none") || !strcmp(comp, "xz") || !strcmp(comp, "zstd") ||
		   !strcmp(comp, "gzip") || !strcmp(comp, "lz4") || !strcmp(comp, "lzma") ||
		   !strcmp(comp, "bzip2"));
	FUZZ_CHECK(strlen(hv) < 256);
	FUZZ_CHECK(gi_kimage_is_bzimage(img) || (len <= size && !strcmp(comp, "none")));
	err = gi_kimage_relocs(img, &tail, &n);
	FUZZ_LOG("relocs: %d, %zu bytes\n", err, err ? 0 : n);
	FUZZ_CHECK(err == 0 || err == -ENODATA || err == -EBADMSG);
	if (!err) {
		/* the payload's bytes after the ELF, all of them readable (ASan) */
		FUZZ_CHECK(gi_kimage_is_bzimage(img) && n > 0 && n % 4 == 0);
		FUZZ_CHECK((const uint8_t *)tail == elf + len);
		touch ^= ((const uint8_t *)tail)[0] ^ ((const uint8_t *)tail)[n - 1];
	}
	err = gi_kimage_linux_banner(img, banner, sizeof(banner));
	FUZZ_LOG("banner: %d %s\n", err, err ? "" : banner);
	FUZZ_CHECK(err == 0 || err == -ENOENT);
	if (!err)
		FUZZ_CHECK(strlen(banner) < sizeof(banner) && !strncmp(banner, "Linux version ", 14));
	err = gi_kimage_btf(img, &btf, &n);
	FUZZ_CHECK(err == 0 || err == -ENODATA);
	if (!err) {
		struct gi_layout l;
		int lerr;

		FUZZ_CHECK(btf && n > 0);
		touch ^= ((const uint8_t *)btf)[0] ^ ((const uint8_t *)btf)[n - 1];
		lerr = gi_layout_from_btf_data(btf, n, &l);
		FUZZ_LOG("btf: %zu bytes, layout %d\n", n, lerr);
	}
	fz_reads(img, size ? 1 + data[size - 1] % 64 : 8);
	err = symtab_from_kimage(img, &st, layout, sizeof(layout));
	FUZZ_CHECK(err == 0 || err == -ENODATA || err == -ENOMEM);
	FUZZ_LOG("image: %s, ELF %zu bytes, kallsyms %d (%zu symbols)\n", comp, len, err,
		 err ? 0 : symtab_count(st));
	if (!err) {
		FUZZ_CHECK(memchr(layout, '\0', sizeof(layout)) != NULL);
		symtab_free(st);
	}
	(void)touch;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gi_kimage *img = NULL;
	char path[64];
	int fd, err;

	hvp_log_set_level(HVP_LOG_ERR); /* a warning per bad image otherwise */
	fd = fuzz_memfd("fuzz-kimage", data, size, path, sizeof(path));
	if (fd < 0)
		return 0;
	err = gi_kimage_open(path, &img);
	FUZZ_LOG("open: %d\n", err);
	FUZZ_CHECK(err == 0 || err == -EBADMSG || err == -ENOTSUP || err == -EFBIG ||
		   err == -ENOMEM);
	FUZZ_CHECK(err ? img == NULL : img != NULL);
	if (!err)
		fz_image(img, data, size);
	gi_kimage_free(img);
	close(fd);
	return 0;
}
