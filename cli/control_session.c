// SPDX-License-Identifier: MIT
// `hvprof run --control PATH`: the attach windows the control socket serves
// (docs/control-protocol.md). The VM's sampler is created with SAMPLER_START_ATTACH and a sink
// that writes into the open window's recording, if any: the recording's fd comes from the client
// (SCM_RIGHTS), this process writes it (META with what the run learnt: KASLR slide, PTI, return
// sites), and the detach writes the window's counters and END (detached) and closes it.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/log.h>
#include <hvprof/profile.h>

#include "cli.h"
#include "control.h"

#define DETACH_TIMEOUT_NS 2000000000ull /* for the vCPUs to disable their counters */
#define SERVER_POLL_MS 200              /* between looks at a failed recording */

struct control_run {
	const struct guest_opts *g;
	struct guest *gs;
	struct control_server *srv;
	struct control_ops ops;
	struct sampler_sink sink;
	pthread_t thread;
	bool thread_started;
	/* the open window: sink callbacks read it under the read lock; attach and detach swap it
	 * under the write lock, so no record goes to a closed writer */
	pthread_rwlock_t lock;
	struct recfile_writer *w;
	int fd;
	atomic_int write_err; /* the window's first failed write (0: none) */
	unsigned int windows;
	uint64_t t0_ns;       /* when the window opened, ns since the run started */
	struct sampler_counters sc0;
	struct vmm_counters vc0;
	int chan[2]; /* the command channel: COM2's output, read end [0] (the server's), or -1 */
};

/* ---------------------------------------------------------------- the sink */

/* A write error ends the window (the server polls window_failed), never the VM. */
static int sink_result(struct control_run *cr, int err)
{
	int none = 0;

	if (err)
		atomic_compare_exchange_strong(&cr->write_err, &none, err);
	return 0;
}

/* The open window's writer with the read lock held (NULL between windows: records dropped). */
static struct recfile_writer *sink_get(struct control_run *cr)
{
	pthread_rwlock_rdlock(&cr->lock);
	return cr->w;
}

static int sink_put(struct control_run *cr, int err)
{
	pthread_rwlock_unlock(&cr->lock);
	return sink_result(cr, err);
}

static int sink_sample(void *ctx, const struct hvp_sample *s, const struct hvp_user_regs *r)
{
	struct control_run *cr = ctx;
	struct recfile_writer *w = sink_get(cr);

	return sink_put(cr, w ? recfile_write_sample_regs(w, s, r) : 0);
}

static int sink_thread(void *ctx, const struct hvp_thread *t)
{
	struct control_run *cr = ctx;
	struct recfile_writer *w = sink_get(cr);

	return sink_put(cr, w ? recfile_write_thread(w, t) : 0);
}

static int sink_process(void *ctx, const struct hvp_process *p)
{
	struct control_run *cr = ctx;
	struct recfile_writer *w = sink_get(cr);

	return sink_put(cr, w ? recfile_write_process(w, p) : 0);
}

static int sink_user_stack(void *ctx, const struct hvp_user_stack *u,
			   const struct hvp_user_regs *r)
{
	struct control_run *cr = ctx;
	struct recfile_writer *w = sink_get(cr);

	return sink_put(cr, w ? recfile_write_user_stack_regs(w, u, r) : 0);
}

static int sink_mapping(void *ctx, const struct hvp_mapping *m)
{
	struct control_run *cr = ctx;
	struct recfile_writer *w = sink_get(cr);

	return sink_put(cr, w ? recfile_write_mapping(w, m) : 0);
}

static int sink_event(void *ctx, const struct hvp_event *e)
{
	struct control_run *cr = ctx;
	struct recfile_writer *w = sink_get(cr);

	return sink_put(cr, w ? recfile_write_event(w, e) : 0);
}

/* ---------------------------------------------------------------- the control operations */

static uint64_t run_ns(const struct control_run *cr)
{
	uint64_t start = vmm_start_ns(cr->gs->vm);

	return start ? vmm_now_ns() - start : 0;
}

static int op_status(void *ctx, char *reply, size_t len)
{
	struct control_run *cr = ctx;
	struct sampler_counters sc;
	struct vmm_counters vc;

	sampler_get_counters(cr->gs->sampler, &sc);
	vmm_get_counters(cr->gs->vm, &vc);
	snprintf(reply, len,
		 "attached=%d windows=%u runtime_ns=%llu exits=%llu exits_io=%llu exits_mmio=%llu "
		 "exits_intr=%llu exits_overflow=%llu exits_debug=%llu samples=%llu "
		 "marks_dropped_detach=%llu bp_armed=%u counter=%s",
		 control_server_attached(cr->srv), cr->windows, (unsigned long long)run_ns(cr),
		 (unsigned long long)vc.exits, (unsigned long long)vc.exits_io,
		 (unsigned long long)vc.exits_mmio, (unsigned long long)vc.exits_intr,
		 (unsigned long long)vc.exits_overflow, (unsigned long long)vc.exits_debug,
		 (unsigned long long)sc.samples, (unsigned long long)sc.marks_dropped_detach,
		 vmm_bp_armed(cr->gs->vm),
		 sampler_counter_name(sampler_counter_kind(cr->gs->sampler)));
	return 0;
}

/* META of a window: the run's, how it samples, and which window of the run it is. */
static int window_meta(struct control_run *cr, struct recfile_writer *w,
		       const struct ctl_request *req)
{
	char text[64];
	int err;

	if (req->dwarf)
		snprintf(text, sizeof(text), "dwarf,%u", req->stack_size);
	else
		snprintf(text, sizeof(text), "fp");
	err = record_write_meta(w, cr->g, cr->gs, req->freq, text);
	snprintf(text, sizeof(text), "attach (window %u, at %.3f s)", cr->windows + 1,
		 (double)run_ns(cr) / 1e9);
	err = err ?: recfile_write_meta(w, "sampling_from", text);
	return err ?: recfile_writer_flush(w);
}

#define MAX_SAMPLE_RATE_PATH "/proc/sys/kernel/perf_event_max_sample_rate"

/* A freq the kernel would refuse when the window starts (its vCPUs' PERF_EVENT_IOC_PERIOD),
 * refused at ATTACH with a reason: only the hardware cycles counter samples by frequency and
 * is bounded by perf_event_max_sample_rate (counter.c: cpu-clock takes a period of CPU time).
 * The limit may still drop later (the kernel lowers it when sampling is slow): then the window
 * fails (sampler_window_error), not the VM. Return: 0; -EINVAL with @reply set. */
static int check_freq(struct control_run *cr, uint32_t freq, char *reply, size_t len)
{
	char text[32];
	uint32_t max = 0;
	ssize_t n;
	int fd;

	if (sampler_counter_kind(cr->gs->sampler) != SAMPLER_COUNTER_CYCLES)
		return 0;
	fd = open(MAX_SAMPLE_RATE_PATH, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* not readable: the kernel decides at the window's start */
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[n > 0 ? n : 0] = '\0';
	if (ctl_freq_check(freq, text, &max) == 0)
		return 0;
	snprintf(reply, len, "freq=%u is above this host's perf_event_max_sample_rate (%u)", freq,
		 max);
	return -EINVAL;
}

static int op_attach(void *ctx, const struct ctl_request *req, int fd, char *reply, size_t len)
{
	struct control_run *cr = ctx;
	struct sampler_window win = { .sample_hz = req->freq,
				      .call_graph = req->dwarf ? SAMPLER_CALL_GRAPH_DWARF
							       : SAMPLER_CALL_GRAPH_FP,
				      .stack_size = req->stack_size };
	struct recfile_writer *w = NULL; /* set by recfile_writer_open only on success */
	int err;

	if (vmm_stopping(cr->gs->vm)) {
		snprintf(reply, len, "the guest is stopping");
		return -ESHUTDOWN;
	}
	/* the control thread starts before vmm_run sets the run's start: a window's times count
	 * from it (run_ns), and its vCPUs may not exist yet */
	if (!vmm_start_ns(cr->gs->vm)) {
		snprintf(reply, len, "VM not started yet");
		return -EAGAIN;
	}
	err = check_freq(cr, req->freq, reply, len);
	if (err)
		return err;
	err = recfile_writer_open(fd, &w);
	err = err ?: window_meta(cr, w, req);
	if (err) {
		snprintf(reply, len, "cannot write the recording: %s", hvp_strerror(err));
		if (w && recfile_writer_close(w)) { /* failing already */ }
		return err;
	}
	sampler_get_counters(cr->gs->sampler, &cr->sc0);
	vmm_get_counters(cr->gs->vm, &cr->vc0);
	cr->t0_ns = run_ns(cr);
	atomic_store(&cr->write_err, 0);
	pthread_rwlock_wrlock(&cr->lock);
	cr->w = w;
	cr->fd = fd;
	pthread_rwlock_unlock(&cr->lock);
	err = sampler_attach(cr->gs->sampler, &win);
	if (err) {
		pthread_rwlock_wrlock(&cr->lock);
		cr->w = NULL;
		cr->fd = -1;
		pthread_rwlock_unlock(&cr->lock);
		if (recfile_writer_close(w)) { /* the attach failed already */ }
		snprintf(reply, len, "%s", err == -ENODATA ? "no kernel symbols to sample with"
					   : err == -EBUSY ? "previous window still closing"
							   : "the sampler cannot attach");
		return err;
	}
	cr->windows++;
	snprintf(reply, len, "window=%u freq=%u counter=%s", cr->windows, req->freq,
		 sampler_counter_name(sampler_counter_kind(cr->gs->sampler)));
	return 0;
}

/* The window's counters: what changed since it opened. */
static int window_counters(struct control_run *cr, struct recfile_writer *w, uint64_t *samples)
{
	struct sampler_counters sc;
	struct vmm_counters vc;
	uint64_t *a = (uint64_t *)&sc, *b = (uint64_t *)&vc;
	const uint64_t *a0 = (const uint64_t *)&cr->sc0, *b0 = (const uint64_t *)&cr->vc0;
	uint64_t now = run_ns(cr);
	int err;

	sampler_get_counters(cr->gs->sampler, &sc);
	vmm_get_counters(cr->gs->vm, &vc);
	for (size_t i = 0; i < SAMPLER_N_COUNTERS; i++)
		a[i] -= a0[i];
	for (size_t i = 0; i < VMM_N_COUNTERS; i++)
		b[i] -= b0[i];
	*samples = sc.samples;
	err = record_write_counters(w, &sc, &vc);
	err = err ?: recfile_write_counter(w, "runtime_ns", now);
	err = err ?: recfile_write_counter(w, "attached_ns", now - cr->t0_ns);
	return err;
}

static int op_detach(void *ctx, int reason, int exit_status, char *reply, size_t len)
{
	struct control_run *cr = ctx;
	struct sampler_detach_info info = { 0 };
	struct recfile_writer *w;
	uint64_t samples = 0;
	int err, fd, win_err;

	if (sampler_detach(cr->gs->sampler, DETACH_TIMEOUT_NS, &info)) { /* counted in info */ }
	win_err = sampler_window_error(cr->gs->sampler); /* a counter refused the window's rate */
	pthread_rwlock_wrlock(&cr->lock);
	w = cr->w;
	fd = cr->fd;
	cr->w = NULL;
	cr->fd = -1;
	pthread_rwlock_unlock(&cr->lock);
	if (!w)
		return -EALREADY;
	err = atomic_load(&cr->write_err);
	if (err || win_err)
		reason = HVP_END_ERROR;
	err = err ?: record_write_kernel_meta(w, cr->gs->sampler);
	err = err ?: window_counters(cr, w, &samples);
	err = err ?: recfile_write_end(w, (enum hvp_end_reason)reason,
				       reason == HVP_END_EXIT_DEVICE ? exit_status : 0);
	err = recfile_writer_close(w) ?: err;
	if (!err && fsync(fd) != 0 && errno != EINVAL)
		err = -errno;
	close(fd);
	if (err || win_err) {
		/* the recording is complete (END error) when only the counter failed */
		snprintf(reply, len, "reason=error samples=%llu error=%s",
			 (unsigned long long)samples, ctl_err_name(-(err ?: win_err)));
		return err;
	}
	snprintf(reply, len, "reason=%s status=%d samples=%llu marks_dropped=%u vcpus_late=%u",
		 ctl_reason_word(reason), reason == HVP_END_EXIT_DEVICE ? exit_status : 0,
		 (unsigned long long)samples, info.marks_dropped, info.vcpus_late);
	return 0;
}

static ssize_t op_cmd_send(void *ctx, const void *buf, size_t len)
{
	struct control_run *cr = ctx;

	return vmm_cmd_send(cr->gs->vm, buf, len);
}

static void op_cmd_kick(void *ctx)
{
	struct control_run *cr = ctx;

	vmm_cmd_tx_kick(cr->gs->vm);
}

static bool op_window_failed(void *ctx)
{
	struct control_run *cr = ctx;

	return atomic_load(&cr->write_err) != 0 || sampler_window_error(cr->gs->sampler) != 0;
}

/* ---------------------------------------------------------------- life */

int control_run_create(struct control_run **out)
{
	struct control_run *cr = calloc(1, sizeof(*cr));

	if (!cr)
		return -ENOMEM;
	pthread_rwlock_init(&cr->lock, NULL);
	cr->fd = -1;
	cr->chan[0] = cr->chan[1] = -1;
	cr->sink = (struct sampler_sink){ .sample = sink_sample, .thread = sink_thread,
					  .process = sink_process, .user_stack = sink_user_stack,
					  .mapping = sink_mapping, .event = sink_event, .ctx = cr };
	cr->ops = (struct control_ops){ .ctx = cr, .status = op_status, .attach = op_attach,
					.detach = op_detach, .window_failed = op_window_failed };
	*out = cr;
	return 0;
}

const struct sampler_sink *control_run_sink(struct control_run *cr)
{
	return &cr->sink;
}

int control_run_chan_fd(struct control_run *cr)
{
	if (cr->chan[1] < 0 && pipe2(cr->chan, O_CLOEXEC | O_NONBLOCK) != 0) {
		int err = -errno;

		cli_error("--control: the command channel's pipe: %s", hvp_strerror(err));
		return err;
	}
	/* a large pipe: the guest's output waits there while the server is busy */
	if (fcntl(cr->chan[1], F_SETPIPE_SZ, 1 << 20) < 0) { /* the default 64 KiB does too */ }
	return cr->chan[1];
}

static void *server_thread(void *arg)
{
	struct control_run *cr = arg;

	while (control_server_step(cr->srv, SERVER_POLL_MS) == 0)
		;
	return NULL;
}

int control_run_start(struct control_run *cr, const char *path, const struct guest_opts *g,
		      struct guest *gs)
{
	struct control_config cfg = { .path = path, .chan = cr->chan[0] >= 0, .chan_fd = cr->chan[0] };
	int err;

	cr->g = g;
	cr->gs = gs;
	if (cfg.chan) {
		cr->ops.cmd_send = op_cmd_send;
		cr->ops.cmd_kick = op_cmd_kick;
	}
	err = control_server_create(&cfg, &cr->ops, &cr->srv);
	if (err) {
		cli_error("--control %s: %s", path,
			  err == -EEXIST	 ? "a file that is not a socket is in the way"
			  : err == -EADDRINUSE ? "another hvprof is listening there"
					       : hvp_strerror(err));
		return err;
	}
	err = -pthread_create(&cr->thread, NULL, server_thread, cr);
	if (err) {
		cli_error("--control %s: cannot start its thread: %s", path, hvp_strerror(err));
		control_server_destroy(cr->srv);
		cr->srv = NULL;
		return err;
	}
	cr->thread_started = true;
	fprintf(stderr, "hvprof: control socket %s (hvprof record --attach %s)\n", path, path);
	return 0;
}

void control_run_stop(struct control_run *cr, const struct vmm_result *res)
{
	if (!cr || !cr->srv)
		return;
	if (cr->thread_started) {
		control_server_end(cr->srv, res->reason,
				   res->reason == HVP_END_EXIT_DEVICE ? res->exit_status : 0);
		pthread_join(cr->thread, NULL);
		cr->thread_started = false;
	}
	control_server_destroy(cr->srv);
	cr->srv = NULL;
}

void control_run_destroy(struct control_run *cr)
{
	if (!cr)
		return;
	if (cr->thread_started) { /* never started the VM: end the thread */
		struct vmm_result res = { .reason = HVP_END_ERROR };

		control_run_stop(cr, &res);
	}
	control_server_destroy(cr->srv);
	for (int i = 0; i < 2; i++)
		if (cr->chan[i] >= 0)
			close(cr->chan[i]);
	pthread_rwlock_destroy(&cr->lock);
	free(cr);
}
