// SPDX-License-Identifier: MIT
// Unit tests of the 16550A receive path and COM2, the command channel (vmm/devices/serial.c):
// buffer order and capacity, LSR.DR, RBR, IIR priority, the IRQ line against IER.RDI and
// MCR.OUT2, FIFO reset, loopback, COM2 through exit_io (absent without cmd_channel),
// vmm_cmd_send and the cmd_* counters, and what a seccomp-confined vCPU thread may do for it.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "test.h"
#include "vmm_internal.h"

/* UART registers (offsets from the base) and bits, as Linux's serial_reg.h names them */
enum { RBR = 0, THR = 0, IER = 1, IIR = 2, FCR = 2, LCR = 3, MCR = 4, LSR = 5, MSR = 6 };
#define IER_RDI 0x01
#define IER_THRI 0x02
#define MCR_OUT2 0x08
#define MCR_LOOP 0x10
#define LSR_DR 0x01

/* Every set_irq call: how many, and the last IRQ number and level. */
static struct {
	unsigned int calls;
	unsigned int irq;
	int level;
} line;

static void record_line(void *ctx, unsigned int irq, int level)
{
	(void)ctx;
	line.calls++;
	line.irq = irq;
	line.level = level;
}

static uint8_t rd(struct serial8250 *s, unsigned int off)
{
	uint8_t v = 0x5a;

	serial_io(s, off, false, &v);
	return v;
}

static void wr(struct serial8250 *s, unsigned int off, uint8_t v)
{
	serial_io(s, off, true, &v);
}

static int test_rx_order_dr_rbr(void)
{
	struct serial8250 s;

	serial_init(&s, SERIAL_COM2_IRQ, -1, NULL, NULL);
	ASSERT_EQ_INT(rd(&s, LSR), 0x60);           /* THRE | TEMT, no data */
	ASSERT_EQ_INT(serial_rx_push(&s, (const uint8_t *)"abc", 3), 3);
	ASSERT_EQ_INT(rd(&s, LSR), 0x61);           /* DR while the buffer holds data */
	ASSERT_EQ_INT(rd(&s, RBR), 'a');
	ASSERT_EQ_INT(rd(&s, LSR) & LSR_DR, 1);
	ASSERT_EQ_INT(rd(&s, RBR), 'b');
	ASSERT_EQ_INT(rd(&s, RBR), 'c');
	ASSERT_EQ_INT(rd(&s, LSR), 0x60);           /* empty again */
	ASSERT_EQ_INT(rd(&s, RBR), 0);              /* nothing received reads 0, pops nothing */
	ASSERT_EQ_U64(atomic_load(&s.rx_bytes), 3);
	/* DLAB: offset 0 is the divisor latch, and reading it pops nothing */
	ASSERT_EQ_INT(serial_rx_push(&s, (const uint8_t *)"z", 1), 1);
	wr(&s, LCR, 0x80);
	wr(&s, 0, 0x0c);
	ASSERT_EQ_INT(rd(&s, 0), 0x0c);
	wr(&s, LCR, 0x03);
	ASSERT_EQ_INT(rd(&s, RBR), 'z');
	return TEST_OK;
}

/* 4096 bytes at most; a full buffer takes nothing; the ring keeps order across its wrap. */
static int test_rx_capacity_and_wrap(void)
{
	static struct serial8250 s;
	static uint8_t in[5000];

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 7 + 1);
	serial_init(&s, SERIAL_COM2_IRQ, -1, NULL, NULL);
	ASSERT_EQ_INT(serial_rx_push(&s, in, sizeof(in)), 4096);
	ASSERT_EQ_INT(serial_rx_push(&s, in, 1), 0);
	for (size_t i = 0; i < 3000; i++)
		ASSERT_EQ_INT(rd(&s, RBR), in[i]);
	/* 1096 left: 3000 more fit, 3096 do not */
	ASSERT_EQ_INT(serial_rx_push(&s, in + 4096, 904), 904);
	ASSERT_EQ_INT(serial_rx_push(&s, in, 3000), 2096);
	for (size_t i = 3000; i < 5000; i++)
		ASSERT_EQ_INT(rd(&s, RBR), in[i]);
	for (size_t i = 0; i < 2096; i++)
		ASSERT_EQ_INT(rd(&s, RBR), in[i]);
	ASSERT_EQ_INT(rd(&s, LSR) & LSR_DR, 0);
	ASSERT_EQ_U64(atomic_load(&s.rx_bytes), 3000 + 2000 + 2096);
	return TEST_OK;
}

/* IIR: received data (0x4) before THRE (0x2); reading IIR clears only THRE. */
static int test_iir_priority(void)
{
	struct serial8250 s;

	serial_init(&s, SERIAL_COM2_IRQ, -1, NULL, NULL);
	wr(&s, FCR, 0x01);                          /* FIFO on: IIR bits 7:6 set */
	ASSERT_EQ_INT(rd(&s, IIR), 0xc1);
	wr(&s, IER, IER_RDI | IER_THRI);            /* THRE pending at once */
	ASSERT_EQ_INT(serial_rx_push(&s, (const uint8_t *)"xy", 2), 2);
	ASSERT_EQ_INT(rd(&s, IIR), 0xc4);
	ASSERT_EQ_INT(rd(&s, IIR), 0xc4);           /* still there: the data was not read */
	ASSERT_EQ_INT(rd(&s, RBR), 'x');
	ASSERT_EQ_INT(rd(&s, IIR), 0xc4);
	ASSERT_EQ_INT(rd(&s, RBR), 'y');
	ASSERT_EQ_INT(rd(&s, IIR), 0xc2);           /* THRE was kept behind RDA */
	ASSERT_EQ_INT(rd(&s, IIR), 0xc1);           /* ... and cleared by that read */
	/* data with RDI off does not interrupt */
	wr(&s, IER, IER_THRI);
	ASSERT_EQ_INT(serial_rx_push(&s, (const uint8_t *)"q", 1), 1);
	ASSERT_EQ_INT(rd(&s, IIR), 0xc1);
	ASSERT_EQ_INT(rd(&s, LSR) & LSR_DR, 1);     /* polled mode still sees it */
	return TEST_OK;
}

/* The line follows IER.RDI, MCR.OUT2 and the buffer, after guest accesses and host pushes. */
static int test_irq_line(void)
{
	struct serial8250 s;
	unsigned int calls;

	memset(&line, 0, sizeof(line));
	serial_init(&s, SERIAL_COM2_IRQ, -1, record_line, NULL);
	ASSERT_EQ_INT(serial_rx_push(&s, (const uint8_t *)"a", 1), 1);
	ASSERT_EQ_INT(line.calls, 1);               /* a push recomputes the line */
	ASSERT_EQ_INT(line.irq, 3);
	ASSERT_EQ_INT(line.level, 0);               /* IER.RDI off */
	wr(&s, IER, IER_RDI);
	ASSERT_EQ_INT(line.level, 0);               /* OUT2 off: not connected */
	wr(&s, MCR, MCR_OUT2);
	ASSERT_EQ_INT(line.level, 1);
	ASSERT_EQ_INT(line.irq, 3);
	wr(&s, MCR, 0);
	ASSERT_EQ_INT(line.level, 0);
	wr(&s, MCR, MCR_OUT2);
	ASSERT_EQ_INT(line.level, 1);
	wr(&s, IER, 0);
	ASSERT_EQ_INT(line.level, 0);
	wr(&s, IER, IER_RDI);
	ASSERT_EQ_INT(line.level, 1);
	ASSERT_EQ_INT(rd(&s, RBR), 'a');
	ASSERT_EQ_INT(line.level, 0);               /* drained */
	calls = line.calls;
	ASSERT_EQ_INT(serial_rx_push(&s, (const uint8_t *)"bc", 2), 2);
	ASSERT_EQ_INT(line.calls, calls + 1);
	ASSERT_EQ_INT(line.level, 1);               /* the host's push raises it */
	ASSERT_EQ_INT(rd(&s, RBR), 'b');
	ASSERT_EQ_INT(line.level, 1);               /* one byte left */
	ASSERT_EQ_INT(rd(&s, RBR), 'c');
	ASSERT_EQ_INT(line.level, 0);
	/* an empty push recomputes the line too */
	calls = line.calls;
	ASSERT_EQ_INT(serial_rx_push(&s, (const uint8_t *)"", 0), 0);
	ASSERT_EQ_INT(line.calls, calls + 1);
	ASSERT_EQ_INT(line.level, 0);
	return TEST_OK;
}

/* FCR.CLEAR_RCVR empties the buffer (Linux at open and close) and is counted; FIFO stays on. */
static int test_fifo_reset(void)
{
	struct serial8250 s;

	serial_init(&s, SERIAL_COM2_IRQ, -1, NULL, NULL);
	ASSERT_EQ_INT(serial_rx_push(&s, (const uint8_t *)"0123456789", 10), 10);
	ASSERT_EQ_INT(rd(&s, RBR), '0');
	wr(&s, FCR, 0x01 | 0x02 | 0x04);
	ASSERT_EQ_INT(rd(&s, LSR), 0x60);
	ASSERT_EQ_INT(rd(&s, IIR) & 0xc0, 0xc0);
	ASSERT_EQ_U64(atomic_load(&s.rx_flushed), 9);
	ASSERT_EQ_U64(atomic_load(&s.rx_bytes), 1);
	ASSERT_EQ_INT(serial_rx_push(&s, (const uint8_t *)"k", 1), 1);
	ASSERT_EQ_INT(rd(&s, RBR), 'k');            /* the ring restarted cleanly */
	return TEST_OK;
}

/* Loopback: MSR mirrors MCR as before; a transmitted byte is received, not written out. */
static int test_loopback(void)
{
	struct serial8250 s;
	int fds[2];
	char c;

	ASSERT_EQ_INT(pipe2(fds, O_NONBLOCK), 0);
	serial_init(&s, SERIAL_COM1_IRQ, fds[1], NULL, NULL);
	wr(&s, MCR, MCR_LOOP | 0x0a);               /* loopback, RTS, OUT2 */
	ASSERT_EQ_INT(rd(&s, MSR) & 0xf0, 0x90);    /* the 8250 autoconfig test */
	wr(&s, THR, 'L');
	ASSERT_EQ_INT(read(fds[0], &c, 1), -1);     /* nothing left the UART */
	ASSERT_EQ_INT(errno, EAGAIN);
	ASSERT_EQ_U64(atomic_load(&s.tx_bytes), 0);
	ASSERT_EQ_INT(rd(&s, LSR), 0x61);
	ASSERT_EQ_INT(rd(&s, RBR), 'L');
	wr(&s, MCR, 0x0b);                          /* loopback off: MSR is the line again */
	ASSERT_EQ_INT(rd(&s, MSR), 0xb0);
	wr(&s, THR, 'T');
	ASSERT_EQ_INT(read(fds[0], &c, 1), 1);
	ASSERT_EQ_INT(c, 'T');
	ASSERT_EQ_INT(rd(&s, LSR), 0x60);           /* a transmitted byte is not received */
	close(fds[0]);
	close(fds[1]);
	return TEST_OK;
}

/* A non-blocking out fd that is full drops the byte and counts it; a broken one too. */
static int test_tx_dropped(void)
{
	struct serial8250 s;
	char junk[4096];
	int fds[2];

	memset(junk, 'j', sizeof(junk));
	ASSERT_EQ_INT(pipe2(fds, O_NONBLOCK), 0);
	while (write(fds[1], junk, sizeof(junk)) > 0)
		;
	ASSERT_EQ_INT(errno, EAGAIN);
	serial_init(&s, SERIAL_COM2_IRQ, fds[1], NULL, NULL);
	wr(&s, THR, 'a');
	wr(&s, THR, 'b');
	ASSERT_EQ_U64(atomic_load(&s.tx_bytes), 2);
	ASSERT_EQ_U64(atomic_load(&s.tx_dropped), 2);
	/* room again (a pipe frees a whole page once it is read) */
	ASSERT_EQ_INT(read(fds[0], junk, sizeof(junk)), (int)sizeof(junk));
	wr(&s, THR, 'c');
	ASSERT_EQ_U64(atomic_load(&s.tx_bytes), 3);
	ASSERT_EQ_U64(atomic_load(&s.tx_dropped), 2);
	close(fds[0]);
	close(fds[1]);
	return TEST_OK;
}

static int irq_level = -1;

static void note_irq(void *ctx, unsigned int irq, int level)
{
	irq_level = level;
}

/* tx_hold (COM2): a full fd holds the bytes with THRE clear (no THRE interrupt) instead of
 * dropping them; serial_tx_flush, once the reader made room, writes them in order and raises
 * the THRE interrupt again. A guest that sends on past SERIAL_TX_CAP loses bytes, counted. */
static int test_tx_held(void)
{
	struct serial8250 s;
	char junk[4096], got[8];
	int fds[2];

	memset(junk, 'j', sizeof(junk));
	ASSERT_EQ_INT(pipe2(fds, O_NONBLOCK), 0);
	while (write(fds[1], junk, sizeof(junk)) > 0)
		;
	serial_init(&s, SERIAL_COM2_IRQ, fds[1], note_irq, NULL);
	serial_set_tx_hold(&s);
	wr(&s, MCR, 0x08);                 /* OUT2: the line is wired */
	wr(&s, IER, 0x02);                 /* THRI */
	ASSERT_EQ_INT(irq_level, 1);       /* THR empty */
	ASSERT_EQ_INT(rd(&s, IIR) & 0x0f, 0x02);
	ASSERT_EQ_INT(irq_level, 0);
	wr(&s, THR, 'a');
	wr(&s, THR, 'b');
	ASSERT_EQ_U64(atomic_load(&s.tx_dropped), 0);
	ASSERT_EQ_INT(rd(&s, LSR) & 0x60, 0); /* THRE and TEMT clear: the driver waits */
	ASSERT_EQ_INT(rd(&s, IIR) & 0x0f, 0x01);
	ASSERT_EQ_INT(irq_level, 0);
	ASSERT_EQ_U64(serial_tx_flush(&s), 2); /* still full */
	ASSERT_EQ_INT(read(fds[0], junk, sizeof(junk)), (int)sizeof(junk));
	ASSERT_EQ_U64(serial_tx_flush(&s), 0);
	ASSERT_EQ_INT(rd(&s, LSR) & 0x60, 0x60);
	ASSERT_EQ_INT(irq_level, 1);       /* send on */
	{
		ssize_t n, last = 0;

		while ((n = read(fds[0], junk, sizeof(junk))) > 0)
			last = n;
		ASSERT_TRUE(last >= 2 && !memcmp(junk + last - 2, "ab", 2)); /* in order, after */
	}
	wr(&s, THR, 'c');                  /* the fd takes it at once now */
	ASSERT_EQ_INT((int)read(fds[0], got, sizeof(got)), 1);
	ASSERT_EQ_INT(got[0], 'c');
	/* past the ring: lost, counted */
	while (write(fds[1], junk, sizeof(junk)) > 0)
		;
	for (int i = 0; i < SERIAL_TX_CAP + 3; i++)
		wr(&s, THR, 'x');
	ASSERT_EQ_U64(atomic_load(&s.tx_dropped), 3);
	close(fds[0]);
	close(fds[1]);
	return TEST_OK;
}

/* COM1's receive buffer stays empty: LSR.DR never set, RBR reads 0 (as before COM2). */
static int test_com1_no_rx(void)
{
	struct serial8250 s;

	serial_init(&s, SERIAL_COM1_IRQ, -1, NULL, NULL);
	wr(&s, IER, IER_RDI);
	wr(&s, MCR, MCR_OUT2);
	ASSERT_EQ_INT(rd(&s, LSR), 0x60);
	ASSERT_EQ_INT(rd(&s, RBR), 0);
	ASSERT_EQ_INT(rd(&s, IIR), 0x01);
	return TEST_OK;
}

static struct vmm *fake_vm(bool cmd_channel, int out_fd)
{
	struct vmm *vm = calloc(1, sizeof(*vm));

	if (!vm)
		return NULL;
	pthread_mutex_init(&vm->end_lock, NULL);
	vm->cfg.cmd_channel = cmd_channel;
	vm->cfg.cmd_out_fd = out_fd;
	serial_init(&vm->com1, SERIAL_COM1_IRQ, -1, record_line, vm);
	serial_init(&vm->com2, SERIAL_COM2_IRQ, cmd_channel ? out_fd : -1, record_line, vm);
	return vm;
}

struct io_exit {
	struct kvm_run run;
	uint8_t data[16];
};

/* One port access through exit_io; @count > 1 is a rep ins/outs of @count bytes. */
static int port_io(struct vmm *vm, struct vmm_vcpu *vcpu, struct io_exit *r, uint16_t port,
		   bool is_write, uint32_t count)
{
	memset(&r->run, 0, sizeof(r->run));
	r->run.exit_reason = KVM_EXIT_IO;
	r->run.io.direction = is_write ? KVM_EXIT_IO_OUT : KVM_EXIT_IO_IN;
	r->run.io.size = 1;
	r->run.io.count = count;
	r->run.io.port = port;
	r->run.io.data_offset = sizeof(struct kvm_run);
	return exit_io(vm, vcpu, &r->run);
}

/* Without cmd_channel every COM2 port floats (0xff: the 8250 probe's scratch and IER tests
 * fail), writes go nowhere, and the accesses count as unhandled; COM1 is unaffected. */
static int test_com2_absent(void)
{
	struct vmm *vm = fake_vm(false, -1);
	struct vmm_vcpu vcpu = { .vm = vm };
	struct io_exit r;

	ASSERT_TRUE(vm != NULL);
	for (uint16_t port = 0x2f8; port < 0x300; port++) {
		r.data[0] = 0;
		ASSERT_EQ_INT(port_io(vm, &vcpu, &r, port, false, 1), 0);
		ASSERT_EQ_INT(r.data[0], 0xff);
	}
	r.data[0] = 0x0f;
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x2f9, true, 1), 0); /* IER write */
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x2f9, false, 1), 0);
	ASSERT_EQ_INT(r.data[0], 0xff);
	ASSERT_EQ_U64(vcpu.c.io_unhandled, 10);
	ASSERT_EQ_INT(vmm_cmd_send(vm, "x", 1), -ENODEV);
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x3fd, false, 1), 0);
	ASSERT_EQ_INT(r.data[0], 0x60);             /* COM1's LSR */
	free(vm);
	return TEST_OK;
}

/* With cmd_channel: COM2 answers at 0x2f8, transmits to cmd_out_fd (rep outsb too), receives
 * what vmm_cmd_send queued, raises IRQ 3; the cmd_* counters add up. */
static int test_com2_channel(void)
{
	struct vmm *vm;
	struct vmm_vcpu vcpu;
	struct vmm_counters c;
	struct io_exit r;
	char out[8];
	int fds[2];

	ASSERT_EQ_INT(pipe2(fds, O_NONBLOCK), 0);
	vm = fake_vm(true, fds[1]);
	ASSERT_TRUE(vm != NULL);
	memset(&vcpu, 0, sizeof(vcpu));
	vcpu.vm = vm;
	memset(&line, 0, sizeof(line));
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x2fd, false, 1), 0);
	ASSERT_EQ_INT(r.data[0], 0x60);             /* LSR: a UART is there */
	r.data[0] = 0x0f;
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x2f9, true, 1), 0);
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x2f9, false, 1), 0);
	ASSERT_EQ_INT(r.data[0], 0x0f);             /* IER reads back (8250 autoconfig) */
	r.data[0] = IER_RDI;
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x2f9, true, 1), 0);
	r.data[0] = MCR_OUT2;
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x2fc, true, 1), 0);
	ASSERT_EQ_INT(line.irq, 3);
	ASSERT_EQ_INT(line.level, 0);
	memcpy(r.data, "ok\n", 3);
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x2f8, true, 3), 0); /* rep outsb */
	ASSERT_EQ_INT(read(fds[0], out, sizeof(out)), 3);
	ASSERT_TRUE(memcmp(out, "ok\n", 3) == 0);
	ASSERT_EQ_INT(vmm_cmd_send(vm, "run", 3), 3);
	ASSERT_EQ_INT(line.irq, 3);
	ASSERT_EQ_INT(line.level, 1);
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x2fa, false, 1), 0);
	ASSERT_EQ_INT(r.data[0], 0x04);             /* IIR: received data */
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x2f8, false, 2), 0); /* rep insb */
	ASSERT_TRUE(memcmp(r.data, "ru", 2) == 0);
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x2f8, false, 1), 0);
	ASSERT_EQ_INT(r.data[0], 'n');
	ASSERT_EQ_INT(line.level, 0);
	ASSERT_EQ_U64(vcpu.c.io_unhandled, 0);
	/* COM1 still answers beside it, on its own line */
	ASSERT_EQ_INT(port_io(vm, &vcpu, &r, 0x3fd, false, 1), 0);
	ASSERT_EQ_INT(r.data[0], 0x60);
	ASSERT_EQ_INT(line.irq, 4);
	vmm_get_counters(vm, &c);
	ASSERT_EQ_U64(c.cmd_rx_bytes, 3);
	ASSERT_EQ_U64(c.cmd_tx_bytes, 3);
	ASSERT_EQ_U64(c.cmd_tx_dropped, 0);
	ASSERT_EQ_U64(c.cmd_rx_flushed, 0);
	close(fds[0]);
	close(fds[1]);
	free(vm);
	return TEST_OK;
}

/* vmm_cmd_send's contract: -EINVAL, 0 for nothing, partial accept, 0 when full. */
static int test_cmd_send(void)
{
	static char big[5000];
	struct vmm *vm = fake_vm(true, -1);

	ASSERT_TRUE(vm != NULL);
	memset(big, 'b', sizeof(big));
	ASSERT_EQ_INT(vmm_cmd_send(NULL, "x", 1), -EINVAL);
	ASSERT_EQ_INT(vmm_cmd_send(vm, NULL, 1), -EINVAL);
	ASSERT_EQ_INT(vmm_cmd_send(vm, NULL, 0), 0);
	ASSERT_EQ_INT(vmm_cmd_send(vm, big, 4000), 4000);
	ASSERT_EQ_INT(vmm_cmd_send(vm, big, 1000), 96);
	ASSERT_EQ_INT(vmm_cmd_send(vm, big, 1), 0);
	ASSERT_EQ_INT(rd(&vm->com2, RBR), 'b');
	ASSERT_EQ_INT(vmm_cmd_send(vm, "e", 1), 1);
	free(vm);
	return TEST_OK;
}

/* A confined vCPU thread transmits on COM2 (write) and sets the line (ioctl KVM_IRQ_LINE: the
 * filter lets it through; on a non-KVM fd the kernel answers ENOTTY, never the filter's EPERM). */
static struct {
	int confine, ioctl_errno;
	int fds[2];
} conf;

static void ioctl_line(void *ctx, unsigned int irq, int level)
{
	struct kvm_irq_level l = { .irq = irq, .level = (uint32_t)level };

	(void)ctx;
	errno = 0;
	if (ioctl(conf.fds[0], KVM_IRQ_LINE, &l) < 0)
		conf.ioctl_errno = errno;
}

static void *confined_thread(void *arg)
{
	struct serial8250 *s = arg;

	conf.confine = vmm_seccomp_confine();
	if (!conf.confine)
		wr(s, THR, 'v');
	return NULL;
}

static int test_confined_vcpu_tx(void)
{
	static struct serial8250 s;
	pthread_t t;
	char c;

	memset(&conf, 0, sizeof(conf));
	ASSERT_EQ_INT(pipe2(conf.fds, O_NONBLOCK), 0);
	serial_init(&s, SERIAL_COM2_IRQ, conf.fds[1], ioctl_line, NULL);
	ASSERT_EQ_INT(pthread_create(&t, NULL, confined_thread, &s), 0);
	ASSERT_EQ_INT(pthread_join(t, NULL), 0);
	ASSERT_EQ_INT(conf.confine, 0);
	ASSERT_EQ_INT(conf.ioctl_errno, ENOTTY);
	ASSERT_EQ_INT(read(conf.fds[0], &c, 1), 1);
	ASSERT_EQ_INT(c, 'v');
	ASSERT_EQ_U64(atomic_load(&s.tx_dropped), 0);
	close(conf.fds[0]);
	close(conf.fds[1]);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "serial rx: FIFO order, LSR.DR, RBR pops, DLAB reads the latch", test_rx_order_dr_rbr },
	{ "serial rx: 4096-byte buffer, full takes nothing, order across the wrap",
	  test_rx_capacity_and_wrap },
	{ "serial IIR: received data before THRE, IIR read clears only THRE", test_iir_priority },
	{ "serial IRQ line: IER.RDI, MCR.OUT2, drain and host push", test_irq_line },
	{ "serial FCR.CLEAR_RCVR empties the receive buffer, counted", test_fifo_reset },
	{ "serial loopback: MSR mirror, transmitted byte received, not sent", test_loopback },
	{ "serial tx: a full non-blocking fd drops the byte, counted", test_tx_dropped },
	{ "serial tx (COM2): a full fd holds the bytes, THRE clear, flush sends them",
	  test_tx_held },
	{ "serial COM1: nothing to receive", test_com1_no_rx },
	{ "COM2 without cmd_channel floats (0xff), COM1 unaffected", test_com2_absent },
	{ "COM2 with cmd_channel: tx to the fd, rx from vmm_cmd_send, IRQ 3, counters",
	  test_com2_channel },
	{ "vmm_cmd_send: EINVAL, partial accept, full", test_cmd_send },
	{ "COM2 from a seccomp-confined thread: write and KVM_IRQ_LINE allowed",
	  test_confined_vcpu_tx },
};

TEST_MAIN(tests)
