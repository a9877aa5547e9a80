// SPDX-License-Identifier: MIT
// 16550A UARTs: COM1 (0x3f8, IRQ 4), the guest console, and COM2 (0x2f8, IRQ 3), the command
// channel (vmm_cmd_send; present only with vmm_config.cmd_channel). Register model from the
// 16550A data sheet, with what Linux's 8250 driver (8250_port.c: autoconfig,
// serial8250_handle_irq, serial8250_rx_chars) relies on: THRE/TEMT set while nothing waits to
// be transmitted (COM1 transmits at once; COM2 holds what its host fd cannot take yet, THRE
// clear, until serial_tx_flush: backpressure, not loss); a host-side receive buffer of SERIAL_RX_CAP bytes behind RBR, LSR.DR while it holds
// data, FCR.CLEAR_RCVR empties it; interrupts by priority RDA (IIR 0x4, IER.RDI) > THRE (IIR
// 0x2, IER.THRI), no line-status or modem-status interrupts; the line gated by MCR.OUT2;
// loopback: MSR mirrors MCR, and what is transmitted is received instead of leaving the UART.
#define pr_fmt(fmt) "vmm: serial: " fmt
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "../vmm_internal.h"

#define UART_IER_RDI 0x01
#define UART_IER_THRI 0x02
#define UART_IIR_NO_INT 0x01
#define UART_IIR_THRI 0x02
#define UART_IIR_RDI 0x04
#define UART_IIR_FIFO_ENABLED 0xc0
#define UART_FCR_ENABLE_FIFO 0x01
#define UART_FCR_CLEAR_RCVR 0x02
#define UART_FCR_CLEAR_XMIT 0x04
#define UART_LCR_DLAB 0x80
#define UART_MCR_OUT2 0x08
#define UART_MCR_LOOP 0x10
#define UART_LSR_DR 0x01
#define UART_LSR_THRE 0x20
#define UART_LSR_TEMT 0x40
#define UART_MSR_CTS 0x10
#define UART_MSR_DSR 0x20
#define UART_MSR_DCD 0x80

void serial_init(struct serial8250 *s, unsigned int irq, int out_fd,
		 void (*set_irq)(void *ctx, unsigned int irq, int level), void *ctx)
{
	memset(s, 0, sizeof(*s));
	s->lsr = UART_LSR_THRE | UART_LSR_TEMT;
	s->msr = UART_MSR_DCD | UART_MSR_DSR | UART_MSR_CTS;
	s->irq = irq;
	s->out_fd = out_fd;
	s->set_irq = set_irq;
	s->irq_ctx = ctx;
	pthread_mutex_init(&s->lock, NULL);
}

/* Appends up to @len bytes to the receive buffer (s->lock held). Return: the bytes taken. */
static size_t rx_append(struct serial8250 *s, const uint8_t *buf, size_t len)
{
	size_t n = SERIAL_RX_CAP - s->rx_len;

	if (n > len)
		n = len;
	for (size_t i = 0; i < n; i++) {
		/* SAFETY: rx_head < SERIAL_RX_CAP and rx_len + i < SERIAL_RX_CAP, so the index is
		 * below SERIAL_RX_CAP after the modulo; the data is host-given, the count ours */
		s->rx_buf[(s->rx_head + s->rx_len + i) % SERIAL_RX_CAP] = buf[i];
	}
	s->rx_len += n;
	return n;
}

/* Pops the oldest received byte (s->lock held, rx_len > 0). */
static uint8_t rx_pop(struct serial8250 *s)
{
	uint8_t c = s->rx_buf[s->rx_head]; /* SAFETY: rx_head < SERIAL_RX_CAP always */

	s->rx_head = (s->rx_head + 1) % SERIAL_RX_CAP;
	s->rx_len--;
	return c;
}

static uint8_t serial_iir(const struct serial8250 *s)
{
	uint8_t iir = (s->fcr & UART_FCR_ENABLE_FIFO) ? UART_IIR_FIFO_ENABLED : 0;

	/* priority (data sheet, IIR table): line status (not modelled) > received data > THRE */
	if (s->rx_len && (s->ier & UART_IER_RDI))
		return iir | UART_IIR_RDI;
	if (s->thri_pending && (s->ier & UART_IER_THRI))
		return iir | UART_IIR_THRI;
	return iir | UART_IIR_NO_INT;
}

static void serial_update_irq(struct serial8250 *s)
{
	int level = !(serial_iir(s) & UART_IIR_NO_INT) && (s->mcr & UART_MCR_OUT2);

	if (s->set_irq)
		s->set_irq(s->irq_ctx, s->irq, level);
}

/* One write of @n bytes to out_fd, EINTR retried. Return: bytes written; -1. */
static ssize_t tx_write(struct serial8250 *s, const uint8_t *buf, size_t n)
{
	ssize_t w;

	do {
		w = write(s->out_fd, buf, n);
	} while (w < 0 && errno == EINTR);
	return w;
}

static void serial_tx(struct serial8250 *s, uint8_t c)
{
	if (s->mcr & UART_MCR_LOOP) {
		/* loopback: the transmitter feeds the receiver and nothing leaves the UART; a byte
		 * that finds the buffer full is lost (an overrun, not reported: no LSR.OE) */
		rx_append(s, &c, 1);
		return;
	}
	atomic_fetch_add_explicit(&s->tx_bytes, 1, memory_order_relaxed);
	if (s->tx_hold && s->out_fd >= 0) {
		if (!s->tx_len && tx_write(s, &c, 1) == 1)
			return;
		if (s->tx_len == SERIAL_TX_CAP) {
			/* the guest sent on with THRE clear: more than a driver does, dropped */
			atomic_fetch_add_explicit(&s->tx_dropped, 1, memory_order_relaxed);
			return;
		}
		/* SAFETY: tx_head < SERIAL_TX_CAP and tx_len < SERIAL_TX_CAP: in the ring */
		s->tx_buf[(s->tx_head + s->tx_len) % SERIAL_TX_CAP] = c;
		s->tx_len++;
		s->lsr &= (uint8_t)~(UART_LSR_THRE | UART_LSR_TEMT); /* the guest must wait */
		return;
	}
	if (s->out_fd >= 0) {
		ssize_t n;

		do {
			n = write(s->out_fd, &c, 1);
		} while (n < 0 && errno == EINTR);
		/* a full non-blocking fd (EAGAIN) or a broken one: the byte is dropped, counted */
		if (n != 1)
			atomic_fetch_add_explicit(&s->tx_dropped, 1, memory_order_relaxed);
	}
}

void serial_io(struct serial8250 *s, unsigned int off, bool is_write, uint8_t *data)
{
	bool dlab;

	pthread_mutex_lock(&s->lock);
	dlab = s->lcr & UART_LCR_DLAB;
	if (is_write) {
		uint8_t v = *data;

		switch (off) {
		case 0:
			if (dlab) {
				s->dll = v;
			} else {
				serial_tx(s, v);
				/* transmitted at once: THR empty again (unless it waits: tx_hold) */
				s->thri_pending = !s->tx_len;
			}
			break;
		case 1:
			if (dlab) {
				s->dlm = v;
			} else {
				if ((v & UART_IER_THRI) && !(s->ier & UART_IER_THRI) && !s->tx_len)
					s->thri_pending = true;
				s->ier = v & 0x0f;
			}
			break;
		case 2:
			/* CLEAR_RCVR empties the receive FIFO (Linux does it at every open
			 * and close of the port: serial8250_clear_fifos); both clear bits
			 * self-clear */
			if (v & UART_FCR_CLEAR_RCVR) {
				atomic_fetch_add_explicit(&s->rx_flushed, s->rx_len,
							  memory_order_relaxed);
				s->rx_head = 0;
				s->rx_len = 0;
			}
			s->fcr = v & (uint8_t)~(UART_FCR_CLEAR_RCVR | UART_FCR_CLEAR_XMIT);
			break;
		case 3:
			s->lcr = v;
			break;
		case 4:
			s->mcr = v & 0x1f;
			break;
		case 7:
			s->scr = v;
			break;
		default: /* LSR and MSR are read-only */
			break;
		}
	} else {
		uint8_t v = 0;

		switch (off) {
		case 0:
			if (dlab) {
				v = s->dll;
			} else if (s->rx_len) {
				v = rx_pop(s);
				atomic_fetch_add_explicit(&s->rx_bytes, 1, memory_order_relaxed);
			}
			/* else: nothing received, RBR reads 0 */
			break;
		case 1:
			v = dlab ? s->dlm : s->ier;
			break;
		case 2:
			v = serial_iir(s);
			if ((v & 0x0f) == UART_IIR_THRI)
				s->thri_pending = false; /* reading IIR clears the THRE interrupt */
			break;
		case 3:
			v = s->lcr;
			break;
		case 4:
			v = s->mcr;
			break;
		case 5:
			v = s->lsr | (s->rx_len ? UART_LSR_DR : 0);
			break;
		case 6:
			if (s->mcr & UART_MCR_LOOP) {
				/* loopback wiring: DTR->DSR, RTS->CTS, OUT1->RI, OUT2->DCD */
				v = (uint8_t)(((s->mcr & 0x01) << 5) | ((s->mcr & 0x02) << 3) |
					      ((s->mcr & 0x04) << 4) | ((s->mcr & 0x08) << 4));
			} else {
				v = s->msr;
			}
			break;
		case 7:
			v = s->scr;
			break;
		default:
			v = 0xff;
			break;
		}
		*data = v;
	}
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

size_t serial_rx_push(struct serial8250 *s, const uint8_t *buf, size_t len)
{
	size_t n;

	pthread_mutex_lock(&s->lock);
	n = rx_append(s, buf, len);
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
	return n;
}

void serial_set_tx_hold(struct serial8250 *s)
{
	s->tx_hold = true;
}

size_t serial_tx_flush(struct serial8250 *s)
{
	size_t left;

	pthread_mutex_lock(&s->lock);
	while (s->tx_len && s->out_fd >= 0) {
		size_t run = SERIAL_TX_CAP - s->tx_head; /* contiguous up to the ring's end */
		ssize_t w;

		if (run > s->tx_len)
			run = s->tx_len;
		w = tx_write(s, s->tx_buf + s->tx_head, run);
		if (w <= 0)
			break; /* still full: the next flush */
		s->tx_head = (s->tx_head + (size_t)w) % SERIAL_TX_CAP;
		s->tx_len -= (size_t)w;
	}
	if (!s->tx_len && !(s->lsr & UART_LSR_THRE)) {
		s->tx_head = 0;
		s->lsr |= UART_LSR_THRE | UART_LSR_TEMT;
		s->thri_pending = true; /* the driver sends on at the THRE interrupt */
		serial_update_irq(s);
	}
	left = s->tx_len;
	pthread_mutex_unlock(&s->lock);
	return left;
}

void vmm_cmd_tx_kick(struct vmm *vm)
{
	if (vm && vm->cfg.cmd_channel)
		serial_tx_flush(&vm->com2);
}

/* ---------------------------------------------------------------- COM2: the command channel */

int serial_cmd_fd_check(int fd)
{
	int fl;

	if (fd < 0)
		return 0; /* what the guest transmits is discarded */
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY) {
		pr_err("command channel: fd %d is not open for writing", fd);
		return -EBADF;
	}
	if (!(fl & O_NONBLOCK))
		pr_warn("command channel: fd %d is blocking: a reader that stops reading stalls "
			"the vCPU that transmits (set O_NONBLOCK)", fd);
	return 0;
}

ssize_t vmm_cmd_send(struct vmm *vm, const void *buf, size_t len)
{
	if (!vm || (!buf && len))
		return -EINVAL;
	if (!vm->cfg.cmd_channel)
		return -ENODEV;
	if (!len)
		return 0;
	/* at most SERIAL_RX_CAP, so the size_t fits in ssize_t */
	return (ssize_t)serial_rx_push(&vm->com2, buf, len);
}

void serial_add_counters(const struct vmm *vm, struct vmm_counters *c)
{
	if (!vm->cfg.cmd_channel)
		return;
	c->cmd_rx_bytes += atomic_load_explicit(&vm->com2.rx_bytes, memory_order_relaxed);
	c->cmd_rx_flushed += atomic_load_explicit(&vm->com2.rx_flushed, memory_order_relaxed);
	c->cmd_tx_bytes += atomic_load_explicit(&vm->com2.tx_bytes, memory_order_relaxed);
	c->cmd_tx_dropped += atomic_load_explicit(&vm->com2.tx_dropped, memory_order_relaxed);
}
