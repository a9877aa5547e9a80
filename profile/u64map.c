// SPDX-License-Identifier: MIT
// uint64_t -> uint64_t hash map: linear probing, deletion by backward shift (no tombstones).
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

static int grow(struct u64map *m)
{
	struct u64map nm = { 0 };

	nm.cap = m->cap ? 2 * m->cap : 64;
	nm.keys = malloc(nm.cap * sizeof(*nm.keys));
	nm.vals = malloc(nm.cap * sizeof(*nm.vals));
	nm.used = calloc(nm.cap, 1);
	if (!nm.keys || !nm.vals || !nm.used) {
		u64map_free(&nm);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->used[i])
			continue;
		for (j = mix64(m->keys[i]) & (nm.cap - 1); nm.used[j]; j = (j + 1) & (nm.cap - 1))
			;
		nm.used[j] = 1;
		nm.keys[j] = m->keys[i];
		nm.vals[j] = m->vals[i];
	}
	nm.n = m->n;
	u64map_free(m);
	*m = nm;
	return 0;
}

int u64map_put(struct u64map *m, uint64_t key, uint64_t val)
{
	size_t i;
	int err;

	if ((m->n + 1) * 2 > m->cap) {
		err = grow(m);
		if (err)
			return err;
	}
	for (i = mix64(key) & (m->cap - 1); m->used[i]; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key) {
			m->vals[i] = val;
			return 0;
		}
	}
	m->used[i] = 1;
	m->keys[i] = key;
	m->vals[i] = val;
	m->n++;
	return 0;
}

static int find(const struct u64map *m, uint64_t key, size_t *slot)
{
	if (!m->cap)
		return -ENOENT;
	for (size_t i = mix64(key) & (m->cap - 1); m->used[i]; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key) {
			*slot = i;
			return 0;
		}
	}
	return -ENOENT;
}

int u64map_get(const struct u64map *m, uint64_t key, uint64_t *val)
{
	size_t i;

	if (find(m, key, &i))
		return -ENOENT;
	*val = m->vals[i];
	return 0;
}

void u64map_del(struct u64map *m, uint64_t key)
{
	size_t i, j, mask = m->cap - 1;

	if (find(m, key, &i))
		return;
	m->used[i] = 0;
	m->n--;
	/* Move back every later entry of the run whose home slot is not in (i, j]. */
	for (j = (i + 1) & mask; m->used[j]; j = (j + 1) & mask) {
		size_t home = mix64(m->keys[j]) & mask;

		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			m->used[i] = 1;
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			m->used[j] = 0;
			i = j;
		}
	}
}

void u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	memset(m, 0, sizeof(*m));
}
