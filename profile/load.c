// SPDX-License-Identifier: MIT
// Loading a recording: records to raw samples. Tracks the comm per pid and the address space
// per tgid (addrspace.c), holds the records a USER_REGS completes (user_unwind.c), has
// load_join.c join deferred user stacks to kernel samples by cookie, and aggregates raw stacks;
// symbolize_pass.c then turns the distinct raw stacks into the profile's stacks.
#define pr_fmt(fmt) "profile: " fmt

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/log.h>
#include <hvprof/profile.h>

#include "load_internal.h"
#include "user_unwind.h"

static int thread_comm(struct loader *ld, int32_t pid, uint8_t flags, uint32_t *comm)
{
	char buf[32];
	uint64_t val;

	if (!u64map_get(&ld->comm_of_pid, (uint64_t)(int64_t)pid, &val)) {
		*comm = (uint32_t)val;
		return 0;
	}
	/* No THREAD record for it: perf's convention, ":PID". */
	if (pid < 0 || (flags & HVP_SAMPLE_NO_TASK))
		snprintf(buf, sizeof(buf), "[unknown]");
	else
		snprintf(buf, sizeof(buf), ":%" PRId32, pid);
	return strpool_intern(&ld->p->strs, buf, strlen(buf), comm);
}

const struct addrspace *loader_current_as(const struct loader *ld, int32_t tgid)
{
	return as_table_current(&ld->ast, tgid);
}

int loader_symbolizer(struct loader *ld, struct symbolizer **out)
{
	int err = 0;

	if (!ld->sym)
		err = symbolizer_create(ld->p, &ld->cfg, &ld->sym);
	if (!err)
		*out = ld->sym;
	return err;
}

/* RAW_AS of a sample of @tgid now: its current address space's id + 1, 0 none. */
static uint64_t as_of(struct loader *ld, int32_t tgid)
{
	const struct addrspace *as = as_table_current(&ld->ast, tgid);

	return as ? as->id + 1ull : 0;
}

/* Keep one sample (keep_samples): @raw is its raw stack index until symbolize_pass(). */
static int keep_sample(struct profile *p, uint64_t time_ns, uint32_t vcpu, uint64_t period,
		       size_t raw)
{
	if (p->n_samples == p->cap_samples) {
		struct psample *ns = array_grow(p->samples, &p->cap_samples, sizeof(*ns), 4096);

		if (!ns)
			return -ENOMEM;
		p->samples = ns;
	}
	p->samples[p->n_samples++] = (struct psample){ .time_ns = time_ns, .period = period,
						       .lstack = (uint32_t)raw, .vcpu = vcpu };
	return 0;
}

/* Count @rs, a kept sample, in the profile's statistics. */
static void count_sample(struct profile_stats *st, const struct raw_sample *rs)
{
	st->samples++;
	st->period_total += rs->period;
	if (rs->cpl == 3)
		st->user_samples++;
	else
		st->kernel_samples++;
	st->kthread_samples += (rs->flags & HVP_SAMPLE_KTHREAD) != 0;
	st->deferred += rs->deferred != 0;
	st->joined += rs->joined != 0;
	st->lost_user += rs->lost != RAW_LOST_NONE;
}

/* Whether a sample at @time_ns is in time window @k (both ends included). */
static int in_window(const struct loader *ld, size_t k, uint64_t time_ns)
{
	return time_ns >= ld->wins[k].start_ns && time_ns <= ld->wins[k].end_ns;
}

/* Whether a sample at @time_ns is in some time window, or the load has none. */
static int in_any_window(const struct loader *ld, uint64_t time_ns)
{
	for (size_t k = 0; k < ld->n_wins; k++)
		if (in_window(ld, k, time_ns))
			return 1;
	return !ld->n_wins;
}

/*
 * Aggregate one complete sample into the raw table, if the filters keep it (with
 * --kernel-only/--user-only, only the kernel/user part of its callchain); with time windows,
 * into the table of each window it is in.
 */
int loader_add_raw(struct loader *ld, const struct raw_sample *in)
{
	struct raw_sample rs = *in;
	uint64_t *k = ld->key;
	size_t idx;
	int err = 0;

	if (!sample_filter_keep(&ld->filter, strpool_get(&ld->p->strs, rs.comm), rs.pid, rs.tgid,
				rs.time_ns, rs.cpl) ||
	    !in_any_window(ld, rs.time_ns)) {
		ld->p->stats.filtered_out++;
		return 0;
	}
	if (ld->filter.only == PROFILE_ONLY_KERNEL) {
		rs.n_user = 0;
		rs.lost = RAW_LOST_NONE;
		rs.trunc = 0;
	} else if (ld->filter.only == PROFILE_ONLY_USER) {
		rs.n_kernel = 0;
	}
	count_sample(&ld->p->stats, &rs);
	/* SAFETY: n_kernel, n_user <= HVP_MAX_CALLCHAIN (checked by the reader). */
	k[RAW_COMM] = rs.comm;
	k[RAW_PID] = (uint64_t)(int64_t)rs.pid;
	k[RAW_TGID] = (uint64_t)(int64_t)rs.tgid;
	k[RAW_AS] = rs.as;
	k[RAW_LOST] = rs.lost;
	k[RAW_TRUNC] = rs.trunc != 0;
	k[RAW_N_KERNEL] = rs.n_kernel;
	k[RAW_N_USER] = rs.n_user;
	if (rs.n_kernel)
		memcpy(k + RAW_FIXED, rs.kips, rs.n_kernel * sizeof(*k));
	if (rs.n_user)
		memcpy(k + RAW_FIXED + rs.n_kernel, rs.uips, rs.n_user * sizeof(*k));
	if (ld->n_wins) {
		for (size_t w = 0; w < ld->n_wins && !err; w++)
			if (in_window(ld, w, rs.time_ns))
				err = seqtab_add(&ld->win_raw[w].stacks, k,
						 RAW_FIXED + rs.n_kernel + rs.n_user, 1, rs.period,
						 NULL);
		return err;
	}
	err = seqtab_add(&ld->raw.stacks, k, RAW_FIXED + rs.n_kernel + rs.n_user, 1, rs.period,
			 &idx);
	if (err || !ld->keep_samples)
		return err;
	return keep_sample(ld->p, rs.time_ns, rs.vcpu, rs.period, idx);
}

/* The raw_sample of the SAMPLE record @s with thread comm @comm (its own user part, if any). */
struct raw_sample loader_raw_of_sample(struct loader *ld, const struct hvp_sample *s,
					uint32_t comm)
{
	return (struct raw_sample){
		.comm = comm, .pid = s->pid, .tgid = s->tgid, .as = as_of(ld, s->tgid),
		.lost = RAW_LOST_NONE, .kips = s->kernel_ips, .n_kernel = s->n_kernel,
		.uips = s->user_ips, .n_user = s->n_user, .period = s->period,
		.time_ns = s->time_ns, .vcpu = s->vcpu, .cpl = s->cpl, .flags = s->flags,
	};
}

static int on_thread(struct loader *ld, const struct hvp_thread *t)
{
	uint32_t comm;
	int err;

	err = strpool_intern(&ld->p->strs, t->comm, strlen(t->comm), &comm);
	if (!err)
		err = u64map_put(&ld->tgid_of_pid, (uint64_t)(int64_t)t->pid,
				 (uint64_t)(int64_t)t->tgid);
	if (err)
		return err;
	return u64map_put(&ld->comm_of_pid, (uint64_t)(int64_t)t->pid, comm);
}

static int on_mapping(struct loader *ld, const struct hvp_mapping *m)
{
	struct profile_stats *st = &ld->p->stats;
	int err;

	st->mappings++;
	st->mapping_snapshots += m->index == 0;
	err = as_table_mapping(&ld->ast, &ld->p->strs, m);
	st->mapping_bad_records = ld->ast.bad_records;
	return err;
}

static int on_sample(struct loader *ld, const struct hvp_sample *s)
{
	struct raw_sample rs;
	struct pending *pd;
	uint32_t comm;
	int err, joined;

	err = thread_comm(ld, s->pid, s->flags, &comm);
	if (err)
		return err;
	rs = loader_raw_of_sample(ld, s, comm);
	if (s->user_stop == HVP_WALK_LOST) {
		rs.lost = RAW_LOST_DROPPED;
		rs.n_user = 0;
		return loader_add_raw(ld, &rs);
	}
	if (s->user_stop == HVP_WALK_EXECVE) {
		/* the user registers were an old program's, the task already on execve's new mm */
		rs.lost = RAW_LOST_STOP | HVP_WALK_EXECVE;
		rs.n_user = 0;
		return loader_add_raw(ld, &rs);
	}
	if (s->user_stop != HVP_WALK_DEFERRED) {
		rs.trunc = s->user_stop == HVP_WALK_DEPTH && s->n_user;
		return loader_add_raw(ld, &rs);
	}

	err = loader_join_early(ld, s, comm, &joined);
	if (err || joined)
		return err;
	pd = malloc(sizeof(*pd) + s->n_kernel * sizeof(pd->ips[0]));
	if (!pd)
		return -ENOMEM;
	pd->next = loader_list_head(&ld->pending, s->cookie);
	/* the samples of one cookie share the address space of its first (struct pending) */
	pd->as = pd->next ? pd->next->as : as_of(ld, s->tgid);
	pd->pid = s->pid;
	pd->tgid = s->tgid;
	pd->comm = comm;
	pd->period = s->period;
	pd->time_ns = s->time_ns;
	pd->vcpu = s->vcpu;
	pd->cpl = s->cpl;
	pd->flags = s->flags;
	pd->n_kernel = s->n_kernel;
	memcpy(pd->ips, s->kernel_ips, s->n_kernel * sizeof(pd->ips[0]));
	err = u64map_put(&ld->pending, s->cookie, (uint64_t)(uintptr_t)pd);
	if (err)
		free(pd);
	return err;
}

static int on_record(struct loader *ld, const struct recfile_record *rec)
{
	struct profile *p = ld->p;

	switch (rec->type) {
	case RECFILE_META:
		return profile_add_meta(p, rec->meta.key, rec->meta.value);
	case RECFILE_SAMPLE:
		return on_sample(ld, &rec->sample);
	case RECFILE_THREAD:
		return on_thread(ld, &rec->thread);
	case RECFILE_PROCESS:
		return as_table_process(&ld->ast, &p->strs, &rec->process);
	case RECFILE_USER_STACK:
		return loader_on_user_stack(ld, &rec->user_stack);
	case RECFILE_COUNTER:
		return profile_set_counter(p, rec->counter.name, rec->counter.value);
	case RECFILE_MAPPING:
		return on_mapping(ld, &rec->mapping);
	case RECFILE_USER_REGS:
		return 0; /* registers and stack of the record before: for the DWARF unwinder */
	case RECFILE_EVENT:
		profile_add_event(p, &rec->event);
		return 0;
	case RECFILE_END:
		p->stats.has_end = 1;
		p->stats.end_reason = rec->end.reason;
		p->stats.exit_status = rec->end.exit_status;
		return 0;
	}
	return 0;
}

/* Unwind the held record's user walk with the USER_REGS @ur that completes it (user_unwind.c). */
/* Whether the user chain of @s is shown at all: not when the filters drop the sample, or drop
 * its user frames (--kernel-only); then its USER_REGS needs no unwinding. */
static int unwind_wanted(struct loader *ld, const struct hvp_sample *s)
{
	uint32_t comm;

	if (ld->filter.only == PROFILE_ONLY_KERNEL || !in_any_window(ld, s->time_ns))
		return 0;
	if (thread_comm(ld, s->pid, s->flags, &comm))
		return 1; /* out of memory here: unwind, loader_add_raw() reports the error */
	return sample_filter_keep(&ld->filter, strpool_get(&ld->p->strs, comm), s->pid, s->tgid,
				  s->time_ns, s->cpl);
}

static int apply_user_regs(struct loader *ld, struct recfile_record *h,
			   const struct hvp_user_regs *ur)
{
	struct symbolizer *sym;
	const struct pending *pd;
	uint64_t tgid;
	int err;

	if (h->type == RECFILE_SAMPLE ? !unwind_wanted(ld, &h->sample)
				      : ld->filter.only == PROFILE_ONLY_KERNEL)
		return 0;
	if (!ld->uu) {
		err = loader_symbolizer(ld, &sym);
		if (!err)
			err = user_unwind_new(sym, &ld->uu);
		if (err)
			return err;
	}
	if (h->type == RECFILE_SAMPLE && h->sample.user_stop == HVP_WALK_DEFERRED)
		/* the eager copy of --callchain-mode both: only compared, never shown */
		return user_unwind_eager(ld->uu, loader_current_as(ld, h->sample.tgid), ur,
					 h->sample.user_ips, h->sample.n_user);
	if (h->type == RECFILE_SAMPLE)
		return user_unwind_apply(ld->uu, loader_current_as(ld, h->sample.tgid), ur,
					 h->sample.user_ips, &h->sample.n_user,
					 &h->sample.user_stop);
	if (u64map_get(&ld->tgid_of_pid, (uint64_t)(int64_t)h->user_stack.pid, &tgid))
		tgid = (uint64_t)-1;
	pd = loader_list_head(&ld->pending, h->user_stack.cookie);
	if (pd) /* the address space of the walk: its samples' (struct pending) */
		return user_unwind_apply(ld->uu,
					 pd->as ? as_table_get(&ld->ast, (uint32_t)(pd->as - 1))
						: NULL,
					 ur, h->user_stack.user_ips, &h->user_stack.n_user,
					 &h->user_stack.stop);
	return user_unwind_apply(ld->uu, loader_current_as(ld, (int32_t)tgid), ur,
				 h->user_stack.user_ips, &h->user_stack.n_user,
				 &h->user_stack.stop);
}

/* Process the held record, if any, as it is. */
static int flush_held(struct loader *ld)
{
	if (!ld->has_held)
		return 0;
	ld->has_held = 0;
	return on_record(ld, ld->held);
}

/*
 * One record, in file order: a SAMPLE or USER_STACK of a --call-graph recording is held until
 * the next record, which may be the USER_REGS that completes it (the same time, pid and
 * cookie); a USER_REGS that completes nothing is counted and ignored.
 */
static int on_record_held(struct loader *ld, const struct recfile_record *rec)
{
	int err;

	if (rec->type == RECFILE_USER_REGS) {
		const struct hvp_user_regs *ur = &rec->user_regs;
		struct recfile_record *h = ld->held;
		int match = ld->has_held && (uint32_t)h->type == ur->follows &&
			    (h->type == RECFILE_SAMPLE
				     ? h->sample.pid == ur->pid && h->sample.time_ns == ur->time_ns
				     : h->user_stack.pid == ur->pid &&
					       h->user_stack.cookie == ur->cookie);

		if (!match) {
			ld->p->stats.user_regs_orphans++;
			return flush_held(ld);
		}
		err = apply_user_regs(ld, h, ur);
		return err ? err : flush_held(ld);
	}
	err = flush_held(ld);
	if (err)
		return err;
	if (ld->hold < 0 && (rec->type == RECFILE_SAMPLE || rec->type == RECFILE_USER_STACK))
		ld->hold = profile_meta(ld->p, "call_graph") != NULL;
	if (ld->hold > 0 && (rec->type == RECFILE_SAMPLE || rec->type == RECFILE_USER_STACK)) {
		if (!ld->held && !(ld->held = malloc(sizeof(*ld->held))))
			return -ENOMEM;
		*ld->held = *rec;
		ld->has_held = 1;
		return 0;
	}
	return on_record(ld, rec);
}

/* The user unwinds' counts into the profile's stats. */
static void unwind_stats(struct loader *ld)
{
	const struct user_unwind_stats *us;
	struct profile_stats *st = &ld->p->stats;

	if (!ld->uu)
		return;
	us = user_unwind_stats(ld->uu);
	st->dwarf_unwinds = us->dwarf;
	for (unsigned int i = 0; i < UNW_STOP_COUNT && i < PROFILE_UNWIND_STOPS; i++)
		st->dwarf_stop[i] = us->dwarf_stop[i];
	st->dwarf_fp_agree = us->dwarf_fp_agree;
	st->dwarf_fp_extended = us->fp_extended;
	st->leaf_checked = us->leaf_checked;
	st->leaf_fixed = us->leaf_fixed;
	st->leaf_unchecked = us->leaf_unchecked;
	st->eager_compared = us->eager_compared;
	st->eager_equal = us->eager_equal;
	st->eager_no_stack = us->eager_no_stack;
}

static void loader_free(struct loader *ld)
{
	loader_free_lists(ld);
	u64map_free(&ld->comm_of_pid);
	u64map_free(&ld->tgid_of_pid);
	user_unwind_free(ld->uu);
	free(ld->held);
	symbolizer_free(ld->sym);
	as_table_free(&ld->ast);
	seqtab_free(&ld->raw.stacks);
	for (size_t w = 0; ld->win_raw && w < ld->n_wins; w++)
		seqtab_free(&ld->win_raw[w].stacks);
	free(ld->win_raw);
	sample_filter_free(&ld->filter);
}

static void copy_err(char *errbuf, size_t errbuf_len, const char *name, const char *what, int err)
{
	if (errbuf && errbuf_len)
		snprintf(errbuf, errbuf_len, "%s: %s: %s", name, what, hvp_strerror(err));
}

/* Load the recording of @r into *@out or, with @n_wins time windows @wins, into the @n_wins
 * stack sets @outs (profile_load_windows_fd(); *@out is then not written). */
static int load(struct recfile_reader *r, const char *name, const struct profile_options *opts,
		const struct profile_time_window *wins, size_t n_wins, struct profile **out,
		struct profile_stacks **outs, char *errbuf, size_t errbuf_len)
{
	struct loader ld = { .wins = wins, .n_wins = n_wins };
	struct recfile_record *rec;
	struct symbolizer *sym;
	struct profile *p;
	int ret, err;

	p = calloc(1, sizeof(*p));
	rec = malloc(sizeof(*rec));
	ld.win_raw = n_wins ? calloc(n_wins, sizeof(*ld.win_raw)) : NULL;
	if (!p || !rec || (n_wins && !ld.win_raw)) {
		err = -ENOMEM;
		copy_err(errbuf, errbuf_len, name, "loading", err);
		goto err_free;
	}
	ld.p = p;
	ld.hold = -1;
	ld.raw.ases = &ld.ast;
	for (size_t w = 0; w < n_wins; w++)
		ld.win_raw[w].ases = &ld.ast;
	ld.cfg = (struct sym_config){
		.vmlinux = OPT(opts, vmlinux, NULL),
		.symfs = OPT(opts, symfs, NULL),
		.rootfs = OPT(opts, rootfs, NULL),
		.no_symbols = OPT(opts, no_symbols, 0),
	};
	ld.keep_samples = OPT(opts, keep_samples, 0) != 0;
	p->kept_samples = ld.keep_samples;
	err = sample_filter_init(&ld.filter, opts, errbuf, errbuf_len);
	if (err)
		goto err_free;
	if (ld.filter.desc && !(p->filter_desc = strdup(ld.filter.desc))) {
		err = -ENOMEM;
		copy_err(errbuf, errbuf_len, name, "loading", err);
		goto err_free;
	}
	while ((ret = recfile_reader_next(r, rec)) == 1) {
		err = on_record_held(&ld, rec);
		if (err) {
			copy_err(errbuf, errbuf_len, name, "loading", err);
			goto err_free;
		}
	}
	if (ret < 0) {
		if (ret == -ENOMEM) {
			err = ret;
			copy_err(errbuf, errbuf_len, name, "reading", err);
			goto err_free;
		}
		/* Damaged or unreadable past this point: keep everything intact before it. */
		p->read_error = strdup(recfile_reader_error(r) ? recfile_reader_error(r)
								: hvp_strerror(ret));
		if (!p->read_error) {
			err = -ENOMEM;
			copy_err(errbuf, errbuf_len, name, "loading", err);
			goto err_free;
		}
		pr_warn("%s: kept %" PRIu64 " records, stopped at %s", name,
			recfile_reader_records(r), p->read_error);
	}
	p->stats.records = recfile_reader_records(r);
	err = flush_held(&ld);
	unwind_stats(&ld);
	if (!err)
		err = loader_finish_pending(&ld);
	if (err) {
		copy_err(errbuf, errbuf_len, name, "joining user stacks", err);
		goto err_free;
	}

	err = loader_symbolizer(&ld, &sym);
	if (!err) {
		symbolizer_read_slide(sym); /* META kernel_slide may come after the first USER_REGS */
		err = n_wins ? symbolize_pass_windows(p, ld.win_raw, n_wins, sym,
						      OPT(opts, max_stack, 0u), outs)
			     : symbolize_pass(p, &ld.raw, sym, OPT(opts, max_stack, 0u));
	}
	if (err) {
		copy_err(errbuf, errbuf_len, name, "symbolizing", err);
		goto err_free;
	}
	loader_free(&ld);
	free(rec);
	if (n_wins)
		profile_free(p);
	else
		*out = p;
	return 0;

err_free:
	loader_free(&ld);
	free(rec);
	profile_free(p);
	return err;
}

int profile_load_fd(int fd, const char *name, const struct profile_options *opts,
		    struct profile **out, char *errbuf, size_t errbuf_len)
{
	struct recfile_reader *r;
	char fdname[32];
	int err;

	if (fd < 0 || !out)
		return -EINVAL;
	if (!name) {
		snprintf(fdname, sizeof(fdname), "fd %d", fd);
		name = fdname;
	}
	err = recfile_reader_open_fd(fd, name, &r, errbuf, errbuf_len);
	if (err)
		return err;
	err = load(r, name, opts, NULL, 0, out, NULL, errbuf, errbuf_len);
	recfile_reader_close(r);
	return err;
}

int profile_load(const char *path, const struct profile_options *opts, struct profile **out,
		 char *errbuf, size_t errbuf_len)
{
	struct recfile_reader *r;
	int err;

	if (!path || !out)
		return -EINVAL;
	err = recfile_reader_open(path, &r, errbuf, errbuf_len);
	if (err)
		return err;
	err = load(r, path, opts, NULL, 0, out, NULL, errbuf, errbuf_len);
	recfile_reader_close(r);
	return err;
}

int profile_load_windows_fd(int fd, const char *name, const struct profile_options *opts,
			    const struct profile_time_window *w, size_t n,
			    struct profile_stacks **outs, char *errbuf, size_t errbuf_len)
{
	struct recfile_reader *r;
	int err;

	if (fd < 0 || !name || !w || !outs || !n || n > PROFILE_STACKS_MAX_WINDOWS ||
	    OPT(opts, keep_samples, 0))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (w[i].end_ns < w[i].start_ns)
			return -EINVAL;
	err = recfile_reader_open_fd(fd, name, &r, errbuf, errbuf_len);
	if (err)
		return err;
	err = load(r, name, opts, w, n, NULL, outs, errbuf, errbuf_len);
	recfile_reader_close(r);
	return err;
}
