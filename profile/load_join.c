// SPDX-License-Identifier: MIT
// Loading a recording, the cookie join: a deferred kernel sample waits (struct pending) for the
// USER_STACK with its cookie and pid, and a USER_STACK that comes first waits (struct early_us)
// for its samples; at the end of the file the samples never joined count as lost. load.c reads
// the records and calls in here; both add to the raw table through loader_add_raw().
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/profile.h>

#include "load_internal.h"

/* A USER_STACK that came before any sample with its cookie (kept in case one follows). */
struct early_us {
	struct early_us *next;
	int32_t pid;
	uint8_t stop;
	uint16_t n_user;
	int claimed;
	uint64_t ips[];
};

/* The list of @cookie in @m (pending samples or early user stacks), or NULL. */
void *loader_list_head(const struct u64map *m, uint64_t cookie)
{
	uint64_t val;

	return u64map_get(m, cookie, &val) ? NULL : (void *)(uintptr_t)val;
}

/* The raw_sample of the pending deferred sample @pd (user part to be filled in). */
static struct raw_sample raw_of_pending(const struct pending *pd)
{
	return (struct raw_sample){
		.comm = pd->comm, .pid = pd->pid, .tgid = pd->tgid, .as = pd->as,
		.kips = pd->ips, .n_kernel = pd->n_kernel, .period = pd->period,
		.time_ns = pd->time_ns, .vcpu = pd->vcpu, .cpl = pd->cpl, .flags = pd->flags,
		.deferred = 1,
	};
}

/* RAW_LOST of a sample joined to a USER_STACK of @n_user frames whose walk ended at @stop. */
static uint64_t user_lost(uint16_t n_user, uint8_t stop)
{
	if (n_user)
		return RAW_LOST_NONE;
	return stop == HVP_WALK_LOST ? RAW_LOST_DROPPED : RAW_LOST_STOP | stop;
}

int loader_join_early(struct loader *ld, const struct hvp_sample *s, uint32_t comm, int *joined)
{
	struct early_us *e;
	uint64_t val;

	*joined = 0;
	if (u64map_get(&ld->early, s->cookie, &val))
		return 0;
	for (e = (struct early_us *)(uintptr_t)val; e; e = e->next) {
		struct raw_sample rs = loader_raw_of_sample(ld, s, comm);

		if (e->pid != s->pid)
			continue;
		e->claimed = 1;
		*joined = 1;
		rs.lost = user_lost(e->n_user, e->stop);
		rs.trunc = e->stop == HVP_WALK_DEPTH && e->n_user;
		rs.uips = e->ips;
		rs.n_user = e->n_user;
		rs.deferred = rs.joined = 1;
		return loader_add_raw(ld, &rs);
	}
	return 0;
}

static int keep_early(struct loader *ld, const struct hvp_user_stack *u)
{
	struct early_us *e;
	int err;

	e = malloc(sizeof(*e) + u->n_user * sizeof(e->ips[0]));
	if (!e)
		return -ENOMEM;
	e->pid = u->pid;
	e->stop = u->stop;
	e->n_user = u->n_user;
	e->claimed = 0;
	memcpy(e->ips, u->user_ips, u->n_user * sizeof(e->ips[0]));
	e->next = loader_list_head(&ld->early, u->cookie);
	err = u64map_put(&ld->early, u->cookie, (uint64_t)(uintptr_t)e);
	if (err)
		free(e);
	return err;
}

int loader_on_user_stack(struct loader *ld, const struct hvp_user_stack *u)
{
	struct pending *pd, *next, *keep = NULL;
	struct raw_sample rs;
	uint64_t val, lost;
	int matched = 0, err = 0;

	if (u64map_get(&ld->pending, u->cookie, &val))
		return keep_early(ld, u);
	lost = user_lost(u->n_user, u->stop);
	for (pd = (struct pending *)(uintptr_t)val; pd; pd = next) {
		next = pd->next;
		if (pd->pid != u->pid || err) {
			pd->next = keep;
			keep = pd;
			continue;
		}
		rs = raw_of_pending(pd);
		rs.lost = lost;
		rs.trunc = u->stop == HVP_WALK_DEPTH && u->n_user;
		rs.uips = u->user_ips;
		rs.n_user = u->n_user;
		rs.joined = 1;
		err = loader_add_raw(ld, &rs);
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

/* Free the lists of pending samples and early user stacks (counting unclaimed stacks). */
void loader_free_lists(struct loader *ld)
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
int loader_finish_pending(struct loader *ld)
{
	int err = 0;

	for (size_t i = 0; i < ld->pending.cap && !err; i++) {
		if (!ld->pending.used[i])
			continue;
		for (struct pending *pd = (struct pending *)(uintptr_t)ld->pending.vals[i];
		     pd && !err; pd = pd->next) {
			struct raw_sample rs = raw_of_pending(pd);

			rs.lost = RAW_LOST_NO_RECORD;
			err = loader_add_raw(ld, &rs);
		}
	}
	loader_free_lists(ld);
	return err;
}
