// SPDX-License-Identifier: MIT
// hvprof-demo: the default image's workload, with a ground truth it measures itself.
//
// Phase 1 (CPU): burn_a() and burn_b() are called alternately with work in a 70:30 ratio; each
// call is timed with CLOCK_MONOTONIC (the vDSO: no system call, so timing costs nothing next to
// the ~10 ms calls; a thread-CPU-time clock would need a system call, which costs ~0.4 ms of
// emulated kernel code on PVM hosts and would skew the split) and the shares are printed as
//   hvprof-truth: cpu burn_a=P burn_b=Q
// Phase 2 (system calls): syscall_phase() -> ask_kernel_path_one() -> getppid() in a loop, so
// kernel samples of that phase have a distinctive user call path; it prints the call count.
// With HVPROF_DEMO_MIGRATE=1 in its environment, the syscall phase moves itself to the next
// online CPU after each 64 calls (sched_setaffinity), whatever its affinity before, and restores
// that affinity at the end: a thread that often returns to user mode on another CPU than the one
// it entered the kernel on (tests/kvm/test_smp.py).
// Usage: hvprof-demo [CPU_SECONDS [SYSCALL_SECONDS]]   (defaults 4 and 2)
//        hvprof-demo --work UNITS CALLS [SCALE_A]
// The first form bounds each phase by wall-clock time; the second by work: UNITS rounds of the CPU
// phase (burn_a then burn_b, ~27 ms on this project's machine) and CALLS system calls, however long they take, with burn_a's work per unit scaled by
// SCALE_A (default 1; 1.1 makes burn_a 10% slower, the rest unchanged). Fixed work is what a
// regression gate measures: a loaded host stretches a wall-clock phase's time, not its samples,
// and a slower function then shows in the samples as it would on a quiet host (docs/diff.md).
#define _GNU_SOURCE
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

/*
 * GCC 12 drops the frame of leaf functions even with -mno-omit-leaf-frame-pointer; taking the
 * frame address forces one, so frame-pointer unwinding sees every function of the ground truth.
 */
#define FORCE_FRAME() __asm__ volatile("" : : "r"(__builtin_frame_address(0)))

static double now_s(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline __attribute__((always_inline)) uint64_t spin(uint64_t n, uint64_t x)
{
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

__attribute__((noinline)) void burn_a(uint64_t n)
{
	FORCE_FRAME();
	sink = spin(n, sink);
}

__attribute__((noinline)) void burn_b(uint64_t n)
{
	FORCE_FRAME();
	sink = spin(n, sink ^ 1);
}

/* The system call is made right here (not through libc's frameless syscall()), so the user
 * stack of a kernel sample starts in this function. */
__attribute__((noinline)) long ask_kernel_path_one(void)
{
	long ret;

	FORCE_FRAME();
	__asm__ volatile("syscall" : "=a"(ret) : "0"((long)SYS_getppid) : "rcx", "r11", "memory");
	return ret;
}

/* Pins the calling thread to the online CPU after the one it runs on (round robin over 0..n-1). */
static void move_to_next_cpu(long n)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET((sched_getcpu() + 1) % n, &one);
	sched_setaffinity(0, sizeof(one), &one);
}

/* Wall-clock bound (seconds > 0) or work bound (max_calls, rounded up to 64); with @migrate,
 * a move to the next online CPU after each 64 calls. */
__attribute__((noinline)) void syscall_phase(double seconds, unsigned long max_calls,
					     unsigned long *calls, bool migrate)
{
	double end = now_s(CLOCK_MONOTONIC) + seconds;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t allowed;

	if (ncpu < 2 || ncpu > CPU_SETSIZE || sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
		migrate = false;
	while (seconds > 0 ? now_s(CLOCK_MONOTONIC) < end : *calls < max_calls) {
		for (int i = 0; i < 64; i++)
			sink += (uint64_t)ask_kernel_path_one();
		*calls += 64;
		if (migrate)
			move_to_next_cpu(ncpu);
	}
	if (migrate)
		sched_setaffinity(0, sizeof(allowed), &allowed);
}

/* Wall-clock bound (seconds > 0) or work bound (max_units); burn_a does scale_a times its work. */
__attribute__((noinline)) void cpu_phase(double seconds, unsigned long max_units, double scale_a,
					 double *t_a, double *t_b)
{
	const uint64_t unit = 2000000; /* about 2-3 ms of work per unit */
	double end = now_s(CLOCK_MONOTONIC) + seconds;
	unsigned long units = 0;

	while (seconds > 0 ? now_s(CLOCK_MONOTONIC) < end : units++ < max_units) {
		double t0 = now_s(CLOCK_MONOTONIC);

		burn_a((uint64_t)(7 * unit * scale_a));
		double t1 = now_s(CLOCK_MONOTONIC);

		burn_b(3 * unit);
		double t2 = now_s(CLOCK_MONOTONIC);

		*t_a += t1 - t0;
		*t_b += t2 - t1;
	}
}

int main(int argc, char **argv)
{
	bool work = argc > 1 && strcmp(argv[1], "--work") == 0;
	double cpu_s = 4.0, sys_s = 2.0, scale_a = 1.0;
	unsigned long units = 0, max_calls = 0, calls = 0;
	double t_a = 0, t_b = 0;

	if (work) {
		char *end_u = NULL, *end_c = NULL, *end_s = NULL;

		if (argc < 4 || argc > 5) {
			fprintf(stderr, "usage: hvprof-demo --work UNITS CALLS [SCALE_A]\n");
			return 2;
		}
		units = strtoul(argv[2], &end_u, 10);
		max_calls = strtoul(argv[3], &end_c, 10);
		if (argc == 5)
			scale_a = strtod(argv[4], &end_s);
		if (*end_u || *end_c || (end_s && *end_s) || !units || scale_a <= 0 || scale_a > 100) {
			fprintf(stderr, "hvprof-demo: --work wants UNITS >= 1, CALLS >= 0 and 0 < SCALE_A "
					"<= 100\n");
			return 2;
		}
		cpu_s = sys_s = 0;
		printf("hvprof-demo: pid %d: cpu phase %lu units (burn_a x%.2f), syscall phase %lu "
		       "calls\n", getpid(), units, scale_a, max_calls);
	} else {
		cpu_s = argc > 1 ? atof(argv[1]) : 4.0;
		sys_s = argc > 2 ? atof(argv[2]) : 2.0;
		printf("hvprof-demo: pid %d: cpu phase %.1f s, syscall phase %.1f s\n", getpid(), cpu_s,
		       sys_s);
	}
	fflush(stdout);
	cpu_phase(cpu_s, units, scale_a, &t_a, &t_b);
	if (t_a + t_b > 0)
		printf("hvprof-truth: cpu burn_a=%.2f burn_b=%.2f\n", 100 * t_a / (t_a + t_b),
		       100 * t_b / (t_a + t_b));
	fflush(stdout);
	if (!work || max_calls)
		syscall_phase(sys_s, max_calls, &calls, getenv("HVPROF_DEMO_MIGRATE") != NULL &&
								strcmp(getenv("HVPROF_DEMO_MIGRATE"), "1") == 0);
	printf("hvprof-truth: syscalls getppid=%lu\n", calls);
	return 0;
}
