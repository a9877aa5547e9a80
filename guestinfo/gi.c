// SPDX-License-Identifier: MIT
// The guest session: kernel symbols + layout, and the current task of a vCPU from per-CPU data.
#define pr_fmt(fmt) "gi: " fmt

#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "gi_internal.h"
#include "pgwalk_internal.h"

int gi_new_raw(const struct gi_layout *layout, uint64_t stext_kva, uint64_t etext_kva,
	       uint64_t current_task_off, struct gi **out)
{
	struct gi *gi;

	if (!layout || !out || stext_kva >= etext_kva)
		return -EINVAL;
	gi = calloc(1, sizeof(*gi));
	if (!gi)
		return -ENOMEM;
	gi->layout = *layout;
	gi->stext_kva = stext_kva;
	gi->etext_kva = etext_kva;
	gi->current_task_off = current_task_off;
	gi->have_layout = true;
	gi->slide_state = GI_SLIDE_KNOWN; /* the addresses given are the running guest's */
	gi->tss_off = UINT64_MAX;
	*out = gi;
	return 0;
}

/* The end of symbol @name at @start: the next address another symbol starts at, looked for up
 * to @max bytes on; the code's own inner labels, named after it (entry_SYSCALL_compat's
 * entry_SYSCALL_compat_after_hwframe), do not end it. Return: 0 and *@end; -ENOENT none within
 * @max. */
static int sym_end(const struct symtab *st, const char *name, uint64_t start, uint64_t max,
		   uint64_t *end)
{
	size_t len = strlen(name);
	const char *at;
	uint64_t off;

	for (uint64_t e = start + 1; e < start + max; e++)
		if (symtab_lookup(st, e, &at, &off) == 0 && off == 0 && strcmp(at, name) != 0 &&
		    !(strncmp(at, name, len) == 0 && at[len] == '_')) {
			*end = e;
			return 0;
		}
	return -ENOENT;
}

/* The int3 entry (asm_exc_int3; int3 before 5.8), whose pt_regs' ip is one past an int3 and so
 * not an instruction of the image (gi_unwind_kernel): gi->int3_entry, 0/0 when not found. */
static void find_int3_entry(struct gi *gi)
{
	static const char *const names[] = { "asm_exc_int3", "int3" };

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (symtab_find(gi->st, names[i], &gi->int3_entry[0]) == 0 &&
		    sym_end(gi->st, names[i], gi->int3_entry[0], 4096, &gi->int3_entry[1]) == 0)
			return;
	gi->int3_entry[0] = gi->int3_entry[1] = 0;
}

void gi_find_exit_paths(struct gi *gi)
{
	uint64_t a, b;

	if (symtab_find(gi->st, "syscall_return_via_sysret", &a) == 0 &&
	    symtab_find(gi->st, "entry_SYSRETQ_end", &b) == 0) {
		gi->exit1_start = a;
		gi->exit1_end = b;
	}
	if (symtab_find(gi->st, "swapgs_restore_regs_and_return_to_usermode", &a) == 0 &&
	    symtab_find(gi->st, "native_irq_return_iret", &b) == 0) {
		gi->exit2_start = a;
		gi->exit2_end = b + 2; /* iretq is 48 cf */
	}
	if (symtab_find(gi->st, "error_return", &a) == 0 &&
	    sym_end(gi->st, "error_return", a, 256, &b) == 0) {
		gi->exc_ret_start = a;
		gi->exc_ret_end = b;
	}
	/* the calls after which the user registers are saved below the iret frame */
	for (size_t i = 0; i < ARRAY_SIZE(gi->save_regs_kva); i++) {
		static const char *const name[] = { "error_entry", "paranoid_entry",
						    "xen_error_entry" };

		if (symtab_find(gi->st, name[i], &a) == 0) {
			gi->save_regs_kva[i] = a;
			if (sym_end(gi->st, name[i], a, 1024, &b) == 0)
				gi->save_regs_end[i] = b;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(gi->compat_entry); i++) {
		static const char *const name[] = { "entry_INT80_compat", "entry_SYSENTER_compat",
						    "entry_SYSCALL_compat" };

		if (symtab_find(gi->st, name[i], &a) == 0 &&
		    sym_end(gi->st, name[i], a, 4096, &b) == 0) {
			gi->compat_entry[i][0] = a;
			gi->compat_entry[i][1] = b;
		}
	}
	if (symtab_find(gi->st, "asm_exc_page_fault", &a) == 0) {
		gi->pf_entry_kva = a;
		gi->idt_pf_kva = a;
	} else if (symtab_find(gi->st, "page_fault", &a) == 0) {
		gi->pf_entry_kva = a;
	}
}

static int gi_read_image(void *ctx, uint64_t kva, void *dst, size_t len)
{
	return gi_kimage_read_kva(ctx, kva, dst, len);
}

void gi_exit_ranges(struct gi *gi)
{
	_Static_assert(GI_TAIL_RANGES == 2 * GI_EW_COPIES +
					     sizeof(gi->exit_callers) / sizeof(gi->exit_callers[0]) +
					     sizeof(gi->call_tails) / sizeof(gi->call_tails[0]) + 3,
		       "room for every tail range added below");
	_Static_assert(GI_BEFORE_RANGES == GI_EW_COPIES * (GI_EW_BODY + 1) +
					       sizeof(gi->exit_before) / sizeof(gi->exit_before[0]),
		       "room for every range before the read");
	struct gi_ranges *t = &gi->tail, *b = &gi->before_read;

	memset(t, 0, sizeof(*t));
	memset(b, 0, sizeof(*b));
	memset(&gi->ew_funcs, 0, sizeof(gi->ew_funcs));
	if (!gi->n_exit_work)
		return;
	for (size_t i = 0; i < gi->n_exit_work; i++) {
		const struct gi_exit_work *w = &gi->exit_work[i];

		/* before its first read (the irq disable before it, where known) the thread
		 * reads its flags still: before_read */
		gi_ranges_add(t, w->prep_cli ? w->prep_cli : w->func_start, w->head);
		gi_ranges_add(t, w->loop_end, w->func_end);
		if (w->prep_cli)
			gi_ranges_add(b, w->func_start, w->prep_cli);
		/* SAFETY: n_body <= GI_EW_BODY (ew_body) */
		for (unsigned int k = 0; k < w->n_body && k < GI_EW_BODY; k++)
			gi_ranges_add(b, w->body[k][0], w->body[k][1]);
		gi_ranges_add(&gi->ew_funcs, w->func_start, w->func_end);
	}
	for (size_t i = 0; i < sizeof(gi->exit_before) / sizeof(gi->exit_before[0]); i++)
		gi_ranges_add(b, gi->exit_before[i][0], gi->exit_before[i][1]);
	for (size_t i = 0; i < sizeof(gi->exit_callers) / sizeof(gi->exit_callers[0]); i++)
		gi_ranges_add(t, gi->exit_callers[i][0], gi->exit_callers[i][1]);
	for (size_t i = 0; i < sizeof(gi->call_tails) / sizeof(gi->call_tails[0]); i++)
		gi_ranges_add(t, gi->call_tails[i][0], gi->call_tails[i][1]);
	gi_ranges_add(t, gi->syscall_tail[0], gi->syscall_tail[1]);
	gi_ranges_add(t, gi->exit1_start, gi->exit1_end);
	gi_ranges_add(t, gi->exit2_start, gi->exit2_end);
}

/* Is @kva (link-time) the start of one of the exit-work loops' functions? */
static bool exit_work_function(const struct gi *gi, uint64_t kva)
{
	for (size_t i = 0; i < gi->n_exit_work; i++)
		if (gi->exit_work[i].func_start == kva)
			return true;
	return false;
}

/*
 * The exit functions around the loops (exit_callers, exit_before): a caller that calls a loop's
 * function reads the flags there, so only from that call on is it in the tail (the system
 * call's exit work before it, audit, rseq, is not); one that calls none (exit_to_user_mode, or
 * one with the function inlined) is in it whole; one that holds a loop itself (6.12's paths)
 * is that loop's function, whose ranges gi_exit_ranges adds.
 */
static void exit_callers_find(struct gi *gi, struct gi_kimage *img)
{
	static const char *const callers[4] = { "syscall_exit_to_user_mode",
						"syscall_exit_to_user_mode_work",
						"irqentry_exit_to_user_mode", "exit_to_user_mode" };
	_Static_assert(sizeof(callers) / sizeof(callers[0]) ==
			       sizeof(gi->exit_callers) / sizeof(gi->exit_callers[0]),
		       "a range per caller");

	for (size_t i = 0; i < 4; i++) {
		uint64_t a, e;
		bool calls = false;

		if (symtab_find(gi->st, callers[i], &a) != 0 || exit_work_function(gi, a))
			continue;
		for (size_t k = 0; k < gi->n_exit_work && !calls; k++) {
			const char *name;
			uint64_t off;

			calls = symtab_lookup(gi->st, gi->exit_work[k].func_start, &name, &off) == 0 &&
				off == 0 &&
				gi_tail_after_call(gi->st, gi_read_image, img, callers[i], name,
						   &gi->exit_callers[i][0],
						   &gi->exit_callers[i][1]) == 0;
		}
		if (calls) {
			gi->exit_before[i][0] = a;
			gi->exit_before[i][1] = gi->exit_callers[i][0];
		} else if (sym_end(gi->st, callers[i], a, 4096, &e) == 0) {
			gi->exit_callers[i][0] = a;
			gi->exit_callers[i][1] = e;
		}
	}
}

/* Symbols in hvprof's order of preference: vmlinux symtab, a map file, the image's kallsyms. */
static int gi_open_symbols(struct gi *gi, const struct gi_config *cfg, const struct gi_kimage *img)
{
	const uint8_t *elf;
	size_t elf_len;
	int err;

	elf = gi_kimage_elf(img, &elf_len);
	err = symtab_open_elf_mem(elf, elf_len, cfg->vmlinux, &gi->st);
	if (!err) {
		gi->src = SYMTAB_SRC_ELF;
		return 0;
	}
	if (err != -ENODATA)
		return err;
	if (cfg->symbols) {
		err = symtab_open_map(cfg->symbols, &gi->st);
		if (!err) {
			gi->src = SYMTAB_SRC_MAP;
			return 0;
		}
		pr_warn("no symbols from %s (%s): trying the kallsyms tables of %s", cfg->symbols,
			hvp_strerror(err), cfg->vmlinux);
	}
	err = symtab_from_kimage(img, &gi->st, NULL, 0);
	if (!err)
		gi->src = SYMTAB_SRC_KALLSYMS;
	return err;
}

static int gi_open_btf(struct gi *gi, const struct gi_config *cfg, const struct gi_kimage *img)
{
	const void *data;
	size_t size;
	int err;

	if (cfg->btf)
		return gi_layout_from_btf(cfg->btf, &gi->layout);
	err = gi_kimage_btf(img, &data, &size);
	if (err)
		return err;
	return gi_layout_from_btf_data(data, size, &gi->layout);
}

int gi_open(const struct gi_config *cfg, struct gi **out)
{
	struct gi_kimage *img = NULL;
	struct gi *gi;
	uint64_t hot, iret;
	struct gi_pv_irq pv;
	size_t n = 0;
	int err;

	if (!cfg || !cfg->vmlinux || !out)
		return -EINVAL;
	gi = calloc(1, sizeof(*gi));
	if (!gi)
		return -ENOMEM;

	err = gi_kimage_open(cfg->vmlinux, &img);
	if (!err)
		err = gi_open_symbols(gi, cfg, img);
	if (err) {
		pr_err("failed to load kernel symbols from %s: %s", cfg->vmlinux,
		       hvp_strerror(err));
		goto err_close;
	}
	if (symtab_find(gi->st, "_stext", &gi->stext_kva) ||
	    symtab_find(gi->st, "_etext", &gi->etext_kva)) {
		pr_err("%s: symbol _stext or _etext missing", cfg->vmlinux);
		err = -ENOENT;
		goto err_close;
	}
	if (gi->stext_kva >= gi->etext_kva) {
		pr_err("%s: _stext 0x%llx is not below _etext 0x%llx", cfg->vmlinux,
		       (unsigned long long)gi->stext_kva, (unsigned long long)gi->etext_kva);
		err = -EBADMSG;
		goto err_close;
	}
	if (symtab_find(gi->st, "_sinittext", &gi->sinittext_kva) ||
	    symtab_find(gi->st, "_einittext", &gi->einittext_kva) ||
	    gi->sinittext_kva >= gi->einittext_kva)
		gi->sinittext_kva = gi->einittext_kva = 0; /* optional: stacks end at init code */
	if (symtab_find(gi->st, "__entry_text_start", &gi->entry_text_start) ||
	    symtab_find(gi->st, "__entry_text_end", &gi->entry_text_end))
		gi->entry_text_start = gi->entry_text_end = 0;
	gi_find_exit_paths(gi);
	if (gi->exc_ret_end && gi->entry_text_end) {
		size_t njmp = 0;

		/* optional: without them, only error_return itself counts (kentry.c) */
		if (gi_jumps_to_find(gi_read_image, img, gi->entry_text_start, gi->entry_text_end,
				     gi->exc_ret_start, gi->exc_ret_jmps, GI_MAX_EXC_RET_JMPS,
				     &njmp) == 0)
			gi->n_exc_ret_jmps =
			    njmp < GI_MAX_EXC_RET_JMPS ? (unsigned int)njmp : GI_MAX_EXC_RET_JMPS;
	}
	err = gi_open_btf(gi, cfg, img);
	if (err == -ENODATA && !cfg->btf) {
		/* A kernel built without CONFIG_DEBUG_INFO_BTF: symbols, but no structure
		 * layouts, so no thread identity (gi_has_btf() says so to the caller). */
		memset(&gi->layout, 0xff, sizeof(gi->layout));
		gi->have_layout = false;
		err = 0;
	} else if (err) {
		pr_err("failed to read structure layouts from %s: %s",
		       cfg->btf ? cfg->btf : cfg->vmlinux, hvp_strerror(err));
		goto err_close;
	} else {
		gi->have_layout = true;
	}
	/* The per-CPU current task: current_task up to 6.1, pcpu_hot.current_task from 6.2. */
	if (symtab_find(gi->st, "current_task", &gi->current_task_off) != 0) {
		if (!gi->have_layout) {
			gi->no_current_task = true; /* 6.2+ without BTF: pcpu_hot's layout unknown */
		} else if (symtab_find(gi->st, "pcpu_hot", &hot) != 0 ||
		    gi->layout.pcpu_hot_current_task == UINT32_MAX) {
			pr_err("%s: symbol current_task missing (nor pcpu_hot with BTF)",
			       cfg->vmlinux);
			err = -ENOENT;
			goto err_close;
		}
		gi->current_task_off = hot + gi->layout.pcpu_hot_current_task;
	}
	if (symtab_find(gi->st, "cpu_tss_rw", &gi->tss_off) != 0)
		gi->tss_off = UINT64_MAX;
	if (symtab_find(gi->st, "entry_SYSCALL_64", &gi->entry_kva) == 0 &&
	    gi_kimage_read_kva(img, gi->entry_kva, gi->entry_bytes, sizeof(gi->entry_bytes)) != 0)
		gi->entry_kva = 0;
	{
		/* Kernels built for ORC have no frame pointers: unwind with their tables. */
		char banner[256];
		unsigned int major = 0, minor = 0;

		if (gi_kimage_linux_banner(img, banner, sizeof(banner)) == 0)
			sscanf(banner, "Linux version %u.%u", &major, &minor);
		err = gi_orc_load(img, gi_orc_layout_for(major, minor), &gi->orc);
		if (err == -ENOMEM)
			goto err_close;
		if (err && err != -ENODATA)
			pr_warn("%s: ORC tables unusable (%s): kernel stacks by frame pointers",
				cfg->vmlinux, hvp_strerror(err));
		if (gi->orc)
			pr_info("%s: %zu ORC entries (%s): kernel stacks unwound with them",
				cfg->vmlinux, gi_orc_count(gi->orc),
				gi_orc_layout_name(gi_orc_layout_for(major, minor)));
		err = 0;
	}
	gi_pv_irq_slots(gi->st, gi->have_layout ? &gi->layout : NULL, &pv);
	gi->exit_work_err = gi_exit_work_loops(gi->st, gi_read_image, img, &pv, gi->exit_work,
					       &gi->n_exit_work);
	if (gi->exit_work_err == -ENOMEM) {
		err = -ENOMEM;
		goto err_close;
	}
	if (gi->n_exit_work) {
		static const char *const tails[4][2] = {
			{ "do_syscall_64", "syscall_exit_to_user_mode" },
			{ "irqentry_exit", "irqentry_exit_to_user_mode" },
			{ "do_int80_syscall_32", "syscall_exit_to_user_mode" },
			{ "do_fast_syscall_32", "syscall_exit_to_user_mode" },
		};

		exit_callers_find(gi, img);
		if (gi_syscall_tail_find(gi->st, gi_read_image, img, &gi->syscall_tail[0],
					 &gi->syscall_tail[1]) != 0)
			gi->syscall_tail[0] = gi->syscall_tail[1] = 0;
		for (size_t i = 0; i < 4; i++)
			if (gi_tail_after_call(gi->st, gi_read_image, img, tails[i][0], tails[i][1],
					       &gi->call_tails[i][0], &gi->call_tails[i][1]) != 0)
				gi->call_tails[i][0] = gi->call_tails[i][1] = 0;
	}
	gi_exit_ranges(gi);
	if (gi->n_exit_work) {
		err = gi_exit_epilogues_find(gi->st, gi_read_image, img, &gi->epilogues);
		if (err == -ENOMEM)
			goto err_close;
		err = 0; /* none found: such samples are flagged, as before */
	}
	gi_find_exec_points(gi, gi_read_image, img);
	if (!gi->orc) {
		size_t elf_len = 0, n_cfi, n_code;
		const uint8_t *elf = gi_kimage_elf(img, &elf_len);

		find_int3_entry(gi);
		/* frame-pointer kernels: where RBP is still the caller's frame (unwind.c): from the
		 * CFI where the image has it, else from the code */
		err = gi_prologues_make(gi->st, gi_read_image, img, elf, elf_len, gi->stext_kva,
					gi->etext_kva, &gi->prologues);
		if (err == -ENOMEM)
			goto err_close;
		if (err) {
			pr_warn("%s: function prologues not found (%s): a sample at a function's "
				"first instructions loses its caller", cfg->vmlinux,
				hvp_strerror(err));
		} else {
			gi_prologues_functions(gi->prologues, &n_cfi, &n_code);
			pr_debug(LOG_KSYM, "%s: frames not built: %zu stretches (%zu functions from "
				 "CFI, %zu from code)", cfg->vmlinux,
				 gi_prologues_count(gi->prologues), n_cfi, n_code);
		}
		err = 0;
	}
	if (gi_exit_sites(gi->st, gi_read_image, img, NULL, 0, 0, gi->sites, GI_MAX_EXIT_SITES,
			  &n) == 0)
		gi->n_sites = n < GI_MAX_EXIT_SITES ? n : GI_MAX_EXIT_SITES;
	else
		pr_warn("%s: no return-to-user instruction found on the exit paths", cfg->vmlinux);
	iret = gi_iret_site_of(gi->sites, gi->n_sites);
	if (iret) {
		err = gi_iret_user_branch_find(gi->st, gi_read_image, img, iret, &gi->iret_user);
		if (err == -ENOMEM)
			goto err_close;
		err = 0; /* not found: the iretq itself traps returns to user (and to the kernel) */
	}
	gi_kimage_free(img);
	*out = gi;
	return 0;

err_close:
	gi_kimage_free(img);
	gi_close(gi);
	return err;
}

enum symtab_source gi_symbol_source(const struct gi *gi)
{
	return gi ? gi->src : SYMTAB_SRC_NONE;
}

const struct gi_exit_site *gi_exit_sites_of(const struct gi *gi, size_t *n)
{
	if (n)
		*n = gi ? gi->n_sites : 0;
	return gi ? gi->sites : NULL;
}

void gi_set_kaslr_slide(struct gi *gi, uint64_t slide)
{
	if (!gi)
		return;
	__atomic_store_n(&gi->slide, slide, __ATOMIC_RELAXED);
	__atomic_store_n(&gi->slide_state, GI_SLIDE_KNOWN, __ATOMIC_RELEASE);
}

enum gi_slide_state gi_kaslr_state(const struct gi *gi)
{
	return gi ? (enum gi_slide_state)__atomic_load_n(&gi->slide_state, __ATOMIC_ACQUIRE)
		  : GI_SLIDE_UNKNOWN;
}

void gi_set_kaslr_failed(struct gi *gi)
{
	int unknown = GI_SLIDE_UNKNOWN;

	if (gi)
		__atomic_compare_exchange_n(&gi->slide_state, &unknown, GI_SLIDE_FAILED, false,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

uint64_t gi_kaslr_slide(const struct gi *gi)
{
	return gi ? gi_slide(gi) : 0;
}

int gi_lookup_kva(const struct gi *gi, uint64_t kva, const char **name, uint64_t *offset)
{
	if (!gi || !gi->st || !name)
		return -EINVAL;
	return symtab_lookup(gi->st, kva - gi_slide(gi), name, offset);
}

int gi_kaslr_slide_from_lstar(const struct gi *gi, const struct gmem *mem,
			      const struct gi_paging *pg, uint64_t lstar, uint64_t *slide)
{
	static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
	static const uint8_t swapgs[3] = { 0x0f, 0x01, 0xf8 };
	uint8_t bytes[sizeof(gi->entry_bytes)];
	size_t skip = 0;
	uint64_t s;
	int err;

	if (!gi || !mem || !pg || !slide)
		return -EINVAL;
	if (!gi->entry_kva)
		return -ENOENT;
	if (lstar < gi->entry_kva || !gi_is_kernel_gva(pg, lstar))
		return -ERANGE;
	s = lstar - gi->entry_kva;
	/* x86-64 KASLR moves the kernel by a multiple of CONFIG_PHYSICAL_ALIGN (>= 4 KiB). */
	if (s & 0xfff)
		return -EBADMSG;
	/* The entry starts with SWAPGS, after an ENDBR64 with IBT (arch/x86/entry/entry_64.S). */
	err = gi_read_gva(mem, pg, lstar, bytes, sizeof(bytes));
	if (err)
		return err;
	if (!memcmp(gi->entry_bytes, endbr64, sizeof(endbr64)))
		skip = sizeof(endbr64);
	if (memcmp(gi->entry_bytes + skip, swapgs, sizeof(swapgs)) == 0 &&
	    memcmp(bytes + skip, swapgs, sizeof(swapgs)) != 0)
		return -EBADMSG;
	for (size_t i = 0; i < gi->n_sites; i++) {
		uint8_t insn[2];
		uint64_t at = gi->sites[i].kva + s;
		/* sysretq 48 0f 07 / sysretl 0f 07 / iretq 48 cf: check the last two bytes. */
		static const uint8_t sysret[2] = { 0x0f, 0x07 }, iretq[2] = { 0x48, 0xcf };
		const uint8_t *want = gi->sites[i].kind == GI_EXIT_IRETQ ? iretq : sysret;

		if (gi->sites[i].kind == GI_EXIT_SYSRETQ)
			at++;
		err = gi_read_gva(mem, pg, at, insn, sizeof(insn));
		if (err)
			return err;
		if (memcmp(insn, want, sizeof(insn)) != 0)
			return -EBADMSG;
	}
	*slide = s;
	return 0;
}

void gi_close(struct gi *gi)
{
	if (!gi)
		return;
	symtab_free(gi->st);
	gi_orc_free(gi->orc);
	gi_prologues_free(gi->prologues);
	gi_spans_free(&gi->epilogues);
	free(gi);
}

const char *gi_kernel_unwinder(const struct gi *gi)
{
	return gi && gi->orc ? "orc" : "frame pointers";
}

const struct symtab *gi_symtab(const struct gi *gi)
{
	return gi ? gi->st : NULL;
}

bool gi_has_btf(const struct gi *gi)
{
	return gi && gi->have_layout;
}

const struct gi_layout *gi_layout(const struct gi *gi)
{
	return gi ? &gi->layout : NULL;
}

void gi_kernel_text(const struct gi *gi, uint64_t *start, uint64_t *end)
{
	if (start)
		*start = gi ? gi->stext_kva + gi_slide(gi) : 0;
	if (end)
		*end = gi ? gi->etext_kva + gi_slide(gi) : 0;
}

int gi_percpu_base(const struct gi_regs *regs, uint64_t *base)
{
	bool gs_ok, kgs_ok;

	/*
	 * x86-64 keeps the per-CPU base in GS_BASE while in the kernel and in KERNEL_GS_BASE
	 * while in user mode; SWAPGS exchanges them, so around entry and exit either register
	 * may hold it. The user one is a user address (or 0), so take the kernel address; when
	 * both are kernel addresses (a kernel thread's sample, or user code with GS set to a
	 * kernel-looking value), the CPL says which one is live.
	 */
	gs_ok = gi_is_kernel_gva(&regs->pg, regs->gs_base);
	kgs_ok = gi_is_kernel_gva(&regs->pg, regs->kernel_gs_base);
	if (gs_ok && kgs_ok)
		*base = regs->cpl == 0 ? regs->gs_base : regs->kernel_gs_base;
	else if (gs_ok)
		*base = regs->gs_base;
	else if (kgs_ok)
		*base = regs->kernel_gs_base;
	else
		return -ENOENT;
	return 0;
}

int gi_current_task(const struct gi *gi, const struct gmem *mem, const struct gi_regs *regs,
		    uint64_t *task)
{
	uint64_t base, var_kva, value;
	int err;

	if (!gi || !mem || !regs || !task)
		return -EINVAL;
	if (gi->no_current_task)
		return -ENODATA;
	err = gi_percpu_base(regs, &base);
	if (err)
		return err;
	/* current_task's symbol value is its offset in the zero-based per-CPU section. */
	if (__builtin_add_overflow(base, gi->current_task_off, &var_kva))
		return -ERANGE;
	err = gi_read_gva(mem, &regs->pg, var_kva, &value, sizeof(value));
	if (err)
		return err;
	if (!gi_is_kernel_gva(&regs->pg, value) || (value & 7))
		return -EBADMSG;
	*task = value;
	return 0;
}
