// SPDX-License-Identifier: MIT
// Symbolization tests with real ELF files built by meson (argv[1]: static -no-pie, argv[2]:
// PIE): META add mappings, rootfs with symlinks resolved inside the root, --symfs, --vmlinux,
// PIE load bias, and unresolved executables.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>
#include <hvprof/profile.h>

#include "profile_internal.h"
#include "rec_helpers.h"
#include "test.h"

static const char *exec_path, *pie_path;
static char root[PATH_MAX]; /* a temporary guest root tree */

struct target {
	uint64_t leaf, mid, text_vaddr;
	unsigned int e_type;
};

static int target_info(const char *path, struct target *t)
{
	struct symtab *st;
	int err = symtab_open_elf(path, &st);

	if (err)
		return err;
	err = symtab_find(st, "hvp_target_leaf", &t->leaf);
	if (!err)
		err = symtab_find(st, "hvp_target_mid", &t->mid);
	symtab_elf_info(st, &t->e_type, &t->text_vaddr);
	symtab_free(st);
	return err;
}

/* A recording with one user sample (leaf+4 inner, mid+4 outer) of @exe loaded at @bias. */
static int write_rec(int fd, const char *const *meta, const char *exe, const struct target *t,
		     uint64_t bias, int kernel_too)
{
	struct hvp_thread th = mk_thread(10, 10, "target", 0);
	struct hvp_process pr = mk_process(10, exe, bias + t->text_vaddr,
					   bias + t->text_vaddr + 0x100000);
	uint64_t uips[] = { bias + t->leaf + 4, bias + t->mid + 4, 0 };
	/* kernel_too 2: the inner kernel frame is identity-mapped code no symbol covers */
	uint64_t kips[] = { kernel_too == 2 ? 0x3f00010 : t->leaf + 1, t->mid + 1, 0 };
	struct hvp_sample *s = malloc(sizeof(*s));
	struct recfile_writer *w;
	int err, close_err;

	if (!s)
		return -ENOMEM;
	mk_sample(s, 10, 10, kernel_too ? 0 : 3, HVP_WALK_END, 0, kernel_too ? kips : NULL, uips);
	err = recfile_writer_open(fd, &w);
	if (err) {
		free(s);
		return err;
	}
	for (; meta && meta[0]; meta += 2)
		err = err ? err : recfile_write_meta(w, meta[0], meta[1]);
	err = err ? err : recfile_write_thread(w, &th);
	err = err ? err : recfile_write_process(w, &pr);
	err = err ? err : recfile_write_sample(w, s);
	close_err = recfile_writer_close(w);
	free(s);
	return err ? err : close_err;
}

static int folded_of(const char *const *meta, const char *exe, const struct target *t,
		     uint64_t bias, const struct profile_options *opts, int kernel_too, char **out)
{
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile *p;
	char errbuf[256];
	int fd = mem_file(), err;

	if (fd < 0)
		return -errno;
	err = write_rec(fd, meta, exe, t, bias, kernel_too);
	if (!err && lseek(fd, 0, SEEK_SET) != 0)
		err = -errno;
	if (!err)
		err = profile_load_fd(fd, "sym", opts, &p, errbuf, sizeof(errbuf));
	close(fd);
	if (err)
		return err;
	err = profile_folded(p, &sink);
	profile_free(p);
	*out = ss.s;
	return err;
}

/*
 * The guest tree:  /opt/t/target (the ELF), /usr/bin/target -> /opt/t/target (absolute: must
 * resolve inside the root), /bin -> usr/bin (relative), /usr/bin/loop -> loop,
 * /usr/bin/escape -> ../../../../../opt/t/target (".." stops at the root).
 */
static int make_root(void)
{
	char p[PATH_MAX + 64];

	if (root[0])
		return 0;
	snprintf(root, sizeof(root), "/tmp/hvprof-symtest-XXXXXX");
	if (!mkdtemp(root))
		return -errno;
#define MK(fmt, call)                                      \
	do {                                               \
		snprintf(p, sizeof(p), fmt, root);         \
		if (call)                                  \
			return -errno;                     \
	} while (0)
	MK("%s/opt", mkdir(p, 0755));
	MK("%s/opt/t", mkdir(p, 0755));
	MK("%s/usr", mkdir(p, 0755));
	MK("%s/usr/bin", mkdir(p, 0755));
	snprintf(p, sizeof(p), "%s/opt/t/target", root);
	if (copy_file(exec_path, p))
		return -EIO;
	MK("%s/usr/bin/target", symlink("/opt/t/target", p));
	MK("%s/bin", symlink("usr/bin", p));
	MK("%s/usr/bin/loop", symlink("loop", p));
	MK("%s/usr/bin/escape", symlink("../../../../../opt/t/target", p));
#undef MK
	return 0;
}

static void remove_root(void)
{
	static const char *const rel[] = { "/usr/bin/escape", "/usr/bin/loop", "/bin",
					   "/usr/bin/target", "/opt/t/target", "/usr/bin",
					   "/usr", "/opt/t", "/opt", "" };
	char p[PATH_MAX + 64];

	if (!root[0])
		return;
	for (size_t i = 0; i < ARRAY_SIZE(rel); i++) {
		snprintf(p, sizeof(p), "%s%s", root, rel[i]);
		if (unlink(p) && rmdir(p)) {
			/* best effort: a leftover temporary directory is harmless */
		}
	}
}

struct resolve_case {
	const char *guest;
	int err;
	const char *host_rel; /* expected host path relative to root */
};

static const struct resolve_case resolve_cases[] = {
	{ "/opt/t/target", 0, "/opt/t/target" },
	{ "/usr/bin/target", 0, "/opt/t/target" },
	{ "/bin/target", 0, "/opt/t/target" },
	{ "/usr/./bin/../bin//target", 0, "/opt/t/target" },
	{ "/../../opt/t/target", 0, "/opt/t/target" },
	{ "/usr/bin/escape", 0, "/opt/t/target" },
	{ "/usr/bin/loop", -ELOOP, NULL },
	{ "/usr/bin/missing", -ENOENT, NULL },
	{ "/", 0, "/" },
};

static int test_resolve_in_root(void)
{
	ASSERT_EQ_INT(make_root(), 0);
	for (size_t i = 0; i < ARRAY_SIZE(resolve_cases); i++) {
		const struct resolve_case *c = &resolve_cases[i];
		char want[PATH_MAX + 64], *got = NULL;
		int err = resolve_in_root(root, c->guest, &got);

		if (err != c->err) {
			fprintf(stderr, "resolve %s: %d, want %d\n", c->guest, err, c->err);
			return TEST_FAIL;
		}
		if (!err) {
			snprintf(want, sizeof(want), "%s%s", root, c->host_rel);
			ASSERT_EQ_STR(got, want);
		}
		free(got);
	}
	return TEST_OK;
}

static const char expect_user[] = "target;hvp_target_mid;hvp_target_leaf 1\n";

static int test_add_mapping(void)
{
	char add[PATH_MAX + 32], *out = NULL;
	const char *meta[] = { "add", add, NULL };
	struct target t;

	ASSERT_EQ_INT(target_info(exec_path, &t), 0);
	ASSERT_EQ_INT(t.e_type, 2); /* ET_EXEC */
	snprintf(add, sizeof(add), "%s:/usr/bin/target", exec_path);
	ASSERT_EQ_INT(folded_of(meta, "/usr/bin/target", &t, 0, NULL, 0, &out), 0);
	ASSERT_EQ_STR(out, expect_user);
	free(out);
	return TEST_OK;
}

static int test_rootfs(void)
{
	const char *meta[] = { "rootfs", root, NULL };
	char *out = NULL;
	struct target t;

	ASSERT_EQ_INT(make_root(), 0);
	ASSERT_EQ_INT(target_info(exec_path, &t), 0);
	ASSERT_EQ_INT(folded_of(meta, "/bin/target", &t, 0, NULL, 0, &out), 0);
	ASSERT_EQ_STR(out, expect_user);
	free(out);
	return TEST_OK;
}

static int test_symfs_and_vmlinux(void)
{
	struct profile_options opts = { .size = sizeof(opts), .symfs = root,
					.vmlinux = exec_path };
	const char *meta[] = { "kernel", "/nonexistent/vmlinux", NULL };
	char *out = NULL;
	struct target t;

	ASSERT_EQ_INT(make_root(), 0);
	ASSERT_EQ_INT(target_info(exec_path, &t), 0);
	/* the kernel part symbolized with the --vmlinux override, outer to inner after the user */
	ASSERT_EQ_INT(folded_of(meta, "/usr/bin/target", &t, 0, &opts, 1, &out), 0);
	ASSERT_EQ_STR(out, "target;hvp_target_mid;hvp_target_leaf;hvp_target_mid_[k];"
			   "hvp_target_leaf_[k] 1\n");
	free(out);
	/* A lower-half kernel-mode address no symbol covers: [early boot], not [unknown]. */
	ASSERT_EQ_INT(folded_of(meta, "/usr/bin/target", &t, 0, &opts, 2, &out), 0);
	ASSERT_EQ_STR(out, "target;hvp_target_mid;hvp_target_leaf;hvp_target_mid_[k];"
			   "[early boot]_[k] 1\n");
	free(out);
	return TEST_OK;
}

static int test_pie_bias(void)
{
	char add[PATH_MAX + 32], *out = NULL;
	const char *meta[] = { "add", add, NULL };
	struct target t;

	ASSERT_EQ_INT(target_info(pie_path, &t), 0);
	ASSERT_EQ_INT(t.e_type, 3); /* ET_DYN */
	snprintf(add, sizeof(add), "%s:/usr/bin/target", pie_path);
	ASSERT_EQ_INT(folded_of(meta, "/usr/bin/target", &t, 0x555555554000ULL, NULL, 0, &out), 0);
	ASSERT_EQ_STR(out, expect_user);
	free(out);
	return TEST_OK;
}

static int test_unresolved(void)
{
	char *out = NULL;
	struct target t;

	ASSERT_EQ_INT(target_info(exec_path, &t), 0);
	ASSERT_EQ_INT(folded_of(NULL, "/usr/bin/nothere", &t, 0, NULL, 0, &out), 0);
	ASSERT_EQ_STR(out, "target;[unknown];[unknown] 1\n");
	free(out);
	return TEST_OK;
}

/*
 * A --call-graph recording: the symbolizer is made at the first USER_REGS, while loading, and
 * the KASLR slide's META record comes later in the file (the recorder learns a guest-chosen
 * slide mid-run): kernel frames must still be symbolized with that slide.
 */
static int test_slide_after_user_regs(void)
{
	const uint64_t slide = 0x4000000;
	struct profile_options opts = { .size = sizeof(opts), .vmlinux = exec_path };
	struct hvp_thread th = mk_thread(10, 10, "target", 0);
	struct hvp_user_regs ur = { .pid = 10, .follows = RECFILE_SAMPLE, .stack_size = 8192 };
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct hvp_sample *smp = malloc(sizeof(*smp));
	struct recfile_writer *w;
	struct profile *p;
	struct target t;
	char errbuf[256];
	int fd = mem_file(), err;

	ASSERT_TRUE(smp && fd >= 0);
	ASSERT_EQ_INT(target_info(exec_path, &t), 0);
	struct hvp_process pr = mk_process(10, "/nonexistent/target", t.text_vaddr,
					   t.text_vaddr + 0x100000);
	uint64_t kips[] = { t.leaf + 1 + slide, t.mid + 1 + slide, 0 };
	uint64_t uips[] = { t.leaf + 4, 0 };

	mk_sample(smp, 10, 10, 0, HVP_WALK_END, 0, kips, uips);
	ur.regs[HVP_REG_RIP] = t.leaf + 4;
	ur.regs[HVP_REG_RSP] = 0x7ffc0000;
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	err = recfile_write_meta(w, "call_graph", "dwarf,8192");
	err = err ? err : recfile_write_thread(w, &th);
	err = err ? err : recfile_write_process(w, &pr);
	err = err ? err : recfile_write_sample_regs(w, smp, &ur);
	err = err ? err : recfile_write_meta(w, "kernel_slide", "0x4000000");
	ASSERT_EQ_INT(recfile_writer_close(w), 0);
	free(smp);
	ASSERT_EQ_INT(err, 0);
	ASSERT_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	ASSERT_EQ_INT(profile_load_fd(fd, "slide", &opts, &p, errbuf, sizeof(errbuf)), 0);
	close(fd);
	ASSERT_EQ_INT(profile_folded(p, &sink), 0);
	profile_free(p);
	ASSERT_TRUE(ss.s && strstr(ss.s, ";hvp_target_mid_[k];hvp_target_leaf_[k] 1\n"));
	free(ss.s);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "guest paths resolve inside the root", test_resolve_in_root },
	{ "META add mapping", test_add_mapping },
	{ "META rootfs with symlinks", test_rootfs },
	{ "symfs and vmlinux override", test_symfs_and_vmlinux },
	{ "PIE load bias", test_pie_bias },
	{ "executable not found", test_unresolved },
	{ "KASLR slide META after the first USER_REGS", test_slide_after_user_regs },
};

int main(int argc, char **argv)
{
	int ret;

	if (argc < 3) {
		fprintf(stderr, "usage: %s STATIC_ELF PIE_ELF\n", argv[0]);
		return 77;
	}
	exec_path = argv[1];
	pie_path = argv[2];
	ret = test_run_all(tests, ARRAY_SIZE(tests));
	remove_root();
	return ret;
}
