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

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>
#include <hvprof/profile.h>

#include "cli.h"

#define DEFAULT_FREQ 1000
#define MAX_FREQ 100000
#define MAX_REPEAT 100 /* record --repeat */

static const char record_usage[] =
	"usage: hvprof record [-F HZ] [-o FILE] [--repeat N] [guest options]\n"
	"       hvprof record --attach PATH [-F HZ] [-o FILE] [--call-graph ...] [--duration S]\n"
	"                     [--exec 'CMD ARGS']\n\n"
	"  --attach PATH       sample the VM of `hvprof run --control PATH` instead of booting\n"
	"                      one: until --duration S, Ctrl-C or the guest's end; nothing\n"
	"                      stays armed after (docs/control-protocol.md)\n"
	"  --exec 'CMD ARGS'   with --attach: run CMD in the guest (as `hvprof exec` does; a\n"
	"                      guest started with run --control and no --run), its output\n"
	"                      here, and detach when it ends: one recording per command\n"
	"  -F, --freq HZ       samples per second per vCPU (default 1000)\n"
	"  -o, --output FILE   recording to write (default hvprof.data; an existing one\n"
	"                      is kept as FILE.old once the guest has started)\n"
	"  --callchain-mode M  user part of kernel samples: deferred (walk at the thread's\n"
	"                      return to user; default), eager (walk at once from pt_regs)\n"
	"                      or both (deferred, with the eager walk kept as a cross-check)\n"
	"  --marks auto|flag|trap\n"
	"                      how deferred walks catch the return to user: flag (set the\n"
	"                      thread's TIF_NOTIFY_RESUME, trap the exit-work loop only it\n"
	"                      enters: one breakpoint per loop, two where each exit path\n"
	"                      holds its own, as on Linux 6.12), trap (sysretq/iretq\n"
	"                      breakpoints every return hits while a thread is marked);\n"
	"                      auto (default): flag where the kernel and the host allow it\n"
	"                      (a PVM host has room for one loop only; kernel-info says what\n"
	"                      a kernel needs; docs/guest-interface.md)\n"
	"  --call-graph fp|dwarf[,SIZE]\n"
	"                      what each user walk records besides its frame-pointer chain:\n"
	"                      dwarf (default): the user registers and SIZE bytes of user\n"
	"                      stack (default 8192, at most 65528) for CFI unwinding; fp: the\n"
	"                      registers and 64 bytes of stack (the leaf's return address)\n"
	"  --bare-exits        benchmarking: exit at the sampling rate and record nothing\n"
	"                      (the floor that bench/overhead.py compares hvprof with)\n"
	"  --mark-every-stay   deferred mode: mark every sampled kernel stay and walk at its\n"
	"                      return, also kinds of entry whose stays see too few samples\n"
	"                      for a mark to pay (by default walked at the sample, from the\n"
	"                      registers the return would use: no exit for the return)\n"
	"  --bench-phases      benchmarking: the guest's bench-phase events (hvprof-bench\n"
	"                      phases) switch between no sampling, bare exits and sampling,\n"
	"                      from the first of them on (bench/overhead.py --phases)\n"
	"  --from WHEN         start sampling at: boot (the first instruction; default),\n"
	"                      init (when the image's /init starts), workload (when the\n"
	"                      --run command starts), or SECONDS after the start (e.g. 2.5);\n"
	"                      until then sampling costs no exits (docs/guest-interface.md)\n"
	"  --repeat N          run the --run command (or the image's default) N times in one\n"
	"                      boot (1 to 100): the recording holds N workload windows, which\n"
	"                      'hvprof diff' compares as N runs (docs/diff.md)\n"
	"\nguest options:\n" GUEST_OPTIONS_HELP;

static int sink_sample(void *ctx, const struct hvp_sample *s, const struct hvp_user_regs *r)
{
	return recfile_write_sample_regs(ctx, s, r);
}

static int sink_thread(void *ctx, const struct hvp_thread *t)
{
	return recfile_write_thread(ctx, t);
}

static int sink_process(void *ctx, const struct hvp_process *p)
{
	return recfile_write_process(ctx, p);
}

static int sink_user_stack(void *ctx, const struct hvp_user_stack *u,
			   const struct hvp_user_regs *r)
{
	return recfile_write_user_stack_regs(ctx, u, r);
}

static int sink_mapping(void *ctx, const struct hvp_mapping *m)
{
	return recfile_write_mapping(ctx, m);
}

static int sink_event(void *ctx, const struct hvp_event *e)
{
	return recfile_write_event(ctx, e);
}

struct record_args {
	const char *output;
	const char *from;             /* --from as given ("boot" by default) */
	enum sampler_start start;     /* ... parsed */
	uint32_t start_event;
	uint64_t start_after_ns;
	unsigned long freq;
	enum sampler_callchain_mode mode;
	enum sampler_marks marks;
	enum sampler_call_graph call_graph;
	uint32_t stack_size; /* dwarf: bytes of user stack per walk */
	bool bare;
	bool bench_phases;
	bool from_given; /* --from was on the command line */
	bool mark_every_stay;
	const char *attach;   /* --attach PATH */
	const char *exec_cmd; /* --exec CMD (with --attach) */
	const char *not_with_attach; /* an option --attach does not take, as given */
};

/* --call-graph fp | dwarf[,SIZE] (perf's spelling): SIZE 1..65528, rounded up to 8 bytes. */
static int parse_call_graph(const char *arg, struct record_args *a)
{
	unsigned long long size = HVP_USER_STACK_DEFAULT;
	const char *p;
	char *end;

	if (!strcmp(arg, "fp")) {
		a->call_graph = SAMPLER_CALL_GRAPH_FP;
		return 0;
	}
	if (strncmp(arg, "dwarf", 5) || (arg[5] && arg[5] != ',')) {
		cli_error("--call-graph '%s': want fp or dwarf[,SIZE]", arg);
		return EXIT_USAGE;
	}
	if (arg[5] == ',') {
		p = arg + 6;
		errno = 0;
		size = strtoull(p, &end, 10);
		if (errno || *end || end == p || *p == '-' || *p == '+' || size < 1 ||
		    size > HVP_USER_STACK_MAX) {
			cli_error("--call-graph '%s': SIZE must be a number of bytes from 1 to %d",
				  arg, HVP_USER_STACK_MAX);
			return EXIT_USAGE;
		}
		size = (size + 7) & ~7ull; /* <= 65528, a multiple of 8 already */
	}
	a->call_graph = SAMPLER_CALL_GRAPH_DWARF;
	a->stack_size = (uint32_t)size;
	return 0;
}

/* --from boot | init | workload | SECONDS (a decimal number of seconds since the start). */
static int parse_from(const char *arg, struct record_args *a)
{
	double secs;
	char *end;

	a->from = arg;
	a->start = SAMPLER_START_EVENT;
	if (!strcmp(arg, "boot")) {
		a->start = SAMPLER_START_BOOT;
	} else if (!strcmp(arg, "init")) {
		a->start_event = HVP_EVENT_INIT;
	} else if (!strcmp(arg, "workload")) {
		a->start_event = HVP_EVENT_WORKLOAD_START;
	} else {
		errno = 0;
		secs = strtod(arg, &end);
		if (errno || *end || end == arg || !(secs >= 0 && secs <= 1e6) || *arg == '-' ||
		    *arg == '+') {
			cli_error("--from '%s': want boot, init, workload or a number of seconds",
				  arg);
			return EXIT_USAGE;
		}
		a->start = SAMPLER_START_AFTER;
		a->start_after_ns = (uint64_t)(secs * 1e9 + 0.5);
	}
	return 0;
}

/* Parse the command line into @g and @a. Return: 0; EXIT_USAGE (printed); -1 for --help. */
static int parse_args(int argc, char **argv, struct guest_opts *g, struct record_args *a)
{
	static const struct option opts[] = { GUEST_LONG_OPTIONS,
					      { "freq", required_argument, NULL, 'F' },
					      { "output", required_argument, NULL, 'o' },
					      { "callchain-mode", required_argument, NULL, 'm' },
					      { "marks", required_argument, NULL, 'k' + 2000 },
					      { "bare-exits", no_argument, NULL, 'B' },
					      { "bench-phases", no_argument, NULL, 'P' + 2000 },
					      { "mark-every-stay", no_argument, NULL, 'M' + 2000 },
					      { "call-graph", required_argument, NULL, 'g' + 2000 },
					      { "from", required_argument, NULL, 'f' + 2000 },
					      { "attach", required_argument, NULL, 'a' + 2000 },
					      { "exec", required_argument, NULL, 'e' + 2000 },
					      { "repeat", required_argument, NULL, 'r' + 2000 },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	int c;

	optind = 1;
	while ((c = cli_getopt_long(argc, argv, "F:o:h", opts)) != -1) {
		unsigned long n;
		char *end;

		switch (c) {
		case 'h':
			fputs(record_usage, stdout);
			return -1;
		case 'F':
			errno = 0;
			a->freq = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || a->freq < 1 || a->freq > MAX_FREQ) {
				cli_error("-F '%s': want a frequency from 1 to %d Hz", optarg,
					  MAX_FREQ);
				return EXIT_USAGE;
			}
			break;
		case 'o':
			a->output = optarg;
			break;
		case 'a' + 2000:
			a->attach = optarg;
			break;
		case 'e' + 2000:
			a->exec_cmd = optarg;
			break;
		case 'B':
			a->bare = true;
			a->not_with_attach = "--bare-exits";
			break;
		case 'M' + 2000:
			a->mark_every_stay = true;
			a->not_with_attach = "--mark-every-stay";
			break;
		case 'P' + 2000:
			a->bench_phases = true;
			a->not_with_attach = "--bench-phases";
			break;
		case 'g' + 2000:
			if (parse_call_graph(optarg, a) != 0)
				return EXIT_USAGE;
			break;
		case 'r' + 2000:
			errno = 0;
			n = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || optarg[0] == '-' || n < 1 ||
			    n > MAX_REPEAT) {
				cli_error("--repeat '%s': want 1 to %d runs", optarg, MAX_REPEAT);
				return EXIT_USAGE;
			}
			g->repeat = (unsigned int)n;
			a->not_with_attach = "--repeat";
			break;
		case 'f' + 2000:
			if (parse_from(optarg, a) != 0)
				return EXIT_USAGE;
			a->from_given = true;
			a->not_with_attach = "--from";
			break;
		case 'k' + 2000:
			a->not_with_attach = "--marks";
			if (!strcmp(optarg, "auto")) {
				a->marks = SAMPLER_MARKS_AUTO;
			} else if (!strcmp(optarg, "flag")) {
				a->marks = SAMPLER_MARKS_FLAG;
			} else if (!strcmp(optarg, "trap")) {
				a->marks = SAMPLER_MARKS_TRAP;
			} else {
				cli_error("--marks '%s': want auto, flag or trap", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'm':
			a->not_with_attach = "--callchain-mode";
			if (!strcmp(optarg, "deferred")) {
				a->mode = SAMPLER_CALLCHAIN_DEFERRED;
			} else if (!strcmp(optarg, "eager")) {
				a->mode = SAMPLER_CALLCHAIN_EAGER;
			} else if (!strcmp(optarg, "both")) {
				a->mode = SAMPLER_CALLCHAIN_BOTH;
			} else {
				cli_error("--callchain-mode '%s': want deferred, eager or both",
					  optarg);
				return EXIT_USAGE;
			}
			break;
		default:
			if (c == '?' || guest_opt_parse(g, c, optarg) != 0)
				return EXIT_USAGE;
			if (c != 1007) /* --duration is the window's with --attach */
				a->not_with_attach = "guest options";
		}
	}
	if (optind < argc) {
		cli_error("record: unexpected argument '%s' (the guest's command is given with "
			  "--run 'CMD ARGS')", argv[optind]);
		return EXIT_USAGE;
	}
	if (a->exec_cmd && !a->attach) {
		cli_error("record --exec needs --attach PATH (use --run to boot a guest for one "
			  "command)");
		return EXIT_USAGE;
	}
	if (a->bench_phases && (a->bare || a->from_given)) {
		cli_error("record --bench-phases: the guest's phases say when to sample, and which "
			  "exits are bare; not with %s", a->bare ? "--bare-exits" : "--from");
		return EXIT_USAGE;
	}
	if (a->bench_phases) {
		a->from = "bench-phase";
		a->start = SAMPLER_START_EVENT;
		a->start_event = HVP_EVENT_BENCH_PHASE;
	}
	if (a->attach && a->not_with_attach) {
		cli_error("record --attach: %s cannot be given with --attach (the VM runs already)",
			  a->not_with_attach);
		return EXIT_USAGE;
	}
	return guest_opts_check(g) != 0 ? EXIT_USAGE : 0;
}

/*
 * META sampling_from (docs/recording-format.md) at the start; at the end, when sampling never
 * started, the warning and the META again saying so (the last one wins).
 */
static int write_sampling_from(struct recfile_writer *w, const struct record_args *a, bool end,
			       const struct sampler *sm, const struct vmm_result *res)
{
	char text[128];
	uint64_t t;

	if (a->start == SAMPLER_START_AFTER)
		snprintf(text, sizeof(text), "%s s", a->from);
	else
		snprintf(text, sizeof(text), "%s", a->from);
	if (!end)
		return recfile_write_meta(w, "sampling_from", text);
	if (sampler_sampling_start(sm, &t) == 0)
		return 0;
	if (a->start == SAMPLER_START_AFTER) {
		fprintf(stderr, "hvprof: warning: --from %s: the run ended after %.1f s, before "
			"sampling was to start; nothing was sampled\n", a->from,
			(double)res->runtime_ns / 1e9);
		snprintf(text, sizeof(text), "%s s (the run ended first: nothing was sampled)",
			 a->from);
	} else {
		fprintf(stderr, "hvprof: warning: --from %s: the guest never signalled %s (its "
			"init does not speak docs/guest-interface.md events); nothing was sampled\n",
			a->from, a->start_event == HVP_EVENT_INIT ? "that its init started"
				 : a->start_event == HVP_EVENT_BENCH_PHASE ? "a bench phase"
									  : "the workload start");
		snprintf(text, sizeof(text), "%s (never signalled: nothing was sampled)", a->from);
	}
	return recfile_write_meta(w, "sampling_from", text);
}

static uint64_t ns_between(const struct timespec *a, const struct timespec *b)
{
	return (uint64_t)((b->tv_sec - a->tv_sec) * 1000000000ll + (b->tv_nsec - a->tv_nsec));
}

/* Counters and the END record, whatever the outcome: the recording says how it ended. Closes
 * @w. @startup_ns: from the command's start to the guest's (files, KVM set-up, kernel load). */
static int finish_recording(struct recfile_writer *w, const struct guest *gs,
			    const struct vmm_result *res, const struct sampler_counters *cnt,
			    uint64_t startup_ns)
{
	struct vmm_counters vc;
	int err;

	err = record_write_kernel_meta(w, gs->sampler);
	vmm_get_counters(gs->vm, &vc);
	err = err ?: record_write_counters(w, cnt, &vc);
	err = err ?: recfile_write_counter(w, "runtime_ns", res->runtime_ns);
	err = err ?: recfile_write_counter(w, "first_user_ns", sampler_first_user_ns(gs->sampler));
	err = err ?: recfile_write_counter(w, "startup_ns", startup_ns);
	err = err ?: recfile_write_end(w, (enum hvp_end_reason)res->reason,
				       res->reason == HVP_END_EXIT_DEVICE ? res->exit_status : 0);
	if (!err)
		return recfile_writer_close(w);
	if (recfile_writer_close(w)) { /* already failing: the first error is reported */ }
	return err;
}

static void print_summary(const struct guest *gs, const struct vmm_result *res,
			  const struct sampler_counters *cnt, const struct record_args *a)
{
	double secs = (double)res->runtime_ns / 1e9, vcpu_secs;
	uint64_t first_user = sampler_first_user_ns(gs->sampler);
	struct vmm_counters vc;
	char boot[64] = "";

	vmm_get_counters(gs->vm, &vc);
	/* the vCPU time sampled: with the clock counter its periods (ns of vCPU time) add up to it,
	 * boot left out when sampling started later (--from); else the vCPU threads' CPU time */
	vcpu_secs = sampler_counter_kind(gs->sampler) == SAMPLER_COUNTER_CPU_CLOCK && cnt->period_total
			    ? (double)cnt->period_total / 1e9
			    : (double)vc.vcpu_cpu_ns / 1e9;
	if (first_user)
		snprintf(boot, sizeof(boot), "; boot to first user sample %.1f s",
			 (double)first_user / 1e9);
	fprintf(stderr,
		"hvprof: %llu samples (%.0f/s of wall time, %.0f per vCPU-second; %llu user, "
		"%llu kernel, %llu without a task) in %.1f s; counter %s at %lu Hz%s; written to "
		"%s\n",
		(unsigned long long)cnt->samples, secs > 0 ? (double)cnt->samples / secs : 0.0,
		vcpu_secs > 0 ? (double)cnt->samples / vcpu_secs : 0.0,
		(unsigned long long)cnt->samples_user, (unsigned long long)cnt->samples_kernel,
		(unsigned long long)cnt->samples_no_task, secs,
		sampler_counter_name(sampler_counter_kind(gs->sampler)), a->freq, boot, a->output);
	if (cnt->bp_never_fired)
		fprintf(stderr,
			"hvprof: warning: this host delivered none of hvprof's guest breakpoints "
			"(%llu returns to user passed unseen): deferred user callchains were given up "
			"for walks at the sample (eager) from then on\n",
			(unsigned long long)cnt->returns_unseen);
}

int cmd_record(int argc, char **argv)
{
	/* --call-graph dwarf by default: README "Registers and stack for CFI unwinding" gives the
	 * measurement (distribution code has no frame pointers) */
	struct record_args a = { .output = "hvprof.data", .freq = DEFAULT_FREQ, .from = "boot",
				 .mode = SAMPLER_CALLCHAIN_DEFERRED,
				 .call_graph = SAMPLER_CALL_GRAPH_DWARF,
				 .stack_size = HVP_USER_STACK_DEFAULT };
	struct recfile_writer *w = NULL;
	struct sampler_config scfg;
	struct sampler_counters cnt;
	struct vmm_result res;
	struct sampler_sink sink;
	struct guest_opts g;
	struct guest gs = { 0 };
	struct record_output out = { .fd = -1 };
	int err, meta_err, fd = -1, status = EXIT_ERROR;
	struct timespec ts_start, ts_run;
	char call_graph[32];

	clock_gettime(CLOCK_MONOTONIC, &ts_start);
	guest_opts_init(&g);
	err = parse_args(argc, argv, &g, &a);
	if (err) {
		guest_opts_free(&g);
		return err < 0 ? EXIT_OK : err;
	}
	if (a.attach) {
		struct record_attach_args aa = { .path = a.attach, .output = a.output,
						 .freq = a.freq,
						 .dwarf = a.call_graph == SAMPLER_CALL_GRAPH_DWARF,
						 .stack_size = a.stack_size,
						 .duration_s = g.duration_s,
						 .exec_cmd = a.exec_cmd };

		guest_opts_free(&g);
		return record_attach(&aa);
	}
	if (guest_opts_finish(&g) != 0)
		goto out;
	/* The output is opened before the guest starts: a bad path fails in a second, not
	 * after the run; it takes the recording's name (and an existing recording becomes .old)
	 * once the guest has started. */
	cli_catch_signals(); /* a Ctrl-C while the guest is set up: no file left half named */
	if (record_output_open(&out, a.output) != 0)
		goto out;
	fd = out.fd;
	err = recfile_writer_open(fd, &w);
	if (err) {
		cli_error("cannot write recording %s: %s", a.output, hvp_strerror(err));
		goto out;
	}

	sink = (struct sampler_sink){ .sample = sink_sample, .thread = sink_thread,
				      .process = sink_process, .user_stack = sink_user_stack,
				      .mapping = sink_mapping, .event = sink_event, .ctx = w };
	scfg = (struct sampler_config){ .sample_hz = (unsigned int)a.freq, .sink = &sink,
					.callchain_mode = a.mode, .marks = a.marks,
					.call_graph = a.call_graph,
					.stack_size = a.stack_size, .bare_exits = a.bare,
					.bench_phases = a.bench_phases,
					.mark_every_stay = a.mark_every_stay,
					.start = a.start, .start_event = a.start_event,
					.start_after_ns = a.start_after_ns };
	if (guest_start(&g, &scfg, STDOUT_FILENO, &gs) != 0)
		goto out;
	if (cli_signal_received()) {
		fprintf(stderr, "hvprof: interrupted before the guest ran: nothing recorded\n");
		status = EXIT_INTERRUPTED;
		goto out;
	}
	if (record_output_commit(&out) != 0)
		goto out;
	if (a.call_graph == SAMPLER_CALL_GRAPH_DWARF)
		snprintf(call_graph, sizeof(call_graph), "dwarf,%u", a.stack_size);
	else
		snprintf(call_graph, sizeof(call_graph), "fp");
	err = record_write_meta(w, &g, &gs, (unsigned int)a.freq, call_graph);
	err = err ?: write_sampling_from(w, &a, false, gs.sampler, NULL);
	if (!err)
		err = recfile_writer_flush(w);
	if (err) {
		cli_error("cannot write recording %s: %s", a.output, hvp_strerror(err));
		goto out;
	}

	cli_stop_on_signals(gs.vm);
	clock_gettime(CLOCK_MONOTONIC, &ts_run);
	err = vmm_run(gs.vm, &res);
	/* The handlers stay until the recording is closed: a second Ctrl-C while the counters
	 * and the END record are written must not kill hvprof and cut the file short. */
	if (err) {
		cli_error("cannot run the guest: %s", hvp_strerror(err));
		res.reason = HVP_END_ERROR;
		res.exit_status = -1;
	}
	fflush(stdout);
	status = cli_outcome(&res);

	sampler_get_counters(gs.sampler, &cnt);
	meta_err = write_sampling_from(w, &a, true, gs.sampler, &res);
	err = finish_recording(w, &gs, &res, &cnt, ns_between(&ts_start, &ts_run));
	w = NULL;
	err = meta_err ?: err;
	if (!err && fsync(fd) != 0 && errno != EINVAL)
		err = -errno;
	if (err) {
		cli_error("recording %s is incomplete: %s", a.output, hvp_strerror(err));
		status = EXIT_ERROR;
		goto out;
	}
	print_summary(&gs, &res, &cnt, &a);
out:
	if (w)
		if (recfile_writer_close(w)) { /* already failing: the first error is reported */ }
	/* the run never started, or its file could not take the name (its previous one put
	 * back): this run's file holds no more than a header (before the handlers go: a
	 * signal now must not leave it) */
	record_output_discard(&out);
	cli_stop_on_signals(NULL);
	if (fd >= 0)
		close(fd);
	guest_stop(&gs);
	guest_opts_free(&g);
	return status;
}
