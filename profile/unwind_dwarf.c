// SPDX-License-Identifier: MIT
// DWARF unwinding of recorded user stacks with libdw's frame API: one Dwfl session per address
// space (its files reported once, their CFI parsed once), our own callbacks giving libdw the
// recorded registers and reading memory only from the recorded stack copy.
#define pr_fmt(fmt) "unwind: " fmt

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>

#include <hvprof/log.h>

#include "profile_internal.h"
#include "unwind_dwarf.h"

#define UNW_TID 1 /* the one thread of each session (any positive id) */
#define UNW_MAX_SPACES 64 /* sessions kept open (each holds an fd per file): then all closed */

/* The one unwind in progress on a space: what the callbacks read. */
struct unw_state {
	const uint64_t *regs;
	const uint8_t *stack;
	uint32_t stack_len;
	bool outside;       /* a read fell outside the stack copy */
	uint64_t *ips;
	unsigned int max, n;
};

struct unw_space {
	uint64_t key;
	Dwfl *dwfl;
	bool attached;      /* dwfl_attach_state() succeeded: at least one module */
	struct unw_state *cur;
};

struct unwinder {
	struct unw_space **spaces;
	size_t n, cap;
	struct u64map of_key; /* key -> index in spaces */
};

static const char *const stop_names[] = {
#define UNW_STOP_STR(name, str) str,
	UNW_STOP_LIST(UNW_STOP_STR)
#undef UNW_STOP_STR
};

const char *unw_stop_name(enum unw_stop why)
{
	return (unsigned int)why < UNW_STOP_COUNT ? stop_names[why] : "unknown";
}

/* No separate debug files: the unwinder uses the runnable file's .eh_frame (and .debug_frame
 * when the file has one); looking on the host by name could find a different build. */
static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			char **debuginfo_file_name)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
	(void)debuglink_file, (void)debuglink_crc;
	*debuginfo_file_name = NULL;
	return -1;
}

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_debuginfo = no_debuginfo,
};

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	(void)dwfl;
	if (*thread_argp) /* one thread: the second call ends the list */
		return 0;
	*thread_argp = arg;
	return UNW_TID;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	*thread_argp = arg;
	return tid == UNW_TID;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct unw_space *sp = arg;
	struct unw_state *st = sp->cur;
	uint64_t rsp, off;

	(void)dwfl;
	if (!st)
		return false;
	rsp = st->regs[UNW_REG_RSP];
	/* SAFETY: off + 8 <= stack_len, the bytes the record holds. */
	if (addr < rsp || (off = addr - rsp) > st->stack_len || st->stack_len - off < 8) {
		st->outside = true;
		return false;
	}
	memcpy(result, st->stack + off, sizeof(*result));
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct unw_space *sp = arg;
	Dwarf_Word regs[UNW_NREGS];

	for (unsigned int i = 0; i < UNW_NREGS; i++)
		regs[i] = sp->cur->regs[i];
	if (!dwfl_thread_state_registers(thread, 0, UNW_NREGS, regs))
		return false;
	dwfl_thread_state_register_pc(thread, regs[UNW_REG_RIP]);
	return true;
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

int unwinder_new(struct unwinder **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void space_free(struct unw_space *sp)
{
	if (!sp)
		return;
	if (sp->dwfl)
		dwfl_end(sp->dwfl);
	free(sp);
}

void unwinder_free(struct unwinder *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < u->n; i++)
		space_free(u->spaces[i]);
	free(u->spaces);
	u64map_free(&u->of_key);
	free(u);
}

/*
 * The load bias of @fd's ELF when its file offset @pgoff is mapped at GVA @start: the PT_LOAD
 * holding that offset gives bias = start - pgoff + p_offset - p_vaddr (ELF gABI, program
 * loading). Return: 0 and *@bias; -ENOEXEC not an ELF or no such PT_LOAD.
 */
static int elf_load_bias(int fd, uint64_t start, uint64_t pgoff, uint64_t *bias)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t phnum;
	int err = -ENOEXEC;

	if (!elf)
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &phnum) != 0)
		goto out;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		/* the segment's file bytes, widened to pages as the loader maps them */
		if (pgoff + 4096 <= (ph.p_offset & ~4095ull) || pgoff >= ph.p_offset + ph.p_filesz)
			continue;
		*bias = start - pgoff + ph.p_offset - ph.p_vaddr;
		err = 0;
		break;
	}
out:
	elf_end(elf);
	return err;
}

/* Order of mappings by file name, then start: each file's mappings in a run, lowest first. */
static int cmp_map(const void *pa, const void *pb)
{
	const struct unw_map *a = *(const struct unw_map *const *)pa;
	const struct unw_map *b = *(const struct unw_map *const *)pb;
	int c = strcmp(a->name ? a->name : "", b->name ? b->name : "");

	if (c)
		return c;
	return a->start < b->start ? -1 : a->start > b->start;
}

/*
 * Report the file of @low, its lowest mapping, once. A second report of the same file would
 * overlap the first, and libdw then drops both (DWFL_E_OVERLAP marks the module for collection
 * at dwfl_report_end()).
 */
static void report_file(Dwfl *dwfl, const struct unw_map *low)
{
	const char *name = low->name ? low->name : "?";
	uint64_t bias;
	int fd;

	if (elf_load_bias(low->fd, low->start, low->pgoff, &bias))
		return;
	fd = dup(low->fd);
	if (fd < 0)
		return;
	/* On success libdw owns fd (closed by dwfl_end()); on failure it is still ours. */
	if (!dwfl_report_elf(dwfl, name, name, fd, bias, true)) {
		pr_info("%s: not usable for unwinding: %s", name, dwfl_errmsg(-1));
		close(fd);
	}
}

static int space_new(uint64_t key, const struct unw_map *maps, size_t n_maps,
		     struct unw_space **out)
{
	const struct unw_map **order = NULL;
	struct unw_space *sp = calloc(1, sizeof(*sp));
	size_t n = 0;

	if (n_maps)
		order = malloc(n_maps * sizeof(*order));
	if (!sp || (n_maps && !order)) {
		free(order);
		free(sp);
		return -ENOMEM;
	}
	sp->key = key;
	sp->dwfl = dwfl_begin(&dwfl_callbacks);
	if (!sp->dwfl) {
		free(order);
		free(sp);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n_maps; i++)
		if (maps[i].fd >= 0 && maps[i].end > maps[i].start)
			order[n++] = &maps[i];
	if (n > 1)
		qsort(order, n, sizeof(*order), cmp_map);
	dwfl_report_begin(sp->dwfl);
	/* One report per file (same name, or same fd), at its lowest mapping: O(n log n). */
	for (size_t i = 0; i < n; i++)
		if (i == 0 || strcmp(order[i - 1]->name ? order[i - 1]->name : "",
				     order[i]->name ? order[i]->name : "") != 0)
			report_file(sp->dwfl, order[i]);
	free(order);
	if (dwfl_report_end(sp->dwfl, NULL, NULL) != 0) {
		space_free(sp);
		return -ENOMEM;
	}
	/* No module at all: libdw cannot tell the architecture; every unwind stops at rip. */
	sp->attached = dwfl_attach_state(sp->dwfl, NULL, UNW_TID, &thread_callbacks, sp);
	*out = sp;
	return 0;
}

struct unw_space *unwinder_lookup(const struct unwinder *u, uint64_t key)
{
	uint64_t idx;

	return u && !u64map_get(&u->of_key, key, &idx) ? u->spaces[idx] : NULL;
}

/* Close every cached session (the cache is bounded: UNW_MAX_SPACES). */
static void unwinder_reset(struct unwinder *u)
{
	for (size_t i = 0; i < u->n; i++)
		space_free(u->spaces[i]);
	u->n = 0;
	u64map_free(&u->of_key);
	memset(&u->of_key, 0, sizeof(u->of_key));
}

int unwinder_space(struct unwinder *u, uint64_t key, const struct unw_map *maps, size_t n_maps,
		   struct unw_space **out)
{
	struct unw_space *sp;
	uint64_t idx;
	int err;

	if (!u || !out || (n_maps && !maps))
		return -EINVAL;
	if (!u64map_get(&u->of_key, key, &idx)) {
		*out = u->spaces[idx];
		return 0;
	}
	if (u->n >= UNW_MAX_SPACES)
		unwinder_reset(u); /* earlier spaces handed out are gone: callers hold one at a time */
	if (u->n == u->cap) {
		struct unw_space **ns = array_grow(u->spaces, &u->cap, sizeof(*ns), 16);

		if (!ns)
			return -ENOMEM;
		u->spaces = ns;
	}
	err = space_new(key, maps, n_maps, &sp);
	if (err)
		return err;
	err = u64map_put(&u->of_key, key, u->n);
	if (err) {
		space_free(sp);
		return err;
	}
	u->spaces[u->n++] = sp;
	*out = sp;
	return 0;
}

static int on_frame(Dwfl_Frame *frame, void *arg)
{
	struct unw_state *st = arg;
	Dwarf_Addr pc;

	if (!dwfl_frame_pc(frame, &pc, NULL))
		return DWARF_CB_ABORT;
	if (st->n >= st->max)
		return DWARF_CB_ABORT;
	/* SAFETY: n < max, the caller's capacity of ips. */
	st->ips[st->n++] = pc;
	return DWARF_CB_OK;
}

/* Why the walk of @st on @sp ended with libdw's @ret (not 0: an error or our abort). */
static enum unw_stop stop_reason(struct unw_space *sp, const struct unw_state *st)
{
	Dwfl_Module *mod;
	Dwarf_Addr bias;

	if (st->outside)
		return UNW_STOP_STACK;
	mod = dwfl_addrmodule(sp->dwfl, st->ips[st->n - 1]);
	if (!mod)
		return UNW_STOP_NO_MODULE;
	if (!dwfl_module_eh_cfi(mod, &bias) && !dwfl_module_dwarf_cfi(mod, &bias))
		return UNW_STOP_NO_CFI;
	return UNW_STOP_ERROR;
}

int unwinder_unwind(struct unw_space *sp, const uint64_t *regs, const uint8_t *stack,
		    uint32_t stack_len, uint64_t *ips, unsigned int max, unsigned int *n,
		    enum unw_stop *why)
{
	struct unw_state st = { .regs = regs, .stack = stack, .stack_len = stack_len,
				.ips = ips, .max = max };
	int ret;

	if (!sp || !regs || (stack_len && !stack) || !ips || !max || !n || !why)
		return -EINVAL;
	*n = 0;
	if (!regs[UNW_REG_RIP]) {
		*why = UNW_STOP_BAD_REGS;
		return 0;
	}
	if (!sp->attached) {
		ips[0] = regs[UNW_REG_RIP];
		*n = 1;
		*why = UNW_STOP_NO_MODULE;
		return 0;
	}
	sp->cur = &st;
	ret = dwfl_getthread_frames(sp->dwfl, UNW_TID, on_frame, &st);
	sp->cur = NULL;
	if (st.n == 0) { /* libdw refused the initial state: keep rip, as the fp walk does */
		ips[0] = regs[UNW_REG_RIP];
		st.n = 1;
		*n = 1;
		*why = UNW_STOP_BAD_REGS;
		return 0;
	}
	*n = st.n;
	/* libdw ends "normally" also when a step it could not take from CFI fell back to its
	 * frame-pointer heuristic and that read outside the copy: the copy was too short. */
	/* on_frame()'s abort at the bound comes back as DWARF_CB_ABORT; a libdw error as -1 */
	if (ret == DWARF_CB_ABORT && st.n >= st.max)
		*why = UNW_STOP_DEPTH;
	else
		*why = ret == 0 && !st.outside ? UNW_STOP_END : stop_reason(sp, &st);
	return 0;
}
