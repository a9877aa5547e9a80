// SPDX-License-Identifier: MIT
// Unit tests of vmm/ pieces that need no /dev/kvm: the 16550A model, exit dispatch over a
// hand-filled struct kvm_run, the MP table, bzImage header parsing, the initramfs appender.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "smaps.h"
#include "test.h"
#include "vmm_internal.h"

static int irq_level = -1;

static void record_irq(void *ctx, unsigned int irq, int level)
{
	(void)ctx;
	(void)irq;
	irq_level = level;
}

static int test_serial_tx_and_thri(void)
{
	struct serial8250 s;
	int fds[2];
	uint8_t v;
	char out[8] = "";

	ASSERT_TRUE(pipe(fds) == 0);
	serial_init(&s, SERIAL_COM1_IRQ, fds[1], record_irq, NULL);
	v = 0x08; /* MCR.OUT2: the IRQ line is connected */
	serial_io(&s, 4, true, &v);
	v = 0x02; /* IER.THRI */
	serial_io(&s, 1, true, &v);
	ASSERT_EQ_INT(irq_level, 1); /* THR is empty: THRE interrupt pending */
	serial_io(&s, 2, false, &v);
	ASSERT_EQ_INT(v & 0x0f, 0x02); /* IIR says THRE */
	ASSERT_EQ_INT(irq_level, 0);   /* reading IIR cleared it */
	v = 'h';
	serial_io(&s, 0, true, &v);
	v = 'i';
	serial_io(&s, 0, true, &v);
	ASSERT_EQ_INT(irq_level, 1);
	serial_io(&s, 5, false, &v);
	ASSERT_EQ_INT(v & 0x60, 0x60); /* LSR: THRE and TEMT */
	ASSERT_EQ_INT(read(fds[0], out, sizeof(out)), 2);
	ASSERT_TRUE(memcmp(out, "hi", 2) == 0);
	close(fds[0]);
	close(fds[1]);
	return TEST_OK;
}

static int test_serial_loopback_and_dlab(void)
{
	struct serial8250 s;
	uint8_t v;

	serial_init(&s, SERIAL_COM1_IRQ, -1, NULL, NULL);
	v = 0x10 | 0x0a; /* loopback, RTS, OUT2 */
	serial_io(&s, 4, true, &v);
	serial_io(&s, 6, false, &v);
	ASSERT_EQ_INT(v & 0xf0, 0x90); /* CTS and DCD mirror RTS and OUT2 (8250 autoconfig test) */
	v = 0x80;
	serial_io(&s, 3, true, &v); /* DLAB */
	v = 0x01;
	serial_io(&s, 0, true, &v); /* divisor latch, not transmitted */
	serial_io(&s, 0, false, &v);
	ASSERT_EQ_INT(v, 0x01);
	return TEST_OK;
}

static struct vmm *fake_vm(void)
{
	struct vmm *vm = calloc(1, sizeof(*vm));

	pthread_mutex_init(&vm->end_lock, NULL);
	serial_init(&vm->com1, SERIAL_COM1_IRQ, -1, NULL, NULL);
	return vm;
}

struct mmio_case {
	const char *name;
	uint64_t gpa;
	uint32_t value;
	uint32_t len;
	int want_ret;
	int want_reason;
	int want_status;
};

static const struct mmio_case mmio_cases[] = {
	{ "exit register, status 0", VMM_EXIT_REG_GPA, 0x48560000, 4, 1, HVP_END_EXIT_DEVICE, 0 },
	{ "exit register, status 42", VMM_EXIT_REG_GPA, 0x4856002a, 4, 1, HVP_END_EXIT_DEVICE, 42 },
	{ "exit register, wrong magic", VMM_EXIT_REG_GPA, 0x1234002a, 4, 0, 0, 0 },
	{ "exit register, 1-byte write", VMM_EXIT_REG_GPA, 0x48560001, 1, 0, 0, 0 },
	{ "unknown MMIO", 0xe0000000, 0x48560000, 4, 0, 0, 0 },
};

static int test_exit_mmio_table(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(mmio_cases); i++) {
		const struct mmio_case *c = &mmio_cases[i];
		struct vmm *vm = fake_vm();
		struct vmm_vcpu vcpu = { .vm = vm };
		struct kvm_run run;
		int ret;

		memset(&run, 0, sizeof(run));
		run.exit_reason = KVM_EXIT_MMIO;
		run.mmio.phys_addr = c->gpa;
		run.mmio.is_write = 1;
		run.mmio.len = c->len;
		memcpy(run.mmio.data, &c->value, 4);
		ret = exit_mmio(vm, &vcpu, &run);
		if (ret != c->want_ret || atomic_load(&vm->stop_reason) != c->want_reason ||
		    (c->want_reason && vm->exit_status != c->want_status)) {
			fprintf(stderr, "case '%s': ret %d reason %d status %d\n", c->name, ret,
				atomic_load(&vm->stop_reason), vm->exit_status);
			free(vm);
			return TEST_FAIL;
		}
		if (!c->want_ret)
			ASSERT_EQ_U64(vcpu.c.mmio_unhandled, 1);
		free(vm);
	}
	return TEST_OK;
}

static int test_exit_io(void)
{
	struct vmm *vm = fake_vm();
	struct vmm_vcpu vcpu = { .vm = vm };
	struct {
		struct kvm_run run;
		uint8_t data[16];
	} r;

	/* an absent port reads as all ones and is counted */
	memset(&r, 0, sizeof(r));
	r.run.io.direction = KVM_EXIT_IO_IN;
	r.run.io.size = 1;
	r.run.io.count = 1;
	r.run.io.port = 0x2f8;
	r.run.io.data_offset = sizeof(struct kvm_run);
	ASSERT_EQ_INT(exit_io(vm, &vcpu, &r.run), 0);
	ASSERT_EQ_INT(r.data[0], 0xff);
	ASSERT_EQ_U64(vcpu.c.io_unhandled, 1);
	/* the 8042 reset command ends the run as a reset */
	r.run.io.direction = KVM_EXIT_IO_OUT;
	r.run.io.port = 0x64;
	r.data[0] = 0xfe;
	ASSERT_EQ_INT(exit_io(vm, &vcpu, &r.run), 1);
	ASSERT_EQ_INT(atomic_load(&vm->stop_reason), HVP_END_RESET);
	free(vm);
	return TEST_OK;
}

static int n_overflow;

static int count_overflow(void *ctx, struct vmm_vcpu *v)
{
	(void)ctx;
	(void)v;
	n_overflow++;
	return 0;
}

/* An interrupted KVM_RUN samples only when the counter's overflow signal arrived: a kick (another
 * vCPU arming its breakpoints) is no sample (issue 12: it biased multi-vCPU profiles). */
static int test_kick_is_no_sample(void)
{
	struct vmm *vm = fake_vm();
	struct kvm_run run;
	struct vmm_vcpu vcpu = { .vm = vm, .run = &run, .fd = -1 };

	memset(&run, 0, sizeof(run));
	vm->hooks.overflow = count_overflow;
	n_overflow = 0;
	run.exit_reason = KVM_EXIT_INTR;
	ASSERT_EQ_INT(exit_handle(&vcpu, false), 0);
	ASSERT_EQ_INT(n_overflow, 0);
	ASSERT_EQ_U64(vcpu.c.exits_intr, 1);
	ASSERT_EQ_U64(vcpu.c.exits_overflow, 0);
	ASSERT_EQ_INT(exit_handle(&vcpu, true), 0);
	ASSERT_EQ_INT(n_overflow, 1);
	ASSERT_EQ_U64(vcpu.c.exits_overflow, 1);
	/* once the run ends, an overflow is not sampled either */
	atomic_store(&vm->stop_reason, HVP_END_SIGNAL);
	ASSERT_EQ_INT(exit_handle(&vcpu, true), 1);
	ASSERT_EQ_INT(n_overflow, 1);
	free(vm);
	return TEST_OK;
}

/* What the guest_event and kick hooks were told. */
static struct {
	int calls, kicks;
	uint32_t kind, value;
	uint64_t time_ns;
	int ret;
} ev_seen;

static int record_event(void *ctx, struct vmm_vcpu *v, uint32_t kind, uint32_t value,
			uint64_t time_ns)
{
	(void)ctx;
	(void)v;
	ev_seen.calls++;
	ev_seen.kind = kind;
	ev_seen.value = value;
	ev_seen.time_ns = time_ns;
	return ev_seen.ret;
}

static void record_kick(void *ctx, struct vmm_vcpu *v)
{
	(void)ctx;
	(void)v;
	ev_seen.kicks++;
}

struct event_case {
	const char *name;
	uint32_t value;
	uint32_t len;
	int hook_ret;       /* what the rider's hook returns */
	int want_ret;       /* exit_mmio's return */
	int want_calls;     /* hook calls */
	uint32_t want_kind, want_value;
	uint64_t want_events, want_unhandled;
};

/* docs/guest-interface.md, "Events": 0x4845KKVV is event KK with value VV; the run goes on. */
static const struct event_case event_cases[] = {
	{ "init started", 0x48450100, 4, 0, 0, 1, 1, 0, 1, 0 },
	{ "workload start", 0x48450200, 4, 0, 0, 1, 2, 0, 1, 0 },
	{ "workload end, status 42", 0x4845032a, 4, 0, 0, 1, 3, 42, 1, 0 },
	{ "workload end, status 255", 0x484503ff, 4, 0, 0, 1, 3, 255, 1, 0 },
	{ "an unnamed kind is passed on", 0x4845c807, 4, 0, 0, 1, 200, 7, 1, 0 },
	{ "kind 0 is no event", 0x48450005, 4, 0, 0, 0, 0, 0, 0, 1 },
	{ "a 2-byte write is no event", 0x48450100, 2, 0, 0, 0, 0, 0, 0, 1 },
	{ "the rider ends the run at the event", 0x48450200, 4, 1, 1, 1, 2, 0, 1, 0 },
};

static int test_exit_reg_events(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(event_cases); i++) {
		const struct event_case *c = &event_cases[i];
		struct vmm *vm = fake_vm();
		struct vmm_vcpu vcpu = { .vm = vm };
		struct kvm_run run;
		int ret;

		memset(&ev_seen, 0, sizeof(ev_seen));
		ev_seen.ret = c->hook_ret;
		vm->hooks.guest_event = record_event;
		vm->t_start_ns = vmm_now_ns() - 5000000000ull; /* the run started 5 s ago */
		memset(&run, 0, sizeof(run));
		run.exit_reason = KVM_EXIT_MMIO;
		run.mmio.phys_addr = VMM_EXIT_REG_GPA;
		run.mmio.is_write = 1;
		run.mmio.len = c->len;
		memcpy(run.mmio.data, &c->value, 4);
		ret = exit_mmio(vm, &vcpu, &run);
		if (ret != c->want_ret || ev_seen.calls != c->want_calls ||
		    (c->want_calls && (ev_seen.kind != c->want_kind ||
				       ev_seen.value != c->want_value ||
				       ev_seen.time_ns < 5000000000ull ||
				       ev_seen.time_ns > 65000000000ull)) ||
		    vcpu.c.guest_events != c->want_events ||
		    vcpu.c.mmio_unhandled != c->want_unhandled ||
		    atomic_load(&vm->stop_reason) != 0) {
			fprintf(stderr,
				"case '%s': ret %d calls %d kind %u value %u time %llu events %llu "
				"unhandled %llu\n",
				c->name, ret, ev_seen.calls, ev_seen.kind, ev_seen.value,
				(unsigned long long)ev_seen.time_ns,
				(unsigned long long)vcpu.c.guest_events,
				(unsigned long long)vcpu.c.mmio_unhandled);
			free(vm);
			return TEST_FAIL;
		}
		free(vm);
	}
	return TEST_OK;
}

/* Without a rider an event is only counted; the exit status still ends the run after events. */
static int test_exit_reg_event_then_exit(void)
{
	struct vmm *vm = fake_vm();
	struct vmm_vcpu vcpu = { .vm = vm };
	struct kvm_run run;
	uint32_t v = 0x48450307;

	memset(&run, 0, sizeof(run));
	run.exit_reason = KVM_EXIT_MMIO;
	run.mmio.phys_addr = VMM_EXIT_REG_GPA;
	run.mmio.is_write = 1;
	run.mmio.len = 4;
	memcpy(run.mmio.data, &v, 4);
	ASSERT_EQ_INT(exit_mmio(vm, &vcpu, &run), 0);
	ASSERT_EQ_U64(vcpu.c.guest_events, 1);
	ASSERT_EQ_INT(atomic_load(&vm->stop_reason), 0);
	v = 0x48560007;
	memcpy(run.mmio.data, &v, 4);
	ASSERT_EQ_INT(exit_mmio(vm, &vcpu, &run), 1);
	ASSERT_EQ_INT(atomic_load(&vm->stop_reason), HVP_END_EXIT_DEVICE);
	ASSERT_EQ_INT(vm->exit_status, 7);
	free(vm);
	return TEST_OK;
}

/* A kick calls the rider's kick hook (record --from arms the other vCPUs there); an overflow
 * does not. */
static int test_kick_hook(void)
{
	struct vmm *vm = fake_vm();
	struct kvm_run run;
	struct vmm_vcpu vcpu = { .vm = vm, .run = &run, .fd = -1 };

	memset(&run, 0, sizeof(run));
	memset(&ev_seen, 0, sizeof(ev_seen));
	vm->hooks.kick = record_kick;
	vm->hooks.overflow = count_overflow;
	run.exit_reason = KVM_EXIT_INTR;
	ASSERT_EQ_INT(exit_handle(&vcpu, false), 0);
	ASSERT_EQ_INT(ev_seen.kicks, 1);
	ASSERT_EQ_INT(exit_handle(&vcpu, true), 0);
	ASSERT_EQ_INT(ev_seen.kicks, 1);
	free(vm);
	return TEST_OK;
}

/* Registers that cannot be written back end the run (not only the vCPU's thread). */
static int test_set_regs_failure_ends_run(void)
{
	struct vmm *vm = fake_vm();
	struct kvm_run run;
	struct vmm_vcpu vcpu = { .vm = vm, .run = &run, .fd = -1 };
	sigset_t block;

	memset(&run, 0, sizeof(run));
	sigemptyset(&block);
	vcpu.regs_dirty = true; /* KVM_SET_REGS on fd -1 fails with EBADF */
	ASSERT_EQ_INT(vcpu_loop_once(&vcpu, &block), 1);
	ASSERT_EQ_INT(atomic_load(&vm->stop_reason), HVP_END_ERROR);
	ASSERT_TRUE(strstr(vm->end_message, "cannot write its registers back") != NULL);
	free(vm);
	vm = fake_vm();
	vcpu = (struct vmm_vcpu){ .vm = vm, .run = &run, .fd = -1, .sregs_dirty = true };
	ASSERT_EQ_INT(vcpu_loop_once(&vcpu, &block), 1);
	ASSERT_EQ_INT(atomic_load(&vm->stop_reason), HVP_END_ERROR);
	free(vm);
	return TEST_OK;
}

struct cmdline_case {
	const char *in;
	unsigned int cpus;
	bool pvm;
	const char *added;
};

#define CLEAR "clearcpuid=erms,fsrm,popcnt,smap,smep,avx,avx2,pku,rdrand,rdseed,pcid,invpcid"

static const struct cmdline_case cmdline_cases[] = {
	{ "console=ttyS0", 1, true,
	  "earlyprintk=serial,ttyS0 nolapic noxsave " CLEAR " tsc=reliable" },
	{ NULL, 2, true, "earlyprintk=serial,ttyS0 nolapic_timer noxsave " CLEAR " tsc=reliable" },
	{ "console=ttyS0", 1, false, "" },
	/* what the line decides already stays as it is, by key */
	{ "root=/dev/vda earlyprintk=vga nolapic_timer clearcpuid=avx tsc=unstable", 1, true,
	  "noxsave" },
	{ "noxsaveopt nolapic", 2, true, "earlyprintk=serial,ttyS0 noxsave " CLEAR " tsc=reliable" },
};

static int test_guest_cmdline(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(cmdline_cases); i++) {
		const struct cmdline_case *c = &cmdline_cases[i];
		char *out = NULL, *added = NULL, want[1024];

		ASSERT_EQ_INT(vmm_guest_cmdline(c->in, c->cpus, c->pvm, &out, &added), 0);
		snprintf(want, sizeof(want), "%s%s%s", c->in ? c->in : "",
			 c->in && *c->added ? " " : "", c->added);
		ASSERT_EQ_STR(added, c->added);
		ASSERT_EQ_STR(out, want);
		free(out);
		free(added);
	}
	return TEST_OK;
}

static uint8_t ram_buf[1 << 20];

static int test_mptable(void)
{
	struct vmm_ram ram = { .hva = ram_buf, .size = sizeof(ram_buf), .n_slots = 1,
			       .slots = { { .gpa = 0, .size = sizeof(ram_buf), .hva = ram_buf } } };
	uint8_t sum = 0;
	uint32_t table;
	uint16_t len;

	ASSERT_EQ_INT(mptable_write(&ram, VMM_MPTABLE_GPA, 4), 0);
	ASSERT_TRUE(memcmp(ram_buf + VMM_MPTABLE_GPA, "_MP_", 4) == 0);
	for (int i = 0; i < 16; i++)
		sum += ram_buf[VMM_MPTABLE_GPA + i];
	ASSERT_EQ_INT(sum, 0); /* floating pointer checksum */
	memcpy(&table, ram_buf + VMM_MPTABLE_GPA + 4, 4);
	ASSERT_TRUE(memcmp(ram_buf + table, "PCMP", 4) == 0);
	memcpy(&len, ram_buf + table + 4, 2);
	sum = 0;
	for (int i = 0; i < len; i++)
		sum += ram_buf[table + i];
	ASSERT_EQ_INT(sum, 0); /* configuration table checksum */
	ASSERT_EQ_INT(ram_buf[table + 44], 0);         /* first entry: a processor */
	ASSERT_EQ_INT(ram_buf[table + 44 + 3], 3);     /* enabled, bootstrap */
	ASSERT_EQ_INT(mptable_write(&ram, VMM_MPTABLE_GPA, 0), -EINVAL);
	ASSERT_EQ_INT(mptable_write(&ram, 0xffff0, 1), -ERANGE); /* does not fit in RAM */
	return TEST_OK;
}

static int test_bzimage_parse(void)
{
	static uint8_t img[0x2000];
	struct bzimage_info bi;

	memset(img, 0, sizeof(img));
	ASSERT_EQ_INT(bzimage_parse(img, sizeof(img), &bi), -EBADMSG);
	img[0x1fe] = 0x55;
	img[0x1ff] = 0xaa;
	memcpy(img + 0x202, "HdrS", 4);
	img[0x206] = 0x0f; /* protocol 2.15 */
	img[0x207] = 0x02;
	img[0x1f1] = 3;    /* setup sectors */
	img[0x236] = 0x01; /* XLF_KERNEL_64 */
	img[0x258] = 0x00; /* pref_address 0x1000000 */
	img[0x25b] = 0x01;
	ASSERT_EQ_INT(bzimage_parse(img, sizeof(img), &bi), 0);
	ASSERT_EQ_INT(bi.version, 0x020f);
	ASSERT_EQ_INT(bi.payload_off, 4 * 512);
	ASSERT_EQ_U64(bi.pref_address, 0x1000000);
	img[0x236] = 0; /* no 64-bit entry */
	ASSERT_EQ_INT(bzimage_parse(img, sizeof(img), &bi), -ENOTSUP);
	img[0x236] = 1;
	img[0x206] = 0x0b; /* protocol 2.11: too old */
	ASSERT_EQ_INT(bzimage_parse(img, sizeof(img), &bi), -ENOTSUP);
	img[0x206] = 0x0f;
	img[0x1f1] = 200; /* payload beyond the file */
	ASSERT_EQ_INT(bzimage_parse(img, sizeof(img), &bi), -EBADMSG);
	ASSERT_EQ_INT(bzimage_parse(img, 0x100, &bi), -EBADMSG);
	return TEST_OK;
}

static int test_initramfs_append(void)
{
	char path[] = "/tmp/hvprof-initramfs-XXXXXX";
	int fd = mkstemp(path);
	struct vmm_initramfs_file f[1] = { { path, "/opt/tool/bin/mybench" } };
	struct vmm_initramfs_file bad[1] = { { path, "relative/path" } };
	void *buf = malloc(3);
	size_t len = 3;

	ASSERT_TRUE(fd >= 0 && buf);
	ASSERT_EQ_INT(write(fd, "payload!", 8), 8);
	close(fd);
	memcpy(buf, "abc", 3);
	ASSERT_EQ_INT(vmm_initramfs_append(&buf, &len, f, 1), 0);
	/* the original bytes stay, then zero padding to 4 bytes, then a newc archive */
	ASSERT_TRUE(memcmp(buf, "abc\0", 4) == 0);
	ASSERT_TRUE(memcmp((char *)buf + 4, "070701", 6) == 0);
	ASSERT_TRUE(memmem(buf, len, "opt/tool/bin/mybench", 20) != NULL);
	ASSERT_TRUE(memmem(buf, len, "opt/tool\0", 9) != NULL); /* parent directories */
	ASSERT_TRUE(memmem(buf, len, "payload!", 8) != NULL);
	ASSERT_TRUE(memmem(buf, len, "TRAILER!!!", 10) != NULL);
	ASSERT_EQ_INT(vmm_initramfs_append(&buf, &len, bad, 1), -EINVAL);
	unlink(path);
	ASSERT_EQ_INT(vmm_initramfs_append(&buf, &len, f, 1), -ENOENT);
	free(buf);
	return TEST_OK;
}

/* A thread that waits (up to 2 s) for the kick signal, which it has blocked. */
static void *wait_kick(void *arg)
{
	const struct timespec two_s = { 2, 0 };
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, vmm_sig_kick);
	*(int *)arg = sigtimedwait(&set, NULL, &two_s);
	return NULL;
}

/* Kicks against thread start and join: a kick before the thread is marked started is kept in
 * kick_pending (its next KVM_RUN ends at once), a started thread gets the signal, and once the
 * joiner cleared thread_started no kick signals the (joined, dead) thread ID. */
static int test_kick_start_and_join(void)
{
	struct vmm *vm = fake_vm();
	struct vmm_vcpu *v;
	sigset_t set, old;
	int got = 0;

	vm->n_vcpus = 1;
	vm->vcpus = calloc(1, sizeof(*vm->vcpus));
	pthread_mutex_init(&vm->kick_lock, NULL);
	v = &vm->vcpus[0];
	vmm_sig_kick = SIGRTMIN + 2;
	vmm_kick_vcpu(vm, 0); /* before the thread exists: remembered, no signal */
	ASSERT_TRUE(atomic_load(&v->kick_pending));
	atomic_store(&v->kick_pending, false);
	sigemptyset(&set);
	sigaddset(&set, vmm_sig_kick);
	pthread_sigmask(SIG_BLOCK, &set, &old); /* inherited: the thread takes it synchronously */
	ASSERT_EQ_INT(pthread_create(&v->thread, NULL, wait_kick, &got), 0);
	pthread_mutex_lock(&vm->kick_lock);
	atomic_store(&v->thread_started, true);
	pthread_mutex_unlock(&vm->kick_lock);
	vmm_kick_vcpu(vm, 0);
	/* as vmm_run joins: cleared under the lock, then joined */
	pthread_mutex_lock(&vm->kick_lock);
	ASSERT_TRUE(atomic_exchange(&v->thread_started, false));
	pthread_mutex_unlock(&vm->kick_lock);
	pthread_join(v->thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	ASSERT_EQ_INT(got, vmm_sig_kick);
	vmm_kick_vcpu(vm, 0); /* joined: only the flag (a pthread_kill here would be UB) */
	ASSERT_TRUE(atomic_load(&v->kick_pending));
	vmm_kick_vcpu(vm, 7); /* not a vCPU */
	pthread_mutex_destroy(&vm->kick_lock);
	free(vm->vcpus);
	free(vm);
	return TEST_OK;
}

static int n_debug, last_repeat, last_step, last_slot;

/* The rider's part of a breakpoint hit: note it, then resume with RF as trap.c does (where RF
 * is ignored, -ENOTSUP, trap.c completes the instruction instead). */
static int step_debug(void *ctx, struct vmm_vcpu *v, int slot, uint64_t pc, bool repeat)
{
	(void)ctx;
	(void)pc;
	n_debug++;
	last_slot = slot;
	last_repeat = repeat;
	last_step = vmm_bp_step(v);
	return last_step == 0 || last_step == -ENOTSUP ? 0 : 1;
}

/* One breakpoint exit at @pc with the guest's @rsp and @rflags, as after a KVM_RUN (sync regs
 * filled, nothing cached or dirty). */
static int bp_exit(struct vmm_vcpu *vcpu, uint64_t pc, uint64_t rsp, uint64_t rflags)
{
	vcpu->regs_valid = vcpu->sregs_valid = vcpu->regs_dirty = vcpu->regs_ioctl = false;
	vcpu->sync_filled = true;
	memset(&vcpu->run->s.regs.regs, 0, sizeof(vcpu->run->s.regs.regs));
	vcpu->run->s.regs.regs.rip = pc;
	vcpu->run->s.regs.regs.rsp = rsp;
	vcpu->run->s.regs.regs.rflags = rflags;
	vcpu->run->exit_reason = KVM_EXIT_DEBUG;
	vcpu->run->debug.arch.pc = pc;
	return debug_exit(vcpu);
}

/*
 * Whether RFLAGS.RF stepped over a breakpoint (debug.c): the same breakpoint again at the same
 * RSP with no other exit between. On VMX/SVM that is also a new hit (a system call loop reaches
 * sysretq again with the same user RSP and no exit: none was seen as RF ignored, and every
 * later hit paid a completion); the CPU clears RF once the instruction ran, so RF clear there
 * means RF worked. Only RF still set is a failure. On PVM the old rule stands.
 */
static int test_rf_probe(void)
{
	const uint64_t pc = 0xffffffff81a00010ull, rsp = 0x7ffd0000f000ull, rf = 1ull << 16;
	struct kvm_run run;

	for (int pvm = 0; pvm <= 1; pvm++) {
		struct vmm *vm = fake_vm();
		struct vmm_vcpu vcpu = { .vm = vm, .run = &run, .fd = -1 };

		memset(&run, 0, sizeof(run));
		vm->sync_regs = true;
		vm->is_pvm = pvm;
		vm->hooks.debug = step_debug;
		atomic_store(&vm->bp_addr[1], pc);
		vcpu.bp_mask_applied = 1u << 1;
		n_debug = 0;
		/* a hit, resumed with RF */
		ASSERT_EQ_INT(bp_exit(&vcpu, pc, rsp, 0x202), 0);
		ASSERT_EQ_INT(n_debug, 1);
		ASSERT_EQ_INT(last_repeat, 0);
		ASSERT_TRUE(vcpu.regs_dirty && (vcpu.regs.rflags & rf));
		/* the same place again, RF clear: a new hit on VMX/SVM, a failure on PVM */
		ASSERT_EQ_INT(bp_exit(&vcpu, pc, rsp, 0x202), 0);
		ASSERT_EQ_INT(last_repeat, pvm);
		ASSERT_EQ_INT(atomic_load(&vm->rf), pvm ? VMM_RF_IGNORED : VMM_RF_WORKS);
		ASSERT_EQ_INT(last_step, pvm ? -ENOTSUP : 0);
		if (!pvm) {
			/* the same place with RF still set: RF did not step over it */
			ASSERT_EQ_INT(bp_exit(&vcpu, pc, rsp, 0x202 | rf), 0);
			ASSERT_EQ_INT(last_repeat, 1);
			ASSERT_EQ_INT(atomic_load(&vm->rf), VMM_RF_IGNORED);
			ASSERT_EQ_INT(last_step, -ENOTSUP);
		}
		free(vm);
	}
	return TEST_OK;
}

/*
 * The breakpoint slots riders get: on PVM 1..3 (slot 0 is the SYSCALL fix-up's), elsewhere all
 * four (Debian's 6.12 needs them: sysretq, iretq and each exit path's copy of the exit-work
 * loop); a debug exit on slot 0 goes to the rider there, to the fix-up only on PVM.
 */
static int test_bp_slots(void)
{
	const uint64_t pc = 0xffffffff81a00010ull;
	struct kvm_run run;

	for (int pvm = 0; pvm <= 1; pvm++) {
		struct vmm *vm = fake_vm();
		struct vmm_vcpu vcpu = { .vm = vm, .run = &run, .fd = -1 };

		vm->is_pvm = pvm;
		ASSERT_EQ_INT((int)vmm_bp_free_slots(vm), pvm ? 3 : 4);
		for (int want = pvm; want < VMM_BP_SLOTS; want++) {
			ASSERT_EQ_INT(vmm_bp_alloc(vm), want);
			ASSERT_EQ_INT((int)vmm_bp_free_slots(vm), VMM_BP_SLOTS - want - 1);
		}
		ASSERT_EQ_INT(vmm_bp_alloc(vm), -ENOSPC);
		if (!pvm) {
			memset(&run, 0, sizeof(run));
			vm->sync_regs = true;
			vm->hooks.debug = step_debug;
			vmm_bp_set_addr(vm, 0, pc);
			vcpu.bp_mask_applied = 1u << 0;
			n_debug = 0;
			ASSERT_EQ_INT(bp_exit(&vcpu, pc, 0x7ffd0000f000ull, 0x202), 0);
			ASSERT_EQ_INT(n_debug, 1);
			ASSERT_EQ_INT(last_slot, 0);
		}
		free(vm);
	}
	return TEST_OK;
}

/* Guest RAM: one mapping at a 2 MiB-aligned start (KVM maps a guest range huge only where host
 * and guest addresses agree modulo 2 MiB), marked MADV_HUGEPAGE where the kernel has THP and
 * MADV_MERGEABLE where it has KSM; below the 32-bit MMIO hole, one slot of the whole size. */
static int test_ram_mapping(void)
{
	struct vmm_ram ram;
	char head[512], flags[512];
	long kb;

	ASSERT_EQ_INT(ram_create(&ram, 256ull << 20), 0);
	ASSERT_EQ_U64((uintptr_t)ram.hva & ((2u << 20) - 1), 0);
	ASSERT_EQ_INT(ram.n_slots, 1);
	ASSERT_TRUE(ram.slots[0].hva == ram.hva && ram.slots[0].size == 256ull << 20);
	ASSERT_EQ_INT(test_smaps_of(ram.hva, head, sizeof(head), flags, sizeof(flags), &kb), 0);
	if (test_thp_built())
		ASSERT_TRUE(test_vm_flag(flags, "hg"));
	if (access("/sys/kernel/mm/ksm", F_OK) == 0)
		ASSERT_TRUE(test_vm_flag(flags, "mg"));
	ram.hva[(256u << 20) - 1] = 1; /* the whole size is there */
	ram_destroy(&ram);
	ASSERT_TRUE(ram.hva == NULL);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "serial: transmit and THRE interrupt", test_serial_tx_and_thri },
	{ "serial: loopback MSR and divisor latch", test_serial_loopback_and_dlab },
	{ "exit: MMIO table (exit register)", test_exit_mmio_table },
	{ "exit: I/O ports (absent port, 8042 reset)", test_exit_io },
	{ "exit: a kick interrupts KVM_RUN without a sample", test_kick_is_no_sample },
	{ "exit register: events (protocol version 1)", test_exit_reg_events },
	{ "exit register: an event, then the exit status", test_exit_reg_event_then_exit },
	{ "exit: a kick calls the kick hook, an overflow does not", test_kick_hook },
	{ "run loop: a failed register write-back ends the run", test_set_regs_failure_ends_run },
	{ "PVM host: the command-line words a guest needs, added by key", test_guest_cmdline },
	{ "mptable: checksums and entries", test_mptable },
	{ "boot: bzImage setup header", test_bzimage_parse },
	{ "initramfs: append a newc archive", test_initramfs_append },
	{ "kick: before the thread starts, while it runs, after it is joined",
	  test_kick_start_and_join },
	{ "breakpoints: RF seen to work or not (same place again: RF still set?)",
	  test_rf_probe },
	{ "breakpoints: four slots for riders, three on PVM", test_bp_slots },
	{ "guest RAM: 2 MiB-aligned, MADV_HUGEPAGE and MADV_MERGEABLE", test_ram_mapping },
};

static void log_stderr(enum hvp_log_level level, const char *msg)
{
	(void)level;
	fprintf(stderr, "log: %s\n", msg);
}

int main(void)
{
	hvp_log_set_fn(log_stderr);
	return test_run_all(tests, ARRAY_SIZE(tests));
}
