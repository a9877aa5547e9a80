// SPDX-License-Identifier: MIT
// The sampler unit tests' shared fixture (sampler_fixture.h).
#include <errno.h>
#include <string.h>

#include "sampler_fixture.h"
#include "test.h"

/* ---------------------------------------------------------------- a sink that keeps records */

struct rec recs[MAX_RECS];
int n_recs, n_first, n_last;

int sink_user_stack(void *ctx, const struct hvp_user_stack *u, const struct hvp_user_regs *ur)
{
	struct rec *r;

	(void)ctx;
	if (n_recs >= MAX_RECS)
		return -ENOSPC;
	r = &recs[n_recs++];
	r->cookie = u->cookie;
	r->pid = u->pid;
	r->stop = u->stop;
	r->n = u->n_user;
	memcpy(r->ips, u->user_ips, (u->n_user < 8 ? u->n_user : 8) * sizeof(r->ips[0]));
	r->has_regs = ur != NULL;
	r->stack0 = 0;
	if (ur) {
		r->regs = *ur;
		r->regs.stack = NULL; /* the pieces (stack_segs) stay: they point into fake RAM */
		if (ur->stack_len >= 8)
			hvp_user_regs_stack_copy(ur, 0, &r->stack0, 8);
	}
	return 0;
}

int sink_sample(void *ctx, const struct hvp_sample *s, const struct hvp_user_regs *r)
{
	(void)ctx;
	(void)s;
	(void)r;
	return 0;
}

const struct sampler_sink sink = { .sample = sink_sample, .user_stack = sink_user_stack };

void on_first(struct svcpu *sv)
{
	(void)sv;
	n_first++;
}

void on_last(struct svcpu *sv)
{
	(void)sv;
	n_last++;
}

/* ---------------------------------------------------------------- fixture */

int fixture_init_cg(struct fixture *f, enum sampler_callchain_mode mode,
		    unsigned int stack_pages, enum sampler_call_graph cg, uint32_t stack_size)
{
	struct sampler_config cfg = { .sample_hz = 1000, .sink = &sink, .callchain_mode = mode,
				      .mark_timeout_ns = 1000000, .call_graph = cg,
				      .stack_size = stack_size };

	memset(f, 0, sizeof(*f));
	n_recs = n_first = n_last = 0;
	if (fakekernel_init(&f->fk, stack_pages))
		return -1;
	if (sampler_new(&cfg, f->fk.gi, &f->fk.fm.mem, f->fk.fm.pg.maxphyaddr, 2, &f->s)) {
		fakekernel_fini(&f->fk);
		return -1;
	}
	f->s->marks.on_first = on_first;
	f->s->marks.on_last = on_last;
	f->entry = (struct gi_user_regs){ 0x400100, U + 0x100, U + 0x3000 };
	return fk_uchain(&f->fk, U + 0x3000, 3);
}

int fixture_init(struct fixture *f, enum sampler_callchain_mode mode, unsigned int stack_pages)
{
	return fixture_init_cg(f, mode, stack_pages, SAMPLER_CALL_GRAPH_FP, 0);
}

void fixture_fini(struct fixture *f)
{
	sampler_destroy(f->s);
	fakekernel_fini(&f->fk);
}

struct mark_req req_of(struct fixture *f, int32_t pid, const struct gi_user_regs *entry)
{
	return (struct mark_req){ .task = f->fk.task_kva, .pid = pid, .pg = &f->fk.fm.pg,
				  .entry = entry, .entry_known = true, .mm = f->fk.mm_kva };
}

/* pt_regs of the fake task: entered from user mode with @ur (CS 0x33). */
int write_pt_regs(struct fixture *f, const struct gi_user_regs *ur)
{
	return fk_w64(&f->fk, PT_REGS + 128, ur->ip) || fk_w64(&f->fk, PT_REGS + 136, 0x33) ||
	       fk_w64(&f->fk, PT_REGS + 152, ur->sp) || fk_w64(&f->fk, PT_REGS + 32, ur->bp);
}

void fixture_process(struct fakekernel *fk, uint64_t start_code)
{
	uint64_t dentry = fk_kva(FK_DENTRY_GPA), root = fk_kva(FK_DENTRY_GPA + 0x100);

	fakemem_w64(&fk->fm, FK_MM_GPA + 0x110, start_code);
	fakemem_w64(&fk->fm, FK_MM_GPA + 0x118, 0x402000);
	fakemem_w64(&fk->fm, FK_MM_GPA + 0x388, fk_kva(FK_FILE_GPA));
	fakemem_w64(&fk->fm, FK_FILE_GPA + 16 + 8, dentry);
	fakemem_w64(&fk->fm, FK_DENTRY_GPA + 24, root);
	fakemem_w64(&fk->fm, FK_DENTRY_GPA + 32 + 8, fk_kva(FK_NAMES_GPA));
	fakemem_wbytes(&fk->fm, FK_NAMES_GPA, "demo", 5);
	fakemem_w64(&fk->fm, FK_DENTRY_GPA + 0x100 + 24, root);
}

int check_good_walk(const struct rec *r, uint64_t cookie)
{
	ASSERT_EQ_U64(r->cookie, cookie);
	ASSERT_EQ_INT(r->pid, FK_PID);
	ASSERT_EQ_INT(r->stop, HVP_WALK_END);
	ASSERT_EQ_INT(r->n, 4);
	ASSERT_EQ_U64(r->ips[0], 0x400100);
	ASSERT_EQ_U64(r->ips[1], URET(1));
	ASSERT_EQ_U64(r->ips[3], URET(3));
	return TEST_OK;
}


int fixture_vcpu_regs(struct fixture *f, uint8_t cpl, struct kvm_regs *regs,
		      struct kvm_sregs *sregs)
{
	const uint64_t fp = FK_STACK + 0x3e00;

	memset(regs, 0, sizeof(*regs));
	memset(sregs, 0, sizeof(*sregs));
	sregs->cr0 = f->fk.fm.pg.cr0;
	sregs->cr3 = f->fk.fm.pg.cr3;
	sregs->cr4 = f->fk.fm.pg.cr4;
	sregs->efer = f->fk.fm.pg.efer;
	if (cpl == 3) {
		sregs->cs.selector = 0x33;
		sregs->gs.base = f->fk.regs.kernel_gs_base; /* the user's; the kernel's is swapped */
		regs->rip = f->entry.ip;
		regs->rsp = f->entry.sp;
		regs->rbp = f->entry.bp;
		return 0;
	}
	sregs->cs.selector = 0x10;
	sregs->gs.base = f->fk.regs.gs_base;
	regs->rip = f->fk.regs.rip;
	regs->rsp = fp - 0x80;
	regs->rbp = fp;
	for (unsigned int i = 0; i < 3; i++)
		if (fk_frame(&f->fk, fp + 0x40 * i, i + 1 < 3 ? fp + 0x40 * (i + 1) : 0,
			     KRET(i + 1)))
			return -1;
	return 0;
}

int read_counter_read(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	struct read_counter *rc = ctx;

	if (gpa < rc->gpa + rc->size && rc->gpa < gpa + len && (!rc->len || len == rc->len))
		rc->n++;
	return gmem_read(&rc->inner, gpa, dst, len);
}

int fixture_kernel_samples(struct fixture *f, struct kvm_regs *regs, struct kvm_sregs *sregs)
{
	f->s->vcpus[0].kaslr_decided = true;
	f->s->stay_adaptive = false;
	fixture_process(&f->fk, 0x400000);
	ASSERT_TRUE(write_pt_regs(f, &f->entry) == 0);
	ASSERT_TRUE(fixture_vcpu_regs(f, 0, regs, sregs) == 0);
	return TEST_OK;
}
