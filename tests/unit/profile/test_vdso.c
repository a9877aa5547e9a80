// SPDX-License-Identifier: MIT
// The guest's vDSO out of its vmlinux (profile/vdso.c): the Debian (else default) image's
// vmlinux gives an ELF whose .dynsym has __vdso_clock_gettime, and a recording that names that
// vmlinux gets [vdso] frames named by it when the mapping's size agrees; a fake tiny vmlinux
// (hand-made ELF64 with one .rodata) checks the refusals: absurd or unaligned sizes, pointers
// outside every section, bytes that are not an ELF, a section past the file's end.
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>
#include <hvprof/profile.h>

#include "profile_internal.h"
#include "rec_helpers.h"
#include "symbolize_internal.h"
#include "test.h"
#include "unwind_dwarf.h"

/* ---- a real vmlinux */

/* $HVPROF_CACHE/images, else $XDG_CACHE_HOME/hvprof/images, else ~/.cache/hvprof/images. */
static void images_dir(char *buf, size_t len)
{
	const char *cache = getenv("HVPROF_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");

	if (cache && cache[0])
		snprintf(buf, len, "%s/images", cache);
	else if (xdg && xdg[0])
		snprintf(buf, len, "%s/hvprof/images", xdg);
	else
		snprintf(buf, len, "%s/.cache/hvprof/images", home ? home : "/root");
}

/* The Debian image's vmlinux (images/debian*), else the default image's. 0: found. */
static int find_vmlinux(char *path, size_t len)
{
	char dir[PATH_MAX - 300]; /* + "/" + a d_name (<= 255) + "/vmlinux" fits PATH_MAX */
	struct dirent *de;
	DIR *d;

	images_dir(dir, sizeof(dir));
	snprintf(path, len, "%s/debian/vmlinux", dir);
	if (access(path, R_OK) == 0)
		return 0;
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "debian", 6) != 0)
			continue;
		snprintf(path, len, "%s/%s/vmlinux", dir, de->d_name);
		if (access(path, R_OK) == 0) {
			closedir(d);
			return 0;
		}
	}
	if (d)
		closedir(d);
	snprintf(path, len, "%s/default/vmlinux", dir);
	if (access(path, R_OK) == 0)
		return 0;
	printf("# skip: no vmlinux in %s/debian*/ nor %s/default/ (images/build-image.sh)\n", dir,
	       dir);
	return -ENOENT;
}

static char vmlinux[PATH_MAX];
static struct symtab *vmlinux_st;
static uint64_t image_kva;

/* The vmlinux and its vdso_image_64, once. 0: there; TEST_SKIP: no vmlinux. */
static int real_vmlinux(void)
{
	if (vmlinux_st)
		return 0;
	if (find_vmlinux(vmlinux, sizeof(vmlinux)))
		return TEST_SKIP;
	if (symtab_open_elf(vmlinux, &vmlinux_st) || symtab_find(vmlinux_st, "vdso_image_64",
								 &image_kva)) {
		fprintf(stderr, "%s: no symtab or no vdso_image_64\n", vmlinux);
		return TEST_FAIL;
	}
	return 0;
}

static int test_real(void)
{
	struct vdso_file v;
	unsigned char hdr[SELFMAG];
	uint64_t addr, off;
	const char *name;
	int r = real_vmlinux();

	if (r)
		return r;
	ASSERT_EQ_INT(vdso_extract(vmlinux, image_kva, &v), 0);
	ASSERT_TRUE(v.fd >= 0 && v.st);
	ASSERT_TRUE(v.size >= 4096 && v.size <= VDSO_MAX_IMAGE && v.size % 4096 == 0);
	ASSERT_EQ_INT(pread(v.fd, hdr, sizeof(hdr), 0), SELFMAG);
	ASSERT_TRUE(!memcmp(hdr, ELFMAG, SELFMAG));
	ASSERT_EQ_INT(lseek(v.fd, 0, SEEK_END), (long long)v.size);
	/* the kernel's vdso.lds exports it (arch/x86/entry/vdso/vdso.lds.S VERSION) */
	ASSERT_EQ_INT(symtab_find(v.st, "__vdso_clock_gettime", &addr), 0);
	ASSERT_TRUE(addr >= v.vaddr0 && addr - v.vaddr0 < v.size);
	ASSERT_EQ_INT(symtab_lookup(v.st, addr + 4, &name, &off), 0);
	ASSERT_TRUE(strstr(name, "clock_gettime") != NULL);
	ASSERT_EQ_U64(off, 4);
	printf("# %s: vDSO of %llu bytes, __vdso_clock_gettime at %#llx\n", vmlinux,
	       (unsigned long long)v.size, (unsigned long long)addr);
	close(v.fd);
	symtab_free(v.st);
	return TEST_OK;
}

/* ---- a recording naming the real vmlinux: the [vdso] frame by the image */

#define VVAR_START 0x7ffff7fc0000ull
#define VDSO_START 0x7ffff7fc4000ull

/* One process mapping vvar + a vDSO of @vdso_len bytes, one user sample at vDSO + @off. */
static int write_rec(int fd, uint64_t vdso_len, uint64_t off)
{
	struct hvp_thread th = mk_thread(10, 10, "clock", 0);
	struct hvp_process pr = mk_process(10, "/usr/bin/clock", 0x400000, 0x401000);
	struct hvp_mapping vvar = { .tgid = 10, .index = 0, .count = 2, .start = VVAR_START,
				    .end = VDSO_START, .prot = HVP_PROT_READ };
	struct hvp_mapping vdso = { .tgid = 10, .index = 1, .count = 2, .start = VDSO_START,
				    .end = VDSO_START + vdso_len,
				    .prot = HVP_PROT_READ | HVP_PROT_EXEC };
	uint64_t uips[] = { VDSO_START + off, 0 };
	struct hvp_sample *s = malloc(sizeof(*s));
	struct recfile_writer *w;
	int err, close_err;

	if (!s)
		return -ENOMEM;
	err = recfile_writer_open(fd, &w);
	if (err) {
		free(s);
		return err;
	}
	mk_sample(s, 10, 10, 3, HVP_WALK_END, 0, NULL, uips);
	err = recfile_write_meta(w, "kernel", vmlinux);
	err = err ? err : recfile_write_thread(w, &th);
	err = err ? err : recfile_write_process(w, &pr);
	err = err ? err : recfile_write_mapping(w, &vvar);
	err = err ? err : recfile_write_mapping(w, &vdso);
	err = err ? err : recfile_write_sample(w, s);
	close_err = recfile_writer_close(w);
	free(s);
	return err ? err : close_err;
}

/* Whether the profile of the recording above has frame @name in DSO [vdso]. */
static int vdso_frame_is(uint64_t vdso_len, uint64_t off, const char *name)
{
	char errbuf[256] = "";
	struct profile *p = NULL;
	int fd = mem_file(), found = 0;

	if (fd < 0 || write_rec(fd, vdso_len, off) || lseek(fd, 0, SEEK_SET) != 0 ||
	    profile_load_fd(fd, "vdso", NULL, &p, errbuf, sizeof(errbuf))) {
		fprintf(stderr, "load: %s\n", errbuf);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	close(fd);
	for (size_t i = 0; i < p->n_frames; i++) {
		const char *fn = strpool_get(&p->strs, p->frames[i].name);

		if (!strcmp(strpool_get(&p->strs, p->frames[i].dso), "[vdso]"))
			fprintf(stderr, "# [vdso] frame: %s\n", fn);
		found |= !strcmp(strpool_get(&p->strs, p->frames[i].dso), "[vdso]") &&
			 (name ? !strcmp(fn, name) : strstr(fn, "clock_gettime") != NULL);
	}
	profile_free(p);
	return found;
}

static int test_symbolize(void)
{
	struct vdso_file v;
	uint64_t addr;
	char want[64];
	int r = real_vmlinux();

	if (r)
		return r;
	ASSERT_EQ_INT(vdso_extract(vmlinux, image_kva, &v), 0);
	ASSERT_EQ_INT(symtab_find(v.st, "__vdso_clock_gettime", &addr), 0);
	close(v.fd);
	symtab_free(v.st);
	/* a mapping of the image's size: named by the image's .dynsym */
	ASSERT_TRUE(vdso_frame_is(v.size, addr - v.vaddr0 + 0x10, NULL));
	/* a mapping of another size (another kernel's vDSO): the offset, never a guess */
	snprintf(want, sizeof(want), "[vdso+0x%llx]",
		 (unsigned long long)(addr - v.vaddr0 + 0x10));
	ASSERT_TRUE(vdso_frame_is(v.size + 0x1000, addr - v.vaddr0 + 0x10, want));
	return TEST_OK;
}

/* ---- the image's CFI for the DWARF unwinder */

/*
 * At __vdso_clock_gettime's first instruction the return address is at rsp (its FDE: CFA
 * rsp+8, ra at CFA-8); rbp 0 leaves libdw's frame-pointer fallback nothing to walk. With the
 * image reported as module [vdso] (pgoff 0) the caller is found; without it, only the pc.
 */
static int test_unwind(void)
{
	uint64_t regs[UNW_NREGS] = { 0 }, stack[4] = { 0x401234, 0, 0, 0 }, ips[8], addr;
	struct unw_space *sp, *none;
	struct unwinder *u;
	struct vdso_file v;
	unsigned int n;
	enum unw_stop why;
	int r = real_vmlinux();

	if (r)
		return r;
	ASSERT_EQ_INT(vdso_extract(vmlinux, image_kva, &v), 0);
	ASSERT_EQ_INT(symtab_find(v.st, "__vdso_clock_gettime", &addr), 0);
	ASSERT_EQ_INT(unwinder_new(&u), 0);
	{
		struct unw_map m = { .start = VDSO_START, .end = VDSO_START + v.size, .pgoff = 0,
				     .fd = v.fd, .name = "[vdso]" };

		ASSERT_EQ_INT(unwinder_space(u, 1, &m, 1, &sp), 0);
	}
	regs[UNW_REG_RIP] = VDSO_START + addr - v.vaddr0;
	regs[UNW_REG_RSP] = 0x7ffffffde000ull;
	ASSERT_EQ_INT(unwinder_unwind(sp, regs, (const uint8_t *)stack, sizeof(stack), ips, 8, &n,
				      &why), 0);
	ASSERT_TRUE(n >= 2);
	ASSERT_EQ_U64(ips[0], regs[UNW_REG_RIP]);
	ASSERT_EQ_U64(ips[1], 0x401234);
	ASSERT_EQ_INT(unwinder_space(u, 2, NULL, 0, &none), 0);
	ASSERT_EQ_INT(unwinder_unwind(none, regs, (const uint8_t *)stack, sizeof(stack), ips, 8, &n,
				      &why), 0);
	ASSERT_EQ_INT(n, 1);
	unwinder_free(u);
	close(v.fd);
	symtab_free(v.st);
	return TEST_OK;
}

/* ---- a fake vmlinux: refusals */

#define FAKE_KVA 0xffffffff81800000ull /* .rodata's address */
#define FAKE_RODATA_OFF 0x1000ull
#define FAKE_RODATA_LEN 0x3000ull      /* the vdso_image at +0, an image at +0x1000 */
#define FAKE_SHSTR_OFF 0x4000ull
#define FAKE_SHDR_OFF 0x4100ull
#define FAKE_LEN (FAKE_SHDR_OFF + 3 * sizeof(Elf64_Shdr))

/* A tiny x86-64 ELF64 shared object at @img: one PT_LOAD of its first page at vaddr 0. */
static void fake_image(unsigned char *img)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	Elf64_Phdr *ph = (Elf64_Phdr *)(img + sizeof(*eh));

	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_phoff = sizeof(*eh);
	eh->e_ehsize = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 1;
	ph->p_type = PT_LOAD;
	ph->p_flags = PF_R | PF_X;
	ph->p_filesz = ph->p_memsz = 0x100;
	ph->p_align = 0x1000;
}

struct fake_case {
	const char *name;
	uint64_t image_kva;  /* where the caller says vdso_image_64 is */
	uint64_t data, size; /* its fields */
	int not_elf;         /* the image's bytes are not an ELF */
	uint64_t file_len;   /* the file cut to this length (0: whole) */
	uint64_t rodata_len; /* .rodata's sh_size (0: FAKE_RODATA_LEN) */
	int want;
};

/* The fake vmlinux of @c in a memfd: .rodata (PROGBITS, WA) and .shstrtab. -1: failed. */
static int fake_vmlinux(const struct fake_case *c)
{
	unsigned char *buf = calloc(1, FAKE_LEN);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	Elf64_Shdr *sh = (Elf64_Shdr *)(buf + FAKE_SHDR_OFF);
	uint64_t *vi = (uint64_t *)(buf + FAKE_RODATA_OFF);
	static const char shstr[] = "\0.rodata\0.shstrtab";
	int fd;

	if (!buf)
		return -1;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_EXEC;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_ehsize = sizeof(*eh);
	eh->e_shoff = FAKE_SHDR_OFF;
	eh->e_shentsize = sizeof(*sh);
	eh->e_shnum = 3;
	eh->e_shstrndx = 2;
	sh[1] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC |
			      SHF_WRITE, .sh_addr = FAKE_KVA, .sh_offset = FAKE_RODATA_OFF,
			      .sh_size = c->rodata_len ? c->rodata_len : FAKE_RODATA_LEN,
			      .sh_addralign = 4096 };
	sh[2] = (Elf64_Shdr){ .sh_name = 9, .sh_type = SHT_STRTAB, .sh_offset = FAKE_SHSTR_OFF,
			      .sh_size = sizeof(shstr), .sh_addralign = 1 };
	memcpy(buf + FAKE_SHSTR_OFF, shstr, sizeof(shstr));
	vi[0] = c->data; /* struct vdso_image { void *data; unsigned long size; } */
	vi[1] = c->size;
	if (!c->not_elf)
		fake_image(buf + FAKE_RODATA_OFF + 0x1000);
	fd = mem_file_from(buf, c->file_len ? c->file_len : FAKE_LEN);
	free(buf);
	return fd;
}

static const struct fake_case fake_cases[] = {
	{ "a one-page image", FAKE_KVA, FAKE_KVA + 0x1000, 0x1000, 0, 0, 0, 0 },
	{ "a two-page image", FAKE_KVA, FAKE_KVA + 0x1000, 0x2000, 0, 0, 0, 0 },
	{ "size absurd (1 TiB)", FAKE_KVA, FAKE_KVA + 0x1000, 1ull << 40, 0, 0, 0, -EBADMSG },
	{ "size 0", FAKE_KVA, FAKE_KVA + 0x1000, 0, 0, 0, 0, -EBADMSG },
	{ "size not a multiple of pages", FAKE_KVA, FAKE_KVA + 0x1000, 0x1800, 0, 0, 0,
	  -EBADMSG },
	{ "size above 64 KiB", FAKE_KVA, FAKE_KVA + 0x1000, 0x11000, 0, 0, 0, -EBADMSG },
	{ "data + size past the section", FAKE_KVA, FAKE_KVA + 0x2000, 0x2000, 0, 0, 0,
	  -EBADMSG },
	{ "data wraps around", FAKE_KVA, ~0ull - 0x800, 0x1000, 0, 0, 0, -EBADMSG },
	{ "vdso_image_64 in no section", FAKE_KVA - 0x10, FAKE_KVA + 0x1000, 0x1000, 0, 0, 0,
	  -EBADMSG },
	{ "the bytes are not an ELF", FAKE_KVA, FAKE_KVA + 0x1000, 0x1000, 1, 0, 0, -EBADMSG },
	{ "the image is the struct itself", FAKE_KVA, FAKE_KVA, 0x1000, 0, 0, 0, -EBADMSG },
	{ "the file cut inside .rodata", FAKE_KVA, FAKE_KVA + 0x1000, 0x1000, 0, 0x2800, 0,
	  -EBADMSG },
	{ ".rodata's bytes past the file's end", FAKE_KVA, FAKE_KVA + 0x1000, 0x1000, 0, 0,
	  0x8000, -EBADMSG },
};

static int test_fake(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(fake_cases); i++) {
		const struct fake_case *c = &fake_cases[i];
		struct vdso_file v = { .fd = -7 };
		char path[64];
		int fd = fake_vmlinux(c), err;

		ASSERT_TRUE(fd >= 0);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		err = vdso_extract(path, c->image_kva, &v);
		close(fd);
		if (err != c->want)
			fprintf(stderr, "case \"%s\"\n", c->name);
		ASSERT_EQ_INT(err, c->want);
		if (err) {
			ASSERT_EQ_INT(v.fd, -7); /* *out untouched on failure */
			continue;
		}
		ASSERT_EQ_U64(v.size, c->size);
		ASSERT_EQ_U64(v.vaddr0, 0);
		ASSERT_EQ_INT(lseek(v.fd, 0, SEEK_END), (long long)c->size);
		close(v.fd);
		symtab_free(v.st);
	}
	/* not an ELF at all, and no file */
	{
		struct vdso_file v;
		int fd = mem_file_from("not an ELF file", 15);
		char path[64];

		ASSERT_TRUE(fd >= 0);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ASSERT_EQ_INT(vdso_extract(path, FAKE_KVA, &v), -EBADMSG);
		close(fd);
		ASSERT_EQ_INT(vdso_extract("/nonexistent/vmlinux", FAKE_KVA, &v), -ENOENT);
		ASSERT_EQ_INT(vdso_extract(NULL, FAKE_KVA, &v), -EINVAL);
	}
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "a fake vmlinux: images taken and refused", test_fake },
	{ "the image's vmlinux: an ELF with __vdso_clock_gettime", test_real },
	{ "a recording naming that vmlinux: [vdso] frames named when the sizes agree",
	  test_symbolize },
	{ "the image's CFI unwinds a frame in the vDSO", test_unwind },
};

int main(void)
{
	int r = test_run_all(tests, ARRAY_SIZE(tests));

	symtab_free(vmlinux_st);
	return r;
}
