// SPDX-License-Identifier: MIT
// pprof export: the profile as perftools.profiles.Profile (profile.proto), packed by protobuf-c
// straight into a gzip stream (zlib) that goes to the sink.
#define pr_fmt(fmt) "pprof: " fmt

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include <hvprof/log.h>

#include "profile.pb-c.h"
#include "profile_internal.h"

/* A ProtobufCBuffer that deflates what protobuf-c appends and writes it to a sink. */
struct gz_buffer {
	ProtobufCBuffer base;
	const struct profile_sink *sink;
	z_stream zs;
	int err;
	unsigned char out[65536];
};

static void gz_drain(struct gz_buffer *gb, int flush)
{
	int zret;

	do {
		gb->zs.next_out = gb->out;
		gb->zs.avail_out = sizeof(gb->out);
		zret = deflate(&gb->zs, flush);
		if (zret == Z_STREAM_ERROR) {
			pr_err("deflate failed: %s", gb->zs.msg ? gb->zs.msg : "stream error");
			gb->err = -EIO;
			return;
		}
		if (sizeof(gb->out) - gb->zs.avail_out && !gb->err)
			gb->err = gb->sink->write(gb->sink->ctx, gb->out,
						  sizeof(gb->out) - gb->zs.avail_out);
	} while (gb->zs.avail_out == 0 && !gb->err);
}

static void gz_append(ProtobufCBuffer *buf, size_t len, const uint8_t *data)
{
	struct gz_buffer *gb = (struct gz_buffer *)buf;

	while (len && !gb->err) {
		/* avail_in is a uInt: feed at most 1 GiB at a time. */
		size_t n = len < (1u << 30) ? len : (1u << 30);

		gb->zs.next_in = (unsigned char *)(uintptr_t)data;
		gb->zs.avail_in = (uInt)n;
		gz_drain(gb, Z_NO_FLUSH);
		data += n;
		len -= n;
	}
}

/* The string table: strings interned once, index 0 is "". */
struct strtab {
	struct strpool pool;
};

static int64_t str_id(struct strtab *st, const char *s, int *err)
{
	uint32_t id = 0;

	if (*err)
		return 0;
	*err = strpool_intern(&st->pool, s, strlen(s), &id);
	return id;
}

struct pprof_build {
	Perftools__Profiles__Profile prof;
	Perftools__Profiles__ValueType vt[2], period_type;
	Perftools__Profiles__ValueType *vtp[2];
	Perftools__Profiles__Mapping *maps;
	Perftools__Profiles__Mapping **mapp;
	Perftools__Profiles__Function *funcs;
	Perftools__Profiles__Function **funcp;
	Perftools__Profiles__Location *locs;
	Perftools__Profiles__Location **locp;
	Perftools__Profiles__Line *lines;
	Perftools__Profiles__Line **linep;
	Perftools__Profiles__Sample *samples;
	Perftools__Profiles__Sample **samplep;
	Perftools__Profiles__Label *labels;
	Perftools__Profiles__Label **labelp;
	uint64_t *loc_ids;
	int64_t *values;
	int64_t *comments;
	struct strtab st;
};

static void build_free(struct pprof_build *b)
{
	free(b->maps);
	free(b->mapp);
	free(b->funcs);
	free(b->funcp);
	free(b->locs);
	free(b->locp);
	free(b->lines);
	free(b->linep);
	free(b->samples);
	free(b->samplep);
	free(b->labels);
	free(b->labelp);
	free(b->loc_ids);
	free(b->values);
	free(b->comments);
	strpool_free(&b->st.pool);
}

/* Value types (samples; cpu ns for clock counters, else events) and the period. */
static void build_types(const struct profile *p, struct pprof_build *b, int *err)
{
	const char *counter = profile_meta(p, "counter");
	const char *period_ns = profile_meta(p, "period_ns");
	int clock = !counter || strstr(counter, "clock");

	for (int i = 0; i < 2; i++) {
		perftools__profiles__value_type__init(&b->vt[i]);
		b->vtp[i] = &b->vt[i];
	}
	b->vt[0].type = str_id(&b->st, "samples", err);
	b->vt[0].unit = str_id(&b->st, "count", err);
	b->vt[1].type = str_id(&b->st, clock ? "cpu" : "events", err);
	b->vt[1].unit = str_id(&b->st, clock ? "nanoseconds" : "count", err);
	perftools__profiles__value_type__init(&b->period_type);
	b->period_type.type = b->vt[1].type;
	b->period_type.unit = b->vt[1].unit;
	b->prof.sample_type = b->vtp;
	b->prof.n_sample_type = 2;
	b->prof.period_type = &b->period_type;
	b->prof.period = period_ns ? strtoll(period_ns, NULL, 10) : 0;
	b->prof.default_sample_type = b->vt[1].type;
}

/* The arrays of the messages, sized from @p (each + 1: calloc(0) may return NULL). */
static int build_alloc(const struct profile *p, struct pprof_build *b)
{
	b->maps = calloc(p->n_mappings + 1, sizeof(*b->maps));
	b->mapp = calloc(p->n_mappings + 1, sizeof(*b->mapp));
	b->funcs = calloc(p->n_frames + 1, sizeof(*b->funcs));
	b->funcp = calloc(p->n_frames + 1, sizeof(*b->funcp));
	b->locs = calloc(p->n_locs + 1, sizeof(*b->locs));
	b->locp = calloc(p->n_locs + 1, sizeof(*b->locp));
	b->lines = calloc(p->n_locs + 1, sizeof(*b->lines));
	b->linep = calloc(p->n_locs + 1, sizeof(*b->linep));
	b->samples = calloc(p->lstacks.n + 1, sizeof(*b->samples));
	b->samplep = calloc(p->lstacks.n + 1, sizeof(*b->samplep));
	b->labels = calloc(3 * p->lstacks.n + 1, sizeof(*b->labels));
	b->labelp = calloc(3 * p->lstacks.n + 1, sizeof(*b->labelp));
	b->loc_ids = calloc(p->lstacks.arena_len + 1, sizeof(*b->loc_ids));
	b->values = calloc(2 * p->lstacks.n + 1, sizeof(*b->values));
	if (!b->maps || !b->mapp || !b->funcs || !b->funcp || !b->locs || !b->locp || !b->lines ||
	    !b->linep || !b->samples || !b->samplep || !b->labels || !b->labelp || !b->loc_ids ||
	    !b->values)
		return -ENOMEM;
	return 0;

}

static void build_mappings(const struct profile *p, struct pprof_build *b, int *err)
{
	/* Mappings: id = index + 1. */
	for (size_t i = 0; i < p->n_mappings; i++) {
		const struct mapping *m = &p->mappings[i];
		Perftools__Profiles__Mapping *pm = &b->maps[i];

		perftools__profiles__mapping__init(pm);
		pm->id = i + 1;
		pm->memory_start = m->start;
		pm->memory_limit = m->limit;
		pm->filename = str_id(&b->st, strpool_get(&p->strs, m->path), err);
		pm->build_id = str_id(&b->st, strpool_get(&p->strs, m->build_id), err);
		pm->has_functions = 1;
		b->mapp[i] = pm;
	}
	b->prof.mapping = b->mapp;
	b->prof.n_mapping = p->n_mappings;
}

static void build_functions(const struct profile *p, struct pprof_build *b, int *err)
{
	size_t n_funcs = 0;

	/* Functions: one per frame except the comm frames; id = frame index + 1. */
	for (size_t i = 0; i < p->n_frames; i++) {
		const struct frame *f = &p->frames[i];
		Perftools__Profiles__Function *pf;

		if (f->kind == FRAME_COMM)
			continue;
		pf = &b->funcs[n_funcs];
		perftools__profiles__function__init(pf);
		pf->id = i + 1;
		pf->name = str_id(&b->st, strpool_get(&p->strs, f->name), err);
		pf->system_name = pf->name;
		pf->filename = str_id(&b->st, strpool_get(&p->strs, f->dso), err);
		b->funcp[n_funcs++] = pf;
	}
	b->prof.function = b->funcp;
	b->prof.n_function = n_funcs;
}

static void build_locations(const struct profile *p, struct pprof_build *b)
{
	size_t n_locs = 0;

	/* Locations: one per loc except the comm's; id = loc index + 1, one line each. */
	for (size_t i = 0; i < p->n_locs; i++) {
		const struct loc *l = &p->locs[i];
		Perftools__Profiles__Location *pl;

		if (p->frames[l->frame].kind == FRAME_COMM)
			continue;
		pl = &b->locs[n_locs];
		perftools__profiles__location__init(pl);
		perftools__profiles__line__init(&b->lines[n_locs]);
		pl->id = i + 1;
		pl->mapping_id = l->mapping == UINT32_MAX ? 0 : l->mapping + 1;
		pl->address = l->ip;
		b->lines[n_locs].function_id = l->frame + 1;
		b->linep[n_locs] = &b->lines[n_locs];
		pl->line = &b->linep[n_locs];
		pl->n_line = 1;
		b->locp[n_locs++] = pl;
	}
	b->prof.location = b->locp;
	b->prof.n_location = n_locs;
}

static void build_samples(const struct profile *p, struct pprof_build *b, int *err)
{
	size_t n_ids = 0;

	/* Samples: one per location stack, leaf first, with thread, process and comm labels. */
	for (size_t i = 0; i < p->lstacks.n; i++) {
		uint32_t len, slen;
		const uint64_t *k = seqtab_key(&p->lstacks, i, &len);
		const uint64_t *sk = seqtab_key(&p->stacks, k[0], &slen);
		Perftools__Profiles__Sample *ps = &b->samples[i];
		Perftools__Profiles__Label *lb = &b->labels[3 * i];
		size_t first = n_ids;

		perftools__profiles__sample__init(ps);
		/* SAFETY: k[LSTACK_KEY_LOCS] is the comm's loc, left out; loc_ids has room for
		 * every lstack key in full (arena_len), so the rest fits. */
		for (uint32_t j = len; j-- > LSTACK_KEY_LOCS + 1;)
			b->loc_ids[n_ids++] = k[j] + 1;
		ps->location_id = b->loc_ids + first;
		ps->n_location_id = len - LSTACK_KEY_LOCS - 1;
		b->values[2 * i] = (int64_t)p->lstacks.e[i].count;
		b->values[2 * i + 1] = (int64_t)p->lstacks.e[i].period;
		ps->value = &b->values[2 * i];
		ps->n_value = 2;
		for (int j = 0; j < 3; j++) {
			perftools__profiles__label__init(&lb[j]);
			b->labelp[3 * i + j] = &lb[j];
		}
		lb[0].key = str_id(&b->st, "thread", err);
		lb[0].num = (int64_t)sk[0];
		lb[1].key = str_id(&b->st, "process", err);
		lb[1].num = (int64_t)sk[1];
		lb[2].key = str_id(&b->st, "comm", err);
		lb[2].str = str_id(&b->st, frame_name(p, (uint32_t)sk[STACK_KEY_FRAMES]), err);
		ps->label = &b->labelp[3 * i];
		ps->n_label = 3;
		b->samplep[i] = ps;
	}
	b->prof.sample = b->samplep;
	b->prof.n_sample = p->lstacks.n;
}

/* The run's facts as the profile's comments. */
static void build_comments(const struct profile *p, struct pprof_build *b, int *err)
{
	struct facts facts;

	if (*err)
		return;
	*err = profile_facts(p, &facts);
	if (*err)
		return;
	b->comments = calloc(facts.n + 1, sizeof(*b->comments));
	if (!b->comments)
		*err = -ENOMEM;
	for (size_t i = 0; i < facts.n && !*err; i++)
		b->comments[i] = str_id(&b->st, facts.line[i], err);
	b->prof.comment = b->comments;
	b->prof.n_comment = *err ? 0 : facts.n;
	facts_free(&facts);
}

static int build(const struct profile *p, struct pprof_build *b)
{
	int err = 0;

	perftools__profiles__profile__init(&b->prof);
	(void)str_id(&b->st, "", &err); /* string_table[0] must be "" */
	build_types(p, b, &err);
	if (build_alloc(p, b))
		return -ENOMEM;
	build_mappings(p, b, &err);
	build_functions(p, b, &err);
	build_locations(p, b);
	build_samples(p, b, &err);
	build_comments(p, b, &err);
	if (err)
		return err;
	b->prof.string_table = b->st.pool.strs;
	b->prof.n_string_table = b->st.pool.n;
	return 0;
}

int profile_pprof(const struct profile *p, const struct profile_sink *sink)
{
	struct pprof_build *b;
	struct gz_buffer *gb;
	int err;

	if (!p || !sink || !sink->write)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	gb = calloc(1, sizeof(*gb));
	if (!b || !gb) {
		err = -ENOMEM;
		goto out;
	}
	err = build(p, b);
	if (err)
		goto out;
	gb->base.append = gz_append;
	gb->sink = sink;
	/* windowBits 15 + 16: a gzip wrapper, as pprof files are. */
	if (deflateInit2(&gb->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		pr_err("deflateInit2 failed");
		err = -ENOMEM;
		goto out;
	}
	protobuf_c_message_pack_to_buffer(&b->prof.base, &gb->base);
	if (!gb->err) {
		gb->zs.next_in = NULL;
		gb->zs.avail_in = 0;
		gz_drain(gb, Z_FINISH);
	}
	deflateEnd(&gb->zs);
	err = gb->err;
out:
	if (b)
		build_free(b);
	free(b);
	free(gb);
	return err;
}
