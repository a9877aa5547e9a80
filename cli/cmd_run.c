// SPDX-License-Identifier: MIT
// hvprof run: boot the guest with its console on stdout, until it ends.
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "cli.h"
#include "control.h"

#define OPT_CONTROL 3001

/* `run --control`: a sampler that samples only in attach windows, into their recordings. */
static int control_setup(struct control_run **cr, struct sampler_config *scfg)
{
	int err = control_run_create(cr);

	if (err) {
		cli_error("--control: %s", hvp_strerror(err));
		return err;
	}
	*scfg = (struct sampler_config){ .sample_hz = CTL_DEFAULT_HZ, .sink = control_run_sink(*cr),
					 .callchain_mode = SAMPLER_CALLCHAIN_DEFERRED,
					 .call_graph = SAMPLER_CALL_GRAPH_DWARF,
					 .start = SAMPLER_START_ATTACH };
	return 0;
}

static const char run_usage[] =
	"usage: hvprof run [--control PATH] [guest options]\n\n"
	"  --control PATH      also listen on a UNIX socket at PATH (owner-only, removed at\n"
	"                      exit) for `hvprof record --attach PATH` (docs/control-protocol.md);\n"
	"                      without --run, a bundled image's guest then waits for commands\n"
	"                      (`hvprof exec --attach PATH -- CMD`) until `hvprof exec --attach\n"
	"                      PATH --poweroff`\n"
	"\nguest options:\n" GUEST_OPTIONS_HELP;

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = { GUEST_LONG_OPTIONS,
					      { "control", required_argument, NULL, OPT_CONTROL },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	struct guest_opts g;
	struct sampler_config scfg = { .sample_hz = 0 }; /* no samples: only watching the guest */
	struct vmm_result res = { .reason = HVP_END_ERROR, .exit_status = -1 };
	struct control_run *cr = NULL;
	const char *control = NULL;
	struct guest gs = { 0 };
	int c, err, status = EXIT_ERROR;

	guest_opts_init(&g);
	optind = 1;
	while ((c = cli_getopt_long(argc, argv, "h", opts)) != -1) {
		if (c == 'h') {
			fputs(run_usage, stdout);
			guest_opts_free(&g);
			return EXIT_OK;
		}
		if (c == OPT_CONTROL) {
			control = optarg;
			continue;
		}
		if (c == '?' || guest_opt_parse(&g, c, optarg) != 0) {
			status = EXIT_USAGE;
			goto out;
		}
	}
	if (optind < argc) {
		cli_error("run: unexpected argument '%s' (the guest's command is given with --run "
			  "'CMD ARGS')", argv[optind]);
		status = EXIT_USAGE;
		goto out;
	}
	if (guest_opts_check(&g) != 0) {
		status = EXIT_USAGE;
		goto out;
	}
	g.serve = control && !g.run_cmd; /* before finish: the command line says so */
	if (guest_opts_finish(&g) != 0)
		goto out;
	if (control) {
		/* A control client that goes away must never kill the VM: the server sends with
		 * MSG_NOSIGNAL and refuses recordings that are not regular files, and no other
		 * write of this process may raise SIGPIPE either (set before any thread exists). */
		struct sigaction ign = { .sa_handler = SIG_IGN };

		sigemptyset(&ign.sa_mask);
		if (sigaction(SIGPIPE, &ign, NULL) != 0) { /* cannot fail for SIGPIPE */ }
		if (control_setup(&cr, &scfg) != 0)
			goto out;
		if (g.serve && (g.cmd_out_fd = control_run_chan_fd(cr)) < 0)
			goto out;
	}
	if (guest_start(&g, &scfg, STDOUT_FILENO, &gs) != 0)
		goto out;
	if (cr && control_run_start(cr, control, &g, &gs) != 0)
		goto out;
	cli_stop_on_signals(gs.vm);
	err = vmm_run(gs.vm, &res);
	cli_stop_on_signals(NULL);
	if (err) {
		cli_error("cannot run the guest: %s", hvp_strerror(err));
		res.reason = HVP_END_ERROR;
		goto out;
	}
	status = cli_outcome(&res);
out:
	control_run_stop(cr, &res); /* an open window ends with the run (its client is told) */
	guest_stop(&gs);
	control_run_destroy(cr);
	guest_opts_free(&g);
	return status;
}
