// SPDX-License-Identifier: MIT
// Guest RAM: one anonymous host mapping split into KVM memory slots around the 32-bit MMIO hole.
#define pr_fmt(fmt) "vmm: ram: " fmt
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <hvprof/hugemem.h>
#include <hvprof/log.h>

#include "vmm_internal.h"

int ram_create(struct vmm_ram *ram, uint64_t size)
{
	uint8_t *raw, *hva;
	uint64_t map_len;
	int err;

	memset(ram, 0, sizeof(*ram));
	/* 2 MiB more, trimmed to a 2 MiB-aligned start: KVM maps a guest range with a huge page
	 * only where host and guest addresses agree modulo 2 MiB (kernels since 6.7 align large
	 * anonymous mappings themselves; older ones do not) */
	if (__builtin_add_overflow(size, (uint64_t)HVP_HUGE_BYTES, &map_len))
		return -EINVAL;
	raw = mmap(NULL, map_len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	hva = raw;
	if (raw != MAP_FAILED) {
		hva = (uint8_t *)(((uintptr_t)raw + HVP_HUGE_BYTES - 1) &
				  ~(uintptr_t)(HVP_HUGE_BYTES - 1));
		if (hva > raw)
			munmap(raw, (size_t)(hva - raw));
		if (hva + size < raw + map_len)
			munmap(hva + size, (size_t)(raw + map_len - (hva + size)));
	}
	if (hva == MAP_FAILED) {
		err = -errno;
		pr_err("cannot map %llu MiB of guest RAM: %s", (unsigned long long)(size >> 20),
		       hvp_strerror(err));
		return err;
	}
	/* hints, as QEMU gives them for guest RAM: KSM may merge identical pages (where ksmd
	 * runs), and transparent huge pages back it where the host has them, so that the guest's
	 * page walks and hvprof's reads of guest memory at each sample need fewer TLB entries */
	madvise(hva, size, MADV_MERGEABLE);
	madvise(hva, size, MADV_HUGEPAGE);
	ram->hva = hva;
	ram->size = size;
	if (size <= VMM_MMIO_HOLE_START) {
		ram->slots[0] = (struct vmm_ram_slot){ .gpa = 0, .size = size, .hva = hva };
		ram->n_slots = 1;
	} else {
		ram->slots[0] = (struct vmm_ram_slot){ .gpa = 0, .size = VMM_MMIO_HOLE_START,
						       .hva = hva };
		ram->slots[1] = (struct vmm_ram_slot){ .gpa = VMM_4G,
						       .size = size - VMM_MMIO_HOLE_START,
						       .hva = ram->hva + VMM_MMIO_HOLE_START };
		ram->n_slots = 2;
	}
	return 0;
}

void ram_destroy(struct vmm_ram *ram)
{
	if (ram->hva)
		munmap(ram->hva, ram->size);
	memset(ram, 0, sizeof(*ram));
}

void *ram_gpa_to_hva(const struct vmm_ram *ram, uint64_t gpa, uint64_t len)
{
	for (unsigned int i = 0; i < ram->n_slots; i++) {
		const struct vmm_ram_slot *s = &ram->slots[i];
		uint64_t end;

		if (__builtin_add_overflow(gpa, len, &end))
			return NULL;
		/* SAFETY: [gpa, end) must lie inside [s->gpa, s->gpa + s->size). */
		if (gpa >= s->gpa && end <= s->gpa + s->size)
			return s->hva + (gpa - s->gpa);
	}
	return NULL;
}

int ram_read(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	const struct vmm_ram *ram = ctx;
	const void *src = ram_gpa_to_hva(ram, gpa, len);

	if (!src)
		return -ERANGE;
	memcpy(dst, src, len);
	return 0;
}

const void *ram_map(void *ctx, uint64_t gpa, size_t len)
{
	return ram_gpa_to_hva(ctx, gpa, len);
}

int ram_write(const struct vmm_ram *ram, uint64_t gpa, const void *src, size_t len)
{
	void *dst = ram_gpa_to_hva(ram, gpa, len);

	if (!dst)
		return -ERANGE;
	memcpy(dst, src, len);
	return 0;
}
