/* SPDX-License-Identifier: MIT */
/*
 * guestinfo: what hvprof knows about a Linux x86-64 guest, read from the kernel image and from
 * guest memory (through struct gmem only; no KVM here, so everything is testable on buffers).
 *
 * Address spaces: GVA (guest virtual), GPA (guest physical); kernel GVAs are called kva.
 * Errors (negative errno): -EFAULT page not present; -ERANGE address outside guest RAM or
 * arithmetic overflow; -EINVAL bad argument or non-canonical GVA; -ENOENT symbol/type not found;
 * -ENODATA no symtab/BTF; -EBADMSG malformed file; -ENOTSUP paging mode not supported;
 * -ELOOP too many steps; -ENOMEM.
 */
#ifndef HVPROF_GUESTINFO_H
#define HVPROF_GUESTINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>
#include <hvprof/gmem.h>
#include <hvprof/sample.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- page walks (pgwalk.c) */

#define PGWALK_MAX_LEVELS 5

/**
 * struct gi_paging - the vCPU state that defines GVA->GPA translation.
 * @cr0, @cr3, @cr4, @efer: control registers (CR3 may carry PCID bits: masked when CR4.PCIDE).
 * @maxphyaddr: physical address width in bits (CPUID 0x80000008 EAX[7:0]); 0 means 52.
 * @kernel_cr3/@user_cr3: optional: the page tables for upper-half (kernel) and lower-half
 *   (user) addresses when they are not @cr3's. Under page-table isolation a user-mode CR3 maps
 *   little of the kernel, and a kernel-mode CR3 maps user memory NX (so user code does not
 *   look executable there): the caller gives the other half of the pair. 0: @cr3.
 */
struct pgwalk_cache;

struct gi_paging {
	uint64_t cr0;
	uint64_t cr3;
	uint64_t cr4;
	uint64_t efer;
	unsigned int maxphyaddr;
	uint64_t kernel_cr3;
	uint64_t user_cr3;
	/* optional: translations remembered until pgwalk_cache_invalidate(); NULL: none. The
	 * cache belongs to one thread (one vCPU): never share a gi_paging that points to it. */
	struct pgwalk_cache *cache;
};

#define PGWALK_CACHE_SLOTS 64

/**
 * struct pgwalk_cache - GVA->GPA translations of 4 KiB slices, direct-mapped, valid for one
 * epoch. Callers invalidate it whenever the guest may have changed its page tables (hvprof: at
 * every sample, since the vCPU is stopped while a sample is taken). Zero-initialise before use.
 * @hits/@misses: counters.
 */
struct pgwalk_cache {
	uint64_t epoch;
	uint64_t hits;
	uint64_t misses;
	struct {
		uint64_t epoch; /* valid when equal to the cache's epoch (which starts at 1) */
		uint64_t cr3;
		uint64_t cr4;
		uint64_t gva_page;
		uint64_t gpa_page;
		uint64_t page_size;
	} slot[PGWALK_CACHE_SLOTS];
};

/** pgwalk_cache_invalidate - forget every translation of @c (O(1)). */
static inline void pgwalk_cache_invalidate(struct pgwalk_cache *c)
{
	c->epoch++;
}

/**
 * struct pgwalk_trace - every level a walk visited (for tests and debug output).
 * @levels: entries filled; @entry_gpa[i]: GPA of the entry read at step i; @entry[i]: its value.
 */
struct pgwalk_trace {
	unsigned int levels;
	uint64_t entry_gpa[PGWALK_MAX_LEVELS];
	uint64_t entry[PGWALK_MAX_LEVELS];
};

/**
 * gi_gva_to_gpa - translate @gva through the page tables of @pg (4-level, or 5-level when
 * CR4.LA57; 1 GiB and 2 MiB pages; SDM vol. 3A, 4.5).
 * @page_size: out, optional: bytes of the page that maps @gva (4096, 2 MiB, 1 GiB).
 * @trace: out, optional (a walk with a trace bypasses @pg->cache).
 * Return: 0 and *@gpa; -EINVAL non-canonical @gva (48-bit, or 57-bit with CR4.LA57), bad
 * argument or @pg->maxphyaddr outside 32..52; -EFAULT an entry is not present or has reserved
 * bits set (PS in a PML5E/PML4E, bits 20:13 of a 2 MiB PDE or 29:13 of a 1 GiB PDPTE, XD
 * without EFER.NXE; XD itself only forbids execution and does not stop the walk); -ERANGE a
 * table or the result lies outside guest RAM (by @mem), or CR3 or an entry has address bits
 * at or above MAXPHYADDR; -ENOTSUP paging off or not in long mode (CR0.PG, EFER.LMA, CR4.PAE).
 * Every walk reads at most PGWALK_MAX_LEVELS entries, so a looping table terminates.
 * Thread-safety: reentrant; only reads through @mem.
 */
int gi_gva_to_gpa(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva, uint64_t *gpa,
		  uint64_t *page_size, struct pgwalk_trace *trace) __must_check;

/**
 * gi_read_gva - copy @len bytes at @gva (may cross pages) into @dst.
 * Return: 0, or an error of gi_gva_to_gpa / the gmem read for the first page that fails.
 */
int gi_read_gva(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva, void *dst,
		size_t len) __must_check;

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
 * is decompressed on the host: xz (liblzma), zstd (libzstd), gzip (zlib) or uncompressed.
 * The decompressed payload is the vmlinux ELF followed by the relocation table that the
 * in-kernel decompressor applies for KASLR.
 * @path: host path. @out: free with gi_kimage_free().
 * Return: 0; -ENOENT/-EACCES (open); -EBADMSG neither an x86-64 ELF nor a bzImage, a payload
 * outside the file, or a payload that does not decompress to an ELF; -ENOTSUP another
 * compression (lz4, lzo, bzip2, lzma) or boot protocol < 2.08; -EFBIG payload above 1 GiB;
 * -ENOMEM. Thread-safety: read-only after open.
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

/** gi_kimage_compression - "xz", "zstd", "gzip" or "none" (a static string). */
const char *gi_kimage_compression(const struct gi_kimage *img);

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

/* ---------------------------------------------------------------- kernel structure layouts (btf.c) */

/**
 * struct gi_layout - byte offsets of the guest kernel fields hvprof reads, taken from the
 * kernel's BTF via libbpf (never from hand-written tables). An offset of UINT32_MAX means the
 * field is missing from this kernel.
 */
struct gi_layout {
	uint32_t task_pid;       /* task_struct.pid (pid_t) */
	uint32_t task_tgid;      /* task_struct.tgid */
	uint32_t task_comm;      /* task_struct.comm[TASK_COMM_LEN] */
	uint32_t task_comm_len;  /* sizeof(task_struct.comm) */
	uint32_t task_mm;        /* task_struct.mm (NULL for kernel threads) */
	uint32_t task_flags;     /* task_struct.flags (PF_KTHREAD 0x00200000) */
	uint32_t task_stack;     /* task_struct.stack (base of the kernel stack) */
	uint32_t mm_start_code;  /* mm_struct.start_code */
	uint32_t mm_end_code;    /* mm_struct.end_code */
	uint32_t mm_exe_file;    /* mm_struct.exe_file (struct file *) */
	uint32_t file_f_path;    /* file.f_path (struct path) */
	uint32_t path_dentry;    /* path.dentry */
	uint32_t dentry_d_parent;/* dentry.d_parent */
	uint32_t dentry_d_name;  /* dentry.d_name (struct qstr) */
	uint32_t qstr_name;      /* qstr.name (const unsigned char *) */
	uint32_t pt_regs_size;   /* sizeof(struct pt_regs) */
	uint32_t pt_regs_ip;     /* pt_regs.ip */
	uint32_t pt_regs_sp;     /* pt_regs.sp */
	uint32_t pt_regs_bp;     /* pt_regs.bp */
	uint32_t pt_regs_cs;     /* pt_regs.cs */
	uint32_t pcpu_hot_current_task; /* pcpu_hot.current_task (6.2+: current_task moved there) */
};

/**
 * gi_layout_from_btf - fill @out from a BTF blob: a detached .btf file (pahole
 * --btf_encode_detached) or an ELF with a .BTF section.
 * Members inside anonymous structs/unions (task_struct's randomized_struct_fields) are found.
 * Return: 0; -ENOENT file missing; -EBADMSG not BTF; -ENODATA an ELF file without .BTF, or a
 * required type is missing (task_struct, mm_struct; pid/tgid/comm/mm/stack are required, the
 * others optional). *@out is written only on success.
 */
int gi_layout_from_btf(const char *path, struct gi_layout *out) __must_check;

/**
 * gi_layout_from_btf_data - gi_layout_from_btf() on raw BTF bytes (a .BTF section, e.g. from
 * gi_kimage_btf()). @data is only read during the call. Return: as gi_layout_from_btf, with
 * -EBADMSG for bytes that are not BTF.
 */
int gi_layout_from_btf_data(const void *data, size_t size, struct gi_layout *out) __must_check;

/* ---------------------------------------------------------------- the guest session (gi.c) */

struct gi;

/**
 * struct gi_config - what guestinfo is told about the guest kernel.
 * @vmlinux: host path of the kernel: a vmlinux ELF (with or without a symtab) or a bzImage
 *   (its payload is decompressed on the host; see gi_kimage_open). Required.
 * @btf: host path of its BTF (detached file or ELF with .BTF); NULL: the image's own .BTF.
 * @symbols: optional System.map or /proc/kallsyms copy, used when @vmlinux has no symtab
 *   (before the kallsyms tables inside the image).
 */
struct gi_config {
	const char *vmlinux;
	const char *btf;
	const char *symbols;
};

/**
 * gi_open - load the kernel's symbols (vmlinux symtab, else @symbols, else the image's own
 * kallsyms), structure layout (BTF) and return-to-user sites (gi_exit_sites; a kernel without
 * any is accepted, gi_exit_sites_of() then reports none).
 * Return: 0 and *@out (free with gi_close); errors of gi_kimage_open / symtab_open_elf /
 * symtab_open_map / gi_layout_from_btf; -ENODATA no symbols at all; -ENOENT when a required
 * symbol (current_task, or pcpu_hot with BTF for pcpu_hot.current_task; _stext, _etext) is
 * missing.
 * Thread-safety: the returned object is read-only after gi_open; all gi_* calls below may run
 * concurrently on it.
 */
int gi_open(const struct gi_config *cfg, struct gi **out) __must_check;

/** gi_close - free @gi (NULL is fine). */
void gi_close(struct gi *gi);

/** gi_symtab - the kernel symbol table (owned by @gi). */
const struct symtab *gi_symtab(const struct gi *gi);

/** gi_layout - the structure layout (owned by @gi). */
const struct gi_layout *gi_layout(const struct gi *gi);

/**
 * gi_kernel_text - [start, end) GVAs of the kernel text (_stext.._etext) in the running guest:
 * link-time addresses plus the KASLR slide (gi_set_kaslr_slide).
 */
void gi_kernel_text(const struct gi *gi, uint64_t *start, uint64_t *end);

/** gi_symbol_source - where gi_open took the kernel symbols from. */
enum symtab_source gi_symbol_source(const struct gi *gi);

/**
 * gi_exit_sites_of - the return-to-user sites found at gi_open, at link-time addresses (add
 * gi_kaslr_slide() for the running guest). Owned by @gi; *@n entries (0: none found).
 */
const struct gi_exit_site *gi_exit_sites_of(const struct gi *gi, size_t *n);

/**
 * gi_kaslr_slide_from_lstar - the KASLR slide of a running guest: MSR_LSTAR (the guest's
 * SYSCALL entry, a runtime address) minus the link-time address of entry_SYSCALL_64. It is
 * cross-checked against guest memory: the slide must be a multiple of 4 KiB, and the bytes at
 * every return-to-user site (sysretq/iretq, which no alternative patches) and the SWAPGS at the
 * entry (after an optional ENDBR64) must be what the image holds there, at the slid address.
 * @pg: a kernel CR3 that maps kernel text. Return: 0 and *@slide; -ENOENT no entry_SYSCALL_64
 * symbol; -ERANGE @lstar below it or not a kernel address; -EBADMSG the bytes disagree (the
 * image is not the running kernel, or @lstar is not the entry); read errors.
 */
int gi_kaslr_slide_from_lstar(const struct gi *gi, const struct gmem *mem,
			      const struct gi_paging *pg, uint64_t lstar, uint64_t *slide)
	__must_check;

/**
 * gi_set_kaslr_slide - record the slide: kernel text bounds, the unwinder and gi_lookup_kva()
 * use it from then on. Thread-safety: may be called while other threads use @gi (the value is
 * stored atomically; every vCPU finds the same slide).
 */
void gi_set_kaslr_slide(struct gi *gi, uint64_t slide);

/** gi_kaslr_slide - the recorded slide (0 until set). */
uint64_t gi_kaslr_slide(const struct gi *gi);

enum gi_slide_state {
	GI_SLIDE_UNKNOWN = 0, /* not looked for yet, or not findable yet (MSR_LSTAR not set) */
	GI_SLIDE_KNOWN = 1,   /* gi_set_kaslr_slide() was called */
	GI_SLIDE_FAILED = 2,  /* the image does not match the guest: stop looking */
};

/** gi_kaslr_state - whether the slide is known (atomic read). */
enum gi_slide_state gi_kaslr_state(const struct gi *gi);

/** gi_set_kaslr_failed - record that the slide cannot be found (unless it is already known). */
void gi_set_kaslr_failed(struct gi *gi);

/**
 * gi_lookup_kva - the kernel symbol containing the runtime address @kva (slide removed).
 * Return: 0, *@name (owned by @gi) and *@offset (optional); -ENOENT.
 */
int gi_lookup_kva(const struct gi *gi, uint64_t kva, const char **name, uint64_t *offset)
	__must_check;

/**
 * struct gi_regs - the vCPU state a sample needs.
 * @rip, @rsp, @rbp: general registers (GVAs). @cpl: CS.RPL/SS.DPL (0 or 3).
 * @gs_base: MSR_GS_BASE; @kernel_gs_base: MSR_KERNEL_GS_BASE (swapped by SWAPGS).
 * @pg: translation state.
 */
struct gi_regs {
	uint64_t rip;
	uint64_t rsp;
	uint64_t rbp;
	uint64_t gs_base;
	uint64_t kernel_gs_base;
	uint8_t cpl;
	struct gi_paging pg;
	/* optional, for ORC unwinding (gi_unwind_kernel_orc): set @have_scratch with them */
	uint64_t r10, r13, rdx, rdi;
	bool have_scratch;
};

/**
 * gi_current_task - GVA of the task running on the vCPU: the per-CPU variable current_task
 * (6.1) read at the per-CPU base, which is GS_BASE in the kernel and KERNEL_GS_BASE in user
 * mode (whichever is a kernel address; either can hold it around SWAPGS; when both are, CPL 0
 * picks GS_BASE and CPL 3 KERNEL_GS_BASE).
 * Return: 0 and *@task; -ENOENT no per-CPU base looks valid; -EBADMSG the variable does not
 * hold an aligned kernel address; read errors.
 */
int gi_current_task(const struct gi *gi, const struct gmem *mem, const struct gi_regs *regs,
		    uint64_t *task) __must_check;

/**
 * gi_task_identity - read pid, tgid, comm and whether it is a kernel thread from the task at
 * @task (a GVA), and validate them (pid/tgid in 0..4194304, comm printable and NUL-terminated,
 * mm canonical kernel address or NULL). @mm: out, optional: task->mm.
 * Return: 0 and *@out (time_ns left 0); -EBADMSG the task does not check out; read errors.
 */
int gi_task_identity(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		     uint64_t task, struct hvp_thread *out, uint64_t *mm) __must_check;

/**
 * gi_process_info - executable path (mm->exe_file dentry chain, at most 16 components, each
 * name at most 255 bytes) and code range of the mm at @mm. The path is relative to the root
 * of the executable's file system (mount points are not crossed); "" when mm->exe_file is NULL
 * or the kernel's BTF lacks the fields. Return: 0 and *@out (tgid/time left 0); read errors;
 * -EBADMSG a pointer, name or code range does not check out; -ELOOP more than 16 components
 * (or a d_parent cycle); -ERANGE the path does not fit hvp_process.exe.
 */
int gi_process_info(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		    uint64_t mm, struct hvp_process *out) __must_check;

/**
 * gi_unwind_kernel - kernel callchain by frame pointers, from @regs (CPL 0), innermost first
 * (ips[0] = rip). Every frame is checked: RBP aligned, strictly increasing, inside the task's
 * kernel stack [task->stack, +THREAD_SIZE) or the same 16 KiB-aligned region as the first frame
 * (IRQ stacks), return address inside kernel text. A frame pointer with bit 0 set is a pt_regs
 * pointer (ENCODE_FRAME_POINTER of interrupt entries): the walk continues with its ip/bp when
 * it holds kernel-mode registers and ends there otherwise. The only stack switch allowed is
 * from the first frame's region to the task stack. At most @max frames.
 * Return: enum hvp_walk_stop; *@n frames written (>= 1), or HVP_WALK_NONE and *@n = 0 on bad
 * arguments (NULL pointers, @max 0).
 */
enum hvp_walk_stop gi_unwind_kernel(const struct gi *gi, const struct gmem *mem,
				    const struct gi_regs *regs, uint64_t task, uint64_t *ips,
				    unsigned int max, unsigned int *n);

/* ---------------------------------------------------------------- ORC unwind tables (orc.c) */

/* The bit-field layout of struct orc_entry, which changed twice (orc_types.h). */
enum gi_orc_layout {
	GI_ORC_LAYOUT_6_1 = 1, /* sp_reg:4 bp_reg:4 type:2 end:1; CALL 0, REGS 1, REGS_PARTIAL 2 */
	GI_ORC_LAYOUT_6_3,     /* ... type:2 signal:1 end:1 */
	GI_ORC_LAYOUT_6_4,     /* ... type:3 signal:1; UNDEFINED 0, END 1, CALL 2, REGS 3, PARTIAL 4 */
};

/* An entry's type, the same for every layout. */
enum gi_orc_type {
	GI_ORC_UNDEFINED = 0, /* no unwind data here */
	GI_ORC_END,           /* the outermost frame (a kernel thread's, or the entry's) */
	GI_ORC_CALL,          /* a call frame: the return address is just below the CFA */
	GI_ORC_REGS,          /* a full pt_regs at the CFA (interrupt or exception entry) */
	GI_ORC_REGS_PARTIAL,  /* an iret frame at the CFA */
};

/**
 * struct gi_orc_entry - one decoded struct orc_entry: how to find the caller's stack pointer
 * (@sp_reg ORC_REG_* + @sp_offset bytes) and frame pointer (@bp_reg + @bp_offset), and
 * @type; @signal: the frame is an interrupted context (look up its ip, not ip - 1).
 */
struct gi_orc_entry {
	int16_t sp_offset, bp_offset;
	uint8_t sp_reg, bp_reg;
	enum gi_orc_type type;
	bool signal;
};

struct gi_orc;

/** gi_orc_layout_for - the layout of Linux @major.@minor. */
enum gi_orc_layout gi_orc_layout_for(unsigned int major, unsigned int minor);

/** gi_orc_layout_name - a phrase for @l (static string). */
const char *gi_orc_layout_name(enum gi_orc_layout l);

/**
 * gi_orc_load - the ORC tables of @img (sections .orc_unwind_ip: s32 per entry, relative to
 * the entry's own address; .orc_unwind: 6-byte struct orc_entry in @layout), at link-time
 * addresses. Free with gi_orc_free().
 * Return: 0; -ENODATA no ORC sections (a kernel built with frame pointers); -EBADMSG sizes
 * that do not match, more than 4 Mi entries, or addresses out of order; -ENOMEM; -EINVAL.
 */
int gi_orc_load(const struct gi_kimage *img, enum gi_orc_layout layout, struct gi_orc **out)
	__must_check;

/**
 * gi_orc_new - tables from decoded entries (tests, other sources): @n entries starting at
 * link-time @ips (ascending), copied. Return: 0; -EBADMSG out of order; -EINVAL; -ENOMEM.
 */
int gi_orc_new(const uint64_t *ips, const struct gi_orc_entry *e, size_t n, struct gi_orc **out)
	__must_check;

/** gi_orc_free - free @orc (NULL is fine). */
void gi_orc_free(struct gi_orc *orc);

/** gi_orc_count - number of entries. */
size_t gi_orc_count(const struct gi_orc *orc);

/**
 * gi_orc_find - the entry covering link-time address @kva (the last one starting at or below
 * it; binary search). Return: 0 and *@out; -ENOENT below the first entry; -EINVAL.
 */
int gi_orc_find(const struct gi_orc *orc, uint64_t kva, struct gi_orc_entry *out) __must_check;

/**
 * gi_unwind_kernel_orc - kernel callchain from @regs (CPL 0) by the kernel's ORC tables (loaded
 * by gi_open when the image has them), innermost first (ips[0] = rip), as unwind_orc.c walks:
 * call frames, pt_regs and iret frames of interrupt and exception entries (the walk ends at
 * one that interrupted user mode). Every step is checked: stack reads 8-byte aligned kernel
 * addresses, a call frame's SP above the previous one, at most 4 stack switches, every ip in
 * kernel text. The first frame's scratch registers come from @regs (have_scratch).
 * Return: enum hvp_walk_stop; *@n frames (>= 1); HVP_WALK_NONE and *@n = 0 without ORC data or
 * on bad arguments.
 */
enum hvp_walk_stop gi_unwind_kernel_orc(const struct gi *gi, const struct gmem *mem,
					const struct gi_regs *regs, uint64_t *ips,
					unsigned int max, unsigned int *n);

/** gi_kernel_unwinder - "orc" when gi_open found ORC tables (gi_unwind_kernel uses them),
 * else "frame pointers" (static string). */
const char *gi_kernel_unwinder(const struct gi *gi);

/**
 * gi_unwind_user - user callchain by frame pointers from @rip/@rbp, innermost first, reading
 * user memory through @pg. Frames must be user-canonical (< 0x0000800000000000, or the
 * 57-bit bound with CR4.LA57), 8-byte aligned and strictly increasing (else HVP_WALK_BAD_FP),
 * and lie in [@rsp, @rsp + 8 MiB) (else the walk ends: HVP_WALK_END); return addresses must be
 * user addresses. At most @max frames.
 * Return: enum hvp_walk_stop; *@n frames written (>= 1), or HVP_WALK_NONE and *@n = 0 on bad
 * arguments (NULL pointers, @max 0).
 */
enum hvp_walk_stop gi_unwind_user(const struct gmem *mem, const struct gi_paging *pg, uint64_t rip,
				  uint64_t rsp, uint64_t rbp, uint64_t *ips, unsigned int max,
				  unsigned int *n);

/* ---------------------------------------------------------------- what hvprof understands (kinfo.c) */

#define GI_KINFO_MAX_SITES 16

/**
 * struct gi_kernel_desc - what hvprof derives from a kernel image, for `hvprof kernel-info`.
 * Strings are NUL-terminated ("" when unknown).
 * @release: kernel release ("6.1.0-57-amd64"), from linux_banner or the bzImage header.
 * @banner: linux_banner from .rodata. @header_version: the bzImage header's kernel_version.
 * @format: "bzImage" or "ELF". @compression: of the bzImage payload ("none" for ELF).
 * @sym_src: where symbols came from; @n_symbols: code addresses; @sym_detail: how (file
 * names, or where the kallsyms tables were found).
 * @has_btf: structure layouts found; @btf_source: "--btf FILE" or "image .BTF"; @layout.
 * @current_task: how the current task is found ("current_task", "pcpu_hot.current_task").
 * @sites/@n_sites: return-to-user sites at link-time addresses.
 * @missing: what is missing, "; "-separated.
 */
struct gi_kernel_desc {
	char release[128];
	char banner[512];
	char header_version[256];
	char format[16];
	char compression[16];
	enum symtab_source sym_src;
	size_t n_symbols;
	char sym_detail[512];
	bool has_btf;
	char btf_source[300];
	struct gi_layout layout;
	char current_task[64];
	struct gi_exit_site sites[GI_KINFO_MAX_SITES];
	size_t n_sites;
	/* KASLR relocation table after the vmlinux in a bzImage payload (gi_krelocs_parse):
	 * whether there is one, and its three lists' lengths */
	bool has_relocs;
	size_t n_relocs64, n_relocs_inv32, n_relocs32;
	/* ORC unwind tables (gi_orc_load): entries, and the entry layout used for this version */
	size_t n_orc;
	enum gi_orc_layout orc_layout;
	char missing[512];
};

/**
 * gi_kernel_describe - inspect @kernel (vmlinux or bzImage) with optional @btf and @symbols
 * files (either may be NULL) and fill @out. What cannot be found is listed in @out->missing
 * rather than failing. Return: 0; errors of gi_kimage_open (the file is not a kernel); -ENOMEM.
 */
int gi_kernel_describe(const char *kernel, const char *btf, const char *symbols,
		       struct gi_kernel_desc *out) __must_check;

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_GUESTINFO_H */
