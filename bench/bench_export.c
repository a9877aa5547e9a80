// SPDX-License-Identifier: MIT
// Benchmark of report and the exporters on a recording: for each output, in a fresh child
// process, load the recording and write the output to a discarding sink; print samples/s of
// load + output (one core: everything here is single-threaded) and the child's peak RSS
// (getrusage ru_maxrss). Not a test: it prints figures and never fails on speed.
//
// usage: bench-export RECORDING [OUTPUT...]   (default outputs: report folded svg pprof
//                                              speedscope perf-script)
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hvprof/log.h>
#include <hvprof/profile.h>

static int discard(void *ctx, const void *buf, size_t len)
{
	*(uint64_t *)ctx += len;
	(void)buf;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run_one(const char *path, const char *what)
{
	struct profile_options po = { .size = sizeof(po) };
	struct profile_report_options ro = { .size = sizeof(ro), .children = 1 };
	uint64_t bytes = 0;
	struct profile_sink sink = { .write = discard, .ctx = &bytes };
	struct profile_stats st;
	struct profile *p;
	struct rusage ru;
	double t0, t1, t2;
	char errbuf[256] = "";
	int err;

	po.keep_samples = !strcmp(what, "perf-script");
	t0 = now_s();
	err = profile_load(path, &po, &p, errbuf, sizeof(errbuf));
	if (err) {
		fprintf(stderr, "bench-export: %s\n", errbuf);
		return 1;
	}
	t1 = now_s();
	if (!strcmp(what, "report"))
		err = profile_report(p, &ro, &sink);
	else if (!strcmp(what, "folded"))
		err = profile_folded(p, &sink);
	else if (!strcmp(what, "svg"))
		err = profile_flamegraph(p, NULL, &sink);
	else if (!strcmp(what, "pprof"))
		err = profile_pprof(p, &sink);
	else if (!strcmp(what, "speedscope"))
		err = profile_speedscope(p, &sink);
	else if (!strcmp(what, "perf-script"))
		err = profile_perf_script(p, &sink);
	else if (strcmp(what, "load"))
		err = -EINVAL;
	t2 = now_s();
	profile_get_stats(p, &st);
	profile_free(p);
	if (err) {
		fprintf(stderr, "bench-export: %s: %s\n", what, hvp_strerror(err));
		return 1;
	}
	getrusage(RUSAGE_SELF, &ru);
	printf("%-12s %9" PRIu64 " samples %6" PRIu64 " stacks  load %6.3f s  output %6.3f s  "
	       "%10.0f samples/s  peak RSS %7.1f MiB  (%" PRIu64 " bytes out)\n",
	       what, st.samples, st.stacks, t1 - t0, t2 - t1, (double)st.samples / (t2 - t0),
	       (double)ru.ru_maxrss / 1024.0, bytes);
	fflush(stdout); /* the child leaves with _exit(), which does not flush stdio */
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const defaults[] = { "load", "report", "folded", "svg", "pprof",
						"speedscope", "perf-script" };
	const char *const *what = defaults;
	int n = (int)(sizeof(defaults) / sizeof(defaults[0])), failed = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: bench-export RECORDING [OUTPUT...]\n");
		return 2;
	}
	if (argc > 2) {
		what = (const char *const *)argv + 2;
		n = argc - 2;
	}
	for (int i = 0; i < n; i++) {
		pid_t pid;
		int status;

		fflush(stdout);
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			_exit(run_one(argv[1], what[i]));
		if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			failed = 1;
	}
	return failed;
}
