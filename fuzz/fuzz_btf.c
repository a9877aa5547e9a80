// SPDX-License-Identifier: MIT
// Fuzz target: structure layouts from BTF (gi_layout_from_btf on a file, gi_layout_from_btf_data
// on the bytes). The input is a raw .BTF blob or an ELF file with a .BTF section.
// Invariants: on success the required offsets (pid, tgid, comm, mm, stack) are present and comm
// has a length; the errors are the documented ones.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>

#include "fuzz.h"

static void fz_check_layout(int err, const struct gi_layout *l)
{
	FUZZ_CHECK(err == 0 || err == -EBADMSG || err == -ENODATA || err == -ENOMEM ||
		   err == -ENOENT || err == -EINVAL);
	if (err)
		return;
	FUZZ_CHECK(l->task_pid != UINT32_MAX && l->task_tgid != UINT32_MAX);
	FUZZ_CHECK(l->task_comm != UINT32_MAX && l->task_mm != UINT32_MAX);
	FUZZ_CHECK(l->task_stack != UINT32_MAX);
	FUZZ_CHECK(l->task_comm_len != 0 && l->task_comm_len != UINT32_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gi_layout l;
	char path[64];
	int fd, err;

	/* The bytes themselves. */
	if (size) {
		err = gi_layout_from_btf_data(data, size, &l);
		fz_check_layout(err, &l);
	}

	/* The same bytes as a file (a memfd: a regular file, never on disk). */
	fd = fuzz_memfd("fuzz-btf", data, size, path, sizeof(path));
	if (fd < 0)
		return 0;
	err = gi_layout_from_btf(path, &l);
	FUZZ_LOG("btf file: %d\n", err);
	fz_check_layout(err, &l);
	close(fd);
	return 0;
}
