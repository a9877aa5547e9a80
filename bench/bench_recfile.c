// SPDX-License-Identifier: MIT
// Microbenchmark of the recording writer: ns per record appended from 1 and 2 threads.
//
// Usage: bench-recfile [RECORDS_PER_THREAD] [DIR]
// Writes to an unlinked file in DIR (default $TMPDIR or /tmp: the page cache, as a recording
// on a local disk). Two runs per case:
//   paced     each thread appends at a fixed rate (20 000/s for sample, 4 000/s for sample+8k;
//             a vCPU samples at 1 000/s), the way vCPU threads do: "call" is the mean time
//             inside the append call (what a vCPU thread pays, the sampler's sample_ns_write;
//             two CLOCK_MONOTONIC reads included), "other cpu" the CPU time per record of the
//             process's other threads (the writer's own thread, where there is one), the
//             final close included;
//   flat out  each thread appends as fast as it can: "wall" is the throughput limit, "cpu"
//             the appending threads' CPU time per record (CLOCK_THREAD_CPUTIME_ID).
// Cases:
//   sample    a kernel SAMPLE with 12 kernel frames (108 + 96 bytes on disk): the deferred
//             mode's record per sample;
//   sample+8k a user SAMPLE with 4 user frames and its USER_REGS holding 8192 bytes of stack
//             (--call-graph dwarf, the default): the largest record per sample.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hvprof/profile.h>

struct bench_arg {
	struct recfile_writer *w;
	const struct hvp_sample *s;
	const struct hvp_user_regs *r;
	long n;
	long rate;      /* records per second, 0: flat out */
	int err;
	double cpu_ns;  /* this thread's CPU time */
	double call_ns; /* time inside the append calls */
};

static double now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *bench_thread(void *p)
{
	struct bench_arg *a = p;
	struct hvp_sample s = *a->s;
	double t0 = now_ns(CLOCK_THREAD_CPUTIME_ID), next = now_ns(CLOCK_MONOTONIC);
	const long batch = 20;

	for (long i = 0; i < a->n && !a->err; i++) {
		double c0 = a->rate ? now_ns(CLOCK_MONOTONIC) : 0;

		s.time_ns = (uint64_t)i;
		a->err = recfile_write_sample_regs(a->w, &s, a->r);
		if (!a->rate)
			continue;
		a->call_ns += now_ns(CLOCK_MONOTONIC) - c0;
		if (i % batch == batch - 1) {
			struct timespec ts;

			next += 1e9 * (double)batch / (double)a->rate;
			ts.tv_sec = (time_t)(next / 1e9);
			ts.tv_nsec = (long)(next - (double)ts.tv_sec * 1e9);
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
	}
	a->cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
	return NULL;
}

static int bench_case(const char *dir, const char *name, int threads, long n, long rate,
		      const struct hvp_sample *s, const struct hvp_user_regs *r)
{
	struct bench_arg a[2];
	pthread_t th[2];
	struct recfile_writer *w;
	double wall0, wall, cpu = 0, cpu0, pcpu0, call = 0, records = (double)(n * threads);
	int fd, err;

	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "bench-recfile: O_TMPFILE in %s: %s\n", dir, strerror(errno));
		return 1;
	}
	err = recfile_writer_open(fd, &w);
	if (err) {
		fprintf(stderr, "bench-recfile: recfile_writer_open: %s\n", strerror(-err));
		close(fd);
		return 1;
	}
	wall0 = now_ns(CLOCK_MONOTONIC);
	pcpu0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	for (int i = 0; i < threads; i++) {
		a[i] = (struct bench_arg){ .w = w, .s = s, .r = r, .n = n, .rate = rate };
		if (pthread_create(&th[i], NULL, bench_thread, &a[i])) {
			fprintf(stderr, "bench-recfile: pthread_create failed\n");
			return 1;
		}
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		err = err ? err : a[i].err;
		cpu += a[i].cpu_ns;
		call += a[i].call_ns;
	}
	cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	err = recfile_writer_close(w) ?: err;
	cpu += now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	wall = now_ns(CLOCK_MONOTONIC) - wall0;
	if (rate)
		printf("%-10s %d thread%s paced %6ld/s: %6.0f ns call/record %6.0f ns other cpu/record "
		       "%6.1f MB\n",
		       name, threads, threads > 1 ? "s" : " ", rate, call / records,
		       (now_ns(CLOCK_PROCESS_CPUTIME_ID) - pcpu0 - cpu) / records,
		       (double)lseek(fd, 0, SEEK_END) / 1e6);
	else
		printf("%-10s %d thread%s flat out:      %6.0f ns wall/record %6.0f ns cpu/record "
		       "(appending threads) %6.1f MB\n",
		       name, threads, threads > 1 ? "s" : " ", wall / records, cpu / records,
		       (double)lseek(fd, 0, SEEK_END) / 1e6);
	close(fd);
	if (err) {
		fprintf(stderr, "bench-recfile: %s: %s\n", name, strerror(-err));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static uint8_t stack[8192];
	static struct hvp_sample ks, us;
	struct hvp_user_regs r = { .follows = HVP_USER_REGS_AFTER_SAMPLE, .stack = stack,
				   .stack_len = sizeof(stack), .stack_size = sizeof(stack) };
	long n = argc > 1 ? atol(argv[1]) : 200000;
	const char *dir = argc > 2 ? argv[2] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	int err = 0;

	if (n <= 0)
		n = 200000;
	for (size_t i = 0; i < sizeof(stack); i++)
		stack[i] = (uint8_t)(i * 7);
	ks.cpl = 0, ks.rip = 0xffffffff81000000, ks.pid = 100, ks.tgid = 100, ks.period = 1000000;
	ks.n_kernel = 12, ks.user_stop = HVP_WALK_DEFERRED, ks.cookie = 1;
	for (unsigned int i = 0; i < ks.n_kernel; i++)
		ks.kernel_ips[i] = 0xffffffff81000000 + 0x100 * i;
	us = ks;
	us.cpl = 3, us.flags = HVP_SAMPLE_USER, us.rip = 0x401000, us.n_kernel = 0, us.n_user = 4;
	us.user_stop = HVP_WALK_END, us.cookie = 0;
	for (unsigned int i = 0; i < us.n_user; i++)
		us.user_ips[i] = 0x401000 + 0x40 * i;
	for (unsigned int i = 0; i < HVP_USER_NREGS; i++)
		r.regs[i] = 0x7ffc0000 + i;
	r.pid = 100;

	for (int threads = 1; threads <= 2; threads++) {
		err |= bench_case(dir, "sample", threads, n / 5, 20000, &ks, NULL);
		err |= bench_case(dir, "sample+8k", threads, n / 25, 4000, &us, &r);
	}
	for (int threads = 1; threads <= 2; threads++) {
		err |= bench_case(dir, "sample", threads, n, 0, &ks, NULL);
		err |= bench_case(dir, "sample+8k", threads, n / 10, 0, &us, &r);
	}
	return err;
}
