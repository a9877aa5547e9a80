// SPDX-License-Identifier: MIT
// Frame-pointer unwinding of guest kernel and user stacks, every step checked against guest data,
// and the copy of a user stack's top for unwinding elsewhere (from CFI, in the report).
#define pr_fmt(fmt) "unwind: " fmt

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "gi_internal.h"
#include "pgwalk_internal.h"

/* User stacks: frames are looked for within this distance above RSP (the default RLIMIT_STACK). */
#define GI_USER_STACK_SPAN (8ull << 20)

/* A frame record is [fp] = caller's fp, [fp + 8] = return address. */
#define GI_FRAME_SIZE 16

struct gi_stack_range {
	uint64_t lo;
	uint64_t hi; /* exclusive; lo == hi: empty */
};

static bool gi_range_has_frame(const struct gi_stack_range *r, uint64_t fp)
{
	/* SAFETY: fp < hi - 16 + 1 <=> fp + 16 <= hi without overflow (hi >= 16 when non-empty). */
	return r->hi > r->lo && r->hi - r->lo >= GI_FRAME_SIZE && fp >= r->lo &&
	       fp <= r->hi - GI_FRAME_SIZE;
}

static enum hvp_walk_stop gi_fault_stop(int err)
{
	(void)err; /* -EFAULT, -ERANGE, -EINVAL, -ENOTSUP: all mean "could not read the frame" */
	return HVP_WALK_FAULT;
}

/*
 * The caller a frame-pointer walk from kernel RIP @ip would skip (frame-pointer kernels whose
 * prologues gi_open found, prologue.c): @ip in a function's prologue before `mov %rsp,%rbp`, in
 * a function that builds no frame, or at a ret (the frame already torn down) has RBP still
 * pointing at its caller's frame, so the caller itself is found only at RSP (nothing pushed, or
 * at a ret) or RSP + 8 (RBP pushed). RSP is @sp, or when @regs_gva is not 0 the sp of the
 * pt_regs there (read only when needed). A ret of the table is confirmed in the guest (one byte
 * at @ip: the running code may have been patched). The slot must be an aligned kernel GVA in
 * RSP's 16 KiB stack region and below the caller's frame @fp when that is in the same region;
 * the value must be kernel text. Return: true and *@ret; false (nothing to add) otherwise.
 */
static bool gi_skipped_caller(const struct gi *gi, const struct gmem *mem,
			      const struct gi_paging *pg, uint64_t ip, uint64_t sp,
			      uint64_t regs_gva, uint64_t fp, uint64_t *ret)
{
	enum gi_frame_state st;
	uint64_t slide, slot, region;
	uint8_t op;

	/* the table is the image's: only for a running kernel known to be that image */
	if (!gi->prologues || gi_kaslr_state(gi) != GI_SLIDE_KNOWN)
		return false;
	slide = gi_slide(gi);
	if (ip >= gi->entry_text_start + slide && ip < gi->entry_text_end + slide)
		return false; /* entry code: no C frames, RBP may be the user's */
	st = gi_prologue_at(gi->prologues, ip - slide);
	if (st == GI_FRAME_BUILT)
		return false;
	if (st == GI_FRAME_AT_RET &&
	    (gi_read_gva(mem, pg, ip, &op, 1) != 0 || (op != 0xc3 && op != 0xc2)))
		return false;
	if (regs_gva && (gi->layout.pt_regs_sp == UINT32_MAX ||
			 gi_read_u64_at(mem, pg, regs_gva, gi->layout.pt_regs_sp, &sp) != 0))
		return false;
	if (__builtin_add_overflow(sp, st == GI_FRAME_PUSHED ? 8ull : 0ull, &slot) || (slot & 7) ||
	    !gi_is_kernel_gva(pg, slot))
		return false;
	region = sp & ~((uint64_t)GI_THREAD_SIZE - 1);
	if (slot - region > GI_THREAD_SIZE - sizeof(*ret))
		return false; /* the slot leaves RSP's stack */
	if ((fp & ~((uint64_t)GI_THREAD_SIZE - 1)) == region && (fp & ~1ull) <= slot)
		return false; /* the caller's frame must lie above the slot */
	if (gi_read_gva(mem, pg, slot, ret, sizeof(*ret)) != 0 || !gi_in_kernel_text(gi, *ret))
		return false;
	return true;
}

/* Whether return address @ip is in the int3 entry (asm_exc_int3): the pt_regs frame above it
 * is an int3 trap's, whose ip is one past the int3, inside a patched instruction (kprobes,
 * text_poke_bp) rather than at an instruction of the image. */
static bool gi_in_int3_entry(const struct gi *gi, uint64_t ip)
{
	uint64_t slide = gi_slide(gi);

	return gi->int3_entry[1] && ip >= gi->int3_entry[0] + slide &&
	       ip < gi->int3_entry[1] + slide;
}

enum hvp_walk_stop gi_unwind_kernel(const struct gi *gi, const struct gmem *mem,
				    const struct gi_regs *regs, uint64_t task, uint64_t *ips,
				    unsigned int max, unsigned int *n)
{
	const struct gi_layout *l;
	const struct gi_paging *pg;
	struct gi_stack_range task_stack = { 0, 0 }, first_stack = { 0, 0 };
	enum { STK_NONE, STK_FIRST, STK_TASK } prev_stk = STK_NONE;
	uint64_t fp, prev_fp = 0;

	if (n)
		*n = 0;
	if (!gi || !mem || !regs || !ips || !n || max == 0)
		return HVP_WALK_NONE;
	if (gi->orc)
		return gi_unwind_kernel_orc(gi, mem, regs, ips, max, n);
	l = &gi->layout;
	pg = &regs->pg;
	ips[0] = regs->rip;
	*n = 1;
	if (max > 1 && gi_skipped_caller(gi, mem, pg, regs->rip, regs->rsp, 0, regs->rbp, &ips[1]))
		*n = 2;

	/* The task's kernel stack: [task->stack, +THREAD_SIZE), when the task can be read (or
	 * as the caller read it this exit: regs->task_stack, checked as a read one is). */
	if (task && l->task_stack != UINT32_MAX && gi_is_kernel_gva(pg, task)) {
		uint64_t stack_gva, stack_kva = regs->task_stack, end;

		if ((stack_kva ||
		     (!__builtin_add_overflow(task, (uint64_t)l->task_stack, &stack_gva) &&
		      !gi_read_gva(mem, pg, stack_gva, &stack_kva, sizeof(stack_kva)))) &&
		    gi_is_kernel_gva(pg, stack_kva) &&
		    !__builtin_add_overflow(stack_kva, (uint64_t)GI_THREAD_SIZE, &end)) {
			task_stack.lo = stack_kva;
			task_stack.hi = end;
		}
	}
	/* The stack the first frame is on (an IRQ or exception stack): its aligned region. */
	fp = regs->rbp;
	if (gi_is_kernel_gva(pg, fp & ~1ull)) {
		first_stack.lo = (fp & ~1ull) & ~((uint64_t)GI_THREAD_SIZE - 1);
		if (__builtin_add_overflow(first_stack.lo, (uint64_t)GI_THREAD_SIZE, &first_stack.hi))
			first_stack.hi = first_stack.lo;
	}

	for (;;) {
		uint64_t frame[2], next_fp, ret, frame_gva, extra;
		bool regs_frame, trap;
		int stk, err;

		if (fp == 0)
			return HVP_WALK_END;
		/*
		 * Interrupt and exception entries with CONFIG_FRAME_POINTER store a pointer to
		 * their pt_regs with bit 0 set as the frame pointer (ENCODE_FRAME_POINTER): the
		 * interrupted context's ip and bp are in those pt_regs.
		 */
		regs_frame = (fp & 1) && l->pt_regs_ip != UINT32_MAX && l->pt_regs_bp != UINT32_MAX &&
			     l->pt_regs_cs != UINT32_MAX && l->pt_regs_size != UINT32_MAX;
		frame_gva = regs_frame ? fp & ~1ull : fp;
		if (*n == 1 && gi->entry_text_end && !gi_is_kernel_gva(pg, frame_gva) &&
		    regs->rip >= gi->entry_text_start + gi_slide(gi) &&
		    regs->rip < gi->entry_text_end + gi_slide(gi))
			return HVP_WALK_END; /* entry code: RBP is still the user's, no kernel frame */
		if ((frame_gva & 7) || !gi_is_kernel_gva(pg, frame_gva))
			return HVP_WALK_BAD_FP;
		if (gi_range_has_frame(&task_stack, frame_gva))
			stk = STK_TASK;
		else if (gi_range_has_frame(&first_stack, frame_gva))
			stk = STK_FIRST;
		else
			return HVP_WALK_END; /* left the stack: the outermost frame was reached */
		/*
		 * Frames grow toward higher addresses within one stack; the only switch allowed is
		 * from the first (IRQ) stack to the task stack, which the IRQ entry came from.
		 */
		if (stk == (int)prev_stk && frame_gva <= prev_fp)
			return HVP_WALK_BAD_FP;
		if (prev_stk == STK_TASK && stk == STK_FIRST)
			return HVP_WALK_BAD_FP;

		if (regs_frame) {
			uint64_t cs, v;

			if (__builtin_add_overflow(frame_gva, (uint64_t)l->pt_regs_size, &v))
				return HVP_WALK_BAD_FP;
			err = gi_read_gva(mem, pg, frame_gva + l->pt_regs_cs, &cs, sizeof(cs));
			if (!err)
				err = gi_read_gva(mem, pg, frame_gva + l->pt_regs_ip, &ret,
						  sizeof(ret));
			if (!err)
				err = gi_read_gva(mem, pg, frame_gva + l->pt_regs_bp, &next_fp,
						  sizeof(next_fp));
			if (err)
				return gi_fault_stop(err);
			if (cs & 3)
				return HVP_WALK_END; /* the user registers at kernel entry */
		} else {
			err = gi_read_gva(mem, pg, frame_gva, frame, sizeof(frame));
			if (err)
				return gi_fault_stop(err);
			next_fp = frame[0];
			ret = frame[1];
		}
		if (ret == 0)
			return HVP_WALK_END;
		if (!gi_in_kernel_text(gi, ret))
			return HVP_WALK_BAD_FP;
		if (*n >= max)
			return HVP_WALK_DEPTH;
		trap = regs_frame && gi_in_int3_entry(gi, ips[*n - 1]);
		/* SAFETY: *n < max, the caller's capacity of @ips. */
		ips[(*n)++] = ret;
		/* the interrupted code's own caller, when it was in a prologue or at a ret */
		if (regs_frame && !trap &&
		    gi_skipped_caller(gi, mem, pg, ret, 0, frame_gva, next_fp, &extra)) {
			if (*n >= max)
				return HVP_WALK_DEPTH;
			ips[(*n)++] = extra;
		}
		prev_fp = frame_gva;
		prev_stk = stk;
		fp = next_fp;
	}
}

/*
 * A return address must point into a mapped page that may be executed: NX (bit 63, honoured
 * when EFER.NXE) clear at every level (SDM vol. 3A, 4.6). Stack garbage mostly fails this.
 * @xc: pages found so before in this address space (struct gi_exec_cache), or NULL.
 */
static bool is_executable(const struct gmem *mem, const struct gi_paging *pg, uint64_t va,
			  struct gi_exec_cache *xc)
{
	uint64_t gpa, page = va & ~0xfffull;
	/* SAFETY: the slot index is reduced modulo GI_EXEC_CACHE_SLOTS */
	uint64_t *slot = xc ? &xc->page[(page >> 12) % GI_EXEC_CACHE_SLOTS] : NULL;
	uint8_t access;

	if (slot && *slot == (page | 1)) {
		xc->hits++;
		return true;
	}
	/* through the sample's translation cache: return addresses share a few text pages */
	if (gi_gva_to_gpa_access(mem, pg, va, &gpa, NULL, &access) != 0)
		return false;
	if (slot)
		xc->misses++;
	if (access & PGWALK_ACC_NX)
		return false;
	if (slot)
		*slot = page | 1;
	return true;
}

struct gi_exec_cache *gi_exec_cache_use(struct gi_exec_cache *xc, uint64_t mm, uint64_t root,
					int32_t map_count)
{
	if (!xc || !mm || map_count < 0)
		return NULL;
	if (xc->mm != mm || xc->root != root || xc->map_count != map_count) {
		memset(xc->page, 0, sizeof(xc->page));
		xc->mm = mm;
		xc->root = root;
		xc->map_count = map_count;
	}
	return xc;
}

/* The frame at @fp from the stack @copy holds when all its bytes are there (false: read it
 * from the guest). */
static bool frame_from_copy(const struct hvp_user_regs *copy, uint64_t fp, uint64_t frame[2])
{
	uint64_t sp;

	if (!copy)
		return false;
	sp = copy->regs[HVP_REG_RSP];
	/* SAFETY: hvp_user_regs_stack_copy copies within the buffer or each piece, and says how
	 * many bytes it had: a short copy falls back to the guest */
	return fp >= sp && fp - sp < copy->stack_len &&
	       hvp_user_regs_stack_copy(copy, (size_t)(fp - sp), frame, 2 * sizeof(uint64_t)) ==
		       2 * sizeof(uint64_t);
}

enum hvp_walk_stop gi_unwind_user(const struct gmem *mem, const struct gi_paging *pg, uint64_t rip,
				  uint64_t rsp, uint64_t rbp, uint64_t *ips, unsigned int max,
				  unsigned int *n)
{
	return gi_unwind_user_cached(mem, pg, rip, rsp, rbp, NULL, NULL, ips, max, n);
}

enum hvp_walk_stop gi_unwind_user_copy(const struct gmem *mem, const struct gi_paging *pg,
				       uint64_t rip, uint64_t rsp, uint64_t rbp,
				       const struct hvp_user_regs *copy, uint64_t *ips,
				       unsigned int max, unsigned int *n)
{
	return gi_unwind_user_cached(mem, pg, rip, rsp, rbp, copy, NULL, ips, max, n);
}

enum hvp_walk_stop gi_unwind_user_cached(const struct gmem *mem, const struct gi_paging *pg,
					 uint64_t rip, uint64_t rsp, uint64_t rbp,
					 const struct hvp_user_regs *copy, struct gi_exec_cache *xc,
					 uint64_t *ips, unsigned int max, unsigned int *n)
{
	uint64_t fp = rbp, prev_fp = 0, stack_hi;

	if (n)
		*n = 0;
	if (!mem || !pg || !ips || !n || max == 0)
		return HVP_WALK_NONE;
	ips[0] = rip;
	*n = 1;
	if (__builtin_add_overflow(rsp, GI_USER_STACK_SPAN, &stack_hi))
		stack_hi = UINT64_MAX;

	for (;;) {
		uint64_t frame[2];
		int err;

		if (fp == 0)
			return HVP_WALK_END;
		if ((fp & 7) || !gi_is_user_gva(pg, fp))
			return HVP_WALK_BAD_FP;
		if (prev_fp && fp <= prev_fp)
			return HVP_WALK_BAD_FP;
		/* Frames live at or above RSP and within the stack span above it. */
		if (fp < rsp || fp >= stack_hi - GI_FRAME_SIZE)
			return HVP_WALK_END;
		err = frame_from_copy(copy, fp, frame) ? 0
							: gi_read_gva(mem, pg, fp, frame, sizeof(frame));
		if (err)
			return gi_fault_stop(err);
		if (frame[1] == 0)
			return HVP_WALK_END;
		if (*n >= max)
			return HVP_WALK_DEPTH;
		if (!gi_is_user_gva(pg, frame[1]) || !is_executable(mem, pg, frame[1], xc))
			return HVP_WALK_BAD_FP;
		/* SAFETY: *n < max, the caller's capacity of @ips. */
		ips[(*n)++] = frame[1];
		prev_fp = fp;
		fp = frame[0];
	}
}

/* The page at @gva is present and user-accessible: U/S set at every level (SDM vol. 3A, 4.6). */
static int user_page(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva,
		     uint64_t *gpa, uint64_t *page_size)
{
	uint8_t access;
	int err;

	err = gi_gva_to_gpa_access(mem, pg, gva, gpa, page_size, &access);
	if (err)
		return err;
	return access & PGWALK_ACC_USER ? 0 : -EFAULT;
}

/*
 * The piece of a user stack at @gva with @left bytes still wanted: its GPA and bytes (to the end
 * of its page, at most @left). False where the stack ends: past the user half (or wrapped), not
 * present, not user-accessible (gi_copy_user_stack).
 */
static bool stack_piece(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva,
			uint32_t left, uint64_t *gpa, uint32_t *chunk)
{
	uint64_t page_size, c;

	if (!gi_is_user_gva(pg, gva) || user_page(mem, pg, gva, gpa, &page_size) != 0)
		return false;
	c = page_size - (gva & (page_size - 1));
	*chunk = c < left ? (uint32_t)c : left;
	return true;
}

int gi_copy_user_stack(const struct gmem *mem, const struct gi_paging *pg, uint64_t rsp, void *dst,
		       uint32_t size, uint32_t *len)
{
	uint8_t *out = dst;
	uint64_t gva = rsp, gpa;
	uint32_t left = size, chunk;

	if (len)
		*len = 0;
	if (!mem || !mem->read || !pg || !len || (!dst && size))
		return -EINVAL;
	if ((rsp & 7) || !gi_is_user_gva(pg, rsp))
		return -EINVAL;
	/* SAFETY: chunk <= bytes left in this page and <= left, so @dst stays in bounds;
	 * gmem_read checks [gpa, gpa + chunk) is guest RAM. */
	while (left && stack_piece(mem, pg, gva, left, &gpa, &chunk) &&
	       gmem_read(mem, gpa, out, chunk) == 0) {
		out += chunk;
		left -= chunk;
		gva += chunk; /* < 2^57 + 2^32: no wrap */
	}
	*len = size - left;
	return 0;
}

int gi_map_user_stack(const struct gmem *mem, const struct gi_paging *pg, uint64_t rsp,
		      uint32_t size, struct hvp_bytes *segs, unsigned int max_segs,
		      unsigned int *n_segs, uint32_t *len)
{
	uint64_t gva = rsp, gpa;
	uint32_t left = size, chunk;
	unsigned int n = 0;

	if (len)
		*len = 0;
	if (n_segs)
		*n_segs = 0;
	if (!mem || !mem->read || !pg || !len || !n_segs || (!segs && max_segs))
		return -EINVAL;
	if (!mem->map)
		return -ENOTSUP;
	if ((rsp & 7) || !gi_is_user_gva(pg, rsp))
		return -EINVAL;
	while (left && stack_piece(mem, pg, gva, left, &gpa, &chunk)) {
		/* SAFETY: gmem_map returns NULL unless all of [gpa, gpa + chunk) is guest RAM. */
		const uint8_t *p = gmem_map(mem, gpa, chunk);

		if (!p)
			break;
		if (n && (uintptr_t)segs[n - 1].p + segs[n - 1].len == (uintptr_t)p) {
			segs[n - 1].len += chunk; /* the next page is the next in the host too */
		} else if (n < max_segs) {
			segs[n++] = (struct hvp_bytes){ .p = p, .len = chunk };
		} else {
			break; /* more pieces than asked for: the stack is cut here */
		}
		left -= chunk;
		gva += chunk; /* < 2^57 + 2^32: no wrap */
	}
	*n_segs = n;
	*len = size - left;
	return 0;
}
