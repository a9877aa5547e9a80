// SPDX-License-Identifier: MIT
// A fake Linux guest in a byte array for identity and unwind tests: per-CPU area, task, mm, stacks.
#include <string.h>

#include "gi_internal.h"

#include "fakekernel.h"

/* Offsets as in Linux 6.1 x86-64 (task_struct) or plausible (others). */
static const struct gi_layout fk_layout = {
	.task_pid = 912,
	.task_tgid = 916,
	.task_comm = 1400,
	.task_comm_len = 16,
	.task_mm = 768,
	.task_flags = 44,
	.task_task_works = 0x7f8,
	.task_rseq = 0x7f0,
	.task_nvcsw = 0x7e0,
	.task_nivcsw = 0x7e8,
	.task_stack = 32,
	.mm_start_code = 0x110,
	.mm_end_code = 0x118,
	.mm_exe_file = 0x388,
	.mm_pgd = 0x48,
	.mm_start_stack = 0x140,
	.file_f_path = 16,
	.path_dentry = 8,
	.dentry_d_parent = 24,
	.dentry_d_name = 32,
	.qstr_name = 8,
	.pt_regs_size = 168,
	.pt_regs_ip = 128,
	.pt_regs_sp = 152,
	.pt_regs_bp = 32,
	.pt_regs_cs = 136,
	/* the rest of x86-64 struct pt_regs (arch/x86/include/uapi/asm/ptrace.h) */
	.pt_regs_r15 = 0, .pt_regs_r14 = 8, .pt_regs_r13 = 16, .pt_regs_r12 = 24,
	.pt_regs_bx = 40, .pt_regs_r11 = 48, .pt_regs_r10 = 56, .pt_regs_r9 = 64, .pt_regs_r8 = 72,
	.pt_regs_ax = 80, .pt_regs_cx = 88, .pt_regs_dx = 96, .pt_regs_si = 104, .pt_regs_di = 112,
	.pt_regs_orig_ax = 120,
};

int fk_write_gva(struct fakekernel *fk, uint64_t gva, const void *src, size_t len)
{
	const uint8_t *p = src;

	while (len) {
		uint64_t gpa, size, chunk;

		if (gi_gva_to_gpa(&fk->fm.mem, &fk->fm.pg, gva, &gpa, &size, NULL))
			return -1;
		chunk = size - (gva & (size - 1));
		if (chunk > len)
			chunk = len;
		fakemem_wbytes(&fk->fm, gpa, p, chunk);
		p += chunk;
		gva += chunk;
		len -= chunk;
	}
	return 0;
}

int fk_w64(struct fakekernel *fk, uint64_t gva, uint64_t v)
{
	return fk_write_gva(fk, gva, &v, sizeof(v));
}

int fk_w32(struct fakekernel *fk, uint64_t gva, uint32_t v)
{
	return fk_write_gva(fk, gva, &v, sizeof(v));
}

int fk_frame(struct fakekernel *fk, uint64_t fp, uint64_t next_fp, uint64_t ret)
{
	return fk_w64(fk, fp, next_fp) || fk_w64(fk, fp + 8, ret) ? -1 : 0;
}

int fk_uchain(struct fakekernel *fk, uint64_t first, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		uint64_t fp = first + 0x20 * i;

		if (fk_frame(fk, fp, i + 1 < n ? fp + 0x20 : 0, FK_URET(i + 1)))
			return -1;
	}
	return 0;
}

int fakekernel_init(struct fakekernel *fk, unsigned int stack_pages)
{
	uint64_t task;

	memset(fk, 0, sizeof(*fk));
	if (fakemem_init(&fk->fm, 0))
		return -1;
	fk->layout = fk_layout;
	if (gi_new_raw(&fk->layout, FK_STEXT, FK_ETEXT, FK_CURRENT_TASK_OFF, &fk->gi))
		goto fail;
	if (fakemem_map(&fk->fm, FK_DIRECT, 0, 1ull << 30, 0))
		goto fail;
	for (unsigned int i = 0; i < 4; i++) {
		if (i < stack_pages &&
		    fakemem_map(&fk->fm, FK_STACK + i * 4096, FK_STACK_GPA + i * 4096, 4096, 0))
			goto fail;
		if (fakemem_map(&fk->fm, FK_IRQ_STACK + i * 4096, FK_IRQ_STACK_GPA + i * 4096, 4096,
				0) ||
		    fakemem_map(&fk->fm, FK_USER_STACK + i * 4096, FK_USER_STACK_GPA + i * 4096,
				4096, FPTE_US | FPTE_NX))
			goto fail;
	}
	for (unsigned int i = 0; i < 2; i++)
		if (fakemem_map(&fk->fm, FK_USER_TEXT + i * 4096, FK_USER_TEXT_GPA + i * 4096, 4096,
				FPTE_US))
			goto fail;

	task = fk_kva(FK_TASK_GPA);
	fk->task_kva = task;
	fk->mm_kva = fk_kva(FK_MM_GPA);
	/* CPU 0's current_task is the task. */
	fakemem_w64(&fk->fm, FK_PERCPU_GPA + FK_CURRENT_TASK_OFF, task);
	fakemem_w32(&fk->fm, FK_TASK_GPA + fk_layout.task_pid, FK_PID);
	fakemem_w32(&fk->fm, FK_TASK_GPA + fk_layout.task_tgid, FK_TGID);
	fakemem_wbytes(&fk->fm, FK_TASK_GPA + fk_layout.task_comm, FK_COMM, sizeof(FK_COMM));
	fakemem_w64(&fk->fm, FK_TASK_GPA + fk_layout.task_mm, fk->mm_kva);
	fakemem_w32(&fk->fm, FK_TASK_GPA + fk_layout.task_flags, 0x00400100);
	fakemem_w64(&fk->fm, FK_TASK_GPA + fk_layout.task_stack, FK_STACK);

	fk->regs.pg = fk->fm.pg;
	fk->regs.cpl = 0;
	fk->regs.gs_base = fk_kva(FK_PERCPU_GPA);
	fk->regs.kernel_gs_base = 0x00007f1234560000ull; /* the user's GS base */
	fk->regs.rip = FK_STEXT + 0x100;
	return 0;
fail:
	fakekernel_fini(fk);
	return -1;
}

void fakekernel_fini(struct fakekernel *fk)
{
	gi_close(fk->gi);
	fk->gi = NULL;
	fakemem_fini(&fk->fm);
}
