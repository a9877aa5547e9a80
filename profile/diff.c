// SPDX-License-Identifier: MIT
// hvprof diff: compare the stack sets of BASE and NEW runs on normalized shares (each run over
// its own total), per function (self and total) and per stack, keeping only changes that are
// large enough, backed by enough samples, and beyond sampling and run-to-run noise
// (diff_stats.c: with repeated runs, a moderated t whose prior is fitted over all entries).
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff_internal.h"

/*
 * Joint tables: one key space for every run (names interned once); the seqtab's count holds
 * the pooled BASE samples and its period the pooled NEW samples, and runs[] each entry's
 * samples per run (n_runs per entry, BASE runs first).
 */
struct joint_table {
	struct seqtab t;
	uint64_t *runs;
	size_t cap_entries;
};

struct joint {
	struct strpool names;
	struct joint_table self, total, stacks;
	size_t n_runs;
};

static void joint_free(struct joint *j)
{
	struct joint_table *tabs[] = { &j->self, &j->total, &j->stacks };

	strpool_free(&j->names);
	for (size_t i = 0; i < 3; i++) {
		seqtab_free(&tabs[i]->t);
		free(tabs[i]->runs);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Add @c samples of run @run (BASE when @run < @n_base) to the entry of key @ids. */
static int table_add(struct joint_table *jt, const struct joint *j, size_t n_base,
		     const uint64_t *ids, uint32_t len, size_t run, uint64_t c)
{
	size_t idx;
	int err;

	err = seqtab_add(&jt->t, ids, len, run < n_base ? c : 0, run < n_base ? 0 : c, &idx);
	if (err)
		return err;
	if (idx >= jt->cap_entries) {
		size_t cap = jt->cap_entries ? 2 * jt->cap_entries : 256;
		uint64_t *nr;

		while (cap <= idx)
			cap *= 2;
		nr = realloc(jt->runs, cap * j->n_runs * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		memset(nr + jt->cap_entries * j->n_runs, 0,
		       (cap - jt->cap_entries) * j->n_runs * sizeof(*nr));
		jt->runs = nr;
		jt->cap_entries = cap;
	}
	/* SAFETY: idx < cap_entries and run < n_runs, the array's dimensions. */
	jt->runs[idx * j->n_runs + run] += c;
	return 0;
}

const char *diff_comm_name(const char *comm, char *buf, size_t len)
{
	static const char prefix[] = "kworker/";
	const char *p = comm + sizeof(prefix) - 1, *colon, *num;
	size_t head, tail;

	if (strncmp(comm, prefix, sizeof(prefix) - 1))
		return comm;
	if (*p == 'u')
		p++;
	if (!isdigit((unsigned char)*p))
		return comm;
	while (isdigit((unsigned char)*p))
		p++;
	colon = p;
	if (*colon != ':' || !isdigit((unsigned char)colon[1]))
		return comm;
	for (num = colon + 1; isdigit((unsigned char)*num); num++)
		;
	head = (size_t)(colon + 1 - comm);
	tail = strlen(num);
	if (head + 1 + tail + 1 > len)
		return comm;
	memcpy(buf, comm, head);
	buf[head] = '*';
	memcpy(buf + head + 1, num, tail + 1);
	return buf;
}

static int joint_add(struct joint *j, const struct profile_stacks *s, size_t run, size_t n_base)
{
	uint64_t *ids = NULL, *uniq = NULL;
	size_t cap = 0;
	int err = 0;

	for (size_t i = 0; i < s->stacks.n && !err; i++) {
		uint32_t len;
		const uint64_t *k = seqtab_key(&s->stacks, i, &len);
		uint64_t c = s->stacks.e[i].count;

		if (len > cap) {
			free(ids);
			free(uniq);
			cap = len;
			ids = malloc(cap * sizeof(*ids));
			uniq = malloc(cap * sizeof(*uniq));
			if (!ids || !uniq) {
				err = -ENOMEM;
				break;
			}
		}
		for (uint32_t f = 0; f < len && !err; f++) {
			const char *nm = strpool_get(&s->names, (uint32_t)k[f]);
			char comm[64];
			uint32_t id;

			if (!f)
				nm = diff_comm_name(nm, comm, sizeof(comm));
			err = strpool_intern(&j->names, nm, strlen(nm), &id);
			ids[f] = id;
		}
		if (err || !len)
			break;
		err = table_add(&j->stacks, j, n_base, ids, len, run, c);
		if (!err)
			err = table_add(&j->self, j, n_base, &ids[len - 1], 1, run, c);
		/* Total: each function once per stack, however often it recurs in it. */
		memcpy(uniq, ids, len * sizeof(*ids));
		qsort(uniq, len, sizeof(*uniq), cmp_u64);
		for (uint32_t f = 0; f < len && !err; f++)
			if (!f || uniq[f] != uniq[f - 1])
				err = table_add(&j->total, j, n_base, &uniq[f], 1, run, c);
	}
	free(ids);
	free(uniq);
	return err;
}

static int push(struct profile_diff *d, const struct profile_diff_entry *e, char *block,
		const char *name)
{
	struct profile_diff_entry **arr = e->delta_pp > 0 ? &d->reg : &d->imp;
	size_t *n = e->delta_pp > 0 ? &d->n_reg : &d->n_imp;
	size_t *cap = e->delta_pp > 0 ? &d->cap_reg : &d->cap_imp;

	if (d->n_names == d->cap_names) {
		char **nn = array_grow(d->names, &d->cap_names, sizeof(*nn), 64);

		if (!nn)
			return -ENOMEM;
		d->names = nn;
	}
	if (*n == *cap) {
		struct profile_diff_entry *na = array_grow(*arr, cap, sizeof(*na), 64);

		if (!na)
			return -ENOMEM;
		*arr = na;
	}
	d->names[d->n_names++] = block;
	(*arr)[*n] = *e;
	(*arr)[*n].name = name;
	(*arr)[*n].run_shares = (const double *)(void *)block;
	(*n)++;
	return 0;
}

/*
 * Fill the pooled shares and both tests of an entry of @b BASE and @n NEW pooled samples and
 * @runs samples per run; its per-run shares (fractions) go to @shares. 1 if reportable.
 */
static int evaluate(struct profile_diff *d, uint64_t b, uint64_t n, const uint64_t *runs,
		    double *shares, struct profile_diff_entry *e)
{
	double B = (double)d->base_total, N = (double)d->new_total, pool, se;
	struct diff_side_counts sb = { runs, d->run_totals, d->n_base };
	struct diff_side_counts sn = { runs + d->n_base, d->run_totals + d->n_base, d->n_new };
	struct diff_runs r;
	int tested = b >= d->min_samples || n >= d->min_samples;

	e->base_samples = b;
	e->new_samples = n;
	e->n_base_runs = d->n_base;
	e->n_new_runs = d->n_new;
	e->base_share = B > 0 ? 100.0 * (double)b / B : 0;
	e->new_share = N > 0 ? 100.0 * (double)n / N : 0;
	e->delta_pp = e->new_share - e->base_share;
	e->change_pct = e->base_share > 0 ? 100.0 * e->delta_pp / e->base_share
					  : e->new_share > 0 ? INFINITY : 0;
	/* Two-proportion z test with the pooled share: is the change beyond sampling noise? */
	e->z = 0;
	if (B > 0 && N > 0) {
		pool = ((double)b + (double)n) / (B + N);
		se = sqrt(pool * (1 - pool) * (1 / B + 1 / N));
		e->z = se > 0 ? (e->delta_pp / 100.0) / se : 0;
	}
	if (tested && fabs(e->z) > d->max_abs_z)
		d->max_abs_z = fabs(e->z);
	/* ... and beyond run-to-run noise: measured by the runs, or the factor for one run. */
	if (diff_runs_stat(&sb, &sn, shares, &r))
		return 0;
	if (d->n_base == 1 && d->n_new == 1) {
		e->t = e->z / d->run_factor;
		e->df = INFINITY;
	} else {
		diff_moderated_t(&r, &d->prior, &e->t, &e->df);
	}
	e->p_value = diff_t_two_sided_p(e->t, e->df);
	for (size_t i = 0; i < d->n_base + d->n_new; i++)
		shares[i] *= 100.0;
	if (!tested || e->delta_pp == 0 || fabs(e->z) < d->z_crit)
		return 0;
	if (e->t * e->delta_pp <= 0 || !(e->p_value <= d->alpha) || fabs(e->t) < PROFILE_DIFF_Z)
		return 0;
	return fabs(e->change_pct) >= d->threshold;
}

/*
 * The prior of the dispersions (diff_stats.c) from every tested entry of the three tables, with
 * two runs or more on a side: their own dispersions.
 */
static int fit_prior(struct profile_diff *d, const struct joint *j)
{
	const struct joint_table *tabs[] = { &j->self, &j->total, &j->stacks };
	double *phi, *shares;
	size_t m = 0;
	int err;

	if (d->n_base + d->n_new < 3)
		return 0;
	phi = malloc((d->tested ? d->tested : 1) * sizeof(*phi));
	shares = malloc(j->n_runs * sizeof(*shares));
	err = phi && shares ? 0 : -ENOMEM;
	for (size_t t = 0; t < 3 && !err; t++) {
		const struct seqtab *st = &tabs[t]->t;

		for (size_t i = 0; i < st->n && m < d->tested; i++) {
			const uint64_t *runs = tabs[t]->runs + i * j->n_runs;
			struct diff_side_counts sb = { runs, d->run_totals, d->n_base };
			struct diff_side_counts sn = { runs + d->n_base, d->run_totals + d->n_base,
						       d->n_new };
			struct diff_runs r;

			if (st->e[i].count < d->min_samples && st->e[i].period < d->min_samples)
				continue;
			if (diff_runs_stat(&sb, &sn, shares, &r))
				continue;
			phi[m++] = r.phi;
		}
	}
	if (!err)
		err = diff_prior_fit(phi, m, (double)(d->n_base + d->n_new) - 2, &d->prior);
	free(phi);
	free(shares);
	return err;
}

/* Entries of @t with enough samples to be tested. */
static size_t count_tested(const struct profile_diff *d, const struct seqtab *t)
{
	size_t n = 0;

	for (size_t i = 0; i < t->n; i++)
		n += t->e[i].count >= d->min_samples || t->e[i].period >= d->min_samples;
	return n;
}

/* A malloc'ed block: the @n_runs per-run shares, then the name of key @k ("a;b;c"). */
static char *entry_block(const struct joint *j, const uint64_t *k, uint32_t len, size_t n_runs,
			 char **name)
{
	size_t total = n_runs * sizeof(double) + 1;
	char *block;

	for (uint32_t f = 0; f < len; f++)
		total += strlen(strpool_get(&j->names, (uint32_t)k[f])) + 1;
	block = malloc(total);
	if (!block)
		return NULL;
	*name = block + n_runs * sizeof(double);
	(*name)[0] = '\0';
	for (uint32_t f = 0, off = 0; f < len; f++) {
		const char *nm = strpool_get(&j->names, (uint32_t)k[f]);
		size_t l = strlen(nm);

		if (f)
			(*name)[off++] = ';';
		memcpy(*name + off, nm, l + 1);
		off += (uint32_t)l;
	}
	return block;
}

static int collect(struct profile_diff *d, const struct joint *j, const struct joint_table *jt,
		   enum profile_diff_kind kind)
{
	double *shares = malloc(j->n_runs * sizeof(*shares));
	int err = 0;

	if (!shares)
		return -ENOMEM;
	for (size_t i = 0; i < jt->t.n && !err; i++) {
		struct profile_diff_entry e = { .kind = kind };
		uint32_t len;
		const uint64_t *k = seqtab_key(&jt->t, i, &len);
		char *block, *name;

		if (!evaluate(d, jt->t.e[i].count, jt->t.e[i].period, jt->runs + i * j->n_runs,
			      shares, &e))
			continue;
		block = entry_block(j, k, len, j->n_runs, &name);
		if (!block) {
			err = -ENOMEM;
			break;
		}
		memcpy(block, shares, j->n_runs * sizeof(*shares));
		err = push(d, &e, block, name);
		if (err)
			free(block);
	}
	free(shares);
	return err;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct profile_diff_entry *x = a, *y = b;
	double dx = fabs(x->delta_pp), dy = fabs(y->delta_pp);

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (dx != dy)
		return dx > dy ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The options into @d; -EINVAL a bad run-noise factor. */
static int diff_setup(struct profile_diff *d, const struct profile_diff_options *opts)
{
	double thr = OPT(opts, threshold_pct, -1.0), rf = OPT(opts, run_noise_factor, 0.0);
	double ms = OPT(opts, fail_min_share_pct, 0.0);

	d->min_samples = OPT(opts, min_samples_set, 0) ? OPT(opts, min_samples, 0)
			 : OPT(opts, min_samples, 0)   ? OPT(opts, min_samples, 0)
						       : PROFILE_DIFF_MIN_SAMPLES;
	d->threshold = thr < 0 ? PROFILE_DIFF_THRESHOLD : thr;
	d->max_rows = OPT(opts, max_rows, 0) ? OPT(opts, max_rows, 0) : 20;
	d->run_factor = rf == 0 ? PROFILE_DIFF_RUN_FACTOR : rf;
	d->fail_min_share = ms == 0 ? PROFILE_DIFF_FAIL_MIN_SHARE : ms < 0 ? -1 : ms;
	if (!(d->fail_min_share <= 100))
		return -EINVAL;
	return d->run_factor >= 1 && d->run_factor <= 1000 ? 0 : -EINVAL;
}

/* The runs into the joint tables and @d's totals. */
static int diff_join(struct profile_diff *d, struct joint *j,
		     const struct profile_stacks *const *base,
		     const struct profile_stacks *const *new_)
{
	int err = 0;

	for (size_t r = 0; r < j->n_runs && !err; r++) {
		const struct profile_stacks *s = r < d->n_base ? base[r] : new_[r - d->n_base];

		if (!s)
			return -EINVAL;
		d->run_totals[r] = s->total;
		*(r < d->n_base ? &d->base_total : &d->new_total) += s->total;
		err = joint_add(j, s, r, d->n_base);
	}
	if (err)
		return err;
	d->base_stacks = d->n_base == 1 ? base[0]->stacks.n : 0;
	d->new_stacks = d->n_new == 1 ? new_[0]->stacks.n : 0;
	for (size_t i = 0; i < j->stacks.t.n; i++) {
		d->base_stacks += d->n_base > 1 && j->stacks.t.e[i].count;
		d->new_stacks += d->n_new > 1 && j->stacks.t.e[i].period;
	}
	return 0;
}

int profile_diff_compute_runs(const struct profile_stacks *const *base, size_t n_base,
			      const struct profile_stacks *const *new_, size_t n_new,
			      const struct profile_diff_options *opts, struct profile_diff **out)
{
	struct joint j = { 0 };
	struct profile_diff *d;
	int err;

	if (!base || !new_ || !out || !n_base || !n_new || n_base > PROFILE_DIFF_MAX_RUNS ||
	    n_new > PROFILE_DIFF_MAX_RUNS)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->n_base = n_base;
	d->n_new = n_new;
	j.n_runs = n_base + n_new;
	d->run_totals = calloc(j.n_runs, sizeof(*d->run_totals));
	err = d->run_totals ? diff_setup(d, opts) : -ENOMEM;
	if (!err)
		err = diff_join(d, &j, base, new_);
	if (!err) {
		d->tested = count_tested(d, &j.self.t) + count_tested(d, &j.total.t) +
			    count_tested(d, &j.stacks.t);
		d->z_crit = diff_z_crit(d->tested);
		d->alpha = diff_alpha(d->tested);
		err = fit_prior(d, &j);
	}
	if (!err) {
		err = collect(d, &j, &j.self, PROFILE_DIFF_SELF);
	}
	if (!err)
		err = collect(d, &j, &j.total, PROFILE_DIFF_TOTAL);
	if (!err)
		err = collect(d, &j, &j.stacks, PROFILE_DIFF_STACK);
	joint_free(&j);
	if (err) {
		profile_diff_free(d);
		return err;
	}
	/* qsort's array must not be NULL, even for 0 elements (C11 7.22.5p1): none reported. */
	if (d->n_reg)
		qsort(d->reg, d->n_reg, sizeof(*d->reg), cmp_entry);
	if (d->n_imp)
		qsort(d->imp, d->n_imp, sizeof(*d->imp), cmp_entry);
	*out = d;
	return 0;
}

int profile_diff_compute(const struct profile_stacks *base, const struct profile_stacks *new_,
			 const struct profile_diff_options *opts, struct profile_diff **out)
{
	if (!base || !new_)
		return -EINVAL;
	return profile_diff_compute_runs(&base, 1, &new_, 1, opts, out);
}

const struct profile_diff_entry *profile_diff_entries(const struct profile_diff *d,
						      int regressions, size_t *n)
{
	if (!d) {
		*n = 0;
		return NULL;
	}
	*n = regressions ? d->n_reg : d->n_imp;
	return regressions ? d->reg : d->imp;
}

double profile_diff_worst_regression(const struct profile_diff *d)
{
	double worst = 0;

	for (size_t i = 0; d && i < d->n_reg; i++)
		if (d->reg[i].kind != PROFILE_DIFF_STACK && d->reg[i].change_pct > worst &&
		    d->reg[i].new_share >= d->fail_min_share)
			worst = d->reg[i].change_pct;
	return worst;
}

void profile_diff_free(struct profile_diff *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n_names; i++)
		free(d->names[i]);
	free(d->names);
	free(d->reg);
	free(d->imp);
	free(d->run_totals);
	free(d);
}
