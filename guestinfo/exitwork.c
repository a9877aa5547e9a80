// SPDX-License-Identifier: MIT
// The exit-work loop of the generic entry code (kernel/entry/common.c, 5.8+; 6.1:
// exit_to_user_mode_loop, inlined into exit_to_user_mode_prepare): the slow path a thread takes
// on its way back to user mode only when one of its thread-info work flags is set. hvprof's
// guest-visible marks set TIF_NOTIFY_RESUME on the marked thread and trap the instruction of
// the loop that clears TIF_NOTIFY_RESUME (resume_user_mode_work's first
// statement, inlined): only threads with the flag reach it, and pt_regs still holds the user
// registers of the kernel entry there. Found here with capstone in the kernel image: the last
// backward jump of the function whose target is `sti` (local_irq_enable_exit_to_user, the loop's
// first statement; in a CONFIG_PARAVIRT_XXL image, Debian's, a call of pv_ops.irq.irq_enable,
// which the kernel patches into sti at boot) is the loop; inside it, the clear of bit 1 (`lock
// and byte [task], 0xfd`, or btr 1), with its operand decoded so a VMM can complete the
// instruction itself.
#define pr_fmt(fmt) "exitwork: " fmt

#include <capstone/capstone.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>
#include <hvprof/kimage.h>
#include <hvprof/log.h>

#include "gi_internal.h"

#define EW_MAX_BYTES 8192 /* bytes of the function decoded at most (begin_new_exec: ~2 KiB) */
#define EW_TIF_NOTIFY_RESUME 1 /* arch/x86/include/asm/thread_info.h */

/* The function that holds the loop, and where the next symbol starts (its end). */
static int ew_function(const struct symtab *st, uint64_t *start, const char **fname)
{
	static const char *const names[] = { "exit_to_user_mode_loop",
					     "exit_to_user_mode_prepare" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (symtab_find(st, names[i], start) == 0) {
			*fname = names[i];
			return 0;
		}
	return -ENOENT;
}

/* The x86 encoding number of a 64-bit GPR, + 1 (0: not one). */
static int ew_gpr(x86_reg r)
{
	static const x86_reg gprs[16] = { X86_REG_RAX, X86_REG_RCX, X86_REG_RDX, X86_REG_RBX,
					  X86_REG_RSP, X86_REG_RBP, X86_REG_RSI, X86_REG_RDI,
					  X86_REG_R8,  X86_REG_R9,  X86_REG_R10, X86_REG_R11,
					  X86_REG_R12, X86_REG_R13, X86_REG_R14, X86_REG_R15 };

	for (int i = 0; i < 16; i++)
		if (gprs[i] == r)
			return i + 1;
	return 0;
}

/* Does @insn clear bit EW_TIF_NOTIFY_RESUME of a memory operand? */
static bool ew_clears_notify(const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;
	int64_t imm;

	if (x->op_count != 2 || x->operands[0].type != X86_OP_MEM ||
	    x->operands[1].type != X86_OP_IMM)
		return false;
	imm = x->operands[1].imm;
	if (insn->id == X86_INS_AND)
		return (imm & (1 << EW_TIF_NOTIFY_RESUME)) == 0 &&
		       ((imm & 0xff) | (1 << EW_TIF_NOTIFY_RESUME)) == 0xff;
	if (insn->id == X86_INS_BTR)
		return imm == EW_TIF_NOTIFY_RESUME;
	return false;
}

/* One function's code, decoded (ew_walk). */
struct ew_fn {
	uint8_t code[EW_MAX_BYTES];
	uint64_t start, end; /* [start, end): up to the next symbol */
	csh cs;
	struct gi_pv_irq pv; /* zeros: not a paravirt kernel, or not known */
};

/*
 * Does the instruction at @at (decoded already: inside [f->start, f->end)) enable (@native
 * 0xfb, sti) or disable (0xfa, cli) interrupts: that byte, or a `call *(%rip + disp32)`
 * (ff 15) through @slot of pv_ops (not 0)?
 */
static bool ew_irq_insn(const struct ew_fn *f, uint64_t at, uint8_t native, uint64_t slot)
{
	size_t o = (size_t)(at - f->start);
	int32_t disp;

	if (f->code[o] == native)
		return true;
	/* SAFETY: o + 6 <= f->end - f->start <= sizeof(f->code) */
	if (!slot || o + 6 > f->end - f->start || f->code[o] != 0xff || f->code[o + 1] != 0x15)
		return false;
	memcpy(&disp, f->code + o + 2, sizeof(disp));
	return at + 6 + (uint64_t)(int64_t)disp == slot;
}

/*
 * Decode function @fname at @start up to the next symbol (at most EW_MAX_BYTES), calling
 * @visit for each instruction. Return: 0; -EFAULT unreadable; -ENOMEM.
 */
static int ew_walk(const struct symtab *st, gi_kva_read_fn read, void *ctx, const char *fname,
		   uint64_t start, struct ew_fn *f,
		   void (*visit)(struct ew_fn *f, const cs_insn *insn, void *arg), void *arg)
{
	size_t avail = sizeof(f->code);
	const uint8_t *p = f->code;
	uint64_t addr = start, off;
	const char *name;
	cs_insn *insn;

	while (avail >= 64 && read(ctx, start, f->code, avail) != 0)
		avail /= 2;
	if (avail < 64)
		return -EFAULT;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &f->cs) != CS_ERR_OK)
		return -ENOMEM;
	cs_option(f->cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(f->cs);
	if (!insn) {
		cs_close(&f->cs);
		return -ENOMEM;
	}
	f->start = f->end = start;
	while (cs_disasm_iter(f->cs, &p, &avail, &addr, insn)) {
		if (insn->address != start && symtab_lookup(st, insn->address, &name, &off) == 0 &&
		    off == 0 && strcmp(name, fname) != 0)
			break; /* the next function */
		f->end = insn->address + insn->size;
		visit(f, insn, arg);
	}
	cs_free(insn, 1);
	cs_close(&f->cs);
	return 0;
}

uint64_t gi_insn_target(const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;

	if (x->op_count != 1 || x->operands[0].type != X86_OP_IMM)
		return 0;
	return (uint64_t)x->operands[0].imm;
}

/* The loop: the last backward jump to an sti (or its paravirt call). */
static void ew_loop_visit(struct ew_fn *f, const cs_insn *insn, void *arg)
{
	struct gi_exit_work *w = arg;
	uint64_t t = gi_insn_target(insn);

	if (t >= f->start && t < insn->address && ew_irq_insn(f, t, 0xfb, f->pv.enable) &&
	    cs_insn_group(f->cs, insn, X86_GRP_JUMP)) {
		w->head = t;
		w->loop_end = insn->address + insn->size;
	}
}

/* Inside [head, loop_end): the first clear of TIF_NOTIFY_RESUME, with its operand. */
static void ew_clear_visit(struct ew_fn *f, const cs_insn *insn, void *arg)
{
	struct gi_exit_work *w = arg;
	const cs_x86_op *m = &insn->detail->x86.operands[0];

	if (insn->address >= w->head && insn->address < w->loop_end &&
	    (insn->id == X86_INS_CLI ||
	     (insn->id == X86_INS_CALL && ew_irq_insn(f, insn->address, 0xfa, f->pv.disable))))
		w->loop_cli = insn->address; /* the last one wins */
	if (w->clear || insn->address < w->head || insn->address >= w->loop_end ||
	    !ew_clears_notify(insn))
		return;
	w->clear = insn->address;
	w->clear_end = insn->address + insn->size;
	if (insn->size <= sizeof(w->clear_bytes))
		memcpy(w->clear_bytes, insn->bytes, insn->size);
	/* what a VMM must do to complete it (PVM ignores RFLAGS.RF): an AND of [base + disp]
	 * with the immediate */
	if (insn->id == X86_INS_AND && m->mem.index == X86_REG_INVALID &&
	    m->mem.segment == X86_REG_INVALID && ew_gpr(m->mem.base) &&
	    (m->size == 1 || m->size == 8)) {
		w->clear_base = ew_gpr(m->mem.base);
		w->clear_disp = m->mem.disp;
		w->clear_size = m->size;
		w->clear_imm = (uint64_t)insn->detail->x86.operands[1].imm;
	}
}

/* The irq disable before a function's first read of its flags (ew_prep_visit). */
struct ew_prep {
	uint64_t head;      /* the loop's */
	bool bent;          /* the code from the function's start is no longer straight */
	uint64_t cand;      /* the cli (or its pv_ops call) on that straight line, 0 none */
	unsigned int after; /* instructions since it */
	bool tested;        /* a test of TIF_NOTIFY_RESUME's bit since it */
	bool falls;         /* ... and a conditional jump after it that falls on towards head */
	uint64_t found;
};

#define EW_PREP_WINDOW 8 /* instructions from the cli to the loop's head */

static bool ew_tests_notify(const cs_insn *insn)
{
	const cs_x86 *x = &insn->detail->x86;

	return insn->id == X86_INS_TEST && x->op_count == 2 && x->operands[1].type == X86_OP_IMM &&
	       (x->operands[1].imm & (1 << EW_TIF_NOTIFY_RESUME));
}

/*
 * The function's first irq disable, on the straight line from its start (calls return; no jump,
 * return or test of the flags before it), when its next few instructions, with no call, return
 * or other jump between, test TIF_NOTIFY_RESUME's bit and go to the head on it, by a
 * conditional jump there or one that falls through to it (6.12's syscall_exit_to_user_mode:
 * its exit work, then the inlined exit_to_user_mode_prepare: local_irq_disable_exit_to_user,
 * read_thread_flags, the test). Not the loop's own bottom (cli, read, test, into the head),
 * which a compiler may place before the head too: that is reached by a jump, never straight
 * from the start.
 */
static void ew_prep_visit(struct ew_fn *f, const cs_insn *insn, void *arg)
{
	struct ew_prep *p = arg;
	bool jump = cs_insn_group(f->cs, insn, X86_GRP_JUMP);

	if (p->found || (p->bent && !p->cand))
		return;
	if (insn->address >= p->head) {
		if (insn->address == p->head && p->cand && p->falls)
			p->found = p->cand;
		p->cand = 0;
		p->bent = true;
		return;
	}
	if (!p->cand) { /* on the straight line, looking for the cli */
		if (insn->id == X86_INS_CLI ||
		    (insn->id == X86_INS_CALL && ew_irq_insn(f, insn->address, 0xfa, f->pv.disable))) {
			p->cand = insn->address;
			p->after = 0;
			p->tested = p->falls = false;
		} else if (jump || cs_insn_group(f->cs, insn, X86_GRP_RET) || ew_tests_notify(insn)) {
			p->bent = true;
		}
		return;
	}
	p->bent = true; /* past the cli: this is its one chance */
	if (++p->after > EW_PREP_WINDOW) {
		p->cand = 0;
		return;
	}
	if (ew_tests_notify(insn)) {
		p->tested = true;
	} else if (jump && insn->id != X86_INS_JMP && p->tested && !p->falls) {
		if (gi_insn_target(insn) == p->head)
			p->found = p->cand;
		p->falls = true;
	} else if (jump || cs_insn_group(f->cs, insn, X86_GRP_CALL) ||
		   cs_insn_group(f->cs, insn, X86_GRP_RET)) {
		p->cand = 0;
	}
}

/* Does a jump of the function land in (start, @arg's bound]: code reached other than from
 * the start (ew_prep_visit's line)? */
struct ew_into {
	uint64_t lo, hi;
	bool hit;
};

static void ew_into_visit(struct ew_fn *f, const cs_insn *insn, void *arg)
{
	struct ew_into *in = arg;
	uint64_t t;

	if (!cs_insn_group(f->cs, insn, X86_GRP_JUMP))
		return;
	t = gi_insn_target(insn);
	if (t > in->lo && t <= in->hi)
		in->hit = true;
}

#define EW_PREPARE "exit_to_user_mode_prepare"
#define EW_PATHS 2

/* Exit path @i (0: system calls, 1: interrupts and exceptions) as @st names it: the generic
 * entry's function, or where that has no symbol (inlined into its caller) the caller; NULL when
 * neither is there. *@start (may be NULL): its address. */
static const char *ew_path(const struct symtab *st, unsigned int i, uint64_t *start)
{
	static const char *const paths[EW_PATHS][2] = {
		{ "syscall_exit_to_user_mode", "do_syscall_64" },
		{ "irqentry_exit_to_user_mode", "irqentry_exit" },
	};
	uint64_t a;

	if (i >= EW_PATHS)
		return NULL;
	for (unsigned int k = 0; k < 2; k++)
		if (symtab_find(st, paths[i][k], &a) == 0) {
			if (start)
				*start = a;
			return paths[i][k];
		}
	return NULL;
}

/* Does @path reach @fname: a direct call or jump to it, or to exit_to_user_mode_prepare where
 * that calls @fname (the loop out of line below it, as many 5.x-6.x kernels have it)? Return:
 * 0 yes; -ENOENT no; -ENOMEM; -EFAULT. */
static int ew_reaches(const struct symtab *st, gi_kva_read_fn read, void *ctx, const char *path,
		      const char *fname)
{
	uint64_t at, after, end;
	int err = gi_call_site(st, read, ctx, path, fname, &at, &after, &end);

	if (err != -ENOENT || !strcmp(fname, EW_PREPARE))
		return err;
	err = gi_call_site(st, read, ctx, path, EW_PREPARE, &at, &after, &end);
	return err ?: gi_call_site(st, read, ctx, EW_PREPARE, fname, &at, &after, &end);
}

void gi_pv_irq_slots(const struct symtab *st, const struct gi_layout *l, struct gi_pv_irq *out)
{
	uint64_t pv;

	memset(out, 0, sizeof(*out));
	if (!st || !l || l->pv_irq_enable == UINT32_MAX || l->pv_irq_disable == UINT32_MAX ||
	    symtab_find(st, "pv_ops", &pv) != 0)
		return;
	out->enable = pv + l->pv_irq_enable;
	out->disable = pv + l->pv_irq_disable;
}

/* @w's body (gi_loop_body over the function @f, with its static keys' sites from the kernel's
 * __jump_table): [head, loop_end) but for code there that is not the loop's, and the loop's
 * out-of-line blocks past loop_end (task work jumping back in); at most GI_EW_BODY ranges (the
 * rest left out: not the loop's, the side that errs safely). None (n_body 0: nothing in the loop
 * is before the read, every sample there is walked at once) when the sites cannot be read (a
 * site held as a jump in the image may fall through at run time: without them the body would
 * hold too much) or the code does not decode so. Return: 0; -ENOMEM. */
static int ew_body(const struct symtab *st, gi_kva_read_fn read, void *ctx, const struct ew_fn *f,
		   struct gi_exit_work *w)
{
	size_t max = (size_t)(f->end - f->start) / 2 + 1, n_labels = 0; /* a site: 2 bytes or more */
	struct gi_jump_label *labels = calloc(max, sizeof(*labels));
	unsigned int n = 0;
	int err;

	w->n_body = 0;
	if (!labels)
		return -ENOMEM;
	err = gi_jump_labels(st, read, ctx, f->start, f->end, labels, max, &n_labels);
	if (err) {
		pr_debug(LOG_BTF, "the static keys' sites not read (%s): no loop body, its samples "
			 "walked at once", hvp_strerror(err));
		free(labels);
		return 0;
	}
	err = gi_loop_body(read, ctx, f->start, f->end, w->head, f->pv.disable, labels, n_labels,
			   w->body, GI_EW_BODY, &n);
	free(labels);
	w->n_body = err ? 0 : n;
	if (err == -ENOMEM)
		return err;
	if (err)
		pr_debug(LOG_BTF, "the exit-work loop's body not found (%s): its samples walked at "
			 "once", hvp_strerror(err));
	return 0;
}

/* The loop in function @fname at @start into *@out (zeroed first): its head and end
 * (ew_loop_visit), bottom and clear (ew_clear_visit). Return: 0; -ENOENT none that clears
 * TIF_NOTIFY_RESUME; -EFAULT; -ENOMEM. */
static int ew_loop_in(const struct symtab *st, gi_kva_read_fn read, void *ctx,
		      const struct gi_pv_irq *pv, const char *fname, uint64_t start,
		      struct gi_exit_work *out)
{
	struct ew_fn *f;
	int err;

	memset(out, 0, sizeof(*out));
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	if (pv)
		f->pv = *pv;
	err = ew_walk(st, read, ctx, fname, start, f, ew_loop_visit, out);
	err = err ?: !out->head ? -ENOENT : ew_walk(st, read, ctx, fname, start, f, ew_clear_visit,
						   out);
	if (!err && !out->clear)
		err = -ENOENT;
	if (!err) {
		struct ew_prep p = { .head = out->head };
		struct ew_into into = { .lo = start };

		err = ew_walk(st, read, ctx, fname, start, f, ew_prep_visit, &p);
		into.hi = p.found;
		if (!err && p.found)
			err = ew_walk(st, read, ctx, fname, start, f, ew_into_visit, &into);
		out->prep_cli = into.hit ? 0 : p.found;
	}
	if (!err)
		err = ew_body(st, read, ctx, f, out);
	if (err) {
		memset(out, 0, sizeof(*out));
	} else {
		out->func_start = f->start;
		out->func_end = f->end;
		out->notify_bit = EW_TIF_NOTIFY_RESUME;
	}
	free(f);
	return err;
}

int gi_exit_work_loops(const struct symtab *st, gi_kva_read_fn read, void *ctx,
		       const struct gi_pv_irq *pv, struct gi_exit_work out[GI_EW_COPIES],
		       size_t *n)
{
	_Static_assert(GI_EW_COPIES >= EW_PATHS, "a loop per exit path");
	struct gi_exit_work shared;
	const char *fname = NULL, *missing = NULL;
	bool have_shared = false, shared_listed = false;
	unsigned int known = 0;
	uint64_t start;
	int err = 0;

	if (!st || !read || !out || !n)
		return -EINVAL;
	*n = 0;
	if (ew_function(st, &start, &fname) == 0) {
		err = ew_loop_in(st, read, ctx, pv, fname, start, &shared);
		if (err && err != -ENOENT)
			return err;
		have_shared = !err;
		if (err)
			pr_debug(LOG_BTF, "%s: no exit-work loop that clears TIF_NOTIFY_RESUME", fname);
	}
	for (unsigned int i = 0; i < EW_PATHS; i++) {
		const char *path = ew_path(st, i, &start);

		if (!path)
			continue;
		known++;
		err = have_shared ? ew_reaches(st, read, ctx, path, fname) : -ENOENT;
		if (!err) {
			if (!shared_listed)
				out[(*n)++] = shared;
			shared_listed = true;
			continue;
		}
		if (err == -ENOENT) {
			err = ew_loop_in(st, read, ctx, pv, path, start, &out[*n]);
			out[*n].inlined = true;
		}
		if (err == -ENOENT)
			missing = missing ? missing : path; /* the others still looked at: a loop in
							    * one says -ENOTSUP, not -ENOENT */
		else if (err)
			break;
		else
			(*n)++;
		err = 0;
	}
	if (err && err != -ENOENT) {
		*n = 0;
		return err;
	}
	if (missing || !known) {
		if (missing)
			pr_debug(LOG_BTF, "%s neither reaches an exit-work loop nor holds one",
				 missing);
		err = *n || have_shared ? -ENOTSUP : -ENOENT;
		*n = 0;
		return err;
	}
	return 0;
}

int gi_syscall_tail_find(const struct symtab *st, gi_kva_read_fn read, void *ctx, uint64_t *start,
			 uint64_t *end)
{
	uint8_t code[1024];
	uint64_t a, b, addr, after = 0;
	const uint8_t *p;
	size_t avail;
	cs_insn *insn;
	csh cs;

	if (!st || !read || !start || !end)
		return -EINVAL;
	if (symtab_find(st, "entry_SYSCALL_64", &a) || symtab_find(st, "syscall_return_via_sysret", &b) ||
	    b <= a || b - a > sizeof(code))
		return -ENOENT;
	if (read(ctx, a, code, b - a) != 0)
		return -EFAULT;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
		return -ENOMEM;
	insn = cs_malloc(cs);
	if (!insn) {
		cs_close(&cs);
		return -ENOMEM;
	}
	p = code;
	avail = b - a;
	addr = a;
	while (cs_disasm_iter(cs, &p, &avail, &addr, insn))
		if (insn->id == X86_INS_CALL)
			after = insn->address + insn->size;
	cs_free(insn, 1);
	cs_close(&cs);
	if (!after)
		return -ENOENT;
	*start = after;
	*end = b;
	return 0;
}

int gi_jumps_to_find(gi_kva_read_fn read, void *ctx, uint64_t lo, uint64_t hi, uint64_t target,
		     uint64_t *out, size_t max, size_t *n)
{
	uint64_t addr = lo;
	const uint8_t *p;
	uint8_t *code;
	size_t avail;
	cs_insn *insn;
	csh cs;
	int err = 0;

	if (!read || !n || (max && !out) || hi <= lo)
		return -EINVAL;
	if (hi - lo > 64 * 1024)
		return -E2BIG;
	*n = 0;
	code = malloc(hi - lo);
	if (!code)
		return -ENOMEM;
	if (read(ctx, lo, code, hi - lo) != 0) {
		free(code);
		return -EFAULT;
	}
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) {
		free(code);
		return -ENOMEM;
	}
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	if (!insn) {
		err = -ENOMEM;
		goto out;
	}
	p = code;
	avail = hi - lo;
	while (avail) {
		if (!cs_disasm_iter(cs, &p, &avail, &addr, insn)) {
			p++; /* not an instruction (padding, data): resynchronise one byte on */
			avail--;
			addr++;
			continue;
		}
		if (insn->id == X86_INS_JMP && gi_insn_target(insn) == target) {
			if (*n < max)
				out[*n] = insn->address;
			(*n)++;
		}
	}
	cs_free(insn, 1);
	if (!*n)
		err = -ENOENT;
out:
	cs_close(&cs);
	free(code);
	return err;
}

struct ew_call {
	uint64_t target, at, after;
};

static void ew_call_visit(struct ew_fn *f, const cs_insn *insn, void *arg)
{
	struct ew_call *c = arg;

	/* the first call: with several (a fast and a slow path), code after any of them may be
	 * past the read, so the range starts at the earliest (conservative) */
	if ((insn->id == X86_INS_CALL || insn->id == X86_INS_JMP) &&
	    gi_insn_target(insn) == c->target && !c->at) {
		c->at = insn->address; /* the call itself: a caller frame returning after it is
					* inside the callee (whose frame a leaf without one hides
					* from the frame-pointer walk) */
		c->after = insn->address + insn->size;
	}
}

int gi_call_site(const struct symtab *st, gi_kva_read_fn read, void *ctx, const char *func,
		 const char *callee, uint64_t *at, uint64_t *after, uint64_t *end)
{
	struct ew_call c = { 0, 0, 0 };
	struct ew_fn *f;
	uint64_t a;
	int err;

	if (!st || !read || !func || !callee || !at || !after || !end)
		return -EINVAL;
	if (symtab_find(st, func, &a) || symtab_find(st, callee, &c.target))
		return -ENOENT;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	err = ew_walk(st, read, ctx, func, a, f, ew_call_visit, &c);
	if (!err && !c.at)
		err = -ENOENT;
	if (!err) {
		*at = c.at;
		*after = c.after;
		*end = f->end;
	}
	free(f);
	return err;
}

int gi_tail_after_call(const struct symtab *st, gi_kva_read_fn read, void *ctx, const char *func,
		       const char *callee, uint64_t *start, uint64_t *end)
{
	uint64_t after;

	if (!start)
		return -EINVAL;
	return gi_call_site(st, read, ctx, func, callee, start, &after, end);
}
