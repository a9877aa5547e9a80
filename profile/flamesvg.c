// SPDX-License-Identifier: MIT
// The SVG both flamegraphs share (our own code, in the manner of flamegraph.pl): the page, the
// embedded JavaScript for details on hover, zoom on click and regex search with the matched
// share, and the frame boxes (root at the bottom).
#include <inttypes.h>
#include <stdio.h>

#include "profile_internal.h"

#define CHAR_W_PX 7 /* average glyph width at the 12 px font, for fitting labels */
#define STR_(x) #x
#define STR(x) STR_(x)

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

/* The interaction (hover, zoom, search, reset), with FLAMESVG_PAD and CHAR_W_PX. */
static const char script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"'use strict';\n"
	"var W, PAD = " STR(FLAMESVG_PAD) ", details, matchedtxt, unzoombtn, frames = [], searching = null;\n"
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
	"  var n = Math.floor((w - 6) / " STR(CHAR_W_PX) ");\n"
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

void flamesvg_begin(struct outbuf *ob, unsigned int width, unsigned int height, const char *bg)
{
	outbuf_puts(ob, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
	outbuf_printf(ob,
		      "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" "
		      "height=\"%u\" viewBox=\"0 0 %u %u\" onload=\"init()\">\n",
		      width, height, width, height);
	outbuf_puts(ob, "<style type=\"text/css\">text { font-family: monospace; font-size: 12px; "
			"fill: rgb(0,0,0); } #frames g:hover rect { stroke: black; stroke-width: 0.5; "
			"cursor: pointer; } .ctl { cursor: pointer; }</style>\n");
	outbuf_puts(ob, script);
	outbuf_printf(ob, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"%s\"/>\n",
		      width, height, bg);
	outbuf_printf(ob, "<text x=\"%u\" y=\"20\" text-anchor=\"middle\" style=\"font-size:16px\">",
		      width / 2);
}

void flamesvg_controls(struct outbuf *ob, unsigned int width, unsigned int height,
		       unsigned int ctl_y)
{
	outbuf_printf(ob, "<text id=\"unzoom\" class=\"ctl\" x=\"%d\" y=\"%u\" "
			  "style=\"opacity:0\">Reset Zoom</text>\n", FLAMESVG_PAD, ctl_y);
	outbuf_printf(ob, "<text id=\"search\" class=\"ctl\" x=\"%u\" y=\"%u\" "
			  "text-anchor=\"end\">Search</text>\n", width - FLAMESVG_PAD, ctl_y);
	outbuf_printf(ob, "<text id=\"matched\" x=\"%u\" y=\"%u\" text-anchor=\"end\"> </text>\n",
		      width - FLAMESVG_PAD, height - 10);
	outbuf_printf(ob, "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n", FLAMESVG_PAD,
		      height - 10);
	outbuf_printf(ob, "<g id=\"frames\" data-width=\"%u\">\n", width);
}

void flamesvg_place(const struct flametree *t, const struct flamenode *n, int side,
		    unsigned int width, unsigned int top, double *x, double *y, double *w)
{
	uint64_t total = t->n[0].count[side];
	double scale = (double)(width - 2 * FLAMESVG_PAD) / (double)(total ? total : 1);

	*x = FLAMESVG_PAD + (double)n->x * scale;
	*w = (double)n->count[side] * scale;
	*y = top + (double)(t->max_depth - n->depth) * FLAMESVG_FRAME_H;
}

void flamesvg_frame_begin(struct outbuf *ob, uint32_t depth, const char *name)
{
	outbuf_printf(ob, "<g data-depth=\"%u\" data-name=\"", depth);
	xml_escape(ob, name);
	outbuf_puts(ob, "\"><title>");
}

void flamesvg_frame_end(struct outbuf *ob, double x, double y, double w, const char *fill)
{
	outbuf_printf(ob, "</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
			  "fill=\"%s\" rx=\"2\" ry=\"2\"/>",
		      x, y, w, FLAMESVG_FRAME_H - 1, fill);
	outbuf_printf(ob, "<text x=\"%.2f\" y=\"%.1f\"></text></g>\n", x + 3,
		      y + FLAMESVG_FRAME_H - 4.5);
}

void flamesvg_end(struct outbuf *ob)
{
	outbuf_puts(ob, "</g>\n</svg>\n");
}
