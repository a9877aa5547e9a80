// SPDX-License-Identifier: MIT
// hvprof-bench: fixed amounts of work for the overhead benchmark (bench/overhead.py), each
// timed by the workload itself with the vDSO clock, so boot time and VM exits outside the
// measured region do not count.
// Usage: hvprof-bench cpu|syscall REPEATS
// Prints one line per repeat: hvprof-bench: KIND run I: S seconds
//
// hvprof-bench phases cpu|syscall ROUNDS [SLICE_MS]: the same work in slices of about SLICE_MS
// (default 250) ms, each round one slice in each of the phases 0 (no sampling), 1 (bare exits)
// and 2 (sampling), in an order that cycles through the six permutations; the phase is asked
// of hvprof before each slice with the bench-phase event (kind 16, value the phase) on its exit
// register (docs/guest-interface.md), which `record --bench-phases` acts on. One boot thus
// holds all three, side by side in time (bench/overhead.py --phases). Prints one line per
// slice: hvprof-bench: phases KIND round R phase P: S seconds
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

#define EXIT_REG_GPA 0xd0000000ul
#define EVENT_BENCH_PHASE 16u
#define MAX_ROUNDS 1000

static volatile uint32_t *exit_reg;

/* Ask hvprof for @phase: an MMIO write, so hvprof has applied it when the write returns. */
static void phase_set(unsigned int phase)
{
	*exit_reg = 0x48450000u | EVENT_BENCH_PHASE << 8 | phase;
}

__attribute__((noinline)) void phase_cpu(uint64_t n)
{
	uint64_t x = sink;

	FORCE_FRAME();
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	sink = x;
}

__attribute__((noinline)) void phase_syscall(uint64_t n)
{
	FORCE_FRAME();
	for (uint64_t i = 0; i < n; i++)
		sink += (uint64_t)bench_one_syscall();
}

static int phases(const char *kind, int rounds, int slice_ms)
{
	static const unsigned char order[6][3] = { { 0, 1, 2 }, { 1, 2, 0 }, { 2, 0, 1 },
						   { 2, 1, 0 }, { 1, 0, 2 }, { 0, 2, 1 } };
	int sys = !strcmp(kind, "syscall");
	void (*fn)(uint64_t) = sys ? phase_syscall : phase_cpu;
	uint64_t n = sys ? 16 : 1000000;
	static double secs[MAX_ROUNDS][3];
	void *page;
	double t;
	int fd;

	fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "hvprof-bench: open /dev/mem: %s\n", strerror(errno));
		return 1;
	}
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, EXIT_REG_GPA);
	close(fd);
	if (page == MAP_FAILED) {
		fprintf(stderr, "hvprof-bench: mmap /dev/mem at 0x%lx: %s\n", EXIT_REG_GPA,
			strerror(errno));
		return 1;
	}
	exit_reg = page;
	/* calibrate without sampling: double the work until a slice takes SLICE_MS */
	phase_set(0);
	for (;;) {
		t = now_s();
		fn(n);
		t = now_s() - t;
		if (t * 1000 >= slice_ms || n > (1ull << 40))
			break;
		n *= 2;
	}
	if (t > 0) /* else the clock did not move: keep the largest n tried */
		n = (uint64_t)((double)n * slice_ms / (t * 1000)) + 1;
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < 3; i++) {
			unsigned int p = order[r % 6][i];

			phase_set(p);
			t = now_s();
			fn(n);
			secs[r][p] = now_s() - t;
		}
	}
	phase_set(0);
	munmap(page, 4096);
	/* printed at the end: console output is I/O exits that would run into the next slice */
	for (int r = 0; r < rounds; r++)
		for (unsigned int p = 0; p < 3; p++)
			printf("hvprof-bench: phases %s round %d phase %u: %.6f seconds\n", kind, r,
			       p, secs[r][p]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "phases")) {
		int rounds = argc > 3 ? atoi(argv[3]) : 12, slice_ms = argc > 4 ? atoi(argv[4]) : 250;

		if (strcmp(argv[2], "cpu") && strcmp(argv[2], "syscall")) {
			fprintf(stderr, "hvprof-bench: phases cpu|syscall ROUNDS [SLICE_MS]\n");
			return 2;
		}
		rounds = rounds < 1 ? 1 : rounds > MAX_ROUNDS ? MAX_ROUNDS : rounds;
		return phases(argv[2], rounds, slice_ms < 1 ? 1 : slice_ms);
	}

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
