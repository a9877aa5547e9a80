/* SPDX-License-Identifier: MIT */
/* For the DWARF unwinder's test and fuzz target (test_unwind_dwarf.c, fuzz/fuzz_dwarf.c): this
 * process's own registers, as a USER_REGS record holds them, and its file mappings as the
 * unwinder's address space (unwind_dwarf.h), read from /proc/self/maps. */
#ifndef HVPROF_TESTS_SELFSTACK_H
#define HVPROF_TESTS_SELFSTACK_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unwind_dwarf.h"

/* The registers into @r (UNW_NREGS uint64_t) in DWARF order, rip = the address of label 1. */
#define CAPTURE_REGS(r)                                                                   \
	__asm__ volatile("movq %%rax, 0(%0)\n\tmovq %%rdx, 8(%0)\n\tmovq %%rcx, 16(%0)\n\t" \
			 "movq %%rbx, 24(%0)\n\tmovq %%rsi, 32(%0)\n\tmovq %%rdi, 40(%0)\n\t" \
			 "movq %%rbp, 48(%0)\n\tmovq %%rsp, 56(%0)\n\tmovq %%r8, 64(%0)\n\t"  \
			 "movq %%r9, 72(%0)\n\tmovq %%r10, 80(%0)\n\tmovq %%r11, 88(%0)\n\t"  \
			 "movq %%r12, 96(%0)\n\tmovq %%r13, 104(%0)\n\tmovq %%r14, 112(%0)\n\t" \
			 "movq %%r15, 120(%0)\n\t1: leaq 1b(%%rip), %%rax\n\t"               \
			 "movq %%rax, 128(%0)\n\t"                                           \
			 :                                                                   \
			 : "r"(r)                                                            \
			 : "rax", "memory")

#define SELF_MAPS_MAX 256

/* This process's file mappings, one fd per file (opened read-only), and the end of its
 * [stack] mapping (0: not seen). */
struct self_maps {
	struct unw_map m[SELF_MAPS_MAX];
	char *paths[SELF_MAPS_MAX];
	size_t n;
	uint64_t stack_end;
};

/* Fill @mp from /proc/self/maps. Return: 0; -errno when it cannot be opened. */
static inline int self_maps_read(struct self_maps *mp)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];

	if (!f)
		return -errno;
	mp->n = 0;
	while (fgets(line, sizeof(line), f) && mp->n < SELF_MAPS_MAX) {
		unsigned long long start, end, off;
		char perms[8], path[400] = "";
		int fd = -1;

		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %399s", &start, &end, perms, &off,
			   path) < 4)
			continue;
		if (strcmp(path, "[stack]") == 0)
			mp->stack_end = end;
		if (path[0] != '/')
			continue;
		for (size_t i = 0; i < mp->n; i++)
			if (strcmp(mp->paths[i], path) == 0)
				fd = mp->m[i].fd;
		if (fd < 0)
			fd = open(path, O_RDONLY | O_CLOEXEC);
		mp->paths[mp->n] = strdup(path);
		mp->m[mp->n] = (struct unw_map){ .start = start, .end = end, .pgoff = off, .fd = fd,
						 .name = mp->paths[mp->n] };
		mp->n++;
	}
	fclose(f);
	return 0;
}

/* Close @mp's files (each once) and free its paths. */
static inline void self_maps_free(struct self_maps *mp)
{
	for (size_t i = 0; i < mp->n; i++) {
		int dup_fd = 0;

		for (size_t j = 0; j < i; j++)
			dup_fd |= mp->m[j].fd == mp->m[i].fd;
		if (!dup_fd && mp->m[i].fd >= 0)
			close(mp->m[i].fd);
		free(mp->paths[i]);
	}
	mp->n = 0;
}

#endif
