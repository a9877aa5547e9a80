// SPDX-License-Identifier: MIT
// Unit tests of a sample's period (sampler/period.c): the counter's count since the previous
// sample of the vCPU, the first sample after an enable (or a re-enable), counts that cannot be
// believed (a failed read, a count that went back or did not move, one above the bound), and the
// overflows a sample stands for beyond its own (signals merged while one was pending), which the
// jitter of late exits must not look like.
#include <string.h>

#include "period.h"
#include "test.h"

#define NS_2K 500000ull /* -F 2000 on cpu-clock: 500 us of vCPU thread time */

static int test_bounds(void)
{
	uint64_t nominal, max;

	period_bounds(SAMPLER_COUNTER_CPU_CLOCK, 2000, &nominal, &max);
	ASSERT_EQ_U64(nominal, NS_2K);
	ASSERT_EQ_U64(max, NS_2K * PERIOD_MAX_FACTOR);
	period_bounds(SAMPLER_COUNTER_CPU_CLOCK, 997, &nominal, &max);
	ASSERT_EQ_U64(nominal, 1003009);
	period_bounds(SAMPLER_COUNTER_CYCLES, 1000, &nominal, &max);
	ASSERT_EQ_U64(nominal, 0); /* frequency mode: the kernel moves the period */
	ASSERT_EQ_U64(max, 1000000ull * PERIOD_MAX_CYCLES_PER_NS * PERIOD_MAX_FACTOR);
	period_bounds(SAMPLER_COUNTER_CPU_CLOCK, 0, &nominal, &max);
	ASSERT_EQ_U64(nominal, 0);
	ASSERT_EQ_U64(max, 0);
	return TEST_OK;
}

/* One sample after another on one vCPU at -F 2000 (cpu-clock): each row reads a count. */
struct period_row {
	const char *what;
	bool ok;           /* the read worked */
	uint64_t count;    /* what it read */
	uint64_t period;   /* expected weight */
	uint64_t merged;   /* expected overflows merged into it */
	bool fallback;     /* expected: the nominal period */
};

/* Enabled at count 1 000 000 (an earlier window counted that much): the baseline. */
#define BASE 1000000ull

static const struct period_row period_rows[] = {
	{ "first sample after the enable: from the enable's count", true, BASE + 520000, 520000, 0,
	  false },
	{ "late: 2 overflows in 1.22 ms, 2 samples", true, BASE + 1220000, 700000, 0, false },
	{ "3 in 1.965 ms, 3 samples", true, BASE + 1965000, 745000, 0, false },
	{ "5 in 2.715 ms, 4 samples: one merged", true, BASE + 2715000, 750000, 1, false },
	{ "8 in 4.215 ms, 6 samples (5 + 1 merged before): two merged", true, BASE + 4215000,
	  1500000, 2, false },
	{ "a failed read: nominal, counted", false, 0, NS_2K, 0, true },
	{ "after it: a new baseline, nominal", true, 9000000, NS_2K, 0, true },
	{ "then real counts again", true, 9510000, 510000, 0, false },
	{ "the count went back (garbage): nominal, resync", true, 100, NS_2K, 0, true },
	{ "from the resynced baseline", true, 500100, 500000, 0, false },
	{ "nothing counted: nominal", true, 500100, NS_2K, 0, true },
	{ "above 1024 periods: absurd, nominal", true, 500100 + NS_2K * PERIOD_MAX_FACTOR + 1,
	  NS_2K, 0, true },
	{ "exactly 1024 periods: believed, 1023 merged", true,
	  500100 + NS_2K * PERIOD_MAX_FACTOR + 1 + NS_2K * PERIOD_MAX_FACTOR,
	  NS_2K * PERIOD_MAX_FACTOR, PERIOD_MAX_FACTOR - 1, false },
};

static int test_period_sequence(void)
{
	struct period_base b;
	uint64_t sum = 0, merged = 0;

	period_restart(&b, true, BASE);
	for (size_t i = 0; i < sizeof(period_rows) / sizeof(period_rows[0]); i++) {
		const struct period_row *row = &period_rows[i];
		struct period_result r = period_next(&b, row->ok, row->count, NS_2K,
						     NS_2K * PERIOD_MAX_FACTOR);

		if (r.period != row->period || r.merged != row->merged ||
		    r.fallback != row->fallback) {
			fprintf(stderr, "row %zu (%s): period %llu merged %llu fallback %d\n", i,
				row->what, (unsigned long long)r.period,
				(unsigned long long)r.merged, r.fallback);
			return TEST_FAIL;
		}
		if (i < 5) {
			sum += r.period;
			merged += r.merged;
		}
	}
	/* the real periods of a window add up to the count it covered, and its samples plus the
	 * merged overflows to the overflows that count holds */
	ASSERT_EQ_U64(sum, 4215000);
	ASSERT_EQ_U64(5 + merged, 4215000 / NS_2K);
	return TEST_OK;
}

/* Late exits are not merges: the overflows come on the counter's grid (one every nominal period
 * since the enable), and a sample late by 0.6 periods makes the next one look short. */
static int test_jitter(void)
{
	static const uint64_t at[] = { 1600000, 2050000, 3600000, 4050000, 5999999, 6000000 };
	static const uint64_t merged_want[] = { 0, 0, 0, 0, 0, 0 };
	struct period_base b;
	uint64_t prev = 0;

	period_restart(&b, true, 0);
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		/* at -F 1000: the i-th sample after overflow i+1 at (i+1) ms, none pending */
		struct period_result r = period_next(&b, true, at[i], 1000000, 1024000000);

		ASSERT_EQ_U64(r.period, at[i] - prev);
		ASSERT_EQ_U64(r.merged, merged_want[i]);
		prev = at[i];
	}
	/* 6 ms counted, 6 samples: the one at 5.999999 ms came after overflow 5, this one after 6 */
	ASSERT_EQ_U64(b.accounted, 6);
	ASSERT_EQ_U64(period_next(&b, true, 8000001, 1000000, 1024000000).merged, 1);
	return TEST_OK;
}

/* A restart (the counter enabled again: record --from, an attach window) forgets the counts of
 * the earlier window: the first sample weighs only what was counted since. */
static int test_restart(void)
{
	struct period_base b;
	struct period_result r;

	period_restart(&b, true, 0);
	r = period_next(&b, true, 1000000, NS_2K, NS_2K * PERIOD_MAX_FACTOR);
	ASSERT_EQ_U64(r.merged, 1);
	period_restart(&b, true, 5000000); /* disabled at 1.3 ms, enabled again at 5 ms */
	ASSERT_EQ_U64(b.counted, 0);
	ASSERT_EQ_U64(b.accounted, 0);
	r = period_next(&b, true, 5510000, NS_2K, NS_2K * PERIOD_MAX_FACTOR);
	ASSERT_EQ_U64(r.period, 510000);
	ASSERT_EQ_U64(r.merged, 0);
	ASSERT_TRUE(!r.fallback);
	period_restart(&b, false, 0); /* the enable's read failed */
	ASSERT_TRUE(!b.known);
	return TEST_OK;
}

/* No baseline (the enable's read failed, or a vCPU that never enabled): the first sample has the
 * nominal period, the next ones real counts. */
static int test_no_baseline(void)
{
	struct period_base b = { 0 };
	struct period_result r;

	r = period_next(&b, true, 7777, NS_2K, NS_2K * PERIOD_MAX_FACTOR);
	ASSERT_EQ_U64(r.period, NS_2K);
	ASSERT_TRUE(r.fallback);
	ASSERT_TRUE(b.known);
	ASSERT_EQ_U64(b.count, 7777);
	r = period_next(&b, true, 7777 + 499000, NS_2K, NS_2K * PERIOD_MAX_FACTOR);
	ASSERT_EQ_U64(r.period, 499000);
	ASSERT_TRUE(!r.fallback);
	ASSERT_EQ_U64(r.merged, 0);
	return TEST_OK;
}

/* Cycles: the real count is the period (no nominal one: nothing counted as merged); the bound
 * still holds. */
static int test_cycles(void)
{
	struct period_base b = { .count = 0, .known = true };
	uint64_t nominal, max;
	struct period_result r;

	period_bounds(SAMPLER_COUNTER_CYCLES, 1000, &nominal, &max);
	r = period_next(&b, true, 3000000, nominal, max);
	ASSERT_EQ_U64(r.period, 3000000);
	ASSERT_EQ_U64(r.merged, 0);
	ASSERT_TRUE(!r.fallback);
	r = period_next(&b, true, 3000000 + max + 1, nominal, max);
	ASSERT_EQ_U64(r.period, 0);
	ASSERT_TRUE(r.fallback);
	return TEST_OK;
}


/* The ring buffer the kernel writes at each overflow: records as perf_event_open(2) lays them. */
#define RING 256 /* bytes of the fake data area */

static uint64_t ring_put(uint8_t *ring, uint64_t pos, uint32_t type, uint16_t size,
			 uint64_t value)
{
	uint8_t rec[64] = { 0 };

	memcpy(rec, &type, 4);
	memcpy(rec + 6, &size, 2);
	memcpy(rec + 8, &value, 8);
	/* the header always (a malformed size too), the rest as long as @size says */
	for (uint16_t i = 0; i < (size < 16 ? 16 : size) && i < sizeof(rec); i++)
		ring[(pos + i) % RING] = rec[i];
	return pos + size;
}

static int test_ring(void)
{
	uint8_t ring[RING];
	struct period_ring_scan r;
	uint64_t tail, head;

	memset(ring, 0xa5, sizeof(ring));
	/* nothing new: nothing found, nothing lost */
	r = period_ring_scan(ring, RING, 80, 80);
	ASSERT_TRUE(!r.found && !r.lost && r.samples == 0);
	/* two overflows merged into one sample: the newest count, both seen */
	tail = 80;
	head = ring_put(ring, tail, PERIOD_REC_SAMPLE, 16, 1000000);
	head = ring_put(ring, head, PERIOD_REC_SAMPLE, 16, 2000000);
	r = period_ring_scan(ring, RING, tail, head);
	ASSERT_TRUE(r.found && !r.lost && r.samples == 2 && r.count == 2000000);
	/* a THROTTLE record (any other type) is skipped; a record wrapping the end is read whole,
	 * and so is one whose header wraps */
	tail = RING * 3 - 8; /* free-running positions */
	head = ring_put(ring, tail, 5, 24, 0);
	head = ring_put(ring, head, PERIOD_REC_SAMPLE, 16, 3000000);
	r = period_ring_scan(ring, RING, tail, head);
	ASSERT_TRUE(r.found && !r.lost && r.samples == 1 && r.count == 3000000);
	tail = RING * 5 - 12;
	head = ring_put(ring, tail, PERIOD_REC_SAMPLE, 16, 0x1122334455667788ull);
	r = period_ring_scan(ring, RING, tail, head);
	ASSERT_TRUE(r.found && !r.lost && r.count == 0x1122334455667788ull);
	/* records lost (the ring was full): the newest count is not known */
	tail = 0;
	head = ring_put(ring, tail, PERIOD_REC_SAMPLE, 16, 4000000);
	head = ring_put(ring, head, PERIOD_REC_LOST, 24, 7);
	r = period_ring_scan(ring, RING, tail, head);
	ASSERT_TRUE(r.lost);
	/* malformed: size 0 (no progress), not a multiple of 8, past the head; a head more than
	 * the ring ahead; a bad ring size */
	head = ring_put(ring, 0, PERIOD_REC_SAMPLE, 0, 1);
	r = period_ring_scan(ring, RING, 0, 16);
	ASSERT_TRUE(r.lost && !r.found);
	ring_put(ring, 0, PERIOD_REC_SAMPLE, 12, 1);
	ASSERT_TRUE(period_ring_scan(ring, RING, 0, 16).lost);
	ring_put(ring, 0, PERIOD_REC_SAMPLE, 32, 1);
	ASSERT_TRUE(period_ring_scan(ring, RING, 0, 16).lost);
	ASSERT_TRUE(period_ring_scan(ring, RING, 0, 8).lost); /* a header cut by the head */
	ASSERT_TRUE(period_ring_scan(ring, RING, 0, RING + 8).lost);
	ASSERT_TRUE(period_ring_scan(ring, RING - 8, 0, 16).lost);
	ASSERT_TRUE(period_ring_scan(NULL, RING, 0, 16).lost);
	/* a full ring of minimal records stops at the bound... there: 16 records of 16 bytes */
	head = 0;
	for (int i = 0; i < RING / 16; i++)
		head = ring_put(ring, head, PERIOD_REC_SAMPLE, 16, 100 + (uint64_t)i);
	r = period_ring_scan(ring, RING, 0, head);
	ASSERT_TRUE(r.found && !r.lost && r.samples == RING / 16 && r.count == 100 + RING / 16 - 1);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "period bounds per counter", test_bounds },
	{ "periods of a sequence of samples", test_period_sequence },
	{ "late exits are not merged overflows", test_jitter },
	{ "a restart forgets the earlier window", test_restart },
	{ "first sample without a baseline", test_no_baseline },
	{ "cycles: real counts, no merge count", test_cycles },
	{ "the ring buffer's newest count: merged, wrapped, lost, malformed", test_ring },
};

TEST_MAIN(tests)
