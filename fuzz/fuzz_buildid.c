// SPDX-License-Identifier: MIT
// Fuzz target: the GNU build-id of a file a guest process maps, read from the first page of
// its mapping in guest memory (gi_mapping_build_id: libelf over a private copy of the page,
// the ELF header, program headers and PT_NOTE segments in it).
// Input: the page (at most 4 KiB, zero-filled after the input), mapped at FZ_PAGE_GVA by
// harness-built page tables (one 1 GiB page: GVA = GPA below 1 GiB); the last byte's bit 7
// also asks for a build-id of at most 8 bytes, else of at most 64.
// Invariants: the documented errors; a build-id found is 1..max bytes that appear in the page.
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fuzz.h"

#define FZ_PAGE_GVA 0x3000ull
#define FZ_RAM (FZ_PAGE_GVA + 4096)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t ram[FZ_RAM];
	struct fuzz_ram r = { .bytes = ram, .len = sizeof(ram) };
	struct gmem mem = { .read = fuzz_ram_read, .map = fuzz_ram_map, .ctx = &r };
	struct gi_paging pg = {
		.cr3 = 0x1000,
		.cr0 = (1ull << 31) | 1,                                   /* PG | PE */
		.cr4 = 1ull << 5,                                          /* PAE */
		.efer = (1ull << 8) | (1ull << 10) | (1ull << 11),         /* LME | LMA | NXE */
		.maxphyaddr = 46,
	};
	uint8_t id[64];
	size_t len = 99, max = size && (data[size - 1] & 0x80) ? 8 : sizeof(id);
	int err;

	memset(ram, 0, sizeof(ram));
	/* PML4[0] -> the PDPT at 0x2000; PDPT[0]: a 1 GiB page at 0 (P, RW, US, PS) */
	for (int i = 0; i < 8; i++) {
		ram[0x1000 + i] = (uint8_t)((0x2000ull | 7) >> (8 * i));
		ram[0x2000 + i] = (uint8_t)((0x87ull) >> (8 * i));
	}
	memcpy(ram + FZ_PAGE_GVA, data, size < 4096 ? size : 4096);
	err = gi_mapping_build_id(&mem, &pg, FZ_PAGE_GVA, id, max, &len);
	FUZZ_LOG("build-id: %d, %zu bytes\n", err, err ? 0 : len);
	FUZZ_CHECK(err == 0 || err == -ENOENT || err == -ENOTSUP);
	if (err) {
		FUZZ_CHECK(len == 0);
		return 0;
	}
	FUZZ_CHECK(len >= 1 && len <= max);
	FUZZ_CHECK(memmem(ram + FZ_PAGE_GVA, 4096, id, len) != NULL);
	return 0;
}
