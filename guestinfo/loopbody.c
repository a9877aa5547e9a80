// SPDX-License-Identifier: MIT
// The body of a loop in a function's code (the natural loop of compilers' texts, e.g. Aho,
// Lam, Sethi, Ullman, "Compilers", 9.6.6): the instructions reachable from its head that reach
// a jump back to the head without passing it. Used for the exit-work loop (exitwork.c): the
// compiler puts code that is not the loop's between its head and its last jump back (Debian's
// 6.12: context tracking's user entry, after the last read of the work flags, reached through a
// static key's jump that the image holds as a nop), so [head, loop_end) says too much. Edges
// are what capstone decodes: fall-through (not after jmp, ret, ud2, int3), direct jumps inside
// the function; calls return. A static key's jump, a nop in the image, is no edge: blocks only
// it reaches are not in the body, which errs towards "not the loop" (callers of the exit tail
// decide there).
#define pr_fmt(fmt) "loopbody: " fmt

#include <capstone/capstone.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gi_internal.h"

#define LB_MAX_BYTES 8192 /* as exitwork.c decodes */

struct lb_insn {
	uint64_t addr, target; /* target: a direct jump's, 0 none */
	uint32_t size;
	bool falls;            /* the next instruction follows it */
	uint8_t fwd, rev;      /* reached from the head; reaches a jump back to it */
};

/* Index of the instruction at @addr in @in[0..@n) (ascending), or -1. */
static long lb_find(const struct lb_insn *in, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (in[mid].addr == addr)
			return (long)mid;
		if (in[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Decode [@start, @end) into *@out (malloc'd), *@n instructions; a byte that does not decode is
 * skipped (padding). Return: 0; -EFAULT; -ENOMEM. */
static int lb_decode(gi_kva_read_fn read, void *ctx, uint64_t start, uint64_t end,
		     struct lb_insn **out, size_t *n)
{
	size_t len = (size_t)(end - start), avail = len;
	uint64_t addr = start;
	const uint8_t *p;
	struct lb_insn *in;
	uint8_t *code;
	cs_insn *insn;
	csh cs;
	int err = 0;

	code = malloc(len);
	in = calloc(len, sizeof(*in)); /* at most one instruction per byte */
	if (!code || !in) {
		err = -ENOMEM;
		goto out_free;
	}
	if (read(ctx, start, code, len) != 0) {
		err = -EFAULT;
		goto out_free;
	}
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) {
		err = -ENOMEM;
		goto out_free;
	}
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	if (!insn) {
		err = -ENOMEM;
		goto out_close;
	}
	*n = 0;
	p = code;
	while (avail) {
		struct lb_insn *e;
		bool jump, stop;

		if (!cs_disasm_iter(cs, &p, &avail, &addr, insn)) {
			p++;
			avail--;
			addr++;
			continue;
		}
		/* SAFETY: one entry per decoded instruction, each at least a byte: *n < len */
		e = &in[(*n)++];
		jump = cs_insn_group(cs, insn, X86_GRP_JUMP);
		stop = insn->id == X86_INS_JMP || cs_insn_group(cs, insn, X86_GRP_RET) ||
		       insn->id == X86_INS_UD2 || insn->id == X86_INS_INT3;
		e->addr = insn->address;
		e->size = insn->size;
		e->falls = !stop;
		e->target = jump ? gi_insn_target(insn) : 0;
	}
	cs_free(insn, 1);
out_close:
	cs_close(&cs);
out_free:
	free(code);
	if (err)
		free(in);
	else
		*out = in;
	return err;
}

/* Mark @in[i].fwd for every instruction reached from @head (index) by fall-through and jumps,
 * with @stack (n entries) as the work list. */
static void lb_forward(struct lb_insn *in, size_t n, size_t head, size_t *stack)
{
	size_t top = 0;

	in[head].fwd = 1;
	stack[top++] = head;
	while (top) {
		size_t i = stack[--top], next[2];
		unsigned int k = 0;
		long t;

		if (in[i].falls && i + 1 < n)
			next[k++] = i + 1;
		t = in[i].target ? lb_find(in, n, in[i].target) : -1;
		if (t >= 0)
			next[k++] = (size_t)t;
		for (unsigned int j = 0; j < k; j++)
			if (!in[next[j]].fwd) {
				in[next[j]].fwd = 1;
				/* SAFETY: each instruction is pushed once (fwd set first): top < n */
				stack[top++] = next[j];
			}
	}
}

#define LB_ROUNDS 64 /* a loop's code settles in a few; more leaves the body smaller */

/* Mark @in[i].rev for every instruction reached from the head from which a way back to @head
 * (a jump to it, or falling into it) is reached without passing @head: rounds over the array
 * until nothing changes, at most LB_ROUNDS. */
static void lb_reverse(struct lb_insn *in, size_t n, size_t head)
{
	bool changed = true;

	for (size_t i = 0; i < n; i++)
		in[i].rev = in[i].fwd && (in[i].target == in[head].addr ||
					  (in[i].falls && i + 1 == head));
	in[head].rev = 1;
	for (unsigned int round = 0; changed && round < LB_ROUNDS; round++) {
		changed = false;
		for (size_t i = n; i-- > 0;) {
			long t;

			if (in[i].rev || !in[i].fwd || i == head)
				continue;
			t = in[i].target ? lb_find(in, n, in[i].target) : -1;
			if ((in[i].falls && i + 1 < n && in[i + 1].rev && i + 1 != head) ||
			    (t >= 0 && in[t].rev && (size_t)t != head)) {
				in[i].rev = 1;
				changed = true;
			}
		}
	}
}

int gi_loop_body(gi_kva_read_fn read, void *ctx, uint64_t start, uint64_t end, uint64_t head,
		 uint64_t out[][2], unsigned int max, unsigned int *n_out)
{
	struct lb_insn *in = NULL;
	size_t n = 0, *stack;
	long h;
	int err;

	if (!read || !out || !n_out || start >= end || end - start > LB_MAX_BYTES || head < start ||
	    head >= end || !max)
		return -EINVAL;
	*n_out = 0;
	err = lb_decode(read, ctx, start, end, &in, &n);
	if (err)
		return err;
	h = lb_find(in, n, head);
	if (h < 0) {
		free(in);
		return -ENOENT;
	}
	stack = calloc(n, sizeof(*stack));
	if (!stack) {
		free(in);
		return -ENOMEM;
	}
	lb_forward(in, n, (size_t)h, stack);
	lb_reverse(in, n, (size_t)h);
	free(stack);
	/* the body as ranges of consecutive instructions; past @max, the rest is left out (the
	 * body is then smaller than it is: "not the loop", the side that errs safely) */
	for (size_t i = 0; i < n; i++) {
		if (!(in[i].fwd && in[i].rev))
			continue;
		if (*n_out && out[*n_out - 1][1] == in[i].addr) {
			out[*n_out - 1][1] = in[i].addr + in[i].size;
		} else if (*n_out < max) {
			out[*n_out][0] = in[i].addr;
			out[*n_out][1] = in[i].addr + in[i].size;
			(*n_out)++;
		} else {
			break;
		}
	}
	free(in);
	return 0;
}
