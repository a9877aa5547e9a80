/* SPDX-License-Identifier: MIT */
/* A fake Linux guest in a byte array for identity and unwind tests: per-CPU area, task, mm, stacks. */
#ifndef HVPROF_TESTS_FAKEKERNEL_H
#define HVPROF_TESTS_FAKEKERNEL_H

#include <stdint.h>

#include <hvprof/guestinfo.h>

#include "fakemem.h"

/* Direct map: kva = FK_DIRECT + gpa, a 1 GiB page over all of RAM. */
#define FK_DIRECT 0xffff888000000000ull
#define FK_PERCPU_GPA 0x200000ull   /* CPU 0's per-CPU area */
#define FK_PERCPU1_GPA 0x240000ull  /* CPU 1's per-CPU area */
#define FK_CURRENT_TASK_OFF 0x1ac00ull
#define FK_TASK_GPA 0x300000ull
#define FK_TASK2_GPA 0x302000ull
#define FK_MM_GPA 0x310000ull
#define FK_FILE_GPA 0x320000ull
#define FK_DENTRY_GPA 0x330000ull   /* dentries, 0x100 apart */
#define FK_NAMES_GPA 0x340000ull    /* names, 0x200 apart */
#define FK_STEXT 0xffffffff81000000ull
#define FK_ETEXT 0xffffffff81400000ull
/* The task's kernel stack (vmalloc space, 16 KiB aligned), four 4 KiB pages. */
#define FK_STACK 0xffffc90000010000ull
#define FK_STACK_GPA 0x400000ull
/* An IRQ stack, another 16 KiB region. */
#define FK_IRQ_STACK 0xffffc90000020000ull
#define FK_IRQ_STACK_GPA 0x410000ull
/* The user stack: four pages, 8 MiB and more below the top of the user half. */
#define FK_USER_STACK 0x00007fffe0000000ull
#define FK_USER_STACK_GPA 0x500000ull
#define FK_USER_TEXT 0x0000000000400000ull /* user text, executable, 2 pages */
#define FK_USER_TEXT_GPA 0x520000ull

#define FK_PID 1234
#define FK_TGID 1230
#define FK_COMM "hvprof-demo"

struct fakekernel {
	struct fakemem fm;
	struct gi_layout layout;
	struct gi *gi;
	struct gi_regs regs; /* CPL 0, GS_BASE = CPU 0's per-CPU area, pg = fm.pg */
	uint64_t task_kva;
	uint64_t mm_kva;
};

/* fakekernel_init - everything above, with one task (FK_PID, FK_COMM) and its mm. @stack_pages:
 * how many of the 4 kernel stack pages to map (from the bottom). Returns 0 or -1. */
int fakekernel_init(struct fakekernel *fk, unsigned int stack_pages);
void fakekernel_fini(struct fakekernel *fk);

static inline uint64_t fk_kva(uint64_t gpa)
{
	return FK_DIRECT + gpa;
}

/* Write through the page tables (any mapped GVA). Return 0 or -1 when unmapped. */
int fk_write_gva(struct fakekernel *fk, uint64_t gva, const void *src, size_t len);
int fk_w64(struct fakekernel *fk, uint64_t gva, uint64_t v);
int fk_w32(struct fakekernel *fk, uint64_t gva, uint32_t v);

/* fk_frame - write the frame record [fp] = next_fp, [fp + 8] = ret. */
int fk_frame(struct fakekernel *fk, uint64_t fp, uint64_t next_fp, uint64_t ret);

/* The return address of user frame @i (in the user text). */
#define FK_URET(i) (0x401000ull + 0x100 * (i))

/* fk_uchain - @n user frame records from @first, 0x20 apart, returning to FK_URET(1..n), the
 * last one ending the chain (next fp 0). Return 0 or -1. */
int fk_uchain(struct fakekernel *fk, uint64_t first, unsigned int n);

#endif /* HVPROF_TESTS_FAKEKERNEL_H */
