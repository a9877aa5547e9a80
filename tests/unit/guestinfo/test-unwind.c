// SPDX-License-Identifier: MIT
// Unit tests of gi_unwind_kernel / gi_unwind_user: frame-pointer chains in a fake guest.
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fakekernel.h"
#include "gi_internal.h"
#include "test.h"

#define S FK_STACK
#define IRQ FK_IRQ_STACK
#define U FK_USER_STACK
#define RET(i) (FK_STEXT + 0x1000 * (i))
#define URET(i) FK_URET(i)

/* ---------------------------------------------------------------- kernel */

struct kfixture {
	struct fakekernel fk;
	struct gi_regs regs;
	uint64_t task;
	unsigned int max;
};

/* A chain of @n frames at @first, 0x40 apart, returning into RET(1..n), ending with fp 0. */
static int kchain(struct fakekernel *fk, uint64_t first, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		uint64_t fp = first + 0x40 * i;

		if (fk_frame(fk, fp, i + 1 < n ? fp + 0x40 : 0, RET(i + 1)))
			return -1;
	}
	return 0;
}

static int k_good(struct kfixture *f)
{
	f->regs.rbp = S + 0x3e00;
	return kchain(&f->fk, S + 0x3e00, 3);
}

static int k_depth(struct kfixture *f)
{
	f->regs.rbp = S + 0x100;
	f->max = 10;
	return kchain(&f->fk, S + 0x100, 200);
}

static int k_exactly_max(struct kfixture *f)
{
	f->regs.rbp = S + 0x100;
	f->max = 4; /* rip + 3 frames, then fp 0: the chain ended, not the depth */
	return kchain(&f->fk, S + 0x100, 3);
}

static int k_max_one(struct kfixture *f)
{
	f->max = 1;
	return k_good(f);
}

static int k_cycle(struct kfixture *f)
{
	f->regs.rbp = S + 0x3e00;
	return kchain(&f->fk, S + 0x3e00, 3) || fk_frame(&f->fk, S + 0x3e80, S + 0x3e00, RET(3));
}

static int k_self_loop(struct kfixture *f)
{
	f->regs.rbp = S + 0x3e00;
	return fk_frame(&f->fk, S + 0x3e00, S + 0x3e00, RET(1));
}

static int k_unmapped(struct kfixture *f)
{
	/* Page 3 of the stack is not mapped (fakekernel_init with 3 pages). */
	f->regs.rbp = S + 0x2f00;
	return fk_frame(&f->fk, S + 0x2f00, S + 0x3100, RET(1));
}

static int k_noncanonical_rbp(struct kfixture *f)
{
	f->regs.rbp = 0xffff000000001000ull;
	return 0;
}

static int k_user_rbp(struct kfixture *f)
{
	f->regs.rbp = 0x00007ffffffde000ull;
	return 0;
}

static int k_noncanonical_next(struct kfixture *f)
{
	f->regs.rbp = S + 0x3e00;
	return fk_frame(&f->fk, S + 0x3e00, 0x0000900000000000ull, RET(1));
}

static int k_misaligned(struct kfixture *f)
{
	f->regs.rbp = S + 0x3e00;
	return fk_frame(&f->fk, S + 0x3e00, S + 0x3e44, RET(1));
}

static int k_ret_outside_text(struct kfixture *f)
{
	f->regs.rbp = S + 0x3e00;
	return kchain(&f->fk, S + 0x3e00, 3) || fk_frame(&f->fk, S + 0x3e40, S + 0x3e80, FK_ETEXT);
}

static int k_leaves_stack(struct kfixture *f)
{
	f->regs.rbp = S + 0x3fc0;
	/* The next frame would be past the top of the task stack: the outermost one. */
	return fk_frame(&f->fk, S + 0x3fc0, S + 0x4000, RET(1));
}

static int k_rbp_zero(struct kfixture *f)
{
	f->regs.rbp = 0;
	return 0;
}

static int k_irq_to_task(struct kfixture *f)
{
	/* Two frames on the IRQ stack, then the interrupted task's chain. */
	f->regs.rbp = IRQ + 0x3f00;
	return fk_frame(&f->fk, IRQ + 0x3f00, IRQ + 0x3f40, RET(1)) ||
	       fk_frame(&f->fk, IRQ + 0x3f40, S + 0x3e00, RET(2)) ||
	       fk_frame(&f->fk, S + 0x3e00, 0, RET(3));
}

static int k_task_to_irq(struct kfixture *f)
{
	f->regs.rbp = S + 0x3e00;
	f->regs.rbp = IRQ + 0x3f00; /* first frame on the IRQ stack is fine ... */
	return fk_frame(&f->fk, IRQ + 0x3f00, S + 0x3e00, RET(1)) ||
	       /* ... but going back from the task stack to it is not */
	       fk_frame(&f->fk, S + 0x3e00, IRQ + 0x3f80, RET(2));
}

/* The IRQ-to-task chain with task->stack in guest memory pointing elsewhere (an IRQ stack):
 * the walk reads it and stops where the chain leaves the first frame's region ... */
static int k_irq_to_task_stack_moved(struct kfixture *f)
{
	return k_irq_to_task(f) ||
	       fk_w64(&f->fk, f->task + f->fk.layout.task_stack, IRQ + 0x8000);
}

/* ... or takes the caller's (regs->task_stack, read once per exit by the sampler) instead. */
static int k_task_stack_given(struct kfixture *f)
{
	f->regs.task_stack = S;
	return k_irq_to_task_stack_moved(f);
}

static int k_no_task(struct kfixture *f)
{
	/* Unknown task: only the first frame's 16 KiB region is a stack. */
	f->task = 0;
	return k_good(f);
}

/* Interrupt entry with ENCODE_FRAME_POINTER: fp = pt_regs | 1. */
static int put_regs(struct fakekernel *fk, uint64_t at, uint64_t cs, uint64_t ip, uint64_t bp)
{
	const struct gi_layout *l = &fk->layout;

	return fk_w64(fk, at + l->pt_regs_cs, cs) || fk_w64(fk, at + l->pt_regs_ip, ip) ||
	       fk_w64(fk, at + l->pt_regs_bp, bp);
}

static int k_regs_kernel(struct kfixture *f)
{
	f->regs.rbp = S + 0x3000;
	return fk_frame(&f->fk, S + 0x3000, (S + 0x3100) | 1, RET(1)) ||
	       put_regs(&f->fk, S + 0x3100, 0x10, RET(2), S + 0x3e00) ||
	       fk_frame(&f->fk, S + 0x3e00, 0, RET(3));
}

static int k_regs_user(struct kfixture *f)
{
	f->regs.rbp = S + 0x3000;
	return fk_frame(&f->fk, S + 0x3000, (S + 0x3f58) | 1, RET(1)) ||
	       put_regs(&f->fk, S + 0x3f58, 0x33, 0x401000, 0x7ffffffde000ull);
}

struct krow {
	const char *name;
	unsigned int stack_pages;
	int (*setup)(struct kfixture *f);
	enum hvp_walk_stop stop;
	unsigned int n;
};

static const struct krow krows[] = {
	{ "good chain", 4, k_good, HVP_WALK_END, 4 },
	{ "huge depth", 4, k_depth, HVP_WALK_DEPTH, 10 },
	{ "chain of exactly max frames", 4, k_exactly_max, HVP_WALK_END, 4 },
	{ "max 1", 4, k_max_one, HVP_WALK_DEPTH, 1 },
	{ "cyclic chain", 4, k_cycle, HVP_WALK_BAD_FP, 4 },
	{ "frame pointing at itself", 4, k_self_loop, HVP_WALK_BAD_FP, 2 },
	{ "frame in unmapped memory", 3, k_unmapped, HVP_WALK_FAULT, 2 },
	{ "non-canonical rbp", 4, k_noncanonical_rbp, HVP_WALK_BAD_FP, 1 },
	{ "user rbp in the kernel", 4, k_user_rbp, HVP_WALK_BAD_FP, 1 },
	{ "non-canonical next frame", 4, k_noncanonical_next, HVP_WALK_BAD_FP, 2 },
	{ "misaligned next frame", 4, k_misaligned, HVP_WALK_BAD_FP, 2 },
	{ "return address outside kernel text", 4, k_ret_outside_text, HVP_WALK_BAD_FP, 2 },
	{ "chain leaves the stack", 4, k_leaves_stack, HVP_WALK_END, 2 },
	{ "rbp 0", 4, k_rbp_zero, HVP_WALK_END, 1 },
	{ "IRQ stack to task stack", 4, k_irq_to_task, HVP_WALK_END, 4 },
	{ "task stack back to IRQ stack", 4, k_task_to_irq, HVP_WALK_BAD_FP, 3 },
	{ "task->stack read from the task", 4, k_irq_to_task_stack_moved, HVP_WALK_END, 3 },
	{ "task->stack as the caller read it", 4, k_task_stack_given, HVP_WALK_END, 4 },
	{ "no task: first region only", 4, k_no_task, HVP_WALK_END, 4 },
	{ "encoded pt_regs, kernel mode", 4, k_regs_kernel, HVP_WALK_END, 4 },
	{ "encoded pt_regs, user mode", 4, k_regs_user, HVP_WALK_END, 2 },
};

static int run_krow(const struct krow *row)
{
	struct kfixture f;
	uint64_t ips[HVP_MAX_CALLCHAIN + 1];
	unsigned int n = 999;
	enum hvp_walk_stop stop;
	int ret = TEST_FAIL;

	if (fakekernel_init(&f.fk, row->stack_pages))
		return TEST_FAIL;
	f.regs = f.fk.regs;
	f.task = f.fk.task_kva;
	f.max = HVP_MAX_CALLCHAIN;
	if (row->setup(&f)) {
		fprintf(stderr, "%s: setup failed\n", row->name);
		goto out;
	}
	memset(ips, 0, sizeof(ips));
	stop = gi_unwind_kernel(f.fk.gi, &f.fk.fm.mem, &f.regs, f.task, ips, f.max, &n);
	if (stop != row->stop || n != row->n) {
		fprintf(stderr, "%s: stop %d n %u, expected stop %d n %u\n", row->name, stop, n,
			row->stop, row->n);
		goto out;
	}
	if (ips[0] != f.regs.rip) {
		fprintf(stderr, "%s: ips[0] is not rip\n", row->name);
		goto out;
	}
	for (unsigned int i = 1; i < n; i++) {
		if (ips[i] != RET(i)) {
			fprintf(stderr, "%s: ips[%u] = 0x%llx\n", row->name, i,
				(unsigned long long)ips[i]);
			goto out;
		}
	}
	if (ips[n] != 0) {
		fprintf(stderr, "%s: wrote past n\n", row->name);
		goto out;
	}
	ret = TEST_OK;
out:
	fakekernel_fini(&f.fk);
	return ret;
}

static int test_kernel_unwind(void)
{
	int ret = TEST_OK;

	for (size_t i = 0; i < ARRAY_SIZE(krows); i++)
		if (run_krow(&krows[i]) != TEST_OK)
			ret = TEST_FAIL;
	return ret;
}

/*
 * Two things the walk learns from the kernel image: the entry code (where RBP is still the
 * user's, so a user RBP there ends the walk instead of being a bad frame), and whether the
 * KASLR slide is known (until it is, a return address may be anywhere KASLR puts text).
 */
static int test_kernel_entry_and_unknown_slide(void)
{
	const uint64_t entry = FK_STEXT + 0x200000, far_text = 0xffffffff9a000000ull;
	struct fakekernel fk;
	struct gi_regs r;
	uint64_t ips[8];
	unsigned int n;

	ASSERT_EQ_INT(fakekernel_init(&fk, 4), 0);
	fk.gi->entry_text_start = entry;
	fk.gi->entry_text_end = entry + 0x1000;
	r = fk.regs;
	r.rbp = 0x00007ffffffde000ull;
	r.rip = entry + 0x40; /* entry_SYSCALL_64, before the kernel stack */
	ASSERT_EQ_INT(gi_unwind_kernel(fk.gi, &fk.fm.mem, &r, fk.task_kva, ips, 8, &n),
		      HVP_WALK_END);
	ASSERT_EQ_INT(n, 1);
	r.rip = FK_STEXT + 0x40; /* the same RBP anywhere else: a bad frame pointer */
	ASSERT_EQ_INT(gi_unwind_kernel(fk.gi, &fk.fm.mem, &r, fk.task_kva, ips, 8, &n),
		      HVP_WALK_BAD_FP);

	/* A frame returning to text beyond _etext but inside the KASLR range. */
	ASSERT_EQ_INT(fk_frame(&fk, S + 0x3e00, S + 0x3e40, RET(1)), 0);
	ASSERT_EQ_INT(fk_frame(&fk, S + 0x3e40, 0, far_text), 0);
	r.rbp = S + 0x3e00;
	ASSERT_EQ_INT(gi_unwind_kernel(fk.gi, &fk.fm.mem, &r, fk.task_kva, ips, 8, &n),
		      HVP_WALK_BAD_FP); /* slide known (0): not kernel text */
	ASSERT_EQ_INT(n, 2);
	fk.gi->slide_state = GI_SLIDE_UNKNOWN;
	ASSERT_EQ_INT(gi_unwind_kernel(fk.gi, &fk.fm.mem, &r, fk.task_kva, ips, 8, &n),
		      HVP_WALK_END);
	ASSERT_EQ_INT(n, 3);
	ASSERT_EQ_U64(ips[2], far_text);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/* ---------------------------------------------------------------- user */

struct ufixture {
	struct fakekernel fk;
	uint64_t rsp, rbp;
	unsigned int max;
};

static int u_good(struct ufixture *f)
{
	f->rbp = U + 0x3000;
	return fk_uchain(&f->fk, U + 0x3000, 5);
}

static int u_depth(struct ufixture *f)
{
	f->rbp = U + 0x200;
	f->max = 16;
	return fk_uchain(&f->fk, U + 0x200, 300);
}

static int u_cycle(struct ufixture *f)
{
	f->rbp = U + 0x3000;
	return fk_uchain(&f->fk, U + 0x3000, 3) || fk_frame(&f->fk, U + 0x3040, U + 0x3020, URET(3));
}

/* A return address into the (NX) stack: garbage, not code. */
static int u_ret_nx(struct ufixture *f)
{
	f->rbp = U + 0x3000;
	return fk_frame(&f->fk, U + 0x3000, U + 0x3020, URET(1)) ||
	       fk_frame(&f->fk, U + 0x3020, 0, U + 0x100);
}

/* A return address into an unmapped user page. */
static int u_ret_unmapped(struct ufixture *f)
{
	f->rbp = U + 0x3000;
	return fk_frame(&f->fk, U + 0x3000, 0, 0x7000000ull);
}

static int u_unmapped(struct ufixture *f)
{
	/* Above the four mapped pages, still within 8 MiB of rsp. */
	f->rbp = U + 0x3ff0;
	return fk_frame(&f->fk, U + 0x3ff0, U + 0x5000, URET(1));
}

static int u_kernel_rbp(struct ufixture *f)
{
	f->rbp = FK_STACK + 0x100;
	return 0;
}

static int u_noncanonical(struct ufixture *f)
{
	f->rbp = U + 0x3000;
	return fk_frame(&f->fk, U + 0x3000, 0x0000800000000000ull, URET(1));
}

static int u_below_rsp(struct ufixture *f)
{
	f->rsp = U + 0x3000;
	f->rbp = U + 0x2000;
	return 0;
}

static int u_far_above_rsp(struct ufixture *f)
{
	f->rbp = U + 0x3000;
	return fk_frame(&f->fk, U + 0x3000, U + 0x100 + (8ull << 20), URET(1));
}

static int u_misaligned(struct ufixture *f)
{
	f->rbp = U + 0x3004;
	return 0;
}

static int u_kernel_ret(struct ufixture *f)
{
	f->rbp = U + 0x3000;
	return fk_uchain(&f->fk, U + 0x3000, 2) || fk_frame(&f->fk, U + 0x3020, 0, FK_STEXT);
}

struct urow {
	const char *name;
	int (*setup)(struct ufixture *f);
	enum hvp_walk_stop stop;
	unsigned int n;
};

static const struct urow urows[] = {
	{ "good chain", u_good, HVP_WALK_END, 6 },
	{ "huge depth", u_depth, HVP_WALK_DEPTH, 16 },
	{ "cyclic chain", u_cycle, HVP_WALK_BAD_FP, 4 },
	{ "frame in unmapped memory", u_unmapped, HVP_WALK_FAULT, 2 },
	{ "kernel rbp", u_kernel_rbp, HVP_WALK_BAD_FP, 1 },
	{ "non-canonical next frame", u_noncanonical, HVP_WALK_BAD_FP, 2 },
	{ "rbp below rsp", u_below_rsp, HVP_WALK_END, 1 },
	{ "frame 8 MiB above rsp", u_far_above_rsp, HVP_WALK_END, 2 },
	{ "misaligned rbp", u_misaligned, HVP_WALK_BAD_FP, 1 },
	{ "return address in the kernel", u_kernel_ret, HVP_WALK_BAD_FP, 2 },
	{ "return address into a no-execute (stack) page", u_ret_nx, HVP_WALK_BAD_FP, 2 },
	{ "return address into an unmapped page", u_ret_unmapped, HVP_WALK_BAD_FP, 1 },
};

static int run_urow(const struct urow *row)
{
	struct ufixture f;
	uint64_t ips[HVP_MAX_CALLCHAIN + 1];
	unsigned int n = 999;
	enum hvp_walk_stop stop;
	int ret = TEST_FAIL;

	if (fakekernel_init(&f.fk, 4))
		return TEST_FAIL;
	f.rsp = U + 0x100;
	f.max = HVP_MAX_CALLCHAIN;
	if (row->setup(&f)) {
		fprintf(stderr, "%s: setup failed\n", row->name);
		goto out;
	}
	memset(ips, 0, sizeof(ips));
	stop = gi_unwind_user(&f.fk.fm.mem, &f.fk.fm.pg, 0x400100, f.rsp, f.rbp, ips, f.max, &n);
	if (stop != row->stop || n != row->n) {
		fprintf(stderr, "%s: stop %d n %u, expected stop %d n %u\n", row->name, stop, n,
			row->stop, row->n);
		goto out;
	}
	{ /* the same walk from a copy of the stack, as the sampler makes it: the same frames */
		struct hvp_bytes segs[HVP_USER_STACK_SEGS];
		struct hvp_user_regs copy = { .stack_segs = segs };
		uint64_t ips2[HVP_MAX_CALLCHAIN + 1] = { 0 };
		unsigned int n2 = 999, n_segs = 0;

		copy.regs[HVP_REG_RSP] = f.rsp;
		if (!(f.rsp & 7) && gi_map_user_stack(&f.fk.fm.mem, &f.fk.fm.pg, f.rsp,
						       HVP_USER_STACK_DEFAULT, segs,
						       HVP_USER_STACK_SEGS, &n_segs,
						       &copy.stack_len) != 0)
			goto out;
		copy.n_stack_segs = n_segs;
		if (gi_unwind_user_copy(&f.fk.fm.mem, &f.fk.fm.pg, 0x400100, f.rsp, f.rbp, &copy,
					ips2, f.max, &n2) != stop || n2 != n ||
		    memcmp(ips, ips2, sizeof(ips))) {
			fprintf(stderr, "%s: from the copy: n %u\n", row->name, n2);
			goto out;
		}
	}
	if (ips[0] != 0x400100)
		goto out;
	for (unsigned int i = 1; i < n; i++) {
		if (ips[i] != URET(i)) {
			fprintf(stderr, "%s: ips[%u] = 0x%llx\n", row->name, i,
				(unsigned long long)ips[i]);
			goto out;
		}
	}
	if (ips[n] != 0)
		goto out;
	ret = TEST_OK;
out:
	fakekernel_fini(&f.fk);
	return ret;
}

static int test_user_unwind(void)
{
	int ret = TEST_OK;

	for (size_t i = 0; i < ARRAY_SIZE(urows); i++)
		if (run_urow(&urows[i]) != TEST_OK)
			ret = TEST_FAIL;
	return ret;
}

/* A guest memory that counts its reads. */
struct counted_mem {
	const struct gmem *inner;
	unsigned int reads;
};

static int counted_read(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	struct counted_mem *cm = ctx;

	cm->reads++;
	return gmem_read(cm->inner, gpa, dst, len);
}

/*
 * gi_unwind_user_copy reads the frames in the copy from the copy (not the guest: a copy that
 * differs from guest memory is what the walk follows, with no read of the stack), across the
 * seam of two pieces, and the frames past the copy from the guest.
 */
static int test_user_unwind_copy(void)
{
	struct fakekernel fk;
	uint8_t lo[0x28], hi[0x100];
	struct hvp_bytes segs[2] = { { lo, sizeof(lo) }, { hi, sizeof(hi) } };
	const uint64_t sp = U + 0x100;
	struct hvp_user_regs copy = { .stack_segs = segs, .n_stack_segs = 2,
				      .stack_len = sizeof(lo) + sizeof(hi) };
	struct counted_mem cm;
	struct gmem mem;
	uint64_t ips[8], w[2];
	unsigned int n = 0;

	if (fakekernel_init(&fk, 4))
		return TEST_FAIL;
	copy.regs[HVP_REG_RSP] = sp;
	cm = (struct counted_mem){ .inner = &fk.fm.mem };
	mem = (struct gmem){ .read = counted_read, .ctx = &cm };
	/* the guest: frames at sp+0x20 -> sp+0x40 -> ... (5 frames, URET(1..5)) */
	ASSERT_EQ_INT(fk_uchain(&fk, sp + 0x20, 5), 0);
	/* the copy: the first frame straddles the pieces (lo ends at sp+0x28) and names another
	 * return address and next frame (sp+0x60, in hi) than the guest's */
	memset(lo, 0, sizeof(lo));
	memset(hi, 0, sizeof(hi));
	w[0] = sp + 0x60;
	w[1] = URET(4);
	memcpy(lo + 0x20, &w[0], 8);
	memcpy(hi, &w[1], 8);
	/* the frame at sp+0x60 in the copy: next sp+0x140, past the copy (len 0x128): the guest's */
	w[0] = sp + 0x140;
	w[1] = URET(5);
	memcpy(hi + 0x60 - sizeof(lo), w, 16);
	ASSERT_EQ_INT(fk_frame(&fk, sp + 0x140, 0, URET(3)), 0);
	ASSERT_EQ_INT(gi_unwind_user_copy(&mem, &fk.fm.pg, 0x400100, sp, sp + 0x20, &copy, ips, 8,
					  &n),
		      HVP_WALK_END);
	ASSERT_EQ_INT(n, 4);
	ASSERT_EQ_U64(ips[1], URET(4)); /* the copy's, not the guest's URET(1) */
	ASSERT_EQ_U64(ips[2], URET(5));
	ASSERT_EQ_U64(ips[3], URET(3)); /* read from the guest */
	{ /* the same bytes in one buffer (gi_copy_user_stack's form): the same chain */
		static uint8_t buf[sizeof(lo) + sizeof(hi)];
		struct hvp_user_regs one = { .stack = buf, .stack_len = sizeof(buf) };

		memcpy(buf, lo, sizeof(lo));
		memcpy(buf + sizeof(lo), hi, sizeof(hi));
		one.regs[HVP_REG_RSP] = sp;
		ASSERT_EQ_INT(gi_unwind_user_copy(&mem, &fk.fm.pg, 0x400100, sp, sp + 0x20, &one,
						  ips, 8, &n),
			      HVP_WALK_END);
		ASSERT_EQ_INT(n, 4);
		ASSERT_EQ_U64(ips[1], URET(4));
		ASSERT_EQ_U64(ips[2], URET(5));
	}
	/* guest reads: the page walks of the return addresses' text page and of the last frame
	 * with its 16 bytes; without the copy, every frame's */
	{
		unsigned int with_copy = cm.reads;

		cm.reads = 0;
		ASSERT_EQ_INT(gi_unwind_user(&mem, &fk.fm.pg, 0x400100, sp, sp + 0x20, ips, 8, &n),
			      HVP_WALK_END);
		ASSERT_EQ_INT(n, 6);
		ASSERT_EQ_U64(ips[1], URET(1));
		ASSERT_TRUE(with_copy < cm.reads);
	}
	/* a copy that ends inside a frame: that frame is the guest's */
	copy.n_stack_segs = 1;
	copy.stack_len = sizeof(lo);
	ASSERT_EQ_INT(gi_unwind_user_copy(&mem, &fk.fm.pg, 0x400100, sp, sp + 0x20, &copy, ips, 8,
					  &n),
		      HVP_WALK_END);
	ASSERT_EQ_INT(n, 6);
	ASSERT_EQ_U64(ips[1], URET(1));
	/* pieces shorter than len (a broken copy): the frame is read from the guest */
	copy.stack_len = 0x100;
	ASSERT_EQ_INT(gi_unwind_user_copy(&mem, &fk.fm.pg, 0x400100, sp, sp + 0x20, &copy, ips, 8,
					  &n),
		      HVP_WALK_END);
	ASSERT_EQ_INT(n, 6);
	fakekernel_fini(&fk);
	return TEST_OK;
}

static int test_unwind_args(void)
{
	struct fakekernel fk;
	uint64_t ips[4];
	unsigned int n = 7;

	if (fakekernel_init(&fk, 4))
		return TEST_FAIL;
	ASSERT_EQ_INT(gi_unwind_kernel(fk.gi, &fk.fm.mem, &fk.regs, fk.task_kva, ips, 0, &n),
		      HVP_WALK_NONE);
	ASSERT_EQ_INT(n, 0);
	ASSERT_EQ_INT(gi_unwind_user(&fk.fm.mem, NULL, 0, 0, 0, ips, 4, &n), HVP_WALK_NONE);
	ASSERT_EQ_INT(gi_unwind_user(&fk.fm.mem, &fk.fm.pg, 0, 0, 0, NULL, 4, &n), HVP_WALK_NONE);
	fakekernel_fini(&fk);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "kernel unwind: entry code, unknown KASLR slide", test_kernel_entry_and_unknown_slide },
	{ "kernel frame-pointer unwind", test_kernel_unwind },
	{ "user frame-pointer unwind", test_user_unwind },
	{ "user frame-pointer unwind from a copy of the stack", test_user_unwind_copy },
	{ "bad arguments", test_unwind_args },
};

TEST_MAIN(tests)
