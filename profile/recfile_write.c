// SPDX-License-Identifier: MIT
// Recording writer, the records: encodes each record type into the calling thread's buffer
// (recfile_stream.c writes them out in blocks; docs/recording-format.md).
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/profile.h>

#include "recfile_internal.h"

/* The frame of one record, 8 + @payload_len bytes; returns where its payload goes. */
static uint8_t *rec_frame(uint8_t *p, uint32_t type, size_t payload_len)
{
	put_u32(&p, type);
	put_u32(&p, (uint32_t)(RECFILE_REC_HDR + payload_len));
	return p;
}

/* Bytes of a record of @payload_len bytes, its frame included. */
static size_t rec_bytes(size_t payload_len)
{
	return RECFILE_REC_HDR + payload_len;
}

/*
 * Reserve @payload_len bytes of one record in the calling thread's buffer, write its frame,
 * and return where its payload goes in *@p. Finish with recfile_stream_commit(w, sl).
 * Every caller bounds @payload_len so that the record fits an empty block (RECFILE_BUFFER).
 */
static int rec_one(struct recfile_writer *w, uint32_t type, size_t payload_len,
		   struct recfile_slot *sl, uint8_t **p)
{
	int err = recfile_stream_reserve(w, rec_bytes(payload_len), 1, sl);

	if (err)
		return err;
	*p = rec_frame(sl->p, type, payload_len);
	return 0;
}

int recfile_write_meta(struct recfile_writer *w, const char *key, const char *value)
{
	struct recfile_slot sl;
	size_t klen, vlen;
	uint8_t *p;
	int err;

	if (!w || !key || !value)
		return -EINVAL;
	klen = strlen(key);
	vlen = strlen(value);
	if (!klen || klen > RECFILE_MAX_KEY || vlen > RECFILE_MAX_VALUE)
		return -EINVAL;
	err = rec_one(w, RECFILE_META, RECFILE_META_FIXED + klen + vlen, &sl, &p);
	if (err)
		return err;
	put_u32(&p, (uint32_t)klen);
	put_u32(&p, (uint32_t)vlen);
	put_bytes(&p, key, klen);
	put_bytes(&p, value, vlen);
	recfile_stream_commit(w, &sl);
	return 0;
}

static size_t sample_payload(const struct hvp_sample *s)
{
	return RECFILE_SAMPLE_FIXED + 8 * ((size_t)s->n_kernel + s->n_user);
}

/* Encode the SAMPLE record of @s (checked by the caller) at @p; return its end. */
static uint8_t *put_sample(uint8_t *p, const struct hvp_sample *s)
{
	p = rec_frame(p, RECFILE_SAMPLE, sample_payload(s));
	put_u64(&p, s->time_ns);
	put_u32(&p, s->vcpu);
	put_u8(&p, s->cpl);
	put_u8(&p, s->flags);
	put_u8(&p, s->kernel_stop);
	put_u8(&p, s->user_stop);
	put_u64(&p, s->rip);
	put_u64(&p, s->cr3);
	put_u64(&p, s->task);
	put_u32(&p, (uint32_t)s->pid);
	put_u32(&p, (uint32_t)s->tgid);
	put_u64(&p, s->cookie);
	put_u64(&p, s->period);
	put_u16(&p, s->n_kernel);
	put_u16(&p, s->n_user);
	put_u32(&p, 0); /* reserved */
	for (unsigned int i = 0; i < s->n_kernel; i++)
		put_u64(&p, s->kernel_ips[i]);
	for (unsigned int i = 0; i < s->n_user; i++)
		put_u64(&p, s->user_ips[i]);
	return p;
}

static bool sample_ok(const struct hvp_sample *s)
{
	return s && s->n_kernel <= HVP_MAX_CALLCHAIN && s->n_user <= HVP_MAX_CALLCHAIN;
}

/* @r is a USER_REGS record the writer can store after a record of type @follows (0: any). */
static bool user_regs_ok(const struct hvp_user_regs *r, uint32_t follows)
{
	if (!r || (r->follows != RECFILE_SAMPLE && r->follows != RECFILE_USER_STACK))
		return false;
	if (follows && r->follows != follows)
		return false;
	if (r->stack_len > HVP_USER_STACK_MAX || r->stack_len > r->stack_size)
		return false;
	if (r->n_stack_segs) { /* pieces: they add up to stack_len, each with its bytes */
		uint64_t sum = 0;

		if (!r->stack_segs || r->n_stack_segs > HVP_USER_STACK_SEGS)
			return false;
		for (uint32_t i = 0; i < r->n_stack_segs; i++) {
			if (!r->stack_segs[i].p && r->stack_segs[i].len)
				return false;
			sum += r->stack_segs[i].len;
		}
		return sum == r->stack_len;
	}
	return r->stack || !r->stack_len;
}

static size_t user_regs_payload(const struct hvp_user_regs *r)
{
	return RECFILE_USER_REGS_FIXED + (size_t)r->stack_len;
}

/* @len bytes of a USER_REGS stack at *@p; @nt: the whole stack is large (put_bytes_nt). */
static void put_stack_piece(uint8_t **p, const uint8_t *src, size_t len, bool nt)
{
	if (nt)
		put_bytes_nt(p, src, len);
	else
		put_bytes(p, src, len);
}

/* Encode the USER_REGS record of @r (checked by the caller) at @p; return its end. */
static uint8_t *put_user_regs(uint8_t *p, const struct hvp_user_regs *r)
{
	p = rec_frame(p, RECFILE_USER_REGS, user_regs_payload(r));
	put_u64(&p, r->time_ns);
	put_u64(&p, r->cookie);
	put_u32(&p, (uint32_t)r->pid);
	put_u32(&p, r->vcpu);
	put_u8(&p, r->follows);
	put_u8(&p, HVP_USER_NREGS);
	put_u16(&p, 0); /* reserved */
	put_u32(&p, r->stack_len);
	put_u32(&p, r->stack_size);
	put_u32(&p, 0); /* reserved */
	for (unsigned int i = 0; i < HVP_USER_NREGS; i++)
		put_u64(&p, r->regs[i]);
	/* SAFETY: stack_len <= HVP_USER_STACK_MAX (user_regs_ok), counted in the reserved size;
	 * the pieces add up to it (user_regs_ok). */
	if (!r->n_stack_segs)
		put_stack_piece(&p, r->stack, r->stack_len, r->stack_len >= RECFILE_STREAM_COPY_MIN);
	for (uint32_t i = 0; i < r->n_stack_segs; i++)
		put_stack_piece(&p, r->stack_segs[i].p, r->stack_segs[i].len,
				r->stack_len >= RECFILE_STREAM_COPY_MIN);
	return p;
}

int recfile_write_sample(struct recfile_writer *w, const struct hvp_sample *s)
{
	return recfile_write_sample_regs(w, s, NULL);
}

/*
 * A SAMPLE and its USER_REGS are one entry of the thread's buffer: one stream position, so no
 * other record can fall between them (RECFILE_BUFFER holds the largest pair: recfile_internal.h).
 */
int recfile_write_sample_regs(struct recfile_writer *w, const struct hvp_sample *s,
			      const struct hvp_user_regs *r)
{
	struct recfile_slot sl;
	size_t bytes;
	uint8_t *p;
	int err;

	if (!w || !sample_ok(s) || (r && !user_regs_ok(r, RECFILE_SAMPLE)))
		return -EINVAL;
	bytes = rec_bytes(sample_payload(s)) + (r ? rec_bytes(user_regs_payload(r)) : 0);
	err = recfile_stream_reserve(w, bytes, r ? 2 : 1, &sl);
	if (err)
		return err;
	p = put_sample(sl.p, s);
	if (r)
		put_user_regs(p, r);
	recfile_stream_commit(w, &sl);
	return 0;
}

int recfile_write_user_regs(struct recfile_writer *w, const struct hvp_user_regs *r)
{
	struct recfile_slot sl;
	int err;

	if (!w || !user_regs_ok(r, 0))
		return -EINVAL;
	err = recfile_stream_reserve(w, rec_bytes(user_regs_payload(r)), 1, &sl);
	if (err)
		return err;
	put_user_regs(sl.p, r);
	recfile_stream_commit(w, &sl);
	return 0;
}

int recfile_write_thread(struct recfile_writer *w, const struct hvp_thread *t)
{
	uint8_t comm[HVP_COMM_LEN] = { 0 }, *p;
	struct recfile_slot sl;
	int err;

	if (!w || !t)
		return -EINVAL;
	/* NUL-padded and always NUL-terminated on disk, whatever the caller's array holds. */
	memcpy(comm, t->comm, strnlen(t->comm, HVP_COMM_LEN - 1));
	err = rec_one(w, RECFILE_THREAD, RECFILE_THREAD_FIXED, &sl, &p);
	if (err)
		return err;
	put_u64(&p, t->time_ns);
	put_u64(&p, t->task);
	put_u32(&p, (uint32_t)t->pid);
	put_u32(&p, (uint32_t)t->tgid);
	put_u8(&p, t->kthread ? 1 : 0);
	put_u8(&p, 0);
	put_u16(&p, 0); /* reserved */
	put_bytes(&p, comm, sizeof(comm));
	recfile_stream_commit(w, &sl);
	return 0;
}

int recfile_write_process(struct recfile_writer *w, const struct hvp_process *pr)
{
	struct recfile_slot sl;
	size_t exe_len;
	uint8_t *p;
	int err;

	if (!w || !pr)
		return -EINVAL;
	exe_len = strnlen(pr->exe, RECFILE_EXE_MAX);
	err = rec_one(w, RECFILE_PROCESS, RECFILE_PROCESS_FIXED + exe_len, &sl, &p);
	if (err)
		return err;
	put_u64(&p, pr->time_ns);
	put_u32(&p, (uint32_t)pr->tgid);
	put_u32(&p, (uint32_t)exe_len);
	put_u64(&p, pr->mm);
	put_u64(&p, pr->start_code);
	put_u64(&p, pr->end_code);
	put_bytes(&p, pr->exe, exe_len);
	recfile_stream_commit(w, &sl);
	return 0;
}

int recfile_write_mapping(struct recfile_writer *w, const struct hvp_mapping *m)
{
	struct recfile_slot sl;
	size_t path_len;
	uint8_t *p;
	int err;

	if (!w || !m || m->index >= m->count || m->start >= m->end ||
	    m->build_id_len > RECFILE_BUILD_ID_MAX)
		return -EINVAL;
	path_len = strnlen(m->path, RECFILE_EXE_MAX);
	err = rec_one(w, RECFILE_MAPPING, RECFILE_MAPPING_FIXED + path_len, &sl, &p);
	if (err)
		return err;
	put_u64(&p, m->time_ns);
	put_u32(&p, (uint32_t)m->tgid);
	put_u16(&p, m->index);
	put_u16(&p, m->count);
	put_u64(&p, m->start);
	put_u64(&p, m->end);
	put_u64(&p, m->pgoff);
	put_u64(&p, m->ino);
	put_u32(&p, m->dev);
	put_u32(&p, m->prot);
	put_u8(&p, m->build_id_len);
	put_u8(&p, 0);
	put_u8(&p, 0);
	put_u8(&p, 0);
	put_bytes(&p, m->build_id, RECFILE_BUILD_ID_MAX);
	put_u32(&p, (uint32_t)path_len);
	put_bytes(&p, m->path, path_len);
	recfile_stream_commit(w, &sl);
	return 0;
}

static size_t user_stack_payload(const struct hvp_user_stack *u)
{
	return RECFILE_USER_STACK_FIXED + 8 * (size_t)u->n_user;
}

/* Encode the USER_STACK record of @u (checked by the caller) at @p; return its end. */
static uint8_t *put_user_stack(uint8_t *p, const struct hvp_user_stack *u)
{
	p = rec_frame(p, RECFILE_USER_STACK, user_stack_payload(u));
	put_u64(&p, u->time_ns);
	put_u64(&p, u->cookie);
	put_u32(&p, (uint32_t)u->pid);
	put_u32(&p, u->vcpu);
	put_u8(&p, u->stop);
	put_u8(&p, 0);
	put_u16(&p, u->n_user);
	put_u32(&p, 0); /* reserved */
	for (unsigned int i = 0; i < u->n_user; i++)
		put_u64(&p, u->user_ips[i]);
	return p;
}

int recfile_write_user_stack(struct recfile_writer *w, const struct hvp_user_stack *u)
{
	return recfile_write_user_stack_regs(w, u, NULL);
}

int recfile_write_user_stack_regs(struct recfile_writer *w, const struct hvp_user_stack *u,
				  const struct hvp_user_regs *r)
{
	struct recfile_slot sl;
	size_t bytes;
	uint8_t *p;
	int err;

	if (!w || !u || u->n_user > HVP_MAX_CALLCHAIN || (r && !user_regs_ok(r, RECFILE_USER_STACK)))
		return -EINVAL;
	bytes = rec_bytes(user_stack_payload(u)) + (r ? rec_bytes(user_regs_payload(r)) : 0);
	err = recfile_stream_reserve(w, bytes, r ? 2 : 1, &sl);
	if (err)
		return err;
	p = put_user_stack(sl.p, u);
	if (r)
		put_user_regs(p, r);
	recfile_stream_commit(w, &sl);
	return 0;
}

int recfile_write_counter(struct recfile_writer *w, const char *name, uint64_t value)
{
	struct recfile_slot sl;
	size_t len;
	uint8_t *p;
	int err;

	if (!w || !name)
		return -EINVAL;
	len = strlen(name);
	if (!len || len > RECFILE_MAX_KEY)
		return -EINVAL;
	err = rec_one(w, RECFILE_COUNTER, RECFILE_COUNTER_FIXED + len, &sl, &p);
	if (err)
		return err;
	put_u64(&p, value);
	put_u32(&p, (uint32_t)len);
	put_bytes(&p, name, len);
	recfile_stream_commit(w, &sl);
	return 0;
}

int recfile_write_event(struct recfile_writer *w, const struct hvp_event *e)
{
	struct recfile_slot sl;
	uint8_t *p;
	int err;

	if (!w || !e)
		return -EINVAL;
	err = rec_one(w, RECFILE_EVENT, RECFILE_EVENT_FIXED, &sl, &p);
	if (err)
		return err;
	put_u64(&p, e->time_ns);
	put_u32(&p, e->kind);
	put_u32(&p, (uint32_t)e->value);
	recfile_stream_commit(w, &sl);
	return 0;
}

int recfile_write_end(struct recfile_writer *w, enum hvp_end_reason reason, int32_t exit_status)
{
	struct recfile_slot sl;
	uint8_t *p;
	int err;

	if (!w || reason < HVP_END_EXIT_DEVICE || reason > HVP_END_DETACHED)
		return -EINVAL;
	err = recfile_stream_reserve(w, rec_bytes(RECFILE_END_FIXED), 1, &sl);
	if (err)
		return err;
	p = rec_frame(sl.p, RECFILE_END, RECFILE_END_FIXED);
	put_u32(&p, (uint32_t)reason);
	put_u32(&p, (uint32_t)exit_status);
	recfile_stream_commit(w, &sl);
	return 0;
}
