// SPDX-License-Identifier: MIT
// hvprof exec --attach PATH -- CMD [ARGS...]: run a command in the guest of `hvprof run --control
// PATH` (started without --run, on a bundled image: its /init serves commands on COM2) and give
// back its output and exit status, as ssh does: the words are joined with spaces and run by the
// guest's /bin/sh -c; its stdout and stderr come out on ours; hvprof exec exits with its status,
// 255 when hvprof could not run it. `hvprof exec --attach PATH --poweroff[=STATUS]` ends the
// guest (it powers off with STATUS, default 0). docs/control-protocol.md, "EXEC".
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "cli.h"
#include "control.h"

#define EXEC_FAILED 255          /* hvprof could not run the command (as ssh) */
#define EXEC_PIPE 141            /* our output's reader went away: 128 + SIGPIPE, as a shell */
#define EXEC_WAIT_DEFAULT_S 300  /* for the guest's command server to be ready (a boot) */
#define RETRY_MS 500

static const char exec_usage[] =
	"usage: hvprof exec --attach PATH [--wait S] -- CMD [ARGS...]\n"
	"       hvprof exec --attach PATH --poweroff[=STATUS]\n\n"
	"Run CMD in the guest of `hvprof run --control PATH` (started without --run, on a bundled\n"
	"image) with the guest's /bin/sh -c (the words joined with spaces, as ssh does); its\n"
	"stdout and stderr come out here, and hvprof exec exits with its status (255: hvprof\n"
	"could not run it, a bad option included, as ssh; 141: our output's reader went away;\n"
	"130: interrupted). Each command runs between the guest events \"workload start\" and\n"
	"\"workload end\", so a `record --attach` window around it marks its window. Ctrl-C kills\n"
	"the command in the guest.\n\n"
	"  --attach PATH       the VM's control socket\n"
	"  --wait S            wait up to S seconds for the VM's socket and for the guest's\n"
	"                      command server (ready once the guest has booted; default 300)\n"
	"  --poweroff[=N]      end the guest: it powers off with exit status N (default 0), and\n"
	"                      `hvprof run` exits with it\n";

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

int exec_encode_words(char **argv, int argc, char *buf, size_t len)
{
	char cmd[CTL_MAX_LINE];
	size_t n = 0, enc;

	size_t cap = (len < CTL_MAX_LINE ? len : CTL_MAX_LINE) - 5; /* a line fits a message */

	if (argc < 1 || len < 8)
		return -E2BIG;
	for (int i = 0; i < argc; i++) {
		size_t w = strlen(argv[i]);

		if (n + w + 1 >= sizeof(cmd))
			return -E2BIG;
		if (i)
			cmd[n++] = ' ';
		memcpy(cmd + n, argv[i], w);
		n += w;
	}
	memcpy(buf, "EXEC ", 5);
	enc = ctl_exec_encode(cmd, n, buf + 5, cap); /* at most cap - 1 bytes: '\n' fits */
	if (!enc || !n)
		return -E2BIG;
	memcpy(buf + 5 + enc, "\n", 2);
	return 0;
}

static int connect_hello(struct ctl_client *c, const char *path, double wait_s);

/* Sleep @ms, or less when a stop signal comes (unblocked only here, as in the reads). */
static void nap(const struct ctl_client *c, unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000l };

	ppoll(NULL, 0, &ts, c->wait_mask);
}

/* EXEC, retried while the guest's server is not ready (on a new connection each time: the
 * server serves one client at a time besides the attached one, and a waiting exec must not
 * hold that slot). Return: 0 started; 130 stopped; -errno (said). */
static int start(struct ctl_client *c, const char *path, const char *line, double wait_s)
{
	uint64_t until = ctl_mono_ms() + (uint64_t)(wait_s * 1000);
	struct ctl_reply r;
	bool said = false;
	int err;

	for (;;) {
		if (c->stop && *c->stop)
			return EXIT_INTERRUPTED; /* never send EXEC after a Ctrl-C */
		err = ctl_client_send(c->fd, line, -1);
		err = err ?: ctl_client_read_line(c, ctl_mono_ms() + 10000, false);
		err = err ?: ctl_parse_reply(c->line, strlen(c->line), &r);
		if (err) {
			cli_error("exec: no answer from the VM (%s)", hvp_strerror(err));
			return err;
		}
		if (r.kind == CTL_REPLY_OK)
			return 0;
		if (r.kind != CTL_REPLY_ERR)
			return -EPROTO;
		if (r.err != EAGAIN || ctl_mono_ms() >= until) {
			cli_error("exec refused: %.*s (%s)", (int)r.rest_len, r.rest,
				  ctl_err_name(r.err));
			return -r.err;
		}
		if (!said)
			fprintf(stderr, "hvprof: waiting for the guest's command server (up to "
				"%.0f s)\n", wait_s);
		said = true;
		close(c->fd);
		c->fd = -1;
		c->len = 0;
		nap(c, RETRY_MS);
		if (c->stop && *c->stop)
			return EXIT_INTERRUPTED;
		err = connect_hello(c, path, 0);
		if (err)
			return err;
	}
}

/* All of @len bytes to @fd. Return: 0; -errno (EPIPE: the reader went away). */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t w = write(fd, buf, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

/* After OK: the output and the end. Return: the command's status; EXEC_FAILED; 130. */
static int relay(struct ctl_client *c)
{
	char buf[EXEC_MAX_CHUNK];
	unsigned int fd;
	size_t len;
	int err, status;

	for (;;) {
		err = ctl_client_read_line(c, UINT64_MAX / 2, true);
		if (err == -EINTR) {
			fprintf(stderr, "hvprof: interrupted: the command is killed in the guest\n");
			return EXIT_INTERRUPTED;
		}
		if (err) {
			cli_error("exec: the VM went away before the command ended (%s)",
				  hvp_strerror(err));
			return EXEC_FAILED;
		}
		if (sscanf(c->line, "OUT %u %zu", &fd, &len) == 2 && (fd == 1 || fd == 2) &&
		    len && len <= sizeof(buf)) {
			err = ctl_client_read_bytes(c, buf, len, UINT64_MAX / 2, true);
			if (err)
				continue; /* said at the next read */
			err = write_all(fd == 1 ? STDOUT_FILENO : STDERR_FILENO, buf, len);
			if (err == -EPIPE)
				return EXEC_PIPE; /* `exec ... | head`: as a shell's command would */
			if (err) {
				cli_error("exec: writing the command's output: %s", hvp_strerror(err));
				return EXEC_FAILED; /* closing kills the command */
			}
			continue;
		}
		if (sscanf(c->line, "EXIT status=%d", &status) == 1 && status >= 0 && status <= 255)
			return status;
		if (!strncmp(c->line, "END ", 4)) {
			cli_error("exec: the guest stopped before the command ended (%s)",
				  c->line + 4);
			return EXEC_FAILED;
		}
		cli_error("exec: unexpected message from the VM: %.80s", c->line);
		return EXEC_FAILED;
	}
}

static int connect_hello(struct ctl_client *c, const char *path, double wait_s)
{
	char hello[32];
	struct ctl_reply r;

	if (ctl_client_connect(path, "--attach", (uint64_t)(wait_s * 1000), c->stop, &c->fd) != 0)
		return -ENOTCONN;
	snprintf(hello, sizeof(hello), "HELLO %d\n", CTL_VERSION);
	return ctl_client_request(c, "the handshake", hello, -1, &r);
}

int exec_command(const char *path, const char *exec_line, double wait_s,
		 volatile sig_atomic_t *stop, const sigset_t *wait_mask)
{
	struct ctl_client c = { .fd = -1, .stop = stop, .wait_mask = wait_mask };
	int status = EXEC_FAILED;

	if (connect_hello(&c, path, wait_s) == 0) {
		int err = start(&c, path, exec_line, wait_s);

		status = err == EXIT_INTERRUPTED ? EXIT_INTERRUPTED : err ? EXEC_FAILED : relay(&c);
	} else if (stop && *stop) {
		status = EXIT_INTERRUPTED; /* while waiting for the VM */
	}
	if (c.fd >= 0)
		close(c.fd); /* before the end: the command is killed */
	return status;
}

int cmd_exec(int argc, char **argv)
{
	enum { OPT_ATTACH = 1, OPT_WAIT, OPT_POWEROFF };
	static const struct option opts[] = { { "attach", required_argument, NULL, OPT_ATTACH },
					      { "wait", required_argument, NULL, OPT_WAIT },
					      { "poweroff", optional_argument, NULL, OPT_POWEROFF },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	struct ctl_client c = { .fd = -1, .stop = &stop_signal };
	const char *path = NULL;
	double wait_s = EXEC_WAIT_DEFAULT_S;
	int poweroff = -1, opt, status = EXEC_FAILED;
	char line[CTL_MAX_LINE + 8], *end;
	struct sigaction sa = { .sa_handler = on_signal };
	struct ctl_reply r;

	optind = 1;
	while ((opt = cli_getopt_long(argc, argv, "+h", opts)) != -1) {
		switch (opt) {
		case 'h':
			fputs(exec_usage, stdout);
			return EXIT_OK;
		case OPT_ATTACH:
			path = optarg;
			break;
		case OPT_WAIT:
			wait_s = strtod(optarg, &end);
			if (!*optarg || *end || !(wait_s >= 0 && wait_s <= 86400)) {
				cli_error("--wait %s: want seconds, 0 to 86400", optarg);
				return EXEC_FAILED;
			}
			break;
		case OPT_POWEROFF:
			poweroff = optarg ? (int)strtol(optarg, &end, 10) : 0;
			if (optarg && (!*optarg || *end || poweroff < 0 || poweroff > 255)) {
				cli_error("--poweroff=%s: want an exit status 0 to 255", optarg);
				return EXEC_FAILED;
			}
			break;
		default:
			fputs(exec_usage, stderr);
			return EXEC_FAILED;
		}
	}
	if (!path) {
		cli_error("exec: --attach PATH is required (the socket of hvprof run --control)");
		return EXEC_FAILED;
	}
	if ((poweroff >= 0) == (optind < argc)) {
		cli_error("exec: give a command after --, or --poweroff (not both)");
		return EXEC_FAILED;
	}
	if (poweroff < 0 && exec_encode_words(argv + optind, argc - optind, line, sizeof(line)) != 0) {
		cli_error("exec: the command is longer than the protocol's %d bytes (escaped)",
			  CTL_MAX_LINE - 6);
		return EXEC_FAILED;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL); /* interrupting the read: closing kills the command */
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (poweroff < 0)
		return exec_command(path, line, wait_s, &stop_signal, NULL);
	if (connect_hello(&c, path, wait_s) != 0) {
		if (stop_signal)
			status = EXIT_INTERRUPTED;
		goto out;
	}
	snprintf(line, sizeof(line), "POWEROFF status=%d\n", poweroff);
	if (ctl_client_request(&c, "poweroff", line, -1, &r) == 0)
		status = EXIT_OK;
out:
	close(c.fd);
	return status;
}
