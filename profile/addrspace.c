// SPDX-License-Identifier: MIT
// Address spaces while loading: PROCESS and MAPPING records (docs/recording-format.md) become
// snapshots per process, each kept for the samples that belong to it (see addrspace.h).
#define pr_fmt(fmt) "profile: " fmt

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/log.h>

#include "addrspace.h"

#define AS_MAX_MAPS 65535 /* a snapshot's count is a u16 */

const struct as_mapping *as_find(const struct addrspace *as, uint64_t gva)
{
	size_t lo = 0, hi;

	if (!as || !as->n_maps)
		return NULL;
	hi = as->n_maps;
	/* the last mapping whose start <= gva */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (as->maps[mid].start <= gva)
			lo = mid;
		else
			hi = mid;
	}
	if (as->maps[lo].start <= gva && gva < as->maps[lo].end)
		return &as->maps[lo];
	return NULL;
}

/* A new current snapshot of @tgid, copying the executable of @prev (may be NULL). */
static int as_new(struct as_table *t, int32_t tgid, const struct addrspace *prev,
		  struct addrspace **out)
{
	struct addrspace *as;
	int err;

	if (t->n == t->cap) {
		struct addrspace **na = array_grow(t->as, &t->cap, sizeof(*na), 64);

		if (!na)
			return -ENOMEM;
		t->as = na;
	}
	as = calloc(1, sizeof(*as));
	if (!as)
		return -ENOMEM;
	as->id = (uint32_t)t->n;
	as->tgid = tgid;
	as->exe = prev ? prev->exe : "";
	as->start_code = prev ? prev->start_code : 0;
	as->end_code = prev ? prev->end_code : 0;
	err = u64map_put(&t->cur, (uint64_t)(int64_t)tgid, t->n);
	if (err) {
		free(as);
		return err;
	}
	t->as[t->n++] = as;
	*out = as;
	return 0;
}

const struct addrspace *as_table_current(const struct as_table *t, int32_t tgid)
{
	uint64_t val;

	if (u64map_get(&t->cur, (uint64_t)(int64_t)tgid, &val))
		return NULL;
	return t->as[val];
}

int as_table_process(struct as_table *t, struct strpool *sp, const struct hvp_process *pr)
{
	struct addrspace *as;
	uint32_t exe;
	int err;

	err = strpool_intern(sp, pr->exe, strnlen(pr->exe, sizeof(pr->exe)), &exe);
	if (!err)
		err = as_new(t, pr->tgid, NULL, &as);
	if (err)
		return err;
	as->exe = strpool_get(sp, exe);
	as->start_code = pr->start_code;
	as->end_code = pr->end_code;
	return 0;
}

/* The file of MAPPING @m (interned once per distinct path, build-id, inode, device). */
static int as_file_of(struct as_table *t, struct strpool *sp, const struct hvp_mapping *m,
		      const struct as_file **out)
{
	uint64_t key[7] = { 0 };
	struct as_file *f;
	uint8_t id_len = m->build_id_len;
	uint32_t path;
	size_t idx;
	int err;

	/* SAFETY: the reader bounds build_id_len to 20 and the path to 255 bytes; clamp anyway. */
	if (id_len > AS_BUILD_ID_MAX)
		id_len = 0;
	err = strpool_intern(sp, m->path, strnlen(m->path, sizeof(m->path)), &path);
	if (err)
		return err;
	key[0] = path;
	key[1] = m->ino;
	key[2] = m->dev;
	key[3] = id_len;
	memcpy(&key[4], m->build_id, id_len);
	err = seqtab_add(&t->file_ids, key, 7, 0, 0, &idx);
	if (err)
		return err;
	if (idx < t->n_files) {
		*out = t->files[idx];
		return 0;
	}
	if (t->n_files == t->cap_files) {
		struct as_file **nf = array_grow(t->files, &t->cap_files, sizeof(*nf), 64);

		if (!nf)
			return -ENOMEM; /* the seqtab entry stays: a later record fills it */
		t->files = nf;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->id = (uint32_t)idx;
	f->path = strpool_get(sp, path);
	memcpy(f->build_id, m->build_id, id_len);
	f->build_id_len = id_len;
	f->ino = m->ino;
	f->dev = m->dev;
	t->files[t->n_files++] = f;
	*out = f;
	return 0;
}

/* Insert @nm in @as keeping the mappings sorted by start (records come in address order). */
static int as_insert(struct addrspace *as, const struct as_mapping *nm)
{
	size_t pos = as->n_maps;

	if (as->n_maps == as->cap_maps) {
		struct as_mapping *nmaps = array_grow(as->maps, &as->cap_maps, sizeof(*nmaps), 32);

		if (!nmaps)
			return -ENOMEM;
		as->maps = nmaps;
	}
	while (pos > 0 && as->maps[pos - 1].start > nm->start)
		pos--;
	memmove(&as->maps[pos + 1], &as->maps[pos], (as->n_maps - pos) * sizeof(*nm));
	as->maps[pos] = *nm;
	as->n_maps++;
	return 0;
}

int as_table_mapping(struct as_table *t, struct strpool *sp, const struct hvp_mapping *m)
{
	struct as_mapping nm = { .start = m->start, .end = m->end, .pgoff = m->pgoff,
				 .prot = m->prot };
	struct addrspace *as;
	uint64_t val;
	int err;

	if (m->index == 0) {
		const struct addrspace *prev = as_table_current(t, m->tgid);

		err = as_new(t, m->tgid, prev, &as);
		if (err)
			return err;
		as->has_maps = 1;
		as->count = m->count;
	} else {
		if (u64map_get(&t->cur, (uint64_t)(int64_t)m->tgid, &val) ||
		    !t->as[val]->has_maps || t->as[val]->expect != m->index ||
		    t->as[val]->count != m->count) {
			t->bad_records++;
			return 0;
		}
		as = t->as[val];
	}
	as->expect = m->index + 1u;
	/* SAFETY: the reader checked start < end and index < count <= AS_MAX_MAPS. */
	if (m->start >= m->end || as->n_maps >= AS_MAX_MAPS) {
		t->bad_records++;
		return 0;
	}
	if (m->path[0]) {
		err = as_file_of(t, sp, m, &nm.file);
		if (err)
			return err;
	}
	return as_insert(as, &nm);
}

void as_table_free(struct as_table *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->as[i]->maps);
		free(t->as[i]);
	}
	free(t->as);
	for (size_t i = 0; i < t->n_files; i++)
		free(t->files[i]);
	free(t->files);
	seqtab_free(&t->file_ids);
	u64map_free(&t->cur);
	memset(t, 0, sizeof(*t));
}
