// SPDX-License-Identifier: MIT
// hvprof report: load a recording and write a perf-like table (or JSON).
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/log.h>
#include <hvprof/profile.h>

#include "cli.h"

/* Load @path; a damaged tail is reported but what is intact is used. */
static int load(const char *path, const struct profile_options *po, struct profile **p)
{
	char errbuf[512] = "";
	int err;

	err = profile_load(path, po, p, errbuf, sizeof(errbuf));
	if (err) {
		cli_error("%s", errbuf[0] ? errbuf : hvp_strerror(err));
		return err;
	}
	/* a damaged tail was already reported by the loader (pr_warn), with what was kept */
	cli_filter_warn_empty(*p, path);
	return 0;
}

int cli_max_stack(const char *arg, unsigned int *out)
{
	char *end;
	unsigned long v = strtoul(arg, &end, 10);

	if (*end || end == arg || arg[0] == '-' || v == 0 || v > 1000000) {
		cli_error("--max-stack '%s': want 1 to 1000000 frames", arg);
		return -EINVAL;
	}
	*out = (unsigned int)v;
	return 0;
}

int cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "sort", required_argument, NULL, 's' },
		{ "symfs", required_argument, NULL, 1 },
		{ "vmlinux", required_argument, NULL, 'k' },
		{ "percent-limit", required_argument, NULL, 2 },
		{ "stdio", no_argument, NULL, 3 },
		{ "format", required_argument, NULL, 'f' },
		{ "children", no_argument, NULL, 4 },
		{ "no-children", no_argument, NULL, 5 },
		{ "max-rows", required_argument, NULL, 'n' },
		{ "max-stack", required_argument, NULL, 6 },
		FILTER_LONG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct profile_options po = { .size = sizeof(po) };
	/* Children on by default, as perf report shows them for callchain recordings. */
	struct profile_report_options ro = { .size = sizeof(ro), .children = 1 };
	struct profile_sink out = profile_sink_fd(STDOUT_FILENO);
	struct profile *p = NULL;
	const char *input = "hvprof.data";
	char bad[64];
	int c, err, input_set = 0;

	optind = 1;
	while ((c = cli_getopt_long(argc, argv, "i:s:k:f:n:h", opts)) != -1) {
		switch (c) {
		case 'i':
			input = optarg;
			input_set = 1;
			break;
		case 's':
			ro.sort = optarg;
			break;
		case 'f':
			if (!strcmp(optarg, "json")) {
				ro.format = PROFILE_REPORT_JSON;
			} else if (!strcmp(optarg, "stdio") || !strcmp(optarg, "text")) {
				ro.format = PROFILE_REPORT_STDIO;
			} else {
				cli_error("--format '%s': want stdio or json", optarg);
				return EXIT_USAGE;
			}
			break;
		case 4:
			ro.children = 1;
			break;
		case 5:
			ro.children = 0;
			break;
		case 'n': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || end == optarg || v > 100000000) {
				cli_error("--max-rows '%s': want 0 (all) to 100000000", optarg);
				return EXIT_USAGE;
			}
			ro.max_rows = (unsigned int)v;
			break;
		}
		case 'k':
			po.vmlinux = optarg;
			break;
		case 1:
			po.symfs = optarg;
			break;
		case 2: {
			char *end;

			ro.min_percent = strtod(optarg, &end);
			if (*end || end == optarg || ro.min_percent < 0 || ro.min_percent > 100) {
				cli_error("--percent-limit '%s': want 0 to 100", optarg);
				return EXIT_USAGE;
			}
			break;
		}
		case 3:
			ro.format = PROFILE_REPORT_STDIO;
			break;
		case 6:
			if (cli_max_stack(optarg, &po.max_stack))
				return EXIT_USAGE;
			break;
		case 'h':
			printf("usage: hvprof report [-i FILE | FILE] [--sort KEYS] [--symfs DIR] "
			       "[--vmlinux FILE] [--percent-limit PCT]\n"
			       "                     [--stdio | --format stdio|json] [--no-children] "
			       "[--max-rows N] [--max-stack N]\n"
			       "                     [--comm NAMES] [--pid PIDS] [--tid TIDS] "
			       "[--time START,END]\n"
			       "                     [--kernel-only | --user-only]\n"
			       "  -i FILE, FILE: the recording (default hvprof.data)\n"
			       "  KEYS: comma list of comm, pid, dso, sym (default comm,dso,sym)\n"
			       "  Children (default on): share of the samples whose stack contains the\n"
			       "  row's keys; Self: share whose innermost frame has them. --no-children\n"
			       "  shows self only. --percent-limit applies to the column sorted on.\n"
			       "  --max-stack N: keep each callchain's N innermost frames; the cut shows\n"
			       "  as a [truncated at N frames] frame (as a walk's depth bound does).\n"
			       FILTER_OPTIONS_HELP);
			return EXIT_OK;
		default:
			if (cli_filter_opt(&po, c, optarg) <= 0)
				return EXIT_USAGE;
			break;
		}
	}
	if (cli_positional_input("report", argc, argv, optind, input_set, &input))
		return EXIT_USAGE;
	if (cli_filter_check(&po))
		return EXIT_USAGE;
	if (ro.sort && profile_sort_check(ro.sort, bad, sizeof(bad)) != 0) {
		cli_error("--sort '%s': unknown or repeated key '%s' (keys: comm, pid, dso, sym)",
			  ro.sort, bad);
		return EXIT_USAGE;
	}
	if (cli_check_input_exists("report", input) || load(input, &po, &p) != 0)
		return EXIT_ERROR;
	err = profile_report(p, &ro, &out);
	profile_free(p);
	if (err) {
		cli_error("cannot write the report: %s", hvp_strerror(err));
		return EXIT_ERROR;
	}
	return EXIT_OK;
}
