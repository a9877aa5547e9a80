// SPDX-License-Identifier: MIT
// Fuzz target: the report's DWARF unwinder of recorded user stacks (profile/unwind_dwarf.c,
// libdw's frame API over a USER_REGS record's registers and stack copy). A guest controls both;
// the CFI comes from the address space's files. The state unwound is a real one, changed by the
// input: at the first call the harness captures its own registers and the top of its stack in
// f3 (called by f2, f1: built without frame pointers, with asynchronous unwind tables), as a
// USER_REGS record holds them, over this process's own file mappings; each input then patches
// that capture, so a mutation is meaningful whatever the build's layout and ASLR.
//
// Input: u8 flags (bit 0: cut the stack copy to @cut bytes), u8 max (frames asked, 1..128),
// u16 cut; then 8-byte patches: u8 kind, u8 pad, u16 where (0..16: that register in DWARF
// order; 32 + i: the stack copy's word i), s32 v. Kinds: 0 the value v; 1 the captured RIP + v;
// 2 the captured RSP + v; 3 the captured stack word v (mod their count); 4 XOR with v.
// Invariants: 0 returned, at most @max pcs, the first the RIP, a known stop reason; the stack
// copy is read only within its bytes (it is a buffer of exactly that size: ASan); the capture
// itself unwinds through f2 and f1 (checked once: else the harness is broken).
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "selfstack.h"
#include "unwind_dwarf.h"

#define HDR 4
#define PATCH 8
#define CAP_STACK 16384

static struct {
	bool ready, broken;
	uint64_t regs[UNW_NREGS];
	uint8_t stack[CAP_STACK];
	uint32_t stack_len;
	uint64_t ret_in_f2, ret_in_f1; /* f3's and f2's return addresses (their callers' pcs) */
	struct self_maps maps;
	struct unwinder *u;
	struct unw_space *sp;
} cap;

static volatile int sink;

/* A copy of @n bytes of this thread's own stack from @src: its callers' frames hold ASan's
 * redzones, which are bytes of the stack like any other here, so not checked. */
__attribute__((no_sanitize_address, noinline)) static void copy_own_stack(uint8_t *dst,
									  const uint8_t *src,
									  size_t n)
{
	for (size_t i = 0; i < n; i++)
		((volatile uint8_t *)dst)[i] = ((const volatile uint8_t *)src)[i];
}

static __attribute__((noinline)) int f3(int x)
{
	uint64_t rsp;

	CAPTURE_REGS(cap.regs);
	rsp = cap.regs[UNW_REG_RSP];
	cap.stack_len = cap.maps.stack_end - rsp < CAP_STACK ? (uint32_t)(cap.maps.stack_end - rsp)
							 : CAP_STACK;
	copy_own_stack(cap.stack, (const uint8_t *)(uintptr_t)rsp, cap.stack_len);
	cap.ret_in_f2 = (uint64_t)(uintptr_t)__builtin_return_address(0);
	return x + sink;
}

static __attribute__((noinline)) int f2(int x)
{
	int r = f3(x + 1);

	cap.ret_in_f1 = (uint64_t)(uintptr_t)__builtin_return_address(0);
	sink += r; /* not a tail call: f2's frame stays */
	return r + 1;
}

static __attribute__((noinline)) int f1(int x)
{
	int r = f2(x * 2);

	sink += r;
	return r + 2;
}

/* The capture, its address space, and the check that it unwinds through f2 and f1. */
static void capture(void)
{
	uint64_t ips[16];
	unsigned int n = 0;
	enum unw_stop why;

	cap.ready = true;
	if (self_maps_read(&cap.maps) != 0 || !cap.maps.stack_end || unwinder_new(&cap.u) != 0 ||
	    unwinder_space(cap.u, 1, cap.maps.m, cap.maps.n, &cap.sp) != 0) {
		cap.broken = true;
		return;
	}
	(void)f1(1);
	FUZZ_CHECK(unwinder_unwind(cap.sp, cap.regs, cap.stack, cap.stack_len, ips, 16, &n,
				   &why) == 0);
	FUZZ_LOG("capture: %u frames, stop %s\n", n, unw_stop_name(why));
	FUZZ_CHECK(n >= 3 && ips[0] == cap.regs[UNW_REG_RIP] && ips[1] == cap.ret_in_f2 &&
		   ips[2] == cap.ret_in_f1);
}

/* Apply the 8-byte patch @p to @regs and the stack copy @st (@words 8-byte words). */
static void patch(const uint8_t *p, uint64_t *regs, uint8_t *st, size_t words)
{
	unsigned int where = p[2] | (unsigned int)p[3] << 8;
	int32_t v = (int32_t)((uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
			      (uint32_t)p[7] << 24);
	uint64_t val, *slot = NULL, word;

	if (where < UNW_NREGS) {
		slot = &regs[where];
		val = *slot;
	} else if (where >= 32 && where - 32 < words) {
		memcpy(&val, st + 8 * (where - 32), 8);
	} else {
		return;
	}
	switch (p[0] % 5) {
	case 0: val = (uint64_t)(int64_t)v; break;
	case 1: val = cap.regs[UNW_REG_RIP] + (uint64_t)(int64_t)v; break;
	case 2: val = cap.regs[UNW_REG_RSP] + (uint64_t)(int64_t)v; break;
	case 3:
		if (!(cap.stack_len / 8))
			return;
		memcpy(&word, cap.stack + 8 * ((uint32_t)v % (cap.stack_len / 8)), 8);
		val = word;
		break;
	default: val ^= (uint64_t)(int64_t)v; break;
	}
	if (slot)
		*slot = val;
	else
		memcpy(st + 8 * (where - 32), &val, 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t regs[UNW_NREGS], ips[128];
	unsigned int n = 0, max;
	uint32_t len;
	enum unw_stop why = UNW_STOP_COUNT;
	uint8_t *st;

	if (!cap.ready)
		capture();
	if (cap.broken || size < HDR)
		return 0;
	max = 1 + data[1] % 128;
	len = cap.stack_len;
	if ((data[0] & 1) && (uint32_t)(data[2] | data[3] << 8) < len)
		len = (uint32_t)(data[2] | data[3] << 8);
	st = malloc(len ? len : 1); /* exactly @len bytes: a read past them is ASan's */
	if (!st)
		return 0;
	memcpy(st, cap.stack, len);
	memcpy(regs, cap.regs, sizeof(regs));
	for (size_t off = HDR; off + PATCH <= size; off += PATCH)
		patch(data + off, regs, st, len / 8);
	FUZZ_CHECK(unwinder_unwind(cap.sp, regs, st, len, ips, max, &n, &why) == 0);
	FUZZ_LOG("unwind: %u frames of %u, stop %s\n", n, max, unw_stop_name(why));
	FUZZ_CHECK(n <= max && why < UNW_STOP_COUNT);
	FUZZ_CHECK(regs[UNW_REG_RIP] ? n >= 1 && ips[0] == regs[UNW_REG_RIP] : true);
	free(st);
	return 0;
}
