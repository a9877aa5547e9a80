// SPDX-License-Identifier: MIT
// USER_REGS at load time: the address space's files handed to the DWARF unwinder (one session
// per set of mapped files), the CFI chain checked against the frame-pointer chain recorded
// beside it, and the frame-pointer chain's leaf mended from the leaf's CFI in fp mode.
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "profile_internal.h"
#include "user_unwind.h"

#define VDSO_NAME "[vdso]" /* the vDSO's module name: it has no path */

struct user_unwind {
	struct symbolizer *s;
	struct unwinder *u;
	struct user_unwind_stats st;
	struct unw_map *maps;
	size_t cap_maps;
	struct u64map eager; /* cookie -> hash of the eager chain (--callchain-mode both) */
	struct u64map key_of_snap; /* snapshot id << 20 | mappings -> content key of its session */
	struct u64map exec_files;  /* scratch of space_of(): file ids with an executable mapping */
};

int user_unwind_new(struct symbolizer *s, struct user_unwind **out)
{
	struct user_unwind *uu = calloc(1, sizeof(*uu));
	int err;

	if (!uu)
		return -ENOMEM;
	uu->s = s;
	err = unwinder_new(&uu->u);
	if (err) {
		free(uu);
		return err;
	}
	*out = uu;
	return 0;
}

void user_unwind_free(struct user_unwind *uu)
{
	if (!uu)
		return;
	unwinder_free(uu->u);
	u64map_free(&uu->eager);
	u64map_free(&uu->key_of_snap);
	u64map_free(&uu->exec_files);
	free(uu->maps);
	free(uu);
}

const struct user_unwind_stats *user_unwind_stats(const struct user_unwind *uu)
{
	return &uu->st;
}

/* FNV-1a of @len bytes at @p into @h. */
static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/*
 * The unwinder session of @as. Snapshots of a process differ mostly in anonymous memory (the
 * heap, thread stacks): sessions are keyed by the files mapped and where (a hash of path,
 * range and offset of every file mapping found, the vDSO included), so such snapshots share
 * one session and its parsed CFI. Which content key a snapshot has is cached by (snapshot,
 * mappings known so far): a snapshot whose MAPPING records are still arriving is looked at
 * again when it grows.
 */
static int space_of(struct user_unwind *uu, const struct addrspace *as, struct unw_space **out)
{
	uint64_t snap = (uint64_t)as->id << 20 | (as->n_maps & 0xfffff), key;
	size_t n = 0;
	int err;

	if (!u64map_get(&uu->key_of_snap, snap, &key) && (*out = unwinder_lookup(uu->u, key)))
		return 0;
	/* A snapshot whose MAPPING records are still arriving: no session from half of it. */
	if (as->expect != as->count)
		return -EAGAIN;
	if (as->n_maps > uu->cap_maps) {
		struct unw_map *nm = realloc(uu->maps, as->n_maps * sizeof(*nm));

		if (!nm)
			return -ENOMEM;
		uu->maps = nm;
		uu->cap_maps = as->n_maps;
	}
	/* Only files with executable code in this snapshot matter (not data files, ld.so.cache,
	 * /dev/mem): their other mappings stay, they place the file (its offset-0 mapping). */
	err = 0;
	for (size_t i = 0; i < as->n_maps && !err; i++)
		if (as->maps[i].file && (as->maps[i].prot & HVP_PROT_EXEC))
			err = u64map_put(&uu->exec_files, as->maps[i].file->id, 1);
	key = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < as->n_maps && !err; i++) {
		const struct as_mapping *m = &as->maps[i];
		uint64_t has_exec;
		uint32_t file_id;
		const char *name;
		int fd;

		if (m->file && u64map_get(&uu->exec_files, m->file->id, &has_exec))
			continue;
		if (m->file) {
			err = symbolizer_mapping_file(uu->s, m, &fd, &name, NULL);
			name = m->file->path;
			file_id = m->file->id; /* path, inode, build-id */
		} else {
			/* the vDSO: the image out of the kernel's vmlinux, when it agrees */
			err = symbolizer_vdso_file(uu->s, as, m, &fd);
			name = VDSO_NAME;
			file_id = UINT32_MAX;
		}
		if (err == -ENOMEM)
			break;
		if (err || fd < 0) {
			err = 0;
			continue;
		}
		uu->maps[n++] = (struct unw_map){ .start = m->start, .end = m->end,
						  .pgoff = m->pgoff, .fd = fd, .name = name };
		key = fnv(key, &file_id, sizeof(file_id));
		key = fnv(key, &m->start, sizeof(m->start));
		key = fnv(key, &m->end, sizeof(m->end));
		key = fnv(key, &m->pgoff, sizeof(m->pgoff));
	}
	u64map_free(&uu->exec_files); /* leaves it empty for the next snapshot */
	if (err)
		return err;
	err = u64map_put(&uu->key_of_snap, snap, key);
	if (err)
		return err;
	*out = unwinder_lookup(uu->u, key);
	if (*out)
		return 0;
	uu->st.sessions++;
	return unwinder_space(uu->u, key, uu->maps, n, out);
}

/* --call-graph fp: insert the leaf's direct caller when its CFI shows the fp chain skipped it. */
static void mend_leaf(struct user_unwind *uu, struct unw_space *sp,
		      const struct hvp_user_regs *ur, uint64_t *ips, uint16_t *n, uint8_t *stop)
{
	uint64_t cfi[2];
	unsigned int nc;
	enum unw_stop why;

	if (*n < 1 || unwinder_unwind(sp, ur->regs, ur->stack, ur->stack_len, cfi, 2, &nc, &why) ||
	    nc < 2 || cfi[0] != ips[0]) {
		uu->st.leaf_unchecked++;
		return;
	}
	uu->st.leaf_checked++;
	if (*n >= 2 && ips[1] == cfi[1])
		return;
	/* RBP still pointed at the caller's caller: the leaf had no frame (yet, or at all). */
	uu->st.leaf_fixed++;
	if (*n < HVP_MAX_CALLCHAIN)
		(*n)++;
	else
		*stop = HVP_WALK_DEPTH; /* the outermost frame makes room */
	/* SAFETY: *n <= HVP_MAX_CALLCHAIN, the capacity of @ips; moves ips[1..*n-2] up by one. */
	memmove(ips + 2, ips + 1, (size_t)(*n - 2) * sizeof(*ips));
	ips[1] = cfi[1];
}

/* --call-graph dwarf: the CFI chain replaces the fp chain, unless the fp chain agrees with all
 * of a CFI chain that stopped early and goes further. */
static int dwarf_chain(struct user_unwind *uu, struct unw_space *sp,
		       const struct hvp_user_regs *ur, uint64_t *ips, uint16_t *n, uint8_t *stop,
		       bool count)
{
	uint64_t cfi[HVP_MAX_CALLCHAIN];
	unsigned int nc;
	enum unw_stop why;
	int err;

	err = unwinder_unwind(sp, ur->regs, ur->stack, ur->stack_len, cfi, HVP_MAX_CALLCHAIN, &nc,
			      &why);
	if (err)
		return err == -EINVAL ? 0 : err;
	if (!nc) /* rip 0: nothing to show instead of the recorded chain */
		return 0;
	if (count) {
		uu->st.dwarf++;
		uu->st.dwarf_stop[why]++;
		uu->st.dwarf_fp_agree += nc == *n && memcmp(cfi, ips, nc * sizeof(*ips)) == 0;
	}
	if (why != UNW_STOP_END && why != UNW_STOP_DEPTH && *n > nc &&
	    memcmp(cfi, ips, nc * sizeof(*ips)) == 0) {
		uu->st.fp_extended += count;
		return 0;
	}
	memcpy(ips, cfi, nc * sizeof(*ips));
	*n = (uint16_t)nc;
	*stop = why == UNW_STOP_END	? HVP_WALK_END
		: why == UNW_STOP_DEPTH ? HVP_WALK_DEPTH
		: why == UNW_STOP_STACK ? HVP_WALK_FAULT
					: HVP_WALK_BAD_FP;
	return 0;
}

/* FNV-1a over a chain: eager and deferred chains are compared by it. */
static uint64_t chain_hash(const uint64_t *ips, uint16_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (uint16_t i = 0; i < n; i++)
		for (unsigned int b = 0; b < 64; b += 8)
			h = (h ^ ((ips[i] >> b) & 0xff)) * 0x100000001b3ull;
	return (h ^ n) & ~1ull; /* bit 0 clear: UINT64_MAX marks "no stack" */
}

/*
 * --callchain-mode both, DWARF: the eager state's chain is unwound as the deferred one will be
 * and remembered by cookie; the deferred chain is compared with it (the ground truth that a
 * deferred walk sees the user state of the kernel entry: stats eager_compared/eager_equal).
 */
static int compare_eager(struct user_unwind *uu, struct unw_space *sp,
			 const struct hvp_user_regs *ur, const uint64_t *ips, uint16_t n)
{
	uint64_t val, copy[HVP_MAX_CALLCHAIN];
	uint16_t nc = n;
	uint8_t stop = 0;
	int err;

	if (ur->follows == HVP_USER_REGS_AFTER_USER_STACK) {
		if (u64map_get(&uu->eager, ur->cookie, &val))
			return 0;
		u64map_del(&uu->eager, ur->cookie);
		if (!ur->stack_len || val == UINT64_MAX) { /* one side copied no stack */
			uu->st.eager_no_stack++;
			return 0;
		}
		uu->st.eager_compared++;
		uu->st.eager_equal += val == chain_hash(ips, n);

		return 0;
	}
	/* No stack at the sample (its first page not present: a fault on the stack itself). */
	if (!ur->stack_len)
		return u64map_put(&uu->eager, ur->cookie, UINT64_MAX);
	memcpy(copy, ips, n * sizeof(*ips));
	err = dwarf_chain(uu, sp, ur, copy, &nc, &stop, false);
	return err ? err : u64map_put(&uu->eager, ur->cookie, chain_hash(copy, nc) & ~1ull);
}

int user_unwind_eager(struct user_unwind *uu, const struct addrspace *as,
		      const struct hvp_user_regs *ur, const uint64_t *ips, uint16_t n)
{
	struct unw_space *sp;
	int err;

	if (!as || !as->has_maps || !ur->cookie || ur->stack_size <= HVP_USER_STACK_FP_WINDOW)
		return 0;
	err = space_of(uu, as, &sp);
	if (err == -EAGAIN)
		return 0;
	return err ? err : compare_eager(uu, sp, ur, ips, n);
}

int user_unwind_apply(struct user_unwind *uu, const struct addrspace *as,
		      const struct hvp_user_regs *ur, uint64_t *ips, uint16_t *n, uint8_t *stop)
{
	struct unw_space *sp;
	int err;

	if (!as || !as->has_maps) {
		uu->st.no_space++;
		return 0;
	}
	err = space_of(uu, as, &sp);
	if (err == -EAGAIN) {
		uu->st.no_space++;
		return 0;
	}
	if (err)
		return err;
	if (ur->stack_size > HVP_USER_STACK_FP_WINDOW) {
		err = dwarf_chain(uu, sp, ur, ips, n, stop, true);
		if (!err && ur->cookie && ur->follows == HVP_USER_REGS_AFTER_USER_STACK)
			err = compare_eager(uu, sp, ur, ips, *n);
		return err;
	}
	mend_leaf(uu, sp, ur, ips, n, stop);
	return 0;
}
_Static_assert(UNW_STOP_COUNT == PROFILE_UNWIND_STOPS, "profile_stats.dwarf_stop has a slot per reason");
