// SPDX-License-Identifier: MIT
// Unit tests of host memory on huge pages: hvp_huge_alloc (common/hugemem.c: aligned, zeroed,
// marked MADV_HUGEPAGE, sizes refused) and the move of an executable's code onto a huge page
// (cli/hugetext.c, this test linked as hvprof is: 2 MiB segment alignment). What the kernel
// says of the mappings is read from /proc/self/smaps.
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/hugemem.h>

#include "cli.h"
#include "smaps.h"
#include "test.h"

/* The test's own text segment: its alignment in the file (the link's) and where it is mapped. */
static int own_text(struct dl_phdr_info *info, size_t size, void *data)
{
	uintptr_t *out = data;

	(void)size;
	for (unsigned int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X)) {
			out[0] = info->dlpi_phdr[i].p_align;
			out[1] = (info->dlpi_addr + info->dlpi_phdr[i].p_vaddr) & ~(uintptr_t)4095;
			break;
		}
	return 1;
}

static bool thp_never(void)
{
	char buf[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	return !f || strstr(buf, "[never]") != NULL;
}

static int test_alloc(void)
{
	char head[512];
	char flags[512];
	long kb;
	uint8_t *p = hvp_huge_alloc(5u << 20), *q;

	ASSERT_TRUE(p != NULL);
	ASSERT_EQ_U64((uintptr_t)p & (HVP_HUGE_BYTES - 1), 0);
	for (size_t i = 0; i < (5u << 20); i += 4096)
		ASSERT_EQ_INT(p[i], 0);
	p[(5u << 20) - 1] = 7; /* the last byte asked for is there */
	ASSERT_EQ_INT(test_smaps_of(p, head, sizeof(head), flags, sizeof(flags), &kb), 0);
	ASSERT_TRUE(test_vm_flag(flags, "hg") || !test_thp_built()); /* marked MADV_HUGEPAGE */
	/* its own mapping, rounded to 6 MiB: nothing of the extra huge page mmap took is left */
	{
		unsigned long lo, hi;

		ASSERT_EQ_INT(sscanf(head, "%lx-%lx", &lo, &hi), 2);
		ASSERT_EQ_U64(lo, (uintptr_t)p);
		ASSERT_EQ_U64(hi - lo, 6u << 20);
	}
	hvp_huge_free(p, 5u << 20);
	ASSERT_EQ_INT(test_smaps_of(p, head, sizeof(head), flags, sizeof(flags), &kb), -ENOENT);
	q = hvp_huge_alloc(1);
	ASSERT_TRUE(q != NULL && ((uintptr_t)q & (HVP_HUGE_BYTES - 1)) == 0);
	hvp_huge_free(q, 1);
	hvp_huge_free(NULL, 1);
	errno = 0;
	ASSERT_TRUE(hvp_huge_alloc(0) == NULL && errno == EINVAL);
	errno = 0;
	ASSERT_TRUE(hvp_huge_alloc(SIZE_MAX - 4096) == NULL && errno == EINVAL);
	return TEST_OK;
}

/* code that runs after the move: its result proves the moved bytes are the same */
static __attribute__((noinline)) unsigned int mix(unsigned int x)
{
	for (int i = 0; i < 10; i++)
		x = x * 2654435761u + 12345u;
	return x;
}

static int test_text(void)
{
	char before[512], after[512];
	char flags[512];
	long kb;
	unsigned int want = mix(42);
	const char *env = getenv("HVPROF_HUGE_TEXT"); /* test-asan.sh sets it: put back after */
	char saved[16] = "";
	uintptr_t seg[2] = { 0, 0 };
	int err;

	if (env)
		snprintf(saved, sizeof(saved), "%s", env);
	dl_iterate_phdr(own_text, seg);
	/* the link's alignment is what hvprof's build gives it: losing it is a failure */
	ASSERT_EQ_U64(seg[0], HVP_HUGE_BYTES);
	if (seg[1] & (HVP_HUGE_BYTES - 1)) {
		printf("skip: this kernel loaded the executable at 0x%lx, not at its 2 MiB alignment "
		       "(kernels before 5.10 ignore a PIE's p_align)\n", (unsigned long)seg[1]);
		return TEST_SKIP;
	}

	ASSERT_EQ_INT(test_smaps_of((const void *)mix, before, sizeof(before), flags, sizeof(flags),
				    &kb),
		      0);
	ASSERT_TRUE(strstr(before, "test_hugemem") != NULL); /* the file's mapping */
	setenv("HVPROF_HUGE_TEXT", "0", 1);
	err = cli_text_on_huge_page();
	if (env)
		setenv("HVPROF_HUGE_TEXT", saved, 1);
	else
		unsetenv("HVPROF_HUGE_TEXT");
	ASSERT_EQ_INT(err, -ECANCELED);
	ASSERT_EQ_INT(test_smaps_of((const void *)mix, after, sizeof(after), flags, sizeof(flags),
				    &kb),
		      0);
	ASSERT_EQ_STR(after, before); /* untouched */

	unsetenv("HVPROF_HUGE_TEXT");
	err = cli_text_on_huge_page();
	if (env)
		setenv("HVPROF_HUGE_TEXT", saved, 1);
	if (err == -EACCES || err == -EPERM) {
		printf("skip: executable anonymous memory refused here (%s): a W^X policy\n",
		       strerror(-err));
		return TEST_SKIP;
	}
	ASSERT_EQ_INT(err, 0);
	ASSERT_EQ_INT(test_smaps_of((const void *)mix, after, sizeof(after), flags, sizeof(flags),
				    &kb),
		      0);
	printf("text before: %safter: %s", before, after);
	ASSERT_TRUE(strstr(after, "test_hugemem") == NULL); /* anonymous now */
	ASSERT_TRUE(strstr(after, " r-xp ") != NULL);
	{
		unsigned long lo, hi;

		ASSERT_EQ_INT(sscanf(after, "%lx-%lx", &lo, &hi), 2);
		ASSERT_EQ_U64(lo & (HVP_HUGE_BYTES - 1), 0);
		ASSERT_TRUE(hi - lo >= HVP_HUGE_BYTES);
	}
	ASSERT_TRUE(test_vm_flag(flags, "hg") || !test_thp_built());
	/* the kernel may have no free huge page: then 4 KiB pages, the same code */
	if (!thp_never() && kb == 0)
		printf("note: no huge page was given (AnonHugePages 0 kB)\n");
	ASSERT_EQ_U64(mix(42), want);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "hvp_huge_alloc: aligned, zeroed, MADV_HUGEPAGE, sizes refused", test_alloc },
	{ "cli_text_on_huge_page: same code, anonymous 2 MiB-aligned mapping; opt-out", test_text },
};

TEST_MAIN(tests)
