// SPDX-License-Identifier: MIT
// JSON string output for the exporters: escapes per RFC 8259, invalid UTF-8 becomes U+FFFD.
#include <stdio.h>
#include <string.h>

#include "profile_internal.h"

/* Length of the valid UTF-8 sequence at @u (1..4), or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *u)
{
	unsigned char c = u[0];
	size_t n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;

	if (!n || c == 0xc0 || c == 0xc1 || c > 0xf4)
		return 0;
	/* SAFETY: stops at the first non-continuation byte, so never past the NUL. */
	for (size_t k = 1; k < n; k++)
		if ((u[k] & 0xc0) != 0x80)
			return 0;
	/* Overlong 3-byte forms and UTF-16 surrogates (ED A0..BF) are invalid. */
	if (n == 3 && ((c == 0xe0 && u[1] < 0xa0) || (c == 0xed && u[1] >= 0xa0)))
		return 0;
	if (n == 4 && ((c == 0xf0 && u[1] < 0x90) || (c == 0xf4 && u[1] >= 0x90)))
		return 0;
	return n;
}

void json_string(struct outbuf *ob, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	const unsigned char *run = u;

	outbuf_puts(ob, "\"");
	while (*u) {
		unsigned char c = *u;
		size_t n;

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			u++;
			continue;
		}
		if (c >= 0x80) {
			n = utf8_seq(u);
			if (n) {
				u += n;
				continue;
			}
		}
		outbuf_write(ob, (const char *)run, (size_t)(u - run));
		if (c == '"')
			outbuf_puts(ob, "\\\"");
		else if (c == '\\')
			outbuf_puts(ob, "\\\\");
		else if (c == '\n')
			outbuf_puts(ob, "\\n");
		else if (c == '\t')
			outbuf_puts(ob, "\\t");
		else if (c < 0x20 || c == 0x7f)
			outbuf_printf(ob, "\\u%04x", c);
		else
			outbuf_puts(ob, "\\ufffd"); /* a byte that starts no valid UTF-8 sequence */
		u++;
		run = u;
	}
	outbuf_write(ob, (const char *)run, (size_t)(u - run));
	outbuf_puts(ob, "\"");
}

void json_double(struct outbuf *ob, double v)
{
	/* JSON has no NaN or infinity: those become null. */
	if (v != v || v > 1e308 || v < -1e308)
		outbuf_puts(ob, "null");
	else
		outbuf_printf(ob, "%.4f", v);
}
