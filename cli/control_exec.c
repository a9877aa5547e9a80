// SPDX-License-Identifier: MIT
// The command channel of `run --control` (docs/control-protocol.md, "EXEC"): the server's side
// of COM2, where the bundled images' hvprof-execd (images/guest/hvprof-execd.c) runs commands.
// What the guest sends is hostile input: frames are parsed byte by byte with bounded headers
// and lengths (exec_rx_feed, fuzzed), a bad frame is counted and skipped to the next line, and
// nothing the guest sends can make the server block or grow: output goes to the one EXEC
// client through a bounded queue, and while the queue is long the guest's pipe is not read, so
// its UART holds back (vmm_cmd_tx_kick) and a slow reader slows the command, losing nothing.
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control.h"

/* ---------------------------------------------------------------- the guest's frames */

void exec_rx_init(struct exec_rx *rx)
{
	memset(rx, 0, sizeof(*rx));
}

/* One header line (no '\n'): "R V", "O FD LEN", "X STATUS". Return: false when it is none. */
static bool header(struct exec_rx *rx, const char *h, size_t n, const struct exec_rx_ops *ops,
		   void *ctx)
{
	const char *sp;
	uint32_t a, b;

	if (n < 3 || h[1] != ' ')
		return false;
	switch (h[0]) {
	case 'R':
		if (!ctl_parse_uint(h + 2, n - 2, UINT32_MAX, &a))
			return false;
		ops->ready(ctx, a);
		return true;
	case 'X':
		if (!ctl_parse_uint(h + 2, n - 2, 255, &a))
			return false;
		ops->exit(ctx, (int)a);
		return true;
	case 'O':
		sp = memchr(h + 2, ' ', n - 2);
		if (!sp || !ctl_parse_uint(h + 2, (size_t)(sp - h - 2), 2, &a) || a < 1 ||
		    !ctl_parse_uint(sp + 1, (size_t)(h + n - sp - 1), EXEC_MAX_CHUNK, &b) || !b)
			return false;
		rx->out_fd = (int)a;
		rx->left = b;
		return true;
	}
	return false;
}

void exec_rx_feed(struct exec_rx *rx, const void *buf, size_t len, const struct exec_rx_ops *ops,
		  void *ctx)
{
	const char *p = buf, *end = p + len;

	while (p < end) {
		if (rx->left) { /* an O frame's bytes */
			size_t n = (size_t)(end - p) < rx->left ? (size_t)(end - p) : rx->left;

			ops->out(ctx, rx->out_fd, p, n);
			rx->left -= n;
			p += n;
			continue;
		}
		unsigned char c = (unsigned char)*p++;

		if (c == '\n') {
			if (!rx->skipping && !header(rx, rx->hdr, rx->hdr_len, ops, ctx))
				rx->bad_frames++;
			rx->hdr_len = 0;
			rx->skipping = false;
		} else if (rx->skipping) {
			continue;
		} else if (c < 0x20 || c > 0x7e || rx->hdr_len == sizeof(rx->hdr)) {
			rx->bad_frames++; /* not a header: skip to the next line */
			rx->skipping = true;
			rx->hdr_len = 0;
		} else {
			rx->hdr[rx->hdr_len++] = (char)c;
		}
	}
}

/* ---------------------------------------------------------------- the channel */

void exec_chan_init(struct exec_chan *ch, int guest_fd,
		    ssize_t (*send)(void *ctx, const void *buf, size_t len),
		    void (*kick)(void *ctx), void *send_ctx)
{
	memset(ch, 0, sizeof(*ch));
	ch->guest_fd = guest_fd;
	ch->client_fd = -1;
	ch->send = send;
	ch->kick = kick;
	ch->send_ctx = send_ctx;
	exec_rx_init(&ch->rx);
}

/* Queue whole frames for the guest and send what its receive buffer takes now; the rest goes
 * at the next steps (exec_chan_flush), so a frame is never cut. Return: 0; -ENOBUFS. */
static int to_guest(struct exec_chan *ch, const char *buf, size_t len)
{
	if (len > sizeof(ch->outq) - ch->outq_len)
		return -ENOBUFS;
	memcpy(ch->outq + ch->outq_len, buf, len);
	ch->outq_len += len;
	exec_chan_flush(ch);
	return 0;
}

void exec_chan_flush(struct exec_chan *ch)
{
	ssize_t n;

	/* a K that found no room is sent as soon as there is some */
	if (ch->kill_pending && ch->outq_len + 2 <= sizeof(ch->outq)) {
		memcpy(ch->outq + ch->outq_len, "K\n", 2);
		ch->outq_len += 2;
		ch->kill_pending = false;
		ch->kills++;
	}
	if (!ch->outq_len)
		return;
	n = ch->send(ch->send_ctx, ch->outq, ch->outq_len);
	if (n <= 0)
		return; /* full (the guest reads it later), or no channel: kept */
	memmove(ch->outq, ch->outq + n, ch->outq_len - (size_t)n);
	ch->outq_len -= (size_t)n;
}

static void client_close(struct exec_chan *ch)
{
	if (ch->client_fd >= 0)
		close(ch->client_fd);
	ch->client_fd = -1;
	ch->client_rd_closed = false;
	ch->client_closing = false;
	ch->cq_len = 0;
}

/* The client went away (or cannot be served): its command, if still running, is killed. */
static void client_drop(struct exec_chan *ch)
{
	if (ch->client_fd < 0)
		return;
	client_close(ch);
	if (ch->running) {
		ch->kill_pending = true;
		exec_chan_flush(ch);
	}
}

/* Send what is queued for the client, never blocking. Return: 0; -1 it is gone (dropped). */
static int client_flush(struct exec_chan *ch)
{
	while (ch->cq_len) {
		ssize_t r = send(ch->client_fd, ch->cq, ch->cq_len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return 0; /* a slow reader: the rest at POLLOUT */
		if (r <= 0) {
			ch->clients_dropped++;
			client_drop(ch);
			return -1;
		}
		memmove(ch->cq, ch->cq + r, ch->cq_len - (size_t)r);
		ch->cq_len -= (size_t)r;
	}
	if (ch->client_closing)
		client_close(ch); /* EXIT or END went out: done */
	return 0;
}

/* Bytes to the client, queued (bounded: the guest is not read while the queue is long, so
 * a slow reader slows the command down instead of losing its output). */
static void client_send(struct exec_chan *ch, const void *buf, size_t len)
{
	if (ch->client_fd < 0)
		return;
	if (len > sizeof(ch->cq) - ch->cq_len) {
		/* cannot happen: the guest is read only while cq_len < EXEC_CLIENT_Q_HIGH */
		ch->clients_dropped++;
		client_drop(ch);
		return;
	}
	memcpy(ch->cq + ch->cq_len, buf, len);
	ch->cq_len += len;
	client_flush(ch);
}

/* The command's end (EXIT) or the VM's (END) to the client, which is closed once it went. */
static void client_last(struct exec_chan *ch, const char *line)
{
	if (ch->client_fd < 0)
		return;
	client_send(ch, line, strlen(line));
	if (ch->client_fd < 0)
		return;
	ch->client_closing = true;
	if (!ch->cq_len)
		client_close(ch);
}

static int check_free(const struct exec_chan *ch)
{
	if (ch->guest_fd < 0)
		return -ENOTSUP;
	if (ch->ended)
		return -ESHUTDOWN;
	/* booting; the last command's client went (it is being killed); or the last client
	 * still takes its output: soon free, the client retries */
	if (!ch->ready || (ch->running && ch->client_fd < 0) || (!ch->running && ch->client_fd >= 0))
		return -EAGAIN;
	if (ch->running || ch->quitting)
		return -EBUSY;
	return 0;
}

int exec_chan_start(struct exec_chan *ch, int client_fd, const char *cmd, size_t len)
{
	char frame[EXEC_MAX_CMD + 32];
	int n, err = check_free(ch);

	if (err)
		return err;
	if (!cmd || !len || len > EXEC_MAX_CMD)
		return -EINVAL;
	n = snprintf(frame, sizeof(frame), "C %zu\n", len);
	memcpy(frame + n, cmd, len);
	err = to_guest(ch, frame, (size_t)n + len);
	if (err)
		return err;
	ch->running = true;
	ch->client_fd = client_fd;
	ch->execs++;
	return 0;
}

const char *exec_chan_state(const struct exec_chan *ch)
{
	switch (check_free(ch)) {
	case 0:
		return "ready";
	case -ENOTSUP:
		return "none";
	case -EAGAIN:
		return ch->ready ? "busy" : "booting";
	default:
		return "busy";
	}
}

int exec_chan_poweroff(struct exec_chan *ch, int status)
{
	char msg[16];
	int err = check_free(ch);

	if (err)
		return err;
	if (status < 0 || status > 255)
		return -EINVAL;
	snprintf(msg, sizeof(msg), "Q %d\n", status);
	err = to_guest(ch, msg, strlen(msg));
	if (!err)
		ch->quitting = true;
	return err;
}

static void on_ready(void *ctx, uint32_t version)
{
	struct exec_chan *ch = ctx;

	/* a server that (re)starts: whatever ran before is over, and what was queued for the
	 * one before is not for it */
	ch->outq_len = 0;
	ch->kill_pending = false;
	if (ch->running)
		client_last(ch, "END reason=restarted\n");
	ch->running = false;
	ch->ready = version == 1;
	ch->version = version;
}

static void on_out(void *ctx, int fd, const char *buf, size_t len)
{
	struct exec_chan *ch = ctx;
	char hdr[32];

	ch->out_bytes += len;
	if (!ch->running || ch->client_fd < 0)
		return; /* nobody asked for it (the client went away): dropped */
	snprintf(hdr, sizeof(hdr), "OUT %d %zu\n", fd, len);
	client_send(ch, hdr, strlen(hdr));
	client_send(ch, buf, len);
}

static void on_exit_frame(void *ctx, int status)
{
	struct exec_chan *ch = ctx;
	char line[32];

	if (!ch->running) {
		ch->rx.bad_frames++; /* an X with nothing running */
		return;
	}
	ch->running = false;
	ch->kill_pending = false; /* it ended anyway */
	snprintf(line, sizeof(line), "EXIT status=%d\n", status);
	client_last(ch, line);
}

static const struct exec_rx_ops chan_rx_ops = { .ready = on_ready, .out = on_out,
						 .exit = on_exit_frame };

bool exec_chan_wants_guest(const struct exec_chan *ch)
{
	return ch->guest_fd >= 0 && ch->cq_len < EXEC_CLIENT_Q_HIGH;
}

int exec_chan_guest_readable(struct exec_chan *ch)
{
	char buf[EXEC_MAX_CHUNK];
	ssize_t n;
	int err = 0;

	/* bounded per step (the other clients get their turn), and never past the high mark */
	for (int i = 0; i < 16 && exec_chan_wants_guest(ch); i++) {
		n = read(ch->guest_fd, buf, sizeof(buf));
		if (n < 0) {
			err = errno == EAGAIN || errno == EINTR ? 0 : -errno;
			break;
		}
		if (n == 0) {
			err = -EPIPE;
			break;
		}
		exec_rx_feed(&ch->rx, buf, (size_t)n, &chan_rx_ops, ch);
	}
	/* room in the pipe now: what the guest's UART holds back can come (vmm_cmd_tx_kick) */
	if (ch->kick)
		ch->kick(ch->send_ctx);
	return err;
}

short exec_chan_client_events(const struct exec_chan *ch)
{
	return (short)((ch->client_rd_closed ? 0 : POLLIN) | (ch->cq_len ? POLLOUT : 0));
}

void exec_chan_client_ready(struct exec_chan *ch, short revents)
{
	char buf[256];
	ssize_t n;

	if (ch->client_fd < 0)
		return;
	if (revents & (POLLHUP | POLLERR)) {
		client_drop(ch); /* gone (Ctrl-C): its command is killed */
		return;
	}
	if (revents & POLLOUT && client_flush(ch))
		return;
	if (!(revents & POLLIN) || ch->client_fd < 0)
		return;
	n = recv(ch->client_fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n == 0)
		ch->client_rd_closed = true; /* shut for writing only: it may still read */
	else if (n < 0 && errno != EAGAIN && errno != EINTR)
		client_drop(ch);
	/* anything it sends after EXEC is ignored */
}

void exec_chan_end(struct exec_chan *ch, const char *reason)
{
	char line[64];

	ch->ended = true;
	if (ch->client_fd < 0 || ch->client_closing)
		return;
	snprintf(line, sizeof(line), "END reason=%s\n", reason);
	client_send(ch, line, strlen(line));
	/* the VM ends: one last try for what is queued, then closed */
	client_close(ch);
}

void exec_chan_close(struct exec_chan *ch)
{
	client_close(ch);
}
