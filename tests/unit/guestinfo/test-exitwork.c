// SPDX-License-Identifier: MIT
// Unit tests of guestinfo/exitwork.c: the exit-work loop and its clear of TIF_NOTIFY_RESUME
// found in code bytes. The fixture is exit_to_user_mode_prepare of our 6.1 test kernel (the
// generic entry code with exit_to_user_mode_loop inlined), as objdump shows it; the negative
// cases are the same bytes with the sti or the clear changed. Also the IDT handlers' code after
// their call of irqentry_exit (exitepilogue.c), on hand-assembled handlers, and the branch to
// the iretq that only returns to user mode take (iretuser.c), on our 6.1's and Debian's 6.12's
// bytes.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "gi_internal.h"
#include "kimage_internal.h"
#include "oneloop.h"
#include "test.h"

#define FN 0xffffffff810760dfull /* exit_to_user_mode_prepare */

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

static uint8_t code[4096];

/* The function's bytes at FN, int3 after them (the next function). */
static int read_code(void *ctx, uint64_t kva, void *dst, size_t len)
{
	if (kva < FN || kva - FN + len > sizeof(code))
		return -EFAULT;
	memcpy(dst, code + (kva - FN), len);
	return 0;
}

/* A symbol table of @e[0..@n) (their names strdup'd, freed here whatever happens), or NULL. */
static struct symtab *symtab_of(struct ksym_entry *e, size_t n)
{
	struct symtab *st = NULL;

	if (symtab_from_entries(e, n, &st) != 0)
		st = NULL;
	for (size_t i = 0; i < n; i++)
		free(e[i].name);
	return st;
}

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

/* call rel32 from @at to @target into code[] (offsets from FN) */
static void put_call(size_t at, size_t target)
{
	int32_t rel = (int32_t)((int64_t)target - (int64_t)(at + 5));

	code[at] = 0xe8;
	memcpy(code + at + 1, &rel, 4);
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
	/* our 6.1's loop: from its head to its bottom's cli */
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
	}
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
	st = symbols();
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

/*
 * Three handlers in a noinstr text at FN: exc_page_fault's epilogue straight after its call of
 * irqentry_exit; exc_int3's call of irqentry_exit_to_user_mode followed by a jump over its
 * kernel-mode path to the shared epilogue; a third that calls something else. The ranges start
 * after the call (a caller frame whose return address follows the call is inside it) and end
 * with the return.
 */
static int test_epilogues(void)
{
	enum { PF = 0, INT3 = 16, OTHER = 32, EXIT = 64, EXIT_USER = 65, END = 80 };
	struct ksym_entry e[7] = {
		{ FN + PF, 'T', strdup("exc_page_fault") },
		{ FN + INT3, 'T', strdup("exc_int3") },
		{ FN + OTHER, 'T', strdup("other_handler") },
		{ FN + EXIT, 'T', strdup("irqentry_exit") },
		{ FN + EXIT_USER, 'T', strdup("irqentry_exit_to_user_mode") },
		{ FN, 'T', strdup("__noinstr_text_start") },
		{ FN + END, 'T', strdup("__noinstr_text_end") },
	};
	static const uint8_t pf_tail[] = { 0x48, 0x83, 0xc4, 0x20, 0x5b, 0x5d, 0xc3 };
	struct symtab *st = symtab_of(e, 7);
	struct gi_spans sp;

	ASSERT_TRUE(st != NULL);
	memset(code, 0xcc, sizeof(code));
	code[PF] = 0x55; /* push rbp; call irqentry_exit; add rsp, 0x20; pop rbx; pop rbp; ret */
	put_call(PF + 1, EXIT);
	memcpy(code + PF + 6, pf_tail, sizeof(pf_tail));
	code[INT3] = 0x53; /* push rbx; call irqentry_exit_to_user_mode; jmp +5 */
	put_call(INT3 + 1, EXIT_USER);
	code[INT3 + 6] = 0xeb;
	code[INT3 + 7] = 0x05;
	put_call(INT3 + 8, OTHER); /* the kernel-mode path: not after the exit work */
	code[INT3 + 13] = 0x5b;    /* the shared epilogue: pop rbx; ret */
	code[INT3 + 14] = 0xc3;
	put_call(OTHER, INT3); /* other_handler calls no exit function */
	code[OTHER + 5] = 0xc3;
	code[EXIT] = 0xc3;
	code[EXIT_USER] = 0xc3;

	ASSERT_EQ_INT(gi_exit_epilogues_find(st, read_code, NULL, &sp), 0);
	ASSERT_EQ_U64(sp.n, 3);
	ASSERT_EQ_U64(sp.r[0][0], FN + PF + 6);
	ASSERT_EQ_U64(sp.r[0][1], FN + PF + 13);
	ASSERT_EQ_U64(sp.r[1][0], FN + INT3 + 6);
	ASSERT_EQ_U64(sp.r[1][1], FN + INT3 + 8);
	ASSERT_EQ_U64(sp.r[2][0], FN + INT3 + 13);
	ASSERT_EQ_U64(sp.r[2][1], FN + INT3 + 15);
	ASSERT_TRUE(gi_spans_has(&sp, FN + PF + 6) && gi_spans_has(&sp, FN + PF + 12));
	ASSERT_TRUE(!gi_spans_has(&sp, FN + PF + 5) && !gi_spans_has(&sp, FN + PF + 13));
	ASSERT_TRUE(!gi_spans_has(&sp, FN + INT3 + 8) && gi_spans_has(&sp, FN + INT3 + 14));
	ASSERT_TRUE(!gi_spans_has(&sp, FN + OTHER + 5) && !gi_spans_has(&sp, FN + EXIT));
	gi_spans_free(&sp);
	ASSERT_EQ_U64(sp.n, 0);
	ASSERT_TRUE(!gi_spans_has(&sp, FN + PF + 6));

	/* no call of an exit function: none */
	code[PF + 1] = code[INT3 + 1] = 0x90;
	ASSERT_EQ_INT(gi_exit_epilogues_find(st, read_code, NULL, &sp), -ENOENT);
	ASSERT_EQ_U64(sp.n, 0);
	symtab_free(st);
	/* no noinstr bounds */
	st = symbols();
	ASSERT_TRUE(st != NULL);
	ASSERT_EQ_INT(gi_exit_epilogues_find(st, read_code, NULL, &sp), -ENOENT);
	ASSERT_EQ_INT(gi_exit_epilogues_find(NULL, read_code, NULL, &sp), -EINVAL);
	symtab_free(st);
	return TEST_OK;
}

/* jmp rel8 from @at to @target in code[] (offsets from FN) */
static void put_jmp8(size_t at, size_t target)
{
	code[at] = 0xeb;
	code[at + 1] = (uint8_t)(int8_t)((int64_t)target - (int64_t)(at + 2));
}

/*
 * Where following stops: a jump into another function (not followed), a backward jump (not
 * followed), an undecodable byte before a call (decoding resynchronises), a jump within the
 * function (followed), straight-line code running into the next function (cut at its start),
 * and a third forward jump in a row (EPI_HOPS_MAX is 2). Touching spans are merged.
 */
static int test_epilogue_edges(void)
{
	enum { ONE = 0, TWO = 32, THREE = 51, FOUR = 64, FIVE = 72, EXIT = 96, END = 112 };
	struct ksym_entry e[8] = {
		{ FN + ONE, 'T', strdup("h_one") },     { FN + TWO, 'T', strdup("h_two") },
		{ FN + THREE, 'T', strdup("h_three") }, { FN + FOUR, 'T', strdup("h_four") },
		{ FN + FIVE, 'T', strdup("h_five") },   { FN + EXIT, 'T', strdup("irqentry_exit") },
		{ FN, 'T', strdup("__noinstr_text_start") },
		{ FN + END, 'T', strdup("__noinstr_text_end") },
	};
	static const uint64_t want[][2] = { { 5, 7 },   { 12, 14 }, { 20, 21 }, { 37, 39 },
					    { 40, 42 }, { 47, 51 }, { 77, 83 } };
	struct symtab *st = symtab_of(e, 8);
	struct gi_spans sp;

	ASSERT_TRUE(st != NULL);
	memset(code, 0xcc, sizeof(code));
	put_call(ONE, EXIT);
	put_jmp8(ONE + 5, FOUR + 1); /* into h_four: not followed */
	put_call(ONE + 7, EXIT);
	put_jmp8(ONE + 12, ONE);     /* backward: not followed */
	code[ONE + 14] = 0x06;       /* no instruction in 64-bit mode */
	put_call(ONE + 15, EXIT);
	code[ONE + 20] = 0xc3;
	put_call(TWO, EXIT);
	put_jmp8(TWO + 5, TWO + 8);  /* over an int3, within h_two: followed */
	code[TWO + 8] = 0x5b;
	code[TWO + 9] = 0xc3;
	put_call(TWO + 10, EXIT);
	memcpy(code + TWO + 15, (const uint8_t[]){ 0x48, 0x83, 0xc4, 0x08 }, 4); /* add rsp, 8 */
	code[THREE] = 0x55;          /* h_three: push rbp; ret */
	code[THREE + 1] = 0xc3;
	memcpy(code + FOUR, (const uint8_t[]){ 0x90, 0x90, 0xc3 }, 3);
	put_call(FIVE, EXIT);
	put_jmp8(FIVE + 5, FIVE + 7);
	put_jmp8(FIVE + 7, FIVE + 9);
	put_jmp8(FIVE + 9, FIVE + 11); /* the third hop: not followed */
	code[FIVE + 11] = 0xc3;
	code[EXIT] = 0xc3;

	ASSERT_EQ_INT(gi_exit_epilogues_find(st, read_code, NULL, &sp), 0);
	ASSERT_EQ_U64(sp.n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < sp.n; i++) {
		ASSERT_EQ_U64(sp.r[i][0], FN + want[i][0]);
		ASSERT_EQ_U64(sp.r[i][1], FN + want[i][1]);
	}
	ASSERT_TRUE(!gi_spans_has(&sp, FN + FOUR + 1) && !gi_spans_has(&sp, FN + THREE));
	ASSERT_TRUE(gi_spans_has(&sp, FN + 20) && !gi_spans_has(&sp, FN + 14));
	gi_spans_free(&sp);
	symtab_free(st);
	return TEST_OK;
}

/* ---- the branch to the iretq taken on returns to user mode only (iretuser.c) */

#define IU 0xffffffff81400e30ull /* swapgs_restore_regs_and_return_to_usermode */

/* Our 6.1 kernel's, to its iretq (at +0xa4): the trampoline copy, the jump over the CR3
 * switch, swapgs at +0x7b, a jump over VERW, and `jmp native_irq_return_iret` at +0x87. */
static const uint8_t ret61[] = {
	0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, 0x5d, 0x5b, 0x41, 0x5b, 0x41, 0x5a, 0x41,
	0x59, 0x41, 0x58, 0x58, 0x59, 0x5a, 0x5e, 0x48, 0x89, 0xe7, 0x65, 0x48, 0x8b, 0x24, 0x25,
	0x04, 0x60, 0x00, 0x00, 0xff, 0x77, 0x30, 0xff, 0x77, 0x28, 0xff, 0x77, 0x20, 0xff, 0x77,
	0x18, 0xff, 0x77, 0x10, 0xff, 0x37, 0x50, 0xeb, 0x43, 0x0f, 0x20, 0xdf, 0xeb, 0x34, 0x48,
	0x89, 0xf8, 0x48, 0x81, 0xe7, 0xff, 0x07, 0x00, 0x00, 0x65, 0x48, 0x0f, 0xa3, 0x3c, 0x25,
	0x56, 0xdc, 0x01, 0x00, 0x73, 0x0f, 0x65, 0x48, 0x0f, 0xb3, 0x3c, 0x25, 0x56, 0xdc, 0x01,
	0x00, 0x48, 0x89, 0xc7, 0xeb, 0x08, 0x48, 0x89, 0xc7, 0x48, 0x0f, 0xba, 0xef, 0x3f, 0x48,
	0x81, 0xcf, 0x00, 0x08, 0x00, 0x00, 0x48, 0x81, 0xcf, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22,
	0xdf, 0x58, 0x5f, 0x0f, 0x01, 0xf8, 0xeb, 0x07, 0x0f, 0x00, 0x2d, 0x49, 0xf1, 0xff, 0xff,
	0xeb, 0x1b, 0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, 0x5d, 0x5b, 0x41, 0x5b, 0x41,
	0x5a, 0x41, 0x59, 0x41, 0x58, 0x58, 0x59, 0x5a, 0x5e, 0x5f, 0x48, 0x83, 0xc4, 0x08, 0x48,
	0xcf,
};

/* Debian's 6.12 kernel's, to its iretq (at +0xf8): swapgs at +0x3f, VERW's NOPs, `testb $3,
 * 8(%rsp); jne .Lnative_iret; ud2` at +0x49, and the ESPFIX test before the iretq (+0xf1). */
static const uint8_t ret612[] = {
	0xeb, 0x18, 0xb9, 0x48, 0x00, 0x00, 0x00, 0x65, 0x48, 0x8b, 0x15, 0x51, 0xf0, 0x21, 0x7e, 0x83,
	0xe2, 0xfe, 0x89, 0xd0, 0x48, 0xc1, 0xea, 0x20, 0x0f, 0x30, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
	0x90, 0x90, 0x90, 0x90, 0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, 0x5d, 0x5b, 0x41, 0x5b,
	0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, 0x58, 0x59, 0x5a, 0x5e, 0x5f, 0x48, 0x83, 0xc4, 0x08, 0x0f,
	0x01, 0xf8, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xf6, 0x44, 0x24, 0x08, 0x03, 0x0f, 0x85,
	0x9d, 0x00, 0x00, 0x00, 0x0f, 0x0b, 0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, 0x5d, 0x5b,
	0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, 0x58, 0x59, 0x5a, 0x5e, 0x48, 0x89, 0xe7, 0x65,
	0x48, 0x8b, 0x25, 0x5d, 0x47, 0x20, 0x7e, 0xff, 0x77, 0x30, 0xff, 0x77, 0x28, 0xff, 0x77, 0x20,
	0xff, 0x77, 0x18, 0xff, 0x77, 0x10, 0xff, 0x37, 0x50, 0x0f, 0x20, 0xdf, 0xeb, 0x32, 0x48, 0x89,
	0xf8, 0x48, 0x81, 0xe7, 0xff, 0x07, 0x00, 0x00, 0x65, 0x48, 0x0f, 0xa3, 0x3d, 0xc5, 0x39, 0x23,
	0x7e, 0x73, 0x0e, 0x65, 0x48, 0x0f, 0xb3, 0x3d, 0xba, 0x39, 0x23, 0x7e, 0x48, 0x89, 0xc7, 0xeb,
	0x08, 0x48, 0x89, 0xc7, 0x48, 0x0f, 0xba, 0xef, 0x3f, 0x48, 0x81, 0xcf, 0x00, 0x08, 0x00, 0x00,
	0x48, 0x81, 0xcf, 0x00, 0x10, 0x00, 0x00, 0x0f, 0x22, 0xdf, 0x58, 0x5f, 0xe9, 0x6e, 0xff, 0xff,
	0xff, 0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, 0x5d, 0x5b, 0x41, 0x5b, 0x41, 0x5a, 0x41,
	0x59, 0x41, 0x58, 0x58, 0x59, 0x5a, 0x5e, 0x5f, 0x48, 0x83, 0xc4, 0x08, 0xe9, 0x00, 0x00, 0x00,
	0x00, 0xf6, 0x44, 0x24, 0x20, 0x04, 0x75, 0x02, 0x48, 0xcf
};

static uint8_t iu_code[512];

static int iu_read(void *ctx, uint64_t kva, void *dst, size_t len)
{
	(void)ctx;
	if (kva < IU || kva - IU + len > sizeof(iu_code))
		return -EFAULT;
	memcpy(dst, iu_code + (kva - IU), len);
	return 0;
}

static struct symtab *iu_symbols(void)
{
	struct ksym_entry e[2] = {
		{ IU, 'T', strdup("swapgs_restore_regs_and_return_to_usermode") },
		{ IU + sizeof(iu_code) - 16, 'T', strdup("after") },
	};

	return symtab_of(e, 2);
}

static void iu_load(const uint8_t *bytes, size_t n)
{
	memset(iu_code, 0xcc, sizeof(iu_code));
	memcpy(iu_code, bytes, n);
}

static int test_iret_user(void)
{
	static const uint8_t jmp[2] = { 0xeb, 0x1b }, jne[6] = { 0x0f, 0x85, 0x9d, 0, 0, 0 };
	struct symtab *st = iu_symbols();
	struct gi_branch b;

	ASSERT_TRUE(st != NULL);
	iu_load(ret61, sizeof(ret61));
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + 0xa4, &b), 0);
	ASSERT_EQ_U64(b.kva, IU + 0x87);
	ASSERT_EQ_U64(b.target, IU + 0xa4);
	ASSERT_EQ_INT(b.len, 2);
	ASSERT_EQ_INT(b.cond, GI_BRANCH_ALWAYS);
	ASSERT_TRUE(!memcmp(b.bytes, jmp, sizeof(jmp)));
	iu_load(ret612, sizeof(ret612));
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + 0xf8, &b), 0);
	ASSERT_EQ_U64(b.kva, IU + 0x4e);
	ASSERT_EQ_U64(b.target, IU + 0xf1);
	ASSERT_EQ_INT(b.len, 6);
	ASSERT_EQ_INT(b.cond, GI_BRANCH_NZ);
	ASSERT_TRUE(!memcmp(b.bytes, jne, sizeof(jne)));
	symtab_free(st);
	return TEST_OK;
}

static int test_iret_user_refused(void)
{
	struct symtab *st = iu_symbols();
	struct gi_branch b;

	ASSERT_TRUE(st != NULL);
	/* a register written after the swapgs: pop %rax where the jump over VERW was */
	iu_load(ret61, sizeof(ret61));
	iu_code[0x7e] = 0x58;
	iu_code[0x7f] = 0x90;
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + 0xa4, &b), -ENOENT);
	ASSERT_EQ_U64(b.kva, 0);
	/* a jump near the iretq, but to pops */
	iu_load(ret61, sizeof(ret61));
	iu_code[0x88] = 0x10;
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + 0xa4, &b), -ENOENT);
	/* a register written between the branch's target and the iretq (pop %rdi for the
	 * ESPFIX test) */
	iu_load(ret612, sizeof(ret612));
	memcpy(iu_code + 0xf1, (const uint8_t[]){ 0x5f, 0x90, 0x90, 0x90, 0x90 }, 5);
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + 0xf8, &b), -ENOENT);
	/* a jne whose fall-through is not the kernel's ud2; a je instead of the jne */
	iu_load(ret612, sizeof(ret612));
	memcpy(iu_code + 0x54, (const uint8_t[]){ 0x90, 0x90 }, 2);
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + 0xf8, &b), -ENOENT);
	iu_load(ret612, sizeof(ret612));
	iu_code[0x4f] = 0x84;
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + 0xf8, &b), -ENOENT);
	/* a conditional jump elsewhere after the swapgs (je where the jump over VERW was) */
	iu_load(ret61, sizeof(ret61));
	iu_code[0x7e] = 0x74;
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + 0xa4, &b), -ENOENT);
	/* a second swapgs on the way (where the jump over VERW and VERW were) */
	iu_load(ret61, sizeof(ret61));
	memcpy(iu_code + 0x7e, (const uint8_t[]){ 0x90, 0x90, 0x0f, 0x01, 0xf8, 0x90, 0x90, 0x90,
						  0x90 }, 9);
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + 0xa4, &b), -ENOENT);
	/* a jump to the iretq before any swapgs: followed, never taken for the branch */
	iu_load((const uint8_t[]){ 0xeb, 0x10 }, 2);
	memcpy(iu_code + 0x12, (const uint8_t[]){ 0x48, 0xcf }, 2);
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + 0x12, &b), -ENOENT);
	/* the iretq before the symbol, or too far after it; the code unreadable */
	iu_load(ret61, sizeof(ret61));
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU - 2, &b), -ENOENT);
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + (8u << 10), &b), -ENOENT);
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + 0x1f0, &b), -ENOENT);
	ASSERT_EQ_INT(gi_iret_user_branch_find(NULL, iu_read, NULL, IU + 0xa4, &b), -EINVAL);
	symtab_free(st);
	st = symbols(); /* no swapgs_restore_regs_and_return_to_usermode */
	ASSERT_TRUE(st != NULL);
	ASSERT_EQ_INT(gi_iret_user_branch_find(st, iu_read, NULL, IU + 0xa4, &b), -ENOENT);
	symtab_free(st);
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
		{ "a loop's body: not the code between that is not the loop's", test_loop_body },
		{ "the static keys' sites: both edges, from __jump_table", test_jump_labels },
		{ "the tail from a call of the exit function", test_tail_after_call },
		{ "interrupt and exception handlers' code after irqentry_exit", test_epilogues },
		{ "... where following it stops", test_epilogue_edges },
		{ "the branch to the iretq on returns to user only (6.1, 6.12)", test_iret_user },
		{ "... refused where a register may change, or not found", test_iret_user_refused },
	};

	return test_run_all(tests, sizeof(tests) / sizeof(tests[0]));
}
