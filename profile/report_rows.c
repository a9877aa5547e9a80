// SPDX-License-Identifier: MIT
// The rows of `report`: self (and children) weight by comm/pid/dso/sym of each sample's
// innermost frame (or of every frame), sorted; report.c writes them as text or JSON.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

static const struct {
	const char *name;
	const char *header;
} keys[REPORT_N_KEYS] = {
	[REPORT_KEY_COMM] = { "comm", "Command" },
	[REPORT_KEY_PID] = { "pid", "Pid" },
	[REPORT_KEY_DSO] = { "dso", "Shared Object" },
	[REPORT_KEY_SYM] = { "sym", "Symbol" },
};

#define DEFAULT_SORT "comm,dso,sym"

const char *report_key_name(enum report_key k)
{
	return keys[k].name;
}

const char *report_key_header(enum report_key k)
{
	return keys[k].header;
}

/* Parse @sort into @out (at most REPORT_N_KEYS keys). Return the number of keys, or -EINVAL. */
static int parse_sort(const char *sort, enum report_key out[REPORT_N_KEYS], char *bad,
		      size_t bad_len)
{
	unsigned int seen = 0;
	int n = 0;
	const char *s = sort;

	if (!sort) {
		if (bad && bad_len)
			bad[0] = '\0';
		return -EINVAL;
	}
	for (;;) {
		size_t len = strcspn(s, ",");
		int k;

		for (k = 0; k < REPORT_N_KEYS; k++)
			if (strlen(keys[k].name) == len && strncmp(keys[k].name, s, len) == 0)
				break;
		if (k == REPORT_N_KEYS || (seen & (1u << k))) {
			if (bad && bad_len)
				snprintf(bad, bad_len, "%.*s", (int)len, s);
			return -EINVAL;
		}
		seen |= 1u << k;
		out[n++] = (enum report_key)k;
		if (!s[len])
			break;
		s += len + 1;
	}
	return n;
}

int profile_sort_check(const char *sort, char *bad_key, size_t bad_key_len)
{
	enum report_key k[REPORT_N_KEYS];
	int n = parse_sort(sort, k, bad_key, bad_key_len);

	return n < 0 ? n : 0;
}

struct sort_ctx {
	const enum report_key *keys;
	int n_keys;
	int children;
};

/* qsort_r (glibc, _GNU_SOURCE) comparator: @arg is the struct sort_ctx. */
static int cmp_row(const void *a, const void *b, void *arg)
{
	const struct sort_ctx *sort_ctx = arg;
	const struct report_row *ra = a, *rb = b;

	if (sort_ctx->children && ra->child_weight != rb->child_weight)
		return ra->child_weight > rb->child_weight ? -1 : 1;
	if (ra->weight != rb->weight)
		return ra->weight > rb->weight ? -1 : 1;
	if (ra->count != rb->count)
		return ra->count > rb->count ? -1 : 1;
	for (int i = 0; i < sort_ctx->n_keys; i++) {
		enum report_key k = sort_ctx->keys[i];
		int c;

		if (k == REPORT_KEY_PID) {
			if (ra->pid != rb->pid)
				return ra->pid < rb->pid ? -1 : 1;
			continue;
		}
		c = strcmp(ra->col[k], rb->col[k]);
		if (c)
			return c;
	}
	return 0;
}

/* The innermost frame of stack @i, or UINT32_MAX when it has none besides the comm. */
static uint32_t leaf_of(const struct profile *p, size_t i, uint64_t *pid, uint32_t *comm)
{
	uint32_t len;
	const uint64_t *k = seqtab_key(&p->stacks, i, &len);

	*pid = k[0];
	*comm = p->frames[k[STACK_KEY_FRAMES]].name;
	return len > STACK_KEY_FRAMES + 1 ? (uint32_t)k[len - 1] : UINT32_MAX;
}

/* The row key of frame @frame (UINT32_MAX: none) of a sample of @pid and @comm. */
static void key_of(const struct profile *p, const enum report_key *ks, int nk, uint64_t pid,
		   uint32_t comm, uint32_t frame, uint64_t key[REPORT_N_KEYS])
{
	for (int j = 0; j < nk; j++) {
		switch (ks[j]) {
		case REPORT_KEY_COMM:
			key[j] = comm;
			break;
		case REPORT_KEY_PID:
			key[j] = pid;
			break;
		case REPORT_KEY_DSO:
			key[j] = frame == UINT32_MAX ? UINT64_MAX : p->frames[frame].dso;
			break;
		case REPORT_KEY_SYM:
			key[j] = frame == UINT32_MAX
					 ? UINT64_MAX
					 : (uint64_t)(p->frames[frame].kind == FRAME_KERNEL) << 32 |
						   p->frames[frame].name;
			break;
		case REPORT_N_KEYS:
			break;
		}
	}
}

struct keyrow {
	uint64_t k[REPORT_N_KEYS];
};

static int cmp_keyrow(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct keyrow));
}

/*
 * Children: add each stack's weight once to every distinct row key among its frames (the comm
 * frame excluded); @child[i] gets the weight of row i of @rowtab (rows are created as needed).
 */
static int add_children(const struct profile *p, const enum report_key *ks, int nk,
			int use_period, struct seqtab *rowtab, uint64_t **child)
{
	struct keyrow *kr = malloc((2 * HVP_MAX_CALLCHAIN + 4) * sizeof(*kr));
	size_t cap = 0;
	int err = 0;

	if (!kr)
		return -ENOMEM;
	*child = NULL;
	for (size_t i = 0; i < p->stacks.n && !err; i++) {
		uint32_t len, comm;
		const uint64_t *k = seqtab_key(&p->stacks, i, &len);
		uint64_t w = use_period ? p->stacks.e[i].period : p->stacks.e[i].count;
		size_t n = 0;

		comm = p->frames[k[STACK_KEY_FRAMES]].name;
		/* SAFETY: a stack has at most 2 + 2 * HVP_MAX_CALLCHAIN frames after the comm. */
		for (uint32_t j = STACK_KEY_FRAMES + 1; j < len && n < 2 * HVP_MAX_CALLCHAIN + 4;
		     j++) {
			memset(&kr[n], 0, sizeof(kr[n]));
			key_of(p, ks, nk, k[0], comm, (uint32_t)k[j], kr[n].k);
			n++;
		}
		if (n == 0) { /* a stack of the comm alone: its row is that of "no frame" */
			memset(&kr[0], 0, sizeof(kr[0]));
			key_of(p, ks, nk, k[0], comm, UINT32_MAX, kr[0].k);
			n = 1;
		}
		if (n > 1) /* qsort's array may not be NULL, even for 0 elements */
			qsort(kr, n, sizeof(*kr), cmp_keyrow);
		for (size_t j = 0; j < n && !err; j++) {
			size_t idx;

			if (j && !cmp_keyrow(&kr[j], &kr[j - 1]))
				continue;
			err = seqtab_add(rowtab, kr[j].k, (uint32_t)nk, 0, 0, &idx);
			if (err)
				break;
			if (idx >= cap) {
				size_t ncap = cap ? 2 * cap : 1024;
				uint64_t *nc;

				while (ncap <= idx)
					ncap *= 2;
				nc = realloc(*child, ncap * sizeof(*nc));
				if (!nc) {
					err = -ENOMEM;
					break;
				}
				memset(nc + cap, 0, (ncap - cap) * sizeof(*nc));
				*child = nc;
				cap = ncap;
			}
			(*child)[idx] += w;
		}
	}
	free(kr);
	return err;
}

/* Row @r of the row key @key (values of the sort keys @ks[0..@nk)); *@sym: its owned "[k] name". */
static int fill_row(const struct profile *p, struct report_row *r, const uint64_t *key,
		    const enum report_key *ks, int nk, char **sym)
{
	for (int j = 0; j < nk; j++) {
		switch (ks[j]) {
		case REPORT_KEY_COMM:
			r->col[REPORT_KEY_COMM] = strpool_get(&p->strs, (uint32_t)key[j]);
			break;
		case REPORT_KEY_PID:
			r->pid = (int64_t)key[j];
			break;
		case REPORT_KEY_DSO:
			r->col[REPORT_KEY_DSO] = key[j] == UINT64_MAX
							 ? "[unknown]"
							 : strpool_get(&p->strs, (uint32_t)key[j]);
			break;
		case REPORT_KEY_SYM: {
			int kernel = key[j] != UINT64_MAX && (key[j] >> 32);
			const char *name = key[j] == UINT64_MAX
						   ? "[unknown]"
						   : strpool_get(&p->strs, (uint32_t)key[j]);

			if (asprintf(sym, "[%s] %s", kernel ? "k" : ".", name) < 0) {
				*sym = NULL;
				return -ENOMEM;
			}
			r->col[REPORT_KEY_SYM] = *sym;
			break;
		}
		case REPORT_N_KEYS:
			break;
		}
	}
	return 0;
}

/* The rows of the row table @rowtab, with the children weights @child (or NULL), sorted. */
static int make_rows(const struct profile *p, const struct seqtab *rowtab, const uint64_t *child,
		     struct report_rows *out)
{
	struct sort_ctx sort_ctx;
	int err;

	out->rows = calloc(rowtab->n ? rowtab->n : 1, sizeof(*out->rows));
	out->syms = calloc(rowtab->n ? rowtab->n : 1, sizeof(*out->syms));
	if (!out->rows || !out->syms)
		return -ENOMEM;
	for (size_t i = 0; i < rowtab->n; i++) {
		uint32_t len;
		const uint64_t *key = seqtab_key(rowtab, i, &len);
		struct report_row *r = &out->rows[out->n++];

		r->count = rowtab->e[i].count;
		r->weight = out->use_period ? rowtab->e[i].period : rowtab->e[i].count;
		r->child_weight = child ? child[i] : 0;
		out->total_weight += r->weight;
		err = fill_row(p, r, key, out->keys, out->n_keys, &out->syms[i]);
		if (err)
			return err;
	}
	sort_ctx = (struct sort_ctx){ .keys = out->keys, .n_keys = out->n_keys,
				      .children = out->children };
	if (out->n > 1) /* qsort_r's array may not be NULL, even for 0 elements */
		qsort_r(out->rows, out->n, sizeof(*out->rows), cmp_row, &sort_ctx);
	return 0;
}

int report_rows_build(const struct profile *p, const char *sort, int children,
		      struct report_rows *out)
{
	struct seqtab rowtab = { 0 };
	uint64_t *child = NULL;
	int nk, err = 0;

	*out = (struct report_rows){ .children = children != 0 };
	nk = parse_sort(sort ? sort : DEFAULT_SORT, out->keys, NULL, 0);
	if (nk < 0)
		return nk;
	out->n_keys = nk;
	/* Aggregate stacks into rows by the sort keys of their innermost frame. */
	out->use_period = p->stats.period_total > 0;
	for (size_t i = 0; i < p->stacks.n && !err; i++) {
		uint64_t key[REPORT_N_KEYS], pid;
		uint32_t comm, leaf = leaf_of(p, i, &pid, &comm);

		key_of(p, out->keys, nk, pid, comm, leaf, key);
		err = seqtab_add(&rowtab, key, (uint32_t)nk, p->stacks.e[i].count,
				 p->stacks.e[i].period, NULL);
	}
	if (!err && out->children)
		err = add_children(p, out->keys, nk, out->use_period, &rowtab, &child);
	if (!err)
		err = make_rows(p, &rowtab, child, out);
	free(child);
	seqtab_free(&rowtab);
	if (err)
		report_rows_free(out);
	return err;
}

void report_rows_free(struct report_rows *r)
{
	if (r->syms)
		for (size_t i = 0; i < r->n; i++)
			free(r->syms[i]);
	free(r->syms);
	free(r->rows);
	*r = (struct report_rows){ 0 };
}
