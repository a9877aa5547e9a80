// SPDX-License-Identifier: MIT
// The clock of the sampler's stage counters (sampler_internal.h, struct stage_clock): the TSC
// where the host kernel keeps its own time with it, its rate measured against CLOCK_MONOTONIC
// once, when the sampler is made.
#include <stdio.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "sampler_internal.h"

#define CALIBRATE_NS 1000000L /* the TSC is compared with CLOCK_MONOTONIC over this long */
#define CLOCKSOURCE "/sys/devices/system/clocksource/clocksource0/current_clocksource"

/* Does the host kernel keep time with the TSC? It does only with an invariant TSC that it found
 * synchronized across CPUs (else it marks the TSC unstable and chooses another clocksource). */
static bool host_uses_tsc(void)
{
#if defined(__x86_64__)
	unsigned int eax, ebx, ecx, edx;
	char name[32] = "";
	FILE *f;

	/* CPUID 8000_0007h EDX bit 8: invariant TSC (Intel SDM vol. 3B 18.17.1; AMD APM vol. 3) */
	if (!__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 8)))
		return false;
	f = fopen(CLOCKSOURCE, "re");
	if (!f)
		return false;
	if (!fgets(name, sizeof(name), f))
		name[0] = '\0';
	fclose(f);
	return strcmp(name, "tsc\n") == 0;
#else
	return false;
#endif
}

void stage_clock_init(struct stage_clock *c)
{
	const struct timespec nap = { 0, CALIBRATE_NS };
	uint64_t n0, n1, k0, k1;
	int naps = 0;

	c->tsc = false;
	c->mult = 0;
	if (!host_uses_tsc())
		return;
	n0 = vmm_now_ns();
	k0 = stage_tsc();
	do { /* a nap a signal cut short is taken again */
		nanosleep(&nap, NULL);
		k1 = stage_tsc();
		n1 = vmm_now_ns();
	} while (n1 - n0 < CALIBRATE_NS && ++naps < 10);
	/* a TSC that did not move, or ran below 1 MHz: not a clock to time stages with */
	if (k1 <= k0 || n1 <= n0 || (k1 - k0) < (n1 - n0) / 1000)
		return;
	/* ns per tick in 32.32 fixed point: n1 - n0 < 2^32 ns (the naps are 1 ms) keeps the shift
	 * inside 64 bits */
	if (n1 - n0 >= (1ull << 32))
		return;
	c->mult = ((n1 - n0) << 32) / (k1 - k0);
	c->tsc = c->mult != 0;
}
