// SPDX-License-Identifier: MIT
// Unit tests of guestinfo/exitwork.c: the exit-work loop and its clear of TIF_NOTIFY_RESUME
// found in code bytes. The fixture is exit_to_user_mode_prepare of our 6.1 test kernel (the
// generic entry code with exit_to_user_mode_loop inlined), as objdump shows it; the negative
// cases are the same bytes with the sti or the clear changed; the copies an exit path holds
// inlined (6.12); the exit tail from a call of the exit function. The loop's body on its own:
// test-loopbody.c.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "codefixture.h"
#include "gi_internal.h"
#include "kimage_internal.h"
#include "oneloop.h"
#include "test.h"

static const uint8_t prepare61[] = {
	0x55, 0x48, 0x89, 0xe5, 0x41, 0x55, 0x41, 0x54, 0x65, 0x4c, 0x8b, 0x24, 0x25, 0x00, 0xac,
	0x01, 0x00, 0x53, 0x49, 0x8b, 0x1c, 0x24, 0xf7, 0xc3, 0x0e, 0x30, 0x02, 0x00, 0x74, 0x50,
	0x49, 0x89, 0xfd, 0xfb, 0xf6, 0xc3, 0x08, 0x74, 0x05, 0xe8, 0xec, 0x67, 0x1a, 0x00, 0xf7,
	0xc3, 0x04, 0x00, 0x02, 0x00, 0x74, 0x08, 0x4c, 0x89, 0xef, 0xe8, 0x15, 0xbf, 0xf9, 0xff,
	0x80, 0xe3, 0x02, 0x74, 0x18, 0xf0, 0x41, 0x80, 0x24, 0x24, 0xfd, 0x49, 0x8b, 0x84, 0x24,
	0x00, 0x06, 0x00, 0x00, 0x48, 0x85, 0xc0, 0x74, 0x05, 0xe8, 0xe0, 0x0e, 0xfd, 0xff, 0xfa,
	0x65, 0x48, 0x8b, 0x04, 0x25, 0x00, 0xac, 0x01, 0x00, 0x48, 0x8b, 0x18, 0xf7, 0xc3, 0x0e,
	0x30, 0x02, 0x00, 0x75, 0xb3, 0x0f, 0xba, 0xe3, 0x0e, 0x73, 0x05, 0xe8, 0x23, 0x22, 0xfa,
	0xff, 0xe9, 0xd6, 0xac, 0xa7, 0x00, 0x65, 0x8a, 0x05, 0xac, 0x4a, 0xfa, 0x7e, 0x84, 0xc0,
	0x74, 0x1d, 0x48, 0x8b, 0x05, 0x69, 0x15, 0x85, 0x00, 0xb9, 0x49, 0x00, 0x00, 0x00, 0x48,
	0x89, 0xc2, 0x48, 0xc1, 0xea, 0x20, 0x90, 0x90, 0x65, 0xc6, 0x05, 0x8b, 0x4a, 0xfa, 0x7e,
	0x00, 0x5b, 0x41, 0x5c, 0x41, 0x5d, 0x5d, 0xc3,
};

/* Debian's stock 6.1 (6.1.0-57-amd64, CONFIG_PARAVIRT_XXL): its exit_to_user_mode_prepare as
 * objdump shows it in the image, where the loop's head calls pv_ops.irq.irq_enable (at
 * 0xffffffff81146a98: ff 15, through DEB_PV_ENABLE) and its bottom pv_ops.irq.irq_disable
 * (0xffffffff81146ace, DEB_PV_DISABLE): the kernel patches them into sti and cli at boot. */
#define FN_DEB 0xffffffff811469d0ull
#define DEB_PV_ENABLE 0xffffffff82a3b780ull  /* pv_ops + 0x100 */
#define DEB_PV_DISABLE 0xffffffff82a3b778ull /* pv_ops + 0xf8 */
static const uint8_t prepare61_debian[] = {
	0xe8, 0x7b, 0xfc, 0xf2, 0xff, 0x41, 0x54, 0x49, 0x89, 0xfc, 0x55, 0x53, 0x0f, 0x1f, 0x44,
	0x00, 0x00, 0x65, 0x48, 0x8b, 0x2c, 0x25, 0x80, 0xfb, 0x01, 0x00, 0x48, 0x8b, 0x5d, 0x00,
	0xf7, 0xc3, 0x0e, 0x30, 0x02, 0x00, 0x0f, 0x85, 0x9e, 0x00, 0x00, 0x00, 0xf6, 0xc7, 0x08,
	0x0f, 0x85, 0x15, 0x01, 0x00, 0x00, 0xf7, 0xc3, 0x00, 0x00, 0x40, 0x00, 0x0f, 0x85, 0x1a,
	0x01, 0x00, 0x00, 0xe8, 0x4c, 0x9d, 0xef, 0xff, 0x80, 0xe7, 0x40, 0x0f, 0x85, 0x20, 0x01,
	0x00, 0x00, 0x65, 0x48, 0x8b, 0x04, 0x25, 0x80, 0xfb, 0x01, 0x00, 0x83, 0x60, 0x10, 0xf9,
	0x66, 0x90, 0x65, 0x48, 0x8b, 0x34, 0x25, 0x80, 0xfb, 0x01, 0x00, 0x8b, 0x8e, 0x78, 0x14,
	0x00, 0x00, 0xc1, 0xc9, 0x05, 0x0f, 0x31, 0x31, 0xc1, 0x89, 0x8e, 0x78, 0x14, 0x00, 0x00,
	0xe9, 0x1d, 0x2a, 0xfa, 0x01, 0x65, 0x8a, 0x05, 0x3c, 0x91, 0xed, 0x7e, 0x84, 0xc0, 0x0f,
	0x85, 0x6c, 0x01, 0x00, 0x00, 0x5b, 0x5d, 0x41, 0x5c, 0xe9, 0xcb, 0xb2, 0xcb, 0x00, 0x80,
	0x3d, 0xf4, 0xfd, 0xe8, 0x02, 0x00, 0x74, 0x1a, 0x65, 0x8b, 0x05, 0x6b, 0x2f, 0xed, 0x7e,
	0x48, 0x8b, 0x15, 0xec, 0xfd, 0xe8, 0x02, 0x89, 0xc0, 0x48, 0x0f, 0xa3, 0x02, 0x0f, 0x82,
	0x66, 0x01, 0x00, 0x00, 0x48, 0x8b, 0x5d, 0x00, 0xf7, 0xc3, 0x0e, 0x30, 0x02, 0x00, 0x0f,
	0x84, 0x62, 0xff, 0xff, 0xff, 0xff, 0x15, 0xe2, 0x4c, 0x8f, 0x01, 0xf6, 0xc3, 0x08, 0x0f,
	0x85, 0xa0, 0x00, 0x00, 0x00, 0xf6, 0xc7, 0x10, 0x0f, 0x85, 0xa5, 0x00, 0x00, 0x00, 0xf6,
	0xc7, 0x20, 0x0f, 0x85, 0xad, 0x00, 0x00, 0x00, 0xf7, 0xc3, 0x04, 0x00, 0x02, 0x00, 0x0f,
	0x85, 0xb5, 0x00, 0x00, 0x00, 0x83, 0xe3, 0x02, 0x0f, 0x85, 0xbd, 0x00, 0x00, 0x00, 0xff,
	0x15, 0xa4, 0x4c, 0x8f, 0x01, 0x66, 0x90, 0x48, 0x8b, 0x5d, 0x00, 0xf7, 0xc3, 0x0e, 0x30,
	0x02, 0x00, 0x75, 0xb6, 0xe9, 0x13, 0xff, 0xff, 0xff, 0x80, 0x3d, 0x72, 0xfd, 0xe8, 0x02,
	0x00, 0x0f, 0x84, 0xed, 0xfe, 0xff, 0xff, 0x65, 0x8b, 0x05, 0xe5, 0x2e, 0xed, 0x7e, 0x48,
	0x8b, 0x15, 0x66, 0xfd, 0xe8, 0x02, 0x89, 0xc0, 0x48, 0x0f, 0xa3, 0x02, 0x0f, 0x83, 0xd3,
	0xfe, 0xff, 0xff, 0xe8, 0x2d, 0xf1, 0xfe, 0xff, 0xe9, 0xc9, 0xfe, 0xff, 0xff, 0xe8, 0x23,
	0x58, 0x13, 0x00, 0xf7, 0xc3, 0x00, 0x00, 0x40, 0x00, 0x0f, 0x84, 0xe6, 0xfe, 0xff, 0xff,
	0xff, 0x15, 0xf1, 0x4b, 0x8f, 0x01, 0xe8, 0x2c, 0x9c, 0xef, 0xff, 0x80, 0xe7, 0x40, 0x0f,
	0x84, 0xe0, 0xfe, 0xff, 0xff, 0xe8, 0x0e, 0xa1, 0xef, 0xff, 0xe9, 0xd6, 0xfe, 0xff, 0xff,
	0xe8, 0x84, 0xc2, 0x90, 0x00, 0xf6, 0xc7, 0x10, 0x0f, 0x84, 0x5b, 0xff, 0xff, 0xff, 0x4c,
	0x89, 0xe7, 0xe8, 0xb3, 0x49, 0x13, 0x00, 0xf6, 0xc7, 0x20, 0x0f, 0x84, 0x53, 0xff, 0xff,
	0xff, 0x48, 0x89, 0xef, 0xe8, 0xa2, 0xa6, 0xff, 0xff, 0xf7, 0xc3, 0x04, 0x00, 0x02, 0x00,
	0x0f, 0x84, 0x4b, 0xff, 0xff, 0xff, 0x4c, 0x89, 0xe7, 0xe8, 0x9e, 0xb0, 0xee, 0xff, 0x83,
	0xe3, 0x02, 0x0f, 0x84, 0x43, 0xff, 0xff, 0xff, 0xf0, 0x80, 0x65, 0x00, 0xfd, 0x48, 0x8b,
	0x85, 0x58, 0x0c, 0x00, 0x00, 0x48, 0x85, 0xc0, 0x75, 0x6c, 0xbf, 0xc0, 0x0c, 0x00, 0x00,
	0xe8, 0x0a, 0x71, 0x20, 0x00, 0xe8, 0xc5, 0x91, 0x3b, 0x00, 0x48, 0x83, 0xbd, 0x48, 0x0f,
	0x00, 0x00, 0x00, 0x0f, 0x84, 0x15, 0xff, 0xff, 0xff, 0x4c, 0x89, 0xe6, 0x31, 0xff, 0xe8,
	0x7d, 0x84, 0x13, 0x00, 0xe9, 0x06, 0xff, 0xff, 0xff, 0x48, 0x8b, 0x05, 0xc1, 0x5e, 0x2d,
	0x01, 0xb9, 0x49, 0x00, 0x00, 0x00, 0x48, 0x89, 0xc2, 0x48, 0xc1, 0xea, 0x20, 0x90, 0x90,
	0x65, 0xc6, 0x05, 0xab, 0x8f, 0xed, 0x7e, 0x00, 0x5b, 0x5d, 0x41, 0x5c, 0xe9, 0x42, 0xb1,
	0xcb, 0x00, 0xe8, 0x4d, 0xf0, 0xfe, 0xff, 0x48, 0x8b, 0x5d, 0x00, 0xf7, 0xc3, 0x0e, 0x30,
	0x02, 0x00, 0x0f, 0x85, 0x95, 0xfe, 0xff, 0xff, 0xe9, 0xf2, 0xfd, 0xff, 0xff, 0xe8, 0x93,
	0x37, 0xf8, 0xff, 0xeb, 0x8d, 0x90,
};

/* Where the fixtures put the generic entry's two exit paths (offsets from the function's start,
 * after its bytes): each reaches the loop's function (put_paths). */
#define SYSCALL_PATH 0x300
#define IRQ_PATH 0x310

/* The exit paths into @c (a fixture's 4 KiB): syscall_exit_to_user_mode calls the function at
 * offset @to and returns; irqentry_exit_to_user_mode jumps to it (a tail call). */
static void put_paths(uint8_t *c, size_t to)
{
	int32_t rel = (int32_t)((int64_t)to - (int64_t)(SYSCALL_PATH + 5));

	c[SYSCALL_PATH] = 0xe8;
	memcpy(c + SYSCALL_PATH + 1, &rel, 4);
	c[SYSCALL_PATH + 5] = 0xc3;
	rel = (int32_t)((int64_t)to - (int64_t)(IRQ_PATH + 5));
	c[IRQ_PATH] = 0xe9;
	memcpy(c + IRQ_PATH + 1, &rel, 4);
}

/* code[]: our 6.1's function at FN, int3 after it, and the exit paths that call it. */
static void load_prepare61(void)
{
	memset(code, 0xcc, sizeof(code));
	memcpy(code, prepare61, sizeof(prepare61));
	put_paths(code, 0);
}

static struct symtab *symbols(void)
{
	struct ksym_entry e[5] = {
		{ FN, 't', strdup("exit_to_user_mode_prepare") },
		{ FN + sizeof(prepare61), 'T', strdup("syscall_exit_to_user_mode_work") },
		{ FN + SYSCALL_PATH, 'T', strdup("syscall_exit_to_user_mode") },
		{ FN + IRQ_PATH, 'T', strdup("irqentry_exit_to_user_mode") },
		{ FN + sizeof(code) - 16, 'T', strdup("after") },
	};

	return symtab_of(e, 5);
}

static int test_found(void)
{
	struct symtab *st = symbols();
	struct gi_exit_work w;

	ASSERT_TRUE(st != NULL);
	load_prepare61();
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), 0);
	ASSERT_EQ_U64(w.func_start, FN);
	ASSERT_EQ_U64(w.func_end, FN + sizeof(prepare61));
	ASSERT_EQ_U64(w.head, FN + 0x21);        /* sti */
	ASSERT_EQ_U64(w.loop_end, FN + 0x6e);    /* after jne head */
	ASSERT_EQ_U64(w.loop_cli, FN + 0x59);    /* cli before the flags are read again */
	ASSERT_EQ_U64(w.clear, FN + 0x41);       /* lock and byte [r12], 0xfd */
	ASSERT_EQ_U64(w.clear_end, FN + 0x47);
	ASSERT_EQ_INT(w.clear_base, 12 + 1);     /* r12 */
	ASSERT_EQ_U64((uint64_t)w.clear_disp, 0);
	ASSERT_EQ_INT((int)w.clear_size, 1);
	ASSERT_EQ_U64(w.clear_imm & 0xff, 0xfd);
	ASSERT_EQ_INT((int)w.notify_bit, 1);
	ASSERT_TRUE(!memcmp(w.clear_bytes, prepare61 + 0x41, 6));
	symtab_free(st);
	return TEST_OK;
}

/* @ctx's 4 KiB at FN_DEB: the function, int3 after it. */
static int read_debian(void *ctx, uint64_t kva, void *dst, size_t len)
{
	const uint8_t *bytes = ctx;

	if (kva < FN_DEB || kva - FN_DEB + len > sizeof(code))
		return -EFAULT;
	memcpy(dst, bytes + (kva - FN_DEB), len);
	return 0;
}

/* A paravirt image: found where the pv_ops slots are known, and only there. */
static int test_found_paravirt(void)
{
	struct ksym_entry e[4] = {
		{ FN_DEB, 't', strdup("exit_to_user_mode_prepare") },
		{ FN_DEB + sizeof(prepare61_debian), 'T', strdup("next") },
		{ FN_DEB + SYSCALL_PATH, 'T', strdup("syscall_exit_to_user_mode") },
		{ FN_DEB + IRQ_PATH, 'T', strdup("irqentry_exit_to_user_mode") },
	};
	struct symtab *st = symtab_of(e, 4);
	const struct gi_pv_irq pv = { DEB_PV_ENABLE, DEB_PV_DISABLE };
	struct gi_pv_irq other = pv;
	static uint8_t bytes[sizeof(code)];
	struct gi_exit_work w;

	ASSERT_TRUE(st != NULL);
	memset(bytes, 0xcc, sizeof(bytes));
	memcpy(bytes, prepare61_debian, sizeof(prepare61_debian));
	put_paths(bytes, 0);
	ASSERT_EQ_INT(one_loop(st, read_debian, bytes, &pv, &w), 0);
	ASSERT_EQ_U64(w.func_start, FN_DEB);
	ASSERT_EQ_U64(w.head, FN_DEB + 0xc8);     /* call *pv_ops.irq.irq_enable */
	ASSERT_EQ_U64(w.loop_end, FN_DEB + 0x233); /* after the last jne head */
	ASSERT_EQ_U64(w.loop_cli, FN_DEB + 0xfe); /* call *pv_ops.irq.irq_disable */
	ASSERT_EQ_U64(w.clear, FN_DEB + 0x1bb);   /* lock and byte [rbp], 0xfd */
	ASSERT_EQ_U64(w.clear_end, FN_DEB + 0x1c0);
	ASSERT_EQ_INT(w.clear_base, 5 + 1);       /* rbp */
	ASSERT_EQ_INT((int)w.clear_size, 1);
	ASSERT_EQ_U64(w.clear_imm & 0xff, 0xfd);
	/* without the slots (no BTF), or with the wrong one: not a loop hvprof knows */
	ASSERT_EQ_INT(one_loop(st, read_debian, bytes, NULL, &w), -ENOENT);
	other.enable += 8;
	ASSERT_EQ_INT(one_loop(st, read_debian, bytes, &other, &w), -ENOENT);
	/* the slot of irq_disable unknown: found, with no cli for the tail's rule */
	other = (struct gi_pv_irq){ DEB_PV_ENABLE, 0 };
	ASSERT_EQ_INT(one_loop(st, read_debian, bytes, &other, &w), 0);
	ASSERT_EQ_U64(w.loop_cli, 0);
	/* a call through the slot that is not ff 15 (ff 14 25: absolute): not taken */
	bytes[0xc8 + 1] = 0x14;
	ASSERT_EQ_INT(one_loop(st, read_debian, bytes, &pv, &w), -ENOENT);
	symtab_free(st);
	return TEST_OK;
}

static int test_not_found(void)
{
	struct symtab *st = symbols();
	struct gi_exit_work w;

	ASSERT_TRUE(st != NULL);
	/* the loop head is a call (a paravirt irq enable), not sti */
	load_prepare61();
	code[0x21] = 0x90;
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), -ENOENT);
	/* the loop clears another bit (0xfb: bit 2) */
	memcpy(code, prepare61, sizeof(prepare61));
	code[0x46] = 0xfb;
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), -ENOENT);
	/* no such function */
	ASSERT_EQ_INT(one_loop(NULL, read_code, NULL, NULL, &w), -EINVAL);
	symtab_free(st);
	return TEST_OK;
}

/* Symbols exit_to_user_mode_prepare at FN and schedule at @callee; NULL on failure. */
static struct symtab *caller_and_callee(uint64_t callee)
{
	struct ksym_entry e[2] = { { FN, 't', strdup("exit_to_user_mode_prepare") },
				   { callee, 'T', strdup("schedule") } };

	return symtab_of(e, 2);
}

/* The tail after the call of the exit function: from the call instruction itself. */
static int test_tail_after_call(void)
{
	struct symtab *st = symbols();
	uint64_t a, b;

	ASSERT_TRUE(st != NULL);
	load_prepare61();
	/* in the fixture, the call at +0x27 targets FN + 0x2c + 0x1a67ec (schedule) */
	{
		struct symtab *st2 = caller_and_callee(FN + 0x2c + 0x1a67ec);

		ASSERT_TRUE(st2 != NULL);
		ASSERT_EQ_INT(gi_tail_after_call(st2, read_code, NULL, "exit_to_user_mode_prepare",
						 "schedule", &a, &b), 0);
		ASSERT_EQ_U64(a, FN + 0x27);
		ASSERT_TRUE(b > a);
		ASSERT_EQ_INT(gi_tail_after_call(st2, read_code, NULL, "exit_to_user_mode_prepare",
						 "nowhere", &a, &b), -ENOENT);
		symtab_free(st2);
	}
	/* two calls of the callee (a fast and a slow path): from the first, whose return
	 * address is past the read as much as the second's */
	{
		static const uint8_t two_calls[] = { 0x55,                         /* push rbp */
						     0xe8, 0x00, 0x01, 0x00, 0x00, /* call +0x106 */
						     0xe8, 0xfb, 0x00, 0x00, 0x00, /* call +0x106 */
						     0x5d, 0xc3 };                 /* pop; ret */
		struct symtab *st2 = caller_and_callee(FN + 0x106);

		ASSERT_TRUE(st2 != NULL);
		memset(code, 0xcc, sizeof(code));
		memcpy(code, two_calls, sizeof(two_calls));
		ASSERT_EQ_INT(gi_tail_after_call(st2, read_code, NULL, "exit_to_user_mode_prepare",
						 "schedule", &a, &b), 0);
		ASSERT_EQ_U64(a, FN + 1);
		ASSERT_TRUE(b >= FN + sizeof(two_calls));
		symtab_free(st2);
	}
	symtab_free(st);
	return TEST_OK;
}

/* A symbol table of exit_to_user_mode_prepare at FN and @names[0..@n) at @at[] (offsets). */
static struct symtab *with_paths(const char *const *names, const size_t *at, size_t n)
{
	struct ksym_entry e[6] = { { FN, 't', strdup("exit_to_user_mode_prepare") },
				   { FN + 0x280, 'T', strdup("after") } };

	for (size_t i = 0; i < n && i < 4; i++)
		e[2 + i] = (struct ksym_entry){ FN + at[i], 'T', strdup(names[i]) };
	return symtab_of(e, 2 + (n < 4 ? n : 4));
}

/*
 * The loop must be on every exit path: syscall_exit_to_user_mode and irqentry_exit_to_user_mode
 * call (or jump to) the loop's function, as both do on 6.1, or reach it through
 * exit_to_user_mode_prepare; where one holds an inlined copy of its own instead (6.12:
 * exit_to_user_mode_loop's out-of-line copy is called by nothing), a breakpoint on this copy
 * would miss its returns, and with no path known nothing says the copy is used: -ENOTSUP. A path
 * with no symbol (inlined into its caller) is looked for in do_syscall_64 or irqentry_exit.
 */
static int test_every_path(void)
{
	static const char *const paths[2] = { "syscall_exit_to_user_mode",
					      "irqentry_exit_to_user_mode" };
	static const char *const callers[2] = { "do_syscall_64", "irqentry_exit" };
	static const size_t at[2] = { SYSCALL_PATH, IRQ_PATH };
	struct symtab *st = symbols();
	struct gi_exit_work w;

	ASSERT_TRUE(st != NULL);
	load_prepare61();
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), 0);
	ASSERT_EQ_U64(w.clear, FN + 0x41);
	/* the interrupt path calls something else (inside the function, not its start) */
	put_call(IRQ_PATH, 0x21);
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), -ENOTSUP);
	ASSERT_EQ_U64(w.head, 0);
	ASSERT_EQ_U64(w.clear, 0);
	/* ... or the system-call path does */
	put_paths(code, 0);
	put_call(SYSCALL_PATH, 0x21);
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), -ENOTSUP);
	symtab_free(st);

	/* no exit path in the symbols at all: nothing says this copy is the one used */
	put_paths(code, 0);
	st = with_paths(NULL, NULL, 0);
	ASSERT_TRUE(st != NULL);
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), -ENOTSUP);
	symtab_free(st);
	/* the paths inlined into their callers, which call the function: taken */
	st = with_paths(callers, at, 2);
	ASSERT_TRUE(st != NULL);
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), 0);
	symtab_free(st);
	/* one path named, the other one's caller: both checked (the caller does not call it) */
	{
		const char *const mixed[2] = { paths[0], callers[1] };

		put_call(IRQ_PATH, 0x21);
		st = with_paths(mixed, at, 2);
		ASSERT_TRUE(st != NULL);
		ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), -ENOTSUP);
		symtab_free(st);
	}
	return TEST_OK;
}

/*
 * The loop out of line in exit_to_user_mode_loop, reached through exit_to_user_mode_prepare
 * (paths -> prepare -> loop, as many 5.x-6.x kernels have it): taken; not where prepare does not
 * call it.
 */
static int test_path_through_prepare(void)
{
	enum { PREPARE = 0x240 };
	struct ksym_entry e[5] = { { FN, 't', strdup("exit_to_user_mode_loop") },
				   { FN + PREPARE, 't', strdup("exit_to_user_mode_prepare") },
				   { FN + SYSCALL_PATH, 'T', strdup("syscall_exit_to_user_mode") },
				   { FN + IRQ_PATH, 'T', strdup("irqentry_exit_to_user_mode") },
				   { FN + 0x320, 'T', strdup("after") } };
	struct symtab *st = symtab_of(e, 5);
	struct gi_exit_work w;

	ASSERT_TRUE(st != NULL);
	load_prepare61();
	put_call(PREPARE, 0); /* prepare: call the loop; ret */
	code[PREPARE + 5] = 0xc3;
	put_paths(code, PREPARE);
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), 0);
	ASSERT_EQ_U64(w.func_start, FN);
	ASSERT_EQ_U64(w.clear, FN + 0x41);
	/* prepare calls something else: the loop's copy is reached by nothing */
	put_call(PREPARE, 0x21);
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), -ENOTSUP);
	symtab_free(st);
	return TEST_OK;
}

/* code[]: our 6.1's loop bytes at FN and again at FN + @copy, int3 elsewhere; the exit paths
 * at SYSCALL_PATH and IRQ_PATH call and jump to FN (put_paths). */
static void load_two_copies(size_t copy)
{
	load_prepare61();
	memcpy(code + copy, prepare61, sizeof(prepare61));
}

/*
 * gi_exit_work_loops, the loops hvprof traps: each exit path reaches the loop's function (listed
 * once) or holds a loop of its own (6.12: each path its inlined copy); a path with neither
 * refuses them all. The irq disable before a function's first read of the flags (prep_cli):
 * only a cli followed, within a few instructions and no branch, by the test of the flag and
 * the way into the loop.
 */
static int test_loops(void)
{
	enum { COPY = 0x200 };
	struct gi_exit_work w[GI_EW_COPIES];
	struct symtab *st;
	size_t n = 9;

	/* each path holds its own copy (named as the paths, no loop function) */
	{
		struct ksym_entry e[3] = { { FN, 'T', strdup("syscall_exit_to_user_mode") },
					   { FN + COPY, 'T', strdup("irqentry_exit_to_user_mode") },
					   { FN + 0x2f0, 'T', strdup("after") } };

		st = symtab_of(e, 3);
	}
	ASSERT_TRUE(st != NULL);
	load_two_copies(COPY);
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), 0);
	ASSERT_EQ_INT((int)n, 2);
	for (size_t k = 0; k < 2; k++) {
		uint64_t at = FN + k * COPY;

		ASSERT_EQ_U64(w[k].func_start, at);
		ASSERT_EQ_U64(w[k].head, at + 0x21);
		ASSERT_EQ_U64(w[k].clear, at + 0x41);
		ASSERT_EQ_INT(w[k].clear_base, 12 + 1);
		ASSERT_EQ_U64(w[k].prep_cli, 0); /* 6.1's reads its flags with no cli before */
		ASSERT_TRUE(w[k].inlined);       /* each an exit path's own */
	}
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w[0]), -ENOTSUP);
	/* a cli before the second copy's read (`push rbx` made one): test, je over the loop,
	 * then a mov, and the head */
	code[COPY + 0x11] = 0xfa;
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), 0);
	ASSERT_EQ_U64(w[0].prep_cli, 0);
	ASSERT_EQ_U64(w[1].prep_cli, FN + COPY + 0x11);
	/* ... not when the code before it is not straight from the function's start (`push
	 * %r13` made `jne .+0x62`, past the cli) */
	code[COPY + 0x4] = 0x75;
	code[COPY + 0x5] = 0x60;
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), 0);
	ASSERT_EQ_U64(w[1].prep_cli, 0);
	code[COPY + 0x4] = 0x41;
	code[COPY + 0x5] = 0x55;
	/* ... nor when a jump lands on it (the test's je aimed back at the cli: a loop's bottom
	 * placed before its head has this shape, reached by a jump) */
	code[COPY + 0x1d] = (uint8_t)(0x11 - 0x1e);
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), 0);
	ASSERT_EQ_U64(w[1].prep_cli, 0);
	code[COPY + 0x1d] = 0x50;
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), 0);
	ASSERT_EQ_U64(w[1].prep_cli, FN + COPY + 0x11);
	/* ... not when a return comes between it and the test (`mov (%r12),%rbx` made
	 * `ret; mov (%rsp),%ebx`) */
	code[COPY + 0x12] = 0xc3;
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), 0);
	ASSERT_EQ_U64(w[1].prep_cli, 0);
	ASSERT_EQ_U64(w[1].clear, FN + COPY + 0x41);
	/* ... nor one too far from the head: 6.1's first bytes, a cli in place of `push rbp`,
	 * nine instructions before the test's jump */
	load_two_copies(COPY);
	code[COPY] = 0xfa;
	code[COPY + 0x11] = 0x90;
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), 0);
	ASSERT_EQ_U64(w[1].prep_cli, 0);
	/* the second copy's clear gone (another bit): that path has no loop, so none is taken */
	load_two_copies(COPY);
	code[COPY + 0x46] = 0xfb;
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), -ENOTSUP);
	ASSERT_EQ_INT((int)n, 0);
	/* ... the first's gone, the second's there: still refused, not "no loop" */
	code[COPY + 0x46] = 0xfd;
	code[0x46] = 0xfb;
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), -ENOTSUP);
	/* ... neither: no loop anywhere */
	code[COPY + 0x46] = 0xfb;
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), -ENOENT);
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, NULL, &n), -EINVAL);
	symtab_free(st);

	/* one path calls the loop's function, the other holds a copy: both loops */
	{
		struct ksym_entry e[4] = { { FN, 't', strdup("exit_to_user_mode_prepare") },
					   { FN + COPY, 'T', strdup("irqentry_exit_to_user_mode") },
					   { FN + SYSCALL_PATH, 'T',
					     strdup("syscall_exit_to_user_mode") },
					   { FN + 0x3f0, 'T', strdup("after") } };

		st = symtab_of(e, 4);
	}
	ASSERT_TRUE(st != NULL);
	load_two_copies(COPY);
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), 0);
	ASSERT_EQ_INT((int)n, 2);
	ASSERT_EQ_U64(w[0].func_start, FN);
	ASSERT_EQ_U64(w[1].func_start, FN + COPY);
	ASSERT_TRUE(!w[0].inlined && w[1].inlined);
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w[0]), -ENOTSUP);
	symtab_free(st);

	/* both paths reach the function: that loop, once */
	st = symbols();
	ASSERT_TRUE(st != NULL);
	load_prepare61();
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), 0);
	ASSERT_EQ_INT((int)n, 1);
	ASSERT_EQ_U64(w[0].clear, FN + 0x41);
	/* ... one of them calls something else: refused */
	put_call(IRQ_PATH, 0x21);
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), -ENOTSUP);
	symtab_free(st);
	/* a loop function, but no exit path known: refused; nothing at all: none */
	st = with_paths(NULL, NULL, 0);
	ASSERT_TRUE(st != NULL);
	load_prepare61();
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), -ENOTSUP);
	code[0x46] = 0xfb;
	ASSERT_EQ_INT(gi_exit_work_loops(st, read_code, NULL, NULL, w, &n), -ENOENT);
	symtab_free(st);
	return TEST_OK;
}

/* Our 6.1's loop, its body found with it: from its head to its bottom's cli. */
static int test_body_61(void)
{
	struct symtab *st = symbols();
	struct gi_exit_work w;

	ASSERT_TRUE(st != NULL);
	load_prepare61();
	/* no __jump_table symbols: the sites not known, no body (all walked at once) */
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), 0);
	ASSERT_EQ_INT((int)w.n_body, 0);
	symtab_free(st);
	/* an empty table (a kernel without jump labels, ours) */
	{
		struct ksym_entry e[7] = {
			{ FN, 't', strdup("exit_to_user_mode_prepare") },
			{ FN + sizeof(prepare61), 'T',
			  strdup("syscall_exit_to_user_mode_work") },
			{ FN + SYSCALL_PATH, 'T', strdup("syscall_exit_to_user_mode") },
			{ FN + IRQ_PATH, 'T', strdup("irqentry_exit_to_user_mode") },
			{ FN + sizeof(code) - 16, 'T', strdup("after") },
			{ FN + sizeof(code) - 8, 'D', strdup("__start___jump_table") },
			{ FN + sizeof(code) - 8, 'D', strdup("__stop___jump_table") },
		};

		st = symtab_of(e, 7);
	}
	ASSERT_TRUE(st != NULL);
	ASSERT_EQ_INT(one_loop(st, read_code, NULL, NULL, &w), 0);
	symtab_free(st);
	for (unsigned int i = 0; i < w.n_body; i++)
		printf("# our 6.1's loop body [+0x%llx, +0x%llx) of [+0x%llx, +0x%llx), "
		       "last cli +0x%llx\n", (unsigned long long)(w.body[i][0] - FN),
		       (unsigned long long)(w.body[i][1] - FN),
		       (unsigned long long)(w.head - FN), (unsigned long long)(w.loop_end - FN),
		       (unsigned long long)(w.loop_cli - FN));
	ASSERT_EQ_INT((int)w.n_body, 1);
	ASSERT_EQ_U64(w.body[0][0], w.head);
	ASSERT_EQ_U64(w.body[0][1], w.loop_cli + 1);
	return TEST_OK;
}

int main(void)
{
	static const struct test_case tests[] = {
		{ "the 6.1 loop, its clear of TIF_NOTIFY_RESUME and its operand", test_found },
		{ "Debian's paravirt 6.1: the loop headed by a call of pv_ops.irq.irq_enable", test_found_paravirt },
		{ "no sti head, another bit cleared: not found", test_not_found },
		{ "the loop on every exit path, or not taken (6.12 inlines it)", test_every_path },
		{ "... reached through exit_to_user_mode_prepare", test_path_through_prepare },
		{ "the copies the exit paths hold inlined", test_loops },
		{ "our 6.1's loop body, with and without a __jump_table", test_body_61 },
		{ "the tail from a call of the exit function", test_tail_after_call },
	};

	return test_run_all(tests, sizeof(tests) / sizeof(tests[0]));
}
