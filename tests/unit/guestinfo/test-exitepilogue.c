// SPDX-License-Identifier: MIT
// Unit tests of guestinfo/exitepilogue.c: the IDT handlers' code after their call of
// irqentry_exit (their epilogues), on hand-assembled handlers.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "codefixture.h"
#include "gi_internal.h"
#include "test.h"

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
	/* no noinstr bounds (the exit functions there) */
	{
		struct ksym_entry e2[2] = { { FN + PF, 'T', strdup("exc_page_fault") },
					    { FN + EXIT_USER, 'T',
					      strdup("irqentry_exit_to_user_mode") } };

		st = symtab_of(e2, 2);
	}
	ASSERT_TRUE(st != NULL);
	ASSERT_EQ_INT(gi_exit_epilogues_find(st, read_code, NULL, &sp), -ENOENT);
	ASSERT_EQ_INT(gi_exit_epilogues_find(NULL, read_code, NULL, &sp), -EINVAL);
	symtab_free(st);
	return TEST_OK;
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

int main(void)
{
	static const struct test_case tests[] = {
		{ "interrupt and exception handlers' code after irqentry_exit", test_epilogues },
		{ "... where following it stops", test_epilogue_edges },
	};

	return test_run_all(tests, sizeof(tests) / sizeof(tests[0]));
}
