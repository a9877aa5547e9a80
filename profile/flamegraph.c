// SPDX-License-Identifier: MIT
// Self-contained interactive SVG flamegraph (our own code, in the manner of flamegraph.pl):
// a tree of frames merged by prefix, root at the bottom, with embedded JavaScript for
// details on hover, zoom on click, and regex search with the matched share.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

#define FRAME_H 16       /* pixels per stack level */
#define PAD 10           /* left/right margin (pixels) */
#define TOP 60           /* title, subtitle and controls */
#define BOTTOM 30        /* details line */
#define FONT_SIZE 12
#define CHAR_W 7.0       /* average glyph width at FONT_SIZE for fitting labels */
#define ROOT_FRAME UINT32_MAX

struct fnode {
	uint32_t frame;      /* frame id, ROOT_FRAME for "all" */
	uint32_t parent;
	uint32_t depth;
	uint32_t first_child; /* index into children[] */
	uint32_t n_children;
	uint64_t total;      /* samples in this subtree */
	uint64_t x;          /* samples left of this node (layout) */
};

struct tree {
	struct fnode *n;
	size_t len, cap;
	struct u64map child; /* (parent << 32 | frame) -> node index */
	uint32_t *children;
	uint32_t max_depth;
};

static int node_child(struct tree *t, uint32_t parent, uint32_t frame, uint32_t *out)
{
	uint64_t key = (uint64_t)parent << 32 | frame, val;
	int err;

	if (!u64map_get(&t->child, key, &val)) {
		*out = (uint32_t)val;
		return 0;
	}
	if (t->len == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		struct fnode *nn = realloc(t->n, cap * sizeof(*nn));

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
	t->n[t->len] = (struct fnode){ .frame = frame, .parent = parent,
				       .depth = t->n[parent].depth + 1 };
	if (t->n[t->len].depth > t->max_depth)
		t->max_depth = t->n[t->len].depth;
	*out = (uint32_t)t->len++;
	return 0;
}

static int build_tree(const struct profile *p, struct tree *t)
{
	int err;

	t->cap = 1024;
	t->n = malloc(t->cap * sizeof(*t->n));
	if (!t->n)
		return -ENOMEM;
	t->n[0] = (struct fnode){ .frame = ROOT_FRAME, .parent = UINT32_MAX };
	t->len = 1;
	for (size_t i = 0; i < p->stacks.n; i++) {
		uint32_t len, cur = 0;
		const uint64_t *k = seqtab_key(&p->stacks, i, &len);
		uint64_t count = p->stacks.e[i].count;

		t->n[0].total += count;
		for (uint32_t j = STACK_KEY_FRAMES; j < len; j++) {
			err = node_child(t, cur, (uint32_t)k[j], &cur);
			if (err)
				return err;
			t->n[cur].total += count;
		}
	}
	return 0;
}

/* Children ordered by name (as flamegraph.pl), then kind and DSO, so output is deterministic. */
static int cmp_child(const void *a, const void *b, void *arg)
{
	const struct profile *p = ((const void **)arg)[0];
	const struct tree *t = ((const void **)arg)[1];
	const struct frame *fa = &p->frames[t->n[*(const uint32_t *)a].frame];
	const struct frame *fb = &p->frames[t->n[*(const uint32_t *)b].frame];
	int c = strcmp(strpool_get(&p->strs, fa->name), strpool_get(&p->strs, fb->name));

	if (c)
		return c;
	if (fa->kind != fb->kind)
		return fa->kind < fb->kind ? -1 : 1;
	return strcmp(strpool_get(&p->strs, fa->dso), strpool_get(&p->strs, fb->dso));
}

static int layout(const struct profile *p, struct tree *t)
{
	const void *ctx[2] = { p, t };
	uint32_t *fill;

	t->children = malloc(t->len * sizeof(*t->children));
	fill = calloc(t->len, sizeof(*fill));
	if (!t->children || !fill) {
		free(fill);
		return -ENOMEM;
	}
	/* Counting sort of nodes by parent: each node's children are one contiguous run. */
	for (size_t i = 1; i < t->len; i++)
		t->n[t->n[i].parent].n_children++;
	for (size_t i = 0, off = 0; i < t->len; i++) {
		t->n[i].first_child = (uint32_t)off;
		off += t->n[i].n_children;
	}
	for (size_t i = 1; i < t->len; i++) {
		struct fnode *par = &t->n[t->n[i].parent];

		t->children[par->first_child + fill[t->n[i].parent]++] = (uint32_t)i;
	}
	free(fill);
	/* Parents are created before their children, so one pass in index order places all. */
	for (size_t i = 0; i < t->len; i++) {
		struct fnode *n = &t->n[i];
		uint64_t x = n->x;

		if (n->n_children > 1) /* children may be NULL (no child anywhere): no NULL + 0 */
			qsort_r(t->children + n->first_child, n->n_children, sizeof(uint32_t),
				cmp_child, ctx);
		for (uint32_t c = 0; c < n->n_children; c++) {
			struct fnode *ch = &t->n[t->children[n->first_child + c]];

			ch->x = x;
			x += ch->total;
		}
	}
	return 0;
}

/* XML text or attribute value: escape markup, replace control bytes and invalid UTF-8. */
void xml_escape(struct outbuf *ob, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;

	while (*u) {
		unsigned char c = *u;
		size_t seq = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
				 : (c & 0xf8) == 0xf0 ? 4 : 0;

		if (c == '&')
			outbuf_puts(ob, "&amp;");
		else if (c == '<')
			outbuf_puts(ob, "&lt;");
		else if (c == '>')
			outbuf_puts(ob, "&gt;");
		else if (c == '"')
			outbuf_puts(ob, "&quot;");
		else if (c == '\'')
			outbuf_puts(ob, "&apos;");
		else if (c < 0x20 || c == 0x7f)
			outbuf_puts(ob, "?");
		else if (seq == 1)
			outbuf_write(ob, (const char *)u, 1);
		else {
			size_t k = 1;

			/* SAFETY: stops at the first non-continuation byte, so never past the NUL. */
			while (seq && k < seq && (u[k] & 0xc0) == 0x80)
				k++;
			if (!seq || k < seq || (c == 0xc0 || c == 0xc1 || c > 0xf4)) {
				outbuf_puts(ob, "?");
				u += k;
				continue;
			}
			outbuf_write(ob, (const char *)u, seq);
			u += seq;
			continue;
		}
		u++;
	}
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

const char flamegraph_svg_script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"'use strict';\n"
	"var W, PAD = " "10" ", details, matchedtxt, unzoombtn, frames = [], searching = null;\n"
	"function init() {\n"
	"  W = +document.getElementById('frames').getAttribute('data-width');\n"
	"  details = document.getElementById('details').firstChild;\n"
	"  matchedtxt = document.getElementById('matched');\n"
	"  unzoombtn = document.getElementById('unzoom');\n"
	"  var gs = document.getElementById('frames').getElementsByTagName('g');\n"
	"  for (var i = 0; i < gs.length; i++) {\n"
	"    var g = gs[i], r = g.getElementsByTagName('rect')[0], t = g.getElementsByTagName('text')[0];\n"
	"    var f = { g: g, r: r, t: t, x: +r.getAttribute('x'), w: +r.getAttribute('width'),\n"
	"      d: +g.getAttribute('data-depth'), name: g.getAttribute('data-name'),\n"
	"      info: g.getElementsByTagName('title')[0].textContent, fill: r.getAttribute('fill') };\n"
	"    frames.push(f);\n"
	"    g.addEventListener('mouseover', (function (f) { return function () { details.nodeValue = f.info; }; })(f));\n"
	"    g.addEventListener('mouseout', function () { details.nodeValue = ' '; });\n"
	"    g.addEventListener('click', (function (f) { return function () { zoom(f); }; })(f));\n"
	"    fit(f, f.x, f.w);\n"
	"  }\n"
	"  document.getElementById('unzoom').addEventListener('click', unzoom);\n"
	"  document.getElementById('search').addEventListener('click', function () { searching ? reset_search() : search_prompt(); });\n"
	"  window.addEventListener('keydown', function (e) {\n"
	"    if (e.keyCode === 114 || ((e.ctrlKey || e.metaKey) && e.keyCode === 70)) { e.preventDefault(); search_prompt(); }\n"
	"    else if (e.keyCode === 27) { unzoom(); reset_search(); }\n"
	"  });\n"
	"}\n"
	"function fit(f, x, w) {\n"
	"  f.r.setAttribute('x', x); f.r.setAttribute('width', w);\n"
	"  f.t.setAttribute('x', x + 3);\n"
	"  var n = Math.floor((w - 6) / " "7" ");\n"
	"  f.t.textContent = n < 3 ? '' : (f.name.length <= n ? f.name : f.name.substring(0, n - 2) + '..');\n"
	"}\n"
	"function zoom(z) {\n"
	"  var scale = (W - 2 * PAD) / z.w;\n"
	"  for (var i = 0; i < frames.length; i++) {\n"
	"    var f = frames[i], inside = f.x >= z.x - 0.0001 && f.x + f.w <= z.x + z.w + 0.0001;\n"
	"    var ancestor = f.d < z.d && f.x <= z.x + 0.0001 && f.x + f.w >= z.x + z.w - 0.0001;\n"
	"    if (f.d >= z.d && inside) { f.g.style.display = ''; f.g.style.opacity = 1; fit(f, PAD + (f.x - z.x) * scale, f.w * scale); }\n"
	"    else if (ancestor) { f.g.style.display = ''; f.g.style.opacity = 0.5; fit(f, PAD, W - 2 * PAD); }\n"
	"    else f.g.style.display = 'none';\n"
	"  }\n"
	"  unzoombtn.style.opacity = 1;\n"
	"}\n"
	"function unzoom() {\n"
	"  for (var i = 0; i < frames.length; i++) {\n"
	"    var f = frames[i]; f.g.style.display = ''; f.g.style.opacity = 1; fit(f, f.x, f.w);\n"
	"  }\n"
	"  unzoombtn.style.opacity = 0;\n"
	"}\n"
	"function search_prompt() {\n"
	"  var term = prompt('Search for (regular expression, or plain text if not one):', searching || '');\n"
	"  if (term) search(term);\n"
	"}\n"
	"function search(term) {\n"
	"  var re = null;\n"
	"  try { re = new RegExp(term); } catch (e) { re = null; }\n"
	"  var spans = [], total = frames.length ? frames[0].w : 1;\n"
	"  for (var i = 0; i < frames.length; i++) {\n"
	"    var f = frames[i], hit = f.d > 0 && (re ? re.test(f.name) : f.name.indexOf(term) >= 0);\n"
	"    f.r.setAttribute('fill', hit ? 'rgb(230,0,230)' : f.fill);\n"
	"    if (hit) spans.push([f.x, f.x + f.w]);\n"
	"  }\n"
	"  spans.sort(function (a, b) { return a[0] - b[0]; });\n"
	"  var sum = 0, end = -1;\n"
	"  for (var j = 0; j < spans.length; j++) {\n"
	"    var s = Math.max(spans[j][0], end);\n"
	"    if (spans[j][1] > s) sum += spans[j][1] - s;\n"
	"    end = Math.max(end, spans[j][1]);\n"
	"  }\n"
	"  searching = term;\n"
	"  document.getElementById('search').textContent = 'Reset Search';\n"
	"  matchedtxt.textContent = 'Matched: ' + (100 * sum / total).toFixed(2) + '%';\n"
	"}\n"
	"function reset_search() {\n"
	"  for (var i = 0; i < frames.length; i++) frames[i].r.setAttribute('fill', frames[i].fill);\n"
	"  searching = null;\n"
	"  document.getElementById('search').textContent = 'Search';\n"
	"  matchedtxt.textContent = ' ';\n"
	"}\n"
	"]]></script>\n";

static void write_frame(struct outbuf *ob, const struct profile *p, const struct tree *t,
			const struct fnode *n, unsigned int width, double min_width)
{
	const struct fnode *root = &t->n[0];
	double scale = (double)(width - 2 * PAD) / (double)(root->total ? root->total : 1);
	double x = PAD + (double)n->x * scale, w = (double)n->total * scale;
	double y = TOP + (double)(t->max_depth - n->depth) * FRAME_H;
	double pct = 100.0 * (double)n->total / (double)(root->total ? root->total : 1);
	const struct frame *f = n->frame == ROOT_FRAME ? NULL : &p->frames[n->frame];
	const char *name = f ? strpool_get(&p->strs, f->name) : "all";
	const char *tag = !f || f->kind == FRAME_COMM ? "" : f->kind == FRAME_KERNEL ? "[k] " : "[.] ";
	char fill[48];

	if (w < min_width)
		return;
	if (f)
		color_of(p, f, fill, sizeof(fill));
	else
		snprintf(fill, sizeof(fill), "rgb(200,200,200)");
	outbuf_printf(ob, "<g data-depth=\"%u\" data-name=\"", n->depth);
	xml_escape(ob, name);
	outbuf_puts(ob, "\"><title>");
	outbuf_puts(ob, tag);
	xml_escape(ob, name);
	if (f && f->kind != FRAME_COMM) {
		outbuf_puts(ob, " (");
		xml_escape(ob, strpool_get(&p->strs, f->dso));
		outbuf_puts(ob, ")");
	}
	outbuf_printf(ob, ": %" PRIu64 " samples, %.2f%%</title>", n->total, pct);
	outbuf_printf(ob, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\" "
			  "rx=\"2\" ry=\"2\"/>",
		      x, y, w, FRAME_H - 1, fill);
	outbuf_printf(ob, "<text x=\"%.2f\" y=\"%.1f\"></text></g>\n", x + 3, y + FRAME_H - 4.5);
}

int profile_flamegraph(const struct profile *p, const struct profile_flamegraph_options *opts,
		       const struct profile_sink *sink)
{
	const char *title = OPT(opts, title, NULL);
	unsigned int width = OPT(opts, width, 0);
	double min_width = OPT(opts, min_width, 0.0);
	char facts[FACT_MAX][FACT_LINE];
	struct tree t = { 0 };
	struct outbuf *ob = NULL;
	unsigned int height;
	size_t n_facts;
	int err;

	if (!p || !sink || !sink->write)
		return -EINVAL;
	if (!width)
		width = 1200;
	if (width < 2 * PAD + 10)
		width = 2 * PAD + 10;
	if (min_width <= 0)
		min_width = 0.1;
	err = build_tree(p, &t);
	if (!err)
		err = layout(p, &t);
	if (err)
		goto out;
	ob = malloc(sizeof(*ob));
	if (!ob) {
		err = -ENOMEM;
		goto out;
	}
	outbuf_init(ob, sink);
	height = TOP + (t.max_depth + 1) * FRAME_H + BOTTOM;
	n_facts = profile_facts(p, facts, FACT_MAX);

	outbuf_puts(ob, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
	outbuf_printf(ob,
		      "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" "
		      "height=\"%u\" viewBox=\"0 0 %u %u\" onload=\"init()\">\n",
		      width, height, width, height);
	outbuf_puts(ob, "<style type=\"text/css\">text { font-family: monospace; font-size: 12px; "
			"fill: rgb(0,0,0); } #frames g:hover rect { stroke: black; stroke-width: 0.5; "
			"cursor: pointer; } .ctl { cursor: pointer; }</style>\n");
	outbuf_puts(ob, flamegraph_svg_script);
	outbuf_printf(ob, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"rgb(248,248,240)\"/>\n",
		      width, height);
	outbuf_printf(ob, "<text x=\"%u\" y=\"20\" text-anchor=\"middle\" style=\"font-size:16px\">",
		      width / 2);
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
	/* Subtitle: the first facts (samples, lost, event), joined; the rest in a <desc>. */
	outbuf_printf(ob, "<text x=\"%u\" y=\"36\" text-anchor=\"middle\">", width / 2);
	for (size_t i = 0; i < n_facts && i < 3; i++) {
		if (i)
			outbuf_puts(ob, "; ");
		xml_escape(ob, facts[i]);
	}
	outbuf_puts(ob, "</text>\n<desc>");
	for (size_t i = 0; i < n_facts; i++) {
		xml_escape(ob, facts[i]);
		outbuf_puts(ob, "\n");
	}
	outbuf_puts(ob, "</desc>\n");
	outbuf_printf(ob, "<text id=\"unzoom\" class=\"ctl\" x=\"%d\" y=\"52\" "
			  "style=\"opacity:0\">Reset Zoom</text>\n", PAD);
	outbuf_printf(ob, "<text id=\"search\" class=\"ctl\" x=\"%u\" y=\"52\" "
			  "text-anchor=\"end\">Search</text>\n", width - PAD);
	outbuf_printf(ob, "<text id=\"matched\" x=\"%u\" y=\"%u\" text-anchor=\"end\"> </text>\n",
		      width - PAD, height - 10);
	outbuf_printf(ob, "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n", PAD, height - 10);
	outbuf_printf(ob, "<g id=\"frames\" data-width=\"%u\">\n", width);
	for (size_t i = 0; i < t.len; i++)
		write_frame(ob, p, &t, &t.n[i], width, min_width);
	outbuf_puts(ob, "</g>\n</svg>\n");
	err = outbuf_flush(ob);
out:
	free(ob);
	free(t.n);
	free(t.children);
	u64map_free(&t.child);
	return err;
}
