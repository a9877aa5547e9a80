// SPDX-License-Identifier: MIT
// The run's facts (META, COUNTER, END and load statistics) as short lines, for the report
// header, the flamegraph subtitle and description, and the pprof comments.
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

/* Columns of a "Counters:" line, so that the report's "# " line fits in 100 columns. */
#define COUNTERS_WRAP 98

/* Append the owned line @line (NULL: out of memory); on failure free it and set f->err. */
static void facts_take(struct facts *f, char *line)
{
	if (!f->err && !line)
		f->err = -ENOMEM;
	if (!f->err && f->n == f->cap) {
		char **nl = array_grow(f->line, &f->cap, sizeof(*nl), 16);

		if (nl)
			f->line = nl;
		else
			f->err = -ENOMEM;
	}
	if (f->err) {
		free(line);
		return;
	}
	f->line[f->n++] = line;
}

static void __printf(2, 3) facts_add(struct facts *f, const char *fmt, ...)
{
	char *line;
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vasprintf(&line, fmt, ap);
	va_end(ap);
	facts_take(f, len < 0 ? NULL : line);
}

/*
 * Every counter, in recording order: "Counters: name=value, name=value", over as many such
 * lines as keep each within COUNTERS_WRAP columns (a counter longer than that alone on its line).
 */
/*
 * A recording of several workload windows (record --repeat): how many, the first and the last,
 * and how their commands ended: "Workload windows: 3 (record --repeat; diff compares each as a
 * run): 1.000 s to 2.000 s ... 5.000 s to 6.000 s", then "exit status 0 in every window" (or the
 * windows that failed or have no end).
 */
static void add_windows(struct facts *f, const struct profile *p, size_t n)
{
	struct profile_window first, last, w;
	size_t failed = 0, open = 0, first_bad = 0;
	int32_t bad_status = 0;
	uint64_t first_start, first_end; /* n > 1: the first window ends before the second */
	char end[64];

	if (profile_workload_window_at(p, 0, &first) || profile_workload_window_at(p, n - 1, &last) ||
	    window_list_range(&p->windows, 0, &first_start, &first_end))
		return;
	for (size_t i = 0; i < n; i++) {
		if (profile_workload_window_at(p, i, &w))
			return;
		if (!w.has_end) {
			open++;
		} else if (w.exit_status != 0 && !failed++) {
			first_bad = i + 1;
			bad_status = w.exit_status;
		}
	}
	if (last.has_end)
		snprintf(end, sizeof(end), "%.3f s", (double)last.end_ns / 1e9);
	else
		snprintf(end, sizeof(end), "the end (no workload end recorded)");
	facts_add(f, "Workload windows: %zu (record --repeat; diff compares each as a run): "
		  "%.3f s to %.3f s ... %.3f s to %s", n, (double)first.start_ns / 1e9,
		  (double)first_end / 1e9, (double)last.start_ns / 1e9, end);
	if (!failed && !open)
		facts_add(f, "Workload windows: exit status 0 in every window");
	else if (!failed)
		facts_add(f, "Workload windows: %zu without a workload end", open);
	else
		facts_add(f, "Workload windows: %zu failed (the first: window %zu, exit status %" PRId32
			  "), %zu without a workload end", failed, first_bad, bad_status, open);
}

/* The workload's window and a late sampling start, from the EVENT records (docs/guest-interface.md
 * events; record --from). */
static void add_window(struct facts *f, const struct profile *p)
{
	struct profile_window w;
	size_t n;

	if (profile_workload_window(p, &w) != 0) {
		if (p->window.has_sampling_start)
			facts_add(f, "Sampling started at %.3f s (record --from); no workload window "
				  "recorded", (double)p->window.sampling_start_ns / 1e9);
		return;
	}
	n = profile_workload_window_count(p);
	if (n > 1) {
		add_windows(f, p, n);
	} else if (w.has_end) {
		facts_add(f, "Workload window: %.3f s to %.3f s (exit status %" PRId32 ")",
			  (double)w.start_ns / 1e9, (double)w.end_ns / 1e9, w.exit_status);
	} else {
		facts_add(f, "Workload window: %.3f s to the end of the recording (no workload end "
			  "recorded)", (double)w.start_ns / 1e9);
	}
	if (w.has_sampling_start)
		facts_add(f, "Sampling started at %.3f s (record --from)",
			  (double)w.sampling_start_ns / 1e9);
}

static void add_counters(struct facts *f, const struct profile *p)
{
	char *line = NULL; /* the line being filled, owned here */
	size_t len = 0;

	for (size_t i = 0; i < p->n_counters && !f->err; i++) {
		char *item;
		int ilen =
		    asprintf(&item, "%s=%" PRIu64, p->counters[i].name, p->counters[i].value);

		if (ilen < 0) {
			item = NULL;
		} else if (line && len + 2 + (size_t)ilen <= COUNTERS_WRAP) {
			char *nl = realloc(line, len + 2 + (size_t)ilen + 1);

			if (nl) {
				memcpy(nl + len, ", ", 2);
				memcpy(nl + len + 2, item, (size_t)ilen + 1);
				len += 2 + (size_t)ilen;
			} else {
				free(line);
			}
			line = nl;
		} else {
			if (line)
				facts_take(f, line);
			if (asprintf(&line, "Counters: %s", item) < 0)
				line = NULL;
			else
				len = strlen(line);
		}
		if (!item || !line) {
			free(item);
			free(line);
			line = NULL;
			facts_take(f, NULL); /* sets -ENOMEM */
			break;
		}
		free(item);
	}
	if (line)
		facts_take(f, line);
}

/*
 * The rate achieved against -F, for recordings whose periods are the counter's real counts
 * (those with the overflows_merged counter; docs/recording-format.md, SAMPLE): for cpu-clock the
 * samples per second of the vCPU time their periods add up to. Overflows whose signals merged
 * while one was pending (the vCPU thread outside KVM_RUN) make fewer samples than -F asks, each
 * weighing the overflows it stands for.
 */
static void add_rate(struct facts *f, const struct profile *p, const char *counter,
		     const char *freq)
{
	const struct profile_stats *st = &p->stats;
	uint64_t merged, fallbacks = 0;
	char extra[64] = "";

	if (!freq || profile_counter(p, "overflows_merged", &merged) != 0 || !st->samples)
		return;
	if (profile_counter(p, "period_fallbacks", &fallbacks) == 0 && fallbacks)
		snprintf(extra, sizeof(extra), ", %" PRIu64 " with the nominal period", fallbacks);
	if (counter && strstr(counter, "clock") && st->period_total)
		facts_add(f, "Rate: %.0f samples/s of vCPU time at -F %s (overflows merged: %" PRIu64
			  "; weights are the counter's real periods%s)",
			  (double)st->samples * 1e9 / (double)st->period_total, freq, merged, extra);
	else
		facts_add(f, "Rate: -F %s, the kernel's target for %s (weights are the counter's "
			  "real periods%s)", freq, counter ? counter : "the counter", extra);
}

int profile_facts(const struct profile *p, struct facts *f)
{
	uint64_t never = 0, unseen = 0;
	const struct profile_stats *st = &p->stats;
	const char *counter = profile_meta(p, "counter");
	const char *freq = profile_meta(p, "frequency_hz");
	const char *period = profile_meta(p, "period_ns");
	const char *kernel = profile_meta(p, "kernel");
	const char *kver = profile_meta(p, "kernel_version");
	const char *booted = profile_meta(p, "booted_kernel");
	const char *vcpus = profile_meta(p, "vcpus");
	const char *image = profile_meta(p, "image");
	const char *cmdline = profile_meta(p, "cmdline");
	const char *mode = profile_meta(p, "callchain_mode");
	const char *strategy = profile_meta(p, "strategy");
	const char *kaslr = profile_meta(p, "kaslr");
	const char *kaslr_check = profile_meta(p, "kaslr_check");
	const char *pti = profile_meta(p, "pti");

	*f = (struct facts){ 0 };
	facts_add(f,
		  "Samples: %" PRIu64 " (kernel %" PRIu64 ", user %" PRIu64
		  ", kernel threads %" PRIu64 ")",
		  st->samples, st->kernel_samples, st->user_samples, st->kthread_samples);
	if (p->filter_desc) { /* docs/export-formats.md, "Filters" */
		uint64_t all = st->samples + st->filtered_out;

		facts_add(f, "Filtered: %s: kept %" PRIu64 " of %" PRIu64 " samples (%.1f%%)",
			  p->filter_desc, st->samples, all,
			  all ? 100.0 * (double)st->samples / (double)all : 0.0);
	}
	facts_add(f,
		  "Lost user stacks: %" PRIu64 " (deferred %" PRIu64 ", joined %" PRIu64
		  ", orphan user-stack records %" PRIu64 ")",
		  st->lost_user, st->deferred, st->joined, st->orphan_user_stacks);
	if (st->mappings) /* recordings before MAPPING records have none: no line */
		facts_add(f, "Address spaces: %" PRIu64 " mappings in %" PRIu64 " snapshots",
			  st->mappings, st->mapping_snapshots);
	if (st->mappings) /* docs/symbolization.md: where the mapped files were found */
		facts_add(f, "Mapped files: %" PRIu64 " found (disk image %" PRIu64 ", rootfs %" PRIu64
			  ", symfs %" PRIu64 ", build-id dir %" PRIu64 ", debuginfod %" PRIu64
			  "; %" PRIu64 " with a debug file), %" PRIu64 " not found, %" PRIu64
			  " refused for a build-id mismatch",
			  st->files_disk + st->files_rootfs + st->files_symfs + st->files_buildid +
				  st->files_debuginfod,
			  st->files_disk, st->files_rootfs, st->files_symfs, st->files_buildid,
			  st->files_debuginfod, st->files_debug, st->files_not_found,
			  st->files_build_id_mismatch);
	if (st->dwarf_unwinds) /* docs/symbolization.md: DWARF unwinding */
		facts_add(f, "DWARF unwinding: %" PRIu64 " user chains (ended: %" PRIu64 " at the "
			  "outermost frame, %" PRIu64 " depth, %" PRIu64 " outside the stack copy, %"
			  PRIu64 " in no file, %" PRIu64 " no CFI, %" PRIu64 " other); %" PRIu64
			  " equal to the frame-pointer walk, %" PRIu64 " completed by it",
			  st->dwarf_unwinds, st->dwarf_stop[0], st->dwarf_stop[1], st->dwarf_stop[3],
			  st->dwarf_stop[2], st->dwarf_stop[4], st->dwarf_stop[5] + st->dwarf_stop[6],
			  st->dwarf_fp_agree, st->dwarf_fp_extended);
	if (st->eager_compared)
		facts_add(f, "Deferred vs eager: %" PRIu64 " of %" PRIu64 " deferred user chains "
			  "equal to the eager chain of the same kernel entry (%" PRIu64 " not compared:"
			  " one side copied no stack)", st->eager_equal, st->eager_compared,
			  st->eager_no_stack);
	if (st->leaf_checked || st->leaf_unchecked)
		facts_add(f, "Leaf frames: %" PRIu64 " frame-pointer chains checked against the "
			  "leaf's CFI, %" PRIu64 " mended (the leaf's caller was missing), %" PRIu64
			  " not checkable (no CFI, or the 64-byte window too short)",
			  st->leaf_checked, st->leaf_fixed, st->leaf_unchecked);
	if (st->user_regs_orphans)
		facts_add(f, "USER_REGS records completing no record: %" PRIu64,
			  st->user_regs_orphans);
	if (st->truncated)
		facts_add(f, "Truncated callchains: %" PRIu64 " samples (walk depth bound or "
			  "--max-stack)", st->truncated);
	facts_add(f, "Event: %s%s%s%s%s%s%s", counter ? counter : "(unknown)", freq ? ", " : "",
		  freq ? freq : "", freq ? " Hz" : "", period ? ", period " : "",
		  period ? period : "", period ? " ns" : "");
	add_rate(f, p, counter, freq);
	if (mode && profile_counter(p, "bp_never_fired", &never) == 0 && never)
		facts_add(f, "Callchains: %s, then eager: no breakpoint fired before %" PRIu64
			  " returns to user passed unseen (the host does not deliver them)", mode,
			  profile_counter(p, "returns_unseen", &unseen) == 0 ? unseen : 0);
	else if (mode)
		facts_add(f, "Callchains: %s", mode);
	if (kernel || kver)
		facts_add(f, "Kernel: %s%s%s%s%s%s", kernel ? kernel : "",
			  kernel && kver ? " " : "", kver ? "version " : "", kver ? kver : "",
			  booted ? ", booted from " : "", booted ? booted : "");
	if (kaslr || pti) /* docs/kaslr.md */
		facts_add(f, "Kernel placement: KASLR %s%s%s%s; page-table isolation %s",
			  kaslr ? kaslr : "unknown", kaslr_check ? " (" : "",
			  kaslr_check ? kaslr_check : "", kaslr_check ? ")" : "",
			  pti ? pti : "unknown");
	if (strategy)
		facts_add(f, "Strategy: %s", strategy);
	if (vcpus)
		facts_add(f, "vCPUs: %s", vcpus);
	if (image)
		facts_add(f, "Image: %s", image);
	if (cmdline)
		facts_add(f, "Command line: %s", cmdline);
	if (st->has_end && st->end_reason == HVP_END_EXIT_DEVICE)
		facts_add(f, "End: %s, exit status %" PRId32,
			  recfile_end_reason_name(st->end_reason), st->exit_status);
	else if (st->has_end)
		facts_add(f, "End: %s", recfile_end_reason_name(st->end_reason));
	else
		facts_add(f, "End: no END record (the recording was cut short)");
	add_window(f, p);
	add_counters(f, p);
	if (p->read_error)
		facts_add(f, "Damaged recording: kept %" PRIu64 " records, stopped at %s",
			  st->records, p->read_error);
	if (f->err)
		facts_free(f);
	return f->err;
}

void facts_free(struct facts *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->line[i]);
	free(f->line);
	f->line = NULL;
	f->n = f->cap = 0;
}
