// SPDX-License-Identifier: MIT
// The loaded profile (profile_internal.h): interned frames, mappings, META pairs and counters,
// and the public accessors over them. The loader (load.c) and the symbolization pass
// (symbolize_pass.c) fill it; the exporters read it.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/profile.h>

#include "profile_internal.h"

int profile_frame(struct profile *p, enum frame_kind kind, const char *name, const char *dso,
		  int resolved, uint32_t *id)
{
	uint32_t name_id, dso_id;
	uint64_t key, val;
	int err;

	err = strpool_intern(&p->strs, name, strlen(name), &name_id);
	if (err)
		return err;
	err = strpool_intern(&p->strs, dso, strlen(dso), &dso_id);
	if (err)
		return err;
	if (name_id >= (1u << 31) || dso_id >= (1u << 31))
		return -ENOMEM; /* the packed key below has 31 bits for each */
	key = (uint64_t)kind << 62 | (uint64_t)name_id << 31 | dso_id;
	if (!u64map_get(&p->frame_ids, key, &val)) {
		*id = (uint32_t)val;
		return 0;
	}
	if (p->n_frames == p->cap_frames) {
		struct frame *nf = array_grow(p->frames, &p->cap_frames, sizeof(*nf), 256);

		if (!nf)
			return -ENOMEM;
		p->frames = nf;
	}
	err = u64map_put(&p->frame_ids, key, p->n_frames);
	if (err)
		return err;
	p->frames[p->n_frames] = (struct frame){ .name = name_id, .dso = dso_id, .kind = kind,
						 .resolved = resolved ? 1 : 0 };
	*id = (uint32_t)p->n_frames++;
	return 0;
}

int profile_mapping_of(struct profile *p, uint32_t dso_id, uint32_t *idx)
{
	uint64_t val;
	uint32_t empty;
	int err;

	if (!u64map_get(&p->mapping_of_dso, dso_id, &val)) {
		*idx = (uint32_t)val;
		return 0;
	}
	err = strpool_intern(&p->strs, "", 0, &empty);
	if (err)
		return err;
	if (p->n_mappings == p->cap_mappings) {
		struct mapping *nm = array_grow(p->mappings, &p->cap_mappings, sizeof(*nm), 16);

		if (!nm)
			return -ENOMEM;
		p->mappings = nm;
	}
	err = u64map_put(&p->mapping_of_dso, dso_id, p->n_mappings);
	if (err)
		return err;
	p->mappings[p->n_mappings] = (struct mapping){ .dso = dso_id, .path = dso_id,
						       .build_id = empty };
	*idx = (uint32_t)p->n_mappings++;
	return 0;
}

int profile_mapping_note(struct profile *p, const char *dso, const char *path,
			 const char *build_id)
{
	uint32_t dso_id, path_id, bid_id, idx;
	int err;

	err = strpool_intern(&p->strs, dso, strlen(dso), &dso_id);
	if (!err)
		err = strpool_intern(&p->strs, path, strlen(path), &path_id);
	if (!err)
		err = strpool_intern(&p->strs, build_id, strlen(build_id), &bid_id);
	if (!err)
		err = profile_mapping_of(p, dso_id, &idx);
	if (err)
		return err;
	p->mappings[idx].path = path_id;
	p->mappings[idx].build_id = bid_id;
	return 0;
}

int profile_add_meta(struct profile *p, const char *key, const char *value)
{
	char *k, *v;

	if (p->n_meta == p->cap_meta) {
		struct meta_kv *nm = array_grow(p->meta, &p->cap_meta, sizeof(*nm), 32);

		if (!nm)
			return -ENOMEM;
		p->meta = nm;
	}
	k = strdup(key);
	v = strdup(value);
	if (!k || !v) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	p->meta[p->n_meta++] = (struct meta_kv){ .key = k, .value = v };
	return 0;
}

int profile_set_counter(struct profile *p, const char *name, uint64_t value)
{
	char *n;

	for (size_t i = 0; i < p->n_counters; i++) {
		if (strcmp(p->counters[i].name, name) == 0) {
			p->counters[i].value = value;
			return 0;
		}
	}
	if (p->n_counters == p->cap_counters) {
		struct counter_kv *nc = array_grow(p->counters, &p->cap_counters, sizeof(*nc), 16);

		if (!nc)
			return -ENOMEM;
		p->counters = nc;
	}
	n = strdup(name);
	if (!n)
		return -ENOMEM;
	p->counters[p->n_counters++] = (struct counter_kv){ .name = n, .value = value };
	return 0;
}

const char *frame_name(const struct profile *p, uint32_t id)
{
	if (id == UINT32_MAX)
		return "[unknown]";
	return strpool_get(&p->strs, p->frames[id].name);
}

void profile_free(struct profile *p)
{
	if (!p)
		return;
	strpool_free(&p->strs);
	free(p->frames);
	u64map_free(&p->frame_ids);
	seqtab_free(&p->stacks);
	free(p->locs);
	seqtab_free(&p->lstacks);
	free(p->mappings);
	u64map_free(&p->mapping_of_dso);
	free(p->samples);
	for (size_t i = 0; i < p->n_meta; i++) {
		free(p->meta[i].key);
		free(p->meta[i].value);
	}
	free(p->meta);
	for (size_t i = 0; i < p->n_counters; i++)
		free(p->counters[i].name);
	free(p->counters);
	free(p->read_error);
	free(p->filter_desc);
	free(p);
}

const char *profile_read_error(const struct profile *p)
{
	return p ? p->read_error : NULL;
}

const char *profile_meta(const struct profile *p, const char *key)
{
	if (!p || !key)
		return NULL;
	for (size_t i = p->n_meta; i-- > 0;)
		if (strcmp(p->meta[i].key, key) == 0)
			return p->meta[i].value;
	return NULL;
}

int profile_meta_at(const struct profile *p, size_t idx, const char **key, const char **value)
{
	if (!p || idx >= p->n_meta)
		return -ENOENT;
	if (key)
		*key = p->meta[idx].key;
	if (value)
		*value = p->meta[idx].value;
	return 0;
}

void profile_add_event(struct profile *p, const struct hvp_event *e)
{
	window_add_event(&p->window, &p->has_window, e);
	window_list_add_event(&p->windows, e);
}

void window_list_add_event(struct window_list *l, const struct hvp_event *e)
{
	struct profile_window *last = l->n ? &l->w[l->n - 1] : NULL;

	if (e->kind == HVP_EVENT_WORKLOAD_START) {
		l->seen++;
		if (l->n == PROFILE_MAX_WINDOWS)
			return;
		/* SAFETY: l->n < PROFILE_MAX_WINDOWS, the array's size. */
		l->w[l->n++] = (struct profile_window){ .start_ns = e->time_ns };
	} else if (e->kind == HVP_EVENT_WORKLOAD_END && last && l->seen == l->n && !last->has_end &&
		   e->time_ns >= last->start_ns) {
		/* the end of the last window kept (not of a start beyond the cap) */
		last->has_end = 1;
		last->end_ns = e->time_ns;
		last->exit_status = e->value;
	}
}

int window_list_range(const struct window_list *l, size_t idx, uint64_t *start_ns,
		      uint64_t *end_ns)
{
	if (!l || idx >= l->n)
		return -ENOENT;
	*start_ns = l->w[idx].start_ns;
	/* an open window stops where the next one starts, the last one at the end */
	*end_ns = l->w[idx].has_end ? l->w[idx].end_ns
		  : idx + 1 < l->n  ? l->w[idx + 1].start_ns
				    : UINT64_MAX;
	return 0;
}

void window_add_event(struct profile_window *w, int *has_window, const struct hvp_event *e)
{
	switch (e->kind) {
	case HVP_EVENT_WORKLOAD_START:
		if (!*has_window) {
			*has_window = 1;
			w->start_ns = e->time_ns;
		}
		break;
	case HVP_EVENT_WORKLOAD_END: /* of the workload whose start was seen (a guest may lie) */
		if (*has_window && !w->has_end && e->time_ns >= w->start_ns) {
			w->has_end = 1;
			w->end_ns = e->time_ns;
			w->exit_status = e->value;
		}
		break;
	case HVP_EVENT_SAMPLING_START:
		if (!w->has_sampling_start) {
			w->has_sampling_start = 1;
			w->sampling_start_ns = e->time_ns;
		}
		break;
	default: /* init started, and kinds this reader does not know */
		break;
	}
}

size_t profile_workload_window_count(const struct profile *p)
{
	return p ? p->windows.n : 0;
}

int profile_workload_window_at(const struct profile *p, size_t idx, struct profile_window *out)
{
	if (!p || !out || idx >= p->windows.n)
		return -ENOENT;
	*out = p->windows.w[idx];
	out->has_sampling_start = p->window.has_sampling_start;
	out->sampling_start_ns = p->window.sampling_start_ns;
	return 0;
}

int profile_workload_window(const struct profile *p, struct profile_window *out)
{
	if (!p || !out || !p->has_window)
		return -ENOENT;
	*out = p->window;
	return 0;
}

int profile_counter(const struct profile *p, const char *name, uint64_t *value)
{
	if (!p || !name)
		return -ENOENT;
	for (size_t i = 0; i < p->n_counters; i++) {
		if (strcmp(p->counters[i].name, name) == 0) {
			if (value)
				*value = p->counters[i].value;
			return 0;
		}
	}
	return -ENOENT;
}

void profile_get_stats(const struct profile *p, struct profile_stats *out)
{
	if (p && out)
		*out = p->stats;
}
