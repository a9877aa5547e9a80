// SPDX-License-Identifier: MIT
// Unit tests of guestinfo/prologue.c and of the kernel frame-pointer unwind from inside a
// prologue or at a ret: the immediate caller, which RBP does not lead to there, is read from the
// stack. The first fixture is arch_randomize_brk of our 6.1 test kernel, as objdump shows it: gcc
// put two loads between `push %rbp` and `mov %rsp,%rbp`, and a sample at +0x8 lost
// load_elf_binary (and with it the execve check) before this.
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>

#include "fakekernel.h"
#include "gi_internal.h"
#include "kimage_internal.h"
#include "prologue_internal.h"
#include "test.h"

#define S FK_STACK
#define RET(i) (FK_STEXT + 0x1000 * (i))
#define TEXT_GPA 0x700000ull
#define F(i) (FK_STEXT + 0x100 * (i)) /* the fixture's functions, 0x100 apart */
#define NF 12

static const uint8_t randomize_brk61[] = {
	0x55,                                     /* +0x0  push %rbp */
	0x48, 0x8b, 0xbf, 0x10, 0x01, 0x00, 0x00, /* +0x1  mov 0x110(%rdi),%rdi */
	0xbe, 0x00, 0x00, 0x00, 0x40,             /* +0x8  mov $0x40000000,%esi */
	0x48, 0x89, 0xe5,                         /* +0xd  mov %rsp,%rbp */
	0xe8, 0x00, 0x00, 0x00, 0x00,             /* +0x10 call randomize_page */
	0x5d,                                     /* +0x15 pop %rbp */
	0xc3,                                     /* +0x16 ret */
};

/* Each fixture function's first bytes, int3 after them up to the next. */
static const struct {
	const char *name;
	uint8_t code[24];
	size_t len;
} fns[NF] = {
	{ "randomize_brk", { 0 }, 0 }, /* filled from randomize_brk61 */
	{ "plain", { 0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3 }, 6 },
	/* endbr64, the frame, pop %rbp; ret $8 (c2) */
	{ "endbr", { 0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc2, 0x08, 0x00 }, 12 },
	/* call __fentry__, then the frame */
	{ "fentry", { 0xe8, 0x00, 0x00, 0x00, 0x00, 0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3 }, 11 },
	/* test %rdi,%rdi; je +4 (shrink-wrapped early exit); push; mov */
	{ "shrinkwrap", { 0x48, 0x85, 0xff, 0x74, 0x04, 0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3 }, 11 },
	/* sub $8,%rsp: no frame pointer (asm) */
	{ "noframe", { 0x48, 0x83, 0xec, 0x08, 0x55, 0x48, 0x89, 0xe5, 0xc3 }, 9 },
	/* jmp elsewhere before the push */
	{ "jumps", { 0xeb, 0x02, 0x55, 0x48, 0x89, 0xe5, 0xc3 }, 7 },
	/* push %rbx before push %rbp */
	{ "pushrbx", { 0x53, 0x55, 0x48, 0x89, 0xe5, 0xc3 }, 6 },
	/* push %rbp, never the mov (ud2 at once) */
	{ "nomov", { 0x55, 0x0f, 0x0b }, 3 },
	/* stack realignment: and $-16,%rsp before the frame */
	{ "realign", { 0x48, 0x83, 0xe4, 0xf0, 0x55, 0x48, 0x89, 0xe5, 0xc3 }, 9 },
	/* a leaf with no frame at all: xor %eax,%eax; ret (int3 padding after it) */
	{ "leaf", { 0x31, 0xc0, 0xc3 }, 3 },
	/* frameless but calls: mov %edi,%eax; call; ret */
	{ "leafcall", { 0x89, 0xf8, 0xe8, 0x00, 0x00, 0x00, 0x00, 0xc3 }, 8 },
};

static uint8_t text[NF * 0x100 + 0x100];

static int read_text(void *ctx, uint64_t kva, void *dst, size_t len)
{
	(void)ctx;
	if (kva < FK_STEXT || kva - FK_STEXT + len > sizeof(text))
		return -EFAULT;
	memcpy(dst, text + (kva - FK_STEXT), len);
	return 0;
}

/* The fixture's symbols (and one past the last function) and its text. */
static struct symtab *fixture(void)
{
	struct ksym_entry e[NF + 1];
	struct symtab *st = NULL;

	memset(text, 0xcc, sizeof(text));
	memcpy(text + 0x100, randomize_brk61, sizeof(randomize_brk61));
	for (size_t i = 0; i < NF; i++) {
		if (i)
			memcpy(text + 0x100 * (i + 1), fns[i].code, fns[i].len);
		e[i] = (struct ksym_entry){ F(i + 1), 't', strdup(fns[i].name) };
	}
	e[NF] = (struct ksym_entry){ F(NF + 1), 'T', strdup("end") };
	if (symtab_from_entries(e, NF + 1, &st) != 0)
		st = NULL;
	for (size_t i = 0; i <= NF; i++)
		free(e[i].name);
	return st;
}

#define AT(i, off) gi_prologue_at(p, F(i) + (off))

static int test_table(void)
{
	struct symtab *st = fixture();
	struct gi_prologues *p = NULL;
	size_t n_cfi, n_code;

	ASSERT_TRUE(st != NULL);
	ASSERT_EQ_INT(gi_prologues_build(st, read_text, NULL, FK_STEXT, FK_ETEXT, &p), 0);
	/* randomize_brk, plain, endbr, fentry, shrinkwrap, and the frameless leaf */
	ASSERT_EQ_U64(gi_prologues_count(p), 6);
	/* arch_randomize_brk: push at +0, the loads, the mov at +0xd */
	ASSERT_EQ_INT(AT(1, 0), GI_FRAME_AT_ENTRY);
	ASSERT_EQ_INT(AT(1, 1), GI_FRAME_PUSHED);
	ASSERT_EQ_INT(AT(1, 8), GI_FRAME_PUSHED);
	ASSERT_EQ_INT(AT(1, 0xd), GI_FRAME_PUSHED);
	ASSERT_EQ_INT(AT(1, 0x10), GI_FRAME_BUILT);
	ASSERT_EQ_INT(AT(1, 0x15), GI_FRAME_BUILT); /* pop %rbp */
	ASSERT_EQ_INT(AT(1, 0x16), GI_FRAME_AT_RET);
	ASSERT_EQ_INT(AT(2, 0), GI_FRAME_AT_ENTRY);
	ASSERT_EQ_INT(AT(2, 1), GI_FRAME_PUSHED);
	ASSERT_EQ_INT(AT(2, 4), GI_FRAME_BUILT);
	ASSERT_EQ_INT(AT(3, 4), GI_FRAME_AT_ENTRY); /* endbr64 then the push */
	ASSERT_EQ_INT(AT(3, 5), GI_FRAME_PUSHED);
	ASSERT_EQ_INT(AT(3, 8), GI_FRAME_BUILT);
	ASSERT_EQ_INT(AT(3, 9), GI_FRAME_AT_RET); /* ret $8 */
	ASSERT_EQ_INT(AT(2, 5), GI_FRAME_AT_RET);
	ASSERT_EQ_INT(AT(4, 5), GI_FRAME_AT_ENTRY); /* after call __fentry__ returned */
	ASSERT_EQ_INT(AT(4, 6), GI_FRAME_PUSHED);
	ASSERT_EQ_INT(AT(5, 3), GI_FRAME_AT_ENTRY); /* at the je */
	ASSERT_EQ_INT(AT(5, 6), GI_FRAME_PUSHED);
	ASSERT_EQ_INT(AT(5, 9), GI_FRAME_BUILT);
	/* neither a prologue nor frameless: nothing, not even their rets (a ret of asm without a
	 * frame may be a jump, as in retpoline thunks) */
	for (int i = 6; i <= NF; i++)
		for (int off = 0; off < 8 && i != 11; off++)
			ASSERT_EQ_INT(AT(i, off), GI_FRAME_BUILT);
	/* the frameless leaf, whole (up to the next symbol) */
	ASSERT_EQ_INT(AT(11, 0), GI_FRAME_AT_ENTRY);
	ASSERT_EQ_INT(AT(11, 2), GI_FRAME_AT_ENTRY);
	ASSERT_EQ_INT(AT(11, 0xff), GI_FRAME_AT_ENTRY);
	ASSERT_EQ_INT(AT(12, 0), GI_FRAME_BUILT);
	ASSERT_EQ_INT(gi_prologue_at(p, FK_STEXT - 1), GI_FRAME_BUILT);
	ASSERT_EQ_INT(gi_prologue_at(p, FK_ETEXT), GI_FRAME_BUILT);
	ASSERT_EQ_INT(gi_prologue_at(NULL, F(1)), GI_FRAME_BUILT);
	gi_prologues_free(p);

	/* the lookup across its 4 KiB buckets: the same functions 0xff8 higher, so that the
	 * prologues straddle a bucket's end */
	ASSERT_EQ_INT(gi_prologues_build(st, read_text, NULL, FK_STEXT - 0xff8, FK_ETEXT, &p), 0);
	ASSERT_EQ_INT(AT(1, 8), GI_FRAME_PUSHED);
	ASSERT_EQ_INT(AT(1, 0x10), GI_FRAME_BUILT);
	ASSERT_EQ_INT(AT(2, 0), GI_FRAME_AT_ENTRY);
	gi_prologues_free(p);
	ASSERT_EQ_INT(gi_prologues_build(st, read_text, NULL, FK_ETEXT, FK_STEXT, &p), -EINVAL);
	ASSERT_EQ_INT(gi_prologues_build(NULL, read_text, NULL, FK_STEXT, FK_ETEXT, &p), -EINVAL);
	/* from CFI: not an ELF; this test's own ELF, whose .eh_frame has nothing for this text */
	{
		static const uint8_t junk[64] = "not an ELF";
		static uint8_t self[64 << 20];
		ssize_t len;
		int fd = open("/proc/self/exe", O_RDONLY);

		ASSERT_EQ_INT(gi_prologues_from_cfi(st, read_text, NULL, junk, sizeof(junk),
						    FK_STEXT, FK_ETEXT, &p),
			      -EBADMSG);
		/* ... where gi_open and kernel-info fall back to the code */
		ASSERT_EQ_INT(gi_prologues_make(st, read_text, NULL, junk, sizeof(junk), FK_STEXT,
						FK_ETEXT, &p),
			      0);
		gi_prologues_functions(p, &n_cfi, &n_code);
		ASSERT_TRUE(n_cfi == 0 && n_code == 6);
		ASSERT_EQ_INT(AT(1, 8), GI_FRAME_PUSHED);
		gi_prologues_free(p);
		ASSERT_TRUE(fd >= 0);
		len = read(fd, self, sizeof(self));
		close(fd);
		ASSERT_TRUE(len > 0 && (size_t)len < sizeof(self));
		/* no function of the fixture has CFI there: all from the code, as before */
		ASSERT_EQ_INT(gi_prologues_from_cfi(st, read_text, NULL, self, (size_t)len,
						    FK_STEXT, FK_ETEXT, &p),
			      0);
		gi_prologues_functions(p, &n_cfi, &n_code);
		ASSERT_EQ_U64(n_cfi, 0);
		ASSERT_EQ_U64(n_code, 6);
		ASSERT_EQ_INT(AT(1, 8), GI_FRAME_PUSHED);
		gi_prologues_free(p);
		ASSERT_EQ_INT(gi_prologues_from_cfi(st, read_text, NULL, self, (size_t)len,
						    FK_ETEXT, FK_STEXT, &p),
			      -EINVAL);
	}
	symtab_free(st);
	return TEST_OK;
}

static int no_read(void *ctx, uint64_t kva, void *dst, size_t len)
{
	(void)ctx, (void)kva, (void)dst, (void)len;
	return -EFAULT;
}

/* The .eh_frame of this test's own ELF, with its own symbols: every function's entry has the CFA
 * at RSP + 8 (the return address at RSP), whatever its code does after. */
static int test_eh_frame(void)
{
	struct gi_prologues *p = NULL;
	struct symtab *st = NULL;
	uint64_t lo, hi, fn;
	size_t n_cfi, n_code;
	ssize_t len;
	static uint8_t self[64 << 20];
	int fd = open("/proc/self/exe", O_RDONLY);

	ASSERT_TRUE(fd >= 0);
	len = read(fd, self, sizeof(self));
	close(fd);
	ASSERT_TRUE(len > 0 && (size_t)len < sizeof(self));
	ASSERT_EQ_INT(symtab_open_elf_mem(self, (size_t)len, "self", &st), 0);
	ASSERT_EQ_INT(symtab_code_addr(st, 0, &lo), 0);
	ASSERT_EQ_INT(symtab_code_addr(st, symtab_count(st) - 1, &hi), 0);
	ASSERT_EQ_INT(symtab_find(st, "test_table", &fn), 0);
	ASSERT_EQ_INT(gi_prologues_from_cfi(st, no_read, NULL, self, (size_t)len, lo, hi, &p), 0);
	gi_prologues_functions(p, &n_cfi, &n_code);
	printf("# this test's ELF: %zu functions from .eh_frame, %zu stretches\n", n_cfi,
	       gi_prologues_count(p));
	ASSERT_TRUE(n_cfi > 10);
	ASSERT_EQ_U64(n_code, 0);
	ASSERT_EQ_INT(gi_prologue_at(p, fn), GI_FRAME_AT_ENTRY);
	gi_prologues_free(p);
	symtab_free(st);
	return TEST_OK;
}

/* Stretches longer than a bucket are split, and "RBP pushed" continues "nothing pushed". */
static int test_long_stretch(void)
{
	struct gi_prologues *p = calloc(1, sizeof(*p));
	const uint64_t a = FK_STEXT + 0xf00, b = a + 10000;

	ASSERT_TRUE(p != NULL);
	p->lo = FK_STEXT;
	p->hi = FK_ETEXT;
	ASSERT_EQ_INT(pro_add(p, a, b, 8), 0);
	ASSERT_EQ_INT(pro_add(p, b, b + 0x20, 16), 0);
	ASSERT_EQ_INT(pro_add(p, b + 0x40, b + 0x48, 8), 0); /* not contiguous: its own */
	ASSERT_EQ_INT(pro_index(p), 0);
	ASSERT_EQ_U64(gi_prologues_count(p), 4); /* 4096, 4096, 1808 + 0x20 pushed, 8 */
	ASSERT_EQ_INT(gi_prologue_at(p, a - 1), GI_FRAME_BUILT);
	for (uint64_t k = a; k < b; k += 97)
		ASSERT_EQ_INT(gi_prologue_at(p, k), GI_FRAME_AT_ENTRY);
	ASSERT_EQ_INT(gi_prologue_at(p, b - 1), GI_FRAME_AT_ENTRY);
	ASSERT_EQ_INT(gi_prologue_at(p, b), GI_FRAME_PUSHED);
	ASSERT_EQ_INT(gi_prologue_at(p, b + 0x1f), GI_FRAME_PUSHED);
	ASSERT_EQ_INT(gi_prologue_at(p, b + 0x20), GI_FRAME_BUILT);
	ASSERT_EQ_INT(gi_prologue_at(p, b + 0x44), GI_FRAME_AT_ENTRY);
	ASSERT_EQ_INT(gi_prologue_at(p, b + 0x48), GI_FRAME_BUILT);
	gi_prologues_free(p);
	return TEST_OK;
}

/*
 * The kernel fake with the fixture's text mapped at FK_STEXT and its prologues, and a caller
 * chain at S + 0x3e00 (3 frames returning to RET(1..3)) below which the fixture's function was
 * called from CALLER: that call's return address is at S + 0x3d08.
 */
#define CALLER (RET(7) + 0x21)

static int setup(struct fakekernel *fk, struct symtab **st, bool with_table)
{
	*st = fixture();
	if (!*st || fakekernel_init(fk, 4))
		return -1;
	for (uint64_t off = 0; off < sizeof(text); off += 4096)
		if (fakemem_map(&fk->fm, FK_STEXT + off, TEXT_GPA + off, 4096, 0))
			return -1;
	if (fk_write_gva(fk, FK_STEXT, text, sizeof(text)))
		return -1;
	if (with_table &&
	    gi_prologues_build(*st, read_text, NULL, FK_STEXT, FK_ETEXT, &fk->gi->prologues))
		return -1;
	for (unsigned int i = 0; i < 3; i++)
		if (fk_frame(fk, S + 0x3e00 + 0x40 * i, i < 2 ? S + 0x3e40 + 0x40 * i : 0,
			     RET(i + 1)))
			return -1;
	/* the call's return address, and RBP pushed below it */
	return fk_w64(fk, S + 0x3d08, CALLER) || fk_w64(fk, S + 0x3d00, S + 0x3e00) ? -1 : 0;
}

/* The walk from @rip with @rsp and @rbp into @ips (8), *@n frames. */
static enum hvp_walk_stop walk_at(struct fakekernel *fk, uint64_t rip, uint64_t rsp,
				  uint64_t rbp, uint64_t *ips, unsigned int *n)
{
	struct gi_regs r = fk->regs;

	r.rip = rip;
	r.rsp = rsp;
	r.rbp = rbp;
	return gi_unwind_kernel(fk->gi, &fk->fm.mem, &r, fk->task_kva, ips, 8, n);
}

/* The chain from there must be rip, CALLER, RET(1..3). */
static int chain_has_caller(struct fakekernel *fk, uint64_t rip, uint64_t rsp, uint64_t rbp)
{
	uint64_t ips[8];
	unsigned int n = 0;

	ASSERT_EQ_INT(walk_at(fk, rip, rsp, rbp, ips, &n), HVP_WALK_END);
	ASSERT_EQ_INT(n, 5);
	ASSERT_EQ_U64(ips[0], rip);
	ASSERT_EQ_U64(ips[1], CALLER);
	ASSERT_EQ_U64(ips[2], RET(1));
	ASSERT_EQ_U64(ips[3], RET(2));
	ASSERT_EQ_U64(ips[4], RET(3));
	return TEST_OK;
}

/* ... and the chain without the caller: rip, RET(1..3) */
static int chain_lacks_caller(struct fakekernel *fk, uint64_t rip, uint64_t rsp, uint64_t rbp)
{
	uint64_t ips[8];
	unsigned int n = 0;

	ASSERT_EQ_INT(walk_at(fk, rip, rsp, rbp, ips, &n), HVP_WALK_END);
	ASSERT_EQ_INT(n, 4);
	ASSERT_EQ_U64(ips[1], RET(1));
	return TEST_OK;
}

static int test_unwind(void)
{
	struct fakekernel fk;
	struct symtab *st;
	struct gi_regs r;
	uint64_t ips[8];
	unsigned int n = 0;

	ASSERT_EQ_INT(setup(&fk, &st, true), 0);
	/* every point of arch_randomize_brk gives the same chain */
	ASSERT_EQ_INT(chain_has_caller(&fk, F(1), S + 0x3d08, S + 0x3e00), TEST_OK);
	ASSERT_EQ_INT(chain_has_caller(&fk, F(1) + 8, S + 0x3d00, S + 0x3e00), TEST_OK);
	ASSERT_EQ_INT(chain_has_caller(&fk, F(1) + 0x10, S + 0x3d00, S + 0x3d00), TEST_OK);
	ASSERT_EQ_INT(chain_has_caller(&fk, F(1) + 0x15, S + 0x3d00, S + 0x3d00), TEST_OK);
	/* at its ret (frame popped; the ret bitmap tells) and anywhere in a frameless leaf: the
	 * caller at RSP */
	ASSERT_EQ_INT(chain_has_caller(&fk, F(1) + 0x16, S + 0x3d08, S + 0x3e00), TEST_OK);
	ASSERT_EQ_INT(chain_has_caller(&fk, F(11), S + 0x3d08, S + 0x3e00), TEST_OK);
	ASSERT_EQ_INT(chain_has_caller(&fk, F(11) + 2, S + 0x3d08, S + 0x3e00), TEST_OK);
	/* a ret in a function the table does not know (frameless, but it calls): not claimed */
	ASSERT_EQ_INT(chain_lacks_caller(&fk, F(12) + 7, S + 0x3d08, S + 0x3e00), TEST_OK);
	/* a ret the running code no longer has (patched): the guest's byte is checked */
	ASSERT_EQ_INT(fk_write_gva(&fk, F(1) + 0x16, "\x90", 1), 0);
	ASSERT_EQ_INT(chain_lacks_caller(&fk, F(1) + 0x16, S + 0x3d08, S + 0x3e00), TEST_OK);
	ASSERT_EQ_INT(fk_write_gva(&fk, F(1) + 0x16, "\xc3", 1), 0);
	/* the slot past the top of RSP's stack region (RBP pushed at S + 0x3ff8: the slot is at
	 * S + 0x4000, mapped here and holding text, the caller's frame elsewhere): not taken */
	ASSERT_EQ_INT(fakemem_map(&fk.fm, S + 0x4000, TEXT_GPA + 0x10000, 4096, 0), 0);
	ASSERT_EQ_INT(fk_w64(&fk, S + 0x4000, CALLER), 0);
	r = fk.regs;
	r.rip = F(1) + 8;
	r.rsp = S + 0x3ff8;
	r.rbp = 0;
	ASSERT_EQ_INT(gi_unwind_kernel(fk.gi, &fk.fm.mem, &r, fk.task_kva, ips, 8, &n),
		      HVP_WALK_END);
	ASSERT_EQ_INT(n, 1);
	r.rsp = S + 0x3ff0; /* the slot at S + 0x3ff8, inside: taken */
	ASSERT_EQ_INT(fk_w64(&fk, S + 0x3ff8, CALLER), 0);
	ASSERT_EQ_INT(gi_unwind_kernel(fk.gi, &fk.fm.mem, &r, fk.task_kva, ips, 8, &n),
		      HVP_WALK_END);
	ASSERT_EQ_INT(n, 2);
	ASSERT_EQ_U64(ips[1], CALLER);
	/* entry code is never claimed */
	fk.gi->entry_text_start = F(1);
	fk.gi->entry_text_end = F(2);
	ASSERT_EQ_INT(chain_lacks_caller(&fk, F(1) + 8, S + 0x3d00, S + 0x3e00), TEST_OK);
	fk.gi->entry_text_start = fk.gi->entry_text_end = 0;
	/* a KASLR slide not known yet: the table (link-time) is not used */
	fk.gi->slide_state = GI_SLIDE_UNKNOWN;
	ASSERT_EQ_INT(chain_lacks_caller(&fk, F(1) + 8, S + 0x3d00, S + 0x3e00), TEST_OK);
	fk.gi->slide_state = GI_SLIDE_KNOWN;
	/* a known slide: the RIP is looked up at its link-time address */
	{
		const uint64_t slide = 0x200000;
		struct gi_regs rs = fk.regs;

		gi_set_kaslr_slide(fk.gi, slide);
		ASSERT_EQ_INT(fk_w64(&fk, S + 0x3d08, CALLER + slide), 0);
		rs.rip = F(1) + 8 + slide;
		rs.rsp = S + 0x3d00;
		rs.rbp = S + 0x3e00;
		gi_unwind_kernel(fk.gi, &fk.fm.mem, &rs, fk.task_kva, ips, 8, &n);
		ASSERT_TRUE(n >= 2);
		ASSERT_EQ_U64(ips[1], CALLER + slide);
		rs.rip = F(1) + 8; /* unslid: another place of the slid kernel, no prologue */
		gi_unwind_kernel(fk.gi, &fk.fm.mem, &rs, fk.task_kva, ips, 8, &n);
		ASSERT_TRUE(n < 2 || ips[1] != CALLER + slide);
		gi_set_kaslr_slide(fk.gi, 0);
		ASSERT_EQ_INT(fk_w64(&fk, S + 0x3d08, CALLER), 0);
	}

	/* the execve check now sees the caller: here CALLER stands for load_elf_binary's code
	 * after begin_new_exec */
	gi_ranges_add(&fk.gi->exec_past, CALLER - 0x21, CALLER + 0x40);
	ASSERT_EQ_INT(walk_at(&fk, F(1) + 8, S + 0x3d00, S + 0x3e00, ips, &n), HVP_WALK_END);
	ASSERT_TRUE(gi_chain_past_exec_switch(fk.gi, F(1) + 8, ips + 1, n - 1));
	/* room for the rip alone: no caller written past it */
	r = fk.regs;
	r.rip = F(1) + 8;
	r.rsp = S + 0x3d00;
	r.rbp = S + 0x3e00;
	ASSERT_EQ_INT(gi_unwind_kernel(fk.gi, &fk.fm.mem, &r, fk.task_kva, ips, 1, &n),
		      HVP_WALK_DEPTH);
	ASSERT_EQ_INT(n, 1);

	/* hostile: the slot holds no kernel text, or lies above the caller's frame, or RSP is
	 * not a kernel address, or misaligned: the chain is as before, without the caller */
	ASSERT_EQ_INT(fk_w64(&fk, S + 0x3d08, 0x401000), 0);
	ASSERT_EQ_INT(chain_lacks_caller(&fk, F(1) + 8, S + 0x3d00, S + 0x3e00), TEST_OK);
	ASSERT_EQ_INT(fk_w64(&fk, S + 0x3d08, CALLER), 0);
	ASSERT_EQ_INT(chain_lacks_caller(&fk, F(1) + 8, S + 0x3e00, S + 0x3e00), TEST_OK);
	ASSERT_EQ_INT(chain_lacks_caller(&fk, F(1) + 8, 0x00007ffffffde000ull, S + 0x3e00),
		      TEST_OK);
	ASSERT_EQ_INT(chain_lacks_caller(&fk, F(1) + 8, S + 0x3cfc, S + 0x3e00), TEST_OK);
	fakekernel_fini(&fk);
	symtab_free(st);

	/* without the table (a session without an image): the caller is lost, as it was */
	ASSERT_EQ_INT(setup(&fk, &st, false), 0);
	ASSERT_EQ_INT(chain_lacks_caller(&fk, F(1) + 8, S + 0x3d00, S + 0x3e00), TEST_OK);
	fakekernel_fini(&fk);
	symtab_free(st);
	return TEST_OK;
}

/* An interrupt (ENCODE_FRAME_POINTER) taken inside the prologue: the interrupted code's caller
 * is read at the pt_regs' sp. */
static int test_unwind_interrupted(void)
{
	const struct gi_layout *l;
	struct fakekernel fk;
	struct symtab *st;
	struct gi_regs r;
	uint64_t ips[8], pt = S + 0x3b00;
	unsigned int n = 0;

	ASSERT_EQ_INT(setup(&fk, &st, true), 0);
	l = &fk.layout;
	/* the handler's frame at S + 0x3a00 returns to RET(5), its caller's RBP is pt | 1 */
	ASSERT_EQ_INT(fk_frame(&fk, S + 0x3a00, pt | 1, RET(5)), 0);
	ASSERT_EQ_INT(fk_w64(&fk, pt + l->pt_regs_cs, 0x10), 0);
	ASSERT_EQ_INT(fk_w64(&fk, pt + l->pt_regs_ip, F(1) + 8), 0);
	ASSERT_EQ_INT(fk_w64(&fk, pt + l->pt_regs_sp, S + 0x3d00), 0);
	ASSERT_EQ_INT(fk_w64(&fk, pt + l->pt_regs_bp, S + 0x3e00), 0);
	r = fk.regs;
	r.rip = RET(6);
	r.rsp = S + 0x39f0;
	r.rbp = S + 0x3a00;
	ASSERT_EQ_INT(gi_unwind_kernel(fk.gi, &fk.fm.mem, &r, fk.task_kva, ips, 8, &n),
		      HVP_WALK_END);
	ASSERT_EQ_INT(n, 7);
	ASSERT_EQ_U64(ips[1], RET(5));
	ASSERT_EQ_U64(ips[2], F(1) + 8);
	ASSERT_EQ_U64(ips[3], CALLER);
	ASSERT_EQ_U64(ips[4], RET(1));
	/* the same frame under the int3 entry (RET(5) in asm_exc_int3): its ip is one past an
	 * int3, inside a patched instruction, not a place of the table: no caller added */
	fk.gi->int3_entry[0] = RET(5) - 0x10;
	fk.gi->int3_entry[1] = RET(5) + 0x10;
	ASSERT_EQ_INT(gi_unwind_kernel(fk.gi, &fk.fm.mem, &r, fk.task_kva, ips, 8, &n),
		      HVP_WALK_END);
	ASSERT_EQ_INT(n, 6);
	ASSERT_EQ_U64(ips[3], RET(1));
	fk.gi->int3_entry[0] = fk.gi->int3_entry[1] = 0;
	/* pt_regs.sp unknown (no BTF field), or unreadable (its offset lands on an unmapped
	 * page, S + 0x4b00): the caller is skipped, the walk goes on */
	for (int i = 0; i < 2; i++) {
		fk.gi->layout.pt_regs_sp = i ? 0x1000 : UINT32_MAX;
		ASSERT_EQ_INT(gi_unwind_kernel(fk.gi, &fk.fm.mem, &r, fk.task_kva, ips, 8, &n),
			      HVP_WALK_END);
		ASSERT_EQ_INT(n, 6);
		ASSERT_EQ_U64(ips[3], RET(1));
		ASSERT_EQ_U64(ips[5], RET(3));
	}
	fk.gi->layout.pt_regs_sp = fk.layout.pt_regs_sp;
	/* the depth bound counts the extra frame */
	ASSERT_EQ_INT(gi_unwind_kernel(fk.gi, &fk.fm.mem, &r, fk.task_kva, ips, 3, &n),
		      HVP_WALK_DEPTH);
	ASSERT_EQ_INT(n, 3);
	fakekernel_fini(&fk);
	symtab_free(st);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "prologue table from code bytes", test_table },
	{ "prologue table from an ELF's .eh_frame", test_eh_frame },
	{ "stretches longer than a bucket", test_long_stretch },
	{ "kernel unwind from a prologue or a ret keeps the caller", test_unwind },
	{ "kernel unwind through an interrupt taken in a prologue", test_unwind_interrupted },
};

TEST_MAIN(tests)
