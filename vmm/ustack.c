// SPDX-License-Identifier: MIT
// User-stack walks of the vmm: where a walk starts (the user registers saved at kernel entry,
// pt_regs at the top of the task's kernel stack) and the USER_STACK record of a cookie.
#define pr_fmt(fmt) "vmm: ustack: " fmt
#include <errno.h>
#include <string.h>

#include <hvprof/log.h>

#include "vmm_internal.h"

#define THREAD_SIZE_X86_64 16384 /* kernel stack size of x86-64 (THREAD_SIZE, no KASAN) */

/*
 * struct pt_regs sits at task->stack + THREAD_SIZE - sizeof(pt_regs) (x86-64 has no top padding,
 * arch/x86/include/asm/processor.h task_pt_regs()); offsets come from BTF.
 */
int user_regs_at_entry(struct vmm *vm, const struct gi_paging *pg, uint64_t task,
		       struct user_regs *ur)
{
	const struct gi_layout *l = gi_layout(vm->gi);
	uint64_t stack, regs_kva, cs;
	uint8_t buf[512];

	if (l->pt_regs_size == UINT32_MAX || l->pt_regs_size == 0 ||
	    l->pt_regs_size > sizeof(buf) || l->task_stack == UINT32_MAX ||
	    l->pt_regs_ip + 8 > l->pt_regs_size || l->pt_regs_sp + 8 > l->pt_regs_size ||
	    l->pt_regs_bp + 8 > l->pt_regs_size || l->pt_regs_cs + 8 > l->pt_regs_size)
		return -ENODATA;
	if (gi_read_gva(&vm->gmem, pg, task + l->task_stack, &stack, sizeof(stack)) != 0)
		return -EFAULT;
	if (stack < 0xffff800000000000ull || (stack & (THREAD_SIZE_X86_64 - 1)))
		return -EBADMSG;
	regs_kva = stack + THREAD_SIZE_X86_64 - l->pt_regs_size;
	/* SAFETY: pt_regs_size <= sizeof(buf) and every field offset + 8 <= pt_regs_size. */
	if (gi_read_gva(&vm->gmem, pg, regs_kva, buf, l->pt_regs_size) != 0)
		return -EFAULT;
	memcpy(&cs, buf + l->pt_regs_cs, 8);
	if ((cs & 3) != 3)
		return -ENOENT; /* not entered from user mode (kernel thread, or not yet) */
	memcpy(&ur->ip, buf + l->pt_regs_ip, 8);
	memcpy(&ur->sp, buf + l->pt_regs_sp, 8);
	memcpy(&ur->bp, buf + l->pt_regs_bp, 8);
	return 0;
}

void emit_user_stack(struct vcpu *vcpu, uint64_t cookie, int32_t pid, const struct gi_paging *pg,
		     const struct user_regs *ur)
{
	struct vmm *vm = vcpu->vm;
	struct hvp_user_stack *u = &vcpu->ustack;
	enum hvp_walk_stop why;
	unsigned int n = 0;

	u->time_ns = vmm_now_ns() - vm->t_start_ns;
	u->cookie = cookie;
	u->pid = pid;
	u->vcpu = vcpu->index;
	why = gi_unwind_user(&vm->gmem, pg, ur->ip, ur->sp, ur->bp, u->user_ips, HVP_MAX_CALLCHAIN,
			     &n);
	u->n_user = (uint16_t)n;
	u->stop = (uint8_t)why;
	switch (why) {
	case HVP_WALK_FAULT:
		vcpu->c.user_walk_fault++;
		break;
	case HVP_WALK_BAD_FP:
		vcpu->c.user_walk_bad_fp++;
		break;
	case HVP_WALK_DEPTH:
		vcpu->c.user_walk_depth++;
		break;
	default:
		break;
	}
	if (vm->cfg.sink->user_stack && vm->cfg.sink->user_stack(vm->cfg.sink->ctx, u) != 0) {
		vcpu->c.samples_sink_errors++;
		vmm_end(vm, HVP_END_ERROR, -1, "the recording could not be written");
	}
}
