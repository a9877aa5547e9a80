// SPDX-License-Identifier: MIT
// Return-to-user instructions (sysretq, sysretl, iretq) on the kernel's exit paths, found with
// capstone by following the entry code's control flow from known starting points.
#define pr_fmt(fmt) "exitsites: " fmt

#include <capstone/capstone.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#define EXIT_MAX_INSNS 4096     /* instructions decoded in all */
#define EXIT_MAX_WORK 512       /* pending branch targets */
#define EXIT_MAX_SITES 64       /* distinct sites kept internally */
#define EXIT_MAX_INSN_LEN 15    /* x86 instruction length limit (SDM vol. 2, 2.3.11) */
#define EXIT_MAX_SPAN (64u << 10) /* a branch target farther than this from its start is ignored */

/*
 * The labels of the x86-64 exit paths (arch/x86/entry/entry_64.S and entry_64_compat.S,
 * 5.x-6.x). Any that exist are starting points; missing ones are simply not used.
 */
static const char *const exit_path_symbols[] = {
	"entry_SYSCALL_64",
	"entry_SYSCALL_64_after_hwframe",
	"entry_SYSRETQ_unsafe_stack",
	"swapgs_restore_regs_and_return_to_usermode",
	"common_interrupt_return",
	"native_iret",
	"native_irq_return_iret",
	"entry_SYSCALL_compat",
	"entry_SYSCALL_compat_after_hwframe",
	"entry_SYSRETL_compat_unsafe_stack",
	"entry_SYSENTER_compat",
	"entry_SYSENTER_compat_after_hwframe",
	"entry_INT80_compat",
};

const char *gi_exit_kind_name(enum gi_exit_kind kind)
{
	switch (kind) {
	case GI_EXIT_SYSRETQ:
		return "sysretq";
	case GI_EXIT_SYSRETL:
		return "sysretl";
	case GI_EXIT_IRETQ:
		return "iretq";
	default:
		return "?";
	}
}

struct exit_walk {
	gi_kva_read_fn read;
	void *ctx;
	csh cs;
	uint64_t work[EXIT_MAX_WORK];
	uint64_t origin[EXIT_MAX_WORK]; /* the start each target was reached from */
	size_t n_work;
	uint64_t *seen; /* starts already decoded (sorted insertion is not needed: small) */
	size_t n_seen, cap_seen;
	struct { uint64_t kva; enum gi_exit_kind kind; } sites[EXIT_MAX_SITES];
	size_t n_sites;
	unsigned int insns;
};

static bool exit_seen(struct exit_walk *w, uint64_t kva)
{
	for (size_t i = 0; i < w->n_seen; i++)
		if (w->seen[i] == kva)
			return true;
	if (w->n_seen == w->cap_seen) {
		size_t ncap = w->cap_seen ? w->cap_seen * 2 : 64;
		uint64_t *p = realloc(w->seen, ncap * sizeof(*p));

		if (!p)
			return true; /* out of memory: treat as seen, the walk just covers less */
		w->seen = p;
		w->cap_seen = ncap;
	}
	w->seen[w->n_seen++] = kva;
	return false;
}

static void exit_push(struct exit_walk *w, uint64_t kva, uint64_t origin)
{
	if (w->n_work < EXIT_MAX_WORK) {
		w->work[w->n_work] = kva;
		w->origin[w->n_work] = origin;
		w->n_work++;
	}
}

static void exit_add_site(struct exit_walk *w, uint64_t kva, enum gi_exit_kind kind)
{
	for (size_t i = 0; i < w->n_sites; i++)
		if (w->sites[i].kva == kva)
			return;
	if (w->n_sites < EXIT_MAX_SITES) {
		w->sites[w->n_sites].kva = kva;
		w->sites[w->n_sites].kind = kind;
		w->n_sites++;
	}
}

/*
 * Classify @insn. Return: 1 ends the straight-line run, 0 continues; *@target: a direct branch
 * target to follow (0 if none).
 */
static int exit_step(struct exit_walk *w, const cs_insn *insn, uint64_t *target)
{
	const cs_x86 *x = &insn->detail->x86;

	*target = 0;
	switch (insn->id) {
	case X86_INS_SYSRET:
		/* REX.W (48) selects the 64-bit form; without it, the compat return. */
		exit_add_site(w, insn->address,
			      (x->rex & 0x08) ? GI_EXIT_SYSRETQ : GI_EXIT_SYSRETL);
		return 1;
	case X86_INS_IRETQ:
		exit_add_site(w, insn->address, GI_EXIT_IRETQ);
		return 1;
	case X86_INS_IRET:
	case X86_INS_IRETD:
	case X86_INS_RET:
	case X86_INS_RETF:
	case X86_INS_UD2:
	case X86_INS_INT3:
	case X86_INS_HLT:
		return 1;
	case X86_INS_JMP:
		if (x->op_count == 1 && x->operands[0].type == X86_OP_IMM)
			*target = (uint64_t)x->operands[0].imm;
		return 1; /* direct or indirect: the run ends here */
	default:
		break;
	}
	if (cs_insn_group(w->cs, insn, X86_GRP_JUMP) && x->op_count == 1 &&
	    x->operands[0].type == X86_OP_IMM)
		*target = (uint64_t)x->operands[0].imm; /* jcc/jrcxz/loop: both ways */
	return 0;
}

/* Decode straight-line code from @start until a run ends or the budget is spent. */
static void exit_run(struct exit_walk *w, uint64_t start, uint64_t origin)
{
	uint8_t buf[256];
	uint64_t pc = start;
	cs_insn *insn = cs_malloc(w->cs);

	if (!insn)
		return;
	while (w->insns < EXIT_MAX_INSNS) {
		const uint8_t *code = buf;
		size_t avail = sizeof(buf);
		uint64_t addr = pc;
		bool stop = false;

		/* Near the end of a section a full buffer may not be readable: shrink. */
		while (avail >= EXIT_MAX_INSN_LEN && w->read(w->ctx, pc, buf, avail) != 0)
			avail /= 2;
		if (avail < EXIT_MAX_INSN_LEN)
			break;
		while (!stop && w->insns < EXIT_MAX_INSNS &&
		       cs_disasm_iter(w->cs, &code, &avail, &addr, insn)) {
			uint64_t target;

			w->insns++;
			stop = exit_step(w, insn, &target) != 0;
			if (target && (target > origin ? target - origin : origin - target) <= EXIT_MAX_SPAN)
				exit_push(w, target, origin);
			if (avail < EXIT_MAX_INSN_LEN && !stop)
				break; /* refill */
		}
		if (stop || addr == pc)
			break; /* run ended, or an undecodable instruction */
		pc = addr;
	}
	cs_free(insn, 1);
}

static int exit_cmp_kva(const void *a, const void *b)
{
	const struct gi_exit_site *x = a, *y = b;

	return x->kva < y->kva ? -1 : x->kva > y->kva;
}

int gi_exit_sites(const struct symtab *st, gi_kva_read_fn read, void *ctx, const uint64_t *starts,
		  size_t n_starts, uint64_t slide, struct gi_exit_site *out, size_t max, size_t *n)
{
	struct exit_walk *w;
	struct gi_exit_site *all;
	int err = 0;

	if (!read || !n || (!out && max) || (!starts && n_starts))
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->read = read;
	w->ctx = ctx;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &w->cs) != CS_ERR_OK) {
		free(w);
		return -ENOMEM;
	}
	cs_option(w->cs, CS_OPT_DETAIL, CS_OPT_ON);

	for (size_t i = 0; st && i < sizeof(exit_path_symbols) / sizeof(exit_path_symbols[0]); i++) {
		uint64_t kva;

		if (symtab_find(st, exit_path_symbols[i], &kva) == 0)
			exit_push(w, kva, kva);
	}
	for (size_t i = 0; i < n_starts; i++)
		exit_push(w, starts[i], starts[i]);
	if (!w->n_work) {
		err = -ENOENT;
		goto out;
	}
	/* Depth-first over branch targets; each start decoded once. */
	while (w->n_work && w->insns < EXIT_MAX_INSNS) {
		uint64_t pc, origin;

		w->n_work--;
		pc = w->work[w->n_work];
		origin = w->origin[w->n_work];
		if (exit_seen(w, pc))
			continue;
		exit_run(w, pc, origin);
	}
	if (!w->n_sites) {
		err = -ENOENT;
		goto out;
	}
	all = calloc(w->n_sites, sizeof(*all));
	if (!all) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < w->n_sites; i++) {
		const char *name;
		uint64_t off;

		all[i].kva = w->sites[i].kva + slide;
		all[i].kind = w->sites[i].kind;
		if (st && symtab_lookup(st, w->sites[i].kva, &name, &off) == 0) {
			snprintf(all[i].symbol, sizeof(all[i].symbol), "%s", name);
			all[i].sym_off = off;
		}
	}
	qsort(all, w->n_sites, sizeof(*all), exit_cmp_kva);
	for (size_t i = 0; i < w->n_sites && i < max; i++)
		out[i] = all[i];
	*n = w->n_sites;
	free(all);
out:
	cs_close(&w->cs);
	free(w->seen);
	free(w);
	return err;
}
