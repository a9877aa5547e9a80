// SPDX-License-Identifier: MIT
// The sample filters of report, flamegraph, export and diff (--comm, --pid, --tid, --time,
// --kernel-only, --user-only): one parser for all four readers.
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include <hvprof/profile.h>

#include "cli.h"

int cli_filter_opt(struct profile_options *po, int code, const char *arg)
{
	switch (code) {
	case CLI_FILTER_COMM:
		po->filter_comm = arg;
		return 1;
	case CLI_FILTER_PID:
		po->filter_pid = arg;
		return 1;
	case CLI_FILTER_TID:
		po->filter_tid = arg;
		return 1;
	case CLI_FILTER_TIME:
		po->filter_time = arg;
		return 1;
	case CLI_FILTER_KERNEL:
	case CLI_FILTER_USER: {
		int only = code == CLI_FILTER_KERNEL ? PROFILE_ONLY_KERNEL : PROFILE_ONLY_USER;

		if (po->filter_only && po->filter_only != only) {
			cli_error("--kernel-only and --user-only exclude each other");
			return -EINVAL;
		}
		po->filter_only = only;
		return 1;
	}
	}
	return 0;
}

int cli_filter_check(const struct profile_options *po)
{
	char errbuf[256] = "";

	if (profile_filter_check(po, errbuf, sizeof(errbuf)) == 0)
		return 0;
	cli_error("%s", errbuf[0] ? errbuf : "bad filter");
	return -EINVAL;
}

void cli_filter_warn_empty(const struct profile *p, const char *path)
{
	struct profile_stats st;

	profile_get_stats(p, &st);
	if (st.samples == 0 && st.filtered_out > 0)
		fprintf(stderr,
			"hvprof: warning: %s: no sample matched the filters (all %" PRIu64
			" left out)\n", path, st.filtered_out);
}
