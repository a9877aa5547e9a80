// SPDX-License-Identifier: MIT
// Unit tests of gi_layout_from_btf on synthetic BTF written with libbpf's BTF writer API.
#include <bpf/btf.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>

#include "test.h"

/* What the synthetic kernel looks like (byte offsets), chosen to differ from real kernels. */
#define T_STACK 32
#define T_FLAGS 44
#define T_TASK_WORKS 0x5f0
#define T_RSEQ 0x5e8
#define T_NVCSW 0x5d8
#define T_NIVCSW 0x5e0
#define T_PV_IRQ 0xe8 /* paravirt_patch_template.irq */
#define T_ANON 0x300          /* anonymous struct (randomized_struct_fields) */
#define T_MM (T_ANON + 0x10)
#define T_ANON_UNION (T_ANON + 0x40) /* an anonymous union nested in it */
#define T_PID (T_ANON_UNION + 0)
#define T_TGID (T_ANON_UNION + 4)
#define T_COMM 0x578
#define MM_ANON 0            /* mm_struct's anonymous struct */
#define MM_START_CODE 0x100
#define MM_END_CODE 0x108
#define MM_EXE_FILE 0x380
#define F_F_PATH 16
#define P_DENTRY 8
#define D_PARENT 24
#define D_NAME 32
#define Q_NAME 8

/* Which parts the synthetic BTF leaves out, to test -ENODATA and optional fields. */
enum btf_variant {
	BTF_FULL,
	BTF_NO_FILE,       /* struct file missing: file_f_path optional */
	BTF_NO_STACK,      /* task_struct.stack missing: required */
	BTF_NO_TASK,       /* no task_struct at all */
};

#define CHECK_ID(x)              \
	do {                     \
		if ((x) <= 0)    \
			goto fail; \
	} while (0)

static struct btf *make_btf(enum btf_variant v)
{
	struct btf *btf = btf__new_empty();
	int t_int, t_uint, t_char, t_ulong, t_u32, t_pid, t_void_ptr, t_uchar, t_uchar_ptr;
	int t_comm, t_qstr, t_dentry, t_dentry_ptr, t_path, t_file, t_file_ptr, t_mm, t_mm_ptr;
	int t_anon, t_union, t_task, t_regs, t_qanon_s, t_qanon_u, t_dentry_fwd, t_pids, t_pv_irq;

	if (!btf)
		return NULL;
	CHECK_ID(t_int = btf__add_int(btf, "int", 4, BTF_INT_SIGNED));
	CHECK_ID(t_uint = btf__add_int(btf, "unsigned int", 4, 0));
	CHECK_ID(t_char = btf__add_int(btf, "char", 1, BTF_INT_CHAR));
	CHECK_ID(t_uchar = btf__add_int(btf, "unsigned char", 1, 0));
	CHECK_ID(t_ulong = btf__add_int(btf, "long unsigned int", 8, 0));
	CHECK_ID(t_u32 = btf__add_typedef(btf, "u32", t_uint));
	CHECK_ID(t_pid = btf__add_typedef(btf, "pid_t", t_int));
	CHECK_ID(t_void_ptr = btf__add_ptr(btf, 0));
	CHECK_ID(t_uchar_ptr = btf__add_ptr(btf, t_uchar));
	CHECK_ID(t_comm = btf__add_array(btf, t_int, t_char, 16));

	/* struct qstr { union { struct { u32 hash; u32 len; }; u64 hash_len; }; name; } */
	CHECK_ID(t_qanon_s = btf__add_struct(btf, NULL, 8));
	if (btf__add_field(btf, "hash", t_u32, 0, 0) || btf__add_field(btf, "len", t_u32, 32, 0))
		goto fail;
	CHECK_ID(t_qanon_u = btf__add_union(btf, NULL, 8));
	if (btf__add_field(btf, NULL, t_qanon_s, 0, 0) ||
	    btf__add_field(btf, "hash_len", t_ulong, 0, 0))
		goto fail;
	CHECK_ID(t_qstr = btf__add_struct(btf, "qstr", 16));
	if (btf__add_field(btf, NULL, t_qanon_u, 0, 0) ||
	    btf__add_field(btf, "name", t_uchar_ptr, Q_NAME * 8, 0))
		goto fail;

	/* struct dentry points to itself: forward-declare it, as compilers do. */
	CHECK_ID(t_dentry_fwd = btf__add_fwd(btf, "dentry", BTF_FWD_STRUCT));
	CHECK_ID(t_dentry_ptr = btf__add_ptr(btf, t_dentry_fwd));
	CHECK_ID(t_dentry = btf__add_struct(btf, "dentry", 192));
	if (btf__add_field(btf, "d_flags", t_uint, 0, 0) ||
	    btf__add_field(btf, "d_parent", t_dentry_ptr, D_PARENT * 8, 0) ||
	    btf__add_field(btf, "d_name", t_qstr, D_NAME * 8, 0))
		goto fail;
	(void)t_dentry;

	CHECK_ID(t_path = btf__add_struct(btf, "path", 16));
	if (btf__add_field(btf, "mnt", t_void_ptr, 0, 0) ||
	    btf__add_field(btf, "dentry", t_dentry_ptr, P_DENTRY * 8, 0))
		goto fail;

	t_file_ptr = t_void_ptr;
	if (v != BTF_NO_FILE) {
		CHECK_ID(t_file = btf__add_struct(btf, "file", 232));
		if (btf__add_field(btf, "f_u", t_void_ptr, 0, 0) ||
		    btf__add_field(btf, "f_path", t_path, F_F_PATH * 8, 0))
			goto fail;
		CHECK_ID(t_file_ptr = btf__add_ptr(btf, t_file));
	}

	/* struct mm_struct { struct { ... } (anonymous); unsigned long cpu_bitmap[]; } as in 6.1 */
	CHECK_ID(t_anon = btf__add_struct(btf, NULL, 0x400));
	if (btf__add_field(btf, "start_code", t_ulong, MM_START_CODE * 8, 0) ||
	    btf__add_field(btf, "end_code", t_ulong, MM_END_CODE * 8, 0) ||
	    btf__add_field(btf, "exe_file", t_file_ptr, MM_EXE_FILE * 8, 0))
		goto fail;
	CHECK_ID(t_mm = btf__add_struct(btf, "mm_struct", 0x400));
	if (btf__add_field(btf, NULL, t_anon, MM_ANON * 8, 0))
		goto fail;
	CHECK_ID(t_mm_ptr = btf__add_ptr(btf, t_mm));

	if (v != BTF_NO_TASK) {
		/* The anonymous union holding pid/tgid, inside the anonymous struct. */
		CHECK_ID(t_pids = btf__add_struct(btf, NULL, 8));
		if (btf__add_field(btf, "pid", t_pid, 0, 0) ||
		    btf__add_field(btf, "tgid", t_pid, 32, 0))
			goto fail;
		CHECK_ID(t_union = btf__add_union(btf, NULL, 8));
		if (btf__add_field(btf, NULL, t_pids, 0, 0) ||
		    btf__add_field(btf, "both", t_ulong, 0, 0))
			goto fail;
		CHECK_ID(t_anon = btf__add_struct(btf, NULL, 0x100));
		if (btf__add_field(btf, "ptraced", t_void_ptr, 0, 0) ||
		    btf__add_field(btf, "mm", t_mm_ptr, (T_MM - T_ANON) * 8, 0) ||
		    btf__add_field(btf, NULL, t_union, (T_ANON_UNION - T_ANON) * 8, 0) ||
		    /* a bitfield nobody reads, to exercise kflag offsets */
		    btf__add_field(btf, "sched_reset_on_fork", t_uint, 0x80 * 8 + 3, 1))
			goto fail;
		CHECK_ID(t_task = btf__add_struct(btf, "task_struct", 0x600));
		if (btf__add_field(btf, "thread_info", t_ulong, 0, 0) ||
		    btf__add_field(btf, "__state", t_uint, 24 * 8, 0) ||
		    (v != BTF_NO_STACK && btf__add_field(btf, "stack", t_void_ptr, T_STACK * 8, 0)) ||
		    btf__add_field(btf, "flags", t_uint, T_FLAGS * 8, 0) ||
		    btf__add_field(btf, NULL, t_anon, T_ANON * 8, 0) ||
		    btf__add_field(btf, "comm", t_comm, T_COMM * 8, 0) ||
		    btf__add_field(btf, "task_works", t_void_ptr, T_TASK_WORKS * 8, 0) ||
		    btf__add_field(btf, "rseq", t_void_ptr, T_RSEQ * 8, 0) ||
		    btf__add_field(btf, "nvcsw", t_ulong, T_NVCSW * 8, 0) ||
		    btf__add_field(btf, "nivcsw", t_ulong, T_NIVCSW * 8, 0))
			goto fail;
	}

	/* struct pt_regs (x86-64): 21 unsigned longs. */
	CHECK_ID(t_regs = btf__add_struct(btf, "pt_regs", 168));
	if (btf__add_field(btf, "r15", t_ulong, 0, 0) || btf__add_field(btf, "bp", t_ulong, 32 * 8, 0) ||
	    btf__add_field(btf, "ip", t_ulong, 128 * 8, 0) ||
	    btf__add_field(btf, "cs", t_ulong, 136 * 8, 0) ||
	    btf__add_field(btf, "sp", t_ulong, 152 * 8, 0) ||
	    btf__add_field(btf, "ss", t_ulong, 160 * 8, 0))
		goto fail;
	/* CONFIG_PARAVIRT_XXL: pv_ops's type, its irq ops at T_PV_IRQ */
	CHECK_ID(t_pv_irq = btf__add_struct(btf, "pv_irq_ops", 24));
	if (btf__add_field(btf, "save_fl", t_void_ptr, 0, 0) ||
	    btf__add_field(btf, "irq_disable", t_void_ptr, 8 * 8, 0) ||
	    btf__add_field(btf, "irq_enable", t_void_ptr, 16 * 8, 0))
		goto fail;
	CHECK_ID(btf__add_struct(btf, "paravirt_patch_template", T_PV_IRQ + 24));
	if (btf__add_field(btf, "cpu", t_void_ptr, 0, 0) ||
	    btf__add_field(btf, "irq", t_pv_irq, T_PV_IRQ * 8, 0))
		goto fail;
	return btf;
fail:
	btf__free(btf);
	return NULL;
}

/* Write @btf's raw data to a new temp file; @path receives its name. */
static int write_btf(struct btf *btf, char path[64])
{
	const void *raw;
	__u32 size;
	int fd;

	strcpy(path, "/tmp/hvprof-btf-XXXXXX");
	raw = btf__raw_data(btf, &size);
	if (!raw)
		return -1;
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	if (write(fd, raw, size) != (ssize_t)size) {
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	return 0;
}

static int layout_of(enum btf_variant v, struct gi_layout *l, int *err)
{
	struct btf *btf = make_btf(v);
	char path[64];

	if (!btf) {
		fprintf(stderr, "building synthetic BTF failed\n");
		return -1;
	}
	if (write_btf(btf, path)) {
		btf__free(btf);
		return -1;
	}
	btf__free(btf);
	memset(l, 0xab, sizeof(*l));
	*err = gi_layout_from_btf(path, l);
	unlink(path);
	return 0;
}

static int test_full_layout(void)
{
	struct gi_layout l;
	int err;

	ASSERT_EQ_INT(layout_of(BTF_FULL, &l, &err), 0);
	ASSERT_EQ_INT(err, 0);
	ASSERT_EQ_INT(l.task_pid, T_PID);
	ASSERT_EQ_INT(l.task_tgid, T_TGID);
	ASSERT_EQ_INT(l.task_comm, T_COMM);
	ASSERT_EQ_INT(l.task_comm_len, 16);
	ASSERT_EQ_INT(l.task_mm, T_MM);
	ASSERT_EQ_INT(l.task_flags, T_FLAGS);
	ASSERT_EQ_INT(l.task_stack, T_STACK);
	ASSERT_EQ_INT(l.task_task_works, T_TASK_WORKS);
	ASSERT_EQ_INT(l.task_rseq, T_RSEQ);
	ASSERT_EQ_INT(l.task_nvcsw, T_NVCSW);
	ASSERT_EQ_INT(l.task_nivcsw, T_NIVCSW);
	ASSERT_EQ_INT(l.pv_irq_enable, T_PV_IRQ + 16);
	ASSERT_EQ_INT(l.pv_irq_disable, T_PV_IRQ + 8);
	ASSERT_EQ_INT(l.mm_start_code, MM_START_CODE);
	ASSERT_EQ_INT(l.mm_end_code, MM_END_CODE);
	ASSERT_EQ_INT(l.mm_exe_file, MM_EXE_FILE);
	ASSERT_EQ_INT(l.file_f_path, F_F_PATH);
	ASSERT_EQ_INT(l.path_dentry, P_DENTRY);
	ASSERT_EQ_INT(l.dentry_d_parent, D_PARENT);
	ASSERT_EQ_INT(l.dentry_d_name, D_NAME);
	ASSERT_EQ_INT(l.qstr_name, Q_NAME);
	ASSERT_EQ_INT(l.pt_regs_size, 168);
	ASSERT_EQ_INT(l.pt_regs_ip, 128);
	ASSERT_EQ_INT(l.pt_regs_sp, 152);
	ASSERT_EQ_INT(l.pt_regs_bp, 32);
	ASSERT_EQ_INT(l.pt_regs_cs, 136);
	ASSERT_EQ_INT(l.pt_regs_r15, 0);
	ASSERT_EQ_U64(l.pt_regs_ax, UINT32_MAX); /* not in this BTF: missing */
	return TEST_OK;
}

static int test_optional_missing(void)
{
	struct gi_layout l;
	int err;

	ASSERT_EQ_INT(layout_of(BTF_NO_FILE, &l, &err), 0);
	ASSERT_EQ_INT(err, 0);
	ASSERT_EQ_U64(l.file_f_path, UINT32_MAX);
	ASSERT_EQ_INT(l.task_pid, T_PID);
	ASSERT_EQ_INT(l.path_dentry, P_DENTRY);
	return TEST_OK;
}

static int test_required_missing(void)
{
	struct gi_layout l, before;
	int err;

	ASSERT_EQ_INT(layout_of(BTF_NO_STACK, &l, &err), 0);
	ASSERT_EQ_INT(err, -ENODATA);
	memset(&before, 0xab, sizeof(before));
	ASSERT_TRUE(memcmp(&l, &before, sizeof(l)) == 0); /* untouched on failure */
	ASSERT_EQ_INT(layout_of(BTF_NO_TASK, &l, &err), 0);
	ASSERT_EQ_INT(err, -ENODATA);
	return TEST_OK;
}

static int test_bad_files(void)
{
	char path[] = "/tmp/hvprof-btf-bad-XXXXXX";
	struct gi_layout l;
	int fd, err;

	ASSERT_EQ_INT(gi_layout_from_btf("/nonexistent/hvprof/vmlinux.btf", &l), -ENOENT);
	ASSERT_EQ_INT(gi_layout_from_btf(NULL, &l), -EINVAL);

	fd = mkstemp(path);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(write(fd, "\x9f\xeb\x01\x00garbage garbage garbage", 27), 27);
	close(fd);
	err = gi_layout_from_btf(path, &l);
	unlink(path);
	ASSERT_EQ_INT(err, -EBADMSG);

	/* This test binary is an ELF file without .BTF. */
	ASSERT_EQ_INT(gi_layout_from_btf("/proc/self/exe", &l), -ENODATA);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "synthetic BTF: every field, nested anonymous members", test_full_layout },
	{ "synthetic BTF: optional struct missing", test_optional_missing },
	{ "synthetic BTF: required field missing", test_required_missing },
	{ "missing, garbage and BTF-less files", test_bad_files },
};

TEST_MAIN(tests)
