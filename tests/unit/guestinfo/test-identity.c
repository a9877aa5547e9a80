// SPDX-License-Identifier: MIT
// Unit tests of gi_current_task, gi_task_identity and gi_process_info on a fake guest in memory.
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fakekernel.h"
#include "gi_internal.h"
#include "test.h"

/* ---------------------------------------------------------------- current task */

struct cur_row {
	const char *name;
	uint8_t cpl;
	uint64_t gs_base;        /* 0: keep; values are kvas or user addresses */
	uint64_t kernel_gs_base;
	int err;
	int want_cpu;            /* 0: CPU 0's task, 1: CPU 1's task */
};

#define PCPU0 (FK_DIRECT + FK_PERCPU_GPA)
#define PCPU1 (FK_DIRECT + FK_PERCPU1_GPA)
#define USER_GS 0x00007f1234560000ull

static const struct cur_row cur_rows[] = {
	{ "kernel mode: GS_BASE", 0, PCPU0, USER_GS, 0, 0 },
	{ "user mode: KERNEL_GS_BASE", 3, USER_GS, PCPU0, 0, 0 },
	{ "user GS 0 before SWAPGS", 0, 0, PCPU0, 0, 0 },
	{ "both kernel, CPL 0: GS_BASE", 0, PCPU1, PCPU0, 0, 1 },
	{ "both kernel, CPL 3: KERNEL_GS_BASE", 3, PCPU1, PCPU0, 0, 0 },
	{ "neither is a kernel address", 0, USER_GS, 0, -ENOENT, 0 },
	{ "non-canonical GS_BASE", 0, 0xffff000000001000ull, 0x1000, -ENOENT, 0 },
	{ "per-CPU base unmapped", 0, 0xffffc90000f00000ull, 0, -EFAULT, 0 },
	{ "per-CPU variable holds junk", 0, FK_DIRECT + 0x280000, 0, -EBADMSG, 0 },
	{ "per-CPU base wraps", 0, 0xffffffffffff0000ull, 0, -ERANGE, 0 },
};

static int test_current_task(void)
{
	struct fakekernel fk;
	int ret = TEST_FAIL;
	uint64_t task2;

	if (fakekernel_init(&fk, 4))
		return TEST_FAIL;
	task2 = fk_kva(FK_TASK2_GPA);
	fakemem_w64(&fk.fm, FK_PERCPU1_GPA + FK_CURRENT_TASK_OFF, task2);
	fakemem_w64(&fk.fm, 0x280000 + FK_CURRENT_TASK_OFF, 0x00007fff00001000ull);
	for (size_t i = 0; i < ARRAY_SIZE(cur_rows); i++) {
		const struct cur_row *row = &cur_rows[i];
		struct gi_regs regs = fk.regs;
		uint64_t task = 0;
		int err;

		regs.cpl = row->cpl;
		regs.gs_base = row->gs_base;
		regs.kernel_gs_base = row->kernel_gs_base;
		err = gi_current_task(fk.gi, &fk.fm.mem, &regs, &task);
		if (err != row->err) {
			fprintf(stderr, "%s: err %d, expected %d\n", row->name, err, row->err);
			goto out;
		}
		if (!err && task != (row->want_cpu ? task2 : fk.task_kva)) {
			fprintf(stderr, "%s: task 0x%llx\n", row->name, (unsigned long long)task);
			goto out;
		}
	}
	ret = TEST_OK;
out:
	fakekernel_fini(&fk);
	return ret;
}

/* ---------------------------------------------------------------- task identity */

static int mut_none(struct fakekernel *fk)
{
	(void)fk;
	return 0;
}

static int mut_kthread_flag(struct fakekernel *fk)
{
	return fk_w64(fk, fk->task_kva + fk->layout.task_mm, 0) ||
	       fk_w32(fk, fk->task_kva + fk->layout.task_flags, 0x00200040);
}

static int mut_no_mm(struct fakekernel *fk)
{
	return fk_w64(fk, fk->task_kva + fk->layout.task_mm, 0);
}

static int mut_exiting(struct fakekernel *fk)
{
	return fk_w64(fk, fk->task_kva + fk->layout.task_mm, 0) ||
	       fk_w32(fk, fk->task_kva + fk->layout.task_flags, 0x00000004); /* PF_EXITING */
}

static int mut_comm_unterminated(struct fakekernel *fk)
{
	return fk_write_gva(fk, fk->task_kva + fk->layout.task_comm, "ABCDEFGHIJKLMNOP", 16);
}

static int mut_comm_15(struct fakekernel *fk)
{
	return fk_write_gva(fk, fk->task_kva + fk->layout.task_comm, "kworker/0:1H-ev", 16);
}

static int mut_comm_control(struct fakekernel *fk)
{
	return fk_write_gva(fk, fk->task_kva + fk->layout.task_comm, "bad\x01name", 9);
}

static int mut_comm_empty(struct fakekernel *fk)
{
	return fk_write_gva(fk, fk->task_kva + fk->layout.task_comm, "", 1);
}

static int mut_pid_big(struct fakekernel *fk)
{
	return fk_w32(fk, fk->task_kva + fk->layout.task_pid, 4194305);
}

static int mut_pid_negative(struct fakekernel *fk)
{
	return fk_w32(fk, fk->task_kva + fk->layout.task_pid, (uint32_t)-1);
}

static int mut_tgid_big(struct fakekernel *fk)
{
	return fk_w32(fk, fk->task_kva + fk->layout.task_tgid, 0x7fffffff);
}

static int mut_mm_user(struct fakekernel *fk)
{
	return fk_w64(fk, fk->task_kva + fk->layout.task_mm, 0x0000555555554000ull);
}

static int mut_mm_noncanonical(struct fakekernel *fk)
{
	return fk_w64(fk, fk->task_kva + fk->layout.task_mm, 0x8000000000000000ull);
}

struct id_row {
	const char *name;
	int (*mutate)(struct fakekernel *fk);
	uint64_t task; /* 0: the fake task */
	int err;
	uint8_t kthread;
	const char *comm;
};

static const struct id_row id_rows[] = {
	{ "user task", mut_none, 0, 0, 0, FK_COMM },
	{ "kernel thread by PF_KTHREAD", mut_kthread_flag, 0, 0, 1, FK_COMM },
	/* no mm, no PF_KTHREAD, not exiting: pid 1 before its first execve, a kernel thread */
	{ "kernel thread by mm == NULL", mut_no_mm, 0, 0, 1, FK_COMM },
	/* a user thread past exit_mm(): no mm, but no kernel thread (its samples stay its own) */
	{ "exiting user thread: PF_EXITING, mm == NULL", mut_exiting, 0, 0, 0, FK_COMM },
	{ "comm of 15 characters", mut_comm_15, 0, 0, 0, "kworker/0:1H-ev" },
	{ "comm not terminated", mut_comm_unterminated, 0, -EBADMSG, 0, NULL },
	{ "comm with a control character", mut_comm_control, 0, -EBADMSG, 0, NULL },
	{ "empty comm", mut_comm_empty, 0, -EBADMSG, 0, NULL },
	{ "pid above PID_MAX_LIMIT", mut_pid_big, 0, -EBADMSG, 0, NULL },
	{ "negative pid", mut_pid_negative, 0, -EBADMSG, 0, NULL },
	{ "tgid out of range", mut_tgid_big, 0, -EBADMSG, 0, NULL },
	{ "mm is a user address", mut_mm_user, 0, -EBADMSG, 0, NULL },
	{ "mm non-canonical", mut_mm_noncanonical, 0, -EBADMSG, 0, NULL },
	{ "task pointer in user space", mut_none, 0x0000555555554000ull, -EBADMSG, 0, NULL },
	{ "task pointer misaligned", mut_none, FK_DIRECT + FK_TASK_GPA + 4, -EBADMSG, 0, NULL },
	{ "task unmapped", mut_none, 0xffffc90000f00000ull, -EFAULT, 0, NULL },
	{ "task outside RAM", mut_none, FK_DIRECT + 0x3ff00000ull, -ERANGE, 0, NULL },
};

static int run_id_row(const struct id_row *row)
{
	struct hvp_thread th;
	struct fakekernel fk;
	uint64_t mm = 1;
	int err, ret = TEST_FAIL;

	if (fakekernel_init(&fk, 4))
		return TEST_FAIL;
	if (row->mutate(&fk)) {
		fprintf(stderr, "%s: mutate failed\n", row->name);
		goto out;
	}
	memset(&th, 0x5a, sizeof(th));
	err = gi_task_identity(fk.gi, &fk.fm.mem, &fk.fm.pg, row->task ? row->task : fk.task_kva,
			       &th, &mm);
	if (err != row->err) {
		fprintf(stderr, "%s: err %d, expected %d\n", row->name, err, row->err);
		goto out;
	}
	if (!err) {
		if (th.pid != FK_PID || th.tgid != FK_TGID || th.task != fk.task_kva ||
		    th.kthread != row->kthread || strcmp(th.comm, row->comm) != 0 || th.time_ns) {
			fprintf(stderr, "%s: pid %d tgid %d kthread %u comm '%.16s'\n", row->name,
				th.pid, th.tgid, th.kthread, th.comm);
			goto out;
		}
		if (mm != (row->kthread || row->mutate == mut_exiting ? 0 : fk.mm_kva)) {
			fprintf(stderr, "%s: mm 0x%llx\n", row->name, (unsigned long long)mm);
			goto out;
		}
	}
	ret = TEST_OK;
out:
	fakekernel_fini(&fk);
	return ret;
}

static int test_task_identity(void)
{
	int ret = TEST_OK;

	for (size_t i = 0; i < ARRAY_SIZE(id_rows); i++)
		if (run_id_row(&id_rows[i]) != TEST_OK)
			ret = TEST_FAIL;
	return ret;
}

/* ---------------------------------------------------------------- process info */

static uint64_t dentry_kva(unsigned int i)
{
	return fk_kva(FK_DENTRY_GPA + i * 0x100);
}

static uint64_t name_kva(unsigned int i)
{
	return fk_kva(FK_NAMES_GPA + i * 0x200);
}

/* dentry @i named @name with parent @parent (== i: the root). */
static int put_dentry(struct fakekernel *fk, unsigned int i, unsigned int parent, const char *name)
{
	const struct gi_layout *l = &fk->layout;

	return fk_w64(fk, dentry_kva(i) + l->dentry_d_parent, dentry_kva(parent)) ||
	       fk_w64(fk, dentry_kva(i) + l->dentry_d_name + l->qstr_name, name_kva(i)) ||
	       fk_write_gva(fk, name_kva(i), name, strlen(name) + 1);
}

/* mm -> exe_file -> f_path.dentry = dentry 2 ("hvprof-demo") -> 1 ("bin") -> 0 ("/"). */
static int setup_process(struct fakekernel *fk)
{
	const struct gi_layout *l = &fk->layout;
	uint64_t file = fk_kva(FK_FILE_GPA);

	return fk_w64(fk, fk->mm_kva + l->mm_start_code, 0x401000) ||
	       fk_w64(fk, fk->mm_kva + l->mm_end_code, 0x4a2000) ||
	       fk_w64(fk, fk->mm_kva + l->mm_exe_file, file) ||
	       fk_w64(fk, file + l->file_f_path + l->path_dentry, dentry_kva(2)) ||
	       put_dentry(fk, 0, 0, "/") || put_dentry(fk, 1, 0, "bin") ||
	       put_dentry(fk, 2, 1, "hvprof-demo");
}

static int pmut_none(struct fakekernel *fk)
{
	(void)fk;
	return 0;
}

static int pmut_no_exe(struct fakekernel *fk)
{
	return fk_w64(fk, fk->mm_kva + fk->layout.mm_exe_file, 0);
}

static int pmut_exe_is_root(struct fakekernel *fk)
{
	return fk_w64(fk, fk_kva(FK_FILE_GPA) + fk->layout.file_f_path + fk->layout.path_dentry,
		      dentry_kva(0));
}

static int pmut_cycle(struct fakekernel *fk)
{
	return put_dentry(fk, 1, 2, "bin"); /* 2 -> 1 -> 2 -> ... never reaches a root */
}

/* A chain of @depth components below the root: dentry depth .. 1, 0 is the root. */
static int chain(struct fakekernel *fk, unsigned int depth)
{
	const struct gi_layout *l = &fk->layout;

	if (put_dentry(fk, 0, 0, "/"))
		return -1;
	for (unsigned int i = 1; i <= depth; i++)
		if (put_dentry(fk, i, i - 1, "d"))
			return -1;
	return fk_w64(fk, fk_kva(FK_FILE_GPA) + l->file_f_path + l->path_dentry,
		      dentry_kva(depth));
}

static int pmut_depth16(struct fakekernel *fk)
{
	return chain(fk, 16);
}

static int pmut_depth17(struct fakekernel *fk)
{
	return chain(fk, 17);
}

static int pmut_name_unterminated(struct fakekernel *fk)
{
	char big[300];

	memset(big, 'x', sizeof(big));
	return fk_write_gva(fk, name_kva(2), big, sizeof(big));
}

static int name_of(struct fakekernel *fk, size_t len)
{
	char big[256];

	memset(big, 'y', len);
	big[len] = '\0';
	return fk_write_gva(fk, name_kva(2), big, len + 1);
}

/* "/bin/" + 250 bytes: 255 characters, exactly what hvp_process.exe[256] holds. */
static int pmut_name_250(struct fakekernel *fk)
{
	return name_of(fk, 250);
}

static int pmut_name_251(struct fakekernel *fk)
{
	return name_of(fk, 251);
}

static int pmut_name_255(struct fakekernel *fk)
{
	return name_of(fk, 255);
}

/* The last name sits in the last 4 bytes of guest RAM: only a page-bounded read gets it. */
static int pmut_name_at_ram_end(struct fakekernel *fk)
{
	uint64_t at = fk_kva(FAKE_RAM_SIZE - 4);

	return fk_write_gva(fk, at, "exe", 4) ||
	       fk_w64(fk, dentry_kva(2) + fk->layout.dentry_d_name + fk->layout.qstr_name, at);
}

static int pmut_name_unmapped(struct fakekernel *fk)
{
	return fk_w64(fk, dentry_kva(2) + fk->layout.dentry_d_name + fk->layout.qstr_name,
		      0xffffc90000f00000ull);
}

static int pmut_name_with_slash(struct fakekernel *fk)
{
	return fk_write_gva(fk, name_kva(2), "a/b", 4);
}

static int pmut_parent_user(struct fakekernel *fk)
{
	return fk_w64(fk, dentry_kva(1) + fk->layout.dentry_d_parent, 0x1000);
}

static int pmut_code_reversed(struct fakekernel *fk)
{
	return fk_w64(fk, fk->mm_kva + fk->layout.mm_end_code, 0x400000);
}

static int pmut_code_kernel(struct fakekernel *fk)
{
	return fk_w64(fk, fk->mm_kva + fk->layout.mm_end_code, FK_STEXT);
}

static int pmut_exe_user(struct fakekernel *fk)
{
	return fk_w64(fk, fk->mm_kva + fk->layout.mm_exe_file, 0x7fff0000ull);
}

struct proc_row {
	const char *name;
	int (*mutate)(struct fakekernel *fk);
	int err;
	const char *exe; /* NULL: 250 'y' after "/bin/" */
};

static const struct proc_row proc_rows[] = {
	{ "executable path", pmut_none, 0, "/bin/hvprof-demo" },
	{ "no exe_file", pmut_no_exe, 0, "" },
	{ "exe_file is the root dentry", pmut_exe_is_root, 0, "/" },
	{ "16 components", pmut_depth16, 0, "/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d" },
	{ "17 components", pmut_depth17, -ELOOP, NULL },
	{ "dentry cycle", pmut_cycle, -ELOOP, NULL },
	{ "path of 255 characters", pmut_name_250, 0, NULL },
	{ "path of 256 characters", pmut_name_251, -ERANGE, NULL },
	{ "name of 255 bytes", pmut_name_255, -ERANGE, NULL },
	{ "name not terminated within 255 bytes", pmut_name_unterminated, -EBADMSG, NULL },
	{ "name at the end of RAM", pmut_name_at_ram_end, 0, "/bin/exe" },
	{ "name unmapped", pmut_name_unmapped, -EFAULT, NULL },
	{ "name with a slash", pmut_name_with_slash, -EBADMSG, NULL },
	{ "parent is a user address", pmut_parent_user, -EBADMSG, NULL },
	{ "start_code above end_code", pmut_code_reversed, -EBADMSG, NULL },
	{ "end_code in the kernel", pmut_code_kernel, -EBADMSG, NULL },
	{ "exe_file is a user address", pmut_exe_user, -EBADMSG, NULL },
};

static int run_proc_row(const struct proc_row *row)
{
	struct hvp_process p;
	struct fakekernel fk;
	char want[300];
	int err, ret = TEST_FAIL;

	if (fakekernel_init(&fk, 4))
		return TEST_FAIL;
	if (setup_process(&fk) || row->mutate(&fk)) {
		fprintf(stderr, "%s: setup failed\n", row->name);
		goto out;
	}
	memset(&p, 0x5a, sizeof(p));
	err = gi_process_info(fk.gi, &fk.fm.mem, &fk.fm.pg, fk.mm_kva, &p);
	if (err != row->err) {
		fprintf(stderr, "%s: err %d, expected %d\n", row->name, err, row->err);
		goto out;
	}
	if (row->exe) {
		snprintf(want, sizeof(want), "%s", row->exe);
	} else {
		strcpy(want, "/bin/");
		memset(want + 5, 'y', 250);
		want[255] = '\0';
	}
	if (!err && (strcmp(p.exe, want) != 0 || p.mm != fk.mm_kva || p.start_code != 0x401000 ||
		     p.end_code != 0x4a2000 || p.tgid != 0)) {
		fprintf(stderr, "%s: exe '%s' mm 0x%llx code 0x%llx-0x%llx\n", row->name, p.exe,
			(unsigned long long)p.mm, (unsigned long long)p.start_code,
			(unsigned long long)p.end_code);
		goto out;
	}
	ret = TEST_OK;
out:
	fakekernel_fini(&fk);
	return ret;
}

static int test_process_info(void)
{
	int ret = TEST_OK;

	for (size_t i = 0; i < ARRAY_SIZE(proc_rows); i++)
		if (run_proc_row(&proc_rows[i]) != TEST_OK)
			ret = TEST_FAIL;
	return ret;
}

static int test_bad_args(void)
{
	struct fakekernel fk;
	struct hvp_thread th;
	struct hvp_process p;
	uint64_t task;

	if (fakekernel_init(&fk, 4))
		return TEST_FAIL;
	ASSERT_EQ_INT(gi_current_task(NULL, &fk.fm.mem, &fk.regs, &task), -EINVAL);
	ASSERT_EQ_INT(gi_task_identity(fk.gi, NULL, &fk.fm.pg, fk.task_kva, &th, NULL), -EINVAL);
	ASSERT_EQ_INT(gi_process_info(fk.gi, &fk.fm.mem, &fk.fm.pg, fk.mm_kva, NULL), -EINVAL);
	ASSERT_EQ_INT(gi_process_info(fk.gi, &fk.fm.mem, &fk.fm.pg, 0, &p), -EBADMSG);
	fakekernel_fini(&fk);
	return TEST_OK;
}

/*
 * The root table of an mm (mm->pgd, a direct-map KVA) as a GPA, for user walks inside
 * switch_mm where CR3 is already the next task's; hostile pgd values refused.
 */
static int test_mm_user_root(void)
{
	struct fakekernel fk;
	struct gi *nopgd = NULL;
	struct gi_layout l;
	uint64_t root = 0, pgd_slot;

	if (fakekernel_init(&fk, 4))
		return TEST_FAIL;
	pgd_slot = fk.mm_kva + fk.layout.mm_pgd;
	ASSERT_EQ_INT(fk_w64(&fk, pgd_slot, fk_kva(fk.fm.pg.cr3 & ~0xfffull)), 0);
	ASSERT_EQ_INT(gi_mm_user_root(fk.gi, &fk.fm.mem, &fk.fm.pg, fk.mm_kva, &root), 0);
	ASSERT_EQ_U64(root, fk.fm.pg.cr3 & ~0xfffull);
	ASSERT_EQ_INT(fk_w64(&fk, pgd_slot, fk_kva(0x123000)), 0); /* another mm's root */
	ASSERT_EQ_INT(gi_mm_user_root(fk.gi, &fk.fm.mem, &fk.fm.pg, fk.mm_kva, &root), 0);
	ASSERT_EQ_U64(root, 0x123000);
	ASSERT_EQ_INT(fk_w64(&fk, pgd_slot, fk_kva(0x123008)), 0); /* not page aligned */
	ASSERT_EQ_INT(gi_mm_user_root(fk.gi, &fk.fm.mem, &fk.fm.pg, fk.mm_kva, &root), -EBADMSG);
	ASSERT_EQ_INT(fk_w64(&fk, pgd_slot, 0x7fff00000000ull), 0); /* a user address */
	ASSERT_EQ_INT(gi_mm_user_root(fk.gi, &fk.fm.mem, &fk.fm.pg, fk.mm_kva, &root), -EBADMSG);
	ASSERT_EQ_INT(fk_w64(&fk, pgd_slot, 0xffffc90000800000ull), 0); /* unmapped */
	ASSERT_TRUE(gi_mm_user_root(fk.gi, &fk.fm.mem, &fk.fm.pg, fk.mm_kva, &root) < 0);
	ASSERT_TRUE(gi_mm_user_root(fk.gi, &fk.fm.mem, &fk.fm.pg, 0xffffc90000800000ull, &root) <
		    0); /* the mm itself unmapped */
	ASSERT_EQ_INT(gi_mm_user_root(fk.gi, &fk.fm.mem, &fk.fm.pg, 0, &root), -EINVAL);
	/* a kernel whose BTF has no mm_struct.pgd */
	l = fk.layout;
	l.mm_pgd = UINT32_MAX;
	ASSERT_EQ_INT(gi_new_raw(&l, FK_STEXT, FK_ETEXT, FK_CURRENT_TASK_OFF, &nopgd), 0);
	ASSERT_EQ_INT(gi_mm_user_root(nopgd, &fk.fm.mem, &fk.fm.pg, fk.mm_kva, &root), -ENODATA);
	gi_close(nopgd);
	fakekernel_fini(&fk);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "root table of an mm (mm->pgd)", test_mm_user_root },
	{ "current task from the per-CPU base", test_current_task },
	{ "task identity, good and hostile", test_task_identity },
	{ "process info: path and code range", test_process_info },
	{ "bad arguments", test_bad_args },
};

TEST_MAIN(tests)
