/* SPDX-License-Identifier: MIT */
/* The guest session object shared by gi.c, identity.c and unwind.c (not part of the public API). */
#ifndef HVPROF_GUESTINFO_GI_INTERNAL_H
#define HVPROF_GUESTINFO_GI_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hvprof/guestinfo.h>

/* x86-64 Linux 6.1 without KASAN: THREAD_SIZE = PAGE_SIZE << 2 (arch/x86/include/asm/page_64_types.h). */
#define GI_THREAD_SIZE (16u * 1024)
#define GI_MAX_EXC_RET_JMPS 256 /* 6.1 x86-64: ~70 idtentry stubs */
/* include/linux/sched.h */
#define GI_PF_KTHREAD 0x00200000u
#define GI_PF_EXITING 0x00000004u
/* include/linux/threads.h: PID_MAX_LIMIT on 64-bit. */
#define GI_PID_MAX 4194304
/* Components of an executable path followed up the dentry chain, and bytes per name. */
#define GI_PATH_MAX_COMPONENTS 16
#define GI_NAME_MAX 255

/**
 * struct gi - everything guestinfo knows about one guest kernel; read-only after creation.
 * @st: kernel symbols (NULL for a session made by gi_new_raw()).
 * @layout: structure offsets from BTF.
 * @stext_kva, @etext_kva: kernel text [_stext, _etext).
 * @current_task_off: value of the per-CPU symbol current_task (offset in the per-CPU area),
 *   or pcpu_hot + pcpu_hot.current_task on 6.2+.
 * @src: where the symbols came from. @sites/@n_sites: return-to-user sites (link-time).
 * @entry_kva: entry_SYSCALL_64 (link-time, 0 if unknown); @entry_bytes: its first bytes.
 * @slide: KASLR slide, read and written with __atomic builtins (set once per guest).
 * @orc: the kernel's ORC tables when it has them (kernel stacks are unwound with them).
 */
#define GI_MAX_EXIT_SITES 16
/* the exit tail's ranges: the exit-work function before and after its loop, 4 callers, the
 * system call's tail, 4 call tails, the two exit paths */
#define GI_TAIL_RANGES (2 * GI_EW_COPIES + 11)
#define GI_EXEC_RANGES 6 /* execpoint.c: begin_new_exec (1-2) and the binary loaders (4) */
/* before the last read: each loop's body and its function before prep_cli, 4 callers before
 * their call of the loop's function */
#define GI_BEFORE_RANGES (GI_EW_COPIES * (GI_EW_BODY + 1) + 4)
#define GI_RANGES_MAX 24

/* A set of [start, end) code ranges (link-time KVAs) and their hull [lo, hi), for a quick no. */
struct gi_ranges {
	uint64_t r[GI_RANGES_MAX][2];
	unsigned int n;
	uint64_t lo, hi;
};

_Static_assert(GI_TAIL_RANGES <= GI_RANGES_MAX && GI_EXEC_RANGES <= GI_RANGES_MAX &&
		       GI_BEFORE_RANGES <= GI_RANGES_MAX,
	       "struct gi_ranges holds the exit tail's, execve's and the flags' reads' ranges");

/* Add [@start, @end) to @set, if not empty and there is room. */
static inline void gi_ranges_add(struct gi_ranges *set, uint64_t start, uint64_t end)
{
	if (start >= end || set->n >= GI_RANGES_MAX)
		return;
	set->r[set->n][0] = start;
	set->r[set->n][1] = end;
	if (set->n == 0 || start < set->lo)
		set->lo = start;
	if (set->n == 0 || end > set->hi)
		set->hi = end;
	set->n++;
}

/* Is @kva in one of @set's ranges? */
static inline bool gi_ranges_has(const struct gi_ranges *set, uint64_t kva)
{
	if (kva < set->lo || kva >= set->hi)
		return false;
	for (unsigned int i = 0; i < set->n; i++)
		if (kva >= set->r[i][0] && kva < set->r[i][1])
			return true;
	return false;
}

/* Sorted, disjoint [start, end) KVA ranges in an allocated array (gi_spans_free), with their
 * bounds [lo, hi) for a quick miss: a set too large for struct gi_ranges. */
struct gi_spans {
	uint64_t (*r)[2];
	size_t n;
	uint64_t lo, hi;
};

/* Is @kva in one of @s's ranges? O(log n). */
bool gi_spans_has(const struct gi_spans *s, uint64_t kva);
/* Free @s's array and empty it (NULL, or an empty set: nothing). */
void gi_spans_free(struct gi_spans *s);

struct cs_insn;
/* A decoded direct call's or jump's target (capstone detail on; link-time KVA), or 0 for any
 * other instruction or operand (exitwork.c). */
uint64_t gi_insn_target(const struct cs_insn *insn);

/* The iretq of the interrupt return among @sites[0..@n) (native_irq_return_iret where named,
 * else the first iretq; link-time), 0 if none (kentry.c). */
uint64_t gi_iret_site_of(const struct gi_exit_site *sites, size_t n);

/* A direct branch found in the image (iretuser.c): link-time KVAs. */
struct gi_branch {
	uint64_t kva, target;
	uint8_t len, cond; /* bytes; enum gi_branch_cond */
	uint8_t bytes[6];
};

/**
 * gi_iret_user_branch_find - the branch to the interrupt return's iretq (@iret, link-time) that
 * only returns to user mode take (iretuser.c): control flow followed with capstone from
 * swapgs_restore_regs_and_return_to_usermode through direct jumps (past conditional ones) to
 * its `swapgs`, then to the first jmp or jne whose target is @iret or at most 16 bytes before
 * it (a jne only with the kernel's ud2 after it), where nothing on the way from the swapgs
 * writes a general-purpose register or RSP or branches elsewhere, nor anything from the target
 * to @iret but the ESPFIX test of the IRET frame's SS. Fills @out (zeroed unless found, but
 * for -EINVAL). Return: 0; -ENOENT no such symbol or branch (kernels laid out otherwise: the
 * breakpoint stays on @iret); -EFAULT unreadable code; -ENOMEM (also when capstone cannot be
 * opened); -EINVAL.
 */
int gi_iret_user_branch_find(const struct symtab *st, gi_kva_read_fn read, void *ctx,
			     uint64_t iret, struct gi_branch *out) __must_check;

/*
 * gi_exit_ranges - @gi's ranges gi_chain_in_exit_tail tests, built once from the exit-work loops
 * and the exit functions around them (all link-time): the exit tail (each loop's function
 * outside the loop, from prep_cli where known; the callers from their call of it on; the C
 * entry points after their call; the system call's tail; the two exit paths), the code before
 * the last read (each loop's body, its function before prep_cli, the callers before their
 * call), and the loops' functions.
 */
void gi_exit_ranges(struct gi *gi);

/* A static key's site (gi_jump_labels): the instruction patched, and where it jumps when on. */
struct gi_jump_label {
	uint64_t code, target;
};

/**
 * gi_loop_body - the body of the loop headed at @head in the code [@start, @end) (link-time
 * KVAs, read through @read; at most 8 KiB): the instructions reached from @head that reach a
 * way back to it without passing it, and cannot leave the function without passing an irq
 * disable (a cli, or a call through the pv_ops slot @irq_disable, 0: none) (loopbody.c), as
 * ranges of consecutive instructions in @out[0..*@n), ascending, at most @max (the rest left
 * out). @labels[0..@n_labels): the static keys' sites in the code (gi_jump_labels), each both
 * a jump and a fall-through, all of them (without them a site held as a jump in the image may
 * fall through at run time unseen: the body would hold too much; NULL with 0: none).
 * Return: 0; -ENOENT @head is not an instruction boundary; -EBADMSG a site inside an
 * instruction; -EFAULT unreadable; -ENOMEM; -EINVAL.
 */
int gi_loop_body(gi_kva_read_fn read, void *ctx, uint64_t start, uint64_t end, uint64_t head,
		 uint64_t irq_disable, const struct gi_jump_label *labels, size_t n_labels,
		 uint64_t out[][2], unsigned int max, unsigned int *n) __must_check;

/**
 * gi_jump_labels - the static keys' sites in the code [@lo, @hi) (link-time KVAs), from the
 * kernel's __jump_table (__start___jump_table..__stop___jump_table through @read: 16-byte
 * entries, code and target relative to their own fields, include/linux/jump_label.h): at most
 * @max in @out, *@n of them. Return: 0 (none is 0 of them: a kernel without jump labels has an
 * empty table); -ENOENT no table symbols; -EBADMSG a table of odd size or over 16 MiB; -E2BIG
 * more than @max in the range; -EFAULT; -EINVAL.
 */
int gi_jump_labels(const struct symtab *st, gi_kva_read_fn read, void *ctx, uint64_t lo,
		   uint64_t hi, struct gi_jump_label *out, size_t max, size_t *n) __must_check;

/**
 * gi_exit_epilogues_find - the IDT entry handlers' code after their call of irqentry_exit or
 * irqentry_exit_to_user_mode (exitepilogue.c), decoded with capstone in the noinstr text of the
 * image read through @read: from the instruction after the call to the handler's return (a
 * forward jump to a shared epilogue followed, never into the next function), where a thread
 * returning to user mode has read its work flags for the last time (the same code serves
 * returns to kernel mode: the caller tells them apart). Fills @out (link-time KVAs; the
 * caller frees it with gi_spans_free; zeroed on every error but -EINVAL). Return: 0; -ENOENT
 * no __noinstr_text_start/_end or irqentry_exit symbols, or no such call; -E2BIG noinstr text
 * over 1 MiB; -EFAULT unreadable; -ENOMEM (also when capstone cannot be opened); -EINVAL.
 */
int gi_exit_epilogues_find(const struct symtab *st, gi_kva_read_fn read, void *ctx,
			   struct gi_spans *out) __must_check;

/* prologue.c: where a frame-pointer kernel's functions have not built their frame yet */
struct gi_prologues;

/* What RBP and RSP hold at a kernel RIP, for a frame-pointer unwind. */
enum gi_frame_state {
	GI_FRAME_BUILT = 0,  /* RBP is this function's frame (or nothing is known: as if it were) */
	GI_FRAME_AT_ENTRY,   /* nothing pushed yet: the return address at RSP, RBP the caller's */
	GI_FRAME_PUSHED,     /* RBP pushed, not yet moved: the return address at RSP + 8 */
	GI_FRAME_AT_RET,     /* a ret (the byte c3 or c2 in the body of a function with a prologue,
			      * at a RIP: an instruction boundary but for an int3 trap's ip, and
			      * the running code may be patched: confirm in the guest): as
			      * GI_FRAME_AT_ENTRY */
};

/*
 * gi_prologues_build - find, with capstone, the prologue of every code symbol of @st whose start
 * lies in [@lo, @hi) (link-time KVAs, at most GI_KERNEL_IMAGE_SIZE apart; the bytes read through
 * @read): the
 * straight-line code from the entry up to `mov %rsp,%rbp`, through `push %rbp`, where nothing
 * else moves RSP or RBP or leaves the line; or, of at most 4 KiB, frameless whole (nothing moves
 * RSP or RBP, no call, a ret); and the ret bytes (one bit per byte) in the bodies of the
 * functions with a prologue (the first 64 KiB of each). Other functions (asm with pushes, frames
 * built otherwise) are left out, their rets too.
 * Return: 0 and *@out (free with gi_prologues_free); -EINVAL bad arguments; -ENOTSUP capstone
 * without x86; -ENOMEM.
 */
int gi_prologues_build(const struct symtab *st, gi_kva_read_fn read, void *ctx, uint64_t lo,
		       uint64_t hi, struct gi_prologues **out) __must_check;

/*
 * gi_prologues_from_cfi - the same table, exactly from the call-frame information of the image
 * (the vmlinux ELF @elf_bytes, @elf_len bytes: .debug_frame, else .eh_frame; prologue_cfi.c,
 * libdw) for each function it has (the rows where the CFA is RSP + 8 or RSP + 16: early exits
 * and epilogues too), from the code read through @read for the others (asm). Return: 0 and
 * *@out; -ENODATA the image has no CFI; -EBADMSG not an ELF; -ENOTSUP not x86-64, or capstone
 * without x86; -EINVAL; -ENOMEM.
 */
int gi_prologues_from_cfi(const struct symtab *st, gi_kva_read_fn read, void *ctx,
			  const uint8_t *elf_bytes, size_t elf_len, uint64_t lo, uint64_t hi,
			  struct gi_prologues **out) __must_check;

/*
 * gi_prologues_make - the table gi_open and kernel-info use: gi_prologues_from_cfi(), and
 * gi_prologues_build() when the image has no usable CFI (-ENODATA, -EBADMSG, -ENOTSUP).
 * Return: 0 and *@out; the errors of gi_prologues_build.
 */
int gi_prologues_make(const struct symtab *st, gi_kva_read_fn read, void *ctx,
		      const uint8_t *elf_bytes, size_t elf_len, uint64_t lo, uint64_t hi,
		      struct gi_prologues **out) __must_check;

/* gi_prologues_functions - how many functions of @p came from CFI and from code (0 for NULL). */
void gi_prologues_functions(const struct gi_prologues *p, size_t *from_cfi, size_t *from_code);

/* gi_prologue_at - the state at link-time KVA @kva (a RIP: the table's claims hold at
 * instruction boundaries of the image's code): GI_FRAME_BUILT outside the table's stretches and
 * rets. Cost: the entries of two 4 KiB buckets at most and a bit of the ret bitmap; no search
 * over the whole table, no guest read. */
enum gi_frame_state gi_prologue_at(const struct gi_prologues *p, uint64_t kva);

/* gi_prologues_count - stretches of code in @p (0 for NULL): a function's prologue or frameless
 * body, or its CFI rows (merged) where the CFA is RSP-based. */
size_t gi_prologues_count(const struct gi_prologues *p);

/* gi_prologues_free - free @p (NULL is fine). */
void gi_prologues_free(struct gi_prologues *p);

struct gi {
	struct symtab *st;
	struct gi_layout layout;
	uint64_t stext_kva;
	uint64_t etext_kva;
	uint64_t current_task_off;
	enum symtab_source src;
	struct gi_exit_site sites[GI_MAX_EXIT_SITES];
	size_t n_sites;
	uint64_t entry_kva;
	uint8_t entry_bytes[8];
	uint64_t slide;
	int slide_state; /* enum gi_slide_state, __atomic builtins */
	struct gi_orc *orc; /* ORC tables (kernels without frame pointers), or NULL */
	/* frame-pointer kernels: the functions' prologues in [_stext, _etext) (prologue.c), or
	 * NULL (ORC kernels, sessions without an image): a walk from inside one finds the caller;
	 * beside @orc, which the same walk reads */
	struct gi_prologues *prologues;
	uint64_t int3_entry[2]; /* [asm_exc_int3, its end), link-time; 0/0 unknown */
	uint64_t sinittext_kva, einittext_kva; /* [_sinittext, _einittext), 0/0 if unknown */
	uint64_t entry_text_start, entry_text_end; /* [__entry_text_start, __entry_text_end) */
	/* the two exit paths inside the entry text (link-time; 0/0 when unknown): the syscall
	 * exit (syscall_return_via_sysret..entry_SYSRETQ_end) and the interrupt return
	 * (swapgs_restore_regs_and_return_to_usermode..native_irq_return_iret + 2) */
	uint64_t exit1_start, exit1_end, exit2_start, exit2_end;
	/* error_return, link-time (0/0 when absent): where exceptions and interrupts go after their
	 * C handler, whose irqentry_exit already ran the exit work of a return to user */
	uint64_t exc_ret_start, exc_ret_end;
	/* the idtentry stubs' `jmp error_return` after their call of the C handler (link-time,
	 * ascending; gi_jumps_to_find over the entry text) */
	uint64_t exc_ret_jmps[GI_MAX_EXC_RET_JMPS];
	unsigned int n_exc_ret_jmps;
	bool have_layout;       /* @layout came from BTF (false: every offset is UINT32_MAX) */
	bool no_current_task;   /* no way to find the current task (6.2+ without BTF) */
	uint64_t pf_entry_kva; /* asm_exc_page_fault (page_fault before 5.8), link-time; 0 if none */
	/* the KASLR check (kwatch.c): __atomic builtins; detected/idt written before check */
	int kaslr_check;        /* enum gi_kaslr_check */
	uint64_t kaslr_detected;
	int kaslr_idt;
	bool placed;            /* gi_kaslr_placed() was called */
	uint64_t placed_slide;
	uint64_t idt_pf_kva;    /* asm_exc_page_fault for the IDT witness, 0 if none */
	/* error_entry, paranoid_entry, xen_error_entry: the entry code's calls that save the user
	 * registers below the iret frame (link-time; 0 when absent), and where each ends (0 when
	 * not known: gi_in_entry_save_call) */
	uint64_t save_regs_kva[3];
	uint64_t save_regs_end[3];
	/* entry_INT80_compat, entry_SYSENTER_compat, entry_SYSCALL_compat: [start, end), link-time,
	 * 0/0 when absent (no IA32 emulation): 32-bit system calls, whose pt_regs.orig_ax is the
	 * call's number where an interrupt's or exception's holds its vector or error code */
	uint64_t compat_entry[3][2];
	uint64_t tss_off;       /* cpu_tss_rw's per-CPU offset (TSS.sp0 at +4); UINT64_MAX: none */
	/* the exit-work loops (gi_exit_work_loops), link-time; none when n_exit_work is 0, for
	 * the reason exit_work_err gives (-ENOTSUP: a path with no loop hvprof knows) */
	struct gi_exit_work exit_work[GI_EW_COPIES];
	size_t n_exit_work;
	int exit_work_err;
	uint64_t exit_callers[4][2];   /* [start, end) of its callers, link-time; 0/0 unknown: from
					* their call of it on, or whole when they do not call it */
	uint64_t exit_before[4][2];    /* ... the callers before that call (the flags not read
					* yet), link-time; 0/0 when whole or unknown */
	uint64_t syscall_tail[2];      /* gi_syscall_tail_find, link-time; 0/0 unknown */
	uint64_t call_tails[4][2];     /* gi_tail_after_call of the C entry points, link-time */
	/* every [start, end) gi_chain_in_exit_tail tests, link-time, from the fields above (exit_tail_
	 * ranges() in gi.c) */
	struct gi_ranges tail;
	/* where the thread reads its flags again after (gi_chain_in_exit_tail's before_read), and
	 * the loops' functions (anything else there is tail), link-time: gi_exit_ranges */
	struct gi_ranges before_read, ew_funcs;
	/* the IDT handlers' code after their exit work (gi_exit_epilogues_find): in the tail as
	 * a leaf with no kernel frame below its stub's (an entry from user mode), link-time;
	 * empty when not found */
	struct gi_spans epilogues;
	struct gi_branch iret_user; /* kva 0: not found (gi_iret_user_branch_find) */
	/* the code past execve's point of no return, link-time (execpoint.c) */
	struct gi_ranges exec_past;
};

/*
 * gi_find_exec_points - fill gi->exec_past from the image read through @read (execpoint.c):
 * the code from begin_new_exec's switch of the task's mm on, and the binary loaders' code after
 * their call of begin_new_exec. None found: exec_past empty (nothing is ever past).
 */
void gi_find_exec_points(struct gi *gi, gi_kva_read_fn read, void *ctx);

/**
 * struct gi_orc_entry_frame - the first interrupt or exception frame an ORC walk meets (the
 * entry a sample is in): @regs GVA of its struct pt_regs (for an iret frame alone, where one
 * would start: the frame is at @regs + 128); @full: the whole pt_regs is saved there (ORC
 * REGS), else only the iret frame (REGS_PARTIAL); @first: it is the sampled instruction's own
 * frame (no call frame between); @user: its CS has RPL 3 (the entry came from user mode).
 */
struct gi_orc_entry_frame {
	uint64_t regs;
	bool full, first, user;
};

/*
 * gi_orc_entry_frame - walk from @regs (CPL 0) with ORC, through call frames only (at most 8),
 * to the first pt_regs or iret frame. Return: 0 and *@out; -ENOTSUP no ORC tables; -EAGAIN the
 * stack is not described there yet (an undefined or end entry: the SYSCALL entry before its
 * frame is built); -ELOOP no such frame within 8; -EFAULT a read failed; -EBADMSG a hostile
 * step (call frame not above the previous one, return address outside kernel text).
 */
int gi_orc_entry_frame(const struct gi *gi, const struct gmem *mem, const struct gi_regs *regs,
		       struct gi_orc_entry_frame *out) __must_check;

/*
 * gi_percpu_base - the per-CPU base of @regs: GS_BASE in the kernel, KERNEL_GS_BASE in user
 * mode, whichever is a kernel address around SWAPGS (gi_current_task). Return: 0; -ENOENT
 * neither is.
 */
int gi_percpu_base(const struct gi_regs *regs, uint64_t *base) __must_check;

/* gi_running_slide - the slide the running guest's addresses are at (0 when the image did not
 * match: link-time addresses are the best guess). Return: 0; -EAGAIN not known yet. */
int gi_running_slide(const struct gi *gi, uint64_t *slide) __must_check;

/* gi_have_pt_regs - the layout has what reading pt_regs needs (size, ip/sp/bp/cs within it). */
bool gi_have_pt_regs(const struct gi_layout *l);

/*
 * gi_read_user_pt_regs - the user registers of the struct pt_regs at kernel GVA @regs_kva, as an
 * entry saved it whole (gi_have_pt_regs(@l) must hold). Return: 0; -ENOENT its CS is not a
 * user one; read errors.
 */
int gi_read_user_pt_regs(const struct gi_layout *l, const struct gmem *mem,
			 const struct gi_paging *pg, uint64_t regs_kva,
			 struct gi_user_regs *out) __must_check;

/* The slide, read atomically (see struct gi). */
static inline uint64_t gi_slide(const struct gi *gi)
{
	return __atomic_load_n(&gi->slide, __ATOMIC_RELAXED);
}

/*
 * Whether runtime address @ip is kernel code a stack may return into: [_stext, _etext) or the
 * init text [_sinittext, _einittext) (start_kernel and every __init function during boot).
 */
static inline bool gi_in_kernel_text(const struct gi *gi, uint64_t ip)
{
	uint64_t slide = gi_slide(gi);

	/* Before a guest-chosen KASLR slide is known, the text may be anywhere in the range
	 * KASLR moves it within: [__START_KERNEL_map, + KERNEL_IMAGE_SIZE of 1 GiB). */
	if (__atomic_load_n(&gi->slide_state, __ATOMIC_ACQUIRE) == GI_SLIDE_UNKNOWN)
		return ip >= 0xffffffff80000000ull && ip < 0xffffffff80000000ull + GI_KERNEL_IMAGE_SIZE;
	return (ip >= gi->stext_kva + slide && ip < gi->etext_kva + slide) ||
	       (gi->einittext_kva && ip >= gi->sinittext_kva + slide &&
		ip < gi->einittext_kva + slide);
}

/*
 * gi_task_identity_flags - gi_task_identity(), and task_struct.flags in *@task_flags (0 when the
 * BTF lacks the field).
 */
int gi_task_identity_flags(const struct gi *gi, const struct gmem *mem,
			   const struct gi_paging *pg, uint64_t task, struct hvp_thread *out,
			   uint64_t *mm, uint32_t *task_flags) __must_check;

/*
 * gi_task_identity_cached - gi_task_identity_flags() through @cache (NULL: none); *@cached says
 * whether the remembered identity was given (struct gi_task_cache says what is checked).
 */
int gi_task_identity_cached(const struct gi *gi, const struct gmem *mem,
			    const struct gi_paging *pg, struct gi_task_cache *cache, uint64_t task,
			    struct hvp_thread *out, uint64_t *mm, uint32_t *task_flags,
			    bool *cached) __must_check;

/* Read @len bytes at @base + @off (a BTF offset; UINT32_MAX: the field is missing) in guest
 * virtual memory. */
static inline int gi_read_at(const struct gmem *mem, const struct gi_paging *pg, uint64_t base,
			     uint32_t off, void *val, size_t len)
{
	uint64_t gva;

	if (off == UINT32_MAX)
		return -ENODATA;
	if (__builtin_add_overflow(base, (uint64_t)off, &gva))
		return -ERANGE;
	return gi_read_gva(mem, pg, gva, val, len);
}

static inline int gi_read_u64_at(const struct gmem *mem, const struct gi_paging *pg,
				 uint64_t base, uint32_t off, uint64_t *val)
{
	return gi_read_at(mem, pg, base, off, val, sizeof(*val));
}

static inline int gi_read_s32_at(const struct gmem *mem, const struct gi_paging *pg,
				 uint64_t base, uint32_t off, int32_t *val)
{
	return gi_read_at(mem, pg, base, off, val, sizeof(*val));
}

/*
 * gi_dentry_path - "/a/b/c" from the dentry at @dentry (a GVA) up to the root of its file
 * system (at most GI_PATH_MAX_COMPONENTS names of GI_NAME_MAX bytes). Return: 0; -ERANGE it
 * does not fit @path_size; -ELOOP too deep; -EBADMSG a pointer or name does not check out; read
 * errors.
 */
int gi_dentry_path(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		   uint64_t dentry, char *path, size_t path_size) __must_check;

/*
 * gi_find_exit_paths - from @gi->st, by symbol (link-time): the exit paths inside the entry text,
 * error_return, the register-saving entry functions and their ends, the 32-bit system-call
 * entries, the #PF entry (struct gi's fields; each 0 when its symbol is absent). Called by
 * gi_open.
 */
void gi_find_exit_paths(struct gi *gi);

/**
 * gi_new_raw - a session from explicit values, without files (unit tests, memory dumps). The
 * addresses are the running guest's: the KASLR slide is known, 0.
 * Return: 0 and *@out (free with gi_close); -EINVAL; -ENOMEM.
 */
int gi_new_raw(const struct gi_layout *layout, uint64_t stext_kva, uint64_t etext_kva,
	       uint64_t current_task_off, struct gi **out) __must_check;

#endif /* HVPROF_GUESTINFO_GI_INTERNAL_H */
