// SPDX-License-Identifier: MIT
// hvprof diff BASE NEW: compare two recordings or folded files on normalized shares, print or
// write the significant changes, draw differential flamegraphs, and fail CI on a regression.
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/log.h>
#include <hvprof/profile.h>

#include "cli.h"

static void diff_usage(void)
{
	printf("usage: hvprof diff [OPTIONS] BASE NEW\n"
	       "       hvprof diff [OPTIONS] --base A.data [--base B.data ...] --new C.data "
	       "[--new D.data ...]\n"
	       "  Compare two recordings or folded-stack files on normalized shares (each side's\n"
	       "  samples over its own total): functions (self and total share) and stacks.\n"
	       "  BASE is the reference (before), NEW the run under test (after); with repeated\n"
	       "  runs a side, a change must also beat the run-to-run noise (a moderated t test).\n"
	       "  --base FILE, --new FILE  one run of a side (repeat: up to %d runs a side)\n"
	       "  --window workload|all   compare each recording's workload window (default) or\n"
	       "                          all of it; a recording without the mark is compared whole;\n"
	       "                          one with N windows (record --repeat N) is N runs, named\n"
	       "                          FILE#1..FILE#N; FILE#K given as a file: that window only\n"
	       "  --noise-factor F        one run a side: run-to-run noise is unknown, the sampling\n"
	       "                          standard error is taken F times (default %.1f; 1: none)\n"
	       "  --allow-incomplete      compare a side with no or too few samples (< %d in the\n"
	       "                          window) or that did not end with a clean guest exit or\n"
	       "                          --duration (else an error, exit 3)\n"
	       "  --min-samples N         ignore entries with fewer than N samples on both sides\n"
	       "                          (default %d: below it no change can pass a 3-sigma\n"
	       "                          Poisson test, so it could only be noise)\n"
	       "  --threshold PCT         ignore changes smaller than PCT %% of the BASE share\n"
	       "                          (default %.0f)\n"
	       "  --fail-on-regression PCT  exit 1 if a function's share grew by PCT %% or more\n"
	       "  --fail-min-share PCT    ... and holds at least PCT %% of NEW (default %.1f: a\n"
	       "                          smaller one is reported, it does not fail the gate)\n"
	       "  --format text|json      output format (default text)\n"
	       "  --max-rows N            rows per section in text (default 20)\n"
	       "  --svg FILE              differential flamegraph: widths from NEW, colour = change\n"
	       "  --svg-reverse FILE      the same with widths from BASE (shows what vanished)\n"
	       "  --symfs DIR, --vmlinux FILE  symbols for recordings (as report)\n"
	       "  --max-stack N           keep each callchain's N innermost frames (as report)\n"
	       "  --comm, --pid, --tid, --time, --kernel-only, --user-only: the filters of report,\n"
	       "                          applied to both sides (recordings only)\n"
	       "  Exit: 0 done, 1 regression (--fail-on-regression), 2 usage, 3 error.\n"
	       "  docs/diff.md explains the test and the defaults.\n",
	       PROFILE_DIFF_MAX_RUNS, PROFILE_DIFF_RUN_FACTOR, PROFILE_DIFF_MIN_RUN_SAMPLES,
	       PROFILE_DIFF_MIN_SAMPLES, PROFILE_DIFF_THRESHOLD, PROFILE_DIFF_FAIL_MIN_SHARE);
}

/* Parse a percentage (0..1e6) into *@out; 0 or -EINVAL. */
static int parse_pct(const char *opt, const char *arg, double *out)
{
	char *end;
	double v = strtod(arg, &end);

	if (*end || end == arg || !(v >= 0 && v <= 1e6)) {
		cli_error("%s '%s': want a number of percent, 0 or more", opt, arg);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int write_svg(const char *path, const struct profile_stacks *base,
		     const struct profile_stacks *new_, const struct profile_diff_svg_options *so)
{
	struct profile_sink sink;
	int fd, err;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = -errno;
		cli_error("cannot create %s: %s", path, hvp_strerror(err));
		return err;
	}
	sink = profile_sink_fd(fd);
	err = profile_diff_flamegraph(base, new_, so, &sink);
	if (close(fd) != 0 && !err)
		err = -errno;
	if (err)
		cli_error("cannot write %s: %s", path, hvp_strerror(err));
	else
		fprintf(stderr, "hvprof: wrote %s\n", path);
	return err;
}

/*
 * The runs of both sides, what was compared, and the notes said about it. A run is a file given
 * (--base/--new or BASE NEW), or one workload window of a recording that holds several (record
 * --repeat: each window is a run, named FILE#N), or the window FILE#N names.
 */
struct diff_sides {
	const char *args[2][PROFILE_DIFF_MAX_RUNS]; /* as given */
	size_t n_args[2];
	struct profile_scan *scans[2][PROFILE_DIFF_MAX_RUNS]; /* per arg; NULL: not a recording */
	const char *scan_file[2][PROFILE_DIFF_MAX_RUNS]; /* the file each scan is of */
	int scan_shared[2][PROFILE_DIFF_MAX_RUNS];   /* the scan is an earlier arg's: not freed */
	const char *paths[2][PROFILE_DIFF_MAX_RUNS];  /* each run's name (FILE or FILE#N) */
	const char *files[2][PROFILE_DIFF_MAX_RUNS];  /* each run's file */
	const struct profile_scan *scan[2][PROFILE_DIFF_MAX_RUNS]; /* its scan, or NULL */
	int window[2][PROFILE_DIFF_MAX_RUNS];         /* its window (0-based), -1: the default */
	char *owned[2][PROFILE_DIFF_MAX_RUNS];        /* names made here, freed */
	size_t n[2];
	struct profile_stacks *stacks[2][PROFILE_DIFF_MAX_RUNS];
	struct profile_stacks *pooled[2]; /* merged runs for the flamegraphs (NULL: one run) */
	char *notes[2 * PROFILE_DIFF_MAX_RUNS + 1];
	size_t n_notes;
	int window_all;
	size_t n_windowed; /* runs of recordings compared over a workload window (load_run) */
	int allow_incomplete;
};

static void __printf(2, 3) add_note(struct diff_sides *ds, const char *fmt, ...)
{
	va_list ap;
	char *note;

	if (ds->n_notes == sizeof(ds->notes) / sizeof(ds->notes[0]))
		return;
	va_start(ap, fmt);
	if (vasprintf(&note, fmt, ap) >= 0)
		ds->notes[ds->n_notes++] = note;
	va_end(ap);
}

static void sides_free(struct diff_sides *ds)
{
	for (int s = 0; s < 2; s++) {
		for (size_t i = 0; i < ds->n[s]; i++) {
			profile_stacks_free(ds->stacks[s][i]);
			free(ds->owned[s][i]);
		}
		for (size_t i = 0; i < ds->n_args[s]; i++)
			if (!ds->scan_shared[s][i])
				free(ds->scans[s][i]);
		profile_stacks_free(ds->pooled[s]);
	}
	for (size_t i = 0; i < ds->n_notes; i++)
		free(ds->notes[i]);
}

/* Add run @file (window @window, name @name: owned when @owned) to side @s; -E2BIG (said). */
static int push_run(struct diff_sides *ds, int s, const char *file, const struct profile_scan *sc,
		    int window, const char *name, char *owned)
{
	size_t i = ds->n[s];

	if (i == PROFILE_DIFF_MAX_RUNS) {
		free(owned);
		cli_error("%s: more than %d runs (recordings and their workload windows) on a side",
			  s ? "NEW" : "BASE", PROFILE_DIFF_MAX_RUNS);
		return -E2BIG;
	}
	ds->files[s][i] = file;
	ds->scan[s][i] = sc;
	ds->window[s][i] = window;
	ds->paths[s][i] = owned ? owned : name;
	ds->owned[s][i] = owned;
	ds->n[s]++;
	return 0;
}

/*
 * "FILE#N" when no file has that name: window N (1-based) of FILE. Return: N and *@file_out
 * (allocated); 0 not such a name; -ENOMEM.
 */
static long window_suffix(const char *arg, char **file_out)
{
	const char *hash = strrchr(arg, '#');
	char *end;
	long n;

	if (!hash || hash == arg || access(arg, F_OK) == 0)
		return 0;
	errno = 0;
	n = strtol(hash + 1, &end, 10);
	if (errno || *end || end == hash + 1 || hash[1] == '-' || hash[1] == '+' || n < 1 ||
	    n > PROFILE_MAX_WINDOWS)
		return 0;
	*file_out = strndup(arg, (size_t)(hash - arg));
	return *file_out ? n : -ENOMEM;
}

/*
 * Scan @file for argument @a of side @s into ds->scans[s][a], or share the scan of an earlier
 * argument of either side that names the same file (FILE#1 FILE#2 ...: the file is read once).
 * Return: as profile_scan_recording().
 */
static int scan_arg(struct diff_sides *ds, int s, size_t a, const char *file)
{
	for (int s2 = 0; s2 <= s; s2++) {
		for (size_t a2 = 0; a2 < (s2 == s ? a : ds->n_args[s2]); a2++) {
			if (!ds->scans[s2][a2] || strcmp(ds->scan_file[s2][a2], file))
				continue;
			free(ds->scans[s][a]);
			ds->scans[s][a] = ds->scans[s2][a2];
			ds->scan_shared[s][a] = 1;
			ds->scan_file[s][a] = file;
			return 0;
		}
	}
	ds->scan_file[s][a] = file;
	return profile_scan_recording(file, ds->scans[s][a], NULL, 0);
}

/*
 * The runs of argument @a of side @s: a recording with several workload windows is one run per
 * window (unless --window all), FILE#N that window, anything else one run.
 * Return: 0; -errno (said).
 */
static int expand_arg(struct diff_sides *ds, int s, size_t a)
{
	const char *side = s ? "NEW" : "BASE", *arg = ds->args[s][a];
	char *file = NULL, *name;
	struct profile_scan *sc;
	size_t first;
	long sel;
	int err;

	sc = malloc(sizeof(*sc));
	sel = sc ? window_suffix(arg, &file) : -ENOMEM;
	if (sel < 0) {
		free(sc);
		cli_error("diff: %s", hvp_strerror((int)sel));
		return (int)sel;
	}
	ds->scans[s][a] = sc;
	err = scan_arg(ds, s, a, sel ? file : arg);
	sc = ds->scans[s][a];
	if (sel) {
		/* FILE#N: the file must be a recording with that window */
		if (err || (size_t)sel > sc->n_windows) {
			cli_error("%s %s: %s", side, arg, err ? hvp_strerror(err)
				  : "no such workload window in the recording");
			free(file);
			return err ? err : -ENOENT;
		}
		/* the file name lives as long as the run: keep it in the run's owned name */
		err = push_run(ds, s, file, sc, (int)sel - 1, arg, NULL);
		if (err) {
			free(file);
			return err;
		}
		ds->owned[s][ds->n[s] - 1] = file; /* freed with the run; the name stays arg */
		return 0;
	}
	if (err && err != -EBADMSG && err != -ENOTSUP && err != -ENOMEM) {
		cli_error("%s %s: %s", side, arg, hvp_strerror(err));
		return err;
	}
	if (err) { /* not a recording: a folded file (never a shared scan: that one succeeded) */
		free(sc);
		ds->scans[s][a] = NULL;
		return push_run(ds, s, arg, NULL, -1, arg, NULL);
	}
	if (ds->window_all || sc->n_windows < 2)
		return push_run(ds, s, arg, sc, -1, arg, NULL);
	first = ds->n[s];
	for (size_t w = 0; w < sc->n_windows; w++) {
		/* the last window without its end was cut short (--duration): not a whole run */
		if (w + 1 == sc->n_windows && !sc->windows[w].has_end) {
			add_note(ds, "%s %s: workload window %zu has no end (the recording stopped "
				 "first): left out", side, arg, w + 1);
			break;
		}
		if (asprintf(&name, "%s#%zu", arg, w + 1) < 0) {
			cli_error("diff: %s", hvp_strerror(-ENOMEM));
			return -ENOMEM;
		}
		err = push_run(ds, s, arg, sc, (int)w, name, name);
		if (err)
			return err;
	}
	add_note(ds, "%s %s holds %zu workload windows (record --repeat): compared as %zu runs%s; "
		 "runs of one boot share its conditions, so the scatter from boot to boot is not "
		 "measured (docs/diff.md)", side, arg, sc->n_windows, ds->n[s] - first,
		 sc->windows_seen > sc->n_windows ? " (more were recorded: not kept)" : "");
	return 0;
}

/*
 * The time range run @i of side @s (a recording's) compares: its window (its recording's only
 * one, or the one the run is) unless --window all; the whole recording without a window.
 * Return: 1 a window; 0 the whole recording.
 */
static int run_window(const struct diff_sides *ds, int s, size_t i,
		      struct profile_time_window *tw)
{
	const struct profile_scan *scan = ds->scan[s][i];
	int w = ds->window[s][i];

	*tw = (struct profile_time_window){ 0, UINT64_MAX };
	if (w >= 0)
		return profile_scan_window_at(scan, (size_t)w, &tw->start_ns, &tw->end_ns) == 0;
	return !ds->window_all && profile_scan_window(scan, &tw->start_ns, &tw->end_ns) == 0;
}

/*
 * The stacks of every run not loaded yet whose recording is the file of run @i of side @s (on
 * either side), from one read of that file (profile_stacks_load_windows()): memory holds the
 * runs' sets, never the file's samples. Return: 0; -errno (@errbuf says which file and what).
 */
static int load_recording(struct diff_sides *ds, int s, size_t i,
			  const struct profile_options *po, char *errbuf, size_t errbuf_len)
{
	const char *file = ds->files[s][i];
	struct profile_time_window *wins;
	struct profile_stacks **outs;
	size_t n = 0, k = 0;
	int err = -ENOMEM;

	wins = calloc(2 * PROFILE_DIFF_MAX_RUNS, sizeof(*wins));
	outs = calloc(2 * PROFILE_DIFF_MAX_RUNS, sizeof(*outs));
	if (!wins || !outs) {
		snprintf(errbuf, errbuf_len, "%s: %s", file, hvp_strerror(err));
		goto out;
	}
	for (int s2 = 0; s2 < 2; s2++)
		for (size_t i2 = 0; i2 < ds->n[s2]; i2++)
			if (ds->scan[s2][i2] && !ds->stacks[s2][i2] &&
			    !strcmp(ds->files[s2][i2], file))
				(void)run_window(ds, s2, i2, &wins[n++]);
	err = profile_stacks_load_windows(file, po, wins, n, outs, errbuf, errbuf_len);
	if (err)
		goto out;
	/* the same runs in the same order: each takes its set */
	for (int s2 = 0; s2 < 2; s2++)
		for (size_t i2 = 0; i2 < ds->n[s2]; i2++)
			if (ds->scan[s2][i2] && !ds->stacks[s2][i2] &&
			    !strcmp(ds->files[s2][i2], file))
				ds->stacks[s2][i2] = outs[k++];
out:
	free(outs);
	free(wins);
	return err;
}

/*
 * Load run @i of side @s: a recording is compared over its window (its only one, or the one the
 * run is) unless --window all, and must have ended well; a broken one is an error unless
 * --allow-incomplete. Return: 0; -errno (said, naming the side and the run).
 */
static int load_run(struct diff_sides *ds, int s, size_t i, const struct profile_options *po)
{
	const char *side = s ? "NEW" : "BASE", *path = ds->paths[s][i];
	const struct profile_scan *scan = ds->scan[s][i];
	char errbuf[512] = "", why[256] = "";
	struct profile_time_window tw;
	int err = 0, w = ds->window[s][i];

	if (scan && w < 0 && !ds->window_all && !run_window(ds, s, i, &tw))
		add_note(ds, "%s %s has no workload window mark: compared whole", side, path);
	else if (scan && !ds->window_all)
		ds->n_windowed++;
	if (!scan)
		err = profile_stacks_load(ds->files[s][i], po, &ds->stacks[s][i], errbuf,
					  sizeof(errbuf));
	else if (!ds->stacks[s][i]) /* not yet loaded with an earlier run of its file */
		err = load_recording(ds, s, i, po, errbuf, sizeof(errbuf));
	if (err) {
		cli_error("%s %s", side, errbuf[0] ? errbuf : hvp_strerror(err));
		return err;
	}
	if (scan && w >= 0 && scan->windows[w].has_end && scan->windows[w].exit_status) {
		/* this run's own command failed (the END has the first failure of all runs) */
		snprintf(why, sizeof(why), "the command of workload window %d exited with status %"
			 PRId32 " (the workload failed?)", w + 1, scan->windows[w].exit_status);
		err = -ECANCELED;
	} else if (scan) {
		err = profile_scan_check(scan, profile_stacks_total(ds->stacks[s][i]),
					 PROFILE_DIFF_MIN_RUN_SAMPLES, why, sizeof(why));
		if (err == -ECANCELED && !scan->has_end && w >= 0 && scan->windows[w].has_end) {
			/* the recording was cut short after this window's end (WORKLOAD_END, status
			 * 0): the window is whole; the cut is said, and the open window is left
			 * out as any last window without its end */
			add_note(ds, "%s %s: the recording has no END record (cut short after this "
				 "window)", side, path);
			err = 0;
			why[0] = '\0';
		}
	} else if (!profile_stacks_total(ds->stacks[s][i])) {
		err = -ENODATA;
	}
	if (err && !why[0])
		snprintf(why, sizeof(why), "no samples at all");
	if (!err)
		return 0;
	if (ds->allow_incomplete) {
		pr_warn("%s %s: %s (compared anyway: --allow-incomplete)", side, path, why);
		add_note(ds, "%s %s is incomplete: %s (--allow-incomplete)", side, path, why);
		return 0;
	}
	cli_error("%s %s: %s; not compared (--allow-incomplete to compare it anyway)", side, path,
		  why);
	return err;
}

/* Every run of both sides, and each side's runs pooled when it has several. */
static int load_sides(struct diff_sides *ds, const struct profile_options *po)
{
	int err = 0;

	for (int s = 0; s < 2; s++)
		for (size_t a = 0; a < ds->n_args[s] && !err; a++)
			err = expand_arg(ds, s, a);
	for (int s = 0; s < 2 && !err; s++) {
		if (!ds->n[s]) {
			cli_error("%s: no run to compare", s ? "NEW" : "BASE");
			err = -ENODATA;
		}
	}
	for (int s = 0; s < 2; s++)
		for (size_t i = 0; i < ds->n[s] && !err; i++)
			err = load_run(ds, s, i, po);
	if (!err && ds->window_all)
		add_note(ds, "whole recordings compared (--window all)");
	else if (!err && ds->n_windowed) /* else no run had one: each said so above */
		add_note(ds, "recordings compared over their workload window (--window all: the "
			     "whole recording)");
	for (int s = 0; s < 2 && !err; s++) {
		if (ds->n[s] < 2)
			continue;
		err = profile_stacks_pool((const struct profile_stacks *const *)ds->stacks[s],
					  ds->n[s], &ds->pooled[s]);
		if (err)
			cli_error("diff: pooling the %s runs: %s", s ? "NEW" : "BASE",
				  hvp_strerror(err));
	}
	return err;
}

/*
 * EXIT_REGRESSION (said on stderr) when a reported function's share grew by --fail-on-regression
 * or more and it holds at least --fail-min-share of NEW (profile_diff_worst_regression()).
 */
static int regression_status(const struct profile_diff *d, double fail_pct)
{
	double worst;

	if (fail_pct < 0)
		return EXIT_OK;
	worst = profile_diff_worst_regression(d);
	if (worst <= 0 || worst < fail_pct)
		return EXIT_OK;
	if (isinf(worst))
		fprintf(stderr, "hvprof: regression: a new function appeared (BASE -> NEW)"
				"; --fail-on-regression %.1f%%\n", fail_pct);
	else
		fprintf(stderr, "hvprof: regression: a function's share grew %.1f%% "
				"(BASE -> NEW) >= --fail-on-regression %.1f%%\n",
			worst, fail_pct);
	return EXIT_REGRESSION;
}

/* A file for side @s (0 BASE, 1 NEW); -EINVAL (said) beyond PROFILE_DIFF_MAX_RUNS. */
static int add_run(struct diff_sides *ds, int s, const char *path)
{
	if (ds->n_args[s] == PROFILE_DIFF_MAX_RUNS) {
		cli_error("--%s: at most %d runs a side", s ? "new" : "base", PROFILE_DIFF_MAX_RUNS);
		return -EINVAL;
	}
	ds->args[s][ds->n_args[s]++] = path;
	return 0;
}

struct diff_cmd {
	struct profile_options po;
	struct profile_diff_options dopt;
	struct diff_sides ds;
	const char *svg, *svg_rev;
	double fail_pct;
	int json;
};

/* One option of diff's own (not a filter): 0; 1 --help; -EINVAL (said). */
static int diff_opt(struct diff_cmd *dc, int c, const char *arg)
{
	char *end;

	switch (c) {
	case 1: {
		unsigned long long v;

		errno = 0;
		v = strtoull(arg, &end, 10);
		if (*end || end == arg || arg[0] == '-' || errno) {
			cli_error("--min-samples '%s': want a whole number", arg);
			return -EINVAL;
		}
		dc->dopt.min_samples = v;
		dc->dopt.min_samples_set = 1;
		return 0;
	}
	case 2:
		return parse_pct("--threshold", arg, &dc->dopt.threshold_pct);
	case 3:
		return parse_pct("--fail-on-regression", arg, &dc->fail_pct);
	case 14: {
		double v = 0;
		int err = parse_pct("--fail-min-share", arg, &v);

		if (!err && v > 100) {
			cli_error("--fail-min-share '%s': want a percent of NEW, 0 to 100", arg);
			err = -EINVAL;
		}
		/* 0 means the default to the library: ask for "every function" instead */
		dc->dopt.fail_min_share_pct = v > 0 ? v : -1;
		return err;
	}
	case 'f':
		dc->json = !strcmp(arg, "json");
		if (!dc->json && strcmp(arg, "text")) {
			cli_error("--format '%s': want text or json", arg);
			return -EINVAL;
		}
		return 0;
	case 4:
		dc->svg = arg;
		return 0;
	case 5:
		dc->svg_rev = arg;
		return 0;
	case 6: {
		unsigned long v = strtoul(arg, &end, 10);

		if (*end || end == arg || v == 0 || v > 1000000) {
			cli_error("--max-rows '%s': want 1 to 1000000", arg);
			return -EINVAL;
		}
		dc->dopt.max_rows = (unsigned int)v;
		return 0;
	}
	case 7:
		dc->po.symfs = arg;
		return 0;
	case 8:
		return cli_max_stack(arg, &dc->po.max_stack) ? -EINVAL : 0;
	case 'k':
		dc->po.vmlinux = arg;
		return 0;
	case 9:
	case 10:
		return add_run(&dc->ds, c == 10, arg);
	case 11:
		dc->ds.window_all = !strcmp(arg, "all");
		if (!dc->ds.window_all && strcmp(arg, "workload")) {
			cli_error("--window '%s': want workload or all", arg);
			return -EINVAL;
		}
		return 0;
	case 12:
		dc->ds.allow_incomplete = 1;
		return 0;
	case 13: {
		double v = strtod(arg, &end);

		if (*end || end == arg || !(v >= 1 && v <= 1000)) {
			cli_error("--noise-factor '%s': want a number from 1 to 1000", arg);
			return -EINVAL;
		}
		dc->dopt.run_noise_factor = v;
		return 0;
	}
	case 'h':
		diff_usage();
		return 1;
	default:
		return cli_filter_opt(&dc->po, c, arg) <= 0 ? -EINVAL : 0;
	}
}

/* Compare, write, draw; the exit status. */
static int diff_run(struct diff_cmd *dc)
{
	struct profile_sink out = profile_sink_fd(STDOUT_FILENO);
	struct profile_diff_svg_options so = { .size = sizeof(so) };
	struct profile_diff_write_options wo = { .size = sizeof(wo) };
	struct diff_sides *ds = &dc->ds;
	const struct profile_stacks *sides[2];
	struct profile_diff *d = NULL;
	char names[2][1024];
	int err, status = EXIT_ERROR;

	if (load_sides(ds, &dc->po) != 0)
		return EXIT_ERROR;
	err = profile_diff_compute_runs((const struct profile_stacks *const *)ds->stacks[0],
					ds->n[0],
					(const struct profile_stacks *const *)ds->stacks[1],
					ds->n[1], &dc->dopt, &d);
	wo.base_names = ds->paths[0];
	wo.new_names = ds->paths[1];
	wo.json = dc->json;
	wo.notes = (const char *const *)ds->notes;
	wo.n_notes = ds->n_notes;
	if (!err)
		err = profile_diff_write_runs(d, &wo, &out);
	if (err) {
		cli_error("diff: %s", hvp_strerror(err));
		goto out;
	}
	for (int s = 0; s < 2; s++) {
		sides[s] = ds->pooled[s] ? ds->pooled[s] : ds->stacks[s][0];
		if (ds->n[s] == 1)
			snprintf(names[s], sizeof(names[s]), "%s", ds->paths[s][0]);
		else
			snprintf(names[s], sizeof(names[s]), "%zu runs (%s ...)", ds->n[s],
				 ds->paths[s][0]);
	}
	so.base_name = names[0];
	so.new_name = names[1];
	so.min_samples = dc->dopt.min_samples;
	so.min_samples_set = dc->dopt.min_samples_set;
	so.noise_factor = dc->dopt.run_noise_factor ? dc->dopt.run_noise_factor
						    : PROFILE_DIFF_RUN_FACTOR;
	if (dc->svg && write_svg(dc->svg, sides[0], sides[1], &so))
		goto out;
	so.reverse = 1;
	if (dc->svg_rev && write_svg(dc->svg_rev, sides[0], sides[1], &so))
		goto out;
	status = regression_status(d, dc->fail_pct);
out:
	profile_diff_free(d);
	return status;
}

int cmd_diff(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "min-samples", required_argument, NULL, 1 },
		{ "threshold", required_argument, NULL, 2 },
		{ "fail-on-regression", required_argument, NULL, 3 },
		{ "format", required_argument, NULL, 'f' },
		{ "svg", required_argument, NULL, 4 },
		{ "svg-reverse", required_argument, NULL, 5 },
		{ "max-rows", required_argument, NULL, 6 },
		{ "symfs", required_argument, NULL, 7 },
		{ "vmlinux", required_argument, NULL, 'k' },
		{ "max-stack", required_argument, NULL, 8 },
		{ "base", required_argument, NULL, 9 },
		{ "new", required_argument, NULL, 10 },
		{ "window", required_argument, NULL, 11 },
		{ "allow-incomplete", no_argument, NULL, 12 },
		{ "noise-factor", required_argument, NULL, 13 },
		{ "fail-min-share", required_argument, NULL, 14 },
		FILTER_LONG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct diff_cmd *dc;
	int c, err, status = EXIT_USAGE;

	dc = calloc(1, sizeof(*dc));
	if (!dc) {
		cli_error("diff: %s", hvp_strerror(-ENOMEM));
		return EXIT_ERROR;
	}
	dc->po.size = sizeof(dc->po);
	dc->dopt = (struct profile_diff_options){ .size = sizeof(dc->dopt), .threshold_pct = -1 };
	dc->fail_pct = -1;
	optind = 1;
	while ((c = cli_getopt_long(argc, argv, "f:k:h", opts)) != -1) {
		err = diff_opt(dc, c, optarg);
		if (err) {
			status = err > 0 ? EXIT_OK : EXIT_USAGE;
			goto out;
		}
	}
	if (cli_filter_check(&dc->po))
		goto out;
	if (!dc->ds.n_args[0] && !dc->ds.n_args[1] && argc - optind == 2) {
		dc->ds.args[0][dc->ds.n_args[0]++] = argv[optind];
		dc->ds.args[1][dc->ds.n_args[1]++] = argv[optind + 1];
	} else if (argc - optind != 0 || !dc->ds.n_args[0] || !dc->ds.n_args[1]) {
		cli_error("diff: want BASE NEW, or --base FILE ... --new FILE ... (see 'hvprof diff "
			  "--help')");
		goto out;
	}
	for (int s = 0; s < 2; s++) {
		for (size_t a = 0; a < dc->ds.n_args[s]; a++) {
			if (cli_check_output_not_input("diff --svg", dc->svg, dc->ds.args[s][a]) ||
			    cli_check_output_not_input("diff --svg-reverse", dc->svg_rev,
						       dc->ds.args[s][a]))
				goto out; /* EXIT_USAGE */
		}
	}
	if ((dc->svg && cli_check_output_path("diff --svg", dc->svg)) ||
	    (dc->svg_rev && cli_check_output_path("diff --svg-reverse", dc->svg_rev))) {
		status = EXIT_ERROR;
		goto out;
	}
	status = diff_run(dc);
out:
	sides_free(&dc->ds);
	free(dc);
	return status;
}
