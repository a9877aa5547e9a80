// SPDX-License-Identifier: MIT
// Fuzz target: kernel images (gi_kimage_open: a vmlinux ELF, or a bzImage whose setup header
// locates an xz, zstd, gzip or uncompressed payload, the Linux boot protocol 2.08+), and what
// is read from one: the ELF, the relocation table after it, the banner, BTF, code by KVA and
// the kallsyms tables (symtab_from_kimage). The input is the file, written to a memfd.
// Invariants: the documented errors; an opened image's ELF starts with the ELF magic within the
// file or payload; strings are NUL-terminated within their buffers; reads by KVA stay within
// the image (ASan) and fail with -EFAULT outside its sections; the relocation table is whole
// 32-bit entries.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "fuzz.h"

/* What an opened image gives. @data: the input (its last 8 bytes pick a KVA to read). */
static void fz_image(const struct gi_kimage *img, const uint8_t *data, size_t size)
{
	const char *comp = gi_kimage_compression(img), *hv = gi_kimage_header_version(img);
	const void *tail, *btf;
	struct symtab *st = NULL;
	size_t len = 0, n;
	const uint8_t *elf = gi_kimage_elf(img, &len);
	char banner[256], layout[256];
	uint8_t buf[64];
	uint64_t kva;
	int err;

	FUZZ_CHECK(elf && len >= 64 && !memcmp(elf, "\177ELF", 4)); /* an Elf64_Ehdr at least */
	FUZZ_CHECK(!strcmp(comp, "none") || !strcmp(comp, "xz") || !strcmp(comp, "zstd") ||
		   !strcmp(comp, "gzip"));
	FUZZ_CHECK(strlen(hv) < 256);
	FUZZ_CHECK(gi_kimage_is_bzimage(img) || (len <= size && !strcmp(comp, "none")));
	err = gi_kimage_relocs(img, &tail, &n);
	FUZZ_CHECK(err == 0 || err == -ENODATA || err == -EBADMSG);
	if (!err)
		FUZZ_CHECK(gi_kimage_is_bzimage(img) && tail && n > 0 && n % 4 == 0);
	FUZZ_LOG("relocs: %d, %zu bytes\n", err, err ? 0 : n);
	err = gi_kimage_linux_banner(img, banner, sizeof(banner));
	FUZZ_LOG("banner: %d %s\n", err, err ? "" : banner);
	FUZZ_CHECK(err == 0 || err == -ENOENT);
	if (!err)
		FUZZ_CHECK(strlen(banner) < sizeof(banner) && !strncmp(banner, "Linux version ", 14));
	err = gi_kimage_btf(img, &btf, &n);
	FUZZ_CHECK(err == 0 || err == -ENODATA);
	if (!err)
		FUZZ_CHECK(btf && n > 0);
	kva = size >= 8 ? fuzz_get64(data + size - 8) : 0;
	for (size_t k = 0; k < 3; k++) {
		err = gi_kimage_read_kva(img, kva + k * 4093, buf, sizeof(buf));
		FUZZ_CHECK(err == 0 || err == -EFAULT);
	}
	err = symtab_from_kimage(img, &st, layout, sizeof(layout));
	FUZZ_CHECK(err == 0 || err == -ENODATA || err == -ENOMEM);
	FUZZ_LOG("image: %s, ELF %zu bytes, kallsyms %d\n", comp, len, err);
	if (!err) {
		FUZZ_CHECK(memchr(layout, '\0', sizeof(layout)) != NULL);
		symtab_free(st);
	}
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
