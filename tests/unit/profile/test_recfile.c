// SPDX-License-Identifier: MIT
// Unit tests of the recording file: round trip of every record type (format versions 2 and 1),
// damaged files of both versions, write errors, concurrent writers and their order.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <hvprof/profile.h>

#include "rec_blocks.h"
#include "rec_helpers.h"
#include "test.h"

#define K1 0xffffffff81001000ULL
#define K2 0xffffffff81002000ULL

/*
 * A recording with one record of every type, in two blocks: a flush after the SAMPLE ends the
 * first (META, META, SAMPLE), the close the second (the 6 others).
 */
static int write_all_types(int fd)
{
	struct recfile_writer *w;
	struct hvp_sample *s = calloc(1, sizeof(*s));
	struct hvp_thread t = mk_thread(42, 40, "worker", 0);
	struct hvp_process p = mk_process(40, "/usr/bin/app", 0x401000, 0x402000);
	uint64_t kips[] = { K1, K2, 0 }, uips[] = { 0x401010, 0x401020, 0x401030, 0 };
	struct hvp_user_stack u = mk_user_stack(42, 77, HVP_WALK_END, uips);
	int err;

	if (!s)
		return -ENOMEM;
	mk_sample(s, 42, 40, 0, HVP_WALK_DEFERRED, 77, kips, NULL);
	s->time_ns = 123456789;
	s->vcpu = 3;
	s->flags = HVP_SAMPLE_NO_TASK;
	s->kernel_stop = HVP_WALK_BAD_FP;
	s->cr3 = 0x1234000;
	s->task = 0xffff888012345600ULL;
	t.time_ns = 5;
	p.time_ns = 6;
	u.time_ns = 7;
	u.vcpu = 1;

	err = recfile_writer_open(fd, &w);
	if (err)
		goto out;
	err = recfile_write_meta(w, "kernel", "/boot/vmlinux-6.1");
	if (!err)
		err = recfile_write_meta(w, "cmdline", "");
	if (!err)
		err = recfile_write_sample(w, s);
	if (!err)
		err = recfile_writer_flush(w);
	if (!err)
		err = recfile_write_thread(w, &t);
	if (!err)
		err = recfile_write_process(w, &p);
	if (!err)
		err = recfile_write_user_stack(w, &u);
	if (!err)
		err = recfile_write_counter(w, "samples_dropped", 0xfedcba9876543210ULL);
	if (!err) {
		struct hvp_event ev = { .time_ns = 16789000000ull, .kind = HVP_EVENT_WORKLOAD_END,
					.value = 42 };

		err = recfile_write_event(w, &ev);
	}
	if (!err)
		err = recfile_write_end(w, HVP_END_EXIT_DEVICE, -3);
	if (!err) {
		err = recfile_writer_close(w);
	} else {
		int close_err = recfile_writer_close(w);

		err = err ? err : close_err;
	}
out:
	free(s);
	return err;
}

#define N_ALL_TYPES 9

/* The same records as a version-1 file (rec_blocks.h): what an hvprof before version 2 wrote. */
static int write_all_types_v1(int fd)
{
	int fd2 = mem_file(), err;
	uint8_t *v1 = NULL;
	size_t len, v1_len;
	char *v2;

	if (fd2 < 0)
		return -EIO;
	err = write_all_types(fd2);
	v2 = err ? NULL : slurp(fd2, &len);
	if (v2)
		v1 = rb_to_v1((const uint8_t *)v2, len, &v1_len);
	if (!err && (!v1 || write(fd, v1, v1_len) != (ssize_t)v1_len))
		err = -EIO;
	free(v1);
	free(v2);
	close(fd2);
	return err;
}

static int round_trip(int version)
{
	struct recfile_reader *r;
	struct recfile_record *rec = malloc(sizeof(*rec));
	int fd = mem_file();
	char err[256];

	ASSERT_TRUE(fd >= 0 && rec);
	ASSERT_EQ_INT(version == 1 ? write_all_types_v1(fd) : write_all_types(fd), 0);
	ASSERT_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	ASSERT_EQ_INT(recfile_reader_open_fd(fd, "mem", &r, err, sizeof(err)), 0);
	ASSERT_EQ_INT(recfile_reader_version(r), version);
	ASSERT_EQ_U64(recfile_reader_offset(r), RECFILE_HEADER_SIZE);

	ASSERT_EQ_INT(recfile_reader_next(r, rec), 1);
	ASSERT_EQ_INT(rec->type, RECFILE_META);
	/* version 2: the first record follows the first block's 16-byte header */
	ASSERT_EQ_U64(rec->offset, RECFILE_HEADER_SIZE + (version == 1 ? 0 : TEST_BLOCK_HDR));
	ASSERT_EQ_STR(rec->meta.key, "kernel");
	ASSERT_EQ_STR(rec->meta.value, "/boot/vmlinux-6.1");

	ASSERT_EQ_INT(recfile_reader_next(r, rec), 1);
	ASSERT_EQ_INT(rec->type, RECFILE_META);
	ASSERT_EQ_STR(rec->meta.key, "cmdline");
	ASSERT_EQ_STR(rec->meta.value, "");

	ASSERT_EQ_INT(recfile_reader_next(r, rec), 1);
	ASSERT_EQ_INT(rec->type, RECFILE_SAMPLE);
	ASSERT_EQ_U64(rec->sample.time_ns, 123456789);
	ASSERT_EQ_INT(rec->sample.vcpu, 3);
	ASSERT_EQ_INT(rec->sample.cpl, 0);
	ASSERT_EQ_INT(rec->sample.flags, HVP_SAMPLE_NO_TASK);
	ASSERT_EQ_INT(rec->sample.kernel_stop, HVP_WALK_BAD_FP);
	ASSERT_EQ_INT(rec->sample.user_stop, HVP_WALK_DEFERRED);
	ASSERT_EQ_U64(rec->sample.rip, K1);
	ASSERT_EQ_U64(rec->sample.cr3, 0x1234000);
	ASSERT_EQ_U64(rec->sample.task, 0xffff888012345600ULL);
	ASSERT_EQ_INT(rec->sample.pid, 42);
	ASSERT_EQ_INT(rec->sample.tgid, 40);
	ASSERT_EQ_U64(rec->sample.cookie, 77);
	ASSERT_EQ_U64(rec->sample.period, 1000000);
	ASSERT_EQ_INT(rec->sample.n_kernel, 2);
	ASSERT_EQ_INT(rec->sample.n_user, 0);
	ASSERT_EQ_U64(rec->sample.kernel_ips[0], K1);
	ASSERT_EQ_U64(rec->sample.kernel_ips[1], K2);

	ASSERT_EQ_INT(recfile_reader_next(r, rec), 1);
	ASSERT_EQ_INT(rec->type, RECFILE_THREAD);
	ASSERT_EQ_U64(rec->thread.time_ns, 5);
	ASSERT_EQ_INT(rec->thread.pid, 42);
	ASSERT_EQ_INT(rec->thread.tgid, 40);
	ASSERT_EQ_INT(rec->thread.kthread, 0);
	ASSERT_EQ_U64(rec->thread.task, 0xffff888000100000ULL + 42 * 0x1000);
	ASSERT_EQ_STR(rec->thread.comm, "worker");

	ASSERT_EQ_INT(recfile_reader_next(r, rec), 1);
	ASSERT_EQ_INT(rec->type, RECFILE_PROCESS);
	ASSERT_EQ_U64(rec->process.time_ns, 6);
	ASSERT_EQ_INT(rec->process.tgid, 40);
	ASSERT_EQ_U64(rec->process.mm, 0xffff888000200000ULL);
	ASSERT_EQ_U64(rec->process.start_code, 0x401000);
	ASSERT_EQ_U64(rec->process.end_code, 0x402000);
	ASSERT_EQ_STR(rec->process.exe, "/usr/bin/app");

	ASSERT_EQ_INT(recfile_reader_next(r, rec), 1);
	ASSERT_EQ_INT(rec->type, RECFILE_USER_STACK);
	ASSERT_EQ_U64(rec->user_stack.time_ns, 7);
	ASSERT_EQ_U64(rec->user_stack.cookie, 77);
	ASSERT_EQ_INT(rec->user_stack.pid, 42);
	ASSERT_EQ_INT(rec->user_stack.vcpu, 1);
	ASSERT_EQ_INT(rec->user_stack.stop, HVP_WALK_END);
	ASSERT_EQ_INT(rec->user_stack.n_user, 3);
	ASSERT_EQ_U64(rec->user_stack.user_ips[2], 0x401030);

	ASSERT_EQ_INT(recfile_reader_next(r, rec), 1);
	ASSERT_EQ_INT(rec->type, RECFILE_COUNTER);
	ASSERT_EQ_STR(rec->counter.name, "samples_dropped");
	ASSERT_EQ_U64(rec->counter.value, 0xfedcba9876543210ULL);

	ASSERT_EQ_INT(recfile_reader_next(r, rec), 1);
	ASSERT_EQ_INT(rec->type, RECFILE_EVENT);
	ASSERT_EQ_U64(rec->event.time_ns, 16789000000ull);
	ASSERT_EQ_INT(rec->event.kind, HVP_EVENT_WORKLOAD_END);
	ASSERT_EQ_INT(rec->event.value, 42);
	ASSERT_EQ_STR(recfile_type_name(RECFILE_EVENT), "EVENT");

	ASSERT_EQ_INT(recfile_reader_next(r, rec), 1);
	ASSERT_EQ_INT(rec->type, RECFILE_END);
	ASSERT_EQ_INT(rec->end.reason, HVP_END_EXIT_DEVICE);
	ASSERT_EQ_INT(rec->end.exit_status, -3);

	ASSERT_EQ_INT(recfile_reader_next(r, rec), 0);
	ASSERT_EQ_INT(recfile_reader_next(r, rec), 0);
	ASSERT_EQ_U64(recfile_reader_records(r), N_ALL_TYPES);
	ASSERT_TRUE(recfile_reader_error(r) == NULL);
	recfile_reader_close(r);
	close(fd);
	free(rec);
	return TEST_OK;
}

static int test_round_trip(void)
{
	return round_trip(RECFILE_VERSION);
}

static int test_round_trip_v1(void)
{
	return round_trip(1);
}

/*
 * A version-1 file as an hvprof before version 2 wrote it, byte for byte (the example of
 * docs/recording-format.md up to that version): one META record `counter` = `cpu-clock`.
 */
static int test_v1_bytes(void)
{
	static const uint8_t v1[] = {
		0x48, 0x56, 0x50, 0x52, 0x4f, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x10,
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x07, 0x00,
		0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 'c',  'o',  'u',  'n',  't',  'e',  'r',
		'c',  'p',  'u',  '-',  'c',  'l',  'o',  'c',  'k',  0xd3, 0x30, 0x0c, 0xcd,
	};
	struct recfile_record *rec = malloc(sizeof(*rec));
	struct recfile_reader *r;
	uint8_t bad[sizeof(v1)];
	int fd = mem_file_from(v1, sizeof(v1));

	ASSERT_TRUE(rec && fd >= 0);
	ASSERT_EQ_INT(recfile_reader_open_fd(fd, NULL, &r, NULL, 0), 0);
	ASSERT_EQ_INT(recfile_reader_version(r), 1);
	ASSERT_EQ_INT(recfile_reader_next(r, rec), 1);
	ASSERT_EQ_INT(rec->type, RECFILE_META);
	ASSERT_EQ_STR(rec->meta.key, "counter");
	ASSERT_EQ_STR(rec->meta.value, "cpu-clock");
	ASSERT_EQ_INT(recfile_reader_next(r, rec), 0);
	recfile_reader_close(r);
	close(fd);
	/* its CRC still guards it */
	memcpy(bad, v1, sizeof(v1));
	bad[40] ^= 1;
	fd = mem_file_from(bad, sizeof(bad));
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(recfile_reader_open_fd(fd, NULL, &r, NULL, 0), 0);
	ASSERT_EQ_INT(recfile_reader_next(r, rec), -EBADMSG);
	ASSERT_TRUE(strstr(recfile_reader_error(r), "offset 16: CRC mismatch in a META record"));
	recfile_reader_close(r);
	close(fd);
	free(rec);
	return TEST_OK;
}

/* Full callchains (HVP_MAX_CALLCHAIN each) survive; one more is refused. */
static int test_max_callchain(void)
{
	struct hvp_sample *s = calloc(1, sizeof(*s));
	struct recfile_record *rec = malloc(sizeof(*rec));
	struct recfile_writer *w;
	struct recfile_reader *r;
	int fd = mem_file();

	ASSERT_TRUE(s && rec && fd >= 0);
	s->n_kernel = HVP_MAX_CALLCHAIN;
	s->n_user = HVP_MAX_CALLCHAIN;
	for (int i = 0; i < HVP_MAX_CALLCHAIN; i++) {
		s->kernel_ips[i] = K1 + (uint64_t)i;
		s->user_ips[i] = 0x400000 + (uint64_t)i;
	}
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	ASSERT_EQ_INT(recfile_write_sample(w, s), 0);
	s->n_user = HVP_MAX_CALLCHAIN + 1;
	ASSERT_EQ_INT(recfile_write_sample(w, s), -EINVAL);
	ASSERT_EQ_INT(recfile_write_meta(w, "", "x"), -EINVAL);
	ASSERT_EQ_INT(recfile_write_end(w, (enum hvp_end_reason)99, 0), -EINVAL);
	ASSERT_EQ_INT(recfile_writer_close(w), 0); /* argument errors are not sticky */
	ASSERT_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	ASSERT_EQ_INT(recfile_reader_open_fd(fd, NULL, &r, NULL, 0), 0);
	ASSERT_EQ_INT(recfile_reader_next(r, rec), 1);
	ASSERT_EQ_INT(rec->sample.n_kernel, HVP_MAX_CALLCHAIN);
	ASSERT_EQ_INT(rec->sample.n_user, HVP_MAX_CALLCHAIN);
	ASSERT_EQ_U64(rec->sample.user_ips[HVP_MAX_CALLCHAIN - 1], 0x400000 + HVP_MAX_CALLCHAIN - 1);
	ASSERT_EQ_INT(recfile_reader_next(r, rec), 0);
	recfile_reader_close(r);
	close(fd);
	free(s);
	free(rec);
	return TEST_OK;
}

/*
 * ---- damaged version-1 files: each row edits a good recording (write_all_types_v1) and says
 * what the reader must report
 */

enum edit {
	EDIT_TRUNCATE,      /* keep @arg bytes of the file */
	EDIT_FLIP,          /* xor byte @arg with 0x40 */
	EDIT_SET_U32,       /* write @val at @arg (little-endian) */
	EDIT_SET_U32_CRC,   /* the same, then fix the record's CRC: fields contradict the size */
};

struct damage_case {
	const char *name;
	enum edit edit;
	int rec;            /* the edit is relative to the start of record @rec (-1: file start) */
	long arg;
	uint32_t val;
	int open_err;       /* expected from recfile_reader_open_fd */
	int kept;           /* intact records before the stop */
	const char *msg;    /* substring of the error text */
};

static const struct damage_case damage_cases[] = {
	{ "truncated mid-record (last)", EDIT_TRUNCATE, N_ALL_TYPES - 1, 10, 0, 0,
	  N_ALL_TYPES - 1, "truncated END record" },
	{ "truncated mid-record (sample)", EDIT_TRUNCATE, 2, 40, 0, 0, 2,
	  "truncated SAMPLE record" },
	{ "truncated inside a record header", EDIT_TRUNCATE, 3, 3, 0, 0, 3,
	  "8-byte header" },
	{ "cut at a record boundary", EDIT_TRUNCATE, 4, 0, 0, 0, 4, NULL },
	{ "flipped payload byte", EDIT_FLIP, 2, 20, 0, 0, 2, "CRC mismatch in a SAMPLE record" },
	{ "flipped CRC byte", EDIT_FLIP, 1, 8 + 8 + 7 + 1, 0, 0, 1, "CRC mismatch" },
	{ "flipped type byte", EDIT_FLIP, 5, 0, 0, 0, 5, "CRC mismatch" },
	{ "zero size field", EDIT_SET_U32, 3, 4, 0, 0, 3, "impossible record size 0" },
	{ "size below minimum", EDIT_SET_U32, 3, 4, 11, 0, 3, "impossible record size 11" },
	{ "oversized size field", EDIT_SET_U32, 6, 4, 0x7fffffff, 0, 6,
	  "impossible record size 2147483647" },
	{ "size past end of file", EDIT_SET_U32, 6, 4, 4096, 0, 6, "truncated COUNTER record" },
	{ "META key_len past the payload", EDIT_SET_U32_CRC, 0, 8, 200, 0, 0,
	  "malformed META record" },
	{ "SAMPLE n_user above the maximum", EDIT_SET_U32_CRC, 2, 8 + 64, 2 | (129u << 16), 0, 2,
	  "malformed SAMPLE record" },
	{ "THREAD with a wrong size", EDIT_SET_U32_CRC, 3, 4, 12 + 44 - 4, 0, 3,
	  "malformed THREAD record" },
	{ "EVENT with a wrong size", EDIT_SET_U32_CRC, 7, 4, 12 + 16 - 4, 0, 7,
	  "malformed EVENT record" },
	{ "bad magic", EDIT_FLIP, -1, 0, 0, -EBADMSG, 0, "bad magic" },
	{ "future version", EDIT_SET_U32, -1, 8, RECFILE_VERSION + 1, -ENOTSUP, 0,
	  "newer than this hvprof reads" },
	{ "version zero", EDIT_SET_U32, -1, 8, 0, -EBADMSG, 0, "bad format version" },
	{ "bad header size", EDIT_SET_U32, -1, 12, 3, -EBADMSG, 0, "bad file header size" },
	{ "header cut short", EDIT_TRUNCATE, -1, 10, 0, -EBADMSG, 0, "cut short" },
	{ "empty file", EDIT_TRUNCATE, -1, 0, 0, -EBADMSG, 0, "empty file (0 bytes)" },
	{ "header only", EDIT_TRUNCATE, 0, 0, 0, 0, 0, NULL },
};

/* File offsets of the N_ALL_TYPES records of write_all_types(). */
static int record_offsets(const char *buf, size_t len, long *offs)
{
	size_t off = RECFILE_HEADER_SIZE;

	for (int i = 0; i < N_ALL_TYPES; i++) {
		uint32_t size;

		if (off + 8 > len)
			return -1;
		memcpy(&size, buf + off + 4, 4); /* the test host is little-endian (x86-64) */
		offs[i] = (long)off;
		off += size;
	}
	return off == len ? 0 : -1;
}

static int run_damage(const struct damage_case *c, const char *good, size_t good_len,
		      const long *offs)
{
	char *buf = malloc(good_len), err[512] = "", expect_off[64];
	struct recfile_record *rec = malloc(sizeof(*rec));
	struct recfile_reader *r;
	size_t len = good_len;
	long base = c->rec < 0 ? 0 : offs[c->rec];
	int fd, ret, n = 0;

	ASSERT_TRUE(buf && rec);
	memcpy(buf, good, good_len);
	switch (c->edit) {
	case EDIT_TRUNCATE:
		len = (size_t)(base + c->arg);
		break;
	case EDIT_FLIP:
		buf[base + c->arg] ^= 0x40;
		break;
	case EDIT_SET_U32:
		memcpy(buf + base + c->arg, &c->val, 4);
		break;
	case EDIT_SET_U32_CRC: {
		uint32_t size, crc;

		memcpy(buf + base + c->arg, &c->val, 4);
		memcpy(&size, buf + base + 4, 4);
		crc = (uint32_t)crc32(0, (const uint8_t *)buf + base, size - 4);
		memcpy(buf + base + size - 4, &crc, 4);
		break;
	}
	}
	fd = mem_file_from(buf, len);
	ASSERT_TRUE(fd >= 0);
	ret = recfile_reader_open_fd(fd, "damaged.hvp", &r, err, sizeof(err));
	ASSERT_EQ_INT(ret, c->open_err);
	if (ret) {
		ASSERT_TRUE(strstr(err, c->msg) != NULL);
		ASSERT_TRUE(strstr(err, "damaged.hvp") != NULL);
		goto out;
	}
	while ((ret = recfile_reader_next(r, rec)) == 1)
		n++;
	ASSERT_EQ_INT(n, c->kept);
	ASSERT_EQ_U64(recfile_reader_records(r), (uint64_t)c->kept);
	if (!c->msg) {
		ASSERT_EQ_INT(ret, 0);
		ASSERT_TRUE(recfile_reader_error(r) == NULL);
	} else {
		ASSERT_EQ_INT(ret, -EBADMSG);
		ASSERT_EQ_INT(recfile_reader_next(r, rec), -EBADMSG); /* sticky */
		ASSERT_TRUE(recfile_reader_error(r) != NULL);
		if (!strstr(recfile_reader_error(r), c->msg)) {
			fprintf(stderr, "error \"%s\" lacks \"%s\"\n", recfile_reader_error(r),
				c->msg);
			return TEST_FAIL;
		}
		/* The error names the offset of the damaged record, where the intact part ends. */
		snprintf(expect_off, sizeof(expect_off), "offset %ld:", offs[c->kept]);
		ASSERT_TRUE(strstr(recfile_reader_error(r), expect_off) != NULL);
		ASSERT_EQ_U64(recfile_reader_offset(r), (uint64_t)offs[c->kept]);
	}
	recfile_reader_close(r);
out:
	close(fd);
	free(buf);
	free(rec);
	return TEST_OK;
}

static int test_damaged(void)
{
	long offs[N_ALL_TYPES];
	size_t len;
	char *good;
	int fd = mem_file();

	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(write_all_types_v1(fd), 0);
	good = slurp(fd, &len);
	ASSERT_TRUE(good);
	ASSERT_EQ_INT(record_offsets(good, len, offs), 0);
	for (size_t i = 0; i < ARRAY_SIZE(damage_cases); i++) {
		if (run_damage(&damage_cases[i], good, len, offs) != TEST_OK) {
			fprintf(stderr, "damage case failed: %s\n", damage_cases[i].name);
			return TEST_FAIL;
		}
	}
	free(good);
	close(fd);
	return TEST_OK;
}

/* A version-1 record of a type this version does not know is skipped, and reading goes on. */
static int test_unknown_type_skipped(void)
{
	static const uint8_t unknown_rec[] = { 99, 0, 0, 0, 16, 0, 0, 0, 1, 2, 3, 4 };
	struct recfile_record *rec = malloc(sizeof(*rec));
	int fd = mem_file(), fd2 = mem_file(), ret, n = 0;
	struct recfile_reader *r;
	uint8_t crc_le[4];
	size_t len;
	uint32_t crc;
	char *good;

	ASSERT_TRUE(rec && fd >= 0 && fd2 >= 0);
	ASSERT_EQ_INT(write_all_types_v1(fd2), 0);
	good = slurp(fd2, &len);
	ASSERT_TRUE(good);
	/* header, the unknown record, then the records of a good file */
	ASSERT_EQ_INT(write(fd, good, RECFILE_HEADER_SIZE), RECFILE_HEADER_SIZE);
	crc = (uint32_t)crc32(0, unknown_rec, sizeof(unknown_rec));
	memcpy(crc_le, &crc, 4);
	ASSERT_EQ_INT(write(fd, unknown_rec, sizeof(unknown_rec)), sizeof(unknown_rec));
	ASSERT_EQ_INT(write(fd, crc_le, 4), 4);
	ASSERT_EQ_INT(write(fd, good + RECFILE_HEADER_SIZE, len - RECFILE_HEADER_SIZE),
		      (ssize_t)(len - RECFILE_HEADER_SIZE));
	ASSERT_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	ASSERT_EQ_INT(recfile_reader_open_fd(fd, NULL, &r, NULL, 0), 0);
	while ((ret = recfile_reader_next(r, rec)) == 1) {
		if (n++ == 0)
			ASSERT_EQ_U64(rec->offset, RECFILE_HEADER_SIZE + 16);
	}
	ASSERT_EQ_INT(ret, 0);
	ASSERT_EQ_INT(n, N_ALL_TYPES);
	ASSERT_EQ_U64(recfile_reader_skipped(r), 1);
	recfile_reader_close(r);
	close(fd);
	close(fd2);
	free(good);
	free(rec);
	return TEST_OK;
}

/* A write error is sticky: every later call and close report it. */
static int test_write_error_sticky(void)
{
	struct recfile_writer *w;
	int fd = mem_file(), full = open("/dev/full", O_WRONLY | O_CLOEXEC);

	if (full < 0)
		return TEST_SKIP;
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(recfile_writer_open(full, &w) , -ENOSPC);
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	ASSERT_EQ_INT(recfile_write_meta(w, "a", "b"), 0);
	ASSERT_EQ_INT(dup2(full, fd), fd); /* the disk fills up under the writer */
	ASSERT_EQ_INT(recfile_writer_flush(w), -ENOSPC);
	ASSERT_EQ_INT(recfile_write_counter(w, "x", 1), -ENOSPC);
	ASSERT_EQ_INT(recfile_writer_flush(w), -ENOSPC);
	ASSERT_EQ_INT(recfile_writer_close(w), -ENOSPC);
	close(full);
	close(fd);
	return TEST_OK;
}

/*
 * Records reach the fd without an explicit flush: the writer's thread writes at least every 10 ms
 * and when a thread's buffer is half full (docs/recording-format.md, "The writer").
 */
static int test_flush_threshold(void)
{
	struct hvp_sample *s = calloc(1, sizeof(*s));
	struct recfile_writer *w;
	uint64_t kips[] = { K1, K2, 0 };
	int fd = mem_file();
	off_t records_bytes = 0;

	ASSERT_TRUE(s && fd >= 0);
	mk_sample(s, 1, 1, 0, HVP_WALK_NONE, 0, kips, NULL);
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	for (int i = 0; i < 2000; i++) {
		ASSERT_EQ_INT(recfile_write_sample(w, s), 0);
		records_bytes += 8 + 72 + 16;
	}
	ASSERT_EQ_U64(recfile_writer_records(w), 2000);
	for (int i = 0; i < 200 && lseek(fd, 0, SEEK_END) < RECFILE_HEADER_SIZE + records_bytes; i++)
		usleep(10000);
	/* every record, each block adding its 16-byte header */
	ASSERT_TRUE(lseek(fd, 0, SEEK_END) >= RECFILE_HEADER_SIZE + records_bytes + TEST_BLOCK_HDR);
	ASSERT_EQ_INT(recfile_writer_flush(w), 0);
	ASSERT_EQ_INT(recfile_writer_close(w), 0);
	close(fd);
	free(s);
	return TEST_OK;
}

#define N_THREADS 4
#define N_PER_THREAD 5000

struct thread_arg {
	struct recfile_writer *w;
	int id;
	int err;
};

static void *writer_thread(void *p)
{
	struct thread_arg *a = p;
	struct hvp_sample s;
	uint64_t kips[] = { K1, 0 };

	mk_sample(&s, a->id, a->id, 0, HVP_WALK_NONE, 0, kips, NULL);
	for (int i = 0; i < N_PER_THREAD && !a->err; i++) {
		s.time_ns = (uint64_t)i;
		a->err = recfile_write_sample(a->w, &s);
	}
	return NULL;
}

/* vCPU threads write concurrently: every record arrives whole, per-thread order kept. */
static int test_concurrent_writers(void)
{
	struct recfile_record *rec = malloc(sizeof(*rec));
	struct thread_arg args[N_THREADS];
	pthread_t th[N_THREADS];
	uint64_t next[N_THREADS] = { 0 };
	struct recfile_writer *w;
	struct recfile_reader *r;
	int fd = mem_file(), ret;

	ASSERT_TRUE(rec && fd >= 0);
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	for (int i = 0; i < N_THREADS; i++) {
		args[i] = (struct thread_arg){ .w = w, .id = i };
		ASSERT_EQ_INT(pthread_create(&th[i], NULL, writer_thread, &args[i]), 0);
	}
	for (int i = 0; i < N_THREADS; i++) {
		pthread_join(th[i], NULL);
		ASSERT_EQ_INT(args[i].err, 0);
	}
	ASSERT_EQ_INT(recfile_writer_close(w), 0);
	ASSERT_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	ASSERT_EQ_INT(recfile_reader_open_fd(fd, NULL, &r, NULL, 0), 0);
	while ((ret = recfile_reader_next(r, rec)) == 1) {
		ASSERT_TRUE(rec->sample.pid >= 0 && rec->sample.pid < N_THREADS);
		ASSERT_EQ_U64(rec->sample.time_ns, next[rec->sample.pid]);
		next[rec->sample.pid]++;
	}
	ASSERT_EQ_INT(ret, 0);
	ASSERT_EQ_U64(recfile_reader_records(r), N_THREADS * N_PER_THREAD);
	recfile_reader_close(r);
	close(fd);
	free(rec);
	return TEST_OK;
}

static int test_names(void)
{
	ASSERT_EQ_STR(recfile_type_name(RECFILE_USER_STACK), "USER_STACK");
	ASSERT_EQ_STR(recfile_type_name(0), "unknown");
	ASSERT_EQ_STR(recfile_type_name(1000), "unknown");
	ASSERT_EQ_STR(recfile_end_reason_name(HVP_END_EXIT_DEVICE), "guest exit");
	ASSERT_EQ_STR(recfile_end_reason_name(0), "unknown");
	ASSERT_EQ_STR(recfile_walk_stop_name(HVP_WALK_LOST), "lost");
	ASSERT_EQ_STR(recfile_walk_stop_name(77), "unknown");
	return TEST_OK;
}

static int test_open_missing(void)
{
	struct recfile_reader *r;
	char err[256];

	ASSERT_EQ_INT(recfile_reader_open("/nonexistent/rec.hvp", &r, err, sizeof(err)), -ENOENT);
	ASSERT_TRUE(strstr(err, "/nonexistent/rec.hvp") != NULL);
	return TEST_OK;
}

/* MAPPING records: a snapshot of two written and read back; a damaged one stops the reader. */
static int test_mapping(void)
{
	struct hvp_mapping m = { .time_ns = 77, .tgid = 4242, .index = 0, .count = 2,
				 .start = 0x7f0000000000ull, .end = 0x7f0000021000ull,
				 .pgoff = 0x3000, .ino = 123456, .dev = 0x800002,
				 .prot = HVP_PROT_READ | HVP_PROT_EXEC, .build_id_len = 20,
				 .build_id = { 0xde, 0xad, 0xbe, 0xef, [19] = 0x42 },
				 .path = "/usr/lib/x86_64-linux-gnu/libc.so.6" };
	struct recfile_record *rec = malloc(sizeof(*rec));
	struct recfile_writer *w;
	struct recfile_reader *r;
	int fd = mem_file(), n = 0;

	ASSERT_TRUE(rec && fd >= 0);
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	ASSERT_EQ_INT(recfile_write_mapping(w, &m), 0);
	m.index = 1;
	m.start = 0x7ffd00000000ull;
	m.end = 0x7ffd00021000ull;
	m.path[0] = '\0'; /* anonymous: the stack */
	m.build_id_len = 0;
	ASSERT_EQ_INT(recfile_write_mapping(w, &m), 0);
	m.index = 2; /* not in a snapshot of 2 */
	ASSERT_EQ_INT(recfile_write_mapping(w, &m), -EINVAL);
	ASSERT_EQ_INT(recfile_writer_close(w), 0);
	ASSERT_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	ASSERT_EQ_INT(recfile_reader_open_fd(fd, NULL, &r, NULL, 0), 0);
	while (recfile_reader_next(r, rec) == 1) {
		ASSERT_EQ_INT(rec->type, RECFILE_MAPPING);
		ASSERT_EQ_INT(rec->mapping.tgid, 4242);
		ASSERT_EQ_INT(rec->mapping.index, n);
		ASSERT_EQ_INT(rec->mapping.count, 2);
		ASSERT_EQ_U64(rec->mapping.pgoff, 0x3000);
		ASSERT_EQ_U64(rec->mapping.ino, 123456);
		ASSERT_EQ_U64(rec->mapping.dev, 0x800002);
		ASSERT_EQ_U64(rec->mapping.prot, HVP_PROT_READ | HVP_PROT_EXEC);
		ASSERT_EQ_STR(rec->mapping.path, n ? "" : "/usr/lib/x86_64-linux-gnu/libc.so.6");
		ASSERT_EQ_INT(rec->mapping.build_id_len, n ? 0 : 20);
		ASSERT_TRUE(n || (rec->mapping.build_id[0] == 0xde && rec->mapping.build_id[19] == 0x42));
		ASSERT_EQ_U64(rec->mapping.start, n ? 0x7ffd00000000ull : 0x7f0000000000ull);
		n++;
	}
	ASSERT_EQ_INT(n, 2);
	recfile_reader_close(r);
	close(fd);
	free(rec);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "round trip of every record type", test_round_trip },
	{ "round trip of every record type, version-1 file", test_round_trip_v1 },
	{ "a version-1 file as written before version 2", test_v1_bytes },
	{ "MAPPING records: a snapshot written and read back", test_mapping },
	{ "full callchains; bad arguments refused", test_max_callchain },
	{ "damaged version-1 files stop at the last intact record", test_damaged },
	{ "unknown record types are skipped (version 1)", test_unknown_type_skipped },
	{ "write errors are sticky", test_write_error_sticky },
	{ "records reach the fd without a flush", test_flush_threshold },
	{ "concurrent writers", test_concurrent_writers },
	{ "names of types, end reasons, walk stops", test_names },
	{ "open of a missing file names it", test_open_missing },
};

TEST_MAIN(tests)
