// SPDX-License-Identifier: MIT
// The virtio-mmio transport, version 2 (virtio 1.2, 4.2 Virtio Over MMIO): the register file
// of one device, feature negotiation (3.1.1), queue set-up, notifications, the interrupt line
// (level: InterruptStatus != 0) and DEVICE_NEEDS_RESET for a driver that broke a queue (2.1.2).
// Modern only: a driver that does not accept VIRTIO_F_VERSION_1 never gets FEATURES_OK.
#define pr_fmt(fmt) "vmm: virtio-mmio: " fmt
#include <endian.h>
#include <errno.h>
#include <string.h>

#include <hvprof/log.h>

#include "../vmm_internal.h"
#include "virtio.h"

/* 4.2.2 MMIO Device Register Layout */
enum {
	REG_MAGIC = 0x000,
	REG_VERSION = 0x004,
	REG_DEVICE_ID = 0x008,
	REG_VENDOR_ID = 0x00c,
	REG_DEVICE_FEATURES = 0x010,
	REG_DEVICE_FEATURES_SEL = 0x014,
	REG_DRIVER_FEATURES = 0x020,
	REG_DRIVER_FEATURES_SEL = 0x024,
	REG_QUEUE_SEL = 0x030,
	REG_QUEUE_NUM_MAX = 0x034,
	REG_QUEUE_NUM = 0x038,
	REG_QUEUE_READY = 0x044,
	REG_QUEUE_NOTIFY = 0x050,
	REG_INTERRUPT_STATUS = 0x060,
	REG_INTERRUPT_ACK = 0x064,
	REG_STATUS = 0x070,
	REG_QUEUE_DESC_LOW = 0x080,
	REG_QUEUE_DESC_HIGH = 0x084,
	REG_QUEUE_DRIVER_LOW = 0x090,
	REG_QUEUE_DRIVER_HIGH = 0x094,
	REG_QUEUE_DEVICE_LOW = 0x0a0,
	REG_QUEUE_DEVICE_HIGH = 0x0a4,
	REG_SHM_SEL = 0x0ac,
	REG_SHM_LEN_LOW = 0x0b0,
	REG_SHM_LEN_HIGH = 0x0b4,
	REG_SHM_BASE_LOW = 0x0b8,
	REG_SHM_BASE_HIGH = 0x0bc,
	REG_CONFIG_GENERATION = 0x0fc,
	REG_CONFIG = 0x100,
};

#define VIRTIO_MMIO_MAGIC 0x74726976u /* "virt" */
#define VIRTIO_MMIO_VERSION 2u
#define VIRTIO_MMIO_VENDOR 0x46505648u /* "HVPF" */

static void update_irq(struct virtio_mmio *m)
{
	if (m->set_irq)
		m->set_irq(m->irq_ctx, m->irq, m->isr != 0);
}

void virtio_mmio_init(struct virtio_mmio *m, const struct virtio_mmio_ops *ops, void *dev,
		      const struct vmm_ram *ram, unsigned int irq,
		      void (*set_irq)(void *ctx, unsigned int irq, int level), void *irq_ctx)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	m->ops = ops;
	m->dev = dev;
	m->ram = ram;
	m->irq = irq;
	m->set_irq = set_irq;
	m->irq_ctx = irq_ctx;
}

void virtio_mmio_fini(struct virtio_mmio *m)
{
	pthread_mutex_destroy(&m->lock);
}

/* Status 0: reset every register and queue (4.2.3.1 ... 2.4 Device Reset); the line drops. */
static void device_reset(struct virtio_mmio *m)
{
	m->status = 0;
	m->isr = 0;
	m->dev_features_sel = m->drv_features_sel = m->queue_sel = 0;
	m->driver_features = 0;
	m->broken = false;
	for (unsigned int i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
		virtq_reset(&m->vq[i]);
	if (m->ops->reset)
		m->ops->reset(m->dev);
	update_irq(m);
}

void virtio_mmio_broken(struct virtio_mmio *m)
{
	if (m->broken)
		return;
	m->broken = true;
	m->status |= VIRTIO_STATUS_NEEDS_RESET;
	if (m->status & VIRTIO_STATUS_DRIVER_OK) {
		m->isr |= VIRTIO_MMIO_INT_CONFIG;
		update_irq(m);
	}
}

void virtio_mmio_used(struct virtio_mmio *m, unsigned int q)
{
	if (q >= VIRTIO_MMIO_MAX_QUEUES || !virtq_wants_interrupt(&m->vq[q]))
		return;
	m->isr |= VIRTIO_MMIO_INT_VRING;
	update_irq(m);
}

/* The selected queue, or NULL when QueueSel names none. */
static struct virtq *sel_queue(struct virtio_mmio *m)
{
	/* SAFETY: queue_sel is a guest value; only indexes below the array size are used. */
	return m->queue_sel < VIRTIO_MMIO_MAX_QUEUES ? &m->vq[m->queue_sel] : NULL;
}

static uint32_t reg_read(struct virtio_mmio *m, uint32_t reg)
{
	struct virtq *q = sel_queue(m);

	switch (reg) {
	case REG_MAGIC:
		return VIRTIO_MMIO_MAGIC;
	case REG_VERSION:
		return VIRTIO_MMIO_VERSION;
	case REG_DEVICE_ID:
		return m->ops->device_id;
	case REG_VENDOR_ID:
		return VIRTIO_MMIO_VENDOR;
	case REG_DEVICE_FEATURES:
		return m->dev_features_sel < 2
			       ? (uint32_t)(m->ops->features >> (32 * m->dev_features_sel))
			       : 0;
	case REG_QUEUE_NUM_MAX:
		return q ? VIRTQ_MAX_SIZE : 0;
	case REG_QUEUE_READY:
		return q && q->ready;
	case REG_INTERRUPT_STATUS:
		return m->isr;
	case REG_STATUS:
		return m->status;
	case REG_SHM_LEN_LOW:
	case REG_SHM_LEN_HIGH:
		return 0xffffffffu; /* no shared memory region: length -1 (4.2.2) */
	case REG_CONFIG_GENERATION:
		return 0; /* the configuration never changes */
	default:
		return 0;
	}
}

/* Features may be written only between DRIVER and FEATURES_OK (3.1.1 steps 4-5). */
static void write_features(struct virtio_mmio *m, uint32_t v)
{
	unsigned int shift;

	if (m->drv_features_sel >= 2 || (m->status & VIRTIO_STATUS_FEATURES_OK))
		return;
	shift = 32 * m->drv_features_sel;
	m->driver_features &= ~(0xffffffffull << shift);
	m->driver_features |= (uint64_t)v << shift;
}

/* FEATURES_OK only for a subset of what the device offers that includes VERSION_1. */
static void write_status(struct virtio_mmio *m, uint32_t v)
{
	if (v == 0) {
		device_reset(m);
		return;
	}
	if ((v & VIRTIO_STATUS_FEATURES_OK) && !(m->status & VIRTIO_STATUS_FEATURES_OK)) {
		if ((m->driver_features & ~m->ops->features) ||
		    !(m->driver_features & (1ull << VIRTIO_F_VERSION_1)))
			v &= ~(uint32_t)VIRTIO_STATUS_FEATURES_OK;
		for (unsigned int i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
			m->vq[i].indirect = m->driver_features & (1ull << VIRTIO_F_INDIRECT_DESC);
	}
	/* the driver sets bits; NEEDS_RESET stays until a reset */
	m->status = (v & 0xff & ~(uint32_t)VIRTIO_STATUS_NEEDS_RESET) |
		    (m->status & VIRTIO_STATUS_NEEDS_RESET);
}

static void write_queue_half(uint64_t *field, bool high, uint32_t v)
{
	if (high)
		*field = (*field & 0xffffffffull) | ((uint64_t)v << 32);
	else
		*field = (*field & ~0xffffffffull) | v;
}

/* Queue registers: ignored once the queue is ready (4.2.3.2), QueueReady=1 checks it all. */
static void write_queue_reg(struct virtio_mmio *m, uint32_t reg, uint32_t v)
{
	struct virtq *q = sel_queue(m);

	if (!q)
		return;
	if (reg == REG_QUEUE_READY) {
		if (v == 0) {
			q->ready = false;
		} else if (!q->ready && virtq_enable(q, m->ram) != 0) {
			virtio_mmio_broken(m);
		}
		return;
	}
	if (q->ready)
		return;
	switch (reg) {
	case REG_QUEUE_NUM:
		q->size = v <= VIRTQ_MAX_SIZE ? (uint16_t)v : 0; /* 0: refused at QueueReady */
		break;
	case REG_QUEUE_DESC_LOW:
	case REG_QUEUE_DESC_HIGH:
		write_queue_half(&q->desc_gpa, reg == REG_QUEUE_DESC_HIGH, v);
		break;
	case REG_QUEUE_DRIVER_LOW:
	case REG_QUEUE_DRIVER_HIGH:
		write_queue_half(&q->avail_gpa, reg == REG_QUEUE_DRIVER_HIGH, v);
		break;
	case REG_QUEUE_DEVICE_LOW:
	case REG_QUEUE_DEVICE_HIGH:
		write_queue_half(&q->used_gpa, reg == REG_QUEUE_DEVICE_HIGH, v);
		break;
	}
}

static bool reg_write(struct virtio_mmio *m, uint32_t reg, uint32_t v)
{
	switch (reg) {
	case REG_DEVICE_FEATURES_SEL:
		m->dev_features_sel = v;
		return true;
	case REG_DRIVER_FEATURES:
		write_features(m, v);
		return true;
	case REG_DRIVER_FEATURES_SEL:
		m->drv_features_sel = v;
		return true;
	case REG_QUEUE_SEL:
		m->queue_sel = v;
		return true;
	case REG_QUEUE_NUM:
	case REG_QUEUE_READY:
	case REG_QUEUE_DESC_LOW:
	case REG_QUEUE_DESC_HIGH:
	case REG_QUEUE_DRIVER_LOW:
	case REG_QUEUE_DRIVER_HIGH:
	case REG_QUEUE_DEVICE_LOW:
	case REG_QUEUE_DEVICE_HIGH:
		write_queue_reg(m, reg, v);
		return true;
	case REG_QUEUE_NOTIFY:
		/* SAFETY: v is the guest's queue index, checked against the array size. */
		if (v < VIRTIO_MMIO_MAX_QUEUES && m->vq[v].ready && !m->broken &&
		    (m->status & VIRTIO_STATUS_DRIVER_OK) && m->ops->notify)
			m->ops->notify(m->dev, m, v);
		return true;
	case REG_INTERRUPT_ACK:
		m->isr &= ~v;
		update_irq(m);
		return true;
	case REG_STATUS:
		write_status(m, v);
		return true;
	case REG_SHM_SEL:
		return true;
	default:
		return false; /* read-only or reserved */
	}
}

bool virtio_mmio_access(struct virtio_mmio *m, uint64_t off, bool is_write, uint8_t *data,
			uint32_t len)
{
	bool ok = true;
	uint32_t v = 0;

	if (off >= VIRTIO_MMIO_SIZE || len == 0 || len > 8 || off + len > VIRTIO_MMIO_SIZE) {
		if (!is_write)
			memset(data, 0, len > 8 ? 8 : len);
		return false;
	}
	pthread_mutex_lock(&m->lock);
	if (off >= REG_CONFIG) {
		/* device configuration: any width the driver likes (4.2.2.2); writes ignored */
		if (!is_write)
			m->ops->config_read(m->dev, (uint32_t)(off - REG_CONFIG), data, len);
	} else if (len != 4 || (off & 3)) {
		ok = false; /* 4.2.2.2: registers are accessed as aligned 32-bit words */
		if (!is_write)
			memset(data, 0, len);
	} else if (is_write) {
		memcpy(&v, data, 4);
		ok = reg_write(m, (uint32_t)off, le32toh(v));
	} else {
		v = htole32(reg_read(m, (uint32_t)off));
		memcpy(data, &v, 4);
	}
	pthread_mutex_unlock(&m->lock);
	return ok;
}
