// SPDX-License-Identifier: MIT
// Where a frame-pointer kernel's functions have not built their frame yet. A C function compiled
// with frame pointers starts `push %rbp ... mov %rsp,%rbp`; until the mov has run, RBP is still
// its caller's frame, so a frame-pointer unwind from a RIP there skips the immediate caller, whose
// return address is at RSP (before the push) or RSP + 8 (after it). The table made here at open
// tells the unwinder which (unwind.c). For each code symbol of the image's text: exactly from
// the compiler's call-frame information when the image has it for that function (.debug_frame
// or .eh_frame, prologue_cfi.c: every row where the CFA is RSP + 8 or RSP + 16, early exits and
// epilogues too), else from its code with capstone (asm, and images without CFI): the stack depth
// at an address of compiled code is the same on every path to it, so the straight-line prefix
// from the function's entry tells it for every RIP in that prefix; a function that never moves
// RSP or RBP (no frame at all: small leaves, asm helpers) has its return address at RSP
// everywhere; and at a ret (c3, or c2 with an immediate) after a prologue function's epilogue
// the return address is at RSP: a byte c3 at an instruction boundary is a ret, and a RIP is one,
// so a bitmap of those bytes answers without decoding (the unwinder confirms it in the guest).
#define pr_fmt(fmt) "gi: prologue: " fmt
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <capstone/capstone.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "gi_internal.h"
#include "prologue_internal.h"

/* How far into a function the frame may be built: gcc schedules a few loads between the push
 * and the mov, never more than this. */
#define PRO_MAX_BYTES 48
#define PRO_MAX_INSNS 12
/* The body of a function with a prologue is looked at for rets up to this size. */
#define PRO_MAX_BODY (64u << 10)

static bool is_reg(const cs_x86_op *op, x86_reg r)
{
	return op->type == X86_OP_REG && op->reg == r;
}

/* Does @insn write RSP or RBP (or a part of them), explicitly or not? Stack instructions are
 * told by their id: capstone 4's tables miss RSP for some (enter, push/pop of a segment). */
static bool writes_sp_bp(csh cs, const cs_insn *insn)
{
	cs_regs rd, wr;
	uint8_t nrd = 0, nwr = 0;

	switch (insn->id) {
	case X86_INS_PUSH:
	case X86_INS_PUSHAW:
	case X86_INS_PUSHAL:
	case X86_INS_PUSHF:
	case X86_INS_PUSHFD:
	case X86_INS_PUSHFQ:
	case X86_INS_POP:
	case X86_INS_POPAW:
	case X86_INS_POPAL:
	case X86_INS_POPF:
	case X86_INS_POPFD:
	case X86_INS_POPFQ:
	case X86_INS_ENTER:
	case X86_INS_LEAVE:
		return true;
	default:
		break;
	}

	if (cs_regs_access(cs, insn, rd, &nrd, wr, &nwr) != CS_ERR_OK)
		return true; /* unknown: assume the worst */
	for (uint8_t i = 0; i < nwr; i++)
		switch (wr[i]) {
		case X86_REG_RSP:
		case X86_REG_ESP:
		case X86_REG_SP:
		case X86_REG_SPL:
		case X86_REG_RBP:
		case X86_REG_EBP:
		case X86_REG_BP:
		case X86_REG_BPL:
			return true;
		default:
			break;
		}
	return false;
}

/*
 * The prologue of the function whose first bytes are @code (@len of them, at link-time @start):
 * 0 and *@push_end, *@mov_end (offsets from @start) when the straight-line code from the entry
 * runs `push %rbp` and then `mov %rsp,%rbp`, with nothing between or before them that moves
 * RSP or RBP or leaves the line (a jmp, ret; a call returns with RSP as it was, a conditional
 * jump falls through); -ENOENT otherwise.
 */
static int prologue_shape(csh cs, cs_insn *insn, const uint8_t *code, size_t len, uint64_t start,
			  unsigned int *push_end, unsigned int *mov_end)
{
	const uint8_t *p = code;
	size_t avail = len;
	uint64_t addr = start;
	unsigned int pushed = 0;

	/* the common shapes, without decoding: push %rbp; mov %rsp,%rbp, maybe after endbr64 */
	static const uint8_t plain[4] = {0x55, 0x48, 0x89, 0xe5};
	static const uint8_t endbr[4] = {0xf3, 0x0f, 0x1e, 0xfa};
	size_t skip = len >= 8 && memcmp(code, endbr, 4) == 0 ? 4 : 0;

	if (len >= skip + 4 && memcmp(code + skip, plain, 4) == 0) {
		*push_end = (unsigned int)skip + 1;
		*mov_end = (unsigned int)skip + 4;
		return 0;
	}
	for (unsigned int i = 0; i < PRO_MAX_INSNS && cs_disasm_iter(cs, &p, &avail, &addr, insn);
	     i++) {
		const cs_x86 *x = &insn->detail->x86;
		unsigned int end = (unsigned int)(addr - start);

		if (!pushed && insn->id == X86_INS_PUSH && x->op_count == 1 &&
		    is_reg(&x->operands[0], X86_REG_RBP)) {
			pushed = end;
			continue;
		}
		if (pushed && insn->id == X86_INS_MOV && x->op_count == 2 &&
		    is_reg(&x->operands[0], X86_REG_RBP) && is_reg(&x->operands[1], X86_REG_RSP)) {
			*push_end = pushed;
			*mov_end = end;
			return 0;
		}
		if (cs_insn_group(cs, insn, X86_GRP_CALL))
			continue; /* returns with RSP as it was (__fentry__ and the like) */
		if (cs_insn_group(cs, insn, X86_GRP_RET) || cs_insn_group(cs, insn, X86_GRP_IRET) ||
		    cs_insn_group(cs, insn, X86_GRP_INT) || insn->id == X86_INS_JMP ||
		    insn->id == X86_INS_LJMP || writes_sp_bp(cs, insn))
			return -ENOENT;
	}
	return -ENOENT;
}

/*
 * A function that builds no frame: its @len bytes (up to the next symbol) decode without an
 * instruction that moves RSP or RBP, calls, or returns from an interrupt or system call, and
 * hold at least one ret. Return: 0; -ENOENT otherwise.
 */
static int frameless(csh cs, cs_insn *insn, const uint8_t *code, size_t len, uint64_t start)
{
	const uint8_t *p = code;
	size_t avail = len;
	uint64_t addr = start;
	bool ret = false;

	while (avail && cs_disasm_iter(cs, &p, &avail, &addr, insn)) {
		if (insn->id == X86_INS_INT3)
			continue; /* padding after the function */
		if (cs_insn_group(cs, insn, X86_GRP_CALL) ||
		    cs_insn_group(cs, insn, X86_GRP_IRET) || insn->id == X86_INS_SYSCALL ||
		    insn->id == X86_INS_SYSRET || insn->id == X86_INS_SYSEXIT)
			return -ENOENT;
		if (cs_insn_group(cs, insn, X86_GRP_RET)) {
			ret = true; /* pops the return address (so writes RSP): the depth was 0 */
			continue;
		}
		if (writes_sp_bp(cs, insn))
			return -ENOENT;
	}
	return ret && avail == 0 ? 0 : -ENOENT; /* bytes that do not decode: not known */
}

void gi_prologues_free(struct gi_prologues *p)
{
	if (!p)
		return;
	free(p->fn);
	free(p->bucket);
	free(p->ret_bits);
	free(p);
}

int pro_add(struct gi_prologues *p, uint64_t start, uint64_t end, unsigned int cfa)
{
	while (start < end) {
		uint32_t off = (uint32_t)(start - p->lo);
		struct pro_fn *last = p->n ? &p->fn[p->n - 1] : NULL;
		uint64_t len = end - start, room;

		/* continue the stretch before: RBP pushed after anything, nothing pushed only
		 * after nothing pushed; at most PRO_MAX_STRETCH in all */
		if (last && last->off + last->mov_end == off && last->mov_end < PRO_MAX_STRETCH &&
		    (cfa == 16 || last->push_end == last->mov_end)) {
			room = PRO_MAX_STRETCH - last->mov_end;
			if (len > room)
				len = room;
			last->mov_end = (uint16_t)(last->mov_end + len);
			if (cfa == 8)
				last->push_end = last->mov_end;
		} else {
			if (p->n == p->cap) {
				size_t ncap = p->cap ? p->cap * 2 : 4096;
				struct pro_fn *fn = realloc(p->fn, ncap * sizeof(*fn));

				if (!fn)
					return -ENOMEM;
				p->fn = fn;
				p->cap = ncap;
			}
			if (len > PRO_MAX_STRETCH)
				len = PRO_MAX_STRETCH;
			p->fn[p->n++] = (struct pro_fn){ off, cfa == 8 ? (uint16_t)len : 0,
							 (uint16_t)len };
		}
		start += len;
	}
	return 0;
}

/* The buckets over the @p->n starts. Return: 0; -ENOMEM. */
int pro_index(struct gi_prologues *p)
{
	uint32_t i = 0;

	p->n_buckets = (uint32_t)(((p->hi - p->lo) >> PRO_BUCKET_SHIFT) + 1);
	p->bucket = calloc((size_t)p->n_buckets + 1, sizeof(*p->bucket));
	if (!p->bucket)
		return -ENOMEM;
	for (uint32_t b = 0; b <= p->n_buckets; b++) {
		while (i < p->n && (p->fn[i].off >> PRO_BUCKET_SHIFT) < b)
			i++;
		p->bucket[b] = i;
	}
	return 0;
}

/* The body (after the prologue) of a function that builds its frame: [lo, hi), link-time. */
struct pro_body {
	uint64_t lo, hi;
};

/*
 * The ret bytes (c3, c2) of the bodies @b (@n, ascending): at a RIP there, which is an
 * instruction boundary, the frame is torn down and the return address is at RSP. Only bodies
 * of functions with a prologue: a compiled function's ret follows its epilogue (a ret used as a
 * jump, as retpoline thunks do, lives in asm without one). A piece the image lacks stays 0.
 * Return: 0; -ENOMEM.
 */
static int ret_bitmap(struct gi_prologues *p, gi_kva_read_fn read, void *ctx, uint8_t *buf,
		      const struct pro_body *b, size_t n)
{
	if (!n)
		return 0;
	p->ret_lo = b[0].lo;
	p->ret_hi = b[n - 1].hi;
	p->ret_bits = calloc((size_t)((p->ret_hi - p->ret_lo + 63) / 64), sizeof(*p->ret_bits));
	if (!p->ret_bits)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		for (uint64_t at = b[i].lo; at < b[i].hi; at += PRO_MAX_STRETCH) {
			size_t len = b[i].hi - at < PRO_MAX_STRETCH ? (size_t)(b[i].hi - at)
								    : PRO_MAX_STRETCH;

			if (read(ctx, at, buf, len) != 0)
				continue;
			for (size_t j = 0; j < len; j++) {
				uint64_t bit = at + j - p->ret_lo;

				if (buf[j] == 0xc3 || buf[j] == 0xc2)
					p->ret_bits[bit / 64] |= 1ull << (bit % 64);
			}
		}
	return 0;
}

/* The code analysis of the symbol at @start (up to @next): its stretches added to @p and, for a
 * function with a prologue, its body to @bodies. Return: 1 claimed; 0 not; -ENOMEM. */
static int code_symbol(struct gi_prologues *p, csh cs, cs_insn *insn, gi_kva_read_fn read,
		       void *ctx, uint8_t *code, uint64_t start, uint64_t next,
		       struct pro_body *bodies, size_t *n_bodies)
{
	unsigned int push_end, mov_end;
	size_t len, whole;
	int err;

	/* the function's bytes up to the next symbol: the prologue's first PRO_MAX_BYTES, or all
	 * of a frameless one of at most PRO_MAX_STRETCH */
	whole = next - start <= PRO_MAX_STRETCH ? (size_t)(next - start) : 0;
	len = next - start < PRO_MAX_BYTES ? (size_t)(next - start) : PRO_MAX_BYTES;
	if (len < 1 || read(ctx, start, code, whole > len ? whole : len) != 0)
		return 0;
	if (prologue_shape(cs, insn, code, len, start, &push_end, &mov_end) == 0) {
		err = pro_add(p, start, start + push_end, 8);
		if (!err)
			err = pro_add(p, start + push_end, start + mov_end, 16);
		if (err)
			return err;
		bodies[*n_bodies].lo = start + mov_end;
		bodies[*n_bodies].hi =
			next - start - mov_end > PRO_MAX_BODY ? start + mov_end + PRO_MAX_BODY : next;
		*n_bodies += bodies[*n_bodies].lo < bodies[*n_bodies].hi;
		return 1;
	}
	if (whole && frameless(cs, insn, code, whole, start) == 0) {
		err = pro_add(p, start, start + whole, 8);
		return err ? err : 1;
	}
	return 0;
}

int pro_build(const struct symtab *st, gi_kva_read_fn read, void *ctx, struct pro_cfi *cfi,
	      uint64_t lo, uint64_t hi, struct gi_prologues **out)
{
	struct gi_prologues *p;
	struct pro_body *bodies = NULL;
	size_t count = symtab_count(st), n_bodies = 0;
	uint8_t *code = NULL;
	cs_insn *insn = NULL;
	csh cs = 0;
	int err;

	if (!st || !read || !out || lo >= hi || hi - lo > GI_KERNEL_IMAGE_SIZE)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->lo = lo;
	p->hi = hi;
	code = malloc(PRO_MAX_STRETCH);
	bodies = calloc(count ? count : 1, sizeof(*bodies));
	if (!code || !bodies) {
		err = -ENOMEM;
		goto err_free;
	}
	switch (cs_open(CS_ARCH_X86, CS_MODE_64, &cs)) {
	case CS_ERR_OK:
		break;
	case CS_ERR_MEM:
		err = -ENOMEM;
		goto err_free;
	default:
		err = -ENOTSUP; /* a capstone without x86 */
		goto err_free;
	}
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	insn = cs_malloc(cs);
	if (!insn) {
		err = -ENOMEM;
		goto err_close_cs;
	}
	for (size_t i = 0; i < count; i++) {
		uint64_t start, next = hi;

		if (symtab_code_addr(st, i, &start) != 0 || start < lo || start >= hi)
			continue;
		if (i + 1 < count && symtab_code_addr(st, i + 1, &next) == 0 && next > hi)
			next = hi;
		/* the compiler's rows where it has them for this function, else its code */
		err = cfi ? pro_cfi_rows(cfi, p, start, next) : -ENOENT;
		if (err == 0) {
			p->n_cfi++;
			continue;
		}
		if (err == -ENOENT)
			err = code_symbol(p, cs, insn, read, ctx, code, start, next, bodies,
					  &n_bodies);
		if (err < 0)
			goto err_free_insn;
		p->n_code += (size_t)err;
	}
	err = pro_index(p);
	if (!err)
		err = ret_bitmap(p, read, ctx, code, bodies, n_bodies);
	if (err)
		goto err_free_insn;
	cs_free(insn, 1);
	cs_close(&cs);
	free(bodies);
	free(code);
	*out = p;
	return 0;

err_free_insn:
	cs_free(insn, 1);
err_close_cs:
	cs_close(&cs);
err_free:
	free(bodies);
	free(code);
	gi_prologues_free(p);
	return err;
}

int gi_prologues_build(const struct symtab *st, gi_kva_read_fn read, void *ctx, uint64_t lo,
		       uint64_t hi, struct gi_prologues **out)
{
	return pro_build(st, read, ctx, NULL, lo, hi, out);
}

enum gi_frame_state gi_prologue_at(const struct gi_prologues *p, uint64_t kva)
{
	uint32_t o, b, lo_i, hi_i;

	if (!p || kva < p->lo || kva >= p->hi)
		return GI_FRAME_BUILT;
	o = (uint32_t)(kva - p->lo);
	b = o >> PRO_BUCKET_SHIFT;
	/* a stretch is at most PRO_MAX_STRETCH long: it starts in this bucket or the one before;
	 * the last one starting at or before @o, by binary search there.
	 * SAFETY: b < n_buckets since kva < hi; bucket has n_buckets + 1 entries */
	lo_i = b ? p->bucket[b - 1] : 0;
	hi_i = p->bucket[b + 1];
	while (lo_i < hi_i) {
		uint32_t mid = lo_i + (hi_i - lo_i) / 2;

		if (p->fn[mid].off <= o)
			lo_i = mid + 1;
		else
			hi_i = mid;
	}
	/* lo_i: the first starting after @o; the one before it, if in those buckets */
	if (lo_i > (b ? p->bucket[b - 1] : 0) && o - p->fn[lo_i - 1].off < p->fn[lo_i - 1].mov_end)
		return o - p->fn[lo_i - 1].off < p->fn[lo_i - 1].push_end ? GI_FRAME_AT_ENTRY
									  : GI_FRAME_PUSHED;
	if (p->ret_bits && kva >= p->ret_lo && kva < p->ret_hi) {
		uint64_t bit = kva - p->ret_lo;

		/* SAFETY: bit < ret_hi - ret_lo, the bitmap's size in bits */
		if (p->ret_bits[bit / 64] >> (bit % 64) & 1)
			return GI_FRAME_AT_RET;
	}
	return GI_FRAME_BUILT;
}

size_t gi_prologues_count(const struct gi_prologues *p)
{
	return p ? p->n : 0;
}

void gi_prologues_functions(const struct gi_prologues *p, size_t *from_cfi, size_t *from_code)
{
	*from_cfi = p ? p->n_cfi : 0;
	*from_code = p ? p->n_code : 0;
}
