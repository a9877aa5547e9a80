/* SPDX-License-Identifier: MIT */
/*
 * Private to profile/: the containers every pass shares (containers.c). None of them knows what
 * its keys mean; all grow on demand, start zeroed (`= { 0 }` is an empty container), are freed
 * by their *_free() (which leaves them empty and reusable), and are not thread-safe.
 */
#ifndef HVPROF_CONTAINERS_INTERNAL_H
#define HVPROF_CONTAINERS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>

static inline uint64_t mix64(uint64_t x)
{
	/* The finalizer of MurmurHash3: every input bit affects every output bit. */
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/*
 * ---- array_grow: the growth of the plain arrays (elements [0, n) of capacity cap) of profile/.
 * @arr (NULL when *@cap is 0) of *@cap elements of @size bytes, reallocated to twice as many
 * elements, or to @first when *@cap is 0; *@cap is updated. Return: the array, or NULL for
 * -ENOMEM (then @arr and *@cap are unchanged, and @arr is still the caller's).
 */
void *array_grow(void *arr, size_t *cap, size_t size, size_t first) __must_check;

/* ---- strpool: interned NUL-terminated strings, identified by a dense uint32_t id. */
struct strpool {
	char **strs;
	uint32_t n, cap;
	uint32_t *slots; /* id + 1, 0 = empty; power-of-two size */
	uint64_t *hashes;
	size_t nslots;
};

/*
 * Intern the @len bytes at @s (no NUL among them; @s need not be NUL-terminated).
 * *@id: its id, 0, 1, 2... in order of first interning; the same bytes always get the same id.
 * Return: 0, or -ENOMEM (the pool is unchanged). The pool keeps its own copy.
 */
int strpool_intern(struct strpool *sp, const char *s, size_t len, uint32_t *id) __must_check;
/* The string of @id (< sp->n), owned by the pool: valid until strpool_free(). */
static inline const char *strpool_get(const struct strpool *sp, uint32_t id)
{
	return sp->strs[id];
}
void strpool_free(struct strpool *sp);

/* ---- u64map: uint64_t -> uint64_t hash map (linear probing, backward-shift delete). */
struct u64map {
	uint64_t *keys;
	uint64_t *vals;
	uint8_t *used;
	size_t cap, n; /* cap: power of two or 0 */
};

/* Set @key to @val (replacing its value if present). Return: 0, or -ENOMEM (map unchanged). */
int u64map_put(struct u64map *m, uint64_t key, uint64_t val) __must_check;
/* *@val: the value of @key. Return: 0, or -ENOENT when @key is absent (*@val untouched). */
int u64map_get(const struct u64map *m, uint64_t key, uint64_t *val) __must_check;
/* Remove @key if present; slot indices of other keys may change (iterate with care). */
void u64map_del(struct u64map *m, uint64_t key);
void u64map_free(struct u64map *m);

/* ---- seqtab: counts and periods per distinct sequence of uint64_t (a stack key). */
struct seqtab_entry {
	uint64_t key_off; /* into arena */
	uint32_t key_len;
	uint64_t hash;
	uint64_t count;
	uint64_t period;
};

struct seqtab {
	struct seqtab_entry *e; /* entries in order of creation: index = the sequence's id */
	size_t n, cap;
	uint64_t *arena;
	size_t arena_len, arena_cap;
	uint32_t *slots; /* entry index + 1, 0 = empty */
	size_t nslots;
};

/*
 * Add @count and @period to the entry of the @len values at @key (created, with a copy of the
 * key, if new; the empty sequence is a key too). *@idx (optional): the entry's index, stable
 * for the table's life. Return: 0, or -ENOMEM (more than UINT32_MAX - 1 entries, or no memory).
 */
int seqtab_add(struct seqtab *st, const uint64_t *key, uint32_t len, uint64_t count,
	       uint64_t period, size_t *idx) __must_check;
/* The key of entry @idx (< st->n) and its length *@len; valid until the next seqtab_add(). */
static inline const uint64_t *seqtab_key(const struct seqtab *st, size_t idx, uint32_t *len)
{
	*len = st->e[idx].key_len;
	return st->arena + st->e[idx].key_off;
}
void seqtab_free(struct seqtab *st);

#endif /* HVPROF_CONTAINERS_INTERNAL_H */
