/* SPDX-License-Identifier: MIT */
/*
 * Report-side DWARF unwinding of user stacks (issue 14): a recorded copy of a thread's user
 * registers and of the top of its user stack (USER_REGS records, docs/recording-format.md) is
 * unwound with libdw's frame API (dwfl_attach_state() with our own register and memory
 * callbacks) from the .eh_frame / .debug_frame of the address space's files.
 */
#ifndef HVPROF_PROFILE_UNWIND_DWARF_H
#define HVPROF_PROFILE_UNWIND_DWARF_H

#include <stddef.h>
#include <stdint.h>

/* Registers of a USER_REGS record: DWARF x86-64 numbering (System V psABI, table 3.36):
 * rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8..r15, then the return address column (rip). */
#define UNW_NREGS 17
#define UNW_REG_RBP 6
#define UNW_REG_RSP 7
#define UNW_REG_RIP 16

/* Why an unwind ended (counted per reason by the caller). */
#define UNW_STOP_LIST(X)                                                                   \
	X(END, "end")                 /* the outermost frame: CFI says there is no caller */ \
	X(DEPTH, "depth")             /* the caller's bound on frames */                     \
	X(NO_MODULE, "no_module")     /* a pc in no reported file: anonymous, vDSO, unknown */ \
	X(STACK, "outside_stack_copy") /* CFI needed memory outside the recorded stack copy */ \
	X(NO_CFI, "no_cfi")           /* the file has no CFI for the pc */                   \
	X(BAD_REGS, "bad_regs")       /* the recorded registers or stack are unusable */      \
	X(ERROR, "error")             /* another libdw error */

enum unw_stop {
#define UNW_STOP_ENUM(name, str) UNW_STOP_##name,
	UNW_STOP_LIST(UNW_STOP_ENUM)
#undef UNW_STOP_ENUM
	UNW_STOP_COUNT
};

/** unw_stop_name - the counter name of @why ("end", "depth", ...), or "unknown". */
const char *unw_stop_name(enum unw_stop why);

/**
 * struct unw_map - one file mapping of an address space, as the unwinder needs it.
 * @start/@end: [start, end) GVAs. @pgoff: file offset of @start in bytes.
 * @fd: read-only fd of the runnable ELF file (borrowed: the unwinder dups it), or -1 when the
 *   file was not found (the range then has no CFI).
 * @name: the file's name for the module (e.g. the guest path); borrowed, copied by libdw.
 */
struct unw_map {
	uint64_t start, end, pgoff;
	int fd;
	const char *name;
};

struct unwinder;
struct unw_space;

/**
 * unwinder_new - an empty unwinder (a cache of address spaces, each one a Dwfl session).
 * Return: 0 and *@out (free with unwinder_free()); -ENOMEM.
 */
int unwinder_new(struct unwinder **out);

/** unwinder_free - close every address space and its files; NULL is a no-op. */
void unwinder_free(struct unwinder *u);

/**
 * unwinder_space - the address space @key (a caller-chosen id, e.g. a snapshot index), made
 * from @maps (n_maps, in any order) on first use and cached: later calls with the same @key
 * return the cached space and ignore @maps. Files whose fd is -1 or that libdw cannot use as
 * ELF are left out (pcs in them stop the unwind with UNW_STOP_NO_MODULE); mappings of one
 * file (same name) become one module, placed by its lowest mapping (load bias
 * = start - pgoff + p_offset - p_vaddr of the PT_LOAD holding that file offset; ET_EXEC at
 * its link addresses).
 * At most 64 sessions stay open (each holds an fd per file): the next one closes them all, so
 * a space returned earlier is valid only until the next call.
 * Return: 0 and *@out (owned by @u); -ENOMEM; -EINVAL @n_maps but no @maps.
 */
int unwinder_space(struct unwinder *u, uint64_t key, const struct unw_map *maps, size_t n_maps,
		   struct unw_space **out);

/** unwinder_lookup - the cached address space @key, or NULL when there is none yet. */
struct unw_space *unwinder_lookup(const struct unwinder *u, uint64_t key);

/**
 * unwinder_unwind - unwind one recorded user state: @regs (UNW_NREGS values, DWARF order, GVAs
 * for rsp/rip) and @stack_len bytes of stack copied from regs[UNW_REG_RSP] upward. Memory is
 * read only from that copy (never from elsewhere: the guest's other memory was not recorded).
 * @ips: receives up to @max pcs, innermost first: regs[UNW_REG_RIP], then return addresses
 * (as the frame-pointer walk records them: not adjusted by -1).
 * Return: 0 and *@n (>= 1 when rip is nonzero) and *@why; -EINVAL bad arguments.
 */
int unwinder_unwind(struct unw_space *sp, const uint64_t *regs, const uint8_t *stack,
		    uint32_t stack_len, uint64_t *ips, unsigned int max, unsigned int *n,
		    enum unw_stop *why);

#endif
