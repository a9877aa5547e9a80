// SPDX-License-Identifier: MIT
// hvprof-paths: the ground truth of deferred user callchains. The same system call (getppid) is
// made by one leaf function reached through two distinct call paths:
//   main -> run_mix -> path_alpha -> alpha_middle -> make_the_call   (3 calls in 4)
//   main -> run_mix -> path_beta  -> beta_middle  -> make_the_call   (1 call in 4)
// so kernel samples of getppid split 75:25 between the paths. With `threads`, two threads
// named paths-alpha and paths-beta each use only their own path and, on a guest with more than
// one CPU, hop between CPUs (sched_setaffinity) so they migrate while in flight.
// Usage: hvprof-paths mix SECONDS | hvprof-paths threads SECONDS
// Prints: hvprof-truth: paths alpha=N beta=M   (system calls made through each path)
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* GCC 12 drops leaf frames even with -mno-omit-leaf-frame-pointer; this forces one. */
#define FORCE_FRAME() __asm__ volatile("" : : "r"(__builtin_frame_address(0)))

static volatile long sink;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) long make_the_call(void)
{
	long ret;

	FORCE_FRAME();
	__asm__ volatile("syscall" : "=a"(ret) : "0"((long)SYS_getppid) : "rcx", "r11", "memory");
	return ret;
}

__attribute__((noinline)) void alpha_middle(void)
{
	FORCE_FRAME();
	sink += make_the_call();
}

__attribute__((noinline)) void beta_middle(void)
{
	FORCE_FRAME();
	sink += make_the_call();
}

__attribute__((noinline)) void path_alpha(void)
{
	FORCE_FRAME();
	alpha_middle();
}

__attribute__((noinline)) void path_beta(void)
{
	FORCE_FRAME();
	beta_middle();
}

__attribute__((noinline)) void run_mix(double seconds, unsigned long *alpha, unsigned long *beta)
{
	double end = now_s() + seconds;

	FORCE_FRAME();
	while (now_s() < end) {
		for (int i = 0; i < 16; i++) {
			path_alpha();
			path_alpha();
			path_alpha();
			path_beta();
		}
		*alpha += 48;
		*beta += 16;
	}
}

struct worker {
	const char *name;
	void (*path)(void);
	double seconds;
	unsigned long calls;
};

static void hop_cpu(unsigned long round)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	if (ncpu < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET((int)(round % (unsigned long)ncpu), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

__attribute__((noinline)) void *run_worker(void *arg)
{
	struct worker *w = arg;
	double end = now_s() + w->seconds;
	unsigned long round = 0;

	FORCE_FRAME();
	prctl(PR_SET_NAME, w->name, 0, 0, 0);
	while (now_s() < end) {
		hop_cpu(round++);
		for (int i = 0; i < 32; i++)
			w->path();
		w->calls += 32;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = argc > 2 ? atof(argv[2]) : 3.0;
	unsigned long alpha = 0, beta = 0;

	if (argc < 2 || !strcmp(argv[1], "mix")) {
		printf("hvprof-paths: pid %d: mix for %.1f s\n", getpid(), seconds);
		fflush(stdout);
		run_mix(seconds, &alpha, &beta);
	} else if (!strcmp(argv[1], "threads")) {
		struct worker w[2] = { { "paths-alpha", path_alpha, seconds, 0 },
				       { "paths-beta", path_beta, seconds, 0 } };
		pthread_t t[2];

		printf("hvprof-paths: pid %d: two threads for %.1f s\n", getpid(), seconds);
		fflush(stdout);
		for (int i = 0; i < 2; i++)
			if (pthread_create(&t[i], NULL, run_worker, &w[i]) != 0)
				return 1;
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		alpha = w[0].calls;
		beta = w[1].calls;
	} else {
		fprintf(stderr, "usage: hvprof-paths mix|threads SECONDS\n");
		return 2;
	}
	printf("hvprof-truth: paths alpha=%lu beta=%lu\n", alpha, beta);
	return 0;
}
