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
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/log.h>
#include <hvprof/sample.h>

#include "cli.h"
#include "control.h"

#define DONE_TIMEOUT_MS 20000
#define EXEC_WAIT_MS 300000    /* --exec: for the VM's socket, as hvprof exec's --wait */  /* for DONE after DETACH (the VM writes the counters and END) */

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

/*
 * --exec: the window opens once the guest can run the command (STATUS says exec=ready), so a
 * VM that is still booting (a CI job's first step) does not put its boot in the recording.
 * Return: 0; -errno (said).
 */
static int wait_exec_ready(struct ctl_client *c, const char *path)
{
	uint64_t until = ctl_mono_ms() + EXEC_WAIT_MS;
	struct ctl_reply r;
	char state[16];
	bool said = false;

	for (;;) {
		if (ctl_client_request(c, "status", "STATUS\n", -1, &r) != 0)
			return -EIO;
		if (ctl_reply_get(&r, "exec", state, sizeof(state)) != 0 || !strcmp(state, "none")) {
			cli_error("--exec: the VM at %s serves no commands (start it with run "
				  "--control and no --run, on a bundled image)", path);
			return -ENOTSUP;
		}
		if (!strcmp(state, "ready"))
			return 0;
		if (ctl_mono_ms() >= until) {
			cli_error("--exec: the guest's command server is not ready (%s)", state);
			return -ETIMEDOUT;
		}
		if (!said)
			fprintf(stderr, "hvprof: waiting for the guest's command server before "
				"attaching (up to %d s)\n", EXEC_WAIT_MS / 1000);
		said = true;
		usleep(250 * 1000);
	}
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

/* Attached: wait for the duration or a signal, then DETACH (at once: @now); or for the VM's
 * DONE. */
static int wait_window(struct ctl_client *c, const struct record_attach_args *a, bool now)
{
	uint64_t end = now		   ? 0
		       : a->duration_s > 0 ? ctl_mono_ms() + (uint64_t)(a->duration_s * 1000)
					   : UINT64_MAX / 2;
	bool detaching = false, by_signal = false;
	struct ctl_reply r;
	int err;

	for (;;) {
		err = ctl_client_read_line(c, end, !detaching);
		if (!err) {
			if (ctl_parse_reply(c->line, strlen(c->line), &r) == 0 &&
			    r.kind == CTL_REPLY_DONE)
				return done_status(&r, a, by_signal);
			continue; /* nothing else is sent on an attached connection */
		}
		if ((err == -ETIMEDOUT || err == -EINTR) && !detaching) {
			by_signal = err == -EINTR;
			if (ctl_client_send(c->fd, "DETACH\n", -1) != 0)
				break;
			detaching = true;
			end = ctl_mono_ms() + DONE_TIMEOUT_MS;
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
	struct ctl_client c = { .fd = -1, .stop = &stop_signal };
	struct sigaction sa, old_int, old_term;
	sigset_t stops, old_mask, wait_mask;
	struct ctl_reply r;
	char text[128], window[16] = "?";
	struct record_output out = { .fd = -1 };
	int out_fd = -1, status = EXIT_ERROR, commit_err = 0;

	/* with --exec, as hvprof exec: the VM may still be starting (a CI job's first step) */
	if (ctl_client_connect(a->path, "--attach", a->exec_cmd ? EXEC_WAIT_MS : 0, c.stop,
			       &c.fd) != 0)
		return EXIT_ERROR;
	snprintf(text, sizeof(text), "HELLO %d\n", CTL_VERSION);
	if (ctl_client_request(&c, "the handshake", text, -1, &r) != 0)
		goto out;
	if (a->exec_cmd && wait_exec_ready(&c, a->path) != 0)
		goto out;
	if (record_output_open(&out, a->output) != 0)
		goto out;
	out_fd = out.fd;
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
	if (ctl_client_request(&c, "attach", text, out_fd, &r) != 0) {
		/* Not sent: the file is ours alone, it goes. Refused (ERR): nothing was recorded;
		 * the file goes if it is still the empty one we created; a recording already at
		 * the name stays. No answer (a timeout, the VM went away): the VM may have
		 * attached; what it wrote takes the name, an empty file keeps its temporary one
		 * (the VM may still write to it: never removed under it). */
		struct stat st;

		if (!c.sent)
			record_output_discard(&out); /* the fd never left: ours alone */
		else if (r.kind == CTL_REPLY_ERR && out.tmp[0] &&
			 ctl_output_discard(out.tmp, out_fd, true) == 0)
			out.tmp[0] = '\0'; /* refused, and nothing in it: removed */
		else if (fstat(out_fd, &st) == 0 && st.st_size > 0 && !record_output_commit(&out))
			fprintf(stderr, "hvprof: the VM may have written %s: kept\n", a->output);
		else
			record_output_keep(&out); /* it may still write: named, left alone */
		goto restore;
	}
	/* the VM writes it: it takes the name (if that fails, the window still runs: the
	 * recording then stays under its temporary name, which is said) */
	commit_err = record_output_commit(&out);
	if (commit_err)
		record_output_keep(&out);
	close(out_fd); /* the VM has its own copy */
	out_fd = -1;
	if (ctl_reply_get(&r, "window", window, sizeof(window))) { /* "?" */ }
	fprintf(stderr, "hvprof: attached to %s (window %s, %lu Hz); %s\n", a->path, window,
		a->freq, a->exec_cmd	     ? "detaching when the command ends"
			 : a->duration_s > 0 ? "detaching at the duration or Ctrl-C"
					     : "Ctrl-C detaches");
	if (a->exec_cmd) {
		struct sigaction ign = { .sa_handler = SIG_IGN }, old_pipe;
		char line[CTL_MAX_LINE + 8];
		char *word = (char *)a->exec_cmd;
		int st;

		if (exec_encode_words(&word, 1, line, sizeof(line)) != 0) {
			cli_error("--exec: the command is longer than the protocol's %d bytes "
				  "(escaped)", CTL_MAX_LINE - 6);
			st = 255;
		} else {
			/* `record --exec ... | head`: an EPIPE ends the command (141), never us */
			sigemptyset(&ign.sa_mask);
			sigaction(SIGPIPE, &ign, &old_pipe);
			st = exec_command(a->path, line, EXEC_WAIT_MS / 1000, &stop_signal,
					  &wait_mask);
			sigaction(SIGPIPE, &old_pipe, NULL);
		}
		status = wait_window(&c, a, true);
		if (status == EXIT_OK && st != 0) {
			fprintf(stderr, "hvprof: the command %s (status %d)\n",
				st == EXIT_INTERRUPTED ? "was interrupted" : st == 255
				? "could not run" : "failed", st);
			status = st == EXIT_INTERRUPTED ? EXIT_INTERRUPTED
				 : st == 255	       ? EXIT_ERROR
						       : EXIT_GUEST_FAILED;
		}
	} else {
		status = wait_window(&c, a, false);
	}
	if (commit_err)
		status = EXIT_ERROR;
restore:
	sigprocmask(SIG_SETMASK, &old_mask, NULL); /* a pending one reaches on_signal: ignored */
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
out:
	record_output_discard(&out); /* opened, never handed to the VM */
	if (out_fd >= 0)
		close(out_fd);
	close(c.fd);
	return status;
}
