// SPDX-License-Identifier: MIT
// MP floating pointer and configuration table (Intel MultiProcessor Specification 1.4, ch. 4):
// without one, Linux 6.1 scans low memory for it for seconds under emulation.
#define pr_fmt(fmt) "vmm: mptable: " fmt
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/log.h>

#include "vmm_internal.h"

#define MP_LAPIC_GPA 0xfee00000u
#define MP_IOAPIC_GPA 0xfec00000u
#define MP_TABLE_MAX 1024

struct mpf_intel {
	char signature[4]; /* "_MP_" */
	uint32_t physptr;
	uint8_t length;    /* in 16-byte units */
	uint8_t specification;
	uint8_t checksum;
	uint8_t feature[5];
} __attribute__((packed));

struct mpc_table {
	char signature[4]; /* "PCMP" */
	uint16_t length;
	uint8_t spec;
	uint8_t checksum;
	char oem[8];
	char productid[12];
	uint32_t oemptr;
	uint16_t oemsize;
	uint16_t oemcount;
	uint32_t lapic;
	uint16_t ext_len;
	uint8_t ext_checksum;
	uint8_t reserved;
} __attribute__((packed));

struct mpc_cpu {
	uint8_t type; /* 0 */
	uint8_t apicid;
	uint8_t apicver;
	uint8_t cpuflag; /* bit 0: enabled, bit 1: bootstrap processor */
	uint32_t cpufeature;
	uint32_t featureflag;
	uint32_t reserved[2];
} __attribute__((packed));

struct mpc_bus {
	uint8_t type; /* 1 */
	uint8_t busid;
	char bustype[6];
} __attribute__((packed));

struct mpc_ioapic {
	uint8_t type; /* 2 */
	uint8_t apicid;
	uint8_t apicver;
	uint8_t flags;
	uint32_t apicaddr;
} __attribute__((packed));

struct mpc_intsrc {
	uint8_t type; /* 3: I/O interrupt, 4: local interrupt */
	uint8_t irqtype;
	uint16_t irqflag;
	uint8_t srcbus;
	uint8_t srcbusirq;
	uint8_t dstapic;
	uint8_t dstirq;
} __attribute__((packed));

static uint8_t checksum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint8_t sum = 0;

	for (size_t i = 0; i < len; i++)
		sum += b[i];
	return (uint8_t)-sum;
}

int mptable_write(struct vmm_ram *ram, uint64_t gpa, unsigned int cpus)
{
	uint8_t buf[MP_TABLE_MAX] = { 0 };
	struct mpf_intel *mpf = (struct mpf_intel *)buf;
	struct mpc_table *mpc = (struct mpc_table *)(buf + sizeof(*mpf));
	size_t off = sizeof(*mpf) + sizeof(*mpc);
	uint16_t count = 0;
	uint8_t ioapic_id = (uint8_t)cpus;

	/* 16 + 44 + 20*cpus + 8 + 8 + 16*8 + 2*8 bytes must fit below 1 KiB */
	if (cpus == 0 || cpus > VMM_MAX_VCPUS ||
	    off + cpus * sizeof(struct mpc_cpu) + 8 + 8 + 18 * 8 > sizeof(buf))
		return -EINVAL;

	for (unsigned int i = 0; i < cpus; i++) {
		struct mpc_cpu cpu = {
			.type = 0,
			.apicid = (uint8_t)i,
			.apicver = 0x14,
			.cpuflag = 1 | (i == 0 ? 2 : 0),
			.cpufeature = 0x600,
			.featureflag = 0x201, /* FPU, APIC */
		};
		memcpy(buf + off, &cpu, sizeof(cpu));
		off += sizeof(cpu);
		count++;
	}
	{
		struct mpc_bus bus = { .type = 1, .busid = 0, .bustype = "ISA   " };

		memcpy(buf + off, &bus, sizeof(bus));
		off += sizeof(bus);
		count++;
	}
	{
		struct mpc_ioapic io = { .type = 2, .apicid = ioapic_id, .apicver = 0x11,
					 .flags = 1, .apicaddr = MP_IOAPIC_GPA };

		memcpy(buf + off, &io, sizeof(io));
		off += sizeof(io);
		count++;
	}
	for (uint8_t irq = 0; irq < 16; irq++) {
		struct mpc_intsrc src = { .type = 3, .irqtype = 0, .irqflag = 0, .srcbus = 0,
					  .srcbusirq = irq, .dstapic = ioapic_id, .dstirq = irq };

		memcpy(buf + off, &src, sizeof(src));
		off += sizeof(src);
		count++;
	}
	{
		/* LINT0 = ExtINT (the 8259 PIC), LINT1 = NMI, for every local APIC. */
		struct mpc_intsrc l0 = { .type = 4, .irqtype = 3, .dstapic = 0xff, .dstirq = 0 };
		struct mpc_intsrc l1 = { .type = 4, .irqtype = 1, .dstapic = 0xff, .dstirq = 1 };

		memcpy(buf + off, &l0, sizeof(l0));
		off += sizeof(l0);
		memcpy(buf + off, &l1, sizeof(l1));
		off += sizeof(l1);
		count += 2;
	}

	memcpy(mpc->signature, "PCMP", 4);
	mpc->length = (uint16_t)(off - sizeof(*mpf));
	mpc->spec = 4;
	memcpy(mpc->oem, "HVPROF  ", 8);
	memcpy(mpc->productid, "HVPROF VMM  ", 12);
	mpc->oemcount = count;
	mpc->lapic = MP_LAPIC_GPA;
	mpc->checksum = checksum(mpc, mpc->length);

	memcpy(mpf->signature, "_MP_", 4);
	mpf->physptr = (uint32_t)(gpa + sizeof(*mpf));
	mpf->length = 1;
	mpf->specification = 4;
	mpf->checksum = checksum(mpf, sizeof(*mpf));

	return ram_write(ram, gpa, buf, off);
}
