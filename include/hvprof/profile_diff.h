// SPDX-License-Identifier: MIT
// hvprof profile API, the comparison part: stack sets from recordings or folded text, a
// recording's scan for diff (window, END), and diff itself (docs/diff.md). Included by
// <hvprof/profile.h>.
#ifndef HVPROF_PROFILE_DIFF_H
#define HVPROF_PROFILE_DIFF_H

#include <hvprof/profile.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- diff (stackset.c, diff*.c) */

#define PROFILE_FOLDED_MAX_LINE 1048576  /* longest folded line accepted (bytes, newline excluded) */
#define PROFILE_FOLDED_MAX_FRAMES 4096   /* most frames in one folded stack */

/* A set of stacks of frame names with a sample count each: what diff compares. */
struct profile_stacks;

/**
 * profile_stacks_from_profile - the folded stacks of @p (as profile_folded() writes them:
 * comm first, kernel frames suffixed "_[k]", counts in samples).
 * @out: free with profile_stacks_free(). Return: 0; -EINVAL; -ENOMEM.
 */
int profile_stacks_from_profile(const struct profile *p, struct profile_stacks **out)
	__must_check;

/**
 * profile_stacks_read_folded - parse folded stacks ("frame;frame;... COUNT" per line, the
 * output of profile_folded(), stackcollapse-*.pl, ...) from @fd, as hostile input: lines longer
 * than PROFILE_FOLDED_MAX_LINE, more than PROFILE_FOLDED_MAX_FRAMES frames, a missing or
 * non-decimal count, a count or total that overflows 64 bits, an empty frame name, or a NUL
 * byte are errors. Blank lines are skipped; a trailing '\r' is dropped; repeated stacks add up.
 * @fd: read to its end, not closed. @name: for messages. @errbuf: optional; on -EBADMSG,
 * "NAME:LINE: what is wrong".
 * Return: 0; -EBADMSG malformed (see @errbuf); -ERANGE overflow (see @errbuf); read(2) errors;
 * -ENOMEM.
 */
int profile_stacks_read_folded(int fd, const char *name, struct profile_stacks **out,
			       char *errbuf, size_t errbuf_len) __must_check;

/**
 * profile_stacks_load - the stacks of the file at @path: a recording (recognized by its magic:
 * loaded with profile_load() and @opts, then profile_stacks_from_profile()) or else folded
 * text (profile_stacks_read_folded()); @opts' filters apply to a recording, and a folded
 * file given filters is refused (-EINVAL: it has no pid, time or CPL).
 * Return: 0; errors of open(2), profile_load() and profile_stacks_read_folded(); @errbuf says
 * which file and what.
 */
int profile_stacks_load(const char *path, const struct profile_options *opts,
			struct profile_stacks **out, char *errbuf, size_t errbuf_len) __must_check;

/* A time range of a recording: ns since it started, both ends included (UINT64_MAX: its end). */
struct profile_time_window {
	uint64_t start_ns;
	uint64_t end_ns;
};

#define PROFILE_STACKS_MAX_WINDOWS 1024 /* most windows of one profile_stacks_load_windows() */

/**
 * profile_stacks_load_windows - the stacks of the recording at @path in each of @n time
 * windows, the file read, unwound and symbolized once (diff's runs of one recording: record
 * --repeat). Set @k holds the samples @opts' filters keep (--comm, --pid, --tid, --time,
 * --kernel-only, --user-only and @opts' own window, as profile_load()) whose time is in
 * @windows[@k]; a sample in several windows counts in each, one outside every window is
 * dropped. Set @k is the one profile_stacks_load() gives with @opts narrowed to @windows[@k]
 * (window_set), stack for stack and in the same order ({0, UINT64_MAX}: the whole recording).
 * Memory: the raw stacks of the @n windows and the sets, not the samples.
 * @windows: @n ranges (1..PROFILE_STACKS_MAX_WINDOWS), start_ns <= end_ns; they may overlap.
 * @outs: @n sets, written only on success; free each with profile_stacks_free().
 * @errbuf/@errbuf_len: optional; on failure, one line naming @path and what went wrong.
 * Return: 0; -EINVAL NULL arguments, @n out of range, an empty range, @opts->keep_samples,
 * or a bad filter; -EBADMSG @path is not a recording (folded stacks have no time); errors
 * of open(2) and profile_load() (-ENOTSUP, -ENOMEM...).
 */
int profile_stacks_load_windows(const char *path, const struct profile_options *opts,
				const struct profile_time_window *windows, size_t n,
				struct profile_stacks **outs, char *errbuf, size_t errbuf_len)
	__must_check;

/**
 * profile_stacks_pool - one set of the stacks of @n sets @runs, counts added (diff's
 * flamegraphs over repeated runs). @out: free with profile_stacks_free().
 * Return: 0; -EINVAL NULL or no run; -ERANGE the total overflows; -ENOMEM.
 */
int profile_stacks_pool(const struct profile_stacks *const *runs, size_t n,
			struct profile_stacks **out) __must_check;

/**
 * struct profile_scan - a recording at a glance (profile_scan_recording()).
 * @samples: SAMPLE records (unfiltered). @has_window/@window: the workload window, as
 * profile_workload_window() gives it. @has_end/@end_reason/@exit_status: the END record
 * (enum hvp_end_reason). @damaged: reading stopped at a damaged record before the end.
 * @n_windows/@windows: every workload window (record --repeat: one per run of the command), as
 * profile_workload_window_at() gives them, the first PROFILE_MAX_WINDOWS; @windows_seen: the
 * workload starts recorded (more than @n_windows: some were not kept).
 */
struct profile_scan {
	uint64_t samples;
	int has_window;
	struct profile_window window;
	int has_end;
	uint32_t end_reason;
	int32_t exit_status;
	int damaged;
	size_t n_windows;
	uint64_t windows_seen;
	struct profile_window windows[PROFILE_MAX_WINDOWS];
};

/**
 * profile_scan_recording - read the recording at @path once, without symbolizing, into @out.
 * Return: 0 (also for a file damaged after its header: @out->damaged); errors of
 * recfile_reader_open() (-EBADMSG: not a recording), said in @errbuf; -ENOMEM.
 */
int profile_scan_recording(const char *path, struct profile_scan *out, char *errbuf,
			   size_t errbuf_len) __must_check;

/**
 * profile_scan_window - the workload window of @s as a time range: [*@start_ns, *@end_ns], ns
 * since the recording started (UINT64_MAX: to the end). Return: 0; -ENOENT no window.
 */
int profile_scan_window(const struct profile_scan *s, uint64_t *start_ns, uint64_t *end_ns)
	__must_check;

/**
 * profile_scan_window_at - workload window @idx (0-based) of @s as a time range, ns since the
 * recording started: [*@start_ns, *@end_ns]; a window without its end stops where the next one
 * starts, the last one at the end of the recording (UINT64_MAX).
 * Return: 0; -ENOENT no such window.
 */
int profile_scan_window_at(const struct profile_scan *s, size_t idx, uint64_t *start_ns,
			   uint64_t *end_ns) __must_check;

/**
 * profile_scan_check - is the recording of @s fit to be compared (docs/diff.md, "A broken
 * side")? It must have samples, @compared (the samples kept: in the window, filtered) must
 * reach @min_compared, and it must end with a clean guest exit (status 0), --duration, or a
 * detach (record --attach). @why: on failure, one line saying why (without the file name).
 * Return: 0 fit; -ENODATA no or too few samples; -ECANCELED no END, or another end;
 * -EINVAL NULL @s.
 */
int profile_scan_check(const struct profile_scan *s, uint64_t compared, uint64_t min_compared,
		       char *why, size_t why_len) __must_check;

/** profile_stacks_total - the sum of the counts of @s. */
uint64_t profile_stacks_total(const struct profile_stacks *s);

/** profile_stacks_count - distinct stacks in @s. */
size_t profile_stacks_count(const struct profile_stacks *s);

/** profile_stacks_free - free @s (NULL is fine). */
void profile_stacks_free(struct profile_stacks *s);

#define PROFILE_DIFF_MIN_SAMPLES 10 /* default --min-samples: see docs/diff.md */
#define PROFILE_DIFF_THRESHOLD 5.0  /* default --threshold, percent of the BASE share */
#define PROFILE_DIFF_Z 3.0          /* the least |z| a change needs (see profile_diff_compute) */
#define PROFILE_DIFF_RUN_FACTOR 3.0 /* one run a side: sampling se x this (docs/diff.md) */
#define PROFILE_DIFF_MAX_RUNS 128   /* most runs a side (record --repeat: up to 100 in a file) */
#define PROFILE_DIFF_MIN_RUN_SAMPLES 1000 /* fewer in a recording's window: broken (docs/diff.md) */
#define PROFILE_DIFF_FAIL_MIN_SHARE 1.0 /* default --fail-min-share, percent of NEW (docs/diff.md) */

/**
 * struct profile_diff_options - @size: sizeof(struct profile_diff_options).
 * @min_samples: entries with fewer samples than this on both sides are ignored (0: default
 *   PROFILE_DIFF_MIN_SAMPLES; set @min_samples_set to use 0 itself).
 * @threshold_pct: changes smaller than this, in percent of the BASE share, are ignored
 *   (< 0: default PROFILE_DIFF_THRESHOLD; 0 keeps every significant change).
 * @max_rows: rows per section in the text output (0: 20).
 * @min_samples_set: nonzero: @min_samples is taken as given, even 0.
 * @run_noise_factor: with one run a side, run-to-run noise is unknown and the sampling
 *   standard error is multiplied by this before the test (0: PROFILE_DIFF_RUN_FACTOR; 1: none;
 *   docs/diff.md says how the default was chosen). Unused with two runs or more on a side,
 *   where the runs measure it.
 * @fail_min_share_pct: profile_diff_worst_regression() considers only functions holding at
 *   least this percent of NEW (0: default PROFILE_DIFF_FAIL_MIN_SHARE; < 0: every function);
 *   smaller ones are still reported. At most 100.
 */
struct profile_diff_options {
	size_t size;
	uint64_t min_samples;
	double threshold_pct;
	unsigned int max_rows;
	int min_samples_set;
	double run_noise_factor;
	double fail_min_share_pct;
};

/* What a diff entry is about. */
enum profile_diff_kind {
	PROFILE_DIFF_SELF = 0,  /* a function, as the innermost frame (self share) */
	PROFILE_DIFF_TOTAL = 1, /* a function anywhere in the stack (total share) */
	PROFILE_DIFF_STACK = 2, /* a whole stack */
};

/**
 * struct profile_diff_entry - one reported change, BASE to NEW.
 * @name: the function ("name" as in folded stacks) or the stack ("a;b;c"); owned by the diff.
 * @base_samples/@new_samples: samples on each side. @base_share/@new_share: percent of each
 * side's total. @delta_pp: @new_share - @base_share (percentage points). @change_pct: relative
 * change of the share, percent of @base_share (+INFINITY when it is new). With several runs a
 * side the samples and shares are pooled (each side's runs added up). @z: the change in
 * standard errors of sampling noise (two-proportion test on the pooled counts).
 * @t/@df/@p_value: the test against run-to-run noise as well: with two runs or more on a side,
 * Welch's t on the per-run shares, its Welch-Satterthwaite degrees of freedom and two-sided p;
 * with one run a side, @t is @z divided by the run-noise factor, @df is INFINITY and @p_value
 * the normal one (docs/diff.md). @run_shares: the share (percent) of the entry in each run,
 * @n_base_runs BASE runs then @n_new_runs NEW runs; owned by the diff.
 */
struct profile_diff_entry {
	enum profile_diff_kind kind;
	const char *name;
	uint64_t base_samples, new_samples;
	double base_share, new_share, delta_pp, change_pct, z;
	double t, df, p_value;
	const double *run_shares;
	size_t n_base_runs, n_new_runs;
};

struct profile_diff;

/**
 * profile_diff_compute - compare @base and @new on normalized shares (each side's counts over
 * its own total): per function (self and total) and per stack. An entry is reported when it
 * has at least @opts->min_samples samples on one side, its share changed by at least
 * @opts->threshold_pct percent of the BASE share, and the change is beyond sampling noise:
 * |z| (two-proportion test) at least the Bonferroni bound for a 1% family-wise false-alarm
 * rate over the entries tested, and never below PROFILE_DIFF_Z. Regressions (share grew) and
 * improvements (share shrank) are each sorted by kind (self, total, stack), then |@delta_pp|
 * desc, then name.
 * @out: free with profile_diff_free(). Return: 0; -EINVAL NULL arguments; -ENOMEM.
 */
int profile_diff_compute(const struct profile_stacks *base, const struct profile_stacks *new_,
			 const struct profile_diff_options *opts, struct profile_diff **out)
	__must_check;

/**
 * profile_diff_compute_runs - as profile_diff_compute() over repeated runs: @n_base runs of
 * BASE and @n_new runs of NEW (1..PROFILE_DIFF_MAX_RUNS each). Shares are pooled per side for
 * display; an entry is reported when, besides the rules of profile_diff_compute(), it beats
 * run-to-run noise: with two runs or more on a side, Welch's t test on the per-run shares
 * (each side's variance floored at its sampling variance; a side of one run borrows the
 * other's) has a two-sided p at most 1% / entries tested (the same Bonferroni family); with
 * one run a side, |z| / @opts->run_noise_factor reaches the bound. The sign of the test must
 * agree with the pooled change.
 * @out: free with profile_diff_free(). Return: 0; -EINVAL NULL arguments or a run count out
 * of range; -ENOMEM.
 */
int profile_diff_compute_runs(const struct profile_stacks *const *base, size_t n_base,
			      const struct profile_stacks *const *new_, size_t n_new,
			      const struct profile_diff_options *opts, struct profile_diff **out)
	__must_check;

/**
 * profile_diff_entries - the reported entries: @regressions nonzero for regressions (share
 * grew, BASE to NEW), else improvements; *@n their count. Owned by @d, sorted as above.
 */
const struct profile_diff_entry *profile_diff_entries(const struct profile_diff *d,
						      int regressions, size_t *n);

/**
 * profile_diff_worst_regression - the largest @change_pct among reported function
 * regressions (self or total) that hold at least the options' @fail_min_share_pct of NEW, or 0
 * when there is none (+INFINITY for a new function): what --fail-on-regression compares.
 */
double profile_diff_worst_regression(const struct profile_diff *d);

/**
 * profile_diff_write - write the diff as text ("BASE -> NEW" labelled sections of the biggest
 * regressions and improvements, functions then stacks) or, with @json nonzero, as one JSON
 * object (docs/diff.md). @base_name/@new_name: shown as BASE and NEW.
 * Return: 0; -EINVAL; -ENOMEM; the sink's error.
 */
int profile_diff_write(const struct profile_diff *d, const char *base_name,
		       const char *new_name, int json, const struct profile_sink *sink)
	__must_check;

/**
 * struct profile_diff_write_options - @size: sizeof(struct profile_diff_write_options).
 * @base_names/@new_names: the file of each run, as many as the diff has runs on that side
 *   (NULL: "BASE"/"NEW", numbered when there are several). @json: nonzero for JSON.
 * @notes: @n_notes lines the text output shows as comments and the JSON as "notes" (what was
 *   compared: the workload windows, a recording compared whole...).
 */
struct profile_diff_write_options {
	size_t size;
	const char *const *base_names;
	const char *const *new_names;
	int json;
	const char *const *notes;
	size_t n_notes;
};

/**
 * profile_diff_write_runs - profile_diff_write() with the names of every run and notes: the
 * text names each run with its samples, the JSON gives "base"/"new" the pooled samples and a
 * "runs" array ({name, samples}), and each entry its per-run shares ("base_runs", "new_runs").
 * Return: 0; -EINVAL; -ENOMEM; the sink's error.
 */
int profile_diff_write_runs(const struct profile_diff *d,
			    const struct profile_diff_write_options *opts,
			    const struct profile_sink *sink) __must_check;

/** profile_diff_free - free @d (NULL is fine). */
void profile_diff_free(struct profile_diff *d);

/**
 * struct profile_diff_svg_options - @size: sizeof(struct profile_diff_svg_options).
 * @reverse: nonzero: widths from BASE instead of NEW (stacks that vanished are visible);
 *   colours still show the change BASE to NEW. @title: NULL: a title naming both sides.
 * @base_name/@new_name: shown in the title. @width: pixels (0: 1200). @min_samples and
 * @min_samples_set: as in profile_diff_options; frames below it on both sides are grey.
 * @noise_factor: >= 1: a frame is coloured only when |z| / @noise_factor reaches the bound
 *   (the run-noise factor of profile_diff_options; diff passes it, also for pooled repeats,
 *   whose per-run test the graph does not redo); 0: the sampling test alone.
 */
struct profile_diff_svg_options {
	size_t size;
	int reverse;
	const char *title;
	const char *base_name;
	const char *new_name;
	unsigned int width;
	uint64_t min_samples;
	int min_samples_set;
	double noise_factor;
};

/**
 * profile_diff_flamegraph - write a differential SVG flamegraph: the flamegraph of NEW (or of
 * BASE with @opts->reverse), each frame coloured by the change of its normalized share BASE to
 * NEW: red grew, blue shrank, the deeper the larger the change relative to its BASE share;
 * white when not significant (the noise rule of profile_diff_compute() over the frames of the
 * graph) or below min-samples. Hover shows both shares, the change and z.
 * Same interaction as profile_flamegraph() (zoom, search, reset).
 * Return: 0; -EINVAL; -ENOMEM; the sink's error.
 */
int profile_diff_flamegraph(const struct profile_stacks *base, const struct profile_stacks *new_,
			    const struct profile_diff_svg_options *opts,
			    const struct profile_sink *sink) __must_check;

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_PROFILE_DIFF_H */
