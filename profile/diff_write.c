// SPDX-License-Identifier: MIT
// hvprof diff's text and JSON: every change stated BASE -> NEW, the runs of each side with
// their samples, the noise rule in force, and (JSON) each entry's per-run shares.
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff_internal.h"

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
			outbuf_puts(ob, "  BASE%     NEW%   change(pp)  change(rel)      z      t   BASE n"
					"    NEW n  name\n");
		if (shown++ == d->max_rows)
			break;
		if (isinf(e[i].change_pct))
			snprintf(change, sizeof(change), "new");
		else
			snprintf(change, sizeof(change), "%+.1f%%", e[i].change_pct);
		outbuf_printf(ob, "%6.2f%%  %6.2f%%  %+10.2f  %11s  %5.1f  %5.1f  %7" PRIu64
				  "  %7" PRIu64 "  ",
			      e[i].base_share, e[i].new_share, e[i].delta_pp, change, e[i].z, e[i].t,
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
		outbuf_puts(ob, ",\"t\":");
		json_double(ob, e[i].t);
		outbuf_puts(ob, ",\"df\":");
		if (isinf(e[i].df))
			outbuf_puts(ob, "\"inf\"");
		else
			json_double(ob, e[i].df);
		outbuf_printf(ob, ",\"p_value\":%.3g,\"base_runs\":[", e[i].p_value);
		for (size_t r = 0; r < e[i].n_base_runs + e[i].n_new_runs; r++) {
			if (r == e[i].n_base_runs)
				outbuf_puts(ob, "],\"new_runs\":[");
			else if (r)
				outbuf_puts(ob, ",");
			json_double(ob, e[i].run_shares[r]);
		}
		outbuf_puts(ob, "]}");
	}
}

/* The name of run @i of a side (@names, or "BASE"/"NEW" numbered when there are several). */
static const char *run_name(const char *const *names, size_t i, size_t n, const char *side,
			    char *buf, size_t len)
{
	if (names && names[i])
		return names[i];
	if (n == 1)
		return side;
	snprintf(buf, len, "%s%zu", side, i + 1);
	return buf;
}

/* "base" or "new" of the JSON: pooled samples and stacks, and the runs. */
static void write_json_side(struct outbuf *ob, const struct profile_diff *d, int is_new,
			    const char *const *names)
{
	size_t n = is_new ? d->n_new : d->n_base, off = is_new ? d->n_base : 0;
	char buf[32];

	outbuf_printf(ob, "\"%s\":{\"name\":", is_new ? "new" : "base");
	if (n == 1) {
		json_string(ob, run_name(names, 0, 1, is_new ? "NEW" : "BASE", buf, sizeof(buf)));
	} else {
		char *joined = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&joined, &len);

		for (size_t i = 0; f && i < n; i++)
			fprintf(f, "%s%s", i ? " + " : "",
				run_name(names, i, n, is_new ? "NEW" : "BASE", buf, sizeof(buf)));
		if (f)
			fclose(f);
		json_string(ob, joined ? joined : "");
		free(joined);
	}
	outbuf_printf(ob, ",\"samples\":%" PRIu64 ",\"stacks\":%zu,\"runs\":[",
		      is_new ? d->new_total : d->base_total, is_new ? d->new_stacks : d->base_stacks);
	for (size_t i = 0; i < n; i++) {
		outbuf_printf(ob, "%s{\"name\":", i ? "," : "");
		json_string(ob, run_name(names, i, n, is_new ? "NEW" : "BASE", buf, sizeof(buf)));
		outbuf_printf(ob, ",\"samples\":%" PRIu64 "}", d->run_totals[off + i]);
	}
	outbuf_puts(ob, "]}");
}

static void write_json(struct outbuf *ob, const struct profile_diff *d,
		       const struct profile_diff_write_options *wo)
{
	size_t n_notes = OPT(wo, n_notes, (size_t)0);
	const char *const *notes = OPT(wo, notes, (const char *const *)NULL);

	outbuf_puts(ob, "{\"direction\":\"BASE -> NEW\",");
	write_json_side(ob, d, 0, OPT(wo, base_names, (const char *const *)NULL));
	outbuf_puts(ob, ",");
	write_json_side(ob, d, 1, OPT(wo, new_names, (const char *const *)NULL));
	outbuf_printf(ob, ",\"min_samples\":%" PRIu64 ",\"threshold_pct\":", d->min_samples);
	json_double(ob, d->threshold);
	outbuf_puts(ob, ",\"z_crit\":");
	json_double(ob, d->z_crit);
	outbuf_printf(ob, ",\"alpha\":%.3g,\"entries_tested\":%zu,\"run_noise\":\"%s\"", d->alpha,
		      d->tested, d->n_base == 1 && d->n_new == 1 ? "unknown" : "moderated");
	outbuf_puts(ob, ",\"run_noise_factor\":");
	json_double(ob, d->n_base == 1 && d->n_new == 1 ? d->run_factor : 1.0);
	/* the dispersions' prior (docs/diff.md): d0 0 = none, null = infinite */
	outbuf_printf(ob, ",\"prior\":{\"entries\":%zu,\"d0\":", d->prior.n_fit);
	if (isinf(d->prior.d0))
		outbuf_puts(ob, "null");
	else
		json_double(ob, d->prior.d0);
	outbuf_puts(ob, ",\"phi0\":");
	json_double(ob, d->prior.phi0);
	outbuf_puts(ob, "}");
	outbuf_puts(ob, ",\"max_abs_z\":");
	json_double(ob, d->max_abs_z);
	outbuf_puts(ob, ",\"notes\":[");
	for (size_t i = 0; notes && i < n_notes; i++) {
		outbuf_puts(ob, i ? "," : "");
		json_string(ob, notes[i]);
	}
	outbuf_puts(ob, "],\"fail_min_share_pct\":");
	json_double(ob, d->fail_min_share < 0 ? 0 : d->fail_min_share);
	outbuf_puts(ob, ",\"worst_regression_pct\":");
	json_double(ob, profile_diff_worst_regression(d));
	outbuf_printf(ob, ",\"worst_regression_is_new_function\":%s,\"regressions\":[",
		      isinf(profile_diff_worst_regression(d)) ? "true" : "false");
	write_json_entries(ob, d->reg, d->n_reg);
	outbuf_puts(ob, "],\"improvements\":[");
	write_json_entries(ob, d->imp, d->n_imp);
	outbuf_puts(ob, "]}\n");
}

/* "# BASE: NAME (N samples, S stacks)", or the runs of a side one per line. */
static void write_text_side(struct outbuf *ob, const struct profile_diff *d, int is_new,
			    const char *const *names)
{
	size_t n = is_new ? d->n_new : d->n_base, off = is_new ? d->n_base : 0;
	const char *side = is_new ? "NEW" : "BASE", *pad = is_new ? " " : "";
	uint64_t total = is_new ? d->new_total : d->base_total;
	size_t stacks = is_new ? d->new_stacks : d->base_stacks;
	char buf[32];

	if (n == 1) {
		outbuf_printf(ob, "# %s: %s%s (%" PRIu64 " samples, %zu stacks)\n", side, pad,
			      run_name(names, 0, 1, side, buf, sizeof(buf)), total, stacks);
		return;
	}
	outbuf_printf(ob, "# %s: %s%zu runs (%" PRIu64 " samples, %zu stacks pooled):\n", side,
		      pad, n, total, stacks);
	for (size_t i = 0; i < n; i++)
		outbuf_printf(ob, "#   %s (%" PRIu64 " samples)\n",
			      run_name(names, i, n, side, buf, sizeof(buf)),
			      d->run_totals[off + i]);
}

static void write_text(struct outbuf *ob, const struct profile_diff *d,
		       const struct profile_diff_write_options *wo)
{
	size_t n_notes = OPT(wo, n_notes, (size_t)0);
	const char *const *notes = OPT(wo, notes, (const char *const *)NULL);

	outbuf_puts(ob, "# hvprof diff, BASE -> NEW\n");
	write_text_side(ob, d, 0, OPT(wo, base_names, (const char *const *)NULL));
	write_text_side(ob, d, 1, OPT(wo, new_names, (const char *const *)NULL));
	for (size_t i = 0; notes && i < n_notes; i++)
		outbuf_printf(ob, "# Note: %s\n", notes[i]);
	outbuf_printf(ob, "# Shares are percent of each side's own samples; change(pp) = NEW "
			  "share - BASE share;\n# change(rel) is relative to the BASE share. "
			  "Shown: >= %" PRIu64 " samples on one side,\n# |change(rel)| >= "
			  "%.1f%%, and |z| >= %.2f standard errors of sampling noise\n"
			  "# (%zu entries tested; at most a 1%% chance that an unchanged one "
			  "is shown).\n",
		      d->min_samples, d->threshold, d->z_crit, d->tested);
	if (d->n_base == 1 && d->n_new == 1)
		outbuf_printf(ob, "# Run-to-run noise is unknown with one run a side: t = z / %.2f "
				  "(a conservative factor,\n# docs/diff.md) must also reach the "
				  "bound; repeat the runs (--base A --base B --new C --new D)\n"
				  "# to measure it.\n",
			      d->run_factor);
	else if (d->prior.d0 > 0)
		outbuf_printf(ob, "# Run-to-run noise measured by the runs: t is the moderated t on "
				  "the per-run shares\n# (each entry's dispersion shrunk toward a "
				  "prior fitted on %zu entries: d0 %.1f,\n# phi0 %.2f); shown only "
				  "when its two-sided p <= %.3g (the same 1%% Bonferroni family).\n",
			      d->prior.n_fit, d->prior.d0, d->prior.phi0, d->alpha);
	else
		outbuf_printf(ob, "# Run-to-run noise measured by the runs: t is the moderated t on "
				  "the per-run shares\n# (too few entries for a prior: each on its own "
				  "dispersion); shown only when its\n# two-sided p <= %.3g (the same 1%% "
				  "Bonferroni family).\n",
			      d->alpha);
	for (int kind = PROFILE_DIFF_SELF; kind <= PROFILE_DIFF_STACK; kind++) {
		write_text_section(ob, d, d->reg, d->n_reg, (enum profile_diff_kind)kind, 1);
		write_text_section(ob, d, d->imp, d->n_imp, (enum profile_diff_kind)kind, 0);
	}
}

int profile_diff_write_runs(const struct profile_diff *d,
			    const struct profile_diff_write_options *opts,
			    const struct profile_sink *sink)
{
	struct outbuf *ob;
	int err;

	if (!d || !sink || !sink->write)
		return -EINVAL;
	ob = malloc(sizeof(*ob));
	if (!ob)
		return -ENOMEM;
	outbuf_init(ob, sink);
	if (OPT(opts, json, 0))
		write_json(ob, d, opts);
	else
		write_text(ob, d, opts);
	err = outbuf_flush(ob);
	free(ob);
	return err;
}

int profile_diff_write(const struct profile_diff *d, const char *base_name,
		       const char *new_name, int json, const struct profile_sink *sink)
{
	const char *bn[1] = { base_name }, *nn[1] = { new_name };
	struct profile_diff_write_options wo = { .size = sizeof(wo), .json = json };

	if (d && d->n_base == 1)
		wo.base_names = bn;
	if (d && d->n_new == 1)
		wo.new_names = nn;
	return profile_diff_write_runs(d, &wo, sink);
}
