// SPDX-License-Identifier: MIT
// The guest IDT reader on a fake guest: table-driven gates (present or not, gate types, handler
// addresses), limits, and IDTs that are not mapped or not canonical.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fakemem.h"
#include "test.h"

#define IDT_GVA 0xfffffe0000000000ull /* where Linux maps its IDT (CPU entry area) */
#define IDT_GPA 0x300000ull

/* A 64-bit gate: @attr is the P/DPL/type byte. */
static void write_gate(struct fakemem *fm, unsigned int vec, uint64_t target, uint8_t attr)
{
	uint8_t g[16] = { 0 };

	g[0] = (uint8_t)target;
	g[1] = (uint8_t)(target >> 8);
	g[2] = 0x10; /* __KERNEL_CS */
	g[5] = attr;
	for (int i = 0; i < 6; i++)
		g[6 + i] = (uint8_t)(target >> (16 + 8 * i));
	fakemem_wbytes(fm, IDT_GPA + vec * 16ull, g, sizeof(g));
}

struct idt_case {
	const char *name;
	unsigned int vec;
	uint64_t target;
	uint8_t attr;
	uint16_t limit;
	uint64_t base;
	int want;
};

static const struct idt_case cases[] = {
	{ "interrupt gate", 14, 0xffffffff81a00b40ull, 0x8e, 4095, IDT_GVA, 0 },
	{ "trap gate", 3, 0xffffffff81a00c00ull, 0x8f, 4095, IDT_GVA, 0 },
	{ "DPL 3 interrupt gate", 128, 0xffffffff81a00d00ull, 0xee, 4095, IDT_GVA, 0 },
	{ "vector 255, the last byte at the limit", 255, 0xffffffff81000000ull, 0x8e, 4095, IDT_GVA,
	  0 },
	{ "not present", 14, 0xffffffff81a00b40ull, 0x0e, 4095, IDT_GVA, -ENOENT },
	{ "a call gate", 14, 0xffffffff81a00b40ull, 0x8c, 4095, IDT_GVA, -EBADMSG },
	{ "a 32-bit-style type with bit 4 set", 14, 0xffffffff81a00b40ull, 0x9e, 4095, IDT_GVA,
	  -EBADMSG },
	{ "a non-canonical handler", 14, 0x0000900000000000ull, 0x8e, 4095, IDT_GVA, -EBADMSG },
	{ "gate beyond the limit", 14, 0xffffffff81a00b40ull, 0x8e, 14 * 16 + 14, IDT_GVA, -ERANGE },
	{ "an empty IDT", 0, 0xffffffff81a00b40ull, 0x8e, 0, IDT_GVA, -ERANGE },
	{ "IDT not mapped", 14, 0xffffffff81a00b40ull, 0x8e, 4095, IDT_GVA + 0x200000, -EFAULT },
	{ "IDT base not canonical", 14, 0xffffffff81a00b40ull, 0x8e, 4095, 0x0000800000000000ull,
	  -ERANGE },
	{ "IDT running off the top of the address space", 255, 0xffffffff81a00b40ull, 0x8e, 4095,
	  0xfffffffffffff100ull, -ERANGE },
};

static int test_gates(void)
{
	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		const struct idt_case *tc = &cases[c];
		struct fakemem fm;
		uint64_t target = 0;

		printf("# %s\n", tc->name);
		ASSERT_EQ_INT(fakemem_init(&fm, 0), 0);
		ASSERT_EQ_INT(fakemem_map(&fm, IDT_GVA, IDT_GPA, 4096, FPTE_NX), 0);
		write_gate(&fm, tc->vec, tc->target, tc->attr);
		ASSERT_EQ_INT(gi_idt_gate(&fm.mem, &fm.pg, tc->base, tc->limit, tc->vec, &target),
			      tc->want);
		if (tc->want == 0)
			ASSERT_EQ_U64(target, tc->target);
		fakemem_fini(&fm);
	}
	return TEST_OK;
}

static int test_args(void)
{
	struct fakemem fm;
	uint64_t t;

	ASSERT_EQ_INT(fakemem_init(&fm, 0), 0);
	ASSERT_EQ_INT(gi_idt_gate(&fm.mem, &fm.pg, IDT_GVA, 4095, 256, &t), -EINVAL);
	ASSERT_EQ_INT(gi_idt_gate(NULL, &fm.pg, IDT_GVA, 4095, 1, &t), -EINVAL);
	ASSERT_EQ_INT(gi_idt_gate(&fm.mem, &fm.pg, IDT_GVA, 4095, 1, NULL), -EINVAL);
	fakemem_fini(&fm);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "IDT gates", test_gates },
	{ "IDT arguments", test_args },
};

TEST_MAIN(tests)
