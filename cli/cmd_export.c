// SPDX-License-Identifier: MIT
// hvprof export and hvprof flamegraph: load a recording and write it in a format other tools
// read (folded, svg, speedscope, pprof, perf-script; docs/export-formats.md).
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/log.h>
#include <hvprof/profile.h>

#include "cli.h"

static const char *const formats[] = { "folded", "svg", "speedscope", "pprof", "perf-script" };

static void export_usage(void)
{
	printf("usage: hvprof export --format FORMAT [-i FILE | FILE] [-o FILE] [--title T]\n"
	       "                     [--symfs DIR] [--vmlinux FILE] [--max-stack N] [FILTERS]\n"
	       "  FORMAT: folded       folded stacks (flamegraph.pl, speedscope, Pyroscope)\n"
	       "          svg          self-contained interactive flamegraph\n"
	       "          speedscope   speedscope's JSON file format\n"
	       "          pprof        gzipped profile.proto (go tool pprof, Pyroscope, Parca)\n"
	       "          perf-script  `perf script` text (stackcollapse-perf.pl, Firefox Profiler)\n"
	       "  -i FILE   recording (default hvprof.data)\n"
	       "  -o FILE   output (default: stdout; '-' is stdout)\n"
	       "  docs/export-formats.md describes each format and what reads it.\n"
	       FILTER_OPTIONS_HELP);
}

/* What `export` and `flamegraph` differ in. */
struct export_mode {
	const char *cmd;
	const char *default_format; /* NULL: --format is required */
	bool svg_or_folded_only;
	void (*usage)(void);
};

static void flamegraph_usage(void)
{
	printf("usage: hvprof flamegraph [-i FILE | FILE] [-o FILE] [--format svg|folded]\n"
	       "                         [--title T] [--symfs DIR] [--vmlinux FILE] [--max-stack N]\n"
	       "                         [FILTERS]\n"
	       "  default input: hvprof.data; default output: flamegraph.svg (svg) or stdout\n"
	       "  (folded)\n"
	       FILTER_OPTIONS_HELP);
}

static int export_main(int argc, char **argv, const struct export_mode *m)
{
	static const struct option opts[] = {
		{ "input", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ "title", required_argument, NULL, 't' },
		{ "symfs", required_argument, NULL, 1 },
		{ "vmlinux", required_argument, NULL, 'k' },
		{ "max-stack", required_argument, NULL, 2 },
		FILTER_LONG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct profile_options po = { .size = sizeof(po) };
	struct profile_flamegraph_options fo = { .size = sizeof(fo) };
	const char *input = "hvprof.data", *output = NULL, *format = m->default_format;
	struct profile *p = NULL;
	struct profile_sink out;
	char errbuf[512] = "";
	int c, err, fd = STDOUT_FILENO, known = 0, input_set = 0;

	optind = 1;
	while ((c = cli_getopt_long(argc, argv, "i:o:f:t:k:h", opts)) != -1) {
		switch (c) {
		case 'i':
			input = optarg;
			input_set = 1;
			break;
		case 'o':
			output = optarg;
			break;
		case 'f':
			format = optarg;
			break;
		case 't':
			fo.title = optarg;
			break;
		case 'k':
			po.vmlinux = optarg;
			break;
		case 1:
			po.symfs = optarg;
			break;
		case 2:
			if (cli_max_stack(optarg, &po.max_stack))
				return EXIT_USAGE;
			break;
		case 'h':
			m->usage();
			return EXIT_OK;
		default:
			if (cli_filter_opt(&po, c, optarg) <= 0)
				return EXIT_USAGE;
			break;
		}
	}
	if (cli_filter_check(&po))
		return EXIT_USAGE;
	if (cli_positional_input(m->cmd, argc, argv, optind, input_set, &input))
		return EXIT_USAGE;
	if (!format) {
		cli_error("export: --format is required (folded, svg, speedscope, pprof, "
			  "perf-script)");
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < ARRAY_SIZE(formats); i++)
		known |= !strcmp(format, formats[i]);
	if (m->svg_or_folded_only && strcmp(format, "svg") && strcmp(format, "folded")) {
		cli_error("--format '%s': want svg or folded ('hvprof export' writes the others)",
			  format);
		return EXIT_USAGE;
	}
	if (!known) {
		cli_error("--format '%s': want folded, svg, speedscope, pprof or perf-script",
			  format);
		return EXIT_USAGE;
	}
	if (!output && m->svg_or_folded_only && !strcmp(format, "svg"))
		output = "flamegraph.svg";
	if (output && !strcmp(output, "-"))
		output = NULL;
	if (!output && !strcmp(format, "pprof") && isatty(STDOUT_FILENO)) {
		cli_error("export: pprof is gzip data; give -o FILE or redirect stdout");
		return EXIT_USAGE;
	}
	/* before the load, which may take long on a large recording */
	if (output && cli_check_output_not_input(m->cmd, output, input))
		return EXIT_USAGE;
	if ((output && cli_check_output_path(m->cmd, output)) ||
	    cli_check_input_exists(m->cmd, input))
		return EXIT_ERROR;
	/* perf-script is one block per sample: only it needs every sample kept. */
	po.keep_samples = !strcmp(format, "perf-script");
	err = profile_load(input, &po, &p, errbuf, sizeof(errbuf));
	if (err) {
		cli_error("%s", errbuf[0] ? errbuf : hvp_strerror(err));
		return EXIT_ERROR;
	}
	cli_filter_warn_empty(p, input);
	if (output) {
		fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0) {
			err = -errno;
			cli_error("cannot create %s: %s", output, hvp_strerror(err));
			profile_free(p);
			return EXIT_ERROR;
		}
	}
	out = profile_sink_fd(fd);
	if (!strcmp(format, "folded"))
		err = profile_folded(p, &out);
	else if (!strcmp(format, "svg"))
		err = profile_flamegraph(p, &fo, &out);
	else if (!strcmp(format, "speedscope"))
		err = profile_speedscope(p, &out);
	else if (!strcmp(format, "pprof"))
		err = profile_pprof(p, &out);
	else
		err = profile_perf_script(p, &out);
	profile_free(p);
	if (fd != STDOUT_FILENO && close(fd) != 0 && !err)
		err = -errno;
	if (err) {
		cli_error("cannot write %s as %s: %s", output ? output : "stdout", format,
			  hvp_strerror(err));
		return EXIT_ERROR;
	}
	if (output)
		fprintf(stderr, "hvprof: wrote %s (%s)\n", output, format);
	return EXIT_OK;
}

int cmd_export(int argc, char **argv)
{
	static const struct export_mode m = { "export", NULL, false, export_usage };

	return export_main(argc, argv, &m);
}

int cmd_flamegraph(int argc, char **argv)
{
	static const struct export_mode m = { "flamegraph", "svg", true, flamegraph_usage };

	return export_main(argc, argv, &m);
}
