// SPDX-License-Identifier: MIT
// Fuzz target: the split-virtqueue parser (vmm/devices/virtqueue.c) and, behind it, virtio-blk
// over virtio-mmio (virtio_blk.c, virtio_mmio.c, disk.c), driven by a hostile driver's rings.
//
// Input: a 16-byte header, then guest RAM (gpa 0 = the first byte after the header; at most
// 64 KiB; every gpa beyond it is outside RAM).
//   u8 mode (bit 0: VIRTIO_F_INDIRECT_DESC negotiated; bit 1: through virtio-blk, against a
//   64-sector disk in a memfd); u8 log2 of the queue size (mod 9: 1..256); u8 chains to take
//   (queue mode); u8 reserved; le32 desc_gpa, avail_gpa, used_gpa.
// Invariants: every buffer of a chain lies inside guest RAM; a chain has at most VIRTQ_MAX_SEGS
// segments and its lengths add up; errors are -ENOENT, -EBADMSG or -ERANGE only; the device
// never changes the disk's size, publishes at most one queue's worth per notification, and a
// device that reports DEVICE_NEEDS_RESET has counted it.
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm_internal.h"
#include "devices/virtio.h"
#include "fuzz.h"

#define HDR 16
#define RAM_MAX (64u << 10)
#define DISK_BYTES (64u * DISK_SECTOR)

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void check_chain(const struct virtq_chain *c, const uint8_t *ram, size_t len)
{
	uint64_t out = 0, in = 0;

	FUZZ_CHECK(c->n_out + c->n_in <= VIRTQ_MAX_SEGS);
	for (unsigned int i = 0; i < c->n_out + c->n_in; i++) {
		const uint8_t *b = c->iov[i].iov_base;

		FUZZ_CHECK(b >= ram && c->iov[i].iov_len <= len && b - ram <= (ptrdiff_t)(len - c->iov[i].iov_len));
		if (i < c->n_out)
			out += c->iov[i].iov_len;
		else
			in += c->iov[i].iov_len;
	}
	FUZZ_CHECK(out == c->out_len && in == c->in_len);
}

static void run_queue(struct virtq *q, const struct vmm_ram *ram, unsigned int pops)
{
	static struct virtq_chain c;

	for (unsigned int i = 0; i < pops; i++) {
		int err = virtq_pop(q, ram, &c);

		FUZZ_LOG("pop %u: %d\n", i, err);
		FUZZ_CHECK(err == 0 || err == -ENOENT || err == -EBADMSG || err == -ERANGE);
		if (err)
			return;
		check_chain(&c, ram->hva, ram->size);
		virtq_push(q, c.head, (uint32_t)c.in_len);
	}
}

static void wr(struct virtio_mmio *m, uint32_t off, uint32_t v)
{
	(void)virtio_mmio_access(m, off, true, (uint8_t *)&v, 4);
}

/* The device set up as a driver would, the queue from the header, one notification. */
static void run_blk(const uint8_t *data, const struct vmm_ram *ram, uint16_t qsize, bool indirect)
{
	static int fd = -1;
	char path[64];
	struct vmm_disk cfg = { .path = path };
	struct virtio_blk *b;
	struct stat st;
	uint64_t features = (1ull << VIRTIO_F_VERSION_1) | (indirect ? 1ull << VIRTIO_F_INDIRECT_DESC : 0);

	if (fd < 0) {
		fd = memfd_create("fuzz-disk", 0);
		FUZZ_CHECK(fd >= 0 && ftruncate(fd, DISK_BYTES) == 0);
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (virtio_blk_create(&cfg, "fuzz", ram, 5, NULL, NULL, &b) != 0)
		return;
	wr(&b->mmio, 0x070, 1 | 2);
	wr(&b->mmio, 0x024, 0);
	wr(&b->mmio, 0x020, (uint32_t)features);
	wr(&b->mmio, 0x024, 1);
	wr(&b->mmio, 0x020, (uint32_t)(features >> 32));
	wr(&b->mmio, 0x070, 1 | 2 | 8);
	wr(&b->mmio, 0x038, qsize);
	wr(&b->mmio, 0x080, get32(data + 4));
	wr(&b->mmio, 0x090, get32(data + 8));
	wr(&b->mmio, 0x0a0, get32(data + 12));
	wr(&b->mmio, 0x044, 1);
	wr(&b->mmio, 0x070, 1 | 2 | 8 | 4);
	wr(&b->mmio, 0x050, 0);
	FUZZ_LOG("blk: status 0x%x reads %llu writes %llu errors %llu broken %llu\n",
		 b->mmio.status, (unsigned long long)b->stats.reads,
		 (unsigned long long)b->stats.writes, (unsigned long long)b->stats.errors,
		 (unsigned long long)b->stats.broken);
	FUZZ_CHECK((uint16_t)b->mmio.vq[0].used_idx <= qsize);
	FUZZ_CHECK(!(b->mmio.status & VIRTIO_STATUS_NEEDS_RESET) || b->mmio.broken);
	FUZZ_CHECK(fstat(fd, &st) == 0 && st.st_size == DISK_BYTES);
	virtio_blk_destroy(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vmm_ram ram = { 0 };
	struct virtq q;
	uint16_t qsize;
	size_t len;
	uint8_t *buf;

	if (size < HDR)
		return 0;
	len = size - HDR > RAM_MAX ? RAM_MAX : size - HDR;
	buf = malloc(len ? len : 1); /* exactly RAM: ASan sees a byte past it */
	if (!buf)
		return 0;
	memcpy(buf, data + HDR, len);
	ram.hva = buf;
	ram.size = len;
	ram.n_slots = 1;
	ram.slots[0] = (struct vmm_ram_slot){ .gpa = 0, .size = len, .hva = buf };
	qsize = (uint16_t)(1u << (data[1] % 9));

	if (data[0] & 2) {
		run_blk(data, &ram, qsize, data[0] & 1);
	} else {
		virtq_reset(&q);
		q.size = qsize;
		q.indirect = data[0] & 1;
		q.desc_gpa = get32(data + 4);
		q.avail_gpa = get32(data + 8);
		q.used_gpa = get32(data + 12);
		if (virtq_enable(&q, &ram) == 0)
			run_queue(&q, &ram, data[2]);
	}
	free(buf);
	return 0;
}
