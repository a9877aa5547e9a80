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
#include <hvprof/kimage.h>
#include <hvprof/pgwalk.h>
#include <hvprof/sample.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- kernel structure layouts (btf.c) */

/**
 * struct gi_layout - byte offsets of the guest kernel fields hvprof reads, taken from the
 * kernel's BTF via libbpf (never from hand-written tables). An offset of UINT32_MAX means the
 * field is missing from this kernel.
 */
/* The general-purpose registers of struct pt_regs besides ip, sp and bp, by their BTF field
 * names (arch/x86/include/asm/ptrace.h, x86-64). */
#define GI_PT_REGS_GPRS(X)                                                                    \
	X(ax) X(bx) X(cx) X(dx) X(si) X(di) X(r8) X(r9) X(r10) X(r11) X(r12) X(r13) X(r14) X(r15)

struct gi_layout {
	uint32_t task_pid;       /* task_struct.pid (pid_t) */
	uint32_t task_tgid;      /* task_struct.tgid */
	uint32_t task_comm;      /* task_struct.comm[TASK_COMM_LEN] */
	uint32_t task_comm_len;  /* sizeof(task_struct.comm) */
	uint32_t task_mm;        /* task_struct.mm (NULL for kernel threads) */
	uint32_t task_flags;     /* task_struct.flags (PF_KTHREAD 0x00200000) */
	uint32_t task_stack;     /* task_struct.stack (base of the kernel stack) */
	uint32_t task_ti_flags;  /* task_struct.thread_info.flags (unsigned long; x86-64 keeps
				  * thread_info in task_struct, CONFIG_THREAD_INFO_IN_TASK) */
	uint32_t task_task_works; /* task_struct.task_works (struct callback_head *: task work
				   * queued, which sets TIF_NOTIFY_RESUME itself) */
	uint32_t task_rseq;      /* task_struct.rseq (struct rseq __user *, CONFIG_RSEQ 4.18+:
				  * not NULL once the thread registered an rseq area; sys_rseq sets
				  * its TIF_NOTIFY_RESUME then, rseq_preempt() at each of its
				  * context switches out, membarrier's rseq IPI too) */
	uint32_t task_nvcsw;     /* task_struct.nvcsw, nivcsw (unsigned long): its voluntary and */
	uint32_t task_nivcsw;    /* involuntary context switches, counted at each switch out */
	/* struct paravirt_patch_template (the type of pv_ops, CONFIG_PARAVIRT_XXL): where its
	 * irq.irq_enable and irq.irq_disable slots sit; an image of such a kernel calls them where
	 * others have sti and cli, and the kernel patches the calls into those at boot */
	uint32_t pv_irq_enable;
	uint32_t pv_irq_disable;
	uint32_t mm_start_code;  /* mm_struct.start_code */
	uint32_t mm_end_code;    /* mm_struct.end_code */
	uint32_t mm_exe_file;    /* mm_struct.exe_file (struct file *) */
	uint32_t mm_pgd;         /* mm_struct.pgd (pgd_t *: a direct-map KVA of its root table) */
	uint32_t mm_start_stack; /* mm_struct.start_stack: the initial user RSP (argc's address) */
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
	uint32_t pt_regs_orig_ax; /* pt_regs.orig_ax: the system call number of a syscall entry */
#define GI_LAYOUT_PT_REGS_GPR(name) uint32_t pt_regs_##name;
	GI_PT_REGS_GPRS(GI_LAYOUT_PT_REGS_GPR) /* pt_regs.ax, .bx, ..., .r15 */
#undef GI_LAYOUT_PT_REGS_GPR
	uint32_t pcpu_hot_current_task; /* pcpu_hot.current_task (6.2+: current_task moved there) */
	/* process address spaces (vma.c): the VMAs' maple tree, 6.1+ (include/linux/maple_tree.h) */
	uint32_t mm_mt_root;     /* mm_struct.mm_mt.ma_root */
	uint32_t mm_map_count;   /* mm_struct.map_count (int) */
	uint32_t mr64_pivot, mr64_slot, mr64_slots, mr64_meta; /* maple_range_64 (and leaf_64) */
	uint32_t ma64_pivot, ma64_slot, ma64_slots, ma64_meta; /* maple_arange_64 */
	uint32_t maple_node_size; /* sizeof(struct maple_node) */
	uint32_t vma_start, vma_end, vma_mm, vma_flags, vma_pgoff, vma_file; /* vm_area_struct */
	uint32_t file_f_inode;   /* file.f_inode */
	uint32_t inode_i_ino, inode_i_sb; /* inode.i_ino, inode.i_sb */
	uint32_t sb_s_dev;       /* super_block.s_dev (dev_t, u32) */
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
 * kallsyms), structure layout (BTF: @btf, else the image's .BTF; a kernel with neither opens
 * without layouts, see gi_has_btf()) and return-to-user sites (gi_exit_sites; a kernel without
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

/**
 * gi_has_btf - whether structure layouts came from BTF. Without (a kernel built without
 * CONFIG_DEBUG_INFO_BTF and no --btf file), gi_open succeeds with symbols only: thread identity,
 * pt_regs and process information answer -ENODATA.
 */
bool gi_has_btf(const struct gi *gi);

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
	/* optional: the sampled task's kernel stack (task->stack, a GVA) as the caller already
	 * read it this exit; gi_unwind_kernel then does not read it again. 0: not read */
	uint64_t task_stack;
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
 * gi_task_identity - read pid, tgid, comm and whether it is a kernel thread (PF_KTHREAD, or no
 * mm and not exiting: pid 1 before its first execve counts as one) from the task at
 * @task (a GVA), and validate them (pid/tgid in 0..4194304, comm printable and NUL-terminated,
 * mm canonical kernel address or NULL). @mm: out, optional: task->mm.
 * Return: 0 and *@out (time_ns left 0); -EBADMSG the task does not check out; read errors.
 */
int gi_task_identity(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		     uint64_t task, struct hvp_thread *out, uint64_t *mm) __must_check;

/**
 * gi_mm_user_root - GPA of the root page table of the address space @mm (struct mm_struct GVA):
 * mm->pgd translated through the kernel half of @pg (every root maps it alike). With PTI that is
 * the kernel's PGD, which maps the user half too. Return: 0 and *@root (4 KiB aligned); -ENODATA
 * no mm_struct.pgd in the layout; -EBADMSG pgd not a page-aligned kernel address; -EFAULT or a
 * page walk's error; -EINVAL.
 */
int gi_mm_user_root(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		    uint64_t mm, uint64_t *root) __must_check;

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
 * kernel stack [task->stack, +THREAD_SIZE) (task->stack read from @task, or @regs->task_stack
 * when the caller set it) or the same 16 KiB-aligned region as the first frame
 * (IRQ stacks), return address inside kernel text. A frame pointer with bit 0 set is a pt_regs
 * pointer (ENCODE_FRAME_POINTER of interrupt entries): the walk continues with its ip/bp when
 * it holds kernel-mode registers and ends there otherwise. The only stack switch allowed is
 * from the first frame's region to the task stack. At most @max frames.
 * A RIP (sampled, or a pt_regs ip) inside a function's prologue before `mov %rsp,%rbp`, in a
 * function that builds no frame, or at a ret still has its caller's frame in RBP: there the
 * caller is read from the stack at RSP, or RSP + 8 after `push %rbp` (the table gi_open makes,
 * per function from the image's CFI where it has the function, else from its code with
 * capstone; ORC kernels and sessions without an image skip this), so the immediate caller is
 * not lost.
 * Return: enum hvp_walk_stop; *@n frames written (>= 1), or HVP_WALK_NONE and *@n = 0 on bad
 * arguments (NULL pointers, @max 0).
 */
enum hvp_walk_stop gi_unwind_kernel(const struct gi *gi, const struct gmem *mem,
				    const struct gi_regs *regs, uint64_t task, uint64_t *ips,
				    unsigned int max, unsigned int *n);

/* ---------------------------------------------------------------- address spaces (vma.c) */

#define GI_MAPPING_PATH_MAX 256

/**
 * struct gi_mapping - one VMA of a process.
 * @start/@end: [start, end) GVAs, page aligned. @pgoff: vm_pgoff, the file offset in 4 KiB
 * pages. @flags: vm_flags (VM_READ 0x1, VM_WRITE 0x2, VM_EXEC 0x4, VM_SHARED 0x8).
 * @file: the struct file GVA it maps (0: anonymous); @path: its path from the root of its file
 * system ("" when anonymous or unreadable); @ino/@dev: inode number and device (s_dev).
 */
struct gi_mapping {
	uint64_t start, end, pgoff, flags, file, ino;
	uint32_t dev;
	char path[GI_MAPPING_PATH_MAX];
};

/**
 * gi_process_mappings - the VMAs of the mm at @mm (a GVA), from its maple tree (Linux 6.1+,
 * lib/maple_tree.c; layouts from BTF), sorted by address. Bounded: at most 512 tree nodes and
 * 16 levels are read; every VMA must point back to @mm (vm_mm), be page aligned, in the user
 * half and not overlap another. @out/@max: where to write (the caller owns them).
 * Return: 0 and *@n; -ENODATA the BTF lacks the maple tree or VMA layouts (kernels before 6.1);
 * -EBADMSG a node or VMA does not check out (also: the tree changed during the walk); -ELOOP the
 * node or depth bound; -E2BIG more than @max VMAs; read errors; -EINVAL.
 */
int gi_process_mappings(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
			uint64_t mm, struct gi_mapping *out, size_t max, size_t *n) __must_check;

/**
 * gi_mapping_build_id - the GNU build-id (NT_GNU_BUILD_ID) of the ELF file whose first page is
 * mapped at @start (a page-aligned user GVA, the mapping with file offset 0), read from that
 * page through @pg (the process's page tables) when it is resident, and parsed with libelf: the
 * ELF header, program headers and a PT_NOTE segment inside that page. @id/@max: where to write.
 * Return: 0, @id and *@len (bytes); -EFAULT/-ERANGE not resident or not mapped; -ENOENT not a
 * 64-bit ELF, or no build-id note in the first page; -ENOTSUP libelf unusable; -EINVAL.
 */
int gi_mapping_build_id(const struct gmem *mem, const struct gi_paging *pg, uint64_t start,
			uint8_t *id, size_t max, size_t *len) __must_check;

/**
 * gi_mm_map_count - mm->map_count of the mm at @mm: how many VMAs it has, a cheap sign that its
 * address space changed. Return: 0 and *@count; -ENODATA no such field in the BTF; read errors.
 */
int gi_mm_map_count(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		    uint64_t mm, int32_t *count) __must_check;

/* ---------------------------------------------------------------- the running kernel (kentry.c) */

/**
 * struct gi_user_regs - the user registers a user-stack walk starts from: @ip, @sp, @bp (GVAs),
 * and every other general-purpose register (pt_regs names), for unwinding from CFI. A register
 * whose pt_regs field the BTF lacks reads as 0.
 */
struct gi_user_regs {
	uint64_t ip, sp, bp;
#define GI_USER_REGS_GPR(name) uint64_t name;
	GI_PT_REGS_GPRS(GI_USER_REGS_GPR)
#undef GI_USER_REGS_GPR
	/* how the kernel was entered: pt_regs.orig_ax when @entry_known (the system call's
	 * number for a syscall entry; -1 for an interrupt or exception, whose entry code moves
	 * the error code out: arch/x86/entry/entry_64.S) and pt_regs.cs */
	uint64_t orig_ax, cs;
	bool entry_known;
};

/**
 * gi_task_user_regs - the user registers saved at @task's last kernel entry (ip, sp, bp and the
 * other general-purpose registers; cs, and orig_ax with entry_known when the BTF has it):
 * struct pt_regs at
 * task->stack + THREAD_SIZE - sizeof(pt_regs) (x86-64 task_pt_regs(), no top padding;
 * arch/x86/include/asm/processor.h), field offsets from BTF, one THREAD_SIZE for guestinfo.
 * Return: 0 and *@out; -ENODATA the BTF lacks pt_regs fields; -EBADMSG task->stack is not a
 * THREAD_SIZE-aligned kernel address; -ENOENT pt_regs does not hold a user-mode entry (CS RPL
 * is not 3: a kernel thread, or not entered yet); read errors.
 */
int gi_task_user_regs(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		      uint64_t task, struct gi_user_regs *out) __must_check;

/**
 * gi_stack_user_regs - gi_task_user_regs() for a task whose kernel stack was read already in
 * this sample (gi_task_stack_seed): pt_regs at @stack_kva + THREAD_SIZE - sizeof(pt_regs), one
 * read. @gi: the guest's layout (BTF); @mem: guest RAM; @pg: the sample's paging; @stack_kva:
 * task->stack (a kernel GVA); @out: the registers (caller-owned). Reads through @pg's cache
 * like any read (one reader per cache: the vCPU's thread).
 * Return: 0 and *@out; -EINVAL a NULL argument; -EBADMSG @stack_kva is not a THREAD_SIZE-aligned
 * kernel address; otherwise as gi_task_user_regs (-ENODATA, -ENOENT, read errors).
 */
int gi_stack_user_regs(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		       uint64_t stack_kva, struct gi_user_regs *out) __must_check;

/**
 * struct gi_thread_state - what changes over a thread's life.
 * @mm: task->mm (0 for kernel threads, and for a user thread past exit_mm()).
 * @exiting: a user thread in do_exit() past exit_mm() (PF_EXITING, no mm): its user memory is
 *   being torn down (exit_mmap) and it never returns to user mode.
 */
struct gi_thread_state {
	uint64_t mm;
	bool exiting;
	bool cached; /* gi_current_thread_cached: the identity came from the task cache */
};

#include <hvprof/gi_taskcache.h>

/**
 * gi_current_thread - the thread running on the vCPU in one call: gi_current_task() then
 * gi_task_identity(). @st: optional, out.
 * Return: 0, *@task and *@out; errors of the two calls.
 */
int gi_current_thread(const struct gi *gi, const struct gmem *mem, const struct gi_regs *regs,
		      uint64_t *task, struct hvp_thread *out, struct gi_thread_state *st)
	__must_check;

/**
 * gi_current_thread_cached - gi_current_thread() through @cache (NULL: none): the task pointer
 * is always read; a task found in @cache whose pid, comm and mm (and flags while mm is NULL) read
 * now are those remembered gives the remembered identity (@st->cached); otherwise the identity is
 * read in full, validated and remembered. Same returns as gi_current_thread().
 */
int gi_current_thread_cached(const struct gi *gi, const struct gmem *mem,
			     const struct gi_regs *regs, struct gi_task_cache *cache,
			     uint64_t *task, struct hvp_thread *out, struct gi_thread_state *st)
	__must_check;

#include <hvprof/gi_kentry.h>

/* ---------------------------------------------------------------- watching the running kernel (kwatch.c) */

/* Outcome of checking the KASLR slide in the running guest (docs/kaslr.md). */
enum gi_kaslr_check {
	GI_KASLR_PENDING = 0, /* no kernel-mode look at MSR_LSTAR yet */
	GI_KASLR_CONFIRMED,   /* the slide the VMM placed the kernel at, seen in the guest */
	GI_KASLR_FOUND,       /* the guest chose the slide; found from MSR_LSTAR */
	GI_KASLR_MISMATCH,    /* the guest runs at another slide than it was placed at */
	GI_KASLR_FAILED,      /* MSR_LSTAR does not point at this image's entry_SYSCALL_64 */
};

/** gi_kaslr_check_name - a phrase for enum gi_kaslr_check (static string). */
const char *gi_kaslr_check_name(int check);

/**
 * gi_kaslr_placed - the VMM placed the kernel at @slide bytes from its link address before it
 * ran: symbols use it from now on, and gi_kaslr_observe() confirms it. Call before the guest runs.
 */
void gi_kaslr_placed(struct gi *gi, uint64_t slide);

/**
 * struct gi_kaslr_observation - what one look at the guest decided.
 * @check: enum gi_kaslr_check. @slide: the slide MSR_LSTAR says (CONFIRMED, FOUND, MISMATCH).
 * @placed/@placed_known: the slide the kernel was placed at, if it was. @idt: the IDT's #PF gate
 * is asm_exc_page_fault at @slide (1), is not (-1: @gate), cannot tell (0). @err: why FAILED.
 */
struct gi_kaslr_observation {
	int check;
	uint64_t slide, placed, gate;
	bool placed_known;
	int idt;
	int err;
};

/**
 * gi_kaslr_observe - find or confirm the KASLR slide from the guest's MSR_LSTAR @lstar
 * (gi_kaslr_slide_from_lstar), with the IDT (@idt_base/@idt_limit from IDTR) as a second
 * witness, and decide it once for this guest (the first caller wins; thread-safe): FOUND and
 * MISMATCH set the slide symbols use (gi_set_kaslr_slide), FAILED without a placement records
 * that the slide cannot be found (slide 0). @pg: a vCPU in kernel mode.
 * Return: 0 this call decided, *@obs filled; -EAGAIN nothing can be decided from this state yet
 * (LSTAR 0 or not final, the entry not mapped through @pg): ask again later; -EALREADY decided
 * before; -EINVAL.
 */
int gi_kaslr_observe(struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		     uint64_t lstar, uint64_t idt_base, uint16_t idt_limit,
		     struct gi_kaslr_observation *obs) __must_check;

/** gi_kaslr_checked - the decided check (enum gi_kaslr_check), its detected slide and IDT verdict. */
int gi_kaslr_checked(const struct gi *gi, uint64_t *detected, int *idt);

/* Page-table isolation in the guest (arch/x86/entry/calling.h, PTI_USER_PGTABLE_BIT). */
#define GI_PTI_USER_BIT (1ull << 12) /* CR3 of the user half of Linux's 8 KiB PGD pair */

enum gi_pti {
	GI_PTI_UNKNOWN = 0,  /* nothing decided yet */
	GI_PTI_OFF,          /* user-mode CR3s map the kernel */
	GI_PTI_ON,           /* they do not; the kernel's tables are CR3 - 4 KiB */
	GI_PTI_NOT_FOUND,    /* they do not, and CR3 - 4 KiB is not the kernel's either */
	GI_PTI_NOT_CHECKED,  /* no init_task symbol to check with */
};

/** gi_pti_name - a phrase for enum gi_pti (static string). */
const char *gi_pti_name(enum gi_pti pti);

/**
 * gi_pti_probe - whether the guest isolates page tables, from one vCPU state: if the CR3 of a
 * vCPU in user mode (@user_mode) maps init_task, no; if it does not and CR3 has
 * GI_PTI_USER_BIT, CR3 without it must map an init_task that checks out as pid 0 "swapper".
 * @pg: the vCPU's own translation (no kernel_cr3/user_cr3 split). Needs the KASLR slide.
 * Return: the decision, or GI_PTI_UNKNOWN when this state tells nothing (ask again later).
 */
enum gi_pti gi_pti_probe(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
			 bool user_mode);

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

/**
 * gi_unwind_user_copy - gi_unwind_user, reading each frame (saved RBP, return address: 16
 * bytes) that lies wholly in the stack @copy holds from there instead of through @pg and @mem:
 * the same bytes of guest RAM, without a translation and a read per frame. @copy: a USER_REGS
 * of this exit (struct hvp_user_regs: stack_len bytes from copy->regs[HVP_REG_RSP] upward, in
 * its buffer or its pieces: gi_map_user_stack / gi_copy_user_stack), read through
 * hvp_user_regs_stack_copy. Frames outside it (a stack deeper than the copy) are read as
 * gi_unwind_user reads them. @copy NULL: gi_unwind_user.
 * Return: as gi_unwind_user; the same frames, since the copy is of the same pages.
 */
enum hvp_walk_stop gi_unwind_user_copy(const struct gmem *mem, const struct gi_paging *pg,
				       uint64_t rip, uint64_t rsp, uint64_t rbp,
				       const struct hvp_user_regs *copy, uint64_t *ips,
				       unsigned int max, unsigned int *n);

/**
 * struct gi_exec_cache - user pages a frame-pointer walk found executable (gi_unwind_user's
 * check of each return address: present, NX clear at every level of the walk), kept across
 * exits for one address space while its VMA count stays the same. A process's return
 * addresses fall in a few text pages, and their page-table entries, read again at each exit,
 * are cold (under shadow paging nothing but hvprof reads them between exits). Only this
 * plausibility check of a return address uses it, never a read of guest memory. What it
 * cannot see: a page whose protection changed without a change of the VMA count (mprotect of a
 * whole VMA, a mapping replaced by one of the same count): a return address there still
 * passes the check, the frame is kept (read, as every frame, through the page tables), and
 * the walk goes on. Zero-initialised: empty. Caller-owned, one per thread (vCPU).
 * @mm: the address space the pages are of (its mm_struct GVA); @root: its page tables' root
 * (GPA, PCID and PTI bits clear); @map_count: its mm->map_count when the pages were checked;
 * @page: the pages found executable (GVA | 1; 0: empty), by page number modulo
 * GI_EXEC_CACHE_SLOTS; @hits/@misses: checks answered / walked.
 */
#define GI_EXEC_CACHE_SLOTS 32
struct gi_exec_cache {
	uint64_t mm, root;
	int32_t map_count;
	uint64_t page[GI_EXEC_CACHE_SLOTS];
	uint64_t hits, misses;
};

/**
 * gi_exec_cache_use - make @xc the cache of the address space at @mm (GVA) with page-table root
 * @root (GPA) and VMA count @map_count: kept when they are the ones it holds, else emptied.
 * Return: @xc; NULL (no cache: every check walks) when @mm is 0 or @map_count negative
 * (unknown).
 */
struct gi_exec_cache *gi_exec_cache_use(struct gi_exec_cache *xc, uint64_t mm, uint64_t root,
					int32_t map_count);

/**
 * gi_unwind_user_cached - gi_unwind_user_copy, with the check that each return address is in an
 * executable page answered from @xc where it holds the page (and the page added when a walk
 * finds it executable). @xc NULL: gi_unwind_user_copy.
 * Return: as gi_unwind_user_copy.
 */
enum hvp_walk_stop gi_unwind_user_cached(const struct gmem *mem, const struct gi_paging *pg,
					 uint64_t rip, uint64_t rsp, uint64_t rbp,
					 const struct hvp_user_regs *copy, struct gi_exec_cache *xc,
					 uint64_t *ips, unsigned int max, unsigned int *n);

/**
 * gi_copy_user_stack - copy up to @size bytes of a thread's user stack, from @rsp upward, into
 * @dst, reading through @pg (the thread's page tables) one page at a time. The copy stops at
 * the first page that is not present, not user-accessible (U/S clear at some level of the
 * walk), outside guest RAM, or past the user half: the stack ended (or the guest lies). Never
 * reads outside guest RAM; through @pg->cache only where it has every level's U/S bit (this
 * exit's walks and those remembered and checked: gi_gva_to_gpa_access), never a kept one.
 * @rsp: a user GVA, 8-byte aligned. @size: bytes (0..HVP_USER_STACK_MAX is what hvprof asks).
 * Return: 0 and *@len bytes copied (0..@size; fewer than @size: the stack ended, including 0
 * when the page at @rsp is not mapped); -EINVAL @rsp is not an 8-byte aligned canonical user
 * address (hostile or garbage RSP: nothing is read, *@len = 0), or NULL arguments.
 * Thread-safety: reentrant; only reads through @mem.
 */
int gi_copy_user_stack(const struct gmem *mem, const struct gi_paging *pg, uint64_t rsp, void *dst,
		       uint32_t size, uint32_t *len) __must_check;

/**
 * gi_map_user_stack - gi_copy_user_stack without the copy: the same bytes (the same pages, the
 * same stops) as pieces of guest RAM read in place (gmem_map), in order; pages next to each
 * other in the host are one piece. At most @max_segs pieces (HVP_USER_STACK_SEGS hold the
 * largest stack): a stack that needs more is cut after the last. The guest can change the bytes
 * while they are read (another vCPU): they are data, never followed.
 * Return: 0, *@segs[0..*@n_segs) and *@len bytes in all (as gi_copy_user_stack); -ENOTSUP
 * @mem has no map (copy instead); -EINVAL as gi_copy_user_stack, or NULL @segs with
 * @max_segs > 0. Thread-safety: reentrant; only reads through @mem.
 */
int gi_map_user_stack(const struct gmem *mem, const struct gi_paging *pg, uint64_t rsp,
		      uint32_t size, struct hvp_bytes *segs, unsigned int max_segs,
		      unsigned int *n_segs, uint32_t *len) __must_check;

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
	/* the branch to the interrupt return's iretq taken on the way to user mode only
	 * (gi_return_sites' iret_user; 0: not found), and the symbol it is in */
	uint64_t iret_user;
	char iret_user_symbol[64];
	uint64_t iret_user_off;
	/* the loops hvprof traps, one per breakpoint (gi_exit_work_loops: the one loop every exit
	 * path reaches, or where the exit paths hold it inlined each path's copy; none for the
	 * reason @ew_loops_err gives), and the symbol and offset of each one's clear */
	struct gi_exit_work ew_loops[GI_EW_COPIES];
	size_t n_ew_loops;
	int ew_loops_err;
	char ew_loop_symbol[GI_EW_COPIES][64];
	uint64_t ew_loop_off[GI_EW_COPIES];
	/* the IDT handlers' code after their call of irqentry_exit (in the exit tail): ranges and
	 * bytes (0: none found, or no exit-work loop) */
	size_t n_epilogues;
	uint64_t epilogue_bytes;
	/* KASLR relocation table after the vmlinux in a bzImage payload (gi_krelocs_parse):
	 * whether there is one, and its three lists' lengths */
	bool has_relocs;
	size_t n_relocs64, n_relocs_inv32, n_relocs32;
	/* ORC unwind tables (gi_orc_load): entries, and the entry layout used for this version */
	size_t n_orc;
	enum gi_orc_layout orc_layout;
	/* without ORC: the stretches of code where RBP is still the caller's frame (prologues,
	 * frameless functions; gi_unwind_kernel keeps the caller of a sample taken there), and
	 * how many functions they came from, by the image's CFI and by its code */
	size_t n_prologues;
	size_t prologue_fns_cfi, prologue_fns_code;
	/* a Linux kernel: a banner, a bzImage header, or linux_banner/_stext among its symbols (a
	 * program's ELF has none of them) */
	bool is_kernel;
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
