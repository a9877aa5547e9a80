// SPDX-License-Identifier: MIT
// Unit tests of gi_copy_user_stack and gi_map_user_stack (the stack bytes of a USER_REGS record)
// in fake guest memory: a copy that crosses pages and stops at an unmapped, supervisor-only or
// non-RAM page, at the end of the user half; hostile RSP values; the same read in place, in
// pieces; and gi_task_user_regs reading every register.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fakekernel.h"
#include "fakemem.h"
#include "test.h"

#define STK 0x00007fff10000000ull /* user stack pages: STK, STK + 4K (second page optional) */
#define STK_GPA 0x600000ull
#define TOP 0x00007ffffffff000ull /* the last page of the 48-bit user half */
#define TOP_GPA 0x610000ull

/* How the pages around STK are mapped. */
enum next_page { NEXT_NONE, NEXT_USER, NEXT_SUPERVISOR, NEXT_OUTSIDE_RAM };

static int setup(struct fakemem *fm, enum next_page next)
{
	if (fakemem_init(fm, 0))
		return -1;
	for (uint64_t i = 0; i < 2 * 4096; i++)
		fm->ram[STK_GPA + i] = (uint8_t)(i * 13 + (i >> 8));
	if (fakemem_map(fm, STK, STK_GPA, 4096, FPTE_US | FPTE_NX))
		return -1;
	switch (next) {
	case NEXT_USER:
		return fakemem_map(fm, STK + 4096, STK_GPA + 4096, 4096, FPTE_US | FPTE_NX);
	case NEXT_SUPERVISOR: /* present, but a user access would fault */
		return fakemem_map(fm, STK + 4096, STK_GPA + 4096, 4096, FPTE_NX);
	case NEXT_OUTSIDE_RAM:
		return fakemem_map(fm, STK + 4096, FAKE_RAM_SIZE + 0x100000, 4096, FPTE_US);
	case NEXT_NONE:
		break;
	}
	return 0;
}

struct copy_row {
	const char *name;
	enum next_page next;
	uint64_t rsp;
	uint32_t size;
	int ret;
	uint32_t len;
};

static const struct copy_row copy_rows[] = {
	{ "within one page", NEXT_NONE, STK + 0x100, 64, 0, 64 },
	{ "into an unmapped page: cut at the page end", NEXT_NONE, STK + 0xf00, 8192, 0, 0x100 },
	{ "across a page boundary", NEXT_USER, STK + 0xf00, 0x400, 0, 0x400 },
	{ "two pages, then unmapped", NEXT_USER, STK + 0x10, 65528, 0, 0x2000 - 0x10 },
	{ "into a supervisor-only page", NEXT_SUPERVISOR, STK + 0xff8, 64, 0, 8 },
	{ "into a page outside guest RAM", NEXT_OUTSIDE_RAM, STK + 0xfc0, 8192, 0, 0x40 },
	{ "RSP in an unmapped page", NEXT_NONE, STK - 0x1000, 8192, 0, 0 },
	{ "nothing asked", NEXT_NONE, STK, 0, 0, 0 },
	{ "RSP unaligned", NEXT_NONE, STK + 0x101, 64, -EINVAL, 0 },
	{ "RSP in the kernel half", NEXT_NONE, 0xffff888000600000ull, 64, -EINVAL, 0 },
	{ "RSP not canonical", NEXT_NONE, 0x0000900000000000ull, 64, -EINVAL, 0 },
	{ "RSP 0", NEXT_NONE, 0, 64, 0, 0 },
};

static int run_copy_row(const struct copy_row *row)
{
	static uint8_t dst[HVP_USER_STACK_MAX + 8];
	struct fakemem fm;
	uint32_t len = 12345;
	int ret, rc = TEST_FAIL;

	if (setup(&fm, row->next))
		goto out;
	memset(dst, 0xee, sizeof(dst));
	ret = gi_copy_user_stack(&fm.mem, &fm.pg, row->rsp, dst, row->size, &len);
	if (ret != row->ret || len != row->len) {
		fprintf(stderr, "%s: ret %d len %u, expected %d %u\n", row->name, ret, len,
			row->ret, row->len);
		goto out;
	}
	/* the bytes are the guest's, and nothing past len was written */
	if (len && memcmp(dst, fm.ram + STK_GPA + (row->rsp - STK), len)) {
		fprintf(stderr, "%s: bytes differ\n", row->name);
		goto out;
	}
	if (dst[len] != 0xee) {
		fprintf(stderr, "%s: wrote past len\n", row->name);
		goto out;
	}
	/* read in place: the same bytes, in as many pieces as host-contiguous runs */
	{
		struct hvp_bytes segs[HVP_USER_STACK_SEGS];
		struct hvp_user_regs r = { .stack_segs = segs };
		unsigned int n = 99;
		uint32_t mlen = 12345;

		ret = gi_map_user_stack(&fm.mem, &fm.pg, row->rsp, row->size, segs,
					HVP_USER_STACK_SEGS, &n, &mlen);
		r.n_stack_segs = n;
		r.stack_len = mlen;
		memset(dst, 0xee, sizeof(dst));
		if (ret != row->ret || mlen != row->len || n > 1 || (mlen && n != 1) ||
		    hvp_user_regs_stack_copy(&r, 0, dst, sizeof(dst)) != mlen ||
		    (mlen && memcmp(dst, fm.ram + STK_GPA + (row->rsp - STK), mlen))) {
			fprintf(stderr, "%s: in place: ret %d len %u in %u pieces\n", row->name,
				ret, mlen, n);
			goto out;
		}
	}
	rc = TEST_OK;
out:
	fakemem_fini(&fm);
	return rc;
}

static int test_copy_rows(void)
{
	int ret = TEST_OK;

	for (size_t i = 0; i < ARRAY_SIZE(copy_rows); i++)
		if (run_copy_row(&copy_rows[i]) != TEST_OK)
			ret = TEST_FAIL;
	return ret;
}

/* A stack at the very top of the user half: the copy ends at the half's end, not beyond. */
static int test_copy_top_of_user_half(void)
{
	uint8_t dst[8192];
	struct fakemem fm;
	uint32_t len = 0;

	ASSERT_EQ_INT(fakemem_init(&fm, 0), 0);
	ASSERT_EQ_INT(fakemem_map(&fm, TOP, TOP_GPA, 4096, FPTE_US | FPTE_NX), 0);
	fakemem_w64(&fm, TOP_GPA + 0xf00, 0x1122334455667788ull);
	ASSERT_EQ_INT(gi_copy_user_stack(&fm.mem, &fm.pg, TOP + 0xf00, dst, sizeof(dst), &len), 0);
	ASSERT_EQ_U64(len, 0x100);
	ASSERT_EQ_U64(dst[0], 0x88);
	ASSERT_EQ_INT(gi_copy_user_stack(&fm.mem, NULL, TOP, dst, 8, &len), -EINVAL);
	ASSERT_EQ_INT(gi_copy_user_stack(&fm.mem, &fm.pg, TOP, NULL, 8, &len), -EINVAL);
	fakemem_fini(&fm);
	return TEST_OK;
}

/* A 2 MiB user page: one chunk, bounded by the size asked. */
static int test_copy_large_page(void)
{
	static uint8_t dst[65528];
	struct fakemem fm;
	uint32_t len = 0;

	ASSERT_EQ_INT(fakemem_init(&fm, 0), 0);
	ASSERT_EQ_INT(fakemem_map(&fm, 0x7f0000000000ull, 0x200000, 2u << 20, FPTE_US), 0);
	fakemem_w64(&fm, 0x200000 + 0x1000, 42);
	ASSERT_EQ_INT(gi_copy_user_stack(&fm.mem, &fm.pg, 0x7f0000001000ull, dst, sizeof(dst),
					 &len), 0);
	ASSERT_EQ_U64(len, sizeof(dst));
	ASSERT_EQ_U64(dst[0], 42);
	fakemem_fini(&fm);
	return TEST_OK;
}

/*
 * In place, pages apart in guest RAM: one piece each, in order, the bytes the copy gives; cut
 * after the last piece allowed; -ENOTSUP without a map (the caller copies instead).
 */
static int test_map_pieces(void)
{
	static uint8_t want[0x2000], got[0x2000];
	struct hvp_bytes segs[HVP_USER_STACK_SEGS];
	struct hvp_user_regs r = { .stack_segs = segs };
	struct fakemem fm;
	unsigned int n = 0;
	uint32_t len = 0, clen = 0;

	ASSERT_EQ_INT(fakemem_init(&fm, 0), 0);
	for (uint64_t i = 0; i < 0x4000; i++)
		fm.ram[STK_GPA + i] = (uint8_t)(i * 13 + (i >> 8));
	ASSERT_EQ_INT(fakemem_map(&fm, STK, STK_GPA, 4096, FPTE_US | FPTE_NX), 0);
	ASSERT_EQ_INT(fakemem_map(&fm, STK + 4096, STK_GPA + 0x3000, 4096, FPTE_US | FPTE_NX), 0);
	ASSERT_EQ_INT(gi_copy_user_stack(&fm.mem, &fm.pg, STK + 0x80, want, 0x1800, &clen), 0);
	ASSERT_EQ_U64(clen, 0x1800);
	ASSERT_EQ_INT(gi_map_user_stack(&fm.mem, &fm.pg, STK + 0x80, 0x1800, segs,
					HVP_USER_STACK_SEGS, &n, &len), 0);
	ASSERT_EQ_U64(len, 0x1800);
	ASSERT_EQ_INT(n, 2);
	ASSERT_TRUE(segs[0].p == fm.ram + STK_GPA + 0x80 && segs[0].len == 0x1000 - 0x80);
	ASSERT_TRUE(segs[1].p == fm.ram + STK_GPA + 0x3000 && segs[1].len == 0x880);
	r.n_stack_segs = n;
	r.stack_len = len;
	ASSERT_EQ_U64(hvp_user_regs_stack_copy(&r, 0, got, sizeof(got)), 0x1800);
	ASSERT_TRUE(!memcmp(got, want, 0x1800));
	/* from an offset inside the second piece */
	ASSERT_EQ_U64(hvp_user_regs_stack_copy(&r, 0x1000, got, 16), 16);
	ASSERT_TRUE(!memcmp(got, want + 0x1000, 16));
	/* one piece allowed: cut at the first page's end */
	ASSERT_EQ_INT(gi_map_user_stack(&fm.mem, &fm.pg, STK + 0x80, 0x1800, segs, 1, &n, &len), 0);
	ASSERT_TRUE(n == 1 && len == 0x1000 - 0x80);
	/* no map: the caller copies */
	fm.mem.map = NULL;
	ASSERT_EQ_INT(gi_map_user_stack(&fm.mem, &fm.pg, STK + 0x80, 0x1800, segs,
					HVP_USER_STACK_SEGS, &n, &len), -ENOTSUP);
	ASSERT_TRUE(n == 0 && len == 0);
	fakemem_fini(&fm);
	return TEST_OK;
}

/* gi_task_user_regs reads every general-purpose register from pt_regs (BTF offsets), and
 * orig_ax and cs. */
static int test_task_user_regs_all(void)
{
	struct fakekernel fk;
	struct gi_user_regs ur;
	uint64_t pt = FK_STACK + 16384 - 168;

	ASSERT_EQ_INT(fakekernel_init(&fk, 4), 0);
	for (unsigned int off = 0; off < 168; off += 8)
		ASSERT_EQ_INT(fk_w64(&fk, pt + off, 0x1000 + off), 0);
	ASSERT_EQ_INT(fk_w64(&fk, pt + 136, 0x33), 0); /* cs: entered from user mode */
	ASSERT_EQ_INT(gi_task_user_regs(fk.gi, &fk.fm.mem, &fk.fm.pg, fk.task_kva, &ur), 0);
	ASSERT_EQ_U64(ur.r15, 0x1000);
	ASSERT_EQ_U64(ur.r12, 0x1000 + 24);
	ASSERT_EQ_U64(ur.bp, 0x1000 + 32);
	ASSERT_EQ_U64(ur.bx, 0x1000 + 40);
	ASSERT_EQ_U64(ur.r11, 0x1000 + 48);
	ASSERT_EQ_U64(ur.r8, 0x1000 + 72);
	ASSERT_EQ_U64(ur.ax, 0x1000 + 80);
	ASSERT_EQ_U64(ur.cx, 0x1000 + 88);
	ASSERT_EQ_U64(ur.dx, 0x1000 + 96);
	ASSERT_EQ_U64(ur.si, 0x1000 + 104);
	ASSERT_EQ_U64(ur.di, 0x1000 + 112);
	ASSERT_EQ_U64(ur.ip, 0x1000 + 128);
	ASSERT_EQ_U64(ur.sp, 0x1000 + 152);
	/* how the kernel was entered: orig_ax (the system call number) and cs */
	ASSERT_TRUE(ur.entry_known);
	ASSERT_EQ_U64(ur.orig_ax, 0x1000 + 120);
	ASSERT_EQ_U64(ur.cs, 0x33);
	/* the same from task->stack already read (gi_stack_user_regs); a stack that is not a
	 * THREAD_SIZE-aligned kernel address is refused before any read */
	memset(&ur, 0, sizeof(ur));
	ASSERT_EQ_INT(gi_stack_user_regs(fk.gi, &fk.fm.mem, &fk.fm.pg, FK_STACK, &ur), 0);
	ASSERT_TRUE(ur.ip == 0x1000 + 128 && ur.sp == 0x1000 + 152 && ur.r15 == 0x1000 &&
		    ur.cs == 0x33);
	ASSERT_EQ_INT(gi_stack_user_regs(fk.gi, &fk.fm.mem, &fk.fm.pg, FK_STACK + 8, &ur),
		      -EBADMSG);
	ASSERT_EQ_INT(gi_stack_user_regs(fk.gi, &fk.fm.mem, &fk.fm.pg, FK_USER_STACK & ~16383ull,
					 &ur),
		      -EBADMSG);
	fakekernel_fini(&fk);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "stack copy: pages, unmapped, supervisor, outside RAM, bad RSP", test_copy_rows },
	{ "stack copy ends at the end of the user half", test_copy_top_of_user_half },
	{ "stack copy from a 2 MiB page", test_copy_large_page },
	{ "in place: a piece per host run, cut at the last allowed, none without a map", test_map_pieces },
	{ "pt_regs: every general-purpose register, from the task or its stack", test_task_user_regs_all },
};

TEST_MAIN(tests)
