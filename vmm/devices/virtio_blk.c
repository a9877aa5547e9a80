// SPDX-License-Identifier: MIT
// virtio-blk (virtio 1.2, 5.2 Block Device) over a host disk (disk.c): reads, writes, flush and
// GET_ID. A request the disk cannot serve (past the end, a write to a read-only disk, a length
// that is not whole sectors, an unknown type) is answered with an error status and counted; a
// chain with nowhere to put a status breaks the device (DEVICE_NEEDS_RESET). Work per
// notification is bounded by the queue size. Requests are served on the thread that handles the
// notification: on PVM hosts the guest's emulated block layer takes ~10 ms per 4 KiB request
// and this side ~31 us, so an I/O thread would not pay (measured: README, "Disks").
#define pr_fmt(fmt) "vmm: virtio-blk: " fmt
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/log.h>

#include "../vmm_internal.h"
#include "virtio.h"

/* 5.2.3 Feature bits */
#define VIRTIO_BLK_F_SEG_MAX 2
#define VIRTIO_BLK_F_RO 5
#define VIRTIO_BLK_F_BLK_SIZE 6
#define VIRTIO_BLK_F_FLUSH 9

/* 5.2.6 Device Operation: request types and status values */
#define VIRTIO_BLK_T_IN 0
#define VIRTIO_BLK_T_OUT 1
#define VIRTIO_BLK_T_FLUSH 4
#define VIRTIO_BLK_T_GET_ID 8
#define VIRTIO_BLK_S_OK 0
#define VIRTIO_BLK_S_IOERR 1
#define VIRTIO_BLK_S_UNSUPP 2

#define REQ_HDR_BYTES 16 /* le32 type, le32 reserved, le64 sector */

/* 5.2.4 Device configuration layout: capacity (le64 @0), seg_max (le32 @12), blk_size
 * (le32 @20); the rest reads as 0. */
static void blk_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	const struct virtio_blk *b = dev;
	uint8_t cfg[64] = { 0 };
	uint64_t cap = htole64(b->disk.sectors);
	uint32_t seg_max = htole32(VIRTIO_BLK_SEG_MAX), blk_size = htole32(DISK_SECTOR);

	memcpy(cfg, &cap, 8);
	memcpy(cfg + 12, &seg_max, 4);
	memcpy(cfg + 20, &blk_size, 4);
	for (uint32_t i = 0; i < len; i++) /* SAFETY: bytes past cfg read as 0 */
		data[i] = (uint64_t)off + i < sizeof(cfg) ? cfg[off + i] : 0;
}

/* Copy between a buffer and the part [@skip, @skip + @len) of an iovec. */
static int iov_copy(const struct iovec *iov, unsigned int n, uint64_t skip, void *buf,
		    uint64_t len, bool to_iov)
{
	struct iovec part[VIRTQ_MAX_SEGS];
	uint8_t *p = buf;
	int cnt = iov_slice(iov, n, skip, len, part, VIRTQ_MAX_SEGS);

	if (cnt < 0)
		return cnt;
	for (int i = 0; i < cnt; i++) {
		if (to_iov)
			memcpy(part[i].iov_base, p, part[i].iov_len);
		else
			memcpy(p, part[i].iov_base, part[i].iov_len);
		p += part[i].iov_len;
	}
	return 0;
}

/* A read or write of whole sectors inside the disk; *@done: data bytes moved. */
static uint8_t blk_rw(struct virtio_blk *b, const struct virtq_chain *c, uint64_t sector,
		      bool write, uint32_t *done)
{
	const struct iovec *iov = write ? c->iov : c->iov + c->n_out;
	unsigned int n = write ? c->n_out : c->n_in;
	uint64_t len = write ? c->out_len - REQ_HDR_BYTES : c->in_len - 1;
	struct iovec data[VIRTQ_MAX_SEGS];
	int cnt, err;

	if (len % DISK_SECTOR || len > VIRTIO_BLK_MAX_REQUEST)
		return VIRTIO_BLK_S_IOERR;
	/* SAFETY: [sector, sector + len / 512) must lie inside the disk (no overflow: the
	 * subtraction is made only when sector <= sectors). */
	if (sector > b->disk.sectors || len / DISK_SECTOR > b->disk.sectors - sector)
		return VIRTIO_BLK_S_IOERR;
	if (write && b->disk.readonly)
		return VIRTIO_BLK_S_IOERR;
	/* data: after the header (write), or before the status byte (read) */
	cnt = iov_slice(iov, n, write ? REQ_HDR_BYTES : 0, len, data, VIRTQ_MAX_SEGS);
	if (cnt < 0)
		return VIRTIO_BLK_S_IOERR;
	if (write)
		err = disk_write(&b->disk, data, (unsigned int)cnt, sector * DISK_SECTOR, len);
	else
		err = disk_read(&b->disk, data, (unsigned int)cnt, sector * DISK_SECTOR, len);
	if (err) {
		pr_debug(LOG_VMM, "%s: %s of %llu bytes at sector %llu: %s", b->id,
			 write ? "write" : "read", (unsigned long long)len,
			 (unsigned long long)sector, hvp_strerror(err));
		return VIRTIO_BLK_S_IOERR;
	}
	if (write) {
		b->stats.writes++;
		b->stats.write_bytes += len;
	} else {
		b->stats.reads++;
		b->stats.read_bytes += len;
		*done = (uint32_t)len;
	}
	return VIRTIO_BLK_S_OK;
}

/* GET_ID: up to 20 bytes of the serial, NUL-padded (5.2.6). */
static uint8_t blk_get_id(struct virtio_blk *b, const struct virtq_chain *c, uint32_t *done)
{
	uint64_t len = c->in_len - 1 < VIRTIO_BLK_ID_BYTES ? c->in_len - 1 : VIRTIO_BLK_ID_BYTES;

	if (iov_copy(c->iov + c->n_out, c->n_in, 0, b->id, len, true) != 0)
		return VIRTIO_BLK_S_IOERR;
	*done = (uint32_t)len;
	return VIRTIO_BLK_S_OK;
}

/*
 * Serve one chain: header in the readable part, data, status in the last writable byte.
 * Return: 0 and *@written (bytes written to the chain, status included); -EBADMSG the chain
 * has no writable byte for the status.
 */
static int blk_serve(struct virtio_blk *b, const struct virtq_chain *c, uint32_t *written)
{
	struct {
		uint32_t type, reserved;
		uint64_t sector;
	} hdr;
	uint32_t done = 0;
	uint8_t status;

	if (c->in_len == 0)
		return -EBADMSG;
	if (c->out_len < REQ_HDR_BYTES ||
	    iov_copy(c->iov, c->n_out, 0, &hdr, REQ_HDR_BYTES, false) != 0) {
		status = VIRTIO_BLK_S_IOERR;
	} else {
		switch (le32toh(hdr.type)) {
		case VIRTIO_BLK_T_IN:
		case VIRTIO_BLK_T_OUT:
			status = blk_rw(b, c, le64toh(hdr.sector),
					le32toh(hdr.type) == VIRTIO_BLK_T_OUT, &done);
			break;
		case VIRTIO_BLK_T_FLUSH:
			status = disk_flush(&b->disk) ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK;
			b->stats.flushes++;
			break;
		case VIRTIO_BLK_T_GET_ID:
			status = blk_get_id(b, c, &done);
			break;
		default:
			status = VIRTIO_BLK_S_UNSUPP;
			break;
		}
	}
	if (status != VIRTIO_BLK_S_OK)
		b->stats.errors++;
	/* SAFETY: the status is the last byte of the last writable segment (in_len >= 1, and
	 * zero-length segments are never in the chain). */
	{
		const struct iovec *last = &c->iov[c->n_out + c->n_in - 1];

		((uint8_t *)last->iov_base)[last->iov_len - 1] = status;
	}
	*written = done + 1;
	return 0;
}

/* A notification: serve what the driver made available, at most one queue's worth. */
static void blk_notify(void *dev, struct virtio_mmio *m, unsigned int qi)
{
	struct virtio_blk *b = dev;
	struct virtq *q = &m->vq[qi];
	bool pushed = false;

	for (unsigned int i = 0; i < q->size; i++) {
		uint32_t written = 0;
		int err = virtq_pop(q, m->ram, &b->chain);

		if (err == -ENOENT)
			break;
		if (!err)
			err = blk_serve(b, &b->chain, &written);
		if (err) {
			b->stats.broken++;
			virtio_mmio_broken(m);
			break;
		}
		virtq_push(q, b->chain.head, written);
		pushed = true;
	}
	if (pushed)
		virtio_mmio_used(m, qi);
}

int virtio_blk_create(const struct vmm_disk *cfg, const char *id, const struct vmm_ram *ram,
		      unsigned int irq, void (*set_irq)(void *ctx, unsigned int irq, int level),
		      void *irq_ctx, struct virtio_blk **out)
{
	struct virtio_blk *b;
	int err;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	err = disk_open(&b->disk, cfg);
	if (err) {
		free(b);
		return err;
	}
	if (b->disk.tail_bytes)
		pr_warn("%s: its last %u bytes are not a whole 512-byte sector: the guest does not "
			"see them", b->disk.path, b->disk.tail_bytes);
	if (cfg->snapshot) {
		err = disk_overlay(&b->disk);
		if (err) {
			disk_close(&b->disk);
			free(b);
			return err;
		}
	}
	b->ops = (struct virtio_mmio_ops){
		.device_id = VIRTIO_ID_BLOCK,
		.features = (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_F_INDIRECT_DESC) |
			    (1ull << VIRTIO_BLK_F_SEG_MAX) | (1ull << VIRTIO_BLK_F_BLK_SIZE) |
			    (1ull << VIRTIO_BLK_F_FLUSH) |
			    (cfg->readonly ? 1ull << VIRTIO_BLK_F_RO : 0),
		.config_read = blk_config_read,
		.notify = blk_notify,
	};
	snprintf(b->id, sizeof(b->id), "%s", id ? id : "");
	virtio_mmio_init(&b->mmio, &b->ops, b, ram, irq, set_irq, irq_ctx);
	*out = b;
	return 0;
}

void virtio_blk_destroy(struct virtio_blk *b)
{
	if (!b)
		return;
	virtio_mmio_fini(&b->mmio);
	disk_close(&b->disk);
	free(b);
}
