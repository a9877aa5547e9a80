// SPDX-License-Identifier: MIT
// The guest session: kernel symbols + layout, and the current task of a vCPU from per-CPU data.
#define pr_fmt(fmt) "gi: " fmt

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

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
	*out = gi;
	return 0;
}

int gi_open(const struct gi_config *cfg, struct gi **out)
{
	struct gi *gi;
	int err;

	if (!cfg || !cfg->vmlinux || !out)
		return -EINVAL;
	gi = calloc(1, sizeof(*gi));
	if (!gi)
		return -ENOMEM;

	err = symtab_open_elf(cfg->vmlinux, &gi->st);
	if (err) {
		pr_err("failed to load kernel symbols from %s: %s", cfg->vmlinux,
		       hvp_strerror(err));
		goto err_close;
	}
	if (symtab_find(gi->st, "current_task", &gi->current_task_off) ||
	    symtab_find(gi->st, "_stext", &gi->stext_kva) ||
	    symtab_find(gi->st, "_etext", &gi->etext_kva)) {
		pr_err("%s: symbol current_task, _stext or _etext missing", cfg->vmlinux);
		err = -ENOENT;
		goto err_close;
	}
	if (gi->stext_kva >= gi->etext_kva) {
		pr_err("%s: _stext 0x%llx is not below _etext 0x%llx", cfg->vmlinux,
		       (unsigned long long)gi->stext_kva, (unsigned long long)gi->etext_kva);
		err = -EBADMSG;
		goto err_close;
	}
	err = gi_layout_from_btf(cfg->btf ? cfg->btf : cfg->vmlinux, &gi->layout);
	if (err) {
		pr_err("failed to read structure layouts from %s: %s",
		       cfg->btf ? cfg->btf : cfg->vmlinux, hvp_strerror(err));
		goto err_close;
	}
	*out = gi;
	return 0;

err_close:
	gi_close(gi);
	return err;
}

void gi_close(struct gi *gi)
{
	if (!gi)
		return;
	symtab_free(gi->st);
	free(gi);
}

const struct symtab *gi_symtab(const struct gi *gi)
{
	return gi ? gi->st : NULL;
}

const struct gi_layout *gi_layout(const struct gi *gi)
{
	return gi ? &gi->layout : NULL;
}

void gi_kernel_text(const struct gi *gi, uint64_t *start, uint64_t *end)
{
	if (start)
		*start = gi ? gi->stext_kva : 0;
	if (end)
		*end = gi ? gi->etext_kva : 0;
}

int gi_current_task(const struct gi *gi, const struct gmem *mem, const struct gi_regs *regs,
		    uint64_t *task)
{
	bool gs_ok, kgs_ok;
	uint64_t base, var_kva, value;
	int err;

	if (!gi || !mem || !regs || !task)
		return -EINVAL;

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
		base = regs->cpl == 0 ? regs->gs_base : regs->kernel_gs_base;
	else if (gs_ok)
		base = regs->gs_base;
	else if (kgs_ok)
		base = regs->kernel_gs_base;
	else
		return -ENOENT;

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
