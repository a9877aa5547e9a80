// SPDX-License-Identifier: MIT
// `perf script` text: per kept sample an event line and one line per frame, leaf first, in the
// default format that stackcollapse-perf.pl, speedscope and Firefox Profiler parse.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"

/*
 * The comm as perf prints it, made safe for the event-line parsers: control bytes become '?',
 * leading blanks are dropped (a line starting with a blank is a frame line), and an empty comm
 * is "[unknown]". Returns @buf.
 */
static const char *script_comm(const char *comm, char *buf, size_t len)
{
	size_t n = 0;

	while (*comm == ' ')
		comm++;
	for (; *comm && n + 1 < len; comm++)
		buf[n++] = (unsigned char)*comm < 0x20 || *comm == 0x7f ? '?' : *comm;
	buf[n] = '\0';
	return n ? buf : "[unknown]";
}

/* A frame or DSO name on a frame line: no newline, and no ')' that would end the DSO early. */
static void script_name(struct outbuf *ob, const char *s)
{
	const char *run = s;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c >= 0x20 && c != 0x7f)
			continue;
		outbuf_write(ob, run, (size_t)(s - run));
		outbuf_puts(ob, "?");
		run = s + 1;
	}
	outbuf_write(ob, run, (size_t)(s - run));
}

/* A growable byte arena, written through a profile_sink. */
struct arena {
	char *data;
	size_t len, cap;
};

static int arena_write(void *ctx, const void *buf, size_t len)
{
	struct arena *a = ctx;

	if (a->len + len > a->cap) {
		size_t cap = a->cap ? a->cap : 1 << 16;
		char *d;

		while (cap < a->len + len)
			cap *= 2;
		d = realloc(a->data, cap);
		if (!d)
			return -ENOMEM;
		a->data = d;
		a->cap = cap;
	}
	memcpy(a->data + a->len, buf, len);
	a->len += len;
	return 0;
}

/* Decimal digits of @v, at least @min_digits (zero-padded), at @out; returns the length. */
static size_t put_u64(char *out, uint64_t v, unsigned int min_digits)
{
	char tmp[20];
	size_t n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v || n < min_digits);
	for (size_t i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

/* "[cpu] secs.usecs: period event:\n" without printf (it runs once per sample). */
static size_t sample_line(char *out, size_t cap, uint32_t vcpu, uint64_t time_ns, uint64_t period,
			  const char *event)
{
	size_t n = 0, elen = strlen(event);

	if (elen > cap - 80)
		elen = cap - 80; /* 80 bytes cover the numbers and punctuation */
	out[n++] = '[';
	n += put_u64(out + n, vcpu, 3);
	out[n++] = ']';
	out[n++] = ' ';
	n += put_u64(out + n, time_ns / 1000000000u, 1);
	out[n++] = '.';
	n += put_u64(out + n, time_ns / 1000u % 1000000u, 6);
	out[n++] = ':';
	out[n++] = ' ';
	n += put_u64(out + n, period, 1);
	out[n++] = ' ';
	memcpy(out + n, event, elen);
	n += elen;
	out[n++] = ':';
	out[n++] = '\n';
	return n;
}

/* The frame lines of one distinct located stack, leaf first, as perf script prints them. */
static void format_frames(const struct profile *p, struct outbuf *ob, const uint64_t *k,
			  uint32_t len)
{
	/* SAFETY: k[LSTACK_KEY_LOCS] is the comm's loc (not a frame line); the others are loc
	 * ids < p->n_locs, written leaf first. */
	for (uint32_t j = len; j-- > LSTACK_KEY_LOCS + 1;) {
		const struct loc *l = &p->locs[k[j]];
		const struct frame *f = &p->frames[l->frame];

		outbuf_printf(ob, "\t%16" PRIx64 " ", l->ip);
		script_name(ob, strpool_get(&p->strs, f->name));
		if (l->sym_off != UINT64_MAX)
			outbuf_printf(ob, "+0x%" PRIx64, l->sym_off);
		outbuf_puts(ob, " (");
		script_name(ob, strpool_get(&p->strs, f->dso));
		outbuf_puts(ob, ")\n");
	}
	outbuf_puts(ob, "\n");
}

int profile_perf_script(const struct profile *p, const struct profile_sink *sink)
{
	struct arena arena = { 0 };
	struct profile_sink to_arena = { .write = arena_write, .ctx = &arena };
	struct outbuf *ob, *fb;
	const char *event;
	size_t *blk = NULL; /* per distinct located stack: offset + 1 and length of its header
			     * prefix and of its frame lines in the arena */
	int err;

	if (!p || !sink || !sink->write)
		return -EINVAL;
	if (!p->kept_samples)
		return -ENODATA;
	event = profile_meta(p, "counter");
	if (!event || !event[0])
		event = "cpu-clock";
	ob = malloc(sizeof(*ob));
	fb = malloc(sizeof(*fb));
	blk = calloc(p->lstacks.n ? p->lstacks.n : 1, 4 * sizeof(*blk));
	if (!ob || !fb || !blk) {
		err = -ENOMEM;
		goto out;
	}
	outbuf_init(ob, sink);
	for (size_t i = 0; i < p->n_samples && !ob->err; i++) {
		const struct psample *s = &p->samples[i];
		size_t *b = &blk[4 * (size_t)s->lstack];
		char line[128];
		size_t n;

		/* "comm pid/tid " and the frame lines depend only on the located stack: formatted
		 * once each (memory grows with distinct stacks), then copied per sample. */
		if (!b[0]) {
			uint32_t len, slen;
			const uint64_t *k = seqtab_key(&p->lstacks, s->lstack, &len);
			const uint64_t *sk = seqtab_key(&p->stacks, k[0], &slen);
			char comm[64];
			size_t start = arena.len;

			outbuf_init(fb, &to_arena);
			/* pid = tgid, tid = pid, as perf script prints them */
			outbuf_printf(fb, "%s %" PRId32 "/%" PRId32 " ",
				      script_comm(frame_name(p, (uint32_t)sk[STACK_KEY_FRAMES]), comm,
						  sizeof(comm)),
				      (int32_t)sk[1], (int32_t)sk[0]);
			err = outbuf_flush(fb);
			if (err)
				goto out;
			b[0] = start + 1;
			b[1] = arena.len - start;
			start = arena.len;
			outbuf_init(fb, &to_arena);
			format_frames(p, fb, k, len);
			err = outbuf_flush(fb);
			if (err)
				goto out;
			b[2] = start + 1;
			b[3] = arena.len - start;
		}
		/* "[cpu] secs.usecs: period event:" */
		n = sample_line(line, sizeof(line), s->vcpu, s->time_ns, s->period, event);
		outbuf_write(ob, arena.data + b[0] - 1, b[1]);
		outbuf_write(ob, line, n);
		outbuf_write(ob, arena.data + b[2] - 1, b[3]);
	}
	err = outbuf_flush(ob);
out:
	free(arena.data);
	free(blk);
	free(fb);
	free(ob);
	return err;
}
