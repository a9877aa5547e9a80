// SPDX-License-Identifier: MIT
// hvprof's own code on a 2 MiB page, for the commands that run a guest. A sample runs ~5 000
// instructions over ~25 pages of hvprof's code after the guest ran since the last exit, so that
// none of those pages is in the host's TLB; on one huge page they are one TLB entry. The text is
// copied into anonymous memory marked MADV_HUGEPAGE and moved over the file's mapping with one
// mremap(2), so its addresses (and so every return address and function pointer) stay what they
// were. The executable is linked with 2 MiB segment alignment (cli/meson.build), which puts the
// text alone in its 2 MiB-aligned range. The same technique moves hot code of large servers
// onto huge pages (e.g. HHVM, MySQL); its cost is that a host profiler or debugger sees the
// text as anonymous memory, with no symbols: HVPROF_HUGE_TEXT=0 keeps the file's mapping.
#include <errno.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <hvprof/hugemem.h>

#include "cli.h"

struct text_seg {
	uintptr_t start, end; /* the executable's PT_LOAD with PF_X, as mapped */
	uintptr_t next;       /* the lowest PT_LOAD above it (0: none) */
	bool found;
};

/* The executable's text segment: dl_iterate_phdr lists the main program first. */
static int find_text(struct dl_phdr_info *info, size_t size, void *data)
{
	struct text_seg *t = data;

	(void)size;
	for (unsigned int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && !t->found) {
			t->start = info->dlpi_addr + ph->p_vaddr;
			t->end = t->start + ph->p_memsz;
			t->found = true;
		}
	}
	for (unsigned int i = 0; t->found && i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t at = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && at > t->start && (!t->next || at < t->next))
			t->next = at;
	}
	return 1; /* the main program only */
}

int cli_text_on_huge_page(void)
{
	const char *env = getenv("HVPROF_HUGE_TEXT");
	struct text_seg t = { 0 };
	size_t len;
	uint8_t *p;
	int err;

	if (env && !strcmp(env, "0"))
		return -ECANCELED;
	dl_iterate_phdr(find_text, &t);
	if (!t.found || t.end <= t.start)
		return -ENOENT;
	/* the range moved is the text from its page's start (the kernel maps a segment from
	 * there; lld without -z separate-code puts the text mid-page) rounded up to 2 MiB: it
	 * must start aligned (the link's alignment) and hold no other segment; else the file's
	 * mapping stays */
	t.start &= ~(uintptr_t)4095;
	len = (t.end - t.start + HVP_HUGE_BYTES - 1) & ~(HVP_HUGE_BYTES - 1);
	if ((t.start & (HVP_HUGE_BYTES - 1)) || (t.next && t.next < t.start + len))
		return -ENOTSUP;
	{
		/* and nothing else may lie between the text's end and the range's: mremap would
		 * unmap it (MAP_FIXED_NOREPLACE fails with EEXIST where anything is mapped) */
		uintptr_t gap = (t.end + 4095) & ~(uintptr_t)4095;

		if (gap < t.start + len) {
			void *probe = mmap((void *)gap, t.start + len - gap, PROT_NONE,
					   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

			if (probe == MAP_FAILED)
				return errno == EEXIST ? -ENOTSUP : -errno;
			munmap(probe, t.start + len - gap);
			if (probe != (void *)gap) /* a kernel before 4.17 took it as a hint */
				return -ENOTSUP;
		}
	}
	p = hvp_huge_alloc(len);
	if (!p)
		return -errno;
	/* SAFETY: [start, end) is the mapped text, len >= end - start bytes at p */
	memcpy(p, (const void *)t.start, t.end - t.start);
	if (mprotect(p, len, PROT_READ | PROT_EXEC) != 0) {
		err = -errno;
		hvp_huge_free(p, len);
		return err;
	}
	/* atomic for this thread: the code it returns to is the same bytes at the same address.
	 * (The kernel unmaps the target before it moves the source: a failure after that, which
	 * only its own lack of memory could cause, would leave no text, and the process dies.) */
	if (mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)t.start) == MAP_FAILED) {
		err = -errno;
		hvp_huge_free(p, len);
		return err;
	}
	return 0;
}
