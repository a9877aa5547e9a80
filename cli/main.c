// SPDX-License-Identifier: MIT
// hvprof: the command table, global options and the log sink. Only cli/ chooses exit statuses.
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/log.h>

#include "cli.h"

static const struct cmd commands[] = {
	{ "run", cmd_run, "boot the guest, console on stdout", true },
	{ "record", cmd_record, "profile the whole guest into a recording (hvprof.data)", true },
	{ "exec", cmd_exec, "run a command in a `run --control` guest (its output and status)" },
	{ "report", cmd_report, "top table of a recording" },
	{ "flamegraph", cmd_flamegraph, "interactive SVG flamegraph or folded stacks" },
	{ "export", cmd_export, "folded, svg, speedscope, pprof or perf-script output" },
	{ "diff", cmd_diff, "compare two recordings (BASE -> NEW); CI regression gate" },
	{ "kernel-info", cmd_kernel_info, "what hvprof understands of a kernel image" },
};

/* Error lines printed so far, by the libraries' sink (vCPU threads too) and by cli_error. */
static atomic_uint errors_printed;
/* The command running (set by main when it dispatches), named by every error line */
static const char *cli_command;

unsigned int cli_errors_printed(void)
{
	return atomic_load_explicit(&errors_printed, memory_order_relaxed);
}

static void log_to_stderr(enum hvp_log_level level, const char *msg)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };

	if (level == HVP_LOG_ERR && cli_command) { /* every error line names the command */
		atomic_fetch_add_explicit(&errors_printed, 1, memory_order_relaxed);
		fprintf(stderr, "hvprof: error: %s: %s\n", cli_command, msg);
		return;
	}
	if (level == HVP_LOG_ERR)
		atomic_fetch_add_explicit(&errors_printed, 1, memory_order_relaxed);
	fprintf(stderr, "hvprof: %s: %s\n", names[level], msg);
}

void cli_error(const char *fmt, ...)
{
	char msg[2048];
	size_t n = cli_command ? strlen(cli_command) : 0;
	va_list ap;

	if (!fmt) /* never: said so for GCC's format checks under UBSan */
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	atomic_fetch_add_explicit(&errors_printed, 1, memory_order_relaxed);
	if (n && !(strncmp(msg, cli_command, n) == 0 && (msg[n] == ':' || msg[n] == ' ')))
		fprintf(stderr, "hvprof: error: %s: %s\n", cli_command, msg);
	else
		fprintf(stderr, "hvprof: error: %s\n", msg);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hvprof [-v|-vv|-q] COMMAND [ARGS]\n"
		"       hvprof --version | --help\n\ncommands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'hvprof COMMAND --help' (or 'hvprof help COMMAND') shows the options of a "
		"command.\n-v, -vv: more messages (-vv: debug); -q: errors only; --version: hvprof's "
		"version.\n");
}

int main(int argc, char **argv)
{
	enum hvp_log_level level = HVP_LOG_WARN;
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-v")) {
			level = HVP_LOG_INFO;
		} else if (!strcmp(argv[i], "-vv")) {
			level = HVP_LOG_DEBUG;
			hvp_log_set_debug_mask(~0u);
		} else if (!strcmp(argv[i], "-q")) {
			level = HVP_LOG_ERR;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return EXIT_OK;
		} else if (!strcmp(argv[i], "--version")) {
			printf("hvprof 0.1.0\n");
			return EXIT_OK;
		} else {
			static const char *const global[] = { "--help", "--version" };
			const char *near = cli_suggest(argv[i], global, ARRAY_SIZE(global));

			if (near)
				cli_error("unknown option '%s': did you mean '%s'? (see 'hvprof "
					  "--help')", argv[i], near);
			else
				cli_error("unknown option '%s' (see 'hvprof --help')", argv[i]);
			return EXIT_USAGE;
		}
	}
	hvp_log_set_fn(log_to_stderr);
	hvp_log_set_level(level);
	if (i >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[i], "help")) {
		/* `hvprof help [COMMAND]`, as git has it: COMMAND --help */
		static char help[] = "--help";

		if (i + 1 >= argc || !strcmp(argv[i + 1], "help")) {
			usage(stdout);
			return EXIT_OK;
		}
		argv[i] = argv[i + 1];
		argv[i + 1] = help;
		argc = i + 2;
		argv[argc] = NULL; /* within the original argv: i + 2 <= its argc */
	}
	for (size_t c = 0; c < ARRAY_SIZE(commands); c++) {
		if (!strcmp(argv[i], commands[c].name)) {
			cli_command = commands[c].name;
			if (commands[c].runs_guest) {
				int err = cli_text_on_huge_page();

				/* an optimisation: without it everything works the same */
				if (err && err != -ECANCELED)
					pr_info("hvprof's code stays on 4 KiB pages: %s",
						hvp_strerror(err));
			}
			return commands[c].fn(argc - i, argv + i);
		}
	}
	{
		const char *names[ARRAY_SIZE(commands)], *near;

		for (size_t c = 0; c < ARRAY_SIZE(commands); c++)
			names[c] = commands[c].name;
		near = cli_suggest(argv[i], names, ARRAY_SIZE(commands));
		if (near)
			cli_error("unknown command '%s': did you mean '%s'? (see 'hvprof --help')",
				  argv[i], near);
		else
			cli_error("unknown command '%s' (see 'hvprof --help')", argv[i]);
	}
	return EXIT_USAGE;
}
