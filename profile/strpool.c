// SPDX-License-Identifier: MIT
// Interned strings: each distinct string is stored once and named by a dense id.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

static uint64_t hash_bytes(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return mix64(h);
}

static int grow_slots(struct strpool *sp)
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
		err = grow_slots(sp);
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
