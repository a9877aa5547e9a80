// SPDX-License-Identifier: MIT
// Unit tests of the virtio devices without /dev/kvm: split virtqueues over hand-built rings in a
// byte array (guest RAM), hostile chains (loops, out-of-range indexes and buffers, bad indirect
// tables), the virtio-mmio register file, and virtio-blk requests against temporary disk files
// (read, write, snapshot overlay, read-only, past the end, GET_ID, flush, locks, qcow2).
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "vmm_internal.h"
#include "devices/virtio.h"

#define RAM_BYTES (1u << 20)
#define QSIZE 8
#define DESC_GPA 0x1000u
#define AVAIL_GPA 0x2000u
#define USED_GPA 0x3000u
#define INDIRECT_GPA 0x4000u
#define BUF_GPA 0x10000u

static uint8_t ram_bytes[RAM_BYTES];
static struct vmm_ram ram;
static uint16_t avail_idx;

static void ram_init(void)
{
	memset(ram_bytes, 0, sizeof(ram_bytes));
	memset(&ram, 0, sizeof(ram));
	ram.hva = ram_bytes;
	ram.size = RAM_BYTES;
	ram.n_slots = 1;
	ram.slots[0] = (struct vmm_ram_slot){ .gpa = 0, .size = RAM_BYTES, .hva = ram_bytes };
	avail_idx = 0;
}

static void put_desc(uint64_t table_gpa, unsigned int i, uint64_t addr, uint32_t len,
		     uint16_t flags, uint16_t next)
{
	uint8_t *p = ram_bytes + table_gpa + 16 * i;

	memcpy(p, &addr, 8);
	memcpy(p + 8, &len, 4);
	memcpy(p + 12, &flags, 2);
	memcpy(p + 14, &next, 2);
}

/* Make @head available (the driver's side of 2.7.13). */
static void make_avail(uint16_t head)
{
	memcpy(ram_bytes + AVAIL_GPA + 4 + 2 * (avail_idx % QSIZE), &head, 2);
	avail_idx++;
	memcpy(ram_bytes + AVAIL_GPA + 2, &avail_idx, 2);
}

static uint16_t used_idx_in_ram(void)
{
	uint16_t v;

	memcpy(&v, ram_bytes + USED_GPA + 2, 2);
	return v;
}

static void used_elem(unsigned int slot, uint32_t *id, uint32_t *len)
{
	memcpy(id, ram_bytes + USED_GPA + 4 + 8 * slot, 4);
	memcpy(len, ram_bytes + USED_GPA + 8 + 8 * slot, 4);
}

static void queue_init(struct virtq *q, bool indirect)
{
	virtq_reset(q);
	q->size = QSIZE;
	q->desc_gpa = DESC_GPA;
	q->avail_gpa = AVAIL_GPA;
	q->used_gpa = USED_GPA;
	q->indirect = indirect;
}

static int test_enable_checks(void)
{
	struct virtq q;

	ram_init();
	queue_init(&q, false);
	q.size = 0;
	ASSERT_EQ_INT(virtq_enable(&q, &ram), -EINVAL);
	q.size = 6; /* not a power of 2 */
	ASSERT_EQ_INT(virtq_enable(&q, &ram), -EINVAL);
	q.size = 512; /* above QueueNumMax */
	ASSERT_EQ_INT(virtq_enable(&q, &ram), -EINVAL);
	queue_init(&q, false);
	q.desc_gpa = DESC_GPA + 8;
	ASSERT_EQ_INT(virtq_enable(&q, &ram), -EINVAL);
	queue_init(&q, false);
	q.avail_gpa = AVAIL_GPA + 1;
	ASSERT_EQ_INT(virtq_enable(&q, &ram), -EINVAL);
	queue_init(&q, false);
	q.used_gpa = USED_GPA + 2;
	ASSERT_EQ_INT(virtq_enable(&q, &ram), -EINVAL);
	queue_init(&q, false);
	q.used_gpa = RAM_BYTES - 32; /* the used ring runs past the end of RAM */
	ASSERT_EQ_INT(virtq_enable(&q, &ram), -ERANGE);
	queue_init(&q, false);
	q.desc_gpa = 0xfffffffffffffff0ull; /* wraps around */
	ASSERT_EQ_INT(virtq_enable(&q, &ram), -ERANGE);
	ASSERT_TRUE(!q.ready);
	queue_init(&q, false);
	ASSERT_EQ_INT(virtq_enable(&q, &ram), 0);
	ASSERT_TRUE(q.ready);
	return TEST_OK;
}

static int test_pop_push(void)
{
	struct virtq q;
	static struct virtq_chain c;
	uint32_t id, len;

	ram_init();
	queue_init(&q, false);
	ASSERT_EQ_INT(virtq_enable(&q, &ram), 0);
	ASSERT_EQ_INT(virtq_pop(&q, &ram, &c), -ENOENT);
	put_desc(DESC_GPA, 3, BUF_GPA, 16, VIRTQ_DESC_F_NEXT, 5);
	put_desc(DESC_GPA, 5, BUF_GPA + 0x1000, 512, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 1);
	put_desc(DESC_GPA, 1, BUF_GPA + 0x2000, 0, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 2);
	put_desc(DESC_GPA, 2, BUF_GPA + 0x3000, 1, VIRTQ_DESC_F_WRITE, 0);
	make_avail(3);
	ASSERT_EQ_INT(virtq_pop(&q, &ram, &c), 0);
	ASSERT_EQ_INT(c.head, 3);
	ASSERT_EQ_INT(c.n_out, 1);
	ASSERT_EQ_INT(c.n_in, 2); /* the zero-length descriptor is left out */
	ASSERT_EQ_U64(c.out_len, 16);
	ASSERT_EQ_U64(c.in_len, 513);
	ASSERT_TRUE(c.iov[0].iov_base == ram_bytes + BUF_GPA);
	ASSERT_TRUE(c.iov[2].iov_base == ram_bytes + BUF_GPA + 0x3000);
	ASSERT_EQ_INT(virtq_pop(&q, &ram, &c), -ENOENT);
	virtq_push(&q, 3, 513);
	ASSERT_EQ_INT(used_idx_in_ram(), 1);
	used_elem(0, &id, &len);
	ASSERT_EQ_INT(id, 3);
	ASSERT_EQ_INT(len, 513);
	ASSERT_TRUE(virtq_wants_interrupt(&q));
	ram_bytes[AVAIL_GPA] = VIRTQ_AVAIL_F_NO_INTERRUPT;
	ASSERT_TRUE(!virtq_wants_interrupt(&q));
	return TEST_OK;
}

/* One hostile chain per row, built by a function; each must fail with @want, promptly. */
struct hostile_row {
	const char *name;
	void (*build)(void);
	bool indirect;
	int want;
};

static void h_head_out_of_range(void) { make_avail(QSIZE); }
static void h_next_out_of_range(void)
{
	put_desc(DESC_GPA, 0, BUF_GPA, 16, VIRTQ_DESC_F_NEXT, QSIZE + 3);
	make_avail(0);
}
static void h_loop(void)
{
	put_desc(DESC_GPA, 0, BUF_GPA, 16, VIRTQ_DESC_F_NEXT, 1);
	put_desc(DESC_GPA, 1, BUF_GPA, 16, VIRTQ_DESC_F_NEXT, 0);
	make_avail(0);
}
static void h_self_loop(void)
{
	put_desc(DESC_GPA, 4, BUF_GPA, 16, VIRTQ_DESC_F_NEXT, 4);
	make_avail(4);
}
static void h_outside_ram(void)
{
	put_desc(DESC_GPA, 0, RAM_BYTES - 8, 16, 0, 0);
	make_avail(0);
}
static void h_wrapping_gpa(void)
{
	put_desc(DESC_GPA, 0, 0xffffffffffffff00ull, 0x200, VIRTQ_DESC_F_WRITE, 0);
	make_avail(0);
}
static void h_readable_after_writable(void)
{
	put_desc(DESC_GPA, 0, BUF_GPA, 1, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	put_desc(DESC_GPA, 1, BUF_GPA, 16, 0, 0);
	make_avail(0);
}
static void h_avail_jump(void)
{
	uint16_t idx = QSIZE + 1;

	memcpy(ram_bytes + AVAIL_GPA + 2, &idx, 2);
}
static void h_indirect_not_negotiated(void)
{
	put_desc(DESC_GPA, 0, INDIRECT_GPA, 32, VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(0);
}
static void h_indirect_bad_len(void)
{
	put_desc(DESC_GPA, 0, INDIRECT_GPA, 24, VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(0);
}
static void h_indirect_empty(void)
{
	put_desc(DESC_GPA, 0, INDIRECT_GPA, 0, VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(0);
}
static void h_indirect_chained(void)
{
	put_desc(DESC_GPA, 0, INDIRECT_GPA, 32, VIRTQ_DESC_F_INDIRECT | VIRTQ_DESC_F_NEXT, 1);
	make_avail(0);
}
static void h_indirect_nested(void)
{
	put_desc(DESC_GPA, 0, INDIRECT_GPA, 32, VIRTQ_DESC_F_INDIRECT, 0);
	put_desc(INDIRECT_GPA, 0, INDIRECT_GPA, 32, VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(0);
}
static void h_indirect_not_head(void)
{
	put_desc(DESC_GPA, 0, BUF_GPA, 16, VIRTQ_DESC_F_NEXT, 1);
	put_desc(DESC_GPA, 1, INDIRECT_GPA, 32, VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(0);
}
static void h_indirect_loop(void)
{
	put_desc(DESC_GPA, 0, INDIRECT_GPA, 32, VIRTQ_DESC_F_INDIRECT, 0);
	put_desc(INDIRECT_GPA, 0, BUF_GPA, 16, VIRTQ_DESC_F_NEXT, 1);
	put_desc(INDIRECT_GPA, 1, BUF_GPA, 16, VIRTQ_DESC_F_NEXT, 0);
	make_avail(0);
}
static void h_indirect_next_out_of_table(void)
{
	put_desc(DESC_GPA, 0, INDIRECT_GPA, 32, VIRTQ_DESC_F_INDIRECT, 0);
	put_desc(INDIRECT_GPA, 0, BUF_GPA, 16, VIRTQ_DESC_F_NEXT, 2);
	make_avail(0);
}
static void h_indirect_outside_ram(void)
{
	put_desc(DESC_GPA, 0, RAM_BYTES - 16, 32, VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(0);
}

static const struct hostile_row hostile_rows[] = {
	{ "head index >= queue size", h_head_out_of_range, false, -EBADMSG },
	{ "next index >= queue size", h_next_out_of_range, false, -EBADMSG },
	{ "a loop of two descriptors", h_loop, false, -EBADMSG },
	{ "a descriptor that chains to itself", h_self_loop, false, -EBADMSG },
	{ "a buffer past the end of RAM", h_outside_ram, false, -ERANGE },
	{ "a buffer whose GPA + len wraps", h_wrapping_gpa, false, -ERANGE },
	{ "a readable descriptor after a writable one", h_readable_after_writable, false, -EBADMSG },
	{ "available index ahead by more than the queue size", h_avail_jump, false, -EBADMSG },
	{ "indirect without VIRTIO_F_INDIRECT_DESC", h_indirect_not_negotiated, false, -EBADMSG },
	{ "indirect table not a whole number of descriptors", h_indirect_bad_len, true, -EBADMSG },
	{ "empty indirect table", h_indirect_empty, true, -EBADMSG },
	{ "indirect with NEXT", h_indirect_chained, true, -EBADMSG },
	{ "nested indirect", h_indirect_nested, true, -EBADMSG },
	{ "indirect after a direct descriptor", h_indirect_not_head, true, -EBADMSG },
	{ "a loop inside an indirect table", h_indirect_loop, true, -EBADMSG },
	{ "next beyond the indirect table", h_indirect_next_out_of_table, true, -EBADMSG },
	{ "indirect table past the end of RAM", h_indirect_outside_ram, true, -ERANGE },
};

static int test_hostile_chains(void)
{
	static struct virtq_chain c;

	for (size_t i = 0; i < ARRAY_SIZE(hostile_rows); i++) {
		const struct hostile_row *r = &hostile_rows[i];
		struct virtq q;
		int err;

		ram_init();
		queue_init(&q, r->indirect);
		ASSERT_EQ_INT(virtq_enable(&q, &ram), 0);
		r->build();
		err = virtq_pop(&q, &ram, &c);
		if (err != r->want) {
			fprintf(stderr, "hostile chain '%s': got %d, want %d\n", r->name, err,
				r->want);
			return TEST_FAIL;
		}
	}
	return TEST_OK;
}

static int test_indirect_ok(void)
{
	static struct virtq_chain c;
	struct virtq q;

	ram_init();
	queue_init(&q, true);
	ASSERT_EQ_INT(virtq_enable(&q, &ram), 0);
	put_desc(DESC_GPA, 2, INDIRECT_GPA, 48, VIRTQ_DESC_F_INDIRECT, 0);
	put_desc(INDIRECT_GPA, 0, BUF_GPA, 16, VIRTQ_DESC_F_NEXT, 2);
	put_desc(INDIRECT_GPA, 2, BUF_GPA + 0x100, 4096, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 1);
	put_desc(INDIRECT_GPA, 1, BUF_GPA + 0x2000, 1, VIRTQ_DESC_F_WRITE, 0);
	make_avail(2);
	ASSERT_EQ_INT(virtq_pop(&q, &ram, &c), 0);
	ASSERT_EQ_INT(c.head, 2);
	ASSERT_EQ_INT(c.n_out, 1);
	ASSERT_EQ_INT(c.n_in, 2);
	ASSERT_EQ_U64(c.in_len, 4097);
	return TEST_OK;
}

/* A chain as long as the bound allows is fine; one longer fails (through an indirect table of
 * VIRTQ_MAX_SEGS descriptors: the direct table has only QSIZE). */
static int test_chain_length_bound(void)
{
	static struct virtq_chain c;
	struct virtq q;

	ram_init();
	queue_init(&q, true);
	ASSERT_EQ_INT(virtq_enable(&q, &ram), 0);
	put_desc(DESC_GPA, 0, INDIRECT_GPA, 16 * VIRTQ_MAX_SEGS, VIRTQ_DESC_F_INDIRECT, 0);
	for (unsigned int i = 0; i < VIRTQ_MAX_SEGS; i++)
		put_desc(INDIRECT_GPA, i, BUF_GPA + i, 1,
			 i + 1 < VIRTQ_MAX_SEGS ? VIRTQ_DESC_F_NEXT : 0, (uint16_t)(i + 1));
	make_avail(0);
	ASSERT_EQ_INT(virtq_pop(&q, &ram, &c), 0);
	ASSERT_EQ_INT(c.n_out, VIRTQ_MAX_SEGS);
	/* the same table one descriptor longer */
	put_desc(DESC_GPA, 0, INDIRECT_GPA, 16 * (VIRTQ_MAX_SEGS + 1), VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(0);
	ASSERT_EQ_INT(virtq_pop(&q, &ram, &c), -EBADMSG);
	return TEST_OK;
}

static int test_iov_slice(void)
{
	uint8_t a[10], b[20];
	struct iovec src[2] = { { a, sizeof(a) }, { b, sizeof(b) } }, dst[2];

	ASSERT_EQ_INT(iov_slice(src, 2, 4, 10, dst, 2), 2);
	ASSERT_TRUE(dst[0].iov_base == a + 4 && dst[0].iov_len == 6);
	ASSERT_TRUE(dst[1].iov_base == b && dst[1].iov_len == 4);
	ASSERT_EQ_INT(iov_slice(src, 2, 12, 18, dst, 1), 1);
	ASSERT_EQ_INT(iov_slice(src, 2, 12, 19, dst, 2), -ERANGE); /* longer than src */
	ASSERT_EQ_INT(iov_slice(src, 2, 0, 30, dst, 1), -ERANGE);  /* too many segments */
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "virtq_enable: sizes, alignment, areas inside RAM", test_enable_checks },
	{ "virtq_pop/push: a three-descriptor chain, used ring, NO_INTERRUPT", test_pop_push },
	{ "hostile chains fail (loops, indexes, buffers, indirect tables)", test_hostile_chains },
	{ "indirect table", test_indirect_ok },
	{ "chain length bound", test_chain_length_bound },
	{ "iov_slice", test_iov_slice },
};

TEST_MAIN(tests)
