// SPDX-License-Identifier: MIT
// Unit tests of the stay rule (sampler/marks.c: stay_walk_now, struct stay_stat) without
// /dev/kvm: which kernel entries' samples mark their thread and which walk pt_regs at once, from
// the samples per stay their marks saw; exploration marks, the way back, the decay.
#include <string.h>

#include <hvprof/compiler.h>

#include "sampler_fixture.h"
#include "test.h"

/* One stay in the kernel of the fixture's thread entered with @e: @k samples, then its return. */
static int one_stay(struct fixture *f, struct svcpu *sv, const struct gi_user_regs *e, int k,
		    bool explore)
{
	struct mark_req req = req_of(f, FK_PID, e);
	uint64_t c;

	req.explore = explore;
	c = marks_take(sv, &req);
	if (!c)
		return TEST_FAIL;
	for (int i = 1; i < k; i++)
		if (marks_take(sv, &req) != c)
			return TEST_FAIL;
	marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg, e);
	return TEST_OK;
}

/* How many of @n samples entered with @e stay_walk_now walks at once. */
static int walked_of(struct svcpu *sv, const struct gi_user_regs *e, int n)
{
	bool explore;
	int walked = 0;

	for (int i = 0; i < n; i++)
		walked += stay_walk_now(sv, e, &explore);
	return walked;
}

/*
 * Which stays are walked at once (struct stay_stat): a kind of entry whose marked stays average
 * fewer than stay_pays samples (every join counted, not only a stay's first) is walked into its
 * samples after STAY_MIN_MARKS marks, but every STAY_EXPLORE-th sample still marks (an
 * exploration mark); one that averages stay_pays or more keeps marking; interrupts and
 * exceptions (orig_ax -1) are one kind; other numbers beyond the table and entries not known
 * always mark; the walked sample carries the user path itself, with no cookie; an exploration
 * turn taken in a sample makes an exploration mark.
 */
static int test_stay_stats(void)
{
	static const uint64_t hostile[] = { STAY_STATS_N, UINT64_MAX - 1, 1ull << 40,
					    0x40000000ull | 1 /* x32 */ };
	struct gi_user_regs one, two, four, irq, other, unknown;
	struct hvp_sample smp;
	struct fixture f;
	struct svcpu *sv;
	bool explore = false;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		return TEST_FAIL;
	sv = &f.s->vcpus[0];
	f.s->stay_adaptive = true;
	ASSERT_EQ_INT(f.s->stay_pays, STAY_PAYS_HW); /* no host: the VMX/SVM value */
	f.s->stay_pays = 4; /* not STAY_PAYS_HW: the rule must read it */
	one = two = four = irq = other = f.entry;
	one.entry_known = two.entry_known = four.entry_known = true;
	irq.entry_known = other.entry_known = true;
	one.orig_ax = 110;  /* getppid: one sample per stay */
	two.orig_ax = 39;   /* getpid: three (the first-join rule of before marked these) */
	four.orig_ax = 0;   /* read: four, exactly stay_pays: a mark pays */
	irq.orig_ax = UINT64_MAX;
	unknown = one;
	unknown.entry_known = false;
	ASSERT_TRUE(!stay_walk_now(sv, &one, &explore) && !explore); /* nothing known: mark */
	for (int i = 0; i < STAY_MIN_MARKS; i++) {
		ASSERT_EQ_INT(one_stay(&f, sv, &one, 1, false), TEST_OK);
		ASSERT_EQ_INT(one_stay(&f, sv, &two, 3, false), TEST_OK);
		ASSERT_EQ_INT(one_stay(&f, sv, &four, 4, false), TEST_OK);
		ASSERT_EQ_INT(one_stay(&f, sv, &irq, 1, false), TEST_OK);
		for (size_t h = 0; h < ARRAY_SIZE(hostile); h++) {
			other.orig_ax = hostile[h];
			ASSERT_EQ_INT(one_stay(&f, sv, &other, 1, false), TEST_OK);
		}
	}
	ASSERT_EQ_INT(atomic_load(&f.s->stay[STAY_CLASS_IRQ].made), STAY_MIN_MARKS);
	ASSERT_EQ_INT(atomic_load(&f.s->stay[0].joins), 3 * STAY_MIN_MARKS);
	ASSERT_EQ_INT(walked_of(sv, &one, 2 * STAY_EXPLORE), 2 * STAY_EXPLORE - 2);
	ASSERT_EQ_INT(walked_of(sv, &two, 2 * STAY_EXPLORE), 2 * STAY_EXPLORE - 2);
	ASSERT_EQ_INT(walked_of(sv, &irq, 2 * STAY_EXPLORE), 2 * STAY_EXPLORE - 2);
	ASSERT_EQ_INT(walked_of(sv, &four, 2 * STAY_EXPLORE), 0);
	ASSERT_EQ_INT(walked_of(sv, &unknown, 2 * STAY_EXPLORE), 0);
	for (size_t h = 0; h < ARRAY_SIZE(hostile); h++) {
		other.orig_ax = hostile[h];
		ASSERT_EQ_INT(stay_class(&other), -1);
		ASSERT_EQ_INT(walked_of(sv, &other, 2 * STAY_EXPLORE), 0);
	}
	/* a sample of the short call: its user path in the sample, no mark */
	memset(&smp, 0, sizeof(smp));
	smp.pid = FK_PID;
	smp.rip = FK_STEXT + 0x100;
	n_recs = 0;
	user_part_of_kernel_sample(sv, &smp, f.fk.task_kva, &f.fk.fm.pg, &one, false,
				   f.fk.mm_kva, false);
	ASSERT_EQ_U64(smp.cookie, 0);
	ASSERT_EQ_U64(sv->c.stay_walked_inline, 1);
	ASSERT_TRUE(smp.n_user >= 4 && smp.user_ips[0] == f.entry.ip);
	ASSERT_EQ_INT(atomic_load(&f.s->marks.pending), 0);
	/* the class's exploration turn, taken in a sample: an exploration mark, with a cookie */
	for (int i = 0; i < STAY_EXPLORE && sv->c.stay_walked_inline < STAY_EXPLORE; i++) {
		memset(&smp, 0, sizeof(smp));
		smp.pid = FK_PID;
		smp.rip = FK_STEXT + 0x100;
		user_part_of_kernel_sample(sv, &smp, f.fk.task_kva, &f.fk.fm.pg, &one, false,
					   f.fk.mm_kva, false);
		if (smp.cookie)
			break;
	}
	ASSERT_TRUE(smp.cookie != 0);
	ASSERT_EQ_INT(atomic_load(&f.s->stay[110].xmade), 1);
	ASSERT_EQ_U64(sv->c.stay_explore_marks, 1);
	marks_resolve_at_return(sv, f.fk.task_kva, FK_PID, f.fk.mm_kva, &f.fk.fm.pg, &one);
	/* off (record --mark-every-stay): always mark */
	f.s->stay_adaptive = false;
	ASSERT_EQ_INT(walked_of(sv, &two, 2 * STAY_EXPLORE), 0);
	fixture_fini(&f);
	return TEST_OK;
}

/*
 * The exploration marks of a class walked at once: they fall on samples, so a long stay is
 * picked as often as it has samples, and how many joins it then sees says little; the share
 * never joined is 1 / samples per stay. Stays mostly of 1 sample with a few long ones (mean
 * under stay_pays) keep walking however many joins the long ones bring; stays that grew to
 * stay_pays bring the marks back, learning again. The figures halve at STAY_DECAY marks.
 */
static int test_stay_explore(void)
{
	struct gi_user_regs sc, decay;
	struct fixture f;
	struct svcpu *sv;
	bool explore;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		return TEST_FAIL;
	sv = &f.s->vcpus[0];
	f.s->stay_adaptive = true;
	f.s->stay_pays = 3;
	sc = decay = f.entry;
	sc.entry_known = decay.entry_known = true;
	sc.orig_ax = 110;
	for (int i = 0; i < STAY_MIN_MARKS; i++)
		ASSERT_EQ_INT(one_stay(&f, sv, &sc, 1, false), TEST_OK);
	ASSERT_TRUE(walked_of(sv, &sc, 1) == 1);
	/* 32 exploration marks: 12 never joined, 20 joined by many samples (a stay of 40
	 * picked in its middle): 32 / 12 = 2.7 samples per stay, under 3: still walked (counting
	 * the joins, even once each, would say (32 + 400) / 32 = 13.5) */
	for (int i = 0; i < STAY_MIN_MARKS; i++)
		ASSERT_EQ_INT(one_stay(&f, sv, &sc, i < 12 ? 1 : 21, true), TEST_OK);
	ASSERT_EQ_INT(atomic_load(&f.s->stay[110].xmade), 32);
	ASSERT_EQ_INT(atomic_load(&f.s->stay[110].xjoined), 20);
	ASSERT_EQ_INT(atomic_load(&f.s->stay[110].joins), 0);
	ASSERT_TRUE(walked_of(sv, &sc, 1) == 1);
	/* four more joined: 36 / 12 = 3: the marks come back, the figures restart */
	for (int i = 0; i < 4; i++)
		ASSERT_EQ_INT(one_stay(&f, sv, &sc, 2, true), TEST_OK);
	ASSERT_EQ_U64(sv->c.stay_back_to_marks, 0);
	ASSERT_TRUE(!stay_walk_now(sv, &sc, &explore) && !explore);
	ASSERT_EQ_U64(sv->c.stay_back_to_marks, 1);
	ASSERT_EQ_INT(atomic_load(&f.s->stay[110].made), 0);
	ASSERT_EQ_INT(atomic_load(&f.s->stay[110].xmade), 0);
	ASSERT_TRUE(!stay_walk_now(sv, &sc, &explore) && !explore); /* learning again */
	/* decay: at STAY_DECAY marks, made and joins halve */
	decay.orig_ax = 1;
	for (int i = 0; i < STAY_DECAY; i++)
		ASSERT_EQ_INT(one_stay(&f, sv, &decay, 2, false), TEST_OK);
	ASSERT_EQ_INT(atomic_load(&f.s->stay[1].made), STAY_DECAY / 2);
	ASSERT_EQ_INT(atomic_load(&f.s->stay[1].joins), STAY_DECAY / 2);
	fixture_fini(&f);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "stays: entries whose stays see too few samples for a mark are walked at once",
	  test_stay_stats },
	{ "stays: exploration marks of short stays, the way back to marking, decay",
	  test_stay_explore },
};

TEST_MAIN(tests)
