// SPDX-License-Identifier: MIT
// Unit tests of the control protocol (cli/control_proto.c: a table of messages) and of its
// server's handling of bad clients (cli/control_server.c over socketpairs, fake VM operations):
// garbage, half a message, a client that vanishes, an overlong message, a slow client, an fd
// with the wrong message, a second attach, a detach, and the VM's end with a window open.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
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
#include "test.h"

/* ---------------------------------------------------------------- the parser */

static const struct {
	const char *line;
	int err;
	enum ctl_verb verb;
	uint32_t freq, stack;
	bool dwarf;
} req_rows[] = {
	{ "HELLO 1", 0, CTL_HELLO, 1000, 8192, true },
	{ "HELLO 7", 0, CTL_HELLO, 1000, 8192, true }, /* parsed; the server refuses 7 */
	{ "HELLO", -EPROTO, 0, 0, 0, false },
	{ "HELLO 1 2", -EPROTO, 0, 0, 0, false },
	{ "HELLO x", -EPROTO, 0, 0, 0, false },
	{ "HELLO 99999999999", -EPROTO, 0, 0, 0, false },
	{ "STATUS", 0, CTL_STATUS, 1000, 8192, true },
	{ "  STATUS  ", 0, CTL_STATUS, 1000, 8192, true },
	{ "STATUS now", -EINVAL, 0, 0, 0, false },
	{ "DETACH", 0, CTL_DETACH, 1000, 8192, true },
	{ "ATTACH", 0, CTL_ATTACH, 1000, 8192, true },
	{ "ATTACH freq=99 call_graph=fp", 0, CTL_ATTACH, 99, 64, false },
	{ "ATTACH call_graph=dwarf,100", 0, CTL_ATTACH, 1000, 104, true },
	{ "ATTACH call_graph=dwarf,65528", 0, CTL_ATTACH, 1000, 65528, true },
	{ "ATTACH call_graph=dwarf,65529", -EINVAL, 0, 0, 0, false },
	{ "ATTACH call_graph=dwarf,0", -EINVAL, 0, 0, 0, false },
	{ "ATTACH call_graph=dwarf,", -EINVAL, 0, 0, 0, false },
	{ "ATTACH call_graph=lbr", -EINVAL, 0, 0, 0, false },
	{ "ATTACH freq=0", -EINVAL, 0, 0, 0, false },
	{ "ATTACH freq=100001", -EINVAL, 0, 0, 0, false },
	{ "ATTACH freq=-1", -EINVAL, 0, 0, 0, false },
	{ "ATTACH freq=1 freq=2", -EINVAL, 0, 0, 0, false },
	{ "ATTACH bogus=1", -EINVAL, 0, 0, 0, false },
	{ "ATTACH freq", -EINVAL, 0, 0, 0, false },
	{ "attach", -EPROTO, 0, 0, 0, false },
	{ "", -EPROTO, 0, 0, 0, false },
	{ "   ", -EPROTO, 0, 0, 0, false },
};

static int test_requests(void)
{
	for (size_t i = 0; i < sizeof(req_rows) / sizeof(req_rows[0]); i++) {
		struct ctl_request r;
		char why[128];
		int err = ctl_parse_request(req_rows[i].line, strlen(req_rows[i].line), &r, why,
					    sizeof(why));

		if (err != req_rows[i].err)
			fprintf(stderr, "row '%s': %d (%s)\n", req_rows[i].line, err, why);
		ASSERT_EQ_INT(err, req_rows[i].err);
		if (err) {
			ASSERT_TRUE(why[0]);
			continue;
		}
		ASSERT_EQ_INT(r.verb, req_rows[i].verb);
		ASSERT_EQ_INT(r.freq, req_rows[i].freq);
		ASSERT_EQ_INT(r.stack_size, req_rows[i].stack);
		ASSERT_EQ_INT(r.dwarf, req_rows[i].dwarf);
	}
	return TEST_OK;
}

static int test_framing_and_replies(void)
{
	char big[CTL_MAX_LINE + 8], buf[CTL_MAX_LINE + 1], v[32];
	struct ctl_reply r;
	uint64_t n;
	size_t len;

	ASSERT_EQ_INT(ctl_line_find("STAT", 4, &len), 0);
	ASSERT_EQ_INT(ctl_line_find("STATUS\nX", 8, &len), 1);
	ASSERT_EQ_INT(len, 6);
	ASSERT_EQ_INT(ctl_line_find("ST\0TUS\n", 7, &len), -EPROTO);
	ASSERT_EQ_INT(ctl_line_find("ST\rTUS\n", 7, &len), -EPROTO);
	memset(big, 'A', sizeof(big));
	ASSERT_EQ_INT(ctl_line_find(big, CTL_MAX_LINE - 1, &len), 0);
	ASSERT_EQ_INT(ctl_line_find(big, CTL_MAX_LINE, &len), -E2BIG);
	big[CTL_MAX_LINE - 1] = '\n'; /* the longest message: 1023 bytes and its '\n' */
	ASSERT_EQ_INT(ctl_line_find(big, sizeof(big), &len), 1);

	ASSERT_EQ_INT(ctl_parse_reply("OK window=2 freq=1000", 21, &r), 0);
	ASSERT_EQ_INT(r.kind, CTL_REPLY_OK);
	ASSERT_EQ_INT(ctl_reply_get(&r, "window", v, sizeof(v)), 0);
	ASSERT_EQ_STR(v, "2");
	ASSERT_EQ_INT(ctl_reply_u64(&r, "freq", &n), 0);
	ASSERT_EQ_U64(n, 1000);
	ASSERT_EQ_INT(ctl_reply_get(&r, "win", v, sizeof(v)), -ENOENT);
	ASSERT_EQ_INT(ctl_reply_get(&r, "freq", v, 3), -E2BIG);
	ASSERT_EQ_INT(ctl_parse_reply("ERR EBUSY another one", 21, &r), 0);
	ASSERT_EQ_INT(r.kind, CTL_REPLY_ERR);
	ASSERT_EQ_INT(r.err, EBUSY);
	/* ATTACH before the VM started (vmm_start_ns 0): the client sees EAGAIN, not EIO */
	ASSERT_EQ_STR(ctl_err_name(EAGAIN), "EAGAIN");
	ASSERT_EQ_INT(ctl_parse_reply("ERR EAGAIN VM not started yet", 29, &r), 0);
	ASSERT_EQ_INT(r.err, EAGAIN);
	ASSERT_EQ_INT(ctl_parse_reply("ERR EWHAT x", 11, &r), 0);
	ASSERT_EQ_INT(r.err, EIO);
	ASSERT_EQ_INT(ctl_parse_reply("ERR", 3, &r), -EPROTO);
	ASSERT_EQ_INT(ctl_parse_reply("DONE reason=detached samples=5", 30, &r), 0);
	ASSERT_EQ_INT(r.kind, CTL_REPLY_DONE);
	ASSERT_EQ_INT(ctl_reply_u64(&r, "samples", &n), 0);
	ASSERT_EQ_U64(n, 5);
	ASSERT_EQ_INT(ctl_reply_u64(&r, "reason", &n), -EINVAL);
	ASSERT_EQ_INT(ctl_parse_reply("HELLO", 5, &r), -EPROTO);
	len = ctl_format_err(buf, sizeof(buf), EBUSY, "bad\x01" "byte");
	ASSERT_EQ_STR(buf, "ERR EBUSY bad?byte\n");
	ASSERT_EQ_INT(len, strlen(buf));
	memset(big, 'm', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	len = ctl_format_err(buf, sizeof(buf), EINVAL, big);
	ASSERT_TRUE(len <= CTL_MAX_LINE && buf[len - 1] == '\n');
	return TEST_OK;
}

/* ATTACH freq= against perf_event_max_sample_rate (the cycles counter only) */
static int test_freq_check(void)
{
	static const struct {
		uint32_t freq;
		const char *text;
		int err;
		uint32_t max;
	} rows[] = {
		{ 1000, "100000\n", 0, 0 },   { 100000, "100000\n", 0, 0 },
		{ 100000, "25000\n", -EINVAL, 25000 }, { 25001, "25000", -EINVAL, 25000 },
		{ 1, "0\n", -EINVAL, 0 },     { 5000, "", 0, 0 }, /* unreadable: the kernel decides */
		{ 5000, "abc", 0, 0 },        { 5000, "12x", 0, 0 },
		{ 5000, "99999999999\n", 0, 0 },
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint32_t max = 7;

		ASSERT_EQ_INT(ctl_freq_check(rows[i].freq, rows[i].text, &max), rows[i].err);
		if (rows[i].err)
			ASSERT_EQ_INT(max, rows[i].max);
	}
	return TEST_OK;
}

/* ---------------------------------------------------------------- the server, fake VM */

struct fake {
	int attaches, detaches, statuses, last_reason;
	int attach_err;
	bool failed;
};

static int fake_status(void *ctx, char *reply, size_t len)
{
	struct fake *f = ctx;

	snprintf(reply, len, "attached=%d statuses=%d", f->attaches > f->detaches, ++f->statuses);
	return 0;
}

static int fake_attach(void *ctx, const struct ctl_request *req, int fd, char *reply, size_t len)
{
	struct fake *f = ctx;

	if (f->attach_err)
		return f->attach_err;
	close(fd);
	snprintf(reply, len, "window=%d freq=%u", ++f->attaches, req->freq);
	return 0;
}

static int fake_detach(void *ctx, int reason, int exit_status, char *reply, size_t len)
{
	struct fake *f = ctx;

	f->detaches++;
	f->last_reason = reason;
	snprintf(reply, len, "reason=%d status=%d", reason, exit_status);
	return 0;
}

static bool fake_failed(void *ctx)
{
	return ((struct fake *)ctx)->failed;
}

static struct fake fk;
static const struct control_ops fake_ops = { .ctx = &fk, .status = fake_status,
					     .attach = fake_attach, .detach = fake_detach,
					     .window_failed = fake_failed };

/* A server with one client on a socketpair: *@cl is the client's end. */
static struct control_server *server_with_client(int *cl, unsigned int idle_ms)
{
	struct control_config cfg = { .idle_ms = idle_ms };
	struct control_server *srv;
	int sv[2];

	memset(&fk, 0, sizeof(fk));
	if (control_server_create(&cfg, &fake_ops, &srv) != 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return NULL;
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	if (control_server_adopt(srv, sv[1]) != 0)
		return NULL;
	*cl = sv[0];
	return srv;
}

/* Send @text (with @pass_fd >= 0), let the server step, and read what it answered into @out
 * ("" if nothing; "EOF" if it closed the connection). */
static void exchange(struct control_server *srv, int cl, const char *text, int pass_fd,
		     char *out, size_t len)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { (void *)text, strlen(text) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t r;

	if (pass_fd >= 0) {
		struct cmsghdr *cm;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
	}
	if (iov.iov_len && sendmsg(cl, &mh, MSG_NOSIGNAL) < 0)
		perror("sendmsg");
	control_server_step(srv, 50);
	r = recv(cl, out, len - 1, MSG_DONTWAIT);
	if (r == 0)
		snprintf(out, len, "EOF");
	else
		out[r > 0 ? r : 0] = '\0';
}

static int test_server_handshake_and_garbage(void)
{
	char out[CTL_MAX_LINE * 2];
	struct control_server *srv;
	int cl;

	/* garbage first: an error, then the connection is closed; the server goes on */
	srv = server_with_client(&cl, 1000);
	ASSERT_TRUE(srv);
	exchange(srv, cl, "\x7f\x01garbage\n", -1, out, sizeof(out));
	ASSERT_TRUE(!strncmp(out, "ERR EPROTO", 10));
	exchange(srv, cl, "", -1, out, sizeof(out));
	ASSERT_EQ_STR(out, "EOF");
	close(cl);
	control_server_destroy(srv);

	/* no handshake; then a version not spoken */
	srv = server_with_client(&cl, 1000);
	exchange(srv, cl, "STATUS\n", -1, out, sizeof(out));
	ASSERT_TRUE(!strncmp(out, "ERR EPROTO say HELLO", 20));
	close(cl);
	control_server_step(srv, 10);
	control_server_destroy(srv);
	srv = server_with_client(&cl, 1000);
	exchange(srv, cl, "HELLO 2\n", -1, out, sizeof(out));
	ASSERT_TRUE(!strncmp(out, "ERR EPROTONOSUPPORT", 19));
	close(cl);
	control_server_destroy(srv);

	/* a good client: two messages in one write */
	srv = server_with_client(&cl, 1000);
	exchange(srv, cl, "HELLO 1\nSTATUS\n", -1, out, sizeof(out));
	ASSERT_EQ_STR(out, "OK version=1\nOK attached=0 statuses=1 exec=none\n");
	exchange(srv, cl, "DETACH\n", -1, out, sizeof(out));
	ASSERT_TRUE(!strncmp(out, "ERR EALREADY", 12));
	close(cl);
	control_server_destroy(srv);
	return TEST_OK;
}

static int test_server_half_and_long_messages(void)
{
	char out[CTL_MAX_LINE * 2], big[CTL_MAX_LINE + 16];
	struct control_server *srv;
	int cl;

	/* half a message, then the client vanishes: dropped, nothing attached */
	srv = server_with_client(&cl, 1000);
	exchange(srv, cl, "HELLO 1\nATTA", -1, out, sizeof(out));
	ASSERT_EQ_STR(out, "OK version=1\n");
	close(cl);
	control_server_step(srv, 10);
	ASSERT_EQ_INT(fk.attaches, 0);
	ASSERT_EQ_INT(control_server_adopt(srv, -1), 0); /* the client slot is free again */
	control_server_destroy(srv);

	/* a slow client: half a message and then nothing; dropped at the idle timeout */
	srv = server_with_client(&cl, 100);
	exchange(srv, cl, "HELLO 1\nSTAT", -1, out, sizeof(out));
	for (int i = 0; i < 10; i++)
		control_server_step(srv, 20);
	ASSERT_EQ_INT(recv(cl, out, sizeof(out), MSG_DONTWAIT), 0); /* closed */
	close(cl);
	control_server_destroy(srv);

	/* a message longer than CTL_MAX_LINE */
	srv = server_with_client(&cl, 1000);
	memset(big, 'A', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	exchange(srv, cl, big, -1, out, sizeof(out));
	ASSERT_TRUE(!strncmp(out, "ERR E2BIG", 9));
	close(cl);
	control_server_destroy(srv);
	return TEST_OK;
}

static int test_server_attach_detach(void)
{
	char out[CTL_MAX_LINE * 2], path[] = "/tmp/hvprof-test-ctl-XXXXXX";
	struct control_server *srv;
	int cl, cl2, sv[2], rec = mkstemp(path);

	ASSERT_TRUE(rec >= 0);
	unlink(path);
	srv = server_with_client(&cl, 1000);
	/* ATTACH without an fd */
	exchange(srv, cl, "HELLO 1\n", -1, out, sizeof(out));
	exchange(srv, cl, "ATTACH\n", -1, out, sizeof(out));
	ASSERT_TRUE(!strncmp(out, "ERR EBADF", 9));
	/* a read-only fd is refused */
	{
		int ro = open("/dev/null", O_RDONLY);

		exchange(srv, cl, "ATTACH\n", ro, out, sizeof(out));
		ASSERT_TRUE(!strncmp(out, "ERR EBADF", 9));
		close(ro);
	}
	/* a pipe (or FIFO, socket, char device) is refused: a slow reader would block a vCPU in
	 * write() under the sink's lock, a vanished one would raise SIGPIPE in the VM */
	{
		int p[2];

		ASSERT_EQ_INT(pipe(p), 0);
		exchange(srv, cl, "ATTACH\n", p[1], out, sizeof(out));
		ASSERT_EQ_STR(out, "ERR EBADF recording must be a regular file\n");
		ASSERT_EQ_INT(fk.attaches, 0);
		close(p[0]);
		close(p[1]);
	}
	{
		int dn = open("/dev/null", O_WRONLY);

		exchange(srv, cl, "ATTACH\n", dn, out, sizeof(out));
		ASSERT_EQ_STR(out, "ERR EBADF recording must be a regular file\n");
		close(dn);
	}
	exchange(srv, cl, "ATTACH freq=250\n", rec, out, sizeof(out));
	ASSERT_EQ_STR(out, "OK window=1 freq=250\n");
	ASSERT_TRUE(control_server_attached(srv));
	/* a second client while attached: its ATTACH is refused, STATUS works */
	ASSERT_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ASSERT_EQ_INT(control_server_adopt(srv, sv[1]), 0);
	cl2 = sv[0];
	exchange(srv, cl2, "HELLO 1\nATTACH\n", rec, out, sizeof(out));
	ASSERT_TRUE(strstr(out, "ERR EBUSY"));
	exchange(srv, cl2, "STATUS\n", -1, out, sizeof(out));
	ASSERT_TRUE(!strncmp(out, "OK attached=1", 13));
	close(cl2);
	control_server_step(srv, 10);
	/* the attached client detaches: DONE, then closed */
	exchange(srv, cl, "DETACH\n", -1, out, sizeof(out));
	ASSERT_EQ_STR(out, "DONE reason=7 status=0\n");
	ASSERT_EQ_INT(fk.last_reason, HVP_END_DETACHED);
	ASSERT_TRUE(!control_server_attached(srv));
	close(cl);

	/* an attached client that vanishes is detached */
	ASSERT_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ASSERT_EQ_INT(control_server_adopt(srv, sv[1]), 0);
	exchange(srv, sv[0], "HELLO 1\nATTACH\n", rec, out, sizeof(out));
	ASSERT_TRUE(strstr(out, "OK window=2"));
	close(sv[0]);
	control_server_step(srv, 10);
	ASSERT_EQ_INT(fk.detaches, 2);
	ASSERT_TRUE(!control_server_attached(srv));

	/* the VM ends with a window open: DONE with its reason, then the server finishes */
	ASSERT_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ASSERT_EQ_INT(control_server_adopt(srv, sv[1]), 0);
	exchange(srv, sv[0], "HELLO 1\nATTACH\n", rec, out, sizeof(out));
	control_server_end(srv, HVP_END_EXIT_DEVICE, 3);
	ASSERT_EQ_INT(control_server_step(srv, 10), 1);
	ASSERT_EQ_INT(recv(sv[0], out, sizeof(out) - 1, 0), 23);
	out[23] = '\0';
	ASSERT_EQ_STR(out, "DONE reason=1 status=3\n");
	close(sv[0]);
	control_server_destroy(srv);
	close(rec);
	return TEST_OK;
}

static int test_server_socket_file(void)
{
	struct control_config cfg = { 0 };
	struct control_server *srv, *srv2;
	char dir[] = "/tmp/hvprof-test-sock-XXXXXX", path[128];
	struct stat st;
	int fd;

	ASSERT_TRUE(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/ctl", dir);
	cfg.path = path;
	fd = open(path, O_CREAT | O_WRONLY, 0600); /* a file in the way is never replaced */
	close(fd);
	ASSERT_EQ_INT(control_server_create(&cfg, &fake_ops, &srv), -EEXIST);
	unlink(path);
	ASSERT_EQ_INT(control_server_create(&cfg, &fake_ops, &srv), 0);
	ASSERT_EQ_INT(lstat(path, &st), 0);
	ASSERT_TRUE(S_ISSOCK(st.st_mode));
	ASSERT_EQ_INT(st.st_mode & 0777, 0600);
	ASSERT_EQ_INT(control_server_create(&cfg, &fake_ops, &srv2), -EADDRINUSE);
	ASSERT_EQ_INT(lstat(path, &st), 0); /* the refused one left the live socket alone */
	control_server_destroy(srv);
	ASSERT_TRUE(lstat(path, &st) != 0); /* removed */
	/* another server holds PATH.lock (its socket not bound or not listening yet): refused,
	 * and nothing at the path is touched */
	{
		char lock[140];
		int lfd;

		snprintf(lock, sizeof(lock), "%s.lock", path);
		lfd = open(lock, O_RDWR | O_CREAT, 0600);
		ASSERT_EQ_INT(flock(lfd, LOCK_EX | LOCK_NB), 0);
		ASSERT_EQ_INT(control_server_create(&cfg, &fake_ops, &srv2), -EADDRINUSE);
		ASSERT_TRUE(lstat(path, &st) != 0);
		close(lfd);
		ASSERT_EQ_INT(control_server_create(&cfg, &fake_ops, &srv), 0); /* released */
		control_server_destroy(srv);
		unlink(lock);
	}
	rmdir(dir);
	return TEST_OK;
}

/* record --attach removes a refused attach's recording only if it is the empty regular file it
 * created: never /dev/null, a file that was there, one replaced since, or one with data. */
static int test_client_output_discard(void)
{
	char dir[] = "/tmp/hvprof-test-out-XXXXXX", path[128], other[140];
	int fd, fd2;

	ASSERT_TRUE(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/rec.hvp", dir);
	snprintf(other, sizeof(other), "%s/other", dir);
	/* /dev/null opened for writing (as root, -o /dev/null): not ours */
	fd = open("/dev/null", O_WRONLY);
	ASSERT_EQ_INT(ctl_output_discard("/dev/null", fd, false), -EPERM);
	ASSERT_EQ_INT(ctl_output_discard("/dev/null", fd, true), -ESTALE); /* not regular */
	close(fd);
	/* created by us and empty: removed */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(ctl_output_discard(path, fd, true), 0);
	ASSERT_TRUE(access(path, F_OK) != 0);
	close(fd);
	/* created by us, but written to (the VM attached after all): kept */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ASSERT_EQ_INT(write(fd, "HVPROF", 6), 6);
	ASSERT_EQ_INT(ctl_output_discard(path, fd, true), -ENOTEMPTY);
	ASSERT_EQ_INT(access(path, F_OK), 0);
	close(fd);
	unlink(path);
	/* created by us, then replaced by another file (or a symlink) at the path: kept */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	fd2 = open(other, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ASSERT_EQ_INT(rename(other, path), 0);
	ASSERT_EQ_INT(ctl_output_discard(path, fd, true), -ESTALE);
	ASSERT_EQ_INT(access(path, F_OK), 0);
	unlink(path);
	ASSERT_EQ_INT(symlink("/dev/null", path), 0);
	ASSERT_EQ_INT(ctl_output_discard(path, fd, true), -ESTALE);
	ASSERT_EQ_INT(access("/dev/null", F_OK), 0);
	unlink(path);
	close(fd);
	close(fd2);
	rmdir(dir);
	return TEST_OK;
}

static volatile sig_atomic_t got_usr1;

static void on_usr1(int sig)
{
	got_usr1 = sig;
}

/* record --attach's wait: a signal that arrives between the check of its flag and the wait
 * (here: before the call, while blocked) ends the wait at once instead of being lost; huge
 * timeouts are clamped, not wrapped to a negative poll timeout. */
static int test_client_wait_no_lost_signal(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 }, old_sa;
	sigset_t usr1, old, wait_mask;
	uint64_t t0;
	int sv[2];

	ASSERT_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, &old_sa);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, &old);
	wait_mask = old;
	sigdelset(&wait_mask, SIGUSR1);
	ASSERT_EQ_INT(ctl_wait_readable(sv[0], 10, &wait_mask), 0); /* nothing: timed out */
	got_usr1 = 0;
	raise(SIGUSR1); /* the Ctrl-C "between the check and the wait": pending */
	t0 = (uint64_t)time(NULL);
	ASSERT_EQ_INT(ctl_wait_readable(sv[0], 30000, &wait_mask), -EINTR);
	ASSERT_TRUE((uint64_t)time(NULL) - t0 < 5);
	ASSERT_EQ_INT(got_usr1, SIGUSR1);
	ASSERT_EQ_INT(write(sv[1], "x", 1), 1);
	ASSERT_EQ_INT(ctl_wait_readable(sv[0], UINT64_MAX / 2, &wait_mask), 1); /* clamped */
	ASSERT_EQ_INT(ctl_wait_readable(sv[0], 0, NULL), 1);
	sigprocmask(SIG_SETMASK, &old, NULL);
	sigaction(SIGUSR1, &old_sa, NULL);
	close(sv[0]);
	close(sv[1]);
	return TEST_OK;
}

int main(void)
{
	static const struct test_case tests[] = {
		{ "protocol: requests", test_requests },
		{ "protocol: framing and replies", test_framing_and_replies },
		{ "protocol: freq against perf_event_max_sample_rate", test_freq_check },
		{ "server: handshake, garbage", test_server_handshake_and_garbage },
		{ "server: half, slow and overlong messages", test_server_half_and_long_messages },
		{ "server: attach, a second attach, detach, vanishing, the VM's end",
		  test_server_attach_detach },
		{ "server: socket file (0600, refused, removed)", test_server_socket_file },
		{ "client: a refused attach's recording is removed only if ours",
		  test_client_output_discard },
		{ "client: a signal before the wait is not lost; timeouts clamped",
		  test_client_wait_no_lost_signal },
	};

	return test_run_all(tests, sizeof(tests) / sizeof(tests[0]));
}
