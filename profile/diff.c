// SPDX-License-Identifier: MIT
// hvprof diff: compare two stack sets on normalized shares (each side over its own total), per
// function (self and total) and per stack, keeping only changes that are large enough, backed
// by enough samples, and beyond sampling noise (a two-proportion z test).
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

struct profile_diff {
	struct profile_diff_entry *reg, *imp;
	size_t n_reg, n_imp, cap_reg, cap_imp;
	char **names; /* owned names of the entries */
	size_t n_names, cap_names;
	uint64_t base_total, new_total;
	size_t base_stacks, new_stacks;
	uint64_t min_samples;
	double threshold;
	double z_crit;   /* the |z| an entry needs (diff_z_crit() of the entries tested) */
	size_t tested;   /* entries with enough samples, i.e. tested against noise */
	unsigned int max_rows;
};

double diff_z_crit(size_t tested)
{
	/*
	 * Bonferroni: with @tested entries, each is tested at two-sided level 1% / @tested, so the
	 * chance that any unchanged entry is reported is at most 1%; never below
	 * PROFILE_DIFF_Z. Solve erfc(z / sqrt 2) = 0.01 / tested by bisection (erfc decreases).
	 */
	double target = 0.01 / (double)(tested ? tested : 1), lo = 0, hi = 40;

	for (int i = 0; i < 200; i++) {
		double mid = (lo + hi) / 2;

		if (erfc(mid / sqrt(2.0)) > target)
			lo = mid;
		else
			hi = mid;
	}
	return hi > PROFILE_DIFF_Z ? hi : PROFILE_DIFF_Z;
}

/*
 * Joint tables: one key space for both sides (names interned once); the seqtab's count holds
 * the BASE samples and its period the NEW samples.
 */
struct joint {
	struct strpool names;
	struct seqtab self, total, stacks;
};

static void joint_free(struct joint *j)
{
	strpool_free(&j->names);
	seqtab_free(&j->self);
	seqtab_free(&j->total);
	seqtab_free(&j->stacks);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int joint_add(struct joint *j, const struct profile_stacks *s, int is_new)
{
	uint64_t *ids = NULL, *uniq = NULL;
	size_t cap = 0;
	int err = 0;

	for (size_t i = 0; i < s->stacks.n && !err; i++) {
		uint32_t len;
		const uint64_t *k = seqtab_key(&s->stacks, i, &len);
		uint64_t c = s->stacks.e[i].count;
		uint64_t bc = is_new ? 0 : c, nc = is_new ? c : 0;

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
			uint32_t id;

			err = strpool_intern(&j->names, nm, strlen(nm), &id);
			ids[f] = id;
		}
		if (err || !len)
			break;
		err = seqtab_add(&j->stacks, ids, len, bc, nc, NULL);
		if (!err)
			err = seqtab_add(&j->self, &ids[len - 1], 1, bc, nc, NULL);
		/* Total: each function once per stack, however often it recurs in it. */
		memcpy(uniq, ids, len * sizeof(*ids));
		qsort(uniq, len, sizeof(*uniq), cmp_u64);
		for (uint32_t f = 0; f < len && !err; f++)
			if (!f || uniq[f] != uniq[f - 1])
				err = seqtab_add(&j->total, &uniq[f], 1, bc, nc, NULL);
	}
	free(ids);
	free(uniq);
	return err;
}

static int push(struct profile_diff *d, const struct profile_diff_entry *e, char *name)
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
	d->names[d->n_names++] = name;
	(*arr)[*n] = *e;
	(*arr)[*n].name = name;
	(*n)++;
	return 0;
}

/* Fill the shares and the test of an entry of @b BASE and @n NEW samples; 1 if reportable. */
static int evaluate(const struct profile_diff *d, uint64_t b, uint64_t n,
		    struct profile_diff_entry *e)
{
	double B = (double)d->base_total, N = (double)d->new_total, pool, se;

	e->base_samples = b;
	e->new_samples = n;
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
	if (b < d->min_samples && n < d->min_samples)
		return 0;
	if (fabs(e->z) < d->z_crit || e->delta_pp == 0)
		return 0;
	return fabs(e->change_pct) >= d->threshold;
}

/* Entries of @t with enough samples to be tested. */
static size_t count_tested(const struct profile_diff *d, const struct seqtab *t)
{
	size_t n = 0;

	for (size_t i = 0; i < t->n; i++)
		n += t->e[i].count >= d->min_samples || t->e[i].period >= d->min_samples;
	return n;
}

static int collect(struct profile_diff *d, const struct joint *j, const struct seqtab *t,
		   enum profile_diff_kind kind)
{
	int err = 0;

	for (size_t i = 0; i < t->n && !err; i++) {
		struct profile_diff_entry e = { .kind = kind };
		uint32_t len;
		const uint64_t *k = seqtab_key(t, i, &len);
		size_t total = 0;
		char *name;

		if (!evaluate(d, t->e[i].count, t->e[i].period, &e))
			continue;
		for (uint32_t f = 0; f < len; f++)
			total += strlen(strpool_get(&j->names, (uint32_t)k[f])) + 1;
		name = malloc(total ? total : 1);
		if (!name)
			return -ENOMEM;
		name[0] = '\0';
		for (uint32_t f = 0, off = 0; f < len; f++) {
			const char *nm = strpool_get(&j->names, (uint32_t)k[f]);
			size_t l = strlen(nm);

			if (f)
				name[off++] = ';';
			memcpy(name + off, nm, l + 1);
			off += (uint32_t)l;
		}
		err = push(d, &e, name);
		if (err)
			free(name);
	}
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

int profile_diff_compute(const struct profile_stacks *base, const struct profile_stacks *new_,
			 const struct profile_diff_options *opts, struct profile_diff **out)
{
	struct joint j = { 0 };
	struct profile_diff *d;
	double thr = OPT(opts, threshold_pct, -1.0);
	int err;

	if (!base || !new_ || !out)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->base_total = base->total;
	d->new_total = new_->total;
	d->base_stacks = base->stacks.n;
	d->new_stacks = new_->stacks.n;
	d->min_samples = OPT(opts, min_samples_set, 0) ? OPT(opts, min_samples, 0)
			 : OPT(opts, min_samples, 0)   ? OPT(opts, min_samples, 0)
						       : PROFILE_DIFF_MIN_SAMPLES;
	d->threshold = thr < 0 ? PROFILE_DIFF_THRESHOLD : thr;
	d->max_rows = OPT(opts, max_rows, 0) ? OPT(opts, max_rows, 0) : 20;
	err = joint_add(&j, base, 0);
	if (!err)
		err = joint_add(&j, new_, 1);
	if (!err) {
		d->tested = count_tested(d, &j.self) + count_tested(d, &j.total) +
			    count_tested(d, &j.stacks);
		d->z_crit = diff_z_crit(d->tested);
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
		if (d->reg[i].kind != PROFILE_DIFF_STACK && d->reg[i].change_pct > worst)
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
	free(d);
}

static const char *kind_name(enum profile_diff_kind k)
{
	return k == PROFILE_DIFF_SELF ? "self" : k == PROFILE_DIFF_TOTAL ? "total" : "stack";
}

static void write_text_section(struct outbuf *ob, const struct profile_diff *d,
			       const struct profile_diff_entry *e, size_t n,
			       enum profile_diff_kind kind, int regressions)
{
	static const char *const what[] = { "functions by self share (innermost frame)",
					    "functions by total share (anywhere in the stack)",
					    "stacks" };
	size_t shown = 0;

	outbuf_printf(ob, "\n%s, BASE -> NEW, %s:\n",
		      regressions ? "Regressions (share grew)" : "Improvements (share shrank)",
		      what[kind]);
	for (size_t i = 0; i < n; i++) {
		char change[32];

		if (e[i].kind != kind)
			continue;
		if (shown == 0)
			outbuf_puts(ob, "  BASE%     NEW%   change(pp)  change(rel)      z   BASE n"
					"    NEW n  name\n");
		if (shown++ == d->max_rows)
			break;
		if (isinf(e[i].change_pct))
			snprintf(change, sizeof(change), "new");
		else
			snprintf(change, sizeof(change), "%+.1f%%", e[i].change_pct);
		outbuf_printf(ob, "%6.2f%%  %6.2f%%  %+10.2f  %11s  %5.1f  %7" PRIu64 "  %7" PRIu64
				  "  ",
			      e[i].base_share, e[i].new_share, e[i].delta_pp, change, e[i].z,
			      e[i].base_samples, e[i].new_samples);
		outbuf_puts(ob, e[i].name);
		outbuf_puts(ob, "\n");
	}
	if (shown == 0)
		outbuf_puts(ob, "  (none)\n");
	else if (shown > d->max_rows)
		outbuf_printf(ob, "  ... more not shown (--max-rows)\n");
}

static void write_json_entries(struct outbuf *ob, const struct profile_diff_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		outbuf_printf(ob, "%s{\"kind\":\"%s\",\"name\":", i ? "," : "", kind_name(e[i].kind));
		json_string(ob, e[i].name);
		outbuf_printf(ob, ",\"base_samples\":%" PRIu64 ",\"new_samples\":%" PRIu64
				  ",\"base_share\":",
			      e[i].base_samples, e[i].new_samples);
		json_double(ob, e[i].base_share);
		outbuf_puts(ob, ",\"new_share\":");
		json_double(ob, e[i].new_share);
		outbuf_puts(ob, ",\"delta_pp\":");
		json_double(ob, e[i].delta_pp);
		outbuf_puts(ob, ",\"change_pct\":");
		json_double(ob, e[i].change_pct);
		outbuf_printf(ob, ",\"new_function\":%s,\"z\":",
			      isinf(e[i].change_pct) ? "true" : "false");
		json_double(ob, e[i].z);
		outbuf_puts(ob, "}");
	}
}

int profile_diff_write(const struct profile_diff *d, const char *base_name,
		       const char *new_name, int json, const struct profile_sink *sink)
{
	struct outbuf *ob;
	int err;

	if (!d || !sink || !sink->write)
		return -EINVAL;
	base_name = base_name ? base_name : "BASE";
	new_name = new_name ? new_name : "NEW";
	ob = malloc(sizeof(*ob));
	if (!ob)
		return -ENOMEM;
	outbuf_init(ob, sink);
	if (json) {
		outbuf_puts(ob, "{\"direction\":\"BASE -> NEW\",\"base\":{\"name\":");
		json_string(ob, base_name);
		outbuf_printf(ob, ",\"samples\":%" PRIu64 ",\"stacks\":%zu},\"new\":{\"name\":",
			      d->base_total, d->base_stacks);
		json_string(ob, new_name);
		outbuf_printf(ob, ",\"samples\":%" PRIu64 ",\"stacks\":%zu},\"min_samples\":%" PRIu64
				  ",\"threshold_pct\":",
			      d->new_total, d->new_stacks, d->min_samples);
		json_double(ob, d->threshold);
		outbuf_puts(ob, ",\"z_crit\":");
		json_double(ob, d->z_crit);
		outbuf_printf(ob, ",\"entries_tested\":%zu", d->tested);
		outbuf_puts(ob, ",\"worst_regression_pct\":");
		json_double(ob, profile_diff_worst_regression(d));
		outbuf_printf(ob, ",\"worst_regression_is_new_function\":%s,\"regressions\":[",
			      isinf(profile_diff_worst_regression(d)) ? "true" : "false");
		write_json_entries(ob, d->reg, d->n_reg);
		outbuf_puts(ob, "],\"improvements\":[");
		write_json_entries(ob, d->imp, d->n_imp);
		outbuf_puts(ob, "]}\n");
	} else {
		outbuf_printf(ob, "# hvprof diff, BASE -> NEW\n# BASE: %s (%" PRIu64
				  " samples, %zu stacks)\n# NEW:  %s (%" PRIu64
				  " samples, %zu stacks)\n",
			      base_name, d->base_total, d->base_stacks, new_name, d->new_total,
			      d->new_stacks);
		outbuf_printf(ob, "# Shares are percent of each side's own samples; change(pp) = NEW "
				  "share - BASE share;\n# change(rel) is relative to the BASE share. "
				  "Shown: >= %" PRIu64 " samples on one side,\n# |change(rel)| >= "
				  "%.1f%%, and |z| >= %.2f standard errors of sampling noise\n"
				  "# (%zu entries tested; at most a 1%% chance that an unchanged one "
				  "is shown).\n",
			      d->min_samples, d->threshold, d->z_crit, d->tested);
		for (int kind = PROFILE_DIFF_SELF; kind <= PROFILE_DIFF_STACK; kind++) {
			write_text_section(ob, d, d->reg, d->n_reg, (enum profile_diff_kind)kind, 1);
			write_text_section(ob, d, d->imp, d->n_imp, (enum profile_diff_kind)kind, 0);
		}
	}
	err = outbuf_flush(ob);
	free(ob);
	return err;
}
