// SPDX-License-Identifier: MIT
// Sets of stacks of frame names with sample counts (what diff compares): from a loaded profile,
// from a recording cut by time windows (one set each), or parsed from folded-stack text, which
// is treated as hostile input.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "profile_internal.h"
#include "recfile_internal.h"

static struct profile_stacks *stacks_new(void)
{
	return calloc(1, sizeof(struct profile_stacks));
}

void profile_stacks_free(struct profile_stacks *s)
{
	if (!s)
		return;
	strpool_free(&s->names);
	seqtab_free(&s->stacks);
	free(s);
}

uint64_t profile_stacks_total(const struct profile_stacks *s)
{
	return s ? s->total : 0;
}

size_t profile_stacks_count(const struct profile_stacks *s)
{
	return s ? s->stacks.n : 0;
}

/* Add @count samples of the stack of name ids @ids (root first); -ERANGE if the total overflows. */
static int stacks_add(struct profile_stacks *s, const uint64_t *ids, uint32_t n, uint64_t count)
{
	if (__builtin_add_overflow(s->total, count, &s->total))
		return -ERANGE;
	return seqtab_add(&s->stacks, ids, n, count, 0, NULL);
}

int profile_stacks_from_profile(const struct profile *p, struct profile_stacks **out)
{
	struct profile_stacks *s;
	uint64_t *ids = NULL;
	char *name = NULL;
	size_t name_cap = 0;
	int err = 0;

	if (!p || !out)
		return -EINVAL;
	s = stacks_new();
	ids = malloc((2 * HVP_MAX_CALLCHAIN + 4) * sizeof(*ids));
	if (!s || !ids) {
		err = -ENOMEM;
		goto err_free;
	}
	for (size_t i = 0; i < p->stacks.n && !err; i++) {
		uint32_t len, n = 0;
		const uint64_t *k = seqtab_key(&p->stacks, i, &len);

		/* SAFETY: at most 2 + 2 * HVP_MAX_CALLCHAIN frames per stack (comm, lost, ips). */
		for (uint32_t j = STACK_KEY_FRAMES; j < len && n < 2 * HVP_MAX_CALLCHAIN + 4; j++) {
			const struct frame *f = &p->frames[k[j]];
			const char *fn = strpool_get(&p->strs, f->name);
			size_t fl = strlen(fn), tot = fl + 5;
			uint32_t id;

			if (tot > name_cap) {
				char *nn = realloc(name, tot);

				if (!nn) {
					err = -ENOMEM;
					break;
				}
				name = nn;
				name_cap = tot;
			}
			/* The name as profile_folded() writes it. */
			for (size_t c = 0; c < fl; c++) {
				unsigned char ch = (unsigned char)fn[c];

				name[c] = ch == ';' ? ':' : ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
			}
			if (f->kind == FRAME_KERNEL) {
				memcpy(name + fl, "_[k]", 4);
				fl += 4;
			}
			name[fl] = '\0';
			err = strpool_intern(&s->names, name, fl, &id);
			if (err)
				break;
			ids[n++] = id;
		}
		if (!err)
			err = stacks_add(s, ids, n, p->stacks.e[i].count);
	}
	if (err)
		goto err_free;
	free(ids);
	free(name);
	*out = s;
	return 0;

err_free:
	free(ids);
	free(name);
	profile_stacks_free(s);
	return err;
}

/* Add every stack of @src to @dst, names interned in @dst. */
static int stacks_merge(struct profile_stacks *dst, const struct profile_stacks *src)
{
	uint64_t *ids = NULL;
	size_t cap = 0;
	int err = 0;

	for (size_t i = 0; i < src->stacks.n && !err; i++) {
		uint32_t len;
		const uint64_t *k = seqtab_key(&src->stacks, i, &len);

		if (len > cap) {
			uint64_t *n = realloc(ids, len * sizeof(*ids));

			if (!n) {
				err = -ENOMEM;
				break;
			}
			ids = n;
			cap = len;
		}
		for (uint32_t f = 0; f < len && !err; f++) {
			const char *nm = strpool_get(&src->names, (uint32_t)k[f]);
			uint32_t id;

			err = strpool_intern(&dst->names, nm, strlen(nm), &id);
			ids[f] = id; /* SAFETY: f < len <= cap */
		}
		if (!err)
			err = stacks_add(dst, ids, len, src->stacks.e[i].count);
	}
	free(ids);
	return err;
}

int profile_stacks_pool(const struct profile_stacks *const *runs, size_t n,
			struct profile_stacks **out)
{
	struct profile_stacks *s;
	int err = 0;

	if (!runs || !n || !out)
		return -EINVAL;
	s = stacks_new();
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < n && !err; i++)
		err = runs[i] ? stacks_merge(s, runs[i]) : -EINVAL;
	if (err) {
		profile_stacks_free(s);
		return err;
	}
	*out = s;
	return 0;
}

struct folded_parser {
	struct profile_stacks *s;
	const char *name;
	uint64_t lineno;
	uint64_t ids[PROFILE_FOLDED_MAX_FRAMES];
	char *errbuf;
	size_t errbuf_len;
};

static int parse_error(struct folded_parser *fp, int err, const char *what)
{
	if (fp->errbuf && fp->errbuf_len)
		snprintf(fp->errbuf, fp->errbuf_len, "%s:%" PRIu64 ": %s", fp->name, fp->lineno,
			 what);
	return err;
}

/* One line without its newline: "frame;frame;... COUNT". */
static int parse_line(struct folded_parser *fp, char *line, size_t len)
{
	uint64_t count = 0;
	uint32_t n = 0;
	size_t sp, start;

	if (len && line[len - 1] == '\r')
		len--;
	if (memchr(line, '\0', len))
		return parse_error(fp, -EBADMSG, "NUL byte in the line");
	while (len && (line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (!len)
		return 0; /* blank line */
	for (sp = len; sp > 0 && line[sp - 1] != ' ' && line[sp - 1] != '\t'; sp--)
		;
	if (sp == len || sp == 0)
		return parse_error(fp, -EBADMSG, "no count: want \"frame;frame;... COUNT\"");
	for (size_t i = sp; i < len; i++) {
		unsigned int d = (unsigned char)line[i] - '0';

		if (d > 9)
			return parse_error(fp, -EBADMSG,
					   "the count is not a non-negative integer");
		if (__builtin_mul_overflow(count, 10, &count) ||
		    __builtin_add_overflow(count, d, &count))
			return parse_error(fp, -ERANGE, "the count does not fit in 64 bits");
	}
	/* the stack: up to the blanks before the count */
	while (sp > 0 && (line[sp - 1] == ' ' || line[sp - 1] == '\t'))
		sp--;
	if (!sp)
		return parse_error(fp, -EBADMSG, "empty stack");
	start = 0;
	for (size_t i = 0; i <= sp; i++) {
		uint32_t id;
		int err;

		if (i < sp && line[i] != ';')
			continue;
		if (i == start)
			return parse_error(fp, -EBADMSG, "empty frame name");
		if (n == PROFILE_FOLDED_MAX_FRAMES)
			return parse_error(fp, -EBADMSG, "more than " "4096" " frames in one stack");
		err = strpool_intern(&fp->s->names, line + start, i - start, &id);
		if (err)
			return parse_error(fp, err, "out of memory");
		/* SAFETY: n < PROFILE_FOLDED_MAX_FRAMES, the size of ids (checked above). */
		fp->ids[n++] = id;
		start = i + 1;
	}
	if (stacks_add(fp->s, fp->ids, n, count))
		return parse_error(fp, -ERANGE, "the total of the counts does not fit in 64 bits");
	return 0;
}

int profile_stacks_read_folded(int fd, const char *name, struct profile_stacks **out,
			       char *errbuf, size_t errbuf_len)
{
	struct folded_parser *fp;
	char *line = NULL, *chunk = NULL;
	size_t line_len = 0;
	int err = 0, eof = 0;

	if (fd < 0 || !out)
		return -EINVAL;
	fp = calloc(1, sizeof(*fp));
	if (fp)
		fp->s = stacks_new();
	line = malloc(PROFILE_FOLDED_MAX_LINE + 1);
	chunk = malloc(65536);
	if (!fp || !fp->s || !line || !chunk) {
		err = -ENOMEM;
		goto out;
	}
	fp->name = name ? name : "folded input";
	fp->errbuf = errbuf;
	fp->errbuf_len = errbuf_len;
	while (!eof && !err) {
		ssize_t got = read(fd, chunk, 65536);

		if (got < 0) {
			err = -errno;
			if (err == -EINTR) {
				err = 0;
				continue;
			}
			fp->lineno++;
			(void)parse_error(fp, err, "read failed");
			break;
		}
		if (got == 0) {
			eof = 1;
			if (line_len) {
				fp->lineno++;
				err = parse_line(fp, line, line_len);
			}
			break;
		}
		for (ssize_t i = 0; i < got && !err; i++) {
			if (chunk[i] == '\n') {
				fp->lineno++;
				err = parse_line(fp, line, line_len);
				line_len = 0;
				continue;
			}
			if (line_len == PROFILE_FOLDED_MAX_LINE) {
				fp->lineno++;
				err = parse_error(fp, -EBADMSG, "line longer than 1048576 bytes");
				break;
			}
			/* SAFETY: line_len < PROFILE_FOLDED_MAX_LINE (checked above). */
			line[line_len++] = chunk[i];
		}
	}
	if (err)
		goto out;
	*out = fp->s;
	fp->s = NULL;
out:
	if (fp)
		profile_stacks_free(fp->s);
	free(fp);
	free(line);
	free(chunk);
	return err;
}

/*
 * Whether @opts has sample filters, which folded stacks (no pid, time or CPL) cannot take:
 * 1 and a line in @errbuf saying so about @path (or the filters' own error), else 0.
 */
static int has_filters(const struct profile_options *opts, const char *path, char *errbuf,
		       size_t errbuf_len)
{
	struct sample_filter f;
	int active;

	if (sample_filter_init(&f, opts, errbuf, errbuf_len))
		return 1;
	active = f.active;
	if (active && errbuf && errbuf_len)
		snprintf(errbuf, errbuf_len, "%s: folded stacks cannot be filtered (%s): the "
			 "filters need a recording", path, f.desc);
	sample_filter_free(&f);
	return active;
}

/* Open @path to read; -errno, said in @errbuf ("PATH: why"). */
static int open_input(const char *path, char *errbuf, size_t errbuf_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = -errno;

	if (fd >= 0)
		return fd;
	if (errbuf && errbuf_len)
		snprintf(errbuf, errbuf_len, "%s: %s", path, hvp_strerror(err));
	return err;
}

/* Whether @fd starts with the recording magic (else: folded text, or nothing we read). */
static int is_recording(int fd)
{
	char magic[RECFILE_MAGIC_LEN];

	return pread(fd, magic, sizeof(magic), 0) == (ssize_t)sizeof(magic) &&
	       !memcmp(magic, RECFILE_MAGIC, RECFILE_MAGIC_LEN);
}

int profile_stacks_load(const char *path, const struct profile_options *opts,
			struct profile_stacks **out, char *errbuf, size_t errbuf_len)
{
	struct profile *p = NULL;
	int fd, err;

	if (!path || !out)
		return -EINVAL;
	fd = open_input(path, errbuf, errbuf_len);
	if (fd < 0)
		return fd;
	if (is_recording(fd)) {
		err = profile_load_fd(fd, path, opts, &p, errbuf, errbuf_len);
		if (!err) {
			err = profile_stacks_from_profile(p, out);
			if (err && errbuf && errbuf_len)
				snprintf(errbuf, errbuf_len, "%s: %s", path, hvp_strerror(err));
		}
		profile_free(p);
	} else if (has_filters(opts, path, errbuf, errbuf_len)) {
		err = -EINVAL;
	} else {
		err = profile_stacks_read_folded(fd, path, out, errbuf, errbuf_len);
		if (err && err != -EBADMSG && err != -ERANGE && errbuf && errbuf_len)
			snprintf(errbuf, errbuf_len, "%s: %s", path, hvp_strerror(err));
	}
	close(fd);
	return err;
}

int profile_stacks_load_windows(const char *path, const struct profile_options *opts,
				const struct profile_time_window *windows, size_t n,
				struct profile_stacks **outs, char *errbuf, size_t errbuf_len)
{
	int fd, err;

	if (!path || !windows || !outs || !n || n > PROFILE_STACKS_MAX_WINDOWS)
		return -EINVAL;
	if (errbuf && errbuf_len)
		errbuf[0] = '\0';
	fd = open_input(path, errbuf, errbuf_len);
	if (fd < 0)
		return fd;
	if (!is_recording(fd)) {
		err = -EBADMSG;
		if (errbuf && errbuf_len)
			snprintf(errbuf, errbuf_len, "%s: not a recording: time windows need one",
				 path);
	} else {
		err = profile_load_windows_fd(fd, path, opts, windows, n, outs, errbuf,
					      errbuf_len);
		if (err == -EINVAL && errbuf && errbuf_len && !errbuf[0])
			snprintf(errbuf, errbuf_len, "%s: %s", path, hvp_strerror(err));
	}
	close(fd);
	return err;
}
