// SPDX-License-Identifier: MIT
// The sampler's life and its hooks on the VMM: created on a VM and a guestinfo session, it
// probes its counter and the kernel's return-to-user sites, takes breakpoint slots, and from
// then on the VMM's exits drive it: an overflow becomes a sample, a debug exit on its slots a
// trap hit, an I/O exit a look for the KASLR slide, the end of the run a flush of the marks.
#define pr_fmt(fmt) "sampler: " fmt
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/hugemem.h>
#include <hvprof/log.h>

#include "sampler_internal.h"

const char *const sampler_counter_names[] = {
#define SAMPLER_COUNTER_NAME(name) #name,
	SAMPLER_COUNTER_LIST(SAMPLER_COUNTER_NAME)
#undef SAMPLER_COUNTER_NAME
};
_Static_assert(sizeof(sampler_counter_names) / sizeof(sampler_counter_names[0]) ==
		       SAMPLER_N_COUNTERS,
	       "one name per counter");

struct gi_paging sampler_paging(const struct sampler *s, const struct kvm_sregs *sregs)
{
	struct gi_paging pg = { .cr0 = sregs->cr0, .cr3 = sregs->cr3, .cr4 = sregs->cr4,
				.efer = sregs->efer, .maxphyaddr = s->maxphyaddr };

	if (atomic_load_explicit(&s->pti, memory_order_relaxed) == GI_PTI_ON) {
		if (sregs->cr3 & GI_PTI_USER_BIT)
			pg.kernel_cr3 = sregs->cr3 & ~GI_PTI_USER_BIT;
		else
			pg.user_cr3 = sregs->cr3 | GI_PTI_USER_BIT;
	}
	return pg;
}

struct gi_paging sampler_exit_paging(struct svcpu *sv, const struct kvm_sregs *sregs)
{
	struct gi_paging pg = sampler_paging(sv->s, sregs);

	pgwalk_cache_invalidate(&sv->tcache);
	pg.cache = &sv->tcache;
	return pg;
}

void sampler_fail(struct sampler *s, const char *what)
{
	if (s->vm)
		vmm_end(s->vm, HVP_END_ERROR, -1, "%s", what);
}

void sampler_emit_user_stack(struct svcpu *sv, const struct hvp_user_stack *u,
			     struct hvp_user_regs *r)
{
	const struct sampler_sink *sink = sv->s->cfg.sink;

	if (r) {
		r->time_ns = u->time_ns;
		r->cookie = u->cookie;
		r->pid = u->pid;
		r->follows = HVP_USER_REGS_AFTER_USER_STACK;
	}
	if (!sink || !sink->user_stack)
		return;
	if (sink->user_stack(sink->ctx, u, r) != 0) {
		sv->c.samples_sink_errors++;
		sampler_fail(sv->s, "the recording could not be written");
	} else if (r) {
		sv->c.user_regs++;
	}
}

/* ---------------------------------------------------------------- hooks */

/* The counter is opened disabled, and enabled here when sampling has started (start.c). */
static int hook_vcpu_start(void *ctx, struct vmm_vcpu *v)
{
	struct sampler *s = ctx;
	struct svcpu *sv = svcpu_of(s, v);
	int err;

	if (!sv)
		return -EINVAL;
	sv->v = v;
	err = counter_open_vcpu(s, sv);
	err = err ?: sampler_sync_vcpu(sv); /* enabled when sampling has started */
	if (!err)
		atomic_store(&sv->running, true);
	return err;
}

static void hook_vcpu_stop(void *ctx, struct vmm_vcpu *v)
{
	struct svcpu *sv = svcpu_of(ctx, v);

	if (!sv)
		return;
	atomic_store(&sv->running, false); /* a detach no longer waits for this vCPU */
	counter_close_vcpu(sv);
	sv->c.tcache_hits = sv->tcache.hits;
	sv->c.tcache_misses = sv->tcache.misses;
	sv->c.tcache_kept_hits = sv->tcache.kept_hits; /* the traps' after the last sample too */
	sv->c.tcache_memo_hits = sv->tcache.memo_hits;
	sv->c.tcache_memo_stale = sv->tcache.memo_stale;
	sv->c.tcache_hva_reads = sv->tcache.hva_reads;
}

static int hook_overflow(void *ctx, struct vmm_vcpu *v)
{
	struct sampler *s = ctx;
	struct svcpu *sv = svcpu_of(s, v);

	if (!sv)
		return 0;
	sampler_catch_up(sv); /* a kick that came with the overflow (a detach) is applied here */
	if (!atomic_load(&s->sampling_start))
		return 0; /* an overflow that was pending when a detach disabled the counter */
	if (s->cfg.bare_exits) {
		sv->c.samples++; /* an exit at the sampling rate, nothing more */
		return 0;
	}
	if (s->cfg.bench_phases) {
		unsigned int phase = atomic_load_explicit(&s->bench_phase, memory_order_relaxed);

		if (phase == BENCH_PHASE_OFF)
			return 0; /* pending when the phase changed */
		if (phase == BENCH_PHASE_BARE) {
			sv->c.bench_bare_exits++;
			return 0;
		}
	}
	return sample_take(sv);
}

static void hook_io(void *ctx, struct vmm_vcpu *v)
{
	struct svcpu *sv = svcpu_of(ctx, v);

	if (sv) {
		sv->v = v;
		kwatch_io(sv);
		sampler_catch_up(sv); /* sampling started on another thread: enable here too */
	}
}

static void hook_run_end(void *ctx, struct vmm_vcpu *v0)
{
	struct sampler *s = ctx;

	if (s->n_vcpus && s->gi && s->cfg.sink) {
		s->vcpus[0].v = v0;
		flag_ledger_scan(s); /* the flags as the run left them (docs/guest-interface.md) */
		marks_flush(&s->vcpus[0]);
	}
}

/* ---------------------------------------------------------------- life */

/* Arm the return-to-user traps while marks are pending (called under the marks lock). */
static void traps_arm(struct svcpu *sv)
{
	struct sampler *s = sv->s;

	if (s->vm && s->traps.available)
		vmm_bp_arm(s->vm, 1u << s->traps.slot_sysret | 1u << s->traps.slot_iret, true, sv->v);
}

static void traps_disarm(struct svcpu *sv)
{
	struct sampler *s = sv->s;

	if (s->vm && s->traps.available)
		vmm_bp_arm(s->vm, 1u << s->traps.slot_sysret | 1u << s->traps.slot_iret, false, NULL);
}

/*
 * Guest-visible marks: the exit-work loop's breakpoint, armed by a flagged mark when it is not
 * armed already, and disarmed only when a hit finds no mark while none is pending (the
 * kernel's own TIF_NOTIFY_RESUME: task work queued by a close(), rseq after a preemption), or
 * when sampling stops (traps_off). Marks that follow each other (a system-call-heavy thread
 * marked at every sample) keep it armed, where arming and disarming around every mark cost two
 * KVM_SET_GUEST_DEBUG ioctls per mark (each a vcpu_load: several us on a nested PVM host); the
 * kernel's own flags cost at most one hit per idle spell.
 */
static void loop_arm(struct svcpu *sv)
{
	struct sampler *s = sv->s;

	if (s->vm)
		vmm_bp_arm(s->vm, traps_loop_mask(s), true, sv->v);
}

static void loop_disarm(struct svcpu *sv)
{
	struct sampler *s = sv->s;

	if (s->vm)
		vmm_bp_arm(s->vm, traps_loop_mask(s), false, NULL);
}

/* TIF_NOTIFY_RESUME on @task: an atomic OR on its thread_info.flags in guest RAM. */
static int set_notify_resume(struct svcpu *sv, uint64_t task, const struct gi_paging *pg,
			     bool *was_set)
{
	struct sampler *s = sv->s;
	uint64_t gpa, old = 0, bit = 1ull << s->traps.ew[0].notify_bit;
	int err;

	if (!s->vm || !s->traps.ew[0].clear)
		return -ENOENT; /* not placed yet (slide unknown): the trap takes it */
	err = gi_task_flags_gpa(s->gi, s->mem, pg, task, &gpa);
	err = err ?: vmm_gpa_or64(s->vm, gpa, bit, &old);
	*was_set = old & bit;
	return err;
}

/* The flag strategy is not taken, for @why (static; the strategy line says it): say so when
 * --marks flag asked for it. */
static void flag_refuse(struct sampler *s, const char *why)
{
	s->traps.flag_refused = why;
	if (s->cfg.marks == SAMPLER_MARKS_FLAG)
		pr_warn("guest-visible marks not possible: %s: marks trap sysretq/iretq", why);
}

const char *flag_refusal(int err, const struct gi_exit_work *ew, size_t n, bool pvm,
			 unsigned int free_slots)
{
	if (err == -ENOENT)
		return "no exit-work loop of the generic entry code, or no BTF for "
		       "thread_info.flags";
	if (err == -ENOTSUP)
		return "an exit path has no exit-work loop hvprof knows";
	if (err || !n || n > GI_EW_COPIES)
		return "the exit-work loops could not be read";
	for (size_t i = 0; i < n; i++)
		if (!ew[i].clear_base && pvm)
			/* RF is ignored there and hvprof cannot complete this instruction */
			return "the loop's clear is not an instruction hvprof can complete where RF "
			       "is ignored (PVM)";
	if (free_slots < n)
		return n > 1 ? "each exit path holds its own exit-work loop, and the host has no "
			       "free breakpoint slot for each (PVM keeps one for its SYSCALL fix-up)"
			     : "no free breakpoint slot for the exit-work loop";
	return NULL;
}

/* The flag strategy: the kernel's exit-work loops and thread-info layout, and a slot for each
 * loop (one, or each exit path's inlined copy: two, which a PVM host has no room for). */
static void flag_setup(struct sampler *s)
{
	struct gi_exit_work ew[GI_EW_COPIES];
	const char *why;
	size_t n = 0;
	int err;

	if (s->cfg.marks == SAMPLER_MARKS_TRAP)
		return;
	err = gi_exit_work_link(s->gi, ew, &n);
	why = flag_refusal(err, ew, n, vmm_is_pvm(s->vm), vmm_bp_free_slots(s->vm));
	if (why) {
		flag_refuse(s, why);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int slot = vmm_bp_alloc(s->vm);

		if (slot < 0) { /* not reached: flag_refusal counted them free just now */
			flag_refuse(s, "no free breakpoint slot for the exit-work loop");
			return;
		}
		s->traps.slot_loop[i] = slot;
	}
	s->traps.n_loops = (unsigned int)n;
	s->traps.flag = true;
	s->marks.flag_marks = true;
	s->marks.on_flag_first = loop_arm;
	s->marks.on_flag_idle = loop_disarm;
	s->marks.set_flag = set_notify_resume;
	/* the tasks flagged, read back at each detach and at the end (flagscan.c) */
	s->ledger = calloc(1, sizeof(*s->ledger));
	if (!s->ledger)
		pr_warn("no memory for the ledger of flagged tasks: no flag read-back "
			"(flag_scans stays 0)");
}

/* Deferred callchains need the return sites and two breakpoint slots; else eager. */
static void traps_setup(struct sampler *s)
{
	struct gi_return_sites sites;
	int err, a, b;

	if (s->callchain == SAMPLER_CALLCHAIN_EAGER)
		return;
	err = gi_return_sites(s->gi, &sites);
	if (err == -ENOENT) {
		pr_warn("the kernel's return-to-user instructions were not found: deferred user "
			"callchains fall back to eager");
		s->callchain = SAMPLER_CALLCHAIN_EAGER;
		return;
	}
	a = vmm_bp_alloc(s->vm);
	b = a < 0 ? a : vmm_bp_alloc(s->vm);
	if (a < 0 || b < 0) {
		pr_warn("no free breakpoint slot: deferred user callchains fall back to eager");
		s->callchain = SAMPLER_CALLCHAIN_EAGER;
		return;
	}
	s->traps.slot_sysret = a;
	s->traps.slot_iret = b;
	s->traps.available = true;
	s->marks.on_first = traps_arm;
	s->marks.on_last = traps_disarm;
	flag_setup(s);
}

static const char *callchain_name(enum sampler_callchain_mode m)
{
	return m == SAMPLER_CALLCHAIN_DEFERRED ? "deferred"
	       : m == SAMPLER_CALLCHAIN_BOTH   ? "both"
					       : "eager";
}

int sampler_new(const struct sampler_config *cfg, struct gi *gi, const struct gmem *mem,
		unsigned int maxphyaddr, unsigned int n_vcpus, struct sampler **out)
{
	struct sampler *s;
	uint32_t ustack_size = HVP_USER_STACK_FP_WINDOW;
	int err;

	if (!cfg || !mem || !out || !n_vcpus || (cfg->sample_hz && (!cfg->sink || !gi)) ||
	    cfg->start > SAMPLER_START_ATTACH ||
	    (cfg->start == SAMPLER_START_ATTACH && !cfg->sample_hz) ||
	    (cfg->start == SAMPLER_START_EVENT && (cfg->start_event < 1 || cfg->start_event > 255)) ||
	    (cfg->bench_phases && (cfg->bare_exits || cfg->start != SAMPLER_START_EVENT ||
				   cfg->start_event != HVP_EVENT_BENCH_PHASE)))
		return -EINVAL;
	if (cfg->call_graph == SAMPLER_CALL_GRAPH_DWARF)
		ustack_size = cfg->stack_size ? cfg->stack_size : HVP_USER_STACK_DEFAULT;
	if (ustack_size > HVP_USER_STACK_MAX || (ustack_size & 7))
		return -EINVAL;
	/* the sampler and its vCPUs are read at every sample: on huge pages (hugemem.h) */
	s = hvp_huge_alloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->gi = gi;
	s->mem = mem;
	s->maxphyaddr = maxphyaddr;
	s->callchain = cfg->callchain_mode;
	s->ustack_size = ustack_size;
	stage_clock_init(&s->clock);
	s->stay_adaptive = !cfg->mark_every_stay;
	s->stay_pays = STAY_PAYS_HW; /* sampler_create: from the host */
	atomic_store(&s->hz, cfg->sample_hz);
	marks_init(&s->marks, cfg->mark_timeout_ns ? cfg->mark_timeout_ns : 100000000ull);
	if (cfg->start == SAMPLER_START_BOOT ||
	    (cfg->start == SAMPLER_START_AFTER && !cfg->start_after_ns))
		atomic_store(&s->sampling_start, 1); /* from the first instruction: time 0 */
	s->n_vcpus = n_vcpus;
	/* SAFETY: a 32-bit count times ~32 KiB cannot overflow a 64-bit size */
	s->vcpus = hvp_huge_alloc((size_t)n_vcpus * sizeof(*s->vcpus));
	/* before anything can fail: sampler_destroy closes each vCPU's perf_fd (0 is stdin) */
	for (unsigned int i = 0; s->vcpus && i < n_vcpus; i++)
		s->vcpus[i].perf_fd = -1;
	err = s->vcpus ? ident_cache_create(s) : -ENOMEM;
	if (err) {
		sampler_destroy(s);
		return err;
	}
	for (unsigned int i = 0; i < s->n_vcpus; i++) {
		s->vcpus[i].s = s;
		s->vcpus[i].index = i;
		s->vcpus[i].perf_fd = -1;
		/* an attach window chooses its stack size later: buffers for the largest */
		size_t stack_buf = cfg->start == SAMPLER_START_ATTACH ? HVP_USER_STACK_MAX
								      : s->ustack_size;

		s->vcpus[i].sample_stack = malloc(stack_buf);
		s->vcpus[i].ustack_stack = malloc(stack_buf);
		if (!s->vcpus[i].sample_stack || !s->vcpus[i].ustack_stack) {
			sampler_destroy(s);
			return -ENOMEM;
		}
		if (cfg->sink && cfg->sink->mapping) {
			s->vcpus[i].maps = calloc(SAMPLER_MAPS_MAX, sizeof(struct gi_mapping));
			if (!s->vcpus[i].maps) {
				sampler_destroy(s);
				return -ENOMEM;
			}
		}
	}
	*out = s;
	return 0;
}

int sampler_create(const struct sampler_config *cfg, struct gi *gi, struct vmm *vm,
		   struct sampler **out)
{
	struct vmm_hooks hooks;
	struct sampler *s;
	char stays[256]; /* 195 bytes at most */
	char marks[384]; /* under 260 bytes */
	int err;

	if (!vm)
		return -EINVAL;
	err = sampler_new(cfg, gi, vmm_gmem(vm), vmm_maxphyaddr(vm), vmm_vcpu_count(vm), &s);
	if (err)
		return err;
	s->vm = vm;
	vmm_placement(vm, &s->placed);
	err = counter_probe(s);
	if (err)
		goto err_free;
	if (gi && cfg->sample_hz)
		traps_setup(s);
	kwatch_setup(s);
	s->stay_pays = vmm_is_pvm(vm) ? STAY_PAYS_PVM : STAY_PAYS_HW;
	snprintf(stays, sizeof(stays),
		 ", stays: a kind of entry (system call number, interrupt or exception) whose "
		 "marked stays average fewer than %u samples is walked from pt_regs at the sample "
		 "(%s)", s->stay_pays, vmm_is_pvm(vm) ? "PVM: an exit costs 10-30 walks"
						      : "VMX/SVM: an exit costs a few walks");
	if (s->callchain == SAMPLER_CALLCHAIN_EAGER)
		marks[0] = '\0';
	else if (s->traps.flag)
		snprintf(marks, sizeof(marks), " (guest-visible marks: TIF_NOTIFY_RESUME and a "
			 "breakpoint where the exit-work loop clears it%s; samples in the exit tail "
			 "walked from pt_regs at once)",
			 s->traps.n_loops > 1 ? ", in each exit path's inlined copy" : "");
	else
		snprintf(marks, sizeof(marks), " (breakpoints on sysretq%s%s%s)",
			 gi_has_iret_user_branch(gi) ? " and on the branch to iretq that only "
						       "returns to user mode take" : "/iretq",
			 s->traps.flag_refused ? "; guest-visible marks not possible: " : "",
			 s->traps.flag_refused ? s->traps.flag_refused : "");
	snprintf(s->strategy, sizeof(s->strategy),
		 ", user-callchains=%s%s%s, kernel-callchains=%s, stage-clock=%s%s",
		 callchain_name(s->callchain), marks,
		 s->callchain != SAMPLER_CALLCHAIN_DEFERRED ? ""
		 : s->stay_adaptive ? stays : ", stays: every one marked",
		 gi_kernel_unwinder(gi), s->clock.tsc ? "tsc" : "monotonic",
		 cfg->bench_phases ? ", bench-phases" : "");
	hooks = (struct vmm_hooks){ .ctx = s, .vcpu_start = hook_vcpu_start,
				    .vcpu_stop = hook_vcpu_stop, .overflow = hook_overflow,
				    .debug = trap_debug_hook, .io = hook_io,
				    .guest_event = sampler_hook_guest_event,
				    .kick = sampler_hook_kick, .tick = sampler_hook_tick,
				    .run_end = hook_run_end };
	err = vmm_set_hooks(vm, &hooks);
	if (err)
		goto err_free;
	*out = s;
	return 0;

err_free:
	sampler_destroy(s);
	return err;
}

void sampler_destroy(struct sampler *s)
{
	if (!s)
		return;
	for (unsigned int i = 0; s->vcpus && i < s->n_vcpus; i++) {
		counter_close_vcpu(&s->vcpus[i]);
		free(s->vcpus[i].maps);
		free(s->vcpus[i].sample_stack);
		free(s->vcpus[i].ustack_stack);
	}
	if (s->ident)
		ident_cache_destroy(s);
	marks_destroy(&s->marks);
	free(s->ledger);
	hvp_huge_free(s->vcpus, (size_t)s->n_vcpus * sizeof(*s->vcpus));
	hvp_huge_free(s, sizeof(*s));
}

void sampler_get_counters(const struct sampler *s, struct sampler_counters *out)
{
	uint64_t *dst = (uint64_t *)out;

	memset(out, 0, sizeof(*out));
	for (unsigned int i = 0; s && i < s->n_vcpus; i++) {
		const uint64_t *src = (const uint64_t *)&s->vcpus[i].c;

		for (size_t k = 0; k < SAMPLER_N_COUNTERS; k++)
			dst[k] += src[k];
	}
	if (s) { /* counted on any thread, not per vCPU */
		out->events = atomic_load(&((struct sampler *)s)->events);
		out->events_dropped = atomic_load(&((struct sampler *)s)->events_dropped);
		out->marks_dropped_detach =
			atomic_load(&((struct sampler *)s)->marks_dropped_detach);
		/* SAFETY: FLAG_SCAN_N uint64_t counters from flag_scans on, in the enum's order
		 * (static assertions in flagscan.c), inside the struct's array of counters */
		for (unsigned int k = 0; k < FLAG_SCAN_N; k++)
			dst[offsetof(struct sampler_counters, flag_scans) / sizeof(uint64_t) + k] =
				atomic_load(&((struct sampler *)s)->flag_scan[k]);
	}
}

enum sampler_counter_kind sampler_counter_kind(const struct sampler *s)
{
	return s ? s->counter : SAMPLER_COUNTER_NONE;
}

const char *sampler_counter_name(enum sampler_counter_kind kind)
{
	switch (kind) {
	case SAMPLER_COUNTER_CYCLES:
		return "cycles";
	case SAMPLER_COUNTER_CPU_CLOCK:
		return "cpu-clock";
	default:
		return "none";
	}
}

const char *sampler_callchain_mode_name(const struct sampler *s)
{
	return callchain_name(s ? s->callchain : SAMPLER_CALLCHAIN_EAGER);
}

const char *sampler_strategy(const struct sampler *s)
{
	return s ? s->strategy : "";
}

uint64_t sampler_first_user_ns(const struct sampler *s)
{
	return s ? atomic_load(&((struct sampler *)s)->first_user_ns) : 0;
}

int sampler_kernel_slide(const struct sampler *s, uint64_t *slide)
{
	if (!s || !slide)
		return -EINVAL;
	if (!s->gi || gi_kaslr_state(s->gi) != GI_SLIDE_KNOWN)
		return -ENODATA;
	*slide = gi_kaslr_slide(s->gi);
	return 0;
}

int sampler_kaslr_info(const struct sampler *s, struct sampler_kaslr_info *out)
{
	if (!s || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->placed = s->placed.slide_known;
	out->relocated = s->placed.relocated;
	out->placed_slide = s->placed.slide;
	out->n_relocs = s->placed.n_relocs;
	out->check = gi_kaslr_checked(s->gi, &out->detected_slide, &out->idt);
	out->slide_known = sampler_kernel_slide(s, &out->slide) == 0;
	return 0;
}

const char *sampler_pti_name(const struct sampler *s)
{
	return gi_pti_name(s ? (enum gi_pti)atomic_load(&((struct sampler *)s)->pti)
			     : GI_PTI_UNKNOWN);
}
