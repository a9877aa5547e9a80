// SPDX-License-Identifier: MIT
// The seccomp filter of the VMM's guest-driven threads (vmm/seccomp.c): a thread that loaded it
// may still do what a vCPU thread does (write to an open file, allocate, lock, signal itself),
// and every other call is refused with EPERM: opening files, sockets, executable memory,
// processes. The thread that did not load it is unaffected.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <hvprof/vmm.h>

#include "test.h"

struct result {
	int confine;
	int write_ok, malloc_ok, mutex_ok, mmap_rw_ok;
	int open_errno, socket_errno, mmap_exec_errno, fork_errno, execve_errno, ptrace_errno;
};

static int fds[2];

static void *confined(void *arg)
{
	struct result *r = arg;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	void *p;
	char *buf;

	r->confine = vmm_seccomp_confine();
	if (r->confine)
		return NULL;
	r->write_ok = write(fds[1], "x", 1) == 1;
	buf = malloc(1 << 20); /* large: mmap */
	r->malloc_ok = buf != NULL;
	free(buf);
	r->mutex_ok = pthread_mutex_lock(&m) == 0 && pthread_mutex_unlock(&m) == 0;
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r->mmap_rw_ok = p != MAP_FAILED;
	if (p != MAP_FAILED)
		munmap(p, 4096);
	errno = 0;
	r->open_errno = open("/etc/hostname", O_RDONLY) < 0 ? errno : 0;
	errno = 0;
	r->socket_errno = socket(AF_INET, SOCK_STREAM, 0) < 0 ? errno : 0;
	errno = 0;
	p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r->mmap_exec_errno = p == MAP_FAILED ? errno : 0;
	errno = 0;
	r->fork_errno = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0) < 0 ? errno : 0;
	errno = 0;
	r->execve_errno = syscall(SYS_execve, "/bin/true", NULL, NULL) < 0 ? errno : 0;
	errno = 0;
	r->ptrace_errno = syscall(SYS_ptrace, 0, 0, 0, 0) < 0 ? errno : 0;
	return NULL;
}

static int test_confined_thread(void)
{
	struct result r;
	pthread_t t;
	char c;
	int fd;

	memset(&r, 0, sizeof(r));
	ASSERT_EQ_INT(pipe(fds), 0);
	ASSERT_EQ_INT(pthread_create(&t, NULL, confined, &r), 0);
	ASSERT_EQ_INT(pthread_join(t, NULL), 0);
	ASSERT_EQ_INT(r.confine, 0);
	/* what a vCPU thread does still works */
	ASSERT_TRUE(r.write_ok && r.malloc_ok && r.mutex_ok && r.mmap_rw_ok);
	ASSERT_EQ_INT(read(fds[0], &c, 1), 1);
	/* the rest is refused */
	ASSERT_EQ_INT(r.open_errno, EPERM);
	ASSERT_EQ_INT(r.socket_errno, EPERM);
	ASSERT_EQ_INT(r.mmap_exec_errno, EPERM);
	ASSERT_EQ_INT(r.fork_errno, EPERM);
	ASSERT_EQ_INT(r.execve_errno, EPERM);
	ASSERT_EQ_INT(r.ptrace_errno, EPERM);
	/* the main thread was not confined */
	fd = open("/proc/self/status", O_RDONLY);
	ASSERT_TRUE(fd >= 0);
	close(fd);
	close(fds[0]);
	close(fds[1]);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "seccomp: a confined thread keeps what it needs, the rest is EPERM", test_confined_thread },
};

TEST_MAIN(tests)
