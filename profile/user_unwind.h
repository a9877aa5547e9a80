/* SPDX-License-Identifier: MIT */
/*
 * Private to profile/: what the loader does with a USER_REGS record (docs/recording-format.md)
 * — the registers and stack copy of one user walk — given the address space of the process at
 * that point: a DWARF unwind (--call-graph dwarf) that replaces the recorded frame-pointer
 * chain, or, with the small window of --call-graph fp, the mended leaf of that chain.
 */
#ifndef HVPROF_PROFILE_USER_UNWIND_H
#define HVPROF_PROFILE_USER_UNWIND_H

#include <stdint.h>

#include <hvprof/sample.h>

#include "addrspace.h"
#include "unwind_dwarf.h"

/*
 * Counts of the user unwinds done while loading (reported by `report`).
 * @dwarf: chains unwound from CFI; @dwarf_stop: why each ended (enum unw_stop);
 * @dwarf_fp_agree: of those, chains equal to the frame-pointer walk recorded beside them (the
 * cross-check); @fp_extended: chains where CFI stopped early but the frame-pointer walk agreed
 * on every frame CFI found and went further, so its frames were kept.
 * @leaf_checked: frame-pointer chains whose leaf was checked against its CFI (fp window);
 * @leaf_fixed: ... that lacked the leaf's direct caller (a frameless leaf), now inserted;
 * @leaf_unchecked: ... whose leaf had no CFI or whose window was too short.
 * @eager_compared/@eager_equal: --callchain-mode both: deferred CFI chains compared with the
 * chain of the eager copy taken at the sample (same cookie), and how many were equal;
 * @eager_no_stack: pairs not compared because one copy holds no stack (the eager one taken in
 * a fault on the stack page itself; a deferred walk saved at exit or execve).
 * @sessions: libdw sessions opened (one per distinct set of mapped files).
 * @no_space: USER_REGS of a process with no address space known (chain left as recorded).
 */
struct user_unwind_stats {
	uint64_t dwarf;
	uint64_t dwarf_stop[UNW_STOP_COUNT];
	uint64_t dwarf_fp_agree;
	uint64_t fp_extended;
	uint64_t leaf_checked, leaf_fixed, leaf_unchecked;
	uint64_t no_space;
	uint64_t eager_compared, eager_equal, eager_no_stack;
	uint64_t sessions;
};

struct user_unwind;
struct symbolizer;

/* A new context over @s (borrowed: it finds the files). Return: 0 and *@out; -ENOMEM. */
int user_unwind_new(struct symbolizer *s, struct user_unwind **out) __must_check;
/* Free @uu and its unwinder sessions (NULL: no-op). */
void user_unwind_free(struct user_unwind *uu);
/* The counts so far. */
const struct user_unwind_stats *user_unwind_stats(const struct user_unwind *uu);

/*
 * user_unwind_apply - the user chain of one walk: @ips and @n hold the recorded frame-pointer
 * chain (innermost first, at most HVP_MAX_CALLCHAIN) and are replaced by the chain to show;
 * @stop (enum hvp_walk_stop) is updated when the chain changes (DEPTH when the CFI unwind hit
 * the bound). @as: the process's address space at the walk (NULL: left as recorded, counted).
 * A USER_REGS with more stack than the fp window is a DWARF walk; one with the window only
 * mends the leaf.
 * Return: 0; -ENOMEM.
 */
int user_unwind_apply(struct user_unwind *uu, const struct addrspace *as,
		      const struct hvp_user_regs *ur, uint64_t *ips, uint16_t *n, uint8_t *stop)
	__must_check;

/*
 * user_unwind_eager - --callchain-mode both: unwind the eager copy @ur (USER_REGS after a
 * deferred SAMPLE) and remember its chain by cookie, for the deferred chain to be compared
 * with (stats eager_compared/eager_equal). @ips/@n: the eager frame-pointer chain.
 * Return: 0; -ENOMEM.
 */
int user_unwind_eager(struct user_unwind *uu, const struct addrspace *as,
		      const struct hvp_user_regs *ur, const uint64_t *ips, uint16_t n)
	__must_check;

#endif
