// SPDX-License-Identifier: MIT
// KASLR slide from MSR_LSTAR, cross-checked against guest text: a fake guest whose page tables
// map the test kernel's entry page at a slid address (bytes copied from the real image).
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fakemem.h"
#include "gi_internal.h"
#include "imagefile.h"
#include "test.h"

#define SLIDE 0x4000000ull /* 64 MiB: a multiple of CONFIG_PHYSICAL_ALIGN (2 MiB) */
#define PAGE_GPA 0x200000ull
#define STACK 0xffffc90000124000ull /* a task's kernel stack (task->stack: 16 KiB aligned) */

enum damage { NONE, SITE_BYTES, ENTRY_BYTES };

struct kaslr_case {
	const char *name;
	int64_t lstar_delta; /* added to entry_SYSCALL_64 + SLIDE */
	enum damage damage;
	int want;
};

static const struct kaslr_case cases[] = {
	{ "the slid entry", 0, NONE, 0 },
	{ "not page aligned", 0x10, NONE, -EBADMSG },
	{ "a site's bytes differ (another kernel)", 0, SITE_BYTES, -EBADMSG },
	{ "no SWAPGS at the entry", 0, ENTRY_BYTES, -EBADMSG },
	{ "LSTAR below the entry", -(int64_t)SLIDE - 0x1000, NONE, -ERANGE },
	{ "slid text not mapped", 0x200000, NONE, -EFAULT },
};

static int test_slide(void)
{
	char vmlinux[4096], btf[4096];
	struct gi_config cfg = { 0 };
	struct gi_kimage *img = NULL;
	struct gi *gi = NULL;
	const struct gi_exit_site *sites;
	uint64_t entry, page, stext, etext, stext2, etext2, off;
	uint8_t bytes[4096];
	const char *name;
	size_t n;

	if (test_image_config(vmlinux, btf, &cfg))
		return TEST_SKIP;
	ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
	ASSERT_EQ_INT(gi_kimage_open(vmlinux, &img), 0);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "entry_SYSCALL_64", &entry), 0);
	sites = gi_exit_sites_of(gi, &n);
	ASSERT_TRUE(n >= 2);
	page = entry & ~0xfffull;
	for (size_t i = 0; i < n; i++)
		ASSERT_TRUE((sites[i].kva & ~0xfffull) == page); /* this test maps one page */
	ASSERT_EQ_INT(gi_kimage_read_kva(img, page, bytes, sizeof(bytes)), 0);

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		const struct kaslr_case *tc = &cases[c];
		struct fakemem fm;
		uint8_t copy[4096];
		uint64_t slide = 0;

		printf("# %s\n", tc->name);
		memcpy(copy, bytes, sizeof(copy));
		if (tc->damage == SITE_BYTES)
			copy[(sites[n - 1].kva & 0xfff) + 1] ^= 0xff;
		if (tc->damage == ENTRY_BYTES)
			memset(copy + (entry & 0xfff), 0x90, 8);
		ASSERT_EQ_INT(fakemem_init(&fm, 0), 0);
		ASSERT_EQ_INT(fakemem_map(&fm, page + SLIDE, PAGE_GPA, 4096, FPTE_P), 0);
		fakemem_wbytes(&fm, PAGE_GPA, copy, sizeof(copy));
		ASSERT_EQ_INT(gi_kaslr_slide_from_lstar(gi, &fm.mem, &fm.pg,
							entry + SLIDE + (uint64_t)tc->lstar_delta,
							&slide),
			      tc->want);
		if (tc->want == 0)
			ASSERT_EQ_U64(slide, SLIDE);
		/* A user address is never the entry. */
		ASSERT_EQ_INT(gi_kaslr_slide_from_lstar(gi, &fm.mem, &fm.pg, 0x401000, &slide),
			      -ERANGE);
		fakemem_fini(&fm);
	}

	/* With the slide set, runtime addresses name the same functions. */
	gi_kernel_text(gi, &stext, &etext);
	ASSERT_EQ_INT(gi_kaslr_state(gi), GI_SLIDE_UNKNOWN);
	gi_set_kaslr_slide(gi, SLIDE);
	ASSERT_EQ_INT(gi_kaslr_state(gi), GI_SLIDE_KNOWN);
	gi_set_kaslr_failed(gi); /* a known slide stays known */
	ASSERT_EQ_INT(gi_kaslr_state(gi), GI_SLIDE_KNOWN);
	gi_kernel_text(gi, &stext2, &etext2);
	ASSERT_EQ_U64(stext2, stext + SLIDE);
	ASSERT_EQ_U64(etext2, etext + SLIDE);
	ASSERT_EQ_INT(gi_lookup_kva(gi, entry + SLIDE + 3, &name, &off), 0);
	ASSERT_EQ_STR(name, "entry_SYSCALL_64");
	ASSERT_EQ_U64(off, 3);
	gi_kimage_free(img);
	gi_close(gi);
	return TEST_OK;
}

#define IDT_GVA 0xfffffe0000000000ull
#define IDT_GPA 0x300000ull

/* A fake guest with the slid entry page (as test_slide) and an IDT whose #PF gate is @pf. */
static int slid_guest(struct fakemem *fm, const uint8_t *page_bytes, uint64_t page, uint64_t pf)
{
	uint8_t g[16] = { 0 };

	if (fakemem_init(fm, 0) || fakemem_map(fm, page + SLIDE, PAGE_GPA, 4096, FPTE_P) ||
	    fakemem_map(fm, IDT_GVA, IDT_GPA, 4096, FPTE_P))
		return -1;
	fakemem_wbytes(fm, PAGE_GPA, page_bytes, 4096);
	g[0] = (uint8_t)pf;
	g[1] = (uint8_t)(pf >> 8);
	g[2] = 0x10;
	g[5] = 0x8e; /* present interrupt gate */
	for (int i = 0; i < 6; i++)
		g[6 + i] = (uint8_t)(pf >> (16 + 8 * i));
	fakemem_wbytes(fm, IDT_GPA + 14 * 16, g, sizeof(g));
	return 0;
}

/* The decision gi_kaslr_observe() makes once per guest, and the slid sites that follow it. */
static int test_decision(void)
{
	char vmlinux[4096], btf[4096];
	struct gi_config cfg = { 0 };
	struct gi_kimage *img = NULL;
	struct gi *gi = NULL;
	struct gi_kaslr_observation o;
	struct gi_return_sites rs;
	struct fakemem fm;
	uint64_t entry, sysret_end, iret, pf, page, detected = 0, gva, to_user;
	uint64_t save, sync, sync_ret = 0;
	uint8_t bytes[4096];
	int idt = 0;

	if (test_image_config(vmlinux, btf, &cfg))
		return TEST_SKIP;
	ASSERT_EQ_INT(gi_kimage_open(vmlinux, &img), 0);
	ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "entry_SYSCALL_64", &entry), 0);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "entry_SYSRETQ_end", &sysret_end), 0);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "native_irq_return_iret", &iret), 0);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "asm_exc_page_fault", &pf), 0);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "swapgs_restore_regs_and_return_to_usermode",
				  &to_user), 0);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "error_entry", &save), 0);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "sync_regs", &sync), 0);
	/* the return address of error_entry's call of sync_regs (e8 rel32) */
	ASSERT_EQ_INT(gi_kimage_read_kva(img, save, bytes, 256), 0);
	for (unsigned int k = 0; k + 5 <= 256 && !sync_ret; k++) {
		int32_t rel;

		memcpy(&rel, bytes + k + 1, sizeof(rel));
		if (bytes[k] == 0xe8 && save + k + 5 + (uint64_t)(int64_t)rel == sync)
			sync_ret = save + k + 5;
	}
	ASSERT_TRUE(sync_ret != 0);
	page = entry & ~0xfffull;
	ASSERT_EQ_INT(gi_kimage_read_kva(img, page, bytes, sizeof(bytes)), 0);
	ASSERT_EQ_INT(slid_guest(&fm, bytes, page, pf + SLIDE), 0);

	/* guest-chosen slide, not known yet: no sites, no window, nothing decided */
	ASSERT_EQ_INT(gi_return_sites(gi, &rs), -EAGAIN);
	ASSERT_EQ_INT(gi_pf_entry(gi, &gva), -EAGAIN);
	ASSERT_TRUE(!gi_in_entry_window(gi, entry + SLIDE + 0x10));
	ASSERT_TRUE(!gi_in_entry_save_call(gi, sync_ret + SLIDE));
	ASSERT_EQ_INT(gi_kaslr_observe(gi, &fm.mem, &fm.pg, 0, IDT_GVA, 4095, &o), -EAGAIN);
	ASSERT_EQ_INT(gi_kaslr_observe(gi, &fm.mem, &fm.pg, entry + 2 * SLIDE, IDT_GVA, 4095, &o),
		      -EAGAIN); /* not mapped through this CR3: ask again */
	ASSERT_EQ_INT(gi_kaslr_checked(gi, NULL, NULL), GI_KASLR_PENDING);
	/* found from MSR_LSTAR, the IDT agrees; decided once */
	ASSERT_EQ_INT(gi_kaslr_observe(gi, &fm.mem, &fm.pg, entry + SLIDE, IDT_GVA, 4095, &o), 0);
	ASSERT_EQ_INT(o.check, GI_KASLR_FOUND);
	ASSERT_EQ_U64(o.slide, SLIDE);
	ASSERT_EQ_INT(o.idt, 1);
	ASSERT_EQ_INT(gi_kaslr_observe(gi, &fm.mem, &fm.pg, entry + SLIDE, IDT_GVA, 4095, &o),
		      -EALREADY);
	ASSERT_EQ_INT(gi_kaslr_checked(gi, &detected, &idt), GI_KASLR_FOUND);
	ASSERT_EQ_U64(detected, SLIDE);
	ASSERT_EQ_INT(idt, 1);
	ASSERT_EQ_INT(gi_kaslr_state(gi), GI_SLIDE_KNOWN);
	/* the sites, slid: the same instructions the symbols name (sysretq is 48 0f 07) */
	ASSERT_EQ_INT(gi_return_sites(gi, &rs), 0);
	ASSERT_EQ_U64(rs.sysret, sysret_end - 3 + SLIDE);
	ASSERT_EQ_U64(rs.iret, iret + SLIDE);
	/* ... and the branch to the iretq on returns to user, slid with them: in
	 * swapgs_restore_regs_and_return_to_usermode, to the iretq or just before it (ESPFIX) */
	ASSERT_TRUE(gi_has_iret_user_branch(gi));
	ASSERT_TRUE(rs.iret_user > to_user + SLIDE && rs.iret_user < rs.iret);
	ASSERT_TRUE(rs.iret_user_target <= rs.iret && rs.iret - rs.iret_user_target <= 16);
	ASSERT_TRUE(rs.iret_user_len >= 2 && rs.iret_user_len <= sizeof(rs.iret_user_bytes));
	{
		uint8_t b[sizeof(rs.iret_user_bytes)];

		ASSERT_EQ_INT(gi_kimage_read_kva(img, rs.iret_user - SLIDE, b, rs.iret_user_len), 0);
		ASSERT_TRUE(!memcmp(b, rs.iret_user_bytes, rs.iret_user_len));
	}
	gi_kimage_free(img);
	img = NULL;
	ASSERT_EQ_INT(gi_pf_entry(gi, &gva), 0);
	ASSERT_EQ_U64(gva, pf + SLIDE);
	/* the entry code is the window, the exit paths and other text are not */
	ASSERT_TRUE(gi_in_entry_window(gi, entry + SLIDE + 0x10));
	ASSERT_TRUE(!gi_in_entry_window(gi, rs.sysret));
	ASSERT_TRUE(!gi_in_entry_window(gi, rs.iret));
	ASSERT_TRUE(!gi_in_entry_window(gi, pf + SLIDE + 0x1000000));
	/* sync_regs is outside the entry text; a sample there is in error_entry's call, slid */
	ASSERT_TRUE(!gi_in_entry_window(gi, sync + SLIDE));
	ASSERT_TRUE(gi_in_entry_save_call(gi, sync_ret + SLIDE));
	ASSERT_TRUE(!gi_in_entry_save_call(gi, sync_ret));
	ASSERT_TRUE(!gi_in_entry_save_call(gi, save + SLIDE)); /* its entry: no call made yet */
	ASSERT_TRUE(!gi_in_entry_save_call(gi, sync + SLIDE + 1));
	ASSERT_TRUE(!gi_in_entry_save_call(gi, entry + SLIDE + 0x10));
	gi_close(gi);
	gi = NULL;

	/* placed by the VMM at the same slide: confirmed */
	ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
	gi_kaslr_placed(gi, SLIDE);
	ASSERT_EQ_INT(gi_return_sites(gi, &rs), 0); /* known before the guest runs */
	ASSERT_EQ_INT(gi_kaslr_observe(gi, &fm.mem, &fm.pg, entry + SLIDE, IDT_GVA, 4095, &o), 0);
	ASSERT_EQ_INT(o.check, GI_KASLR_CONFIRMED);
	gi_close(gi);
	/* placed at the link address, but the guest runs slid: symbols follow the guest */
	ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
	gi_kaslr_placed(gi, 0);
	ASSERT_EQ_INT(gi_kaslr_observe(gi, &fm.mem, &fm.pg, entry + SLIDE, IDT_GVA, 4095, &o), 0);
	ASSERT_EQ_INT(o.check, GI_KASLR_MISMATCH);
	ASSERT_EQ_U64(gi_kaslr_slide(gi), SLIDE);
	gi_close(gi);
	fakemem_fini(&fm);

	/* another kernel's entry bytes, an IDT gate elsewhere: failed, link-time sites */
	bytes[entry & 0xfff] ^= 0xff;
	bytes[(entry & 0xfff) + 4] ^= 0xff;
	ASSERT_EQ_INT(slid_guest(&fm, bytes, page, pf + 0x1000), 0);
	ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
	ASSERT_EQ_INT(gi_kaslr_observe(gi, &fm.mem, &fm.pg, entry + SLIDE, IDT_GVA, 4095, &o), 0);
	ASSERT_EQ_INT(o.check, GI_KASLR_FAILED);
	ASSERT_EQ_INT(o.err, -EBADMSG);
	ASSERT_EQ_INT(gi_kaslr_state(gi), GI_SLIDE_FAILED);
	ASSERT_EQ_INT(gi_return_sites(gi, &rs), 0);
	ASSERT_EQ_U64(rs.iret, iret);
	ASSERT_TRUE(rs.iret_user > to_user && rs.iret_user < iret); /* link-time too */
	gi_close(gi);
	fakemem_fini(&fm);
	return TEST_OK;
}

static int read_image(void *ctx, uint64_t kva, void *dst, size_t len)
{
	return gi_kimage_read_kva(ctx, kva, dst, len);
}

/*
 * The exit tail of a slid guest: the exit-work function outside its loop, its callers and the
 * entry text's exit paths are in it, the loop and unrelated code are not; a chain is in it when
 * a caller's return address is (tested inside the call: address - 1) and no frame nearer the
 * leaf was called from the loop's body; nothing is while the slide is not known.
 */
static int test_exit_tail(void)
{
	char vmlinux[4096], btf[4096];
	struct gi_config cfg = { 0 };
	struct gi *gi = NULL;
	struct gi_exit_work w, ws[GI_EW_COPIES];
	uint64_t caller, sched, sysret, iret, callers[3], after_call, dosys_after, err_ret, pf_jmp;
	uint64_t et_lo, et_hi, jmps[256];
	size_t n = 0;
	int found = 0;

	if (test_image_config(vmlinux, btf, &cfg))
		return TEST_SKIP;
	ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "syscall_exit_to_user_mode", &caller), 0);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "schedule", &sched), 0);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "syscall_return_via_sysret", &sysret), 0);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "native_irq_return_iret", &iret), 0);
	{
		struct gi_kimage *img = NULL;
		uint64_t end;

		ASSERT_EQ_INT(gi_kimage_open(vmlinux, &img), 0);
		ASSERT_EQ_INT(gi_tail_after_call(gi_symtab(gi), read_image, img,
						 "syscall_exit_to_user_mode", "exit_to_user_mode_prepare",
						 &after_call, &end), 0);
		ASSERT_EQ_INT(gi_tail_after_call(gi_symtab(gi), read_image, img, "do_syscall_64",
						 "syscall_exit_to_user_mode", &dosys_after, &end),
			      0);
		/* asm_exc_page_fault's `jmp error_return` after its call of exc_page_fault */
		ASSERT_EQ_INT(gi_tail_after_call(gi_symtab(gi), read_image, img, "asm_exc_page_fault",
						 "error_return", &pf_jmp, &end), 0);
		ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "error_return", &err_ret), 0);
		ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "__entry_text_start", &et_lo), 0);
		ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "__entry_text_end", &et_hi), 0);
		/* every stub's jump, ascending, in the entry text; that one among them */
		ASSERT_EQ_INT(gi_jumps_to_find(read_image, img, et_lo, et_hi, err_ret, jmps, 256, &n),
			      0);
		ASSERT_TRUE(n >= 20 && n <= 256);
		for (size_t i = 0; i < n; i++) {
			ASSERT_TRUE(jmps[i] >= et_lo && jmps[i] < et_hi);
			ASSERT_TRUE(i == 0 || jmps[i] > jmps[i - 1]);
			found += jmps[i] == pf_jmp;
		}
		ASSERT_EQ_INT(found, 1);
		ASSERT_EQ_INT(gi_jumps_to_find(read_image, img, et_lo, et_hi, err_ret + 1, jmps, 256,
					       &n), -ENOENT);
		ASSERT_EQ_INT(gi_jumps_to_find(read_image, img, et_lo, et_lo + 65537, err_ret, jmps,
					       256, &n), -E2BIG);
		ASSERT_EQ_INT(gi_jumps_to_find(read_image, img, et_hi, et_lo, err_ret, jmps, 256, &n),
			      -EINVAL);
		ASSERT_EQ_INT(gi_jumps_to_find(read_image, img, et_lo, et_hi, err_ret, jmps, 2, &n), 0);
		ASSERT_TRUE(n >= 20); /* the count found, two stored */
		/* our kernel has no jump labels: its __jump_table is empty, so a nop is a nop */
		{
			struct gi_jump_label jl[4];
			size_t n_jl = 9;

			ASSERT_EQ_INT(gi_jump_labels(gi_symtab(gi), read_image, img, et_lo, et_hi, jl,
						     4, &n_jl), 0);
			ASSERT_EQ_INT((int)n_jl, 0);
		}
		gi_kimage_free(img);
	}
	/* slide not known yet */
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, caller + 1 + SLIDE, NULL, 0));
	ASSERT_TRUE(!gi_at_user_exception_return(gi, err_ret + 4 + SLIDE, STACK + 16384 - 168,
						 STACK));
	gi_kaslr_placed(gi, SLIDE);
	/* error_return (every idtentry stub's jump after its C handler) with RSP at the task's
	 * outermost pt_regs (168 bytes below the top of its 16 KiB stack): an exit to user mode
	 * past irqentry_exit's exit work; lower on the stack, an exception taken in kernel mode */
	ASSERT_TRUE(gi_at_user_exception_return(gi, err_ret + SLIDE, STACK + 16384 - 168, STACK));
	ASSERT_TRUE(gi_at_user_exception_return(gi, err_ret + 4 + SLIDE, STACK + 16384 - 168,
						STACK));
	ASSERT_TRUE(!gi_at_user_exception_return(gi, err_ret + 4 + SLIDE, STACK + 16384 - 176,
						 STACK));
	ASSERT_TRUE(!gi_at_user_exception_return(gi, err_ret + 4 + SLIDE, STACK + 16384 - 168, 0));
	ASSERT_TRUE(!gi_at_user_exception_return(gi, err_ret + 4, STACK + 16384 - 168, STACK));
	ASSERT_TRUE(!gi_at_user_exception_return(gi, err_ret - 1 + SLIDE, STACK + 16384 - 168,
						 STACK));
	ASSERT_TRUE(!gi_at_user_exception_return(gi, sched + SLIDE, STACK + 16384 - 168, STACK));
	/* ... and a stub's jump to it, not the call before it */
	ASSERT_TRUE(gi_at_user_exception_return(gi, pf_jmp + SLIDE, STACK + 16384 - 168, STACK));
	ASSERT_TRUE(!gi_at_user_exception_return(gi, pf_jmp - 1 + SLIDE, STACK + 16384 - 168,
						 STACK));
	/* ... and not the entry window: pt_regs are complete there; the stub's start is */
	ASSERT_TRUE(!gi_in_entry_window(gi, err_ret + 4 + SLIDE));
	ASSERT_TRUE(!gi_in_entry_window(gi, pf_jmp + SLIDE));
	ASSERT_TRUE(gi_in_entry_window(gi, pf_jmp - 1 + SLIDE));
	ASSERT_EQ_INT(gi_exit_work(gi, ws, &n), 0);
	ASSERT_EQ_INT((int)n, 1); /* one loop, out of line, which both exit paths call */
	w = ws[0];
	ASSERT_EQ_U64(w.prep_cli, 0);
	ASSERT_TRUE(w.func_start < w.head && w.head < w.loop_end && w.loop_end <= w.func_end);

	/* syscall_exit_to_user_mode before it calls the exit-work function (its syscall exit
	 * work: the flags not read yet): not in the tail; from that call on: in it */
	ASSERT_TRUE(after_call > caller && after_call < caller + 4096);
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, caller + 1 + SLIDE, NULL, 0));
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, after_call + SLIDE, NULL, 0));
	callers[0] = after_call + 5 + SLIDE; /* the return address of that call */
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, sched + 4 + SLIDE, callers, 1));
	/* link-time: not where the guest runs */
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, after_call, NULL, 0));
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, w.func_start, NULL, 0));
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, w.head, NULL, 0));
	/* the loop's bottom, from its last cli: the pass may have read the flags */
	ASSERT_TRUE(w.loop_cli > w.head && w.loop_cli < w.loop_end);
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, w.loop_cli - 1, NULL, 0));
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, w.loop_cli, NULL, 0));
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, w.loop_end - 1, NULL, 0));
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4 + SLIDE, NULL, 0));
	/* the two exit paths in the entry text, the interrupt return's iretq included */
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, sysret + SLIDE, NULL, 0));
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, iret + SLIDE, NULL, 0));
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, 0, NULL, 0));
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, UINT64_MAX, NULL, 0));

	/* schedule() called from the loop (before it clears the flag): not in the tail */
	callers[0] = w.head + 1;
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4 + SLIDE, callers, 1));
	/* ... with the loop's callers outside it (syscall_exit_to_user_mode, in the tail): the
	 * loop frame, nearer the leaf, decides (the pass reads the flags after schedule()) */
	callers[0] = w.head + 1;
	callers[1] = after_call + 5 + SLIDE;
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4 + SLIDE, callers, 2));
	/* schedule() called from the exit-work function's caller after the loop returned (no
	 * loop frame): in it */
	callers[0] = after_call + 5 + SLIDE;
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, sched + 4 + SLIDE, callers, 1));
	/* the loop frame outside a tail frame: the inner one decides */
	callers[1] = w.head + 1;
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, sched + 4 + SLIDE, callers, 2));
	/* the system call's exit work, called by syscall_exit_to_user_mode before its call of the
	 * exit-work function, from do_syscall_64 after its call (in the tail): not in it */
	callers[0] = caller + 2 + SLIDE;
	callers[1] = dosys_after + 5 + SLIDE;
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4 + SLIDE, callers, 2));
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, sched + 4 + SLIDE, callers + 1, 1));
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, caller + 2 + SLIDE, callers + 1, 1));
	/* return addresses that wrap or point to unrelated code */
	callers[0] = 0;
	callers[1] = sched + 8 + SLIDE;
	callers[2] = w.head + 1;
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4 + SLIDE, callers, 3));
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, w.func_start, callers, 0));
	ASSERT_TRUE(!gi_chain_in_exit_tail(NULL, w.func_start, NULL, 0));
	gi_close(gi);
	return TEST_OK;
}

/*
 * execve's point of no return in the real kernel: begin_new_exec from its call of switch_mm
 * (exec_mmap inlined: tsk->mm is the new mm there) and load_elf_binary after its call of
 * begin_new_exec, until start_thread has returned, are past it, as sampled instructions or as callers' return addresses; code
 * before them, and a return address that means begin_new_exec is still running, are not.
 */
static int test_exec_point(void)
{
	char vmlinux[4096], btf[4096];
	struct gi_config cfg = { 0 };
	struct gi *gi = NULL;
	struct gi_kimage *img = NULL;
	uint64_t sw_at, sw_after, bne_end, ld_at, ld_after, ld_end, st_at, st_after, st_end, sched;
	uint64_t callers[3];
	int err;

	if (test_image_config(vmlinux, btf, &cfg))
		return TEST_SKIP;
	ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
	ASSERT_EQ_INT(gi_kimage_open(vmlinux, &img), 0);
	err = gi_call_site(gi_symtab(gi), read_image, img, "begin_new_exec", "switch_mm", &sw_at,
			   &sw_after, &bne_end);
	if (err == -ENOENT)
		err = gi_call_site(gi_symtab(gi), read_image, img, "begin_new_exec",
				   "switch_mm_irqs_off", &sw_at, &sw_after, &bne_end);
	ASSERT_EQ_INT(err, 0);
	ASSERT_EQ_INT(gi_call_site(gi_symtab(gi), read_image, img, "load_elf_binary",
				   "begin_new_exec", &ld_at, &ld_after, &ld_end),
		      0);
	ASSERT_EQ_INT(gi_call_site(gi_symtab(gi), read_image, img, "load_elf_binary", "no_such_fn",
				   &st_at, &st_after, &st_end),
		      -ENOENT);
	ASSERT_EQ_INT(gi_call_site(gi_symtab(gi), read_image, img, "load_elf_binary",
				   "start_thread", &st_at, &st_after, &st_end),
		      0);
	gi_kimage_free(img);
	ASSERT_TRUE(st_after > ld_after && st_after < ld_end && st_end == ld_end);
	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "schedule", &sched), 0);
	ASSERT_TRUE(sw_after == sw_at + 5 && bne_end > sw_after && ld_after == ld_at + 5 &&
		    ld_end > ld_after + 0x100);

	/* slide not known yet */
	ASSERT_TRUE(!gi_chain_past_exec_switch(gi, sw_after + SLIDE, NULL, 0));
	gi_kaslr_placed(gi, SLIDE);
	ASSERT_TRUE(gi_chain_past_exec_switch(gi, sw_at + SLIDE, NULL, 0));
	ASSERT_TRUE(gi_chain_past_exec_switch(gi, bne_end - 1 + SLIDE, NULL, 0));
	ASSERT_TRUE(!gi_chain_past_exec_switch(gi, sw_at - 1 + SLIDE, NULL, 0));
	ASSERT_TRUE(!gi_chain_past_exec_switch(gi, bne_end + SLIDE, NULL, 0));
	ASSERT_TRUE(!gi_chain_past_exec_switch(gi, sw_at, NULL, 0)); /* link-time: not the guest's */
	/* inside switch_mm, called from begin_new_exec: past (tsk->mm set before the call) */
	callers[0] = sw_after + SLIDE;
	ASSERT_TRUE(gi_chain_past_exec_switch(gi, sched + 4 + SLIDE, callers, 1));
	/* a sample in load_elf_binary after begin_new_exec returned (arch_randomize_brk's call) */
	ASSERT_TRUE(gi_chain_past_exec_switch(gi, ld_after + SLIDE, NULL, 0));
	ASSERT_TRUE(!gi_chain_past_exec_switch(gi, ld_at + SLIDE, NULL, 0));
	callers[0] = ld_after + 0x40 + SLIDE;
	ASSERT_TRUE(gi_chain_past_exec_switch(gi, sched + 4 + SLIDE, callers, 1));
	/* inside start_thread: not yet the new registers; after it returned: they are */
	callers[0] = st_after + SLIDE;
	ASSERT_TRUE(gi_chain_past_exec_switch(gi, sched + 4 + SLIDE, callers, 1));
	ASSERT_TRUE(!gi_chain_past_exec_switch(gi, st_after + SLIDE, NULL, 0));
	callers[0] = st_after + 1 + SLIDE;
	ASSERT_TRUE(!gi_chain_past_exec_switch(gi, sched + 4 + SLIDE, callers, 1));
	/* begin_new_exec still running (its loader frame returns right after the call), before
	 * its switch: not past; the frame inside it decides */
	callers[0] = sw_at - 0x10 + SLIDE;
	callers[1] = ld_after + SLIDE;
	ASSERT_TRUE(!gi_chain_past_exec_switch(gi, sched + 4 + SLIDE, callers, 2));
	callers[0] = sw_after + SLIDE;
	ASSERT_TRUE(gi_chain_past_exec_switch(gi, sched + 4 + SLIDE, callers, 2));
	callers[0] = 0;
	callers[1] = UINT64_MAX;
	callers[2] = sched + SLIDE;
	ASSERT_TRUE(!gi_chain_past_exec_switch(gi, sched + 4 + SLIDE, callers, 3));
	ASSERT_TRUE(!gi_chain_past_exec_switch(NULL, sw_at + SLIDE, NULL, 0));
	gi_close(gi);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "KASLR slide from MSR_LSTAR", test_slide },
	{ "KASLR decision once per guest, slid sites and entry window", test_decision },
	{ "exit tail of a slid guest and of a callchain", test_exit_tail },
	{ "execve's point of no return: begin_new_exec's switch of mm, the loader after it",
	  test_exec_point },
};

TEST_MAIN(tests)
