// SPDX-License-Identifier: MIT
// Kernel stacks of kernels built without frame pointers (CONFIG_UNWINDER_ORC: distribution
// kernels): the kernel's own ORC tables (.orc_unwind_ip, .orc_unwind; format in
// arch/x86/include/asm/orc_types.h, walk as arch/x86/kernel/unwind_orc.c does it), read from
// the kernel image, with every guest value checked.
#define pr_fmt(fmt) "orc: " fmt

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "gi_internal.h"
#include "kimage_internal.h"
#include "pgwalk_internal.h"

/* ORC_REG_* (orc_types.h): where the previous frame's SP (sp_reg) or BP (bp_reg) is found. */
enum { REG_UNDEFINED = 0, REG_PREV_SP = 1, REG_DX = 2, REG_DI = 3, REG_BP = 4, REG_SP = 5,
       REG_R10 = 6, REG_R13 = 7, REG_BP_INDIRECT = 8, REG_SP_INDIRECT = 9 };

/* struct pt_regs offsets (arch/x86/include/asm/ptrace.h, x86-64; stable ABI of the entry code). */
#define PTREGS_R13 16
#define PTREGS_BP 32
#define PTREGS_R10 56
#define PTREGS_DX 96
#define PTREGS_DI 112
#define PTREGS_IP 128 /* IRET_FRAME_OFFSET: ip, cs, flags, sp, ss follow */
#define PTREGS_CS 136
#define PTREGS_SP 152
#define PTREGS_SIZE 168

#define ORC_MAX_ENTRIES (4u << 20)
#define ORC_MAX_STACK_SWITCHES 4 /* interrupt/exception entries one walk may cross */

struct gi_orc {
	uint64_t *ips; /* link-time address where each entry starts, ascending */
	struct gi_orc_entry *e;
	size_t n;
};

const char *gi_orc_layout_name(enum gi_orc_layout l)
{
	switch (l) {
	case GI_ORC_LAYOUT_6_1:
		return "type:2 end:1 (Linux < 6.3)";
	case GI_ORC_LAYOUT_6_3:
		return "type:2 signal:1 end:1 (Linux 6.3)";
	case GI_ORC_LAYOUT_6_4:
		return "type:3 signal:1 (Linux 6.4+)";
	}
	return "?";
}

/* Decode the 6 bytes of one struct orc_entry (little-endian bit fields). */
static struct gi_orc_entry orc_decode(const uint8_t *p, enum gi_orc_layout layout)
{
	struct gi_orc_entry e;
	uint16_t bits = (uint16_t)(p[4] | p[5] << 8);
	unsigned int type;

	e.sp_offset = (int16_t)(p[0] | p[1] << 8);
	e.bp_offset = (int16_t)(p[2] | p[3] << 8);
	e.sp_reg = bits & 0xf;
	e.bp_reg = (bits >> 4) & 0xf;
	if (layout == GI_ORC_LAYOUT_6_4) {
		type = (bits >> 8) & 7;
		e.signal = (bits >> 11) & 1;
		/* ORC_TYPE_UNDEFINED 0, END_OF_STACK 1, CALL 2, REGS 3, REGS_PARTIAL 4 */
		e.type = type == 0   ? GI_ORC_UNDEFINED
			 : type == 1 ? GI_ORC_END
			 : type == 2 ? GI_ORC_CALL
			 : type == 3 ? GI_ORC_REGS
			 : type == 4 ? GI_ORC_REGS_PARTIAL
				     : GI_ORC_UNDEFINED;
		return e;
	}
	/* UNWIND_HINT_TYPE_CALL 0, REGS 1, REGS_PARTIAL 2; an undefined SP ends or is unknown */
	type = (bits >> 8) & 3;
	e.signal = layout == GI_ORC_LAYOUT_6_3 ? (bits >> 10) & 1 : type != 0;
	if (e.sp_reg == REG_UNDEFINED) {
		bool end = (bits >> (layout == GI_ORC_LAYOUT_6_3 ? 11 : 10)) & 1;

		e.type = end ? GI_ORC_END : GI_ORC_UNDEFINED;
	} else {
		e.type = type == 0 ? GI_ORC_CALL : type == 1 ? GI_ORC_REGS
			 : type == 2 ? GI_ORC_REGS_PARTIAL : GI_ORC_UNDEFINED;
	}
	return e;
}

enum gi_orc_layout gi_orc_layout_for(unsigned int major, unsigned int minor)
{
	if (major > 6 || (major == 6 && minor >= 4))
		return GI_ORC_LAYOUT_6_4;
	if (major == 6 && minor == 3)
		return GI_ORC_LAYOUT_6_3;
	return GI_ORC_LAYOUT_6_1;
}

/* Tables for @n entries, arrays uninitialised; NULL on allocation failure. */
static struct gi_orc *orc_alloc(size_t n)
{
	struct gi_orc *orc = calloc(1, sizeof(*orc));

	if (!orc)
		return NULL;
	orc->ips = malloc(n * sizeof(*orc->ips));
	orc->e = malloc(n * sizeof(*orc->e));
	if (!orc->ips || !orc->e) {
		gi_orc_free(orc);
		return NULL;
	}
	orc->n = n;
	return orc;
}

/* Lookups need ascending start addresses (the kernel sorts its tables at build time). */
static bool orc_sorted(const uint64_t *ips, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (ips[i] < ips[i - 1])
			return false;
	return true;
}

int gi_orc_load(const struct gi_kimage *img, enum gi_orc_layout layout, struct gi_orc **out)
{
	const struct kimage_sec *sip, *sent;
	struct gi_orc *orc;
	size_t n;

	if (!img || !out)
		return -EINVAL;
	sip = kimage_section(img, ".orc_unwind_ip");
	sent = kimage_section(img, ".orc_unwind");
	if (!sip || !sent || !sip->data || !sent->data)
		return -ENODATA;
	n = sip->size / 4;
	if (sip->size % 4 || sent->size != n * 6 || n == 0 || n > ORC_MAX_ENTRIES)
		return -EBADMSG;
	orc = orc_alloc(n);
	if (!orc)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int32_t rel;

		/* SAFETY: i < n = sip->size / 4 and n * 6 == sent->size. */
		memcpy(&rel, sip->data + 4 * i, 4);
		orc->ips[i] = sip->kva + 4 * i + (uint64_t)(int64_t)rel;
		orc->e[i] = orc_decode(sent->data + 6 * i, layout);
	}
	if (!orc_sorted(orc->ips, n)) {
		gi_orc_free(orc);
		return -EBADMSG;
	}
	*out = orc;
	return 0;
}

int gi_orc_new(const uint64_t *ips, const struct gi_orc_entry *e, size_t n, struct gi_orc **out)
{
	struct gi_orc *orc;

	if (!ips || !e || !out || n == 0 || n > ORC_MAX_ENTRIES)
		return -EINVAL;
	if (!orc_sorted(ips, n))
		return -EBADMSG;
	orc = orc_alloc(n);
	if (!orc)
		return -ENOMEM;
	memcpy(orc->ips, ips, n * sizeof(*ips));
	memcpy(orc->e, e, n * sizeof(*e));
	*out = orc;
	return 0;
}

void gi_orc_free(struct gi_orc *orc)
{
	if (!orc)
		return;
	free(orc->ips);
	free(orc->e);
	free(orc);
}

size_t gi_orc_count(const struct gi_orc *orc)
{
	return orc ? orc->n : 0;
}

int gi_orc_find(const struct gi_orc *orc, uint64_t kva, struct gi_orc_entry *out)
{
	size_t lo = 0, hi;

	if (!orc || !out)
		return -EINVAL;
	hi = orc->n;
	if (hi == 0 || kva < orc->ips[0])
		return -ENOENT;
	/* The last entry starting at or below @kva. */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (orc->ips[mid] <= kva)
			lo = mid;
		else
			hi = mid;
	}
	*out = orc->e[lo];
	return 0;
}

/* The unwinder's state: as unwind_orc.c's struct unwind_state, with guest addresses. */
struct orc_state {
	uint64_t ip, sp, bp;
	uint64_t regs;      /* GVA of a pt_regs on the stack, 0: none */
	bool full_regs;     /* @regs holds all registers (not only the iret frame) */
	bool signal;        /* @ip is where an interrupt hit, not a return address */
	const struct gi_regs *vcpu; /* the first frame's registers: the vCPU's own */
};

static bool orc_read(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva,
		     uint64_t *v)
{
	return (gva & 7) == 0 && gi_is_kernel_gva(pg, gva) &&
	       gi_read_gva(mem, pg, gva, v, sizeof(*v)) == 0;
}

/* A register of the interrupted context (get_reg() of unwind_orc.c). */
static bool orc_get_reg(const struct gmem *mem, const struct gi_paging *pg,
			const struct orc_state *st, unsigned int off, uint64_t *v)
{
	if (st->vcpu) {
		switch (off) {
		case PTREGS_BP: *v = st->vcpu->rbp; return true;
		case PTREGS_R10: *v = st->vcpu->r10; return st->vcpu->have_scratch;
		case PTREGS_R13: *v = st->vcpu->r13; return st->vcpu->have_scratch;
		case PTREGS_DX: *v = st->vcpu->rdx; return st->vcpu->have_scratch;
		case PTREGS_DI: *v = st->vcpu->rdi; return st->vcpu->have_scratch;
		default: return false;
		}
	}
	if (!st->regs || (!st->full_regs && off < PTREGS_IP))
		return false;
	return orc_read(mem, pg, st->regs + off, v);
}

#define ORC_GO_ON (-1) /* a step's result: the walk continues */

/* The caller's stack pointer of the frame @e describes (before the indirection, if any). */
static int orc_frame_sp(const struct gmem *mem, const struct gi_paging *pg, struct orc_state *st,
			const struct gi_orc_entry *e, uint64_t *sp)
{
	static const unsigned int off[] = { [REG_DX] = PTREGS_DX, [REG_DI] = PTREGS_DI,
					    [REG_R10] = PTREGS_R10, [REG_R13] = PTREGS_R13 };

	switch (e->sp_reg) {
	case REG_SP:
		*sp = st->sp + (uint64_t)(int64_t)e->sp_offset;
		return ORC_GO_ON;
	case REG_BP:
		*sp = st->bp + (uint64_t)(int64_t)e->sp_offset;
		return ORC_GO_ON;
	case REG_SP_INDIRECT:
		if (!orc_read(mem, pg, st->sp, sp))
			return HVP_WALK_FAULT;
		*sp += (uint64_t)(int64_t)e->sp_offset;
		return ORC_GO_ON;
	case REG_BP_INDIRECT:
		if (!orc_read(mem, pg, st->bp + (uint64_t)(int64_t)e->sp_offset, sp))
			return HVP_WALK_FAULT;
		return ORC_GO_ON;
	case REG_R10:
	case REG_R13:
	case REG_DI:
	case REG_DX:
		/* SAFETY: e->sp_reg is one of the four indices of off[] here. */
		if (!orc_get_reg(mem, pg, st, off[e->sp_reg], sp))
			return HVP_WALK_BAD_FP;
		return ORC_GO_ON;
	default:
		return HVP_WALK_BAD_FP;
	}
}

/* Step to the caller's ip and sp by the frame's type; counts stack switches. */
static int orc_frame_step(const struct gmem *mem, const struct gi_paging *pg,
			  struct orc_state *st, const struct gi_orc_entry *e, uint64_t sp,
			  unsigned int *switches)
{
	uint64_t cs;

	switch (e->type) {
	case GI_ORC_CALL:
		if (!orc_read(mem, pg, sp - 8, &st->ip))
			return HVP_WALK_FAULT;
		st->sp = sp;
		st->regs = 0;
		st->signal = false;
		return ORC_GO_ON;
	case GI_ORC_REGS:
		/* A full pt_regs at sp: the interrupted context. */
		if (!orc_read(mem, pg, sp + PTREGS_IP, &st->ip) ||
		    !orc_read(mem, pg, sp + PTREGS_SP, &st->sp) ||
		    !orc_read(mem, pg, sp + PTREGS_CS, &cs))
			return HVP_WALK_FAULT;
		if (cs & 3)
			return HVP_WALK_END; /* it interrupted user mode: the kernel part ends */
		st->regs = sp;
		st->full_regs = true;
		break;
	case GI_ORC_REGS_PARTIAL:
		/* Only the iret frame (ip, cs, flags, sp, ss) at sp. */
		if (!orc_read(mem, pg, sp, &st->ip) || !orc_read(mem, pg, sp + 8, &cs) ||
		    !orc_read(mem, pg, sp + 24, &st->sp))
			return HVP_WALK_FAULT;
		if (cs & 3)
			return HVP_WALK_END;
		st->regs = sp - PTREGS_IP;
		st->full_regs = false;
		break;
	default:
		return HVP_WALK_BAD_FP;
	}
	st->signal = true;
	(*switches)++;
	return ORC_GO_ON;
}

/* The caller's frame pointer. */
static int orc_frame_bp(const struct gmem *mem, const struct gi_paging *pg, struct orc_state *st,
			const struct gi_orc_entry *e, uint64_t sp)
{
	uint64_t tmp;

	switch (e->bp_reg) {
	case REG_UNDEFINED:
		if (orc_get_reg(mem, pg, st, PTREGS_BP, &tmp))
			st->bp = tmp;
		return ORC_GO_ON;
	case REG_PREV_SP:
		if (!orc_read(mem, pg, sp + (uint64_t)(int64_t)e->bp_offset, &st->bp))
			return HVP_WALK_FAULT;
		return ORC_GO_ON;
	case REG_BP:
		if (!orc_read(mem, pg, st->bp + (uint64_t)(int64_t)e->bp_offset, &st->bp))
			return HVP_WALK_FAULT;
		return ORC_GO_ON;
	default:
		return HVP_WALK_BAD_FP;
	}
}

#define ENTRY_FRAME_MAX_CALLS 8 /* call frames between a sample and its entry's frame */

int gi_orc_entry_frame(const struct gi *gi, const struct gmem *mem, const struct gi_regs *regs,
		       struct gi_orc_entry_frame *out)
{
	struct orc_state st;
	const struct gi_paging *pg;

	if (!gi || !mem || !regs || !out)
		return -EINVAL;
	if (!gi->orc || __atomic_load_n(&gi->slide_state, __ATOMIC_ACQUIRE) == GI_SLIDE_UNKNOWN)
		return -ENOTSUP;
	pg = &regs->pg;
	memset(&st, 0, sizeof(st));
	st.ip = regs->rip;
	st.sp = regs->rsp;
	st.bp = regs->rbp;
	st.signal = true;
	st.vcpu = regs;
	for (unsigned int i = 0; i <= ENTRY_FRAME_MAX_CALLS; i++) {
		struct gi_orc_entry e;
		uint64_t sp, cs;
		int step;

		if (gi_orc_find(gi->orc, (st.signal ? st.ip : st.ip - 1) - gi_slide(gi), &e) != 0)
			return -EBADMSG;
		if (e.type == GI_ORC_END || e.type == GI_ORC_UNDEFINED ||
		    e.sp_reg == REG_UNDEFINED)
			return -EAGAIN;
		step = orc_frame_sp(mem, pg, &st, &e, &sp);
		if (step != ORC_GO_ON)
			return step == HVP_WALK_FAULT ? -EFAULT : -EBADMSG;
		st.vcpu = NULL;
		switch (e.type) {
		case GI_ORC_REGS:
			if (!orc_read(mem, pg, sp + PTREGS_CS, &cs))
				return -EFAULT;
			*out = (struct gi_orc_entry_frame){ .regs = sp, .full = true, .first = i == 0,
							    .user = (cs & 3) == 3 };
			return 0;
		case GI_ORC_REGS_PARTIAL:
			if (!orc_read(mem, pg, sp + 8, &cs))
				return -EFAULT;
			*out = (struct gi_orc_entry_frame){ .regs = sp - PTREGS_IP, .full = false,
							    .first = i == 0,
							    .user = (cs & 3) == 3 };
			return 0;
		case GI_ORC_CALL:
			break;
		default:
			return -EBADMSG;
		}
		if (!orc_read(mem, pg, sp - 8, &st.ip))
			return -EFAULT;
		if (sp <= st.sp || !gi_in_kernel_text(gi, st.ip))
			return -EBADMSG;
		st.sp = sp;
		st.signal = false;
		/* the caller's bp, where the next frame may find its sp (REG_BP) */
		step = orc_frame_bp(mem, pg, &st, &e, sp);
		if (step != ORC_GO_ON)
			return step == HVP_WALK_FAULT ? -EFAULT : -EBADMSG;
	}
	return -ELOOP;
}

enum hvp_walk_stop gi_unwind_kernel_orc(const struct gi *gi, const struct gmem *mem,
					const struct gi_regs *regs, uint64_t *ips,
					unsigned int max, unsigned int *n)
{
	struct orc_state st;
	const struct gi_paging *pg;
	unsigned int switches = 0;

	if (n)
		*n = 0;
	if (!gi || !gi->orc || !mem || !regs || !ips || !n || max == 0)
		return HVP_WALK_NONE;
	pg = &regs->pg;
	ips[0] = regs->rip;
	*n = 1;
	/* ORC data is at link-time addresses: without the slide nothing can be looked up (a
	 * guest-chosen slide, before the guest has set MSR_LSTAR). */
	if (__atomic_load_n(&gi->slide_state, __ATOMIC_ACQUIRE) == GI_SLIDE_UNKNOWN)
		return HVP_WALK_BAD_FP;
	memset(&st, 0, sizeof(st));
	st.ip = regs->rip;
	st.sp = regs->rsp;
	st.bp = regs->rbp;
	st.signal = true; /* a sample interrupts the kernel at @ip itself */
	st.vcpu = regs;

	while (*n < max) {
		struct gi_orc_entry e;
		uint64_t sp, prev_sp = st.sp;
		int stop;

		/* For a return address, the call instruction's entry (ip - 1) describes the frame. */
		if (gi_orc_find(gi->orc, (st.signal ? st.ip : st.ip - 1) - gi_slide(gi), &e) != 0)
			return HVP_WALK_BAD_FP; /* no ORC data there: not kernel text we know */
		if (e.type == GI_ORC_END)
			return HVP_WALK_END;
		if (e.type == GI_ORC_UNDEFINED || e.sp_reg == REG_UNDEFINED)
			return HVP_WALK_BAD_FP;
		stop = orc_frame_sp(mem, pg, &st, &e, &sp);
		if (stop == ORC_GO_ON)
			stop = orc_frame_step(mem, pg, &st, &e, sp, &switches);
		st.vcpu = NULL; /* from here on, registers come from the stack */
		if (stop == ORC_GO_ON)
			stop = orc_frame_bp(mem, pg, &st, &e, sp);
		if (stop != ORC_GO_ON)
			return (enum hvp_walk_stop)stop;

		/*
		 * Hostile or stale stacks: a call frame must move up its stack; an interrupt frame
		 * may switch stacks, a bounded number of times; every ip must be kernel text.
		 */
		if ((e.type == GI_ORC_CALL && st.sp <= prev_sp) || switches > ORC_MAX_STACK_SWITCHES)
			return HVP_WALK_BAD_FP;
		if (!gi_in_kernel_text(gi, st.ip))
			return st.ip == 0 ? HVP_WALK_END : HVP_WALK_BAD_FP;
		ips[(*n)++] = st.ip;
	}
	return HVP_WALK_DEPTH;
}
