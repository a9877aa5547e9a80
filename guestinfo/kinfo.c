// SPDX-License-Identifier: MIT
// What hvprof understands of a kernel image (hvprof kernel-info): version, symbols, BTF layout,
// return-to-user sites, and what is missing.
#define pr_fmt(fmt) "kinfo: " fmt

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "gi_internal.h"
#include "kimage_internal.h"

static void kinfo_missing(struct gi_kernel_desc *d, const char *what)
{
	size_t len = strlen(d->missing);

	snprintf(d->missing + len, sizeof(d->missing) - len, "%s%s", len ? "; " : "", what);
}

static int kinfo_read(void *ctx, uint64_t kva, void *dst, size_t len)
{
	return gi_kimage_read_kva(ctx, kva, dst, len);
}

/* The release is the first word after "Linux version " (or of the header string). */
static void kinfo_release(struct gi_kernel_desc *d)
{
	const char *src = d->banner[0] ? d->banner + strlen("Linux version ") : d->header_version;
	size_t n = strcspn(src, " ");

	if (n >= sizeof(d->release))
		n = sizeof(d->release) - 1;
	memcpy(d->release, src, n);
	d->release[n] = '\0';
}

static int kinfo_symbols(struct gi_kernel_desc *d, const struct gi_kimage *img, const char *kernel,
			 const char *symbols, struct symtab **st)
{
	const uint8_t *elf;
	size_t elf_len;
	char layout[400];
	int err;

	elf = gi_kimage_elf(img, &elf_len);
	err = symtab_open_elf_mem(elf, elf_len, kernel, st);
	if (!err) {
		d->sym_src = SYMTAB_SRC_ELF;
		snprintf(d->sym_detail, sizeof(d->sym_detail), ".symtab of %s", kernel);
		return 0;
	}
	if (err == -ENOMEM)
		return err;
	if (symbols) {
		err = symtab_open_map(symbols, st);
		if (!err) {
			d->sym_src = SYMTAB_SRC_MAP;
			snprintf(d->sym_detail, sizeof(d->sym_detail), "%s", symbols);
			return 0;
		}
		if (err == -ENOMEM)
			return err;
		kinfo_missing(d, err == -ENODATA ? "the symbols file is a stub or has only zero "
						  "addresses"
						: "the symbols file does not parse");
	}
	err = symtab_from_kimage(img, st, layout, sizeof(layout));
	if (!err) {
		d->sym_src = SYMTAB_SRC_KALLSYMS;
		snprintf(d->sym_detail, sizeof(d->sym_detail), "kallsyms in .rodata: %s", layout);
		return 0;
	}
	if (err == -ENOMEM)
		return err;
	kinfo_missing(d, "kernel symbols (no symtab, no usable map, no kallsyms tables)");
	return 0;
}

int gi_kernel_describe(const char *kernel, const char *btf, const char *symbols,
		       struct gi_kernel_desc *out)
{
	struct gi_kernel_desc *d = out;
	struct gi_kimage *img = NULL;
	struct symtab *st = NULL;
	const void *data;
	size_t size, n = 0;
	uint64_t addr, iret;
	struct gi_pv_irq pv;
	int err;

	if (!kernel || !out)
		return -EINVAL;
	memset(d, 0, sizeof(*d));
	memset(&d->layout, 0xff, sizeof(d->layout));
	err = gi_kimage_open(kernel, &img);
	if (err)
		return err;
	snprintf(d->format, sizeof(d->format), "%s", gi_kimage_is_bzimage(img) ? "bzImage" : "ELF");
	snprintf(d->compression, sizeof(d->compression), "%s", gi_kimage_compression(img));
	snprintf(d->header_version, sizeof(d->header_version), "%s", gi_kimage_header_version(img));
	if (gi_kimage_linux_banner(img, d->banner, sizeof(d->banner)) != 0 && !d->header_version[0])
		kinfo_missing(d, "version (no linux_banner, no bzImage header)");
	kinfo_release(d);

	err = kinfo_symbols(d, img, kernel, symbols, &st);
	if (err)
		goto out;
	d->n_symbols = symtab_count(st);
	{
		/* the linux_banner symbol itself when there are symbols: 6.1's vmlinux also holds
		 * a placeholder copy (without the build's number and date) the search may meet
		 * first */
		uint64_t kva, stext;
		char b[sizeof(d->banner)];
		bool sym = st && symtab_find(st, "linux_banner", &kva) == 0;

		/* a kernel: its banner, a bzImage header, or the symbols only kernels have (a
		 * debug-only vmlinux has them but no .rodata bytes to read the banner from) */
		d->is_kernel = d->banner[0] || d->header_version[0] || sym ||
			       (st && symtab_find(st, "_stext", &stext) == 0);
		if (sym && gi_kimage_read_kva(img, kva, b, sizeof(b) - 1) == 0) {
			b[sizeof(b) - 1] = '\0';
			b[strcspn(b, "\n")] = '\0';
			if (!strncmp(b, "Linux version ", 14)) {
				memcpy(d->banner, b, sizeof(d->banner));
				kinfo_release(d);
			}
		}
	}

	if (btf) {
		err = gi_layout_from_btf(btf, &d->layout);
		snprintf(d->btf_source, sizeof(d->btf_source), "%s", btf);
	} else {
		err = gi_kimage_btf(img, &data, &size);
		if (!err)
			err = gi_layout_from_btf_data(data, size, &d->layout);
		snprintf(d->btf_source, sizeof(d->btf_source), "the image's .BTF");
	}
	d->has_btf = err == 0;
	if (err == -ENOMEM)
		goto out;
	if (!d->has_btf) {
		kinfo_missing(d, btf ? "BTF layouts from the --btf file"
				     : "BTF (no .BTF section: give --btf FILE)");
		d->btf_source[0] = '\0';
	}

	if (st && symtab_find(st, "current_task", &addr) == 0)
		snprintf(d->current_task, sizeof(d->current_task), "current_task");
	else if (st && symtab_find(st, "pcpu_hot", &addr) == 0 && d->has_btf &&
		 d->layout.pcpu_hot_current_task != UINT32_MAX)
		snprintf(d->current_task, sizeof(d->current_task), "pcpu_hot.current_task");
	else
		kinfo_missing(d, "the per-CPU current task (current_task or pcpu_hot)");
	if (st && (symtab_find(st, "entry_SYSCALL_64", &addr) != 0))
		kinfo_missing(d, "entry_SYSCALL_64 (the KASLR slide cannot be found from MSR_LSTAR)");

	if (gi_kimage_is_bzimage(img)) {
		struct gi_krelocs r;
		const void *tail;
		size_t tail_len;

		if (gi_kimage_relocs(img, &tail, &tail_len) == 0 &&
		    gi_krelocs_parse(tail, tail_len, &r) == 0) {
			d->has_relocs = true;
			d->n_relocs64 = r.n64;
			d->n_relocs_inv32 = r.ninv32;
			d->n_relocs32 = r.n32;
		} else {
			kinfo_missing(d, "a KASLR relocation table (hvprof boots it at its link "
					 "address)");
		}
	}
	{
		unsigned int major = 0, minor = 0;
		struct gi_orc *orc = NULL;

		sscanf(d->release, "%u.%u", &major, &minor);
		d->orc_layout = gi_orc_layout_for(major, minor);
		err = gi_orc_load(img, d->orc_layout, &orc);
		if (err == -ENOMEM)
			goto out;
		d->n_orc = gi_orc_count(orc);
		gi_orc_free(orc);
	}
	if (!d->n_orc && st) {
		/* frame pointers: the prologues a walk from inside one needs (prologue.c) */
		struct gi_prologues *pro = NULL;
		uint64_t lo, hi;

		if (symtab_find(st, "_stext", &lo) == 0 && symtab_find(st, "_etext", &hi) == 0 &&
		    lo < hi) {
			size_t elf_len = 0;
			const uint8_t *elf = gi_kimage_elf(img, &elf_len);

			/* as gi_open */
			err = gi_prologues_make(st, kinfo_read, img, elf, elf_len, lo, hi, &pro);
			if (err == -ENOMEM)
				goto out;
			d->n_prologues = gi_prologues_count(pro);
			gi_prologues_functions(pro, &d->prologue_fns_cfi, &d->prologue_fns_code);
			gi_prologues_free(pro);
		}
	}
	gi_pv_irq_slots(st, d->has_btf ? &d->layout : NULL, &pv);
	d->ew_loops_err = st ? gi_exit_work_loops(st, kinfo_read, img, &pv, d->ew_loops,
						  &d->n_ew_loops)
			     : -ENOENT;
	for (size_t i = 0; i < d->n_ew_loops; i++) {
		const char *name;

		if (symtab_lookup(st, d->ew_loops[i].clear, &name, &d->ew_loop_off[i]) == 0)
			snprintf(d->ew_loop_symbol[i], sizeof(d->ew_loop_symbol[i]), "%s", name);
	}
	if (d->ew_loops_err == -ENOMEM) {
		err = -ENOMEM;
		goto out;
	}
	if (d->n_ew_loops) {
		struct gi_spans epi;

		err = gi_exit_epilogues_find(st, kinfo_read, img, &epi); /* as gi_open */
		if (err == -ENOMEM)
			goto out;
		d->n_epilogues = epi.n;
		for (size_t i = 0; i < epi.n; i++)
			d->epilogue_bytes += epi.r[i][1] - epi.r[i][0];
		gi_spans_free(&epi);
	}
	err = gi_exit_sites(st, kinfo_read, img, NULL, 0, 0, d->sites, GI_KINFO_MAX_SITES, &n);
	if (err == -ENOMEM)
		goto out;
	d->n_sites = n < GI_KINFO_MAX_SITES ? n : GI_KINFO_MAX_SITES;
	iret = gi_iret_site_of(d->sites, d->n_sites);
	if (st && iret) {
		struct gi_branch b = { 0 };
		const char *name;

		/* as gi_open */
		err = gi_iret_user_branch_find(st, kinfo_read, img, iret, &b);
		if (err == -ENOMEM)
			goto out;
		d->iret_user = b.kva;
		if (b.kva && symtab_lookup(st, b.kva, &name, &d->iret_user_off) == 0)
			snprintf(d->iret_user_symbol, sizeof(d->iret_user_symbol), "%s", name);
	}
	if (!d->n_sites)
		kinfo_missing(d, st ? "return-to-user sites (none found from the exit-path symbols)"
				    : "return-to-user sites (need symbols, or MSR_LSTAR at run time)");
	err = 0;
out:
	symtab_free(st);
	gi_kimage_free(img);
	return err;
}
