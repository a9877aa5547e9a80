// SPDX-License-Identifier: MIT
// hvprof kernel-info: what hvprof derives from a kernel image (glue only: guestinfo/kinfo.c
// does the work), as text or JSON.
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "cli.h"

static const char kernel_info_usage[] =
	"usage: hvprof kernel-info --kernel FILE|--image NAME|DIR [--btf FILE] [--symbols FILE]\n"
	"                          [--json]\n\n"
	"  --kernel FILE   vmlinux (ELF, stripped or not) or bzImage (xz/zstd/gzip payload)\n"
	"  --image NAME|DIR  a guest image's kernel, with the BTF its manifest names (default,\n"
	"                  debian, or an image directory: docs/guest-interface.md)\n"
	"  --btf FILE      BTF to use instead of the image's own .BTF\n"
	"  --symbols FILE  System.map or a /proc/kallsyms copy, used when the image has no symtab\n"
	"  --json          one JSON object on stdout\n";

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_off(FILE *f, const char *key, uint32_t v, bool last)
{
	fprintf(f, "\"%s\": ", key);
	if (v == UINT32_MAX)
		fputs("null", f);
	else
		fprintf(f, "%u", v);
	fputs(last ? "" : ", ", f);
}

/* The one exit-work loop every exit path reaches (the loop's own function: 6.1), or NULL (none,
 * or an exit path's own copy among them: 6.12). */
static const struct gi_exit_work *one_loop(const struct gi_kernel_desc *d)
{
	return d->n_ew_loops == 1 && !d->ew_loops[0].inlined ? &d->ew_loops[0] : NULL;
}

/*
 * "guest_visible_marks": whether the flag strategy can take this kernel (docs/guest-interface.md):
 * the breakpoints it needs (sysretq, iretq and one per exit-work loop), and whether a PVM host,
 * which keeps one of the four for its SYSCALL fix-up and ignores RF (each clear completed by
 * hvprof), has them.
 */
static void json_marks(FILE *f, const struct gi_kernel_desc *d)
{
	bool completable = d->n_ew_loops > 0;

	for (size_t i = 0; i < d->n_ew_loops; i++)
		completable &= d->ew_loops[i].clear_base != 0;
	fprintf(f, ",\n \"guest_visible_marks\": {\"possible\": %s, \"breakpoints\": %zu, "
		"\"pvm\": %s, \"handler_epilogues\": %zu, \"handler_epilogue_bytes\": %llu}",
		d->n_ew_loops ? "true" : "false", d->n_ew_loops ? d->n_ew_loops + 2 : 2,
		completable && d->n_ew_loops + 2 <= 3 ? "true" : "false", d->n_epilogues,
		(unsigned long long)d->epilogue_bytes);
}
static void print_json(const struct gi_kernel_desc *d, const char *kernel)
{
	const struct gi_exit_work *ow = one_loop(d);
	FILE *f = stdout;

	fputs("{\"kernel\": ", f);
	json_str(f, kernel);
	fputs(", \"format\": ", f);
	json_str(f, d->format);
	fputs(", \"compression\": ", f);
	json_str(f, d->compression);
	fputs(", \"release\": ", f);
	json_str(f, d->release);
	fputs(", \"banner\": ", f);
	json_str(f, d->banner);
	fputs(", \"header_version\": ", f);
	json_str(f, d->header_version);
	fputs(",\n \"symbols\": {\"source\": ", f);
	json_str(f, d->sym_src ? symtab_source_name(d->sym_src) : "none");
	fprintf(f, ", \"count\": %zu, \"detail\": ", d->n_symbols);
	json_str(f, d->sym_detail);
	fprintf(f, "},\n \"btf\": {\"found\": %s, \"source\": ", d->has_btf ? "true" : "false");
	json_str(f, d->btf_source);
	fputs(", \"task_struct\": {", f);
	json_off(f, "pid", d->layout.task_pid, false);
	json_off(f, "tgid", d->layout.task_tgid, false);
	json_off(f, "comm", d->layout.task_comm, false);
	json_off(f, "mm", d->layout.task_mm, false);
	json_off(f, "flags", d->layout.task_flags, false);
	json_off(f, "stack", d->layout.task_stack, true);
	fputs("}, ", f);
	json_off(f, "pcpu_hot.current_task", d->layout.pcpu_hot_current_task, true);
	fputs("},\n \"current_task\": ", f);
	json_str(f, d->current_task);
	fputs(",\n \"exit_sites\": [", f);
	for (size_t i = 0; i < d->n_sites; i++) {
		fprintf(f, "%s{\"kva\": \"0x%llx\", \"kind\": ", i ? ", " : "",
			(unsigned long long)d->sites[i].kva);
		json_str(f, gi_exit_kind_name(d->sites[i].kind));
		fputs(", \"symbol\": ", f);
		json_str(f, d->sites[i].symbol);
		fprintf(f, ", \"offset\": %llu}", (unsigned long long)d->sites[i].sym_off);
	}
	fputs("],\n \"iret_user_branch\": ", f);
	if (d->iret_user) {
		fprintf(f, "{\"kva\": \"0x%llx\", \"symbol\": ", (unsigned long long)d->iret_user);
		json_str(f, d->iret_user_symbol);
		fprintf(f, ", \"offset\": %llu}", (unsigned long long)d->iret_user_off);
	} else {
		fputs("null", f);
	}
	fputs(",\n \"exit_work_loop\": ", f);
	if (ow) {
		fprintf(f, "{\"head\": \"0x%llx\", \"clear\": \"0x%llx\", \"symbol\": ",
			(unsigned long long)ow->head, (unsigned long long)ow->clear);
		json_str(f, d->ew_loop_symbol[0]);
		fprintf(f, ", \"offset\": %llu, \"loop_end\": \"0x%llx\", \"notify_bit\": %u, "
			"\"handler_epilogues\": %zu, \"handler_epilogue_bytes\": %llu}",
			(unsigned long long)d->ew_loop_off[0],
			(unsigned long long)ow->loop_end, ow->notify_bit,
			d->n_epilogues, (unsigned long long)d->epilogue_bytes);
	} else {
		fprintf(f, "null, \"exit_work_loop_missing\": \"%s\"",
			d->n_ew_loops			? "inlined into the exit paths (exit_work_loops)"
			: d->ew_loops_err == -ENOTSUP ? "not on every exit path"
						      : "not found");
	}
	fputs(",\n \"exit_work_loops\": [", f);
	for (size_t i = 0; i < d->n_ew_loops; i++) {
		fprintf(f, "%s{\"head\": \"0x%llx\", \"clear\": \"0x%llx\", \"symbol\": ",
			i ? ", " : "", (unsigned long long)d->ew_loops[i].head,
			(unsigned long long)d->ew_loops[i].clear);
		json_str(f, d->ew_loop_symbol[i]);
		fprintf(f, ", \"offset\": %llu, \"loop_end\": \"0x%llx\", \"notify_bit\": %u, "
			"\"completable\": %s}",
			(unsigned long long)d->ew_loop_off[i],
			(unsigned long long)d->ew_loops[i].loop_end, d->ew_loops[i].notify_bit,
			d->ew_loops[i].clear_base ? "true" : "false");
	}
	fputs("]", f);
	json_marks(f, d);
	fprintf(f, ",\n \"kaslr_relocations\": ");
	if (d->has_relocs)
		fprintf(f, "{\"64\": %zu, \"inverse32\": %zu, \"32\": %zu, \"placed_by\": \"%s\"}",
			d->n_relocs64, d->n_relocs_inv32, d->n_relocs32,
			gi_kimage_host_boots(d->compression) ? "hvprof" : "guest");
	else
		fputs("null", f);
	fprintf(f, ",\n \"kernel_stacks\": {\"unwinder\": \"%s\", \"orc_entries\": %zu",
		d->n_orc ? "orc" : "frame pointers", d->n_orc);
	fputs(", \"orc_layout\": ", f);
	json_str(f, d->n_orc ? gi_orc_layout_name(d->orc_layout) : "");
	/* frame pointers: where RBP is not the function's frame yet (prologues, frameless code,
	 * epilogues), in how many stretches, known for how many functions from CFI and code */
	fprintf(f, ", \"frame_not_built\": {\"stretches\": %zu, \"functions_from_cfi\": %zu, "
		   "\"functions_from_code\": %zu}}",
		d->n_prologues, d->prologue_fns_cfi, d->prologue_fns_code);
	fputs(",\n \"missing\": [", f);
	{
		const char *p = d->missing;
		bool first = true;

		while (*p) {
			size_t n = strcspn(p, ";");
			char item[512];

			snprintf(item, sizeof(item), "%.*s", (int)n, p);
			fputs(first ? "" : ", ", f);
			json_str(f, item);
			first = false;
			p += n;
			while (*p == ';' || *p == ' ')
				p++;
		}
	}
	fputs("]}\n", f);
}

static void print_off(const char *name, uint32_t v)
{
	if (v == UINT32_MAX)
		printf(" %s=?", name);
	else
		printf(" %s=%u", name, v);
}

static void print_text(const struct gi_kernel_desc *d, const char *kernel)
{
	const struct gi_exit_work *ow = one_loop(d);

	printf("kernel:        %s (%s, payload %s)\n", kernel, d->format, d->compression);
	printf("version:       %s\n", d->release[0] ? d->release : "unknown");
	if (d->banner[0])
		printf("banner:        %s\n", d->banner);
	if (d->header_version[0])
		printf("bzImage:       %s\n", d->header_version);
	printf("symbols:       %zu from %s", d->n_symbols,
	       d->sym_src ? symtab_source_name(d->sym_src) : "nowhere");
	printf("%s%s\n", d->sym_detail[0] ? " — " : "", d->sym_detail);
	if (d->has_btf) {
		printf("BTF:           %s; task_struct", d->btf_source);
		print_off("pid", d->layout.task_pid);
		print_off("tgid", d->layout.task_tgid);
		print_off("comm", d->layout.task_comm);
		print_off("mm", d->layout.task_mm);
		print_off("flags", d->layout.task_flags);
		print_off("stack", d->layout.task_stack);
		putchar('\n');
	} else {
		printf("BTF:           none\n");
	}
	printf("current task:  %s\n", d->current_task[0] ? d->current_task : "unknown");
	printf("return-to-user sites: %zu\n", d->n_sites);
	for (size_t i = 0; i < d->n_sites; i++)
		printf("  0x%llx  %-8s %s+0x%llx\n", (unsigned long long)d->sites[i].kva,
		       gi_exit_kind_name(d->sites[i].kind),
		       d->sites[i].symbol[0] ? d->sites[i].symbol : "?",
		       (unsigned long long)d->sites[i].sym_off);
	if (d->iret_user)
		printf("  0x%llx  branch   %s+0x%llx: to the iretq on returns to user mode only "
		       "(the trap's breakpoint)\n", (unsigned long long)d->iret_user,
		       d->iret_user_symbol[0] ? d->iret_user_symbol : "?",
		       (unsigned long long)d->iret_user_off);
	if (ow)
		printf("exit-work loop: TIF_NOTIFY_RESUME (bit %u) cleared at 0x%llx %s+0x%llx%s: "
		       "guest-visible marks possible\n", ow->notify_bit,
		       (unsigned long long)ow->clear,
		       d->ew_loop_symbol[0][0] ? d->ew_loop_symbol[0] : "?",
		       (unsigned long long)d->ew_loop_off[0],
		       ow->clear_base ? "" : " (not completable by hvprof: RF needed)");
	else if (d->n_ew_loops) {
		bool shared = false; /* one of them the loop's own function (exit_to_user_mode_*) */

		for (size_t i = 0; i < d->n_ew_loops; i++)
			shared |= !d->ew_loops[i].inlined;
		printf("exit-work loop: %s (system calls, interrupts): guest-visible marks possible "
		       "with a breakpoint on each copy: %zu breakpoints with sysretq/iretq, which "
		       "VMX/SVM hosts have (a PVM host keeps one of its four for its SYSCALL fix-up: "
		       "there marks trap sysretq/iretq)\n",
		       shared ? "one path reaches the loop, the other holds a copy inlined"
			      : "inlined into each exit path",
		       d->n_ew_loops + 2);
		for (size_t i = 0; i < d->n_ew_loops; i++)
			printf("  copy: TIF_NOTIFY_RESUME (bit %u) cleared at 0x%llx %s+0x%llx%s\n",
			       d->ew_loops[i].notify_bit, (unsigned long long)d->ew_loops[i].clear,
			       d->ew_loop_symbol[i][0] ? d->ew_loop_symbol[i] : "?",
			       (unsigned long long)d->ew_loop_off[i],
			       d->ew_loops[i].clear_base ? "" : " (not completable by hvprof: RF "
							       "needed)");
	} else if (d->ew_loops_err == -ENOTSUP) {
		printf("exit-work loop: not on every exit path (system calls, interrupts: a path "
		       "with no loop hvprof knows, or no path known), so not one hvprof can trap "
		       "(marks trap sysretq/iretq)\n");
	} else {
		printf("exit-work loop: not found (marks trap sysretq/iretq)\n");
	}
	if (d->n_ew_loops && d->n_epilogues)
		printf("exit tail:     also %zu stretches (%llu bytes) of interrupt and exception "
		       "handlers after their call of irqentry_exit\n", d->n_epilogues,
		       (unsigned long long)d->epilogue_bytes);
	else if (d->n_ew_loops)
		printf("exit tail:     interrupt and exception handlers' code after irqentry_exit "
		       "not found (hvprof -vv says why): a sample there flags a mark that acts one "
		       "exit late\n");
	if (d->has_relocs)
		printf("KASLR:         relocation table of %zu entries (64-bit %zu, inverse 32-bit "
		       "%zu, 32-bit %zu): %s\n",
		       d->n_relocs64 + d->n_relocs_inv32 + d->n_relocs32, d->n_relocs64,
		       d->n_relocs_inv32, d->n_relocs32,
		       gi_kimage_host_boots(d->compression)
			       ? "hvprof places it at a random slide (--kaslr)"
			       : "the guest's decompressor chooses the slide when booted (hvprof "
				 "finds it from MSR_LSTAR)");
	else if (!strcmp(d->format, "ELF"))
		printf("KASLR:         none (a vmlinux runs at its link address)\n");
	if (d->n_orc)
		printf("kernel stacks: ORC tables, %zu entries (%s)\n", d->n_orc,
		       gi_orc_layout_name(d->orc_layout));
	else
		printf("kernel stacks: frame pointers (no ORC tables); where RBP is not a "
		       "function's frame yet (prologues, frameless code, epilogues: the caller is "
		       "read at RSP), known for %zu functions from the image's call-frame "
		       "information and %zu from their code (%zu stretches)\n",
		       d->prologue_fns_cfi, d->prologue_fns_code, d->n_prologues);
	printf("missing:       %s\n", d->missing[0] ? d->missing : "nothing");
}

int cmd_kernel_info(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "kernel", required_argument, NULL, 'k' },
		{ "image", required_argument, NULL, 'i' },
		{ "btf", required_argument, NULL, 'b' },
		{ "symbols", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *kernel = NULL, *btf = NULL, *symbols = NULL, *image = NULL;
	struct guest_opts g;
	struct gi_kernel_desc d;
	bool json = false;
	int c, err;

	optind = 1;
	while ((c = cli_getopt_long(argc, argv, "h", opts)) != -1) {
		switch (c) {
		case 'k':
			kernel = optarg;
			break;
		case 'i':
			image = optarg;
			break;
		case 'b':
			btf = optarg;
			break;
		case 's':
			symbols = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(kernel_info_usage, stdout);
			return EXIT_OK;
		default:
			fputs(kernel_info_usage, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc || !kernel == !image) {
		if (optind < argc)
			cli_error("kernel-info: unexpected argument '%s' (a kernel is given with "
				  "--kernel FILE)", argv[optind]);
		else
			cli_error("kernel-info: %s", kernel ? "--kernel and --image: give one"
						  : "--kernel FILE or --image NAME|DIR is required");
		return EXIT_USAGE;
	}
	/* files named on the command line must be there: a missing one is an error, not a line
	 * under "missing" */
	for (size_t i = 0; i < 2; i++) {
		const char *f = i ? symbols : btf, *opt = i ? "--symbols" : "--btf";

		if (f && access(f, R_OK) != 0) {
			err = -errno;
			cli_error("kernel-info: %s %s: %s", opt, f, hvp_strerror(err));
			return EXIT_ERROR;
		}
	}
	guest_opts_init(&g);
	if (image) {
		/* the image's vmlinux (symbols), and its BTF unless --btf names one */
		err = guest_opts_read_image(&g, image);
		if (err) {
			guest_opts_free(&g);
			return EXIT_ERROR;
		}
		kernel = g.m_kernel;
		if (!btf)
			btf = g.m_btf;
	}
	err = gi_kernel_describe(kernel, btf, symbols, &d);
	if (err) {
		cli_error("kernel-info: %s: %s", kernel,
			  err == -ENOTSUP ? "a bzImage whose payload hvprof does not decompress "
					    "(lzo, or a compression Linux does not build): the guest "
					    "decompresses it when booted; describe its vmlinux instead "
					    "(record and run take symbols from --vmlinux)"
					  : err == -EBADMSG ? "neither an x86-64 vmlinux ELF nor a bzImage "
							      "whose payload decompresses"
							    : hvp_strerror(err));
		guest_opts_free(&g);
		return EXIT_ERROR;
	}
	if (!d.is_kernel) {
		/* an ELF without a banner, a bzImage header or a kernel's symbols: a program */
		cli_error("kernel-info: %s: not a Linux kernel (an x86-64 ELF without linux_banner "
			  "or _stext)", kernel);
		guest_opts_free(&g);
		return EXIT_ERROR;
	}
	if (json)
		print_json(&d, kernel);
	else
		print_text(&d, kernel);
	guest_opts_free(&g); /* after the last use of @kernel, which may be the image's */
	return EXIT_OK;
}
