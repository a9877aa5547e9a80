// SPDX-License-Identifier: MIT
// An emulation failure hvprof does not handle ends the run as an error whose message carries the
// instruction bytes (from KVM when it gives them, else "unreadable"), over a hand-filled
// struct kvm_run: no /dev/kvm needed.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "vmm_internal.h"

struct emu_case {
	const char *name;
	int kvm_gives_bytes;
	uint8_t bytes[4];
	unsigned int n;
	const char *want; /* in the end message */
};

static const struct emu_case cases[] = {
	{ "bytes from KVM (ud2-like 0f 0b)", 1, { 0x0f, 0x0b, 0x90, 0x90 }, 4,
	  "at RIP 0xffffffff81234567 (bytes: 0f 0b 90 90 )" },
	{ "no bytes from KVM, registers unreadable", 0, { 0 }, 0, "(bytes: unreadable)" },
};

static int run_case(const struct emu_case *c)
{
	struct vmm *vm = calloc(1, sizeof(*vm));
	struct kvm_run run;
	struct vmm_vcpu vcpu;
	int ret = TEST_FAIL;

	if (!vm)
		return TEST_FAIL;
	pthread_mutex_init(&vm->end_lock, NULL);
	memset(&vcpu, 0, sizeof(vcpu));
	memset(&run, 0, sizeof(run));
	vcpu.vm = vm;
	vcpu.run = &run;
	vcpu.fd = -1;              /* any ioctl fails: only what is cached or in kvm_run is used */
	vcpu.regs_valid = true;    /* the registers KVM_GET_REGS would have returned */
	vcpu.regs.rip = 0xffffffff81234567ull;
	run.exit_reason = KVM_EXIT_INTERNAL_ERROR;
	run.internal.suberror = KVM_INTERNAL_ERROR_EMULATION;
	if (c->kvm_gives_bytes) {
		run.emulation_failure.ndata = 3;
		run.emulation_failure.flags = KVM_INTERNAL_ERROR_EMULATION_FLAG_INSTRUCTION_BYTES;
		run.emulation_failure.insn_size = (uint8_t)c->n;
		memcpy(run.emulation_failure.insn_bytes, c->bytes, c->n);
	}
	if (exit_handle(&vcpu, false) != 1) {
		fprintf(stderr, "%s: the run goes on\n", c->name);
		goto out;
	}
	printf("%s: %s\n", c->name, vm->end_message);
	if (atomic_load(&vm->stop_reason) != HVP_END_ERROR || !strstr(vm->end_message, c->want)) {
		fprintf(stderr, "%s: reason %d, message '%s', want '%s'\n", c->name,
			atomic_load(&vm->stop_reason), vm->end_message, c->want);
		goto out;
	}
	ret = TEST_OK;
out:
	pthread_mutex_destroy(&vm->end_lock);
	free(vm);
	return ret;
}

static int test_emulation_failure(void)
{
	int failed = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		failed |= run_case(&cases[i]) != TEST_OK;
	return failed ? TEST_FAIL : TEST_OK;
}

static const struct test_case tests[] = {
	{ "unsupported emulation failure: error with the instruction bytes", test_emulation_failure },
};

TEST_MAIN(tests)
