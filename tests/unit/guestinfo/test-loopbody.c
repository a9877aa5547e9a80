// SPDX-License-Identifier: MIT
// Unit tests of guestinfo/loopbody.c: the body of an exit-work loop (the code that may read the
// thread's flags again before the return to user mode) on hand-assembled loops, and the static
// keys' sites it takes both ways, read from a __jump_table.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "codefixture.h"
#include "gi_internal.h"
#include "test.h"

/* gi_loop_body of @bytes at FN (int3 after them), head at FN; the ranges' offsets from FN in
 * @r, their count returned (-1: failed). */
static int body_of(const uint8_t *bytes, size_t len, uint64_t irq_disable, uint64_t r[4][2])
{
	unsigned int n = 0;

	memset(code, 0xcc, sizeof(code));
	memcpy(code, bytes, len);
	if (gi_loop_body(read_code, NULL, FN, FN + len, FN, irq_disable, NULL, 0, r, 4, &n) != 0)
		return -1;
	for (unsigned int i = 0; i < n; i++) {
		r[i][0] -= FN;
		r[i][1] -= FN;
	}
	return (int)n;
}

/*
 * gi_loop_body on a hand-assembled loop headed by an sti at FN: its bottom (cli, test, jne back)
 * in line, an out-of-line block after it that jumps back too, and between them the loop's exit
 * jump and a block nothing in the loop reaches (as a static key's target, a nop in the image):
 * the body is the two parts, up to the bottom's cli (from there the thread may leave without
 * another), not what lies between. Then the shapes that would put code after a read in it: a
 * call whose return tests and leaves, a call (noreturn) falling into the way back, a static
 * key's nop (a jump to anywhere), an iretq.
 */
static int test_loop_body(void)
{
	static const uint8_t loop[] = {
		0xfb,                               /* 0x00 head: sti */
		0xf7, 0xc3, 0x02, 0x00, 0x00, 0x00, /* 0x01 test $2, %ebx */
		0x74, 0x19,                         /* 0x07 je 0x22 (out of line) */
		0xe8, 0x00, 0x00, 0x00, 0x00,       /* 0x09 call (returns) */
		0xeb, 0x00,                         /* 0x0e jmp 0x10 */
		0xfa,                               /* 0x10 cli */
		0xf7, 0xc3, 0x02, 0x00, 0x00, 0x00, /* 0x11 test $2, %ebx */
		0x75, 0xe7,                         /* 0x17 jne 0x00: back */
		0xeb, 0x15,                         /* 0x19 jmp 0x30: out of the loop */
		0xe8, 0x00, 0x00, 0x00, 0x00,       /* 0x1b not the loop's: call */
		0xeb, 0x0e,                         /* 0x20 jmp 0x30 */
		0xe8, 0x00, 0x00, 0x00, 0x00,       /* 0x22 out of line: call */
		0xeb, 0xd7,                         /* 0x27 jmp 0x00: back */
		0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, /* 0x29 */
		0xc3,                               /* 0x2f */
		0xc3,                               /* 0x30 the exit: ret */
	};
	/* sti; call; test; je out; cli; test; jne head; out: ret (the call's return may leave) */
	static const uint8_t leaves[] = {
		0xfb,                               /* 0x00 head */
		0xe8, 0x00, 0x00, 0x00, 0x00,       /* 0x01 call */
		0xa8, 0x01,                         /* 0x06 test $1, %al */
		0x74, 0x0a,                         /* 0x08 je 0x14 */
		0xfa,                               /* 0x0a cli */
		0xf7, 0xc3, 0x02, 0x00, 0x00, 0x00, /* 0x0b test $2, %ebx */
		0x75, 0xed,                         /* 0x11 jne 0x00 */
		0x90,                               /* 0x13 nop */
		0xc3,                               /* 0x14 ret */
	};
	/* the same, the cli a call through the pv_ops slot at FN + 0x100 */
	static const uint8_t leaves_pv[] = {
		0xfb,                               /* 0x00 head */
		0xe8, 0x00, 0x00, 0x00, 0x00,       /* 0x01 call */
		0xa8, 0x01,                         /* 0x06 test $1, %al */
		0x74, 0x0f,                         /* 0x08 je 0x19 */
		0xff, 0x15, 0xf0, 0x00, 0x00, 0x00, /* 0x0a call *0xf0(%rip): FN + 0x100 */
		0xf7, 0xc3, 0x02, 0x00, 0x00, 0x00, /* 0x10 test $2, %ebx */
		0x75, 0xe8,                         /* 0x16 jne 0x00 */
		0x90,                               /* 0x18 nop */
		0xc3,                               /* 0x19 ret */
	};
	/* sti; cli; test; jne L; ret; L: call (noreturn); jmp head */
	static const uint8_t noreturn[] = {
		0xfb,                               /* 0x00 head */
		0xfa,                               /* 0x01 cli */
		0xf7, 0xc3, 0x02, 0x00, 0x00, 0x00, /* 0x02 test $2, %ebx */
		0x75, 0x01,                         /* 0x08 jne 0x0b */
		0xc3,                               /* 0x0a ret */
		0xe8, 0x00, 0x00, 0x00, 0x00,       /* 0x0b call */
		0xeb, 0xee,                         /* 0x10 jmp 0x00 */
	};
	uint64_t r[4][2];
	uint8_t v[sizeof(leaves)];
	unsigned int n = 9;

	ASSERT_EQ_INT(body_of(loop, sizeof(loop), 0, r), 2);
	ASSERT_EQ_U64(r[0][0], 0);
	ASSERT_EQ_U64(r[0][1], 0x11);
	ASSERT_EQ_U64(r[1][0], 0x22);
	ASSERT_EQ_U64(r[1][1], 0x29);
	/* room for one range: the first, the rest left out */
	ASSERT_EQ_INT(gi_loop_body(read_code, NULL, FN, FN + sizeof(loop), FN, 0, NULL, 0, r, 1, &n),
		      0);
	ASSERT_EQ_INT((int)n, 1);
	ASSERT_EQ_U64(r[0][1], FN + 0x11);
	/* the block between reached from the loop (its exit jump made `jmp 0x1b`): it goes
	 * out, never back, so it is still not the loop's */
	{
		uint8_t l2[sizeof(loop)];

		memcpy(l2, loop, sizeof(loop));
		l2[0x1a] = 0x00;
		ASSERT_EQ_INT(body_of(l2, sizeof(l2), 0, r), 2);
		ASSERT_EQ_U64(r[0][1], 0x11);
		/* ... and when it jumps back to the head (`jmp 0x00` at 0x20), nothing leaves:
		 * all of it is */
		l2[0x21] = (uint8_t)(0x00 - 0x22);
		ASSERT_EQ_INT(body_of(l2, sizeof(l2), 0, r), 1);
		ASSERT_EQ_U64(r[0][0], 0);
		ASSERT_EQ_U64(r[0][1], 0x29);
	}
	/* a call whose return may leave: the head, the call, its test all may; only the bottom's
	 * cli is left */
	ASSERT_EQ_INT(body_of(leaves, sizeof(leaves), 0, r), 1);
	ASSERT_EQ_U64(r[0][0], 0x0a);
	ASSERT_EQ_U64(r[0][1], 0x0b);
	/* ... the same with the cli a call through pv_ops.irq.irq_disable (the slot's address
	 * given); without the slot that call is just a call, and nothing is left */
	ASSERT_EQ_INT(body_of(leaves_pv, sizeof(leaves_pv), FN + 0x100, r), 1);
	ASSERT_EQ_U64(r[0][0], 0x0a);
	ASSERT_EQ_U64(r[0][1], 0x10);
	ASSERT_EQ_INT(body_of(leaves_pv, sizeof(leaves_pv), 0, r), 0);
	/* the call's test going on to the cli (`je` made `nop; nop`): from the head to the cli */
	memcpy(v, leaves, sizeof(v));
	v[0x08] = 0x90;
	v[0x09] = 0x90;
	ASSERT_EQ_INT(body_of(v, sizeof(v), 0, r), 1);
	ASSERT_EQ_U64(r[0][0], 0);
	ASSERT_EQ_U64(r[0][1], 0x0b);
	/* ... a ud2 on the way there (WARN: it resumes after itself, into the return) */
	v[0x08] = 0x0f;
	v[0x09] = 0x0b;
	v[0x0a] = 0xc3;
	ASSERT_EQ_INT(body_of(v, sizeof(v), 0, r), 0);
	v[0x0a] = 0xfa;
	v[0x08] = 0x90;
	v[0x09] = 0x90;
	/* ... an iretq after the call: a way out, not a fall into what follows (the head then
	 * never gets back to itself) */
	v[0x08] = 0x90;
	v[0x06] = 0x48;
	v[0x07] = 0xcf;
	ASSERT_EQ_INT(body_of(v, sizeof(v), 0, r), 0);
	/* a call that does not return (noreturn) taken to fall into a jump back: the read and
	 * its test before it, which may also return, are not the body */
	ASSERT_EQ_INT(body_of(noreturn, sizeof(noreturn), 0, r), 2);
	ASSERT_EQ_U64(r[0][0], 0x00);
	ASSERT_EQ_U64(r[0][1], 0x02);
	ASSERT_EQ_U64(r[1][0], 0x0b);
	ASSERT_EQ_U64(r[1][1], 0x12);
	/* a head inside an instruction, and bad arguments */
	memset(code, 0xcc, sizeof(code));
	memcpy(code, loop, sizeof(loop));
	ASSERT_EQ_INT(gi_loop_body(read_code, NULL, FN, FN + sizeof(loop), FN + 2, 0, NULL, 0, r,
				   4, &n), -ENOENT);
	ASSERT_EQ_INT(gi_loop_body(read_code, NULL, FN, FN + sizeof(loop), FN + sizeof(loop), 0,
				   NULL, 0, r, 4, &n), -EINVAL);
	ASSERT_EQ_INT(gi_loop_body(read_code, NULL, FN, FN + 8193, FN, 0, NULL, 0, r, 4, &n),
		      -EINVAL);
	ASSERT_EQ_INT(gi_loop_body(read_code, NULL, FN, FN + sizeof(loop), FN, 0, NULL, 0, r, 0,
				   &n), -EINVAL);
	ASSERT_EQ_INT(gi_loop_body(read_code, NULL, FN + 4096, FN + 4200, FN + 4096, 0, NULL, 0, r,
				   4, &n), -EFAULT);
	return TEST_OK;
}


/* The leaves fixture (test_loop_body) with the two bytes @b0 @b1 at 8, its body with the static
 * keys' sites @labels[0..@n) (NULL: none); the ranges' count (-1: failed), *@first the first's
 * start offset. */
static int body_with_site(uint8_t b0, uint8_t b1, const struct gi_jump_label *labels, size_t n,
			  uint64_t *first)
{
	static const uint8_t leaves[] = {
		0xfb, 0xe8, 0x00, 0x00, 0x00, 0x00, 0xa8, 0x01, 0x74, 0x0a, 0xfa,
		0xf7, 0xc3, 0x02, 0x00, 0x00, 0x00, 0x75, 0xed, 0x90, 0xc3,
	};
	uint64_t r[4][2];
	unsigned int k = 0;

	memset(code, 0xcc, sizeof(code));
	memcpy(code, leaves, sizeof(leaves));
	code[0x08] = b0;
	code[0x09] = b1;
	if (gi_loop_body(read_code, NULL, FN, FN + sizeof(leaves), FN, 0, labels, n, r, 4, &k) != 0)
		return -1;
	*first = k ? r[0][0] - FN : 0;
	return (int)k;
}

/*
 * The static keys' sites: gi_jump_labels reads them from a __jump_table (16-byte entries, code
 * and target relative to their own fields), and gi_loop_body takes each as both a jump to its
 * target and a fall-through, whatever the image holds there: a nop that may jump to the
 * loop's way out, a jump that may fall into the loop's bottom. None there: a nop is a nop. A
 * site inside an instruction: no body.
 */
static int test_jump_labels(void)
{
	enum { TABLE = 0x800 };
	struct ksym_entry e[3] = { { FN, 't', strdup("f") },
				   { FN + TABLE, 'D', strdup("__start___jump_table") },
				   { FN + TABLE + 32, 'D', strdup("__stop___jump_table") } };
	struct symtab *st = symtab_of(e, 3);
	struct gi_jump_label l[2];
	uint64_t first = 9;
	size_t n = 9;
	int32_t rel;

	ASSERT_TRUE(st != NULL);
	memset(code, 0xcc, sizeof(code));
	rel = (int32_t)(0x08 - TABLE); /* the site at FN + 8 */
	memcpy(code + TABLE, &rel, 4);
	rel = (int32_t)(0x14 - (TABLE + 4)); /* jumping to FN + 0x14 */
	memcpy(code + TABLE + 4, &rel, 4);
	rel = (int32_t)(0x100 - (TABLE + 16)); /* another site, at FN + 0x100 */
	memcpy(code + TABLE + 16, &rel, 4);
	ASSERT_EQ_INT(gi_jump_labels(st, read_code, NULL, FN, FN + 0x20, l, 2, &n), 0);
	ASSERT_EQ_INT((int)n, 1);
	ASSERT_EQ_U64(l[0].code, FN + 0x08);
	ASSERT_EQ_U64(l[0].target, FN + 0x14);
	ASSERT_EQ_INT(gi_jump_labels(st, read_code, NULL, FN, FN + 0x200, l, 1, &n), -E2BIG);
	ASSERT_EQ_INT(gi_jump_labels(st, read_code, NULL, FN + 0x20, FN + 0x40, l, 2, &n), 0);
	ASSERT_EQ_INT((int)n, 0);
	symtab_free(st);
	/* a table that is not whole entries; no table */
	{
		struct ksym_entry e2[3] = { { FN, 't', strdup("f") },
					    { FN + TABLE, 'D', strdup("__start___jump_table") },
					    { FN + TABLE + 24, 'D', strdup("__stop___jump_table") } };

		st = symtab_of(e2, 3);
	}
	ASSERT_TRUE(st != NULL);
	ASSERT_EQ_INT(gi_jump_labels(st, read_code, NULL, FN, FN + 0x20, l, 2, &n), -EBADMSG);
	symtab_free(st);
	st = symtab_one("f"); /* no __jump_table */
	ASSERT_TRUE(st != NULL);
	ASSERT_EQ_INT(gi_jump_labels(st, read_code, NULL, FN, FN + 0x20, l, 2, &n), -ENOENT);
	symtab_free(st);

	/* `xchg %ax,%ax` at 8: a site jumping to the return, so the head may leave */
	l[0].code = FN + 0x08;
	l[0].target = FN + 0x14;
	ASSERT_EQ_INT(body_with_site(0x66, 0x90, l, 1, &first), 1);
	ASSERT_EQ_U64(first, 0x0a);
	/* ... no site there (the sites known): a nop, from the head to the cli */
	ASSERT_EQ_INT(body_with_site(0x66, 0x90, l, 0, &first), 1);
	ASSERT_EQ_U64(first, 0);
	/* ... a site inside an instruction: the decode is not the kernel's, no body */
	l[1].code = FN + 0x07;
	l[1].target = FN + 0x14;
	ASSERT_EQ_INT(body_with_site(0x66, 0x90, l, 2, &first), -1);
	/* `jmp 0x14` at 8 in the image: the head never reaches the cli, no body; as a site that
	 * may fall through, the cli is reached and is the body */
	ASSERT_EQ_INT(body_with_site(0xeb, 0x0a, NULL, 0, &first), 0);
	ASSERT_EQ_INT(body_with_site(0xeb, 0x0a, l, 1, &first), 1);
	ASSERT_EQ_U64(first, 0x0a);
	return TEST_OK;
}

int main(void)
{
	static const struct test_case tests[] = {
		{ "a loop's body: not the code between that is not the loop's", test_loop_body },
		{ "the static keys' sites: both edges, from __jump_table", test_jump_labels },
	};

	return test_run_all(tests, sizeof(tests) / sizeof(tests[0]));
}
