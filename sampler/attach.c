// SPDX-License-Identifier: MIT
// Attach windows: a sampler made with SAMPLER_START_ATTACH (`hvprof run --control`) samples only
// between sampler_attach() and sampler_detach() (`hvprof record --attach`,
// docs/control-protocol.md). Its vCPUs' counters are open and disabled from their start; a window
// opens as a late start does (start.c: sampling_start set, the vCPUs kicked, each enables its own
// counter), and a detach undoes it in order, so that nothing stays armed:
//   1. sampling_start back to 0: from now on an overflow is ignored (sampler.c hook_overflow);
//   2. the epoch is bumped and every vCPU kicked; each disables its own counter on its thread at
//      the kick (or the overflow that carried it) and acknowledges the epoch; the detach waits
//      for every running vCPU's acknowledgement, so no sample is being built any more and no new
//      mark can appear (marks are made only by samples);
//   3. the pending marks are dropped and counted (marks_dropped_detach): their samples keep their
//      kernel part, and no USER_STACK record follows;
//   4. the return-to-user breakpoints are disarmed VM-wide and the vCPUs kicked again; the second
//      acknowledgement means each has left KVM_RUN since, and applies the debug registers
//      (vcpu_debug_update) before it enters the guest again.
// After that the guest exits as an unprofiled one: no overflow, no debug exit of the sampler.
// A vCPU that did not acknowledge within the timeout (still building a sample) can make no mark
// (marks_take refuses while sampling is off, under the marks lock); when it acknowledges, the
// marks are dropped and the breakpoints disarmed again (sampler_retry_disarm), and no window
// opens until it has (sampler_attach: -EBUSY).
#define pr_fmt(fmt) "sampler: attach: " fmt
#include <errno.h>
#include <time.h>

#include <hvprof/log.h>

#include "sampler_internal.h"

#define ATTACH_MAX_HZ 100000
#define ATTACH_POLL_NS 1000000l /* how often a detach looks at the vCPUs' acknowledgements */

unsigned int sampler_vcpus_behind(struct sampler *s)
{
	unsigned int epoch = atomic_load(&s->epoch), late = 0;

	for (unsigned int i = 0; i < s->n_vcpus; i++) {
		struct svcpu *sv = &s->vcpus[i];

		/* a vCPU not started yet syncs in vcpu_start; a stopped one has no counter */
		if (atomic_load(&sv->running) && atomic_load(&sv->seen_epoch) != epoch)
			late++;
	}
	return late;
}

/* The return-to-user breakpoints off on every vCPU (the others kicked to apply it). */
static void traps_off(struct sampler *s, struct svcpu *self)
{
	if (!s->vm || !s->traps.available)
		return;
	vmm_bp_arm(s->vm, traps_mask(s), false, NULL);
	vmm_kick(s->vm, self ? self->v : NULL);
}

void sampler_retry_disarm(struct sampler *s, struct svcpu *self)
{
	unsigned int n;

	if (!atomic_exchange(&s->retry_disarm, false))
		return; /* another thread did it */
	n = marks_drop_all(&s->marks); /* none can be made now: sampling is off */
	atomic_fetch_add(&s->marks_dropped_detach, n);
	traps_off(s, self);
}

/* Wait until every running vCPU acknowledged @epoch. Return: how many had not by @timeout_ns. */
static unsigned int wait_acks(struct sampler *s, unsigned int epoch, uint64_t timeout_ns)
{
	const struct timespec pause = { 0, ATTACH_POLL_NS };
	uint64_t deadline = vmm_now_ns() + timeout_ns;
	unsigned int late;

	for (;;) {
		late = 0;
		for (unsigned int i = 0; i < s->n_vcpus; i++) {
			struct svcpu *sv = &s->vcpus[i];

			/* a vCPU not started yet syncs in vcpu_start; a stopped one has no counter */
			if (atomic_load(&sv->running) && atomic_load(&sv->seen_epoch) != epoch)
				late++;
		}
		if (!late || vmm_now_ns() >= deadline)
			return late;
		nanosleep(&pause, NULL);
	}
}

/* Bump the epoch and kick every vCPU; wait for their acknowledgements. Return: the late ones. */
static unsigned int sync_all(struct sampler *s, uint64_t timeout_ns)
{
	unsigned int epoch = atomic_fetch_add(&s->epoch, 1) + 1;

	if (!s->vm)
		return 0; /* unit tests: no vCPU thread to wait for */
	vmm_kick(s->vm, NULL);
	return wait_acks(s, epoch, timeout_ns);
}

int sampler_attach(struct sampler *s, const struct sampler_window *w)
{
	uint32_t stack_size;

	if (!s || !w || s->cfg.start != SAMPLER_START_ATTACH || !w->sample_hz ||
	    w->sample_hz > ATTACH_MAX_HZ)
		return -EINVAL;
	stack_size = w->call_graph == SAMPLER_CALL_GRAPH_DWARF
			     ? (w->stack_size ? w->stack_size : HVP_USER_STACK_DEFAULT)
			     : HVP_USER_STACK_FP_WINDOW;
	if (stack_size > HVP_USER_STACK_MAX || (stack_size & 7))
		return -EINVAL;
	if (!s->gi)
		return -ENODATA;
	if (atomic_load(&s->window_open))
		return -EBUSY;
	/* the last detach timed out and a vCPU is still in the sample it was building: it could
	 * write into the new window's caches and state; wait for its acknowledgement */
	if (sampler_vcpus_behind(s))
		return -EBUSY;
	sampler_retry_disarm(s, NULL); /* owed by a timed-out detach: done before arming again */
	/* no vCPU samples now (the last detach waited for them): these are safe to change */
	ident_cache_reset(s);
	atomic_store(&s->guest_events_seen, 0);
	atomic_store(&s->window_err, 0);
	s->cfg.call_graph = w->call_graph;
	s->cfg.stack_size = stack_size;
	s->ustack_size = stack_size;
	atomic_store(&s->hz, w->sample_hz);
	atomic_store(&s->window_open, true);
	atomic_fetch_add(&s->epoch, 1);
	/* a SAMPLING_START event in the new recording; the vCPUs are kicked to enable */
	sampler_begin(s, NULL, s->vm ? vmm_now_ns() - sampler_start_ns(s) : 0);
	return 0;
}

int sampler_detach(struct sampler *s, uint64_t timeout_ns, struct sampler_detach_info *out)
{
	struct sampler_detach_info info = { 0 };
	unsigned int late;

	if (!s || s->cfg.start != SAMPLER_START_ATTACH)
		return -EINVAL;
	if (!atomic_exchange(&s->window_open, false))
		return -EALREADY;
	atomic_store(&s->sampling_start, 0);
	info.vcpus_late = sync_all(s, timeout_ns); /* every counter disabled, no sample in flight */
	/* a late vCPU can make no mark now (marks_take refuses while sampling is off, under the
	 * marks lock the scan takes) */
	flag_ledger_scan(s);
	info.marks_dropped = marks_drop_all(&s->marks);
	atomic_fetch_add(&s->marks_dropped_detach, info.marks_dropped);
	if (s->vm && s->traps.available) {
		vmm_bp_arm(s->vm, traps_mask(s), false,
			   NULL);
		late = sync_all(s, timeout_ns); /* each applies the disarm before its next entry */
		if (late > info.vcpus_late)
			info.vcpus_late = late;
	}
	if (info.vcpus_late) {
		atomic_store(&s->retry_disarm, true); /* when the stragglers acknowledge */
		if (!sampler_vcpus_behind(s))
			sampler_retry_disarm(s, NULL); /* they did already */
	}
	if (info.vcpus_late)
		pr_warn("detach: %u vCPU(s) did not answer within %llu ms: they disable their "
			"counter at their next exit", info.vcpus_late,
			(unsigned long long)(timeout_ns / 1000000));
	if (out)
		*out = info;
	return info.vcpus_late ? -ETIMEDOUT : 0;
}
