// SPDX-License-Identifier: MIT
// hvprof-execd [TTY]: the bundled images' command server (docs/guest-interface.md, "The command
// channel"). Run by /init when hvprof booted the guest with `run --control` and no --run
// (kernel command line hvprof_serve=1): it opens TTY (default /dev/ttyS1: hvprof's COM2) raw,
// says it is ready, and runs each command hvprof sends with /bin/sh -c, one at a time, between
// the events "workload start" and "workload end" (the exit register, as the inits do), relaying
// the command's stdout and stderr and then its status. It ends when hvprof asks it to, with the
// status asked for, which /init then reports as the guest's exit status.
//
// Frames (version 1; a header line of printable ASCII, then the bytes it announces):
//   guest -> host: "R 1\n" ready; "O FD LEN\n" + LEN bytes (FD 1: stdout, 2: stderr, LEN
//                  1..4096); "X STATUS\n" the command ended (0..255, 128+N: killed by signal N)
//   host -> guest: "C LEN\n" + LEN bytes: run this command (LEN 1..4096); "K\n" kill the running
//                  command's process group; "Q STATUS\n" end the server with STATUS
// Built static for both images (the Debian one with Debian's flags), so it needs nothing from a
// disk once started.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define EXIT_REG_GPA 0xd0000000UL
#define EVENT_MAGIC 0x48450000U
#define EVENT_WORKLOAD_START 2
#define EVENT_WORKLOAD_END 3
#define MAX_CMD 4096
#define CHUNK 4096

static volatile uint32_t *exit_reg; /* NULL when /dev/mem is not usable: no events */
static int tty = -1;

static void event(uint32_t kind, uint32_t value)
{
	if (exit_reg)
		*exit_reg = EVENT_MAGIC | kind << 8 | (value & 0xff);
}

static void map_exit_reg(void)
{
	int fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC);
	void *page;

	if (fd < 0)
		return;
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, EXIT_REG_GPA);
	if (page != MAP_FAILED)
		exit_reg = page;
	close(fd);
}

/* Write all of @buf to the channel. Return: 0; -1 when the channel is gone. */
static int put(const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(tty, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}


/* The channel's input, buffered: header lines and the bytes they announce. */
static char inbuf[MAX_CMD + 64];
static size_t in_len;

/* Read more input. Return: bytes read; 0 at end of file; -1 on error. */
static ssize_t fill(void)
{
	ssize_t n;

	if (in_len == sizeof(inbuf))
		return -1;
	do {
		n = read(tty, inbuf + in_len, sizeof(inbuf) - in_len);
	} while (n < 0 && errno == EINTR);
	if (n > 0)
		in_len += (size_t)n;
	return n;
}

static void consume(size_t n)
{
	memmove(inbuf, inbuf + n, in_len - n);
	in_len -= n;
}

/* The length of the first complete line (with its '\n') in the input, 0 if none yet. */
static size_t line_len(void)
{
	char *nl = memchr(inbuf, '\n', in_len);

	return nl ? (size_t)(nl - inbuf) + 1 : 0;
}

static pid_t child;

/* Handle one complete input frame while a command runs: only K means something then.
 * Return: bytes consumed (0: need more input). */
static size_t frame_while_running(void)
{
	size_t n = line_len();

	if (!n) {
		if (in_len == sizeof(inbuf))
			in_len = 0; /* a line too long to be a frame: drop it */
		return 0;
	}
	if (n == 2 && inbuf[0] == 'K' && child > 0)
		kill(-child, SIGKILL);
	return n;
}

static int relay(int *fd, int which)
{
	char hdr[32], buf[CHUNK];
	ssize_t n;

	do {
		n = read(*fd, buf, sizeof(buf));
	} while (n < 0 && errno == EINTR);
	if (n <= 0) {
		close(*fd);
		*fd = -1;
		return 0;
	}
	snprintf(hdr, sizeof(hdr), "O %d %zd\n", which, n);
	if (put(hdr, strlen(hdr)) || put(buf, (size_t)n))
		return -1;
	return 0;
}

/* Run @cmd with /bin/sh -c, relaying its output. Return: its status 0..255; -1: channel gone. */
static int run(const char *cmd)
{
	int out[2], err[2], status = 0, fds_left;
	bool exited = false;

	if (pipe2(out, O_CLOEXEC))
		return 127;
	if (pipe2(err, O_CLOEXEC)) {
		close(out[0]);
		close(out[1]);
		return 127;
	}
	event(EVENT_WORKLOAD_START, 0);
	child = fork();
	if (child == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		signal(SIGPIPE, SIG_DFL); /* the command gets what a shell would give it */
		setpgid(0, 0);
		if (null >= 0)
			dup2(null, 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		dprintf(2, "hvprof-execd: /bin/sh: %s\n", strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	if (child < 0) {
		close(out[0]);
		close(err[0]);
		event(EVENT_WORKLOAD_END, 127);
		return 127;
	}
	setpgid(child, child);
	/* a K that came in the same read as its C is already buffered: act on it now */
	for (size_t n; (n = frame_while_running());)
		consume(n);
	fds_left = 2;
	for (;;) {
		struct pollfd p[3] = { { tty, POLLIN, 0 }, { out[0], POLLIN, 0 }, { err[0], POLLIN, 0 } };

		if (!exited && waitpid(child, &status, WNOHANG) == child)
			exited = true;
		if (exited && !fds_left)
			break;
		if (poll(p, 3, exited ? 0 : 200) < 0 /* after the exit: only what is there */ && errno != EINTR)
			break;
		if (p[0].revents & POLLIN) {
			size_t n;

			if (fill() <= 0)
				return -1;
			while ((n = frame_while_running()))
				consume(n);
		}
		if ((p[1].revents & (POLLIN | POLLHUP)) && relay(&out[0], 1))
			return -1;
		if ((p[2].revents & (POLLIN | POLLHUP)) && relay(&err[0], 2))
			return -1;
		fds_left = (out[0] >= 0) + (err[0] >= 0);
		/* Exited and nothing more to read now: a background process may hold the pipes. */
		if (exited && !(p[1].revents & POLLIN) && !(p[2].revents & POLLIN))
			break;
	}
	if (out[0] >= 0)
		close(out[0]);
	if (err[0] >= 0)
		close(err[0]);
	if (!exited)
		waitpid(child, &status, 0);
	child = 0;
	status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	event(EVENT_WORKLOAD_END, (uint32_t)status);
	return status;
}

/* Parse a decimal 0..max that ends at @end. Return: the value; -1 when it is not one. */
static long number(const char *s, const char *end, long max)
{
	long v = 0;

	if (s == end)
		return -1;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (*s - '0');
		if (v > max)
			return -1;
	}
	return v;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/dev/ttyS1";
	struct termios t;
	char cmd[MAX_CMD + 1];

	signal(SIGPIPE, SIG_IGN);
	tty = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (tty < 0) {
		fprintf(stderr, "hvprof-execd: open %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (tcgetattr(tty, &t) == 0) {
		cfmakeraw(&t);
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		tcsetattr(tty, TCSANOW, &t);
	}
	tcflush(tty, TCIFLUSH);
	map_exit_reg();
	if (put("R 1\n", 4))
		return 1;
	for (;;) {
		size_t n = line_len();

		if (!n) {
			if (in_len == sizeof(inbuf))
				in_len = 0;
			if (fill() <= 0)
				return 1;
			continue;
		}
		if (inbuf[0] == 'Q' && n >= 4 && inbuf[1] == ' ') {
			long st = number(inbuf + 2, inbuf + n - 1, 255);

			consume(n);
			if (st >= 0)
				return (int)st;
		} else if (inbuf[0] == 'C' && n >= 4 && inbuf[1] == ' ') {
			long len = number(inbuf + 2, inbuf + n - 1, MAX_CMD);
			int st;

			consume(n);
			if (len <= 0)
				continue;
			while (in_len < (size_t)len)
				if (fill() <= 0)
					return 1;
			memcpy(cmd, inbuf, (size_t)len);
			cmd[len] = 0;
			consume((size_t)len);
			if (memchr(cmd, 0, (size_t)len)) {
				st = 127; /* a NUL cannot be in a shell command */
			} else {
				st = run(cmd);
				if (st < 0)
					return 1;
			}
			snprintf(cmd, sizeof(cmd), "X %d\n", st);
			if (put(cmd, strlen(cmd)))
				return 1;
		} else {
			consume(n); /* K with nothing running, or not a frame: ignored */
		}
	}
}
