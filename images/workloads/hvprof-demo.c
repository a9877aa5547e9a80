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
// Usage: hvprof-demo [CPU_SECONDS [SYSCALL_SECONDS]]   (defaults 4 and 2)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

__attribute__((noinline)) void syscall_phase(double seconds, unsigned long *calls)
{
	double end = now_s(CLOCK_MONOTONIC) + seconds;

	while (now_s(CLOCK_MONOTONIC) < end) {
		for (int i = 0; i < 64; i++)
			sink += (uint64_t)ask_kernel_path_one();
		*calls += 64;
	}
}

__attribute__((noinline)) void cpu_phase(double seconds, double *t_a, double *t_b)
{
	const uint64_t unit = 2000000; /* about 2-3 ms of work per unit */
	double end = now_s(CLOCK_MONOTONIC) + seconds;

	while (now_s(CLOCK_MONOTONIC) < end) {
		double t0 = now_s(CLOCK_MONOTONIC);

		burn_a(7 * unit);
		double t1 = now_s(CLOCK_MONOTONIC);

		burn_b(3 * unit);
		double t2 = now_s(CLOCK_MONOTONIC);

		*t_a += t1 - t0;
		*t_b += t2 - t1;
	}
}

int main(int argc, char **argv)
{
	double cpu_s = argc > 1 ? atof(argv[1]) : 4.0;
	double sys_s = argc > 2 ? atof(argv[2]) : 2.0;
	double t_a = 0, t_b = 0;
	unsigned long calls = 0;

	printf("hvprof-demo: pid %d: cpu phase %.1f s, syscall phase %.1f s\n", getpid(), cpu_s, sys_s);
	fflush(stdout);
	cpu_phase(cpu_s, &t_a, &t_b);
	if (t_a + t_b > 0)
		printf("hvprof-truth: cpu burn_a=%.2f burn_b=%.2f\n", 100 * t_a / (t_a + t_b),
		       100 * t_b / (t_a + t_b));
	fflush(stdout);
	syscall_phase(sys_s, &calls);
	printf("hvprof-truth: syscalls getppid=%lu\n", calls);
	return 0;
}
