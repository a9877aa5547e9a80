// SPDX-License-Identifier: MIT
// Fuzz target: the readers of kernel code (docs/guest-interface.md), which decode an image's or
// a guest's text with capstone and follow its control flow: the exit-work loops and their
// bodies (gi_exit_work_loops, gi_loop_body, gi_jump_labels), the handlers' epilogues
// (gi_exit_epilogues_find), the branch to the user-only iretq (gi_iret_user_branch_find), the
// exit sites (gi_exit_sites), calls and tails (gi_call_site, gi_tail_after_call,
// gi_jumps_to_find) and the frame-pointer prologue table (gi_prologues_build). The text is the
// fuzzer's; so are the symbols' places, the pv_ops slots and the static keys' sites.
//
// Input: a 32-byte header, then the text (at most FZ_TEXT_MAX bytes) at FZ_TEXT; the rest of
// the text window reads as int3, and nothing outside it reads at all (-EFAULT).
//   u8 flags: bit 0: layout B (6.12's: syscall_exit_to_user_mode at 0 holds its own loop,
//     exit_to_user_mode_loop at @p1), else layout A (6.1's: exit_to_user_mode_prepare at 0,
//     syscall_exit_to_user_mode at @p1); bit 1: pv_ops slots known (irq_enable at FZ_TEXT +
//     @pv, irq_disable 8 before it); bit 2: __jump_table symbols (@jt, 16-byte entries, bits
//     4..7 of flags of them); bit 3: gi_loop_body given the sites @labels;
//   u8 n_labels (0..4: the first of @labels used);
//   u16 head (gi_loop_body's head), p1, p2 (irqentry_exit_to_user_mode), s
//     (swapgs_restore_regs_and_return_to_usermode), iret (the iretq, from @s), jt, pv;
//   u16 labels[4][2]: a site's code and target offsets. Offsets are from FZ_TEXT, taken modulo
//   FZ_TEXT_MAX.
// Invariants: each call's documented return codes; what is found lies in the text and in the
// function it belongs to; ranges are non-empty, ascending, at most the room given; loops are
// shaped head < clear < loop end.
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fuzz.h"
#include "gi_internal.h"
#include "kimage_internal.h"

#define HDR 32
#define FZ_TEXT 0xffffffff81000000ull
#define FZ_TEXT_MAX 4096u

struct fz_text {
	uint8_t b[FZ_TEXT_MAX];
};

/* gi_kva_read_fn over the text window: -EFAULT for any byte outside it. */
static int fz_read(void *ctx, uint64_t kva, void *dst, size_t len)
{
	struct fz_text *t = ctx;

	if (kva < FZ_TEXT || len > FZ_TEXT_MAX || kva - FZ_TEXT > FZ_TEXT_MAX - len)
		return -EFAULT;
	memcpy(dst, t->b + (kva - FZ_TEXT), len);
	return 0;
}

static uint64_t get16(const uint8_t *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8;
}

/* An offset of the header as a KVA in the text. */
static uint64_t at(const uint8_t *p)
{
	return FZ_TEXT + get16(p) % FZ_TEXT_MAX;
}

static bool in_text(uint64_t kva)
{
	return kva >= FZ_TEXT && kva < FZ_TEXT + FZ_TEXT_MAX;
}

/* [@r[0..n)): non-empty, ascending, disjoint, within [lo, hi]. */
static void check_ranges(const uint64_t (*r)[2], size_t n, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(r[i][0] < r[i][1]);
		FUZZ_CHECK(r[i][0] >= lo && r[i][1] <= hi);
		FUZZ_CHECK(i == 0 || r[i][0] >= r[i - 1][1]);
	}
}

/* The symbols the header places (names strdup'd; symtab_from_entries copies what it keeps). */
static struct symtab *fz_symbols(const uint8_t *h)
{
	struct ksym_entry e[12];
	struct symtab *st = NULL;
	size_t n = 0;
	bool layout_b = h[0] & 1;

#define SYM(kva, type, name) (e[n++] = (struct ksym_entry){ (kva), (type), strdup(name) })
	SYM(FZ_TEXT, 'T', layout_b ? "syscall_exit_to_user_mode" : "exit_to_user_mode_prepare");
	SYM(at(h + 4), 'T', layout_b ? "exit_to_user_mode_loop" : "syscall_exit_to_user_mode");
	SYM(at(h + 6), 'T', "irqentry_exit_to_user_mode");
	SYM(at(h + 8), 'T', "swapgs_restore_regs_and_return_to_usermode");
	SYM(FZ_TEXT, 'T', "__noinstr_text_start");
	SYM(FZ_TEXT + FZ_TEXT_MAX, 'T', "__noinstr_text_end");
	SYM(FZ_TEXT + FZ_TEXT_MAX, 'T', "_etext");
	SYM(FZ_TEXT, 'T', "_stext");
	if (h[0] & 4) {
		SYM(at(h + 12), 'D', "__start___jump_table");
		SYM(at(h + 12) + 16ull * (h[0] >> 4), 'D', "__stop___jump_table");
	}
#undef SYM
	for (size_t i = 0; i < n; i++)
		if (!e[i].name)
			goto out;
	if (symtab_from_entries(e, n, &st) != 0)
		st = NULL;
out:
	for (size_t i = 0; i < n; i++)
		free(e[i].name);
	return st;
}

static void fz_loops(const struct symtab *st, struct fz_text *t, const struct gi_pv_irq *pv)
{
	struct gi_exit_work w[GI_EW_COPIES];
	size_t n = 9;
	int err = gi_exit_work_loops(st, fz_read, t, pv, w, &n);

	FUZZ_CHECK(err == 0 || err == -ENOENT || err == -ENOTSUP || err == -EFAULT ||
		   err == -ENOMEM);
	FUZZ_CHECK(err ? n == 0 : n >= 1 && n <= GI_EW_COPIES);
	FUZZ_LOG("loops: %d, %zu\n", err, n);
	for (size_t i = 0; i < n; i++) {
		const struct gi_exit_work *l = &w[i];

		FUZZ_CHECK(in_text(l->func_start) && l->func_start < l->func_end);
		FUZZ_CHECK(l->func_end <= FZ_TEXT + FZ_TEXT_MAX);
		FUZZ_CHECK(l->func_start <= l->head && l->head < l->loop_end &&
			   l->loop_end <= l->func_end);
		FUZZ_CHECK(l->head <= l->clear && l->clear < l->clear_end &&
			   l->clear_end <= l->loop_end);
		FUZZ_CHECK(l->clear_end - l->clear <= 15);
		FUZZ_CHECK(!l->loop_cli || (l->loop_cli >= l->head && l->loop_cli < l->loop_end));
		FUZZ_CHECK(!l->prep_cli || (l->prep_cli >= l->func_start && l->prep_cli < l->head));
		FUZZ_CHECK(l->n_body <= GI_EW_BODY);
		check_ranges((const uint64_t(*)[2])l->body, l->n_body, l->func_start, l->func_end);
		FUZZ_LOG("  loop [%llx, %llx) clear %llx, prep_cli %llx, %u body ranges\n",
			 (unsigned long long)l->head, (unsigned long long)l->loop_end,
			 (unsigned long long)l->clear, (unsigned long long)l->prep_cli, l->n_body);
	}
}

static void fz_body(const uint8_t *h, struct fz_text *t, size_t len, const struct gi_pv_irq *pv)
{
	struct gi_jump_label labels[4];
	uint64_t r[4][2], start = FZ_TEXT, end = FZ_TEXT + (len ? len : 1);
	size_t n_labels = h[1] % 5;
	unsigned int n = 9;
	int err;

	for (size_t i = 0; i < 4; i++) {
		labels[i].code = at(h + 16 + 4 * i);
		labels[i].target = at(h + 18 + 4 * i);
	}
	err = gi_loop_body(fz_read, t, start, end, at(h + 2), pv ? pv->disable : 0,
			   (h[0] & 8) ? labels : NULL, (h[0] & 8) ? n_labels : 0, r, 4, &n);
	FUZZ_CHECK(err == 0 || err == -ENOENT || err == -EBADMSG || err == -EFAULT ||
		   err == -ENOMEM || err == -EINVAL);
	FUZZ_LOG("body: %d, %u\n", err, err ? 0 : n);
	if (!err) {
		FUZZ_CHECK(n <= 4);
		check_ranges((const uint64_t(*)[2])r, n, start, end);
	}
}

static void fz_jump_labels(const struct symtab *st, struct fz_text *t)
{
	struct gi_jump_label l[8];
	size_t n = 0;
	int err = gi_jump_labels(st, fz_read, t, FZ_TEXT, FZ_TEXT + FZ_TEXT_MAX, l, 8, &n);

	FUZZ_CHECK(err == 0 || err == -ENOENT || err == -EBADMSG || err == -E2BIG ||
		   err == -EFAULT);
	if (!err) {
		FUZZ_CHECK(n <= 8);
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(in_text(l[i].code));
	}
}

static void fz_epilogues(const struct symtab *st, struct fz_text *t)
{
	struct gi_spans sp;
	int err = gi_exit_epilogues_find(st, fz_read, t, &sp);

	FUZZ_CHECK(err == 0 || err == -ENOENT || err == -E2BIG || err == -EFAULT ||
		   err == -ENOMEM);
	FUZZ_LOG("epilogues: %d, %zu\n", err, err ? 0 : sp.n);
	if (err) {
		FUZZ_CHECK(sp.n == 0 && !sp.r);
		return;
	}
	check_ranges((const uint64_t(*)[2])sp.r, sp.n, FZ_TEXT, FZ_TEXT + FZ_TEXT_MAX);
	for (size_t i = 0; i < sp.n; i++) /* touching spans merged: each end is outside */
		FUZZ_CHECK(gi_spans_has(&sp, sp.r[i][0]) && gi_spans_has(&sp, sp.r[i][1] - 1) &&
			   !gi_spans_has(&sp, sp.r[i][1]));
	gi_spans_free(&sp);
}

static void fz_iret(const uint8_t *h, const struct symtab *st, struct fz_text *t)
{
	uint64_t s = at(h + 8), iret = s + get16(h + 10) % 1024;
	struct gi_branch b;
	int err = gi_iret_user_branch_find(st, fz_read, t, iret, &b);

	FUZZ_CHECK(err == 0 || err == -ENOENT || err == -EFAULT || err == -ENOMEM);
	FUZZ_LOG("iret branch: %d\n", err);
	if (err) {
		FUZZ_CHECK(b.kva == 0);
		return;
	}
	/* the walk to the swapgs follows jumps either way (within 4 KiB of the symbol): the
	 * branch may lie anywhere in the text */
	FUZZ_CHECK(in_text(b.kva) && b.len >= 2 && b.len <= sizeof(b.bytes) &&
		   b.kva + b.len <= FZ_TEXT + FZ_TEXT_MAX);
	FUZZ_CHECK(b.target <= iret && iret - b.target <= 16);
	FUZZ_CHECK(!memcmp(b.bytes, t->b + (b.kva - FZ_TEXT), b.len));
}

static void fz_sites_and_calls(const struct symtab *st, struct fz_text *t, const uint8_t *h)
{
	struct gi_exit_site sites[8];
	uint64_t a, after, end, start = FZ_TEXT + get16(h + 2) % FZ_TEXT_MAX, jumps[4];
	size_t n = 0;
	int err;

	err = gi_exit_sites(st, fz_read, t, &start, 1, 0, sites, 8, &n);
	FUZZ_CHECK(err == 0 || err == -ENOENT || err == -ENOMEM);
	for (size_t i = 0; !err && i < n && i < 8; i++) {
		FUZZ_CHECK(in_text(sites[i].kva));
		FUZZ_CHECK(i == 0 || sites[i].kva > sites[i - 1].kva);
	}
	err = gi_call_site(st, fz_read, t, "syscall_exit_to_user_mode",
			   "irqentry_exit_to_user_mode", &a, &after, &end);
	FUZZ_CHECK(err == 0 || err == -ENOENT || err == -EFAULT || err == -ENOMEM);
	if (!err)
		FUZZ_CHECK(in_text(a) && a < after && after <= end);
	err = gi_tail_after_call(st, fz_read, t, "irqentry_exit_to_user_mode",
				 "swapgs_restore_regs_and_return_to_usermode", &a, &end);
	FUZZ_CHECK(err == 0 || err == -ENOENT || err == -EFAULT || err == -ENOMEM);
	if (!err)
		FUZZ_CHECK(in_text(a) && a < end);
	err = gi_jumps_to_find(fz_read, t, FZ_TEXT, FZ_TEXT + FZ_TEXT_MAX, FZ_TEXT, jumps, 4, &n);
	FUZZ_CHECK(err == 0 || err == -ENOENT || err == -EFAULT || err == -ENOMEM);
	for (size_t i = 0; !err && i < n && i < 4; i++)
		FUZZ_CHECK(in_text(jumps[i]) && (i == 0 || jumps[i] > jumps[i - 1]));
}

static void fz_prologues(const struct symtab *st, struct fz_text *t, const uint8_t *h)
{
	struct gi_prologues *p = NULL;
	int err = gi_prologues_build(st, fz_read, t, FZ_TEXT, FZ_TEXT + FZ_TEXT_MAX, &p);

	FUZZ_CHECK(err == 0 || err == -ENOMEM || err == -ENOTSUP);
	if (err)
		return;
	for (size_t i = 0; i < 4; i++) {
		enum gi_frame_state s = gi_prologue_at(p, at(h + 16 + 4 * i));

		FUZZ_CHECK(s >= GI_FRAME_BUILT && s <= GI_FRAME_AT_RET);
	}
	gi_prologues_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_text *t;
	struct symtab *st;
	struct gi_pv_irq pv = { 0 };
	size_t len;

	if (size < HDR)
		return 0;
	len = size - HDR < FZ_TEXT_MAX ? size - HDR : FZ_TEXT_MAX;
	t = malloc(sizeof(*t));
	if (!t)
		return 0;
	memset(t->b, 0xcc, sizeof(t->b));
	memcpy(t->b, data + HDR, len);
	st = fz_symbols(data);
	if (!st) {
		free(t);
		return 0;
	}
	if (data[0] & 2) {
		pv.enable = at(data + 14);
		pv.disable = pv.enable - 8;
	}
	fz_loops(st, t, (data[0] & 2) ? &pv : NULL);
	fz_body(data, t, len, (data[0] & 2) ? &pv : NULL);
	fz_jump_labels(st, t);
	fz_epilogues(st, t);
	fz_iret(data, st, t);
	fz_sites_and_calls(st, t, data);
	fz_prologues(st, t, data);
	symtab_free(st);
	free(t);
	return 0;
}
