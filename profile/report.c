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
	const char *col[KEY__N];
	int64_t pid;
};

struct sort_ctx {
	const enum sort_key *keys;
	int n_keys;
};

/* qsort_r (glibc, _GNU_SOURCE) comparator: @arg is the struct sort_ctx. */
static int cmp_row(const void *a, const void *b, void *arg)
{
	const struct sort_ctx *sort_ctx = arg;
	const struct row *ra = a, *rb = b;

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

#define OPT(opts, field, def)                                                                  \
	((opts) && (opts)->size >= offsetof(__typeof__(*(opts)), field) + sizeof((opts)->field) \
		 ? (opts)->field                                                               \
		 : (def))

/* The innermost frame of stack @i, or UINT32_MAX when it has none besides the comm. */
static uint32_t leaf_of(const struct profile *p, size_t i, uint64_t *pid, uint32_t *comm)
{
	uint32_t len;
	const uint64_t *k = seqtab_key(&p->stacks, i, &len);

	*pid = k[0];
	*comm = p->frames[k[STACK_KEY_FRAMES]].name;
	return len > STACK_KEY_FRAMES + 1 ? (uint32_t)k[len - 1] : UINT32_MAX;
}

static void write_row(struct outbuf *ob, const struct row *r, const enum sort_key *ks, int nk,
		      const size_t *width, double pct, size_t samples_width)
{
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

	/* Aggregate stacks into rows by the sort keys of their innermost frame. */
	use_period = p->stats.period_total > 0;
	for (size_t i = 0; i < p->stacks.n && !err; i++) {
		uint64_t key[KEY__N], pid;
		uint32_t comm, leaf = leaf_of(p, i, &pid, &comm);

		for (int j = 0; j < nk; j++) {
			switch (ks[j]) {
			case KEY_COMM:
				key[j] = comm;
				break;
			case KEY_PID:
				key[j] = pid;
				break;
			case KEY_DSO:
				key[j] = leaf == UINT32_MAX ? UINT64_MAX : p->frames[leaf].dso;
				break;
			case KEY_SYM:
				key[j] = leaf == UINT32_MAX
						 ? UINT64_MAX
						 : (uint64_t)(p->frames[leaf].kind == FRAME_KERNEL) << 32 |
							   p->frames[leaf].name;
				break;
			case KEY__N:
				break;
			}
		}
		err = seqtab_add(&rowtab, key, (uint32_t)nk, p->stacks.e[i].count,
				 p->stacks.e[i].period, NULL);
	}
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
	sort_ctx = (struct sort_ctx){ .keys = ks, .n_keys = nk };
	qsort_r(rows, n_rows, sizeof(*rows), cmp_row, &sort_ctx);
	if (max_rows && n_rows > max_rows)
		n_rows = max_rows;

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
	outbuf_puts(ob, "\n# ........  ");
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

		if (min_pct > 0 && pct < min_pct)
			break; /* rows are sorted by weight: every later one is smaller */
		write_row(ob, &rows[i], ks, nk, width, pct, samples_width);
	}
	err = outbuf_flush(ob);
out:
	free(ob);
	if (syms)
		for (size_t i = 0; i < rowtab.n; i++)
			free(syms[i]);
	free(syms);
	free(rows);
	seqtab_free(&rowtab);
	return err;
}
