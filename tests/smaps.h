/* SPDX-License-Identifier: MIT */
/*
 * What the kernel says of one of the test's own mappings (/proc/self/smaps, proc(5)): the
 * entry's first line, its VmFlags and its AnonHugePages. For the unit tests of memory hvprof
 * puts on huge pages (tests/unit/common/test_hugemem.c, tests/unit/vmm/test_vmm.c).
 */
#ifndef HVPROF_TEST_SMAPS_H
#define HVPROF_TEST_SMAPS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The smaps entry of the mapping holding @addr: its first line into @head, its VmFlags line
 * into @vm_flags ("" when absent) and its AnonHugePages (kB). 0, -ENOENT (no such mapping) or
 * fopen's -errno. */
static inline int test_smaps_of(const void *addr, char *head, size_t head_len, char *vm_flags,
				size_t vm_flags_len, long *anon_huge_kb)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	bool in = false, found = false;

	if (!f)
		return -errno;
	vm_flags[0] = '\0';
	*anon_huge_kb = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		/* a mapping's first line is "lo-hi perms ..."; field lines are "Name: value" */
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ' ') &&
		    line[strcspn(line, " ") - 1] != ':') {
			if (found)
				break;
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
			if (in) {
				found = true;
				snprintf(head, head_len, "%s", line);
			}
			continue;
		}
		if (!in)
			continue;
		if (!strncmp(line, "AnonHugePages:", 14))
			*anon_huge_kb = strtol(line + 14, NULL, 10);
		if (!strncmp(line, "VmFlags:", 8))
			snprintf(vm_flags, vm_flags_len, "%s", line);
	}
	fclose(f);
	return found ? 0 : -ENOENT;
}

/* Whether the VmFlags line @vm_flags holds the two-letter flag @flag ("hg": MADV_HUGEPAGE,
 * "mg": MADV_MERGEABLE). */
static inline bool test_vm_flag(const char *vm_flags, const char *flag)
{
	for (const char *p = strstr(vm_flags, flag); p; p = strstr(p + 1, flag))
		if (p > vm_flags && p[-1] == ' ' && (p[2] == ' ' || p[2] == '\n' || p[2] == '\0'))
			return true;
	return false;
}

/* Whether this kernel has transparent huge pages at all (without them madvise(MADV_HUGEPAGE)
 * fails: 4 KiB pages, no "hg" flag). */
static inline bool test_thp_built(void)
{
	return access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0;
}

#endif /* HVPROF_TEST_SMAPS_H */
