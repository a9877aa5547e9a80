// SPDX-License-Identifier: MIT
// A 16550A UART at COM1 (0x3f8, IRQ 4), transmit only: the guest console. Register model from
// the 16550A data sheet; what Linux's 8250 driver relies on: THRE/TEMT always set (we transmit
// at once), the THR-empty interrupt (IIR 0x2) gated by IER.THRI and MCR.OUT2, loopback MSR.
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "../vmm_internal.h"

#define UART_IER_THRI 0x02
#define UART_IIR_NO_INT 0x01
#define UART_IIR_THRI 0x02
#define UART_IIR_FIFO_ENABLED 0xc0
#define UART_FCR_ENABLE_FIFO 0x01
#define UART_LCR_DLAB 0x80
#define UART_MCR_OUT2 0x08
#define UART_MCR_LOOP 0x10
#define UART_LSR_THRE 0x20
#define UART_LSR_TEMT 0x40
#define UART_MSR_CTS 0x10
#define UART_MSR_DSR 0x20
#define UART_MSR_DCD 0x80

void serial_init(struct serial8250 *s, int out_fd, void (*set_irq)(void *, int), void *ctx)
{
	memset(s, 0, sizeof(*s));
	s->lsr = UART_LSR_THRE | UART_LSR_TEMT;
	s->msr = UART_MSR_DCD | UART_MSR_DSR | UART_MSR_CTS;
	s->out_fd = out_fd;
	s->set_irq = set_irq;
	s->irq_ctx = ctx;
	pthread_mutex_init(&s->lock, NULL);
}

static uint8_t serial_iir(const struct serial8250 *s)
{
	uint8_t iir = (s->fcr & UART_FCR_ENABLE_FIFO) ? UART_IIR_FIFO_ENABLED : 0;

	if (s->thri_pending && (s->ier & UART_IER_THRI))
		return iir | UART_IIR_THRI;
	return iir | UART_IIR_NO_INT;
}

static void serial_update_irq(struct serial8250 *s)
{
	int level = !(serial_iir(s) & UART_IIR_NO_INT) && (s->mcr & UART_MCR_OUT2);

	if (s->set_irq)
		s->set_irq(s->irq_ctx, level);
}

static void serial_tx(struct serial8250 *s, uint8_t c)
{
	if (s->mcr & UART_MCR_LOOP)
		return; /* loopback: nothing leaves the UART (no receive path modelled) */
	atomic_fetch_add_explicit(&s->tx_bytes, 1, memory_order_relaxed);
	if (s->out_fd >= 0) {
		ssize_t n;

		do {
			n = write(s->out_fd, &c, 1);
		} while (n < 0 && errno == EINTR);
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
				s->thri_pending = true; /* transmitted at once: THR empty again */
			}
			break;
		case 1:
			if (dlab) {
				s->dlm = v;
			} else {
				if ((v & UART_IER_THRI) && !(s->ier & UART_IER_THRI))
					s->thri_pending = true;
				s->ier = v & 0x0f;
			}
			break;
		case 2:
			s->fcr = v;
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
			v = dlab ? s->dll : 0; /* no receive data */
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
			v = s->lsr;
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
