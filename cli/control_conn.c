// SPDX-License-Identifier: MIT
// The client's end of a control-socket connection (docs/control-protocol.md), shared by
// `record --attach` (cli/record_attach.c) and `hvprof exec` (cli/cmd_exec.c): connecting, sending
// a message (with an fd), reading replies line by line and raw bytes, waiting with deadlines and
// without losing a Ctrl-C (the signals are unblocked only inside ctl_wait_readable's ppoll).
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libgen.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "cli.h"
#include "control.h"

#define REPLY_TIMEOUT_MS 10000 /* for a reply (the server may be busy with another client) */
#define CONNECT_RETRY_MS 200

uint64_t ctl_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait until c->fd is readable (or the deadline, or a signal) and read what it has into
 * c->buf. Return: 0 (maybe nothing read: call again); as ctl_client_read_line. */
static int fill(struct ctl_client *c, uint64_t deadline_ms, bool stop_on_signal)
{
	uint64_t now = ctl_mono_ms();
	ssize_t r;
	int ready;

	if (stop_on_signal && c->stop && *c->stop)
		return -EINTR;
	if (now >= deadline_ms)
		return -ETIMEDOUT;
	if (c->len == sizeof(c->buf))
		return -EPROTO;
	/* the signals stay blocked (pending) while not stopping on them: DETACH sent */
	ready = ctl_wait_readable(c->fd, deadline_ms - now, stop_on_signal ? c->wait_mask : NULL);
	if (ready < 0 && ready != -EINTR)
		return ready;
	if (ready <= 0)
		return 0;
	r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
	if (r < 0 && errno == EINTR)
		return 0;
	if (r <= 0)
		return r < 0 ? -errno : -ENOTCONN;
	c->len += (size_t)r;
	return 0;
}

int ctl_client_read_line(struct ctl_client *c, uint64_t deadline_ms, bool stop_on_signal)
{
	size_t n;
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
		found = fill(c, deadline_ms, stop_on_signal);
		if (found)
			return found;
	}
}

int ctl_client_read_bytes(struct ctl_client *c, void *buf, size_t n, uint64_t deadline_ms,
			  bool stop_on_signal)
{
	char *p = buf;

	while (n) {
		size_t k = c->len < n ? c->len : n;
		int err;

		memcpy(p, c->buf, k);
		memmove(c->buf, c->buf + k, c->len - k);
		c->len -= k;
		p += k;
		n -= k;
		if (n && (err = fill(c, deadline_ms, stop_on_signal)))
			return err;
	}
	return 0;
}

int ctl_client_send(int sock, const char *text, int pass_fd)
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

/* Could a VM ever listen at @path? Not if something else is there, or its directory is not. */
static int socket_path_possible(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct stat st;

	if (lstat(path, &st) == 0)
		return S_ISSOCK(st.st_mode) ? 0 : -ENOTSOCK;
	snprintf(dir, sizeof(dir), "%s", path);
	if (stat(dirname(dir), &st) != 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int ctl_client_connect(const char *path, const char *opt, uint64_t wait_ms,
		       volatile sig_atomic_t *stop, int *out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint64_t until = ctl_mono_ms() + wait_ms;
	bool said = false;
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		cli_error("%s %s: path too long for a UNIX socket", opt, path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	for (;;) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		err = -errno;
		close(fd);
		/* not there yet (run --control is starting): wait, when asked to, where a VM
		 * could come, until a signal */
		if (err == -ENOENT || err == -ECONNREFUSED) {
			int why = socket_path_possible(path);

			if (why)
				err = why;
			else if (stop && *stop)
				err = -EINTR;
			else if (ctl_mono_ms() < until) {
				if (!said)
					fprintf(stderr, "hvprof: waiting for a VM to listen at %s (up "
						"to %llu s)\n", path,
						(unsigned long long)(wait_ms / 1000));
				said = true;
				usleep(CONNECT_RETRY_MS * 1000);
				continue;
			}
		}
		cli_error("%s %s: %s%s", opt, path, hvp_strerror(err),
			  err == -ENOENT || err == -ECONNREFUSED
				  ? " (no VM listens there: start one with hvprof run --control PATH)"
			  : err == -ENOTSOCK ? " (not a control socket: hvprof run --control PATH "
					       "makes one)"
					     : "");
		return err;
	}
	*out = fd;
	return 0;
}

int ctl_client_request(struct ctl_client *c, const char *what, const char *text, int pass_fd,
		       struct ctl_reply *r)
{
	int err = ctl_client_send(c->fd, text, pass_fd);

	c->sent = !err;
	err = err ?: ctl_client_read_line(c, ctl_mono_ms() + REPLY_TIMEOUT_MS, false);
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

