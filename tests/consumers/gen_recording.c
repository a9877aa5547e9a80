// SPDX-License-Identifier: MIT
// Write a synthetic recording with the recfile writer API, for the consumer tests and the
// benchmark: no VM. Frames are real symbols of two synth-elf builds (u_fn_NNN as the user
// executable /usr/bin/app, k_fn_NNN as the vmlinux, with a kernel slide), so the recording
// symbolizes like a real one. Deterministic for a given seed.
//
// usage: gen-recording OUT USER_ELF KERNEL_ELF [--samples N] [--stacks N] [--seed S]
//                      [--period NS] [--slow FUNC:PCT]
//   --slow u_fn_NNN:30  samples whose innermost frame is that function are made 30% more
//                       numerous (the function became 30% slower); the default workload
//                       otherwise stays the same.
// Exit: 0 written, 1 error, 2 usage.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>
#include <hvprof/profile.h>

#define N_FN 256
#define KERNEL_SLIDE 0xffff800000000000ULL /* kernel ips = ELF vaddr + slide (top bit set) */

struct gstack {
	int comm;        /* index in comms[] */
	uint8_t n_user, n_kernel;
	uint16_t user[24];   /* function indices, innermost first */
	uint16_t kernel[16];
};

static const char *const comms[] = { "app", "app-worker", "kworker/0:1", "db" };
static const int32_t pids[] = { 100, 101, 7, 200 };
static const int32_t tgids[] = { 100, 100, 7, 200 };

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64*: deterministic, fast, good enough for a workload shape */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

static int load_fns(const char *path, const char *prefix, uint64_t addr[N_FN])
{
	struct symtab *st;
	char name[32];
	int err = symtab_open_elf(path, &st);

	if (err) {
		fprintf(stderr, "gen-recording: %s: %s\n", path, hvp_strerror(err));
		return err;
	}
	for (int i = 0; i < N_FN && !err; i++) {
		snprintf(name, sizeof(name), "%s_%03d", prefix, i);
		err = symtab_find(st, name, &addr[i]);
		if (err)
			fprintf(stderr, "gen-recording: %s: no symbol %s\n", path, name);
	}
	symtab_free(st);
	return err;
}

/* The workload's stacks and their Zipf-like weights (cumulative in @cdf). */
static void make_stacks(struct gstack *stacks, double *cdf, uint64_t n_stacks)
{
	for (uint64_t i = 0; i < n_stacks; i++) {
		struct gstack *g = &stacks[i];

		g->comm = (int)(rnd() % 4);
		/* user: root u_fn_000 ("main"), then a path through 1..16 more functions */
		g->n_user = (uint8_t)(2 + rnd() % 16);
		for (int d = 0; d < g->n_user; d++)
			g->user[g->n_user - 1 - d] = d == 0 ? 0 : (uint16_t)(1 + rnd() % (N_FN - 1));
		/* a third of the stacks are in the kernel: a syscall path of 1..12 frames */
		g->n_kernel = rnd() % 3 == 0 ? (uint8_t)(1 + rnd() % 12) : 0;
		if (g->comm == 2) { /* the kernel thread: kernel frames only */
			g->n_user = 0;
			if (!g->n_kernel)
				g->n_kernel = (uint8_t)(3 + rnd() % 10);
		}
		for (int d = 0; d < g->n_kernel; d++)
			g->kernel[d] = (uint16_t)(rnd() % N_FN);
		/* Zipf-like weights: stack i is drawn with weight 1 / (i + 1) */
		cdf[i] = (i ? cdf[i - 1] : 0) + 1.0 / (double)(i + 1);
	}
}

/* META, THREAD and PROCESS records of the synthetic guest. */
static int write_header(struct recfile_writer *w, const char *user_elf, const char *kernel_elf,
			uint64_t period)
{
	char buf[4200];
	int err = 0;

	snprintf(buf, sizeof(buf), "%s:/usr/bin/app", user_elf);
	err = err ? err : recfile_write_meta(w, "image", "synthetic (gen-recording)");
	err = err ? err : recfile_write_meta(w, "counter", "cpu-clock");
	err = err ? err : recfile_write_meta(w, "frequency_hz", "1000");
	snprintf(buf + 2048, 64, "%" PRIu64, period);
	err = err ? err : recfile_write_meta(w, "period_ns", buf + 2048);
	err = err ? err : recfile_write_meta(w, "vcpus", "2");
	err = err ? err : recfile_write_meta(w, "kernel", kernel_elf);
	err = err ? err : recfile_write_meta(w, "kernel_version", "6.1.0-synthetic");
	snprintf(buf + 2048, 64, "0x%llx", KERNEL_SLIDE);
	err = err ? err : recfile_write_meta(w, "kernel_slide", buf + 2048);
	err = err ? err : recfile_write_meta(w, "add", buf);
	for (int c = 0; c < 4 && !err; c++) {
		struct hvp_thread th = { .pid = pids[c], .tgid = tgids[c], .kthread = c == 2,
					 .task = 0xffff888000100000ULL + (uint64_t)c * 0x1000 };

		snprintf(th.comm, sizeof(th.comm), "%s", comms[c]);
		err = recfile_write_thread(w, &th);
	}
	for (int c = 0; c < 4 && !err; c++) {
		struct hvp_process pr = { .tgid = tgids[c], .mm = 0xffff888000200000ULL,
					  .start_code = 0x400000, .end_code = 0x500000 };

		if (c == 1 || c == 2)
			continue;
		snprintf(pr.exe, sizeof(pr.exe), "/usr/bin/app");
		err = recfile_write_process(w, &pr);
	}
	return err;
}

/* Stack index for sample @i: every stack once, then by weight. */
static uint64_t pick_stack(const double *cdf, uint64_t n_stacks, uint64_t i)
{
	uint64_t lo = 0, hi = n_stacks - 1;
	double r;

	if (i < n_stacks)
		return i; /* every stack at least once */
	r = (double)(rnd() >> 11) / 9007199254740992.0 * cdf[n_stacks - 1];
	while (lo < hi) {
		uint64_t mid = (lo + hi) / 2;

		if (cdf[mid] < r)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* One sample of stack @g at @t_ns (its user part deferred one time in five, with a
 * USER_STACK record for *@cookie). */
static int write_sample(struct recfile_writer *w, const struct gstack *g, struct hvp_sample *s,
			struct hvp_user_stack *us, const uint64_t *uaddr, const uint64_t *kaddr,
			uint64_t period, uint64_t t_ns, uint64_t written, uint64_t *cookie)
{
	int deferred = g->n_kernel && g->n_user && rnd() % 5 == 0;
	int err;

	memset(s, 0, offsetof(struct hvp_sample, kernel_ips));
	s->time_ns = t_ns;
	s->vcpu = (uint32_t)(written % 2);
	s->pid = pids[g->comm];
	s->tgid = tgids[g->comm];
	s->cpl = g->n_kernel ? 0 : 3;
	s->flags = g->n_kernel ? 0 : HVP_SAMPLE_USER;
	if (g->comm == 2)
		s->flags |= HVP_SAMPLE_KTHREAD;
	s->period = period;
	s->n_kernel = g->n_kernel;
	for (int d = 0; d < g->n_kernel; d++)
		s->kernel_ips[d] = kaddr[g->kernel[d]] + KERNEL_SLIDE + 1;
	s->user_stop = g->n_user ? HVP_WALK_END : HVP_WALK_NONE;
	if (!deferred) {
		s->n_user = g->n_user;
		for (int d = 0; d < g->n_user; d++)
			s->user_ips[d] = uaddr[g->user[d]] + 1;
	} else {
		/* the user part comes later, joined by cookie (deferred walk) */
		s->user_stop = HVP_WALK_DEFERRED;
		s->cookie = *cookie;
	}
	s->rip = s->n_kernel ? s->kernel_ips[0] : s->n_user ? s->user_ips[0] : 0;
	err = recfile_write_sample(w, s);
	if (!err && deferred) {
		memset(us, 0, offsetof(struct hvp_user_stack, user_ips));
		us->time_ns = t_ns + 1000;
		us->cookie = (*cookie)++;
		us->pid = s->pid;
		us->stop = HVP_WALK_END;
		us->n_user = g->n_user;
		for (int d = 0; d < g->n_user; d++)
			us->user_ips[d] = uaddr[g->user[d]] + 1;
		err = recfile_write_user_stack(w, us);
	}
	return err;
}

int main(int argc, char **argv)
{
	uint64_t uaddr[N_FN], kaddr[N_FN], n_samples = 100000, period = 1000000, seed = 42;
	uint64_t n_stacks = 1000, slow_pct = 0, cookie = 1, t_ns = 0, written = 0;
	int slow_fn = -1, fd, err = 0;
	struct recfile_writer *w;
	struct gstack *stacks;
	struct hvp_sample *s;
	struct hvp_user_stack *us;
	double *cdf;

	if (argc < 4) {
		fprintf(stderr, "usage: gen-recording OUT USER_ELF KERNEL_ELF [--samples N] "
				"[--stacks N] [--seed S] [--period NS] [--slow FUNC:PCT]\n");
		return 2;
	}
	for (int i = 4; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--samples"))
			n_samples = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--stacks"))
			n_stacks = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--seed"))
			seed = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--period"))
			period = strtoull(argv[i + 1], NULL, 0);
		else if (!strcmp(argv[i], "--slow") &&
			 sscanf(argv[i + 1], "u_fn_%d:%" SCNu64, &slow_fn, &slow_pct) == 2)
			continue;
		else {
			fprintf(stderr, "gen-recording: bad option %s\n", argv[i]);
			return 2;
		}
	}
	if (!n_stacks || n_stacks > 1000000 || (slow_fn >= N_FN)) {
		fprintf(stderr, "gen-recording: --stacks 1..1000000, --slow u_fn_000..u_fn_255\n");
		return 2;
	}
	if (load_fns(argv[2], "u_fn", uaddr) || load_fns(argv[3], "k_fn", kaddr))
		return 1;

	/* The workload's shape depends on the seed only, never on --slow or --samples. */
	rng_state = 0x9e3779b97f4a7c15ULL ^ 12345;
	stacks = calloc(n_stacks, sizeof(*stacks));
	cdf = calloc(n_stacks, sizeof(*cdf));
	s = calloc(1, sizeof(*s));
	us = calloc(1, sizeof(*us));
	if (!stacks || !cdf || !s || !us)
		return 1;
	make_stacks(stacks, cdf, n_stacks);

	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	err = recfile_writer_open(fd, &w);
	if (err)
		return 1;
	err = write_header(w, argv[2], argv[3], period);

	rng_state = 0x9e3779b97f4a7c15ULL ^ seed;
	for (uint64_t i = 0; i < n_samples && !err; i++) {
		const struct gstack *g;
		uint64_t idx;
		int copies = 1;

		idx = pick_stack(cdf, n_stacks, i);
		g = &stacks[idx];
		/* --slow: the function's own time grows by PCT percent: as many more samples */
		if (slow_fn >= 0 && g->n_kernel == 0 && g->n_user && g->user[0] == slow_fn &&
		    rnd() % 100 < slow_pct)
			copies = 2;
		for (int c = 0; c < copies && !err; c++) {
			err = write_sample(w, g, s, us, uaddr, kaddr, period, t_ns, written, &cookie);
			written++;
			if (written % 2 == 0)
				t_ns += period;
		}
	}
	err = err ? err : recfile_write_end(w, HVP_END_EXIT_DEVICE, 0);
	if (recfile_writer_close(w) && !err)
		err = -EIO;
	close(fd);
	free(stacks);
	free(cdf);
	free(s);
	free(us);
	if (err) {
		fprintf(stderr, "gen-recording: %s: %s\n", argv[1], hvp_strerror(err));
		return 1;
	}
	fprintf(stderr, "gen-recording: %s: %" PRIu64 " samples, %" PRIu64 " stacks\n", argv[1],
		written, n_stacks);
	return 0;
}
