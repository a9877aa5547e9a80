// SPDX-License-Identifier: MIT
// The containers of profile/: the growth of plain arrays (array_grow), interned strings
// (strpool), a uint64_t -> uint64_t hash map (u64map) and a table of uint64_t sequences with a
// count and a period each (seqtab).
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "containers_internal.h"

void *array_grow(void *arr, size_t *cap, size_t size, size_t first)
{
	size_t n;
	void *na;

	if (*cap > SIZE_MAX / 2)
		return NULL;
	n = *cap ? 2 * *cap : first;
	if (!size || !n || n > SIZE_MAX / size)
		return NULL;
	na = realloc(arr, n * size);
	if (na)
		*cap = n;
	return na;
}

/* ---- strpool: each distinct string is stored once and named by a dense id. */

static uint64_t hash_bytes(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return mix64(h);
}

static int strpool_grow(struct strpool *sp)
{
	size_t nslots = sp->nslots ? 2 * sp->nslots : 256;
	uint32_t *slots = calloc(nslots, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (uint32_t id = 0; id < sp->n; id++) {
		size_t i = sp->hashes[id] & (nslots - 1);

		while (slots[i])
			i = (i + 1) & (nslots - 1);
		slots[i] = id + 1;
	}
	free(sp->slots);
	sp->slots = slots;
	sp->nslots = nslots;
	return 0;
}

int strpool_intern(struct strpool *sp, const char *s, size_t len, uint32_t *id)
{
	uint64_t h = hash_bytes(s, len);
	size_t i;
	char *copy;
	int err;

	if ((sp->n + 1) * 2 > sp->nslots) {
		err = strpool_grow(sp);
		if (err)
			return err;
	}
	for (i = h & (sp->nslots - 1); sp->slots[i]; i = (i + 1) & (sp->nslots - 1)) {
		uint32_t cand = sp->slots[i] - 1;

		if (sp->hashes[cand] == h && strncmp(sp->strs[cand], s, len) == 0 &&
		    sp->strs[cand][len] == '\0') {
			*id = cand;
			return 0;
		}
	}
	if (sp->n == sp->cap) {
		uint32_t cap = sp->cap ? 2 * sp->cap : 256;
		char **strs = realloc(sp->strs, cap * sizeof(*strs));
		uint64_t *hashes;

		if (!strs)
			return -ENOMEM;
		sp->strs = strs;
		hashes = realloc(sp->hashes, cap * sizeof(*hashes));
		if (!hashes)
			return -ENOMEM;
		sp->hashes = hashes;
		sp->cap = cap;
	}
	copy = malloc(len + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, s, len);
	copy[len] = '\0';
	sp->strs[sp->n] = copy;
	sp->hashes[sp->n] = h;
	sp->slots[i] = sp->n + 1;
	*id = sp->n++;
	return 0;
}

void strpool_free(struct strpool *sp)
{
	for (uint32_t i = 0; i < sp->n; i++)
		free(sp->strs[i]);
	free(sp->strs);
	free(sp->hashes);
	free(sp->slots);
	memset(sp, 0, sizeof(*sp));
}

/* ---- u64map: linear probing, deletion by backward shift (no tombstones). */

static int u64map_grow(struct u64map *m)
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
		err = u64map_grow(m);
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

static int u64map_find(const struct u64map *m, uint64_t key, size_t *slot)
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

	if (u64map_find(m, key, &i))
		return -ENOENT;
	*val = m->vals[i];
	return 0;
}

void u64map_del(struct u64map *m, uint64_t key)
{
	size_t i, j, mask = m->cap - 1;

	if (u64map_find(m, key, &i))
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

/*
 * ---- seqtab: aggregation by distinct sequence (a stack key), so memory grows with distinct
 * stacks, not with samples.
 */

static uint64_t hash_seq(const uint64_t *key, uint32_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ len;

	for (uint32_t i = 0; i < len; i++)
		h = ((h << 5 | h >> 59) ^ key[i]) * 0x9e3779b97f4a7c15ULL;
	return mix64(h);
}

static int seqtab_grow(struct seqtab *st)
{
	size_t nslots = st->nslots ? 2 * st->nslots : 1024;
	uint32_t *slots = calloc(nslots, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t idx = 0; idx < st->n; idx++) {
		size_t i = st->e[idx].hash & (nslots - 1);

		while (slots[i])
			i = (i + 1) & (nslots - 1);
		slots[i] = (uint32_t)idx + 1;
	}
	free(st->slots);
	st->slots = slots;
	st->nslots = nslots;
	return 0;
}

int seqtab_add(struct seqtab *st, const uint64_t *key, uint32_t len, uint64_t count,
	       uint64_t period, size_t *idx)
{
	uint64_t h = hash_seq(key, len);
	struct seqtab_entry *e;
	size_t i;
	int err;

	if ((st->n + 1) * 2 > st->nslots) {
		if (st->n >= UINT32_MAX - 1)
			return -ENOMEM;
		err = seqtab_grow(st);
		if (err)
			return err;
	}
	for (i = h & (st->nslots - 1); st->slots[i]; i = (i + 1) & (st->nslots - 1)) {
		e = &st->e[st->slots[i] - 1];
		if (e->hash == h && e->key_len == len &&
		    memcmp(st->arena + e->key_off, key, len * sizeof(*key)) == 0) {
			e->count += count;
			e->period += period;
			if (idx)
				*idx = st->slots[i] - 1;
			return 0;
		}
	}
	if (st->n == st->cap) {
		struct seqtab_entry *ne = array_grow(st->e, &st->cap, sizeof(*ne), 512);

		if (!ne)
			return -ENOMEM;
		st->e = ne;
	}
	if (st->arena_len + len > st->arena_cap) {
		size_t cap = st->arena_cap ? 2 * st->arena_cap : 8192;
		uint64_t *na;

		while (cap < st->arena_len + len)
			cap *= 2;
		na = realloc(st->arena, cap * sizeof(*na));
		if (!na)
			return -ENOMEM;
		st->arena = na;
		st->arena_cap = cap;
	}
	memcpy(st->arena + st->arena_len, key, len * sizeof(*key));
	e = &st->e[st->n];
	e->key_off = st->arena_len;
	e->key_len = len;
	e->hash = h;
	e->count = count;
	e->period = period;
	st->arena_len += len;
	st->slots[i] = (uint32_t)st->n + 1;
	if (idx)
		*idx = st->n;
	st->n++;
	return 0;
}

void seqtab_free(struct seqtab *st)
{
	free(st->e);
	free(st->arena);
	free(st->slots);
	memset(st, 0, sizeof(*st));
}
