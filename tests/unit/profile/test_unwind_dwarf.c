// SPDX-License-Identifier: MIT
// Unit tests of profile/unwind_dwarf.c on a real stack: this program is built without frame
// pointers (-O2 -fomit-frame-pointer, tests/unit/profile/meson.build); f3 copies its registers
// and the top of its stack as a USER_REGS record would, and the unwinder's callchain must equal
// the one glibc's backtrace() (libgcc's unwinder, an independent oracle) gives at the same point.
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "selfstack.h"
#include "unwind_dwarf.h"

#define STACK_MAX 65528

static struct {
	uint64_t regs[UNW_NREGS];
	uint8_t stack[STACK_MAX];
	uint32_t stack_len;
	void *bt[64];
	int n_bt;
} cap;

static volatile int sink;
static struct self_maps maps; /* this process's files and the end of its [stack] */

static __attribute__((noinline)) int f3(int x)
{
	uint64_t rsp;

	CAPTURE_REGS(cap.regs);
	rsp = cap.regs[UNW_REG_RSP];
	cap.stack_len = maps.stack_end - rsp < STACK_MAX ? (uint32_t)(maps.stack_end - rsp) : STACK_MAX;
	memcpy(cap.stack, (const void *)(uintptr_t)rsp, cap.stack_len);
	cap.n_bt = backtrace(cap.bt, 64);
	return x + sink;
}

static __attribute__((noinline)) int f2(int x)
{
	int r = f3(x + 1);

	sink += r; /* not a tail call: f2's frame stays */
	return r + 1;
}

static __attribute__((noinline)) int f1(int x)
{
	int r = f2(x * 2);

	sink += r;
	return r + 2;
}

static int test_matches_backtrace(void)
{
	struct unwinder *u;
	struct unw_space *sp;
	uint64_t ips[128];
	unsigned int n;
	enum unw_stop why;
	int same = 0, off = 0;

	ASSERT_TRUE(cap.n_bt >= 5); /* f3, f2, f1, main, libc's start */
	ASSERT_EQ_INT(unwinder_new(&u), 0);
	ASSERT_EQ_INT(unwinder_space(u, 1, maps.m, maps.n, &sp), 0);
	ASSERT_EQ_INT(unwinder_unwind(sp, cap.regs, cap.stack, cap.stack_len, ips, 128, &n, &why),
		      0);
	ASSERT_EQ_U64(ips[0], cap.regs[UNW_REG_RIP]);
	/*
	 * backtrace()'s first entry is its own return address in f3 (under ASan, its interceptor
	 * adds one more before it); f3's callers follow: find f2's return address, then compare.
	 */
	while (off < cap.n_bt && (uint64_t)(uintptr_t)cap.bt[off] != ips[1])
		off++;
	for (int i = 1; off + i - 1 < cap.n_bt && (unsigned int)i < n; i++) {
		if (ips[i] != (uint64_t)(uintptr_t)cap.bt[off + i - 1]) {
			fprintf(stderr, "frame %d: unwinder 0x%llx, backtrace %p\n", i,
				(unsigned long long)ips[i], cap.bt[off + i - 1]);
			break;
		}
		same++;
	}
	fprintf(stderr, "unwound %u frames (stop %s), backtrace %d from entry %d; %d callers "
		"agree\n", n, unw_stop_name(why), cap.n_bt, off, same);
	ASSERT_TRUE(off <= 2);  /* backtrace's own frame in f3, and an interceptor's */
	ASSERT_TRUE(same >= 4); /* f2, f1, main, __libc_start_call_main at least */
	ASSERT_EQ_INT(same, cap.n_bt - off);
	ASSERT_EQ_STR(unw_stop_name(why), "end");
	/* The same space again: cached, same answer. */
	ASSERT_EQ_INT(unwinder_space(u, 1, NULL, 0, &sp), 0);
	ASSERT_EQ_INT(unwinder_unwind(sp, cap.regs, cap.stack, cap.stack_len, ips, 3, &n, &why),
		      0);
	ASSERT_EQ_INT(n, 3);
	ASSERT_EQ_STR(unw_stop_name(why), "depth");
	ASSERT_EQ_U64(ips[2], (uint64_t)(uintptr_t)cap.bt[off + 1]);
	unwinder_free(u);
	return TEST_OK;
}

static int test_short_copy(void)
{
	struct unwinder *u;
	struct unw_space *sp;
	uint64_t ips[128];
	unsigned int n;
	enum unw_stop why;

	ASSERT_EQ_INT(unwinder_new(&u), 0);
	ASSERT_EQ_INT(unwinder_space(u, 7, maps.m, maps.n, &sp), 0);
	/* 8 bytes: at most the first caller if f3 keeps nothing on the stack; never more. */
	ASSERT_EQ_INT(unwinder_unwind(sp, cap.regs, cap.stack, 8, ips, 128, &n, &why), 0);
	ASSERT_TRUE(n >= 1 && n <= 2);
	ASSERT_EQ_STR(unw_stop_name(why), "outside_stack_copy");
	unwinder_free(u);
	return TEST_OK;
}

static int test_no_files(void)
{
	struct unwinder *u;
	struct unw_space *sp;
	uint64_t ips[4];
	unsigned int n;
	enum unw_stop why;

	ASSERT_EQ_INT(unwinder_new(&u), 0);
	ASSERT_EQ_INT(unwinder_space(u, 2, NULL, 0, &sp), 0);
	ASSERT_EQ_INT(unwinder_unwind(sp, cap.regs, cap.stack, cap.stack_len, ips, 4, &n, &why),
		      0);
	ASSERT_EQ_INT(n, 1);
	ASSERT_EQ_U64(ips[0], cap.regs[UNW_REG_RIP]);
	ASSERT_EQ_STR(unw_stop_name(why), "no_module");
	unwinder_free(u);
	return TEST_OK;
}

/* Hostile stacks: random bytes and registers end in bounded work with a reason, never a crash. */
static int test_garbage(void)
{
	static uint8_t junk[4096];
	struct unwinder *u;
	struct unw_space *sp;
	uint64_t regs[UNW_NREGS], ips[128];
	unsigned int n;
	enum unw_stop why;
	uint64_t x = 0x9e3779b97f4a7c15ull;

	ASSERT_EQ_INT(unwinder_new(&u), 0);
	ASSERT_EQ_INT(unwinder_space(u, 3, maps.m, maps.n, &sp), 0);
	for (int round = 0; round < 200; round++) {
		for (size_t i = 0; i < sizeof(junk); i += 8) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			/* half the words point into this process's text, like return addresses */
			uint64_t w = (x & 1) ? cap.regs[UNW_REG_RIP] + (x % 4096) - 2048 : x;

			memcpy(junk + i, &w, 8);
		}
		memcpy(regs, cap.regs, sizeof(regs));
		regs[UNW_REG_RSP] = 0x7ffd00000000ull + (x & 0xff8);
		ASSERT_EQ_INT(unwinder_unwind(sp, regs, junk, sizeof(junk), ips, 128, &n, &why), 0);
		ASSERT_TRUE(n >= 1 && n <= 128);
		ASSERT_TRUE((unsigned int)why < UNW_STOP_COUNT);
	}
	regs[UNW_REG_RIP] = 0;
	ASSERT_EQ_INT(unwinder_unwind(sp, regs, junk, sizeof(junk), ips, 128, &n, &why), 0);
	ASSERT_EQ_INT(n, 0);
	ASSERT_EQ_STR(unw_stop_name(why), "bad_regs");
	unwinder_free(u);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "unwind matches backtrace()", test_matches_backtrace },
	{ "unwind with a short stack copy", test_short_copy },
	{ "unwind with no files", test_no_files },
	{ "unwind garbage stacks", test_garbage },
};

int main(void)
{
	int rc;

	if (self_maps_read(&maps) || !maps.stack_end) {
		fprintf(stderr, "cannot read /proc/self/maps\n");
		return 1;
	}
	sink = f1(3) > 0;
	rc = test_run_all(tests, sizeof(tests) / sizeof(tests[0]));
	self_maps_free(&maps);
	return rc;
}
