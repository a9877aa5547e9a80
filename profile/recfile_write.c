// SPDX-License-Identifier: MIT
// Recording writer: buffered, thread-safe, append-only records on any fd.
#define pr_fmt(fmt) "recfile: " fmt

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <hvprof/log.h>
#include <hvprof/profile.h>

#include <hvprof/file.h>

#include "recfile_internal.h"

struct recfile_writer {
	pthread_mutex_t lock;
	int fd;
	int err;            /* sticky: first write(2) failure, as -errno */
	uint64_t records;
	uint64_t offset;    /* file offset of buf[0] (for messages) */
	size_t used;        /* bytes in buf */
	uint8_t buf[RECFILE_BUFFER];
};

/* write(2) all of @len, retrying EINTR and short writes. Return 0 or -errno. */
/* Caller holds w->lock. */
static int flush_locked(struct recfile_writer *w)
{
	int err;

	if (w->err)
		return w->err;
	if (!w->used)
		return 0;
	err = hvp_write_all(w->fd, w->buf, w->used);
	if (err) {
		w->err = err;
		pr_err("write of %zu bytes at offset %llu to fd %d failed: %s; the recording stops here",
		       w->used, (unsigned long long)w->offset, w->fd, hvp_strerror(err));
		return err;
	}
	w->offset += w->used;
	w->used = 0;
	return 0;
}

int recfile_writer_open(int fd, struct recfile_writer **out)
{
	struct recfile_writer *w;
	uint8_t hdr[RECFILE_HEADER_SIZE], *p = hdr;
	int err;

	if (fd < 0 || !out)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	err = pthread_mutex_init(&w->lock, NULL);
	if (err) {
		err = -err; /* pthread functions return the errno value itself */
		goto err_free;
	}
	w->fd = fd;

	put_bytes(&p, RECFILE_MAGIC, RECFILE_MAGIC_LEN);
	put_u32(&p, RECFILE_VERSION);
	put_u32(&p, RECFILE_HEADER_SIZE);
	err = hvp_write_all(fd, hdr, sizeof(hdr));
	if (err) {
		pr_err("write of the file header to fd %d failed: %s", fd, hvp_strerror(err));
		goto err_destroy_lock;
	}
	w->offset = sizeof(hdr);
	*out = w;
	return 0;

err_destroy_lock:
	pthread_mutex_destroy(&w->lock);
err_free:
	free(w);
	return err;
}

/*
 * Reserve a record of @payload_len bytes in the buffer (flushing first when it does not fit)
 * and return where its payload goes. Caller holds w->lock; finish with rec_end().
 * Every caller bounds @payload_len so that a record fits in an empty buffer.
 */
static int rec_begin(struct recfile_writer *w, uint32_t type, size_t payload_len, uint8_t **payload)
{
	size_t total = RECFILE_REC_MIN + payload_len;
	uint8_t *p;
	int err;

	if (w->err)
		return w->err;
	if (w->used + total > sizeof(w->buf)) {
		err = flush_locked(w);
		if (err)
			return err;
	}
	p = w->buf + w->used;
	put_u32(&p, type);
	put_u32(&p, (uint32_t)total);
	*payload = p;
	return 0;
}

/* Seal the record whose payload ends at @end with its CRC and account for it. */
static void rec_end(struct recfile_writer *w, uint8_t *end)
{
	uint8_t *start = w->buf + w->used;
	uLong crc = crc32(0L, Z_NULL, 0);

	crc = crc32(crc, start, (uInt)(end - start));
	put_u32(&end, (uint32_t)crc);
	w->used = (size_t)(end - w->buf);
	w->records++;
}

int recfile_write_meta(struct recfile_writer *w, const char *key, const char *value)
{
	size_t klen, vlen;
	uint8_t *p;
	int err;

	if (!w || !key || !value)
		return -EINVAL;
	klen = strlen(key);
	vlen = strlen(value);
	if (!klen || klen > RECFILE_MAX_KEY || vlen > RECFILE_MAX_VALUE)
		return -EINVAL;

	pthread_mutex_lock(&w->lock);
	err = rec_begin(w, RECFILE_META, RECFILE_META_FIXED + klen + vlen, &p);
	if (!err) {
		put_u32(&p, (uint32_t)klen);
		put_u32(&p, (uint32_t)vlen);
		put_bytes(&p, key, klen);
		put_bytes(&p, value, vlen);
		rec_end(w, p);
	}
	pthread_mutex_unlock(&w->lock);
	return err;
}

/* The SAMPLE record of @s (checked by the caller). Caller holds w->lock. */
static int put_sample_locked(struct recfile_writer *w, const struct hvp_sample *s)
{
	uint8_t *p;
	int err;

	err = rec_begin(w, RECFILE_SAMPLE,
			RECFILE_SAMPLE_FIXED + 8 * ((size_t)s->n_kernel + s->n_user), &p);
	if (err)
		return err;
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
	rec_end(w, p);
	return 0;
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
	return r->stack_len <= HVP_USER_STACK_MAX && r->stack_len <= r->stack_size &&
	       (r->stack || !r->stack_len);
}

/* The USER_REGS record of @r (checked by the caller). Caller holds w->lock. */
static int put_user_regs_locked(struct recfile_writer *w, const struct hvp_user_regs *r)
{
	uint8_t *p;
	int err;

	err = rec_begin(w, RECFILE_USER_REGS, RECFILE_USER_REGS_FIXED + (size_t)r->stack_len, &p);
	if (err)
		return err;
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
	/* SAFETY: stack_len <= HVP_USER_STACK_MAX (user_regs_ok), counted in rec_begin's size. */
	put_bytes(&p, r->stack, r->stack_len);
	rec_end(w, p);
	return 0;
}

/*
 * Make room for @bytes in the buffer at once (flushing first if needed), so that the records of
 * a pair go out in one buffer and no flush falls between them. Caller holds w->lock.
 */
static int reserve_locked(struct recfile_writer *w, size_t bytes)
{
	if (w->err)
		return w->err;
	if (w->used + bytes > sizeof(w->buf))
		return flush_locked(w);
	return 0;
}

int recfile_write_sample(struct recfile_writer *w, const struct hvp_sample *s)
{
	return recfile_write_sample_regs(w, s, NULL);
}

int recfile_write_sample_regs(struct recfile_writer *w, const struct hvp_sample *s,
			      const struct hvp_user_regs *r)
{
	size_t bytes;
	int err;

	if (!w || !sample_ok(s) || (r && !user_regs_ok(r, RECFILE_SAMPLE)))
		return -EINVAL;
	bytes = RECFILE_REC_MIN + RECFILE_SAMPLE_FIXED + 8 * ((size_t)s->n_kernel + s->n_user);
	if (r)
		bytes += RECFILE_REC_MIN + RECFILE_USER_REGS_FIXED + (size_t)r->stack_len;

	pthread_mutex_lock(&w->lock);
	err = reserve_locked(w, bytes);
	if (!err)
		err = put_sample_locked(w, s);
	if (!err && r)
		err = put_user_regs_locked(w, r);
	pthread_mutex_unlock(&w->lock);
	return err;
}

int recfile_write_user_regs(struct recfile_writer *w, const struct hvp_user_regs *r)
{
	int err;

	if (!w || !user_regs_ok(r, 0))
		return -EINVAL;
	pthread_mutex_lock(&w->lock);
	err = put_user_regs_locked(w, r);
	pthread_mutex_unlock(&w->lock);
	return err;
}

int recfile_write_thread(struct recfile_writer *w, const struct hvp_thread *t)
{
	uint8_t comm[HVP_COMM_LEN] = { 0 }, *p;
	int err;

	if (!w || !t)
		return -EINVAL;
	/* NUL-padded and always NUL-terminated on disk, whatever the caller's array holds. */
	memcpy(comm, t->comm, strnlen(t->comm, HVP_COMM_LEN - 1));

	pthread_mutex_lock(&w->lock);
	err = rec_begin(w, RECFILE_THREAD, RECFILE_THREAD_FIXED, &p);
	if (!err) {
		put_u64(&p, t->time_ns);
		put_u64(&p, t->task);
		put_u32(&p, (uint32_t)t->pid);
		put_u32(&p, (uint32_t)t->tgid);
		put_u8(&p, t->kthread ? 1 : 0);
		put_u8(&p, 0);
		put_u16(&p, 0); /* reserved */
		put_bytes(&p, comm, sizeof(comm));
		rec_end(w, p);
	}
	pthread_mutex_unlock(&w->lock);
	return err;
}

int recfile_write_process(struct recfile_writer *w, const struct hvp_process *pr)
{
	size_t exe_len;
	uint8_t *p;
	int err;

	if (!w || !pr)
		return -EINVAL;
	exe_len = strnlen(pr->exe, RECFILE_EXE_MAX);

	pthread_mutex_lock(&w->lock);
	err = rec_begin(w, RECFILE_PROCESS, RECFILE_PROCESS_FIXED + exe_len, &p);
	if (!err) {
		put_u64(&p, pr->time_ns);
		put_u32(&p, (uint32_t)pr->tgid);
		put_u32(&p, (uint32_t)exe_len);
		put_u64(&p, pr->mm);
		put_u64(&p, pr->start_code);
		put_u64(&p, pr->end_code);
		put_bytes(&p, pr->exe, exe_len);
		rec_end(w, p);
	}
	pthread_mutex_unlock(&w->lock);
	return err;
}

int recfile_write_mapping(struct recfile_writer *w, const struct hvp_mapping *m)
{
	size_t path_len;
	uint8_t *p;
	int err;

	if (!w || !m || m->index >= m->count || m->start >= m->end ||
	    m->build_id_len > RECFILE_BUILD_ID_MAX)
		return -EINVAL;
	path_len = strnlen(m->path, RECFILE_EXE_MAX);

	pthread_mutex_lock(&w->lock);
	err = rec_begin(w, RECFILE_MAPPING, RECFILE_MAPPING_FIXED + path_len, &p);
	if (!err) {
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
		rec_end(w, p);
	}
	pthread_mutex_unlock(&w->lock);
	return err;
}

/* The USER_STACK record of @u (checked by the caller). Caller holds w->lock. */
static int put_user_stack_locked(struct recfile_writer *w, const struct hvp_user_stack *u)
{
	uint8_t *p;
	int err;

	err = rec_begin(w, RECFILE_USER_STACK, RECFILE_USER_STACK_FIXED + 8 * (size_t)u->n_user,
			&p);
	if (err)
		return err;
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
	rec_end(w, p);
	return 0;
}

int recfile_write_user_stack(struct recfile_writer *w, const struct hvp_user_stack *u)
{
	return recfile_write_user_stack_regs(w, u, NULL);
}

int recfile_write_user_stack_regs(struct recfile_writer *w, const struct hvp_user_stack *u,
				  const struct hvp_user_regs *r)
{
	size_t bytes;
	int err;

	if (!w || !u || u->n_user > HVP_MAX_CALLCHAIN || (r && !user_regs_ok(r, RECFILE_USER_STACK)))
		return -EINVAL;
	bytes = RECFILE_REC_MIN + RECFILE_USER_STACK_FIXED + 8 * (size_t)u->n_user;
	if (r)
		bytes += RECFILE_REC_MIN + RECFILE_USER_REGS_FIXED + (size_t)r->stack_len;

	pthread_mutex_lock(&w->lock);
	err = reserve_locked(w, bytes);
	if (!err)
		err = put_user_stack_locked(w, u);
	if (!err && r)
		err = put_user_regs_locked(w, r);
	pthread_mutex_unlock(&w->lock);
	return err;
}

int recfile_write_counter(struct recfile_writer *w, const char *name, uint64_t value)
{
	size_t len;
	uint8_t *p;
	int err;

	if (!w || !name)
		return -EINVAL;
	len = strlen(name);
	if (!len || len > RECFILE_MAX_KEY)
		return -EINVAL;

	pthread_mutex_lock(&w->lock);
	err = rec_begin(w, RECFILE_COUNTER, RECFILE_COUNTER_FIXED + len, &p);
	if (!err) {
		put_u64(&p, value);
		put_u32(&p, (uint32_t)len);
		put_bytes(&p, name, len);
		rec_end(w, p);
	}
	pthread_mutex_unlock(&w->lock);
	return err;
}

int recfile_write_event(struct recfile_writer *w, const struct hvp_event *e)
{
	uint8_t *p;
	int err;

	if (!w || !e)
		return -EINVAL;
	pthread_mutex_lock(&w->lock);
	err = rec_begin(w, RECFILE_EVENT, RECFILE_EVENT_FIXED, &p);
	if (!err) {
		put_u64(&p, e->time_ns);
		put_u32(&p, e->kind);
		put_u32(&p, (uint32_t)e->value);
		rec_end(w, p);
	}
	pthread_mutex_unlock(&w->lock);
	return err;
}

int recfile_write_end(struct recfile_writer *w, enum hvp_end_reason reason, int32_t exit_status)
{
	uint8_t *p;
	int err;

	if (!w || reason < HVP_END_EXIT_DEVICE || reason > HVP_END_DETACHED)
		return -EINVAL;

	pthread_mutex_lock(&w->lock);
	err = rec_begin(w, RECFILE_END, RECFILE_END_FIXED, &p);
	if (!err) {
		put_u32(&p, (uint32_t)reason);
		put_u32(&p, (uint32_t)exit_status);
		rec_end(w, p);
	}
	pthread_mutex_unlock(&w->lock);
	return err;
}

int recfile_writer_flush(struct recfile_writer *w)
{
	int err;

	if (!w)
		return -EINVAL;
	pthread_mutex_lock(&w->lock);
	err = flush_locked(w);
	pthread_mutex_unlock(&w->lock);
	return err;
}

uint64_t recfile_writer_records(struct recfile_writer *w)
{
	uint64_t n;

	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	n = w->records;
	pthread_mutex_unlock(&w->lock);
	return n;
}

int recfile_writer_close(struct recfile_writer *w)
{
	int err;

	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	err = flush_locked(w);
	pthread_mutex_unlock(&w->lock);
	pthread_mutex_destroy(&w->lock);
	free(w);
	return err;
}
