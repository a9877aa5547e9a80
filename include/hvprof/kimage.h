/* SPDX-License-Identifier: MIT */
/*
 * kimage: the guest kernel's image and its tables, read on the host: ELF symbol tables,
 * bzImage payloads, KASLR relocations, kallsyms, the IDT layout, the return-to-user sites.
 * Part of guestinfo (<hvprof/guestinfo.h> includes it); errors as described there.
 */
#ifndef HVPROF_KIMAGE_H
#define HVPROF_KIMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>
#include <hvprof/pgwalk.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- ELF symbol tables (symtab.c) */

struct symtab;

/**
 * symtab_open_elf - load the function symbols (STT_FUNC, STT_GNU_IFUNC, and STT_NOTYPE in
 * executable sections, as kernel entry code has) of an ELF file with libelf, sorted for lookup;
 * data objects (STT_OBJECT, e.g. the per-CPU variable current_task) are kept for symtab_find()
 * only. Uses .symtab, else .dynsym. The file is read once and closed before returning.
 * @path: host path of the ELF file. @out: the table; free with symtab_free().
 * Return: 0; -ENOENT/-EACCES (open); -EBADMSG not a valid ELF; -ENODATA no .symtab nor
 * .dynsym; -ENOMEM.
 */
int symtab_open_elf(const char *path, struct symtab **out) __must_check;

/**
 * symtab_lookup - the symbol that contains @addr (an address as in the ELF file: a kernel GVA
 * for vmlinux, a link-time vaddr for executables).
 * @name: out, owned by the table. @offset: out, optional: @addr minus the symbol start.
 * Symbols with size 0 cover up to the next symbol; none covers addresses past the last
 * executable section. Return: 0, or -ENOENT.
 */
int symtab_lookup(const struct symtab *st, uint64_t addr, const char **name, uint64_t *offset)
	__must_check;

/**
 * symtab_find - address of the symbol @name (function, label or data object; when several
 * share the name, a global one wins). Return: 0 and *@addr, or -ENOENT.
 */
int symtab_find(const struct symtab *st, const char *name, uint64_t *addr) __must_check;

/** symtab_count - number of distinct code addresses symtab_lookup() can name. */
size_t symtab_count(const struct symtab *st);

/**
 * symtab_code_addr - the @i-th of those addresses (0 <= @i < symtab_count(), ascending; as in
 * the file the table came from: an ELF's vaddrs, or a System.map's or kallsyms' link-time KVAs).
 * Read-only: safe from any thread, as symtab_lookup. Return: 0 and *@addr; -ERANGE @i out of
 * range; -EINVAL @st or @addr NULL.
 */
int symtab_code_addr(const struct symtab *st, size_t i, uint64_t *addr) __must_check;

/**
 * symtab_elf_info - ELF e_type of the file (ET_EXEC 2, ET_DYN 3) and the lowest vaddr of an
 * executable PT_LOAD segment (@text_vaddr), to turn runtime GVAs of a PIE into file vaddrs.
 */
void symtab_elf_info(const struct symtab *st, unsigned int *e_type, uint64_t *text_vaddr);

/**
 * symtab_build_id - the GNU build-id (lower-case hex, NUL-terminated) or "" when there is none.
 * The string is owned by @st.
 */
const char *symtab_build_id(const struct symtab *st);

/** symtab_free - free @st (NULL is fine). */
void symtab_free(struct symtab *st);

/* ---------------------------------------------------------------- kernel images (kimage.c) */

struct gi_kimage;

/**
 * gi_kimage_open - read a kernel image: a vmlinux ELF (stripped or not), or a bzImage whose
 * payload (located by the setup header's payload_offset/payload_length, boot protocol 2.08+)
 * is decompressed on the host: xz and lzma (liblzma), zstd (libzstd), gzip (zlib), bzip2
 * (libbz2), lz4 (liblz4, the kernel's legacy framing: Debian 12's cloud kernel) or
 * uncompressed.
 * The decompressed payload is the vmlinux ELF followed by the relocation table that the
 * in-kernel decompressor applies for KASLR.
 * @path: host path. @out: free with gi_kimage_free().
 * Return: 0; -ENOENT/-EACCES (open); -EBADMSG neither an x86-64 ELF nor a bzImage, a payload
 * outside the file, a payload that does not decompress to an ELF, a section outside the ELF's
 * bytes, or a section header table of entries not Elf64_Shdr's size or over the ELF header;
 * -ENOTSUP another compression (lzo, or none Linux builds) or boot protocol < 2.08; -EFBIG
 * payload above 1 GiB; -ENOMEM. Thread-safety: read-only after open.
 */
int gi_kimage_open(const char *path, struct gi_kimage **out) __must_check;

/** gi_kimage_free - free @img (NULL is fine). */
void gi_kimage_free(struct gi_kimage *img);

/**
 * gi_kimage_elf - the vmlinux ELF bytes (owned by @img; the file itself, or the decompressed
 * payload without the trailing relocation table). @len: out, optional.
 */
const uint8_t *gi_kimage_elf(const struct gi_kimage *img, size_t *len);

/** gi_kimage_is_bzimage - whether the file was a bzImage (and the ELF was decompressed). */
bool gi_kimage_is_bzimage(const struct gi_kimage *img);

/** gi_kimage_compression - "xz", "zstd", "gzip", "lz4", "lzma", "bzip2" or "none" (a static
 * string). */
const char *gi_kimage_compression(const struct gi_kimage *img);

/**
 * gi_kimage_host_boots - whether hvprof boots a bzImage whose payload is @compression
 * (gi_kimage_compression, gi_bzimage_compression) decompressed on the host, placing it itself
 * (KASLR: --kaslr): "xz", "zstd", "gzip" and "none"; the others (lz4, lzma, bzip2, read on the
 * host for symbols and BTF; lzo) go to the guest's own decompressor, which chooses the slide
 * (vmm/boot.c). False for NULL.
 */
bool gi_kimage_host_boots(const char *compression);

/**
 * gi_bzimage_compression - the compression of the payload of the bzImage @file (@len bytes of
 * the whole file, boot protocol 2.08+), by its magic and without decompressing it: "xz",
 * "zstd", "gzip", "lz4", "lzo", "bzip2", "lzma" or "none"; NULL when @file is not such a
 * bzImage or the payload is of another kind. A static string.
 */
const char *gi_bzimage_compression(const uint8_t *file, size_t len);

/**
 * gi_kimage_header_version - the bzImage setup header's kernel_version string ("6.1.0-57-amd64
 * (debian-kernel@...) #1 SMP ..."), "" for an ELF file. Owned by @img.
 */
const char *gi_kimage_header_version(const struct gi_kimage *img);

/**
 * gi_kimage_linux_banner - copy linux_banner ("Linux version 6.1.0 ...", init/version.c) from
 * the image's .rodata into @buf (NUL-terminated, truncated to @size - 1 bytes, no newline).
 * Return: 0; -ENOENT no banner; -EINVAL.
 */
int gi_kimage_linux_banner(const struct gi_kimage *img, char *buf, size_t size) __must_check;

/**
 * gi_kimage_read_kva - copy @len bytes at the link-time kernel address @kva from the image's
 * allocated sections (a range inside one section with file bytes).
 * Return: 0; -EFAULT not in the image; -EINVAL.
 */
int gi_kimage_read_kva(const struct gi_kimage *img, uint64_t kva, void *dst, size_t len)
	__must_check;

/**
 * gi_kimage_btf - the image's own .BTF section (owned by @img), e.g. from the vmlinux inside a
 * stock bzImage. Return: 0 and *@data, *@size; -ENODATA no .BTF section.
 */
int gi_kimage_btf(const struct gi_kimage *img, const void **data, size_t *size) __must_check;

/**
 * gi_kimage_relocs - the KASLR relocation table that follows the vmlinux ELF in a bzImage
 * payload (vmlinux.relocs; owned by @img). Parse it with gi_krelocs_parse().
 * Return: 0 and *@tail, *@len (bytes, a multiple of 4); -ENODATA an ELF file, or a payload with
 * nothing after the ELF (a kernel built without CONFIG_RANDOMIZE_BASE); -EBADMSG a tail that
 * is not whole 32-bit entries; -EINVAL.
 */
int gi_kimage_relocs(const struct gi_kimage *img, const void **tail, size_t *len) __must_check;

/* ---------------------------------------------------------------- interrupt descriptor table (idt.c) */

/* Exception vectors hvprof looks at (Intel SDM Vol. 3A, Table 6-1). */
#define GI_VEC_PAGE_FAULT 14

/**
 * gi_idt_gate - the handler GVA of gate @vector (0..255) of the guest IDT at @idt_base (GVA)
 * with @idt_limit (IDTR.limit: offset of its last byte), read through @pg: a 16-byte 64-bit
 * interrupt or trap gate (Intel SDM Vol. 3A, 6.14.1).
 * Return: 0 and *@target; -ENOENT gate not present; -EBADMSG not an interrupt/trap gate, or a
 * non-canonical handler; -ERANGE the gate is beyond the limit, or the IDT address is not
 * canonical; errors of gi_read_gva (-EFAULT not mapped); -EINVAL.
 * Thread-safety: reentrant; only reads through @mem.
 */
int gi_idt_gate(const struct gmem *mem, const struct gi_paging *pg, uint64_t idt_base,
		uint16_t idt_limit, unsigned int vector, uint64_t *target) __must_check;

/* ---------------------------------------------------------------- KASLR relocations (krelocs.c) */

/* KERNEL_IMAGE_SIZE of a CONFIG_RANDOMIZE_BASE x86-64 kernel (page_64_types.h): the image and
 * its slide stay within 1 GiB above __START_KERNEL_map. */
#define GI_KERNEL_IMAGE_SIZE (1ull << 30)

/**
 * struct gi_krelocs - the three lists of a parsed vmlinux.relocs (pointers into the caller's
 * table, 32-bit little-endian entries: each the link-time kernel address of a field,
 * sign-extended to 64 bits). @r32: 32-bit fields that get += slide; @rinv32: 32-bit fields
 * that get -= slide (references from per-CPU data to the kernel image); @r64: 64-bit fields
 * that get += slide.
 */
struct gi_krelocs {
	const uint8_t *r32, *rinv32, *r64;
	size_t n32, ninv32, n64;
};

/**
 * gi_krelocs_parse - split a relocation table (@tail, @len bytes) written by
 * arch/x86/tools/relocs into its lists. Layout (arch/x86/boot/compressed/misc.c,
 * handle_relocations): 0, 64-bit entries, 0, inverse 32-bit entries, 0, 32-bit entries, read
 * from the end backwards. The table is hostile input: no entry is followed past its bounds.
 * Return: 0; -EBADMSG a missing terminator or bytes before the first one; -ENODATA no
 * relocations at all; -EINVAL @len not a multiple of 4, or NULL arguments.
 */
int gi_krelocs_parse(const void *tail, size_t len, struct gi_krelocs *out) __must_check;

/**
 * gi_krelocs_check - whether every field of @r lies inside the image buffer that holds the
 * kernel from link-time address @image_kva for @image_len bytes.
 * Return: 0; -ERANGE a field outside; -EINVAL.
 */
int gi_krelocs_check(const struct gi_krelocs *r, uint64_t image_kva, size_t image_len)
	__must_check;

/**
 * gi_krelocs_apply - relocate the loaded kernel in @image (its bytes from link-time address
 * @image_kva, @image_len bytes, e.g. guest RAM from the lowest PT_LOAD's GPA) for a virtual
 * @slide in bytes, as the decompressor does when KASLR moves only the virtual address.
 * All fields are checked first: on an error nothing was changed.
 * Return: 0; -ERANGE a field outside the image; -EINVAL.
 */
int gi_krelocs_apply(const struct gi_krelocs *r, uint8_t *image, uint64_t image_kva,
		     size_t image_len, uint64_t slide) __must_check;

/**
 * gi_kaslr_pick_slide - a virtual KASLR slide as the decompressor's find_random_virt_addr()
 * picks it: (@random mod slots) * @align, where slots are the @align-aligned positions that
 * keep the image (@image_size bytes from link-time address @load_kva) inside
 * GI_KERNEL_IMAGE_SIZE. Slot 0 (slide 0) is one of them, as in the kernel.
 * @align: the setup header's kernel_alignment (a power of two; 2 MiB by default).
 * Return: 0; -ERANGE the image alone does not fit; -EINVAL.
 */
int gi_kaslr_pick_slide(uint64_t load_kva, uint64_t image_size, uint64_t align, uint64_t random,
			uint64_t *slide) __must_check;

/* ---------------------------------------------------------------- kernel symbols (ksym.c) */

/* Where a kernel symbol table came from, in hvprof's order of preference. */
enum symtab_source {
	SYMTAB_SRC_NONE = 0,
	SYMTAB_SRC_ELF = 1,      /* .symtab (or .dynsym) of a vmlinux ELF */
	SYMTAB_SRC_MAP = 2,      /* System.map, or a copy of /proc/kallsyms */
	SYMTAB_SRC_KALLSYMS = 3, /* the kallsyms tables inside the kernel image itself */
};

/** symtab_source_name - a short description of @src (static string). */
const char *symtab_source_name(enum symtab_source src);

/**
 * symtab_open_elf_mem - symtab_open_elf() on an ELF file held in memory (@name is for
 * messages). @buf must outlive nothing: the names are copied. Same errors as symtab_open_elf.
 */
int symtab_open_elf_mem(const void *buf, size_t len, const char *name, struct symtab **out)
	__must_check;

/**
 * symtab_open_map - kernel symbols from System.map or a /proc/kallsyms copy ("ADDR TYPE NAME",
 * module symbols "\t[mod]" skipped). t/T are code, and w/W inside [_stext, _etext) or the
 * init text; code symbols cover up to the next one (neither file has sizes).
 * Return: 0; open errors; -EBADMSG not a text file or no line parses; -ENODATA only a stub
 * (Debian's one-line System.map) or every address 0 (kallsyms read without CAP_SYSLOG).
 */
int symtab_open_map(const char *path, struct symtab **out) __must_check;

/**
 * symtab_from_kimage - decode the kallsyms tables embedded in the image's .rodata, found by
 * structure (token table + index, num_syms + names + markers checked against each other,
 * offsets + relative_base checked for address order; see guestinfo/kallsyms.c), in either the
 * <= 6.3 or the 6.4+ table order, relative or absolute-percpu offsets.
 * @layout: out, optional: one line saying where each table was found.
 * Return: 0; -ENODATA no .rodata or no tables; -ENOMEM.
 */
int symtab_from_kimage(const struct gi_kimage *img, struct symtab **out, char *layout,
		       size_t layout_size) __must_check;

/**
 * symtab_open_kernel - kernel symbols from whatever @path is: a text file (System.map,
 * kallsyms copy), a vmlinux with a symtab, or a stripped vmlinux/bzImage (its kallsyms).
 * @src: out, optional: which. Return: 0; errors of the constructors above; -ENODATA when the
 * file holds no usable symbols.
 */
int symtab_open_kernel(const char *path, struct symtab **out, enum symtab_source *src)
	__must_check;

/* ---------------------------------------------------------------- return-to-user sites (exitsites.c) */

enum gi_exit_kind {
	GI_EXIT_SYSRETQ = 1, /* 48 0f 07: SYSCALL return to 64-bit user mode */
	GI_EXIT_SYSRETL = 2, /* 0f 07: SYSCALL return to compat (32-bit) user mode */
	GI_EXIT_IRETQ = 3,   /* 48 cf: interrupt/exception (and slow syscall) return */
};

#define GI_EXIT_SYM_MAX 64

/**
 * struct gi_exit_site - one return-to-user instruction.
 * @kva: its address in the running guest (link-time address + the slide given).
 * @kind: which instruction. @symbol: the symbol containing it ("" when there are no symbols),
 * @sym_off: bytes from that symbol's start.
 */
struct gi_exit_site {
	uint64_t kva;
	enum gi_exit_kind kind;
	char symbol[GI_EXIT_SYM_MAX];
	uint64_t sym_off;
};

/** gi_kva_read_fn - read @len bytes of kernel text at link-time address @kva; 0 or -errno. */
typedef int (*gi_kva_read_fn)(void *ctx, uint64_t kva, void *dst, size_t len);

/** gi_exit_kind_name - "sysretq", "sysretl", "iretq" (static strings). */
const char *gi_exit_kind_name(enum gi_exit_kind kind);

/**
 * gi_exit_sites - find the sysretq/sysretl/iretq instructions on the kernel's return-to-user
 * paths with capstone. Exploration starts at the exit-path symbols present in @st
 * (entry_SYSCALL_64, entry_SYSRETQ_unsafe_stack, swapgs_restore_regs_and_return_to_usermode,
 * common_interrupt_return, native_irq_return_iret, entry_SYSCALL_compat, ...) and at the
 * caller's @starts (link-time addresses, e.g. MSR_LSTAR minus the slide, or IDT gate targets
 * when there are no symbols); from each it decodes linearly and follows direct jumps and
 * conditional branches (not calls), stopping at ret/sysret/iret/indirect jumps/ud2/int3,
 * at most 4096 instructions in all.
 * @st: symbols (may be NULL). @read/@ctx: kernel text at link-time addresses (e.g.
 * gi_kimage_read_kva). @slide: added to every reported kva (0 for link-time addresses).
 * @out/@max: where to write; *@n: how many were found (may exceed @max: only @max written).
 * Sites are sorted by kva and unique.
 * Return: 0; -ENOENT nothing to start from, or no site found; -EINVAL; -ENOMEM.
 * Thread-safety: reentrant.
 */
int gi_exit_sites(const struct symtab *st, gi_kva_read_fn read, void *ctx, const uint64_t *starts,
		  size_t n_starts, uint64_t slide, struct gi_exit_site *out, size_t max, size_t *n)
	__must_check;

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_KIMAGE_H */
