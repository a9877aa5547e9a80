// SPDX-License-Identifier: MIT
// perf-report-like table of self overhead by comm/pid/dso/sym of each sample's innermost frame.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

enum sort_key {
	KEY_COMM,
	KEY_PID,
	KEY_DSO,
	KEY_SYM,
	KEY__N,
};

static const struct {
	const char *name;
	const char *header;
} keys[KEY__N] = {
	[KEY_COMM] = { "comm", "Command" },
	[KEY_PID] = { "pid", "Pid" },
	[KEY_DSO] = { "dso", "Shared Object" },
	[KEY_SYM] = { "sym", "Symbol" },
};

#define DEFAULT_SORT "comm,dso,sym"

/* Parse @sort into @out (at most KEY__N keys). Return the number of keys, or -EINVAL. */
static int parse_sort(const char *sort, enum sort_key out[KEY__N], char *bad, size_t bad_len)
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

		for (k = 0; k < KEY__N; k++)
			if (strlen(keys[k].name) == len && strncmp(keys[k].name, s, len) == 0)
				break;
		if (k == KEY__N || (seen & (1u << k))) {
			if (bad && bad_len)
				snprintf(bad, bad_len, "%.*s", (int)len, s);
			return -EINVAL;
		}
		seen |= 1u << k;
		out[n++] = (enum sort_key)k;
		if (!s[len])
			break;
		s += len + 1;
	}
	return n;
}

int profile_sort_check(const char *sort, char *bad_key, size_t bad_key_len)
{
	enum sort_key k[KEY__N];
	int n = parse_sort(sort, k, bad_key, bad_key_len);

	return n < 0 ? n : 0;
}

struct row {
	uint64_t count, weight;
	uint64_t child_weight; /* samples (or period) whose stack has a frame with these keys */
	const char *col[KEY__N];
	int64_t pid;
};

struct sort_ctx {
	const enum sort_key *keys;
	int n_keys;
	int children;
};

/* qsort_r (glibc, _GNU_SOURCE) comparator: @arg is the struct sort_ctx. */
static int cmp_row(const void *a, const void *b, void *arg)
{
	const struct sort_ctx *sort_ctx = arg;
	const struct row *ra = a, *rb = b;

	if (sort_ctx->children && ra->child_weight != rb->child_weight)
		return ra->child_weight > rb->child_weight ? -1 : 1;
	if (ra->weight != rb->weight)
		return ra->weight > rb->weight ? -1 : 1;
	if (ra->count != rb->count)
		return ra->count > rb->count ? -1 : 1;
	for (int i = 0; i < sort_ctx->n_keys; i++) {
		enum sort_key k = sort_ctx->keys[i];
		int c;

		if (k == KEY_PID) {
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
static void key_of(const struct profile *p, const enum sort_key *ks, int nk, uint64_t pid,
		   uint32_t comm, uint32_t frame, uint64_t key[KEY__N])
{
	for (int j = 0; j < nk; j++) {
		switch (ks[j]) {
		case KEY_COMM:
			key[j] = comm;
			break;
		case KEY_PID:
			key[j] = pid;
			break;
		case KEY_DSO:
			key[j] = frame == UINT32_MAX ? UINT64_MAX : p->frames[frame].dso;
			break;
		case KEY_SYM:
			key[j] = frame == UINT32_MAX
					 ? UINT64_MAX
					 : (uint64_t)(p->frames[frame].kind == FRAME_KERNEL) << 32 |
						   p->frames[frame].name;
			break;
		case KEY__N:
			break;
		}
	}
}

struct keyrow {
	uint64_t k[KEY__N];
};

static int cmp_keyrow(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct keyrow));
}

/*
 * Children: add each stack's weight once to every distinct row key among its frames (the comm
 * frame excluded); @child[i] gets the weight of row i of @rowtab (rows are created as needed).
 */
static int add_children(const struct profile *p, const enum sort_key *ks, int nk,
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

static void write_json(struct outbuf *ob, const struct profile *p, const struct row *rows,
		       size_t n_rows, const enum sort_key *ks, int nk, int children,
		       int use_period, uint64_t total_weight, double min_pct)
{
	char facts[FACT_MAX][FACT_LINE];
	size_t n_facts = profile_facts(p, facts, FACT_MAX);
	const char *key, *value;

	outbuf_puts(ob, "{\"facts\":[");
	for (size_t i = 0; i < n_facts; i++) {
		if (i)
			outbuf_puts(ob, ",");
		json_string(ob, facts[i]);
	}
	outbuf_puts(ob, "],\"meta\":{");
	for (size_t i = 0; !profile_meta_at(p, i, &key, &value); i++) {
		if (i)
			outbuf_puts(ob, ",");
		json_string(ob, key);
		outbuf_puts(ob, ":");
		json_string(ob, value);
	}
	outbuf_printf(ob, "},\"weight\":\"%s\",\"total_samples\":%" PRIu64
			  ",\"total_weight\":%" PRIu64 ",\"lost_user_stacks\":%" PRIu64
			  ",\"sort\":[",
		      use_period ? "period" : "samples", p->stats.samples, total_weight,
		      p->stats.lost_user);
	for (int j = 0; j < nk; j++)
		outbuf_printf(ob, "%s\"%s\"", j ? "," : "", keys[ks[j]].name);
	outbuf_puts(ob, "],\"rows\":[");
	for (size_t i = 0; i < n_rows; i++) {
		const struct row *r = &rows[i];
		double self = total_weight ? 100.0 * (double)r->weight / (double)total_weight : 0;
		double child = total_weight ? 100.0 * (double)r->child_weight / (double)total_weight
					    : 0;

		if (min_pct > 0 && (children ? child : self) < min_pct)
			break;
		outbuf_printf(ob, "%s{\"samples\":%" PRIu64 ",\"weight\":%" PRIu64 ",\"self\":",
			      i ? "," : "", r->count, r->weight);
		json_double(ob, self);
		if (children) {
			outbuf_printf(ob, ",\"children_weight\":%" PRIu64 ",\"children\":",
				      r->child_weight);
			json_double(ob, child);
		}
		for (int j = 0; j < nk; j++) {
			if (ks[j] == KEY_PID) {
				outbuf_printf(ob, ",\"pid\":%" PRId64, r->pid);
				continue;
			}
			outbuf_printf(ob, ",\"%s\":", keys[ks[j]].name);
			/* the Symbol column is "[k] name" or "[.] name": JSON gets the name */
			json_string(ob, ks[j] == KEY_SYM ? r->col[KEY_SYM] + 4 : r->col[ks[j]]);
			if (ks[j] == KEY_SYM)
				outbuf_printf(ob, ",\"kernel\":%s",
					      r->col[KEY_SYM][1] == 'k' ? "true" : "false");
		}
		outbuf_puts(ob, "}");
	}
	outbuf_puts(ob, "]}\n");
}

static void write_row(struct outbuf *ob, const struct row *r, const enum sort_key *ks, int nk,
		      const size_t *width, double pct, double child_pct, int children,
		      size_t samples_width)
{
	if (children)
		outbuf_printf(ob, "%9.2f%%  %7.2f%%  %*" PRIu64, child_pct, pct,
			      (int)samples_width, r->count);
	else
		outbuf_printf(ob, "%9.2f%%  %*" PRIu64, pct, (int)samples_width, r->count);
	for (int i = 0; i < nk; i++) {
		int last = i == nk - 1;

		if (ks[i] == KEY_PID)
			outbuf_printf(ob, "  %*" PRId64, (int)width[i], r->pid);
		else if (last)
			outbuf_printf(ob, "  %s", r->col[ks[i]]);
		else
			outbuf_printf(ob, "  %-*s", (int)width[i], r->col[ks[i]]);
	}
	outbuf_puts(ob, "\n");
}

int profile_report(const struct profile *p, const struct profile_report_options *opts,
		   const struct profile_sink *sink)
{
	const char *sort = OPT(opts, sort, NULL);
	unsigned int max_rows = OPT(opts, max_rows, 0);
	double min_pct = OPT(opts, min_percent, 0.0);
	int children = OPT(opts, children, 0) != 0;
	int format = OPT(opts, format, PROFILE_REPORT_STDIO);
	uint64_t *child = NULL;
	char facts[FACT_MAX][FACT_LINE];
	struct seqtab rowtab = { 0 };
	enum sort_key ks[KEY__N];
	size_t width[KEY__N], samples_width = 7, n_facts, n_rows = 0;
	struct row *rows = NULL;
	struct outbuf *ob = NULL;
	uint64_t total_weight = 0;
	int use_period, nk, err = 0;
	struct sort_ctx sort_ctx;
	char **syms = NULL;

	if (!p || !sink || !sink->write)
		return -EINVAL;
	nk = parse_sort(sort ? sort : DEFAULT_SORT, ks, NULL, 0);
	if (nk < 0)
		return nk;
	if (format != PROFILE_REPORT_STDIO && format != PROFILE_REPORT_JSON)
		return -EINVAL;

	/* Aggregate stacks into rows by the sort keys of their innermost frame. */
	use_period = p->stats.period_total > 0;
	for (size_t i = 0; i < p->stacks.n && !err; i++) {
		uint64_t key[KEY__N], pid;
		uint32_t comm, leaf = leaf_of(p, i, &pid, &comm);

		key_of(p, ks, nk, pid, comm, leaf, key);
		err = seqtab_add(&rowtab, key, (uint32_t)nk, p->stacks.e[i].count,
				 p->stacks.e[i].period, NULL);
	}
	if (!err && children)
		err = add_children(p, ks, nk, use_period, &rowtab, &child);
	if (err)
		goto out;

	rows = calloc(rowtab.n ? rowtab.n : 1, sizeof(*rows));
	syms = calloc(rowtab.n ? rowtab.n : 1, sizeof(*syms));
	if (!rows || !syms) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < rowtab.n; i++) {
		uint32_t len;
		const uint64_t *key = seqtab_key(&rowtab, i, &len);
		struct row *r = &rows[n_rows++];

		r->count = rowtab.e[i].count;
		r->weight = use_period ? rowtab.e[i].period : rowtab.e[i].count;
		r->child_weight = child ? child[i] : 0;
		total_weight += r->weight;
		for (int j = 0; j < nk; j++) {
			switch (ks[j]) {
			case KEY_COMM:
				r->col[KEY_COMM] = strpool_get(&p->strs, (uint32_t)key[j]);
				break;
			case KEY_PID:
				r->pid = (int64_t)key[j];
				break;
			case KEY_DSO:
				r->col[KEY_DSO] = key[j] == UINT64_MAX
							  ? "[unknown]"
							  : strpool_get(&p->strs, (uint32_t)key[j]);
				break;
			case KEY_SYM: {
				int kernel = key[j] != UINT64_MAX && (key[j] >> 32);
				const char *name = key[j] == UINT64_MAX
							   ? "[unknown]"
							   : strpool_get(&p->strs, (uint32_t)key[j]);

				if (asprintf(&syms[i], "[%s] %s", kernel ? "k" : ".", name) < 0) {
					syms[i] = NULL;
					err = -ENOMEM;
					goto out;
				}
				r->col[KEY_SYM] = syms[i];
				break;
			}
			case KEY__N:
				break;
			}
		}
	}
	sort_ctx = (struct sort_ctx){ .keys = ks, .n_keys = nk, .children = children };
	if (n_rows > 1) /* qsort_r's array may not be NULL, even for 0 elements */
		qsort_r(rows, n_rows, sizeof(*rows), cmp_row, &sort_ctx);
	if (max_rows && n_rows > max_rows)
		n_rows = max_rows;
	if (format == PROFILE_REPORT_JSON) {
		ob = malloc(sizeof(*ob));
		if (!ob) {
			err = -ENOMEM;
			goto out;
		}
		outbuf_init(ob, sink);
		write_json(ob, p, rows, n_rows, ks, nk, children, use_period, total_weight,
			   min_pct);
		err = outbuf_flush(ob);
		goto out;
	}

	/* Column widths: the header or the widest value shown. */
	for (size_t i = 0; i < n_rows; i++) {
		char num[24];
		size_t w = (size_t)snprintf(num, sizeof(num), "%" PRIu64, rows[i].count);

		if (w > samples_width)
			samples_width = w;
	}
	for (int j = 0; j < nk; j++) {
		width[j] = strlen(keys[ks[j]].header);
		for (size_t i = 0; i < n_rows; i++) {
			char num[24];
			size_t w = ks[j] == KEY_PID ? (size_t)snprintf(num, sizeof(num), "%" PRId64,
								      rows[i].pid)
						    : strlen(rows[i].col[ks[j]]);

			if (w > width[j])
				width[j] = w;
		}
	}

	ob = malloc(sizeof(*ob));
	if (!ob) {
		err = -ENOMEM;
		goto out;
	}
	outbuf_init(ob, sink);
	n_facts = profile_facts(p, facts, FACT_MAX);
	for (size_t i = 0; i < n_facts; i++)
		outbuf_printf(ob, "# %s\n", facts[i]);
	outbuf_printf(ob, "# Overhead: share of the %s\n", use_period ? "total period" : "samples");
	if (children)
		outbuf_puts(ob, "# Children: share of the samples whose stack contains the row's "
				"keys (each sample counted once)\n#\n# Children      Self  ");
	else
		outbuf_puts(ob, "#\n# Overhead  ");
	outbuf_printf(ob, "%*s", (int)samples_width, "Samples");
	for (int j = 0; j < nk; j++) {
		if (ks[j] == KEY_PID)
			outbuf_printf(ob, "  %*s", (int)width[j], keys[ks[j]].header);
		else if (j == nk - 1)
			outbuf_printf(ob, "  %s", keys[ks[j]].header);
		else
			outbuf_printf(ob, "  %-*s", (int)width[j], keys[ks[j]].header);
	}
	outbuf_puts(ob, children ? "\n# ........  ........  " : "\n# ........  ");
	for (size_t d = 0; d < samples_width; d++)
		outbuf_puts(ob, ".");
	for (int j = 0; j < nk; j++) {
		outbuf_puts(ob, "  ");
		for (size_t d = 0; d < width[j]; d++)
			outbuf_puts(ob, ".");
	}
	outbuf_puts(ob, "\n#\n");
	for (size_t i = 0; i < n_rows; i++) {
		double pct = total_weight ? 100.0 * (double)rows[i].weight / (double)total_weight
					  : 0.0;
		double child_pct = total_weight ? 100.0 * (double)rows[i].child_weight /
							  (double)total_weight
						: 0.0;

		if (min_pct > 0 && (children ? child_pct : pct) < min_pct)
			break; /* rows are sorted by that share: every later one is smaller */
		write_row(ob, &rows[i], ks, nk, width, pct, child_pct, children, samples_width);
	}
	err = outbuf_flush(ob);
out:
	free(child);
	free(ob);
	if (syms)
		for (size_t i = 0; i < rowtab.n; i++)
			free(syms[i]);
	free(syms);
	free(rows);
	seqtab_free(&rowtab);
	return err;
}
