// SPDX-License-Identifier: MIT
// Fuzz target: KASLR relocation tables (gi_krelocs_parse, gi_krelocs_check, gi_krelocs_apply)
// and the slide choice (gi_kaslr_pick_slide).
// Input: bytes 0-7 the slide (little-endian, masked to 2 MiB multiples below 1 GiB), bytes
// 8-9 the image size in 16-byte units, the rest the table (truncated to whole entries).
// Invariants: a parsed table's lists lie inside the input and account for all of it; apply
// succeeds exactly when check does, changes nothing on failure, and never changes a byte that
// no field covers; a table of one field moves it by exactly the slide (64-bit and 32-bit
// fields up, inverse 32-bit fields down).
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fuzz.h"

#define LOAD_KVA 0xffffffff81000000ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gi_krelocs r;
	uint64_t slide, pick;
	size_t img_len, tab_len;
	uint8_t *img, *orig;
	int err, chk;

	if (size < 10)
		return 0;
	memcpy(&slide, data, 8);
	slide &= (1ull << 30) - 1;
	slide &= ~((2ull << 20) - 1);
	img_len = ((size_t)data[8] | (size_t)data[9] << 8) * 16;
	tab_len = (size - 10) & ~(size_t)3;

	err = gi_kaslr_pick_slide(LOAD_KVA, img_len, 2u << 20, slide, &pick);
	FUZZ_CHECK(err == 0);
	FUZZ_CHECK(pick % (2u << 20) == 0 && 0x1000000ull + img_len + pick <= (1ull << 30));

	err = gi_krelocs_parse(data + 10, tab_len, &r);
	FUZZ_CHECK(err == 0 || err == -EBADMSG || err == -ENODATA);
	if (err)
		return 0;
	/* SAFETY of the invariants: the three lists and their terminators are the whole table. */
	FUZZ_CHECK((r.n64 + r.ninv32 + r.n32 + 3) * 4 == tab_len);
	FUZZ_CHECK(r.r64 == data + 10 + 4);
	img = calloc(1, img_len + 1);
	orig = malloc(img_len + 1);
	if (!img || !orig) {
		free(img);
		free(orig);
		return 0;
	}
	for (size_t i = 0; i < img_len; i++)
		img[i] = (uint8_t)(i * 37 + 11);
	memcpy(orig, img, img_len);
	chk = gi_krelocs_check(&r, LOAD_KVA, img_len);
	FUZZ_CHECK(chk == 0 || chk == -ERANGE);
	err = gi_krelocs_apply(&r, img, LOAD_KVA, img_len, slide);
	FUZZ_CHECK(err == chk);
	if (err) {
		FUZZ_CHECK(memcmp(img, orig, img_len) == 0);
	} else {
		uint8_t *covered = calloc(1, img_len + 1);
		const uint8_t *lists[3] = { r.r32, r.rinv32, r.r64 };
		const size_t counts[3] = { r.n32, r.ninv32, r.n64 }, widths[3] = { 4, 4, 8 };

		for (int l = 0; covered && l < 3; l++) {
			for (size_t k = 0; k < counts[l]; k++) {
				int32_t e;

				memcpy(&e, lists[l] + 4 * k, 4);
				/* SAFETY: check() accepted every field: inside [0, img_len). */
				memset(covered + ((uint64_t)(int64_t)e - LOAD_KVA), 1, widths[l]);
			}
		}
		for (size_t i = 0; covered && i < img_len; i++)
			FUZZ_CHECK(covered[i] || img[i] == orig[i]);
		free(covered);
		if (r.n64 + r.ninv32 + r.n32 == 1 && r.n64 == 1) {
			int32_t e;
			uint64_t before, after;

			memcpy(&e, r.r64, 4);
			memcpy(&before, orig + ((uint64_t)(int64_t)e - LOAD_KVA), 8);
			memcpy(&after, img + ((uint64_t)(int64_t)e - LOAD_KVA), 8);
			FUZZ_CHECK(after == before + slide);
		} else if (r.n64 + r.ninv32 + r.n32 == 1) {
			/* one 32-bit field: += slide, or -= slide for the inverse list */
			int32_t e;
			uint32_t before, after;

			memcpy(&e, r.n32 ? r.r32 : r.rinv32, 4);
			memcpy(&before, orig + ((uint64_t)(int64_t)e - LOAD_KVA), 4);
			memcpy(&after, img + ((uint64_t)(int64_t)e - LOAD_KVA), 4);
			FUZZ_CHECK(after == (uint32_t)(r.n32 ? before + slide : before - slide));
		}
	}
	free(img);
	free(orig);
	return 0;
}
