// SPDX-License-Identifier: MIT
// The symbolization pass of loading: every distinct raw stack (load.c) becomes a stack of
// locations (distinct frame and ip) and a stack of frames, both aggregated in the profile; the
// kept samples are then pointed at their location stacks and sorted by time.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addrspace.h"
#include "profile_internal.h"

/* One pass over the raw stacks: the stack being built, and what is shared between stacks. */
struct pass {
	struct profile *p;
	const struct raw_stacks *raw;
	struct symbolizer *sym;
	unsigned int max_stack; /* 0: no bound */
	struct seqtab loc_ids; /* key [frame, ip] -> index in p->locs */
	struct u64map cache;   /* ip cache key (see symbolize_stack()) -> index in p->locs */
	uint64_t *key;         /* the stack of frames: [pid, tgid, frame ids root..leaf] */
	uint64_t *lkey;        /* the stack of locations: [index in p->stacks, locs root..leaf] */
	uint32_t nk, nl;       /* values in key and lkey */
};

static const char *lost_reason(uint64_t lost, char *buf, size_t len)
{
	if (lost == RAW_LOST_DROPPED)
		return "dropped";
	if (lost == RAW_LOST_NO_RECORD)
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
		struct loc *nl = array_grow(p->locs, &p->cap_locs, sizeof(*nl), 1024);

		if (!nl)
			return -ENOMEM;
		p->locs = nl;
	}
	if (p->frames[frame].kind == FRAME_USER || p->frames[frame].kind == FRAME_KERNEL) {
		struct mapping *m;

		err = profile_mapping_of(p, p->frames[frame].dso, &mapping);
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
static int ip_loc(struct pass *ps, uint64_t cache_key, int kernel, const struct addrspace *as,
		  uint64_t ip, uint32_t *loc)
{
	uint64_t val, sym_off;
	uint32_t frame;
	int err;

	if (cache_key && !u64map_get(&ps->cache, cache_key, &val)) {
		*loc = (uint32_t)val;
		return 0;
	}
	if (kernel)
		err = symbolize_kernel(ps->sym, ip, &frame, &sym_off);
	else
		err = symbolize_user_as(ps->sym, as, ip, &frame, &sym_off);
	if (!err)
		err = make_loc(ps->p, &ps->loc_ids, frame, ip, sym_off, loc);
	if (!err && cache_key)
		err = u64map_put(&ps->cache, cache_key, *loc);
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

/* Append a frame and its location to the stacks being built. */
static void push(struct pass *ps, uint32_t frame, uint32_t loc)
{
	/*
	 * SAFETY: a raw stack has at most a comm, a truncation and a lost frame and
	 * 2 * HVP_MAX_CALLCHAIN ips (the reader checks the counts), which key and lkey have
	 * room for after their fixed fields.
	 */
	ps->key[ps->nk++] = frame;
	ps->lkey[ps->nl++] = loc;
}

/* A frame with no ip (the comm, a lost user stack), pushed with its location. */
static int push_named(struct pass *ps, enum frame_kind kind, const char *name, const char *dso,
		      int resolved)
{
	uint32_t frame, loc;
	int err;

	err = profile_frame(ps->p, kind, name, dso, resolved, &frame);
	if (!err)
		err = make_loc(ps->p, &ps->loc_ids, frame, 0, UINT64_MAX, &loc);
	if (!err)
		push(ps, frame, loc);
	return err;
}

/* The user ips of a raw stack, symbolized into the stacks being built (root first). */
static int push_user(struct pass *ps, const uint64_t *raw, const uint64_t *uips, uint32_t n_user)
{
	const struct addrspace *as = NULL;
	uint64_t as_key = raw[RAW_AS];
	uint32_t loc;
	int err;

	/* SAFETY: RAW_AS is 0 or an address-space id + 1 the loader made (< ases->n). */
	if (as_key)
		as = as_table_get(ps->raw->ases, (uint32_t)(as_key - 1));
	/* ips are innermost first; stacks are written root first. */
	for (uint32_t j = n_user; j-- > 0;) {
		/* Cache key: address space + 1 in bits 47..62, the user IP (< 2^47) below; bit 63 0. */
		uint64_t ck = as_key && as_key < 0xffff && uips[j] < (1ULL << 47)
				      ? as_key << 47 | uips[j]
				      : 0;

		err = ip_loc(ps, ck, 0, as, uips[j], &loc);
		if (err)
			return err;
		push(ps, ps->p->locs[loc].frame, loc);
	}
	return 0;
}

/* Symbolize raw stack @i into p->stacks and p->lstacks; *@lstack: its index in p->lstacks. */
static int symbolize_stack(struct pass *ps, size_t i, uint32_t *lstack)
{
	struct profile *p = ps->p;
	uint32_t len, loc;
	const uint64_t *raw = seqtab_key(&ps->raw->stacks, i, &len);
	uint32_t n_kernel = (uint32_t)raw[RAW_N_KERNEL], n_user = (uint32_t)raw[RAW_N_USER];
	const uint64_t *kips = raw + RAW_FIXED, *uips = kips + n_kernel;
	uint64_t lost = raw[RAW_LOST];
	uint64_t count = ps->raw->stacks.e[i].count, period = ps->raw->stacks.e[i].period;
	uint32_t trunc_at = raw[RAW_TRUNC] ? n_kernel + n_user : 0;
	char buf[96], name[128];
	size_t sidx, lidx;
	int err;

	/* --max-stack: keep the innermost max_stack ips, kernel (the leaf side) first */
	if (ps->max_stack && n_kernel + n_user > ps->max_stack) {
		trunc_at = ps->max_stack;
		if (n_kernel >= ps->max_stack) {
			n_kernel = ps->max_stack;
			n_user = 0;
		} else {
			n_user = ps->max_stack - n_kernel;
		}
		lost = RAW_LOST_NONE; /* outer than every frame kept */
	}
	ps->nk = 0;
	ps->nl = LSTACK_KEY_LOCS;
	ps->key[ps->nk++] = raw[RAW_PID];
	ps->key[ps->nk++] = raw[RAW_TGID];
	err = push_named(ps, FRAME_COMM, strpool_get(&p->strs, (uint32_t)raw[RAW_COMM]), "", 1);
	if (!err && trunc_at) {
		snprintf(name, sizeof(name), "[truncated at %" PRIu32 " frames]", trunc_at);
		err = push_named(ps, FRAME_LOST, name, "[unknown]", 0);
		p->stats.truncated += count;
	}
	if (!err && lost != RAW_LOST_NONE) {
		snprintf(name, sizeof(name), "[user stack lost: %s]",
			 lost_reason(lost, buf, sizeof(buf)));
		err = push_named(ps, FRAME_LOST, name, "[unknown]", 0);
	}
	if (!err)
		err = push_user(ps, raw, uips, n_user);
	if (err)
		return err;
	for (uint32_t j = n_kernel; j-- > 0;) {
		/* Kernel IPs have the top bit set; user cache keys above never do. */
		uint64_t ck = kips[j] >> 63 ? kips[j] : 0;

		err = ip_loc(ps, ck, 1, NULL, kips[j], &loc);
		if (err)
			return err;
		push(ps, p->locs[loc].frame, loc);
	}
	err = seqtab_add(&p->stacks, ps->key, ps->nk, count, period, &sidx);
	if (err)
		return err;
	ps->lkey[0] = sidx;
	err = seqtab_add(&p->lstacks, ps->lkey, ps->nl, count, period, &lidx);
	*lstack = (uint32_t)lidx;
	return err;
}

/* The buffers of a pass (key, lkey); its tables start empty. Return: 0, or -ENOMEM. */
static int pass_init(struct pass *ps, struct profile *p, const struct raw_stacks *raw,
		     struct symbolizer *sym, unsigned int max_stack)
{
	*ps = (struct pass){ .p = p, .raw = raw, .sym = sym, .max_stack = max_stack };
	/* room for the comm, a truncation and a lost frame, and every ip */
	ps->key = malloc((STACK_KEY_FRAMES + 3 + 2 * HVP_MAX_CALLCHAIN) * sizeof(*ps->key));
	ps->lkey = malloc((LSTACK_KEY_LOCS + 3 + 2 * HVP_MAX_CALLCHAIN) * sizeof(*ps->lkey));
	return ps->key && ps->lkey ? 0 : -ENOMEM;
}

static void pass_free(struct pass *ps)
{
	free(ps->lkey);
	free(ps->key);
	u64map_free(&ps->cache);
	seqtab_free(&ps->loc_ids);
}

/* The stacks, frames and unresolved statistics of @p. */
static void pass_stats(struct profile *p)
{
	p->stats.stacks = p->stacks.n;
	p->stats.frames = p->n_frames;
	p->stats.unresolved = 0;
	for (size_t i = 0; i < p->n_frames; i++)
		if (!p->frames[i].resolved && p->frames[i].kind != FRAME_COMM)
			p->stats.unresolved++;
}

int symbolize_pass(struct profile *p, const struct raw_stacks *raw, struct symbolizer *sym,
		   unsigned int max_stack)
{
	struct pass ps;
	uint32_t *raw2l = NULL;
	int err;

	err = pass_init(&ps, p, raw, sym, max_stack);
	raw2l = malloc((raw->stacks.n ? raw->stacks.n : 1) * sizeof(*raw2l));
	if (!err && !raw2l)
		err = -ENOMEM;
	for (size_t i = 0; i < raw->stacks.n && !err; i++)
		err = symbolize_stack(&ps, i, &raw2l[i]);
	if (err)
		goto out;
	/* SAFETY: every kept sample's lstack is a raw index < raw->stacks.n (set by the loader). */
	for (size_t i = 0; i < p->n_samples; i++)
		p->samples[i].lstack = raw2l[p->samples[i].lstack];
	if (p->n_samples > 1) /* qsort's array may not be NULL, even for 0 elements */
		qsort(p->samples, p->n_samples, sizeof(*p->samples), cmp_psample);
	pass_stats(p);
out:
	free(raw2l);
	pass_free(&ps);
	return err;
}

int symbolize_pass_windows(struct profile *p, struct raw_stacks *raws, size_t n,
			   struct symbolizer *sym, unsigned int max_stack,
			   struct profile_stacks **outs)
{
	/* built apart and copied to @outs on success only: the caller's array is left as it was */
	struct profile_stacks **sets = calloc(n ? n : 1, sizeof(*sets));
	struct pass ps;
	uint32_t lstack;
	size_t made = 0;
	int err;

	err = pass_init(&ps, p, NULL, sym, max_stack);
	if (!err && !sets)
		err = -ENOMEM;
	for (size_t k = 0; k < n && !err; k++) {
		/* each table alone in p->stacks, in its own order: profile_load() of that window */
		seqtab_free(&p->stacks);
		seqtab_free(&p->lstacks);
		ps.raw = &raws[k];
		for (size_t i = 0; i < raws[k].stacks.n && !err; i++)
			err = symbolize_stack(&ps, i, &lstack);
		if (!err)
			err = profile_stacks_from_profile(p, &sets[k]);
		made += !err;
		seqtab_free(&raws[k].stacks); /* done with: the next window's pass needs room */
	}
	if (!err) {
		pass_stats(p);
		memcpy(outs, sets, n * sizeof(*outs));
	}
	pass_free(&ps);
	while (err && made)
		profile_stacks_free(sets[--made]);
	free(sets);
	return err;
}
