// SPDX-License-Identifier: MIT
// The user part of a walk as records: the USER_STACK record of a cookie (a frame-pointer walk from
// the given user registers through the thread's page tables, bounded by HVP_MAX_CALLCHAIN
// frames), and the USER_REGS record every user walk carries: the registers in DWARF order and
// a copy of the stack above RSP (s->ustack_size bytes: the SIZE of --call-graph dwarf, or
// HVP_USER_STACK_FP_WINDOW in fp mode), for unwinding from CFI in the report.
#define pr_fmt(fmt) "sampler: ustack: " fmt
#include <errno.h>
#include <string.h>

#include <hvprof/log.h>

#include "sampler_internal.h"

void user_regs_from_vcpu(const struct kvm_regs *regs, uint64_t ip, uint64_t sp,
			 struct gi_user_regs *ur)
{
	*ur = (struct gi_user_regs){
		.ip = ip, .sp = sp, .bp = regs->rbp,
		.ax = regs->rax, .bx = regs->rbx, .cx = regs->rcx, .dx = regs->rdx,
		.si = regs->rsi, .di = regs->rdi, .r8 = regs->r8, .r9 = regs->r9,
		.r10 = regs->r10, .r11 = regs->r11, .r12 = regs->r12, .r13 = regs->r13,
		.r14 = regs->r14, .r15 = regs->r15,
	};
}

/* DWARF x86-64 register numbering (System V psABI, "DWARF Register Number Mapping"). */
static void dwarf_regs(const struct gi_user_regs *ur, uint64_t regs[HVP_USER_NREGS])
{
	regs[HVP_REG_RAX] = ur->ax;
	regs[HVP_REG_RDX] = ur->dx;
	regs[HVP_REG_RCX] = ur->cx;
	regs[HVP_REG_RBX] = ur->bx;
	regs[HVP_REG_RSI] = ur->si;
	regs[HVP_REG_RDI] = ur->di;
	regs[HVP_REG_RBP] = ur->bp;
	regs[HVP_REG_RSP] = ur->sp;
	regs[HVP_REG_R8] = ur->r8;
	regs[HVP_REG_R9] = ur->r9;
	regs[HVP_REG_R10] = ur->r10;
	regs[HVP_REG_R11] = ur->r11;
	regs[HVP_REG_R12] = ur->r12;
	regs[HVP_REG_R13] = ur->r13;
	regs[HVP_REG_R14] = ur->r14;
	regs[HVP_REG_R15] = ur->r15;
	regs[HVP_REG_RIP] = ur->ip;
}

uint64_t ustack_end(struct svcpu *sv, const struct gi_paging *pg, uint64_t task, uint64_t mm)
{
	uint64_t end;

	/* a copy no longer than the slack (the fp window) is never bounded: nothing to read */
	if (!task || !mm || sv->s->ustack_size <= SAMPLER_USTACK_END_SLACK ||
	    gi_task_user_stack_end(sv->s->gi, sv->s->mem, pg, &sv->tasks, task, mm, &end) != 0)
		return 0;
	return end;
}

/* How many bytes from @sp a copy takes: s->ustack_size, or up to @end + the slack when closer. */
static uint32_t copy_size(const struct svcpu *sv, uint64_t sp, uint64_t end)
{
	uint32_t size = sv->s->ustack_size;

	/* SAFETY: end - sp < size - slack <= UINT32_MAX: the sum below fits; rounded up to 8
	 * (sp is checked 8-aligned by the copy; @end is the guest's and may not be) */
	if (end >= sp && size > SAMPLER_USTACK_END_SLACK &&
	    end - sp < size - SAMPLER_USTACK_END_SLACK)
		return ((uint32_t)(end - sp) + SAMPLER_USTACK_END_SLACK + 7u) & ~7u;
	return size;
}

void user_regs_take(struct svcpu *sv, struct hvp_user_regs *r, uint8_t *buf,
		    struct hvp_bytes *segs, const struct gi_paging *pg,
		    const struct gi_user_regs *ur, bool copy, uint64_t stack_end)
{
	struct sampler *s = sv->s;
	unsigned int n = 0;
	uint32_t len = 0, size;
	int err;

	r->vcpu = sv->index;
	r->stack_size = s->ustack_size;
	r->stack = buf;
	r->stack_segs = NULL;
	r->n_stack_segs = 0;
	dwarf_regs(ur, r->regs);
	if (copy && buf) {
		uint64_t k0 = stage_now(&s->clock);

		size = copy_size(sv, ur->sp, stack_end);
		/* In place where guest RAM can be (the writer copies the pages into the record
		 * once), else into @buf. Bounded: at most ustack_size bytes, one page walk per
		 * page. */
		err = segs ? gi_map_user_stack(s->mem, pg, ur->sp, size, segs, HVP_USER_STACK_SEGS,
					       &n, &len)
			   : -ENOTSUP;
		if (err == -ENOTSUP)
			err = gi_copy_user_stack(s->mem, pg, ur->sp, buf, size, &len);
		else if (!err && n) {
			r->stack = NULL;
			r->stack_segs = segs;
			r->n_stack_segs = n;
		}
		if (err)
			sv->c.user_stack_refused++;
		else if (len < size)
			sv->c.user_stack_short++;
		if (!err && size < s->ustack_size)
			sv->c.user_stack_bounded++; /* a copy refused is not one bounded */
		sv->c.user_stack_copies++;
		sv->c.user_stack_bytes += len;
		sv->c.user_stack_copy_ns += stage_ns(&s->clock, stage_now(&s->clock) - k0);
	} else {
		sv->c.user_stack_not_copied++;
	}
	r->stack_len = len;
}

enum hvp_walk_stop user_walk(struct svcpu *sv, const struct gi_paging *pg,
			     const struct gi_user_regs *ur, const struct hvp_user_regs *r,
			     uint64_t *ips, unsigned int *n, bool sample_space)
{
	/* the address space by its root too (PCID and PTI bits clear): a new process may get a
	 * freed mm_struct's address, not its page tables' */
	uint64_t root = (pg->user_cr3 ? pg->user_cr3 : pg->cr3) & 0x000fffffffffe000ull;
	struct gi_exec_cache *xc = sample_space ? gi_exec_cache_use(&sv->xcache, sv->sample_mm,
								    root, sv->sample_map_count)
						: NULL;
	enum hvp_walk_stop why;

	/* @r's stack starts at its RSP, ur->sp (user_regs_take) */
	why = gi_unwind_user_cached(sv->s->mem, pg, ur->ip, ur->sp, ur->bp, r, xc, ips,
				    HVP_MAX_CALLCHAIN, n);
	sv->c.user_exec_cache_hits = sv->xcache.hits;
	count_walk_stop(sv, why, true);
	return why;
}

void sample_regs_take(struct svcpu *sv, const struct gi_paging *pg, const struct gi_user_regs *ur,
		      uint64_t task, uint64_t mm)
{
	user_regs_take(sv, &sv->sample_regs, sv->sample_stack, sv->sample_segs, pg, ur, true,
		       ustack_end(sv, pg, task, mm));
	sv->sample_has_regs = true;
}

void emit_user_stack(struct svcpu *sv, uint64_t cookie, int32_t pid, const struct gi_paging *pg,
		     const struct gi_user_regs *ur, uint64_t task, uint64_t mm)
{
	struct hvp_user_stack *u = &sv->ustack;
	enum hvp_walk_stop why;
	unsigned int n = 0;

	u->time_ns = vmm_now_ns() - sampler_start_ns(sv->s);
	u->cookie = cookie;
	u->pid = pid;
	u->vcpu = sv->index;
	user_regs_take(sv, &sv->ustack_regs, sv->ustack_stack, sv->ustack_segs, pg, ur, true,
		       ustack_end(sv, pg, task, mm));
	why = user_walk(sv, pg, ur, &sv->ustack_regs, u->user_ips, &n, false);
	u->n_user = (uint16_t)n;
	u->stop = (uint8_t)why;
	sampler_emit_user_stack(sv, u, &sv->ustack_regs);
}
