// SPDX-License-Identifier: MIT
// Buffered formatted output to a profile_sink (an fd or a callback), with a sticky error.
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/file.h>

#include "profile_internal.h"

static int fd_write(void *ctx, const void *buf, size_t len)
{
	return hvp_write_all((int)(intptr_t)ctx, buf, len);
}

struct profile_sink profile_sink_fd(int fd)
{
	struct profile_sink s = { .write = fd_write, .ctx = (void *)(intptr_t)fd };

	return s;
}

void outbuf_init(struct outbuf *ob, const struct profile_sink *sink)
{
	ob->sink = sink;
	ob->err = 0;
	ob->len = 0;
}

static void drain(struct outbuf *ob)
{
	if (!ob->err && ob->len)
		ob->err = ob->sink->write(ob->sink->ctx, ob->buf, ob->len);
	ob->len = 0;
}

void outbuf_write(struct outbuf *ob, const char *s, size_t len)
{
	while (len && !ob->err) {
		size_t room = sizeof(ob->buf) - ob->len;
		size_t n = len < room ? len : room;

		memcpy(ob->buf + ob->len, s, n);
		ob->len += n;
		s += n;
		len -= n;
		if (ob->len == sizeof(ob->buf))
			drain(ob);
	}
}

void outbuf_puts(struct outbuf *ob, const char *s)
{
	outbuf_write(ob, s, strlen(s));
}

void outbuf_printf(struct outbuf *ob, const char *fmt, ...)
{
	char *tmp;
	va_list ap;
	int n;

	if (ob->err)
		return;
	va_start(ap, fmt);
	n = vsnprintf(ob->buf + ob->len, sizeof(ob->buf) - ob->len, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(ob->buf) - ob->len) {
		ob->len += (size_t)n;
		return;
	}
	/* Did not fit in what is left of the buffer: format apart, at any length. */
	va_start(ap, fmt);
	n = vasprintf(&tmp, fmt, ap);
	va_end(ap);
	if (n < 0) {
		ob->err = -ENOMEM;
		return;
	}
	outbuf_write(ob, tmp, (size_t)n);
	free(tmp);
}

int outbuf_flush(struct outbuf *ob)
{
	drain(ob);
	return ob->err;
}
