// SPDX-License-Identifier: MIT
// execve's point of no return (fs/exec.c): begin_new_exec's exec_mmap, inlined in 6.1, makes the
// new mm the task's (`tsk->mm = mm`, then activate_mm -> switch_mm). From there until the
// loader's start_thread, pt_regs still holds the old program's registers while the task's mm
// and page tables are the new program's: a walk of them reads the new address space with the
// old registers, a wrong chain. A sampler that has not seen the task before cannot tell the mm
// changed (it has no old mm to compare with), but the sample's kernel chain tells: a frame in
// begin_new_exec at or after its call of switch_mm (or after its call of exec_mmap, when that is
// a function, and in exec_mmap from its switch_mm on), or in a binary loader after its call of
// begin_new_exec and up to its call of start_thread, which writes the new program's registers
// into pt_regs (load_elf_binary and its kin). The call sites are found with capstone in the
// image at open (gi_call_site). A sample in such code after begin_new_exec failed (the old
// program lives on) is counted past too: its user part is lost, never wrong.
#define pr_fmt(fmt) "gi: execpoint: " fmt
#include <errno.h>
#include <string.h>

#include <hvprof/compiler.h>
#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "gi_internal.h"

/* The first call of x86's switch_mm (activate_mm) or switch_mm_irqs_off in @func: 0 and *@at,
 * *@end; -ENOENT none. */
static int switch_call(struct gi *gi, gi_kva_read_fn read, void *ctx, const char *func,
		       uint64_t *at, uint64_t *end)
{
	static const char *const callees[] = { "switch_mm", "switch_mm_irqs_off" };
	uint64_t after;

	for (size_t i = 0; i < ARRAY_SIZE(callees); i++)
		if (gi_call_site(gi->st, read, ctx, func, callees[i], at, &after, end) == 0)
			return 0;
	return -ENOENT;
}

void gi_find_exec_points(struct gi *gi, gi_kva_read_fn read, void *ctx)
{
	/* the binary loaders that call begin_new_exec (fs/binfmt_*.c) */
	static const char *const loaders[] = { "load_elf_binary", "compat_load_elf_binary",
					       "load_elf_fdpic_binary", "load_flat_binary" };
	uint64_t at, after, end, a;

	memset(&gi->exec_past, 0, sizeof(gi->exec_past));
	if (symtab_find(gi->st, "exec_mmap", &a) == 0) {
		/* not inlined: begin_new_exec after exec_mmap returned, exec_mmap from the switch */
		if (gi_call_site(gi->st, read, ctx, "begin_new_exec", "exec_mmap", &at, &after,
				 &end) == 0)
			gi_ranges_add(&gi->exec_past, after, end);
		if (switch_call(gi, read, ctx, "exec_mmap", &at, &end) == 0)
			gi_ranges_add(&gi->exec_past, at, end);
	} else if (switch_call(gi, read, ctx, "begin_new_exec", &at, &end) == 0) {
		/* the call itself included: inside switch_mm, tsk->mm is already the new mm */
		gi_ranges_add(&gi->exec_past, at, end);
	}
	if (!gi->exec_past.n)
		return; /* without the switch, a loader's frame alone would say too much */
	for (size_t i = 0; i < ARRAY_SIZE(loaders); i++) {
		uint64_t st_at, st_after, st_end;

		if (gi_call_site(gi->st, read, ctx, loaders[i], "begin_new_exec", &at, &after,
				 &end) != 0)
			continue;
		/* begin_new_exec returned; until start_thread (compat_start_thread in the compat
		 * loader) has written the new program's registers into pt_regs (inside it: not
		 * yet). Without it, to the loader's end: lost rather than wrong. */
		if ((gi_call_site(gi->st, read, ctx, loaders[i], "start_thread", &st_at, &st_after,
				  &st_end) == 0 ||
		     gi_call_site(gi->st, read, ctx, loaders[i], "compat_start_thread", &st_at,
				  &st_after, &st_end) == 0) &&
		    st_after > after)
			end = st_after;
		gi_ranges_add(&gi->exec_past, after, end);
	}
	if (gi->exec_past.n)
		pr_debug(LOG_KSYM, "%u ranges past execve's point of no return", gi->exec_past.n);
}

bool gi_chain_past_exec_switch(const struct gi *gi, uint64_t rip, const uint64_t *callers,
			       unsigned int n)
{
	uint64_t slide;

	if (!gi || !gi->exec_past.n || gi_running_slide(gi, &slide) != 0)
		return false;
	if (gi_ranges_has(&gi->exec_past, rip - slide))
		return true;
	for (unsigned int i = 0; i < n; i++)
		/* a return address - 1 is inside its call instruction (the caller's line) */
		if (callers[i] && gi_ranges_has(&gi->exec_past, callers[i] - 1 - slide))
			return true;
	return false;
}
