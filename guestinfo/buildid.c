// SPDX-License-Identifier: MIT
// The GNU build-id of an ELF file mapped in a guest process, read from the first page of its
// mapping in guest memory (when resident) and parsed with libelf: the ELF header, the program
// headers and a PT_NOTE segment that lie in that page (as they do in the files linkers write:
// .note.gnu.build-id sits right after the headers). What the guest maps is hostile input: libelf
// parses a private copy of the page, and only what lies inside it.
#define pr_fmt(fmt) "gi: buildid: " fmt
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>

#include <hvprof/guestinfo.h>

#define PAGE_4K 4096u
#define NT_GNU_BUILD_ID_TYPE 3

/* The build-id in the notes of @data, if any. */
static int note_build_id(Elf_Data *data, uint8_t *id, size_t max, size_t *len)
{
	size_t off = 0, name_off, desc_off;
	GElf_Nhdr nhdr;

	while ((off = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
		if (nhdr.n_type != NT_GNU_BUILD_ID_TYPE || nhdr.n_namesz != 4 ||
		    memcmp((const char *)data->d_buf + name_off, "GNU", 4) != 0 ||
		    nhdr.n_descsz == 0 || nhdr.n_descsz > max)
			continue;
		/* SAFETY: gelf_getnote checked desc_off + n_descsz against d_size. */
		memcpy(id, (const uint8_t *)data->d_buf + desc_off, nhdr.n_descsz);
		*len = nhdr.n_descsz;
		return 0;
	}
	return -ENOENT;
}

int gi_mapping_build_id(const struct gmem *mem, const struct gi_paging *pg, uint64_t start,
			uint8_t *id, size_t max, size_t *len)
{
	uint8_t page[PAGE_4K];
	size_t nphdr;
	Elf *elf;
	int err;

	if (!mem || !pg || !id || !len || (start & (PAGE_4K - 1)))
		return -EINVAL;
	*len = 0;
	err = gi_read_gva(mem, pg, start, page, sizeof(page));
	if (err)
		return err; /* not resident (or not mapped through @pg) */
	if (memcmp(page, ELFMAG, SELFMAG) != 0 || page[EI_CLASS] != ELFCLASS64)
		return -ENOENT;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	elf = elf_memory((char *)page, sizeof(page));
	if (!elf)
		return -ENOENT;
	err = -ENOENT;
	if (elf_getphdrnum(elf, &nphdr) == 0) {
		for (size_t i = 0; i < nphdr && i < 64 && err; i++) {
			GElf_Phdr ph;
			Elf_Data *data;

			/* libelf refuses headers and chunks that leave the page */
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE ||
			    ph.p_offset >= sizeof(page) || ph.p_filesz > sizeof(page) - ph.p_offset)
				continue;
			data = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz,
						    ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
			if (data)
				err = note_build_id(data, id, max, len);
		}
	}
	elf_end(elf);
	return err;
}
