// SPDX-License-Identifier: MIT
// Linux x86-64 boot protocol (Documentation/x86/boot.rst): load a vmlinux ELF or a bzImage, and
// lay out boot_params, the e820 map, command line, initrd, setup_data and the 64-bit entry state.
#define pr_fmt(fmt) "vmm: boot: " fmt
#include <asm/bootparam.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/file.h>
#include <hvprof/log.h>

#include <hvprof/kimage.h> /* the kernel image: bzImage payload, KASLR relocations */

#include "vmm_internal.h"

#define E820_RAM 1
#define E820_RESERVED 2

/* The kernel file: at least 1 KiB (a boot sector and setup header), at most 1 GiB. */
static int read_file(const char *path, uint8_t **buf, size_t *len)
{
	int err = hvp_read_file(path, 1024, 1ull << 30, (void **)buf, len);

	if (err == -EFBIG)
		pr_err("kernel %s: not a kernel (its size is outside 1 KiB to 1 GiB)", path);
	else if (err == -EINVAL)
		pr_err("kernel %s is not a regular file", path);
	else if (err)
		pr_err("cannot open kernel %s: %s", path, hvp_strerror(err));
	return err == -EFBIG || err == -EINVAL ? -EBADMSG : err;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) | (uint32_t)get16(p + 2) << 16;
}

int bzimage_parse(const uint8_t *buf, size_t len, struct bzimage_info *out)
{
	struct bzimage_info bi = { 0 };

	if (len < 0x270 || get16(buf + 0x1fe) != 0xaa55 || get32(buf + 0x202) != 0x53726448)
		return -EBADMSG; /* no boot sector signature or no "HdrS" */
	bi.version = get16(buf + 0x206);
	bi.setup_sects = buf[0x1f1] ? buf[0x1f1] : 4;
	bi.payload_off = ((uint32_t)bi.setup_sects + 1) * 512;
	if (bi.version < 0x020c)
		return -ENOTSUP; /* xloadflags (64-bit entry) came with protocol 2.12 */
	bi.xloadflags = get16(buf + 0x236);
	bi.pref_address = (uint64_t)get32(buf + 0x258) | (uint64_t)get32(buf + 0x25c) << 32;
	bi.init_size = get32(buf + 0x260);
	bi.kernel_alignment = get32(buf + 0x230);
	if (bi.payload_off >= len)
		return -EBADMSG;
	if (!(bi.xloadflags & XLF_KERNEL_64))
		return -ENOTSUP;
	*out = bi;
	return 0;
}

/* Load the PT_LOAD segments of a vmlinux at their physical addresses (p_paddr). */
static int load_elf(struct vmm_ram *ram, const char *path, const uint8_t *buf, size_t len,
		    struct boot_info *bi)
{
	Elf *elf;
	GElf_Ehdr ehdr;
	size_t n_phdr;
	int err = 0;

	elf_version(EV_CURRENT);
	elf = elf_memory((char *)buf, len);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr) ||
	    ehdr.e_machine != EM_X86_64 || gelf_getclass(elf) != ELFCLASS64) {
		pr_err("kernel %s: not an x86-64 ELF file", path);
		err = -EBADMSG;
		goto out;
	}
	if (elf_getphdrnum(elf, &n_phdr) != 0) {
		pr_err("kernel %s: no program headers: %s", path, elf_errmsg(-1));
		err = -EBADMSG;
		goto out;
	}
	bi->kernel_start = UINT64_MAX;
	bi->kernel_end = 0;
	for (size_t i = 0; i < n_phdr; i++) {
		GElf_Phdr ph;
		uint8_t *dst;
		uint64_t end;

		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		/* SAFETY: file range and guest range are both checked before copying. */
		if (ph.p_filesz > ph.p_memsz || ph.p_offset > len || ph.p_filesz > len - ph.p_offset ||
		    __builtin_add_overflow(ph.p_paddr, ph.p_memsz, &end)) {
			pr_err("kernel %s: PT_LOAD %zu lies outside the file", path, i);
			err = -EBADMSG;
			goto out;
		}
		dst = ram_gpa_to_hva(ram, ph.p_paddr, ph.p_memsz);
		if (!dst || ph.p_paddr < VMM_HIMEM_START) {
			pr_err("kernel %s: PT_LOAD %zu at GPA 0x%llx+0x%llx does not fit guest RAM",
			       path, i, (unsigned long long)ph.p_paddr,
			       (unsigned long long)ph.p_memsz);
			err = -EINVAL;
			goto out;
		}
		memcpy(dst, buf + ph.p_offset, ph.p_filesz);
		memset(dst + ph.p_filesz, 0, ph.p_memsz - ph.p_filesz);
		if (ph.p_paddr < bi->kernel_start)
			bi->kernel_start = ph.p_paddr;
		if (end > bi->kernel_end)
			bi->kernel_end = end;
	}
	if (bi->kernel_end == 0) {
		pr_err("kernel %s: no PT_LOAD segment", path);
		err = -EBADMSG;
		goto out;
	}
	/* vmlinux's e_entry is the physical address of startup_64 (64-bit boot protocol). */
	bi->entry_gpa = ehdr.e_entry;
	bi->is_bzimage = false;
out:
	if (elf)
		elf_end(elf);
	return err;
}

static int load_bzimage(struct vmm_ram *ram, const char *path, const uint8_t *buf, size_t len,
			struct boot_params *bp, struct boot_info *bi)
{
	struct bzimage_info bz;
	size_t hdr_len;
	uint64_t load_gpa;
	uint64_t size;
	int err;

	err = bzimage_parse(buf, len, &bz);
	if (err) {
		pr_err("kernel %s: %s", path,
		       err == -ENOTSUP ? "bzImage without a 64-bit entry (boot protocol < 2.12)"
				       : "neither an ELF vmlinux nor a bzImage");
		return err;
	}
	/* The setup header runs from 0x1f1 to 0x202 + the byte at 0x201 (boot.rst). */
	hdr_len = 0x202 + buf[0x201] - 0x1f1;
	if (hdr_len > sizeof(bp->hdr))
		hdr_len = sizeof(bp->hdr);
	memcpy(&bp->hdr, buf + 0x1f1, hdr_len);
	load_gpa = bz.pref_address >= VMM_HIMEM_START ? bz.pref_address : VMM_HIMEM_START;
	size = len - bz.payload_off;
	if (bz.init_size > size)
		size = bz.init_size;
	if (!ram_gpa_to_hva(ram, load_gpa, size)) {
		pr_err("kernel %s: %llu bytes at GPA 0x%llx do not fit guest RAM", path,
		       (unsigned long long)size, (unsigned long long)load_gpa);
		return -EINVAL;
	}
	err = ram_write(ram, load_gpa, buf + bz.payload_off, len - bz.payload_off);
	if (err)
		return err;
	bp->hdr.code32_start = (uint32_t)load_gpa;
	bi->entry_gpa = load_gpa + 0x200; /* 64-bit entry point (boot.rst, "64-bit boot protocol") */
	bi->kernel_start = load_gpa;
	bi->kernel_end = load_gpa + size;
	bi->is_bzimage = true;
	return 0;
}

/* Whether @cmdline holds the word @opt (the decompressor's cmdline_find_option_bool). */
static bool cmdline_has_word(const char *cmdline, const char *opt)
{
	size_t n = strlen(opt);

	for (const char *p = cmdline; p && (p = strstr(p, opt)) != NULL; p += n) {
		if ((p == cmdline || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
			return true;
	}
	return false;
}

/*
 * KASLR for a kernel whose bzImage payload hvprof decompressed: choose the virtual slide as the
 * decompressor's choose_random_location() does (physical placement stays at the link address:
 * the x86-64 decompressor randomizes the two independently) and apply the payload's relocation
 * table (handle_relocations()), then tell the kernel with KASLR_FLAG, which also turns on its
 * memory-region randomization (page_offset_base, vmalloc_base, vmemmap_base).
 */
static int apply_kaslr(struct vmm_ram *ram, const struct vmm_config *cfg, const char *path,
		       const struct gi_kimage *img, const struct bzimage_info *bz,
		       struct boot_params *bp, struct boot_info *bi)
{
	const uint64_t kmap = 0xffffffff80000000ull; /* __START_KERNEL_map */
	uint64_t image_size = bi->kernel_end - bi->kernel_start, slide = 0, rnd = 0;
	uint64_t align = bz->kernel_alignment, load_kva = kmap + bi->kernel_start;
	struct gi_krelocs r;
	const void *tail;
	size_t tail_len;
	uint8_t *hva;
	int err;

	bi->slide_known = true;
	bi->slide = 0;
	if (cfg->kaslr == VMM_KASLR_OFF)
		return 0;
	if (cfg->kaslr == VMM_KASLR_AUTO && cmdline_has_word(cfg->cmdline, "nokaslr"))
		return 0;
	err = gi_kimage_relocs(img, &tail, &tail_len);
	if (err == 0)
		err = gi_krelocs_parse(tail, tail_len, &r);
	if (err == -ENODATA) {
		if (cfg->kaslr == VMM_KASLR_SLIDE && cfg->kaslr_slide) {
			pr_err("kernel %s: --kaslr 0x%llx needs a relocatable kernel, and this one "
			       "carries no relocation table (CONFIG_RANDOMIZE_BASE off)",
			       path, (unsigned long long)cfg->kaslr_slide);
			return -EINVAL;
		}
		pr_debug(LOG_VMM, "kernel %s: no relocation table: runs at its link address", path);
		return 0;
	}
	if (err) {
		pr_err("kernel %s: the KASLR relocation table after the vmlinux is malformed (%s)",
		       path, hvp_strerror(err));
		return -EBADMSG;
	}
	if (bz->init_size > image_size)
		image_size = bz->init_size;
	if (align < (2u << 20) || (align & (align - 1)))
		align = 2u << 20; /* CONFIG_PHYSICAL_ALIGN's default; the header's is not usable */
	if (cfg->kaslr == VMM_KASLR_SLIDE) {
		uint64_t end;

		slide = cfg->kaslr_slide;
		if (slide % align || __builtin_add_overflow(bi->kernel_start + image_size, slide, &end) ||
		    end > GI_KERNEL_IMAGE_SIZE) {
			pr_err("kernel %s: --kaslr 0x%llx: want a multiple of 0x%llx that keeps the "
			       "%llu-byte image below 1 GiB (at most 0x%llx)",
			       path, (unsigned long long)slide, (unsigned long long)align,
			       (unsigned long long)image_size,
			       (unsigned long long)((GI_KERNEL_IMAGE_SIZE - bi->kernel_start -
						     image_size) / align * align));
			return -EINVAL;
		}
	} else {
		if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
			err = -errno;
			pr_err("getrandom: %s", hvp_strerror(err));
			return err;
		}
		err = gi_kaslr_pick_slide(load_kva, image_size, align, rnd, &slide);
		if (err) {
			pr_err("kernel %s: no room for KASLR (%llu-byte image): %s", path,
			       (unsigned long long)image_size, hvp_strerror(err));
			return err;
		}
	}
	hva = ram_gpa_to_hva(ram, bi->kernel_start, bi->kernel_end - bi->kernel_start);
	if (!hva)
		return -ERANGE; /* load_elf placed it there */
	err = gi_krelocs_apply(&r, hva, load_kva, bi->kernel_end - bi->kernel_start, slide);
	if (err) {
		pr_err("kernel %s: a KASLR relocation names a field outside the kernel image", path);
		return -EBADMSG;
	}
	bi->slide = slide;
	bi->slide_applied = true;
	bi->n_relocs = r.n32 + r.ninv32 + r.n64;
	bp->hdr.loadflags |= KASLR_FLAG;
	return 0;
}

/*
 * A bzImage whose payload is xz, zstd or gzip (or not compressed) is decompressed on the host
 * (guestinfo's kimage) and its vmlinux ELF loaded directly: the in-guest decompressor runs emulated on PVM hosts (an
 * xz payload had not finished after 300 s) and costs seconds even on VMX/SVM. hvprof then does
 * the decompressor's other job too: KASLR (apply_kaslr), so the guest's kernel is placed as a
 * real boot would place it. Other payloads take the plain bzImage path, where the guest
 * decompresses and randomizes itself (slide unknown until the guest runs: found from
 * MSR_LSTAR): lzo, which hvprof cannot read, and lz4, lzma and bzip2, which it reads for the
 * kernel's symbols and BTF but leaves to the guest to boot (lz4 is the payload that keeps the
 * guest's own decompressor path tested: the default image's bzImage.lz4, docs/kaslr.md). The
 * choice: gi_kimage_host_boots.
 */
static int load_bzimage_host(struct vmm_ram *ram, const struct vmm_config *cfg, const char *path,
			     const uint8_t *buf, size_t len, struct boot_params *bp,
			     struct boot_info *bi)
{
	struct gi_kimage *img = NULL;
	struct bzimage_info bz;
	const char *kind;
	const uint8_t *elf;
	size_t elf_len;
	int err;

	kind = gi_bzimage_compression(buf, len);
	if (kind && !gi_kimage_host_boots(kind)) {
		pr_info("kernel %s: %s payload: the guest decompresses it", path, kind);
		err = -ENOTSUP;
	} else {
		err = gi_kimage_open(path, &img);
		if (err == -ENOTSUP || err == -EBADMSG)
			pr_info("kernel %s: payload not decompressed on the host (%s): the guest "
				"decompresses it", path, hvp_strerror(err));
	}
	if (err == -ENOTSUP || err == -EBADMSG) {
		if (cfg->kaslr == VMM_KASLR_SLIDE) {
			pr_err("kernel %s: --kaslr with a slide needs a payload hvprof decompresses "
			       "(xz, zstd, gzip); the guest's decompressor chooses its own",
			       path);
			return -ENOTSUP;
		}
		return load_bzimage(ram, path, buf, len, bp, bi);
	}
	if (err) {
		pr_err("kernel %s: %s", path, hvp_strerror(err));
		return err;
	}
	elf = gi_kimage_elf(img, &elf_len);
	err = load_elf(ram, path, elf, elf_len, bi);
	if (!err && bzimage_parse(buf, len, &bz) != 0)
		memset(&bz, 0, sizeof(bz));
	if (!err)
		err = apply_kaslr(ram, cfg, path, img, &bz, bp, bi);
	if (!err)
		pr_info("kernel %s: %s payload decompressed on the host (%zu bytes of vmlinux), "
			"%s",
			path, gi_kimage_compression(img), elf_len,
			bi->slide_applied ? "relocated for KASLR" : "at its link address");
	gi_kimage_free(img);
	return err;
}

static void e820_add(struct boot_params *bp, uint64_t addr, uint64_t size, uint32_t type)
{
	if (bp->e820_entries >= E820_MAX_ENTRIES_ZEROPAGE)
		return;
	bp->e820_table[bp->e820_entries++] =
		(struct boot_e820_entry){ .addr = addr, .size = size, .type = type };
}

/* Identity map of the first 4 GiB with 2 MiB pages, and a flat GDT, for the 64-bit entry. */
static int write_boot_paging(struct vmm_ram *ram)
{
	uint64_t pml4[512] = { 0 }, pdpt[512] = { 0 }, pd[512];
	static const uint64_t gdt[4] = {
		0,
		0,
		0x00af9b000000ffffULL, /* 0x10: 64-bit code, DPL0 */
		0x00cf93000000ffffULL, /* 0x18: data, DPL0 */
	};
	int err;

	pml4[0] = (VMM_PML4_GPA + 0x1000) | 0x3; /* present, writable */
	for (int i = 0; i < 4; i++) {
		uint64_t pd_gpa = VMM_PML4_GPA + 0x2000 + (uint64_t)i * 0x1000;

		pdpt[i] = pd_gpa | 0x3;
		for (int j = 0; j < 512; j++)
			pd[j] = ((uint64_t)i << 30) + ((uint64_t)j << 21) + 0x83; /* P, W, PS */
		err = ram_write(ram, pd_gpa, pd, sizeof(pd));
		if (err)
			return err;
	}
	err = ram_write(ram, VMM_PML4_GPA, pml4, sizeof(pml4));
	if (!err)
		err = ram_write(ram, VMM_PML4_GPA + 0x1000, pdpt, sizeof(pdpt));
	if (!err)
		err = ram_write(ram, VMM_GDT_GPA, gdt, sizeof(gdt));
	return err;
}

int boot_load(struct vmm_ram *ram, const struct vmm_config *cfg, struct boot_info *bi)
{
	struct boot_params *bp;
	uint8_t *buf = NULL;
	size_t len = 0, cmdline_len;
	uint64_t low_end = ram->slots[0].size;
	uint64_t initrd_gpa = 0;
	int err;

	bp = calloc(1, sizeof(*bp));
	if (!bp)
		return -ENOMEM;
	err = read_file(cfg->kernel, &buf, &len);
	if (err)
		goto out;
	if (len >= 4 && memcmp(buf, "\177ELF", 4) == 0) {
		err = load_elf(ram, cfg->kernel, buf, len, bi);
		/* Nothing relocates a vmlinux entered directly: it runs at its link address. */
		bi->slide_known = true;
		if (!err && cfg->kaslr == VMM_KASLR_SLIDE && cfg->kaslr_slide) {
			pr_err("kernel %s: --kaslr 0x%llx needs the kernel's bzImage (a vmlinux ELF "
			       "carries no KASLR relocation table)",
			       cfg->kernel, (unsigned long long)cfg->kaslr_slide);
			err = -EINVAL;
		}
	} else {
		err = load_bzimage_host(ram, cfg, cfg->kernel, buf, len, bp, bi);
	}
	if (err)
		goto out;

	/* The setup header fields a 64-bit entry needs (boot.rst, "Details of header fields"). */
	bp->hdr.boot_flag = 0xaa55;
	bp->hdr.header = 0x53726448;
	if (!bi->is_bzimage)
		bp->hdr.version = 0x020f;
	bp->hdr.type_of_loader = 0xff;
	bp->hdr.loadflags |= LOADED_HIGH | CAN_USE_HEAP;
	bp->hdr.heap_end_ptr = 0xfe00;

	cmdline_len = strlen(cfg->cmdline ? cfg->cmdline : "");
	if (cmdline_len >= VMM_CMDLINE_MAX) {
		pr_err("kernel command line is %zu bytes; at most %d fit", cmdline_len,
		       VMM_CMDLINE_MAX - 1);
		err = -EINVAL;
		goto out;
	}
	err = ram_write(ram, VMM_CMDLINE_GPA, cfg->cmdline ? cfg->cmdline : "", cmdline_len + 1);
	if (err)
		goto out;
	bp->hdr.cmd_line_ptr = (uint32_t)VMM_CMDLINE_GPA;
	bp->hdr.cmdline_size = VMM_CMDLINE_MAX - 1;

	if (cfg->initrd && cfg->initrd_size) {
		initrd_gpa = (low_end - cfg->initrd_size) & ~0xfffULL;
		if (cfg->initrd_size >= low_end || initrd_gpa < bi->kernel_end ||
		    initrd_gpa < VMM_HIMEM_START) {
			pr_err("initrd of %zu bytes does not fit in guest RAM above the kernel "
			       "(use more --mem)",
			       cfg->initrd_size);
			err = -EINVAL;
			goto out;
		}
		err = ram_write(ram, initrd_gpa, cfg->initrd, cfg->initrd_size);
		if (err)
			goto out;
		bp->hdr.ramdisk_image = (uint32_t)initrd_gpa;
		bp->hdr.ramdisk_size = (uint32_t)cfg->initrd_size;
	}

	/* A boot-time RNG seed (SETUP_RNG_SEED): RDRAND is hidden, and without a seed the
	 * emulated kernel spends seconds gathering entropy. */
	{
		struct {
			struct setup_data sd;
			uint8_t seed[32];
		} __attribute__((packed)) rng = { .sd = { .type = SETUP_RNG_SEED, .len = 32 } };

		if (getrandom(rng.seed, sizeof(rng.seed), 0) == (ssize_t)sizeof(rng.seed)) {
			err = ram_write(ram, VMM_SETUP_DATA_GPA, &rng, sizeof(rng));
			if (err)
				goto out;
			bp->hdr.setup_data = VMM_SETUP_DATA_GPA;
		}
	}

	e820_add(bp, 0, VMM_EBDA_START, E820_RAM);
	e820_add(bp, VMM_EBDA_START, VMM_HIMEM_START - VMM_EBDA_START, E820_RESERVED);
	e820_add(bp, VMM_HIMEM_START, low_end - VMM_HIMEM_START, E820_RAM);
	if (ram->n_slots > 1)
		e820_add(bp, ram->slots[1].gpa, ram->slots[1].size, E820_RAM);

	err = write_boot_paging(ram);
	if (!err)
		err = mptable_write(ram, VMM_MPTABLE_GPA, cfg->cpus);
	if (!err)
		err = ram_write(ram, VMM_ZERO_PAGE_GPA, bp, sizeof(*bp));
out:
	free(buf);
	free(bp);
	return err;
}
