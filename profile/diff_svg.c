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

#define TOP 76    /* title, subtitle, legend and controls */
#define BOTTOM 30 /* details line */

/* Add the stacks of @s on @side to @t, their frame names interned in @names (both sides'). */
static int add_side(struct flametree *t, struct strpool *names, const struct profile_stacks *s,
		    int side)
{
	uint64_t *ids = NULL;
	size_t cap = 0;
	int err = 0;

	for (size_t i = 0; i < s->stacks.n && !err; i++) {
		uint32_t len;
		const uint64_t *k = seqtab_key(&s->stacks, i, &len);

		if (len > cap) {
			uint64_t *nids = realloc(ids, len * sizeof(*ids));

			if (!nids) {
				err = -ENOMEM;
				break;
			}
			ids = nids;
			cap = len;
		}
		for (uint32_t j = 0; j < len && !err; j++) {
			const char *nm = strpool_get(&s->names, (uint32_t)k[j]);
			char comm[64];
			uint32_t id;

			if (!j) /* as the tables compare it (diff.c) */
				nm = diff_comm_name(nm, comm, sizeof(comm));
			err = strpool_intern(names, nm, strlen(nm), &id);
			ids[j] = id;
		}
		if (!err)
			err = flametree_add(t, side, ids, len, s->stacks.e[i].count);
	}
	free(ids);
	return err;
}

static int cmp_dchild(const struct flamenode *a, const struct flamenode *b, const void *arg)
{
	const struct strpool *names = arg;

	return strcmp(strpool_get(names, a->id), strpool_get(names, b->id));
}

/* Colour of a node: white when not significant, else red (grew) or blue (shrank). */
static void diff_color(const struct flametree *t, const struct flamenode *n, uint64_t min_samples,
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

static void write_frame(struct outbuf *ob, const struct flametree *t, const struct strpool *names,
			const struct flamenode *n, int side, unsigned int width,
			uint64_t min_samples, double z_crit)
{
	const char *name = n->id == FLAMETREE_ROOT ? "all" : strpool_get(names, n->id);
	double x, y, w, bs, ns, z;
	char fill[48];

	flamesvg_place(t, n, side, width, TOP, &x, &y, &w);
	if (w < 0.1)
		return;
	diff_color(t, n, min_samples, z_crit, fill, sizeof(fill), &bs, &ns, &z);
	flamesvg_frame_begin(ob, n->depth, name);
	xml_escape(ob, name);
	outbuf_printf(ob, ": BASE %.2f%% (%" PRIu64 ") \xe2\x86\x92 NEW %.2f%% (%" PRIu64
			  "), %+.2f pp, z %.1f",
		      100 * bs, n->count[0], 100 * ns, n->count[1], 100 * (ns - bs), z);
	flamesvg_frame_end(ob, x, y, w, fill);
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
	int side = reverse ? 0 : 1; /* the side that gives the widths */
	struct strpool names = { 0 };
	struct flametree t = { 0 };
	struct outbuf *ob = NULL;
	unsigned int height;
	size_t tested = 0;
	double z_crit;
	int err;

	if (!base || !new_ || !sink || !sink->write)
		return -EINVAL;
	base_name = base_name ? base_name : "BASE";
	new_name = new_name ? new_name : "NEW";
	if (!width)
		width = 1200;
	if (width < 2 * FLAMESVG_PAD + 10)
		width = 2 * FLAMESVG_PAD + 10;
	err = flametree_init(&t);
	if (!err)
		err = add_side(&t, &names, base, 0);
	if (!err)
		err = add_side(&t, &names, new_, 1);
	if (!err)
		err = flametree_layout(&t, side, cmp_dchild, &names);
	if (err)
		goto out;
	/* The same noise rule as profile_diff_compute(), over the frames of this graph. */
	for (size_t i = 1; i < t.len; i++)
		tested += t.n[i].count[0] >= min_samples || t.n[i].count[1] >= min_samples;
	z_crit = diff_z_crit(tested);
	/* One run a side: run-to-run noise unknown, the factor of profile_diff_compute(). */
	if (OPT(opts, noise_factor, 0.0) >= 1)
		z_crit *= OPT(opts, noise_factor, 0.0);
	ob = malloc(sizeof(*ob));
	if (!ob) {
		err = -ENOMEM;
		goto out;
	}
	outbuf_init(ob, sink);
	height = TOP + (t.max_depth + 1) * FLAMESVG_FRAME_H + BOTTOM;

	flamesvg_begin(ob, width, height, "rgb(248,248,248)");
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
	flamesvg_controls(ob, width, height, 68);
	for (size_t i = 0; i < t.len; i++)
		write_frame(ob, &t, &names, &t.n[i], side, width, min_samples, z_crit);
	flamesvg_end(ob);
	err = outbuf_flush(ob);
out:
	free(ob);
	flametree_free(&t);
	strpool_free(&names);
	return err;
}
