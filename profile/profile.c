// SPDX-License-Identifier: MIT
// Loading a recording: track comm per pid and executable per tgid, join deferred user stacks
// to kernel samples by cookie, aggregate raw stacks, then symbolize each distinct one.
#define pr_fmt(fmt) "profile: " fmt

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/log.h>
#include <hvprof/profile.h>

#include "profile_internal.h"

/* Why a sample shows "[user stack lost: ...]" (raw key field; 0: not lost). */
#define LOST_NONE 0
#define LOST_DROPPED 1   /* the sample says HVP_WALK_LOST, or its USER_STACK does */
#define LOST_NO_RECORD 2 /* deferred, and no USER_STACK with its cookie and pid in the file */
#define LOST_STOP 0x100  /* | enum hvp_walk_stop: the USER_STACK has no frame */

/* raw key: [comm, pid, tgid, image + 1 (0: none), lost, n_kernel, n_user, kernel..., user...] */
#define RAW_FIXED 7
#define RAW_MAX (RAW_FIXED + 2 * HVP_MAX_CALLCHAIN)

/* A deferred kernel sample waiting for the USER_STACK with its cookie. */
struct pending {
	struct pending *next;
	int32_t pid, tgid;
	uint32_t comm;
	uint32_t vcpu;
	uint64_t time_ns;
	uint64_t period;
	uint16_t n_kernel;
	uint64_t ips[];
};

/* A USER_STACK that came before any sample with its cookie (kept in case one follows). */
struct early_us {
	struct early_us *next;
	int32_t pid;
	uint8_t stop;
	uint16_t n_user;
	int claimed;
	uint64_t ips[];
};

struct loader {
	struct profile *p;
	struct u64map comm_of_pid;   /* pid -> comm strpool id */
	struct u64map image_of_tgid; /* tgid -> image index */
	struct seqtab images;        /* key [exe strpool id, start_code, end_code] */
	struct seqtab raw;
	struct u64map pending;       /* cookie -> struct pending * (list head) */
	struct u64map early;         /* cookie -> struct early_us * (list head) */
	int keep_samples;
	uint64_t key[RAW_MAX];
};

int profile_frame(struct profile *p, enum frame_kind kind, const char *name, const char *dso,
		  int resolved, uint32_t *id)
{
	uint32_t name_id, dso_id;
	uint64_t key, val;
	int err;

	err = strpool_intern(&p->strs, name, strlen(name), &name_id);
	if (err)
		return err;
	err = strpool_intern(&p->strs, dso, strlen(dso), &dso_id);
	if (err)
		return err;
	if (name_id >= (1u << 31) || dso_id >= (1u << 31))
		return -ENOMEM; /* the packed key below has 31 bits for each */
	key = (uint64_t)kind << 62 | (uint64_t)name_id << 31 | dso_id;
	if (!u64map_get(&p->frame_ids, key, &val)) {
		*id = (uint32_t)val;
		return 0;
	}
	if (p->n_frames == p->cap_frames) {
		size_t cap = p->cap_frames ? 2 * p->cap_frames : 256;
		struct frame *nf = realloc(p->frames, cap * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		p->frames = nf;
		p->cap_frames = cap;
	}
	err = u64map_put(&p->frame_ids, key, p->n_frames);
	if (err)
		return err;
	p->frames[p->n_frames] = (struct frame){ .name = name_id, .dso = dso_id, .kind = kind,
						 .resolved = resolved ? 1 : 0 };
	*id = (uint32_t)p->n_frames++;
	return 0;
}

static int mapping_of(struct profile *p, uint32_t dso_id, uint32_t *idx)
{
	uint64_t val;
	uint32_t empty;
	int err;

	if (!u64map_get(&p->mapping_of_dso, dso_id, &val)) {
		*idx = (uint32_t)val;
		return 0;
	}
	err = strpool_intern(&p->strs, "", 0, &empty);
	if (err)
		return err;
	if (p->n_mappings == p->cap_mappings) {
		size_t cap = p->cap_mappings ? 2 * p->cap_mappings : 16;
		struct mapping *nm = realloc(p->mappings, cap * sizeof(*nm));

		if (!nm)
			return -ENOMEM;
		p->mappings = nm;
		p->cap_mappings = cap;
	}
	err = u64map_put(&p->mapping_of_dso, dso_id, p->n_mappings);
	if (err)
		return err;
	p->mappings[p->n_mappings] = (struct mapping){ .dso = dso_id, .path = dso_id,
						       .build_id = empty };
	*idx = (uint32_t)p->n_mappings++;
	return 0;
}

int profile_mapping_note(struct profile *p, const char *dso, const char *path,
			 const char *build_id)
{
	uint32_t dso_id, path_id, bid_id, idx;
	int err;

	err = strpool_intern(&p->strs, dso, strlen(dso), &dso_id);
	if (!err)
		err = strpool_intern(&p->strs, path, strlen(path), &path_id);
	if (!err)
		err = strpool_intern(&p->strs, build_id, strlen(build_id), &bid_id);
	if (!err)
		err = mapping_of(p, dso_id, &idx);
	if (err)
		return err;
	p->mappings[idx].path = path_id;
	p->mappings[idx].build_id = bid_id;
	return 0;
}

static int add_meta(struct profile *p, const char *key, const char *value)
{
	char *k, *v;

	if (p->n_meta == p->cap_meta) {
		size_t cap = p->cap_meta ? 2 * p->cap_meta : 32;
		struct meta_kv *nm = realloc(p->meta, cap * sizeof(*nm));

		if (!nm)
			return -ENOMEM;
		p->meta = nm;
		p->cap_meta = cap;
	}
	k = strdup(key);
	v = strdup(value);
	if (!k || !v) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	p->meta[p->n_meta++] = (struct meta_kv){ .key = k, .value = v };
	return 0;
}

static int set_counter(struct profile *p, const char *name, uint64_t value)
{
	char *n;

	for (size_t i = 0; i < p->n_counters; i++) {
		if (strcmp(p->counters[i].name, name) == 0) {
			p->counters[i].value = value;
			return 0;
		}
	}
	if (p->n_counters == p->cap_counters) {
		size_t cap = p->cap_counters ? 2 * p->cap_counters : 16;
		struct counter_kv *nc = realloc(p->counters, cap * sizeof(*nc));

		if (!nc)
			return -ENOMEM;
		p->counters = nc;
		p->cap_counters = cap;
	}
	n = strdup(name);
	if (!n)
		return -ENOMEM;
	p->counters[p->n_counters++] = (struct counter_kv){ .name = n, .value = value };
	return 0;
}

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

static uint64_t image_of(struct loader *ld, int32_t tgid)
{
	uint64_t val;

	if (u64map_get(&ld->image_of_tgid, (uint64_t)(int64_t)tgid, &val))
		return 0;
	return val + 1;
}

/* Keep one sample (keep_samples): @raw is its raw stack index until symbolize_all(). */
static int keep_sample(struct profile *p, uint64_t time_ns, uint32_t vcpu, uint64_t period,
		       size_t raw)
{
	if (p->n_samples == p->cap_samples) {
		size_t cap = p->cap_samples ? 2 * p->cap_samples : 4096;
		struct psample *ns = realloc(p->samples, cap * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		p->samples = ns;
		p->cap_samples = cap;
	}
	p->samples[p->n_samples++] = (struct psample){ .time_ns = time_ns, .period = period,
						       .lstack = (uint32_t)raw, .vcpu = vcpu };
	return 0;
}

/* Aggregate one resolved sample into the raw table. */
static int add_raw(struct loader *ld, uint32_t comm, int32_t pid, int32_t tgid, uint64_t image,
		   uint64_t lost, const uint64_t *kips, unsigned int n_kernel, const uint64_t *uips,
		   unsigned int n_user, uint64_t period, uint64_t time_ns, uint32_t vcpu)
{
	uint64_t *k = ld->key;
	size_t idx;
	int err;

	/* SAFETY: n_kernel, n_user <= HVP_MAX_CALLCHAIN (checked by the reader). */
	k[0] = comm;
	k[1] = (uint64_t)(int64_t)pid;
	k[2] = (uint64_t)(int64_t)tgid;
	k[3] = image;
	k[4] = lost;
	k[5] = n_kernel;
	k[6] = n_user;
	if (n_kernel) /* kips/uips may be NULL when their count is 0 */
		memcpy(k + RAW_FIXED, kips, n_kernel * sizeof(*k));
	if (n_user)
		memcpy(k + RAW_FIXED + n_kernel, uips, n_user * sizeof(*k));
	if (lost != LOST_NONE)
		ld->p->stats.lost_user++;
	err = seqtab_add(&ld->raw, k, RAW_FIXED + n_kernel + n_user, 1, period, &idx);
	if (err || !ld->keep_samples)
		return err;
	return keep_sample(ld->p, time_ns, vcpu, period, idx);
}

static int on_thread(struct loader *ld, const struct hvp_thread *t)
{
	uint32_t comm;
	int err;

	err = strpool_intern(&ld->p->strs, t->comm, strlen(t->comm), &comm);
	if (err)
		return err;
	return u64map_put(&ld->comm_of_pid, (uint64_t)(int64_t)t->pid, comm);
}

static int on_process(struct loader *ld, const struct hvp_process *pr)
{
	uint64_t key[3];
	uint32_t exe;
	size_t idx;
	int err;

	err = strpool_intern(&ld->p->strs, pr->exe, strlen(pr->exe), &exe);
	if (err)
		return err;
	key[0] = exe;
	key[1] = pr->start_code;
	key[2] = pr->end_code;
	err = seqtab_add(&ld->images, key, 3, 1, 0, &idx);
	if (err)
		return err;
	return u64map_put(&ld->image_of_tgid, (uint64_t)(int64_t)pr->tgid, idx);
}

static int join_early(struct loader *ld, const struct hvp_sample *s, uint32_t comm, int *joined)
{
	struct early_us *e;
	uint64_t val;

	*joined = 0;
	if (u64map_get(&ld->early, s->cookie, &val))
		return 0;
	for (e = (struct early_us *)(uintptr_t)val; e; e = e->next) {
		uint64_t lost = LOST_NONE;

		if (e->pid != s->pid)
			continue;
		if (e->n_user == 0)
			lost = e->stop == HVP_WALK_LOST ? LOST_DROPPED : LOST_STOP | e->stop;
		e->claimed = 1;
		*joined = 1;
		ld->p->stats.joined++;
		return add_raw(ld, comm, s->pid, s->tgid, image_of(ld, s->tgid), lost, s->kernel_ips,
			       s->n_kernel, e->ips, e->n_user, s->period, s->time_ns, s->vcpu);
	}
	return 0;
}

static int on_sample(struct loader *ld, const struct hvp_sample *s)
{
	struct profile_stats *st = &ld->p->stats;
	struct pending *pd;
	uint64_t image = image_of(ld, s->tgid), val;
	uint32_t comm;
	int err, joined;

	st->samples++;
	st->period_total += s->period;
	if (s->cpl == 3)
		st->user_samples++;
	else
		st->kernel_samples++;
	if (s->flags & HVP_SAMPLE_KTHREAD)
		st->kthread_samples++;
	err = thread_comm(ld, s->pid, s->flags, &comm);
	if (err)
		return err;

	if (s->user_stop == HVP_WALK_LOST)
		return add_raw(ld, comm, s->pid, s->tgid, image, LOST_DROPPED, s->kernel_ips,
			       s->n_kernel, NULL, 0, s->period, s->time_ns, s->vcpu);
	if (s->user_stop != HVP_WALK_DEFERRED)
		return add_raw(ld, comm, s->pid, s->tgid, image, LOST_NONE, s->kernel_ips,
			       s->n_kernel, s->user_ips, s->n_user, s->period, s->time_ns,
			       s->vcpu);

	st->deferred++;
	err = join_early(ld, s, comm, &joined);
	if (err || joined)
		return err;
	pd = malloc(sizeof(*pd) + s->n_kernel * sizeof(pd->ips[0]));
	if (!pd)
		return -ENOMEM;
	pd->pid = s->pid;
	pd->tgid = s->tgid;
	pd->comm = comm;
	pd->period = s->period;
	pd->time_ns = s->time_ns;
	pd->vcpu = s->vcpu;
	pd->n_kernel = s->n_kernel;
	memcpy(pd->ips, s->kernel_ips, s->n_kernel * sizeof(pd->ips[0]));
	pd->next = u64map_get(&ld->pending, s->cookie, &val) ? NULL
							    : (struct pending *)(uintptr_t)val;
	err = u64map_put(&ld->pending, s->cookie, (uint64_t)(uintptr_t)pd);
	if (err)
		free(pd);
	return err;
}

static int keep_early(struct loader *ld, const struct hvp_user_stack *u)
{
	struct early_us *e;
	uint64_t val;
	int err;

	e = malloc(sizeof(*e) + u->n_user * sizeof(e->ips[0]));
	if (!e)
		return -ENOMEM;
	e->pid = u->pid;
	e->stop = u->stop;
	e->n_user = u->n_user;
	e->claimed = 0;
	memcpy(e->ips, u->user_ips, u->n_user * sizeof(e->ips[0]));
	e->next = u64map_get(&ld->early, u->cookie, &val) ? NULL
							  : (struct early_us *)(uintptr_t)val;
	err = u64map_put(&ld->early, u->cookie, (uint64_t)(uintptr_t)e);
	if (err)
		free(e);
	return err;
}

static int on_user_stack(struct loader *ld, const struct hvp_user_stack *u)
{
	struct pending *pd, *next, *keep = NULL;
	uint64_t val, lost = LOST_NONE, image;
	int matched = 0, err = 0;

	if (u64map_get(&ld->pending, u->cookie, &val))
		return keep_early(ld, u);
	if (u->n_user == 0)
		lost = u->stop == HVP_WALK_LOST ? LOST_DROPPED : LOST_STOP | u->stop;
	for (pd = (struct pending *)(uintptr_t)val; pd; pd = next) {
		next = pd->next;
		if (pd->pid != u->pid || err) {
			pd->next = keep;
			keep = pd;
			continue;
		}
		/* The executable as of the return to user (an exec may have happened since). */
		image = image_of(ld, pd->tgid);
		err = add_raw(ld, pd->comm, pd->pid, pd->tgid, image, lost, pd->ips, pd->n_kernel,
			      u->user_ips, u->n_user, pd->period, pd->time_ns, pd->vcpu);
		ld->p->stats.joined++;
		matched = 1;
		free(pd);
	}
	if (keep)
		err = err ? err : u64map_put(&ld->pending, u->cookie, (uint64_t)(uintptr_t)keep);
	else
		u64map_del(&ld->pending, u->cookie);
	if (err)
		return err;
	return matched ? 0 : keep_early(ld, u);
}

static int on_record(struct loader *ld, const struct recfile_record *rec)
{
	struct profile *p = ld->p;

	switch (rec->type) {
	case RECFILE_META:
		return add_meta(p, rec->meta.key, rec->meta.value);
	case RECFILE_SAMPLE:
		return on_sample(ld, &rec->sample);
	case RECFILE_THREAD:
		return on_thread(ld, &rec->thread);
	case RECFILE_PROCESS:
		return on_process(ld, &rec->process);
	case RECFILE_USER_STACK:
		return on_user_stack(ld, &rec->user_stack);
	case RECFILE_COUNTER:
		return set_counter(p, rec->counter.name, rec->counter.value);
	case RECFILE_END:
		p->stats.has_end = 1;
		p->stats.end_reason = rec->end.reason;
		p->stats.exit_status = rec->end.exit_status;
		return 0;
	}
	return 0;
}

/* Free the lists of pending samples and early user stacks (counting unclaimed stacks). */
static void free_lists(struct loader *ld)
{
	for (size_t i = 0; i < ld->pending.cap; i++) {
		struct pending *pd, *next;

		if (!ld->pending.used[i])
			continue;
		for (pd = (struct pending *)(uintptr_t)ld->pending.vals[i]; pd; pd = next) {
			next = pd->next;
			free(pd);
		}
	}
	u64map_free(&ld->pending);
	for (size_t i = 0; i < ld->early.cap; i++) {
		struct early_us *e, *next;

		if (!ld->early.used[i])
			continue;
		for (e = (struct early_us *)(uintptr_t)ld->early.vals[i]; e; e = next) {
			next = e->next;
			if (!e->claimed)
				ld->p->stats.orphan_user_stacks++;
			free(e);
		}
	}
	u64map_free(&ld->early);
}

/* At the end of the file: deferred samples never joined are lost; unclaimed stacks orphaned. */
static int finish_pending(struct loader *ld)
{
	int err = 0;

	for (size_t i = 0; i < ld->pending.cap && !err; i++) {
		if (!ld->pending.used[i])
			continue;
		for (struct pending *pd = (struct pending *)(uintptr_t)ld->pending.vals[i];
		     pd && !err; pd = pd->next)
			err = add_raw(ld, pd->comm, pd->pid, pd->tgid, image_of(ld, pd->tgid),
				      LOST_NO_RECORD, pd->ips, pd->n_kernel, NULL, 0, pd->period,
				      pd->time_ns, pd->vcpu);
	}
	free_lists(ld);
	return err;
}

static const char *lost_reason(uint64_t lost, char *buf, size_t len)
{
	if (lost == LOST_DROPPED)
		return "dropped";
	if (lost == LOST_NO_RECORD)
		return "no user-stack record";
	snprintf(buf, len, "walk stopped: %s", recfile_walk_stop_name((uint32_t)(lost & 0xff)));
	return buf;
}

/* The loc of (@frame, @ip), created if new; the mapping's address range grows to cover @ip. */
static int make_loc(struct profile *p, struct seqtab *loc_ids, uint32_t frame, uint64_t ip,
		    uint64_t sym_off, uint32_t *loc)
{
	uint64_t key[2] = { frame, ip };
	uint32_t mapping = UINT32_MAX;
	size_t idx;
	int err;

	err = seqtab_add(loc_ids, key, 2, 0, 0, &idx);
	if (err)
		return err;
	*loc = (uint32_t)idx;
	if (idx < p->n_locs)
		return 0;
	if (p->n_locs == p->cap_locs) {
		size_t cap = p->cap_locs ? 2 * p->cap_locs : 1024;
		struct loc *nl = realloc(p->locs, cap * sizeof(*nl));

		if (!nl)
			return -ENOMEM;
		p->locs = nl;
		p->cap_locs = cap;
	}
	if (p->frames[frame].kind == FRAME_USER || p->frames[frame].kind == FRAME_KERNEL) {
		struct mapping *m;

		err = mapping_of(p, p->frames[frame].dso, &mapping);
		if (err)
			return err;
		m = &p->mappings[mapping];
		if (m->start == m->limit) {
			m->start = ip;
			m->limit = ip + 1;
		} else {
			m->start = ip < m->start ? ip : m->start;
			m->limit = ip >= m->limit ? ip + 1 : m->limit;
		}
	}
	p->locs[p->n_locs++] = (struct loc){ .frame = frame, .mapping = mapping, .ip = ip,
					     .sym_off = sym_off };
	return 0;
}

/*
 * The loc of a user or kernel ip, symbolized once per distinct (address space, ip): @cache_key
 * as the packing below, or 0 when the ip cannot be cached (then it is symbolized each time).
 */
static int ip_loc(struct loader *ld, struct symbolizer *sym, struct seqtab *loc_ids,
		  struct u64map *cache, uint64_t cache_key, int kernel, uint64_t image,
		  const char *exe, uint64_t start, uint64_t end, uint64_t ip, uint32_t *loc)
{
	uint64_t val, sym_off;
	uint32_t frame;
	int err;

	if (cache_key && !u64map_get(cache, cache_key, &val)) {
		*loc = (uint32_t)val;
		return 0;
	}
	if (kernel)
		err = symbolize_kernel(sym, ip, &frame, &sym_off);
	else
		err = symbolize_user(sym, image ? (uint32_t)(image - 1) : UINT32_MAX, exe, start,
				     end, ip, &frame, &sym_off);
	if (!err)
		err = make_loc(ld->p, loc_ids, frame, ip, sym_off, loc);
	if (!err && cache_key)
		err = u64map_put(cache, cache_key, *loc);
	return err;
}

static int cmp_psample(const void *a, const void *b)
{
	const struct psample *x = a, *y = b;

	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	if (x->vcpu != y->vcpu)
		return x->vcpu < y->vcpu ? -1 : 1;
	return x->lstack < y->lstack ? -1 : x->lstack > y->lstack;
}

/*
 * Turn every distinct raw stack into a stack of locations and of frames, and aggregate those;
 * kept samples are then pointed at their location stack and sorted by time.
 */
static int symbolize_all(struct loader *ld, struct symbolizer *sym)
{
	struct profile *p = ld->p;
	struct seqtab loc_ids = { 0 };
	struct u64map cache = { 0 };
	uint64_t *key = NULL, *lkey = NULL;
	uint32_t *raw2l = NULL;
	int err = 0;

	key = malloc((STACK_KEY_FRAMES + 1 + 1 + 2 * HVP_MAX_CALLCHAIN) * sizeof(*key));
	lkey = malloc((LSTACK_KEY_LOCS + 1 + 1 + 2 * HVP_MAX_CALLCHAIN) * sizeof(*lkey));
	raw2l = malloc((ld->raw.n ? ld->raw.n : 1) * sizeof(*raw2l));
	if (!key || !lkey || !raw2l) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ld->raw.n && !err; i++) {
		uint32_t len, n_kernel, n_user, frame, loc, nk = 0, nl = LSTACK_KEY_LOCS;
		const uint64_t *raw = seqtab_key(&ld->raw, i, &len);
		const uint64_t *kips, *uips;
		uint64_t image = raw[3], lost = raw[4];
		const char *exe = "";
		uint64_t start = 0, end = 0;
		char buf[96], name[128];
		size_t sidx, lidx;

		n_kernel = (uint32_t)raw[5];
		n_user = (uint32_t)raw[6];
		kips = raw + RAW_FIXED;
		uips = kips + n_kernel;
		key[nk++] = raw[1];
		key[nk++] = raw[2];
		err = profile_frame(p, FRAME_COMM, strpool_get(&p->strs, (uint32_t)raw[0]), "", 1,
				    &frame);
		if (!err)
			err = make_loc(p, &loc_ids, frame, 0, UINT64_MAX, &loc);
		if (err)
			break;
		key[nk++] = frame;
		lkey[nl++] = loc;
		if (image) {
			uint32_t ilen;
			const uint64_t *ik = seqtab_key(&ld->images, image - 1, &ilen);

			exe = strpool_get(&p->strs, (uint32_t)ik[0]);
			start = ik[1];
			end = ik[2];
		}
		if (lost != LOST_NONE) {
			snprintf(name, sizeof(name), "[user stack lost: %s]",
				 lost_reason(lost, buf, sizeof(buf)));
			err = profile_frame(p, FRAME_LOST, name, "[unknown]", 0, &frame);
			if (!err)
				err = make_loc(p, &loc_ids, frame, 0, UINT64_MAX, &loc);
			key[nk++] = frame;
			lkey[nl++] = loc;
		}
		/* ips are innermost first; stacks are written root first. */
		for (uint32_t j = n_user; j-- > 0 && !err;) {
			/* Cache key: image + 1 in bits 47..62, the user IP (< 2^47) below; bit 63 0. */
			uint64_t ck = image && image < 0xffff && uips[j] < (1ULL << 47)
					      ? image << 47 | uips[j]
					      : 0;

			err = ip_loc(ld, sym, &loc_ids, &cache, ck, 0, image, exe, start, end,
				     uips[j], &loc);
			key[nk++] = err ? 0 : p->locs[loc].frame;
			lkey[nl++] = loc;
		}
		for (uint32_t j = n_kernel; j-- > 0 && !err;) {
			/* Kernel IPs have the top bit set; user cache keys above never do. */
			uint64_t ck = kips[j] >> 63 ? kips[j] : 0;

			err = ip_loc(ld, sym, &loc_ids, &cache, ck, 1, 0, "", 0, 0, kips[j], &loc);
			key[nk++] = err ? 0 : p->locs[loc].frame;
			lkey[nl++] = loc;
		}
		if (!err)
			err = seqtab_add(&p->stacks, key, nk, ld->raw.e[i].count,
					 ld->raw.e[i].period, &sidx);
		if (err)
			break;
		lkey[0] = sidx;
		err = seqtab_add(&p->lstacks, lkey, nl, ld->raw.e[i].count, ld->raw.e[i].period,
				 &lidx);
		raw2l[i] = (uint32_t)lidx;
	}
	if (err)
		goto out;
	/* SAFETY: every kept sample's lstack is a raw index < ld->raw.n (set by add_raw). */
	for (size_t i = 0; i < p->n_samples; i++)
		p->samples[i].lstack = raw2l[p->samples[i].lstack];
	if (p->n_samples > 1) /* qsort's array may not be NULL, even for 0 elements */
		qsort(p->samples, p->n_samples, sizeof(*p->samples), cmp_psample);
out:
	free(raw2l);
	free(lkey);
	free(key);
	u64map_free(&cache);
	seqtab_free(&loc_ids);
	return err;
}

static void loader_free(struct loader *ld)
{
	free_lists(ld);
	u64map_free(&ld->comm_of_pid);
	u64map_free(&ld->image_of_tgid);
	seqtab_free(&ld->images);
	seqtab_free(&ld->raw);
}

static void copy_err(char *errbuf, size_t errbuf_len, const char *name, const char *what, int err)
{
	if (errbuf && errbuf_len)
		snprintf(errbuf, errbuf_len, "%s: %s: %s", name, what, hvp_strerror(err));
}

static int load(struct recfile_reader *r, const char *name, const struct profile_options *opts,
		struct profile **out, char *errbuf, size_t errbuf_len)
{
	struct loader ld = { 0 };
	struct symbolizer *sym = NULL;
	struct recfile_record *rec;
	struct sym_config cfg;
	struct profile *p;
	int ret, err;

	p = calloc(1, sizeof(*p));
	rec = malloc(sizeof(*rec));
	if (!p || !rec) {
		err = -ENOMEM;
		copy_err(errbuf, errbuf_len, name, "loading", err);
		goto err_free;
	}
	ld.p = p;
	ld.keep_samples = OPT(opts, keep_samples, 0) != 0;
	p->kept_samples = ld.keep_samples;
	while ((ret = recfile_reader_next(r, rec)) == 1) {
		err = on_record(&ld, rec);
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
	err = finish_pending(&ld);
	if (err) {
		copy_err(errbuf, errbuf_len, name, "joining user stacks", err);
		goto err_free;
	}

	cfg = (struct sym_config){
		.vmlinux = OPT(opts, vmlinux, NULL),
		.symfs = OPT(opts, symfs, NULL),
		.rootfs = OPT(opts, rootfs, NULL),
		.no_symbols = OPT(opts, no_symbols, 0),
	};
	err = symbolizer_create(p, &cfg, &sym);
	if (!err)
		err = symbolize_all(&ld, sym);
	symbolizer_free(sym);
	if (err) {
		copy_err(errbuf, errbuf_len, name, "symbolizing", err);
		goto err_free;
	}
	p->stats.stacks = p->stacks.n;
	p->stats.frames = p->n_frames;
	for (size_t i = 0; i < p->n_frames; i++)
		if (!p->frames[i].resolved && p->frames[i].kind != FRAME_COMM)
			p->stats.unresolved++;
	loader_free(&ld);
	free(rec);
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
	err = load(r, name, opts, out, errbuf, errbuf_len);
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
	err = load(r, path, opts, out, errbuf, errbuf_len);
	recfile_reader_close(r);
	return err;
}

void profile_free(struct profile *p)
{
	if (!p)
		return;
	strpool_free(&p->strs);
	free(p->frames);
	u64map_free(&p->frame_ids);
	seqtab_free(&p->stacks);
	free(p->locs);
	seqtab_free(&p->lstacks);
	free(p->mappings);
	u64map_free(&p->mapping_of_dso);
	free(p->samples);
	for (size_t i = 0; i < p->n_meta; i++) {
		free(p->meta[i].key);
		free(p->meta[i].value);
	}
	free(p->meta);
	for (size_t i = 0; i < p->n_counters; i++)
		free(p->counters[i].name);
	free(p->counters);
	free(p->read_error);
	free(p);
}

const char *profile_read_error(const struct profile *p)
{
	return p ? p->read_error : NULL;
}

const char *profile_meta(const struct profile *p, const char *key)
{
	if (!p || !key)
		return NULL;
	for (size_t i = p->n_meta; i-- > 0;)
		if (strcmp(p->meta[i].key, key) == 0)
			return p->meta[i].value;
	return NULL;
}

int profile_meta_at(const struct profile *p, size_t idx, const char **key, const char **value)
{
	if (!p || idx >= p->n_meta)
		return -ENOENT;
	if (key)
		*key = p->meta[idx].key;
	if (value)
		*value = p->meta[idx].value;
	return 0;
}

int profile_counter(const struct profile *p, const char *name, uint64_t *value)
{
	if (!p || !name)
		return -ENOENT;
	for (size_t i = 0; i < p->n_counters; i++) {
		if (strcmp(p->counters[i].name, name) == 0) {
			if (value)
				*value = p->counters[i].value;
			return 0;
		}
	}
	return -ENOENT;
}

void profile_get_stats(const struct profile *p, struct profile_stats *out)
{
	if (p && out)
		*out = p->stats;
}
