/* SPDX-License-Identifier: MIT */
/*
 * The per-vCPU task cache of guestinfo (included by <hvprof/guestinfo.h>): identities of the
 * tasks a vCPU sampled, and the translations of their kernel stacks, so that a task sampled
 * again costs only the reads of what can change.
 */
#ifndef HVPROF_GI_TASKCACHE_H
#define HVPROF_GI_TASKCACHE_H

#include <stdint.h>

#include <hvprof/gmem.h>
#include <hvprof/pgwalk.h>
#include <hvprof/sample.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gi;

#define GI_TASK_CACHE_SLOTS 64
#define GI_TASK_STACK_PAGES 4 /* THREAD_SIZE (16 KiB on x86-64 without KASAN) / 4 KiB */

/**
 * struct gi_task_cache - identities of the tasks last seen, keyed by task GVA (direct-mapped), for
 * one reader (one vCPU: no locking). A task seen again costs the reads of what can change while
 * the task_struct stays at its address: pid (the struct freed and given to another task, or a
 * non-leader thread's execve taking the leader's pid), comm (prctl(PR_SET_NAME), execve) and mm
 * (execve, exit_mm; and task->flags too while there is no mm, where they decide kernel thread or
 * exiting). tgid and PF_KTHREAD never change without one of those changing. Any mismatch: the
 * whole identity is read and validated again. Zero-initialise before use; gi_task_cache_reset()
 * forgets everything. @hits/@misses: counters.
 */
struct gi_task_cache_entry {
	uint64_t task; /* 0: empty */
	uint64_t mm;
	uint32_t flags;
	struct hvp_thread t; /* validated by gi_task_identity (time_ns 0) */
	/* the task's kernel stack (task->stack, 0: not known yet) and the translations of its
	 * pages that samples walked (GPA, 0: not walked yet), with their PGWALK_ACC_* bits:
	 * gi_task_stack_seed / gi_task_stack_learn */
	uint64_t stack;
	uint64_t stack_gpa[GI_TASK_STACK_PAGES];
	uint8_t stack_access[GI_TASK_STACK_PAGES];
	/* mm->start_stack as read for the address space @stack_end_mm (0: not read yet; with
	 * @stack_end 0, read and no user address): gi_task_user_stack_end */
	uint64_t stack_end, stack_end_mm;
};

struct gi_task_cache {
	uint64_t hits;
	uint64_t misses;
	struct gi_task_cache_entry slot[GI_TASK_CACHE_SLOTS];
};

/** gi_task_cache_reset - forget every identity of @c (counters kept). */
void gi_task_cache_reset(struct gi_task_cache *c);

/**
 * gi_task_stack_seed - put the translations of @task's kernel stack pages that @cache remembers
 * into @pg->cache (pgwalk_cache_seed), so that this sample's reads of the stack (unwind,
 * pt_regs) walk no page tables. A live task's stack does not move or change pages (vmalloc'ed
 * at fork with VMAP_STACK, or in the direct map, freed only after the task's last switch), so a
 * translation holds while the same task, identity checked by gi_current_thread_cached() in this
 * sample, has the same task->stack: that pointer is read again here (one read, the line of
 * thread_info) and a different value forgets the pages. Call right after the identity check
 * found @task in @cache (a stale or absent entry does nothing), with @pg->cache invalidated for
 * this sample. @gi, @mem: the guest (layout, RAM); @pg: the sample's paging, with its
 * translation cache; @cache: the vCPU's task cache (one reader: no locking); @task: task GVA;
 * @stack_kva (may be NULL): set to the task->stack KVA read here when it is a THREAD_SIZE-
 * aligned kernel address, else 0 (also when @task is not in @cache, the layout has no
 * task->stack or the read fails), so that the sample's pt_regs read (gi_stack_user_regs) need
 * not read it again.
 * Return: the pages seeded (0..GI_TASK_STACK_PAGES); a read error or a bad task->stack seeds
 * nothing and is not reported (the walks then happen as before). Owns nothing.
 */
unsigned int gi_task_stack_seed(const struct gi *gi, const struct gmem *mem,
				const struct gi_paging *pg, struct gi_task_cache *cache,
				uint64_t task, uint64_t *stack_kva);

/**
 * gi_task_stack_learn - after a sample's reads: remember in @cache the translations of @task's
 * kernel stack pages that walks of this sample stored in @pg->cache (pgwalk_cache_peek), for
 * gi_task_stack_seed() in the task's next samples. Nothing happens unless the entry of @task
 * knows its stack (gi_task_stack_seed read it in this sample). Same arguments as there; reads
 * no guest memory.
 */
void gi_task_stack_learn(const struct gi_paging *pg, struct gi_task_cache *cache, uint64_t task);

/**
 * gi_task_user_stack_end - where the main thread's frames end in the address space @mm (struct
 * mm_struct GVA) of @task (task GVA): mm->start_stack, the user RSP the ELF loader started the
 * process with, the address of argc (fs/binfmt_elf.c, create_elf_tables and load_elf_binary).
 * Every frame of the main thread lies below it; what is above (argv, envp, auxv, their strings
 * and the random gap of arch_align_stack, up to ~8 KiB) is no frame. The value is remembered in
 * @task's entry of @cache while its mm is @mm (the field is set once per execve; prctl
 * PR_SET_MM can move it, which only moves the bound), so a task's samples read it once (a
 * value that is not a user address too: -EBADMSG again without a read). While
 * an execve is building the mm, the field holds the bottom of the strings (fs/exec.c,
 * setup_arg_pages), above the final value: a bound read then is only looser, and is kept
 * until the identity changes; callers ask for walks of threads not in execve. The value is the
 * guest's: a caller uses it only to shorten a copy it bounds anyway.
 * @gi, @mem, @pg: the guest (layout, RAM, the kernel half of @pg); @cache: the vCPU's task cache
 * (NULL, or no entry of @task with mm @mm: read, not remembered).
 * Return: 0 and *@end (a user GVA); -ENODATA no mm_struct.start_stack in the layout; -EBADMSG
 * @mm not an aligned kernel address, or the value not a user address; read errors; -EINVAL.
 */
int gi_task_user_stack_end(const struct gi *gi, const struct gmem *mem,
			   const struct gi_paging *pg, struct gi_task_cache *cache, uint64_t task,
			   uint64_t mm, uint64_t *end) __must_check;

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_GI_TASKCACHE_H */
