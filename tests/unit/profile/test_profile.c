// SPDX-License-Identifier: MIT
// Unit tests of loading a recording (cookie join, comm and exe tracking, lost user stacks)
// and of its exports: folded stacks (golden), report (sorting, percentages), SVG.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/profile.h>

#include "rec_helpers.h"
#include "test.h"

#define K1 0xffffffff81001000ULL
#define K2 0xffffffff81002000ULL
#define K3 0xffffffff81003000ULL
#define K4 0xffffffff81004000ULL

static int wr_sample(struct recfile_writer *w, int n, int32_t pid, int32_t tgid, uint8_t cpl,
		     uint8_t user_stop, uint64_t cookie, uint8_t flags, const uint64_t *kips,
		     const uint64_t *uips)
{
	struct hvp_sample *s = malloc(sizeof(*s));
	int err = 0;

	if (!s)
		return -ENOMEM;
	mk_sample(s, pid, tgid, cpl, user_stop, cookie, kips, uips);
	s->flags = flags;
	for (int i = 0; i < n && !err; i++)
		err = recfile_write_sample(w, s);
	free(s);
	return err;
}

/*
 * The hand-built run: a user process (pid 100 "app", its thread 101 "app-worker"), a kernel
 * thread (pid 2), samples of every kind of user part: walked at once, deferred and joined,
 * deferred and never joined, lost, joined to a USER_STACK written before the sample; a comm
 * change; an orphan USER_STACK.
 */
static int write_scenario(int fd, const char *odd_comm)
{
	static const uint64_t u_a[] = { 0x401020, 0x401010, 0 }, u_b[] = { 0x401030, 0x401010, 0 },
			      u_c[] = { 0x401040, 0 }, u_lib[] = { 0x7f0000001000, 0x401010, 0 };
	static const uint64_t k12[] = { K1, K2, 0 }, k1[] = { K1, 0 }, k34[] = { K3, K4, 0 },
			      k2[] = { K2, 0 };
	struct hvp_thread t_app = mk_thread(100, 100, "app", 0);
	struct hvp_thread t_worker = mk_thread(101, 100, "app-worker", 0);
	struct hvp_thread t_kw = mk_thread(2, 2, "kworker/0:1", 1);
	struct hvp_thread t_app2 = mk_thread(100, 100, "app2", 0);
	struct hvp_thread t_odd = mk_thread(300, 300, odd_comm ? odd_comm : "odd", 0);
	struct hvp_process p_app = mk_process(100, "/usr/bin/app", 0x401000, 0x402000);
	struct hvp_user_stack us7 = mk_user_stack(100, 7, HVP_WALK_END, u_b);
	struct hvp_user_stack us9 = mk_user_stack(100, 9, HVP_WALK_END, u_c);
	struct hvp_user_stack us99 = mk_user_stack(100, 99, HVP_WALK_END, u_c);
	struct hvp_user_stack us11 = mk_user_stack(101, 11, HVP_WALK_FAULT, NULL);
	struct recfile_writer *w;
	int err, close_err;

	err = recfile_writer_open(fd, &w);
	if (err)
		return err;
	err = recfile_write_meta(w, "counter", "cpu-clock");
	err = err ? err : recfile_write_meta(w, "frequency_hz", "1000");
	err = err ? err : recfile_write_meta(w, "period_ns", "1000000");
	err = err ? err : recfile_write_meta(w, "vcpus", "2");
	err = err ? err : recfile_write_meta(w, "kernel_version", "6.1.0");
	err = err ? err : recfile_write_meta(w, "cmdline", "console=ttyS0 <quiet> & more");
	err = err ? err : recfile_write_thread(w, &t_app);
	err = err ? err : recfile_write_thread(w, &t_worker);
	err = err ? err : recfile_write_thread(w, &t_kw);
	err = err ? err : recfile_write_thread(w, &t_odd);
	err = err ? err : recfile_write_process(w, &p_app);
	/* S1: user mode, walked at once, x3 */
	err = err ? err : wr_sample(w, 3, 100, 100, 3, HVP_WALK_END, 0, 0, NULL, u_a);
	/* S2: kernel, deferred under cookie 7, x2, joined by the USER_STACK below */
	err = err ? err : wr_sample(w, 2, 100, 100, 0, HVP_WALK_DEFERRED, 7, 0, k12, NULL);
	/* S3: kernel, deferred under cookie 8, never joined */
	err = err ? err : wr_sample(w, 1, 101, 100, 0, HVP_WALK_DEFERRED, 8, 0, k1, NULL);
	err = err ? err : recfile_write_user_stack(w, &us7);
	/* S4: kernel thread */
	err = err ? err : wr_sample(w, 1, 2, 2, 0, HVP_WALK_NONE, 0, HVP_SAMPLE_KTHREAD, k34, NULL);
	/* S5: the mark was dropped */
	err = err ? err : wr_sample(w, 1, 100, 100, 0, HVP_WALK_LOST, 0, 0, k2, NULL);
	/* S6: its USER_STACK is written before it (another vCPU thread won the lock) */
	err = err ? err : recfile_write_user_stack(w, &us9);
	err = err ? err : wr_sample(w, 1, 100, 100, 0, HVP_WALK_DEFERRED, 9, 0, k1, NULL);
	/* S7: after a comm change (exec or prctl) */
	err = err ? err : recfile_write_thread(w, &t_app2);
	err = err ? err : wr_sample(w, 1, 100, 100, 3, HVP_WALK_END, 0, 0, NULL, u_a);
	/* S8: a user frame outside the executable (a shared library) */
	err = err ? err : wr_sample(w, 1, 100, 100, 3, HVP_WALK_END, 0, 0, NULL, u_lib);
	/* S9: deferred, and the walk found no frame */
	err = err ? err : wr_sample(w, 1, 101, 100, 0, HVP_WALK_DEFERRED, 11, 0, k2, NULL);
	err = err ? err : recfile_write_user_stack(w, &us11);
	/* S10: the odd comm's user sample, no PROCESS for it */
	err = err ? err : wr_sample(w, 1, 300, 300, 3, HVP_WALK_END, 0, 0, NULL, u_c);
	err = err ? err : recfile_write_user_stack(w, &us99);
	err = err ? err : recfile_write_counter(w, "samples_dropped", 5);
	/* END in a block of its own, as a close after a flush makes it: test_damaged_tail cuts it */
	err = err ? err : recfile_writer_flush(w);
	err = err ? err : recfile_write_end(w, HVP_END_EXIT_DEVICE, 0);
	close_err = recfile_writer_close(w);
	return err ? err : close_err;
}

static int load_scenario(struct profile **p, const char *odd_comm, int damage_tail)
{
	struct profile_options opts = { .size = sizeof(opts), .no_symbols = 1 };
	char err[256];
	int fd = mem_file(), ret;

	if (fd < 0)
		return -errno;
	ret = write_scenario(fd, odd_comm);
	if (!ret && damage_tail) {
		off_t end = lseek(fd, 0, SEEK_END);

		ret = ftruncate(fd, end - 3) ? -errno : 0; /* cut END's block short */
	}
	if (!ret && lseek(fd, 0, SEEK_SET) != 0)
		ret = -errno;
	if (!ret)
		ret = profile_load_fd(fd, "scenario", &opts, p, err, sizeof(err));
	if (ret)
		fprintf(stderr, "load_scenario: %s\n", err);
	close(fd);
	return ret;
}

static const char folded_golden[] =
	"app;0x401010;0x401020 3\n"
	"app;0x401010;0x401030;0xffffffff81002000_[k];0xffffffff81001000_[k] 2\n"
	"app-worker;[user stack lost: no user-stack record];0xffffffff81001000_[k] 1\n"
	"app-worker;[user stack lost: walk stopped: fault];0xffffffff81002000_[k] 1\n"
	"app2;0x401010;0x401020 1\n"
	"app2;0x401010;0x7f0000001000 1\n"
	"app;0x401040;0xffffffff81001000_[k] 1\n"
	"app;[user stack lost: dropped];0xffffffff81002000_[k] 1\n"
	"kworker/0:1;0xffffffff81004000_[k];0xffffffff81003000_[k] 1\n"
	"odd;0x401040 1\n";

static int test_folded_golden(void)
{
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile_stats st;
	struct profile *p;

	ASSERT_EQ_INT(load_scenario(&p, NULL, 0), 0);
	ASSERT_EQ_INT(profile_folded(p, &sink), 0);
	if (strcmp(ss.s, folded_golden) != 0) {
		fprintf(stderr, "folded output:\n%s--- expected:\n%s", ss.s, folded_golden);
		return TEST_FAIL;
	}
	profile_get_stats(p, &st);
	ASSERT_EQ_U64(st.samples, 13);
	ASSERT_EQ_U64(st.user_samples, 6);
	ASSERT_EQ_U64(st.kernel_samples, 7);
	ASSERT_EQ_U64(st.kthread_samples, 1);
	ASSERT_EQ_U64(st.deferred, 5);
	ASSERT_EQ_U64(st.joined, 4);
	ASSERT_EQ_U64(st.lost_user, 3);
	ASSERT_EQ_U64(st.orphan_user_stacks, 1);
	ASSERT_EQ_U64(st.period_total, 13 * 1000000ULL);
	ASSERT_TRUE(st.has_end);
	ASSERT_EQ_INT(st.end_reason, HVP_END_EXIT_DEVICE);
	ASSERT_TRUE(profile_read_error(p) == NULL);
	ASSERT_EQ_STR(profile_meta(p, "counter"), "cpu-clock");
	ASSERT_TRUE(profile_meta(p, "nope") == NULL);
	{
		uint64_t v = 0;

		ASSERT_EQ_INT(profile_counter(p, "samples_dropped", &v), 0);
		ASSERT_EQ_U64(v, 5);
		ASSERT_EQ_INT(profile_counter(p, "nope", &v), -ENOENT);
	}
	profile_free(p);
	free(ss.s);
	return TEST_OK;
}

/* The one MAPPING of @exe's code at 0x400000 for @tgid (a static non-PIE program). */
static int wr_exe_map(struct recfile_writer *w, int32_t tgid, const char *exe)
{
	struct hvp_process pr = mk_process(tgid, exe, 0x401000, 0x500000);
	struct hvp_mapping m = { .tgid = tgid, .index = 0, .count = 1, .start = 0x400000,
				 .end = 0x500000, .prot = HVP_PROT_READ | HVP_PROT_EXEC,
				 .ino = 7 };
	int err;

	snprintf(m.path, sizeof(m.path), "%s", exe);
	err = recfile_write_process(w, &pr);
	return err ? err : recfile_write_mapping(w, &m);
}

/*
 * execve during a stay in the kernel: sh's execve marked under sh's address space (cookie 5),
 * the new program's PROCESS and MAPPINGs recorded while the stay goes on (a second sample of
 * the cookie after them), and only then the USER_STACK of the old walk. Both samples are named
 * in sh's address space, the cookie's first sample's, not in the one current at the join
 * (before the fix: [demo+0x1234]). A sample already past the switch with no mark: lost, with
 * its reason.
 */
static int test_join_address_space(void)
{
	static const uint64_t k1[] = { K1, 0 }, k2[] = { K2, 0 }, u_sh[] = { 0x401234, 0 };
	static const char want[] =
		"sh;[busybox+0x1234];0xffffffff81001000_[k] 1\n"
		"sh;[busybox+0x1234];0xffffffff81002000_[k] 1\n"
		"sh;[user stack lost: walk stopped: execve];0xffffffff81002000_[k] 1\n";
	struct profile_options opts = { .size = sizeof(opts) };
	struct hvp_thread t_sh = mk_thread(50, 50, "sh", 0);
	struct hvp_user_stack us5 = mk_user_stack(50, 5, HVP_WALK_END, u_sh);
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile_stats st;
	struct recfile_writer *w;
	struct profile *p;
	char errbuf[256];
	int fd = mem_file(), err, close_err;

	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	err = recfile_write_thread(w, &t_sh);
	err = err ? err : wr_exe_map(w, 50, "/bin/busybox");
	err = err ? err : wr_sample(w, 1, 50, 50, 0, HVP_WALK_DEFERRED, 5, 0, k1, NULL);
	err = err ? err : wr_exe_map(w, 50, "/bin/demo");
	err = err ? err : wr_sample(w, 1, 50, 50, 0, HVP_WALK_DEFERRED, 5, 0, k2, NULL);
	err = err ? err : recfile_write_user_stack(w, &us5);
	err = err ? err : wr_sample(w, 1, 50, 50, 0, HVP_WALK_EXECVE, 0, 0, k2, NULL);
	close_err = recfile_writer_close(w);
	ASSERT_EQ_INT(err, 0);
	ASSERT_EQ_INT(close_err, 0);
	ASSERT_EQ_INT((int)lseek(fd, 0, SEEK_SET), 0);
	err = profile_load_fd(fd, "execve", &opts, &p, errbuf, sizeof(errbuf));
	close(fd);
	if (err)
		fprintf(stderr, "load: %s\n", errbuf);
	ASSERT_EQ_INT(err, 0);
	ASSERT_EQ_INT(profile_folded(p, &sink), 0);
	if (strcmp(ss.s, want) != 0) {
		fprintf(stderr, "folded output:\n%s--- expected:\n%s", ss.s, want);
		return TEST_FAIL;
	}
	profile_get_stats(p, &st);
	ASSERT_EQ_U64(st.lost_user, 1);
	ASSERT_EQ_U64(st.joined, 2);
	profile_free(p);
	free(ss.s);
	return TEST_OK;
}

/* The folded output also goes to an fd. */
static int test_folded_fd(void)
{
	struct profile *p;
	struct profile_sink sink;
	int fd = mem_file();
	char *out;

	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(load_scenario(&p, NULL, 0), 0);
	sink = profile_sink_fd(fd);
	ASSERT_EQ_INT(profile_folded(p, &sink), 0);
	out = slurp(fd, NULL);
	ASSERT_TRUE(out);
	ASSERT_EQ_STR(out, folded_golden);
	free(out);
	profile_free(p);
	close(fd);
	return TEST_OK;
}

/* A damaged tail still loads what is intact, and says where reading stopped. */
static int test_damaged_tail(void)
{
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile_report_options ro = { .size = sizeof(ro) };
	struct profile_stats st;
	struct profile *p;

	ASSERT_EQ_INT(load_scenario(&p, NULL, 1), 0);
	ASSERT_TRUE(profile_read_error(p) != NULL);
	ASSERT_TRUE(strstr(profile_read_error(p), "truncated block") != NULL);
	ASSERT_TRUE(strstr(profile_read_error(p), "offset ") != NULL);
	profile_get_stats(p, &st);
	ASSERT_EQ_U64(st.samples, 13);
	ASSERT_TRUE(!st.has_end);
	ASSERT_EQ_INT(profile_report(p, &ro, &sink), 0);
	ASSERT_TRUE(strstr(ss.s, "# Damaged recording: kept ") != NULL);
	ASSERT_TRUE(strstr(ss.s, "# End: no END record") != NULL);
	profile_free(p);
	free(ss.s);
	return TEST_OK;
}

struct report_case {
	const char *sort;
	const char *rows[8]; /* expected data rows in order, exact (NULL ends) */
};

/*
 * 13 samples, equal periods: each is 7.69%. Leaves: 0x401020 x4 (app x3, app2 x1), K1 x4
 * (app x3: S2 x2 + S6, app-worker x1), K2 x2 (app, app-worker), K3 x1 (kworker),
 * 0x7f0000001000 x1 (app2, outside the executable), 0x401040 x1 (odd, no PROCESS record).
 */
static const struct report_case report_cases[] = {
	{ "sym",
	  { "    30.77%        4  [.] 0x401020",
	    "    30.77%        4  [k] 0xffffffff81001000",
	    "    15.38%        2  [k] 0xffffffff81002000",
	    "     7.69%        1  [.] 0x401040",
	    "     7.69%        1  [.] 0x7f0000001000",
	    "     7.69%        1  [k] 0xffffffff81003000", NULL } },
	{ "comm,sym",
	  { "    23.08%        3  app          [.] 0x401020",
	    "    23.08%        3  app          [k] 0xffffffff81001000",
	    "     7.69%        1  app          [k] 0xffffffff81002000",
	    "     7.69%        1  app-worker   [k] 0xffffffff81001000",
	    "     7.69%        1  app-worker   [k] 0xffffffff81002000",
	    "     7.69%        1  app2         [.] 0x401020",
	    "     7.69%        1  app2         [.] 0x7f0000001000", NULL } },
	{ "dso",
	  { "    53.85%        7  [kernel.kallsyms]",
	    "    30.77%        4  app",
	    "    15.38%        2  [unknown]", NULL } },
	{ "pid,comm",
	  { "    53.85%        7  100  app",
	    "    15.38%        2  100  app2",
	    "    15.38%        2  101  app-worker",
	    "     7.69%        1    2  kworker/0:1",
	    "     7.69%        1  300  odd", NULL } },
};

static int check_report(const struct profile *p, const struct report_case *c)
{
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile_report_options ro = { .size = sizeof(ro), .sort = c->sort };
	const char *line;
	int i = 0;

	ASSERT_EQ_INT(profile_report(p, &ro, &sink), 0);
	/* Data rows follow the "#" line after the column dots. */
	line = strstr(ss.s, "\n#\n# Overhead");
	ASSERT_TRUE(line);
	line = strstr(line + 3, "\n#\n");
	ASSERT_TRUE(line);
	line += 3;
	for (; c->rows[i]; i++) {
		const char *nl = strchr(line, '\n');

		ASSERT_TRUE(nl);
		if ((size_t)(nl - line) != strlen(c->rows[i]) ||
		    strncmp(line, c->rows[i], strlen(c->rows[i])) != 0) {
			fprintf(stderr, "sort %s row %d: got \"%.*s\", want \"%s\"\nfull report:\n%s",
				c->sort, i, (int)(nl - line), line, c->rows[i], ss.s);
			return TEST_FAIL;
		}
		line = nl + 1;
	}
	free(ss.s);
	return TEST_OK;
}

static int test_report_sorting(void)
{
	struct profile *p;

	ASSERT_EQ_INT(load_scenario(&p, NULL, 0), 0);
	for (size_t i = 0; i < ARRAY_SIZE(report_cases); i++)
		if (check_report(p, &report_cases[i]) != TEST_OK)
			return TEST_FAIL;
	profile_free(p);
	return TEST_OK;
}

static int test_report_header(void)
{
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile *p;

	ASSERT_EQ_INT(load_scenario(&p, NULL, 0), 0);
	ASSERT_EQ_INT(profile_report(p, NULL, &sink), 0);
	ASSERT_TRUE(strstr(ss.s, "# Samples: 13 (kernel 7, user 6, kernel threads 1)\n"));
	ASSERT_TRUE(strstr(ss.s, "# Lost user stacks: 3 (deferred 5, joined 4, orphan "
				 "user-stack records 1)\n"));
	ASSERT_TRUE(strstr(ss.s, "# Event: cpu-clock, 1000 Hz, period 1000000 ns\n"));
	ASSERT_TRUE(strstr(ss.s, "# Kernel: version 6.1.0\n"));
	ASSERT_TRUE(strstr(ss.s, "# vCPUs: 2\n"));
	ASSERT_TRUE(strstr(ss.s, "# End: guest exit, exit status 0\n"));
	ASSERT_TRUE(strstr(ss.s, "# Counters: samples_dropped=5\n"));
	/* default sort: comm,dso,sym */
	ASSERT_TRUE(strstr(ss.s, "# Overhead  Samples  Command      Shared Object      Symbol\n"));
	profile_free(p);
	free(ss.s);
	return TEST_OK;
}

/*
 * The counters a recording ends with, in the order `hvprof record` writes them (the VMM's list,
 * then runtime_ns, first_user_ns, startup_ns), plus a name of the longest length (255 bytes).
 * Values are distinct, so a value shown next to the wrong name fails.
 */
static const char *const record_counters[] = {
	"samples", "samples_user", "samples_kernel", "samples_no_task", "samples_sink_errors",
	"exits", "exits_io", "exits_mmio", "exits_intr", "exits_debug", "syscall_fixups",
	"pf_steps", "emulation_int3", "emulation_fwait", "io_unhandled", "mmio_unhandled",
	"kernel_walk_fault", "kernel_walk_bad_fp", "kernel_walk_depth", "user_walk_fault",
	"user_walk_bad_fp", "user_walk_depth", "task_invalid", "threads", "processes",
	"sample_ns_total", "marks", "marks_reused", "resolved_at_return", "resolved_from_ptregs",
	"resolved_stale", "dropped_table_full", "dropped_exited", "dropped_no_regs", "traps_hit",
	"traps_no_mark", "traps_to_kernel", "trap_ns_total", "traps_armed_at_end",
	"user_regs_unreadable", "sample_ns_regs", "sample_ns_identity", "sample_ns_kernel_unwind",
	"sample_ns_user", "sample_ns_write", "vcpu_cpu_ns", "samples_not_long_mode",
	"tcache_hits", "tcache_misses", "runtime_ns", "first_user_ns", "startup_ns",
};
#define N_RECORD_COUNTERS ARRAY_SIZE(record_counters)

static uint64_t counter_value(size_t i)
{
	if (i == N_RECORD_COUNTERS) /* the long name */
		return 7;
	if (strcmp(record_counters[i], "traps_no_mark") == 0)
		return 12345;
	if (strcmp(record_counters[i], "tcache_misses") == 0)
		return 987654321;
	if (strcmp(record_counters[i], "trap_ns_total") == 0)
		return 18446744073709551615ULL; /* UINT64_MAX: 20 digits */
	return 1000 * i + 1;
}

/* A recording of one sample that ends with every counter of record_counters and the long one. */
static int load_counters(struct profile **p, const char *long_name)
{
	static const uint64_t k1[] = { K1, 0 };
	struct profile_options opts = { .size = sizeof(opts), .no_symbols = 1 };
	struct recfile_writer *w;
	int fd = mem_file(), err, close_err;

	if (fd < 0)
		return -errno;
	err = recfile_writer_open(fd, &w);
	if (err)
		goto out;
	err = recfile_write_meta(w, "counter", "cpu-clock");
	err = err ? err : wr_sample(w, 1, 2, 2, 0, HVP_WALK_NONE, 0, HVP_SAMPLE_KTHREAD, k1, NULL);
	/* an early value of the first counter, which the one at the end replaces in place */
	err = err ? err : recfile_write_counter(w, "samples", 99999);
	for (size_t i = 0; i < N_RECORD_COUNTERS && !err; i++)
		err = recfile_write_counter(w, record_counters[i], counter_value(i));
	err = err ? err : recfile_write_counter(w, long_name, counter_value(N_RECORD_COUNTERS));
	err = err ? err : recfile_write_end(w, HVP_END_EXIT_DEVICE, 0);
	close_err = recfile_writer_close(w);
	err = err ? err : close_err;
	if (!err && lseek(fd, 0, SEEK_SET) != 0)
		err = -errno;
	if (!err)
		err = profile_load_fd(fd, "counters", &opts, p, NULL, 0);
out:
	close(fd);
	return err;
}

/*
 * Every counter of load_counters() in recording order: "name=value, name=value..." or, with
 * @json, the "counters" member of the JSON report. Return: a malloc'ed string, or NULL.
 */
static char *expected_counters(const char *long_name, int json)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!f)
		return NULL;
	if (json)
		fputs("\"counters\":{", f);
	for (size_t i = 0; i <= N_RECORD_COUNTERS; i++) {
		const char *name = i < N_RECORD_COUNTERS ? record_counters[i] : long_name;

		if (json)
			fprintf(f, "%s\"%s\":%" PRIu64, i ? "," : "", name, counter_value(i));
		else
			fprintf(f, "%s%s=%" PRIu64, i ? ", " : "", name, counter_value(i));
	}
	if (json)
		fputs("}", f);
	if (fclose(f)) {
		free(out);
		return NULL;
	}
	return out;
}

/*
 * The "# Counters: " lines of a text report, one after the other and followed by the
 * "# Overhead:" line, joined by ", "; *@n_lines their number. Each is at most 100 columns, or
 * holds one counter alone. Return: a malloc'ed string, or NULL when the lines are not so.
 */
static char *counters_lines(const char *report, size_t *n_lines)
{
	const char *line = strstr(report, "# Counters: ");
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	*n_lines = 0;
	if (!line)
		return NULL;
	f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	for (; strncmp(line, "# Counters: ", 12) == 0; (*n_lines)++) {
		const char *nl = strchr(line, '\n');
		size_t llen = nl ? (size_t)(nl - line) : 0;

		if (!nl || (llen > 100 && memchr(line, ',', llen))) {
			fprintf(stderr, "bad counters line: %.*s\n", (int)llen, line);
			break;
		}
		fprintf(f, "%s%.*s", *n_lines ? ", " : "", (int)(llen - 12), line + 12);
		line = nl + 1;
	}
	if (fclose(f) || strncmp(line, "# Overhead: ", 12) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/*
 * report shows every counter with its value (the marks and traps counters near the end of the
 * list were cut off): the text header over "# Counters: " lines within 100 columns, the JSON in
 * a "counters" object and in "facts", the flamegraph in its description.
 */
static int test_report_counters(void)
{
	struct str_sink ss = { 0 }, js = { 0 }, svg = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile_report_options ro = { .size = sizeof(ro), .format = PROFILE_REPORT_JSON };
	char long_name[256], *text, *want_text, *want_json;
	struct profile *p;
	size_t n_lines;

	memset(long_name, 'c', 255);
	long_name[255] = '\0';
	want_text = expected_counters(long_name, 0);
	want_json = expected_counters(long_name, 1);
	ASSERT_TRUE(want_text && want_json);
	ASSERT_EQ_INT(load_counters(&p, long_name), 0);

	ASSERT_EQ_INT(profile_report(p, NULL, &sink), 0);
	text = counters_lines(ss.s, &n_lines);
	ASSERT_EQ_STR(text, want_text); /* all, in order, "samples" with its last value */
	ASSERT_TRUE(n_lines >= 12);     /* 53 counters, about 4 a line, the long name alone */
	ASSERT_TRUE(strstr(ss.s, " traps_no_mark=12345,"));
	ASSERT_TRUE(strstr(ss.s, " tcache_misses=987654321,"));
	ASSERT_TRUE(strstr(ss.s, " trap_ns_total=18446744073709551615"));
	ASSERT_TRUE(strstr(ss.s, "\n# Counters: " "cccccccccc"));
	ASSERT_TRUE(!strstr(ss.s, "99999"));

	sink.ctx = &js;
	ASSERT_EQ_INT(profile_report(p, &ro, &sink), 0);
	ASSERT_TRUE(strstr(js.s, want_json));
	ASSERT_TRUE(strstr(js.s, "\"},\"counters\":{\"samples\":1,")); /* right after "meta" */
	ASSERT_TRUE(strstr(js.s, ",\"traps_no_mark\":12345,"));
	ASSERT_TRUE(strstr(js.s, ",\"tcache_misses\":987654321,"));
	ASSERT_TRUE(strstr(js.s, "\"Counters: samples=1, samples_user=1001, "));
	ASSERT_TRUE(strstr(js.s, " tcache_misses=987654321, "));

	sink.ctx = &svg;
	ASSERT_EQ_INT(profile_flamegraph(p, NULL, &sink), 0);
	ASSERT_TRUE(strstr(svg.s, " traps_no_mark=12345,"));
	ASSERT_TRUE(strstr(svg.s, " tcache_misses=987654321,"));
	profile_free(p);
	free(text);
	free(want_text);
	free(want_json);
	free(ss.s);
	free(js.s);
	free(svg.s);
	return TEST_OK;
}

struct sort_check_case {
	const char *sort;
	int ret;
	const char *bad;
};

static const struct sort_check_case sort_checks[] = {
	{ "comm,sym", 0, NULL },
	{ "sym", 0, NULL },
	{ "dso,sym", 0, NULL },
	{ "pid,comm,dso,sym", 0, NULL },
	{ "comm,bogus", -EINVAL, "bogus" },
	{ "comm,comm", -EINVAL, "comm" },
	{ "", -EINVAL, "" },
	{ "sym,", -EINVAL, "" },
	{ "Sym", -EINVAL, "Sym" },
};

static int test_sort_check(void)
{
	struct profile_report_options ro = { .size = sizeof(ro), .sort = "comm,nope" };
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile *p;

	for (size_t i = 0; i < ARRAY_SIZE(sort_checks); i++) {
		char bad[32] = "unset";

		ASSERT_EQ_INT(profile_sort_check(sort_checks[i].sort, bad, sizeof(bad)),
			      sort_checks[i].ret);
		if (sort_checks[i].bad)
			ASSERT_EQ_STR(bad, sort_checks[i].bad);
	}
	ASSERT_EQ_INT(profile_sort_check(NULL, NULL, 0), -EINVAL);
	ASSERT_EQ_INT(load_scenario(&p, NULL, 0), 0);
	ASSERT_EQ_INT(profile_report(p, &ro, &sink), -EINVAL);
	ASSERT_TRUE(ss.s == NULL); /* nothing written */
	profile_free(p);
	return TEST_OK;
}

static int test_report_limits(void)
{
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile_report_options ro = { .size = sizeof(ro), .sort = "sym", .max_rows = 2 };
	struct profile *p;
	int rows = 0;

	ASSERT_EQ_INT(load_scenario(&p, NULL, 0), 0);
	ASSERT_EQ_INT(profile_report(p, &ro, &sink), 0);
	for (const char *l = ss.s; (l = strchr(l, '%')); l++)
		rows++;
	ASSERT_EQ_INT(rows, 2);
	free(ss.s);
	ss = (struct str_sink){ 0 };
	ro.max_rows = 0;
	ro.min_percent = 10.0;
	ASSERT_EQ_INT(profile_report(p, &ro, &sink), 0);
	rows = 0;
	for (const char *l = ss.s; (l = strchr(l, '%')); l++)
		rows++;
	ASSERT_EQ_INT(rows, 3);
	free(ss.s);
	profile_free(p);
	return TEST_OK;
}

static int count_str(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle))
		n++;
	return n;
}

static int test_svg(void)
{
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile *p;

	ASSERT_EQ_INT(load_scenario(&p, "a<b>&\"c'", 0), 0);
	ASSERT_EQ_INT(profile_flamegraph(p, NULL, &sink), 0);
	ASSERT_TRUE(strncmp(ss.s, "<?xml ", 6) == 0);
	ASSERT_TRUE(strstr(ss.s, "a&lt;b&gt;&amp;&quot;c&apos;") != NULL);
	ASSERT_TRUE(strstr(ss.s, "a<b>") == NULL);
	ASSERT_TRUE(strstr(ss.s, "console=ttyS0 &lt;quiet&gt; &amp; more") != NULL);
	ASSERT_EQ_INT(count_str(ss.s, "<g"), count_str(ss.s, "</g>"));
	ASSERT_EQ_INT(count_str(ss.s, "<svg"), 1);
	ASSERT_TRUE(strstr(ss.s, "</svg>\n") != NULL);
	/* root + comms + frames: "all" holds every sample */
	ASSERT_TRUE(strstr(ss.s, "data-name=\"all\"><title>all: 13 samples, 100.00%</title>"));
	ASSERT_TRUE(strstr(ss.s, "[k] 0xffffffff81001000 ([kernel.kallsyms])") != NULL);
	ASSERT_TRUE(strstr(ss.s, "function zoom(") && strstr(ss.s, "function search("));
	profile_free(p);
	free(ss.s);
	return TEST_OK;
}

/* A sink error stops the export and is returned. */
static int failing_write(void *ctx, const void *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	(void)len;
	return -ENOSPC;
}

static int test_sink_error(void)
{
	struct profile_sink sink = { .write = failing_write };
	struct profile *p;

	ASSERT_EQ_INT(load_scenario(&p, NULL, 0), 0);
	ASSERT_EQ_INT(profile_folded(p, &sink), -ENOSPC);
	ASSERT_EQ_INT(profile_report(p, NULL, &sink), -ENOSPC);
	ASSERT_EQ_INT(profile_flamegraph(p, NULL, &sink), -ENOSPC);
	profile_free(p);
	return TEST_OK;
}

/* Many samples of few stacks: memory is per distinct stack (only the stack count grows). */
static int test_aggregation_scale(void)
{
	static const uint64_t k[] = { K1, K2, 0 }, u1[] = { 0x401020, 0x401010, 0 },
			      u2[] = { 0x401030, 0x401010, 0 };
	struct profile_options opts = { .size = sizeof(opts), .no_symbols = 1 };
	struct hvp_sample *s = malloc(sizeof(*s));
	struct recfile_writer *w;
	struct profile_stats st;
	struct profile *p;
	int fd = mem_file();

	ASSERT_TRUE(s && fd >= 0);
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	for (int i = 0; i < 100000; i++) {
		mk_sample(s, 100 + i % 4, 100, 3, HVP_WALK_END, 0, i % 3 ? k : NULL, i & 1 ? u1 : u2);
		ASSERT_EQ_INT(recfile_write_sample(w, s), 0);
	}
	ASSERT_EQ_INT(recfile_writer_close(w), 0);
	ASSERT_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	ASSERT_EQ_INT(profile_load_fd(fd, NULL, &opts, &p, NULL, 0), 0);
	profile_get_stats(p, &st);
	ASSERT_EQ_U64(st.samples, 100000);
	/* pid (i % 4) decides the user stack (i & 1); with or without a kernel part (i % 3) */
	ASSERT_EQ_U64(st.stacks, 4 * 2);
	profile_free(p);
	free(s);
	close(fd);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "folded golden: join, lost, kthread, comm change", test_folded_golden },
	{ "folded to an fd", test_folded_fd },
	{ "a joined chain is named in its first sample's address space (execve)",
	  test_join_address_space },
	{ "damaged tail keeps the intact part", test_damaged_tail },
	{ "report sorting and percentages", test_report_sorting },
	{ "report header facts", test_report_header },
	{ "report shows every counter (text and JSON)", test_report_counters },
	{ "sort key validation", test_sort_check },
	{ "report max rows and min percent", test_report_limits },
	{ "svg escaped and balanced", test_svg },
	{ "sink errors are returned", test_sink_error },
	{ "aggregation by distinct stack", test_aggregation_scale },
};

TEST_MAIN(tests)
