// SPDX-License-Identifier: MIT
// Differential SVG flamegraph: the layout of one side (NEW, or BASE when reversed), each frame
// coloured by the change of its normalized share BASE -> NEW (red grew, blue shrank, white not
// significant), with the interaction of the plain flamegraph.
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

#define FRAME_H 16
#define PAD 10
#define TOP 76
#define BOTTOM 30

struct dnode {
	uint32_t name; /* joint strpool id; UINT32_MAX for the root */
	uint32_t parent, depth, first_child, n_children;
	uint64_t count[2]; /* [0] BASE, [1] NEW samples in this subtree */
	uint64_t x;        /* samples of the width side left of this node */
};

struct dtree {
	struct strpool names;
	struct dnode *n;
	size_t len, cap;
	struct u64map child;
	uint32_t *children;
	uint32_t max_depth;
	int side; /* 0: widths from BASE, 1: from NEW */
};

static int dnode_child(struct dtree *t, uint32_t parent, uint32_t name, uint32_t *out)
{
	uint64_t key = (uint64_t)parent << 32 | name, val;
	int err;

	if (!u64map_get(&t->child, key, &val)) {
		*out = (uint32_t)val;
		return 0;
	}
	if (t->len == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		struct dnode *nn = realloc(t->n, cap * sizeof(*nn));

		if (!nn)
			return -ENOMEM;
		t->n = nn;
		t->cap = cap;
	}
	if (t->len >= UINT32_MAX - 1)
		return -ENOMEM;
	err = u64map_put(&t->child, key, t->len);
	if (err)
		return err;
	t->n[t->len] = (struct dnode){ .name = name, .parent = parent,
				       .depth = t->n[parent].depth + 1 };
	if (t->n[t->len].depth > t->max_depth)
		t->max_depth = t->n[t->len].depth;
	*out = (uint32_t)t->len++;
	return 0;
}

static int add_side(struct dtree *t, const struct profile_stacks *s, int side)
{
	for (size_t i = 0; i < s->stacks.n; i++) {
		uint32_t len, cur = 0;
		const uint64_t *k = seqtab_key(&s->stacks, i, &len);
		uint64_t c = s->stacks.e[i].count;
		int err;

		t->n[0].count[side] += c;
		for (uint32_t j = 0; j < len; j++) {
			const char *nm = strpool_get(&s->names, (uint32_t)k[j]);
			uint32_t id;

			err = strpool_intern(&t->names, nm, strlen(nm), &id);
			if (!err)
				err = dnode_child(t, cur, id, &cur);
			if (err)
				return err;
			t->n[cur].count[side] += c;
		}
	}
	return 0;
}

static int cmp_dchild(const void *a, const void *b, void *arg)
{
	const struct dtree *t = arg;

	return strcmp(strpool_get(&t->names, t->n[*(const uint32_t *)a].name),
		      strpool_get(&t->names, t->n[*(const uint32_t *)b].name));
}

static int dlayout(struct dtree *t)
{
	uint32_t *fill;

	t->children = malloc(t->len * sizeof(*t->children));
	fill = calloc(t->len, sizeof(*fill));
	if (!t->children || !fill) {
		free(fill);
		return -ENOMEM;
	}
	for (size_t i = 1; i < t->len; i++)
		t->n[t->n[i].parent].n_children++;
	for (size_t i = 0, off = 0; i < t->len; i++) {
		t->n[i].first_child = (uint32_t)off;
		off += t->n[i].n_children;
	}
	for (size_t i = 1; i < t->len; i++)
		t->children[t->n[t->n[i].parent].first_child + fill[t->n[i].parent]++] = (uint32_t)i;
	free(fill);
	for (size_t i = 0; i < t->len; i++) {
		struct dnode *n = &t->n[i];
		uint64_t x = n->x;

		if (n->n_children > 1) /* children may be NULL (no child anywhere): no NULL + 0 */
			qsort_r(t->children + n->first_child, n->n_children, sizeof(uint32_t),
				cmp_dchild, t);
		for (uint32_t c = 0; c < n->n_children; c++) {
			struct dnode *ch = &t->n[t->children[n->first_child + c]];

			ch->x = x;
			x += ch->count[t->side];
		}
	}
	return 0;
}

/* Colour of a node: white when not significant, else red (grew) or blue (shrank). */
static void diff_color(const struct dtree *t, const struct dnode *n, uint64_t min_samples,
		       double z_crit, char *buf, size_t len, double *bs, double *ns, double *z)
{
	double B = (double)t->n[0].count[0], N = (double)t->n[0].count[1];
	double b = (double)n->count[0], nn = (double)n->count[1], pool, se, rel, v;

	*bs = B > 0 ? b / B : 0;
	*ns = N > 0 ? nn / N : 0;
	*z = 0;
	if (B > 0 && N > 0) {
		pool = (b + nn) / (B + N);
		se = sqrt(pool * (1 - pool) * (1 / B + 1 / N));
		*z = se > 0 ? (*ns - *bs) / se : 0;
	}
	if ((n->count[0] < min_samples && n->count[1] < min_samples) ||
	    fabs(*z) < z_crit) {
		snprintf(buf, len, "rgb(250,250,250)");
		return;
	}
	rel = *bs > 0 ? fabs(*ns - *bs) / *bs : 1.0;
	v = rel > 1.0 ? 1.0 : rel;
	/* at least a light tint, the deepest at a doubling or halving (or a new frame) */
	v = 0.25 + 0.75 * v;
	if (*ns > *bs)
		snprintf(buf, len, "rgb(255,%d,%d)", (int)(230 * (1 - v)), (int)(230 * (1 - v)));
	else
		snprintf(buf, len, "rgb(%d,%d,255)", (int)(230 * (1 - v)), (int)(230 * (1 - v)));
}

int profile_diff_flamegraph(const struct profile_stacks *base, const struct profile_stacks *new_,
			    const struct profile_diff_svg_options *opts,
			    const struct profile_sink *sink)
{
	int reverse = OPT(opts, reverse, 0) != 0;
	const char *title = OPT(opts, title, NULL);
	const char *base_name = OPT(opts, base_name, NULL);
	const char *new_name = OPT(opts, new_name, NULL);
	unsigned int width = OPT(opts, width, 0);
	uint64_t min_samples = OPT(opts, min_samples_set, 0) ? OPT(opts, min_samples, 0)
			       : OPT(opts, min_samples, 0)   ? OPT(opts, min_samples, 0)
							     : PROFILE_DIFF_MIN_SAMPLES;
	struct dtree t = { 0 };
	struct outbuf *ob = NULL;
	unsigned int height;
	size_t tested = 0;
	double scale, z_crit;
	int err;

	if (!base || !new_ || !sink || !sink->write)
		return -EINVAL;
	base_name = base_name ? base_name : "BASE";
	new_name = new_name ? new_name : "NEW";
	if (!width)
		width = 1200;
	if (width < 2 * PAD + 10)
		width = 2 * PAD + 10;
	t.side = reverse ? 0 : 1;
	t.cap = 1024;
	t.n = malloc(t.cap * sizeof(*t.n));
	if (!t.n) {
		err = -ENOMEM;
		goto out;
	}
	t.n[0] = (struct dnode){ .name = UINT32_MAX, .parent = UINT32_MAX };
	t.len = 1;
	err = add_side(&t, base, 0);
	if (!err)
		err = add_side(&t, new_, 1);
	if (!err)
		err = dlayout(&t);
	if (err)
		goto out;
	/* The same noise rule as profile_diff_compute(), over the frames of this graph. */
	for (size_t i = 1; i < t.len; i++)
		tested += t.n[i].count[0] >= min_samples || t.n[i].count[1] >= min_samples;
	z_crit = diff_z_crit(tested);
	ob = malloc(sizeof(*ob));
	if (!ob) {
		err = -ENOMEM;
		goto out;
	}
	outbuf_init(ob, sink);
	height = TOP + (t.max_depth + 1) * FRAME_H + BOTTOM;
	scale = (double)(width - 2 * PAD) / (double)(t.n[0].count[t.side] ? t.n[0].count[t.side] : 1);

	outbuf_puts(ob, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
	outbuf_printf(ob,
		      "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" "
		      "height=\"%u\" viewBox=\"0 0 %u %u\" onload=\"init()\">\n",
		      width, height, width, height);
	outbuf_puts(ob, "<style type=\"text/css\">text { font-family: monospace; font-size: 12px; "
			"fill: rgb(0,0,0); } #frames g:hover rect { stroke: black; stroke-width: 0.5; "
			"cursor: pointer; } .ctl { cursor: pointer; }</style>\n");
	outbuf_puts(ob, flamegraph_svg_script);
	outbuf_printf(ob, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"rgb(248,248,248)\"/>\n",
		      width, height);
	outbuf_printf(ob, "<text x=\"%u\" y=\"20\" text-anchor=\"middle\" style=\"font-size:16px\">",
		      width / 2);
	if (title) {
		xml_escape(ob, title);
	} else {
		outbuf_puts(ob, "Differential flamegraph, BASE \xe2\x86\x92 NEW");
	}
	outbuf_puts(ob, "</text>\n");
	outbuf_printf(ob, "<text id=\"subtitle\" x=\"%u\" y=\"36\" text-anchor=\"middle\">BASE = ",
		      width / 2);
	xml_escape(ob, base_name);
	outbuf_printf(ob, " (%" PRIu64 " samples), NEW = ", t.n[0].count[0]);
	xml_escape(ob, new_name);
	outbuf_printf(ob, " (%" PRIu64 " samples)</text>\n", t.n[0].count[1]);
	outbuf_printf(ob, "<text id=\"legend\" x=\"%u\" y=\"52\" text-anchor=\"middle\">widths: %s; "
			  "colour: share change BASE \xe2\x86\x92 NEW, red grew, blue shrank, white "
			  "not significant</text>\n",
		      width / 2, reverse ? "BASE (reverse: shows what vanished)" : "NEW");
	outbuf_printf(ob, "<text id=\"unzoom\" class=\"ctl\" x=\"%d\" y=\"68\" "
			  "style=\"opacity:0\">Reset Zoom</text>\n", PAD);
	outbuf_printf(ob, "<text id=\"search\" class=\"ctl\" x=\"%u\" y=\"68\" "
			  "text-anchor=\"end\">Search</text>\n", width - PAD);
	outbuf_printf(ob, "<text id=\"matched\" x=\"%u\" y=\"%u\" text-anchor=\"end\"> </text>\n",
		      width - PAD, height - 10);
	outbuf_printf(ob, "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n", PAD, height - 10);
	outbuf_printf(ob, "<g id=\"frames\" data-width=\"%u\">\n", width);
	for (size_t i = 0; i < t.len; i++) {
		const struct dnode *n = &t.n[i];
		const char *name = n->name == UINT32_MAX ? "all" : strpool_get(&t.names, n->name);
		double x = PAD + (double)n->x * scale, w = (double)n->count[t.side] * scale;
		double y = TOP + (double)(t.max_depth - n->depth) * FRAME_H, bs, ns, z;
		char fill[48];

		if (w < 0.1)
			continue;
		diff_color(&t, n, min_samples, z_crit, fill, sizeof(fill), &bs, &ns, &z);
		outbuf_printf(ob, "<g data-depth=\"%u\" data-name=\"", n->depth);
		xml_escape(ob, name);
		outbuf_puts(ob, "\"><title>");
		xml_escape(ob, name);
		outbuf_printf(ob, ": BASE %.2f%% (%" PRIu64 ") \xe2\x86\x92 NEW %.2f%% (%" PRIu64
				  "), %+.2f pp, z %.1f</title>",
			      100 * bs, n->count[0], 100 * ns, n->count[1], 100 * (ns - bs), z);
		outbuf_printf(ob, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
				  "fill=\"%s\" rx=\"2\" ry=\"2\"/>",
			      x, y, w, FRAME_H - 1, fill);
		outbuf_printf(ob, "<text x=\"%.2f\" y=\"%.1f\"></text></g>\n", x + 3,
			      y + FRAME_H - 4.5);
	}
	outbuf_puts(ob, "</g>\n</svg>\n");
	err = outbuf_flush(ob);
out:
	free(ob);
	free(t.n);
	free(t.children);
	u64map_free(&t.child);
	strpool_free(&t.names);
	return err;
}
