// SPDX-License-Identifier: MIT
// Split virtqueues, device side (virtio 1.2, 2.7 Split Virtqueues): the areas checked once
// against guest RAM when the driver makes the queue ready, chains taken from the available ring
// with every index, length and address checked and the walk bounded, and used entries
// published. Pure over a struct vmm_ram: unit-tested and fuzzed over a byte array.
#define pr_fmt(fmt) "vmm: virtq: " fmt
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "../vmm_internal.h"
#include "virtio.h"

/* 2.7.5 The Virtqueue Descriptor Table: le64 addr, le32 len, le16 flags, le16 next. */
#define DESC_BYTES 16u
/* 2.7.6 The Virtqueue Available Ring: le16 flags, le16 idx, le16 ring[size], le16 used_event. */
#define AVAIL_RING_OFF 4u
/* 2.7.8 The Virtqueue Used Ring: le16 flags, le16 idx, {le32 id, le32 len} ring[size], le16. */
#define USED_RING_OFF 4u
#define USED_ELEM_BYTES 8u

struct vdesc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

static uint16_t get_le16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

/* The 16-bit index the driver publishes: read once, before the entries it covers (2.7.13.3). */
static uint16_t load_idx_acquire(const uint8_t *p)
{
	return le16toh(__atomic_load_n((const uint16_t *)(const void *)p, __ATOMIC_ACQUIRE));
}

/* One descriptor, copied once: the driver may change the table under us, so every check is
 * made on this copy and never on a second read. */
static void read_desc(const uint8_t *table, uint32_t idx, struct vdesc *d)
{
	const uint8_t *p = table + (size_t)idx * DESC_BYTES; /* SAFETY: idx < the table's size */
	uint64_t addr;
	uint32_t len;

	memcpy(&addr, p, 8);
	memcpy(&len, p + 8, 4);
	d->addr = le64toh(addr);
	d->len = le32toh(len);
	d->flags = get_le16(p + 12);
	d->next = get_le16(p + 14);
}

void virtq_reset(struct virtq *q)
{
	memset(q, 0, sizeof(*q));
}

int virtq_enable(struct virtq *q, const struct vmm_ram *ram)
{
	uint64_t size = q->size;
	uint8_t *desc, *avail, *used;

	if (size == 0 || size > VIRTQ_MAX_SIZE || (size & (size - 1)))
		return -EINVAL;
	/* 2.7 table: alignment 16 (descriptors), 2 (available), 4 (used) */
	if ((q->desc_gpa & 15) || (q->avail_gpa & 1) || (q->used_gpa & 3))
		return -EINVAL;
	/* SAFETY: each whole area (size <= 256 entries) must lie inside one RAM slot. */
	desc = ram_gpa_to_hva(ram, q->desc_gpa, DESC_BYTES * size);
	avail = ram_gpa_to_hva(ram, q->avail_gpa, AVAIL_RING_OFF + 2 * size + 2);
	used = ram_gpa_to_hva(ram, q->used_gpa, USED_RING_OFF + USED_ELEM_BYTES * size + 2);
	if (!desc || !avail || !used)
		return -ERANGE;
	q->desc = desc;
	q->avail = avail;
	q->used = used;
	q->last_avail = 0;
	q->used_idx = 0;
	q->ready = true;
	return 0;
}

/* Add a buffer of the chain: readable ones must all come before writable ones (2.7.4.2). */
static int chain_add(struct virtq_chain *c, const struct vmm_ram *ram, const struct vdesc *d)
{
	bool writable = d->flags & VIRTQ_DESC_F_WRITE;
	void *hva;

	if (!writable && c->n_in)
		return -EBADMSG;
	if (d->len == 0)
		return 0; /* carries nothing; its address is never used */
	/* SAFETY: the buffer [addr, addr + len) must lie inside guest RAM. */
	hva = ram_gpa_to_hva(ram, d->addr, d->len);
	if (!hva)
		return -ERANGE;
	/* SAFETY: n_out + n_in < VIRTQ_MAX_SEGS: the caller walks at most that many. */
	c->iov[c->n_out + c->n_in] = (struct iovec){ .iov_base = hva, .iov_len = d->len };
	if (writable) {
		c->n_in++;
		c->in_len += d->len;
	} else {
		c->n_out++;
		c->out_len += d->len;
	}
	return 0;
}

/* An indirect table in place of the head descriptor (2.7.5.3): not nested, not chained, a
 * whole number of descriptors, at most VIRTQ_MAX_SEGS of them, inside guest RAM. */
static int enter_indirect(const struct virtq *q, const struct vmm_ram *ram, const struct vdesc *d,
			  const uint8_t **table, uint32_t *n)
{
	if (!q->indirect || (d->flags & VIRTQ_DESC_F_NEXT) || d->len == 0 ||
	    d->len % DESC_BYTES || d->len / DESC_BYTES > VIRTQ_MAX_SEGS)
		return -EBADMSG;
	*table = ram_gpa_to_hva(ram, d->addr, d->len);
	if (!*table)
		return -ERANGE;
	*n = d->len / DESC_BYTES;
	return 0;
}

/* Walk the chain from @head: at most VIRTQ_MAX_SEGS descriptors (plus one indirect), so a
 * loop in the next fields ends the walk with -EBADMSG. */
static int walk_chain(const struct virtq *q, const struct vmm_ram *ram, struct virtq_chain *c,
		      uint16_t head)
{
	const uint8_t *table = q->desc;
	uint32_t table_n = q->size, idx = head;
	unsigned int walked = 0;
	bool indirect = false;
	struct vdesc d;
	int err;

	for (;;) {
		if (walked >= VIRTQ_MAX_SEGS)
			return -EBADMSG;
		read_desc(table, idx, &d); /* SAFETY: idx < table_n (head and next checked) */
		if (d.flags & VIRTQ_DESC_F_INDIRECT) {
			if (indirect || walked)
				return -EBADMSG; /* nested, or not at the head */
			err = enter_indirect(q, ram, &d, &table, &table_n);
			if (err)
				return err;
			indirect = true;
			idx = 0;
			continue;
		}
		walked++;
		err = chain_add(c, ram, &d);
		if (err)
			return err;
		if (!(d.flags & VIRTQ_DESC_F_NEXT))
			return 0;
		if (d.next >= table_n)
			return -EBADMSG;
		idx = d.next;
	}
}

int virtq_pop(struct virtq *q, const struct vmm_ram *ram, struct virtq_chain *c)
{
	uint16_t avail_idx, pending, head;
	uint32_t slot;

	if (!q->ready)
		return -ENOENT;
	avail_idx = load_idx_acquire(q->avail + 2);
	pending = (uint16_t)(avail_idx - q->last_avail);
	if (pending == 0)
		return -ENOENT;
	if (pending > q->size)
		return -EBADMSG; /* more made available than the queue holds */
	slot = q->last_avail & (q->size - 1u);
	/* SAFETY: slot < size; the ring has size entries (checked at virtq_enable). */
	head = get_le16(q->avail + AVAIL_RING_OFF + 2 * slot);
	q->last_avail++;
	if (head >= q->size)
		return -EBADMSG;
	c->head = head;
	c->n_out = c->n_in = 0;
	c->out_len = c->in_len = 0;
	return walk_chain(q, ram, c, head);
}

void virtq_push(struct virtq *q, uint16_t head, uint32_t len)
{
	uint32_t slot = q->used_idx & (q->size - 1u);
	/* SAFETY: slot < size; the used ring has size elements (checked at virtq_enable). */
	uint8_t *e = q->used + USED_RING_OFF + USED_ELEM_BYTES * slot;
	uint32_t id_le = htole32(head), len_le = htole32(len);

	memcpy(e, &id_le, 4);
	memcpy(e + 4, &len_le, 4);
	q->used_idx++;
	/* the element before the index that publishes it (2.7.8.2) */
	__atomic_store_n((uint16_t *)(void *)(q->used + 2), htole16(q->used_idx),
			 __ATOMIC_RELEASE);
}

bool virtq_wants_interrupt(const struct virtq *q)
{
	uint16_t flags;

	/* the used index must be visible before the flags are read (2.7.10) */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	flags = le16toh(__atomic_load_n((const uint16_t *)(const void *)q->avail,
					__ATOMIC_ACQUIRE));
	return !(flags & VIRTQ_AVAIL_F_NO_INTERRUPT);
}

int iov_slice(const struct iovec *src, unsigned int n, uint64_t skip, uint64_t len,
	      struct iovec *dst, unsigned int max)
{
	unsigned int out = 0;

	for (unsigned int i = 0; i < n && len; i++) {
		uint64_t seg = src[i].iov_len, take;

		if (skip >= seg) {
			skip -= seg;
			continue;
		}
		if (out == max)
			return -ERANGE;
		take = seg - skip < len ? seg - skip : len;
		dst[out].iov_base = (uint8_t *)src[i].iov_base + skip;
		dst[out].iov_len = take;
		out++;
		len -= take;
		skip = 0;
	}
	return len ? -ERANGE : (int)out;
}
