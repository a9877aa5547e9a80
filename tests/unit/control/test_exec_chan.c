// SPDX-License-Identifier: MIT
// Unit tests of the command channel (cli/control_exec.c, cli/control_proto.c EXEC/POWEROFF):
// the parser of what the guest's hvprof-execd sends (split anywhere, garbage, bounds), EXEC's
// escaping both ways, and the server's EXEC flow over a socketpair with a fake guest: not ready,
// the command's bytes to the guest, output and status to the client, one at a time, a client
// that vanishes (its command killed), POWEROFF, and the VM's end while a command runs.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hvprof/sample.h>

#include "control.h"
#include "test.h"

/* ---------------------------------------------------------------- the guest's frames */

struct seen {
	char text[512]; /* what the parser reported, as "R1 O1:abc X3 " */
	size_t len;
};

static void seen_add(struct seen *s, const char *tag, long a, const char *buf, size_t n)
{
	if (tag[0])
		s->len += (size_t)snprintf(s->text + s->len, sizeof(s->text) - s->len, "%c%ld%s",
					   tag[0], a, tag + 1);
	else
		s->len += (size_t)snprintf(s->text + s->len, sizeof(s->text) - s->len, " ");
	for (size_t i = 0; i < n && s->len + 5 < sizeof(s->text); i++) {
		unsigned char c = (unsigned char)buf[i];

		s->len += (size_t)snprintf(s->text + s->len, sizeof(s->text) - s->len,
					   c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
	}
}

static void r_ready(void *ctx, uint32_t v) { seen_add(ctx, "R ", v, NULL, 0); }
static void r_out(void *ctx, int fd, const char *buf, size_t len)
{
	seen_add(ctx, "O:", fd, buf, len);
	seen_add(ctx, "", 0, NULL, 0);
}
static void r_exit(void *ctx, int st) { seen_add(ctx, "X ", st, NULL, 0); }
static const struct exec_rx_ops rx_ops = { .ready = r_ready, .out = r_out, .exit = r_exit };

static int test_rx_frames(void)
{
	static const char stream[] = "R 1\nO 1 5\na\0b\r\nO 2 1\n\nX 3\n";
	struct exec_rx rx;
	struct seen s;

	/* whole */
	memset(&s, 0, sizeof(s));
	exec_rx_init(&rx);
	exec_rx_feed(&rx, stream, sizeof(stream) - 1, &rx_ops, &s);
	ASSERT_EQ_STR(s.text, "R1 O1:a\\x00b\\x0d\\x0a O2:\\x0a X3 ");
	ASSERT_EQ_U64(rx.bad_frames, 0);
	/* one byte at a time: the same frames (O's bytes come one by one) */
	memset(&s, 0, sizeof(s));
	exec_rx_init(&rx);
	for (size_t i = 0; i < sizeof(stream) - 1; i++)
		exec_rx_feed(&rx, stream + i, 1, &rx_ops, &s);
	ASSERT_EQ_STR(s.text, "R1 O1:a O1:\\x00 O1:b O1:\\x0d O1:\\x0a O2:\\x0a X3 ");
	ASSERT_EQ_U64(rx.bad_frames, 0);
	return TEST_OK;
}

static int test_rx_garbage(void)
{
	struct exec_rx rx;
	struct seen s;
	char big[200];
	/* each bad line is counted and skipped; the good frames between them still parse */
	static const char *bad[] = {
		"hello\n",	   "O 3 1\n",     "O 1 0\n",  "O 1 4097\n", "X 256\n",
		"X -1\n",	   "R\n",	  "O 1\n",    "O x 1\n",    "X 1 2\n",
		"R 99999999999\n", "\x01\x02\n", "O  1 1\n",
	};

	memset(&s, 0, sizeof(s));
	exec_rx_init(&rx);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		exec_rx_feed(&rx, bad[i], strlen(bad[i]), &rx_ops, &s);
		exec_rx_feed(&rx, "X 7\n", 4, &rx_ops, &s);
	}
	ASSERT_EQ_U64(rx.bad_frames, sizeof(bad) / sizeof(bad[0]));
	ASSERT_EQ_INT((int)s.len, (int)(3 * (sizeof(bad) / sizeof(bad[0])))); /* "X7 " each */
	/* a header longer than 32 bytes: skipped to its '\n', then parsing resumes */
	memset(big, 'O', sizeof(big));
	big[sizeof(big) - 1] = '\n';
	memset(&s, 0, sizeof(s));
	exec_rx_init(&rx);
	exec_rx_feed(&rx, big, sizeof(big), &rx_ops, &s);
	exec_rx_feed(&rx, "O 2 2\nok", 8, &rx_ops, &s);
	ASSERT_EQ_STR(s.text, "O2:ok ");
	ASSERT_EQ_U64(rx.bad_frames, 1);
	/* the largest chunk is taken */
	memset(&s, 0, sizeof(s));
	exec_rx_init(&rx);
	exec_rx_feed(&rx, "O 1 4096\n", 9, &rx_ops, &s);
	ASSERT_EQ_U64(rx.left, 4096);
	return TEST_OK;
}

/* ---------------------------------------------------------------- EXEC's escaping */

static int test_exec_escaping(void)
{
	static const char cmd[] = "printf 'a\\tb\"\n' | cat \xff~";
	struct ctl_request req;
	char line[CTL_MAX_LINE], why[128];
	size_t n;

	memcpy(line, "EXEC ", 5);
	n = ctl_exec_encode(cmd, sizeof(cmd) - 1, line + 5, sizeof(line) - 5);
	ASSERT_TRUE(n > 0);
	/* printable ASCII as it is; backslash, newline and 0xff as \ooo */
	ASSERT_EQ_STR(line + 5, "printf 'a\\134tb\"\\012' | cat \\377~");
	ASSERT_EQ_INT(ctl_parse_request(line, 5 + n, &req, why, sizeof(why)), 0);
	ASSERT_EQ_INT(req.verb, CTL_EXEC);
	ASSERT_EQ_U64(req.cmd_len, sizeof(cmd) - 1);
	ASSERT_TRUE(!memcmp(req.cmd, cmd, sizeof(cmd) - 1));
	/* refused: a NUL in the command, escapes that are not three octal digits 001..377 */
	ASSERT_EQ_U64(ctl_exec_encode("a\0b", 3, line, sizeof(line)), 0);
	ASSERT_EQ_U64(ctl_exec_encode("abcdef", 6, line, 4), 0);
	ASSERT_EQ_INT(ctl_parse_request("EXEC a\\000", 10, &req, why, sizeof(why)), -EINVAL);
	ASSERT_EQ_INT(ctl_parse_request("EXEC a\\400", 10, &req, why, sizeof(why)), -EINVAL);
	ASSERT_EQ_INT(ctl_parse_request("EXEC a\\18", 9, &req, why, sizeof(why)), -EINVAL);
	ASSERT_EQ_INT(ctl_parse_request("EXEC a\\", 7, &req, why, sizeof(why)), -EINVAL);
	ASSERT_EQ_INT(ctl_parse_request("EXEC", 4, &req, why, sizeof(why)), -EINVAL);
	ASSERT_EQ_INT(ctl_parse_request("EXEC ", 5, &req, why, sizeof(why)), -EINVAL);
	/* spaces are the command's own: kept */
	ASSERT_EQ_INT(ctl_parse_request("EXEC  a  b ", 11, &req, why, sizeof(why)), 0);
	ASSERT_EQ_STR(req.cmd, " a  b ");
	/* POWEROFF */
	ASSERT_EQ_INT(ctl_parse_request("POWEROFF", 8, &req, why, sizeof(why)), 0);
	ASSERT_EQ_INT(req.status, 0);
	ASSERT_EQ_INT(ctl_parse_request("POWEROFF status=42", 18, &req, why, sizeof(why)), 0);
	ASSERT_EQ_INT(req.status, 42);
	ASSERT_EQ_INT(ctl_parse_request("POWEROFF status=256", 19, &req, why, sizeof(why)),
		      -EINVAL);
	ASSERT_EQ_INT(ctl_parse_request("POWEROFF 3", 10, &req, why, sizeof(why)), -EINVAL);
	return TEST_OK;
}

/* ---------------------------------------------------------------- the server's EXEC */

struct fake_guest {
	char got[8192]; /* what the server sent to the guest */
	size_t len;
	size_t room;    /* bytes the guest's receive buffer takes */
};

static struct fake_guest fg;

static ssize_t fake_send(void *ctx, const void *buf, size_t len)
{
	size_t n = len < fg.room ? len : fg.room;

	memcpy(fg.got + fg.len, buf, n);
	fg.len += n;
	fg.room -= n;
	return (ssize_t)n;
}

static int fake_status(void *ctx, char *reply, size_t len)
{
	snprintf(reply, len, "attached=0");
	return 0;
}

static int fake_attach(void *ctx, const struct ctl_request *req, int fd, char *r, size_t len)
{
	return -ENOTSUP;
}

static int fake_detach(void *ctx, int reason, int exit_status, char *reply, size_t len)
{
	return 0;
}

static const struct control_ops ops = { .status = fake_status, .attach = fake_attach,
					.detach = fake_detach, .cmd_send = fake_send };

/* A new client of @srv, after its handshake: its end of the socketpair. */
static int client(struct control_server *srv)
{
	char buf[64];
	int sv[2];
	ssize_t r;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	if (control_server_adopt(srv, sv[1]) != 0)
		return -1;
	if (write(sv[0], "HELLO 1\n", 8) != 8)
		return -1;
	control_server_step(srv, 50);
	r = recv(sv[0], buf, sizeof(buf) - 1, MSG_DONTWAIT);
	if (r != 13 || memcmp(buf, "OK version=1\n", 13))
		return -1;
	return sv[0];
}

/* Send @text, step, and read what came back ("EOF" once closed). */
static void say(struct control_server *srv, int cl, const char *text, char *out, size_t len)
{
	ssize_t r;

	if (text[0] && write(cl, text, strlen(text)) < 0)
		perror("write");
	control_server_step(srv, 50);
	r = recv(cl, out, len - 1, MSG_DONTWAIT);
	if (r == 0)
		snprintf(out, len, "EOF");
	else
		out[r > 0 ? r : 0] = '\0';
}

/* The guest sends @text on COM2; the server steps. */
static void guest_says(struct control_server *srv, int pipe_w, const char *text, size_t len)
{
	if (write(pipe_w, text, len) != (ssize_t)len)
		perror("write");
	control_server_step(srv, 50);
}

static int test_server_exec(void)
{
	struct control_config cfg = { .chan = true };
	struct control_server *srv;
	char out[512];
	int pipe_fd[2], cl, cl2;

	memset(&fg, 0, sizeof(fg));
	fg.room = sizeof(fg.got);
	ASSERT_EQ_INT(pipe2(pipe_fd, O_CLOEXEC | O_NONBLOCK), 0);
	cfg.chan_fd = pipe_fd[0];
	ASSERT_EQ_INT(control_server_create(&cfg, &ops, &srv), 0);
	cl = client(srv);
	ASSERT_TRUE(cl >= 0);
	/* the guest's server has not said ready: EAGAIN, and the connection stays */
	say(srv, cl, "EXEC echo hi\n", out, sizeof(out));
	ASSERT_TRUE(!strncmp(out, "ERR EAGAIN ", 11));
	ASSERT_EQ_U64(fg.len, 0);
	guest_says(srv, pipe_fd[1], "R 1\n", 4);
	/* POWEROFF is refused while a command runs; EXEC goes to the guest as C LEN + bytes */
	say(srv, cl, "EXEC echo \\134hi\n", out, sizeof(out));
	ASSERT_EQ_STR(out, "OK exec=1\n");
	ASSERT_EQ_INT((int)fg.len, 12);
	ASSERT_TRUE(!memcmp(fg.got, "C 8\necho \\hi", 12));
	/* a second client: one command at a time */
	cl2 = client(srv);
	ASSERT_TRUE(cl2 >= 0);
	say(srv, cl2, "EXEC true\n", out, sizeof(out));
	ASSERT_TRUE(!strncmp(out, "ERR EBUSY ", 10));
	say(srv, cl2, "POWEROFF\n", out, sizeof(out));
	ASSERT_TRUE(!strncmp(out, "ERR EBUSY ", 10));
	/* output (binary, in pieces) and the status reach the first client; then it is closed */
	guest_says(srv, pipe_fd[1], "O 1 3\nh\0", 8);
	guest_says(srv, pipe_fd[1], "\nO 2 2\ne\n", 9);
	guest_says(srv, pipe_fd[1], "garbage\nX 0\n", 12);
	{
		static const char want[] = "OUT 1 2\nh\0OUT 1 1\n\nOUT 2 2\ne\nEXIT status=0\n";

		ASSERT_EQ_INT((int)recv(cl, out, sizeof(out), MSG_DONTWAIT), (int)sizeof(want) - 1);
		ASSERT_TRUE(!memcmp(out, want, sizeof(want) - 1));
	}
	ASSERT_EQ_INT((int)recv(cl, out, sizeof(out), MSG_DONTWAIT), 0);
	close(cl);
	/* the next command's client vanishes: the command is killed (K), its output dropped */
	fg.len = 0;
	say(srv, cl2, "EXEC sleep 100\n", out, sizeof(out));
	ASSERT_EQ_STR(out, "OK exec=2\n");
	close(cl2);
	control_server_step(srv, 50);
	ASSERT_EQ_INT((int)fg.len, 15);
	ASSERT_TRUE(!memcmp(fg.got, "C 9\nsleep 100K\n", 15));
	/* until its X comes, the next EXEC waits (EAGAIN: the client retries) */
	cl = client(srv);
	ASSERT_TRUE(cl >= 0);
	say(srv, cl, "EXEC true\n", out, sizeof(out));
	ASSERT_TRUE(!strncmp(out, "ERR EAGAIN ", 11));
	close(cl);
	guest_says(srv, pipe_fd[1], "O 1 2\nzzX 137\n", 14);
	/* POWEROFF once idle: Q STATUS to the guest */
	cl = client(srv);
	ASSERT_TRUE(cl >= 0);
	fg.len = 0;
	say(srv, cl, "POWEROFF status=9\n", out, sizeof(out));
	ASSERT_EQ_STR(out, "OK status=9\n");
	ASSERT_EQ_INT((int)fg.len, 4);
	ASSERT_TRUE(!memcmp(fg.got, "Q 9\n", 4));
	close(cl);
	control_server_destroy(srv);
	close(pipe_fd[0]);
	close(pipe_fd[1]);
	return TEST_OK;
}

static int test_server_exec_end_and_full(void)
{
	struct control_config cfg = { .chan = true };
	struct control_server *srv;
	char out[512];
	int pipe_fd[2], cl;

	memset(&fg, 0, sizeof(fg));
	fg.room = 5; /* the guest's receive buffer takes 5 bytes now: the rest goes later, whole */
	ASSERT_EQ_INT(pipe2(pipe_fd, O_CLOEXEC | O_NONBLOCK), 0);
	cfg.chan_fd = pipe_fd[0];
	ASSERT_EQ_INT(control_server_create(&cfg, &ops, &srv), 0);
	guest_says(srv, pipe_fd[1], "R 1\n", 4);
	cl = client(srv);
	ASSERT_TRUE(cl >= 0);
	say(srv, cl, "EXEC sleep 5\n", out, sizeof(out));
	ASSERT_EQ_STR(out, "OK exec=1\n");
	ASSERT_EQ_INT((int)fg.len, 5);
	control_server_step(srv, 10);
	ASSERT_EQ_INT((int)fg.len, 5); /* still full */
	fg.room = sizeof(fg.got);
	control_server_step(srv, 10);
	ASSERT_EQ_INT((int)fg.len, 11);
	ASSERT_TRUE(!memcmp(fg.got, "C 7\nsleep 5", 11));
	/* the VM ends while it runs: END with the reason, then closed */
	control_server_end(srv, HVP_END_EXIT_DEVICE, 0);
	control_server_step(srv, 50);
	ASSERT_EQ_INT((int)recv(cl, out, sizeof(out) - 1, MSG_DONTWAIT), 16);
	ASSERT_TRUE(!memcmp(out, "END reason=exit\n", 16));
	close(cl);
	control_server_destroy(srv);
	close(pipe_fd[0]);
	close(pipe_fd[1]);
	/* a VM without a channel: ENOTSUP */
	cfg.chan = false;
	ASSERT_EQ_INT(control_server_create(&cfg, &ops, &srv), 0);
	cl = client(srv);
	ASSERT_TRUE(cl >= 0);
	say(srv, cl, "EXEC true\n", out, sizeof(out));
	ASSERT_TRUE(!strncmp(out, "ERR ENOTSUP ", 12));
	close(cl);
	control_server_destroy(srv);
	return TEST_OK;
}

static int kicks;

static void fake_kick(void *ctx)
{
	kicks++;
}

/* A client that does not read: its output queues up to the high mark, then the guest's pipe
 * is left unread (its UART holds back); once it reads, every byte arrives in order. A client
 * that shuts only its writing side still gets its output. */
static int test_server_exec_slow_client(void)
{
	struct control_ops kops = ops;
	struct control_config cfg = { .chan = true };
	struct control_server *srv;
	static char frame[EXEC_MAX_CHUNK + 16], got[1 << 20];
	size_t total = 0, want = 0, in_pipe;
	char out[64];
	int pipe_fd[2], cl, sz = 4096;
	ssize_t r;

	memset(&fg, 0, sizeof(fg));
	fg.room = sizeof(fg.got);
	kops.cmd_kick = fake_kick;
	ASSERT_EQ_INT(pipe2(pipe_fd, O_CLOEXEC | O_NONBLOCK), 0);
	fcntl(pipe_fd[1], F_SETPIPE_SZ, 1 << 20);
	cfg.chan_fd = pipe_fd[0];
	ASSERT_EQ_INT(control_server_create(&cfg, &kops, &srv), 0);
	guest_says(srv, pipe_fd[1], "R 1\n", 4);
	cl = client(srv);
	ASSERT_TRUE(cl >= 0);
	setsockopt(cl, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	say(srv, cl, "EXEC cat big\n", out, sizeof(out));
	ASSERT_EQ_STR(out, "OK exec=1\n");
	shutdown(cl, SHUT_WR); /* `printf 'EXEC ...' | socat`: still reading */
	/* 64 chunks of 4096 bytes (256 KiB) of a counting pattern, then the end */
	for (int i = 0; i < 64; i++) {
		int n = snprintf(frame, sizeof(frame), "O 1 %d\n", EXEC_MAX_CHUNK);

		for (int k = 0; k < EXEC_MAX_CHUNK; k++)
			frame[n + k] = (char)('a' + (want + (size_t)k) % 26);
		want += EXEC_MAX_CHUNK;
		ASSERT_EQ_INT((int)write(pipe_fd[1], frame, (size_t)n + EXEC_MAX_CHUNK),
			      n + EXEC_MAX_CHUNK);
	}
	ASSERT_EQ_INT((int)write(pipe_fd[1], "X 0\n", 4), 4);
	for (int i = 0; i < 20; i++)
		control_server_step(srv, 5);
	ioctl(pipe_fd[0], FIONREAD, &sz);
	in_pipe = (size_t)sz;
	ASSERT_TRUE(in_pipe > 64 * 1024); /* held back: the guest was not read past the mark */
	ASSERT_TRUE(kicks > 0);
	/* now read it all */
	for (int i = 0; i < 5000; i++) {
		control_server_step(srv, 2);
		r = recv(cl, got + total, sizeof(got) - total, MSG_DONTWAIT);
		if (r == 0)
			break;
		if (r > 0)
			total += (size_t)r;
	}
	close(cl);
	{
		size_t off = 0, data = 0;
		bool order = true;
		unsigned int fd;
		size_t len;
		int used;

		while (off < total && sscanf(got + off, "OUT %u %zu\n%n", &fd, &len, &used) == 2) {
			off += (size_t)used;
			for (size_t k = 0; k < len && off + k < total; k++)
				order &= got[off + k] == (char)('a' + (data + k) % 26);
			data += len;
			off += len;
		}
		ASSERT_EQ_U64(data, want);
		ASSERT_TRUE(order);
		ASSERT_TRUE(off < total && !strncmp(got + off, "EXIT status=0\n", 14));
	}
	control_server_destroy(srv);
	close(pipe_fd[0]);
	close(pipe_fd[1]);
	return TEST_OK;
}

int main(void)
{
	static const struct test_case tests[] = {
		{ "guest frames: whole and byte by byte", test_rx_frames },
		{ "guest frames: garbage, bounds, resync", test_rx_garbage },
		{ "EXEC and POWEROFF: escaping both ways, refusals", test_exec_escaping },
		{ "server: EXEC not ready, runs, one at a time, output, kill, poweroff",
		  test_server_exec },
		{ "server: a client that reads slowly (the guest is held back, nothing lost), "
		  "one that shuts its writing side", test_server_exec_slow_client },
		{ "server: a full receive buffer (the frame goes whole, later), the VM's end, "
		  "no channel",
		  test_server_exec_end_and_full },
	};

	return test_run_all(tests, sizeof(tests) / sizeof(tests[0]));
}
