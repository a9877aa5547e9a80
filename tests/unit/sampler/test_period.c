// SPDX-License-Identifier: MIT
// Unit tests of a sample's period (sampler/period.c): the counter's count since the previous
// sample of the vCPU, the first sample after an enable (or a re-enable), counts that cannot be
// believed (a failed read, a count that went back or did not move, one above the bound), and the
// overflows a sample stands for beyond its own (signals merged while one was pending), which the
// jitter of late exits must not look like.
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

static const struct test_case tests[] = {
	{ "period bounds per counter", test_bounds },
	{ "periods of a sequence of samples", test_period_sequence },
	{ "late exits are not merged overflows", test_jitter },
	{ "a restart forgets the earlier window", test_restart },
	{ "first sample without a baseline", test_no_baseline },
	{ "cycles: real counts, no merge count", test_cycles },
};

TEST_MAIN(tests)
