/* SPDX-License-Identifier: MIT */
/*
 * Private to cli/: the control socket of `hvprof run --control` and its client `hvprof record
 * --attach` (docs/control-protocol.md): the protocol's parser (control_proto.c, fuzzed), the
 * server (control_server.c: one thread, one client at a time besides the attached one) and the
 * attach windows it serves (control_session.c).
 */
#ifndef HVPROF_CLI_CONTROL_H
#define HVPROF_CLI_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>

#define CTL_VERSION 1       /* the protocol version this hvprof speaks */
#define CTL_MAX_LINE 1024   /* bytes of one message, its '\n' included */
#define CTL_MAX_HZ 100000   /* ATTACH freq= at most */
#define CTL_DEFAULT_HZ 1000
#define CTL_MAX_STACK 65528 /* ATTACH call_graph=dwarf,SIZE at most (HVP_USER_STACK_MAX) */

/* ---------------------------------------------------------------- protocol (control_proto.c) */

enum ctl_verb {
	CTL_HELLO = 1, /* HELLO VERSION: the handshake, first message of every connection */
	CTL_STATUS,    /* STATUS: the VM's state and counters */
	CTL_ATTACH,    /* ATTACH [freq=HZ] [call_graph=fp|dwarf[,SIZE]], with the recording's fd */
	CTL_DETACH,    /* DETACH: end the window of this connection */
};

/**
 * struct ctl_request - one parsed request.
 * @version: HELLO's. @freq: ATTACH's (default CTL_DEFAULT_HZ). @dwarf/@stack_size: ATTACH's
 *   call graph (default dwarf,8192; @stack_size a multiple of 8, 8..CTL_MAX_STACK; 64 for fp).
 */
struct ctl_request {
	enum ctl_verb verb;
	uint32_t version;
	uint32_t freq;
	bool dwarf;
	uint32_t stack_size;
};

/**
 * ctl_line_find - the first message in @p[0..@n): its length without the '\n' in *@line_len.
 * Return: 1 found; 0 not complete yet (and still shorter than CTL_MAX_LINE); -E2BIG no '\n'
 * within CTL_MAX_LINE bytes; -EPROTO a byte before the '\n' that is not printable ASCII.
 */
int ctl_line_find(const char *p, size_t n, size_t *line_len) __must_check;

/**
 * ctl_parse_request - parse one message (@line, @len bytes, no '\n'; not NUL-terminated).
 * @why: on failure, a NUL-terminated phrase saying what is wrong (@why_len bytes at most).
 * Return: 0 and *@out; -EPROTO not a request; -EINVAL a request with a bad argument.
 */
int ctl_parse_request(const char *line, size_t len, struct ctl_request *out, char *why,
		      size_t why_len) __must_check;

enum ctl_reply_kind {
	CTL_REPLY_OK = 1, /* OK [key=value ...] */
	CTL_REPLY_ERR,    /* ERR NAME message */
	CTL_REPLY_DONE,   /* DONE reason=R [key=value ...]: the attached window ended */
};

/**
 * struct ctl_reply - one parsed reply; @rest points into the parsed line (its key=value words,
 * or ERR's message) and is valid as long as it.
 * @err: for CTL_REPLY_ERR, the positive errno its NAME stands for (EIO for a name not known).
 */
struct ctl_reply {
	enum ctl_reply_kind kind;
	int err;
	const char *rest;
	size_t rest_len;
};

/** ctl_parse_reply - parse one reply line (no '\n'). Return: 0; -EPROTO not a reply. */
int ctl_parse_reply(const char *line, size_t len, struct ctl_reply *out) __must_check;

/**
 * ctl_reply_get - the value of word @key=VALUE of an OK or DONE reply, NUL-terminated into @buf
 * (@len bytes). Return: 0; -ENOENT no such key; -E2BIG it does not fit; -EINVAL.
 */
int ctl_reply_get(const struct ctl_reply *r, const char *key, char *buf, size_t len)
	__must_check;

/** ctl_reply_u64 - ctl_reply_get of a decimal number. Return: 0; -ENOENT; -EINVAL not one. */
int ctl_reply_u64(const struct ctl_reply *r, const char *key, uint64_t *val) __must_check;

/**
 * ctl_freq_check - may a frequency counter (hardware cycles) sample at @freq per second, given
 * the text of /proc/sys/kernel/perf_event_max_sample_rate (@max_rate_text, NUL-terminated; a
 * '\n' after the number is fine)? The kernel refuses a higher rate (PERF_EVENT_IOC_PERIOD:
 * EINVAL). cpu-clock samples by a period of CPU time and has no such limit: do not call it.
 * Return: 0 allowed (or @max_rate_text is not a number: the kernel decides); -EINVAL above
 * the limit, *@max set to it.
 */
int ctl_freq_check(uint32_t freq, const char *max_rate_text, uint32_t *max) __must_check;

/** ctl_err_name - the protocol's name of errno @err (> 0), "EIO" for one it does not name. */
const char *ctl_err_name(int err);

/**
 * ctl_format_err - "ERR NAME message\n" into @buf (@len >= 64 bytes): @msg cut to fit
 * CTL_MAX_LINE and any byte that is not printable ASCII replaced by '?'. Return: its length.
 */
size_t ctl_format_err(char *buf, size_t len, int err, const char *msg);

/* ---------------------------------------------------------------- server (control_server.c) */

/**
 * struct control_ops - what the server asks of the VM (control_session.c; unit tests fake it).
 * Every callback runs on the server's thread. A reply is written into @reply (@len bytes) as the
 * words after "OK " (or "DONE "), or, on failure, as the error message; no '\n'.
 * @status: Return: 0; -errno.
 * @attach: open a window writing to @fd, which it owns on success (on failure the server
 *   closes it). Return: 0; -EBUSY a window is open; -errno.
 * @detach: end the open window with @reason (enum hvp_end_reason: HVP_END_DETACHED for a detach
 *   or a client that went away) and the guest's @exit_status; @reply gets the DONE words.
 *   Return: 0; -errno (the window is closed anyway).
 * @window_failed: polled between messages: the open window cannot go on (its recording failed);
 *   the server then ends it with HVP_END_ERROR. May be NULL.
 */
struct control_ops {
	void *ctx;
	int (*status)(void *ctx, char *reply, size_t len);
	int (*attach)(void *ctx, const struct ctl_request *req, int fd, char *reply, size_t len);
	int (*detach)(void *ctx, int reason, int exit_status, char *reply, size_t len);
	bool (*window_failed)(void *ctx);
};

/**
 * struct control_config - the server's socket and timeouts.
 * @path: the UNIX socket to listen on (NULL: none; unit tests hand clients in with
 *   control_server_adopt). @idle_ms: a client that is not attached is dropped when it sends no
 *   complete message for this long (0: CONTROL_IDLE_MS), half a message included.
 */
struct control_config {
	const char *path;
	unsigned int idle_ms;
};

#define CONTROL_IDLE_MS 5000

struct control_server;

/**
 * control_server_create - listen on @cfg->path (created 0600; an existing socket nobody answers
 * on is replaced, anything else refused). @ops is borrowed and must outlive the server.
 * Return: 0 and *@out; -EEXIST a file that is not a socket; -EADDRINUSE a live socket;
 * -ENAMETOOLONG; -errno of socket/bind/listen. Prints nothing: the caller says what failed.
 */
int control_server_create(const struct control_config *cfg, const struct control_ops *ops,
			  struct control_server **out) __must_check;

/**
 * control_server_adopt - serve the connected stream socket @fd as the (one) client (unit
 * tests: one end of a socketpair). Owned on success. Return: 0; -EBUSY one is being served.
 */
int control_server_adopt(struct control_server *srv, int fd) __must_check;

/**
 * control_server_step - wait up to @timeout_ms for one event (a connection, a message, the
 * end) and handle it, with the timeouts. Return: 0 go on; 1 the server finished (after
 * control_server_end: the window was closed and its client told).
 */
int control_server_step(struct control_server *srv, int timeout_ms);

/**
 * control_server_end - from any thread: the VM's run ended with @reason/@exit_status; the next
 * step ends the open window with them, tells its client (DONE) and finishes.
 */
void control_server_end(struct control_server *srv, int reason, int exit_status);

/** control_server_attached - a window is open (its client connected). Any thread. */
bool control_server_attached(const struct control_server *srv);

/** control_server_destroy - close every connection and remove the socket file (NULL is fine). */
void control_server_destroy(struct control_server *srv);

/* ---------------------------------------------------------------- client (control_client.c) */

/**
 * ctl_output_discard - remove the recording @path that a refused ATTACH never started. Removed
 * only when this process created it (@created: O_EXCL succeeded), @path is still a regular file
 * with @fd's device and inode (not replaced, not a link), and it is empty. Never call it when
 * the attach's outcome is unknown (no reply: the VM may be writing it).
 * Return: 0 removed; -EPERM not created by us; -ESTALE @path is another file now; -ENOTEMPTY
 * it has data; -EINVAL; -errno of fstat/lstat/unlink.
 */
int ctl_output_discard(const char *path, int fd, bool created) __must_check;

#include <signal.h>

/**
 * ctl_wait_readable - wait until @fd is readable or @timeout_ms passes (clamped to INT_MAX ms:
 * loop to a later deadline), with the signal mask @wait_mask during the wait only (ppoll; NULL:
 * the current mask). Block the signals that stop the wait, check their flag, then call this
 * with a mask that unblocks them: one that arrives in between is not lost.
 * Return: 1 readable (or closed/error: read it); 0 timed out; -EINTR a signal; -errno.
 */
int ctl_wait_readable(int fd, uint64_t timeout_ms, const sigset_t *wait_mask) __must_check;

#endif /* HVPROF_CLI_CONTROL_H */
