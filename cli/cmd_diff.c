// SPDX-License-Identifier: MIT
// hvprof diff BASE NEW: compare two recordings or folded files on normalized shares, print or
// write the significant changes, draw differential flamegraphs, and fail CI on a regression.
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
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
	       "  Compare two recordings or folded-stack files on normalized shares (each side's\n"
	       "  samples over its own total): functions (self and total share) and stacks.\n"
	       "  BASE is the reference (before), NEW the run under test (after).\n"
	       "  --min-samples N         ignore entries with fewer than N samples on both sides\n"
	       "                          (default %d: below it no change can pass a 3-sigma\n"
	       "                          Poisson test, so it could only be noise)\n"
	       "  --threshold PCT         ignore changes smaller than PCT %% of the BASE share\n"
	       "                          (default %.0f)\n"
	       "  --fail-on-regression PCT  exit 1 if a function's share grew by PCT %% or more\n"
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
	       PROFILE_DIFF_MIN_SAMPLES, PROFILE_DIFF_THRESHOLD);
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

/* BASE and NEW, named in errors as such. Return: 0; -errno (printed). */
static int load_sides(char **paths, const struct profile_options *po,
		      struct profile_stacks *sides[2])
{
	for (int i = 0; i < 2; i++) {
		char errbuf[512] = "";
		int err = profile_stacks_load(paths[i], po, &sides[i], errbuf, sizeof(errbuf));

		if (err) {
			cli_error("%s %s", i ? "NEW" : "BASE", errbuf[0] ? errbuf : hvp_strerror(err));
			return err;
		}
	}
	return 0;
}

/* EXIT_REGRESSION (said on stderr) when a share grew by --fail-on-regression or more. */
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
		FILTER_LONG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct profile_options po = { .size = sizeof(po) };
	struct profile_diff_options dopt = { .size = sizeof(dopt), .threshold_pct = -1 };
	struct profile_diff_svg_options so = { .size = sizeof(so) };
	struct profile_stacks *sides[2] = { NULL, NULL };
	struct profile_sink out = profile_sink_fd(STDOUT_FILENO);
	const char *svg = NULL, *svg_rev = NULL;
	struct profile_diff *d = NULL;
	double fail_pct = -1;
	int c, err, json = 0, status = EXIT_ERROR;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f:k:h", opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 1: {
			unsigned long long v;

			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (*end || end == optarg || optarg[0] == '-' || errno) {
				cli_error("--min-samples '%s': want a whole number", optarg);
				return EXIT_USAGE;
			}
			dopt.min_samples = v;
			dopt.min_samples_set = 1;
			break;
		}
		case 2:
			if (parse_pct("--threshold", optarg, &dopt.threshold_pct))
				return EXIT_USAGE;
			break;
		case 3:
			if (parse_pct("--fail-on-regression", optarg, &fail_pct))
				return EXIT_USAGE;
			break;
		case 'f':
			if (!strcmp(optarg, "json")) {
				json = 1;
			} else if (strcmp(optarg, "text")) {
				cli_error("--format '%s': want text or json", optarg);
				return EXIT_USAGE;
			}
			break;
		case 4:
			svg = optarg;
			break;
		case 5:
			svg_rev = optarg;
			break;
		case 6: {
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || end == optarg || v == 0 || v > 1000000) {
				cli_error("--max-rows '%s': want 1 to 1000000", optarg);
				return EXIT_USAGE;
			}
			dopt.max_rows = (unsigned int)v;
			break;
		}
		case 7:
			po.symfs = optarg;
			break;
		case 8:
			if (cli_max_stack(optarg, &po.max_stack))
				return EXIT_USAGE;
			break;
		case 'k':
			po.vmlinux = optarg;
			break;
		case 'h':
			diff_usage();
			return EXIT_OK;
		default:
			if (cli_filter_opt(&po, c, optarg) <= 0)
				return EXIT_USAGE;
			break;
		}
	}
	if (cli_filter_check(&po))
		return EXIT_USAGE;
	if (argc - optind != 2) {
		cli_error("diff: want two files, BASE and NEW (see 'hvprof diff --help')");
		return EXIT_USAGE;
	}
	if (load_sides(argv + optind, &po, sides) != 0)
		goto out;
	err = profile_diff_compute(sides[0], sides[1], &dopt, &d);
	if (!err)
		err = profile_diff_write(d, argv[optind], argv[optind + 1], json, &out);
	if (err) {
		cli_error("diff: %s", hvp_strerror(err));
		goto out;
	}
	so.base_name = argv[optind];
	so.new_name = argv[optind + 1];
	so.min_samples = dopt.min_samples;
	so.min_samples_set = dopt.min_samples_set;
	if (svg && write_svg(svg, sides[0], sides[1], &so))
		goto out;
	so.reverse = 1;
	if (svg_rev && write_svg(svg_rev, sides[0], sides[1], &so))
		goto out;
	status = regression_status(d, fail_pct);
out:
	profile_diff_free(d);
	profile_stacks_free(sides[0]);
	profile_stacks_free(sides[1]);
	return status;
}
