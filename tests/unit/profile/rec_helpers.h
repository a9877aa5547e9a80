/* SPDX-License-Identifier: MIT */
/* Helpers shared by the profile unit tests: build recordings in memory files. */
#ifndef HVPROF_TEST_REC_HELPERS_H
#define HVPROF_TEST_REC_HELPERS_H

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/profile.h>

/* An anonymous in-memory file (memfd), or -1. */
static inline int mem_file(void)
{
	return memfd_create("hvprof-test", MFD_CLOEXEC);
}

/* Whole content of @fd into a malloc'ed NUL-terminated buffer; *@len its size. */
static inline char *slurp(int fd, size_t *len)
{
	struct stat st;
	char *buf;

	if (fstat(fd, &st) < 0)
		return NULL;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return NULL;
	if (pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
		free(buf);
		return NULL;
	}
	buf[st.st_size] = '\0';
	if (len)
		*len = (size_t)st.st_size;
	return buf;
}

/* A memfd holding @len bytes of @buf, positioned at 0. */
static inline int mem_file_from(const void *buf, size_t len)
{
	int fd = mem_file();

	if (fd < 0)
		return -1;
	if (write(fd, buf, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static inline struct hvp_thread mk_thread(int32_t pid, int32_t tgid, const char *comm, int kthread)
{
	struct hvp_thread t = { .pid = pid, .tgid = tgid, .kthread = (uint8_t)kthread };

	strncpy(t.comm, comm, sizeof(t.comm) - 1);
	t.task = 0xffff888000100000ULL + (uint64_t)pid * 0x1000;
	return t;
}

static inline struct hvp_process mk_process(int32_t tgid, const char *exe, uint64_t start,
					    uint64_t end)
{
	struct hvp_process p = { .tgid = tgid, .start_code = start, .end_code = end,
				 .mm = 0xffff888000200000ULL };

	strncpy(p.exe, exe, sizeof(p.exe) - 1);
	return p;
}

/* A sample: @kips/@uips innermost first, terminated by 0. */
static inline void mk_sample(struct hvp_sample *s, int32_t pid, int32_t tgid, uint8_t cpl,
			     uint8_t user_stop, uint64_t cookie, const uint64_t *kips,
			     const uint64_t *uips)
{
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	s->tgid = tgid;
	s->cpl = cpl;
	s->user_stop = user_stop;
	s->cookie = cookie;
	s->period = 1000000;
	for (; kips && kips[s->n_kernel]; s->n_kernel++)
		s->kernel_ips[s->n_kernel] = kips[s->n_kernel];
	for (; uips && uips[s->n_user]; s->n_user++)
		s->user_ips[s->n_user] = uips[s->n_user];
	s->rip = s->n_kernel ? s->kernel_ips[0] : s->n_user ? s->user_ips[0] : 0;
}

static inline struct hvp_user_stack mk_user_stack(int32_t pid, uint64_t cookie, uint8_t stop,
						  const uint64_t *uips)
{
	struct hvp_user_stack u = { .pid = pid, .cookie = cookie, .stop = stop };

	for (; uips && uips[u.n_user]; u.n_user++)
		u.user_ips[u.n_user] = uips[u.n_user];
	return u;
}

/* A sink that appends to a growing string. */
struct str_sink {
	char *s;
	size_t len;
};

static inline int str_sink_write(void *ctx, const void *buf, size_t len)
{
	struct str_sink *ss = ctx;
	char *ns = realloc(ss->s, ss->len + len + 1);

	if (!ns)
		return -12;
	memcpy(ns + ss->len, buf, len);
	ss->len += len;
	ns[ss->len] = '\0';
	ss->s = ns;
	return 0;
}

/* Copy the file @from to @to (created mode 0755, truncated). Return: 0 or -errno/-EIO. */
static inline int copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out, err = 0;
	ssize_t n;

	if (in < 0)
		return -errno;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (out < 0) {
		close(in);
		return -errno;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			err = -EIO;
	close(in);
	close(out);
	return n < 0 ? -EIO : err;
}

#endif /* HVPROF_TEST_REC_HELPERS_H */
