// SPDX-License-Identifier: MIT
// Self-contained interactive SVG flamegraph of a profile: its stacks as a flame tree
// (flametree.c) drawn with the shared SVG (flamesvg.c), frames coloured by kind.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

#define TOP 60    /* title, subtitle and controls */
#define BOTTOM 30 /* details line */

static int build_tree(const struct profile *p, struct flametree *t)
{
	int err;

	err = flametree_init(t);
	for (size_t i = 0; i < p->stacks.n && !err; i++) {
		uint32_t len;
		const uint64_t *k = seqtab_key(&p->stacks, i, &len);

		err = flametree_add(t, 0, k + STACK_KEY_FRAMES, len - STACK_KEY_FRAMES,
				    p->stacks.e[i].count);
	}
	return err;
}

/* Children ordered by name (as flamegraph.pl), then kind and DSO, so output is deterministic. */
static int cmp_child(const struct flamenode *a, const struct flamenode *b, const void *arg)
{
	const struct profile *p = arg;
	const struct frame *fa = &p->frames[a->id];
	const struct frame *fb = &p->frames[b->id];
	int c = strcmp(strpool_get(&p->strs, fa->name), strpool_get(&p->strs, fb->name));

	if (c)
		return c;
	if (fa->kind != fb->kind)
		return fa->kind < fb->kind ? -1 : 1;
	return strcmp(strpool_get(&p->strs, fa->dso), strpool_get(&p->strs, fb->dso));
}

static void color_of(const struct profile *p, const struct frame *f, char *buf, size_t len)
{
	const char *name = strpool_get(&p->strs, f->name);
	uint64_t h = 0xcbf29ce484222325ULL;
	double v1, v2, v3;

	for (const char *c = name; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
	h = mix64(h);
	v1 = (double)(h & 0xffff) / 65535.0;
	v2 = (double)((h >> 16) & 0xffff) / 65535.0;
	v3 = (double)((h >> 32) & 0xffff) / 65535.0;
	switch (f->kind) {
	case FRAME_KERNEL: /* "aqua": kernel frames */
		snprintf(buf, len, "rgb(%d,%d,%d)", 50 + (int)(60 * v1), 165 + (int)(55 * v1),
			 165 + (int)(55 * v2));
		break;
	case FRAME_USER: /* "hot": user frames */
		snprintf(buf, len, "rgb(%d,%d,%d)", 205 + (int)(50 * v3), (int)(230 * v1),
			 (int)(55 * v2));
		break;
	case FRAME_LOST:
		snprintf(buf, len, "rgb(160,160,160)");
		break;
	default: /* comm */
		snprintf(buf, len, "rgb(%d,%d,%d)", 190 + (int)(30 * v1), 190 + (int)(30 * v1),
			 200 + (int)(30 * v2));
		break;
	}
}

static void write_frame(struct outbuf *ob, const struct profile *p, const struct flametree *t,
			const struct flamenode *n, unsigned int width, double min_width)
{
	uint64_t total = t->n[0].count[0];
	double pct = 100.0 * (double)n->count[0] / (double)(total ? total : 1);
	const struct frame *f = n->id == FLAMETREE_ROOT ? NULL : &p->frames[n->id];
	const char *name = f ? strpool_get(&p->strs, f->name) : "all";
	const char *tag = !f || f->kind == FRAME_COMM ? "" : f->kind == FRAME_KERNEL ? "[k] " : "[.] ";
	double x, y, w;
	char fill[48];

	flamesvg_place(t, n, 0, width, TOP, &x, &y, &w);
	if (w < min_width)
		return;
	if (f)
		color_of(p, f, fill, sizeof(fill));
	else
		snprintf(fill, sizeof(fill), "rgb(200,200,200)");
	flamesvg_frame_begin(ob, n->depth, name);
	outbuf_puts(ob, tag);
	xml_escape(ob, name);
	if (f && f->kind != FRAME_COMM) {
		outbuf_puts(ob, " (");
		xml_escape(ob, strpool_get(&p->strs, f->dso));
		outbuf_puts(ob, ")");
	}
	outbuf_printf(ob, ": %" PRIu64 " samples, %.2f%%", n->count[0], pct);
	flamesvg_frame_end(ob, x, y, w, fill);
}

/* Title, subtitle (the first facts: samples, lost, event) and every fact in a <desc>. */
static void write_heading(struct outbuf *ob, const struct profile *p, const char *title,
			  unsigned int width, const struct facts *facts)
{
	if (title) {
		xml_escape(ob, title);
	} else {
		const char *what = profile_meta(p, "image");

		if (!what)
			what = profile_meta(p, "cmdline");
		outbuf_puts(ob, "hvprof");
		if (what) {
			outbuf_puts(ob, ": ");
			xml_escape(ob, what);
		}
	}
	outbuf_puts(ob, "</text>\n");
	outbuf_printf(ob, "<text x=\"%u\" y=\"36\" text-anchor=\"middle\">", width / 2);
	for (size_t i = 0; i < facts->n && i < 3; i++) {
		if (i)
			outbuf_puts(ob, "; ");
		xml_escape(ob, facts->line[i]);
	}
	outbuf_puts(ob, "</text>\n<desc>");
	for (size_t i = 0; i < facts->n; i++) {
		xml_escape(ob, facts->line[i]);
		outbuf_puts(ob, "\n");
	}
	outbuf_puts(ob, "</desc>\n");
}

int profile_flamegraph(const struct profile *p, const struct profile_flamegraph_options *opts,
		       const struct profile_sink *sink)
{
	const char *title = OPT(opts, title, NULL);
	unsigned int width = OPT(opts, width, 0);
	double min_width = OPT(opts, min_width, 0.0);
	struct facts facts = { 0 };
	struct flametree t = { 0 };
	struct outbuf *ob = NULL;
	unsigned int height;
	int err;

	if (!p || !sink || !sink->write)
		return -EINVAL;
	if (!width)
		width = 1200;
	if (width < 2 * FLAMESVG_PAD + 10)
		width = 2 * FLAMESVG_PAD + 10;
	if (min_width <= 0)
		min_width = 0.1;
	err = build_tree(p, &t);
	if (!err)
		err = flametree_layout(&t, 0, cmp_child, p);
	if (!err)
		err = profile_facts(p, &facts);
	if (err)
		goto out;
	ob = malloc(sizeof(*ob));
	if (!ob) {
		err = -ENOMEM;
		goto out;
	}
	outbuf_init(ob, sink);
	height = TOP + (t.max_depth + 1) * FLAMESVG_FRAME_H + BOTTOM;
	flamesvg_begin(ob, width, height, "rgb(248,248,240)");
	write_heading(ob, p, title, width, &facts);
	flamesvg_controls(ob, width, height, 52);
	for (size_t i = 0; i < t.len; i++)
		write_frame(ob, p, &t, &t.n[i], width, min_width);
	flamesvg_end(ob);
	err = outbuf_flush(ob);
out:
	free(ob);
	facts_free(&facts);
	flametree_free(&t);
	return err;
}
