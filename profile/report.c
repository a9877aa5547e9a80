// SPDX-License-Identifier: MIT
// `report`: the rows of report_rows.c written as a perf-report-like table of self (and
// children) overhead under the run's facts, or as one JSON object.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

/* Share of @weight in the total weight of @r, in percent (0 when there is no weight). */
static double share(const struct report_rows *r, uint64_t weight)
{
	return r->total_weight ? 100.0 * (double)weight / (double)r->total_weight : 0.0;
}

/* --percent-limit: @row's share in the column sorted on is below @min_pct (when set). */
static int below_limit(const struct report_rows *r, const struct report_row *row, double min_pct)
{
	return min_pct > 0 && share(r, r->children ? row->child_weight : row->weight) < min_pct;
}

static void write_json(struct outbuf *ob, const struct profile *p, const struct facts *facts,
		       const struct report_rows *r, size_t n_rows, double min_pct)
{
	const enum report_key *ks = r->keys;
	const char *key, *value;

	outbuf_puts(ob, "{\"facts\":[");
	for (size_t i = 0; i < facts->n; i++) {
		if (i)
			outbuf_puts(ob, ",");
		json_string(ob, facts->line[i]);
	}
	outbuf_puts(ob, "],\"meta\":{");
	for (size_t i = 0; !profile_meta_at(p, i, &key, &value); i++) {
		if (i)
			outbuf_puts(ob, ",");
		json_string(ob, key);
		outbuf_puts(ob, ":");
		json_string(ob, value);
	}
	outbuf_puts(ob, "},\"counters\":{");
	for (size_t i = 0; i < p->n_counters; i++) {
		if (i)
			outbuf_puts(ob, ",");
		json_string(ob, p->counters[i].name);
		outbuf_printf(ob, ":%" PRIu64, p->counters[i].value);
	}
	outbuf_printf(ob, "},\"weight\":\"%s\",\"total_samples\":%" PRIu64
			  ",\"total_weight\":%" PRIu64 ",\"lost_user_stacks\":%" PRIu64
			  ",\"sort\":[",
		      r->use_period ? "period" : "samples", p->stats.samples, r->total_weight,
		      p->stats.lost_user);
	for (int j = 0; j < r->n_keys; j++)
		outbuf_printf(ob, "%s\"%s\"", j ? "," : "", report_key_name(ks[j]));
	outbuf_puts(ob, "],\"rows\":[");
	for (size_t i = 0; i < n_rows; i++) {
		const struct report_row *row = &r->rows[i];
		double self = share(r, row->weight), child = share(r, row->child_weight);

		if (below_limit(r, row, min_pct))
			break; /* rows are sorted by that share: every later one is smaller */
		outbuf_printf(ob, "%s{\"samples\":%" PRIu64 ",\"weight\":%" PRIu64 ",\"self\":",
			      i ? "," : "", row->count, row->weight);
		json_double(ob, self);
		if (r->children) {
			outbuf_printf(ob, ",\"children_weight\":%" PRIu64 ",\"children\":",
				      row->child_weight);
			json_double(ob, child);
		}
		for (int j = 0; j < r->n_keys; j++) {
			if (ks[j] == REPORT_KEY_PID) {
				outbuf_printf(ob, ",\"pid\":%" PRId64, row->pid);
				continue;
			}
			outbuf_printf(ob, ",\"%s\":", report_key_name(ks[j]));
			/* the Symbol column is "[k] name" or "[.] name": JSON gets the name */
			json_string(ob, ks[j] == REPORT_KEY_SYM ? row->col[REPORT_KEY_SYM] + 4
								: row->col[ks[j]]);
			if (ks[j] == REPORT_KEY_SYM)
				outbuf_printf(ob, ",\"kernel\":%s",
					      row->col[REPORT_KEY_SYM][1] == 'k' ? "true"
										 : "false");
		}
		outbuf_puts(ob, "}");
	}
	outbuf_puts(ob, "]}\n");
}

/* Column widths of the first @n_rows rows: the header or the widest value shown. */
static void column_widths(const struct report_rows *r, size_t n_rows, size_t *samples_width,
			  size_t width[REPORT_N_KEYS])
{
	const enum report_key *ks = r->keys;

	*samples_width = 7; /* "Samples" */
	for (size_t i = 0; i < n_rows; i++) {
		char num[24];
		size_t w = (size_t)snprintf(num, sizeof(num), "%" PRIu64, r->rows[i].count);

		if (w > *samples_width)
			*samples_width = w;
	}
	for (int j = 0; j < r->n_keys; j++) {
		width[j] = strlen(report_key_header(ks[j]));
		for (size_t i = 0; i < n_rows; i++) {
			char num[24];
			size_t w = ks[j] == REPORT_KEY_PID
					   ? (size_t)snprintf(num, sizeof(num), "%" PRId64,
							      r->rows[i].pid)
					   : strlen(r->rows[i].col[ks[j]]);

			if (w > width[j])
				width[j] = w;
		}
	}
}

/* The column headers and the dotted line under them. */
static void write_columns(struct outbuf *ob, const struct report_rows *r, size_t samples_width,
			  const size_t *width)
{
	const enum report_key *ks = r->keys;
	int nk = r->n_keys;

	if (r->children)
		outbuf_puts(ob, "# Children: share of the samples whose stack contains the row's "
				"keys (each sample counted once)\n# Self, Samples: share and number "
				"of the samples whose innermost frame has them\n#\n"
				"# Children      Self  ");
	else
		outbuf_puts(ob, "#\n# Overhead  ");
	outbuf_printf(ob, "%*s", (int)samples_width, "Samples");
	for (int j = 0; j < nk; j++) {
		if (ks[j] == REPORT_KEY_PID)
			outbuf_printf(ob, "  %*s", (int)width[j], report_key_header(ks[j]));
		else if (j == nk - 1)
			outbuf_printf(ob, "  %s", report_key_header(ks[j]));
		else
			outbuf_printf(ob, "  %-*s", (int)width[j], report_key_header(ks[j]));
	}
	outbuf_puts(ob, r->children ? "\n# ........  ........  " : "\n# ........  ");
	for (size_t d = 0; d < samples_width; d++)
		outbuf_puts(ob, ".");
	for (int j = 0; j < nk; j++) {
		outbuf_puts(ob, "  ");
		for (size_t d = 0; d < width[j]; d++)
			outbuf_puts(ob, ".");
	}
	outbuf_puts(ob, "\n#\n");
}

static void write_row(struct outbuf *ob, const struct report_rows *r,
		      const struct report_row *row, const size_t *width, size_t samples_width)
{
	const enum report_key *ks = r->keys;
	int nk = r->n_keys;

	if (r->children)
		outbuf_printf(ob, "%9.2f%%  %7.2f%%  %*" PRIu64, share(r, row->child_weight),
			      share(r, row->weight), (int)samples_width, row->count);
	else
		outbuf_printf(ob, "%9.2f%%  %*" PRIu64, share(r, row->weight), (int)samples_width,
			      row->count);
	for (int i = 0; i < nk; i++) {
		int last = i == nk - 1;

		if (ks[i] == REPORT_KEY_PID)
			outbuf_printf(ob, "  %*" PRId64, (int)width[i], row->pid);
		else if (last)
			outbuf_printf(ob, "  %s", row->col[ks[i]]);
		else
			outbuf_printf(ob, "  %-*s", (int)width[i], row->col[ks[i]]);
	}
	outbuf_puts(ob, "\n");
}

static void write_text(struct outbuf *ob, const struct facts *facts, const struct report_rows *r,
		       size_t n_rows, double min_pct)
{
	size_t width[REPORT_N_KEYS], samples_width;

	column_widths(r, n_rows, &samples_width, width);
	for (size_t i = 0; i < facts->n; i++)
		outbuf_printf(ob, "# %s\n", facts->line[i]);
	outbuf_printf(ob, "# Overhead: share of the %s\n",
		      r->use_period ? "total period" : "samples");
	write_columns(ob, r, samples_width, width);
	for (size_t i = 0; i < n_rows; i++) {
		const struct report_row *row = &r->rows[i];

		if (below_limit(r, row, min_pct))
			break; /* rows are sorted by that share: every later one is smaller */
		write_row(ob, r, row, width, samples_width);
	}
}

int profile_report(const struct profile *p, const struct profile_report_options *opts,
		   const struct profile_sink *sink)
{
	const char *sort = OPT(opts, sort, NULL);
	unsigned int max_rows = OPT(opts, max_rows, 0);
	double min_pct = OPT(opts, min_percent, 0.0);
	int children = OPT(opts, children, 0) != 0;
	int format = OPT(opts, format, PROFILE_REPORT_STDIO);
	struct facts facts = { 0 };
	struct report_rows rows = { 0 };
	struct outbuf *ob = NULL;
	size_t n_rows;
	int err;

	if (!p || !sink || !sink->write)
		return -EINVAL;
	if (format != PROFILE_REPORT_STDIO && format != PROFILE_REPORT_JSON)
		return -EINVAL;
	err = report_rows_build(p, sort, children, &rows);
	if (!err)
		err = profile_facts(p, &facts);
	if (!err) {
		ob = malloc(sizeof(*ob));
		if (!ob)
			err = -ENOMEM;
	}
	if (err)
		goto out;
	outbuf_init(ob, sink);
	n_rows = max_rows && rows.n > max_rows ? max_rows : rows.n;
	if (format == PROFILE_REPORT_JSON)
		write_json(ob, p, &facts, &rows, n_rows, min_pct);
	else
		write_text(ob, &facts, &rows, n_rows, min_pct);
	err = outbuf_flush(ob);
out:
	free(ob);
	facts_free(&facts);
	report_rows_free(&rows);
	return err;
}
