// SPDX-License-Identifier: MIT
// Unit tests of the stay rule (sampler/marks.c: stay_walk_now, struct stay_stat) without
// /dev/kvm: which kernel entries' samples mark their thread and which walk pt_regs at once, from
// the samples per stay their marks saw; exploration marks, the way back, the decay.
#include <stdio.h>
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

/* A deterministic generator for the simulation below (numerical recipes' LCG, high bits). */
static uint32_t lcg(uint64_t *state)
{
	*state = *state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*state >> 33);
}

struct sim {
	uint64_t samples, walked, marked; /* samples, and how each was taken */
	uint64_t marks;                   /* marks made: each costs the return an exit */
};

/*
 * @n_stays stays of the fixture's thread entered with @e, each of @len(rng) samples, taken by
 * the sampler's own path (user_part_of_kernel_sample: the rule, the marks, the walks), the
 * return to user at each stay's end. Adds to @out what the samples got.
 */
static int simulate(struct fixture *f, struct svcpu *sv, const struct gi_user_regs *e,
		    unsigned int n_stays, unsigned int (*len)(uint64_t *), uint64_t *rng,
		    struct sim *out)
{
	uint64_t marks0 = sv->c.marks;

	for (unsigned int i = 0; i < n_stays; i++) {
		unsigned int k = len(rng);

		for (unsigned int j = 0; j < k; j++) {
			struct hvp_sample smp;

			memset(&smp, 0, sizeof(smp));
			smp.pid = FK_PID;
			smp.rip = FK_STEXT + 0x100;
			n_recs = 0;
			user_part_of_kernel_sample(sv, &smp, f->fk.task_kva, &f->fk.fm.pg, e, false,
						   f->fk.mm_kva, false);
			out->samples++;
			if (smp.cookie)
				out->marked++;
			else if (smp.n_user >= 4 && smp.user_ips[0] == e->ip)
				out->walked++;
			else
				return TEST_FAIL; /* neither a mark nor the path */
		}
		marks_resolve_at_return(sv, f->fk.task_kva, FK_PID, f->fk.mm_kva, &f->fk.fm.pg, e);
	}
	out->marks += sv->c.marks - marks0;
	return TEST_OK;
}

static unsigned int len_one(uint64_t *rng)
{
	(void)rng;
	return 1;
}

static unsigned int len_ten(uint64_t *rng)
{
	(void)rng;
	return 10;
}

/* 95% of stays see one sample, 5% forty: 2.95 samples per stay, a mean under stay_pays 4,
 * though two thirds of the samples are in long stays */
static unsigned int len_skewed(uint64_t *rng)
{
	return lcg(rng) % 100 < 5 ? 40 : 1;
}

/* One sample, one more with probability 7/8 each: geometric, 8 samples per stay on average
 * (one stay in eight of a single sample) */
static unsigned int len_geometric8(uint64_t *rng)
{
	unsigned int k = 1;

	while (k < 400 && lcg(rng) % 8 != 0)
		k++;
	return k;
}

/*
 * The rule as a whole, over thousands of stays through the sampler's own path: short stays end
 * up walked (all but the exploration turns), long ones marked; when a kind's stays grow, its
 * exploration marks bring the marks back; a skewed mix whose mean is under stay_pays stays
 * walked; every sample gets either a mark or its path.
 */
static int test_stay_converge(void)
{
	uint64_t rng = 17;
	struct gi_user_regs e;
	struct fixture f;
	struct svcpu *sv;
	struct sim a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 }, g = { 0 };

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		return TEST_FAIL;
	sv = &f.s->vcpus[0];
	f.s->stay_adaptive = true;
	f.s->stay_pays = 4;
	e = f.entry;
	e.entry_known = true;
	/* short stays: after STAY_MIN_MARKS marks, all but 1 in STAY_EXPLORE walked */
	e.orig_ax = 110;
	ASSERT_EQ_INT(simulate(&f, sv, &e, 4000, len_one, &rng, &a), TEST_OK);
	ASSERT_TRUE(a.marked <= STAY_MIN_MARKS + a.samples / STAY_EXPLORE + 1);
	ASSERT_EQ_U64(sv->c.stay_back_to_marks, 0);
	/* the same kind's stays grow to 10 samples: the marks come back, and stay */
	ASSERT_EQ_INT(simulate(&f, sv, &e, 400, len_ten, &rng, &b), TEST_OK);
	ASSERT_TRUE(sv->c.stay_back_to_marks >= 1);
	ASSERT_EQ_INT(simulate(&f, sv, &e, 400, len_ten, &rng, &c), TEST_OK);
	ASSERT_TRUE(c.marked == c.samples);
	/* a skewed mix under stay_pays: walked, the exploration marks (joined by the rest of a
	 * long stay they fall in) do not flip it back: about one mark per STAY_EXPLORE samples,
	 * where marking every stay would make 5 700 */
	e.orig_ax = 0;
	ASSERT_EQ_INT(simulate(&f, sv, &e, 6000, len_skewed, &rng, &d), TEST_OK);
	ASSERT_TRUE(d.marks <= STAY_MIN_MARKS + d.samples / STAY_EXPLORE * 5 / 4);
	/* geometric stays of mean 8, twice stay_pays: a mark pays, marked */
	e.orig_ax = 1;
	ASSERT_EQ_INT(simulate(&f, sv, &e, 2000, len_geometric8, &rng, &g), TEST_OK);
	fprintf(stderr, "  short %llu/%llu walked; grown %llu/%llu marked after %llu/%llu; skewed "
		"%llu/%llu walked, %llu marks; geometric %llu/%llu marked; back to marks %llu\n",
		(unsigned long long)a.walked, (unsigned long long)a.samples,
		(unsigned long long)c.marked, (unsigned long long)c.samples,
		(unsigned long long)b.marked, (unsigned long long)b.samples,
		(unsigned long long)d.walked, (unsigned long long)d.samples,
		(unsigned long long)d.marks, (unsigned long long)g.marked,
		(unsigned long long)g.samples, (unsigned long long)sv->c.stay_back_to_marks);
	ASSERT_TRUE(g.marked >= g.samples * 8 / 10);
	fixture_fini(&f);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "stays: entries whose stays see too few samples for a mark are walked at once",
	  test_stay_stats },
	{ "stays: exploration marks of short stays, the way back to marking, decay",
	  test_stay_explore },
	{ "stays: over thousands of stays, short ones walked, long ones marked, a change followed",
	  test_stay_converge },
};

TEST_MAIN(tests)
