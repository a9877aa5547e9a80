/* SPDX-License-Identifier: MIT */
/*
 * Tiny table-driven test harness: each test is `int fn(void)` returning TEST_OK, TEST_FAIL or
 * TEST_SKIP; TEST_MAIN runs a table and exits 0 (all ok), 1 (a failure) or 77 (all skipped).
 */
#ifndef HVPROF_TEST_H
#define HVPROF_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define TEST_OK 0
#define TEST_FAIL 1
#define TEST_SKIP 77

#define ASSERT_TRUE(expr)                                                                    \
	do {                                                                                 \
		if (!(expr)) {                                                               \
			fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, \
				#expr);                                                      \
			return TEST_FAIL;                                                    \
		}                                                                            \
	} while (0)

#define ASSERT_EQ_INT(a, b)                                                                   \
	do {                                                                                  \
		long long a_ = (long long)(a), b_ = (long long)(b);                           \
		if (a_ != b_) {                                                               \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__,    \
				__LINE__, #a, #b, a_, b_);                                    \
			return TEST_FAIL;                                                     \
		}                                                                             \
	} while (0)

#define ASSERT_EQ_U64(a, b)                                                                   \
	do {                                                                                  \
		unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b); \
		if (a_ != b_) {                                                               \
			fprintf(stderr, "%s:%d: %s == %s failed: 0x%llx != 0x%llx\n",          \
				__FILE__, __LINE__, #a, #b, a_, b_);                          \
			return TEST_FAIL;                                                     \
		}                                                                             \
	} while (0)

#define ASSERT_EQ_STR(a, b)                                                                   \
	do {                                                                                  \
		const char *a_ = (a), *b_ = (b);                                              \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                      \
			fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n",          \
				__FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)",               \
				b_ ? b_ : "(null)");                                          \
			return TEST_FAIL;                                                     \
		}                                                                             \
	} while (0)

struct test_case {
	const char *name;
	int (*fn)(void);
};

static inline int test_run_all(const struct test_case *tests, size_t n)
{
	size_t failed = 0, skipped = 0;

	for (size_t i = 0; i < n; i++) {
		int r = tests[i].fn();

		printf("%s: %s\n", r == TEST_OK ? "ok" : r == TEST_SKIP ? "skip" : "FAIL",
		       tests[i].name);
		if (r == TEST_SKIP)
			skipped++;
		else if (r != TEST_OK)
			failed++;
	}
	if (failed)
		return 1;
	return skipped == n ? 77 : 0;
}

#define TEST_MAIN(table)                                                \
	int main(void)                                                  \
	{                                                               \
		return test_run_all((table), sizeof(table) / sizeof((table)[0])); \
	}

#endif /* HVPROF_TEST_H */
