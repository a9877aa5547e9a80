// SPDX-License-Identifier: MIT
// Writes the SVG flamegraph of a small hand-built recording (with names that need XML
// escaping) to stdout, for check_svg.py to parse as XML.
#include <stdlib.h>
#include <unistd.h>

#include <hvprof/profile.h>

#include "rec_helpers.h"

int main(void)
{
	static const uint64_t k[] = { 0xffffffff81001000ULL, 0xffffffff81002000ULL, 0 };
	static const uint64_t u[] = { 0x401020, 0x401010, 0 };
	struct profile_options opts = { .size = sizeof(opts), .no_symbols = 1 };
	struct hvp_thread t1 = mk_thread(1, 1, "a<b>&\"c'", 0), t2 = mk_thread(2, 2, "\xff\xfe", 0);
	struct hvp_process pr = mk_process(1, "/bin/x&y", 0x401000, 0x402000);
	struct hvp_sample *s = malloc(sizeof(*s));
	struct profile_sink sink = profile_sink_fd(1);
	struct recfile_writer *w;
	struct profile *p;
	int fd = mem_file(), err;

	if (!s || fd < 0 || recfile_writer_open(fd, &w))
		return 2;
	err = recfile_write_meta(w, "image", "guest <img> & \"quotes\"");
	err = err ? err : recfile_write_thread(w, &t1);
	err = err ? err : recfile_write_thread(w, &t2);
	err = err ? err : recfile_write_process(w, &pr);
	for (int i = 0; i < 10 && !err; i++) {
		mk_sample(s, 1 + i % 2, 1 + i % 2, i % 3 ? 0 : 3, HVP_WALK_END, 0, i % 3 ? k : NULL, u);
		err = recfile_write_sample(w, s);
	}
	if (recfile_writer_close(w) || err || lseek(fd, 0, SEEK_SET) != 0)
		return 2;
	if (profile_load_fd(fd, NULL, &opts, &p, NULL, 0))
		return 2;
	err = profile_flamegraph(p, NULL, &sink);
	profile_free(p);
	free(s);
	close(fd);
	return err ? 2 : 0;
}
