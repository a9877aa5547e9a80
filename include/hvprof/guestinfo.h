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
 */
struct gi_paging {
	uint64_t cr0;
	uint64_t cr3;
	uint64_t cr4;
	uint64_t efer;
	unsigned int maxphyaddr;
};

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
 * @trace: out, optional.
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

/* ---------------------------------------------------------------- the guest session (gi.c) */

struct gi;

/**
 * struct gi_config - what guestinfo is told about the guest kernel.
 * @vmlinux: host path of the kernel ELF with a symtab (required for now).
 * @btf: host path of its BTF (detached file or ELF with .BTF); NULL: try @vmlinux.
 */
struct gi_config {
	const char *vmlinux;
	const char *btf;
};

/**
 * gi_open - load the kernel's symbols and structure layout.
 * Return: 0 and *@out (free with gi_close); errors of symtab_open_elf / gi_layout_from_btf;
 * -ENOENT when a required symbol (current_task, _stext, _etext) is missing.
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

/** gi_kernel_text - [start, end) GVAs of the kernel text (_stext.._etext). */
void gi_kernel_text(const struct gi *gi, uint64_t *start, uint64_t *end);

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

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_GUESTINFO_H */
