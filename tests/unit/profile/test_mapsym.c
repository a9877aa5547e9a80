// SPDX-License-Identifier: MIT
// Symbolization by mapping (MAPPING records) with real ELF files built by meson (argv[1]: a PIE,
// argv[2]: a shared object linked at 0x200000, argv[3]: the PIE stripped): PIE and shared object
// through their PT_LOADs, the file search (rootfs with a symlink, a debug file by build-id under
// --symfs, an ext4 image made with mke2fs -d), a stripped file, a refused build-id, anonymous
// memory and the vDSO, a chain cut at the walk's depth bound, --max-stack, debuginfod.
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>
#include <hvprof/profile.h>

#include "profile_internal.h"
#include "rec_helpers.h"
#include "test.h"

extern char **environ;

static const char *pie_path, *lib_path, *stripped_path;
static char tmp[256]; /* a temporary directory for the trees below */

#define PIE_BIAS 0x555555554000ull
#define LIB_BIAS (0x7f0000000000ull - 0x200000ull) /* the lib's first vaddr is 0x200000 */
#define ANON_START 0x7f1000000000ull
#define VVAR_START 0x7ffff7fc0000ull
#define VDSO_START 0x7ffff7fc4000ull
#define NOWHERE 0x100000ull

struct elfinfo {
	uint64_t fn;      /* vaddr of the function the test samples in */
	uint64_t fn_off;  /* its file offset */
	uint8_t bid[20];
	uint8_t bid_len;
	struct { uint64_t off, vaddr, filesz, memsz; uint32_t flags; } load[8];
	int n_load;
};

static struct elfinfo pie, lib;

static int elf_info(const char *path, const char *fn, struct elfinfo *ei)
{
	struct symtab *st;
	const char *hex;
	size_t n;
	Elf *elf;
	int fd, err;

	err = symtab_open_elf(path, &st);
	if (err)
		return err;
	err = symtab_find(st, fn, &ei->fn);
	hex = symtab_build_id(st);
	for (size_t i = 0; hex[2 * i] && i < sizeof(ei->bid); i++, ei->bid_len++)
		sscanf(hex + 2 * i, "%2hhx", &ei->bid[i]);
	symtab_free(st);
	if (err)
		return err;
	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_getphdrnum(elf, &n)) {
		close(fd);
		return -EBADMSG;
	}
	for (size_t i = 0; i < n && ei->n_load < 8; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		ei->load[ei->n_load].off = ph.p_offset;
		ei->load[ei->n_load].vaddr = ph.p_vaddr;
		ei->load[ei->n_load].filesz = ph.p_filesz;
		ei->load[ei->n_load].memsz = ph.p_memsz;
		ei->load[ei->n_load++].flags = ph.p_flags;
		if (ei->fn >= ph.p_vaddr && ei->fn < ph.p_vaddr + ph.p_filesz)
			ei->fn_off = ei->fn - ph.p_vaddr + ph.p_offset;
	}
	elf_end(elf);
	close(fd);
	return ei->bid_len ? 0 : -ENODATA;
}

/* One recording's content beyond the ELF files. */
struct recspec {
	const char *const *meta;   /* key, value pairs, NULL-terminated */
	const char *pie_guest;     /* guest paths of the two files */
	const char *lib_guest;
	int bad_lib_bid;           /* flip a byte of the lib's build-id in its MAPPINGs */
	int no_mappings;           /* an old recording: PROCESS records only */
};

static int write_file_maps(struct recfile_writer *w, const char *path, const struct elfinfo *ei,
			   uint64_t bias, int bad_bid, uint16_t *idx, uint16_t count)
{
	int err = 0;

	for (int i = 0; i < ei->n_load && !err; i++) {
		struct hvp_mapping m = { .tgid = 10, .index = (*idx)++, .count = count };
		uint64_t page = ei->load[i].vaddr & ~0xfffull;

		m.start = bias + page;
		m.end = (bias + ei->load[i].vaddr + ei->load[i].memsz + 0xfff) & ~0xfffull;
		m.pgoff = ei->load[i].off & ~0xfffull;
		m.ino = 1000 + (uint64_t)(bias >> 32);
		m.prot = (ei->load[i].flags & PF_R ? HVP_PROT_READ : 0) |
			 (ei->load[i].flags & PF_W ? HVP_PROT_WRITE : 0) |
			 (ei->load[i].flags & PF_X ? HVP_PROT_EXEC : 0);
		m.build_id_len = ei->bid_len;
		memcpy(m.build_id, ei->bid, ei->bid_len);
		if (bad_bid)
			m.build_id[0] ^= 0xff;
		snprintf(m.path, sizeof(m.path), "%s", path);
		err = recfile_write_mapping(w, &m);
	}
	return err;
}

static int write_anon(struct recfile_writer *w, uint16_t *idx, uint16_t count)
{
	static const struct { uint64_t start, len; uint32_t prot; } anon[] = {
		{ ANON_START, 0x2000, HVP_PROT_READ | HVP_PROT_WRITE | HVP_PROT_EXEC },
		{ VVAR_START, 0x4000, HVP_PROT_READ },
		{ VDSO_START, 0x2000, HVP_PROT_READ | HVP_PROT_EXEC },
	};
	int err = 0;

	for (size_t i = 0; i < ARRAY_SIZE(anon) && !err; i++) {
		struct hvp_mapping m = { .tgid = 10, .index = (*idx)++, .count = count,
					 .start = anon[i].start, .end = anon[i].start + anon[i].len,
					 .prot = anon[i].prot };

		err = recfile_write_mapping(w, &m);
	}
	return err;
}

/* The samples: lib <- pie; anon; vdso; nowhere; a chain cut at the walk's depth bound. */
static int write_samples(struct recfile_writer *w)
{
	uint64_t chain[] = { LIB_BIAS + lib.fn + 4, PIE_BIAS + pie.fn + 4, 0 };
	uint64_t anon[] = { ANON_START + 0x10, 0 }, vdso[] = { VDSO_START + 0x20, 0 };
	uint64_t nowhere[] = { NOWHERE, 0 };
	uint64_t deep[] = { PIE_BIAS + pie.fn + 8, PIE_BIAS + pie.fn + 8, PIE_BIAS + pie.fn + 8,
			    0 };
	struct hvp_sample *s = malloc(sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	mk_sample(s, 10, 10, 3, HVP_WALK_END, 0, NULL, chain);
	err = recfile_write_sample(w, s);
	mk_sample(s, 10, 10, 3, HVP_WALK_END, 0, NULL, anon);
	err = err ? err : recfile_write_sample(w, s);
	mk_sample(s, 10, 10, 3, HVP_WALK_END, 0, NULL, vdso);
	err = err ? err : recfile_write_sample(w, s);
	mk_sample(s, 10, 10, 3, HVP_WALK_END, 0, NULL, nowhere);
	err = err ? err : recfile_write_sample(w, s);
	mk_sample(s, 10, 10, 3, HVP_WALK_DEPTH, 0, NULL, deep);
	err = err ? err : recfile_write_sample(w, s);
	free(s);
	return err;
}

static int write_rec(int fd, const struct recspec *rs)
{
	struct hvp_thread th = mk_thread(10, 10, "target", 0);
	struct hvp_process pr = mk_process(10, rs->pie_guest, PIE_BIAS + 0x1000,
					   PIE_BIAS + 0x2000);
	uint16_t idx = 0, count = (uint16_t)(pie.n_load + lib.n_load + 3);
	struct recfile_writer *w;
	int err, close_err;

	err = recfile_writer_open(fd, &w);
	if (err)
		return err;
	for (const char *const *m = rs->meta; m && m[0]; m += 2)
		err = err ? err : recfile_write_meta(w, m[0], m[1]);
	err = err ? err : recfile_write_thread(w, &th);
	err = err ? err : recfile_write_process(w, &pr);
	if (!rs->no_mappings) {
		err = err ? err : write_file_maps(w, rs->pie_guest, &pie, PIE_BIAS, 0, &idx, count);
		err = err ? err : write_file_maps(w, rs->lib_guest, &lib, LIB_BIAS,
						  rs->bad_lib_bid, &idx, count);
		err = err ? err : write_anon(w, &idx, count);
	}
	err = err ? err : write_samples(w);
	close_err = recfile_writer_close(w);
	return err ? err : close_err;
}

static int load_rec(const struct recspec *rs, const struct profile_options *po,
		    struct profile **out)
{
	char errbuf[256] = "";
	int fd = mem_file(), err;

	if (fd < 0)
		return -errno;
	err = write_rec(fd, rs);
	if (!err && lseek(fd, 0, SEEK_SET) != 0)
		err = -errno;
	if (!err)
		err = profile_load_fd(fd, "mapsym", po, out, errbuf, sizeof(errbuf));
	if (err)
		fprintf(stderr, "load: %d %s\n", err, errbuf);
	close(fd);
	return err;
}

/* Whether @p has a frame named @name in DSO @dso. */
static int has_frame(const struct profile *p, const char *name, const char *dso)
{
	for (size_t i = 0; i < p->n_frames; i++)
		if (!strcmp(strpool_get(&p->strs, p->frames[i].name), name) &&
		    !strcmp(strpool_get(&p->strs, p->frames[i].dso), dso))
			return 1;
	fprintf(stderr, "no frame '%s' in '%s'; frames:", name, dso);
	for (size_t i = 0; i < p->n_frames; i++)
		fprintf(stderr, " %s(%s)", strpool_get(&p->strs, p->frames[i].name),
			strpool_get(&p->strs, p->frames[i].dso));
	fprintf(stderr, "\n");
	return 0;
}

static char *folded(const struct profile *p)
{
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };

	if (profile_folded(p, &sink)) {
		free(ss.s);
		return NULL;
	}
	return ss.s;
}

/* @dir (under tmp) as a guest tree: usr/bin/target (@exe), usr/lib/<lib>, lib -> usr/lib. */
static int make_tree(const char *dir, const char *exe, char *out, size_t len)
{
	char p[PATH_MAX + 128];
	const char *base = strrchr(lib_path, '/');

	snprintf(out, len, "%s/%s", tmp, dir);
	snprintf(p, sizeof(p), "mkdir -p %s/usr/bin %s/usr/lib", out, out);
	if (system(p) != 0)
		return -EIO;
	snprintf(p, sizeof(p), "%s/usr/bin/target", out);
	if (copy_file(exe, p))
		return -EIO;
	snprintf(p, sizeof(p), "%s/usr/lib/%s", out, base ? base + 1 : lib_path);
	if (copy_file(lib_path, p))
		return -EIO;
	snprintf(p, sizeof(p), "%s/lib", out);
	return symlink("usr/lib", p) ? -errno : 0;
}

static char lib_guest[300], root_full[PATH_MAX], root_stripped[PATH_MAX];

static int test_rootfs_chain(void)
{
	const char *meta[] = { "rootfs", root_full, NULL };
	struct recspec rs = { .meta = meta, .pie_guest = "/usr/bin/target",
			      .lib_guest = lib_guest };
	struct profile *p;
	char want[128], *f;

	ASSERT_EQ_INT(load_rec(&rs, NULL, &p), 0);
	ASSERT_TRUE(has_frame(p, "hvp_maplib_work", strrchr(lib_path, '/') + 1));
	ASSERT_TRUE(has_frame(p, "hvp_target_leaf", "target"));
	ASSERT_TRUE(has_frame(p, "0x10", "[anon]"));
	ASSERT_TRUE(has_frame(p, "[vdso+0x20]", "[vdso]"));
	snprintf(want, sizeof(want), "0x%llx", NOWHERE);
	ASSERT_TRUE(has_frame(p, want, "[unknown]"));
	ASSERT_EQ_U64(p->stats.files_rootfs, 2);
	ASSERT_EQ_U64(p->stats.files_not_found, 0);
	ASSERT_EQ_U64(p->stats.truncated, 1);
	f = folded(p);
	ASSERT_TRUE(f);
	/* root first: the PIE's caller frame, then the library's leaf */
	ASSERT_TRUE(strstr(f, "target;hvp_target_leaf;hvp_maplib_work 1\n") != NULL);
	ASSERT_TRUE(strstr(f, "target;[truncated at 3 frames];hvp_target_leaf;hvp_target_leaf;"
			      "hvp_target_leaf 1\n") != NULL);
	free(f);
	profile_free(p);
	return TEST_OK;
}

static int test_max_stack(void)
{
	const char *meta[] = { "rootfs", root_full, NULL };
	struct recspec rs = { .meta = meta, .pie_guest = "/usr/bin/target",
			      .lib_guest = lib_guest };
	struct profile_options po = { .size = sizeof(po), .max_stack = 1 };
	struct profile *p;
	char *f;

	ASSERT_EQ_INT(load_rec(&rs, &po, &p), 0);
	f = folded(p);
	ASSERT_TRUE(f);
	ASSERT_TRUE(strstr(f, "target;[truncated at 1 frames];hvp_maplib_work 1\n") != NULL);
	ASSERT_TRUE(strstr(f, "target;[truncated at 1 frames];hvp_target_leaf 1\n") != NULL);
	ASSERT_TRUE(strstr(f, "target;0x10 1\n") != NULL); /* one frame: not cut */
	ASSERT_EQ_U64(p->stats.truncated, 2);
	free(f);
	profile_free(p);
	return TEST_OK;
}

/* A stripped PIE: its DSO name and file offsets, never a name; then its debug file. */
static int test_stripped_and_debug(void)
{
	const char *meta[] = { "rootfs", root_stripped, NULL };
	struct recspec rs = { .meta = meta, .pie_guest = "/usr/bin/target",
			      .lib_guest = lib_guest };
	struct profile_options po = { .size = sizeof(po) };
	char want[64], symfs[PATH_MAX + 64], cmd[2 * PATH_MAX + 256], hex[41];
	struct profile *p;

	ASSERT_EQ_INT(load_rec(&rs, NULL, &p), 0);
	snprintf(want, sizeof(want), "[target+0x%" PRIx64 "]", pie.fn_off + 4);
	ASSERT_TRUE(has_frame(p, want, "target"));
	ASSERT_TRUE(has_frame(p, "hvp_maplib_work", strrchr(lib_path, '/') + 1));
	profile_free(p);

	/* the unstripped file as symfs/usr/lib/debug/.build-id/xx/rest.debug */
	for (int i = 0; i < pie.bid_len; i++)
		sprintf(hex + 2 * i, "%02x", pie.bid[i]);
	snprintf(symfs, sizeof(symfs), "%s/symfs", tmp);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/usr/lib/debug/.build-id/%.2s", symfs, hex);
	ASSERT_EQ_INT(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/usr/lib/debug/.build-id/%.2s/%s.debug", symfs, hex,
		 hex + 2);
	ASSERT_EQ_INT(copy_file(pie_path, cmd), 0);
	po.symfs = symfs;
	ASSERT_EQ_INT(load_rec(&rs, &po, &p), 0);
	ASSERT_TRUE(has_frame(p, "hvp_target_leaf", "target"));
	ASSERT_EQ_U64(p->stats.files_debug, 1);
	profile_free(p);
	return TEST_OK;
}

/* A file whose build-id differs is refused (and counted); debuginfod is not asked unset. */
static int test_build_id_mismatch(void)
{
	const char *meta[] = { "rootfs", root_full, NULL };
	struct recspec rs = { .meta = meta, .pie_guest = "/usr/bin/target",
			      .lib_guest = lib_guest, .bad_lib_bid = 1 };
	const char *base = strrchr(lib_path, '/') + 1;
	char want[300];
	struct profile *p;

	unsetenv("DEBUGINFOD_URLS");
	ASSERT_EQ_INT(load_rec(&rs, NULL, &p), 0);
	snprintf(want, sizeof(want), "[%s+0x%" PRIx64 "]", base, lib.fn_off + 4);
	ASSERT_TRUE(has_frame(p, want, base));
	ASSERT_TRUE(has_frame(p, "hvp_target_leaf", "target"));
	ASSERT_EQ_U64(p->stats.files_build_id_mismatch, 1);
	ASSERT_EQ_U64(p->stats.files_not_found, 1);
	ASSERT_EQ_U64(p->stats.debuginfod_queries, 0);
	profile_free(p);
	return TEST_OK;
}

/* With DEBUGINFOD_URLS set (a port nobody listens on): asked, fails, loading goes on. */
static int test_debuginfod_failure(void)
{
	const char *meta[] = { "rootfs", root_full, NULL };
	struct recspec rs = { .meta = meta, .pie_guest = "/usr/bin/target",
			      .lib_guest = lib_guest, .bad_lib_bid = 1 };
	char cache[PATH_MAX + 16];
	struct profile *p;
	int err;

	snprintf(cache, sizeof(cache), "%s/dcache", tmp);
	setenv("DEBUGINFOD_URLS", "http://127.0.0.1:1", 1);
	setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
	setenv("DEBUGINFOD_TIMEOUT", "2", 1);
	err = load_rec(&rs, NULL, &p);
	unsetenv("DEBUGINFOD_URLS");
	ASSERT_EQ_INT(err, 0);
	ASSERT_TRUE(p->stats.debuginfod_queries >= 1);
	ASSERT_EQ_U64(p->stats.files_debuginfod, 0);
	ASSERT_EQ_U64(p->stats.files_not_found, 1);
	profile_free(p);
	return TEST_OK;
}

/* An old recording: no MAPPING records, the executable by its PROCESS record, as before. */
static int test_process_only(void)
{
	const char *meta[] = { "rootfs", root_full, NULL };
	struct recspec rs = { .meta = meta, .pie_guest = "/usr/bin/target",
			      .lib_guest = lib_guest, .no_mappings = 1 };
	struct profile *p;
	char want[64];

	ASSERT_EQ_INT(load_rec(&rs, NULL, &p), 0);
	ASSERT_TRUE(has_frame(p, "hvp_target_leaf", "target"));
	snprintf(want, sizeof(want), "0x%llx", LIB_BIAS + lib.fn + 4);
	ASSERT_TRUE(has_frame(p, want, "[unknown]"));
	ASSERT_EQ_U64(p->stats.mappings, 0);
	ASSERT_EQ_U64(p->stats.files_rootfs, 0);
	profile_free(p);
	return TEST_OK;
}

static int run(char *const argv[])
{
	pid_t pid;
	int status;

	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
		return -ENOENT;
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		return -EIO;
	return 0;
}

/* The library inside an ext4 image (mke2fs -d, no mount), reached through /lib -> usr/lib. */
static int test_ext4_image(void)
{
	char dir[PATH_MAX], img[PATH_MAX + 16], disk[PATH_MAX + 32], path[PATH_MAX + 32];
	const char *meta[] = { "disk", disk, NULL };
	struct recspec rs = { .meta = meta, .pie_guest = "/usr/bin/absent",
			      .lib_guest = lib_guest };
	const char *base = strrchr(lib_path, '/') + 1;
	struct profile *p;

	ASSERT_EQ_INT(make_tree("ext4tree", pie_path, dir, sizeof(dir)), 0);
	snprintf(path, sizeof(path), "%s/usr/bin/target", dir);
	ASSERT_EQ_INT(unlink(path), 0); /* only the library is in the image */
	snprintf(img, sizeof(img), "%s/disk.img", tmp);
	if (run((char *const[]){ "mke2fs", "-q", "-F", "-t", "ext4", "-d", dir, img, "8M",
				 NULL })) {
		fprintf(stderr, "mke2fs -d failed or missing: ext4 image case skipped\n");
		return TEST_SKIP;
	}
	snprintf(disk, sizeof(disk), "vda snapshot %s", img);
	ASSERT_EQ_INT(load_rec(&rs, NULL, &p), 0);
	ASSERT_TRUE(has_frame(p, "hvp_maplib_work", base));
	ASSERT_EQ_U64(p->stats.files_disk, 1);
	ASSERT_EQ_U64(p->stats.files_not_found, 1); /* /usr/bin/absent */
	profile_free(p);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "rootfs: PIE and shared object, anon, vdso, depth cut", test_rootfs_chain },
	{ "--max-stack", test_max_stack },
	{ "stripped file, then its debug file by build-id", test_stripped_and_debug },
	{ "build-id mismatch refused", test_build_id_mismatch },
	{ "debuginfod failure is a warning", test_debuginfod_failure },
	{ "old recording: PROCESS only", test_process_only },
	{ "ext4 image read with libext2fs", test_ext4_image },
};

int main(int argc, char **argv)
{
	char cmd[PATH_MAX + 16];
	int ret;

	if (argc < 4) {
		fprintf(stderr, "usage: %s PIE LIB STRIPPED_PIE\n", argv[0]);
		return TEST_SKIP;
	}
	pie_path = argv[1];
	lib_path = argv[2];
	stripped_path = argv[3];
	snprintf(tmp, sizeof(tmp), "/tmp/hvprof-mapsym-XXXXXX");
	if (!mkdtemp(tmp) || elf_info(pie_path, "hvp_target_leaf", &pie) ||
	    elf_info(lib_path, "hvp_maplib_work", &lib))
		return TEST_FAIL;
	snprintf(lib_guest, sizeof(lib_guest), "/lib/%s", strrchr(lib_path, '/') + 1);
	if (make_tree("full", pie_path, root_full, sizeof(root_full)) ||
	    make_tree("stripped", stripped_path, root_stripped, sizeof(root_stripped)))
		return TEST_FAIL;
	ret = test_run_all(tests, ARRAY_SIZE(tests));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	return ret;
}
