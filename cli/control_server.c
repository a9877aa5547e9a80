// SPDX-License-Identifier: MIT
// The control socket's server (docs/control-protocol.md): one thread polls the listening socket,
// the one client it serves at a time, and the attached client whose window is open. Nothing here
// blocks: sockets are non-blocking, a reply that does not fit the socket buffer drops its client,
// a client that does not complete a message in time is dropped, and messages are bounded
// (CTL_MAX_LINE), so a bad client costs the VM nothing; the vCPUs never wait for this thread.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <hvprof/sample.h>

#include "control.h"

#define CONN_MAX_FDS 4 /* fds accepted per recvmsg (extra ones are closed) */
#define CHAN_RETRY_MS 10 /* the step's wait while frames wait for the guest's receive buffer */

struct ctl_conn {
	int fd;
	int passed_fd;        /* the last fd received (SCM_RIGHTS), kept for ATTACH; -1 none */
	bool hello;           /* the handshake was made */
	uint64_t deadline_ns; /* not attached: dropped when no complete message came by then */
	size_t len;
	char buf[CTL_MAX_LINE];
};

enum { CONN_CLIENT, CONN_SESSION, CONN_N };

struct control_server {
	struct control_config cfg;
	const struct control_ops *ops;
	int listen_fd;
	int wake[2]; /* control_server_end writes a byte: the poll returns */
	struct ctl_conn conn[CONN_N];
	atomic_bool attached, ending;
	atomic_int end_reason, end_status;
	char *path;
	bool bound; /* path is the socket this server bound (dev, ino): removed at destroy */
	dev_t dev;
	ino_t ino;
	int lock_fd; /* PATH.lock, flock'ed while the server lives; -1 none */
	struct exec_chan chan; /* the command channel (guest_fd -1: none) */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void conn_init(struct ctl_conn *c)
{
	c->fd = -1;
	c->passed_fd = -1;
	c->hello = false;
	c->len = 0;
}

static void conn_close(struct ctl_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	if (c->passed_fd >= 0)
		close(c->passed_fd);
	conn_init(c);
}

/* One line, never blocking. Return: 0; -EAGAIN it did not fit at once (the client is slow or
 * gone: the caller drops it); -errno. */
static int conn_send(struct ctl_conn *c, const char *line)
{
	size_t n = strlen(line);
	ssize_t r = send(c->fd, line, n, MSG_DONTWAIT | MSG_NOSIGNAL);

	if (r < 0)
		return -errno;
	return (size_t)r == n ? 0 : -EAGAIN;
}

/* "OK words\n" (or "DONE words\n") from a callback's reply. */
static int conn_reply(struct ctl_conn *c, const char *verb, const char *words)
{
	char line[CTL_MAX_LINE + 1];

	snprintf(line, sizeof(line), "%s%s%.*s\n", verb, words[0] ? " " : "",
		 (int)(CTL_MAX_LINE - strlen(verb) - 2), words);
	return conn_send(c, line);
}

static int conn_error(struct ctl_conn *c, int err, const char *msg)
{
	char line[CTL_MAX_LINE + 1];

	ctl_format_err(line, sizeof(line), err, msg);
	return conn_send(c, line);
}

/* End the open window (if any) and tell its client. */
static void end_window(struct control_server *srv, int reason, int exit_status)
{
	struct ctl_conn *s = &srv->conn[CONN_SESSION];
	char reply[CTL_MAX_LINE];

	if (!atomic_load(&srv->attached))
		return;
	reply[0] = '\0';
	if (srv->ops->detach(srv->ops->ctx, reason, exit_status, reply, sizeof(reply)) != 0 &&
	    !reply[0])
		snprintf(reply, sizeof(reply), "reason=error");
	if (s->fd >= 0 && conn_reply(s, "DONE", reply)) { /* the client went away: its loss */ }
	conn_close(s);
	atomic_store(&srv->attached, false);
}

/*
 * A received fd must be one the VM can write a recording to: writable, and a regular file.
 * A pipe, FIFO, socket or character device is refused: a slow reader would block a vCPU in
 * write() while it holds the sink's lock (and a detach would wait for it forever), a reader that
 * went away would raise SIGPIPE in the VM's process. Return: 0; -EBADF not writable (or not an
 * fd); -EINVAL writable but not a regular file.
 */
static int check_recording_fd(int fd)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fstat(fd, &st) != 0 || (fl & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	return 0;
}

static int handle_attach(struct control_server *srv, struct ctl_conn *c, bool session,
			 const struct ctl_request *req)
{
	char reply[CTL_MAX_LINE];
	int err, fd = c->passed_fd;

	if (session)
		return conn_error(c, EALREADY, "this connection's window is open already");
	if (atomic_load(&srv->attached))
		return conn_error(c, EBUSY, "another client is attached: one window at a time");
	err = fd < 0 ? -EBADF : check_recording_fd(fd);
	if (err == -EINVAL)
		return conn_error(c, EBADF, "recording must be a regular file");
	if (err)
		return conn_error(c, EBADF, "ATTACH needs the recording's writable fd (SCM_RIGHTS)");
	reply[0] = '\0';
	err = srv->ops->attach(srv->ops->ctx, req, fd, reply, sizeof(reply));
	if (err)
		return conn_error(c, -err, reply[0] ? reply : "attach failed");
	c->passed_fd = -1; /* the window owns it */
	/* the connection becomes the session's; the client slot is free for the next one */
	srv->conn[CONN_SESSION] = *c;
	conn_init(c);
	atomic_store(&srv->attached, true);
	if (conn_reply(&srv->conn[CONN_SESSION], "OK", reply) != 0) {
		end_window(srv, HVP_END_DETACHED, 0); /* gone already */
		return 1;
	}
	return 2;
}

static const char *chan_why(int err)
{
	switch (err) {
	case -ENOTSUP:
		return "this VM serves no commands: start it with run --control and no --run, "
		       "on a bundled image";
	case -EAGAIN:
		return "the guest's command server is not ready yet (booting, or ending the "
		       "command of a client that went away)";
	case -EBUSY:
		return "a command is running: one at a time";
	case -ESHUTDOWN:
		return "the guest is stopping";
	default:
		return "the guest does not read its command channel";
	}
}

/* EXEC: the connection becomes the command's (its output and status, then closed). */
static int handle_exec(struct control_server *srv, struct ctl_conn *c, bool session,
		       const struct ctl_request *req)
{
	char line[64];
	int err;

	if (session)
		return conn_error(c, EALREADY, "EXEC on an attached connection: use another one");
	snprintf(line, sizeof(line), "OK exec=%llu\n",
		 (unsigned long long)srv->chan.execs + 1);
	err = exec_chan_start(&srv->chan, c->fd, req->cmd, req->cmd_len);
	if (err)
		return conn_error(c, -err, chan_why(err));
	/* the channel owns the socket now; OK goes first, the output follows */
	if (send(c->fd, line, strlen(line), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)strlen(line))
		exec_chan_client_ready(&srv->chan, POLLHUP); /* gone: its command is killed */
	c->fd = -1;
	conn_close(c);
	return 1;
}

/*
 * One message of connection @which. Return: 0 go on; 1 the connection was closed; 2 it became
 * the session's (attached); -errno drop it.
 */
static int handle_line(struct control_server *srv, int which, const char *line, size_t len)
{
	struct ctl_conn *c = &srv->conn[which];
	bool session = which == CONN_SESSION;
	struct ctl_request req;
	char why[160], reply[CTL_MAX_LINE];
	int err;

	err = ctl_parse_request(line, len, &req, why, sizeof(why));
	if (err) {
		conn_error(c, -err, why);
		return err;
	}
	if (!c->hello) {
		if (req.verb != CTL_HELLO) {
			conn_error(c, EPROTO, "say HELLO 1 first");
			return -EPROTO;
		}
		if (req.version != CTL_VERSION) {
			snprintf(why, sizeof(why), "version %u is not spoken here (this hvprof: %d)",
				 req.version, CTL_VERSION);
			conn_error(c, EPROTONOSUPPORT, why);
			return -EPROTONOSUPPORT;
		}
		c->hello = true;
		snprintf(reply, sizeof(reply), "version=%d", CTL_VERSION);
		return conn_reply(c, "OK", reply);
	}
	switch (req.verb) {
	case CTL_HELLO:
		conn_error(c, EPROTO, "HELLO twice");
		return -EPROTO;
	case CTL_STATUS:
		reply[0] = '\0';
		err = srv->ops->status(srv->ops->ctx, reply, sizeof(reply));
		if (!err) { /* the command channel's state: none, booting, ready, busy */
			size_t n = strlen(reply);

			snprintf(reply + n, sizeof(reply) - n, "%sexec=%s", n ? " " : "",
				 exec_chan_state(&srv->chan));
		}
		return err ? conn_error(c, -err, reply) : conn_reply(c, "OK", reply);
	case CTL_ATTACH:
		return handle_attach(srv, c, session, &req);
	case CTL_DETACH:
		if (!session)
			return conn_error(c, EALREADY, "no window is open on this connection");
		end_window(srv, HVP_END_DETACHED, 0);
		return 1;
	case CTL_EXEC:
		return handle_exec(srv, c, session, &req);
	case CTL_POWEROFF:
		err = exec_chan_poweroff(&srv->chan, req.status);
		if (err)
			return conn_error(c, -err, chan_why(err));
		snprintf(reply, sizeof(reply), "status=%d", req.status);
		return conn_reply(c, "OK", reply);
	}
	return -EPROTO;
}

/* The complete messages in @which's buffer. Return: 0 keep it; 1 moved/closed; <0 drop it. */
static int handle_buffer(struct control_server *srv, int which)
{
	struct ctl_conn *c = &srv->conn[which];
	size_t n;
	int r;

	for (;;) {
		r = ctl_line_find(c->buf, c->len, &n);
		if (r == 0)
			return 0;
		if (r < 0) {
			conn_error(c, -r, r == -E2BIG ? "message too long"
						      : "a byte that is not printable ASCII");
			return r;
		}
		r = handle_line(srv, which, c->buf, n);
		if (r < 0 || r == 1)
			return r;
		if (r == 2) { /* attached: the bytes behind ATTACH are the session's now */
			c = &srv->conn[CONN_SESSION];
			memmove(c->buf, c->buf + n + 1, c->len - n - 1);
			c->len -= n + 1;
			if (handle_buffer(srv, CONN_SESSION) < 0)
				end_window(srv, HVP_END_DETACHED, 0);
			return 1;
		}
		memmove(c->buf, c->buf + n + 1, c->len - n - 1);
		c->len -= n + 1;
		c->deadline_ns = now_ns() + (uint64_t)srv->cfg.idle_ms * 1000000ull;
	}
}

/* Take what the socket has (and any fds). Return: 0; -ENOTCONN closed by the client; -errno. */
static int conn_read(struct ctl_conn *c)
{
	char cbuf[CMSG_SPACE(sizeof(int) * CONN_MAX_FDS)];
	struct iovec iov = { c->buf + c->len, sizeof(c->buf) - c->len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	ssize_t r;

	if (!iov.iov_len)
		return -E2BIG; /* a full buffer without a '\n' was answered already */
	r = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (r < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t nfd;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		/* SAFETY: the kernel wrote cmsg_len; nfd counts the ints it holds */
		nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (c->passed_fd >= 0)
				close(c->passed_fd);
			c->passed_fd = fd; /* the last one counts */
		}
	}
	if (r == 0)
		return -ENOTCONN;
	c->len += (size_t)r;
	return 0;
}

static void serve(struct control_server *srv, int which)
{
	int err = conn_read(&srv->conn[which]);

	err = err ?: handle_buffer(srv, which);
	if (err >= 0)
		return;
	if (which == CONN_SESSION) /* the attached client went away or misbehaved */
		end_window(srv, HVP_END_DETACHED, 0);
	else
		conn_close(&srv->conn[which]);
}

static void accept_client(struct control_server *srv)
{
	struct ctl_conn *c = &srv->conn[CONN_CLIENT];
	int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return; /* EAGAIN, or a client that left the queue */
	conn_init(c);
	c->fd = fd;
	c->deadline_ns = now_ns() + (uint64_t)srv->cfg.idle_ms * 1000000ull;
}

int control_server_adopt(struct control_server *srv, int fd)
{
	struct ctl_conn *c = &srv->conn[CONN_CLIENT];

	if (c->fd >= 0)
		return -EBUSY;
	conn_init(c);
	c->fd = fd;
	c->deadline_ns = now_ns() + (uint64_t)srv->cfg.idle_ms * 1000000ull;
	return 0;
}

int control_server_step(struct control_server *srv, int timeout_ms)
{
	struct ctl_conn *cl = &srv->conn[CONN_CLIENT], *se = &srv->conn[CONN_SESSION];
	struct pollfd pfd[6] = { { srv->wake[0], POLLIN, 0 },
				 { cl->fd < 0 ? srv->listen_fd : -1, POLLIN, 0 },
				 { cl->fd, POLLIN, 0 },
				 { se->fd, POLLIN, 0 },
				 { exec_chan_wants_guest(&srv->chan) ? srv->chan.guest_fd : -1,
				   POLLIN, 0 },
				 { srv->chan.client_fd, exec_chan_client_events(&srv->chan), 0 } };
	uint64_t now = now_ns();
	char drain[16];

	if (srv->chan.outq_len || srv->chan.kill_pending)
		timeout_ms = timeout_ms < CHAN_RETRY_MS ? timeout_ms : CHAN_RETRY_MS;
	if (cl->fd >= 0 && cl->deadline_ns > now &&
	    (cl->deadline_ns - now) / 1000000 < (uint64_t)timeout_ms)
		timeout_ms = (int)((cl->deadline_ns - now) / 1000000) + 1;
	if (poll(pfd, 6, timeout_ms) < 0 && errno != EINTR)
		return 0;
	if (pfd[0].revents && read(srv->wake[0], drain, sizeof(drain)) < 0) { /* drained */ }
	if (pfd[4].revents && exec_chan_guest_readable(&srv->chan) == -EPIPE)
		srv->chan.guest_fd = -1; /* the VM closed its end: no more commands */
	if (atomic_load(&srv->ending)) {
		end_window(srv, atomic_load(&srv->end_reason), atomic_load(&srv->end_status));
		exec_chan_end(&srv->chan, ctl_reason_word(atomic_load(&srv->end_reason)));
		conn_close(cl);
		return 1;
	}
	if (pfd[5].revents)
		exec_chan_client_ready(&srv->chan, pfd[5].revents);
	exec_chan_flush(&srv->chan);
	if (pfd[3].revents)
		serve(srv, CONN_SESSION);
	if (pfd[2].revents)
		serve(srv, CONN_CLIENT);
	else if (pfd[1].revents)
		accept_client(srv);
	if (cl->fd >= 0 && now_ns() >= cl->deadline_ns)
		conn_close(cl); /* half a message, or nothing, for too long */
	if (atomic_load(&srv->attached) && srv->ops->window_failed &&
	    srv->ops->window_failed(srv->ops->ctx))
		end_window(srv, HVP_END_ERROR, 0);
	return 0;
}

void control_server_end(struct control_server *srv, int reason, int exit_status)
{
	atomic_store(&srv->end_reason, reason);
	atomic_store(&srv->end_status, exit_status);
	atomic_store(&srv->ending, true);
	if (write(srv->wake[1], "e", 1) < 0) { /* the pipe is full: a wake-up is pending */ }
}

bool control_server_attached(const struct control_server *srv)
{
	return srv && atomic_load(&((struct control_server *)srv)->attached);
}

/* An existing @path: a socket nobody listens on is removed; anything else is refused. */
static int clear_stale(const char *path, const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, err;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	err = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ? -EADDRINUSE
	      : errno == ECONNREFUSED						? 0
										: -errno;
	close(fd);
	if (!err && unlink(path) != 0)
		err = -errno;
	return err;
}

/*
 * PATH.lock, flock'ed for the server's life: a second `run --control` on the same path cannot
 * take a stale-looking socket of the first (bound, not listening yet, or between its lstat and
 * connect) for a dead one and unlink it. The lock file stays (removing it would let a third
 * server lock a new inode). Return: 0; -EADDRINUSE another server holds it; -errno.
 */
static int lock_path(struct control_server *srv, const char *path)
{
	char lock[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];

	snprintf(lock, sizeof(lock), "%s.lock", path);
	srv->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (srv->lock_fd < 0)
		return -errno;
	if (flock(srv->lock_fd, LOCK_EX | LOCK_NB) != 0)
		return errno == EWOULDBLOCK ? -EADDRINUSE : -errno;
	return 0;
}

static int listen_on(struct control_server *srv, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int err, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	srv->path = strdup(path);
	if (!srv->path)
		return -ENOMEM;
	err = lock_path(srv, path);
	err = err ?: clear_stale(path, &sa);
	if (err)
		return err;
	srv->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (srv->listen_fd < 0)
		return -errno;
	/* owner-only from its creation (before the vCPU threads exist): 0777 & ~0177 = 0600,
	 * so no chmod (which would follow a symlink put at the path meanwhile) */
	old = umask(0177);
	r = bind(srv->listen_fd, (const struct sockaddr *)&sa, sizeof(sa));
	err = r ? -errno : 0;
	umask(old);
	if (err)
		return err;
	if (lstat(path, &st) != 0) {
		err = -errno;
		unlink(path); /* ours: bound just now, under the lock */
		return err;
	}
	srv->dev = st.st_dev;
	srv->ino = st.st_ino;
	srv->bound = true; /* from here a failure's destroy removes it */
	if (listen(srv->listen_fd, 4) != 0)
		return -errno;
	return 0;
}

int control_server_create(const struct control_config *cfg, const struct control_ops *ops,
			  struct control_server **out)
{
	struct control_server *srv;
	int err;

	if (!cfg || !ops || !ops->status || !ops->attach || !ops->detach || !out)
		return -EINVAL;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->cfg = *cfg;
	if (!srv->cfg.idle_ms)
		srv->cfg.idle_ms = CONTROL_IDLE_MS;
	srv->ops = ops;
	srv->listen_fd = -1;
	srv->lock_fd = -1;
	for (int i = 0; i < CONN_N; i++)
		conn_init(&srv->conn[i]);
	exec_chan_init(&srv->chan, cfg->chan && ops->cmd_send ? cfg->chan_fd : -1, ops->cmd_send,
		       ops->cmd_kick, ops->ctx);
	if (pipe2(srv->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		err = -errno;
		free(srv);
		return err;
	}
	err = cfg->path ? listen_on(srv, cfg->path) : 0;
	if (err) {
		control_server_destroy(srv);
		return err;
	}
	*out = srv;
	return 0;
}

void control_server_destroy(struct control_server *srv)
{
	struct stat st;

	if (!srv)
		return;
	for (int i = 0; i < CONN_N; i++)
		conn_close(&srv->conn[i]);
	exec_chan_close(&srv->chan);
	if (srv->listen_fd >= 0)
		close(srv->listen_fd);
	/* remove the socket only if it is still ours (not replaced by someone else's) */
	if (srv->bound && lstat(srv->path, &st) == 0 && st.st_dev == srv->dev &&
	    st.st_ino == srv->ino)
		unlink(srv->path);
	if (srv->lock_fd >= 0)
		close(srv->lock_fd); /* after the unlink: the next server finds no socket of ours */
	close(srv->wake[0]);
	close(srv->wake[1]);
	free(srv->path);
	free(srv);
}
