// SPDX-License-Identifier: MIT
// guestinfo on the real guest image named by $HVPROF_IMAGE_DIR, else the default image in the
// cache (vmlinux, vmlinux.btf, System.map);
// every test skips, with the reason, when it is not set or a file is missing.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "imagefile.h"
#include "test.h"

static int test_btf_layout(void)
{
	struct gi_layout l;
	char path[4096];

	if (test_image_file("vmlinux.btf", path, sizeof(path)))
		return TEST_SKIP;
	ASSERT_EQ_INT(gi_layout_from_btf(path, &l), 0);
	/* Relations that hold in every x86-64 kernel hvprof targets (include/linux/sched.h). */
	ASSERT_EQ_INT(l.task_comm_len, 16);
	ASSERT_EQ_INT(l.task_tgid, l.task_pid + 4);
	ASSERT_TRUE(l.task_stack < l.task_mm && l.task_mm < l.task_pid && l.task_pid < l.task_comm);
	ASSERT_TRUE(l.task_flags != UINT32_MAX);
	ASSERT_TRUE(l.task_task_works != UINT32_MAX && l.task_task_works % 8 == 0);
	/* struct pt_regs is user ABI on x86-64 (arch/x86/include/uapi/asm/ptrace.h). */
	ASSERT_EQ_INT(l.pt_regs_size, 168);
	ASSERT_EQ_INT(l.pt_regs_bp, 32);
	ASSERT_EQ_INT(l.pt_regs_ip, 128);
	ASSERT_EQ_INT(l.pt_regs_cs, 136);
	ASSERT_EQ_INT(l.pt_regs_orig_ax, 120);
	ASSERT_EQ_INT(l.pt_regs_sp, 152);
	ASSERT_EQ_INT(l.pt_regs_r15, 0);
	ASSERT_EQ_INT(l.pt_regs_bx, 40);
	ASSERT_EQ_INT(l.pt_regs_r8, 72);
	ASSERT_EQ_INT(l.pt_regs_ax, 80);
	ASSERT_EQ_INT(l.pt_regs_di, 112);
	/* Every optional field exists in 6.1. */
	ASSERT_TRUE(l.mm_start_code != UINT32_MAX && l.mm_end_code == l.mm_start_code + 8);
	/* start_code, end_code, start_data, end_data, start_brk, brk, start_stack (6.1) */
	ASSERT_EQ_INT(l.mm_start_stack, l.mm_start_code + 48);
	ASSERT_TRUE(l.mm_exe_file != UINT32_MAX && l.file_f_path != UINT32_MAX);
	ASSERT_EQ_INT(l.path_dentry, 8);
	ASSERT_TRUE(l.dentry_d_parent != UINT32_MAX && l.dentry_d_name != UINT32_MAX);
	ASSERT_EQ_INT(l.qstr_name, 8);
	printf("# task_struct: pid %u tgid %u comm %u mm %u stack %u flags %u\n", l.task_pid,
	       l.task_tgid, l.task_comm, l.task_mm, l.task_stack, l.task_flags);
	return TEST_OK;
}

static int test_gi_open(void)
{
	char vmlinux[4096], btf[4096];
	struct gi_config cfg = { 0 };
	const struct symtab *st;
	struct gi *gi = NULL;
	uint64_t stext, etext, addr, off;
	const char *name;

	if (test_image_config(vmlinux, btf, &cfg))
		return TEST_SKIP;
	ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
	st = gi_symtab(gi);
	gi_kernel_text(gi, &stext, &etext);
	ASSERT_TRUE(stext >= 0xffffffff80000000ull && stext < etext);
	ASSERT_TRUE(symtab_count(st) > 10000);
	ASSERT_EQ_INT(gi_layout(gi)->task_comm_len, 16);

	/* Entry code is NOTYPE (SYM_CODE_START): it must be found both ways. */
	static const char *const entry_syms[] = { "entry_SYSCALL_64", "asm_exc_page_fault",
						  "schedule", "do_syscall_64" };
	for (size_t i = 0; i < ARRAY_SIZE(entry_syms); i++) {
		ASSERT_EQ_INT(symtab_find(st, entry_syms[i], &addr), 0);
		ASSERT_TRUE(addr >= stext && addr < etext);
		ASSERT_EQ_INT(symtab_lookup(st, addr + 1, &name, &off), 0);
		ASSERT_EQ_STR(name, entry_syms[i]);
		ASSERT_EQ_U64(off, 1);
	}
	/* current_task is a per-CPU offset, not a text address. */
	ASSERT_EQ_INT(symtab_find(st, "current_task", &addr), 0);
	ASSERT_TRUE(addr < 0x100000);
	/* _etext is the end of text: nothing there; the byte before belongs to a function. */
	ASSERT_EQ_INT(symtab_lookup(st, etext - 1, &name, &off), 0);
	ASSERT_TRUE(strcmp(name, "_etext") != 0);
	ASSERT_TRUE(symtab_lookup(st, etext, &name, &off) != 0 || strcmp(name, "_etext") != 0);
	ASSERT_TRUE(strlen(symtab_build_id(st)) == 40);
	gi_close(gi);
	return TEST_OK;
}

/* Every global text symbol of System.map has the same address in our table. */
static int test_system_map(void)
{
	char vmlinux[4096], map[4096], line[512];
	struct symtab *st = NULL;
	size_t checked = 0;
	FILE *f;

	if (test_image_file("vmlinux", vmlinux, sizeof(vmlinux)) ||
	    test_image_file("System.map", map, sizeof(map)))
		return TEST_SKIP;
	ASSERT_EQ_INT(symtab_open_elf(vmlinux, &st), 0);
	f = fopen(map, "r");
	ASSERT_TRUE(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long want;
		char type, sym[256];
		uint64_t addr, off;
		const char *name;

		if (sscanf(line, "%llx %c %255s", &want, &type, sym) != 3 || type != 'T')
			continue;
		if (symtab_find(st, sym, &addr) != 0 || addr != want) {
			fprintf(stderr, "%s: System.map 0x%llx, symtab %s\n", sym, want,
				symtab_find(st, sym, &addr) ? "missing" : "differs");
			fclose(f);
			symtab_free(st);
			return TEST_FAIL;
		}
		/* A lookup at the address names that symbol or an alias at the same address. */
		if (symtab_lookup(st, want, &name, &off) == 0 && off != 0) {
			fprintf(stderr, "%s: lookup gives %s+0x%llx\n", sym, name,
				(unsigned long long)off);
			fclose(f);
			symtab_free(st);
			return TEST_FAIL;
		}
		checked++;
	}
	fclose(f);
	symtab_free(st);
	printf("# %zu global text symbols checked\n", checked);
	ASSERT_TRUE(checked > 1000);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "image BTF layout", test_btf_layout },
	{ "gi_open on the image kernel", test_gi_open },
	{ "symtab agrees with System.map", test_system_map },
};

TEST_MAIN(tests)
