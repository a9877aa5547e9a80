// SPDX-License-Identifier: MIT
// hvprof-distro: the Debian image's workload, built as distributions build programs (PIE,
// dynamically linked, -O2 without frame pointers; images/debian/build.sh), with its hot code in
// a shared library (libhvdistro.so.1) and a callback from libc back into the program:
//   main -> checksum_phase -> hvd_checksum -> mix_block                 (libhvdistro)
//   main -> sort_phase -> hvd_sort_records -> qsort -> ... -> by_name   (libhvdistro, libc, here)
// The two phases alternate in units whose work is 60:40; each unit is timed with
// CLOCK_MONOTONIC (the vDSO: no system call) and the measured shares are printed as
//   hvprof-truth: distro checksum=P sort=Q
// with the number of callback calls and a check that the sort worked:
//   hvprof-truth: distro compares=N unsorted=0
// Usage: hvprof-distro [SECONDS]   (default 4)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hvdistro.h"

#define BUF_BYTES (256u << 10)
#define N_RECORDS 4096

static unsigned long compares;
static volatile uint64_t sink;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t next_rand(uint64_t *state)
{
	*state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
	return *state >> 11;
}

/* The qsort callback: libc calls back into the program. */
static int by_name(const void *a, const void *b)
{
	const struct hvd_record *ra = a, *rb = b;
	int c = memcmp(ra->name, rb->name, sizeof(ra->name));

	compares++;
	return c ? c : (ra->key > rb->key) - (ra->key < rb->key);
}

static __attribute__((noinline)) void checksum_phase(const uint8_t *buf, unsigned int rounds)
{
	for (unsigned int i = 0; i < rounds; i++)
		sink += hvd_checksum(buf, BUF_BYTES);
}

static __attribute__((noinline)) size_t sort_phase(struct hvd_record *recs, uint64_t *state)
{
	for (size_t i = 0; i < N_RECORDS; i++) {
		uint64_t r = next_rand(state);

		memset(recs[i].name, 'a', sizeof(recs[i].name));
		snprintf(recs[i].name + 8, 16, "%015llx", (unsigned long long)(r & 0xfffff));
		recs[i].key = r;
	}
	return hvd_sort_records(recs, N_RECORDS, by_name);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 4.0;
	double t_sum = 0, t_sort = 0, end;
	struct hvd_record *recs = calloc(N_RECORDS, sizeof(*recs));
	uint8_t *buf = malloc(BUF_BYTES);
	uint64_t state = 42;
	size_t unsorted = 0;

	if (!recs || !buf) {
		fprintf(stderr, "hvprof-distro: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < BUF_BYTES; i++)
		buf[i] = (uint8_t)next_rand(&state);
	printf("hvprof-distro: pid %d: %.1f s of checksum and sort\n", getpid(), seconds);
	fflush(stdout);
	end = now_s() + seconds;
	while (now_s() < end) {
		double t0 = now_s();

		checksum_phase(buf, 3);
		double t1 = now_s();

		unsorted += sort_phase(recs, &state);
		double t2 = now_s();

		t_sum += t1 - t0;
		t_sort += t2 - t1;
	}
	if (t_sum + t_sort > 0)
		printf("hvprof-truth: distro checksum=%.2f sort=%.2f\n", 100 * t_sum / (t_sum + t_sort),
		       100 * t_sort / (t_sum + t_sort));
	printf("hvprof-truth: distro compares=%lu unsorted=%zu\n", compares, unsorted);
	free(recs);
	free(buf);
	return unsorted != 0;
}
