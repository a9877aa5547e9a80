// SPDX-License-Identifier: MIT
// The interrupt and exception handlers' code after their exit work (guest-visible marks): each
// C handler of an IDT entry (arch/x86/include/asm/idtentry.h: exc_page_fault, sysvec_*,
// common_interrupt, ...) ends with a call of irqentry_exit (kernel/entry/common.c), or of
// irqentry_exit_to_user_mode for the few that tell user from kernel mode themselves, and then
// returns to its assembly stub, which jumps to error_return. On the way to user mode the thread
// reads its work flags for the last time inside that call: a flag set at a sample in the
// handler's few instructions after it acts only at the next exit. Those instructions are found
// here with capstone in the noinstr text ([__noinstr_text_start, __noinstr_text_end), where
// the generic entry code and every IDT handler live).
#define pr_fmt(fmt) "exitepilogue: " fmt

#include <capstone/capstone.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "gi_internal.h"

#define EPI_TEXT_MAX (1u << 20) /* noinstr text decoded at most (6.1: ~9 KiB, stock ~60 KiB) */
#define EPI_INSNS_MAX 32        /* instructions of one epilogue followed at most */
#define EPI_HOPS_MAX 2          /* forward jumps to a shared epilogue followed */

struct epi_scan {
	const uint8_t *code;
	uint64_t lo, hi;    /* [lo, hi): the decoded text, link-time */
	uint64_t target[2]; /* irqentry_exit, irqentry_exit_to_user_mode (0: absent) */
	const struct symtab *st;
	csh cs;
	cs_insn *insn;
	uint64_t (*r)[2];
	size_t n, cap;
};

static int epi_add(struct epi_scan *sc, uint64_t start, uint64_t end)
{
	if (end <= start)
		return 0;
	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? 2 * sc->cap : 64;
		uint64_t(*r)[2] = realloc(sc->r, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		sc->r = r;
		sc->cap = cap;
	}
	sc->r[sc->n][0] = start;
	sc->r[sc->n][1] = end;
	sc->n++;
	return 0;
}

/* The function (symbol) @kva is in: its start, 0 if none. */
static uint64_t epi_func(const struct symtab *st, uint64_t kva)
{
	const char *name;
	uint64_t off;

	return symtab_lookup(st, kva, &name, &off) == 0 ? kva - off : 0;
}

/*
 * The epilogue from @at (the instruction after the call) on: straight-line code up to and
 * including the return, a jump elsewhere, EPI_INSNS_MAX instructions, or the next function's
 * start; a forward jump within the same function (a shared epilogue) is followed, at most
 * EPI_HOPS_MAX times. Conditional branches are passed through (either way the exit work is
 * done).
 */
static int epi_follow(struct epi_scan *sc, uint64_t at)
{
	uint64_t func = epi_func(sc->st, at), start = at, addr = at;
	unsigned int hops = 0;
	const uint8_t *p = sc->code + (at - sc->lo);
	size_t avail = sc->hi - at;
	int err;

	for (unsigned int i = 0; i < EPI_INSNS_MAX && cs_disasm_iter(sc->cs, &p, &avail, &addr,
								      sc->insn); i++) {
		uint64_t end = sc->insn->address + sc->insn->size, t;

		if (epi_func(sc->st, sc->insn->address) != func)
			return epi_add(sc, start, sc->insn->address); /* ran into the next one */
		if (sc->insn->id == X86_INS_RET)
			return epi_add(sc, start, end);
		if (sc->insn->id != X86_INS_JMP)
			continue;
		t = gi_insn_target(sc->insn);
		err = epi_add(sc, start, end);
		if (err || !t || t <= sc->insn->address || t >= sc->hi || hops == EPI_HOPS_MAX ||
		    epi_func(sc->st, t) != func)
			return err; /* a tail call, an indirect jump (a return thunk) or a loop */
		hops++;
		start = addr = t;
		p = sc->code + (t - sc->lo);
		avail = sc->hi - t;
	}
	return epi_add(sc, start, addr);
}

static int epi_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sort and merge overlapping or touching spans into @out. */
static void epi_finish(struct epi_scan *sc, struct gi_spans *out)
{
	size_t w = 0;

	qsort(sc->r, sc->n, sizeof(*sc->r), epi_cmp);
	for (size_t i = 0; i < sc->n; i++) {
		if (w && sc->r[i][0] <= sc->r[w - 1][1]) {
			if (sc->r[i][1] > sc->r[w - 1][1])
				sc->r[w - 1][1] = sc->r[i][1];
			continue;
		}
		sc->r[w][0] = sc->r[i][0];
		sc->r[w][1] = sc->r[i][1];
		w++;
	}
	out->r = sc->r;
	out->n = w;
	out->lo = sc->r[0][0];
	out->hi = sc->r[w - 1][1];
	sc->r = NULL;
}

int gi_exit_epilogues_find(const struct symtab *st, gi_kva_read_fn read, void *ctx,
			   struct gi_spans *out)
{
	struct epi_scan sc = { .st = st };
	const uint8_t *p;
	uint8_t *code = NULL;
	uint64_t addr;
	size_t avail;
	int err;

	if (!st || !read || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (symtab_find(st, "__noinstr_text_start", &sc.lo) ||
	    symtab_find(st, "__noinstr_text_end", &sc.hi) || sc.hi <= sc.lo)
		return -ENOENT;
	if (sc.hi - sc.lo > EPI_TEXT_MAX)
		return -E2BIG;
	if (symtab_find(st, "irqentry_exit", &sc.target[0]))
		sc.target[0] = 0;
	if (symtab_find(st, "irqentry_exit_to_user_mode", &sc.target[1]))
		sc.target[1] = 0;
	if (!sc.target[0] && !sc.target[1])
		return -ENOENT;
	code = malloc(sc.hi - sc.lo);
	if (!code)
		return -ENOMEM;
	if (read(ctx, sc.lo, code, sc.hi - sc.lo) != 0) {
		free(code);
		return -EFAULT;
	}
	sc.code = code;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &sc.cs) != CS_ERR_OK) {
		free(code);
		return -ENOMEM;
	}
	cs_option(sc.cs, CS_OPT_DETAIL, CS_OPT_ON);
	err = -ENOMEM;
	sc.insn = cs_malloc(sc.cs);
	if (!sc.insn)
		goto out;
	err = 0;
	p = code;
	avail = sc.hi - sc.lo;
	addr = sc.lo;
	while (avail && !err) {
		uint64_t t, next;

		if (!cs_disasm_iter(sc.cs, &p, &avail, &addr, sc.insn)) {
			p++; /* not an instruction (padding, data): resynchronise one byte on */
			avail--;
			addr++;
			continue;
		}
		if (sc.insn->id != X86_INS_CALL)
			continue;
		t = gi_insn_target(sc.insn);
		next = sc.insn->address + sc.insn->size;
		if (t && (t == sc.target[0] || t == sc.target[1]) && next < sc.hi)
			err = epi_follow(&sc, next); /* decodes on its own pointers */
	}
	if (!err && !sc.n)
		err = -ENOENT;
	if (!err)
		epi_finish(&sc, out);
	if (err)
		pr_debug(LOG_KSYM, "noinstr text [0x%llx, 0x%llx): no handler code after "
			 "irqentry_exit found: %s", (unsigned long long)sc.lo,
			 (unsigned long long)sc.hi, hvp_strerror(err));
out:
	cs_free(sc.insn, sc.insn ? 1 : 0);
	cs_close(&sc.cs);
	free(sc.r);
	free(code);
	return err;
}

bool gi_spans_has(const struct gi_spans *s, uint64_t kva)
{
	size_t lo = 0, hi;

	if (!s || !s->n || kva < s->lo || kva >= s->hi)
		return false;
	hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (kva < s->r[mid][0])
			hi = mid;
		else if (kva >= s->r[mid][1])
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

void gi_spans_free(struct gi_spans *s)
{
	if (!s)
		return;
	free(s->r);
	memset(s, 0, sizeof(*s));
}
