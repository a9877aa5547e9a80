// SPDX-License-Identifier: MIT
// Writes the generated seed inputs of the fuzz targets (tests/fuzz-corpus/gen-corpus.sh runs it):
// small, valid examples of each input format, so the fuzzers start past the first checks.
// Usage: fuzz-gen-corpus OUT_DIR (OUT_DIR/<target>/ must exist).
#include <bpf/btf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hvprof/profile.h>

static const char *out_dir;

static int put_file(const char *target, const char *name, const void *a, size_t alen,
		    const void *b, size_t blen)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", out_dir, target, name);
	f = fopen(path, "wb");
	if (!f) {
		perror(path);
		return -1;
	}
	if ((alen && fwrite(a, 1, alen, f) != alen) || (blen && fwrite(b, 1, blen, f) != blen)) {
		perror(path);
		fclose(f);
		return -1;
	}
	return fclose(f) == 0 ? 0 : -1;
}

static void w64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void w32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* ---------------------------------------------------------------- pgwalk */

#define P 1ull
#define RW 2ull
#define PS 0x80ull

static int gen_pgwalk(void)
{
	uint8_t hdr[48], ram[8 * 4096];
	int err = 0;

	/* 4-level: PML4 0x1000 -> PDPT 0x2000 -> PD 0x3000 -> PT 0x4000 -> page 0x5000; a 2 MiB
	 * page and a 1 GiB page at gpa 0 (the RAM is 32 KiB: offsets past it are outside). */
	memset(ram, 0, sizeof(ram));
	w64(ram + 0x1000 + 0 * 8, 0x2000 | P | RW);
	w64(ram + 0x2000 + 0 * 8, 0x3000 | P | RW);
	w64(ram + 0x2000 + 1 * 8, 0x0 | P | RW | PS);  /* 1 GiB at 0x40000000 */
	w64(ram + 0x3000 + 0 * 8, 0x4000 | P | RW);
	w64(ram + 0x3000 + 1 * 8, 0x0 | P | RW | PS);  /* 2 MiB at 0x200000 */
	w64(ram + 0x4000 + 5 * 8, 0x5000 | P | RW);
	w64(ram + 0x4000 + 6 * 8, 0x6000 | P | RW | (1ull << 63));
	memset(hdr, 0, sizeof(hdr));
	w64(hdr, 0x1000);
	hdr[8] = 4; /* NXE */
	hdr[10] = 0x00, hdr[11] = 0x20; /* read 8 KiB: crosses into the unmapped page 7 */
	w64(hdr + 16, 0x5008);
	w64(hdr + 24, 0x200010);
	w64(hdr + 32, 0x40000020);
	err |= put_file("pgwalk", "seed-4level", hdr, sizeof(hdr), ram, sizeof(ram));

	/* A PML4 entry that points back to the PML4 (a self-map: bounded by levels). */
	w64(ram + 0x1000 + 511 * 8, 0x1000 | P | RW);
	w64(hdr + 16, 0xffffff8000000000ull);
	w64(hdr + 24, 0xfffffffffffff000ull);
	err |= put_file("pgwalk", "seed-selfmap", hdr, sizeof(hdr), ram, sizeof(ram));

	/* 5-level with PCID bits in CR3, and an entry above MAXPHYADDR. */
	memset(ram, 0, sizeof(ram));
	w64(ram + 0x0000, 0x1000 | P | RW);           /* PML5[0] */
	w64(ram + 0x1000, 0x2000 | P | RW);           /* PML4[0] */
	w64(ram + 0x2000, 0x3000 | P | RW);           /* PDPT[0] */
	w64(ram + 0x3000, 0x4000 | P | RW);           /* PD[0] */
	w64(ram + 0x4000 + 1 * 8, 0x5000 | P | RW);   /* PT[1] */
	w64(ram + 0x4000 + 2 * 8, (1ull << 40) | P);  /* above MAXPHYADDR 39 */
	memset(hdr, 0, sizeof(hdr));
	w64(hdr, 0x0000 | 0x5); /* PCID 5 */
	hdr[8] = 1 | 2;
	hdr[9] = 39;
	hdr[10] = 16;
	w64(hdr + 16, 0x1ff8);
	w64(hdr + 24, 0x2000);
	w64(hdr + 32, 0x00ff000000000000ull);
	err |= put_file("pgwalk", "seed-la57", hdr, sizeof(hdr), ram, sizeof(ram));
	return err;
}

/* ---------------------------------------------------------------- unwind (see fuzz_unwind.c) */

#define KWIN 0xffffc90000000000ull
#define UWIN 0x00007fff00000000ull
#define TEXT 0xffffffff81000000ull

static void unwind_data(uint8_t *d)
{
	memset(d, 0, 8 * 4096);
	w64(d + 0x80, KWIN + 0x1000);                 /* per-CPU current_task */
	w32(d + 0x1000 + 0x10, 42);                   /* task: pid, tgid, comm, mm, flags, stack */
	w32(d + 0x1000 + 0x14, 40);
	memcpy(d + 0x1000 + 0x20, "fuzzme", 7);
	w64(d + 0x1000 + 0x30, KWIN + 0x2000);
	w64(d + 0x1000 + 0x40, KWIN + 0x4000);
	w64(d + 0x2000 + 0x08, 0x400000);             /* mm: start_code, end_code, exe_file */
	w64(d + 0x2000 + 0x10, 0x401000);
	w64(d + 0x2000 + 0x18, KWIN + 0x2800);
	w64(d + 0x2800 + 0x10 + 0x08, KWIN + 0x3000); /* file.f_path.dentry */
	w64(d + 0x3000 + 0x18, KWIN + 0x3100);        /* dentry "prog" -> "bin" -> root */
	w64(d + 0x3000 + 0x28, KWIN + 0x3800);
	w64(d + 0x3100 + 0x18, KWIN + 0x3200);
	w64(d + 0x3100 + 0x28, KWIN + 0x3810);
	w64(d + 0x3200 + 0x18, KWIN + 0x3200);
	memcpy(d + 0x3800, "prog", 5);
	memcpy(d + 0x3810, "bin", 4);
	/* Kernel stack [0x4000, 0x8000): three frames, then a pt_regs frame with user CS. */
	w64(d + 0x4100, KWIN + 0x4200), w64(d + 0x4108, TEXT + 0x100);
	w64(d + 0x4200, KWIN + 0x4300), w64(d + 0x4208, TEXT + 0x200);
	w64(d + 0x4300, (KWIN + 0x7f00) | 1), w64(d + 0x4308, TEXT + 0x300);
	w64(d + 0x7f00 + 128, 0x401234);              /* pt_regs ip, cs, bp */
	w64(d + 0x7f00 + 136, 0x33);
	w64(d + 0x7f00 + 32, UWIN + 0x5100);
	/* User frames in the same pages, seen through the user window. */
	w64(d + 0x5100, UWIN + 0x5200), w64(d + 0x5108, 0x401100);
	w64(d + 0x5200, UWIN + 0x5300), w64(d + 0x5208, 0x401200);
	w64(d + 0x5300, 0), w64(d + 0x5308, 0x401300);
}

static void unwind_hdr(uint8_t *h, uint8_t mode, uint8_t cpl, uint8_t rel, uint32_t holes,
		       uint64_t rip, uint64_t rsp, uint64_t rbp, uint64_t task, uint64_t gs,
		       uint64_t kgs, uint64_t cr3)
{
	memset(h, 0, 64);
	h[0] = mode, h[1] = cpl, h[2] = rel;
	w32(h + 4, holes);
	w64(h + 8, rip), w64(h + 16, rsp), w64(h + 24, rbp), w64(h + 32, task);
	w64(h + 40, gs), w64(h + 48, kgs), w64(h + 56, cr3);
}

static int gen_unwind(void)
{
	uint8_t h[64], *d = malloc(8 * 4096);
	int err = 0;

	if (!d)
		return -1;
	unwind_data(d);
	/* Kernel sample: rsp, rbp, task, gs_base relative to the kernel window. */
	unwind_hdr(h, 1, 0, 0x0f, 0, TEXT + 0x10, 0x4000, 0x4100, 0x1000, 0, 0x2000, 0);
	err |= put_file("unwind", "seed-kernel", h, 64, d, 8 * 4096);
	/* The same walked by ORC too (header byte 3 bits 0 and 1), its table from the data. */
	h[3] = 3;
	err |= put_file("unwind", "seed-orc-kernel", h, 64, d, 8 * 4096);
	/* User sample: rsp/rbp in the user window, KERNEL_GS_BASE holds the per-CPU base. */
	unwind_hdr(h, 1, 3, 0x30 | 0x04, 0, 0x401000, 0x5000, 0x5100, 0x1000, 0, KWIN, 0);
	err |= put_file("unwind", "seed-user", h, 64, d, 8 * 4096);
	/* The kernel stack page unmapped (hole 4): the walk faults. */
	unwind_hdr(h, 1, 0, 0x0f, 1u << 4, TEXT + 0x10, 0x4000, 0x4100, 0x1000, 0, 0x2000, 0);
	err |= put_file("unwind", "seed-hole", h, 64, d, 8 * 4096);
	/* Kernel sample in a prologue (header byte 3 bit 2: the prologue table), after
	 * `push %rbp` of the function at TEXT + 0x40: its caller at RSP + 8. */
	w64(d + 0x4008, TEXT + 0x900);
	unwind_hdr(h, 1, 0, 0x0f, 0, TEXT + 0x41, 0x4000, 0x4100, 0x1000, 0, 0x2000, 0);
	h[3] = 4;
	err |= put_file("unwind", "seed-prologue-kernel", h, 64, d, 8 * 4096);
	w64(d + 0x4008, 0);
	/* A cyclic chain, kernel and user. */
	w64(d + 0x4200, KWIN + 0x4100);
	w64(d + 0x5200, UWIN + 0x5100);
	unwind_hdr(h, 1, 0, 0x0f, 0, TEXT + 0x10, 0x4000, 0x4100, 0x1000, 0, 0x2000, 0);
	err |= put_file("unwind", "seed-cycle-kernel", h, 64, d, 8 * 4096);
	unwind_hdr(h, 1, 3, 0x30 | 0x04, 0, 0x401000, 0x5000, 0x5100, 0x1000, 0, KWIN, 0);
	err |= put_file("unwind", "seed-cycle-user", h, 64, d, 8 * 4096);
	free(d);
	return err;
}

/* ---------------------------------------------------------------- btf */

static struct btf *make_btf(int with_stack)
{
	struct btf *btf = btf__new_empty();
	int t_int, t_uint, t_char, t_ulong, t_ptr, t_comm, t_mm, t_mm_ptr, t_task, t_regs, t_anon;

	if (!btf)
		return NULL;
	t_int = btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
	t_uint = btf__add_int(btf, "unsigned int", 4, 0);
	t_char = btf__add_int(btf, "char", 1, BTF_INT_CHAR);
	t_ulong = btf__add_int(btf, "long unsigned int", 8, 0);
	t_ptr = btf__add_ptr(btf, 0);
	t_comm = btf__add_array(btf, t_int, t_char, 16);
	t_mm = btf__add_struct(btf, "mm_struct", 0x400);
	if (t_mm < 0 || btf__add_field(btf, "start_code", t_ulong, 0x100 * 8, 0) ||
	    btf__add_field(btf, "end_code", t_ulong, 0x108 * 8, 0) ||
	    btf__add_field(btf, "exe_file", t_ptr, 0x380 * 8, 0))
		goto fail;
	t_mm_ptr = btf__add_ptr(btf, t_mm);
	t_anon = btf__add_struct(btf, NULL, 16);
	if (t_anon < 0 || btf__add_field(btf, "pid", t_int, 0, 0) ||
	    btf__add_field(btf, "tgid", t_int, 32, 0) ||
	    btf__add_field(btf, "mm", t_mm_ptr, 64, 0))
		goto fail;
	t_task = btf__add_struct(btf, "task_struct", 0x600);
	if (t_task < 0 || btf__add_field(btf, "flags", t_uint, 44 * 8, 0) ||
	    (with_stack && btf__add_field(btf, "stack", t_ptr, 32 * 8, 0)) ||
	    btf__add_field(btf, NULL, t_anon, 0x300 * 8, 0) ||
	    btf__add_field(btf, "comm", t_comm, 0x578 * 8, 0))
		goto fail;
	t_regs = btf__add_struct(btf, "pt_regs", 168);
	if (t_regs < 0 || btf__add_field(btf, "bp", t_ulong, 32 * 8, 0) ||
	    btf__add_field(btf, "ip", t_ulong, 128 * 8, 0) ||
	    btf__add_field(btf, "cs", t_ulong, 136 * 8, 0) ||
	    btf__add_field(btf, "sp", t_ulong, 152 * 8, 0))
		goto fail;
	return btf;
fail:
	btf__free(btf);
	return NULL;
}

static int gen_btf(void)
{
	int err = 0;

	for (int v = 0; v < 2; v++) {
		struct btf *btf = make_btf(!v);
		const void *raw;
		__u32 size;

		if (!btf)
			return -1;
		raw = btf__raw_data(btf, &size);
		err |= raw ? put_file("btf", v ? "seed-no-stack.btf" : "seed-full.btf", raw, size,
				      NULL, 0)
			   : -1;
		btf__free(btf);
	}
	return err;
}

/* ---------------------------------------------------------------- kallsyms */

struct syn {
	uint8_t buf[65536];
	size_t len;
};

static void syn_put(struct syn *s, const void *p, size_t n)
{
	if (s->len + n <= sizeof(s->buf))
		memcpy(s->buf + s->len, p, n);
	s->len += n;
}

static void syn_u8(struct syn *s, uint8_t v) { syn_put(s, &v, 1); }

static void syn_align(struct syn *s)
{
	while (s->len % 8)
		syn_u8(s, 0);
}

/* The tables as scripts/kallsyms.c writes them (the <= 6.3 or the 6.4+ order), 256 symbols. */
static void syn_build(struct syn *s, int new_order)
{
	enum { N = 256 };
	static struct syn names, offsets, tokens;
	uint16_t idx[256];
	uint32_t marker = 0, n = N, zero = 0;
	uint64_t base = TEXT;

	names.len = offsets.len = tokens.len = 0;
	s->len = 0;
	for (int i = 0; i < N; i++) {
		char sym[32];
		uint32_t off = (uint32_t)i * 0x40;
		size_t l;

		/* type letter, then the name; every byte is its own token */
		if (i == 0)
			l = (size_t)snprintf(sym, sizeof(sym), "T_stext");
		else if (i == N - 1)
			l = (size_t)snprintf(sym, sizeof(sym), "T_etext");
		else
			l = (size_t)snprintf(sym, sizeof(sym), "%cf%d", i % 3 ? 't' : 'T', i);
		syn_u8(&names, (uint8_t)l);
		syn_put(&names, sym, l);
		syn_put(&offsets, &off, 4);
	}
	for (int i = 0; i < 256; i++) {
		char tok[3];

		idx[i] = (uint16_t)tokens.len;
		if (i > 0x20 && i < 0x7f)
			tok[0] = (char)i, tok[1] = '\0';
		else
			tok[0] = 'x', tok[1] = (char)('a' + i % 26), tok[2] = '\0';
		syn_put(&tokens, tok, strlen(tok) + 1);
	}
	if (!new_order) {
		syn_put(s, offsets.buf, offsets.len);
		syn_align(s);
		syn_put(s, &base, 8);
	}
	syn_put(s, &n, 4);
	syn_put(s, &zero, 4);
	syn_put(s, names.buf, names.len);
	syn_align(s);
	syn_put(s, &marker, 4);
	syn_align(s);
	syn_put(s, tokens.buf, tokens.len);
	syn_align(s);
	syn_put(s, idx, sizeof(idx));
	syn_align(s);
	if (new_order) {
		syn_put(s, offsets.buf, offsets.len);
		syn_align(s);
		syn_put(s, &base, 8);
	}
}

/* ---------------------------------------------------------------- krelocs */

/* Slide (8 bytes), image size in 16-byte units (2 bytes), then a vmlinux.relocs table. */
static int gen_krelocs(void)
{
	const uint32_t k = 0x81000000u; /* the low half of LOAD_KVA: image offset 0 */
	const uint32_t good[] = { 0, k + 0x10, k + 0x18, 0, k + 0x20, 0, k + 0x30, k + 0x34, k };
	const uint32_t one64[] = { 0, k + 0x8, 0, 0 };
	const uint32_t overlap[] = { 0, k + 0x4, 0, k + 0x6, 0, k + 0x5, k + 0x8 };
	const uint32_t outside[] = { 0, k + 0x3c, 0, 0 };
	const uint32_t no_term[] = { k + 4, k + 8, 0, k + 12 };
	const uint32_t one32[] = { 0, 0, 0, k + 0x8 };
	const uint32_t one_inv[] = { 0, 0, k + 0x8, 0 };
	uint8_t head[10] = { 0 };
	int err = 0;

	head[3] = 0x26; /* slide 0x26000000 */
	head[8] = 4;    /* 64-byte image */
	err |= put_file("krelocs", "seed-three-lists", head, sizeof(head), good, sizeof(good));
	err |= put_file("krelocs", "seed-one-64", head, sizeof(head), one64, sizeof(one64));
	err |= put_file("krelocs", "seed-overlapping", head, sizeof(head), overlap, sizeof(overlap));
	err |= put_file("krelocs", "seed-outside", head, sizeof(head), outside, sizeof(outside));
	err |= put_file("krelocs", "seed-no-terminator", head, sizeof(head), no_term,
			sizeof(no_term));
	err |= put_file("krelocs", "seed-one-32", head, sizeof(head), one32, sizeof(one32));
	err |= put_file("krelocs", "seed-one-inverse", head, sizeof(head), one_inv, sizeof(one_inv));
	return err;
}

static int gen_kallsyms(void)
{
	static struct syn s;
	static const char map[] =
		"ffffffff81000000 T _text\nffffffff81000000 T _stext\nffffffff81000100 t helper\n"
		"ffffffff81000200 T entry_SYSCALL_64\nffffffff81000300 W weak_fn\n"
		"ffffffff81001000 T _etext\n0000000000000000 A fixed_percpu_data\n"
		"000000000001fb80 A current_task\nffffffffc0000000 t mod_fn\t[mod]\n";
	uint8_t zero = 0, one = 1;
	int err = 0;

	syn_build(&s, 0);
	err |= put_file("kallsyms", "seed-tables-6.1", &zero, 1, s.buf, s.len);
	syn_build(&s, 1);
	err |= put_file("kallsyms", "seed-tables-6.4", &zero, 1, s.buf, s.len);
	err |= put_file("kallsyms", "seed-map", &one, 1, map, sizeof(map) - 1);
	return err;
}

/* ---------------------------------------------------------------- recfile */

static int gen_recfile(void)
{
	struct recfile_writer *w = NULL;
	struct hvp_sample s;
	struct hvp_thread t = { .time_ns = 1, .task = KWIN + 0x1000, .pid = 42, .tgid = 40,
				.comm = "fuzzme" };
	struct hvp_process p = { .time_ns = 2, .tgid = 40, .mm = KWIN + 0x2000,
				 .start_code = 0x400000, .end_code = 0x401000, .exe = "/bin/prog" };
	struct hvp_user_stack u = { .time_ns = 5, .cookie = 7, .pid = 42, .vcpu = 0, .stop = 0,
				    .n_user = 2, .user_ips = { 0x400100, 0x400200 } };
	static uint8_t stack[256];
	struct hvp_user_regs r = { .time_ns = 4, .pid = 42, .follows = RECFILE_SAMPLE,
				   .stack = stack, .stack_len = 64, .stack_size = 64 };
	uint8_t *buf;
	off_t len;
	int fd = memfd_create("gen-recfile", 0), err = 0;
	uint8_t mode0 = 0, mode1 = 1;

	if (fd < 0 || recfile_writer_open(fd, &w))
		return -1;
	memset(&s, 0, sizeof(s));
	s.time_ns = 3, s.cpl = 0, s.rip = TEXT + 0x10, s.task = t.task, s.pid = 42, s.tgid = 40;
	s.cookie = 7, s.period = 1000000, s.n_kernel = 2, s.kernel_ips[0] = TEXT + 0x10;
	s.kernel_ips[1] = TEXT + 0x100, s.user_stop = HVP_WALK_DEFERRED;
	err |= recfile_write_meta(w, "hvprof_version", "0.1.0");
	err |= recfile_write_meta(w, "counter", "cpu-clock");
	err |= recfile_write_meta(w, "period_ns", "1000000");
	err |= recfile_write_thread(w, &t);
	err |= recfile_write_process(w, &p);
	err |= recfile_write_sample(w, &s);
	err |= recfile_writer_flush(w); /* two blocks (format version 2) */
	s.time_ns = 4, s.cpl = 3, s.flags = HVP_SAMPLE_USER, s.rip = 0x400100, s.cookie = 0;
	s.n_kernel = 0, s.n_user = 2, s.user_ips[0] = 0x400100, s.user_ips[1] = 0x400200;
	s.user_stop = HVP_WALK_END;
	for (unsigned int i = 0; i < sizeof(stack); i++)
		stack[i] = (uint8_t)i;
	r.regs[HVP_REG_RIP] = 0x400100, r.regs[HVP_REG_RSP] = 0x7ffd0000ff00;
	r.regs[HVP_REG_RBP] = 0x7ffd0000ff40;
	err |= recfile_write_sample_regs(w, &s, &r); /* fp mode: a 64-byte leaf window */
	r.time_ns = 5, r.cookie = 7, r.follows = RECFILE_USER_STACK, r.stack_len = 256;
	r.stack_size = 8192; /* dwarf mode: the stack ended after 256 bytes */
	err |= recfile_write_user_stack_regs(w, &u, &r);
	s.cookie = 9, s.cpl = 0, s.flags = 0, s.n_user = 0, s.n_kernel = 1;
	s.user_stop = HVP_WALK_DEFERRED;
	err |= recfile_write_sample(w, &s); /* its user stack never comes: lost */
	{ /* the workload window (docs/recording-format.md, EVENT) */
		struct hvp_event ev = { .time_ns = 2, .kind = HVP_EVENT_WORKLOAD_START };

		err |= recfile_write_event(w, &ev);
		ev.time_ns = 6, ev.kind = HVP_EVENT_WORKLOAD_END, ev.value = 3;
		err |= recfile_write_event(w, &ev);
	}
	err |= recfile_write_counter(w, "samples", 3);
	err |= recfile_write_end(w, HVP_END_SIGNAL, 0);
	err |= recfile_writer_close(w);
	len = lseek(fd, 0, SEEK_END);
	buf = len > 0 ? malloc((size_t)len) : NULL;
	if (err || !buf || pread(fd, buf, (size_t)len, 0) != len) {
		free(buf);
		close(fd);
		return -1;
	}
	close(fd);
	err |= put_file("recfile", "seed-complete", &mode0, 1, buf, (size_t)len);
	err |= put_file("recfile", "seed-complete-fixcrc", &mode1, 1, buf, (size_t)len);
	/* Cut in the middle of the last block: the first block still loads. */
	err |= put_file("recfile", "seed-truncated", &mode0, 1, buf, (size_t)len - 20);
	/* A byte of the last block flipped: its CRC refuses it (fixcrc mode seals it again). */
	buf[len - 30] ^= 0x40;
	err |= put_file("recfile", "seed-bad-block", &mode0, 1, buf, (size_t)len);
	err |= put_file("recfile", "seed-bad-block-fixcrc", &mode1, 1, buf, (size_t)len);
	free(buf);
	return err;
}

/* ---------------------------------------------------------------- folded */

static int gen_folded(void)
{
	static const char a[] = "prog;main;work;compute 90\nprog;main;io_[k] 10\n\n"
				"prog;main;work 5\r\n";
	static const char b[] = "prog;main;work;compute 50\nprog;main;io_[k] 50\nother;x 1\n";
	uint8_t sep = 0xff;
	int err = 0;

	err |= put_file("folded", "seed-one", a, sizeof(a) - 1, NULL, 0);
	{
		char both[sizeof(a) + sizeof(b)];

		memcpy(both, a, sizeof(a) - 1);
		memcpy(both + sizeof(a) - 1, &sep, 1);
		memcpy(both + sizeof(a), b, sizeof(b) - 1);
		err |= put_file("folded", "seed-diff", both, sizeof(a) + sizeof(b) - 1, NULL, 0);
	}
	return err;
}

/* ---------------------------------------------------------------- virtq */

/* fuzz_virtq.c's input: header (mode, log2 size, chains, 0, desc/avail/used GPAs), then 4 KiB
 * of RAM: a queue of 8 at 0x0/0x100/0x200 holding one request (a 16-byte header at 0x400, 512
 * bytes of data at 0x800, the status byte at 0xa00), directly or through an indirect table at
 * 0x300. */
static void vq_desc(uint8_t *ram, uint32_t table, unsigned int i, uint64_t addr, uint32_t len,
		    uint16_t flags, uint16_t next)
{
	uint8_t *d = ram + table + 16 * i;

	w64(d, addr);
	w32(d + 8, len);
	d[12] = (uint8_t)flags;
	d[13] = (uint8_t)(flags >> 8);
	d[14] = (uint8_t)next;
	d[15] = (uint8_t)(next >> 8);
}

static int vq_seed(const char *name, uint8_t mode, uint32_t type, bool indirect)
{
	static uint8_t ram[4096];
	uint8_t hdr[16] = { mode, 3, 4, 0 };
	uint32_t table = indirect ? 0x300 : 0;
	bool to_guest = type != 1;

	memset(ram, 0, sizeof(ram));
	w32(hdr + 4, 0x0);
	w32(hdr + 8, 0x100);
	w32(hdr + 12, 0x200);
	if (indirect)
		vq_desc(ram, 0, 0, 0x300, 48, 4 /* INDIRECT */, 0);
	vq_desc(ram, table, 0, 0x400, 16, 1 /* NEXT */, 1);
	vq_desc(ram, table, 1, 0x800, type == 8 ? 20 : 512, 1 | (to_guest ? 2 /* WRITE */ : 0), 2);
	vq_desc(ram, table, 2, 0xa00, 1, 2, 0);
	w32(ram + 0x400, type);
	w64(ram + 0x408, 2); /* sector */
	ram[0x102] = 1;      /* avail idx 1, ring[0] = head 0 */
	return put_file("virtq", name, hdr, sizeof(hdr), ram, sizeof(ram));
}

static int gen_virtq(void)
{
	int err = 0;

	err |= vq_seed("seed-queue", 0, 0, false);
	err |= vq_seed("seed-queue-indirect", 1, 0, true);
	err |= vq_seed("seed-blk-read", 2, 0 /* VIRTIO_BLK_T_IN */, false);
	err |= vq_seed("seed-blk-write-indirect", 3, 1 /* VIRTIO_BLK_T_OUT */, true);
	err |= vq_seed("seed-blk-get-id", 2, 8 /* VIRTIO_BLK_T_GET_ID */, false);
	return err;
}

int main(int argc, char **argv)
{
	int err = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
		return 2;
	}
	out_dir = argv[1];
	err |= gen_pgwalk();
	err |= gen_unwind();
	err |= gen_btf();
	err |= gen_kallsyms();
	err |= gen_krelocs();
	err |= gen_recfile();
	err |= gen_folded();
	err |= gen_virtq();
	return err ? 1 : 0;
}
