// SPDX-License-Identifier: MIT
// The compiler's call-frame information of a kernel image as the prologue table's source
// (prologue.c): where a function's CFA is RSP + 8 (nothing pushed) or RSP + 16 (RBP pushed), RBP
// is still its caller's frame on a frame-pointer kernel, and the return address is at RSP or
// RSP + 8. Read with libdw: .debug_frame (a vmlinux with debug info), else .eh_frame.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <libelf.h>

#include <hvprof/guestinfo.h>

#include "prologue_internal.h"

#define DWARF_X86_64_RSP 7 /* the x86-64 psABI's DWARF register number of RSP */

struct pro_cfi {
	Elf *elf;
	Dwarf *dw;          /* NULL: .eh_frame only */
	Dwarf_CFI *cfi;     /* owned by @dw (dwarf_getcfi), or @cfi_elf */
	Dwarf_CFI *cfi_elf; /* from dwarf_getcfi_elf: ours to end */
};

/* Whether a .debug_* section of @elf is compressed (SHF_COMPRESSED, or GNU's .zdebug_*), or the
 * check failed. */
static bool debug_compressed(Elf *elf)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return true;
	while ((scn = elf_nextscn(elf, scn))) {
		const Elf64_Shdr *sh = elf64_getshdr(scn);
		const char *name = sh ? elf_strptr(elf, shstrndx, sh->sh_name) : NULL;

		if (!sh || !name)
			return true;
		if ((!strncmp(name, ".debug_", 7) && (sh->sh_flags & SHF_COMPRESSED)) ||
		    !strncmp(name, ".zdebug_", 8)) /* GNU style: libdw would also rewrite them */
			return true;
	}
	return false;
}

void pro_cfi_close(struct pro_cfi *c)
{
	if (!c)
		return;
	if (c->cfi_elf)
		dwarf_cfi_end(c->cfi_elf);
	if (c->dw)
		dwarf_end(c->dw);
	elf_end(c->elf);
	free(c);
}

int pro_cfi_open(const uint8_t *elf_bytes, size_t elf_len, struct pro_cfi **out)
{
	const Elf64_Ehdr *eh;
	struct pro_cfi *c;
	int err;

	if (!elf_bytes || !out)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	elf_version(EV_CURRENT);
	/* libelf reads the bytes only (ELF_C_READ semantics of elf_memory); the cast is its API */
	c->elf = elf_memory((char *)(uintptr_t)elf_bytes, elf_len);
	if (!c->elf || elf_kind(c->elf) != ELF_K_ELF) {
		err = -EBADMSG;
		goto err_close;
	}
	eh = elf64_getehdr(c->elf);
	if (!eh || eh->e_machine != EM_X86_64) {
		err = eh ? -ENOTSUP : -EBADMSG;
		goto err_close;
	}
	if (!debug_compressed(c->elf)) {
		c->dw = dwarf_begin_elf(c->elf, DWARF_C_READ, NULL);
		if (c->dw)
			c->cfi = dwarf_getcfi(c->dw); /* .debug_frame */
	}
	if (!c->cfi)
		c->cfi = c->cfi_elf = dwarf_getcfi_elf(c->elf); /* .eh_frame */
	if (!c->cfi) {
		err = -ENODATA;
		goto err_close;
	}
	*out = c;
	return 0;

err_close:
	pro_cfi_close(c);
	return err;
}

/* The CFA of @frame when it is RSP + 8 or RSP + 16: that offset; else 0. */
static unsigned int rsp_cfa(Dwarf_Frame *frame)
{
	Dwarf_Op *ops;
	size_t nops;

	if (dwarf_frame_cfa(frame, &ops, &nops) != 0 || nops != 1 || ops[0].atom != DW_OP_bregx ||
	    ops[0].number != DWARF_X86_64_RSP)
		return 0;
	return ops[0].number2 == 8 || ops[0].number2 == 16 ? (unsigned int)ops[0].number2 : 0;
}

int pro_cfi_rows(struct pro_cfi *c, struct gi_prologues *p, uint64_t start, uint64_t next)
{
	uint64_t pc = start;

	while (pc < next) {
		Dwarf_Frame *frame = NULL;
		Dwarf_Addr row_start, row_end;
		unsigned int cfa;
		int err = 0;

		if (dwarf_cfi_addrframe(c->cfi, pc, &frame) != 0)
			return pc == start ? -ENOENT : 0; /* none (asm), or past its FDE (padding) */
		if (dwarf_frame_info(frame, &row_start, &row_end, NULL) < 0 || row_end <= pc) {
			free(frame);
			return pc == start ? -ENOENT : 0;
		}
		cfa = rsp_cfa(frame);
		free(frame);
		if (row_end > next)
			row_end = next;
		if (cfa)
			err = pro_add(p, pc, row_end, cfa);
		if (err)
			return err;
		pc = row_end;
	}
	return 0;
}

int gi_prologues_from_cfi(const struct symtab *st, gi_kva_read_fn read, void *ctx,
			  const uint8_t *elf_bytes, size_t elf_len, uint64_t lo, uint64_t hi,
			  struct gi_prologues **out)
{
	struct pro_cfi *c;
	int err;

	if (!st || !read || !elf_bytes || !out || lo >= hi || hi - lo > GI_KERNEL_IMAGE_SIZE)
		return -EINVAL;
	err = pro_cfi_open(elf_bytes, elf_len, &c);
	if (err)
		return err;
	err = pro_build(st, read, ctx, c, lo, hi, out);
	pro_cfi_close(c);
	return err;
}

int gi_prologues_make(const struct symtab *st, gi_kva_read_fn read, void *ctx,
		      const uint8_t *elf_bytes, size_t elf_len, uint64_t lo, uint64_t hi,
		      struct gi_prologues **out)
{
	int err = gi_prologues_from_cfi(st, read, ctx, elf_bytes, elf_len, lo, hi, out);

	if (err == -ENODATA || err == -EBADMSG || err == -ENOTSUP) /* no usable CFI */
		err = gi_prologues_build(st, read, ctx, lo, hi, out);
	return err;
}
