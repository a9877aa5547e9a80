// SPDX-License-Identifier: MIT
// A user's own static benchmark for the `--add` test: two functions with a 3:1 work ratio.
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define FORCE_FRAME() __asm__ volatile("" : : "r"(__builtin_frame_address(0)))

static volatile uint64_t acc;

__attribute__((noinline)) void mybench_parse(uint64_t n)
{
	FORCE_FRAME();
	for (uint64_t i = 0; i < n; i++)
		acc = acc * 2862933555777941757ULL + 3037000493ULL;
}

__attribute__((noinline)) void mybench_render(uint64_t n)
{
	FORCE_FRAME();
	for (uint64_t i = 0; i < n; i++)
		acc = acc * 3202034522624059733ULL + 7ULL;
}

int main(void)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		mybench_parse(3000000);
		mybench_render(1000000);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 1500000000L);
	printf("mybench: done %llu\n", (unsigned long long)acc);
	return 0;
}
