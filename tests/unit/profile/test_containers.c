// SPDX-License-Identifier: MIT
// Unit tests of profile/'s containers (containers.c): array growth, strpool interning, u64map
// put/get/delete (backward shift over wrapped runs), seqtab aggregation; each grown past its
// first size.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "containers_internal.h"
#include "test.h"

struct intern_case {
	const char *s;
	size_t len;
	uint32_t id; /* expected, in interning order */
	const char *stored;
};

/* Ids are dense in order of first interning; a length cuts the string; prefixes are distinct. */
static const struct intern_case intern_cases[] = {
	{ "abc", 3, 0, "abc" },
	{ "ab", 2, 1, "ab" },
	{ "abc", 3, 0, "abc" },
	{ "abcdef", 2, 1, "ab" },
	{ "", 0, 2, "" },
	{ "abd", 3, 3, "abd" },
	{ "ab;", 3, 4, "ab;" },
	{ "", 0, 2, "" },
};

static int test_strpool(void)
{
	struct strpool sp = { 0 };
	char buf[16];
	uint32_t id;

	for (size_t i = 0; i < sizeof(intern_cases) / sizeof(intern_cases[0]); i++) {
		const struct intern_case *c = &intern_cases[i];

		ASSERT_EQ_INT(strpool_intern(&sp, c->s, c->len, &id), 0);
		ASSERT_EQ_INT(id, c->id);
		ASSERT_EQ_STR(strpool_get(&sp, id), c->stored);
	}
	ASSERT_EQ_INT(sp.n, 5);
	/* Past the first 256 slots and 256 strings: earlier ids and strings stay. */
	for (int i = 0; i < 2000; i++) {
		snprintf(buf, sizeof(buf), "s%d", i);
		ASSERT_EQ_INT(strpool_intern(&sp, buf, strlen(buf), &id), 0);
		ASSERT_EQ_INT(id, 5 + i);
	}
	ASSERT_EQ_INT(strpool_intern(&sp, "ab", 2, &id), 0);
	ASSERT_EQ_INT(id, 1);
	ASSERT_EQ_STR(strpool_get(&sp, 5 + 1999), "s1999");
	strpool_free(&sp);
	ASSERT_EQ_INT(sp.n, 0);
	ASSERT_EQ_INT(strpool_intern(&sp, "again", 5, &id), 0); /* usable after free */
	ASSERT_EQ_INT(id, 0);
	strpool_free(&sp);
	return TEST_OK;
}

static int test_u64map(void)
{
	struct u64map m = { 0 };
	uint64_t v = 42;
	const uint64_t n = 5000;

	ASSERT_EQ_INT(u64map_get(&m, 1, &v), -ENOENT); /* empty map: no table yet */
	ASSERT_EQ_U64(v, 42);
	u64map_del(&m, 1);
	ASSERT_EQ_INT(u64map_put(&m, 0, 7), 0); /* key 0 and UINT64_MAX are ordinary keys */
	ASSERT_EQ_INT(u64map_put(&m, UINT64_MAX, 8), 0);
	ASSERT_EQ_INT(u64map_put(&m, 0, 9), 0); /* replaces */
	ASSERT_EQ_INT(u64map_get(&m, 0, &v), 0);
	ASSERT_EQ_U64(v, 9);
	ASSERT_EQ_INT(u64map_get(&m, UINT64_MAX, &v), 0);
	ASSERT_EQ_U64(v, 8);
	ASSERT_EQ_INT(m.n, 2);
	u64map_free(&m);
	/* Many keys, then every third deleted: the runs they were in must still be found. */
	for (uint64_t k = 1; k <= n; k++)
		ASSERT_EQ_INT(u64map_put(&m, k * 0x10001, k), 0);
	for (uint64_t k = 1; k <= n; k += 3)
		u64map_del(&m, k * 0x10001);
	u64map_del(&m, 0x10001); /* already gone: no change */
	ASSERT_EQ_INT(m.n, n - (n + 2) / 3);
	for (uint64_t k = 1; k <= n; k++) {
		int err = u64map_get(&m, k * 0x10001, &v);

		if (k % 3 == 1) {
			ASSERT_EQ_INT(err, -ENOENT);
			continue;
		}
		ASSERT_EQ_INT(err, 0);
		ASSERT_EQ_U64(v, k);
	}
	u64map_free(&m);
	return TEST_OK;
}

/*
 * Backward-shift deletion in a table small enough to fill by hand: every key of one run,
 * including runs that wrap from the last slot to the first, is found after any one delete.
 */
static int test_u64map_wrap(void)
{
	uint64_t keys[24], v;
	size_t nk = 0;

	/* Keys whose home is one of the last two slots of a 64-slot table: their runs wrap. */
	for (uint64_t k = 1; nk < 24; k++)
		if ((mix64(k) & 63) >= 62)
			keys[nk++] = k;
	for (size_t del = 0; del < nk; del++) {
		struct u64map m = { 0 };

		for (size_t i = 0; i < nk; i++)
			ASSERT_EQ_INT(u64map_put(&m, keys[i], i), 0);
		ASSERT_EQ_INT(m.cap, 64); /* 24 keys: no growth, so the runs really wrap */
		u64map_del(&m, keys[del]);
		for (size_t i = 0; i < nk; i++) {
			if (i == del) {
				ASSERT_EQ_INT(u64map_get(&m, keys[i], &v), -ENOENT);
				continue;
			}
			ASSERT_EQ_INT(u64map_get(&m, keys[i], &v), 0);
			ASSERT_EQ_U64(v, i);
		}
		u64map_free(&m);
	}
	return TEST_OK;
}

struct seq_case {
	uint64_t key[3];
	uint32_t len;
	uint64_t count, period;
	size_t idx; /* expected entry */
};

/* Entries aggregate by (values, length): [1, 2] and [1, 2, 0] differ, the empty key is one. */
static const struct seq_case seq_cases[] = {
	{ { 1, 2 }, 2, 1, 100, 0 },
	{ { 1, 2, 0 }, 3, 1, 10, 1 },
	{ { 1, 2 }, 2, 2, 50, 0 },
	{ { 0 }, 0, 1, 1, 2 },
	{ { 2, 1 }, 2, 1, 0, 3 },
	{ { 0 }, 0, 4, 0, 2 },
};

static int test_seqtab(void)
{
	struct seqtab st = { 0 };
	uint64_t key[40];
	uint32_t len;
	size_t idx;

	for (size_t i = 0; i < sizeof(seq_cases) / sizeof(seq_cases[0]); i++) {
		const struct seq_case *c = &seq_cases[i];

		ASSERT_EQ_INT(seqtab_add(&st, c->key, c->len, c->count, c->period, &idx), 0);
		ASSERT_EQ_INT(idx, c->idx);
	}
	ASSERT_EQ_INT(st.n, 4);
	ASSERT_EQ_U64(st.e[0].count, 3);
	ASSERT_EQ_U64(st.e[0].period, 150);
	ASSERT_EQ_U64(st.e[2].count, 5);
	ASSERT_EQ_U64(seqtab_key(&st, 1, &len)[2], 0);
	ASSERT_EQ_INT(len, 3);
	/* Past the first 1024 slots and 8192 arena values: keys and sums survive the growth. */
	for (uint64_t i = 0; i < 3000; i++) {
		for (uint32_t j = 0; j < 40; j++)
			key[j] = i * 40 + j;
		ASSERT_EQ_INT(seqtab_add(&st, key, (uint32_t)(i % 40), 1, i, NULL), 0);
	}
	for (uint64_t i = 0; i < 3000; i++) {
		const uint64_t *k;

		for (uint32_t j = 0; j < 40; j++)
			key[j] = i * 40 + j;
		ASSERT_EQ_INT(seqtab_add(&st, key, (uint32_t)(i % 40), 1, 0, &idx), 0);
		k = seqtab_key(&st, idx, &len);
		ASSERT_EQ_INT(len, i % 40);
		ASSERT_TRUE(len == 0 || (k[0] == i * 40 && k[len - 1] == i * 40 + len - 1));
		/* i % 40 == 0 is the empty key: entry 2 (5 from the cases), 75 adds, and ours */
		ASSERT_EQ_U64(st.e[idx].count, len ? 2 : 5 + 75 + i / 40 + 1);
	}
	seqtab_free(&st);
	ASSERT_EQ_INT(st.n, 0);
	return TEST_OK;
}

/* array_grow: @first, then doubling; a size that would overflow leaves the array as it was. */
static int test_array_grow(void)
{
	size_t cap = 0, big = SIZE_MAX / 2 + 1;
	uint64_t *a = NULL, *na;

	a = array_grow(a, &cap, sizeof(*a), 16);
	ASSERT_TRUE(a);
	ASSERT_EQ_INT(cap, 16);
	a[15] = 42;
	na = array_grow(a, &cap, sizeof(*a), 16);
	ASSERT_TRUE(na);
	a = na;
	ASSERT_EQ_INT(cap, 32);
	ASSERT_EQ_U64(a[15], 42); /* contents kept */
	/* Neither reaches malloc: 2 * big does not fit, then 2 * big * 8 does not. */
	ASSERT_TRUE(!array_grow(a, &big, 1, 16));
	ASSERT_EQ_U64(big, SIZE_MAX / 2 + 1);
	big = SIZE_MAX / 16 + 1;
	ASSERT_TRUE(!array_grow(a, &big, sizeof(*a), 16));
	ASSERT_EQ_U64(big, SIZE_MAX / 16 + 1);
	ASSERT_EQ_U64(a[15], 42);   /* still the caller's */
	free(a);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "array_grow: first size, doubling, overflow", test_array_grow },
	{ "strpool: dense ids, lengths, growth", test_strpool },
	{ "u64map: put, get, delete, growth", test_u64map },
	{ "u64map: delete in runs that wrap", test_u64map_wrap },
	{ "seqtab: aggregation by sequence, growth", test_seqtab },
};

TEST_MAIN(tests)
