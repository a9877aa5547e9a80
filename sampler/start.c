// SPDX-License-Identifier: MIT
// When sampling starts (`record --from boot|init|workload|SECONDS`) and the guest's events
// (docs/guest-interface.md, "Events") as EVENT records.
//
// Until sampling starts, every vCPU's counter is open but disabled: no overflow, so no exit
// costs anything for it. Starting is one atomic step, sampling_start going from 0 to the time
// + 1, taken by the first thread that decides (the vCPU thread on which the guest's event
// arrived, or the VMM's monitor thread for SECONDS). A counter is only ever enabled by its own
// vCPU thread (no thread touches another's perf fd, which vcpu_stop may close), at whichever of
// these comes first after the step: the deciding vCPU at once; the others at the kick the
// decider sends (vmm_kick: the vmm_hooks kick hook), or at their next I/O exit or guest event.
// A kick sent while a vCPU is outside KVM_RUN stays pending and ends its next KVM_RUN at once,
// and a vCPU thread that starts later enables its counter in vcpu_start: none is left behind.
// Attach windows (attach.c) reuse this: sampling_start goes back to 0 at a detach, and the same
// kicks make each vCPU disable its own counter.
#define pr_fmt(fmt) "sampler: start: " fmt
#include <errno.h>

#include <hvprof/log.h>

#include "sampler_internal.h"

_Static_assert((int)HVP_EVENT_INIT == (int)VMM_GUEST_EVENT_INIT &&
		       (int)HVP_EVENT_WORKLOAD_START == (int)VMM_GUEST_EVENT_WORKLOAD_START &&
		       (int)HVP_EVENT_WORKLOAD_END == (int)VMM_GUEST_EVENT_WORKLOAD_END,
	       "EVENT kinds are the guest's kinds");

/* One EVENT record. @guest: written by the guest, so bounded (SAMPLER_MAX_EVENTS). */
static void event_record(struct sampler *s, uint32_t kind, int32_t value, uint64_t time_ns,
			 bool guest)
{
	const struct sampler_sink *sink = s->cfg.sink;
	struct hvp_event e = { .time_ns = time_ns, .kind = kind, .value = value };

	if (!sink || !sink->event)
		return;
	if (guest && atomic_fetch_add(&s->guest_events_seen, 1) >= SAMPLER_MAX_EVENTS) {
		atomic_fetch_add(&s->events_dropped, 1);
		return;
	}
	if (sink->event(sink->ctx, &e) != 0) {
		atomic_fetch_add(&s->events_dropped, 1);
		sampler_fail(s, "the recording could not be written");
		return;
	}
	atomic_fetch_add(&s->events, 1);
}

int sampler_sync_vcpu(struct svcpu *sv)
{
	struct sampler *s = sv->s;
	/* the epoch first: a vCPU that saw the new epoch sees the sampling_start set before it */
	unsigned int epoch = atomic_load(&s->epoch), hz;
	/* the phase is read only where the guest sets it: this runs at every overflow */
	unsigned int phase = s->cfg.bench_phases ? atomic_load(&s->bench_phase) : BENCH_PHASE_ON;
	bool on = atomic_load(&s->sampling_start) != 0 && phase != BENCH_PHASE_OFF;
	int err = 0;

	if (s->cfg.bench_phases && phase != sv->bench_phase_applied) {
		/* disabled and enabled again below: the first sample of the new phase counts its
		 * period from here, not over the last phase's bare exits (counter_enable_vcpu) */
		err = counter_disable_vcpu(sv);
		sv->bench_phase_applied = phase;
	}

	/* a window that failed already is not retried at every exit (and logged each time) */
	if (err) {
		/* reported by sampler_catch_up (it fails the run, as any counter failure) */
	} else if (on && !sv->counting && sv->perf_fd >= 0 && !atomic_load(&s->window_err)) {
		hz = atomic_load(&s->hz);
		if (hz != sv->hz_applied)
			err = counter_set_rate(sv, hz);
		err = err ?: counter_enable_vcpu(sv);
	} else if (!on && sv->counting) {
		err = counter_disable_vcpu(sv);
	}
	atomic_store(&sv->seen_epoch, epoch);
	if (!on && atomic_load(&s->retry_disarm) && !sampler_vcpus_behind(s))
		sampler_retry_disarm(s, sv); /* the last straggler of a timed-out detach */
	return err;
}

void sampler_catch_up(struct svcpu *sv)
{
	struct sampler *s = sv->s;
	int err = sampler_sync_vcpu(sv), none = 0;

	if (!err)
		return;
	if (s->cfg.start == SAMPLER_START_ATTACH) {
		/* e.g. a rate the kernel refuses (perf_event_max_sample_rate): the window fails
		 * (the control thread polls sampler_window_error), the VM goes on */
		atomic_compare_exchange_strong(&s->window_err, &none, err);
		return;
	}
	sampler_fail(s, "a vCPU's sampling counter could not be enabled or disabled");
}

int sampler_window_error(const struct sampler *s)
{
	return s ? atomic_load(&((struct sampler *)s)->window_err) : 0;
}

void sampler_begin(struct sampler *s, struct svcpu *self, uint64_t time_ns)
{
	uint_fast64_t not_started = 0;

	if (!atomic_compare_exchange_strong(&s->sampling_start, &not_started, time_ns + 1))
		return;
	event_record(s, HVP_EVENT_SAMPLING_START, 0, time_ns, false);
	if (self)
		sampler_catch_up(self);
	if (s->vm)
		vmm_kick(s->vm, self ? self->v : NULL);
}

/* Does event @kind start sampling? --from init also starts at a workload start (the image's
 * init could not write before it: it started). */
static bool starts_sampling(const struct sampler *s, uint32_t kind)
{
	if (s->cfg.start != SAMPLER_START_EVENT)
		return false;
	return kind == s->cfg.start_event ||
	       (s->cfg.start_event == HVP_EVENT_INIT && kind == HVP_EVENT_WORKLOAD_START);
}

/* The guest is looked at where it wrote the event (a user process: its CR3 tells PTI, which a
 * late start would otherwise learn only at its first user sample). */
static void watch_at_event(struct svcpu *sv)
{
	struct kvm_sregs *sregs;

	if (!sv->v || !sv->s->gi || vmm_vcpu_regs(sv->v, NULL, &sregs) != 0)
		return;
	if (sregs->cs.selector & 3)
		kwatch_user(sv, sregs);
	else
		kwatch_kernel(sv, sregs);
}

/* `record --bench-phases`: the guest asked for phase @value (enum bench_phase; another value
 * is recorded and ignored). The writing vCPU applies it before the guest goes on (the guest's
 * write is an MMIO exit on this thread), the others at the kick. */
static void bench_phase_set(struct svcpu *sv, uint32_t value)
{
	struct sampler *s = sv->s;

	if (value > BENCH_PHASE_ON)
		return;
	if (atomic_exchange(&s->bench_phase, value) == value)
		return;
	atomic_fetch_add(&s->epoch, 1);
	sampler_catch_up(sv);
	if (s->vm)
		vmm_kick(s->vm, sv->v);
}

int sampler_hook_guest_event(void *ctx, struct vmm_vcpu *v, uint32_t kind, uint32_t value,
			     uint64_t time_ns)
{
	struct sampler *s = ctx;
	struct svcpu *sv = svcpu_of(s, v);

	if (!sv)
		return 0;
	sv->v = v;
	event_record(s, kind, (int32_t)value, time_ns, true);
	if (s->cfg.bench_phases && kind == HVP_EVENT_BENCH_PHASE)
		bench_phase_set(sv, value);
	if (kind == HVP_EVENT_WORKLOAD_START || kind == HVP_EVENT_WORKLOAD_END)
		atomic_store_explicit(&s->in_workload, kind == HVP_EVENT_WORKLOAD_START,
				      memory_order_relaxed);
	watch_at_event(sv);
	if (starts_sampling(s, kind))
		sampler_begin(s, sv, time_ns);
	else
		sampler_catch_up(sv);
	return s->vm && vmm_stopping(s->vm) ? 1 : 0;
}

void sampler_hook_kick(void *ctx, struct vmm_vcpu *v)
{
	struct svcpu *sv = svcpu_of(ctx, v);

	if (sv)
		sampler_catch_up(sv);
}

void sampler_hook_tick(void *ctx, uint64_t time_ns)
{
	struct sampler *s = ctx;

	if (s->cfg.start == SAMPLER_START_AFTER && time_ns >= s->cfg.start_after_ns &&
	    !atomic_load(&s->sampling_start))
		sampler_begin(s, NULL, time_ns);
}

int sampler_sampling_start(const struct sampler *s, uint64_t *time_ns)
{
	uint_fast64_t t;

	if (!s || !time_ns)
		return -EINVAL;
	t = atomic_load(&((struct sampler *)s)->sampling_start);
	if (!t)
		return -ENODATA;
	*time_ns = t - 1;
	return 0;
}
