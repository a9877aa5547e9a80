// SPDX-License-Identifier: MIT
// A tiny executable with two named functions, built by meson for the symbolization tests
// (static -no-pie and PIE variants, -fno-inline so both functions exist).
volatile int hvp_target_sink;

__attribute__((noinline)) void hvp_target_leaf(int n)
{
	for (int i = 0; i < n; i++)
		hvp_target_sink += i;
}

__attribute__((noinline)) void hvp_target_mid(int n)
{
	hvp_target_leaf(n);
	hvp_target_sink++;
}

int main(void)
{
	hvp_target_mid(10);
	return 0;
}
