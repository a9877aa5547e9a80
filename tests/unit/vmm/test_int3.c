// SPDX-License-Identifier: MIT
// INT3 breakpoints (vmm/debug.c, vmm_bp_use_int3) without /dev/kvm: a VM with guest RAM and no
// KVM, the bytes written and put back as slots are armed and disarmed, #BP exits dispatched to
// the rider, to nobody (a stale INT3) or back to the guest, and the refusals.
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "vmm_internal.h"

#define SITE1 0xffffffff81000100ull
#define SITE2 0xffffffff81000200ull
#define GPA1 0x1100ull
#define GPA2 0x1200ull
#define SYSRETQ0 0x48 /* first byte of sysretq (48 0f 07) and iretq (48 cf) */

static int hits, hit_slot;
static uint64_t hit_pc;

static int on_debug(void *ctx, struct vmm_vcpu *v, int slot, uint64_t pc, bool repeat)
{
	(void)ctx;
	(void)v;
	hits++;
	hit_slot = slot;
	hit_pc = pc;
	return repeat ? -1 : 0;
}

struct fixture {
	struct vmm *vm;
	struct vmm_vcpu vcpu;
	struct kvm_run run;
	uint8_t *ram;
};

static int setup(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	f->vm = calloc(1, sizeof(*f->vm));
	if (!f->vm || ram_create(&f->vm->ram, 1u << 20) != 0)
		return -1;
	pthread_mutex_init(&f->vm->end_lock, NULL);
	pthread_mutex_init(&f->vm->kick_lock, NULL);
	pthread_mutex_init(&f->vm->bp_lock, NULL);
	f->vcpu = (struct vmm_vcpu){ .vm = f->vm, .run = &f->run, .fd = -1 };
	f->vm->vcpus = &f->vcpu;
	f->vm->n_vcpus = 1;
	f->vm->hooks.debug = on_debug;
	f->ram = ram_gpa_to_hva(&f->vm->ram, 0, 1u << 20);
	f->ram[GPA1] = SYSRETQ0;
	f->ram[GPA2] = SYSRETQ0;
	if (vmm_bp_alloc(f->vm) != 1 || vmm_bp_alloc(f->vm) != 2)
		return -1;
	vmm_bp_set_addr(f->vm, 1, SITE1);
	vmm_bp_set_addr(f->vm, 2, SITE2);
	hits = 0;
	return 0;
}

static void teardown(struct fixture *f)
{
	ram_destroy(&f->vm->ram);
	pthread_mutex_destroy(&f->vm->end_lock);
	pthread_mutex_destroy(&f->vm->kick_lock);
	pthread_mutex_destroy(&f->vm->bp_lock);
	free(f->vm);
}

/* A #BP exit of the fake vCPU at @pc, as KVM reports it (debug.arch.pc: the INT3's address). */
static int bp_exit(struct fixture *f, uint64_t pc)
{
	f->run.exit_reason = KVM_EXIT_DEBUG;
	f->run.debug.arch.exception = BP_VECTOR;
	f->run.debug.arch.pc = pc;
	return debug_exit(&f->vcpu);
}

/*
 * The bytes follow the armed bits: a slot armed before the switch gets its INT3 at the switch,
 * the other when it is armed; disarming puts the byte back; nothing else in RAM changes. The
 * run's end puts every byte back and leaves nothing armed.
 */
static int test_bytes(void)
{
	struct fixture f;
	const uint64_t gpa[VMM_BP_SLOTS] = { 0, GPA1, GPA2, 0 };

	ASSERT_EQ_INT(setup(&f), 0);
	vmm_bp_arm(f.vm, 1u << 1, true, NULL);
	ASSERT_EQ_INT(f.ram[GPA1], SYSRETQ0); /* debug registers: RAM untouched */
	ASSERT_TRUE(!vmm_bp_int3(f.vm));
	ASSERT_EQ_INT(vmm_bp_use_int3(f.vm, gpa), 0);
	ASSERT_TRUE(vmm_bp_int3(f.vm));
	ASSERT_EQ_INT(f.ram[GPA1], 0xcc);
	ASSERT_EQ_INT(f.ram[GPA2], SYSRETQ0);
	ASSERT_EQ_INT(f.vcpu.kick_pending, 1); /* every vCPU intercepts #BP before it runs on */
	vmm_bp_arm(f.vm, 1u << 2, true, NULL);
	ASSERT_EQ_INT(f.ram[GPA2], 0xcc);
	vmm_bp_arm(f.vm, 1u << 1, false, NULL);
	ASSERT_EQ_INT(f.ram[GPA1], SYSRETQ0);
	ASSERT_EQ_INT(vmm_bp_armed(f.vm), 1u << 2);
	vmm_bp_arm(f.vm, 1u << 1, false, NULL); /* disarming twice changes nothing */
	ASSERT_EQ_INT(f.ram[GPA1], SYSRETQ0);
	/* addresses are fixed once the bytes are in RAM */
	vmm_bp_set_addr(f.vm, 2, SITE2 + 8);
	ASSERT_EQ_U64(atomic_load(&f.vm->bp_addr[2]), SITE2);
	for (unsigned int i = 0; i < (1u << 20); i++)
		if (i != GPA1 && i != GPA2 && f.ram[i] != 0)
			ASSERT_EQ_INT(f.ram[i], 0);
	f.vcpu.index = 0;
	vcpu_debug_disarm(&f.vcpu);
	ASSERT_EQ_INT(f.ram[GPA2], SYSRETQ0);
	ASSERT_EQ_INT(vmm_bp_armed(f.vm), 0);
	ASSERT_EQ_U64(f.vcpu.c.traps_armed_at_end, 0);
	teardown(&f);
	return TEST_OK;
}

/* #BP exits: an armed slot's goes to the rider (which completes the instruction: vmm_bp_step
 * says so); a disarmed slot's is a stale fetch (the byte is back: resume); any other is the
 * guest's own and is given back to it with the next KVM_SET_GUEST_DEBUG. */
static int test_exits(void)
{
	struct fixture f;
	const uint64_t gpa[VMM_BP_SLOTS] = { 0, GPA1, GPA2, 0 };

	ASSERT_EQ_INT(setup(&f), 0);
	ASSERT_EQ_INT(vmm_bp_use_int3(f.vm, gpa), 0);
	f.vcpu.int3_applied = true; /* what vcpu_debug_update applied before KVM_RUN */
	vmm_bp_arm(f.vm, 1u << 2, true, NULL);
	ASSERT_EQ_INT(bp_exit(&f, SITE2), 0);
	ASSERT_EQ_INT(hits, 1);
	ASSERT_EQ_INT(hit_slot, 2);
	ASSERT_EQ_U64(hit_pc, SITE2);
	ASSERT_EQ_INT(vmm_bp_step(&f.vcpu), -ENOTSUP);
	ASSERT_EQ_INT(bp_exit(&f, SITE1), 0);
	ASSERT_EQ_INT(hits, 1);
	ASSERT_EQ_U64(f.vcpu.c.int3_stale, 1);
	ASSERT_TRUE(!f.vcpu.inject_bp);
	ASSERT_EQ_INT(bp_exit(&f, 0xffffffff81234567ull), 0);
	ASSERT_EQ_INT(hits, 1);
	ASSERT_EQ_U64(f.vcpu.c.int3_guest, 1);
	ASSERT_TRUE(f.vcpu.inject_bp);
	teardown(&f);
	return TEST_OK;
}

/* What vmm_bp_use_int3 refuses, leaving RAM and the mode as they were. */
static int test_refusals(void)
{
	struct fixture f;
	const uint64_t outside[VMM_BP_SLOTS] = { 0, GPA1, 2u << 20, 0 };
	const uint64_t gpa[VMM_BP_SLOTS] = { 0, GPA1, GPA2, 0 };

	ASSERT_EQ_INT(setup(&f), 0);
	vmm_bp_arm(f.vm, 1u << 1, true, NULL);
	ASSERT_EQ_INT(vmm_bp_use_int3(f.vm, outside), -EFAULT);
	f.ram[GPA2] = 0xcc;
	ASSERT_EQ_INT(vmm_bp_use_int3(f.vm, gpa), -EBADMSG);
	f.ram[GPA2] = SYSRETQ0;
	f.vm->is_pvm = true;
	ASSERT_EQ_INT(vmm_bp_use_int3(f.vm, gpa), -ENOTSUP);
	ASSERT_TRUE(!vmm_bp_int3(f.vm));
	ASSERT_EQ_INT(f.ram[GPA1], SYSRETQ0);
	f.vm->is_pvm = false;
	ASSERT_EQ_INT(vmm_bp_use_int3(f.vm, gpa), 0);
	ASSERT_EQ_INT(vmm_bp_use_int3(f.vm, gpa), -EALREADY);
	ASSERT_EQ_INT(vmm_bp_use_int3(f.vm, NULL), -EINVAL);
	teardown(&f);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "INT3 bytes follow the armed slots and are put back", test_bytes },
	{ "#BP exits: the rider's, a stale one, the guest's own", test_exits },
	{ "vmm_bp_use_int3 refusals", test_refusals },
};

TEST_MAIN(tests)
