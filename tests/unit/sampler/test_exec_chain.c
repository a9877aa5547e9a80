// SPDX-License-Identifier: MIT
// Unit test of a whole kernel sample (sample_from_regs) taken past execve's point of no return
// at a function's first instructions: arch_randomize_brk + 0x8 of our 6.1 test kernel, RBP pushed
// but not yet moved, called from load_elf_binary between begin_new_exec and start_thread. The
// frame-pointer walk must not skip load_elf_binary there (the prologue table), so that the
// sample is known to be past the switch of mm and its user part is lost (HVP_WALK_EXECVE), not
// walked with the old program's registers through the new mm: in both callchain modes. Found
// on 2 vCPUs in CI: eager and deferred then walked different wrong stacks.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gi_internal.h"
#include "kimage_internal.h"
#include "sampler_fixture.h"
#include "test.h"

#define BRK	   (FK_STEXT + 0x200)  /* arch_randomize_brk */
#define LOADER	   (FK_STEXT + 0x8000) /* load_elf_binary's code past begin_new_exec */
#define LOADER_RET (LOADER + 0x21)     /* the return address of its call */

static const uint8_t randomize_brk61[32] = {
    0x55, 0x48, 0x8b, 0xbf, 0x10, 0x01, 0x00, 0x00, 0xbe, 0x00, 0x00, 0x00, 0x40, 0x48, 0x89, 0xe5,
    0xe8, 0x00, 0x00, 0x00, 0x00, 0x5d, 0xc3, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,
};

static struct hvp_sample got;
static int n_got;

static int cap_sample(void *ctx, const struct hvp_sample *s, const struct hvp_user_regs *r)
{
	(void)ctx;
	(void)r;
	got = *s;
	n_got++;
	return 0;
}

static const struct sampler_sink cap_sink = {.sample = cap_sample, .user_stack = sink_user_stack};

static int read_text(void *ctx, uint64_t kva, void *dst, size_t len)
{
	(void)ctx;
	if (kva < BRK || kva - BRK + len > sizeof(randomize_brk61))
		return -EFAULT;
	memcpy(dst, randomize_brk61 + (kva - BRK), len);
	return 0;
}

static struct gi_prologues *table(void)
{
	struct ksym_entry e[2] = {{BRK, 't', strdup("arch_randomize_brk")},
				  {BRK + sizeof(randomize_brk61), 't', strdup("next")}};
	struct gi_prologues *p = NULL;
	struct symtab *st = NULL;

	if (symtab_from_entries(e, 2, &st) != 0 ||
	    gi_prologues_build(st, read_text, NULL, FK_STEXT, FK_ETEXT, &p) != 0)
		p = NULL;
	symtab_free(st);
	free(e[0].name);
	free(e[1].name);
	return p;
}

/* One kernel sample at BRK + 8 in @mode, with or without the prologue table. */
static int sample_in_prologue(enum sampler_callchain_mode mode, bool with_table,
			      uint64_t *past_switch)
{
	struct fixture f;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	int err = -1;

	n_got = 0;
	if (fixture_init(&f, mode, 4) || write_pt_regs(&f, &f.entry))
		goto out;
	fixture_process(&f.fk, 0x400000); /* the new program's mm, code range and exe set */
	f.s->cfg.sink = &cap_sink;
	if (fixture_vcpu_regs(&f, 0, &regs, &sregs))
		goto out;
	/* RBP (the caller's frame, fixture_vcpu_regs's chain) pushed at RSP, the call's return
	 * address into load_elf_binary above it */
	regs.rip = BRK + 8;
	if (fk_w64(&f.fk, regs.rsp, regs.rbp) || fk_w64(&f.fk, regs.rsp + 8, LOADER_RET))
		goto out;
	gi_ranges_add(&f.fk.gi->exec_past, LOADER, LOADER + 0x100);
	if (with_table && !(f.fk.gi->prologues = table()))
		goto out;
	if (sample_from_regs(&f.s->vcpus[0], &regs, &sregs, 1000000, 1000, 0) != 0 || n_got != 1)
		goto out;
	*past_switch = f.s->vcpus[0].c.execve_past_switch;
	err = 0;
out:
	fixture_fini(&f);
	return err;
}

static int test_exec_in_prologue(void)
{
	static const enum sampler_callchain_mode modes[] = {SAMPLER_CALLCHAIN_EAGER,
							    SAMPLER_CALLCHAIN_DEFERRED};
	uint64_t past = 0;

	for (size_t i = 0; i < ARRAY_SIZE(modes); i++) {
		ASSERT_EQ_INT(sample_in_prologue(modes[i], true, &past), 0);
		ASSERT_EQ_INT(got.n_kernel, 5);
		ASSERT_EQ_U64(got.kernel_ips[0], BRK + 8);
		ASSERT_EQ_U64(got.kernel_ips[1], LOADER_RET);
		ASSERT_EQ_U64(got.kernel_ips[2], KRET(1));
		ASSERT_EQ_INT(got.user_stop, HVP_WALK_EXECVE);
		ASSERT_EQ_INT(got.n_user, 0);
		ASSERT_EQ_U64(got.cookie, 0);
		ASSERT_EQ_U64(past, 1);
		/* without the table (as before): the caller skipped, the old registers walked
		 * (eager) or marked (deferred) through the new mm */
		ASSERT_EQ_INT(sample_in_prologue(modes[i], false, &past), 0);
		ASSERT_EQ_INT(got.n_kernel, 4);
		ASSERT_EQ_U64(got.kernel_ips[1], KRET(1));
		ASSERT_TRUE(got.user_stop != HVP_WALK_EXECVE);
		ASSERT_EQ_U64(past, 0);
	}
	return TEST_OK;
}

static const struct test_case tests[] = {
    {"a sample in a prologue past execve's switch of mm: lost in both modes",
     test_exec_in_prologue},
};

TEST_MAIN(tests)
