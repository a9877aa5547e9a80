// SPDX-License-Identifier: MIT
// hvprof-bench: fixed amounts of work for the overhead benchmark (bench/overhead.py), each
// timed by the workload itself with the vDSO clock, so boot time and VM exits outside the
// measured region do not count.
// Usage: hvprof-bench cpu|syscall REPEATS
// Prints one line per repeat: hvprof-bench: KIND run I: S seconds
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FORCE_FRAME() __asm__ volatile("" : : "r"(__builtin_frame_address(0)))

static volatile uint64_t sink;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void bench_cpu(void)
{
	uint64_t x = sink;

	FORCE_FRAME();
	for (uint64_t i = 0; i < 1500000000ull; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	sink = x;
}

__attribute__((noinline)) long bench_one_syscall(void)
{
	long ret;

	FORCE_FRAME();
	__asm__ volatile("syscall" : "=a"(ret) : "0"((long)SYS_getppid) : "rcx", "r11", "memory");
	return ret;
}

__attribute__((noinline)) void bench_syscall(void)
{
	FORCE_FRAME();
	for (int i = 0; i < 4000; i++)
		sink += (uint64_t)bench_one_syscall();
}

int main(int argc, char **argv)
{
	int repeats = argc > 2 ? atoi(argv[2]) : 3;
	void (*fn)(void) = argc > 1 && !strcmp(argv[1], "syscall") ? bench_syscall : bench_cpu;

	for (int i = 0; i < repeats; i++) {
		double t0 = now_s();

		fn();
		printf("hvprof-bench: %s run %d: %.6f seconds\n", argc > 1 ? argv[1] : "cpu", i,
		       now_s() - t0);
		fflush(stdout);
	}
	return 0;
}
