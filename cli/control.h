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
#include <sys/types.h>

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
	CTL_EXEC,      /* EXEC COMMAND: run COMMAND in the guest (the command channel) */
	CTL_POWEROFF,  /* POWEROFF [status=N]: end a serving guest with exit status N */
};

/**
 * struct ctl_request - one parsed request.
 * @version: HELLO's. @freq: ATTACH's (default CTL_DEFAULT_HZ). @dwarf/@stack_size: ATTACH's
 *   call graph (default dwarf,8192; @stack_size a multiple of 8, 8..CTL_MAX_STACK; 64 for fp).
 * @cmd/@cmd_len: EXEC's command, decoded (NUL-terminated; 1..CTL_MAX_LINE - 7 bytes, no NUL).
 * @status: POWEROFF's (0..255, default 0).
 */
struct ctl_request {
	enum ctl_verb verb;
	uint32_t version;
	uint32_t freq;
	bool dwarf;
	uint32_t stack_size;
	int status;
	size_t cmd_len;
	char cmd[CTL_MAX_LINE];
};

/**
 * ctl_exec_encode - EXEC's argument for command @cmd (@len bytes): printable ASCII as it is,
 * every other byte and the backslash as \ooo (three octal digits), into @buf (@buf_len bytes,
 * NUL-terminated). Return: its length; 0 when it does not fit or @cmd holds a NUL.
 */
size_t ctl_exec_encode(const char *cmd, size_t len, char *buf, size_t buf_len);

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

/** ctl_parse_uint - a decimal number of 1..10 digits in [@w, @w + @n), at most @max, into
 * *@out. Return: whether it is one. */
bool ctl_parse_uint(const char *w, size_t n, uint32_t max, uint32_t *out);

/** ctl_reason_word - DONE's and END's word for enum hvp_end_reason @reason ("exit", "reset",
 * "crash", "duration", "signal", "detached"; "error" for any other). */
const char *ctl_reason_word(int reason);

/** ctl_err_name - the protocol's name of errno @err (> 0), "EIO" for one it does not name. */
const char *ctl_err_name(int err);

/**
 * ctl_format_err - "ERR NAME message\n" into @buf (@len >= 64 bytes): @msg cut to fit
 * CTL_MAX_LINE and any byte that is not printable ASCII replaced by '?'. Return: its length.
 */
size_t ctl_format_err(char *buf, size_t len, int err, const char *msg);

/* ------------------------------------------------- the command channel (control_exec.c) */

#define EXEC_MAX_CHUNK 4096 /* bytes of one O frame from the guest, at most */
#define EXEC_MAX_CMD 4096   /* bytes of one command to the guest, at most */
#define EXEC_CLIENT_Q_HIGH 65536 /* client queue bytes above which the guest is not read */

/**
 * struct exec_rx - the parser of what the guest's hvprof-execd sends on COM2 (frames of
 * images/guest/hvprof-execd.c: "R VERSION\n", "O FD LEN\n" + LEN bytes, "X STATUS\n").
 * @bad_frames: lines that were no frame (skipped to the next '\n').
 */
struct exec_rx {
	char hdr[32];
	size_t hdr_len;
	bool skipping;
	int out_fd;
	size_t left;
	uint64_t bad_frames;
};

/* What exec_rx_feed found; called in the order of the bytes. @out may come in pieces. */
struct exec_rx_ops {
	void (*ready)(void *ctx, uint32_t version);
	void (*out)(void *ctx, int fd, const char *buf, size_t len);
	void (*exit)(void *ctx, int status);
};

void exec_rx_init(struct exec_rx *rx);

/**
 * exec_rx_feed - parse @len bytes of the guest's stream (any split: state is kept in @rx).
 * A header is printable ASCII of at most 32 bytes; O's FD is 1 or 2, its LEN 1..EXEC_MAX_CHUNK;
 * X's STATUS 0..255. Anything else is counted in @rx->bad_frames and skipped to the next '\n'.
 */
void exec_rx_feed(struct exec_rx *rx, const void *buf, size_t len, const struct exec_rx_ops *ops,
		  void *ctx);

/**
 * struct exec_chan - the server's end of the command channel: the COM2 pipe it reads
 * (@guest_fd, non-blocking; -1: the VM has none), @send (vmm_cmd_send: bytes to the guest), the
 * one EXEC client (@client_fd, -1 none) and counters. All on the server's thread.
 */
struct exec_chan {
	int guest_fd;
	int client_fd;
	ssize_t (*send)(void *ctx, const void *buf, size_t len);
	void (*kick)(void *ctx);
	void *send_ctx;
	struct exec_rx rx;
	bool ready, running, quitting, ended;
	bool kill_pending;     /* a K waits for room in outq */
	bool client_rd_closed; /* the client shut its writing side (it may still read) */
	bool client_closing;   /* EXIT/END queued: closed once the queue went */
	uint32_t version;
	uint64_t execs, kills, out_bytes, clients_dropped;
	size_t outq_len; /* frames for the guest its receive buffer has not taken yet */
	char outq[2 * EXEC_MAX_CMD];
	size_t cq_len;   /* bytes for the client its socket has not taken yet */
	char cq[EXEC_CLIENT_Q_HIGH + 2 * EXEC_MAX_CHUNK];
};

/* exec_chan_init - @send: bytes to the guest (vmm_cmd_send); @kick: the guest's pipe was read
 * (vmm_cmd_tx_kick; NULL: none); both get @send_ctx. @guest_fd -1: no channel. */
void exec_chan_init(struct exec_chan *ch, int guest_fd,
		    ssize_t (*send)(void *ctx, const void *buf, size_t len),
		    void (*kick)(void *ctx), void *send_ctx);

/**
 * exec_chan_start - send command @cmd (@len bytes, 1..EXEC_MAX_CMD) to the guest; its output
 * and status go to @client_fd (owned from then: "OUT FD LEN\n" + bytes, then "EXIT status=N\n"
 * or "END reason=R\n", then closed). Return: 0; -ENOTSUP no channel; -EAGAIN the guest's server
 * has not said ready yet, or the last command's client went away (it is being killed), or is
 * still taking its output; -EBUSY a command (or a poweroff) is under way; -ESHUTDOWN the VM is
 * ending; -EINVAL; -ENOBUFS the frames queued for the guest (it does not read) leave no room.
 * Frames the guest's receive buffer cannot take at once are queued whole and sent by
 * exec_chan_flush, never cut.
 */
int exec_chan_start(struct exec_chan *ch, int client_fd, const char *cmd, size_t len)
	__must_check;

/** exec_chan_state - "none" (no channel), "booting" (no ready yet), "ready" (a command would
 * start now) or "busy" (one runs, or is ending; or the VM is ending), for STATUS's exec=. */
const char *exec_chan_state(const struct exec_chan *ch);

/** exec_chan_poweroff - ask the guest's server to end with @status (0..255): the guest then
 * powers off with it. Return: as exec_chan_start. */
int exec_chan_poweroff(struct exec_chan *ch, int status) __must_check;

/** exec_chan_flush - send what is queued for the guest, as much as its receive buffer takes
 * (the server calls it at every step). */
void exec_chan_flush(struct exec_chan *ch);

/** exec_chan_wants_guest - poll the guest's pipe now (there is one, and the client's queue
 * is below EXEC_CLIENT_Q_HIGH: a slow client holds the guest back, through its UART). */
bool exec_chan_wants_guest(const struct exec_chan *ch);

/** exec_chan_guest_readable - read and handle what the guest sent, then kick its UART.
 * Return: 0; -EPIPE the VM closed the pipe; -errno. */
int exec_chan_guest_readable(struct exec_chan *ch);

/** exec_chan_client_events - the poll events to ask of the client's socket. */
short exec_chan_client_events(const struct exec_chan *ch);

/** exec_chan_client_ready - the client's socket had @revents: send what is queued (POLLOUT);
 * a full hang-up kills its command (K); bytes it sends are ignored; a shut writing side is
 * only noted (it may still read the output). */
void exec_chan_client_ready(struct exec_chan *ch, short revents);

/** exec_chan_end - the VM is ending: a client still waiting gets "END reason=@reason". */
void exec_chan_end(struct exec_chan *ch, const char *reason);

/** exec_chan_close - close the client's socket, if any. */
void exec_chan_close(struct exec_chan *ch);

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
 * @cmd_send: bytes to the guest's command channel (vmm_cmd_send); NULL: no channel.
 * @cmd_kick: its output pipe was read (vmm_cmd_tx_kick); may be NULL.
 */
struct control_ops {
	void *ctx;
	int (*status)(void *ctx, char *reply, size_t len);
	int (*attach)(void *ctx, const struct ctl_request *req, int fd, char *reply, size_t len);
	int (*detach)(void *ctx, int reason, int exit_status, char *reply, size_t len);
	bool (*window_failed)(void *ctx);
	ssize_t (*cmd_send)(void *ctx, const void *buf, size_t len);
	void (*cmd_kick)(void *ctx);
};

/**
 * struct control_config - the server's socket and timeouts.
 * @path: the UNIX socket to listen on (NULL: none; unit tests hand clients in with
 *   control_server_adopt). @idle_ms: a client that is not attached is dropped when it sends no
 *   complete message for this long (0: CONTROL_IDLE_MS), half a message included.
 * @chan/@chan_fd: the VM has a command channel: @chan_fd is the non-blocking read end of what
 *   the guest sends on it (owned by the caller; used only when @chan).
 */
struct control_config {
	const char *path;
	unsigned int idle_ms;
	bool chan;
	int chan_fd;
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

/* ------------------------------------------------- a client's connection (control_conn.c) */

/**
 * struct ctl_client - the client's end of a connection: @fd, what it has read (@buf, @len) and
 * the last line (@line, NUL-terminated). @stop: a flag a signal handler sets (NULL: none), with
 * @wait_mask the signal mask during waits (see ctl_wait_readable).
 */
struct ctl_client {
	int fd;
	volatile sig_atomic_t *stop;
	const sigset_t *wait_mask;
	size_t len;
	bool sent; /* the last ctl_client_request's text (and fd) went out */
	char buf[CTL_MAX_LINE];
	char line[CTL_MAX_LINE];
};

/** ctl_mono_ms - CLOCK_MONOTONIC in ms. */
uint64_t ctl_mono_ms(void);

/**
 * ctl_client_connect - connect to the control socket @path, retrying for up to @wait_ms while
 * nobody listens there yet (ENOENT, ECONNREFUSED: a `run --control` that is starting), but
 * not where nobody ever could (@path is there and not a socket, or its directory is missing),
 * and no longer once *@stop (may be NULL) is set (a signal: -EINTR); on failure says so on
 * stderr, naming the option @opt ("--attach") and the path. Return: 0 and *@out; -errno.
 */
int ctl_client_connect(const char *path, const char *opt, uint64_t wait_ms,
		       volatile sig_atomic_t *stop, int *out)
	__must_check;

/** ctl_client_send - send @text, with @pass_fd (>= 0) as SCM_RIGHTS. Return: 0; -EIO. */
int ctl_client_send(int sock, const char *text, int pass_fd) __must_check;

/**
 * ctl_client_read_line - the next line into @c->line, waiting until @deadline_ms (ctl_mono_ms
 * time), or until a signal sets *@c->stop when @stop_on_signal. Return: 0; -ETIMEDOUT; -EINTR
 * the signal; -ENOTCONN the VM closed; -EPROTO not a line of printable ASCII.
 */
int ctl_client_read_line(struct ctl_client *c, uint64_t deadline_ms, bool stop_on_signal)
	__must_check;

/** ctl_client_read_bytes - exactly @n raw bytes into @buf (what follows a line that announced
 * them), with the same waiting. Return: as ctl_client_read_line. */
int ctl_client_read_bytes(struct ctl_client *c, void *buf, size_t n, uint64_t deadline_ms,
			  bool stop_on_signal) __must_check;

/**
 * ctl_client_request - send @text (with @pass_fd, >= 0) and read its reply into *@r (valid
 * until the next read). ERR replies and no answer (10 s) are said on stderr, naming @what.
 * @c->sent says whether the request went out (with its fd): a failure before it did leaves the
 * fd only ours. Return: 0 an OK; -errno of the ERR's name; -EPROTO not OK; -errno.
 */
int ctl_client_request(struct ctl_client *c, const char *what, const char *text, int pass_fd,
		       struct ctl_reply *r) __must_check;

#endif /* HVPROF_CLI_CONTROL_H */
