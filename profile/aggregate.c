// SPDX-License-Identifier: MIT
// Aggregation by distinct stack: a hash table of uint64_t sequences with a count and a period
// each, so memory grows with distinct stacks, not with samples.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

static uint64_t hash_seq(const uint64_t *key, uint32_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ len;

	for (uint32_t i = 0; i < len; i++)
		h = ((h << 5 | h >> 59) ^ key[i]) * 0x9e3779b97f4a7c15ULL;
	return mix64(h);
}

static int grow_slots(struct seqtab *st)
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
		err = grow_slots(st);
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
		size_t cap = st->cap ? 2 * st->cap : 512;
		struct seqtab_entry *ne = realloc(st->e, cap * sizeof(*ne));

		if (!ne)
			return -ENOMEM;
		st->e = ne;
		st->cap = cap;
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
