// SPDX-License-Identifier: MIT
// The sampler unit tests' shared fixture: a sink that keeps USER_STACK records, a sampler of two
// vCPUs over the fake kernel of the guestinfo tests (a task, its kernel and user stacks).
#ifndef HVPROF_TEST_SAMPLER_FIXTURE_H
#define HVPROF_TEST_SAMPLER_FIXTURE_H

#include "fakekernel.h"
#include "sampler_internal.h"

#define U FK_USER_STACK
#define URET(i) FK_URET(i)
#define PT_REGS (FK_STACK + 16384 - 168) /* fakekernel's layout: pt_regs is 168 bytes */

#define MAX_RECS 600

struct rec {
	uint64_t cookie;
	int32_t pid;
	uint8_t stop;
	uint16_t n;
	uint64_t ips[8];
	bool has_regs; /* a USER_REGS came with it: */
	struct hvp_user_regs regs; /* .stack not kept */
	uint64_t stack0; /* its first 8 stack bytes (0 when fewer) */
};

/* the USER_STACK records since fixture_init, and the trap's arm/disarm callbacks */
extern struct rec recs[MAX_RECS];
extern int n_recs, n_first, n_last;
extern const struct sampler_sink sink;

int sink_user_stack(void *ctx, const struct hvp_user_stack *u, const struct hvp_user_regs *ur);
int sink_sample(void *ctx, const struct hvp_sample *s, const struct hvp_user_regs *r);
void on_first(struct svcpu *sv);
void on_last(struct svcpu *sv);

struct fixture {
	struct fakekernel fk;
	struct sampler *s;
	struct gi_user_regs entry; /* a good user chain: ip + 3 frames */
};

int fixture_init_cg(struct fixture *f, enum sampler_callchain_mode mode, unsigned int stack_pages,
		    enum sampler_call_graph cg, uint32_t stack_size);
int fixture_init(struct fixture *f, enum sampler_callchain_mode mode, unsigned int stack_pages);
void fixture_fini(struct fixture *f);
/* a request for the fake task with @entry, known, under the fake mm */
struct mark_req req_of(struct fixture *f, int32_t pid, const struct gi_user_regs *entry);
/* pt_regs of the fake task: entered from user mode with @ur (CS 0x33). */
int write_pt_regs(struct fixture *f, const struct gi_user_regs *ur);
/* The fake task's process: code range [@start_code, 0x402000) and an executable named /demo. */
void fixture_process(struct fakekernel *fk, uint64_t start_code);
/* A kernel return address of the fake kernel's text (frame @i of fixture_kernel_chain). */
#define KRET(i) (FK_STEXT + 0x1000 * (i))
/*
 * The vCPU registers of a sample of the fake task: @cpl 0, in the kernel (RIP in its text, a
 * frame-pointer chain of 3 frames on its stack returning to KRET(1..3), per-CPU GS base), or
 * @cpl 3, in user mode at the fixture's good chain (f->entry). Page tables: the fake guest's.
 */
int fixture_vcpu_regs(struct fixture *f, uint8_t cpl, struct kvm_regs *regs,
		      struct kvm_sregs *sregs);
/* Ready for whole kernel samples of the fake task (sample_from_regs): vCPU 0's KASLR check
 * decided (the fake kernel has no MSR_LSTAR), every stay marked, the task's process and
 * pt_regs (f->entry) in place, and its vCPU registers in @regs/@sregs (fixture_vcpu_regs, CPL
 * 0). Return: TEST_OK or TEST_FAIL. */
int fixture_kernel_samples(struct fixture *f, struct kvm_regs *regs, struct kvm_sregs *sregs);

/* @r is the walk of the fixture's good chain (ip + 3 frames), with @cookie */
int check_good_walk(const struct rec *r, uint64_t cookie);

/* A gmem over @inner (put it in place of the fake's: f->fk.fm.mem = { read_counter_read, rc })
 * that counts in @n the reads overlapping guest RAM [@gpa, @gpa + @size) of @len bytes (0: any
 * length; a page walk's 1-byte look at a page is a read too). */
struct read_counter {
	struct gmem inner;
	uint64_t gpa, size;
	size_t len;
	unsigned int n;
};
int read_counter_read(void *ctx, uint64_t gpa, void *dst, size_t len);

#endif
