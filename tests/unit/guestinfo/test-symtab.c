// SPDX-License-Identifier: MIT
// Unit tests of symtab_* on an ELF fixture built by meson (env SYMTAB_FIXTURE).
#include <errno.h>
#include <gelf.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>

#include "test.h"

static struct symtab *st;

static int open_fixture(void)
{
	const char *path = getenv("SYMTAB_FIXTURE");

	if (st)
		return TEST_OK;
	if (!path) {
		fprintf(stderr, "SYMTAB_FIXTURE not set\n");
		return TEST_FAIL;
	}
	ASSERT_EQ_INT(symtab_open_elf(path, &st), 0);
	return TEST_OK;
}

static int test_find_and_lookup(void)
{
	static const char *const names[] = { "fx_alpha", "fx_beta", "main", "fx_sized",
					     "fx_label", "fx_tail" };

	if (open_fixture())
		return TEST_FAIL;
	ASSERT_TRUE(symtab_count(st) >= 6);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		const char *name = NULL;
		uint64_t addr = 0, off = 99;

		ASSERT_EQ_INT(symtab_find(st, names[i], &addr), 0);
		ASSERT_TRUE(addr != 0);
		ASSERT_EQ_INT(symtab_lookup(st, addr, &name, &off), 0);
		ASSERT_EQ_STR(name, names[i]);
		ASSERT_EQ_U64(off, 0);
	}
	return TEST_OK;
}

struct boundary_row {
	const char *base;   /* symbol the address is relative to */
	int64_t delta;      /* address = base + delta */
	int err;
	const char *name;   /* expected symbol */
	uint64_t offset;
};

static const struct boundary_row boundary_rows[] = {
	{ "fx_sized", 0, 0, "fx_sized", 0 },
	{ "fx_sized", 15, 0, "fx_sized", 15 },       /* last byte of a sized FUNC */
	{ "fx_sized", 16, -ENOENT, NULL, 0 },        /* first byte past it: padding */
	{ "fx_sized", 31, -ENOENT, NULL, 0 },
	{ "fx_label", 0, 0, "fx_label", 0 },         /* NOTYPE, size 0: up to the next symbol */
	{ "fx_label", 7, 0, "fx_label", 7 },
	{ "fx_label", 8, 0, "fx_inner", 0 },         /* NOTYPE local label */
	{ "fx_label", 15, 0, "fx_inner", 7 },
	{ "fx_label", 16, 0, "fx_tail", 0 },
	{ "fx_tail", 3, 0, "fx_tail", 3 },
	{ "fx_tail", 4, -ENOENT, NULL, 0 },
	{ "fx_data_object", 0, -ENOENT, NULL, 0 },   /* data is never a lookup result */
};

static int test_boundaries(void)
{
	if (open_fixture())
		return TEST_FAIL;
	for (size_t i = 0; i < ARRAY_SIZE(boundary_rows); i++) {
		const struct boundary_row *row = &boundary_rows[i];
		const char *name = NULL;
		uint64_t base, off = 0;
		int err;

		ASSERT_EQ_INT(symtab_find(st, row->base, &base), 0);
		err = symtab_lookup(st, base + (uint64_t)row->delta, &name, &off);
		if (err != row->err) {
			fprintf(stderr, "row %zu (%s%+lld): err %d, expected %d (name %s)\n", i,
				row->base, (long long)row->delta, err, row->err,
				err ? "-" : name);
			return TEST_FAIL;
		}
		if (!err) {
			ASSERT_EQ_STR(name, row->name);
			ASSERT_EQ_U64(off, row->offset);
		}
	}
	return TEST_OK;
}

/* The end of the highest executable section, computed independently with libelf. */
static int exec_end_of(const char *path, uint64_t *end)
{
	Elf_Scn *scn = NULL;
	Elf *elf;
	int fd;

	*end = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -1;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;

		if (gelf_getshdr(scn, &shdr) && (shdr.sh_flags & SHF_EXECINSTR) &&
		    shdr.sh_addr + shdr.sh_size > *end)
			*end = shdr.sh_addr + shdr.sh_size;
	}
	elf_end(elf);
	close(fd);
	return *end ? 0 : -1;
}

static int test_past_end(void)
{
	const char *name;
	uint64_t end, off;

	if (open_fixture())
		return TEST_FAIL;
	ASSERT_EQ_INT(exec_end_of(getenv("SYMTAB_FIXTURE"), &end), 0);
	ASSERT_EQ_INT(symtab_lookup(st, end, &name, &off), -ENOENT);
	ASSERT_EQ_INT(symtab_lookup(st, end + 0x1000, &name, &off), -ENOENT);
	ASSERT_EQ_INT(symtab_lookup(st, UINT64_MAX, &name, &off), -ENOENT);
	ASSERT_EQ_INT(symtab_lookup(st, 0, &name, &off), -ENOENT);
	return TEST_OK;
}

static int test_find_missing_and_data(void)
{
	uint64_t addr;

	if (open_fixture())
		return TEST_FAIL;
	ASSERT_EQ_INT(symtab_find(st, "no_such_symbol_anywhere", &addr), -ENOENT);
	ASSERT_EQ_INT(symtab_find(st, "", &addr), -ENOENT);
	/* Data objects are found by name (per-CPU variables such as current_task need it). */
	ASSERT_EQ_INT(symtab_find(st, "fx_data_object", &addr), 0);
	ASSERT_TRUE(addr != 0);
	return TEST_OK;
}

static int test_elf_info(void)
{
	unsigned int e_type = 0;
	uint64_t text_vaddr = 1, main_addr;
	const char *id;

	if (open_fixture())
		return TEST_FAIL;
	symtab_elf_info(st, &e_type, &text_vaddr);
	ASSERT_TRUE(e_type == ET_EXEC || e_type == ET_DYN);
	ASSERT_EQ_INT(symtab_find(st, "main", &main_addr), 0);
	ASSERT_TRUE(text_vaddr <= main_addr);
	if (e_type == ET_EXEC)
		ASSERT_TRUE(text_vaddr >= 0x400000);
	id = symtab_build_id(st);
	ASSERT_TRUE(id != NULL);
	/* The fixture is linked with --build-id=sha1: 20 bytes, 40 hex digits. */
	ASSERT_EQ_INT(strlen(id), 40);
	ASSERT_TRUE(strspn(id, "0123456789abcdef") == 40);
	return TEST_OK;
}

static int test_not_elf(void)
{
	char path[] = "/tmp/hvprof-symtab-XXXXXX";
	struct symtab *bad = NULL;
	int fd = mkstemp(path), err;

	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ_INT(write(fd, "this is not an ELF file\n", 24), 24);
	close(fd);
	err = symtab_open_elf(path, &bad);
	unlink(path);
	ASSERT_EQ_INT(err, -EBADMSG);
	ASSERT_TRUE(bad == NULL);
	return TEST_OK;
}

static int test_missing_file(void)
{
	struct symtab *bad = NULL;

	ASSERT_EQ_INT(symtab_open_elf("/nonexistent/hvprof/vmlinux", &bad), -ENOENT);
	ASSERT_TRUE(bad == NULL);
	ASSERT_EQ_INT(symtab_open_elf(NULL, &bad), -EINVAL);
	symtab_free(NULL);
	return TEST_OK;
}

static int test_gi_open_errors(void)
{
	struct gi_config cfg = { .vmlinux = getenv("SYMTAB_FIXTURE") };
	struct gi *gi = NULL;

	ASSERT_EQ_INT(gi_open(NULL, &gi), -EINVAL);
	/* A valid ELF without current_task/_stext/_etext is not a kernel. */
	ASSERT_EQ_INT(gi_open(&cfg, &gi), -ENOENT);
	ASSERT_TRUE(gi == NULL);
	cfg.vmlinux = "/nonexistent/hvprof/vmlinux";
	ASSERT_EQ_INT(gi_open(&cfg, &gi), -ENOENT);
	ASSERT_TRUE(gi == NULL);
	gi_close(NULL);
	ASSERT_TRUE(gi_symtab(NULL) == NULL);
	return TEST_OK;
}

static int test_cleanup(void)
{
	symtab_free(st);
	st = NULL;
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "find and lookup known functions", test_find_and_lookup },
	{ "lookup at symbol boundaries", test_boundaries },
	{ "lookup past the last executable section", test_past_end },
	{ "find missing names and data objects", test_find_missing_and_data },
	{ "ELF type, text vaddr, build-id", test_elf_info },
	{ "not an ELF file", test_not_elf },
	{ "missing file", test_missing_file },
	{ "gi_open errors", test_gi_open_errors },
	{ "free", test_cleanup },
};

TEST_MAIN(tests)
