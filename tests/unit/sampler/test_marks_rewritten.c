// SPDX-License-Identifier: MIT
// Unit tests of how a mark ends when a later sample of its stay shows other user registers
// (sampler/marks.c: marks_take, rewritten_in_stay) without /dev/kvm: a return no breakpoint saw
// (returns_unseen) against registers the kernel rewrote itself (marks_regs_rewritten).
#include <string.h>

#include "sampler_fixture.h"
#include "test.h"

/* A mark of @req's stay, then a sample of the same stay with @now: the mark ends either way. */
static int take_other(struct fixture *f, const struct mark_req *req,
		      const struct gi_user_regs *now)
{
	struct svcpu *sv = &f->s->vcpus[0];
	struct mark_req req2 = req_of(f, FK_PID, now);
	uint64_t c = marks_take(sv, req);

	ASSERT_TRUE(c != 0);
	ASSERT_TRUE(marks_take(sv, &req2) != c);
	marks_flush(sv);
	return TEST_OK;
}

#define TAKE_OTHER(f, req, now) ASSERT_EQ_INT(take_other((f), (req), (now)), TEST_OK)
#define COUNTS(sv, rewritten, unseen)                                              \
	do {                                                                         \
		ASSERT_EQ_U64((sv)->c.marks_regs_rewritten, (rewritten));            \
		ASSERT_EQ_U64((sv)->c.returns_unseen, (unseen));                     \
	} while (0)

/*
 * Unseen unless the kernel rewrote the registers itself: a signal's delivery (the handler's
 * frame at the new RSP saved the entry's, or their SYSCALL two bytes back), a 64-bit
 * rt_sigreturn's entry returning to the context its frame holds (at the entry's RSP - 8), a
 * system call's restart with no handler (ip two bytes back, same stack, same orig_ax).
 */
static int regs_rewritten(struct fixture *f)
{
	struct gi_user_regs e = { 0x400100, U + 0x1000, U + 0x3000 }, w;
	struct gi_user_regs handler = { 0x400900, U + 0x800, 0 };
	struct gi_user_regs other = { 0x400200, U + 0x900, 0 };
	struct gi_user_regs m; /* the entry of a mark other than @e's (@req points at it) */
	struct svcpu *sv = &f->s->vcpus[0];
	struct mark_req req;

	e.entry_known = true;
	e.cs = 0x33;
	e.orig_ax = 0; /* read(2) */
	req = req_of(f, FK_PID, &e);
	/* another context, nothing saved the entry's: unseen */
	TAKE_OTHER(f, &req, &other);
	COUNTS(sv, 0, 1);
	/* a handler's frame saved the entry's registers, or its SYSCALL instruction's */
	ASSERT_EQ_INT(fk_w64(&f->fk, U + 0x800 + 168, e.sp), 0);
	ASSERT_EQ_INT(fk_w64(&f->fk, U + 0x800 + 176, e.ip), 0);
	TAKE_OTHER(f, &req, &handler);
	COUNTS(sv, 1, 1);
	ASSERT_EQ_INT(fk_w64(&f->fk, U + 0x800 + 176, e.ip - 2), 0);
	TAKE_OTHER(f, &req, &handler);
	COUNTS(sv, 2, 1);
	/* ... one saving another stack: unseen, the frame read once (the late walk's look at it
	 * is the rewrite's too) */
	ASSERT_EQ_INT(fk_w64(&f->fk, U + 0x800 + 168, e.sp + 8), 0);
	{
		/* the 16-byte reads of the handler frame's saved sp and ip (not a stack copy
		 * through them, nor a page walk's 1-byte look) */
		struct read_counter fr = { .inner = f->fk.fm.mem,
					   .gpa = FK_USER_STACK_GPA + 0x800 + 168, .size = 16,
					   .len = 16 };

		f->fk.fm.mem = (struct gmem){ .read = read_counter_read, .ctx = &fr };
		TAKE_OTHER(f, &req, &handler);
		f->fk.fm.mem = fr.inner;
		ASSERT_EQ_U64(fr.n, 1);
	}
	COUNTS(sv, 2, 2);
	/* a restart with no handler: back over the SYSCALL, same stack and orig_ax */
	w = e;
	w.ip = e.ip - 2;
	TAKE_OTHER(f, &req, &w);
	COUNTS(sv, 3, 2);
	w.ip = e.ip - 4; /* further back */
	TAKE_OTHER(f, &req, &w);
	COUNTS(sv, 3, 3);
	w.ip = e.ip - 2;
	w.sp = e.sp + 8; /* another stack */
	TAKE_OTHER(f, &req, &w);
	COUNTS(sv, 3, 4);
	w.sp = e.sp;
	w.orig_ax = 1; /* another system call */
	TAKE_OTHER(f, &req, &w);
	COUNTS(sv, 3, 5);
	/* ... not after an interrupt's entry (a new entry two bytes back: a jump to a pause) */
	m = e;
	m.orig_ax = UINT64_MAX;
	req = req_of(f, FK_PID, &m);
	w = m;
	w.ip = e.ip - 2;
	TAKE_OTHER(f, &req, &w);
	COUNTS(sv, 3, 6);
	/* rt_sigreturn's entry (RSP one word into its frame) to the context the frame holds */
	m = e;
	m.orig_ax = 15;
	m.sp = U + 0x600 + 8;
	req = req_of(f, FK_PID, &m);
	ASSERT_EQ_INT(fk_w64(&f->fk, U + 0x600 + 168, other.sp), 0);
	ASSERT_EQ_INT(fk_w64(&f->fk, U + 0x600 + 176, other.ip), 0);
	TAKE_OTHER(f, &req, &other);
	COUNTS(sv, 4, 6);
	TAKE_OTHER(f, &req, &handler); /* ... to any other: unseen */
	COUNTS(sv, 4, 7);
	w = other;
	w.sp = other.sp + 8; /* the frame's ip on another stack */
	TAKE_OTHER(f, &req, &w);
	COUNTS(sv, 4, 8);
	m.cs = 0x23; /* a 32-bit task: 15 is chmod there */
	TAKE_OTHER(f, &req, &other);
	COUNTS(sv, 4, 9);
	/* ... in another mm: neither (execve set up another program) */
	m.cs = 0x33;
	{
		struct mark_req req2 = req_of(f, FK_PID, &other);
		uint64_t c = marks_take(sv, &req);

		req2.mm = f->fk.mm_kva + 0x1000;
		ASSERT_TRUE(c && marks_take(sv, &req2) != c);
		marks_flush(sv);
	}
	COUNTS(sv, 4, 9);
	return TEST_OK;
}

static int test_regs_rewritten(void)
{
	struct fixture f;
	int ret;

	if (fixture_init(&f, SAMPLER_CALLCHAIN_DEFERRED, 4))
		return TEST_FAIL;
	ret = regs_rewritten(&f);
	fixture_fini(&f);
	return ret;
}

static const struct test_case tests[] = {
	{ "marks: registers the kernel rewrote in a stay are no unseen return",
	  test_regs_rewritten },
};

TEST_MAIN(tests)
