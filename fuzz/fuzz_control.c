// SPDX-License-Identifier: MIT
// Fuzz target: the control protocol's messages (cli/control_proto.c, docs/control-protocol.md)
// as a client or a server would receive them: the bytes are framed into messages as the server
// frames them, and each is parsed as a request and as a reply (with its key lookups); and the
// same bytes as the guest's command-channel stream (cli/control_exec.c), split in two.
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../cli/control.h"
#include "fuzz.h"

static void fz_ready(void *ctx, uint32_t v) { (void)ctx; (void)v; }
static void fz_out(void *ctx, int fd, const char *buf, size_t len)
{
	FUZZ_CHECK((fd == 1 || fd == 2) && len && len <= EXEC_MAX_CHUNK && buf);
	*(size_t *)ctx += len;
}
static void fz_exit(void *ctx, int st) { FUZZ_CHECK(st >= 0 && st <= 255); (void)ctx; }
static const struct exec_rx_ops fz_rx = { .ready = fz_ready, .out = fz_out, .exit = fz_exit };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	size_t left = size, n;
	char why[128], v[64];
	struct ctl_request req;
	struct ctl_reply rep;
	uint64_t num;
	struct exec_rx rx;
	size_t out_bytes = 0;

	/* the same bytes as the guest's side of the command channel (cli/control_exec.c) */
	exec_rx_init(&rx);
	exec_rx_feed(&rx, data, size / 2, &fz_rx, &out_bytes);
	exec_rx_feed(&rx, data + size / 2, size - size / 2, &fz_rx, &out_bytes);
	FUZZ_CHECK(out_bytes <= size && rx.hdr_len <= sizeof(rx.hdr) && rx.left <= EXEC_MAX_CHUNK);

	while (left) {
		int r = ctl_line_find(p, left, &n);

		if (r <= 0) {
			/* the server answers and drops the client; parse what is there anyway */
			n = left < CTL_MAX_LINE - 1 ? left : CTL_MAX_LINE - 1;
			r = 0;
		}
		if (ctl_parse_request(p, n, &req, why, sizeof(why)) == 0 && req.verb == CTL_ATTACH)
			FUZZ_CHECK(req.freq && req.freq <= CTL_MAX_HZ && req.stack_size <= CTL_MAX_STACK &&
				   !(req.stack_size & 7));
		if (ctl_parse_request(p, n, &req, why, sizeof(why)) == 0 && req.verb == CTL_EXEC)
			FUZZ_CHECK(req.cmd_len && req.cmd_len < n && strlen(req.cmd) == req.cmd_len);
		if (ctl_parse_reply(p, n, &rep) == 0 && rep.kind != CTL_REPLY_ERR) {
			if (ctl_reply_get(&rep, "reason", v, sizeof(v)) == 0)
				FUZZ_CHECK(strlen(v) < sizeof(v));
			if (ctl_reply_u64(&rep, "samples", &num)) { /* absent or not a number */ }
		}
		n += r ? 1 : 0;
		if (n > left || !n)
			break;
		p += n;
		left -= n;
	}
	return 0;
}
