// SPDX-License-Identifier: MIT
// The guest's interrupt descriptor table: the handler address of each gate, read from guest
// memory at IDTR (64-bit gate descriptors, Intel SDM Vol. 3A, 6.14.1 "64-Bit Mode IDT").
#define pr_fmt(fmt) "idt: " fmt

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "pgwalk_internal.h"

#define GATE_SIZE 16
#define GATE_TYPE_INTR 0xe
#define GATE_TYPE_TRAP 0xf

int gi_idt_gate(const struct gmem *mem, const struct gi_paging *pg, uint64_t idt_base,
		uint16_t idt_limit, unsigned int vector, uint64_t *target)
{
	uint8_t g[GATE_SIZE];
	uint64_t off, gva;
	uint8_t attr;
	int err;

	if (!mem || !pg || !target || vector > 255)
		return -EINVAL;
	/* SAFETY: the whole 16-byte gate lies within the limit (IDTR.limit is the last byte). */
	off = (uint64_t)vector * GATE_SIZE;
	if ((uint64_t)idt_limit < off + GATE_SIZE - 1)
		return -ERANGE;
	if (__builtin_add_overflow(idt_base, off, &gva) || !pgwalk_gva_is_canonical(pg, idt_base) ||
	    !pgwalk_gva_is_canonical(pg, gva))
		return -ERANGE;
	err = gi_read_gva(mem, pg, gva, g, sizeof(g));
	if (err)
		return err;
	attr = g[5];
	if (!(attr & 0x80))
		return -ENOENT; /* not present */
	if ((attr & 0x1f) != GATE_TYPE_INTR && (attr & 0x1f) != GATE_TYPE_TRAP)
		return -EBADMSG; /* not a 64-bit interrupt or trap gate (bit 4 must be 0) */
	*target = (uint64_t)g[0] | (uint64_t)g[1] << 8 | (uint64_t)g[6] << 16 |
		  (uint64_t)g[7] << 24 | (uint64_t)g[8] << 32 | (uint64_t)g[9] << 40 |
		  (uint64_t)g[10] << 48 | (uint64_t)g[11] << 56;
	if (!pgwalk_gva_is_canonical(pg, *target)) /* 48- or 57-bit, as the guest pages */
		return -EBADMSG;
	return 0;
}
