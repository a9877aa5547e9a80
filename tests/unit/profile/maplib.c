// SPDX-License-Identifier: MIT
// A tiny shared object for the mapping symbolization tests (test_mapsym.c): one exported
// function, linked at a non-zero base so its PT_LOADs have file offsets unequal to vaddrs.
volatile int hvp_maplib_sink;

__attribute__((noinline)) void hvp_maplib_work(int n)
{
	for (int i = 0; i < n; i++)
		hvp_maplib_sink += i;
}
