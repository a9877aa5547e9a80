/* SPDX-License-Identifier: MIT */
/*
 * Shared by the fuzz targets: the libFuzzer entry point, a guest-RAM reader over a byte
 * buffer, a sink that discards output, and FUZZ_CHECK for the invariants a target asserts.
 * A target is built twice: with libFuzzer (-Dfuzz=true, clang) and as a regression runner
 * (standalone.c) that feeds every file of its committed corpus to the same entry point.
 */
#ifndef HVPROF_FUZZ_H
#define HVPROF_FUZZ_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hvprof/gmem.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * FUZZ_CHECK - an invariant of the code under test. A violation is a bug: say which and abort,
 * so libFuzzer keeps the input and the regression runner fails.
 */
#define FUZZ_CHECK(expr)                                                                 \
	do {                                                                             \
		if (!(expr)) {                                                           \
			fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__,     \
				__LINE__, #expr);                                        \
			abort();                                                         \
		}                                                                        \
	} while (0)

/* FUZZ_LOG - what an input did, printed when FUZZ_VERBOSE is set (to check that seeds go deep). */
#define FUZZ_LOG(...)                                  \
	do {                                           \
		if (getenv("FUZZ_VERBOSE"))            \
			fprintf(stderr, __VA_ARGS__);  \
	} while (0)

/* Guest RAM [0, len) in a buffer; every read is counted (the per-walk work bound). */
struct fuzz_ram {
	const uint8_t *bytes;
	size_t len;
	uint64_t reads;
};

static inline int fuzz_ram_read(void *ctx, uint64_t gpa, void *dst, size_t len)
{
	struct fuzz_ram *r = ctx;

	r->reads++;
	/* The gmem contract: -ERANGE when any byte of [gpa, gpa + len) is outside RAM. */
	if (gpa > r->len || len > r->len - gpa)
		return -ERANGE;
	memcpy(dst, r->bytes + gpa, len);
	return 0;
}

/* The same RAM read in place (gmem_map_fn): NULL when any byte is outside it; not counted
 * as a read (the VMM's map costs no guest access either). */
static inline const void *fuzz_ram_map(void *ctx, uint64_t gpa, size_t len)
{
	struct fuzz_ram *r = ctx;

	if (gpa > r->len || len > r->len - gpa)
		return NULL;
	return r->bytes + gpa;
}

/* The input as a file: a memfd (a regular file, never on disk) holding @data[0..@size), its
 * path ("/proc/self/fd/N") in @path. Return: the fd (the caller closes it), or -1. */
static inline int fuzz_memfd(const char *name, const uint8_t *data, size_t size, char *path,
			     size_t path_size)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return -1;
	}
	snprintf(path, path_size, "/proc/self/fd/%d", fd);
	return fd;
}

static inline uint64_t fuzz_get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

#endif /* HVPROF_FUZZ_H */
