// SPDX-License-Identifier: MIT
// speedscope's JSON file format (https://www.speedscope.app/file-format-schema.json): sampled
// profiles over one shared frame table; profile 0 covers the whole guest (comm as the root
// frame), then one profile per comm.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

struct comm_total {
	uint32_t frame; /* the comm's frame id */
	uint64_t weight;
};

static int cmp_comm(const void *a, const void *b, void *arg)
{
	const struct profile *p = arg;
	const struct comm_total *x = a, *y = b;

	if (x->weight != y->weight)
		return x->weight > y->weight ? -1 : 1;
	return strcmp(frame_name(p, x->frame), frame_name(p, y->frame));
}

/* speedscope frame index of profile frame @f: frames are numbered as in p->frames. */
static void write_profile(struct outbuf *ob, const struct profile *p, int use_period,
			  const char *unit, uint32_t comm, const char *name, uint64_t total)
{
	int first = 1;

	outbuf_puts(ob, "{\"type\":\"sampled\",\"name\":");
	json_string(ob, name);
	outbuf_printf(ob, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%" PRIu64
			  ",\"samples\":[",
		      unit, total);
	for (size_t i = 0; i < p->stacks.n; i++) {
		uint32_t len;
		const uint64_t *k = seqtab_key(&p->stacks, i, &len);
		/* comm == UINT32_MAX: every stack, comm frame included; else that comm's only. */
		uint32_t from = comm == UINT32_MAX ? STACK_KEY_FRAMES : STACK_KEY_FRAMES + 1;

		if (comm != UINT32_MAX && k[STACK_KEY_FRAMES] != comm)
			continue;
		outbuf_puts(ob, first ? "[" : ",[");
		first = 0;
		for (uint32_t j = from; j < len; j++)
			outbuf_printf(ob, j == from ? "%" PRIu64 : ",%" PRIu64, k[j]);
		outbuf_puts(ob, "]");
	}
	outbuf_puts(ob, "],\"weights\":[");
	first = 1;
	for (size_t i = 0; i < p->stacks.n; i++) {
		uint32_t len;
		const uint64_t *k = seqtab_key(&p->stacks, i, &len);

		if (comm != UINT32_MAX && k[STACK_KEY_FRAMES] != comm)
			continue;
		outbuf_printf(ob, first ? "%" PRIu64 : ",%" PRIu64,
			      use_period ? p->stacks.e[i].period : p->stacks.e[i].count);
		first = 0;
	}
	outbuf_puts(ob, "]}");
}

int profile_speedscope(const struct profile *p, const struct profile_sink *sink)
{
	const char *counter = profile_meta(p ? p : NULL, "counter");
	struct comm_total *comms = NULL;
	struct u64map comm_idx = { 0 };
	struct outbuf *ob = NULL;
	size_t n_comms = 0;
	uint64_t total = 0;
	int use_period, err = 0;
	const char *unit;
	char title[512];

	if (!p || !sink || !sink->write)
		return -EINVAL;
	/* Weights: the period when the recording has one; nanoseconds for a clock counter. */
	use_period = p->stats.period_total > 0;
	unit = use_period && (!counter || strstr(counter, "clock")) ? "nanoseconds" : "none";
	comms = calloc(p->stacks.n ? p->stacks.n : 1, sizeof(*comms));
	ob = malloc(sizeof(*ob));
	if (!comms || !ob) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < p->stacks.n; i++) {
		uint32_t len;
		const uint64_t *k = seqtab_key(&p->stacks, i, &len);
		uint64_t w = use_period ? p->stacks.e[i].period : p->stacks.e[i].count, idx;

		total += w;
		if (u64map_get(&comm_idx, k[STACK_KEY_FRAMES], &idx)) {
			idx = n_comms++;
			comms[idx].frame = (uint32_t)k[STACK_KEY_FRAMES];
			err = u64map_put(&comm_idx, k[STACK_KEY_FRAMES], idx);
			if (err)
				goto out;
		}
		comms[idx].weight += w;
	}
	if (n_comms > 1) /* qsort_r's array may not be NULL, even for 0 elements */
		qsort_r(comms, n_comms, sizeof(*comms), cmp_comm, (void *)p);

	outbuf_init(ob, sink);
	outbuf_puts(ob, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
			"\"exporter\":\"hvprof\",\"name\":");
	snprintf(title, sizeof(title), "hvprof%s%s",
		 profile_meta(p, "image") ? ": " : "",
		 profile_meta(p, "image") ? profile_meta(p, "image") : "");
	json_string(ob, title);
	outbuf_puts(ob, ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
	for (size_t i = 0; i < p->n_frames; i++) {
		const struct frame *f = &p->frames[i];

		outbuf_puts(ob, i ? ",{\"name\":" : "{\"name\":");
		json_string(ob, strpool_get(&p->strs, f->name));
		if (f->kind != FRAME_COMM) {
			outbuf_puts(ob, ",\"file\":");
			json_string(ob, strpool_get(&p->strs, f->dso));
		}
		outbuf_puts(ob, "}");
	}
	outbuf_puts(ob, "]},\"profiles\":[");
	write_profile(ob, p, use_period, unit, UINT32_MAX, "all (comm as the root frame)", total);
	for (size_t c = 0; c < n_comms; c++) {
		char name[256];

		snprintf(name, sizeof(name), "%s", frame_name(p, comms[c].frame));
		outbuf_puts(ob, ",");
		write_profile(ob, p, use_period, unit, comms[c].frame, name, comms[c].weight);
	}
	outbuf_puts(ob, "]}\n");
	err = outbuf_flush(ob);
out:
	free(ob);
	free(comms);
	u64map_free(&comm_idx);
	return err;
}
