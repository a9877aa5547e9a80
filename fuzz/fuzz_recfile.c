// SPDX-License-Identifier: MIT
// Fuzz target: the recording reader (recfile_reader_open_fd/next on a memfd), then the whole
// load (cookie join, aggregation; no ELF is opened) and every exporter into a discarding sink.
// Input: byte 0 bit 0 set: the harness first rewrites the CRC of every block (format version 2)
// or record (version 1) whose size field fits (so the fuzzer reaches the decoders instead of
// stopping at CRC checks); the rest is the recording file.
// Invariants: the reader's offset only grows and never passes the file; after an error the same
// error comes back and recfile_reader_error() says why; a recording damaged after its header
// still loads.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <hvprof/profile.h>

#include "fuzz.h"

static int fz_discard(void *ctx, const void *buf, size_t len)
{
	uint64_t *total = ctx;

	(void)buf;
	*total += len;
	return 0;
}

static uint32_t fz_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Seal every record (version 1) or block (version 2) with a correct CRC, as the writer would. */
static void fz_fix_crcs(uint8_t *b, size_t len)
{
	size_t off = RECFILE_HEADER_SIZE;
	uint32_t version = len >= 16 ? fz_get32(b + 8) : 0;

	if (len >= 16) {
		uint32_t hs = fz_get32(b + 12);

		if (hs >= RECFILE_HEADER_SIZE && hs <= 4096)
			off = hs;
	}
	while (version == 1 && off + 12 <= len) {
		uint32_t size = fz_get32(b + off + 4);
		uLong crc;

		if (size < 12 || size > len - off)
			break;
		crc = crc32(crc32(0L, Z_NULL, 0), b + off, size - 4);
		for (int i = 0; i < 4; i++)
			b[off + size - 4 + i] = (uint8_t)(crc >> (8 * i));
		off += size;
	}
	while (version != 1 && off + 16 <= len) { /* "BLCK", size, records, CRC of the rest */
		uint32_t size = fz_get32(b + off + 4);
		uLong crc;

		if (size < 16 || size > len - off)
			break;
		crc = crc32(crc32(0L, Z_NULL, 0), b + off, 12);
		crc = crc32(crc, b + off + 16, size - 16);
		for (int i = 0; i < 4; i++)
			b[off + 12 + i] = (uint8_t)(crc >> (8 * i));
		off += size;
	}
}

static void fz_exports(struct profile *p)
{
	uint64_t total = 0;
	struct profile_sink sink = { fz_discard, &total };
	struct profile_report_options ro = { .size = sizeof(ro) };
	struct profile_flamegraph_options fo = { .size = sizeof(fo) };
	struct profile_stacks *s = NULL;
	struct profile_diff_options dopt = { .size = sizeof(dopt), .threshold_pct = -1 };
	struct profile_diff *d = NULL;
	struct profile_stats st;

	profile_get_stats(p, &st);
	FUZZ_LOG("profile: %llu samples, %llu joined, %llu lost, %llu stacks\n",
		 (unsigned long long)st.samples, (unsigned long long)st.joined,
		 (unsigned long long)st.lost_user, (unsigned long long)st.stacks);
	FUZZ_CHECK(st.samples <= st.records);
	if (profile_report(p, &ro, &sink)) { /* errors are fine: only crashes are bugs */ }
	ro.children = 1;
	ro.format = PROFILE_REPORT_JSON;
	if (profile_report(p, &ro, &sink)) { }
	if (profile_folded(p, &sink)) { }
	if (profile_flamegraph(p, &fo, &sink)) { }
	if (profile_speedscope(p, &sink)) { }
	if (profile_pprof(p, &sink)) { }
	if (profile_perf_script(p, &sink)) { }
	if (profile_stacks_from_profile(p, &s) == 0) {
		if (profile_diff_compute(s, s, &dopt, &d) == 0) {
			if (profile_diff_write(d, "a", "b", 0, &sink)) { }
			profile_diff_free(d);
		}
		profile_stacks_free(s);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct profile_options opts = { .size = sizeof(opts), .no_symbols = 1, .keep_samples = 1 };
	struct recfile_reader *r = NULL;
	struct recfile_record rec;
	struct profile *p = NULL;
	uint8_t *file;
	size_t len;
	char errbuf[256];
	int fd, ret, err;

	if (size < 1)
		return 0;
	len = size - 1;
	file = malloc(len ? len : 1);
	if (!file)
		return 0;
	memcpy(file, data + 1, len);
	if (data[0] & 1)
		fz_fix_crcs(file, len);
	fd = memfd_create("fuzz-recfile", MFD_CLOEXEC);
	if (fd < 0 || (len && write(fd, file, len) != (ssize_t)len) || lseek(fd, 0, SEEK_SET)) {
		if (fd >= 0)
			close(fd);
		free(file);
		return 0;
	}

	err = recfile_reader_open_fd(fd, "fuzz", &r, errbuf, sizeof(errbuf));
	if (!err) {
		uint64_t prev = recfile_reader_offset(r);
		/* a record's frame: type, size (and its CRC in version 1) */
		uint64_t frame = recfile_reader_version(r) == 1 ? 12 : 8;

		while ((ret = recfile_reader_next(r, &rec)) > 0) {
			uint64_t off = recfile_reader_offset(r);

			FUZZ_CHECK(off > prev && off <= len);
			FUZZ_CHECK(rec.offset == prev || rec.offset > prev);
			if (rec.type == RECFILE_SAMPLE)
				FUZZ_CHECK(rec.sample.n_kernel <= HVP_MAX_CALLCHAIN &&
					   rec.sample.n_user <= HVP_MAX_CALLCHAIN);
			if (rec.type == RECFILE_USER_REGS) {
				const struct hvp_user_regs *u = &rec.user_regs;
				unsigned int sum = 0;

				FUZZ_CHECK(u->stack_len <= HVP_USER_STACK_MAX &&
					   u->stack_len <= u->stack_size &&
					   (u->follows == RECFILE_SAMPLE ||
					    u->follows == RECFILE_USER_STACK) &&
					   off - rec.offset == frame + 176 + (uint64_t)u->stack_len);
				for (uint32_t i = 0; i < u->stack_len; i++) /* ASan: in bounds */
					sum += u->stack[i];
				(void)sum;
			}
			prev = off;
		}
		FUZZ_LOG("reader: %d after %llu records\n", ret,
			 (unsigned long long)recfile_reader_records(r));
		if (ret < 0) {
			FUZZ_CHECK(recfile_reader_error(r) != NULL);
			FUZZ_CHECK(recfile_reader_next(r, &rec) == ret);
		} else {
			FUZZ_CHECK(recfile_reader_offset(r) == len);
		}
		recfile_reader_close(r);

		if (lseek(fd, 0, SEEK_SET) == 0) {
			err = profile_load_fd(fd, "fuzz", &opts, &p, errbuf, sizeof(errbuf));
			FUZZ_CHECK(err != -EBADMSG || p == NULL);
			if (!err) {
				fz_exports(p);
				profile_free(p);
			}
		}
	} else {
		FUZZ_CHECK(err == -EBADMSG || err == -ENOTSUP || err == -ENOMEM);
	}
	close(fd);
	free(file);
	return 0;
}
