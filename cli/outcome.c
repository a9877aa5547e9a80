// SPDX-License-Identifier: MIT
// How a guest run ends, as hvprof's exit status and one line on stderr; stop-on-signal wiring.
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <hvprof/sample.h>

#include "cli.h"

static struct vmm *signal_vm;
static volatile sig_atomic_t signal_seen;

static void on_signal(int sig)
{
	signal_seen = sig;
	if (signal_vm)
		vmm_request_stop(signal_vm, HVP_END_SIGNAL);
}

static void set_handlers(void (*fn)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

void cli_stop_on_signals(struct vmm *vm)
{
	signal_vm = vm;
	set_handlers(vm ? on_signal : SIG_DFL);
	if (vm && signal_seen) /* came while only caught (cli_catch_signals) */
		vmm_request_stop(vm, HVP_END_SIGNAL);
}

void cli_catch_signals(void)
{
	signal_vm = NULL;
	set_handlers(on_signal);
}

int cli_signal_received(void)
{
	return signal_seen;
}

int cli_outcome(const struct vmm_result *res)
{
	switch (res->reason) {
	case HVP_END_EXIT_DEVICE:
		fprintf(stderr, "hvprof: guest exited with status %d after %.1f s\n",
			res->exit_status, (double)res->runtime_ns / 1e9);
		return res->exit_status == 0 ? EXIT_OK : EXIT_GUEST_FAILED;
	case HVP_END_RESET:
		fprintf(stderr, "hvprof: guest reset without reporting a status (%s)\n", res->message);
		return EXIT_GUEST_FAILED;
	case HVP_END_SHUTDOWN:
		fprintf(stderr, "hvprof: guest crashed: %s\n", res->message);
		return EXIT_GUEST_FAILED;
	case HVP_END_DURATION:
		fprintf(stderr, "hvprof: stopped the guest: %s\n", res->message);
		return EXIT_OK;
	case HVP_END_SIGNAL:
		fprintf(stderr, "hvprof: interrupted; guest stopped\n");
		return EXIT_INTERRUPTED;
	default:
		cli_error("%s", res->message[0] ? res->message : "the VM stopped on an error");
		return EXIT_ERROR;
	}
}
