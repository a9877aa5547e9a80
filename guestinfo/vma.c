// SPDX-License-Identifier: MIT
// A process's address space read from guest memory: the VMAs of an mm_struct, found in its maple
// tree (mm->mm_mt, Linux 6.1+; lib/maple_tree.c, include/linux/maple_tree.h), with the file each
// maps (path by the dentry chain, inode, device). Layouts from BTF; the node encoding is the
// maple tree's: an encoded node is the 256-byte-aligned node address | type << 3 | 0x4 (| 0x2 at
// the root), types 1 = leaf_64, 2 = range_64, 3 = arange_64. The tree changes under the walker
// (other vCPUs run): every node and VMA is checked, every VMA must point back to the mm, and the
// work is bounded; what does not check out is an error, never a loop or a read outside RAM.
#define pr_fmt(fmt) "gi: vma: " fmt
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "gi_internal.h"

#define MAPLE_NODE_ALIGN 256u
#define MAPLE_TYPE_SHIFT 3
#define MAPLE_TYPE_MASK 0xfu
#define MAPLE_LEAF_64 1
#define MAPLE_RANGE_64 2
#define MAPLE_ARANGE_64 3
#define MAPLE_SLOTS_MAX 32   /* 16 (range) and 10 (arange) on 64-bit */
#define VMA_MAX_NODES 512    /* node reads per walk: ~170 000 VMAs at full fan-out */
#define VMA_MAX_DEPTH 16     /* MAPLE_HEIGHT_MAX is 31; an mm of a million VMAs is 5 deep */
#define PAGE_MASK_4K 0xfffull

struct walk {
	const struct gi *gi;
	const struct gmem *mem;
	const struct gi_paging *pg;
	uint64_t mm;
	struct gi_mapping *out;
	size_t max, n;
	unsigned int nodes;
	uint64_t seen[VMA_MAX_NODES]; /* nodes read: a tree has no node twice */
};

static bool vma_layout_ok(const struct gi_layout *l)
{
	return l->mm_mt_root != UINT32_MAX && l->mr64_slots >= 2 &&
	       l->mr64_slots <= MAPLE_SLOTS_MAX && l->ma64_slots >= 2 &&
	       l->ma64_slots <= MAPLE_SLOTS_MAX && l->mr64_slot != UINT32_MAX &&
	       l->ma64_slot != UINT32_MAX && l->maple_node_size == MAPLE_NODE_ALIGN &&
	       l->mr64_slot + 8 * l->mr64_slots <= MAPLE_NODE_ALIGN &&
	       l->ma64_slot + 8 * l->ma64_slots <= MAPLE_NODE_ALIGN &&
	       l->mr64_pivot != UINT32_MAX && l->ma64_pivot != UINT32_MAX &&
	       l->mr64_pivot + 8 * (l->mr64_slots - 1) <= MAPLE_NODE_ALIGN &&
	       l->ma64_pivot + 8 * (l->ma64_slots - 1) <= MAPLE_NODE_ALIGN &&
	       l->mr64_meta < MAPLE_NODE_ALIGN && l->ma64_meta < MAPLE_NODE_ALIGN &&
	       l->vma_start != UINT32_MAX && l->vma_end != UINT32_MAX &&
	       l->vma_mm != UINT32_MAX && l->vma_flags != UINT32_MAX;
}

/* The file a VMA maps: path, inode, device (best effort: the path may fail alone). */
static void file_info(struct walk *w, uint64_t file, struct gi_mapping *m)
{
	const struct gi_layout *l = &w->gi->layout;
	uint64_t dentry = 0, inode = 0, sb = 0, ino = 0;
	uint32_t dentry_off, dev = 0;

	m->file = file;
	if (!__builtin_add_overflow(l->file_f_path, l->path_dentry, &dentry_off) &&
	    l->file_f_path != UINT32_MAX && l->path_dentry != UINT32_MAX &&
	    gi_read_u64_at(w->mem, w->pg, file, dentry_off, &dentry) == 0 &&
	    gi_dentry_path(w->gi, w->mem, w->pg, dentry, m->path, sizeof(m->path)) != 0)
		m->path[0] = '\0';
	if (gi_read_u64_at(w->mem, w->pg, file, l->file_f_inode, &inode) == 0 &&
	    gi_is_kernel_gva(w->pg, inode)) {
		if (gi_read_u64_at(w->mem, w->pg, inode, l->inode_i_ino, &ino) == 0)
			m->ino = ino;
		if (gi_read_u64_at(w->mem, w->pg, inode, l->inode_i_sb, &sb) == 0 &&
		    gi_is_kernel_gva(w->pg, sb) && l->sb_s_dev != UINT32_MAX &&
		    gi_read_gva(w->mem, w->pg, sb + l->sb_s_dev, &dev, sizeof(dev)) == 0)
			m->dev = dev;
	}
}

/* A leaf slot: the VMA at @vma, which must belong to the mm and look like one. */
static int add_vma(struct walk *w, uint64_t vma)
{
	const struct gi_layout *l = &w->gi->layout;
	struct gi_mapping *m;
	uint64_t start, end, mm, flags, pgoff = 0, file = 0;
	int err;

	if (!gi_is_kernel_gva(w->pg, vma) || (vma & 7))
		return -EBADMSG;
	err = gi_read_u64_at(w->mem, w->pg, vma, l->vma_start, &start);
	err = err ?: gi_read_u64_at(w->mem, w->pg, vma, l->vma_end, &end);
	err = err ?: gi_read_u64_at(w->mem, w->pg, vma, l->vma_mm, &mm);
	err = err ?: gi_read_u64_at(w->mem, w->pg, vma, l->vma_flags, &flags);
	if (err)
		return err;
	if (mm != w->mm || start >= end || (start & PAGE_MASK_4K) || (end & PAGE_MASK_4K) ||
	    !gi_is_user_gva(w->pg, start) || !gi_is_user_gva(w->pg, end - 1))
		return -EBADMSG;
	if (w->n == w->max)
		return -E2BIG;
	if (l->vma_pgoff != UINT32_MAX &&
	    gi_read_u64_at(w->mem, w->pg, vma, l->vma_pgoff, &pgoff) != 0)
		pgoff = 0;
	if (l->vma_file != UINT32_MAX &&
	    gi_read_u64_at(w->mem, w->pg, vma, l->vma_file, &file) != 0)
		file = 0;
	/* SAFETY: w->n < w->max, the size of w->out. */
	m = &w->out[w->n++];
	memset(m, 0, sizeof(*m));
	m->start = start;
	m->end = end;
	m->flags = flags;
	m->pgoff = pgoff;
	if (file && gi_is_kernel_gva(w->pg, file) && !(file & 7)) {
		/* consecutive VMAs of one file (text, data, bss of a library) share it */
		if (w->n >= 2 && w->out[w->n - 2].file == file) {
			memcpy(m->path, w->out[w->n - 2].path, sizeof(m->path));
			m->ino = w->out[w->n - 2].ino;
			m->dev = w->out[w->n - 2].dev;
			m->file = file;
		} else {
			file_info(w, file, m);
		}
	}
	return 0;
}

/*
 * The last slot in use of a node (ma_data_end() of lib/maple_tree.c): the metadata's end for an
 * arange node or a range/leaf node that is not full; else every slot, or all but the last when
 * the last pivot is the node's @max.
 */
static uint32_t data_end(const uint8_t *node, unsigned int type, const uint64_t *pivots,
			 uint32_t nslots, uint32_t meta_off, uint64_t max)
{
	uint32_t end;

	/* SAFETY: vma_layout_ok() checked meta_off < MAPLE_NODE_ALIGN, the node's size. */
	if (type == MAPLE_ARANGE_64 || !pivots[nslots - 2])
		end = node[meta_off];
	else
		end = pivots[nslots - 2] == max ? nslots - 2 : nslots - 1;
	return end < nslots ? end : nslots - 1;
}

/* The node encoded as @enode, covering indices up to @max, and everything below it (@depth
 * levels are above). */
static int walk_node(struct walk *w, uint64_t enode, uint64_t max, unsigned int depth)
{
	const struct gi_layout *l = &w->gi->layout;
	uint64_t node = enode & ~(uint64_t)(MAPLE_NODE_ALIGN - 1), buf[MAPLE_NODE_ALIGN / 8];
	unsigned int type = (unsigned int)(enode >> MAPLE_TYPE_SHIFT) & MAPLE_TYPE_MASK;
	bool arange = type == MAPLE_ARANGE_64;
	uint32_t slot_off, nslots, end;
	const uint64_t *pivots;
	int err;

	if (depth >= VMA_MAX_DEPTH || w->nodes >= VMA_MAX_NODES)
		return -ELOOP;
	for (unsigned int i = 0; i < w->nodes; i++)
		if (w->seen[i] == node)
			return -ELOOP;
	/* SAFETY: w->nodes < VMA_MAX_NODES, the size of seen[]. */
	w->seen[w->nodes++] = node;
	if (!gi_is_kernel_gva(w->pg, node) ||
	    (type != MAPLE_LEAF_64 && type != MAPLE_RANGE_64 && !arange))
		return -EBADMSG;
	err = gi_read_gva(w->mem, w->pg, node, buf, sizeof(buf));
	if (err)
		return err;
	slot_off = arange ? l->ma64_slot : l->mr64_slot;
	nslots = arange ? l->ma64_slots : l->mr64_slots;
	/* SAFETY: vma_layout_ok() checked the pivots (nslots - 1) and slots fit the node. */
	pivots = buf + (arange ? l->ma64_pivot : l->mr64_pivot) / 8;
	end = data_end((const uint8_t *)buf, type, pivots, nslots, arange ? l->ma64_meta
									  : l->mr64_meta, max);
	for (uint32_t i = 0; i <= end; i++) {
		uint64_t entry = buf[slot_off / 8 + i];
		uint64_t child_max = i < nslots - 1 && pivots[i] ? pivots[i] : max;

		if (!entry)
			continue;
		if (type == MAPLE_LEAF_64) {
			/* internal entries (reserved values, XA_ZERO_ENTRY) are not VMAs */
			if ((entry & 3) == 2)
				continue;
			err = add_vma(w, entry);
		} else {
			/* a child: an encoded node (bit 2 set, not a root) */
			if ((entry & 7) != 4)
				return -EBADMSG;
			err = walk_node(w, entry, child_max, depth + 1);
		}
		if (err)
			return err;
	}
	return 0;
}

static int cmp_mapping(const void *a, const void *b)
{
	const struct gi_mapping *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

int gi_process_mappings(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
			uint64_t mm, struct gi_mapping *out, size_t max, size_t *n)
{
	struct walk *w;
	uint64_t root;
	int err;

	if (!gi || !mem || !pg || !out || !n)
		return -EINVAL;
	*n = 0;
	if (!gi->have_layout || !vma_layout_ok(&gi->layout))
		return -ENODATA;
	if (!gi_is_kernel_gva(pg, mm) || (mm & 7))
		return -EBADMSG;
	err = gi_read_u64_at(mem, pg, mm, gi->layout.mm_mt_root, &root);
	if (err)
		return err;
	/* no VMA, or a single entry at index 0 (never a VMA: page 0 is not mapped) */
	if (!root || (root & 3) != 2 || root <= 4096)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct walk){ .gi = gi, .mem = mem, .pg = pg, .mm = mm, .out = out, .max = max };
	err = walk_node(w, root & ~(uint64_t)3, UINT64_MAX, 0);
	if (!err) {
		qsort(out, w->n, sizeof(*out), cmp_mapping);
		for (size_t i = 1; i < w->n && !err; i++)
			if (out[i].start < out[i - 1].end)
				err = -EBADMSG; /* overlapping VMAs: the tree changed under the walk */
	}
	if (!err)
		*n = w->n;
	free(w);
	return err;
}

int gi_mm_map_count(const struct gi *gi, const struct gmem *mem, const struct gi_paging *pg,
		    uint64_t mm, int32_t *count)
{
	if (!gi || !mem || !pg || !count)
		return -EINVAL;
	if (!gi->have_layout)
		return -ENODATA;
	if (!gi_is_kernel_gva(pg, mm) || (mm & 7))
		return -EBADMSG;
	return gi_read_s32_at(mem, pg, mm, gi->layout.mm_map_count, count);
}
