/* SPDX-License-Identifier: MIT */
/* The period of a sample: the counter's real count since the previous sample of its vCPU. */
#ifndef HVPROF_SAMPLER_PERIOD_H
#define HVPROF_SAMPLER_PERIOD_H

#include <stdbool.h>
#include <stdint.h>

#include <hvprof/sampler.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A period larger than this many nominal periods is not believed (a garbage read, a counter
 * reset under us): the sample gets the nominal period and the fallback is counted. Merging
 * needs the overflow signal to stay pending while the vCPU thread is outside KVM_RUN, which
 * lasts microseconds to milliseconds, far below 1024 periods at any rate -F accepts.
 */
#define PERIOD_MAX_FACTOR 1024
/* For cycles (frequency mode: the kernel moves the period), the bound assumes a clock of at
 * most this many cycles per ns. */
#define PERIOD_MAX_CYCLES_PER_NS 10

/*
 * The baseline of one vCPU's counter: its count at the previous sample, or at its enable; and
 * since the enable, what its samples weighed and how many overflows they stand for.
 */
struct period_base {
	uint64_t count;
	bool known;         /* false: not read yet (the next sample sets it, with the nominal
			     * period) */
	uint64_t counted;   /* sum of the periods given since the enable */
	uint64_t accounted; /* samples since the enable plus the overflows merged into them */
};

/* What one sample weighs. */
struct period_result {
	uint64_t period;  /* the sample's weight (SAMPLE.period) */
	uint64_t merged;  /* overflows it stands for beyond its own (see period_next) */
	bool fallback;    /* not a real count: the nominal period (unread, first, out of bounds) */
};

/**
 * period_restart - the counter is enabled at @count (@count_ok: it was read; else the first
 * sample sets the baseline): the next sample counts from here, and the overflows from zero.
 */
void period_restart(struct period_base *b, bool count_ok, uint64_t count);

/**
 * period_bounds - the nominal period and the largest believable one of a @kind counter
 * sampling at @hz (> 0): cpu-clock: 1e9/@hz ns, and PERIOD_MAX_FACTOR times that; cycles: 0
 * (the kernel adjusts the period in frequency mode: no nominal one), and PERIOD_MAX_FACTOR
 * periods of a PERIOD_MAX_CYCLES_PER_NS clock. @hz 0: both 0.
 */
void period_bounds(enum sampler_counter_kind kind, unsigned int hz, uint64_t *nominal,
		   uint64_t *max);

/**
 * period_next - the weight of a sample whose counter read @count (@count_ok: the read worked),
 * against @b (updated: the next sample counts from @count). A real count in (0, @max] is the
 * period; otherwise (no read, no baseline, the count went back, nothing counted, above @max)
 * the @nominal period with fallback set, and the baseline restarts at @count when it was read.
 * merged: with a known @nominal (> 0), the overflows that came since the enable (the periods
 * given, in whole nominal periods: the first overflow comes one period after the enable) beyond
 * the samples and merged overflows already counted. Counted over the whole window, not per
 * sample, so that a late exit (a period of 1.6 nominal, the next one of 0.4) is no merge. Pure:
 * unit-tested.
 */
struct period_result period_next(struct period_base *b, bool count_ok, uint64_t count,
				 uint64_t nominal, uint64_t max);

/*
 * The counter's count at its latest overflow, from the records the kernel writes into the
 * event's ring buffer at each overflow (PERF_RECORD_SAMPLE with PERF_SAMPLE_READ: the count;
 * perf_event_open(2), "MMAP layout"): a few loads from shared memory where read(2) is a system
 * call per sample (~0.35 us here, more through the vCPU thread's seccomp filter).
 */
#define PERIOD_REC_SAMPLE 9  /* PERF_RECORD_SAMPLE */
#define PERIOD_REC_LOST 2    /* PERF_RECORD_LOST */
#define PERIOD_RING_MAX_RECORDS 4096 /* records looked at per scan at most: bounded work */

/* What period_ring_scan found between the reader's tail and the kernel's head. */
struct period_ring_scan {
	uint64_t count;     /* the newest SAMPLE record's count; with @found */
	uint64_t samples;   /* SAMPLE records seen */
	bool found;
	bool lost;          /* a LOST record, a malformed one or more than the bound: the ring
			     * does not tell the newest count (read the counter instead) */
};

/**
 * period_ring_scan - the records in [@tail, @head) of a ring buffer's data area @data of
 * @size bytes (a power of two; positions are free-running, taken modulo @size), each a
 * struct perf_event_header (u32 type, u16 misc, u16 size) and its body: the newest SAMPLE
 * record's first u64 (the count, as PERF_SAMPLE_READ with read_format 0 writes it). Records
 * may wrap the end of the area. A record of size < 8, not a multiple of 8, or running past
 * @head, a @head more than @size ahead of @tail, or more than PERIOD_RING_MAX_RECORDS records:
 * lost (nothing more is read). Pure: unit-tested.
 */
struct period_ring_scan period_ring_scan(const uint8_t *data, uint64_t size, uint64_t tail,
					 uint64_t head);

struct svcpu;

/**
 * counter_period - counter.c: the period of the sample being taken on @sv's vCPU (its own
 * thread): read the counter and period_next() against the vCPU's baseline; counts
 * overflows_merged and period_fallbacks in @sv's counters. A vCPU without a counter: the
 * nominal period, not counted.
 */
struct period_result counter_period(struct svcpu *sv);

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_SAMPLER_PERIOD_H */
