// SPDX-License-Identifier: MIT
// hvprof record --attach PATH: the control socket's client (docs/control-protocol.md). It
// creates the recording itself (so the file is the user's, with the user's path and
// permissions) and hands its fd to the VM with SCM_RIGHTS; the VM's process writes it and ends
// it with END when the window ends: at --duration, at Ctrl-C (both send DETACH), or when the
// guest powers off (the VM sends DONE by itself).
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <hvprof/log.h>
#include <hvprof/sample.h>

#include "cli.h"
#include "control.h"

#define REPLY_TIMEOUT_MS 10000 /* for a reply (the server may be busy with another client) */
#define DONE_TIMEOUT_MS 20000  /* for DONE after DETACH (the VM writes the counters and END) */

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct conn {
	int fd;
	/* SIGINT/SIGTERM are blocked while attached and unblocked only inside the wait (ppoll):
	 * a Ctrl-C between the check of stop_signal and the wait is not lost */
	const sigset_t *wait_mask;
	size_t len;
	char buf[CTL_MAX_LINE];
	char line[CTL_MAX_LINE];
};

/* The next line into c->line, waiting until @deadline_ms (or a signal, when @stop_on_signal).
 * Return: 0; -ETIMEDOUT; -EINTR a signal; -ENOTCONN the VM closed; -EPROTO a bad line. */
static int read_line(struct conn *c, uint64_t deadline_ms, bool stop_on_signal)
{
	size_t n;
	ssize_t r;
	int found;

	for (;;) {
		found = ctl_line_find(c->buf, c->len, &n);
		if (found < 0)
			return -EPROTO;
		if (found) {
			memcpy(c->line, c->buf, n);
			c->line[n] = '\0';
			memmove(c->buf, c->buf + n + 1, c->len - n - 1);
			c->len -= n + 1;
			return 0;
		}
		uint64_t now = mono_ms();
		int ready;

		if (stop_on_signal && stop_signal)
			return -EINTR;
		if (now >= deadline_ms)
			return -ETIMEDOUT;
		/* the signals stay blocked (pending) while not stopping on them: DETACH sent */
		ready = ctl_wait_readable(c->fd, deadline_ms - now,
					  stop_on_signal ? c->wait_mask : NULL);
		if (ready < 0 && ready != -EINTR)
			return ready;
		if (ready <= 0)
			continue;
		r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ENOTCONN;
		c->len += (size_t)r;
	}
}

/* Send @text, with @pass_fd (>= 0) as SCM_RIGHTS. */
static int send_msg(int sock, const char *text, int pass_fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { (void *)text, strlen(text) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	if (pass_fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)iov.iov_len ? 0 : -EIO;
}

static int connect_to(const char *path, int *out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		cli_error("--attach %s: path too long for a UNIX socket", path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		err = -errno;
		cli_error("--attach %s: %s%s", path, hvp_strerror(err),
			  err == -ENOENT || err == -ECONNREFUSED
				  ? " (no VM listens there: start one with hvprof run --control PATH)"
				  : "");
		close(fd);
		return err;
	}
	*out = fd;
	return 0;
}

/* One request and its reply (OK, or ERR printed). Return: 0 and *@r; -errno. */
static int request(struct conn *c, const char *what, const char *text, int pass_fd,
		   struct ctl_reply *r)
{
	int err = send_msg(c->fd, text, pass_fd);

	err = err ?: read_line(c, mono_ms() + REPLY_TIMEOUT_MS, false);
	err = err ?: ctl_parse_reply(c->line, strlen(c->line), r);
	if (err) {
		cli_error("%s: no answer from the VM (%s)", what, hvp_strerror(err));
		return err;
	}
	if (r->kind == CTL_REPLY_ERR) {
		cli_error("%s refused: %.*s (%s)", what, (int)r->rest_len, r->rest,
			  ctl_err_name(r->err));
		return -r->err;
	}
	return r->kind == CTL_REPLY_OK ? 0 : -EPROTO;
}

/* The DONE line's outcome as record's exit status (cli/outcome.c's conventions). */
static int done_status(const struct ctl_reply *r, const struct record_attach_args *a,
		       bool by_signal)
{
	char reason[32] = "error";
	uint64_t samples = 0, status = 0;

	if (ctl_reply_get(r, "reason", reason, sizeof(reason))) { /* "error" */ }
	if (ctl_reply_u64(r, "samples", &samples)) { /* 0 */ }
	if (ctl_reply_u64(r, "status", &status)) { /* 0 */ }
	if (!strcmp(reason, "error")) {
		cli_error("the recording %s is incomplete (%.*s)", a->output, (int)r->rest_len,
			  r->rest);
		return EXIT_ERROR;
	}
	fprintf(stderr, "hvprof: %llu samples; window ended: %s; written to %s\n",
		(unsigned long long)samples, reason, a->output);
	if (!strcmp(reason, "detached") || !strcmp(reason, "duration"))
		return by_signal ? EXIT_INTERRUPTED : EXIT_OK;
	if (!strcmp(reason, "exit"))
		return status == 0 ? EXIT_OK : EXIT_GUEST_FAILED;
	if (!strcmp(reason, "signal"))
		return EXIT_INTERRUPTED;
	return EXIT_GUEST_FAILED; /* reset, crash */
}

/* Attached: wait for the duration or a signal, then DETACH; or for the VM's DONE. */
static int wait_window(struct conn *c, const struct record_attach_args *a)
{
	uint64_t end = a->duration_s > 0 ? mono_ms() + (uint64_t)(a->duration_s * 1000)
					 : UINT64_MAX / 2;
	bool detaching = false, by_signal = false;
	struct ctl_reply r;
	int err;

	for (;;) {
		err = read_line(c, end, !detaching);
		if (!err) {
			if (ctl_parse_reply(c->line, strlen(c->line), &r) == 0 &&
			    r.kind == CTL_REPLY_DONE)
				return done_status(&r, a, by_signal);
			continue; /* nothing else is sent on an attached connection */
		}
		if ((err == -ETIMEDOUT || err == -EINTR) && !detaching) {
			by_signal = err == -EINTR;
			if (send_msg(c->fd, "DETACH\n", -1) != 0)
				break;
			detaching = true;
			end = mono_ms() + DONE_TIMEOUT_MS;
			continue;
		}
		break;
	}
	cli_error("the VM did not finish the recording %s (%s): it may be incomplete", a->output,
		  hvp_strerror(err));
	return EXIT_ERROR;
}

int record_attach(const struct record_attach_args *a)
{
	struct conn c = { .fd = -1 };
	struct sigaction sa, old_int, old_term;
	sigset_t stops, old_mask, wait_mask;
	struct ctl_reply r;
	char text[128], window[16] = "?";
	int out_fd = -1, status = EXIT_ERROR;
	bool created = false;

	if (connect_to(a->path, &c.fd) != 0)
		return EXIT_ERROR;
	snprintf(text, sizeof(text), "HELLO %d\n", CTL_VERSION);
	if (request(&c, "the handshake", text, -1, &r) != 0)
		goto out;
	if (record_open_output(a->output, &out_fd, &created) != 0)
		goto out;
	if (a->dwarf)
		snprintf(text, sizeof(text), "ATTACH freq=%lu call_graph=dwarf,%u\n", a->freq,
			 a->stack_size);
	else
		snprintf(text, sizeof(text), "ATTACH freq=%lu call_graph=fp\n", a->freq);
	/* signals before ATTACH: a Ctrl-C from now on detaches, never kills us mid-window */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigprocmask(SIG_BLOCK, &stops, &old_mask);
	wait_mask = old_mask;
	sigdelset(&wait_mask, SIGINT);
	sigdelset(&wait_mask, SIGTERM);
	c.wait_mask = &wait_mask;
	r.kind = 0;
	if (request(&c, "attach", text, out_fd, &r) != 0) {
		/* Refused (ERR): nothing was recorded; remove the file only if it is the empty
		 * regular file we created. No answer (a timeout, the VM went away): the VM may
		 * have attached and be writing it, so it stays. */
		if (r.kind == CTL_REPLY_ERR && ctl_output_discard(a->output, out_fd, created)) {
			/* kept: not ours, or not empty */
		}
		goto restore;
	}
	close(out_fd); /* the VM has its own copy */
	out_fd = -1;
	if (ctl_reply_get(&r, "window", window, sizeof(window))) { /* "?" */ }
	fprintf(stderr, "hvprof: attached to %s (window %s, %lu Hz); %s\n", a->path, window,
		a->freq, a->duration_s > 0 ? "detaching at the duration or Ctrl-C"
					   : "Ctrl-C detaches");
	status = wait_window(&c, a);
restore:
	sigprocmask(SIG_SETMASK, &old_mask, NULL); /* a pending one reaches on_signal: ignored */
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
out:
	if (out_fd >= 0)
		close(out_fd);
	close(c.fd);
	return status;
}
