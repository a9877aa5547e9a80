/* SPDX-License-Identifier: MIT */
/*
 * Private to profile/: what the two halves of the loader share: load.c (the records in file
 * order, the held records a USER_REGS completes, the raw table) and load_join.c (the join of
 * deferred kernel samples to the USER_STACK with their cookie).
 */
#ifndef HVPROF_LOAD_INTERNAL_H
#define HVPROF_LOAD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>
#include <hvprof/profile.h>

#include "addrspace.h"
#include "profile_internal.h"

/*
 * A deferred kernel sample waiting for the USER_STACK with its cookie. @as: RAW_AS of the
 * address space the cookie's user walk belongs to: the one current at the cookie's first
 * SAMPLE (the mark's creation, when the sampler made its walk from the entry registers), not
 * the one current when the USER_STACK arrives: an execve during the stay in the kernel makes
 * the new program's address space current before the old program's walk is emitted.
 */
struct pending {
	struct pending *next;
	uint64_t as;
	int32_t pid, tgid;
	uint32_t comm;
	uint32_t vcpu;
	uint64_t time_ns;
	uint64_t period;
	uint8_t cpl, flags;
	uint16_t n_kernel;
	uint64_t ips[];
};

struct loader {
	struct profile *p;
	struct u64map comm_of_pid;   /* pid -> comm strpool id */
	struct as_table ast;         /* the address spaces, by tgid */
	struct raw_stacks raw;
	struct sym_config cfg;
	struct symbolizer *sym;      /* created by loader_symbolizer() */
	struct u64map pending;       /* cookie -> struct pending * (list head) */
	struct u64map early;         /* cookie -> struct early_us * (list head) */
	int keep_samples;
	uint64_t key[RAW_MAX];
	/* --call-graph recordings: the SAMPLE or USER_STACK just read, held until the next record
	 * says whether a USER_REGS completes it (docs/recording-format.md: always the next one) */
	int hold;                    /* -1 not known yet, 0 no call_graph META, 1 hold */
	int has_held;
	struct recfile_record *held;
	struct u64map tgid_of_pid;   /* pid -> tgid (THREAD records): a USER_STACK's process */
	struct user_unwind *uu;      /* created at the first USER_REGS */
	struct sample_filter filter; /* profile_options' filters: asked by loader_add_raw() */
	/* profile_load_windows_fd(): the kept samples of window k go to win_raw[k], not raw */
	const struct profile_time_window *wins;
	size_t n_wins;
	struct raw_stacks *win_raw;
};

/*
 * One complete sample (its user part known: walked, joined, or lost) on its way to the raw
 * table: @kips/@uips innermost first (NULL when their count is 0), @lost RAW_LOST_*, @as
 * RAW_AS; @deferred its user part was deferred, @joined and found in a USER_STACK.
 */
struct raw_sample {
	uint32_t comm;
	int32_t pid, tgid;
	uint64_t as, lost;
	int trunc;
	const uint64_t *kips, *uips;
	unsigned int n_kernel, n_user;
	uint64_t period, time_ns;
	uint32_t vcpu;
	uint8_t cpl, flags;
	int deferred, joined;
};

/* ---- load.c */
/* Aggregate one complete sample into the raw table, if the filters keep it (and time windows). */
int loader_add_raw(struct loader *ld, const struct raw_sample *in) __must_check;
/* The raw_sample of the SAMPLE record @s with thread comm @comm (its own user part, if any). */
struct raw_sample loader_raw_of_sample(struct loader *ld, const struct hvp_sample *s,
				       uint32_t comm);

/* ---- load_join.c: the cookie join */
/* The list of @cookie in @m (pending samples or early user stacks), or NULL. */
void *loader_list_head(const struct u64map *m, uint64_t cookie);
/* The deferred SAMPLE @s joined to a USER_STACK that came before it, if any (*@joined). */
int loader_join_early(struct loader *ld, const struct hvp_sample *s, uint32_t comm,
		      int *joined) __must_check;
/* A USER_STACK: joined to the pending samples of its cookie and pid, or kept for later ones. */
int loader_on_user_stack(struct loader *ld, const struct hvp_user_stack *u) __must_check;
/* At the end of the file: deferred samples never joined are lost; unclaimed stacks orphaned. */
int loader_finish_pending(struct loader *ld) __must_check;
/* Free the lists of pending samples and early user stacks (counting unclaimed stacks). */
void loader_free_lists(struct loader *ld);

#endif /* HVPROF_LOAD_INTERNAL_H */
