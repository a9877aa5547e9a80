// SPDX-License-Identifier: MIT
// hvprof run: boot the guest with its console on stdout, until it ends.
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "cli.h"

static const char run_usage[] = "usage: hvprof run [guest options]\n\nguest options:\n"
	GUEST_OPTIONS_HELP;

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = { GUEST_LONG_OPTIONS,
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	struct guest_opts g;
	struct sampler_config scfg = { .sample_hz = 0 }; /* no samples: only watching the guest */
	struct vmm_result res;
	struct guest gs = { 0 };
	int c, err, status = EXIT_ERROR;

	guest_opts_init(&g);
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			fputs(run_usage, stdout);
			guest_opts_free(&g);
			return EXIT_OK;
		}
		if (c == '?' || guest_opt_parse(&g, c, optarg) != 0) {
			status = EXIT_USAGE;
			goto out;
		}
	}
	if (optind < argc) {
		cli_error("run: unexpected argument '%s'", argv[optind]);
		status = EXIT_USAGE;
		goto out;
	}
	if (guest_opts_check(&g) != 0) {
		status = EXIT_USAGE;
		goto out;
	}
	if (guest_opts_finish(&g) != 0)
		goto out;
	if (guest_start(&g, &scfg, STDOUT_FILENO, &gs) != 0)
		goto out;
	cli_stop_on_signals(gs.vm);
	err = vmm_run(gs.vm, &res);
	cli_stop_on_signals(NULL);
	if (err) {
		cli_error("cannot run the guest: %s", hvp_strerror(err));
		goto out;
	}
	status = cli_outcome(&res);
out:
	guest_stop(&gs);
	guest_opts_free(&g);
	return status;
}
