// SPDX-License-Identifier: MIT
// Folded stacks (flamegraph.pl input): "comm;outer;...;inner COUNT", kernel frames "_[k]".
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

struct line {
	char *text;
	uint64_t count;
};

struct sbuf {
	char *s;
	size_t len, cap;
};

static int sbuf_add(struct sbuf *b, const char *s, size_t len)
{
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 256;
		char *ns;

		while (cap < b->len + len + 1)
			cap *= 2;
		ns = realloc(b->s, cap);
		if (!ns)
			return -ENOMEM;
		b->s = ns;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, len);
	b->len += len;
	b->s[b->len] = '\0';
	return 0;
}

/* A frame name as folded-stack text: ';' separates frames, a newline ends the line. */
static int sbuf_add_name(struct sbuf *b, const char *name)
{
	size_t start = b->len;
	int err = sbuf_add(b, name, strlen(name));

	if (err)
		return err;
	for (size_t i = start; i < b->len; i++) {
		unsigned char c = (unsigned char)b->s[i];

		if (c == ';')
			b->s[i] = ':';
		else if (c < 0x20 || c == 0x7f)
			b->s[i] = '?';
	}
	return 0;
}

static int cmp_line(const void *a, const void *b)
{
	const struct line *la = a, *lb = b;

	if (la->count != lb->count)
		return la->count > lb->count ? -1 : 1;
	return strcmp(la->text, lb->text);
}

int profile_folded(const struct profile *p, const struct profile_sink *sink)
{
	struct seqtab folded = { 0 };
	struct line *lines = NULL;
	struct sbuf b = { 0 };
	struct outbuf *ob = NULL;
	size_t n_lines = 0;
	int err = 0;

	if (!p || !sink || !sink->write)
		return -EINVAL;
	/* The same stack of different pids of one comm is one line: merge without pid/tgid. */
	for (size_t i = 0; i < p->stacks.n && !err; i++) {
		uint32_t len;
		const uint64_t *k = seqtab_key(&p->stacks, i, &len);

		err = seqtab_add(&folded, k + STACK_KEY_FRAMES, len - STACK_KEY_FRAMES,
				 p->stacks.e[i].count, p->stacks.e[i].period, NULL);
	}
	if (err)
		goto out;
	lines = calloc(folded.n ? folded.n : 1, sizeof(*lines));
	if (!lines) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < folded.n && !err; i++) {
		uint32_t len;
		const uint64_t *k = seqtab_key(&folded, i, &len);

		b.len = 0;
		for (uint32_t j = 0; j < len && !err; j++) {
			const struct frame *f = &p->frames[k[j]];

			if (j)
				err = sbuf_add(&b, ";", 1);
			if (!err)
				err = sbuf_add_name(&b, strpool_get(&p->strs, f->name));
			if (!err && f->kind == FRAME_KERNEL)
				err = sbuf_add(&b, "_[k]", 4);
		}
		if (err)
			break;
		lines[i].text = strdup(b.s ? b.s : "");
		if (!lines[i].text) {
			err = -ENOMEM;
			break;
		}
		lines[i].count = folded.e[i].count;
		n_lines++;
	}
	if (err)
		goto out;
	if (n_lines > 1) /* qsort's array may not be NULL, even for 0 elements */
		qsort(lines, n_lines, sizeof(*lines), cmp_line);

	ob = malloc(sizeof(*ob));
	if (!ob) {
		err = -ENOMEM;
		goto out;
	}
	outbuf_init(ob, sink);
	for (size_t i = 0; i < n_lines; i++)
	{
		outbuf_puts(ob, lines[i].text);
		outbuf_printf(ob, " %" PRIu64 "\n", lines[i].count);
	}
	err = outbuf_flush(ob);
out:
	free(ob);
	for (size_t i = 0; i < n_lines; i++)
		free(lines[i].text);
	free(lines);
	free(b.s);
	seqtab_free(&folded);
	return err;
}
