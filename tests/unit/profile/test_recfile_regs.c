// SPDX-License-Identifier: MIT
// Unit tests of the USER_REGS record (type 9): written in a pair right after its SAMPLE or
// USER_STACK, read back with every field; the largest record; malformed ones refused; readers
// that only count it still load the file.
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <hvprof/profile.h>

#include "rec_blocks.h"
#include "rec_helpers.h"
#include "test.h"

#define U_RSP 0x7ffd12340008ull
#define U_RIP 0x401234ull

static void mk_regs(struct hvp_user_regs *r, uint8_t follows, uint64_t cookie, int32_t pid,
		    const uint8_t *stack, uint32_t len, uint32_t size)
{
	memset(r, 0, sizeof(*r));
	r->time_ns = 1000 + cookie;
	r->cookie = cookie;
	r->pid = pid;
	r->vcpu = 1;
	r->follows = follows;
	for (unsigned int i = 0; i < HVP_USER_NREGS; i++)
		r->regs[i] = 0x1111111111111111ull * (i % 15 + 1);
	r->regs[HVP_REG_RSP] = U_RSP;
	r->regs[HVP_REG_RIP] = U_RIP;
	r->stack = stack;
	r->stack_len = len;
	r->stack_size = size;
}

static void fill_stack(uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 7 + (i >> 8));
}

static int check_regs(const struct hvp_user_regs *got, const struct hvp_user_regs *want)
{
	ASSERT_EQ_U64(got->time_ns, want->time_ns);
	ASSERT_EQ_U64(got->cookie, want->cookie);
	ASSERT_EQ_INT(got->pid, want->pid);
	ASSERT_EQ_U64(got->vcpu, want->vcpu);
	ASSERT_EQ_INT(got->follows, want->follows);
	ASSERT_EQ_U64(got->stack_len, want->stack_len);
	ASSERT_EQ_U64(got->stack_size, want->stack_size);
	for (unsigned int i = 0; i < HVP_USER_NREGS; i++)
		ASSERT_EQ_U64(got->regs[i], want->regs[i]);
	ASSERT_TRUE(got->stack_len == 0 || got->stack != NULL);
	ASSERT_TRUE(got->stack_len == 0 || !memcmp(got->stack, want->stack, got->stack_len));
	return TEST_OK;
}

/* A SAMPLE + USER_REGS pair, a USER_STACK + USER_REGS pair (the largest stack), and one with
 * no stack, read back in order with every field. */
static int test_pairs_round_trip(void)
{
	static uint8_t stack[HVP_USER_STACK_MAX];
	struct recfile_record *rec = malloc(sizeof(*rec));
	struct hvp_sample *s = calloc(1, sizeof(*s));
	struct hvp_user_regs want[3];
	struct hvp_user_stack u;
	uint64_t kips[] = { 0xffffffff81001000ull, 0 }, uips[] = { U_RIP, 0x401500, 0 };
	struct recfile_writer *w;
	struct recfile_reader *r;
	int fd = mem_file(), n = 0, ret;
	static const int types[] = { RECFILE_SAMPLE, RECFILE_USER_REGS, RECFILE_USER_STACK,
				     RECFILE_USER_REGS, RECFILE_SAMPLE, RECFILE_USER_REGS };

	ASSERT_TRUE(rec && s && fd >= 0);
	fill_stack(stack, sizeof(stack));
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	mk_sample(s, 42, 40, 3, HVP_WALK_END, 0, NULL, uips);
	mk_regs(&want[0], RECFILE_SAMPLE, 0, 42, stack, 8192, 8192);
	want[0].time_ns = s->time_ns;
	ASSERT_EQ_INT(recfile_write_sample_regs(w, s, &want[0]), 0);
	u = mk_user_stack(42, 7, HVP_WALK_END, uips);
	mk_regs(&want[1], RECFILE_USER_STACK, 7, 42, stack, HVP_USER_STACK_MAX,
		HVP_USER_STACK_MAX);
	want[1].time_ns = u.time_ns;
	ASSERT_EQ_INT(recfile_write_user_stack_regs(w, &u, &want[1]), 0);
	mk_sample(s, 43, 40, 0, HVP_WALK_END, HVP_WALK_END, kips, uips);
	mk_regs(&want[2], RECFILE_SAMPLE, 0, 43, NULL, 0, 64); /* RSP refused: nothing copied */
	ASSERT_EQ_INT(recfile_write_sample_regs(w, s, &want[2]), 0);
	ASSERT_EQ_INT(recfile_writer_close(w), 0);

	ASSERT_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	ASSERT_EQ_INT(recfile_reader_open_fd(fd, NULL, &r, NULL, 0), 0);
	while ((ret = recfile_reader_next(r, rec)) == 1) {
		ASSERT_TRUE(n < 6);
		ASSERT_EQ_INT(rec->type, types[n]);
		if (rec->type == RECFILE_USER_REGS && check_regs(&rec->user_regs, &want[n / 2]))
			return TEST_FAIL;
		n++;
	}
	ASSERT_EQ_INT(ret, 0);
	ASSERT_EQ_INT(n, 6);
	/* the largest record the writer makes */
	ASSERT_EQ_U64(RECFILE_WRITER_MAX_RECORD, 8 + 176 + HVP_USER_STACK_MAX);
	recfile_reader_close(r);
	close(fd);
	free(s);
	free(rec);
	return TEST_OK;
}

/*
 * Stacks around the size from which the writer copies with non-temporal stores
 * (RECFILE_STREAM_COPY_MIN), from sources at odd offsets (the plain head and tail of the copy,
 * and the destination's alignment, vary with them), each written twice: in one piece, and in
 * three pieces from three other buffers (hvp_user_regs.stack_segs, the sampler's stack read in
 * place). Every byte arrives in place, in order.
 */
static int test_stack_copy_sizes(void)
{
	static uint8_t stack[HVP_USER_STACK_MAX + 16], piece[3][16384 + 32];
	static const uint32_t sizes[] = { 100, 4095, 4096, 4097, 4111, 8191, 8192, 12289 };
	static const uint32_t offsets[] = { 0, 1, 5, 13 };
	enum { N = sizeof(sizes) / sizeof(sizes[0]) * (sizeof(offsets) / sizeof(offsets[0])) };
	struct recfile_record *rec = malloc(sizeof(*rec));
	struct hvp_user_regs want[N];
	struct hvp_user_stack u;
	uint64_t uips[] = { U_RIP, 0x401500, 0 };
	struct recfile_writer *w;
	struct recfile_reader *r;
	int fd = mem_file(), n = 0, ret;

	ASSERT_TRUE(rec && fd >= 0);
	fill_stack(stack, sizeof(stack));
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	for (size_t i = 0; i < N; i++) {
		uint32_t len = sizes[i / 4], off = offsets[i % 4];
		uint32_t cut[4] = { 0, len / 3, len - len / 5, len };
		struct hvp_bytes segs[3];
		struct hvp_user_regs in_pieces;

		u = mk_user_stack(42, i + 1, HVP_WALK_END, uips);
		mk_regs(&want[i], RECFILE_USER_STACK, i + 1, 42, stack + off, len, 16384);
		want[i].time_ns = u.time_ns;
		ASSERT_EQ_INT(recfile_write_user_stack_regs(w, &u, &want[i]), 0);
		for (int k = 0; k < 3; k++) { /* piece k at offset 7 k of its own buffer */
			memcpy(piece[k] + 7 * k, stack + off + cut[k], cut[k + 1] - cut[k]);
			segs[k] = (struct hvp_bytes){ piece[k] + 7 * k, cut[k + 1] - cut[k] };
		}
		in_pieces = want[i];
		in_pieces.stack = NULL;
		in_pieces.stack_segs = segs;
		in_pieces.n_stack_segs = 3;
		ASSERT_EQ_INT(recfile_write_user_stack_regs(w, &u, &in_pieces), 0);
	}
	ASSERT_EQ_INT(recfile_writer_close(w), 0);
	ASSERT_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	ASSERT_EQ_INT(recfile_reader_open_fd(fd, NULL, &r, NULL, 0), 0);
	while ((ret = recfile_reader_next(r, rec)) == 1) {
		if (rec->type != RECFILE_USER_REGS)
			continue;
		ASSERT_TRUE(n < 2 * N);
		if (check_regs(&rec->user_regs, &want[n / 2]))
			return TEST_FAIL;
		n++;
	}
	ASSERT_EQ_INT(ret, 0);
	ASSERT_EQ_INT(n, 2 * N);
	recfile_reader_close(r);
	close(fd);
	free(rec);
	return TEST_OK;
}

/* Pieces that do not add up to stack_len, too many of them, or one without its bytes: refused,
 * nothing written. */
static int test_bad_pieces(void)
{
	static uint8_t stack[64];
	struct hvp_bytes segs[HVP_USER_STACK_SEGS + 1] = { { stack, 32 }, { stack + 32, 16 } };
	struct hvp_user_stack u = mk_user_stack(1, 1, HVP_WALK_END, NULL);
	struct hvp_user_regs r;
	struct recfile_writer *w;
	int fd = mem_file();

	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	mk_regs(&r, RECFILE_USER_STACK, 1, 1, NULL, 64, 64);
	r.stack_segs = segs;
	r.n_stack_segs = 2; /* 48 bytes for a stack_len of 64 */
	ASSERT_EQ_INT(recfile_write_user_stack_regs(w, &u, &r), -EINVAL);
	r.stack_len = 48;
	r.n_stack_segs = HVP_USER_STACK_SEGS + 1;
	ASSERT_EQ_INT(recfile_write_user_stack_regs(w, &u, &r), -EINVAL);
	r.n_stack_segs = 2;
	segs[1].p = NULL;
	ASSERT_EQ_INT(recfile_write_user_stack_regs(w, &u, &r), -EINVAL);
	segs[1].p = stack + 32;
	ASSERT_EQ_INT(recfile_write_user_stack_regs(w, &u, &r), 0); /* and right: written */
	ASSERT_EQ_U64(recfile_writer_records(w), 2);
	ASSERT_EQ_INT(recfile_writer_close(w), 0);
	close(fd);
	return TEST_OK;
}

/* Bad arguments are refused and write nothing. */
static int test_bad_arguments(void)
{
	static uint8_t stack[64];
	struct hvp_sample *s = calloc(1, sizeof(*s));
	struct hvp_user_stack u = mk_user_stack(1, 1, HVP_WALK_END, NULL);
	struct hvp_user_regs r;
	struct recfile_writer *w;
	int fd = mem_file();

	ASSERT_TRUE(s && fd >= 0);
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	mk_regs(&r, RECFILE_USER_STACK, 1, 1, stack, 64, 64);
	ASSERT_EQ_INT(recfile_write_sample_regs(w, s, &r), -EINVAL); /* follows a USER_STACK */
	r.follows = RECFILE_SAMPLE;
	ASSERT_EQ_INT(recfile_write_user_stack_regs(w, &u, &r), -EINVAL);
	r.follows = 3;
	ASSERT_EQ_INT(recfile_write_user_regs(w, &r), -EINVAL);
	mk_regs(&r, RECFILE_SAMPLE, 0, 1, stack, HVP_USER_STACK_MAX + 8, HVP_USER_STACK_MAX + 8);
	ASSERT_EQ_INT(recfile_write_sample_regs(w, s, &r), -EINVAL);
	mk_regs(&r, RECFILE_SAMPLE, 0, 1, NULL, 8, 64); /* bytes without a buffer */
	ASSERT_EQ_INT(recfile_write_user_regs(w, &r), -EINVAL);
	mk_regs(&r, RECFILE_SAMPLE, 0, 1, stack, 64, 32); /* more than asked */
	ASSERT_EQ_INT(recfile_write_user_regs(w, &r), -EINVAL);
	ASSERT_EQ_U64(recfile_writer_records(w), 0);
	ASSERT_EQ_INT(recfile_writer_close(w), 0);
	ASSERT_EQ_INT(lseek(fd, 0, SEEK_END), RECFILE_HEADER_SIZE);
	close(fd);
	free(s);
	return TEST_OK;
}

/* A USER_REGS whose payload contradicts its fields stops the reader (CRC fixed up). */
struct regs_damage {
	const char *what;
	size_t off; /* payload offset of the byte(s) changed */
	uint32_t value;
	int width; /* 1 or 4 */
};

static const struct regs_damage regs_damage[] = {
	{ "n_regs 16", 25, 16, 1 },
	{ "n_regs 18", 25, 18, 1 },
	{ "follows THREAD", 24, 3, 1 },
	{ "stack_len one more than the payload", 28, 65, 4 },
	{ "stack_len one less than the payload", 28, 63, 4 },
	{ "stack_len above the maximum", 28, HVP_USER_STACK_MAX + 8, 4 },
	{ "stack_len above stack_size", 32, 32, 4 },
};

static int test_malformed(void)
{
	static uint8_t stack[64];
	struct recfile_record *rec = malloc(sizeof(*rec));
	struct hvp_user_regs r;
	struct recfile_writer *w;
	struct recfile_reader *rd;
	size_t len;
	char *good;
	int fd = mem_file();

	ASSERT_TRUE(rec && fd >= 0);
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	mk_regs(&r, RECFILE_SAMPLE, 0, 5, stack, 64, 64);
	ASSERT_EQ_INT(recfile_write_user_regs(w, &r), 0);
	ASSERT_EQ_INT(recfile_writer_close(w), 0);
	good = slurp(fd, &len);
	/* one block (16-byte header) of one record (8-byte frame) */
	ASSERT_TRUE(good && len == RECFILE_HEADER_SIZE + TEST_BLOCK_HDR + 8 + 176 + 64);
	close(fd);
	for (size_t i = 0; i < sizeof(regs_damage) / sizeof(regs_damage[0]); i++) {
		const struct regs_damage *d = &regs_damage[i];
		uint8_t *b = malloc(len);
		size_t at = RECFILE_HEADER_SIZE + TEST_BLOCK_HDR + 8 + d->off;

		ASSERT_TRUE(b);
		memcpy(b, good, len);
		for (int k = 0; k < d->width; k++)
			b[at + k] = (uint8_t)(d->value >> (8 * k));
		rb_fix_blocks(b, len); /* the CRC matches: the fields themselves are refused */
		fd = mem_file_from(b, len);
		ASSERT_TRUE(fd >= 0);
		ASSERT_EQ_INT(recfile_reader_open_fd(fd, NULL, &rd, NULL, 0), 0);
		if (recfile_reader_next(rd, rec) != -EBADMSG ||
		    !strstr(recfile_reader_error(rd), "malformed USER_REGS record")) {
			fprintf(stderr, "case '%s' not refused\n", d->what);
			return TEST_FAIL;
		}
		recfile_reader_close(rd);
		close(fd);
		free(b);
	}
	ASSERT_EQ_STR(recfile_type_name(RECFILE_USER_REGS), "USER_REGS");
	free(good);
	free(rec);
	return TEST_OK;
}

#define N_THREADS 4
#define N_PER_THREAD 300

struct thread_arg {
	struct recfile_writer *w;
	int id;
	int err;
};

static void *pair_writer(void *p)
{
	static uint8_t stack[8192];
	struct thread_arg *a = p;
	struct hvp_user_stack u = mk_user_stack(a->id, 0, HVP_WALK_END, NULL);
	struct hvp_user_regs r;

	mk_regs(&r, RECFILE_USER_STACK, 0, a->id, stack, sizeof(stack), sizeof(stack));
	for (int i = 0; i < N_PER_THREAD && !a->err; i++) {
		u.cookie = r.cookie = (uint64_t)i + 1;
		a->err = recfile_write_user_stack_regs(a->w, &u, &r);
	}
	return NULL;
}

/* Several vCPU threads write pairs at once: every USER_REGS directly follows its own record. */
static int test_pairs_stay_adjacent(void)
{
	struct recfile_record *rec = malloc(sizeof(*rec));
	struct thread_arg args[N_THREADS];
	pthread_t th[N_THREADS];
	struct recfile_writer *w;
	struct recfile_reader *r;
	int fd = mem_file(), ret, pairs = 0;
	int32_t prev_pid = -1;
	uint64_t prev_cookie = 0;
	int prev_type = 0;

	ASSERT_TRUE(rec && fd >= 0);
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	for (int i = 0; i < N_THREADS; i++) {
		args[i] = (struct thread_arg){ .w = w, .id = i };
		ASSERT_EQ_INT(pthread_create(&th[i], NULL, pair_writer, &args[i]), 0);
	}
	for (int i = 0; i < N_THREADS; i++) {
		pthread_join(th[i], NULL);
		ASSERT_EQ_INT(args[i].err, 0);
	}
	ASSERT_EQ_INT(recfile_writer_close(w), 0);
	ASSERT_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	ASSERT_EQ_INT(recfile_reader_open_fd(fd, NULL, &r, NULL, 0), 0);
	while ((ret = recfile_reader_next(r, rec)) == 1) {
		if (rec->type == RECFILE_USER_REGS) {
			ASSERT_EQ_INT(prev_type, RECFILE_USER_STACK);
			ASSERT_EQ_INT(rec->user_regs.pid, prev_pid);
			ASSERT_EQ_U64(rec->user_regs.cookie, prev_cookie);
			pairs++;
		} else {
			ASSERT_EQ_INT(rec->type, RECFILE_USER_STACK);
			ASSERT_TRUE(prev_type != RECFILE_USER_STACK);
			prev_pid = rec->user_stack.pid;
			prev_cookie = rec->user_stack.cookie;
		}
		prev_type = (int)rec->type;
	}
	ASSERT_EQ_INT(ret, 0);
	ASSERT_EQ_INT(pairs, N_THREADS * N_PER_THREAD);
	recfile_reader_close(r);
	close(fd);
	free(rec);
	return TEST_OK;
}

/* The loader takes USER_REGS records in stride: samples and joins as without them. */
static int test_loader_accepts(void)
{
	static uint8_t stack[256];
	struct hvp_sample *s = calloc(1, sizeof(*s));
	struct hvp_user_regs r;
	struct recfile_writer *w;
	struct profile_options opts = { .size = sizeof(opts), .no_symbols = 1 };
	struct profile *p = NULL;
	struct profile_stats st;
	uint64_t uips[] = { U_RIP, 0 };
	int fd = mem_file();

	ASSERT_TRUE(s && fd >= 0);
	ASSERT_EQ_INT(recfile_writer_open(fd, &w), 0);
	for (int i = 0; i < 3; i++) {
		mk_sample(s, 42, 40, 3, HVP_WALK_END, 0, NULL, uips);
		mk_regs(&r, RECFILE_SAMPLE, 0, 42, stack, sizeof(stack), 8192);
		ASSERT_EQ_INT(recfile_write_sample_regs(w, s, &r), 0);
	}
	ASSERT_EQ_INT(recfile_writer_close(w), 0);
	ASSERT_EQ_INT(lseek(fd, 0, SEEK_SET), 0);
	ASSERT_EQ_INT(profile_load_fd(fd, "regs", &opts, &p, NULL, 0), 0);
	profile_get_stats(p, &st);
	ASSERT_EQ_U64(st.samples, 3);
	ASSERT_EQ_U64(st.records, 6);
	profile_free(p);
	close(fd);
	free(s);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "SAMPLE and USER_STACK pairs with USER_REGS, read back", test_pairs_round_trip },
	{ "stacks around the non-temporal copy's size, at odd offsets, whole or in pieces",
	  test_stack_copy_sizes },
	{ "USER_REGS stack pieces that do not add up are refused", test_bad_pieces },
	{ "bad USER_REGS arguments write nothing", test_bad_arguments },
	{ "malformed USER_REGS records are refused", test_malformed },
	{ "concurrent pairs stay adjacent", test_pairs_stay_adjacent },
	{ "the loader accepts USER_REGS records", test_loader_accepts },
};

TEST_MAIN(tests)
