// SPDX-License-Identifier: MIT
// Fuzz target: GVA->GPA page walks (gi_gva_to_gpa, gi_read_gva) over fuzzed guest RAM, CR3, CR4.
//
// Input: a 48-byte header, then guest RAM (gpa 0 = the first byte after the header; at most
// 1 MiB; every gpa beyond it is outside RAM).
//   u64 cr3; u8 mode (bit 0 LA57, bit 1 PCIDE, bit 2 EFER.NXE, bit 3 paging off);
//   u8 maxphyaddr (0: 52); u16 read_len; u32 reserved; u64 gva[3]; u64 reserved
// Invariants: a walk reads at most 5 entries plus one probe; a translated GPA lies in RAM and
// keeps the GVA's offset within the page; gi_read_gva reads at most 7 times per page touched.
// Through a translation cache, at a first exit and again at the next (where the walk
// remembered from the first answers: struct pgwalk_memo), the result is the uncached walk's.
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fuzz.h"

#define HDR 48
#define RAM_MAX (1u << 20)

#define CR0_PG (1ull << 31)
#define CR4_PAE (1ull << 5)
#define CR4_LA57 (1ull << 12)
#define CR4_PCIDE (1ull << 17)
#define EFER_LME (1ull << 8)
#define EFER_LMA (1ull << 10)
#define EFER_NXE (1ull << 11)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_ram ram;
	struct gmem mem = { fuzz_ram_read, &ram, NULL };
	/* the same RAM with reads in place, as the VMM's: walks are remembered only there */
	struct gmem cmem = { fuzz_ram_read, &ram, fuzz_ram_map };
	struct gi_paging pg = { 0 };
	static uint8_t buf[65536];
	unsigned int read_len;
	uint8_t mode;

	if (size < HDR)
		return 0;
	ram.bytes = data + HDR;
	ram.len = size - HDR > RAM_MAX ? RAM_MAX : size - HDR;
	mode = data[8];
	pg.cr0 = (mode & 8) ? 0 : CR0_PG;
	pg.cr3 = fuzz_get64(data);
	pg.cr4 = CR4_PAE | ((mode & 1) ? CR4_LA57 : 0) | ((mode & 2) ? CR4_PCIDE : 0);
	pg.efer = EFER_LME | EFER_LMA | ((mode & 4) ? EFER_NXE : 0);
	pg.maxphyaddr = data[9];
	read_len = (unsigned int)(data[10] | data[11] << 8);

	static struct pgwalk_cache cache;
	struct gi_paging cpg;

	memset(&cache, 0, sizeof(cache));
	cpg = pg;
	cpg.cache = &cache;
	for (int i = 0; i < 3; i++) {
		uint64_t gva = fuzz_get64(data + 16 + 8 * i), gpa = 0, page_size = 0;
		struct pgwalk_trace trace;
		int err;

		ram.reads = 0;
		err = gi_gva_to_gpa(&mem, &pg, gva, &gpa, &page_size, &trace);
		FUZZ_CHECK(ram.reads <= PGWALK_MAX_LEVELS + 1);
		FUZZ_CHECK(trace.levels <= PGWALK_MAX_LEVELS);
		FUZZ_CHECK(err == 0 || err == -EFAULT || err == -ERANGE || err == -EINVAL ||
			   err == -ENOTSUP);
		FUZZ_LOG("gva 0x%llx: %d gpa 0x%llx size 0x%llx levels %u\n",
			 (unsigned long long)gva, err, (unsigned long long)gpa,
			 (unsigned long long)page_size, trace.levels);
		if (!err) {
			FUZZ_CHECK(gpa < ram.len);
			FUZZ_CHECK(page_size == 4096 || page_size == (2u << 20) ||
				   page_size == (1u << 30));
			FUZZ_CHECK((gpa & (page_size - 1)) == (gva & (page_size - 1)));
		}
		for (int ex = 0; ex < 2; ex++) { /* the second: the remembered walk */
			uint64_t cgpa = 0, csize = 0;
			int cerr;

			pgwalk_cache_invalidate(&cache);
			ram.reads = 0;
			cerr = gi_gva_to_gpa(&cmem, &cpg, gva, &cgpa, &csize, NULL);
			FUZZ_CHECK(ram.reads <= PGWALK_MAX_LEVELS + 1);
			FUZZ_CHECK(cerr == err);
			FUZZ_CHECK(err || (cgpa == gpa && csize == page_size));
		}

		ram.reads = 0;
		err = gi_read_gva(&mem, &pg, gva, buf, read_len);
		FUZZ_LOG("read %u bytes: %d\n", read_len, err);
		/* Pages touched: at most read_len / 4096 + 2 (a partial page at each end). */
		FUZZ_CHECK(ram.reads <= 7ull * (read_len / 4096 + 2));
		FUZZ_CHECK(err == 0 || err == -EFAULT || err == -ERANGE || err == -EINVAL ||
			   err == -ENOTSUP);
	}
	return 0;
}
