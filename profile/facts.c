// SPDX-License-Identifier: MIT
// The run's facts (META, COUNTER, END and load statistics) as short lines, for the report
// header and the flamegraph subtitle.
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "profile_internal.h"

size_t profile_facts(const struct profile *p, char lines[][FACT_LINE], size_t max)
{
	const struct profile_stats *st = &p->stats;
	const char *counter = profile_meta(p, "counter");
	const char *freq = profile_meta(p, "frequency_hz");
	const char *period = profile_meta(p, "period_ns");
	const char *kernel = profile_meta(p, "kernel");
	const char *kver = profile_meta(p, "kernel_version");
	const char *booted = profile_meta(p, "booted_kernel");
	const char *vcpus = profile_meta(p, "vcpus");
	const char *image = profile_meta(p, "image");
	const char *cmdline = profile_meta(p, "cmdline");
	const char *mode = profile_meta(p, "callchain_mode");
	const char *strategy = profile_meta(p, "strategy");
	const char *kaslr = profile_meta(p, "kaslr");
	const char *kaslr_check = profile_meta(p, "kaslr_check");
	const char *pti = profile_meta(p, "pti");
	size_t n = 0;

#define FACT(...)                                                      \
	do {                                                           \
		if (n < max)                                           \
			snprintf(lines[n++], FACT_LINE, __VA_ARGS__);  \
	} while (0)

	FACT("Samples: %" PRIu64 " (kernel %" PRIu64 ", user %" PRIu64 ", kernel threads %" PRIu64
	     ")",
	     st->samples, st->kernel_samples, st->user_samples, st->kthread_samples);
	FACT("Lost user stacks: %" PRIu64 " (deferred %" PRIu64 ", joined %" PRIu64
	     ", orphan user-stack records %" PRIu64 ")",
	     st->lost_user, st->deferred, st->joined, st->orphan_user_stacks);
	FACT("Event: %s%s%s%s%s%s%s", counter ? counter : "(unknown)", freq ? ", " : "",
	     freq ? freq : "", freq ? " Hz" : "", period ? ", period " : "", period ? period : "",
	     period ? " ns" : "");
	if (mode)
		FACT("Callchains: %s", mode);
	if (kernel || kver)
		FACT("Kernel: %s%s%s%s%s%s", kernel ? kernel : "", kernel && kver ? " " : "",
		     kver ? "version " : "", kver ? kver : "", booted ? ", booted from " : "",
		     booted ? booted : "");
	if (kaslr || pti) /* docs/kaslr.md */
		FACT("Kernel placement: KASLR %s%s%s%s; page-table isolation %s",
		     kaslr ? kaslr : "unknown", kaslr_check ? " (" : "",
		     kaslr_check ? kaslr_check : "", kaslr_check ? ")" : "", pti ? pti : "unknown");
	if (strategy)
		FACT("Strategy: %s", strategy);
	if (vcpus)
		FACT("vCPUs: %s", vcpus);
	if (image)
		FACT("Image: %s", image);
	if (cmdline)
		FACT("Command line: %s", cmdline);
	if (st->has_end && st->end_reason == HVP_END_EXIT_DEVICE)
		FACT("End: %s, exit status %" PRId32, recfile_end_reason_name(st->end_reason),
		     st->exit_status);
	else if (st->has_end)
		FACT("End: %s", recfile_end_reason_name(st->end_reason));
	else
		FACT("End: no END record (the recording was cut short)");
	if (p->n_counters && n < max) {
		size_t len = (size_t)snprintf(lines[n], FACT_LINE, "Counters:");

		for (size_t i = 0; i < p->n_counters && len < FACT_LINE; i++)
			len += (size_t)snprintf(lines[n] + len, FACT_LINE - len, "%s %s=%" PRIu64,
						i ? "," : "", p->counters[i].name,
						p->counters[i].value);
		n++;
	}
	if (p->read_error)
		FACT("Damaged recording: kept %" PRIu64 " records, stopped at %s", st->records,
		     p->read_error);
#undef FACT
	return n;
}
