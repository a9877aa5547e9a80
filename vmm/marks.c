// SPDX-License-Identifier: MIT
// Marks of deferred user callchains (../shared/DESIGN.md, mechanism 2-4): a table keyed by guest
// thread, shared by all vCPU threads under one mutex. A kernel-mode sample marks its thread and
// gets the mark's cookie; the thread's return to user (trap.c) resolves the mark by walking the
// user stack; a mark that waits too long, or is still pending at the end, is resolved from the
// user registers saved at kernel entry. Every mark ends in exactly one USER_STACK record.
#define pr_fmt(fmt) "vmm: marks: " fmt
#include <string.h>

#include <hvprof/log.h>

#include "vmm_internal.h"

#define MARKS_EXPIRE_PER_CALL 4 /* slots looked at per sample: bounded work */

static void emit_saved_entry_walk(struct vcpu *vcpu, const struct mark *mk);

void marks_init(struct marks *m)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	m->next_cookie = 1;
}

void marks_destroy(struct marks *m)
{
	pthread_mutex_destroy(&m->lock);
}

static struct mark *find(struct marks *m, uint64_t task, int32_t pid)
{
	if (!m->n_used)
		return NULL;
	for (unsigned int i = 0; i < MARKS_MAX; i++)
		if (m->slot[i].used && m->slot[i].task == task && m->slot[i].pid == pid)
			return &m->slot[i];
	return NULL;
}

static void release(struct marks *m, struct mark *mk)
{
	mk->used = false;
	m->n_used--;
	atomic_store(&m->pending, m->n_used);
}

/* Record @entry as the mark's entry registers and walk the user stack from them now. */
static void set_entry(struct vcpu *vcpu, struct mark *mk, const struct gi_paging *pg,
		      const struct user_regs *entry)
{
	unsigned int n = 0;

	mk->pg = *pg;
	mk->pg.cache = NULL; /* the cache is the sampling vCPU's own: not for later, other threads */
	mk->entry_ip = entry->ip;
	mk->entry_sp = entry->sp;
	mk->entry_bp = entry->bp;
	mk->entry_known = true;
	/* bounded: at most HVP_MAX_CALLCHAIN frames, each a bounded page walk */
	mk->entry_stop = (uint8_t)gi_unwind_user(&vcpu->vm->gmem, pg, entry->ip, entry->sp,
						 entry->bp, mk->entry_ips, HVP_MAX_CALLCHAIN, &n);
	mk->n_entry = (uint16_t)n;
}

uint64_t marks_take(struct vcpu *vcpu, uint64_t task, int32_t pid, const struct gi_paging *pg,
		    const struct user_regs *entry, bool entry_known, bool *is_new)
{
	struct marks *m = &vcpu->vm->marks;
	struct mark *mk, old;
	uint64_t cookie = 0;
	bool first;

	*is_new = false;
	pthread_mutex_lock(&m->lock);
	mk = find(m, task, pid);
	if (mk && entry_known && !mk->entry_known) {
		/* marked in the entry code: this later sample knows the entry's registers */
		set_entry(vcpu, mk, pg, entry);
	} else if (mk && entry_known &&
		   (mk->entry_ip != entry->ip || mk->entry_sp != entry->sp)) {
		/* Same stay in the kernel, other user registers: execve set up the new program
		 * (or the mark outlived an unseen return). The old mark ends with its walk; this
		 * sample starts a new one. */
		old = *mk;
		release(m, mk);
		pthread_mutex_unlock(&m->lock);
		emit_saved_entry_walk(vcpu, &old);
		vcpu->c.resolved_stale++;
		pthread_mutex_lock(&m->lock);
		mk = NULL;
	}
	if (mk) {
		cookie = mk->cookie;
		vcpu->c.marks_reused++;
		goto out;
	}
	for (unsigned int i = 0; i < MARKS_MAX; i++) {
		if (m->slot[i].used)
			continue;
		mk = &m->slot[i];
		mk->task = task;
		mk->pid = pid;
		mk->vcpu = vcpu->index;
		mk->cookie = m->next_cookie++;
		mk->t_ns = vmm_now_ns();
		mk->used = true;
		mk->pg = *pg;
		mk->pg.cache = NULL;
		mk->n_entry = 0;
		mk->entry_stop = HVP_WALK_LOST;
		mk->entry_known = false;
		mk->entry_ip = mk->entry_sp = mk->entry_bp = 0;
		if (entry_known)
			set_entry(vcpu, mk, pg, entry);
		first = m->n_used++ == 0;
		atomic_store(&m->pending, m->n_used);
		cookie = mk->cookie;
		*is_new = true;
		vcpu->c.marks++;
		if (first) {
			/* Other vCPUs arm their traps at their next exit: make it now, since the
			 * thread may return to user on any of them. */
			pthread_mutex_unlock(&m->lock);
			for (unsigned int v = 0; v < vcpu->vm->n_vcpus; v++)
				if (v != vcpu->index && vcpu->vm->vcpus[v].thread_started)
					pthread_kill(vcpu->vm->vcpus[v].thread, vmm_sig_kick);
			return cookie;
		}
		goto out;
	}
	vcpu->c.dropped_table_full++;
out:
	pthread_mutex_unlock(&m->lock);
	return cookie;
}

void marks_resolve_at_return(struct vcpu *vcpu, uint64_t task, int32_t pid,
			     const struct gi_paging *pg,
			     const struct user_regs *ur)
{
	struct marks *m = &vcpu->vm->marks;
	struct mark *mk, copy;

	if (!atomic_load(&m->pending)) {
		vcpu->c.traps_no_mark++;
		return;
	}
	pthread_mutex_lock(&m->lock);
	mk = find(m, task, pid);
	if (!mk) {
		pthread_mutex_unlock(&m->lock);
		vcpu->c.traps_no_mark++;
		return;
	}
	copy = *mk;
	release(m, mk);
	pthread_mutex_unlock(&m->lock);

	/* The registers about to be restored are those saved at the kernel entry we marked,
	 * unless that entry ended unseen (another vCPU had not armed yet), a signal frame was set
	 * up, or execve replaced the address space: then the walk made when the mark was taken
	 * tells the call path of the marked samples. */
	if (!copy.entry_known || (ur->ip == copy.entry_ip && ur->sp == copy.entry_sp)) {
		emit_user_stack(vcpu, copy.cookie, pid, pg, ur);
		vcpu->c.resolved_at_return++;
	} else {
		emit_saved_entry_walk(vcpu, &copy);
		vcpu->c.resolved_stale++;
	}
}

/* The walk made when the mark was taken, as the mark's USER_STACK record. */
static void emit_saved_entry_walk(struct vcpu *vcpu, const struct mark *mk)
{
	struct vmm *vm = vcpu->vm;
	struct hvp_user_stack *u = &vcpu->ustack;

	u->time_ns = vmm_now_ns() - vm->t_start_ns;
	u->cookie = mk->cookie;
	u->pid = mk->pid;
	u->vcpu = vcpu->index;
	u->stop = mk->entry_stop;
	u->n_user = mk->n_entry;
	memcpy(u->user_ips, mk->entry_ips, mk->n_entry * sizeof(u->user_ips[0]));
	if (vm->cfg.sink->user_stack && vm->cfg.sink->user_stack(vm->cfg.sink->ctx, u) != 0) {
		vcpu->c.samples_sink_errors++;
		vmm_end(vm, HVP_END_ERROR, -1, "the recording could not be written");
	}
}

/* Resolve @mk (already released) from its entry registers; check the task is still the same. */
static void resolve_from_entry(struct vmm *vm, struct vcpu *vcpu, const struct mark *mk)
{
	struct user_regs entry = { mk->entry_ip, mk->entry_sp, mk->entry_bp };
	struct hvp_thread t;

	if (gi_task_identity(vm->gi, &vm->gmem, &mk->pg, mk->task, &t, NULL) != 0 || t.pid != mk->pid) {
		struct hvp_user_stack u = { .time_ns = vmm_now_ns() - vm->t_start_ns,
					    .cookie = mk->cookie, .pid = mk->pid,
					    .vcpu = vcpu->index, .stop = HVP_WALK_LOST };

		vcpu->c.dropped_exited++;
		if (vm->cfg.sink->user_stack && vm->cfg.sink->user_stack(vm->cfg.sink->ctx, &u))
			vcpu->c.samples_sink_errors++;
		return;
	}
	if (!mk->entry_known && user_regs_at_entry(vm, &mk->pg, mk->task, &entry) != 0) {
		struct hvp_user_stack u = { .time_ns = vmm_now_ns() - vm->t_start_ns,
					    .cookie = mk->cookie, .pid = mk->pid,
					    .vcpu = vcpu->index, .stop = HVP_WALK_LOST };

		vcpu->c.dropped_no_regs++;
		if (vm->cfg.sink->user_stack && vm->cfg.sink->user_stack(vm->cfg.sink->ctx, &u))
			vcpu->c.samples_sink_errors++;
		return;
	}
	/* the thread is still in the kernel: pt_regs is complete now, and so is its memory */
	emit_user_stack(vcpu, mk->cookie, mk->pid, &mk->pg, &entry);
	vcpu->c.resolved_from_ptregs++;
}

void marks_expire(struct vcpu *vcpu, uint64_t now_ns)
{
	struct vmm *vm = vcpu->vm;
	struct marks *m = &vm->marks;
	struct mark expired[MARKS_EXPIRE_PER_CALL];
	unsigned int n = 0;

	if (!atomic_load(&m->pending))
		return;
	pthread_mutex_lock(&m->lock);
	for (unsigned int k = 0; k < MARKS_EXPIRE_PER_CALL; k++) {
		/* SAFETY: scan_next is reduced modulo MARKS_MAX. */
		struct mark *mk = &m->slot[m->scan_next++ % MARKS_MAX];

		if (mk->used && now_ns - mk->t_ns > vm->mark_timeout_ns) {
			expired[n++] = *mk;
			release(m, mk);
		}
	}
	pthread_mutex_unlock(&m->lock);
	for (unsigned int i = 0; i < n; i++)
		resolve_from_entry(vm, vcpu, &expired[i]);
}

void marks_flush(struct vmm *vm, struct vcpu *vcpu)
{
	struct marks *m = &vm->marks;

	for (unsigned int i = 0; i < MARKS_MAX; i++) {
		struct mark copy;

		pthread_mutex_lock(&m->lock);
		if (!m->slot[i].used) {
			pthread_mutex_unlock(&m->lock);
			continue;
		}
		copy = m->slot[i];
		release(m, &m->slot[i]);
		pthread_mutex_unlock(&m->lock);
		resolve_from_entry(vm, vcpu, &copy);
	}
}
