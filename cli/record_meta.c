// SPDX-License-Identifier: MIT
// What a recording says of its run (META, kernel knowledge, counters), for `record` and for the
// windows of `record --attach` (cli/control_session.c) alike (docs/recording-format.md).
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <hvprof/guestinfo.h>
#include <hvprof/profile.h>

#include "cli.h"

static int meta_path(struct recfile_writer *w, const char *key, const char *path)
{
	char abs[PATH_MAX];

	if (!path)
		return 0;
	return recfile_write_meta(w, key, realpath(path, abs) ? abs : path);
}

int record_meta_u64(struct recfile_writer *w, const char *key, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return recfile_write_meta(w, key, buf);
}

int record_write_meta(struct recfile_writer *w, const struct guest_opts *g,
		      const struct guest *gs, unsigned int freq, const char *call_graph)
{
	const struct sampler *sm = gs->sampler;
	char buf[PATH_MAX + 8], abs[PATH_MAX];
	time_t now = time(NULL);
	int err = 0;

	err = err ?: recfile_write_meta(w, "hvprof_version", "0.1.0");
	/* the VMM's own time per sample depends on how it was built (meson.build) */
	err = err ?: recfile_write_meta(w, "hvprof_build", HVPROF_BUILD);
	err = err ?: meta_path(w, "kernel", g->vmlinux ? g->vmlinux : g->kernel);
	if (g->vmlinux && !cli_same_file(g->vmlinux, g->kernel)) /* symbols from another file */
		err = err ?: meta_path(w, "booted_kernel", g->kernel);
	if (gs->gi && !gi_has_btf(gs->gi)) /* docs/recording-format.md */
		err = err ?: recfile_write_meta(w, "btf", "none: no thread identity");
	else
		err = err ?: meta_path(w, "btf", g->btf);
	err = err ?: meta_path(w, "rootfs", g->m_rootfs);
	err = err ?: meta_path(w, "image", g->image_dir);
	if (g->m_kernel_version)
		err = err ?: recfile_write_meta(w, "kernel_version", g->m_kernel_version);
	for (size_t i = 0; i < g->n_adds && !err; i++) {
		snprintf(buf, sizeof(buf), "%s:%s",
			 realpath(g->adds[i].host_path, abs) ? abs : g->adds[i].host_path,
			 g->adds[i].guest_path);
		err = recfile_write_meta(w, "add", buf);
	}
	for (size_t i = 0; i < g->n_disks && !err; i++) { /* docs/recording-format.md */
		const struct vmm_disk *d = &g->disks[i];
		char line[PATH_MAX + 32];

		static const char *const modes[] = { "rw", "ro", "snapshot", "ro,snapshot" };

		snprintf(line, sizeof(line), "vd%c %s %s", (char)('a' + i),
			 modes[d->readonly + 2 * d->snapshot], realpath(d->path, abs) ? abs : d->path);
		err = recfile_write_meta(w, "disk", line);
	}
	err = err ?: recfile_write_meta(w, "cmdline", gs->cmdline);
	if (gs->host_added[0]) /* docs/recording-format.md */
		err = err ?: recfile_write_meta(w, "host_cmdline", gs->host_added);
	err = err ?: recfile_write_meta(w, "counter", sampler_counter_name(sampler_counter_kind(sm)));
	err = err ?: record_meta_u64(w, "frequency_hz", freq);
	if (sampler_counter_kind(sm) == SAMPLER_COUNTER_CPU_CLOCK)
		err = err ?: record_meta_u64(w, "period_ns", 1000000000ull / freq);
	err = err ?: record_meta_u64(w, "vcpus", g->cpus);
	err = err ?: record_meta_u64(w, "mem_mib", g->mem_mib);
	err = err ?: recfile_write_meta(w, "callchain_mode", sampler_callchain_mode_name(sm));
	err = err ?: recfile_write_meta(w, "call_graph", call_graph); /* docs/recording-format.md */
	err = err ?: recfile_write_meta(w, "strategy", guest_strategy(gs, buf, sizeof(buf)));
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	err = err ?: recfile_write_meta(w, "start_time", buf);
	return err;
}

/* META kernel_slide, kaslr, kaslr_check, kaslr_relocations, pti (docs/recording-format.md). */
int record_write_kernel_meta(struct recfile_writer *w, const struct sampler *sm)
{
	struct sampler_kaslr_info ki;
	char text[256];
	uint64_t slide; /* profile/symbolize.c subtracts it from kernel ips */
	int err = 0;

	if (sampler_kernel_slide(sm, &slide) == 0)
		err = record_meta_u64(w, "kernel_slide", slide);
	if (!err && sampler_kaslr_info(sm, &ki) == 0) {
		if (ki.relocated)
			snprintf(text, sizeof(text), "relocated by hvprof to slide 0x%llx",
				 (unsigned long long)ki.placed_slide);
		else if (ki.placed)
			snprintf(text, sizeof(text), "link address");
		else
			snprintf(text, sizeof(text), "chosen by the guest");
		err = recfile_write_meta(w, "kaslr", text);
		snprintf(text, sizeof(text), "%s%s", gi_kaslr_check_name(ki.check),
			 ki.check == GI_KASLR_PENDING || ki.check == GI_KASLR_FAILED ? ""
			 : ki.idt > 0 ? " and the IDT"
			 : ki.idt < 0 ? " (the IDT's #PF gate disagrees)"
				      : " (IDT not readable)");
		err = err ?: recfile_write_meta(w, "kaslr_check", text);
		if (!err && ki.relocated)
			err = record_meta_u64(w, "kaslr_relocations", ki.n_relocs);
	}
	return err ?: recfile_write_meta(w, "pti", sampler_pti_name(sm));
}

/* The sampler's counters, then the VMM's (names from their lists). */
int record_write_counters(struct recfile_writer *w, const struct sampler_counters *cnt,
			  const struct vmm_counters *vc)
{
	int err = 0;

	for (size_t i = 0; i < SAMPLER_N_COUNTERS && !err; i++)
		err = recfile_write_counter(w, sampler_counter_names[i], ((const uint64_t *)cnt)[i]);
	for (size_t i = 0; i < VMM_N_COUNTERS && !err; i++)
		err = recfile_write_counter(w, vmm_counter_names[i], ((const uint64_t *)vc)[i]);
	return err;
}
