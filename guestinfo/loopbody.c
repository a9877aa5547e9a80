// SPDX-License-Identifier: MIT
// The body of a loop in a function's code, for the exit-work loop (exitwork.c): the
// instructions from which the thread must read its work flags again before it leaves. The
// compiler puts code that is not the loop's between its head and its last jump back (Debian's
// 6.12: context tracking's user entry, after the last read, reached through a static key's jump
// that the image holds as a nop), so [head, loop_end) says too much. Found in three passes over
// the edges capstone decodes (fall-through to the adjacent instruction, not after jmp, ret,
// iret, ud2, int3; direct jumps inside the function; calls return):
//   - forward from the head;
//   - backward from the jumps back to the head, not through it (the natural loop of compilers'
//     texts, e.g. Aho, Lam, Sethi, Ullman, "Compilers", 9.6.6);
//   - backward from the ways out of the function (a return, a jump out of it, an indirect one,
//     falling off its end, a static key's nop, which may jump anywhere), not through an irq
//     disable (the loop's bottom: cli, then the read): what reaches a way out without one may
//     leave without reading the flags again, so it is not the body.
// The third pass is what makes it safe: it must see every way the code can go at run time, so
// edges are added where in doubt (a call returns, ud2 resumes after itself as WARN() does), and
// a static key's site, which may be a jump or fall through at run time whatever the image
// holds, gets both edges from the kernel's __jump_table (include/linux/jump_label.h, struct
// jump_entry: code and target relative to the entry's fields); a site inside an instruction
// means the decode is not the kernel's, and no body is given.
#define pr_fmt(fmt) "loopbody: " fmt

#include <capstone/capstone.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gi_internal.h"

#define LB_MAX_BYTES 8192 /* as exitwork.c decodes */

struct lb_insn {
	uint64_t addr;
	uint32_t size;
	int32_t next[2]; /* successors' indexes (fall-through, jump target), -1 none */
	bool out;        /* a way out of the function (or maybe one) */
	bool irq_off;    /* cli, or a call of pv_ops.irq.irq_disable */
	bool fwd, rev, leaves;
};

/* Index of the instruction at @addr in @in[0..@n) (ascending), or -1. */
static int32_t lb_find(const struct lb_insn *in, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (in[mid].addr == addr)
			return (int32_t)mid;
		if (in[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Is @insn `call *disp(%rip)` through the pv_ops slot @slot (0: none)? */
static bool lb_calls_slot(const cs_insn *insn, uint64_t slot)
{
	const cs_x86 *x = &insn->detail->x86;

	return slot && insn->id == X86_INS_CALL && x->op_count == 1 &&
	       x->operands[0].type == X86_OP_MEM && x->operands[0].mem.base == X86_REG_RIP &&
	       x->operands[0].mem.index == X86_REG_INVALID &&
	       insn->address + insn->size + (uint64_t)x->operands[0].mem.disp == slot;
}

/* Decode [@start, @end) into @in (one entry per byte at most), *@n instructions, a byte that
 * does not decode skipped (padding); then the edges. Return: 0; -EFAULT; -ENOMEM. */
static int lb_decode(gi_kva_read_fn read, void *ctx, uint64_t start, uint64_t end,
		     uint64_t irq_disable, struct lb_insn *in, size_t *n)
{
	size_t len = (size_t)(end - start), avail = len;
	uint64_t addr = start, *target;
	const uint8_t *p;
	uint8_t *code;
	cs_insn *insn;
	csh cs;
	int err = 0;

	code = malloc(len);
	target = calloc(len, sizeof(*target));
	if (!code || !target) {
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
		e = &in[*n];
		jump = cs_insn_group(cs, insn, X86_GRP_JUMP);
		/* ud2 (WARN) and ud1 (UBSAN's trap) may resume after themselves: no stop */
		stop = insn->id == X86_INS_JMP || insn->id == X86_INS_LJMP ||
		       cs_insn_group(cs, insn, X86_GRP_RET) || cs_insn_group(cs, insn, X86_GRP_IRET) ||
		       insn->id == X86_INS_INT3;
		e->addr = insn->address;
		e->size = insn->size;
		e->next[0] = stop ? -2 : -1; /* -1: falls through, resolved below */
		e->out = cs_insn_group(cs, insn, X86_GRP_RET) || cs_insn_group(cs, insn, X86_GRP_IRET) ||
			 insn->id == X86_INS_LJMP;
		e->irq_off = insn->id == X86_INS_CLI || lb_calls_slot(insn, irq_disable);
		target[*n] = jump ? gi_insn_target(insn) : 0;
		if (jump && !target[*n])
			e->out = true; /* an indirect jump */
		(*n)++;
	}
	for (size_t i = 0; i < *n; i++) {
		struct lb_insn *e = &in[i];
		int32_t t;

		if (e->next[0] == -1 && i + 1 < *n && in[i + 1].addr == e->addr + e->size)
			e->next[0] = (int32_t)(i + 1);
		else if (e->next[0] == -1)
			e->out = true; /* falls off the end, or into bytes that do not decode */
		if (e->next[0] < 0)
			e->next[0] = -1;
		t = target[i] ? lb_find(in, *n, target[i]) : -1;
		if (target[i] && t < 0)
			e->out = true; /* out of the function, or into an instruction */
		e->next[1] = t;
	}
	cs_free(insn, 1);
out_close:
	cs_close(&cs);
out_free:
	free(target);
	free(code);
	return err;
}

/* Predecessor lists of @in[0..@n) (compressed: @first[i]..@first[i + 1] in @pred). */
static int lb_preds(const struct lb_insn *in, size_t n, int32_t **first, int32_t **pred)
{
	int32_t *f = calloc(n + 1, sizeof(*f)), *p = calloc(2 * n + 1, sizeof(*p)), *fill;

	if (!f || !p) {
		free(f);
		free(p);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < 2; k++)
			if (in[i].next[k] >= 0)
				f[in[i].next[k] + 1]++;
	for (size_t i = 0; i < n; i++)
		f[i + 1] += f[i];
	fill = calloc(n + 1, sizeof(*fill));
	if (!fill) {
		free(f);
		free(p);
		return -ENOMEM;
	}
	memcpy(fill, f, n * sizeof(*fill));
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < 2; k++)
			if (in[i].next[k] >= 0)
				/* SAFETY: at most 2n edges, fill[j] < f[j + 1] <= 2n */
				p[fill[in[i].next[k]]++] = (int32_t)i;
	free(fill);
	*first = f;
	*pred = p;
	return 0;
}

enum lb_pass { LB_REV, LB_LEAVES };

/*
 * Backward from the seeds already marked in @in (each in @stack, @top of them): LB_REV marks
 * the instructions reached from the head (fwd) that reach a seed not through @head; LB_LEAVES
 * those that reach one not through an irq disable. Exact (a work list, each pushed once).
 */
static void lb_backward(struct lb_insn *in, const int32_t *first, const int32_t *pred,
			int32_t *stack, size_t top, size_t head, enum lb_pass pass)
{
	while (top) {
		size_t j = (size_t)stack[--top];

		if (pass == LB_REV && j == head)
			continue;
		for (int32_t k = first[j]; k < first[j + 1]; k++) {
			struct lb_insn *e = &in[pred[k]];
			bool *mark = pass == LB_REV ? &e->rev : &e->leaves;

			if (*mark || (pass == LB_REV ? !e->fwd : e->irq_off))
				continue;
			*mark = true;
			/* SAFETY: each instruction is pushed once (marked first): top < n */
			stack[top++] = pred[k];
		}
	}
}

#define LB_JUMP_TABLE_MAX (16u << 20) /* bytes of __jump_table read at most (6.12: 145 KiB) */

int gi_jump_labels(const struct symtab *st, gi_kva_read_fn read, void *ctx, uint64_t lo,
		   uint64_t hi, struct gi_jump_label *out, size_t max, size_t *n)
{
	uint8_t buf[4096];
	uint64_t a, b;

	if (!st || !read || !n || (max && !out) || hi <= lo)
		return -EINVAL;
	*n = 0;
	if (symtab_find(st, "__start___jump_table", &a) != 0 ||
	    symtab_find(st, "__stop___jump_table", &b) != 0)
		return -ENOENT;
	if (b < a || b - a > LB_JUMP_TABLE_MAX || (b - a) % 16)
		return -EBADMSG;
	for (uint64_t at = a; at < b; at += sizeof(buf)) {
		size_t len = b - at < sizeof(buf) ? (size_t)(b - at) : sizeof(buf);

		if (read(ctx, at, buf, len) != 0)
			return -EFAULT;
		for (size_t o = 0; o + 16 <= len; o += 16) {
			int32_t code, target;
			uint64_t kva = at + o, c, t;

			memcpy(&code, buf + o, 4);
			memcpy(&target, buf + o + 4, 4);
			c = kva + (uint64_t)(int64_t)code;
			t = kva + 4 + (uint64_t)(int64_t)target;
			if (c < lo || c >= hi)
				continue;
			if (*n >= max)
				return -E2BIG;
			out[*n].code = c;
			out[*n].target = t;
			(*n)++;
		}
	}
	return 0;
}

/* The static keys' sites @labels[0..@n_labels) in @in: each may jump to its target (a way out
 * when that is not an instruction of the function) or fall through, whatever the image holds.
 * Return: 0; -EBADMSG a site inside the function but not on an instruction (the decode is out
 * of step with the kernel's). */
static int lb_jump_labels(struct lb_insn *in, size_t n, uint64_t start, uint64_t end,
			  const struct gi_jump_label *labels, size_t n_labels)
{
	for (size_t k = 0; k < n_labels; k++) {
		int32_t i = lb_find(in, n, labels[k].code), t = lb_find(in, n, labels[k].target);
		struct lb_insn *e;

		if (i < 0) {
			if (labels[k].code >= start && labels[k].code < end)
				return -EBADMSG;
			continue;
		}
		e = &in[i];
		if ((size_t)i + 1 < n && in[i + 1].addr == e->addr + e->size)
			e->next[0] = i + 1;
		else
			e->out = true;
		if (t < 0)
			e->out = true;
		else
			e->next[1] = t;
	}
	return 0;
}

int gi_loop_body(gi_kva_read_fn read, void *ctx, uint64_t start, uint64_t end, uint64_t head,
		 uint64_t irq_disable, const struct gi_jump_label *labels, size_t n_labels,
		 uint64_t out[][2], unsigned int max, unsigned int *n_out)
{
	struct lb_insn *in;
	int32_t *stack = NULL, *first = NULL, *pred = NULL, h;
	size_t n = 0, top = 0;
	int err;

	if (!read || !out || !n_out || start >= end || end - start > LB_MAX_BYTES || head < start ||
	    head >= end || !max || (n_labels && !labels))
		return -EINVAL;
	*n_out = 0;
	in = calloc((size_t)(end - start), sizeof(*in));
	if (!in)
		return -ENOMEM;
	err = lb_decode(read, ctx, start, end, irq_disable, in, &n);
	err = err ?: lb_jump_labels(in, n, start, end, labels, n_labels);
	h = err ? -1 : lb_find(in, n, head);
	if (!err && h < 0)
		err = -ENOENT;
	if (!err) {
		stack = calloc(n, sizeof(*stack));
		err = stack ? lb_preds(in, n, &first, &pred) : -ENOMEM;
	}
	if (err)
		goto out;
	/* forward from the head */
	in[h].fwd = true;
	stack[top++] = h;
	while (top) {
		const struct lb_insn *e = &in[stack[--top]];

		for (int k = 0; k < 2; k++)
			if (e->next[k] >= 0 && !in[e->next[k]].fwd) {
				in[e->next[k]].fwd = true;
				/* SAFETY: each pushed once (fwd set first): top < n */
				stack[top++] = e->next[k];
			}
	}
	/* back to the head: from each way back (a jump to it, or falling into it) */
	for (size_t i = 0; i < n; i++)
		if (in[i].fwd && (in[i].next[0] == h || in[i].next[1] == h) && !in[i].rev) {
			in[i].rev = true;
			stack[top++] = (int32_t)i;
		}
	in[h].rev = true;
	lb_backward(in, first, pred, stack, top, (size_t)h, LB_REV);
	/* out of the function with no irq disable on the way */
	top = 0;
	for (size_t i = 0; i < n; i++)
		if (in[i].out) {
			in[i].leaves = true;
			stack[top++] = (int32_t)i;
		}
	lb_backward(in, first, pred, stack, top, (size_t)h, LB_LEAVES);
	/* the body as ranges of consecutive instructions; past @max, the rest is left out (the
	 * body is then smaller than it is: "not the loop", the side that errs safely) */
	for (size_t i = 0; i < n; i++) {
		if (!(in[i].fwd && in[i].rev && !in[i].leaves))
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
out:
	free(pred);
	free(first);
	free(stack);
	free(in);
	return err;
}
