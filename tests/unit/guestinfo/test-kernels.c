// SPDX-License-Identifier: MIT
// The real kernels, when present: our test kernel's exit sites (guided by its symtab, agreeing
// with System.map) and its bzImage's kallsyms; Debian's stock 6.1 and 6.12 from their bzImages
// alone (tests/fixtures/get-stock-kernel.sh): symbols, exit sites, BTF against pahole, the
// exit-work loops and their bodies, and the exit tail gi_open makes of them. Each skips with the
// reason when a file is missing.
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>

#include "gi_internal.h"
#include "kimage_internal.h"
#include "oneloop.h"
#include "test.h"

static int stock_file(const char *flavour, const char *name, char *path, size_t size)
{
	const char *cache = getenv("HVPROF_CACHE");
	const char *home = getenv("HOME");
	struct stat st;

	if (cache && *cache)
		snprintf(path, size, "%s/stock-kernel/%s/%s", cache, flavour, name);
	else
		snprintf(path, size, "%s/.cache/hvprof/stock-kernel/%s/%s", home ? home : "/root",
			 flavour, name);
	if (stat(path, &st) != 0) {
		printf("# skip: %s missing (run tests/fixtures/get-stock-kernel.sh)\n", path);
		return -1;
	}
	return 0;
}

static int image_read(void *ctx, uint64_t kva, void *dst, size_t len)
{
	return gi_kimage_read_kva(ctx, kva, dst, len);
}

/* The site's bytes, checked independently of capstone: sysretq 48 0f 07, sysretl 0f 07,
 * iretq 48 cf (SDM vol. 2). */
static int check_site_bytes(const struct gi_kimage *img, const struct gi_exit_site *s)
{
	uint8_t b[3] = { 0 };

	if (gi_kimage_read_kva(img, s->kva, b, sizeof(b)) != 0)
		return -1;
	switch (s->kind) {
	case GI_EXIT_SYSRETQ:
		return b[0] == 0x48 && b[1] == 0x0f && b[2] == 0x07 ? 0 : -1;
	case GI_EXIT_SYSRETL:
		return b[0] == 0x0f && b[1] == 0x07 ? 0 : -1;
	case GI_EXIT_IRETQ:
		return b[0] == 0x48 && b[1] == 0xcf ? 0 : -1;
	}
	return -1;
}

/* pahole's offset of the task_struct line ending in @decl (" pid;", " comm[16];"), or -1. */
static long pahole_offset(const char *elf_path, const char *decl)
{
	char cmd[1200], line[512];
	long off = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "pahole -F btf -C task_struct '%s' 2>/dev/null", elf_path);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		/* "\tpid_t    pid;    / *  2416     4 * /": the first number is the offset */
		char *hit = strstr(line, decl), *c;

		if (hit && (c = strstr(hit, "/*")) && off < 0)
			off = strtol(c + 2, NULL, 10);
	}
	pclose(p);
	return off;
}

/* Symbols from the image's own kallsyms tables (the stock image has no symtab): text at the
 * link address, the functions hvprof relies on named both ways, the banner. *@entry:
 * entry_SYSCALL_64. */
static int stock_symbols(const char *flavour, struct gi_kimage *img, struct symtab *st,
			 uint64_t *entry)
{
	static const char *const fns[] = { "entry_SYSCALL_64", "asm_exc_page_fault", "schedule",
					   "do_syscall_64", "native_irq_return_iret" };
	uint64_t stext, etext, addr, off;
	const char *name;
	char b[14] = { 0 };

	printf("# %s: %s, %zu code symbols\n", flavour, gi_kimage_header_version(img),
	       symtab_count(st));
	ASSERT_TRUE(symtab_count(st) > 30000);
	ASSERT_EQ_INT(symtab_find(st, "_stext", &stext), 0);
	ASSERT_EQ_INT(symtab_find(st, "_etext", &etext), 0);
	ASSERT_EQ_INT(symtab_find(st, "entry_SYSCALL_64", entry), 0);
	/* kallsyms semantics: text at the link address, entry code inside it, aligned. */
	ASSERT_EQ_U64(stext, 0xffffffff81000000ull);
	ASSERT_TRUE(*entry > stext && *entry < etext && *entry % 16 == 0);
	for (size_t i = 0; i < ARRAY_SIZE(fns); i++) {
		ASSERT_EQ_INT(symtab_find(st, fns[i], &addr), 0);
		ASSERT_TRUE(addr >= stext && addr < etext);
		ASSERT_EQ_INT(symtab_lookup(st, addr, &name, &off), 0);
		ASSERT_EQ_U64(off, 0);
		if (strcmp(name, fns[i]) != 0) { /* an alias at the same address is fine */
			uint64_t a2;

			ASSERT_EQ_INT(symtab_find(st, name, &a2), 0);
			ASSERT_EQ_U64(a2, addr);
		}
	}
	/* The linux_banner symbol points at the banner text. */
	ASSERT_EQ_INT(symtab_find(st, "linux_banner", &addr), 0);
	ASSERT_EQ_INT(gi_kimage_read_kva(img, addr, b, 13), 0);
	ASSERT_EQ_STR(b, "Linux version");
	return TEST_OK;
}

/* Exit sites: with symbols, and from the entry address @entry alone (the LSTAR route, at a
 * slide of 2 MiB): both kinds, each found from LSTAR one of those found with symbols. */
static int stock_sites(struct gi_kimage *img, struct symtab *st, uint64_t entry)
{
	struct gi_exit_site sites[16], nosym[16];
	size_t n = 0, m = 0;
	int kinds = 0;

	ASSERT_EQ_INT(gi_exit_sites(st, image_read, img, NULL, 0, 0, sites, 16, &n), 0);
	for (size_t i = 0; i < n && i < 16; i++) {
		printf("# site 0x%llx %s %s+0x%llx\n", (unsigned long long)sites[i].kva,
		       gi_exit_kind_name(sites[i].kind), sites[i].symbol,
		       (unsigned long long)sites[i].sym_off);
		ASSERT_EQ_INT(check_site_bytes(img, &sites[i]), 0);
		kinds |= 1 << sites[i].kind;
	}
	ASSERT_TRUE(kinds & (1 << GI_EXIT_SYSRETQ));
	ASSERT_TRUE(kinds & (1 << GI_EXIT_IRETQ));
	ASSERT_EQ_INT(gi_exit_sites(NULL, image_read, img, &entry, 1, 0x200000, nosym, 16, &m), 0);
	kinds = 0;
	for (size_t i = 0; i < m && i < 16; i++) {
		bool found = false;

		ASSERT_EQ_STR(nosym[i].symbol, "");
		kinds |= 1 << nosym[i].kind;
		for (size_t k = 0; k < n; k++)
			found |= sites[k].kva + 0x200000 == nosym[i].kva;
		ASSERT_TRUE(found);
	}
	ASSERT_TRUE(kinds & (1 << GI_EXIT_SYSRETQ));
	ASSERT_TRUE(kinds & (1 << GI_EXIT_IRETQ));
	return TEST_OK;
}

/* Is @at in one of @w's body ranges? */
static bool in_body(const struct gi_exit_work *w, uint64_t at)
{
	for (unsigned int r = 0; r < w->n_body && r < GI_EW_BODY; r++)
		if (at >= w->body[r][0] && at < w->body[r][1])
			return true;
	return false;
}

/* The exit paths, in the order gi_exit_work_loops gives 6.12's copies. */
static const char *const paths612[2] = { "syscall_exit_to_user_mode",
					 "irqentry_exit_to_user_mode" };

/*
 * 6.12's copies in the exit paths @cp[0..2): each in its own path, its clear as hvprof
 * completes it; its body holds its head, clear and last cli, and the call of task_work_run out
 * of line past its end (it jumps back in); not the call of __ct_user_enter (context tracking,
 * after the last read, reached by a static key) that lies between its head and its end.
 */
static int stock_612_copies(struct gi_kimage *img, struct symtab *st,
			    const struct gi_exit_work *cp)
{
	uint8_t b[16];

	for (size_t k = 0; k < 2; k++) {
		const struct gi_exit_work *w = &cp[k];
		uint64_t at_off, fn, ct_at, after, end, tw_at;
		const char *in;

		ASSERT_EQ_INT(symtab_lookup(st, w->clear, &in, &at_off), 0);
		printf("# 6.12's copy %zu: clear at %s+0x%llx, irq disable before the first read "
		       "at +0x%llx\n", k, in, (unsigned long long)at_off,
		       (unsigned long long)(w->prep_cli ? w->prep_cli - w->func_start : 0));
		ASSERT_TRUE(!strcmp(in, paths612[k]));
		ASSERT_EQ_INT(symtab_find(st, paths612[k], &fn), 0);
		ASSERT_EQ_U64(w->func_start, fn);
		ASSERT_TRUE(w->head < w->clear && w->clear < w->loop_end);
		ASSERT_TRUE(w->loop_cli > w->head && w->loop_cli < w->loop_end);
		ASSERT_TRUE(w->clear_base != 0 && w->clear_size == 1);
		ASSERT_EQ_INT(gi_kimage_read_kva(img, w->clear, b, w->clear_end - w->clear), 0);
		ASSERT_TRUE(!memcmp(b, w->clear_bytes, w->clear_end - w->clear));

		ASSERT_EQ_INT(gi_call_site(st, image_read, img, paths612[k], "__ct_user_enter",
					   &ct_at, &after, &end), 0);
		ASSERT_EQ_INT(gi_call_site(st, image_read, img, paths612[k], "task_work_run",
					   &tw_at, &after, &end), 0);
		ASSERT_TRUE(tw_at >= w->loop_end);
		ASSERT_TRUE(ct_at > w->head && ct_at < w->loop_end);
		ASSERT_TRUE(w->n_body >= 1 && w->n_body <= GI_EW_BODY);
		for (unsigned int r = 0; r < w->n_body; r++) {
			printf("# 6.12's copy %zu: body [+0x%llx, +0x%llx)\n", k,
			       (unsigned long long)(w->body[r][0] - w->func_start),
			       (unsigned long long)(w->body[r][1] - w->func_start));
			ASSERT_TRUE(w->body[r][0] >= w->func_start && w->body[r][1] <= w->func_end);
		}
		ASSERT_TRUE(in_body(w, w->head) && in_body(w, w->clear) && in_body(w, w->loop_cli));
		ASSERT_TRUE(!in_body(w, ct_at) && in_body(w, tw_at));
	}
	return TEST_OK;
}

/*
 * 6.12 (Debian's newer): exit_to_user_mode_loop is __always_inline, each exit path holds its
 * own copy and the out-of-line one is called by nothing: no one loop (one breakpoint on that
 * copy would see no return), but a loop per path, one breakpoint each.
 */
static int stock_612_loops(struct gi_kimage *img, struct symtab *st, const struct gi_pv_irq *pv)
{
	struct gi_exit_work w, cp[GI_EW_COPIES];
	struct gi_jump_label jl[64];
	uint64_t at, after, end, ct_at;
	size_t n_cp = 0, n_jl = 0;
	bool to_ct = false;
	uint8_t b[8];

	ASSERT_EQ_INT(one_loop(st, image_read, img, pv, &w), -ENOTSUP);
	ASSERT_EQ_U64(w.clear, 0);
	for (size_t k = 0; k < 2; k++)
		ASSERT_EQ_INT(gi_call_site(st, image_read, img, paths612[k],
					   "exit_to_user_mode_loop", &at, &after, &end), -ENOENT);
	ASSERT_EQ_INT(gi_exit_work_loops(st, image_read, img, pv, cp, &n_cp), 0);
	ASSERT_EQ_INT((int)n_cp, 2);
	ASSERT_EQ_INT(stock_612_copies(img, st, cp), TEST_OK);
	/* the static keys' sites in the system call path, from the kernel's __jump_table: nops
	 * or jumps in the image, one of them the way to context tracking's user entry */
	ASSERT_EQ_INT(gi_call_site(st, image_read, img, paths612[0], "__ct_user_enter", &ct_at,
				   &after, &end), 0);
	ASSERT_EQ_INT(gi_jump_labels(st, image_read, img, cp[0].func_start, cp[0].func_end, jl, 64,
				     &n_jl), 0);
	printf("# 6.12's system call path: %zu static keys' sites\n", n_jl);
	ASSERT_TRUE(n_jl >= 3);
	for (size_t j = 0; j < n_jl; j++) {
		ASSERT_EQ_INT(gi_kimage_read_kva(img, jl[j].code, b, 5), 0);
		ASSERT_TRUE(!memcmp(b, "\x0f\x1f\x44\x00\x00", 5) || !memcmp(b, "\x66\x90", 2) ||
			    b[0] == 0xe9 || b[0] == 0xeb);
		to_ct |= jl[j].target <= ct_at && ct_at - jl[j].target < 16;
	}
	ASSERT_TRUE(to_ct);
	/* the system call path disables interrupts (a pv_ops call) after its exit work, then
	 * reads the flags; the interrupt path, entered with them disabled, reads them at once */
	ASSERT_TRUE(cp[0].prep_cli > cp[0].func_start && cp[0].prep_cli < cp[0].head);
	ASSERT_EQ_INT(gi_kimage_read_kva(img, cp[0].prep_cli, b, 6), 0);
	ASSERT_TRUE(b[0] == 0xff && b[1] == 0x15);
	ASSERT_EQ_U64(cp[1].prep_cli, 0);
	return TEST_OK;
}

/*
 * 6.1: both paths call exit_to_user_mode_prepare, that one loop. Its body holds its head,
 * clear and last cli, and its call of task_work_run out of line past its end; not the exit
 * work after the read that lies between its head and its end (switch_fpu_return's call). Its
 * clear as hvprof completes it (lock and byte [reg], 0xfd).
 */
static int stock_61_loop(struct gi_kimage *img, struct symtab *st, const struct gi_pv_irq *pv)
{
	struct gi_exit_work w, bare, cp[GI_EW_COPIES];
	uint64_t tw_at, after, end, fpu_at;
	size_t n_cp = 9;
	uint8_t b[16];

	ASSERT_EQ_INT(one_loop(st, image_read, img, pv, &w), 0);
	ASSERT_EQ_INT(gi_exit_work_loops(st, image_read, img, pv, cp, &n_cp), 0);
	ASSERT_EQ_INT((int)n_cp, 1);
	ASSERT_EQ_U64(cp[0].clear, w.clear);
	ASSERT_EQ_U64(cp[0].prep_cli, 0);
	printf("# exit-work loop [0x%llx, 0x%llx), clear at 0x%llx, last irq disable 0x%llx; "
	       "without the pv_ops slots: %s\n", (unsigned long long)w.head,
	       (unsigned long long)w.loop_end, (unsigned long long)w.clear,
	       (unsigned long long)w.loop_cli,
	       one_loop(st, image_read, img, NULL, &bare) ? "not found" : "found");
	ASSERT_TRUE(w.head < w.clear && w.clear < w.loop_end && w.loop_cli > w.head);
	ASSERT_EQ_INT(gi_call_site(st, image_read, img, "exit_to_user_mode_prepare",
				   "task_work_run", &tw_at, &after, &end), 0);
	ASSERT_TRUE(tw_at >= w.loop_end);
	ASSERT_EQ_INT(gi_call_site(st, image_read, img, "exit_to_user_mode_prepare",
				   "switch_fpu_return", &fpu_at, &after, &end), 0);
	ASSERT_TRUE(fpu_at > w.head && fpu_at < w.loop_end);
	ASSERT_TRUE(w.n_body >= 1 && w.n_body <= GI_EW_BODY);
	for (unsigned int r = 0; r < w.n_body; r++)
		printf("# 6.1's loop body [+0x%llx, +0x%llx)\n",
		       (unsigned long long)(w.body[r][0] - w.func_start),
		       (unsigned long long)(w.body[r][1] - w.func_start));
	ASSERT_TRUE(in_body(&w, w.head) && in_body(&w, w.clear) && in_body(&w, w.loop_cli));
	ASSERT_TRUE(in_body(&w, tw_at) && !in_body(&w, fpu_at));
	ASSERT_TRUE(w.clear_base != 0 && w.clear_size == 1 && (w.clear_imm & 0xff) == 0xfd);
	ASSERT_EQ_INT(gi_kimage_read_kva(img, w.clear, b, w.clear_end - w.clear), 0);
	ASSERT_TRUE(b[0] == 0xf0 && !memcmp(b, w.clear_bytes, w.clear_end - w.clear));
	return TEST_OK;
}

/* The image's BTF offsets of task_struct.pid and comm against pahole's on the same ELF bytes
 * (skipped, with the reason, without pahole). */
static int stock_btf_pahole(struct gi_kimage *img, const struct gi_layout *l)
{
	char tmp[64] = "/tmp/hvprof-test-vmlinux-XXXXXX";
	size_t elf_len;
	const uint8_t *elf = gi_kimage_elf(img, &elf_len);
	long pid_off, comm_off;
	int fd = mkstemp(tmp);

	ASSERT_TRUE(fd >= 0);
	ASSERT_TRUE(write(fd, elf, elf_len) == (ssize_t)elf_len);
	close(fd);
	pid_off = pahole_offset(tmp, " pid;");
	comm_off = pahole_offset(tmp, " comm[16];");
	unlink(tmp);
	if (pid_off < 0 || comm_off < 0) {
		printf("# pahole not available: BTF offsets pid=%u comm=%u not compared\n",
		       l->task_pid, l->task_comm);
		return TEST_OK;
	}
	printf("# pahole: task_struct.pid %ld comm %ld; ours %u %u\n", pid_off, comm_off,
	       l->task_pid, l->task_comm);
	ASSERT_EQ_INT(l->task_pid, pid_off);
	ASSERT_EQ_INT(l->task_comm, comm_off);
	return TEST_OK;
}

/* One of Debian's stock kernels (@flavour "6.1", "newer": 6.12, or "cloud": 6.1's for cloud
 * images), from its bzImage alone. */
static int stock_kernel(const char *flavour)
{
	char vmlinuz[4096];
	struct gi_kimage *img = NULL;
	struct symtab *st = NULL;
	enum symtab_source src;
	struct gi_pv_irq pv;
	struct gi_layout l;
	const void *btf;
	size_t btf_size;
	uint64_t entry;

	if (stock_file(flavour, "vmlinuz", vmlinuz, sizeof(vmlinuz)))
		return TEST_SKIP;
	ASSERT_EQ_INT(gi_kimage_open(vmlinuz, &img), 0);
	ASSERT_TRUE(gi_kimage_is_bzimage(img));
	/* Debian's payloads: xz (6.1), zstd (6.12), lz4 (6.1 cloud) */
	ASSERT_EQ_STR(gi_kimage_compression(img), !strcmp(flavour, "6.1")     ? "xz"
						  : !strcmp(flavour, "newer") ? "zstd"
									      : "lz4");
	ASSERT_EQ_INT(symtab_open_kernel(vmlinuz, &st, &src), 0);
	ASSERT_EQ_INT(src, SYMTAB_SRC_KALLSYMS);
	ASSERT_EQ_INT(stock_symbols(flavour, img, st, &entry), TEST_OK);
	ASSERT_EQ_INT(stock_sites(img, st, entry), TEST_OK);
	/* BTF from the image itself */
	ASSERT_EQ_INT(gi_kimage_btf(img, &btf, &btf_size), 0);
	ASSERT_EQ_INT(gi_layout_from_btf_data(btf, btf_size, &l), 0);
	ASSERT_EQ_INT(l.task_comm_len, 16);
	ASSERT_EQ_INT(l.task_tgid, l.task_pid + 4);
	/* The exit-work loop: Debian's kernels are CONFIG_PARAVIRT_XXL, their loop headed by a
	 * call of pv_ops.irq.irq_enable (slot from BTF), found so */
	ASSERT_TRUE(l.pv_irq_enable != UINT32_MAX && l.pv_irq_disable != UINT32_MAX);
	gi_pv_irq_slots(st, &l, &pv);
	ASSERT_TRUE(pv.enable != 0 && pv.disable == pv.enable - 8);
	if (!strcmp(flavour, "newer"))
		ASSERT_EQ_INT(stock_612_loops(img, st, &pv), TEST_OK);
	else
		ASSERT_EQ_INT(stock_61_loop(img, st, &pv), TEST_OK);
	ASSERT_EQ_INT(stock_btf_pahole(img, &l), TEST_OK);
	symtab_free(st);
	gi_kimage_free(img);
	return TEST_OK;
}

static int test_stock_61(void)
{
	return stock_kernel("6.1");
}

static int test_stock_newer(void)
{
	return stock_kernel("newer");
}

static int test_stock_cloud(void)
{
	return stock_kernel("cloud");
}

/*
 * Debian's 6.12, its loops inlined into the exit paths @w (link-time; the slide placed at 0):
 * the exit tail around each copy. The system call path before its irq disable (its exit work)
 * reads the flags still; from there to the loop, and after it, it has read them; the loop's
 * body reads them again, its bottom from the last cli may have done so; a frame called from
 * the body is before the read whatever its callers.
 */
static int stock_612_tail(struct gi *gi, const struct gi_exit_work *w, const char *vmlinuz)
{
	uint64_t sched, callers[2], ct_at, ct_after, dosys_at, dosys_after, tw_at, tw_after, end;
	struct gi_kimage *img = NULL;

	ASSERT_EQ_INT(symtab_find(gi_symtab(gi), "schedule", &sched), 0);
	ASSERT_EQ_INT(gi_kimage_open(vmlinuz, &img), 0);
	ASSERT_EQ_INT(gi_call_site(gi_symtab(gi), image_read, img, "syscall_exit_to_user_mode",
				   "__ct_user_enter", &ct_at, &ct_after, &end), 0);
	ASSERT_EQ_INT(gi_call_site(gi_symtab(gi), image_read, img, "do_syscall_64",
				   "syscall_exit_to_user_mode", &dosys_at, &dosys_after, &end), 0);
	ASSERT_EQ_INT(gi_call_site(gi_symtab(gi), image_read, img, "syscall_exit_to_user_mode",
				   "task_work_run", &tw_at, &tw_after, &end), 0);
	gi_kimage_free(img);
	gi_kaslr_placed(gi, 0);
	for (size_t k = 0; k < 2; k++) {
		ASSERT_TRUE(!gi_chain_in_exit_tail(gi, w[k].head, NULL, 0));
		ASSERT_TRUE(!gi_chain_in_exit_tail(gi, w[k].loop_cli - 1, NULL, 0));
		ASSERT_TRUE(gi_chain_in_exit_tail(gi, w[k].loop_cli, NULL, 0));
		ASSERT_TRUE(gi_chain_in_exit_tail(gi, w[k].loop_end, NULL, 0));
		ASSERT_TRUE(gi_chain_in_exit_tail(gi, w[k].head - 1, NULL, 0));
		callers[0] = w[k].head + 6; /* returning into the body, after its sti call */
		callers[1] = w[k].loop_end + 1;
		ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4, callers, 2));
	}
	/* syscall_exit_to_user_mode: its exit work, then the irq disable and the read */
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, w[0].func_start + 1, NULL, 0));
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, w[0].prep_cli - 1, NULL, 0));
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, w[0].prep_cli, NULL, 0));
	callers[0] = w[0].prep_cli; /* the return of the call before it */
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4, callers, 1));
	callers[0] = w[0].prep_cli + 6; /* past the disable: a call after the read */
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, sched + 4, callers, 1));
	/* irqentry_exit_to_user_mode reads them at once: all before its loop is tail */
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, w[1].func_start + 1, NULL, 0));
	/* context tracking's user entry (nohz_full), called between the copy's head and its end
	 * but after the last read: not the loop's, so the outer frame, do_syscall_64 after its
	 * call of the exit path, decides (tail) */
	ASSERT_TRUE(ct_at > w[0].head && ct_at < w[0].loop_end);
	callers[0] = ct_after;
	callers[1] = dosys_after;
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, sched + 4, callers, 2));
	/* ... and so does that frame alone (the walk stopped there): it is in the exit path
	 * outside the loop's body, past the first read */
	ASSERT_TRUE(gi_chain_in_exit_tail(gi, sched + 4, callers, 1));
	/* a loop whose body is not known holds nothing before the read: its head is tail */
	{
		unsigned int nb = gi->exit_work[0].n_body;

		gi->exit_work[0].n_body = 0;
		gi_exit_ranges(gi);
		ASSERT_TRUE(gi_chain_in_exit_tail(gi, w[0].head, NULL, 0));
		gi->exit_work[0].n_body = nb;
		gi_exit_ranges(gi);
		ASSERT_TRUE(!gi_chain_in_exit_tail(gi, w[0].head, NULL, 0));
	}
	callers[0] = w[0].head + 6; /* from the loop's body: before the read, whatever is outer */
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4, callers, 2));
	callers[0] = tw_after; /* task work, run out of line past the loop's end: the same */
	ASSERT_TRUE(tw_after > w[0].loop_end);
	ASSERT_TRUE(!gi_chain_in_exit_tail(gi, sched + 4, callers, 2));
	return TEST_OK;
}

/* gi_open on the stock bzImage alone: symbols, BTF, current task, sites; no other file. */
static int test_stock_gi_open(void)
{
	static const char *const flavours[] = { "6.1", "newer", "cloud" };
	int ran = 0;

	for (size_t i = 0; i < ARRAY_SIZE(flavours); i++) {
		char vmlinuz[4096];
		struct gi_config cfg = { 0 };
		struct gi *gi = NULL;
		size_t n = 0;

		if (stock_file(flavours[i], "vmlinuz", vmlinuz, sizeof(vmlinuz)))
			continue;
		cfg.vmlinux = vmlinuz;
		ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
		ASSERT_EQ_INT(gi_symbol_source(gi), SYMTAB_SRC_KALLSYMS);
		(void)gi_exit_sites_of(gi, &n);
		ASSERT_TRUE(n >= 2);
		/* the exit-work loop, through pv_ops, on 6.1 (both gi_open and kernel-info find
		 * it); inlined into each exit path on 6.12: a loop per path */
		{
			struct gi_kernel_desc d;
			struct gi_exit_work w[GI_EW_COPIES];
			bool inlined = !strcmp(flavours[i], "newer");
			size_t n_w = 9;

			ASSERT_EQ_INT(gi_exit_work(gi, w, &n_w), -EAGAIN); /* no slide yet */
			ASSERT_EQ_INT((int)n_w, 0);
			ASSERT_EQ_INT(gi_exit_work_link(gi, w, &n_w), 0);
			ASSERT_EQ_INT((int)n_w, inlined ? 2 : 1);
			ASSERT_EQ_INT(gi_kernel_describe(vmlinuz, NULL, NULL, &d), 0);
			ASSERT_EQ_INT(d.ew_loops_err, 0);
			ASSERT_EQ_INT((int)d.n_ew_loops, (int)n_w);
			for (size_t k = 0; k < n_w; k++) {
				ASSERT_EQ_U64(d.ew_loops[k].clear, w[k].clear);
				/* 6.12's both exit paths' own copies; 6.1's the function's */
				ASSERT_TRUE(d.ew_loops[k].inlined == inlined && w[k].inlined == inlined);
			}
			if (inlined)
				ASSERT_TRUE(!strcmp(d.ew_loop_symbol[0], "syscall_exit_to_user_mode") &&
					    !strcmp(d.ew_loop_symbol[1], "irqentry_exit_to_user_mode"));
			else
				ASSERT_TRUE(!strcmp(d.ew_loop_symbol[0], "exit_to_user_mode_prepare"));
			if (inlined)
				ASSERT_EQ_INT(stock_612_tail(gi, w, vmlinuz), TEST_OK);
		}
		gi_close(gi);
		ran++;
	}
	return ran ? TEST_OK : TEST_SKIP;
}

/* The test kernel: exit sites guided by its symtab, agreeing with System.map. */
static int no_memory(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	(void)ctx;
	(void)gpa;
	(void)dst;
	(void)len;
	return -EFAULT;
}

static int test_image_kernel(void)
{
	const char *cache = getenv("HVPROF_CACHE"), *home = getenv("HOME");
	char vmlinux[4096], map[4096];
	struct gi_kimage *img = NULL;
	struct symtab *st = NULL, *mst = NULL;
	struct gi_exit_site sites[16];
	size_t n = 0;
	int kinds = 0;
	struct stat sb;

	snprintf(vmlinux, sizeof(vmlinux), "%s/images/default/vmlinux",
		 cache && *cache ? cache : home ? "" : "/root");
	if (!(cache && *cache))
		snprintf(vmlinux, sizeof(vmlinux), "%s/.cache/hvprof/images/default/vmlinux",
			 home ? home : "/root");
	snprintf(map, sizeof(map), "%.*s/System.map", (int)(strlen(vmlinux) - 8), vmlinux);
	if (stat(vmlinux, &sb) != 0 || stat(map, &sb) != 0) {
		printf("# skip: %s or System.map missing (images/build-image.sh)\n", vmlinux);
		return TEST_SKIP;
	}
	ASSERT_EQ_INT(gi_kimage_open(vmlinux, &img), 0);
	ASSERT_EQ_INT(symtab_open_elf(vmlinux, &st), 0);
	ASSERT_EQ_INT(symtab_open_map(map, &mst), 0);
	ASSERT_EQ_INT(gi_exit_sites(st, image_read, img, NULL, 0, 0, sites, 16, &n), 0);
	for (size_t i = 0; i < n && i < 16; i++) {
		const char *name;
		uint64_t off;

		printf("# site 0x%llx %s %s+0x%llx\n", (unsigned long long)sites[i].kva,
		       gi_exit_kind_name(sites[i].kind), sites[i].symbol,
		       (unsigned long long)sites[i].sym_off);
		ASSERT_EQ_INT(check_site_bytes(img, &sites[i]), 0);
		kinds |= 1 << sites[i].kind;
		/* System.map names the same place. */
		ASSERT_EQ_INT(symtab_lookup(mst, sites[i].kva, &name, &off), 0);
		ASSERT_EQ_U64(off, sites[i].sym_off);
	}
	ASSERT_TRUE(kinds & (1 << GI_EXIT_SYSRETQ));
	ASSERT_TRUE(kinds & (1 << GI_EXIT_IRETQ));
	symtab_free(st);
	symtab_free(mst);
	gi_kimage_free(img);
	{
		/* Its bzImage (a legacy boot sector: code and text, no NUL in the first 256
		 * bytes) is an image, not a map file: report names kernel frames from its
		 * kallsyms tables, as record does. */
		char bz[4096];
		enum symtab_source src = SYMTAB_SRC_NONE;
		const char *name;
		uint64_t addr, off;

		snprintf(bz, sizeof(bz), "%.*s/bzImage", (int)(strlen(vmlinux) - 8), vmlinux);
		if (stat(bz, &sb) == 0) {
			ASSERT_EQ_INT(symtab_open_kernel(bz, &st, &src), 0);
			ASSERT_EQ_INT(src, SYMTAB_SRC_KALLSYMS);
			ASSERT_EQ_INT(symtab_find(st, "entry_SYSCALL_64", &addr), 0);
			ASSERT_EQ_INT(symtab_lookup(st, addr + 1, &name, &off), 0);
			ASSERT_EQ_STR(name, "entry_SYSCALL_64");
			symtab_free(st);
			{
				/* no BTF inside (the test kernel's is a separate file): a
				 * session with symbols only, no thread identity */
				struct gi_config cfg = { .vmlinux = bz };
				struct gmem mem = { .read = no_memory };
				struct gi_paging pg = { 0 };
				struct hvp_process proc;
				struct hvp_thread thr;
				struct gi *gi = NULL;

				ASSERT_EQ_INT(gi_open(&cfg, &gi), 0);
				ASSERT_TRUE(!gi_has_btf(gi));
				ASSERT_EQ_INT(gi_symbol_source(gi), SYMTAB_SRC_KALLSYMS);
				ASSERT_EQ_INT(gi_task_identity(gi, &mem, &pg, 0xffff888000100000ull,
							       &thr, NULL),
					      -ENODATA);
				ASSERT_EQ_INT(gi_process_info(gi, &mem, &pg, 0xffff888000100000ull,
							      &proc),
					      -ENODATA);
				gi_close(gi);
			}
		}
	}
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "stock Debian 6.1 bzImage", test_stock_61 },
	{ "stock Debian newer (6.12) bzImage", test_stock_newer },
	{ "stock Debian 6.1 cloud bzImage (lz4)", test_stock_cloud },
	{ "gi_open on a stock bzImage alone", test_stock_gi_open },
	{ "test kernel exit sites", test_image_kernel },
};

TEST_MAIN(tests)
