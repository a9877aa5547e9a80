// SPDX-License-Identifier: MIT
// Identity records of the sampler: a THREAD record the first time a (pid, task, tgid, comm) is
// seen, a PROCESS record (executable, code range) the first time a (tgid, mm) is. Direct-mapped
// caches shared by the vCPUs under one mutex; a collision only re-emits a record.
#define pr_fmt(fmt) "sampler: identity: " fmt
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/log.h>

#include "sampler_internal.h"

#define IDENT_SLOTS 4096        /* direct-mapped; a collision only re-emits a record */

struct ident_thread {
	int32_t pid;
	int32_t tgid;
	uint64_t task;
	char comm[HVP_COMM_LEN];
};

struct ident_process {
	int32_t tgid;
	uint64_t mm;
	int32_t map_count; /* mm->map_count when the mappings were last recorded; -1: not yet */
};

struct ident_cache {
	struct ident_thread threads[IDENT_SLOTS];
	struct ident_process procs[IDENT_SLOTS];
};

int ident_cache_create(struct sampler *s)
{
	s->ident = calloc(1, sizeof(*s->ident));
	if (!s->ident)
		return -ENOMEM;
	for (int i = 0; i < IDENT_SLOTS; i++) {
		s->ident->threads[i].pid = -1;
		s->ident->procs[i].tgid = -1;
	}
	pthread_mutex_init(&s->ident_lock, NULL);
	return 0;
}

void ident_cache_reset(struct sampler *s)
{
	pthread_mutex_lock(&s->ident_lock);
	for (int i = 0; i < IDENT_SLOTS; i++) {
		s->ident->threads[i].pid = -1;
		s->ident->procs[i].tgid = -1;
	}
	atomic_fetch_add(&s->ident_gen, 1); /* every vCPU's ident_last is void */
	pthread_mutex_unlock(&s->ident_lock);
}

void ident_cache_destroy(struct sampler *s)
{
	if (s->ident)
		pthread_mutex_destroy(&s->ident_lock);
	free(s->ident);
	s->ident = NULL;
}

/* Emit THREAD (and PROCESS) records when this identity was not seen before. */
/*
 * The MAPPING records of process @tgid (mm at @mm): a bounded walk of its VMA tree into this
 * vCPU's scratch, one snapshot of records. Runs outside ident_lock: the walk may read hundreds
 * of guest pages, and other vCPUs take that lock at every sample.
 */
static void emit_mappings(struct svcpu *sv, int32_t tgid, uint64_t mm,
			  const struct gi_paging *pg)
{
	struct sampler *s = sv->s;
	const struct sampler_sink *sink = s->cfg.sink;
	size_t n = 0;
	uint64_t now;

	/* bounded: at most 512 tree nodes read, SAMPLER_MAPS_MAX mappings */
	if (gi_process_mappings(s->gi, s->mem, pg, mm, sv->maps, SAMPLER_MAPS_MAX, &n) != 0 ||
	    n == 0 || n > UINT16_MAX) {
		sv->c.mapping_errors++;
		return;
	}
	now = vmm_now_ns() - sampler_start_ns(s);
	sv->c.mapping_snapshots++;
	for (size_t i = 0; i < n; i++) {
		const struct gi_mapping *g = &sv->maps[i];
		struct hvp_mapping m = { .time_ns = now, .tgid = tgid, .index = (uint16_t)i,
					 .count = (uint16_t)n, .start = g->start, .end = g->end,
					 /* anonymous VMAs keep start >> 12 there: no offset */
					 .pgoff = g->file ? g->pgoff << 12 : 0, .ino = g->ino,
					 .dev = g->dev,
					 .prot = (uint32_t)(g->flags & 0xf) };

		memcpy(m.path, g->path, sizeof(m.path));
		/* the build-id of a file, from its first page (resident after the loader read it) */
		if (g->file && g->pgoff == 0) {
			size_t len = 0;

			if (gi_mapping_build_id(s->mem, pg, g->start, m.build_id,
						sizeof(m.build_id), &len) == 0) {
				m.build_id_len = (uint8_t)len;
				sv->c.mapping_build_ids++;
			}
		}
		sv->c.mappings++;
		if (sink->mapping(sink->ctx, &m))
			sv->c.samples_sink_errors++;
	}
}

/*
 * The identity of this vCPU's previous sample again, and nothing changed in the shared caches
 * since (ident_gen): a full note_identity would find the thread's slot holding it and its
 * process remembered with this mm and map count, and do nothing. Skips the lock and two table
 * slots per sample (each a cold cache line, or page, after the guest ran).
 */
static bool ident_same_as_last(const struct svcpu *sv, const struct hvp_thread *t, uint64_t mm,
			       int32_t count)
{
	const struct ident_last *l = &sv->ident_last;

	return l->valid && l->gen == atomic_load(&sv->s->ident_gen) && l->task == t->task &&
	       l->pid == t->pid && l->tgid == t->tgid && l->kthread == t->kthread &&
	       l->mm == mm && l->map_count == count &&
	       memcmp(l->comm, t->comm, HVP_COMM_LEN) == 0;
}

/*
 * Under ident_lock, after note_identity's work: remember @t as this vCPU's last identity if a
 * repeat would do nothing (its thread slot holds it; its process, if any, is remembered with
 * @mm, and @count is unread or the one remembered), else forget the last one.
 */
static void ident_set_last(struct svcpu *sv, const struct hvp_thread *t, uint64_t mm,
			   int32_t count, const struct ident_thread *it,
			   const struct ident_process *ip)
{
	struct ident_last *l = &sv->ident_last;

	l->valid = it->pid == t->pid && it->task == t->task && it->tgid == t->tgid &&
		   strncmp(it->comm, t->comm, HVP_COMM_LEN) == 0 &&
		   (!ip || (ip->tgid == t->tgid && ip->mm == mm &&
			    (count < 0 || ip->map_count == count)));
	if (!l->valid)
		return;
	l->gen = atomic_load(&sv->s->ident_gen);
	l->task = t->task;
	l->mm = mm;
	l->pid = t->pid;
	l->tgid = t->tgid;
	l->map_count = count;
	l->kthread = t->kthread;
	memcpy(l->comm, t->comm, HVP_COMM_LEN);
}

bool note_identity(struct svcpu *sv, const struct hvp_thread *t, uint64_t mm,
		   const struct gi_paging *pg)
{
	struct sampler *s = sv->s;
	const struct sampler_sink *sink = s->cfg.sink;
	struct ident_thread *it;
	struct ident_process *ip = NULL;
	int err;
	bool new_thread, new_proc = false, walk = false, building = false;
	int32_t count = -1;

	/* A cheap sign that the address space changed (mmap, munmap, mprotect splitting a VMA,
	 * dlopen): one 4-byte guest read, before the lock; the walk only when it moved. */
	if (!t->kthread && mm && sink->mapping && sv->maps &&
	    gi_mm_map_count(s->gi, s->mem, pg, mm, &count) != 0)
		count = -1;
	sv->sample_mm = mm;
	sv->sample_map_count = count; /* the user walks' executable pages (user_walk) */
	if (ident_same_as_last(sv, t, mm, count))
		return false; /* its process is remembered: complete */
	pthread_mutex_lock(&s->ident_lock);
	/* SAFETY: pid was validated (0..4194304) by gi_task_identity; the modulo bounds it. */
	it = &s->ident->threads[(uint32_t)t->pid % IDENT_SLOTS];
	new_thread = it->pid != t->pid || it->task != t->task || it->tgid != t->tgid ||
		     strncmp(it->comm, t->comm, HVP_COMM_LEN) != 0;
	if (new_thread) {
		it->pid = t->pid;
		it->tgid = t->tgid;
		it->task = t->task;
		memcpy(it->comm, t->comm, HVP_COMM_LEN);
		atomic_fetch_add(&s->ident_gen, 1);
	}
	if (!t->kthread && mm) {
		ip = &s->ident->procs[(uint32_t)t->tgid % IDENT_SLOTS];
		new_proc = ip->tgid != t->tgid || ip->mm != mm;
	}
	if (new_thread) {
		struct hvp_thread rec = *t;

		rec.time_ns = vmm_now_ns() - sampler_start_ns(s);
		sv->c.threads++;
		if (sink->thread && sink->thread(sink->ctx, &rec))
			sv->c.samples_sink_errors++;
	}
	if (ip && !new_proc && count >= 0 && count != ip->map_count) {
		/* once per change, whatever the walk gives: a failing one is not retried per sample */
		ip->map_count = count;
		walk = true;
		atomic_fetch_add(&s->ident_gen, 1);
	}
	if (new_proc) {
		struct hvp_process proc;

		memset(&proc, 0, sizeof(proc));
		/* During exec the new mm exists before its code range and exe are set: such a
		 * process is not remembered, so a later sample reads it again. */
		err = gi_process_info(s->gi, s->mem, pg, mm, &proc);
		/* no code range yet: execve switched the task to this mm (exec_mmap) and has not
		 * loaded the program (load_elf_binary sets it): pt_regs are the old program's.
		 * Unreadable: nothing tells, so the user registers are not walked in this mm
		 * either (the cost: a process whose mm or executable path cannot be read, e.g.
		 * a path deeper than GI_PATH_MAX_COMPONENTS, has no user part in its kernel
		 * samples; user-mode samples are unaffected). */
		building = err != 0 || !proc.start_code;
		if (err == 0 && proc.start_code && proc.end_code > proc.start_code && proc.exe[0]) {
			ip->tgid = t->tgid;
			ip->mm = mm;
			ip->map_count = count;
			walk = count >= 0;
			atomic_fetch_add(&s->ident_gen, 1);
			proc.tgid = t->tgid;
			proc.time_ns = vmm_now_ns() - sampler_start_ns(s);
			sv->c.processes++;
			if (sink->process && sink->process(sink->ctx, &proc))
				sv->c.samples_sink_errors++;
		}
	}
	ident_set_last(sv, t, mm, count, it, ip);
	pthread_mutex_unlock(&s->ident_lock);
	if (walk)
		emit_mappings(sv, t->tgid, mm, pg);
	return building;
}

