// SPDX-License-Identifier: MIT
// A process's VMAs from its maple tree (gi_process_mappings) on a fake guest: a two-level tree
// (an arange_64 root over two leaf_64 nodes, as an mm's tree is built), the file of a mapping
// by its dentry chain, stale slots past a node's end, and hostile trees: a VMA of another mm,
// a child that is not an encoded node, a cycle, a node outside RAM, too many VMAs, no layout.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#include "fakekernel.h"
#include "gi_internal.h"
#include "test.h"

#define NODE_GPA(i) (0x600000ull + 0x100 * (i))
#define VMA_GPA(i) (0x610000ull + 0x100 * (i))
#define FILE_GPA 0x620000ull
#define INODE_GPA 0x620100ull
#define SB_GPA 0x620200ull
#define DENTRY_GPA(i) (0x630000ull + 0x100 * (i))
#define NAME_GPA(i) (0x640000ull + 0x200 * (i))
#define OTHER_MM 0xffff888000123000ull

/* maple node encodings (lib/maple_tree.c): node | type << 3 | 4, and | 2 at the root */
#define ENODE(i, type) (fk_kva(NODE_GPA(i)) | (uint64_t)(type) << 3 | 4)
#define LEAF 1
#define ARANGE 3

struct fixture {
	struct fakekernel fk;
	struct gi_layout l;
	struct gi *gi;
};

static int w64(struct fixture *f, uint64_t gpa, uint64_t v)
{
	return fk_w64(&f->fk, fk_kva(gpa), v);
}

static int put_vma(struct fixture *f, int i, uint64_t start, uint64_t end, uint64_t mm,
		   uint64_t flags, uint64_t file)
{
	return w64(f, VMA_GPA(i) + f->l.vma_start, start) ||
	       w64(f, VMA_GPA(i) + f->l.vma_end, end) || w64(f, VMA_GPA(i) + f->l.vma_mm, mm) ||
	       w64(f, VMA_GPA(i) + f->l.vma_flags, flags) ||
	       w64(f, VMA_GPA(i) + f->l.vma_pgoff, 2) || w64(f, VMA_GPA(i) + f->l.vma_file, file);
}

static int put_dentry(struct fixture *f, int i, int parent, const char *name)
{
	return w64(f, DENTRY_GPA(i) + f->l.dentry_d_parent, fk_kva(DENTRY_GPA(parent))) ||
	       w64(f, DENTRY_GPA(i) + f->l.dentry_d_name + f->l.qstr_name, fk_kva(NAME_GPA(i))) ||
	       fk_write_gva(&f->fk, fk_kva(NAME_GPA(i)), name, strlen(name) + 1);
}

/* Slot @i of node @n (leaf or range: slots at 128; arange: at 80) and pivot @i. */
static int slot(struct fixture *f, int n, bool arange, int i, uint64_t v)
{
	return w64(f, NODE_GPA(n) + (arange ? f->l.ma64_slot : f->l.mr64_slot) + 8 * i, v);
}

static int pivot(struct fixture *f, int n, bool arange, int i, uint64_t v)
{
	return w64(f, NODE_GPA(n) + (arange ? f->l.ma64_pivot : f->l.mr64_pivot) + 8 * i, v);
}

static int meta_end(struct fixture *f, int n, bool arange, uint8_t end)
{
	return fk_write_gva(&f->fk, fk_kva(NODE_GPA(n)) + (arange ? f->l.ma64_meta : f->l.mr64_meta),
			    &end, 1);
}

/*
 * mm -> root (arange) -> leaf 1: [gap, A 0x400000-0x401000 r-x, gap, B 0x600000-0x602000 rw-]
 *                     -> leaf 2: [gap, C 0x7f0000000000-0x7f0000010000 r-x /lib/libc.so.6]
 * and a stale VMA in leaf 1 past its end.
 */
static int fixture_init(struct fixture *f)
{
	uint64_t mm;

	memset(f, 0, sizeof(*f));
	if (fakekernel_init(&f->fk, 4))
		return -1;
	f->l = f->fk.layout;
	f->l.mm_mt_root = 0x48;
	f->l.mm_map_count = 0x60;
	f->l.mr64_pivot = 8, f->l.mr64_slot = 128, f->l.mr64_slots = 16, f->l.mr64_meta = 248;
	f->l.ma64_pivot = 8, f->l.ma64_slot = 80, f->l.ma64_slots = 10, f->l.ma64_meta = 240;
	f->l.maple_node_size = 256;
	f->l.vma_start = 0, f->l.vma_end = 8, f->l.vma_mm = 16, f->l.vma_flags = 32;
	f->l.vma_pgoff = 104, f->l.vma_file = 112;
	f->l.file_f_inode = 32, f->l.inode_i_ino = 64, f->l.inode_i_sb = 40, f->l.sb_s_dev = 16;
	if (gi_new_raw(&f->l, FK_STEXT, FK_ETEXT, FK_CURRENT_TASK_OFF, &f->gi))
		return -1;
	mm = f->fk.mm_kva;
	return fk_w64(&f->fk, mm + f->l.mm_mt_root, ENODE(0, ARANGE) | 2) ||
	       /* root: children leaf 1 (up to 0x6fffffffffff), leaf 2 (the rest) */
	       slot(f, 0, true, 0, ENODE(1, LEAF)) || pivot(f, 0, true, 0, 0x6fffffffffffull) ||
	       slot(f, 0, true, 1, ENODE(2, LEAF)) || meta_end(f, 0, true, 1) ||
	       /* leaf 1 */
	       slot(f, 1, false, 1, fk_kva(VMA_GPA(0))) || pivot(f, 1, false, 0, 0x3fffff) ||
	       pivot(f, 1, false, 1, 0x400fff) || pivot(f, 1, false, 2, 0x5fffff) ||
	       slot(f, 1, false, 3, fk_kva(VMA_GPA(1))) || pivot(f, 1, false, 3, 0x601fff) ||
	       meta_end(f, 1, false, 4) || slot(f, 1, false, 6, fk_kva(VMA_GPA(3))) ||
	       /* leaf 2 */
	       slot(f, 2, false, 1, fk_kva(VMA_GPA(2))) || pivot(f, 2, false, 0, 0x7effffffffffull) ||
	       pivot(f, 2, false, 1, 0x7f000000ffffull) || meta_end(f, 2, false, 2) ||
	       put_vma(f, 0, 0x400000, 0x401000, mm, 0x5, 0) ||
	       put_vma(f, 1, 0x600000, 0x602000, mm, 0x3, 0) ||
	       put_vma(f, 2, 0x7f0000000000ull, 0x7f0000010000ull, mm, 0x5, fk_kva(FILE_GPA)) ||
	       put_vma(f, 3, 0x500000, 0x700000, mm, 0x3, 0) || /* stale: past leaf 1's end */
	       w64(f, FILE_GPA + f->l.file_f_path + f->l.path_dentry, fk_kva(DENTRY_GPA(2))) ||
	       w64(f, FILE_GPA + f->l.file_f_inode, fk_kva(INODE_GPA)) ||
	       w64(f, INODE_GPA + f->l.inode_i_ino, 1234567) ||
	       w64(f, INODE_GPA + f->l.inode_i_sb, fk_kva(SB_GPA)) ||
	       w64(f, SB_GPA + f->l.sb_s_dev, 0x00800002) ||
	       put_dentry(f, 0, 0, "/") || put_dentry(f, 1, 0, "lib") ||
	       put_dentry(f, 2, 1, "libc.so.6");
}

static void fixture_fini(struct fixture *f)
{
	gi_close(f->gi);
	fakekernel_fini(&f->fk);
}

static int mappings(struct fixture *f, struct gi_mapping *m, size_t max, size_t *n)
{
	return gi_process_mappings(f->gi, &f->fk.fm.mem, &f->fk.fm.pg, f->fk.mm_kva, m, max, n);
}

static int test_good_tree(void)
{
	struct gi_mapping m[8];
	struct fixture f;
	size_t n = 99;
	int ret = TEST_FAIL;

	if (fixture_init(&f))
		goto out;
	ASSERT_EQ_INT(mappings(&f, m, 8, &n), 0);
	ASSERT_EQ_INT(n, 3); /* the stale slot past leaf 1's end is not read */
	ASSERT_EQ_U64(m[0].start, 0x400000);
	ASSERT_EQ_U64(m[0].end, 0x401000);
	ASSERT_EQ_U64(m[0].flags, 0x5);
	ASSERT_EQ_STR(m[0].path, "");
	ASSERT_EQ_U64(m[1].start, 0x600000);
	ASSERT_EQ_U64(m[2].start, 0x7f0000000000ull);
	ASSERT_EQ_U64(m[2].pgoff, 2);
	ASSERT_EQ_STR(m[2].path, "/lib/libc.so.6");
	ASSERT_EQ_U64(m[2].ino, 1234567);
	ASSERT_EQ_U64(m[2].dev, 0x00800002);
	ASSERT_EQ_U64(m[2].file, fk_kva(FILE_GPA));
	/* too small an array */
	ASSERT_EQ_INT(mappings(&f, m, 2, &n), -E2BIG);
	/* an empty mm */
	ASSERT_EQ_INT(fk_w64(&f.fk, f.fk.mm_kva + f.l.mm_mt_root, 0), 0);
	ASSERT_EQ_INT(mappings(&f, m, 8, &n), 0);
	ASSERT_EQ_INT(n, 0);
	ret = TEST_OK;
out:
	fixture_fini(&f);
	return ret;
}

enum damage { OTHER_MM_VMA, NOT_A_NODE, CYCLE, OUTSIDE_RAM, OVERLAP, BAD_TYPE, NO_LAYOUT };

struct hostile_row {
	const char *name;
	enum damage d;
	int want;
};

static const struct hostile_row rows[] = {
	{ "a VMA of another mm", OTHER_MM_VMA, -EBADMSG },
	{ "a child that is not an encoded node", NOT_A_NODE, -EBADMSG },
	{ "a child pointing back at the root", CYCLE, -ELOOP },
	{ "a node outside guest RAM", OUTSIDE_RAM, -ERANGE },
	{ "overlapping VMAs", OVERLAP, -EBADMSG },
	{ "a dense node (not in an mm's tree)", BAD_TYPE, -EBADMSG },
	{ "a kernel without the maple tree in its BTF", NO_LAYOUT, -ENODATA },
};

static int damage(struct fixture *f, enum damage d)
{
	switch (d) {
	case OTHER_MM_VMA:
		return w64(f, VMA_GPA(1) + f->l.vma_mm, OTHER_MM);
	case NOT_A_NODE:
		return slot(f, 0, true, 1, fk_kva(VMA_GPA(2)));
	case CYCLE:
		return slot(f, 0, true, 1, ENODE(0, ARANGE));
	case OUTSIDE_RAM:
		return slot(f, 0, true, 1, (FK_DIRECT + 0x3ff00000ull) | 3 << 3 | 4);
	case OVERLAP:
		return w64(f, VMA_GPA(1) + f->l.vma_start, 0x400000);
	case BAD_TYPE:
		return slot(f, 0, true, 1, fk_kva(NODE_GPA(2)) | 4);
	case NO_LAYOUT:
		gi_close(f->gi);
		f->l.mr64_slots = UINT32_MAX;
		return gi_new_raw(&f->l, FK_STEXT, FK_ETEXT, FK_CURRENT_TASK_OFF, &f->gi);
	}
	return -1;
}

static int test_hostile_trees(void)
{
	int ret = TEST_OK;

	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		struct gi_mapping m[8];
		struct fixture f;
		size_t n = 99;
		int err = 0;

		if (fixture_init(&f) || damage(&f, rows[i].d)) {
			fprintf(stderr, "%s: set-up failed\n", rows[i].name);
			ret = TEST_FAIL;
		} else if ((err = mappings(&f, m, 8, &n)) != rows[i].want || n != 0) {
			fprintf(stderr, "%s: %d (n %zu), want %d\n", rows[i].name, err, n,
				rows[i].want);
			ret = TEST_FAIL;
		}
		fixture_fini(&f);
	}
	return ret;
}

/* The build-id of a mapped ELF from its first page in guest memory equals what libelf reads from
 * the file's sections (this test's own executable); a page that is not an ELF has none, and an
 * unmapped one is a fault. */
static int test_build_id(void)
{
	struct fakekernel fk;
	struct symtab *st = NULL;
	uint8_t page[4096], id[20];
	char hex[41];
	size_t len = 0;
	FILE *f;

	ASSERT_EQ_INT(fakekernel_init(&fk, 4), 0);
	f = fopen("/proc/self/exe", "rb");
	ASSERT_TRUE(f && fread(page, 1, sizeof(page), f) == sizeof(page));
	fclose(f);
	ASSERT_EQ_INT(symtab_open_elf("/proc/self/exe", &st), 0);
	if (!symtab_build_id(st)[0]) {
		printf("# skip: this test was linked without a build-id\n");
		symtab_free(st);
		fakekernel_fini(&fk);
		return TEST_SKIP;
	}
	/* the user text pages of the fake process: FK_USER_TEXT */
	ASSERT_EQ_INT(fk_write_gva(&fk, FK_USER_TEXT, page, sizeof(page)), 0);
	ASSERT_EQ_INT(gi_mapping_build_id(&fk.fm.mem, &fk.fm.pg, FK_USER_TEXT, id, sizeof(id), &len),
		      0);
	ASSERT_TRUE(len > 0 && len <= 20);
	for (size_t i = 0; i < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	ASSERT_EQ_STR(hex, symtab_build_id(st));
	symtab_free(st);
	/* not an ELF; not mapped; not page aligned */
	ASSERT_EQ_INT(fk_write_gva(&fk, FK_USER_TEXT + 4096, "#!/bin/sh\n", 10), 0);
	ASSERT_EQ_INT(gi_mapping_build_id(&fk.fm.mem, &fk.fm.pg, FK_USER_TEXT + 4096, id, sizeof(id),
					  &len), -ENOENT);
	ASSERT_EQ_INT(gi_mapping_build_id(&fk.fm.mem, &fk.fm.pg, 0x10000000, id, sizeof(id), &len),
		      -EFAULT);
	ASSERT_EQ_INT(gi_mapping_build_id(&fk.fm.mem, &fk.fm.pg, FK_USER_TEXT + 8, id, sizeof(id),
					  &len), -EINVAL);
	/* program headers that point past the page are refused, not followed */
	memset(page + 64, 0xff, 56); /* the first program header: offsets far away */
	ASSERT_EQ_INT(fk_write_gva(&fk, FK_USER_TEXT, page, sizeof(page)), 0);
	{
		int err = gi_mapping_build_id(&fk.fm.mem, &fk.fm.pg, FK_USER_TEXT, id, sizeof(id),
					      &len);

		ASSERT_TRUE(err == 0 || err == -ENOENT);
	}
	fakekernel_fini(&fk);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "build-id of a mapped ELF from its first page", test_build_id },
	{ "mappings from a two-level maple tree, with a file", test_good_tree },
	{ "hostile maple trees give errors, never loops", test_hostile_trees },
};

TEST_MAIN(tests)
