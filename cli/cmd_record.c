// SPDX-License-Identifier: MIT
// hvprof record: boot the guest and profile all of it into a recording until it ends.
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hvprof/log.h>
#include <hvprof/profile.h>

#include "cli.h"

#define DEFAULT_FREQ 1000
#define MAX_FREQ 100000

static const char record_usage[] =
	"usage: hvprof record [-F HZ] [-o FILE] [guest options]\n\n"
	"  -F, --freq HZ       samples per second per vCPU (default 1000)\n"
	"  -o, --output FILE   recording to write (default hvprof.data; an existing one\n"
	"                      is kept as FILE.old)\n"
	"  --callchain-mode M  user part of kernel samples: deferred (walk at the thread's\n"
	"                      return to user; default), eager (walk at once from pt_regs)\n"
	"                      or both (deferred, with the eager walk kept as a cross-check)\n"
	"  --bare-exits        benchmarking: exit at the sampling rate and record nothing\n"
	"                      (the floor that bench/overhead.py compares hvprof with)\n"
	"\nguest options:\n" GUEST_OPTIONS_HELP;

static int sink_sample(void *ctx, const struct hvp_sample *s)
{
	return recfile_write_sample(ctx, s);
}

static int sink_thread(void *ctx, const struct hvp_thread *t)
{
	return recfile_write_thread(ctx, t);
}

static int sink_process(void *ctx, const struct hvp_process *p)
{
	return recfile_write_process(ctx, p);
}

static int sink_user_stack(void *ctx, const struct hvp_user_stack *u)
{
	return recfile_write_user_stack(ctx, u);
}

static int meta_path(struct recfile_writer *w, const char *key, const char *path)
{
	char abs[PATH_MAX];

	if (!path)
		return 0;
	return recfile_write_meta(w, key, realpath(path, abs) ? abs : path);
}

static int meta_u64(struct recfile_writer *w, const char *key, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return recfile_write_meta(w, key, buf);
}

static int write_meta(struct recfile_writer *w, const struct guest_opts *g, const struct vmm *vm,
		      unsigned int freq)
{
	char buf[PATH_MAX + 8], abs[PATH_MAX];
	time_t now = time(NULL);
	int err = 0;

	err = err ?: recfile_write_meta(w, "hvprof_version", "0.1.0");
	err = err ?: meta_path(w, "kernel", g->vmlinux ? g->vmlinux : g->kernel);
	if (g->vmlinux && !cli_same_file(g->vmlinux, g->kernel)) /* symbols from another file */
		err = err ?: meta_path(w, "booted_kernel", g->kernel);
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
	err = err ?: recfile_write_meta(w, "cmdline", g->cmdline);
	err = err ?: recfile_write_meta(w, "counter", vmm_counter_name(vmm_counter_kind(vm)));
	err = err ?: meta_u64(w, "frequency_hz", freq);
	if (vmm_counter_kind(vm) == VMM_COUNTER_CPU_CLOCK)
		err = err ?: meta_u64(w, "period_ns", 1000000000ull / freq);
	err = err ?: meta_u64(w, "vcpus", g->cpus);
	err = err ?: meta_u64(w, "mem_mib", g->mem_mib);
	err = err ?: recfile_write_meta(w, "callchain_mode", vmm_callchain_mode_name(vm));
	err = err ?: recfile_write_meta(w, "strategy", vmm_strategy(vm));
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	err = err ?: recfile_write_meta(w, "start_time", buf);
	return err;
}

static int open_output(const char *path, int *fd_out)
{
	char old[PATH_MAX];
	struct stat st;
	int fd, err;

	/* Keep an existing recording as .old, as perf does, but only regular files. */
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		snprintf(old, sizeof(old), "%s.old", path);
		if (rename(path, old) != 0) {
			err = -errno;
			cli_error("cannot move the previous %s to %s: %s", path, old,
				  hvp_strerror(err));
			return err;
		}
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = -errno;
		cli_error("cannot create recording %s: %s", path, hvp_strerror(err));
		return err;
	}
	*fd_out = fd;
	return 0;
}

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = { GUEST_LONG_OPTIONS,
					      { "freq", required_argument, NULL, 'F' },
					      { "output", required_argument, NULL, 'o' },
					      { "callchain-mode", required_argument, NULL, 'm' },
					      { "bare-exits", no_argument, NULL, 'B' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	struct recfile_writer *w = NULL;
	struct vmm_counters cnt;
	struct vmm_config cfg;
	struct vmm_result res;
	struct vmm_sink sink;
	struct guest_opts g;
	struct vmm *vm = NULL;
	const char *output = "hvprof.data";
	unsigned long freq = DEFAULT_FREQ;
	enum vmm_callchain_mode mode = VMM_CALLCHAIN_DEFERRED;
	bool bare = false;
	int c, err, fd = -1, status = EXIT_ERROR;
	struct timespec ts_start, ts_run;

	clock_gettime(CLOCK_MONOTONIC, &ts_start);
	guest_opts_init(&g);
	optind = 1;
	while ((c = getopt_long(argc, argv, "F:o:h", opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'h':
			fputs(record_usage, stdout);
			guest_opts_free(&g);
			return EXIT_OK;
		case 'F':
			errno = 0;
			freq = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || freq < 1 || freq > MAX_FREQ) {
				cli_error("-F '%s': want a frequency from 1 to %d Hz", optarg,
					  MAX_FREQ);
				status = EXIT_USAGE;
				goto out;
			}
			break;
		case 'o':
			output = optarg;
			break;
		case 'B':
			bare = true;
			break;
		case 'm':
			if (!strcmp(optarg, "deferred")) {
				mode = VMM_CALLCHAIN_DEFERRED;
			} else if (!strcmp(optarg, "eager")) {
				mode = VMM_CALLCHAIN_EAGER;
			} else if (!strcmp(optarg, "both")) {
				mode = VMM_CALLCHAIN_BOTH;
			} else {
				cli_error("--callchain-mode '%s': want deferred, eager or both",
					  optarg);
				status = EXIT_USAGE;
				goto out;
			}
			break;
		default:
			if (c == '?' || guest_opt_parse(&g, c, optarg) != 0) {
				status = EXIT_USAGE;
				goto out;
			}
		}
	}
	if (optind < argc) {
		cli_error("record: unexpected argument '%s'", argv[optind]);
		status = EXIT_USAGE;
		goto out;
	}
	if (guest_opts_check(&g) != 0) {
		status = EXIT_USAGE;
		goto out;
	}
	if (guest_opts_finish(&g) != 0)
		goto out;
	/* The output is opened before the guest starts: a bad path fails in a second, not
	 * after the run. */
	if (open_output(output, &fd) != 0)
		goto out;
	err = recfile_writer_open(fd, &w);
	if (err) {
		cli_error("cannot write recording %s: %s", output, hvp_strerror(err));
		goto out;
	}

	memset(&cfg, 0, sizeof(cfg));
	guest_opts_to_config(&g, &cfg);
	cfg.console_fd = STDOUT_FILENO;
	cfg.sample_hz = (unsigned int)freq;
	cfg.callchain_mode = mode;
	cfg.bare_exits = bare;
	sink = (struct vmm_sink){ .sample = sink_sample, .thread = sink_thread,
				  .process = sink_process, .user_stack = sink_user_stack,
				  .ctx = w };
	cfg.sink = &sink;
	err = vmm_create(&cfg, &vm);
	if (err) {
		cli_error("cannot start the guest: %s", hvp_strerror(err));
		goto out;
	}
	err = write_meta(w, &g, vm, (unsigned int)freq);
	if (!err)
		err = recfile_writer_flush(w);
	if (err) {
		cli_error("cannot write recording %s: %s", output, hvp_strerror(err));
		goto out;
	}

	cli_stop_on_signals(vm);
	clock_gettime(CLOCK_MONOTONIC, &ts_run);
	err = vmm_run(vm, &res);
	/* The handlers stay until the recording is closed: a second Ctrl-C while the counters
	 * and the END record are written must not kill hvprof and cut the file short. */
	if (err) {
		cli_error("cannot run the guest: %s", hvp_strerror(err));
		res.reason = HVP_END_ERROR;
		res.exit_status = -1;
	}
	fflush(stdout);
	status = cli_outcome(&res);

	/* Counters and the END record, whatever the outcome: the recording says how it ended. */
	vmm_get_counters(vm, &cnt);
	err = 0;
	{
		uint64_t slide; /* profile/symbolize.c subtracts it from kernel ips */

		struct vmm_kaslr_info ki;

		if (vmm_kernel_slide(vm, &slide) == 0)
			err = meta_u64(w, "kernel_slide", slide);
		if (!err && vmm_kaslr_info(vm, &ki) == 0) {
			char text[256];

			/* docs/recording-format.md: kaslr, kaslr_check, kaslr_relocations */
			if (ki.relocated)
				snprintf(text, sizeof(text), "relocated by hvprof to slide 0x%llx",
					 (unsigned long long)ki.placed_slide);
			else if (ki.placed)
				snprintf(text, sizeof(text), "link address");
			else
				snprintf(text, sizeof(text), "chosen by the guest");
			err = recfile_write_meta(w, "kaslr", text);
			snprintf(text, sizeof(text), "%s%s", vmm_kaslr_check_name(ki.check),
				 ki.check == KASLR_CHECK_PENDING || ki.check == KASLR_CHECK_FAILED
					 ? ""
				 : ki.idt > 0 ? " and the IDT"
				 : ki.idt < 0 ? " (the IDT's #PF gate disagrees)"
					      : " (IDT not readable)");
			err = err ?: recfile_write_meta(w, "kaslr_check", text);
			if (!err && ki.relocated)
				err = meta_u64(w, "kaslr_relocations", ki.n_relocs);
		}
		err = err ?: recfile_write_meta(w, "pti", vmm_pti_name(vm));
	}
	for (size_t i = 0; i < VMM_N_COUNTERS && !err; i++)
		err = recfile_write_counter(w, vmm_counter_names[i], ((uint64_t *)&cnt)[i]);
	if (!err)
		err = recfile_write_counter(w, "runtime_ns", res.runtime_ns);
	if (!err)
		err = recfile_write_counter(w, "first_user_ns", res.first_user_ns);
	if (!err) /* from the command's start to the guest's: files, KVM set-up, kernel load */
		err = recfile_write_counter(
			w, "startup_ns",
			(uint64_t)((ts_run.tv_sec - ts_start.tv_sec) * 1000000000ll +
				   (ts_run.tv_nsec - ts_start.tv_nsec)));
	if (!err)
		err = recfile_write_end(w, (enum hvp_end_reason)res.reason,
					res.reason == HVP_END_EXIT_DEVICE ? res.exit_status : 0);
	if (!err)
		err = recfile_writer_close(w);
	else
		if (recfile_writer_close(w)) { /* already failing: the first error is reported */ }
	w = NULL;
	if (!err && fsync(fd) != 0 && errno != EINVAL)
		err = -errno;
	if (err) {
		cli_error("recording %s is incomplete: %s", output, hvp_strerror(err));
		status = EXIT_ERROR;
		goto out;
	}
	{
		double secs = (double)res.runtime_ns / 1e9;

		fprintf(stderr,
			"hvprof: %llu samples (%.0f/s, %llu user, %llu kernel) in %.1f s; "
			"counter %s at %lu Hz; no task %llu; boot to first user sample %.1f s; "
			"written to %s\n",
			(unsigned long long)cnt.samples, secs > 0 ? (double)cnt.samples / secs : 0.0,
			(unsigned long long)cnt.samples_user, (unsigned long long)cnt.samples_kernel,
			secs, vmm_counter_name(vmm_counter_kind(vm)), freq,
			(unsigned long long)cnt.samples_no_task, (double)res.first_user_ns / 1e9,
			output);
	}
out:
	cli_stop_on_signals(NULL);
	if (w)
		if (recfile_writer_close(w)) { /* already failing: the first error is reported */ }
	if (fd >= 0)
		close(fd);
	vmm_destroy(vm);
	guest_opts_free(&g);
	return status;
}
