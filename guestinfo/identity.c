// SPDX-License-Identifier: MIT
// Guest thread and process identity: pid, tgid, comm of a task; executable path and code of an mm.
#define pr_fmt(fmt) "identity: " fmt

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "gi_internal.h"
#include "pgwalk_internal.h"


/*
 * A comm is what the kernel keeps in task->comm: NUL-terminated within TASK_COMM_LEN, not
 * empty, no control characters (bytes >= 0x80 are allowed: prctl(PR_SET_NAME) takes UTF-8).
 */
static bool gi_comm_valid(const char *comm, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)comm[i];

		if (c == '\0')
			break;
		if (c < 0x20 || c == 0x7f)
			return false;
	}
	return i > 0 && i < len;
}

int gi_task_identity_flags(const struct gi *gi, const struct gmem *mem,
			   const struct gi_paging *pg, uint64_t task, struct hvp_thread *out,
			   uint64_t *mm, uint32_t *task_flags)
{
	const struct gi_layout *l;
	char comm[HVP_COMM_LEN];
	uint64_t mm_kva, comm_gva;
	uint32_t comm_len, flags = 0;
	int32_t pid, tgid;
	int err;

	if (!gi || !mem || !pg || !out)
		return -EINVAL;
	if (!gi->have_layout)
		return -ENODATA; /* no BTF: no task_struct layout */
	l = &gi->layout;
	if (!gi_is_kernel_gva(pg, task) || (task & 7))
		return -EBADMSG;

	err = gi_read_s32_at(mem, pg, task, l->task_pid, &pid);
	if (!err)
		err = gi_read_s32_at(mem, pg, task, l->task_tgid, &tgid);
	if (!err)
		err = gi_read_u64_at(mem, pg, task, l->task_mm, &mm_kva);
	if (!err && l->task_flags != UINT32_MAX) {
		uint64_t flags_gva;

		if (__builtin_add_overflow(task, (uint64_t)l->task_flags, &flags_gva))
			return -ERANGE;
		err = gi_read_gva(mem, pg, flags_gva, &flags, sizeof(flags));
	}
	if (err)
		return err;

	/* SAFETY: comm_len <= sizeof(comm); the layout says how long comm is in this kernel. */
	comm_len = l->task_comm_len;
	if (comm_len == 0 || comm_len == UINT32_MAX || l->task_comm == UINT32_MAX)
		return -ENODATA;
	if (comm_len > sizeof(comm))
		comm_len = sizeof(comm);
	if (__builtin_add_overflow(task, (uint64_t)l->task_comm, &comm_gva))
		return -ERANGE;
	err = gi_read_gva(mem, pg, comm_gva, comm, comm_len);
	if (err)
		return err;

	if (pid < 0 || pid > GI_PID_MAX || tgid < 0 || tgid > GI_PID_MAX)
		return -EBADMSG;
	if (!gi_comm_valid(comm, comm_len))
		return -EBADMSG;
	if (mm_kva && (!gi_is_kernel_gva(pg, mm_kva) || (mm_kva & 7)))
		return -EBADMSG;

	memset(out, 0, sizeof(*out));
	out->task = task;
	out->pid = pid;
	out->tgid = tgid;
	/* No mm: a kernel thread, or a user-mode thread before its first execve (pid 1 in
	 * kernel_init, made by user_mode_thread() without PF_KTHREAD). Not a user thread past
	 * exit_mm() (PF_EXITING): its kernel samples still belong to its process. */
	out->kthread = (flags & GI_PF_KTHREAD) || (mm_kva == 0 && !(flags & GI_PF_EXITING));
	/* SAFETY: gi_comm_valid found a NUL at index < comm_len <= HVP_COMM_LEN. */
	memcpy(out->comm, comm, comm_len);
	if (mm)
		*mm = mm_kva;
	if (task_flags)
		*task_flags = flags;
	return 0;
}

int gi_task_identity(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		     uint64_t task, struct hvp_thread *out, uint64_t *mm)
{
	return gi_task_identity_flags(gi, mem, pg, task, out, mm, NULL);
}

void gi_task_cache_reset(struct gi_task_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < GI_TASK_CACHE_SLOTS; i++)
		c->slot[i].task = 0;
}

/* The slot of @task: task_structs are slab objects a few KiB apart, so hash all the bits. */
static unsigned int task_cache_slot(uint64_t task)
{
	/* SAFETY: the top 6 bits of a 64-bit product: < 64 = GI_TASK_CACHE_SLOTS. */
	return (unsigned int)((task * 0x9e3779b97f4a7c15ull) >> 58);
}

/*
 * Is the identity remembered in @e still the task's? Reads pid, comm and mm (and flags while mm
 * is NULL) and compares them with what was read and validated before: equal values need no new
 * validation. Any read error or difference: no.
 */
static bool task_cache_still(const struct gi *gi, const struct gmem *mem,
			     const struct gi_paging *pg, uint64_t task,
			     const struct gi_task_cache_entry *e)
{
	const struct gi_layout *l = &gi->layout;
	char comm[HVP_COMM_LEN];
	uint32_t comm_len = l->task_comm_len, flags;
	uint64_t mm, comm_gva;
	int32_t pid;

	if (gi_read_s32_at(mem, pg, task, l->task_pid, &pid) != 0 || pid != e->t.pid)
		return false;
	/* the layout was checked by the full read that filled @e: comm_len in 1..UINT32_MAX-1 */
	if (comm_len > sizeof(comm))
		comm_len = sizeof(comm);
	/* SAFETY: comm_len <= sizeof(comm) = sizeof(e->t.comm). */
	if (__builtin_add_overflow(task, (uint64_t)l->task_comm, &comm_gva) ||
	    gi_read_gva(mem, pg, comm_gva, comm, comm_len) != 0 ||
	    memcmp(comm, e->t.comm, comm_len) != 0)
		return false;
	if (gi_read_u64_at(mem, pg, task, l->task_mm, &mm) != 0 || mm != e->mm)
		return false;
	if (mm == 0 && l->task_flags != UINT32_MAX) {
		/* no mm: PF_EXITING decides kernel thread or exiting user thread */
		if (gi_read_at(mem, pg, task, l->task_flags, &flags, sizeof(flags)) != 0 ||
		    flags != e->flags)
			return false;
	}
	return true;
}

int gi_task_identity_cached(const struct gi *gi, const struct gmem *mem,
			    const struct gi_paging *pg, struct gi_task_cache *cache, uint64_t task,
			    struct hvp_thread *out, uint64_t *mm, uint32_t *task_flags,
			    bool *cached)
{
	uint64_t mm_kva = 0;
	uint32_t flags = 0;
	unsigned int i;
	int err;

	if (cached)
		*cached = false;
	if (!cache)
		return gi_task_identity_flags(gi, mem, pg, task, out, mm, task_flags);
	if (!gi || !mem || !pg || !out)
		return -EINVAL;
	if (!gi->have_layout)
		return -ENODATA;
	i = task_cache_slot(task);
	/* SAFETY: i < GI_TASK_CACHE_SLOTS (task_cache_slot). */
	if (task && cache->slot[i].task == task &&
	    task_cache_still(gi, mem, pg, task, &cache->slot[i])) {
		cache->hits++;
		*out = cache->slot[i].t;
		if (mm)
			*mm = cache->slot[i].mm;
		if (task_flags)
			*task_flags = cache->slot[i].flags;
		if (cached)
			*cached = true;
		return 0;
	}
	cache->misses++;
	memset(&cache->slot[i], 0, sizeof(cache->slot[i]));
	err = gi_task_identity_flags(gi, mem, pg, task, out, &mm_kva, &flags);
	if (err)
		return err;
	/* remembered as read: with mm, flags can change (PF_EXITING) and are then not used */
	cache->slot[i].task = task;
	cache->slot[i].mm = mm_kva;
	cache->slot[i].flags = flags;
	cache->slot[i].t = *out;
	if (mm)
		*mm = mm_kva;
	if (task_flags)
		*task_flags = flags;
	return 0;
}

_Static_assert(GI_TASK_STACK_PAGES * 4096u == GI_THREAD_SIZE,
	       "a task cache entry has a translation per page of the kernel stack");

/* The entry of @task in @cache, or NULL. */
static struct gi_task_cache_entry *task_cache_find(struct gi_task_cache *cache, uint64_t task)
{
	struct gi_task_cache_entry *e;

	if (!cache || !task)
		return NULL;
	/* SAFETY: task_cache_slot() < GI_TASK_CACHE_SLOTS. */
	e = &cache->slot[task_cache_slot(task)];
	return e->task == task ? e : NULL;
}

unsigned int gi_task_stack_seed(const struct gi *gi, const struct gmem *mem,
				const struct gi_paging *pg, struct gi_task_cache *cache,
				uint64_t task, uint64_t *stack_kva)
{
	struct gi_task_cache_entry *e = task_cache_find(cache, task);
	unsigned int seeded = 0;
	uint64_t stack;

	if (stack_kva)
		*stack_kva = 0;
	if (!e || !gi || !mem || !pg || !pg->cache || !gi->have_layout ||
	    gi->layout.task_stack == UINT32_MAX)
		return 0;
	if (gi_read_u64_at(mem, pg, task, gi->layout.task_stack, &stack) != 0 ||
	    !gi_is_kernel_gva(pg, stack) || (stack & (GI_THREAD_SIZE - 1))) {
		e->stack = 0; /* nothing learned until a good one is seen */
		return 0;
	}
	if (stack_kva)
		*stack_kva = stack;
	if (stack != e->stack) {
		/* a first look, or another stack: its pages are learned from this sample's walks */
		e->stack = stack;
		memset(e->stack_gpa, 0, sizeof(e->stack_gpa));
		return 0;
	}
	for (unsigned int i = 0; i < GI_TASK_STACK_PAGES; i++) {
		if (!e->stack_gpa[i])
			continue;
		if (pgwalk_cache_seed(pg, stack + 4096ull * i, e->stack_gpa[i],
				      e->stack_access[i]))
			seeded++;
	}
	return seeded;
}

void gi_task_stack_learn(const struct gi_paging *pg, struct gi_task_cache *cache, uint64_t task)
{
	struct gi_task_cache_entry *e = task_cache_find(cache, task);
	uint64_t gpa;
	uint8_t access;

	if (!e || !e->stack)
		return;
	for (unsigned int i = 0; i < GI_TASK_STACK_PAGES; i++)
		/* a walked GPA is guest RAM (the walk probed it); GPA 0 stays "not walked" */
		if (!e->stack_gpa[i] &&
		    pgwalk_cache_peek(pg, e->stack + 4096ull * i, &gpa, &access) && gpa) {
			e->stack_gpa[i] = gpa & ~0xfffull;
			e->stack_access[i] = access;
		}
}

int gi_task_user_stack_end(const struct gi *gi, const struct gmem *mem,
			   const struct gi_paging *pg, struct gi_task_cache *cache, uint64_t task,
			   uint64_t mm, uint64_t *end)
{
	struct gi_task_cache_entry *e = task_cache_find(cache, task);
	uint64_t v;
	int err;

	if (!gi || !mem || !pg || !end)
		return -EINVAL;
	if (e && e->mm != mm)
		e = NULL; /* another address space than the identity remembered: not kept */
	if (e && e->stack_end_mm == mm && mm) {
		/* read before: a value that was no bound is remembered too (stack_end 0) */
		*end = e->stack_end;
		return e->stack_end ? 0 : -EBADMSG;
	}
	if (!gi->have_layout || gi->layout.mm_start_stack == UINT32_MAX)
		return -ENODATA;
	if (!gi_is_kernel_gva(pg, mm) || (mm & 7))
		return -EBADMSG;
	err = gi_read_u64_at(mem, pg, mm, gi->layout.mm_start_stack, &v);
	if (err)
		return err;
	if (!v || !gi_is_user_gva(pg, v))
		v = 0;
	if (e) {
		e->stack_end = v;
		e->stack_end_mm = mm;
	}
	*end = v;
	return v ? 0 : -EBADMSG;
}

/*
 * Read the NUL-terminated name at @gva (at most GI_NAME_MAX bytes plus the NUL) into @buf,
 * a page at a time so that a short name at the end of a mapped page is still readable.
 */
static int gi_read_name(const struct gmem *mem, const struct gi_paging *pg, uint64_t gva,
			char buf[GI_NAME_MAX + 1], size_t *len)
{
	size_t got = 0;

	while (got < GI_NAME_MAX + 1) {
		uint64_t at, chunk;
		char *nul;
		int err;

		if (__builtin_add_overflow(gva, (uint64_t)got, &at))
			return -ERANGE;
		chunk = 4096 - (at & 4095);
		if (chunk > GI_NAME_MAX + 1 - got)
			chunk = GI_NAME_MAX + 1 - got;
		/* SAFETY: got + chunk <= GI_NAME_MAX + 1, the size of buf. */
		err = gi_read_gva(mem, pg, at, buf + got, chunk);
		if (err)
			return err;
		nul = memchr(buf + got, '\0', chunk);
		if (nul) {
			*len = (size_t)(nul - buf);
			return 0;
		}
		got += chunk;
	}
	return -EBADMSG; /* no NUL within GI_NAME_MAX bytes */
}

int gi_dentry_path(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
			  uint64_t dentry, char *path, size_t path_size)
{
	const struct gi_layout *l = &gi->layout;
	char names[GI_PATH_MAX_COMPONENTS][GI_NAME_MAX + 1];
	size_t lens[GI_PATH_MAX_COMPONENTS];
	unsigned int n = 0;
	size_t pos = 0;
	uint32_t name_off;
	int err;

	if (__builtin_add_overflow(l->dentry_d_name, l->qstr_name, &name_off))
		return -ERANGE;
	for (;;) {
		uint64_t parent, name_kva;

		if (!gi_is_kernel_gva(pg, dentry) || (dentry & 7))
			return -EBADMSG;
		err = gi_read_u64_at(mem, pg, dentry, l->dentry_d_parent, &parent);
		if (err)
			return err;
		/* The root dentry of a file system is its own parent (d_parent == self). */
		if (parent == dentry)
			break;
		if (n == GI_PATH_MAX_COMPONENTS)
			return -ELOOP;
		err = gi_read_u64_at(mem, pg, dentry, name_off, &name_kva);
		if (err)
			return err;
		if (!gi_is_kernel_gva(pg, name_kva))
			return -EBADMSG;
		/* SAFETY: n < GI_PATH_MAX_COMPONENTS (checked above). */
		err = gi_read_name(mem, pg, name_kva, names[n], &lens[n]);
		if (err)
			return err;
		if (lens[n] == 0 || memchr(names[n], '/', lens[n]))
			return -EBADMSG;
		n++;
		dentry = parent;
	}

	if (n == 0) {
		if (path_size < 2)
			return -ERANGE;
		strcpy(path, "/");
		return 0;
	}
	while (n--) {
		/* SAFETY: pos + 1 + len + 1 <= path_size is checked before each copy. */
		if (pos + 1 + lens[n] + 1 > path_size)
			return -ERANGE;
		path[pos++] = '/';
		memcpy(path + pos, names[n], lens[n]);
		pos += lens[n];
	}
	path[pos] = '\0';
	return 0;
}

int gi_mm_user_root(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		    uint64_t mm, uint64_t *root)
{
	uint64_t pgd, kva, page_size;
	int err;

	if (!gi || !mem || !pg || !root || !mm)
		return -EINVAL;
	if (!gi->have_layout || gi->layout.mm_pgd == UINT32_MAX)
		return -ENODATA;
	if (__builtin_add_overflow(mm, (uint64_t)gi->layout.mm_pgd, &kva))
		return -ERANGE;
	err = gi_read_gva(mem, pg, kva, &pgd, sizeof(pgd));
	if (err)
		return err;
	if ((pgd & 0xfff) || !gi_is_kernel_gva(pg, pgd))
		return -EBADMSG;
	return gi_gva_to_gpa(mem, pg, pgd, root, &page_size, NULL);
}

int gi_process_info(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		    uint64_t mm, struct hvp_process *out)
{
	const struct gi_layout *l;
	uint64_t start_code, end_code, exe_file = 0, dentry;
	char exe[sizeof(out->exe)] = "";
	uint32_t dentry_off;
	int err;

	if (!gi || !mem || !pg || !out)
		return -EINVAL;
	if (!gi->have_layout)
		return -ENODATA;
	l = &gi->layout;
	if (!gi_is_kernel_gva(pg, mm) || (mm & 7))
		return -EBADMSG;

	err = gi_read_u64_at(mem, pg, mm, l->mm_start_code, &start_code);
	if (!err)
		err = gi_read_u64_at(mem, pg, mm, l->mm_end_code, &end_code);
	if (err)
		return err;
	if (start_code > end_code || !gi_is_user_gva(pg, start_code) ||
	    !gi_is_user_gva(pg, end_code))
		return -EBADMSG;

	/* The path is optional: a kernel without these fields in BTF yields "". */
	if (l->mm_exe_file != UINT32_MAX && l->file_f_path != UINT32_MAX &&
	    l->path_dentry != UINT32_MAX && l->dentry_d_parent != UINT32_MAX &&
	    l->dentry_d_name != UINT32_MAX && l->qstr_name != UINT32_MAX) {
		err = gi_read_u64_at(mem, pg, mm, l->mm_exe_file, &exe_file);
		if (err)
			return err;
	}
	if (exe_file) {
		if (!gi_is_kernel_gva(pg, exe_file) || (exe_file & 7))
			return -EBADMSG;
		if (__builtin_add_overflow(l->file_f_path, l->path_dentry, &dentry_off))
			return -ERANGE;
		err = gi_read_u64_at(mem, pg, exe_file, dentry_off, &dentry);
		if (err)
			return err;
		err = gi_dentry_path(gi, mem, pg, dentry, exe, sizeof(exe));
		if (err)
			return err;
	}

	memset(out, 0, sizeof(*out));
	out->mm = mm;
	out->start_code = start_code;
	out->end_code = end_code;
	memcpy(out->exe, exe, sizeof(out->exe));
	return 0;
}
