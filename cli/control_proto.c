// SPDX-License-Identifier: MIT
// The control protocol's messages (docs/control-protocol.md): framing, requests, replies. Pure
// functions over bytes a client or a server sent, so every length is checked against the bytes
// given and nothing is assumed NUL-terminated; fuzzed by fuzz/fuzz_control.c.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/sample.h>

#include "control.h"

static const struct {
	int err;
	const char *name;
} err_names[] = {
	{ EPROTO, "EPROTO" },       { EPROTONOSUPPORT, "EPROTONOSUPPORT" },
	{ EINVAL, "EINVAL" },       { E2BIG, "E2BIG" },
	{ EBUSY, "EBUSY" },         { EALREADY, "EALREADY" },
	{ EBADF, "EBADF" },         { ENODATA, "ENODATA" },
	{ ESHUTDOWN, "ESHUTDOWN" }, { ETIMEDOUT, "ETIMEDOUT" },
	{ ENOTSUP, "ENOTSUP" },     { ENOMEM, "ENOMEM" },
	{ EIO, "EIO" },             { ENOSPC, "ENOSPC" },
	{ EAGAIN, "EAGAIN" },
};

const char *ctl_reason_word(int reason)
{
	switch (reason) {
	case HVP_END_DETACHED: return "detached";
	case HVP_END_EXIT_DEVICE: return "exit";
	case HVP_END_RESET: return "reset";
	case HVP_END_SHUTDOWN: return "crash";
	case HVP_END_DURATION: return "duration";
	case HVP_END_SIGNAL: return "signal";
	default: return "error";
	}
}

const char *ctl_err_name(int err)
{
	for (size_t i = 0; i < sizeof(err_names) / sizeof(err_names[0]); i++)
		if (err_names[i].err == err)
			return err_names[i].name;
	return "EIO";
}

static int err_of_name(const char *p, size_t n)
{
	for (size_t i = 0; i < sizeof(err_names) / sizeof(err_names[0]); i++)
		if (strlen(err_names[i].name) == n && !memcmp(err_names[i].name, p, n))
			return err_names[i].err;
	return EIO;
}

int ctl_line_find(const char *p, size_t n, size_t *line_len)
{
	size_t lim = n < CTL_MAX_LINE ? n : CTL_MAX_LINE;

	for (size_t i = 0; i < lim; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c == '\n') {
			*line_len = i;
			return 1;
		}
		if (c < 0x20 || c > 0x7e)
			return -EPROTO;
	}
	return n >= CTL_MAX_LINE ? -E2BIG : 0;
}

/* The next space-separated word of [*p, end): its start and length; false at the end. */
static bool next_word(const char **p, const char *end, const char **w, size_t *wn)
{
	const char *s = *p;

	while (s < end && *s == ' ')
		s++;
	if (s == end)
		return false;
	*w = s;
	while (s < end && *s != ' ')
		s++;
	*wn = (size_t)(s - *w);
	*p = s;
	return true;
}

static bool word_is(const char *w, size_t n, const char *lit)
{
	return strlen(lit) == n && !memcmp(w, lit, n);
}

bool ctl_parse_uint(const char *w, size_t n, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;

	if (!n || n > 10)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (w[i] < '0' || w[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(w[i] - '0');
	}
	if (v > max)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* call_graph=fp | dwarf | dwarf,SIZE (SIZE 1..CTL_MAX_STACK, rounded up to 8 bytes). */
static bool parse_call_graph(const char *v, size_t n, struct ctl_request *out)
{
	uint32_t size;

	if (word_is(v, n, "fp")) {
		out->dwarf = false;
		out->stack_size = 64;
		return true;
	}
	if (n < 5 || memcmp(v, "dwarf", 5))
		return false;
	out->dwarf = true;
	if (n == 5)
		return true;
	if (v[5] != ',' || !ctl_parse_uint(v + 6, n - 6, CTL_MAX_STACK, &size) || !size)
		return false;
	out->stack_size = (size + 7) & ~7u;
	return true;
}

static int attach_args(const char *p, const char *end, struct ctl_request *out, char *why,
		       size_t why_len)
{
	bool seen_freq = false, seen_cg = false;
	const char *w, *eq;
	size_t wn;

	while (next_word(&p, end, &w, &wn)) {
		eq = memchr(w, '=', wn);
		if (!eq) {
			snprintf(why, why_len, "ATTACH takes key=value words");
			return -EINVAL;
		}
		if (word_is(w, (size_t)(eq - w), "freq") && !seen_freq) {
			seen_freq = true;
			if (!ctl_parse_uint(eq + 1, wn - (size_t)(eq + 1 - w), CTL_MAX_HZ, &out->freq) ||
			    !out->freq) {
				snprintf(why, why_len, "freq must be 1 to %d Hz", CTL_MAX_HZ);
				return -EINVAL;
			}
		} else if (word_is(w, (size_t)(eq - w), "call_graph") && !seen_cg) {
			seen_cg = true;
			if (!parse_call_graph(eq + 1, wn - (size_t)(eq + 1 - w), out)) {
				snprintf(why, why_len, "call_graph must be fp or dwarf[,1..%d]",
					 CTL_MAX_STACK);
				return -EINVAL;
			}
		} else {
			snprintf(why, why_len, "unknown or repeated ATTACH key '%.*s'",
				 (int)(eq - w < 32 ? eq - w : 32), w);
			return -EINVAL;
		}
	}
	return 0;
}

/* EXEC's command: the rest of the line after one space, every \ooo an octal byte 001..377. */
static int exec_args(const char *p, const char *end, struct ctl_request *out, char *why,
		     size_t why_len)
{
	size_t n = 0;

	if (p == end || *p != ' ' || p + 1 == end) {
		snprintf(why, why_len, "want EXEC COMMAND");
		return -EINVAL;
	}
	for (p++; p < end; p++) {
		unsigned int v = (unsigned char)*p;

		if (*p == '\\') {
			if (end - p < 4 || p[1] < '0' || p[1] > '3' || p[2] < '0' || p[2] > '7' ||
			    p[3] < '0' || p[3] > '7') {
				snprintf(why, why_len, "a backslash must start \\ooo (octal 001-377)");
				return -EINVAL;
			}
			v = (unsigned int)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			if (!v) {
				snprintf(why, why_len, "a command cannot hold a NUL byte");
				return -EINVAL;
			}
			p += 3;
		}
		out->cmd[n++] = (char)v; /* n < len < CTL_MAX_LINE: fits */
	}
	out->cmd[n] = '\0';
	out->cmd_len = n;
	return 0;
}

size_t ctl_exec_encode(const char *cmd, size_t len, char *buf, size_t buf_len)
{
	size_t n = 0;

	if (!cmd || !buf || buf_len < 1)
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)cmd[i];
		bool plain = c >= 0x20 && c <= 0x7e && c != '\\';

		if (!c || n + (plain ? 1 : 4) >= buf_len)
			return 0;
		if (plain)
			buf[n++] = (char)c;
		else
			n += (size_t)snprintf(buf + n, buf_len - n, "\\%03o", c);
	}
	buf[n] = '\0';
	return n;
}

int ctl_parse_request(const char *line, size_t len, struct ctl_request *out, char *why,
		      size_t why_len)
{
	const char *p = line, *end = line + len, *w, *extra;
	size_t wn, xn;
	char scratch[8];

	if (!why || !why_len) {
		why = scratch;
		why_len = sizeof(scratch);
	}
	why[0] = '\0';
	if (!line || !out || len >= CTL_MAX_LINE || !next_word(&p, end, &w, &wn)) {
		snprintf(why, why_len, "empty message");
		return -EPROTO;
	}
	memset(out, 0, sizeof(*out));
	out->freq = CTL_DEFAULT_HZ;
	out->dwarf = true;
	out->stack_size = 8192;
	if (word_is(w, wn, "HELLO")) {
		out->verb = CTL_HELLO;
		if (!next_word(&p, end, &w, &wn) || !ctl_parse_uint(w, wn, UINT32_MAX, &out->version) ||
		    next_word(&p, end, &extra, &xn)) {
			snprintf(why, why_len, "want HELLO VERSION");
			return -EPROTO;
		}
		return 0;
	}
	if (word_is(w, wn, "ATTACH")) {
		out->verb = CTL_ATTACH;
		return attach_args(p, end, out, why, why_len);
	}
	if (word_is(w, wn, "EXEC")) {
		out->verb = CTL_EXEC;
		return exec_args(p, end, out, why, why_len);
	}
	if (word_is(w, wn, "POWEROFF")) {
		uint32_t st = 0;

		out->verb = CTL_POWEROFF;
		if (next_word(&p, end, &w, &wn) &&
		    (wn < 8 || memcmp(w, "status=", 7) || !ctl_parse_uint(w + 7, wn - 7, 255, &st) ||
		     next_word(&p, end, &extra, &xn))) {
			snprintf(why, why_len, "want POWEROFF [status=0..255]");
			return -EINVAL;
		}
		out->status = (int)st;
		return 0;
	}
	if (word_is(w, wn, "STATUS"))
		out->verb = CTL_STATUS;
	else if (word_is(w, wn, "DETACH"))
		out->verb = CTL_DETACH;
	else {
		snprintf(why, why_len, "unknown request '%.*s'", (int)(wn < 32 ? wn : 32), w);
		return -EPROTO;
	}
	if (next_word(&p, end, &extra, &xn)) {
		snprintf(why, why_len, "%.*s takes no argument", (int)wn, w);
		return -EINVAL;
	}
	return 0;
}

int ctl_parse_reply(const char *line, size_t len, struct ctl_reply *out)
{
	const char *p = line, *end = line + len, *w, *name;
	size_t wn, nn;

	if (!line || !out || len >= CTL_MAX_LINE || !next_word(&p, end, &w, &wn))
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	if (word_is(w, wn, "OK"))
		out->kind = CTL_REPLY_OK;
	else if (word_is(w, wn, "DONE"))
		out->kind = CTL_REPLY_DONE;
	else if (word_is(w, wn, "ERR"))
		out->kind = CTL_REPLY_ERR;
	else
		return -EPROTO;
	if (out->kind == CTL_REPLY_ERR) {
		if (!next_word(&p, end, &name, &nn))
			return -EPROTO;
		out->err = err_of_name(name, nn);
	}
	while (p < end && *p == ' ')
		p++;
	out->rest = p;
	out->rest_len = (size_t)(end - p);
	return 0;
}

int ctl_reply_get(const struct ctl_reply *r, const char *key, char *buf, size_t len)
{
	const char *p, *end, *w;
	size_t wn, kn;

	if (!r || !key || !buf || !len || r->kind == CTL_REPLY_ERR)
		return -EINVAL;
	p = r->rest;
	end = r->rest + r->rest_len;
	kn = strlen(key);
	while (next_word(&p, end, &w, &wn)) {
		if (wn <= kn || w[kn] != '=' || memcmp(w, key, kn))
			continue;
		if (wn - kn - 1 >= len)
			return -E2BIG;
		memcpy(buf, w + kn + 1, wn - kn - 1);
		buf[wn - kn - 1] = '\0';
		return 0;
	}
	return -ENOENT;
}

int ctl_reply_u64(const struct ctl_reply *r, const char *key, uint64_t *val)
{
	char buf[24], *e;
	int err = ctl_reply_get(r, key, buf, sizeof(buf));

	if (err)
		return err == -E2BIG ? -EINVAL : err;
	if (buf[0] < '0' || buf[0] > '9')
		return -EINVAL;
	errno = 0;
	*val = strtoull(buf, &e, 10);
	return errno || *e ? -EINVAL : 0;
}

size_t ctl_format_err(char *buf, size_t len, int err, const char *msg)
{
	int n = snprintf(buf, len, "ERR %s ", ctl_err_name(err));
	size_t at = n > 0 ? (size_t)n : 0, lim = len < CTL_MAX_LINE ? len : CTL_MAX_LINE;

	for (; msg && *msg && at + 2 < lim; msg++)
		buf[at++] = (*msg >= 0x20 && *msg <= 0x7e) ? *msg : '?';
	buf[at++] = '\n';
	buf[at] = '\0';
	return at;
}

int ctl_freq_check(uint32_t freq, const char *max_rate_text, uint32_t *max)
{
	unsigned long long v = 0;
	const char *p = max_rate_text;

	if (!p || *p < '0' || *p > '9')
		return 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (unsigned long long)(*p - '0');
		if (v > UINT32_MAX)
			return 0; /* larger than any freq: no limit to speak of */
	}
	if ((*p && *p != '\n') || freq <= v)
		return 0;
	if (max)
		*max = (uint32_t)v;
	return -EINVAL;
}
