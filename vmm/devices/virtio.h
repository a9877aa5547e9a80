/* SPDX-License-Identifier: MIT */
/*
 * Private to vmm/: the virtio devices. Split virtqueues (virtqueue.c; virtio 1.2, 2.7 Split
 * Virtqueues), the virtio-mmio transport (virtio_mmio.c; 4.2 Virtio Over MMIO, version 2), the
 * block device (virtio_blk.c; 5.2 Block Device) over a host disk file (disk.c), and the VM's
 * disks (disks.c). Every address, index and length the guest gives is checked here; the queue
 * parser works on a struct vmm_ram, so tests and the fuzz target drive it over a byte array.
 */
#ifndef HVPROF_VMM_VIRTIO_H
#define HVPROF_VMM_VIRTIO_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <hvprof/vmm.h>

struct vmm_ram;

/* ---------------------------------------------------------------- split virtqueues (2.7) */

#define VIRTQ_MAX_SIZE 256      /* QueueNumMax: descriptors per queue (a power of 2) */
#define VIRTQ_MAX_SEGS VIRTQ_MAX_SIZE /* descriptors one chain may walk, indirect included */

#define VIRTQ_DESC_F_NEXT 1
#define VIRTQ_DESC_F_WRITE 2
#define VIRTQ_DESC_F_INDIRECT 4
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1

#define VIRTIO_F_INDIRECT_DESC 28 /* feature bit numbers (6 Reserved Feature Bits) */
#define VIRTIO_F_VERSION_1 32

/**
 * struct virtq - one split virtqueue as the driver configured it, and the device's cursor.
 * @size: Queue Size (QueueNum), a power of 2, 1..VIRTQ_MAX_SIZE once ready.
 * @desc_gpa/@avail_gpa/@used_gpa: the three areas (QueueDesc, QueueDriver, QueueDevice).
 * @desc/@avail/@used: their HVAs, set by virtq_enable() after checking that each area lies in
 *   guest RAM and is aligned (16, 2 and 4 bytes); NULL before.
 * @last_avail: the next available-ring entry the device takes (free-running, mod 2^16).
 * @used_idx: the device's copy of used->idx (free-running).
 * @indirect: VIRTIO_F_INDIRECT_DESC was negotiated.
 */
struct virtq {
	uint16_t size;
	bool ready;
	bool indirect;
	uint64_t desc_gpa, avail_gpa, used_gpa;
	uint8_t *desc, *avail, *used;
	uint16_t last_avail;
	uint16_t used_idx;
};

/**
 * struct virtq_chain - one descriptor chain taken from the available ring, as host buffers.
 * @head: the head descriptor's index (what virtq_push returns to the driver).
 * @iov: @n_out device-readable segments, then @n_in device-writable ones (2.7.4.2: readable
 *   first), each inside guest RAM; zero-length descriptors are left out.
 * @out_len/@in_len: their total bytes (each at most 2^32 * VIRTQ_MAX_SEGS, no overflow).
 */
struct virtq_chain {
	uint16_t head;
	unsigned int n_out, n_in;
	uint64_t out_len, in_len;
	struct iovec iov[VIRTQ_MAX_SEGS];
};

/**
 * virtq_enable - check the areas of @q (size, GPAs) against @ram and map them (QueueReady=1).
 * Return: 0; -EINVAL a size that is 0, above VIRTQ_MAX_SIZE or not a power of 2, or a
 * misaligned area; -ERANGE an area outside guest RAM. @q is unchanged on error.
 */
int virtq_enable(struct virtq *q, const struct vmm_ram *ram) __must_check;

/** virtq_reset - forget the queue's configuration and cursor (device reset, 2.4). */
void virtq_reset(struct virtq *q);

/**
 * virtq_pop - take the next available chain (2.7.13.4 ... 2.7.5.3 indirect descriptors).
 * Bounded: at most VIRTQ_MAX_SEGS descriptors are read per chain; the driver cannot make the
 * device loop.
 * Return: 0 and @c filled (the chain is consumed: answer it with virtq_push); -ENOENT none
 * available; -EBADMSG the driver broke the queue (more entries made available than the queue
 * has, a head or next index >= size, a chain longer than the bound, an indirect table that is
 * nested, misaligned, empty or chained, a readable descriptor after a writable one); -ERANGE a
 * buffer outside guest RAM. After an error the device should be marked broken (2.1.2).
 */
int virtq_pop(struct virtq *q, const struct vmm_ram *ram, struct virtq_chain *c) __must_check;

/**
 * virtq_push - put @head on the used ring with @len bytes written (2.7.8), and publish it.
 */
void virtq_push(struct virtq *q, uint16_t head, uint32_t len);

/**
 * virtq_wants_interrupt - whether the driver asks to be interrupted for used buffers: it has
 * not set VIRTQ_AVAIL_F_NO_INTERRUPT (2.7.7; read after a full barrier, 2.7.10).
 */
bool virtq_wants_interrupt(const struct virtq *q);

/** iov_slice - the part [@skip, @skip + @len) of @src (@n segments) as at most @max segments
 * in @dst. Return: the number of segments, or -ERANGE when @src is shorter or @max too small. */
int iov_slice(const struct iovec *src, unsigned int n, uint64_t skip, uint64_t len,
	      struct iovec *dst, unsigned int max) __must_check;

/* ---------------------------------------------------------------- virtio-mmio (4.2) */

#define VIRTIO_MMIO_SIZE 0x1000 /* bytes of MMIO per device */
#define VIRTIO_MMIO_MAX_QUEUES 1

#define VIRTIO_STATUS_ACKNOWLEDGE 1
#define VIRTIO_STATUS_DRIVER 2
#define VIRTIO_STATUS_DRIVER_OK 4
#define VIRTIO_STATUS_FEATURES_OK 8
#define VIRTIO_STATUS_NEEDS_RESET 64
#define VIRTIO_STATUS_FAILED 128

#define VIRTIO_MMIO_INT_VRING 1  /* InterruptStatus: used buffer notification */
#define VIRTIO_MMIO_INT_CONFIG 2 /* configuration change (and DEVICE_NEEDS_RESET) */

struct virtio_mmio;

/**
 * struct virtio_mmio_ops - what a device behind the transport provides.
 * @device_id: 5 Device Types (2: block). @features: the bits the device offers.
 * @config_read: read @len bytes (1, 2, 4 or 8) at @off of the device configuration space.
 * @notify: the driver notified queue @q (DRIVER_OK, queue ready, device not broken); runs
 *   with the transport's lock held: take chains with virtq_pop, answer with virtq_push, then
 *   call virtio_mmio_used().
 * @reset: the driver wrote 0 to Status.
 */
struct virtio_mmio_ops {
	uint32_t device_id;
	uint64_t features;
	void (*config_read)(void *dev, uint32_t off, uint8_t *data, uint32_t len);
	void (*notify)(void *dev, struct virtio_mmio *m, unsigned int q);
	void (*reset)(void *dev);
};

/**
 * struct virtio_mmio - a virtio-mmio device's registers (4.2.2 MMIO Device Register Layout).
 * @lock: serializes every register access and the device's request handling (vCPUs of an SMP
 *   guest touch one device at once).
 * @set_irq: raise (1) or lower (0) interrupt line @irq: level = InterruptStatus != 0.
 * @broken: DEVICE_NEEDS_RESET was set: notifications are ignored until the driver resets.
 */
struct virtio_mmio {
	pthread_mutex_t lock;
	const struct virtio_mmio_ops *ops;
	void *dev;
	const struct vmm_ram *ram;
	unsigned int irq;
	void (*set_irq)(void *ctx, unsigned int irq, int level);
	void *irq_ctx;
	uint32_t status, isr;
	uint32_t dev_features_sel, drv_features_sel, queue_sel;
	uint64_t driver_features;
	bool broken;
	struct virtq vq[VIRTIO_MMIO_MAX_QUEUES];
};

/** virtio_mmio_init - a reset transport for @ops/@dev over @ram, interrupting on @irq. */
void virtio_mmio_init(struct virtio_mmio *m, const struct virtio_mmio_ops *ops, void *dev,
		      const struct vmm_ram *ram, unsigned int irq,
		      void (*set_irq)(void *ctx, unsigned int irq, int level), void *irq_ctx);
void virtio_mmio_fini(struct virtio_mmio *m);

/**
 * virtio_mmio_access - one guest access at byte @off of the device's window: @len bytes at
 * @data (read: filled; write: the value, little-endian).
 * Return: true handled; false an access the transport refuses (a register below 0x100 not
 * read or written as an aligned 32-bit word, a read-only register written...): the caller
 * counts it (mmio_unhandled); reads of it return 0.
 */
bool virtio_mmio_access(struct virtio_mmio *m, uint64_t off, bool is_write, uint8_t *data,
			uint32_t len);

/** virtio_mmio_used - used buffers were pushed on queue @q: interrupt if the driver wants. */
void virtio_mmio_used(struct virtio_mmio *m, unsigned int q);

/** virtio_mmio_broken - the driver broke a queue: set DEVICE_NEEDS_RESET and tell it (2.1.2). */
void virtio_mmio_broken(struct virtio_mmio *m);

/* ---------------------------------------------------------------- a host disk file (disk.c) */

#define DISK_SECTOR 512u

/**
 * struct disk - the host side of a disk: a raw image file or block device, opened and locked,
 * with a private overlay for snapshot disks (written sectors live in an unlinked temporary
 * file, a bitmap says which).
 */
struct disk {
	int fd;
	int overlay_fd;      /* -1 unless snapshot */
	uint64_t *written;   /* snapshot: bit per sector in the overlay */
	uint64_t sectors;    /* capacity in 512-byte sectors */
	unsigned int tail_bytes; /* bytes after the last whole sector (the guest does not see them) */
	bool readonly;
	char *path;
};

/**
 * disk_open - open @cfg->path as a disk (read-write unless ro or snapshot) and lock it (an
 * OFD lock: shared for ro/snapshot, exclusive for read-write), refusing what is not a raw
 * image. Logs one line naming the file and what to do.
 * Return: 0 and @d; -ENOENT/-EACCES/...; -EISDIR a directory; -EINVAL not a regular file or
 * block device; -ENOTSUP a qcow2 image; -ENODATA smaller than one sector; -EBUSY locked by
 * another process.
 */
int disk_open(struct disk *d, const struct vmm_disk *cfg) __must_check;
/**
 * disk_overlay - give an open disk its snapshot overlay: an unlinked sparse file of the disk's
 * size in $TMPDIR (else /var/tmp) and a bitmap of the sectors written there. Logs failures.
 * Return: 0; -errno of the file; -ENOMEM.
 */
int disk_overlay(struct disk *d) __must_check;
void disk_close(struct disk *d);

/** disk_read - read @len bytes at byte @off (sector-aligned, in range) into @iov. 0; -errno. */
int disk_read(struct disk *d, const struct iovec *iov, unsigned int n, uint64_t off,
	      uint64_t len) __must_check;
/** disk_write - write @iov (@len bytes) at byte @off (sector-aligned, in range). 0; -errno. */
int disk_write(struct disk *d, const struct iovec *iov, unsigned int n, uint64_t off,
	       uint64_t len) __must_check;
/** disk_flush - make written data durable (fdatasync; nothing for snapshot). 0; -errno. */
int disk_flush(struct disk *d) __must_check;

/* ---------------------------------------------------------------- virtio-blk (5.2) */

#define VIRTIO_ID_BLOCK 2
#define VIRTIO_BLK_SEG_MAX (VIRTQ_MAX_SIZE - 2)  /* data segments; + header + status */
#define VIRTIO_BLK_MAX_REQUEST (32u << 20)       /* bytes of data per request */
#define VIRTIO_BLK_ID_BYTES 20

/** struct virtio_blk_stats - what a block device counted (VMM_COUNTER_LIST: disk_*). */
struct virtio_blk_stats {
	uint64_t reads, writes, flushes, read_bytes, write_bytes, errors, broken;
};

struct virtio_blk {
	struct virtio_mmio mmio;
	struct disk disk;
	struct virtio_mmio_ops ops;
	char id[VIRTIO_BLK_ID_BYTES + 1];
	struct virtio_blk_stats stats;
	struct virtq_chain chain; /* scratch for the request being served (under mmio.lock) */
};

/**
 * virtio_blk_create - a virtio-blk device over @cfg's file, serving requests against @ram,
 * interrupting on @irq through @set_irq. @id: the serial VIRTIO_BLK_T_GET_ID answers.
 * Return: 0 and *@out (free with virtio_blk_destroy); -errno of disk_open (logged); -ENOMEM.
 */
int virtio_blk_create(const struct vmm_disk *cfg, const char *id, const struct vmm_ram *ram,
		      unsigned int irq, void (*set_irq)(void *ctx, unsigned int irq, int level),
		      void *irq_ctx, struct virtio_blk **out) __must_check;
void virtio_blk_destroy(struct virtio_blk *b);

/* ---------------------------------------------------------------- the VM's disks (disks.c) */

struct vmm;
struct vmm_vcpu;

/**
 * disks_create - a virtio-blk device per configured disk (vda, vdb, ...), at VMM_VIRTIO_GPA +
 * i * VIRTIO_MMIO_SIZE on IRQ vmm_virtio_irqs[i], and the command line words that declare them
 * (`virtio_mmio.device=4K@0xADDR:IRQ`) put into vm->cmdline before any ` -- `.
 * Return: 0; -EINVAL too many disks or a command line too long; -errno of a disk (logged).
 */
int disks_create(struct vmm *vm) __must_check;
void disks_destroy(struct vmm *vm);
/** disks_mmio - an MMIO exit inside the disks' window. Return: 0 (the exit_mmio contract). */
int disks_mmio(struct vmm *vm, struct vmm_vcpu *vcpu, struct kvm_run *run) __must_check;
/** disks_add_counters - add the disks' statistics into @c (disk_* counters). */
void disks_add_counters(const struct vmm *vm, struct vmm_counters *c);

#endif /* HVPROF_VMM_VIRTIO_H */
