// SPDX-License-Identifier: MIT
// Recording reader: checks the header, then returns intact records until the end or the first
// damaged one (bad CRC, impossible size, cut short), saying where and why it stopped. Reads
// format versions 1 (a CRC per record) and 2 (CRC-checked blocks of records).
#define pr_fmt(fmt) "recfile: " fmt

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <hvprof/log.h>
#include <hvprof/profile.h>

#include "recfile_internal.h"

#define READ_CHUNK 65536

struct recfile_reader {
	int fd;
	int own_fd;
	int err;             /* sticky: the error every later next() returns */
	int eof;             /* read(2) returned 0 */
	uint32_t version;
	uint64_t records;
	uint64_t skipped;
	uint64_t offset;     /* file offset of buf[pos] */
	/* Version 2: the block being read, whole in buf up to block_end. */
	uint64_t block_offset;  /* its file offset */
	uint32_t block_records; /* records it holds */
	uint32_t block_left;    /* records of it not read yet (0: at a block boundary) */
	size_t block_end;
	uint8_t *buf;
	size_t cap, pos, len; /* valid bytes are buf[pos, len) */
	char *strs;          /* NUL-terminated copies of the strings of the current record */
	size_t strs_cap;
	char name[256];
	char errmsg[512];
};

/*
 * Make @need bytes available at buf[pos] (fewer only at end of file). Return the number of
 * bytes available (>= need unless the file ended), or -errno.
 */
static ssize_t fill(struct recfile_reader *r, size_t need)
{
	if (r->len - r->pos >= need)
		return (ssize_t)(r->len - r->pos);
	if (r->pos) {
		memmove(r->buf, r->buf + r->pos, r->len - r->pos);
		r->len -= r->pos;
		r->pos = 0;
	}
	if (need > r->cap) {
		size_t cap = need > 2 * r->cap ? need : 2 * r->cap;
		uint8_t *nb = realloc(r->buf, cap);

		if (!nb)
			return -ENOMEM;
		r->buf = nb;
		r->cap = cap;
	}
	while (r->len < need && !r->eof) {
		ssize_t n = read(r->fd, r->buf + r->len, r->cap - r->len);

		if (n < 0) {
			int err = -errno;

			if (err == -EINTR)
				continue;
			return err;
		}
		if (n == 0)
			r->eof = 1;
		r->len += (size_t)n;
	}
	return (ssize_t)(r->len - r->pos);
}

static int __printf(3, 4) set_error(struct recfile_reader *r, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->errmsg, sizeof(r->errmsg), fmt, ap);
	va_end(ap);
	r->err = err;
	pr_debug(LOG_RECFILE, "%s: %s", r->name, r->errmsg);
	return err;
}

/* fill(), its failure said (the reader's error message) and returned as -errno. */
static ssize_t fill_or_fail(struct recfile_reader *r, size_t need)
{
	ssize_t n = fill(r, need);

	if (n < 0)
		return set_error(r, (int)n, "offset %" PRIu64 ": read failed: %s", r->offset,
				 hvp_strerror((int)n));
	return n;
}

static void copy_err(char *errbuf, size_t errbuf_len, const char *name, const char *msg)
{
	if (errbuf && errbuf_len)
		snprintf(errbuf, errbuf_len, "%s: %s", name, msg);
}

static int check_header(struct recfile_reader *r)
{
	const uint8_t *p;
	uint32_t hdr_size;
	ssize_t n;

	n = fill(r, RECFILE_HEADER_SIZE);
	if (n < 0)
		return set_error(r, (int)n, "read of the file header failed: %s",
				 hvp_strerror((int)n));
	if (n == 0)
		return set_error(r, -EBADMSG, "empty file (0 bytes): not an hvprof recording, or "
				 "one whose writer stopped before its header");
	if (n < RECFILE_MAGIC_LEN || memcmp(r->buf, RECFILE_MAGIC, RECFILE_MAGIC_LEN) != 0)
		return set_error(r, -EBADMSG, "bad magic (not an hvprof recording)");
	if (n < RECFILE_HEADER_SIZE)
		return set_error(r, -EBADMSG, "file header cut short (%zd of %d bytes)", n,
				 RECFILE_HEADER_SIZE);
	p = r->buf + RECFILE_MAGIC_LEN;
	r->version = get_u32(&p);
	hdr_size = get_u32(&p);
	if (r->version == 0)
		return set_error(r, -EBADMSG, "bad format version 0");
	if (r->version > RECFILE_VERSION)
		return set_error(r, -ENOTSUP,
				 "format version %" PRIu32 " is newer than this hvprof reads (%d)",
				 r->version, RECFILE_VERSION);
	if (hdr_size < RECFILE_HEADER_SIZE || hdr_size > 4096)
		return set_error(r, -EBADMSG, "bad file header size %" PRIu32, hdr_size);
	/* A longer header (a later minor addition) is skipped. */
	n = fill(r, hdr_size);
	if (n < 0)
		return set_error(r, (int)n, "read of the file header failed: %s",
				 hvp_strerror((int)n));
	if ((size_t)n < hdr_size)
		return set_error(r, -EBADMSG, "file header cut short (%zd of %" PRIu32 " bytes)", n,
				 hdr_size);
	r->pos += hdr_size;
	r->offset = hdr_size;
	return 0;
}

int recfile_reader_open_fd(int fd, const char *name, struct recfile_reader **out, char *errbuf,
			   size_t errbuf_len)
{
	struct recfile_reader *r;
	int err;

	if (fd < 0 || !out)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->fd = fd;
	if (name)
		snprintf(r->name, sizeof(r->name), "%s", name);
	else
		snprintf(r->name, sizeof(r->name), "fd %d", fd);
	err = check_header(r);
	if (err) {
		copy_err(errbuf, errbuf_len, r->name, r->errmsg);
		recfile_reader_close(r);
		return err;
	}
	*out = r;
	return 0;
}

int recfile_reader_open(const char *path, struct recfile_reader **out, char *errbuf,
			size_t errbuf_len)
{
	int fd, err;

	if (!path || !out)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		copy_err(errbuf, errbuf_len, path, hvp_strerror(err));
		return err;
	}
	err = recfile_reader_open_fd(fd, path, out, errbuf, errbuf_len);
	if (err) {
		close(fd);
		return err;
	}
	(*out)->own_fd = 1;
	return 0;
}

void recfile_reader_close(struct recfile_reader *r)
{
	if (!r)
		return;
	if (r->own_fd)
		close(r->fd);
	free(r->buf);
	free(r->strs);
	free(r);
}

/* NUL-terminated copies of two byte strings, in r->strs. */
static int copy_strs(struct recfile_reader *r, const uint8_t *a, size_t alen, const uint8_t *b,
		     size_t blen, const char **sa, const char **sb)
{
	size_t need = alen + blen + 2;

	if (need > r->strs_cap) {
		char *ns = realloc(r->strs, need);

		if (!ns)
			return -ENOMEM;
		r->strs = ns;
		r->strs_cap = need;
	}
	memcpy(r->strs, a, alen);
	r->strs[alen] = '\0';
	*sa = r->strs;
	if (sb) {
		memcpy(r->strs + alen + 1, b, blen);
		r->strs[alen + 1 + blen] = '\0';
		*sb = r->strs + alen + 1;
	}
	return 0;
}

/*
 * The decoders of each record type: fill @rec from the payload @p of @plen bytes (its CRC
 * matched). Return 1 decoded; -EBADMSG the payload does not match the type's fields; -ENOMEM.
 */
static int decode_meta(struct recfile_reader *r, const uint8_t *p, size_t plen,
		       struct recfile_record *rec)
{
	uint32_t klen, vlen;
	int err;

	if (plen < RECFILE_META_FIXED)
		return -EBADMSG;
	klen = get_u32(&p);
	vlen = get_u32(&p);
	if ((uint64_t)klen + vlen != plen - RECFILE_META_FIXED)
		return -EBADMSG;
	err = copy_strs(r, p, klen, p + klen, vlen, &rec->meta.key, &rec->meta.value);
	return err ? err : 1;
}

static int decode_sample(struct recfile_reader *r, const uint8_t *p, size_t plen,
			 struct recfile_record *rec)
{
	struct hvp_sample *s = &rec->sample;

	if (plen < RECFILE_SAMPLE_FIXED)
		return -EBADMSG;
	s->time_ns = get_u64(&p);
	s->vcpu = get_u32(&p);
	s->cpl = get_u8(&p);
	s->flags = get_u8(&p);
	s->kernel_stop = get_u8(&p);
	s->user_stop = get_u8(&p);
	s->rip = get_u64(&p);
	s->cr3 = get_u64(&p);
	s->task = get_u64(&p);
	s->pid = (int32_t)get_u32(&p);
	s->tgid = (int32_t)get_u32(&p);
	s->cookie = get_u64(&p);
	s->period = get_u64(&p);
	s->n_kernel = get_u16(&p);
	s->n_user = get_u16(&p);
	(void)get_u32(&p); /* reserved */
	/* SAFETY: both counts bounded by HVP_MAX_CALLCHAIN (the arrays' length) here. */
	if (s->n_kernel > HVP_MAX_CALLCHAIN || s->n_user > HVP_MAX_CALLCHAIN ||
	    plen != RECFILE_SAMPLE_FIXED + 8 * ((size_t)s->n_kernel + s->n_user))
		return -EBADMSG;
	for (unsigned int i = 0; i < s->n_kernel; i++)
		s->kernel_ips[i] = get_u64(&p);
	for (unsigned int i = 0; i < s->n_user; i++)
		s->user_ips[i] = get_u64(&p);
	return 1;
}

static int decode_thread(struct recfile_reader *r, const uint8_t *p, size_t plen,
			 struct recfile_record *rec)
{
	struct hvp_thread *t = &rec->thread;

	if (plen != RECFILE_THREAD_FIXED)
		return -EBADMSG;
	t->time_ns = get_u64(&p);
	t->task = get_u64(&p);
	t->pid = (int32_t)get_u32(&p);
	t->tgid = (int32_t)get_u32(&p);
	t->kthread = get_u8(&p);
	p += 3; /* reserved */
	memcpy(t->comm, p, HVP_COMM_LEN);
	t->comm[HVP_COMM_LEN - 1] = '\0';
	return 1;
}

static int decode_process(struct recfile_reader *r, const uint8_t *p, size_t plen,
			  struct recfile_record *rec)
{
	struct hvp_process *pr = &rec->process;
	uint32_t exe_len;

	if (plen < RECFILE_PROCESS_FIXED)
		return -EBADMSG;
	pr->time_ns = get_u64(&p);
	pr->tgid = (int32_t)get_u32(&p);
	exe_len = get_u32(&p);
	pr->mm = get_u64(&p);
	pr->start_code = get_u64(&p);
	pr->end_code = get_u64(&p);
	/* SAFETY: exe_len <= RECFILE_EXE_MAX < sizeof(pr->exe). */
	if (exe_len > RECFILE_EXE_MAX || plen != RECFILE_PROCESS_FIXED + exe_len)
		return -EBADMSG;
	memcpy(pr->exe, p, exe_len);
	pr->exe[exe_len] = '\0';
	return 1;
}

static int decode_mapping(struct recfile_reader *r, const uint8_t *p, size_t plen,
			  struct recfile_record *rec)
{
	struct hvp_mapping *m = &rec->mapping;
	uint32_t path_len;

	if (plen < RECFILE_MAPPING_FIXED)
		return -EBADMSG;
	m->time_ns = get_u64(&p);
	m->tgid = (int32_t)get_u32(&p);
	m->index = get_u16(&p);
	m->count = get_u16(&p);
	m->start = get_u64(&p);
	m->end = get_u64(&p);
	m->pgoff = get_u64(&p);
	m->ino = get_u64(&p);
	m->dev = get_u32(&p);
	m->prot = get_u32(&p);
	m->build_id_len = get_u8(&p);
	p += 3; /* reserved */
	memcpy(m->build_id, p, RECFILE_BUILD_ID_MAX);
	p += RECFILE_BUILD_ID_MAX;
	path_len = get_u32(&p);
	/* SAFETY: path_len <= RECFILE_EXE_MAX < sizeof(m->path). */
	if (path_len > RECFILE_EXE_MAX || plen != RECFILE_MAPPING_FIXED + path_len ||
	    m->index >= m->count || m->start >= m->end || m->build_id_len > RECFILE_BUILD_ID_MAX)
		return -EBADMSG;
	memcpy(m->path, p, path_len);
	m->path[path_len] = '\0';
	return 1;
}

static int decode_user_stack(struct recfile_reader *r, const uint8_t *p, size_t plen,
			     struct recfile_record *rec)
{
	struct hvp_user_stack *u = &rec->user_stack;

	if (plen < RECFILE_USER_STACK_FIXED)
		return -EBADMSG;
	u->time_ns = get_u64(&p);
	u->cookie = get_u64(&p);
	u->pid = (int32_t)get_u32(&p);
	u->vcpu = get_u32(&p);
	u->stop = get_u8(&p);
	(void)get_u8(&p);
	u->n_user = get_u16(&p);
	(void)get_u32(&p);
	/* SAFETY: n_user bounded by HVP_MAX_CALLCHAIN, the length of user_ips. */
	if (u->n_user > HVP_MAX_CALLCHAIN ||
	    plen != RECFILE_USER_STACK_FIXED + 8 * (size_t)u->n_user)
		return -EBADMSG;
	for (unsigned int i = 0; i < u->n_user; i++)
		u->user_ips[i] = get_u64(&p);
	return 1;
}

static int decode_user_regs(struct recfile_reader *r, const uint8_t *p, size_t plen,
			    struct recfile_record *rec)
{
	struct hvp_user_regs *u = &rec->user_regs;
	uint8_t n_regs;

	(void)r;
	if (plen < RECFILE_USER_REGS_FIXED)
		return -EBADMSG;
	u->time_ns = get_u64(&p);
	u->cookie = get_u64(&p);
	u->pid = (int32_t)get_u32(&p);
	u->vcpu = get_u32(&p);
	u->follows = get_u8(&p);
	n_regs = get_u8(&p);
	(void)get_u16(&p); /* reserved */
	u->stack_len = get_u32(&p);
	u->stack_size = get_u32(&p);
	(void)get_u32(&p); /* reserved */
	/* SAFETY: n_regs == HVP_USER_NREGS, the length of regs; stack_len is the rest of the
	 * payload, which the frame check keeps inside the reader's buffer. */
	if (n_regs != HVP_USER_NREGS ||
	    (u->follows != RECFILE_SAMPLE && u->follows != RECFILE_USER_STACK) ||
	    u->stack_len > HVP_USER_STACK_MAX || u->stack_len > u->stack_size ||
	    plen != RECFILE_USER_REGS_FIXED + (size_t)u->stack_len)
		return -EBADMSG;
	for (unsigned int i = 0; i < HVP_USER_NREGS; i++)
		u->regs[i] = get_u64(&p);
	u->stack = u->stack_len ? p : NULL;
	u->stack_segs = NULL; /* one piece, @stack: a record read can be written again as is */
	u->n_stack_segs = 0;
	return 1;
}

static int decode_counter(struct recfile_reader *r, const uint8_t *p, size_t plen,
			  struct recfile_record *rec)
{
	uint32_t nlen;
	int err;

	if (plen < RECFILE_COUNTER_FIXED)
		return -EBADMSG;
	rec->counter.value = get_u64(&p);
	nlen = get_u32(&p);
	if (nlen != plen - RECFILE_COUNTER_FIXED)
		return -EBADMSG;
	err = copy_strs(r, p, nlen, NULL, 0, &rec->counter.name, NULL);
	return err ? err : 1;
}

static int decode_end(struct recfile_reader *r, const uint8_t *p, size_t plen,
		      struct recfile_record *rec)
{
	if (plen != RECFILE_END_FIXED)
		return -EBADMSG;
	rec->end.reason = get_u32(&p);
	rec->end.exit_status = (int32_t)get_u32(&p);
	return 1;
}

static int decode_event(struct recfile_reader *r, const uint8_t *p, size_t plen,
			struct recfile_record *rec)
{
	if (plen != RECFILE_EVENT_FIXED)
		return -EBADMSG;
	rec->event.time_ns = get_u64(&p);
	rec->event.kind = get_u32(&p);
	rec->event.value = (int32_t)get_u32(&p);
	return 1;
}

typedef int recfile_decode_fn(struct recfile_reader *r, const uint8_t *p, size_t plen,
			      struct recfile_record *rec);

static recfile_decode_fn *const decoders[] = {
	[RECFILE_META] = decode_meta,
	[RECFILE_SAMPLE] = decode_sample,
	[RECFILE_THREAD] = decode_thread,
	[RECFILE_PROCESS] = decode_process,
	[RECFILE_USER_STACK] = decode_user_stack,
	[RECFILE_COUNTER] = decode_counter,
	[RECFILE_END] = decode_end,
	[RECFILE_MAPPING] = decode_mapping,
	[RECFILE_USER_REGS] = decode_user_regs,
	[RECFILE_EVENT] = decode_event,
};

/*
 * Decode a record payload whose CRC matched. Return 1 decoded, 0 unknown type, -EBADMSG,
 * -ENOMEM.
 */
static int decode(struct recfile_reader *r, uint32_t type, const uint8_t *p, size_t plen,
		  struct recfile_record *rec)
{
	uint64_t off = r->offset;
	int ret;

	memset(rec, 0, sizeof(*rec));
	rec->type = (enum recfile_type)type;
	rec->offset = off;
	/* SAFETY: type < ARRAY_SIZE(decoders) before it indexes them. */
	if (type >= ARRAY_SIZE(decoders) || !decoders[type])
		return 0;
	ret = decoders[type](r, p, plen, rec);
	if (ret == -ENOMEM)
		return set_error(r, ret, "offset %" PRIu64 ": out of memory", off);
	if (ret < 0)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": malformed %s record (payload of %zu bytes does "
				 "not match its fields)",
				 off, recfile_type_name(type), plen);
	return ret;
}

/*
 * Version 1: the next record, each with its own CRC: its type and size, at buf[pos, pos + size)
 * with the CRC as its last 4 bytes. Return 1, 0 at the end of the file, or the error.
 */
static int frame_v1(struct recfile_reader *r, uint32_t *type_out, uint32_t *size_out)
{
	const uint8_t *p;
	uint32_t type, size, crc_file;
	uLong crc;
	ssize_t n;

	n = fill_or_fail(r, RECFILE_REC_HDR);
	if (n < 0)
		return (int)n;
	if (n == 0)
		return 0;
	if (n < RECFILE_REC_HDR)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": truncated record (file ends %zd bytes into its "
				 "8-byte header)",
				 r->offset, n);
	p = r->buf + r->pos;
	type = get_u32(&p);
	size = get_u32(&p);
	if (size < RECFILE_REC_MIN || size > RECFILE_MAX_RECORD)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": impossible record size %" PRIu32 " (type %" PRIu32
				 ")",
				 r->offset, size, type);
	n = fill_or_fail(r, size);
	if (n < 0)
		return (int)n;
	if ((size_t)n < size)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": truncated %s record (size %" PRIu32 ", file ends "
				 "after %zd bytes of it)",
				 r->offset, recfile_type_name(type), size, n);
	p = r->buf + r->pos + size - RECFILE_REC_CRC;
	crc_file = get_u32(&p);
	crc = crc32(0L, Z_NULL, 0);
	crc = crc32(crc, r->buf + r->pos, size - RECFILE_REC_CRC);
	if ((uint32_t)crc != crc_file)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": CRC mismatch in a %s record (size %" PRIu32 ")",
				 r->offset, recfile_type_name(type), size);
	*type_out = type;
	*size_out = size;
	return 1;
}

/*
 * Version 2: read the block that starts at buf[pos] whole and check its CRC; the block's records
 * are then at buf[pos, block_end). Return 1, 0 at the end of the file, or the error.
 */
static int block_v2(struct recfile_reader *r)
{
	const uint8_t *p;
	uint32_t tag, size, records, crc_file;
	uLong crc;
	ssize_t n;

	n = fill_or_fail(r, RECFILE_BLOCK_HDR);
	if (n < 0)
		return (int)n;
	if (n == 0)
		return 0;
	if (n < RECFILE_BLOCK_HDR)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": truncated block (file ends %zd bytes into its "
				 "16-byte header)",
				 r->offset, n);
	p = r->buf + r->pos;
	tag = get_u32(&p);
	size = get_u32(&p);
	records = get_u32(&p);
	crc_file = get_u32(&p);
	if (tag != RECFILE_BLOCK_TAG)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": bad block tag 0x%08" PRIx32 " (not \"BLCK\")",
				 r->offset, tag);
	if (size < RECFILE_BLOCK_HDR + RECFILE_REC_HDR || size > RECFILE_MAX_BLOCK || !records ||
	    records > (size - RECFILE_BLOCK_HDR) / RECFILE_REC_HDR)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": impossible block (size %" PRIu32 ", %" PRIu32
				 " records)",
				 r->offset, size, records);
	n = fill_or_fail(r, size);
	if (n < 0)
		return (int)n;
	if ((size_t)n < size)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": truncated block (size %" PRIu32 ", file ends "
				 "after %zd bytes of it)",
				 r->offset, size, n);
	crc = crc32(0L, Z_NULL, 0);
	crc = crc32(crc, r->buf + r->pos, 12);
	crc = crc32(crc, r->buf + r->pos + RECFILE_BLOCK_HDR, size - RECFILE_BLOCK_HDR);
	if ((uint32_t)crc != crc_file)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": CRC mismatch in a block of %" PRIu32
				 " records (size %" PRIu32 "); it and what follows are refused",
				 r->offset, records, size);
	r->block_offset = r->offset;
	r->block_records = records;
	r->block_left = records;
	r->pos += RECFILE_BLOCK_HDR;
	r->offset += RECFILE_BLOCK_HDR;
	r->block_end = r->pos + size - RECFILE_BLOCK_HDR;
	return 1;
}

/* Version 2: the next record of the current block (reading the next block first if needed). */
static int frame_v2(struct recfile_reader *r, uint32_t *type_out, uint32_t *size_out)
{
	const uint8_t *p;
	uint32_t type, size;
	size_t avail;
	int ret;

	if (!r->block_left) {
		ret = block_v2(r);
		if (ret <= 0)
			return ret;
	}
	/* SAFETY: the whole block is in buf up to block_end (block_v2), and pos <= block_end. */
	avail = r->block_end - r->pos;
	if (avail < RECFILE_REC_HDR)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": the block at offset %" PRIu64 " ends after %" PRIu32
				 " of its %" PRIu32 " records",
				 r->offset, r->block_offset, r->block_records - r->block_left,
				 r->block_records);
	p = r->buf + r->pos;
	type = get_u32(&p);
	size = get_u32(&p);
	if (size < RECFILE_REC_HDR || size > RECFILE_MAX_RECORD || size > avail)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": impossible record size %" PRIu32 " (type %" PRIu32
				 ") in the block at offset %" PRIu64,
				 r->offset, size, type, r->block_offset);
	if (r->block_left == 1 && size != avail)
		return set_error(r, -EBADMSG,
				 "offset %" PRIu64 ": the block at offset %" PRIu64 " holds %zu bytes "
				 "after its last record",
				 r->offset, r->block_offset, avail - size);
	r->block_left--;
	*type_out = type;
	*size_out = size;
	return 1;
}

int recfile_reader_next(struct recfile_reader *r, struct recfile_record *rec)
{
	if (!r || !rec)
		return -EINVAL;

	for (;;) {
		uint32_t type = 0, size = 0, trailer;
		int ret;

		if (r->err)
			return r->err;
		if (r->version == 1) {
			ret = frame_v1(r, &type, &size);
			trailer = RECFILE_REC_CRC;
		} else {
			ret = frame_v2(r, &type, &size);
			trailer = 0;
		}
		if (ret <= 0)
			return ret;
		ret = decode(r, type, r->buf + r->pos + RECFILE_REC_HDR,
			     size - RECFILE_REC_HDR - trailer, rec);
		if (ret < 0)
			return ret;
		r->pos += size;
		r->offset += size;
		if (ret == 0) {
			r->skipped++;
			continue;
		}
		r->records++;
		return 1;
	}
}

const char *recfile_reader_error(const struct recfile_reader *r)
{
	return r && r->err ? r->errmsg : NULL;
}

uint64_t recfile_reader_records(const struct recfile_reader *r)
{
	return r ? r->records : 0;
}

uint64_t recfile_reader_offset(const struct recfile_reader *r)
{
	return r ? r->offset : 0;
}

uint64_t recfile_reader_skipped(const struct recfile_reader *r)
{
	return r ? r->skipped : 0;
}

uint32_t recfile_reader_version(const struct recfile_reader *r)
{
	return r ? r->version : 0;
}

const char *recfile_type_name(uint32_t type)
{
	static const char *const names[] = {
		[RECFILE_META] = "META",       [RECFILE_SAMPLE] = "SAMPLE",
		[RECFILE_THREAD] = "THREAD",   [RECFILE_PROCESS] = "PROCESS",
		[RECFILE_USER_STACK] = "USER_STACK", [RECFILE_COUNTER] = "COUNTER",
		[RECFILE_END] = "END",         [RECFILE_MAPPING] = "MAPPING",
		[RECFILE_USER_REGS] = "USER_REGS", [RECFILE_EVENT] = "EVENT",
	};

	if (type < ARRAY_SIZE(names) && names[type])
		return names[type];
	return "unknown";
}

const char *recfile_end_reason_name(uint32_t reason)
{
	static const char *const names[] = {
		[HVP_END_EXIT_DEVICE] = "guest exit", [HVP_END_RESET] = "guest reset",
		[HVP_END_SHUTDOWN] = "triple fault",  [HVP_END_DURATION] = "duration elapsed",
		[HVP_END_SIGNAL] = "signal",          [HVP_END_ERROR] = "error",
		[HVP_END_DETACHED] = "detached",
	};

	if (reason < ARRAY_SIZE(names) && names[reason])
		return names[reason];
	return "unknown";
}

const char *recfile_walk_stop_name(uint32_t stop)
{
	static const char *const names[] = {
		[HVP_WALK_END] = "end",       [HVP_WALK_DEPTH] = "depth",
		[HVP_WALK_FAULT] = "fault",   [HVP_WALK_BAD_FP] = "bad frame pointer",
		[HVP_WALK_NONE] = "none",     [HVP_WALK_DEFERRED] = "deferred",
		[HVP_WALK_LOST] = "lost",     [HVP_WALK_EXECVE] = "execve",
	};

	if (stop < ARRAY_SIZE(names) && names[stop])
		return names[stop];
	return "unknown";
}
