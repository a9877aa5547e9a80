// SPDX-License-Identifier: MIT
// The guest's 64-bit vDSO out of its vmlinux: the kernel keeps the image it maps into every
// process in its own .rodata (struct vdso_image vdso_image_64, arch/x86/include/asm/vdso.h,
// whose .data points at the image bytes); the bytes go to a memfd, as filefind.c does with
// files read out of disk images. The vmlinux comes from the user: every read is bounded by its
// section headers and its size.
#define pr_fmt(fmt) "vdso: " fmt

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "symbolize_internal.h"

#define VDSO_PAGE 4096ull

/*
 * The file offset of kernel GVAs [@kva, @kva + @len) in the PROGBITS, allocated section that
 * holds them all, checked against the file's @file_size bytes. The vmlinux's own section
 * headers are the source (its segments pack several sections; sections are exact).
 * Return: 0 and *@off; -EBADMSG no such section, or one whose bytes lie past the file's end.
 */
static int kva_to_off(Elf *elf, uint64_t file_size, uint64_t kva, uint64_t len, uint64_t *off)
{
	Elf_Scn *scn = NULL;
	uint64_t end;

	if (__builtin_add_overflow(kva, len, &end))
		return -EBADMSG;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		uint64_t sec_end, file_end;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_ALLOC) || kva < sh.sh_addr ||
		    __builtin_add_overflow(sh.sh_addr, sh.sh_size, &sec_end) || end > sec_end)
			continue;
		if (__builtin_add_overflow(sh.sh_offset, sh.sh_size, &file_end) ||
		    file_end > file_size)
			return -EBADMSG;
		/* SAFETY: sh_addr <= kva and kva + len <= sh_addr + sh_size, so the offset and
		 * its len bytes lie in [sh_offset, sh_offset + sh_size) <= file_size. */
		*off = sh.sh_offset + (kva - sh.sh_addr);
		return 0;
	}
	return -EBADMSG;
}

/* Read exactly @len bytes at @off of @fd. Return: 0; -EBADMSG short file; read errors. */
static int read_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EBADMSG;
		done += (size_t)r;
	}
	return 0;
}

/*
 * Whether the @len bytes at @img are the x86-64 vDSO as the kernel builds it (vdso2c checks the
 * same): a little-endian ELF64 shared object for x86-64 whose first PT_LOAD maps file offset 0,
 * every program header inside @len. *@vaddr0: that PT_LOAD's p_vaddr (0 since Linux 5.x, where
 * vdso.lds links at 0; older images linked elsewhere).
 * Return: 0; -EBADMSG anything else.
 */
static int check_image(const void *img, size_t len, uint64_t *vaddr0)
{
	Elf *elf = elf_memory((char *)img, len);
	const unsigned char *id = img;
	size_t phnum;
	GElf_Ehdr eh;
	int err = -EBADMSG;

	if (len < EI_NIDENT || memcmp(id, ELFMAG, SELFMAG) != 0 || id[EI_CLASS] != ELFCLASS64 ||
	    id[EI_DATA] != ELFDATA2LSB || !elf) {
		if (elf)
			elf_end(elf);
		return -EBADMSG;
	}
	if (!gelf_getehdr(elf, &eh) || eh.e_type != ET_DYN || eh.e_machine != EM_X86_64 ||
	    elf_getphdrnum(elf, &phnum) != 0)
		goto out;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		uint64_t end;

		/* gelf_getphdr checks the header table against the image's len */
		if (!gelf_getphdr(elf, (int)i, &ph))
			break;
		if (ph.p_type != PT_LOAD)
			continue;
		if (ph.p_offset == 0 && !__builtin_add_overflow(ph.p_offset, ph.p_filesz, &end) &&
		    end <= len) {
			*vaddr0 = ph.p_vaddr;
			err = 0;
		}
		break;
	}
out:
	elf_end(elf);
	return err;
}

/* The image bytes into a new memfd. Return: 0 and *@fd_out; memfd/write errors. */
static int image_memfd(const void *img, size_t len, int *fd_out)
{
	int fd = memfd_create("hvprof-vdso", MFD_CLOEXEC);
	size_t done = 0;
	int err;

	if (fd < 0)
		return -errno;
	while (done < len) {
		ssize_t w = write(fd, (const char *)img + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			err = w < 0 ? -errno : -EIO;
			close(fd);
			return err;
		}
		done += (size_t)w;
	}
	*fd_out = fd;
	return 0;
}

/* vdso_extract() on the open vmlinux @fd (@name for messages). */
static int extract_fd(int fd, const char *name, uint64_t image_kva, struct vdso_file *out)
{
	struct vdso_file v = { .fd = -1 };
	uint64_t hdr[2], off, data_kva, size;
	void *img = NULL;
	struct stat sb;
	Elf *elf;
	int err;

	if (fstat(fd, &sb) < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EBADMSG;
	err = elf_kind(elf) == ELF_K_ELF ? 0 : -EBADMSG;
	/* struct vdso_image { void *data; unsigned long size; ... }: 16 bytes, little-endian */
	if (!err)
		err = kva_to_off(elf, (uint64_t)sb.st_size, image_kva, sizeof(hdr), &off);
	if (!err)
		err = read_full(fd, hdr, sizeof(hdr), off);
	if (err)
		goto out;
	data_kva = le64toh(hdr[0]);
	size = le64toh(hdr[1]);
	if (!size || size > VDSO_MAX_IMAGE || size % VDSO_PAGE) {
		pr_warn("%s: vdso_image_64.size %#llx is not a vDSO's (4 KiB pages, at most "
			"64 KiB): not used", name, (unsigned long long)size);
		err = -EBADMSG;
		goto out;
	}
	err = kva_to_off(elf, (uint64_t)sb.st_size, data_kva, size, &off);
	if (err) {
		pr_warn("%s: vdso_image_64.data %#llx (+%#llx) is in no section of the file: not "
			"used", name, (unsigned long long)data_kva, (unsigned long long)size);
		goto out;
	}
	img = malloc(size);
	if (!img) {
		err = -ENOMEM;
		goto out;
	}
	/* SAFETY: size <= VDSO_MAX_IMAGE, the buffer's size; off + size <= the file's size. */
	err = read_full(fd, img, size, off);
	if (!err && check_image(img, size, &v.vaddr0)) {
		pr_warn("%s: the bytes vdso_image_64.data points at are not an x86-64 vDSO: not "
			"used", name);
		err = -EBADMSG;
	}
	if (!err) {
		err = symtab_open_elf_mem(img, size, "[vdso]", &v.st);
		if (err == -ENODATA) /* no symbols: still the CFI for unwinding */
			err = 0;
		else if (err && err != -ENOMEM)
			pr_warn("%s: the vDSO image's symbols are unreadable: %s", name,
				hvp_strerror(err));
	}
	if (!err) {
		err = image_memfd(img, size, &v.fd);
		if (err)
			symtab_free(v.st);
	}
	if (!err) {
		v.size = size;
		*out = v;
	}
out:
	free(img);
	elf_end(elf);
	return err;
}

int vdso_extract(const char *vmlinux, uint64_t image_kva, struct vdso_file *out)
{
	int fd, err;

	if (!vmlinux || !out)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	fd = open(vmlinux, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = extract_fd(fd, vmlinux, image_kva, out);
	close(fd);
	return err;
}
