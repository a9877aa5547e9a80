// SPDX-License-Identifier: MIT
// The sampler's own time per sample without /dev/kvm (issue 17): sample_from_regs on the fake
// kernel of the unit tests, written by the real recording writer, timed per sample; beside the
// time, what the sample read of guest memory (reads, bytes, distinct 64-byte lines and 4 KiB
// pages), which does not depend on the host. "cold": the host's caches and TLB are flushed
// between samples (bench_sample.c: flush), as the guest's run between two exits may;
// "warm": samples back to back; "gwarm": flushed, then the guest lines the previous exit read
// are read again, as the guest kernel itself touches its task, stack and per-CPU data between
// two exits (on this project's PVM host, reading those lines before a sample made no
// difference: README, "The stack copy ends"): what is cold is hvprof's own code and data.
// Shapes: a kernel sample of a user thread whose mark is new
// (the mark is resolved between samples, as at the thread's return to user), one in the same
// kernel entry as the previous (the mark exists), a user-mode sample (fp walk, DWARF stack
// copy), and an eager kernel sample (user walk from pt_regs at once). With the new-mark shape,
// the return that resolves each mark is timed and counted too, as its own line: the exit-work
// loop's trap exit of the flag strategy (trap_loop_resolve: identity, pt_regs, the user walk,
// the USER_STACK record), cold like the sample (the guest ran before it).
//
// usage: bench-sample [SAMPLES [fp|dwarf [OTHER_MARKS]]]   (default 2000 per shape and mode;
// dwarf: the default --call-graph, 720 bytes of stack per walk (a main thread's, cut at
// mm->start_stack); fp: 64 bytes; OTHER_MARKS: marks of
// other threads pending meanwhile, made first, as threads blocked in the kernel keep them:
// 0..MARKS_MAX - 1, default 0)
//
// BENCH_SAMPLE_CENSUS=1 (bench/sample_census.py runs it under valgrind's lackey): warm only,
// each timed sample (and return) between stores to two of three marker variables, the address
// ranges of what it may touch written into the trace itself (VALGRIND_PRINTF, "census ..."),
// and the process's mappings to stderr at the end, so that the trace can be cut into samples
// and each line touched given its owner.
//
// BENCH_SAMPLE_WARM=1 (scripts/build.sh's profile-guided training): warm only, no flushes, so
// that the profile's hot code is the sample path's, not the flushes' loops.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/compiler.h>
#include <hvprof/profile.h>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h> /* notes in the census's trace (BENCH_SAMPLE_CENSUS) */
#define CENSUS_SUPPORTED 1
#else
#define CENSUS_SUPPORTED 0
#define RUNNING_ON_VALGRIND 0
static int __printf(1, 2) VALGRIND_PRINTF(const char *format, ...)
{
	(void)format;
	return 0;
}
#endif

#include "gi_internal.h"
#include "kimage_internal.h"
#include "sampler_fixture.h"

#define LINE 64u
#define PAGE 4096u
#define SEEN_SLOTS 4096u /* a power of two, above the lines of one sample */
#define FLUSH_BYTES (64u << 20)   /* TLB eviction: 16 384 pages */
#define FLUSH_L2_BYTES (2u << 20) /* L1 + L2 eviction */
#define COUNTED 10 /* samples whose guest reads are counted, after the timed ones */
#define USTACK_COPY 720u /* bytes of the DWARF stack copy, as in the boots of issue 17 */

/* A gmem that counts what passes through it: reads, bytes, distinct lines and pages (open
 * addressing sets of GPAs, emptied per sample by a new epoch). Reads in place through the
 * translation cache's HVAs (gmem's map_page) pass by it: the counted exits and the one that
 * records its reads for "guest-warm" run without map_page, reading the same guest bytes. */
#define RECORDED_MAX 256 /* guest reads of one exit remembered for the guest-warm mode */

struct read_list {
	unsigned int n;
	struct { uint64_t gpa; size_t len; } r[RECORDED_MAX];
};

enum exit_kind { EXIT_RETURN, EXIT_SAMPLE };

struct counting_mem {
	struct gmem inner;
	bool counting, trace;
	/* the reads of one exit of each kind, for "guest-warm": the next exit finds them in the
	 * caches; recorded into @rec (NULL: none) */
	struct read_list lists[2], *rec;
	uint64_t reads, bytes, epoch;
	unsigned int n_lines, n_pages;
	struct seen_slot {
		uint64_t key, epoch;
	} lines[SEEN_SLOTS], pages[SEEN_SLOTS];
};

static void seen(struct seen_slot *set, uint64_t epoch, unsigned int *n, uint64_t key)
{
	unsigned int i = (unsigned int)((key * 0x9e3779b97f4a7c15ull) >> 52) & (SEEN_SLOTS - 1);

	for (unsigned int probe = 0; probe < SEEN_SLOTS; probe++, i = (i + 1) & (SEEN_SLOTS - 1)) {
		if (set[i].epoch == epoch && set[i].key == key)
			return;
		if (set[i].epoch != epoch) {
			set[i] = (struct seen_slot){ key, epoch };
			(*n)++;
			return;
		}
	}
}

/* Count one read of [@gpa, @gpa+@len) (@how: "read" or "map", for the trace). */
static void count_read(struct counting_mem *cm, const char *how, uint64_t gpa, size_t len)
{
	if (cm->trace)
		fprintf(stderr, "  %s gpa 0x%llx len %zu\n", how, (unsigned long long)gpa, len);
	cm->reads++;
	cm->bytes += len;
	for (uint64_t a = gpa & ~(uint64_t)(LINE - 1); len && a < gpa + len; a += LINE)
		seen(cm->lines, cm->epoch, &cm->n_lines, a);
	for (uint64_t a = gpa & ~(uint64_t)(PAGE - 1); len && a < gpa + len; a += PAGE)
		seen(cm->pages, cm->epoch, &cm->n_pages, a);
}

static int counting_read(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	struct counting_mem *cm = ctx;

	if (cm->counting)
		count_read(cm, "read", gpa, len);
	if (cm->rec && cm->rec->n < RECORDED_MAX)
		cm->rec->r[cm->rec->n++] = (typeof(cm->rec->r[0])){ gpa, len };
	return gmem_read(&cm->inner, gpa, dst, len);
}

/* Reads in place (the VMM's ram_map: the DWARF stack copy) count as reads too. */
static const void *counting_map(void *ctx, uint64_t gpa, size_t len)
{
	struct counting_mem *cm = ctx;
	const void *p = gmem_map(&cm->inner, gpa, len);

	if (p && cm->counting)
		count_read(cm, "map", gpa, len);
	if (p && cm->rec && cm->rec->n < RECORDED_MAX)
		cm->rec->r[cm->rec->n++] = (typeof(cm->rec->r[0])){ gpa, len };
	return p;
}

/* A translation's page kept by the cache: not a read (its reads in place are not counted). */
static const void *counting_map_page(void *ctx, uint64_t gpa, size_t len)
{
	struct counting_mem *cm = ctx;

	return gmem_map(&cm->inner, gpa, len);
}

static struct recfile_writer *writer;

static int w_sample(void *ctx, const struct hvp_sample *s, const struct hvp_user_regs *r)
{
	(void)ctx;
	return recfile_write_sample_regs(writer, s, r);
}

static int w_user_stack(void *ctx, const struct hvp_user_stack *u, const struct hvp_user_regs *r)
{
	(void)ctx;
	return recfile_write_user_stack_regs(writer, u, r);
}

static int w_thread(void *ctx, const struct hvp_thread *t)
{
	(void)ctx;
	return recfile_write_thread(writer, t);
}

static int w_process(void *ctx, const struct hvp_process *p)
{
	(void)ctx;
	return recfile_write_process(writer, p);
}

static int w_mapping(void *ctx, const struct hvp_mapping *m)
{
	(void)ctx;
	return recfile_write_mapping(writer, m);
}

/* as `hvprof record`'s: with MAPPING records, each sample of a user thread reads its mm's map
 * count (note_identity), and user walks keep the pages found executable (struct gi_exec_cache) */
static const struct sampler_sink w_sink = { .sample = w_sample, .user_stack = w_user_stack,
					    .thread = w_thread, .process = w_process,
					    .mapping = w_mapping };

static volatile uint64_t flush_sink;

/* BENCH_SAMPLE_CENSUS: stored to at the start of a sample, the start of a return and the end of
 * either (the stores, by their address, are what the census looks for in the trace) */
static volatile uint32_t census_sample, census_return, census_end;
static bool census, warm_only;
extern char __data_start[], end[]; /* the binary's data and bss (crt1.o, the linker) */

enum shape { NEW_MARK, SAME_MARK, USER, EAGER };
static const char *const shape_names[] = { "kernel, new mark", "kernel, same mark",
					   "user mode", "kernel, eager" };

enum temp { WARM, COLD, GUEST_WARM };
static const char *const temp_names[] = { "warm", "cold", "gwarm" };

/* "guest-warm": after the flush, the guest's lines of the previous exit (of kind @prev, as
 * recorded) are read again, as the guest kernel itself does between two exits (it runs in the
 * task, on its stack and per-CPU data): what stays cold is hvprof's own code and data. */
static void rewarm_guest(const struct counting_mem *cm, enum exit_kind prev)
{
	const struct read_list *l = &cm->lists[prev];
	uint64_t sum = 0;

	for (unsigned int i = 0; i < l->n; i++) {
		const uint8_t *p = gmem_map(&cm->inner, l->r[i].gpa, l->r[i].len);

		for (size_t o = 0; p && o < l->r[i].len; o += LINE)
			sum += p[o];
	}
	flush_sink += sum;
}

/*
 * Between two samples the guest runs (1 ms at 1 kHz) on the same host core, and on PVM every
 * world switch may flush the TLB: evict the TLB (a load per 4 KiB page of FLUSH_BYTES, more
 * pages than any TLB level holds) and the core's own caches (a load per line of FLUSH_L2_BYTES,
 * above L1 + L2), leaving most of the last-level cache as a small guest working set would.
 */
static void flush(const uint8_t *buf)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < FLUSH_BYTES; i += PAGE)
		sum += buf[i];
	for (size_t i = 0; i < FLUSH_L2_BYTES; i += LINE)
		sum += buf[i + LINE / 2];
	flush_sink += sum;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Start counting the guest reads of one exit (sample or return). */
static void count_start(struct counting_mem *cm, bool counting, bool trace)
{
	cm->counting = counting;
	cm->trace = trace;
	cm->reads = cm->bytes = 0;
	cm->n_lines = cm->n_pages = 0;
	cm->epoch++;
}

/* Guest reads of the counted exits: sums over COUNTED exits. */
struct read_sums {
	uint64_t reads, bytes, lines, pages;
};

static void count_add(struct read_sums *sum, const struct counting_mem *cm)
{
	sum->reads += cm->reads;
	sum->bytes += cm->bytes;
	sum->lines += cm->n_lines;
	sum->pages += cm->n_pages;
}

static void print_line(const char *what, enum temp t, uint64_t *ns, unsigned int n,
		       const struct read_sums *sum)
{
	qsort(ns, n, sizeof(*ns), cmp_u64);
	printf("bench-sample: %-18s %-5s median %6llu ns  p90 %6llu ns | guest reads %5.1f  bytes "
	       "%6.0f  lines %5.1f  pages %4.1f per %s\n",
	       what, temp_names[t], (unsigned long long)ns[n / 2],
	       (unsigned long long)ns[n * 9 / 10], (double)sum->reads / COUNTED,
	       (double)sum->bytes / COUNTED, (double)sum->lines / COUNTED,
	       (double)sum->pages / COUNTED, strncmp(what, "return", 6) ? "sample" : "return");
}


static enum sampler_call_graph call_graph = SAMPLER_CALL_GRAPH_DWARF;
static unsigned int other_marks; /* marks of other threads pending during the samples */

/*
 * The kernel text of a frame-pointer kernel, as the default image's: the sampled RIP
 * (FK_STEXT + 0x100) in the body of a function whose frame is built, the text mapped by a 2 MiB
 * page as the kernel maps it, and the prologue table gi_open makes of an image without CFI (from
 * its code); so that each kernel sample looks its RIP up in the table, as on such a guest.
 * Return: 0; -1 on failure.
 */
#define TEXT_GPA 0x600000ull
#define TEXT_FN (FK_STEXT + 0xc0)
#define TEXT_FN_END (FK_STEXT + 0x200)

static int text_read(void *ctx, uint64_t kva, void *dst, size_t len)
{
	struct fakekernel *fk = ctx;

	if (kva < FK_STEXT || kva - FK_STEXT + len > 0x1000)
		return -EFAULT;
	memcpy(dst, fk->fm.ram + TEXT_GPA + (kva - FK_STEXT), len);
	return 0;
}

static int kernel_text(struct fakekernel *fk)
{
	static const uint8_t prologue[4] = { 0x55, 0x48, 0x89, 0xe5 }; /* push %rbp; mov %rsp,%rbp */
	struct ksym_entry e[2] = { { TEXT_FN, 't', "fn" }, { TEXT_FN_END, 't', "next" } };
	uint8_t *text = fk->fm.ram + TEXT_GPA;
	struct symtab *st = NULL;
	int err;

	if (fakemem_map(&fk->fm, FK_STEXT, TEXT_GPA, 2u << 20, 0))
		return -1;
	memset(text, 0xcc, 0x1000);
	memset(text + (TEXT_FN - FK_STEXT), 0x90, TEXT_FN_END - TEXT_FN);
	memcpy(text + (TEXT_FN - FK_STEXT), prologue, sizeof(prologue));
	text[TEXT_FN_END - FK_STEXT - 2] = 0x5d; /* pop %rbp */
	text[TEXT_FN_END - FK_STEXT - 1] = 0xc3; /* ret */
	if (symtab_from_entries(e, 2, &st) != 0)
		return -1;
	err = gi_prologues_build(st, text_read, fk, FK_STEXT, FK_ETEXT, &fk->gi->prologues);
	symtab_free(st);
	return err ? -1 : 0;
}

static int run(enum shape shape, enum temp t, unsigned int n, const uint8_t *flushbuf)
{
	bool cold = t != WARM;
	/* read once, not in the timed regions */
	const bool census_on = census;
	enum sampler_callchain_mode mode = shape == EAGER ? SAMPLER_CALLCHAIN_EAGER :
							    SAMPLER_CALLCHAIN_DEFERRED;
	static struct counting_mem cm;
	struct fixture f;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	uint64_t *ns, *ret_ns;
	struct read_sums sum = { 0 }, ret_sum = { 0 };
	uint8_t cpl = shape == USER ? 3 : 0;
	struct sampler_counters c0, c1 = { 0 };
	struct svcpu *sv;
	int err = -1;

	ns = calloc(n, sizeof(*ns));
	ret_ns = calloc(n, sizeof(*ret_ns));
	if (!ns || !ret_ns || fixture_init_cg(&f, mode, 4, call_graph, HVP_USER_STACK_DEFAULT)) {
		free(ns);
		free(ret_ns);
		return -1;
	}
	sv = &f.s->vcpus[0];
	if (kernel_text(&f.fk))
		goto out;
	fixture_process(&f.fk, 0x400000);
	/* A main thread's stack as the boots measure it (README, "The stack copy ends"): its frames
	 * within a few hundred bytes of RSP, mm->start_stack above them, so that the DWARF copy is
	 * USTACK_COPY bytes, not the fixture's 8 KiB */
	f.entry = (struct gi_user_regs){ 0x400100, U + 0x100, U + 0x180 };
	if (fk_uchain(&f.fk, U + 0x180, 3))
		goto out;
	fakemem_w64(&f.fk.fm, FK_MM_GPA + f.fk.layout.mm_start_stack,
		    U + 0x100 + USTACK_COPY - SAMPLER_USTACK_END_SLACK);
	if (write_pt_regs(&f, &f.entry) || fixture_vcpu_regs(&f, cpl, &regs, &sregs))
		goto out;
	f.s->cfg.sink = &w_sink;
	/* as sampler_new allocates it for a sink with MAPPING records (this one is set after the
	 * fixture made the sampler); sampler_destroy frees it */
	sv->maps = calloc(SAMPLER_MAPS_MAX, sizeof(*sv->maps));
	if (!sv->maps)
		goto out;
	f.s->marks.timeout_ns = UINT64_MAX / 2; /* a mark lasts as long as its kernel entry here */
	/* A boot decides its KASLR check in its first seconds (counter kaslr_looks); the fake
	 * kernel has no MSR_LSTAR to decide it with, and each kernel sample would look again (a
	 * fifth of a warm sample's time): this vCPU is told it is decided, as on a real guest. */
	sv->kaslr_decided = true;
	/* ... and knows its per-CPU base (a real one asks MSR_KERNEL_GS_BASE in user mode, which
	 * the fixture has not: a user-mode sample would find no task) */
	sv->percpu_base = f.fk.regs.gs_base;
	/* every stay marks (the stay rule would walk one-sample stays at once: the eager shape) */
	f.s->stay_adaptive = false;
	cm.inner = f.fk.fm.mem;
	cm.counting = false;
	cm.rec = NULL;
	cm.lists[EXIT_RETURN].n = cm.lists[EXIT_SAMPLE].n = 0;
	f.fk.fm.mem = (struct gmem){ .read = counting_read, .map = counting_map,
				     .map_page = counting_map_page, .ctx = &cm };
	if (other_marks) { /* pending marks of other threads, as threads blocked in the kernel keep */
		struct mark_req req = req_of(&f, FK_PID, &f.entry);

		for (unsigned int i = 1; i <= other_marks; i++) {
			req.task = f.fk.task_kva + 0x10000 * i;
			req.pid = FK_PID + (int32_t)i;
			if (!marks_take(sv, &req))
				goto out;
		}
	}
	/* a first sample: the identity and the process are read and remembered once */
	if (sample_from_regs(sv, &regs, &sregs, 1000000, 0, 0) != 0)
		goto out;
	c0 = sv->c;
	if (census_on) {
		uint8_t here;

		/* in the trace itself, ahead of the samples they describe */
		VALGRIND_PRINTF("census shape %d %s\n", (int)shape, shape_names[shape]);
		VALGRIND_PRINTF("census markers %p %p %p\n", (void *)&census_sample,
				(void *)&census_return, (void *)&census_end);
		VALGRIND_PRINTF("census range vcpu %p %zu\n", (void *)sv, sizeof(*sv));
		VALGRIND_PRINTF("census range sampler %p %zu\n", (void *)f.s, sizeof(*f.s));
		VALGRIND_PRINTF("census range guest %p %u\n", (void *)f.fk.fm.ram, FAKE_RAM_SIZE);
		/* a part of the stack (the census takes the whole mapping it lies in) */
		VALGRIND_PRINTF("census range stack 0x%llx %u\n",
				(unsigned long long)((uintptr_t)&here - (64u << 10)), 64u << 10);
		/* the binary's data and bss: hvprof's statics, the writer, the bench's own */
		VALGRIND_PRINTF("census range bench %p %zu\n", (void *)__data_start,
				(size_t)(end - __data_start));
	}
	if (getenv("BENCH_SAMPLE_TRACE"))
		fprintf(stderr, "%s, %s:\n", shape_names[shape], temp_names[t]);
	/* guest-warm: first one untimed exit of each kind that records what it reads */
	const unsigned int prime = t == GUEST_WARM;

	for (unsigned int k = 0; k < prime + n + COUNTED; k++) {
		bool priming = k < prime;
		unsigned int i = priming ? 0 : k - prime;
		bool timed = !priming && i < n, counted = !priming && i >= n;
		bool trace = counted && i == n && getenv("BENCH_SAMPLE_TRACE");
		uint64_t t0;

		/* reads in place, but where every read is to be seen (the gmem's map_page) */
		f.fk.fm.mem.map_page = timed ? counting_map_page : NULL;
		if (shape == NEW_MARK) {
			/* the thread returns to user: the exit-work loop's trap resolves its mark */
			struct gi_paging pg;
			uint64_t resolved = sv->c.resolved_at_return;

			if (cold)
				flush(flushbuf);
			if (t == GUEST_WARM && !priming)
				rewarm_guest(&cm, EXIT_SAMPLE);
			cm.rec = priming ? &cm.lists[EXIT_RETURN] : NULL;
			count_start(&cm, counted, trace);
			t0 = vmm_now_ns();
			if (census_on && timed)
				census_return = 1;
			pg = sampler_exit_paging(sv, &sregs);
			trap_loop_resolve(sv, &regs, &sregs, &pg);
			if (census_on && timed)
				census_end = 1;
			if (timed)
				ret_ns[i] = vmm_now_ns() - t0;
			else if (counted)
				count_add(&ret_sum, &cm);
			if (k && sv->c.resolved_at_return != resolved + 1) {
				fprintf(stderr, "bench-sample: return %u resolved no mark\n", k);
				goto out;
			}
		}
		if (cold)
			flush(flushbuf);
		if (t == GUEST_WARM && !priming)
			rewarm_guest(&cm, shape == NEW_MARK ? EXIT_RETURN : EXIT_SAMPLE);
		cm.rec = priming ? &cm.lists[EXIT_SAMPLE] : NULL;
		/* the last COUNTED samples count what they read, untimed (counting costs) */
		count_start(&cm, counted, trace);
		t0 = vmm_now_ns();
		if (census_on && timed)
			census_sample = 1;
		if (sample_from_regs(sv, &regs, &sregs, 1000000, t0, stage_now(&f.s->clock)) != 0)
			goto out;
		if (census_on && timed)
			census_end = 1;
		cm.counting = false;
		cm.rec = NULL;
		if (timed) {
			ns[i] = vmm_now_ns() - t0;
			if (i == n - 1)
				c1 = sv->c;
		} else if (counted) {
			count_add(&sum, &cm);
		}
	}
	if (sv->c.samples != prime + n + COUNTED + 1 || sv->c.samples_sink_errors) {
		fprintf(stderr, "bench-sample: %s: %llu samples, %llu sink errors\n",
			shape_names[shape], (unsigned long long)sv->c.samples,
			(unsigned long long)sv->c.samples_sink_errors);
		goto out;
	}
	print_line(shape_names[shape], t, ns, n, &sum);
	printf("bench-sample: %-18s %-4s stages (means, ns): identity %llu, kernel unwind %llu, "
	       "user part and marks %llu, write %llu\n", "", "",
	       (unsigned long long)((c1.sample_ns_identity - c0.sample_ns_identity) / n),
	       (unsigned long long)((c1.sample_ns_kernel_unwind - c0.sample_ns_kernel_unwind) / n),
	       (unsigned long long)((c1.sample_ns_user - c0.sample_ns_user) / n),
	       (unsigned long long)((c1.sample_ns_write - c0.sample_ns_write) / n));
	if (shape == NEW_MARK)
		print_line("return, flag loop", t, ret_ns, n, &ret_sum);
	err = 0;
out:
	f.fk.fm.mem = cm.inner;
	fixture_fini(&f);
	free(ns);
	free(ret_ns);
	return err;
}

int main(int argc, char **argv)
{
	unsigned int n = argc > 1 ? (unsigned int)strtoul(argv[1], NULL, 10) : 2000;
	uint8_t *flushbuf;
	int fd, err = 0;

	if (argc > 2 && !strcmp(argv[2], "fp"))
		call_graph = SAMPLER_CALL_GRAPH_FP;
	else if (argc > 2 && strcmp(argv[2], "dwarf"))
		n = 0;
	if (argc > 3)
		other_marks = (unsigned int)strtoul(argv[3], NULL, 10);
	if (n == 0 || n > 1000000 || argc > 4 || other_marks >= MARKS_MAX) {
		fprintf(stderr, "usage: bench-sample [SAMPLES (1..1000000) [fp|dwarf "
			"[OTHER_MARKS (0..%u)]]]\n", MARKS_MAX - 1);
		return 2;
	}
	census = getenv("BENCH_SAMPLE_CENSUS") && !strcmp(getenv("BENCH_SAMPLE_CENSUS"), "1");
	warm_only = census || (getenv("BENCH_SAMPLE_WARM") &&
			       !strcmp(getenv("BENCH_SAMPLE_WARM"), "1"));
	if (census && !CENSUS_SUPPORTED) {
		fprintf(stderr, "bench-sample: BENCH_SAMPLE_CENSUS: built without "
			"<valgrind/valgrind.h> (install valgrind and rebuild)\n");
		return 77; /* skipped, as meson counts it */
	}
	if (census && !RUNNING_ON_VALGRIND) {
		fprintf(stderr, "bench-sample: BENCH_SAMPLE_CENSUS: not running under valgrind "
			"(bench/sample_census.py runs it so)\n");
		return 2;
	}
	printf("bench-sample: --call-graph %s, %u marks of other threads pending\n",
	       call_graph == SAMPLER_CALL_GRAPH_FP ? "fp" : "dwarf", other_marks);
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	flushbuf = warm_only ? NULL : malloc(FLUSH_BYTES);
	if (fd < 0 || (!warm_only && !flushbuf) || recfile_writer_open(fd, &writer) != 0) {
		fprintf(stderr, "bench-sample: set-up failed\n");
		return 1;
	}
	if (flushbuf)
		memset(flushbuf, 1, FLUSH_BYTES);
	for (int shape = NEW_MARK; shape <= EAGER && !err; shape++)
		for (int t = WARM; t <= (warm_only ? WARM : GUEST_WARM) && !err; t++)
			err = run((enum shape)shape, (enum temp)t, n, flushbuf);
	if (census) { /* the mappings valgrind shows its client (its own among them) */
		char line[512];
		FILE *maps = fopen("/proc/self/maps", "r");

		while (maps && fgets(line, sizeof(line), maps))
			fprintf(stderr, "census map %s", line);
		if (maps)
			fclose(maps);
	}
	if (recfile_writer_close(writer) != 0)
		err = -1;
	close(fd);
	free(flushbuf);
	return err ? 1 : 0;
}
