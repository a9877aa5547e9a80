// SPDX-License-Identifier: MIT
// Fuzz target: the control protocol's messages (cli/control_proto.c, docs/control-protocol.md)
// as a client or a server would receive them: the bytes are framed into messages as the server
// frames them, and each is parsed as a request and as a reply (with its key lookups).
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../cli/control.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	size_t left = size, n;
	char why[128], v[64];
	struct ctl_request req;
	struct ctl_reply rep;
	uint64_t num;

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
