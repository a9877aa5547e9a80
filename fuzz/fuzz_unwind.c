// SPDX-License-Identifier: MIT
// Fuzz target: the frame-pointer unwinders (gi_unwind_kernel, gi_unwind_user) and the thread
// identity readers (gi_current_task, gi_task_identity, gi_process_info) over a fuzzed guest.
//
// Input: a 64-byte header, then guest data.
//   u8 mode: bit 0 set: "window" guest: the harness builds page tables that map the data
//     (padded to whole pages, at most 64) at the user window FZ_UWIN (no-execute), the kernel
//     window FZ_KWIN (no-execute) and the user code window FZ_CWIN (0x400000): page i of the
//     data at each, except the pages whose bit is set in @holes (so frames can point into
//     unmapped memory). bit 0 clear: "raw" guest: the data is guest
//     RAM from gpa 0 and @cr3 selects fuzzed page tables. bit 1: LA57 (raw guests only).
//   u8 cpl; u8 rel: bit i (0 rsp, 1 rbp, 2 task, 3 gs_base) makes that value an offset into the
//     kernel window, bit i + 4 into the user window; u8 orc: bit 0 set: the kernel is also
//     walked by ORC (gi_unwind_kernel_orc) with 16 entries, one per 4 KiB of text from
//     FZ_STEXT, decoded from the first 96 bytes of guest data; bit 2 set: the kernel is also
//     walked with a table of function prologues (64 functions `push %rbp; mov %rsp,%rbp` at
//     FZ_STEXT + 0x40 * i) from rip FZ_STEXT + (rip & 0xfff); u32 holes;
//   u64 rip, rsp, rbp, task, gs_base, kernel_gs_base, cr3.
// Invariants: at most HVP_MAX_CALLCHAIN frames, ips[0] = rip, a known stop reason, and at most
// FZ_KERNEL_READS / FZ_USER_READS guest-RAM reads per walk (docs/hostile-guests.md); the user
// walk with its frames read from a copy of the stack (gi_unwind_user_copy) gives the same chain.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fuzz.h"
#include "gi_internal.h"
#include "kimage_internal.h"

#define HDR 64
#define FZ_PAGES 64
#define FZ_TABLES 10                           /* PML4, 3 tables per window */
#define FZ_UWIN 0x00007fff00000000ull          /* user window (PML4 slot 255), no-execute */
#define FZ_CWIN 0x0000000000400000ull          /* user code window (PML4 slot 0), executable */
#define FZ_KWIN 0xffffc90000000000ull          /* kernel window (vmalloc, PML4 slot 402) */
#define FZ_STEXT 0xffffffff81000000ull
#define FZ_ETEXT 0xffffffff82000000ull
#define FZ_CURRENT_TASK_OFF 0x80ull

/* One translation: at most 5 entries and a probe; a 16-byte frame read touches 2 pages. */
#define FZ_TRANSLATE_READS 6
#define FZ_READ16_READS (2 * (FZ_TRANSLATE_READS + 1))
#define FZ_READ8_READS (FZ_TRANSLATE_READS + 1)
/* Kernel: task->stack and the sampled RIP's skipped caller (a byte of code when the table says
 * ret, a stack slot), then per frame one 16-byte frame, or three 8-byte pt_regs fields and the
 * interrupted code's skipped caller (pt_regs.sp, a byte of code, a stack slot). */
#define FZ_KERNEL_READS                                                                            \
	(FZ_READ16_READS + 2 * FZ_READ8_READS + HVP_MAX_CALLCHAIN * 6 * FZ_READ8_READS)
/* ORC: per frame at most 6 8-byte reads (SP from pt_regs, indirect SP, ip, sp, cs, BP). */
#define FZ_ORC_READS (HVP_MAX_CALLCHAIN * 6 * FZ_READ8_READS)
/* User: per frame one 16-byte frame and the translation of its return address (NX check). */
#define FZ_USER_READS (HVP_MAX_CALLCHAIN * (FZ_READ16_READS + FZ_TRANSLATE_READS))

#define PTE_P 1ull
#define PTE_RW 2ull
#define PTE_US 4ull
#define PTE_NX (1ull << 63)

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/*
 * The window guest: tables at gpa 0.. (FZ_TABLES pages), data pages after them.
 * Each window: PDPT -> PD -> PT, 4 KiB pages.
 */
static uint8_t *fz_window_ram(const uint8_t *d, size_t dlen, uint32_t holes, size_t *ram_len,
			      uint64_t *cr3)
{
	size_t pages = (dlen + 4095) / 4096, len;
	const uint64_t wins[3] = { FZ_UWIN, FZ_KWIN, FZ_CWIN };
	const uint64_t leaf_nx[3] = { PTE_NX, PTE_NX, 0 };
	uint8_t *ram;

	if (pages > FZ_PAGES)
		pages = FZ_PAGES;
	if (pages == 0)
		pages = 1;
	len = (FZ_TABLES + pages) * 4096;
	ram = calloc(1, len);
	if (!ram)
		return NULL;
	memcpy(ram + FZ_TABLES * 4096, d, dlen < pages * 4096 ? dlen : pages * 4096);
	for (int w = 0; w < 3; w++) {
		uint64_t gva = wins[w];
		uint64_t pdpt = (uint64_t)(1 + 3 * w) * 4096, pd = pdpt + 4096, pt = pd + 4096;

		put64(ram + ((gva >> 39) & 511) * 8, pdpt | PTE_P | PTE_RW | PTE_US);
		put64(ram + pdpt + ((gva >> 30) & 511) * 8, pd | PTE_P | PTE_RW | PTE_US);
		put64(ram + pd + ((gva >> 21) & 511) * 8, pt | PTE_P | PTE_RW | PTE_US);
		for (size_t i = 0; i < pages; i++) {
			if (i < 32 && (holes >> i) & 1)
				continue;
			put64(ram + pt + (((gva >> 12) + i) & 511) * 8,
			      ((FZ_TABLES + i) * 4096) | PTE_P | PTE_RW | PTE_US | leaf_nx[w]);
		}
	}
	*ram_len = len;
	*cr3 = 0;
	return ram;
}

static uint64_t fz_rel(uint64_t v, uint8_t rel, int bit)
{
	if (rel & (1u << bit))
		return FZ_KWIN + (v & (FZ_PAGES * 4096 - 1));
	if (rel & (1u << (bit + 4)))
		return FZ_UWIN + (v & (FZ_PAGES * 4096 - 1));
	return v;
}

static void fz_check_chain(enum hvp_walk_stop stop, const uint64_t *ips, unsigned int n,
			   uint64_t rip)
{
	FUZZ_CHECK(stop <= HVP_WALK_BAD_FP);
	FUZZ_CHECK(n >= 1 && n <= HVP_MAX_CALLCHAIN);
	FUZZ_CHECK(ips[0] == rip);
	FUZZ_CHECK(stop != HVP_WALK_DEPTH || n == HVP_MAX_CALLCHAIN);
}

/* An ORC walk with 16 entries taken from the input, over the same memory. */
static void fz_orc_walk(struct gi *gi, const struct gmem *mem, struct fuzz_ram *ram,
			struct gi_regs *regs, const uint8_t *data, uint64_t task)
{
	uint64_t orc_ips[16], ips[HVP_MAX_CALLCHAIN];
	struct gi_orc_entry ent[16];
	enum hvp_walk_stop stop;
	unsigned int n;

	for (int i = 0; i < 16; i++) {
		const uint8_t *b = data + HDR + 6 * i;

		orc_ips[i] = FZ_STEXT + (uint64_t)i * 4096;
		ent[i] = (struct gi_orc_entry){
			.sp_offset = (int16_t)(b[0] | b[1] << 8),
			.bp_offset = (int16_t)(b[2] | b[3] << 8),
			.sp_reg = b[4] & 15, .bp_reg = b[4] >> 4,
			.type = (enum gi_orc_type)(b[5] % 5), .signal = b[5] >> 7 };
	}
	regs->r10 = fz_rel(fuzz_get64(data + 16), 1, 0); /* scratch registers: stack-ish */
	regs->r13 = regs->rdi = regs->rdx = regs->rbp;
	regs->have_scratch = data[3] & 2;
	if (gi_orc_new(orc_ips, ent, 16, &gi->orc) != 0)
		return;
	ram->reads = 0;
	stop = gi_unwind_kernel(gi, mem, regs, task, ips, HVP_MAX_CALLCHAIN, &n);
	fz_check_chain(stop, ips, n, regs->rip);
	FUZZ_CHECK(ram->reads <= FZ_ORC_READS);
	for (unsigned int i = 1; i < n; i++) /* every ip after the first is text */
		FUZZ_CHECK(ips[i] >= FZ_STEXT && ips[i] < FZ_ETEXT);
	FUZZ_LOG("orc: %u frames, stop %d, %llu reads\n", n, stop, (unsigned long long)ram->reads);
	gi_orc_free(gi->orc);
	gi->orc = NULL;
}

/* The prologue table of 64 fixed functions (built once; see the header). */
static int fz_text_read(void *ctx, uint64_t kva, void *dst, size_t len)
{
	static const uint8_t fn[8] = { 0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3, 0xcc, 0xcc };
	uint8_t *d = dst;

	(void)ctx;
	for (size_t i = 0; i < len; i++)
		d[i] = fn[(kva + i - FZ_STEXT) % 0x40 < 8 ? (kva + i - FZ_STEXT) % 0x40 : 7];
	return 0;
}

static struct gi_prologues *fz_prologues(void)
{
	static struct gi_prologues *p;
	static bool tried;
	struct ksym_entry e[65];
	struct symtab *st = NULL;
	char names[65][8];

	if (tried)
		return p;
	tried = true;
	for (int i = 0; i <= 64; i++) {
		snprintf(names[i], sizeof(names[i]), "f%d", i);
		e[i] = (struct ksym_entry){ FZ_STEXT + 0x40 * (uint64_t)i, 't', names[i] };
	}
	if (symtab_from_entries(e, 65, &st) == 0 &&
	    gi_prologues_build(st, fz_text_read, NULL, FZ_STEXT, FZ_ETEXT, &p) != 0)
		p = NULL;
	symtab_free(st);
	return p;
}

/* A frame-pointer walk with the prologue table, from a RIP in its functions. */
static void fz_prologue_walk(struct gi *gi, const struct gmem *mem, struct fuzz_ram *ram,
			     const struct gi_regs *regs, uint64_t task)
{
	struct gi_regs r = *regs;
	static uint64_t ips[HVP_MAX_CALLCHAIN], plain[HVP_MAX_CALLCHAIN];
	enum hvp_walk_stop stop, plain_stop;
	unsigned int n, n_plain, j = 0;

	r.rip = FZ_STEXT + (regs->rip & 0xfff);
	plain_stop = gi_unwind_kernel(gi, mem, &r, task, plain, HVP_MAX_CALLCHAIN, &n_plain);
	gi->prologues = fz_prologues();
	if (!gi->prologues)
		return;
	ram->reads = 0;
	stop = gi_unwind_kernel(gi, mem, &r, task, ips, HVP_MAX_CALLCHAIN, &n);
	fz_check_chain(stop, ips, n, r.rip);
	FUZZ_CHECK(ram->reads <= FZ_KERNEL_READS);
	for (unsigned int i = 1; i < n; i++) /* every ip after the first is text */
		FUZZ_CHECK(ips[i] >= FZ_STEXT && ips[i] < FZ_ETEXT);
	/* the table only adds callers: the walk without it is a subsequence of this one, with the
	 * same end unless this one ran out of depth first */
	for (unsigned int i = 0; i < n && j < n_plain; i++)
		j += ips[i] == plain[j];
	FUZZ_CHECK(stop == HVP_WALK_DEPTH || (j == n_plain && stop == plain_stop));
	FUZZ_CHECK(n >= (j < n_plain ? j : n_plain));
	FUZZ_LOG("prologues: %u frames, stop %d, %llu reads\n", n, stop,
		 (unsigned long long)ram->reads);
	stop = gi_unwind_kernel(gi, mem, &r, task, ips, 1, &n);
	FUZZ_CHECK(n == 1 && stop <= HVP_WALK_BAD_FP);
	gi->prologues = NULL; /* static: not the session's to free */
}

static void fz_mappings(struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
			uint64_t mm)
{
	static struct gi_mapping m[64];
	size_t n = 0;
	int err = gi_process_mappings(gi, mem, pg, mm, m, 64, &n);

	FUZZ_LOG("mappings: %d (%zu)\n", err, n);
	FUZZ_CHECK(err || n <= 64);
	for (size_t i = 0; !err && i < n; i++) {
		FUZZ_CHECK(m[i].start < m[i].end && !(m[i].start >> 47));
		FUZZ_CHECK(i == 0 || m[i].start >= m[i - 1].end);
		FUZZ_CHECK(memchr(m[i].path, '\0', sizeof(m[i].path)) != NULL);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct gi_layout layout = {
		.task_pid = 0x10, .task_tgid = 0x14, .task_comm = 0x20, .task_comm_len = 16,
		.task_mm = 0x30, .task_flags = 0x38, .task_stack = 0x40,
		.mm_start_code = 0x8, .mm_end_code = 0x10, .mm_exe_file = 0x18,
		.file_f_path = 0x10, .path_dentry = 0x8, .dentry_d_parent = 0x18,
		.dentry_d_name = 0x20, .qstr_name = 0x8,
		.pt_regs_size = 168, .pt_regs_ip = 128, .pt_regs_sp = 152, .pt_regs_bp = 32,
		.pt_regs_cs = 136, .pcpu_hot_current_task = UINT32_MAX,
		.mm_mt_root = 0x48, .mm_map_count = 0x60,
		.mr64_pivot = 8, .mr64_slot = 128, .mr64_slots = 16, .mr64_meta = 248,
		.ma64_pivot = 8, .ma64_slot = 80, .ma64_slots = 10, .ma64_meta = 240,
		.maple_node_size = 256, .vma_start = 0, .vma_end = 8, .vma_mm = 16,
		.vma_flags = 32, .vma_pgoff = 104, .vma_file = 112, .file_f_inode = 32,
		.inode_i_ino = 64, .inode_i_sb = 40, .sb_s_dev = 16,
	};
	uint64_t ips[HVP_MAX_CALLCHAIN], task = 0, mm = 0;
	struct fuzz_ram ram = { 0 };
	struct gmem mem = { fuzz_ram_read, &ram };
	struct gi_regs regs;
	struct hvp_thread thr;
	struct hvp_process proc;
	enum hvp_walk_stop stop;
	uint8_t *window = NULL, mode, rel;
	unsigned int n;
	struct gi *gi;
	int err;

	if (size < HDR)
		return 0;
	if (gi_new_raw(&layout, FZ_STEXT, FZ_ETEXT, FZ_CURRENT_TASK_OFF, &gi))
		return 0;
	mode = data[0];
	rel = data[2];
	memset(&regs, 0, sizeof(regs));
	regs.cpl = data[1] & 3;
	regs.rip = fuzz_get64(data + 8);
	regs.rsp = fz_rel(fuzz_get64(data + 16), rel, 0);
	regs.rbp = fz_rel(fuzz_get64(data + 24), rel, 1);
	regs.gs_base = fz_rel(fuzz_get64(data + 40), rel, 3);
	regs.kernel_gs_base = fuzz_get64(data + 48);
	regs.pg.cr0 = 1ull << 31;
	regs.pg.cr4 = 1ull << 5;
	regs.pg.efer = (1ull << 8) | (1ull << 10) | (1ull << 11);
	if (mode & 1) {
		uint32_t holes = (uint32_t)(data[4] | data[5] << 8 | data[6] << 16 |
					    (uint32_t)data[7] << 24);

		window = fz_window_ram(data + HDR, size - HDR, holes, &ram.len, &regs.pg.cr3);
		if (!window)
			goto out;
		ram.bytes = window;
	} else {
		ram.bytes = data + HDR;
		ram.len = size - HDR;
		regs.pg.cr3 = fuzz_get64(data + 56);
		if (mode & 2)
			regs.pg.cr4 |= 1ull << 12;
	}
	task = fz_rel(fuzz_get64(data + 32), rel, 2);

	ram.reads = 0;
	stop = gi_unwind_kernel(gi, &mem, &regs, task, ips, HVP_MAX_CALLCHAIN, &n);
	fz_check_chain(stop, ips, n, regs.rip);
	FUZZ_CHECK(ram.reads <= FZ_KERNEL_READS);
	FUZZ_LOG("kernel: %u frames, stop %d, %llu reads\n", n, stop, (unsigned long long)ram.reads);

	ram.reads = 0;
	stop = gi_unwind_user(&mem, &regs.pg, regs.rip, regs.rsp, regs.rbp, ips,
			      HVP_MAX_CALLCHAIN, &n);
	fz_check_chain(stop, ips, n, regs.rip);
	FUZZ_CHECK(ram.reads <= FZ_USER_READS);
	FUZZ_LOG("user: %u frames, stop %d, %llu reads\n", n, stop, (unsigned long long)ram.reads);
	{ /* the same walk with its frames from a copy of the stack: the same chain */
		static uint8_t copy_buf[HVP_USER_STACK_DEFAULT];
		static uint64_t ips2[HVP_MAX_CALLCHAIN];
		struct hvp_user_regs copy = { .stack = copy_buf };
		unsigned int n2 = 0;

		copy.regs[HVP_REG_RSP] = regs.rsp;
		if (gi_copy_user_stack(&mem, &regs.pg, regs.rsp, copy_buf, sizeof(copy_buf),
				       &copy.stack_len) == 0) {
			FUZZ_CHECK(gi_unwind_user_copy(&mem, &regs.pg, regs.rip, regs.rsp, regs.rbp,
						       &copy, ips2, HVP_MAX_CALLCHAIN, &n2) == stop);
			FUZZ_CHECK(n2 == n && memcmp(ips, ips2, n * sizeof(*ips)) == 0);
		}
	}

	if ((data[3] & 1) && size >= HDR + 16 * 6)
		fz_orc_walk(gi, &mem, &ram, &regs, data, task);
	if (data[3] & 4)
		fz_prologue_walk(gi, &mem, &ram, &regs, task);

	/* A tiny @max must hold too. */
	stop = gi_unwind_kernel(gi, &mem, &regs, task, ips, 1, &n);
	FUZZ_CHECK(n == 1 && (stop <= HVP_WALK_BAD_FP));

	if (gi_current_task(gi, &mem, &regs, &task) == 0)
		FUZZ_CHECK((task & 7) == 0 && (task >> 63));
	err = gi_task_identity(gi, &mem, &regs.pg, task, &thr, &mm);
	FUZZ_LOG("identity: %d (pid %d comm %.16s mm 0x%llx)\n", err, err ? 0 : thr.pid,
		 err ? "" : thr.comm, (unsigned long long)mm);
	if (!err) {
		FUZZ_CHECK(memchr(thr.comm, '\0', sizeof(thr.comm)) != NULL);
		FUZZ_CHECK(thr.pid >= 0 && thr.tgid >= 0);
		if (mm) {
			err = gi_process_info(gi, &mem, &regs.pg, mm, &proc);
			FUZZ_LOG("process: %d (%s)\n", err, err ? "" : proc.exe);
			if (!err)
				FUZZ_CHECK(memchr(proc.exe, '\0', sizeof(proc.exe)) != NULL);
		}
	}
	/* The VMA walker on the same pointers: whatever it returns is sorted and in the user half. */
	fz_mappings(gi, &mem, &regs.pg, mm ? mm : fz_rel(fuzz_get64(data + 48), rel, 2));
	/* The process reader on the raw pointer too (a user mm pointer, a cycle of dentries). */
	if (gi_process_info(gi, &mem, &regs.pg, fz_rel(fuzz_get64(data + 48), rel, 2), &proc) == 0)
		FUZZ_CHECK(memchr(proc.exe, '\0', sizeof(proc.exe)) != NULL);
out:
	free(window);
	gi_close(gi);
	return 0;
}
