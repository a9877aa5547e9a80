// SPDX-License-Identifier: MIT
// The USER_STACK record of a cookie: a user-stack walk from the given user registers through
// the thread's page tables (guestinfo), bounded by HVP_MAX_CALLCHAIN frames.
#define pr_fmt(fmt) "sampler: ustack: " fmt
#include <string.h>

#include <hvprof/log.h>

#include "sampler_internal.h"

void emit_user_stack(struct svcpu *sv, uint64_t cookie, int32_t pid, const struct gi_paging *pg,
		     const struct gi_user_regs *ur)
{
	struct hvp_user_stack *u = &sv->ustack;
	enum hvp_walk_stop why;
	unsigned int n = 0;

	u->time_ns = vmm_now_ns() - sampler_start_ns(sv->s);
	u->cookie = cookie;
	u->pid = pid;
	u->vcpu = sv->index;
	why = gi_unwind_user(sv->s->mem, pg, ur->ip, ur->sp, ur->bp, u->user_ips, HVP_MAX_CALLCHAIN,
			     &n);
	u->n_user = (uint16_t)n;
	u->stop = (uint8_t)why;
	count_walk_stop(sv, why, true);
	sampler_emit_user_stack(sv, u);
}
