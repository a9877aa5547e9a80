// SPDX-License-Identifier: MIT
// Hostile guests on guest memory images (docs/hostile-guests.md): cyclic frame chains, frame
// pointers into unmapped, kernel or user memory, stacks far deeper than HVP_MAX_CALLCHAIN and
// page-table entries that point outside guest RAM. Each walk must end with the expected counted
// reason, and within the per-sample work bound: every read of guest RAM is counted.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fakekernel.h"
#include "test.h"

/* The bound docs/hostile-guests.md derives (reads of guest RAM through struct gmem). */
#define TRANSLATE_READS 6                       /* <= 5 table entries + 1 probe of the page */
#define READ16_READS (2 * (TRANSLATE_READS + 1)) /* a 16-byte frame may straddle two pages */
#define READ8_READS (TRANSLATE_READS + 1)       /* 8-aligned 8 bytes: one page */
/* task->stack, the sampled RIP's skipped caller (gi_unwind_kernel: a byte of code, a stack
 * slot), per frame a record, or three pt_regs fields and the interrupted code's skipped caller
 * (pt_regs.sp, a byte of code, a stack slot) */
#define KERNEL_WALK_READS                                                                          \
	(READ16_READS + 2 * READ8_READS + HVP_MAX_CALLCHAIN * 6 * READ8_READS)
#define USER_WALK_READS (HVP_MAX_CALLCHAIN * (READ16_READS + TRANSLATE_READS))

#define KS FK_STACK
#define US FK_USER_STACK
#define KRET(i) (FK_STEXT + 0x1000 + 0x10 * (i))
#define URET(i) (0x400100ull + 0x8 * (i)) /* inside the executable user text */

/* Counts every read of guest RAM, then passes it to the fake guest. */
struct counting {
	const struct gmem *inner;
	uint64_t reads;
};

static int counting_read(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	struct counting *c = ctx;

	c->reads++;
	return gmem_read(c->inner, gpa, dst, len);
}

/* Counts the ranges mapped in place (gmem map), then passes them to the fake guest. */
static const void *counting_map(void *ctx, uint64_t gpa, size_t len)
{
	struct counting *c = ctx;

	c->reads++;
	return gmem_map(c->inner, gpa, len);
}

/*
 * The USER_REGS stack of a hostile user stack, read in place: at most HVP_USER_STACK_SEGS
 * pieces and the bytes asked, every piece inside the fake guest's RAM.
 */
struct fixture {
	struct fakekernel fk;
	struct gi_regs regs;
	uint64_t rsp; /* user walks */
};

/* A chain of @n frames 0x20 apart from @first; the last one ends it (fp 0). */
static int chain(struct fakekernel *fk, uint64_t first, unsigned int n, int user)
{
	for (unsigned int i = 0; i < n; i++) {
		uint64_t fp = first + 0x20 * i;

		if (fk_frame(fk, fp, i + 1 < n ? fp + 0x20 : 0, user ? URET(i + 1) : KRET(i + 1)))
			return -1;
	}
	return 0;
}

/* Make the leaf PTE of @gva point at @gpa (outside RAM in the rows below). */
static int repoint_pte(struct fakekernel *fk, uint64_t gva, uint64_t gpa)
{
	uint64_t e = fakemem_entry_gpa(&fk->fm, gva, 1);

	if (!e)
		return -1;
	fakemem_w64(&fk->fm, e, gpa | (fakemem_r64(&fk->fm, e) & 0xfff));
	return 0;
}

static int repoint_pde(struct fakekernel *fk, uint64_t gva, uint64_t gpa)
{
	uint64_t e = fakemem_entry_gpa(&fk->fm, gva, 2);

	if (!e)
		return -1;
	fakemem_w64(&fk->fm, e, gpa | (fakemem_r64(&fk->fm, e) & 0xfff));
	return 0;
}

/* ---- kernel rows: rbp = first frame */
static int k_cycle(struct fixture *f)
{
	f->regs.rbp = KS + 0x100;
	return chain(&f->fk, KS + 0x100, 4, 0) || fk_frame(&f->fk, KS + 0x160, KS + 0x100, KRET(4));
}

static int k_self(struct fixture *f)
{
	f->regs.rbp = KS + 0x100;
	return fk_frame(&f->fk, KS + 0x100, KS + 0x100, KRET(1));
}

static int k_deep(struct fixture *f)
{
	/* 500 frames in the 16 KiB stack: far more than HVP_MAX_CALLCHAIN. */
	f->regs.rbp = KS + 0x10;
	return chain(&f->fk, KS + 0x10, 500, 0);
}

static int k_into_user(struct fixture *f)
{
	f->regs.rbp = KS + 0x100;
	return chain(&f->fk, KS + 0x100, 2, 0) || fk_frame(&f->fk, KS + 0x120, US + 0x100, KRET(2));
}

static int k_unmapped(struct fixture *f)
{
	/* The stack's third page is not mapped (stack_pages 2 below). */
	f->regs.rbp = KS + 0x1fe0;
	return fk_frame(&f->fk, KS + 0x1fe0, KS + 0x2100, KRET(1));
}

static int k_pte_outside_ram(struct fixture *f)
{
	f->regs.rbp = KS + 0x100;
	return chain(&f->fk, KS + 0x100, 2, 0) || fk_frame(&f->fk, KS + 0x120, KS + 0x1100, KRET(2)) ||
	       repoint_pte(&f->fk, KS + 0x1000, 1ull << 40);
}

static int k_ret_garbage(struct fixture *f)
{
	f->regs.rbp = KS + 0x100;
	return fk_frame(&f->fk, KS + 0x100, KS + 0x200, 0xdeadbeefcafef00dull);
}

/* ---- user rows: rsp = US + 0x10, rbp = first frame */
static int u_cycle(struct fixture *f)
{
	f->regs.rbp = US + 0x100;
	return chain(&f->fk, US + 0x100, 3, 1) || fk_frame(&f->fk, US + 0x140, US + 0x120, URET(3));
}

static int u_deep(struct fixture *f)
{
	f->regs.rbp = US + 0x20;
	return chain(&f->fk, US + 0x20, 500, 1);
}

static int u_into_kernel(struct fixture *f)
{
	f->regs.rbp = US + 0x100;
	return chain(&f->fk, US + 0x100, 2, 1) || fk_frame(&f->fk, US + 0x120, KS + 0x100, URET(2));
}

static int u_unmapped(struct fixture *f)
{
	/* Above the four mapped pages, well within 8 MiB of rsp. */
	f->regs.rbp = US + 0x3ff0;
	return fk_frame(&f->fk, US + 0x3ff0, US + 0x6000, URET(1));
}

static int u_pte_outside_ram(struct fixture *f)
{
	f->regs.rbp = US + 0x100;
	return chain(&f->fk, US + 0x100, 2, 1) || fk_frame(&f->fk, US + 0x120, US + 0x1100, URET(2)) ||
	       repoint_pte(&f->fk, US + 0x1000, (uint64_t)FAKE_RAM_SIZE + 0x10000);
}

static int u_table_outside_ram(struct fixture *f)
{
	/* The page table itself lies outside RAM: the walk fails at level 1. */
	f->regs.rbp = US + 0x100;
	return repoint_pde(&f->fk, US, 1ull << 36);
}

static int u_ret_into_stack(struct fixture *f)
{
	/* Return address into the no-execute stack: garbage, not code. */
	f->regs.rbp = US + 0x100;
	return fk_frame(&f->fk, US + 0x100, US + 0x120, US + 0x800);
}

struct row {
	const char *name;
	int user;
	unsigned int stack_pages;
	int (*setup)(struct fixture *f);
	enum hvp_walk_stop stop;
	unsigned int n;
};

static const struct row rows[] = {
	{ "kernel: cyclic chain", 0, 4, k_cycle, HVP_WALK_BAD_FP, 5 },
	{ "kernel: frame pointing at itself", 0, 4, k_self, HVP_WALK_BAD_FP, 2 },
	{ "kernel: 500-frame stack", 0, 4, k_deep, HVP_WALK_DEPTH, HVP_MAX_CALLCHAIN },
	{ "kernel: frame pointer into user memory", 0, 4, k_into_user, HVP_WALK_BAD_FP, 3 },
	{ "kernel: frame in an unmapped stack page", 0, 2, k_unmapped, HVP_WALK_FAULT, 2 },
	{ "kernel: stack PTE outside guest RAM", 0, 4, k_pte_outside_ram, HVP_WALK_FAULT, 3 },
	{ "kernel: garbage return address", 0, 4, k_ret_garbage, HVP_WALK_BAD_FP, 1 },
	{ "user: cyclic chain", 1, 4, u_cycle, HVP_WALK_BAD_FP, 4 },
	{ "user: 500-frame stack", 1, 4, u_deep, HVP_WALK_DEPTH, HVP_MAX_CALLCHAIN },
	{ "user: frame pointer into kernel memory", 1, 4, u_into_kernel, HVP_WALK_BAD_FP, 3 },
	{ "user: frame in unmapped memory", 1, 4, u_unmapped, HVP_WALK_FAULT, 2 },
	{ "user: stack PTE outside guest RAM", 1, 4, u_pte_outside_ram, HVP_WALK_FAULT, 3 },
	{ "user: page table outside guest RAM", 1, 4, u_table_outside_ram, HVP_WALK_FAULT, 1 },
	{ "user: return address into the stack", 1, 4, u_ret_into_stack, HVP_WALK_BAD_FP, 1 },
};

static const char *stop_name(enum hvp_walk_stop s)
{
	static const char *const names[] = { "end", "depth", "fault", "bad-fp", "none" };

	return (unsigned int)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static int run_row(const struct row *r)
{
	uint64_t ips[HVP_MAX_CALLCHAIN + 1];
	struct fixture f;
	struct counting c;
	struct gmem mem;
	enum hvp_walk_stop stop;
	unsigned int n = 999;
	uint64_t bound;
	int ret = TEST_FAIL;

	if (fakekernel_init(&f.fk, r->stack_pages))
		return TEST_FAIL;
	f.regs = f.fk.regs;
	if (r->user) {
		f.regs.cpl = 3;
		f.regs.rip = 0x400100;
		f.regs.rsp = US + 0x10;
	}
	if (r->setup(&f)) {
		fprintf(stderr, "%s: setup failed\n", r->name);
		goto out;
	}
	c.inner = &f.fk.fm.mem;
	c.reads = 0;
	mem.read = counting_read;
	mem.map = NULL;
	mem.ctx = &c;
	memset(ips, 0, sizeof(ips));
	if (r->user) {
		stop = gi_unwind_user(&mem, &f.regs.pg, f.regs.rip, f.regs.rsp, f.regs.rbp, ips,
				      HVP_MAX_CALLCHAIN, &n);
		bound = USER_WALK_READS;
	} else {
		stop = gi_unwind_kernel(f.fk.gi, &mem, &f.regs, f.fk.task_kva, ips,
					HVP_MAX_CALLCHAIN, &n);
		bound = KERNEL_WALK_READS;
	}
	printf("%s: stop %s, %u frames, %llu reads of guest RAM (bound %llu)\n", r->name,
	       stop_name(stop), n, (unsigned long long)c.reads, (unsigned long long)bound);
	if (stop != r->stop || n != r->n) {
		fprintf(stderr, "%s: stop %s n %u, expected stop %s n %u\n", r->name,
			stop_name(stop), n, stop_name(r->stop), r->n);
		goto out;
	}
	if (c.reads > bound) {
		fprintf(stderr, "%s: %llu reads exceed the bound %llu\n", r->name,
			(unsigned long long)c.reads, (unsigned long long)bound);
		goto out;
	}
	if (ips[0] != f.regs.rip || ips[n] != 0) {
		fprintf(stderr, "%s: ips[0] is not rip, or ips written past n\n", r->name);
		goto out;
	}
	if (r->user) { /* the USER_REGS stack read in place: bounded, every piece in RAM */
		struct hvp_bytes segs[HVP_USER_STACK_SEGS];
		const uint8_t *ram = f.fk.fm.ram;
		unsigned int pieces = 0;
		uint32_t len = 0;

		mem.map = counting_map;
		c.reads = 0;
		if (gi_map_user_stack(&mem, &f.regs.pg, f.regs.rsp, HVP_USER_STACK_MAX, segs,
				      HVP_USER_STACK_SEGS, &pieces, &len) != 0 ||
		    len > HVP_USER_STACK_MAX ||
		    c.reads > HVP_USER_STACK_SEGS * (TRANSLATE_READS + 1)) {
			fprintf(stderr, "%s: stack in place: %u bytes, %llu reads\n", r->name, len,
				(unsigned long long)c.reads);
			goto out;
		}
		for (unsigned int i = 0; i < pieces; i++)
			if (segs[i].p < ram || segs[i].len > FAKE_RAM_SIZE ||
			    segs[i].p > ram + FAKE_RAM_SIZE - segs[i].len) {
				fprintf(stderr, "%s: piece %u outside RAM\n", r->name, i);
				goto out;
			}
	}
	ret = TEST_OK;
out:
	fakekernel_fini(&f.fk);
	return ret;
}

static int test_hostile_walks(void)
{
	int failed = 0;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		failed |= run_row(&rows[i]) != TEST_OK;
	return failed ? TEST_FAIL : TEST_OK;
}

/* A page-table walk over entries that point outside RAM or loop stops within 5 levels. */
static int test_hostile_page_tables(void)
{
	struct fakekernel fk;
	struct counting c;
	struct gmem mem = { counting_read, &c };
	struct pgwalk_trace trace;
	uint64_t gpa, pml4e;
	int err;

	if (fakekernel_init(&fk, 4))
		return TEST_FAIL;
	c.inner = &fk.fm.mem;
	/* A PML4 entry pointing back at the PML4 (a self-map loop) ... */
	pml4e = fk.fm.pg.cr3 + 8 * 3;
	fakemem_w64(&fk.fm, pml4e, fk.fm.pg.cr3 | 0x3);
	c.reads = 0;
	err = gi_gva_to_gpa(&mem, &fk.fm.pg, 3ull << 39, &gpa, NULL, &trace);
	printf("self-referencing PML4 entry: %d after %u levels, %llu reads\n", err, trace.levels,
	       (unsigned long long)c.reads);
	ASSERT_TRUE(trace.levels <= PGWALK_MAX_LEVELS);
	ASSERT_TRUE(c.reads <= TRANSLATE_READS);
	/* ... and one pointing outside guest RAM: -ERANGE, never a read out of bounds. */
	fakemem_w64(&fk.fm, pml4e, (1ull << 39) | 0x3);
	c.reads = 0;
	err = gi_gva_to_gpa(&mem, &fk.fm.pg, 3ull << 39, &gpa, NULL, &trace);
	ASSERT_EQ_INT(err, -ERANGE);
	ASSERT_EQ_INT(trace.levels, 1);
	ASSERT_TRUE(c.reads <= TRANSLATE_READS);
	fakekernel_fini(&fk);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "hostile stacks end with a counted reason within the work bound", test_hostile_walks },
	{ "hostile page tables", test_hostile_page_tables },
};

TEST_MAIN(tests)
