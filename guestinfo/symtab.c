// SPDX-License-Identifier: MIT
// ELF symbol tables: load function symbols once with libelf, sort, and look up by address or name.
#define pr_fmt(fmt) "symtab: " fmt

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#include "kimage_internal.h"

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID 3
#endif

#define SYMTAB_BUILD_ID_MAX 64 /* bytes; SHA-1 ids are 20, nobody uses more than 64 */

/* One symbol: [addr, end) is the range it covers for lookups (end == addr: none). */
struct symtab_sym {
	uint64_t addr;
	uint64_t size;
	uint64_t end;
	uint32_t name_off; /* into symtab.names */
	uint8_t is_code;   /* FUNC, or NOTYPE in an executable section: usable by lookup */
	uint8_t rank;      /* preference among aliases at one address: lower wins */
};

struct symtab {
	struct symtab_sym *syms; /* every loaded symbol, sorted by (addr, rank) */
	size_t n_syms;
	uint32_t *by_addr; /* indices of code symbols, one per distinct address, sorted */
	size_t n_addr;
	uint32_t *by_name; /* indices of all symbols, sorted by (name, rank) */
	char *names;       /* NUL-terminated names, back to back */
	size_t names_len;
	uint64_t exec_end; /* end of the highest executable section */
	unsigned int e_type;
	uint64_t text_vaddr;
	char build_id[SYMTAB_BUILD_ID_MAX * 2 + 1];
};

/* Executable, allocated section ranges, to bound size-0 symbols. */
struct symtab_exec_sec {
	size_t shndx;
	uint64_t start;
	uint64_t end;
};

static const char *symtab_name(const struct symtab *st, const struct symtab_sym *s)
{
	return st->names + s->name_off;
}

static int symtab_cmp_addr(const void *a, const void *b)
{
	const struct symtab_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->name_off < y->name_off ? -1 : x->name_off > y->name_off;
}

/* qsort_r-free name sort: the comparator needs the table, so sort (name pointer, index) pairs. */
struct symtab_name_key {
	const char *name;
	uint32_t idx;
	uint8_t rank;
};

static int symtab_cmp_name(const void *a, const void *b)
{
	const struct symtab_name_key *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Preference among aliases (same address): functions before labels, global before weak before
 * local, so lookups name entry_SYSCALL_64 rather than a local alias.
 */
static uint8_t symtab_rank(unsigned int type, unsigned int bind)
{
	uint8_t r = type == STT_FUNC ? 0 : type == STT_OBJECT ? 4 : 2;

	if (bind == STB_WEAK)
		r += 1;
	else if (bind == STB_LOCAL)
		r += 1 + (type == STT_FUNC ? 0 : 1);
	return r;
}

/*
 * Among aliases of one kind and binding, the name with fewer leading underscores (at most 3
 * counted) wins, as perf's choose_best_symbol() picks: irq_entries_start rather than the
 * section marker __irqentry_text_start at the same address. @rank: symtab_rank or ksym_rank.
 */
static uint8_t rank_with_name(uint8_t rank, const char *name)
{
	uint8_t n = 0;

	while (n < 3 && name[n] == '_')
		n++;
	return (uint8_t)(rank * 4 + n);
}

static int symtab_add_name(struct symtab *st, size_t *cap, const char *name, uint32_t *off)
{
	size_t len = strlen(name) + 1;

	if (st->names_len + len > UINT32_MAX)
		return -ERANGE;
	if (st->names_len + len > *cap) {
		size_t ncap = *cap ? *cap * 2 : 65536;
		char *p;

		while (ncap < st->names_len + len)
			ncap *= 2;
		p = realloc(st->names, ncap);
		if (!p)
			return -ENOMEM;
		st->names = p;
		*cap = ncap;
	}
	memcpy(st->names + st->names_len, name, len);
	*off = (uint32_t)st->names_len;
	st->names_len += len;
	return 0;
}

static const struct symtab_exec_sec *symtab_exec_of(const struct symtab_exec_sec *secs, size_t n,
						    size_t shndx)
{
	for (size_t i = 0; i < n; i++)
		if (secs[i].shndx == shndx)
			return &secs[i];
	return NULL;
}

/* Read the symbols of section @scn (SHT_SYMTAB or SHT_DYNSYM) into @st. */
static int symtab_load_syms(struct symtab *st, Elf *elf, Elf_Scn *scn, const GElf_Shdr *shdr,
			    const struct symtab_exec_sec *secs, size_t n_secs)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t cap_names = 0, n, i;
	int err;

	if (!data || !shdr->sh_entsize)
		return -EBADMSG;
	n = shdr->sh_size / shdr->sh_entsize;
	if (n > UINT32_MAX)
		return -EBADMSG;
	st->syms = calloc(n ? n : 1, sizeof(*st->syms));
	if (!st->syms)
		return -ENOMEM;

	for (i = 1; i < n; i++) {
		struct symtab_sym *s = &st->syms[st->n_syms];
		const struct symtab_exec_sec *sec;
		unsigned int type, bind;
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(data, (int)i, &sym))
			return -EBADMSG;
		type = GELF_ST_TYPE(sym.st_info);
		bind = GELF_ST_BIND(sym.st_info);
		if (sym.st_shndx == SHN_UNDEF || sym.st_name == 0)
			continue;
		if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE &&
		    type != STT_OBJECT)
			continue;
		if (bind != STB_GLOBAL && bind != STB_LOCAL && bind != STB_WEAK)
			continue;
		name = elf_strptr(elf, shdr->sh_link, sym.st_name);
		/* Assembler-local labels (.L*) are not symbols anyone wants to see. */
		if (!name || !name[0] || !strncmp(name, ".L", 2))
			continue;

		sec = sym.st_shndx < SHN_LORESERVE ? symtab_exec_of(secs, n_secs, sym.st_shndx) : NULL;
		memset(s, 0, sizeof(*s));
		s->addr = sym.st_value;
		s->size = sym.st_size;
		/*
		 * Kernel entry code (entry_SYSCALL_64, asm_exc_page_fault, ...) is FUNC or NOTYPE
		 * depending on the SYM_* macro, so NOTYPE labels in executable sections count as
		 * code. Data objects are kept for symtab_find (per-CPU variables) only.
		 */
		s->is_code = type == STT_FUNC || type == STT_GNU_IFUNC || (type == STT_NOTYPE && sec);
		s->rank = rank_with_name(symtab_rank(type, bind), name);
		err = symtab_add_name(st, &cap_names, name, &s->name_off);
		if (err)
			return err;
		st->n_syms++;
	}
	return 0;
}

/* Compute each code symbol's covered range and build the address and name indices. */
static int symtab_index(struct symtab *st, const struct symtab_exec_sec *secs, size_t n_secs)
{
	struct symtab_name_key *keys;
	size_t i;

	qsort(st->syms, st->n_syms, sizeof(*st->syms), symtab_cmp_addr);

	st->by_addr = calloc(st->n_syms ? st->n_syms : 1, sizeof(*st->by_addr));
	st->by_name = calloc(st->n_syms ? st->n_syms : 1, sizeof(*st->by_name));
	keys = calloc(st->n_syms ? st->n_syms : 1, sizeof(*keys));
	if (!st->by_addr || !st->by_name || !keys) {
		free(keys);
		return -ENOMEM;
	}

	/* One code symbol per address: the best-ranked alias (sorted first), largest size. */
	for (i = 0; i < st->n_syms; i++) {
		struct symtab_sym *s = &st->syms[i];

		if (!s->is_code)
			continue;
		if (st->n_addr) {
			struct symtab_sym *prev = &st->syms[st->by_addr[st->n_addr - 1]];

			if (prev->addr == s->addr) {
				if (s->size > prev->size)
					prev->size = s->size;
				continue;
			}
		}
		st->by_addr[st->n_addr++] = (uint32_t)i;
	}

	for (i = 0; i < st->n_addr; i++) {
		struct symtab_sym *s = &st->syms[st->by_addr[i]];
		uint64_t limit = s->addr, end;

		/*
		 * The executable section holding the symbol bounds a size-0 symbol; a label at
		 * the very end of a section (_etext) or outside any covers nothing.
		 */
		for (size_t k = 0; k < n_secs; k++) {
			if (s->addr >= secs[k].start && s->addr < secs[k].end) {
				limit = secs[k].end;
				break;
			}
		}
		if (s->size) {
			if (__builtin_add_overflow(s->addr, s->size, &end))
				end = UINT64_MAX;
		} else {
			end = i + 1 < st->n_addr ? st->syms[st->by_addr[i + 1]].addr : limit;
			if (end > limit)
				end = limit;
		}
		/* No symbol covers addresses past the last executable section. */
		if (end > st->exec_end)
			end = st->exec_end;
		s->end = end > s->addr ? end : s->addr;
	}

	for (i = 0; i < st->n_syms; i++) {
		keys[i].name = symtab_name(st, &st->syms[i]);
		keys[i].idx = (uint32_t)i;
		keys[i].rank = st->syms[i].rank;
	}
	qsort(keys, st->n_syms, sizeof(*keys), symtab_cmp_name);
	for (i = 0; i < st->n_syms; i++)
		st->by_name[i] = keys[i].idx;
	free(keys);
	return 0;
}

/* Hex build-id from the first NT_GNU_BUILD_ID note of any SHT_NOTE section. */
static void symtab_read_build_id(struct symtab *st, Elf *elf)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;
		Elf_Data *data;
		size_t off = 0, name_off, desc_off;
		GElf_Nhdr nhdr;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data)
			continue;
		while ((off = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
			const uint8_t *desc;

			if (nhdr.n_type != NT_GNU_BUILD_ID || nhdr.n_namesz != 4 ||
			    memcmp((const char *)data->d_buf + name_off, "GNU", 4) != 0)
				continue;
			if (nhdr.n_descsz == 0 || nhdr.n_descsz > SYMTAB_BUILD_ID_MAX)
				continue;
			/* SAFETY: gelf_getnote checked desc_off + n_descsz against d_size. */
			desc = (const uint8_t *)data->d_buf + desc_off;
			for (size_t i = 0; i < nhdr.n_descsz; i++) {
				static const char hex[] = "0123456789abcdef";

				st->build_id[2 * i] = hex[desc[i] >> 4];
				st->build_id[2 * i + 1] = hex[desc[i] & 0xf];
			}
			st->build_id[2 * nhdr.n_descsz] = '\0';
			return;
		}
	}
}

static int symtab_read_phdrs(struct symtab *st, Elf *elf)
{
	size_t n_phdr;
	bool found = false;

	if (elf_getphdrnum(elf, &n_phdr) != 0)
		return -EBADMSG;
	for (size_t i = 0; i < n_phdr; i++) {
		GElf_Phdr phdr;

		if (!gelf_getphdr(elf, (int)i, &phdr))
			return -EBADMSG;
		if (phdr.p_type != PT_LOAD || !(phdr.p_flags & PF_X))
			continue;
		if (!found || phdr.p_vaddr < st->text_vaddr)
			st->text_vaddr = phdr.p_vaddr;
		found = true;
	}
	return 0;
}

static int symtab_read_elf(struct symtab *st, Elf *elf, const char *path)
{
	struct symtab_exec_sec *secs = NULL;
	size_t n_secs = 0, n_scn;
	Elf_Scn *scn = NULL, *sym_scn = NULL, *dyn_scn = NULL;
	GElf_Shdr sym_shdr, dyn_shdr;
	GElf_Ehdr ehdr;
	int err;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr)) {
		pr_debug(LOG_KSYM, "%s: not an ELF file", path);
		return -EBADMSG;
	}
	st->e_type = ehdr.e_type;
	if (elf_getshdrnum(elf, &n_scn) != 0)
		return -EBADMSG;
	secs = calloc(n_scn ? n_scn : 1, sizeof(*secs));
	if (!secs)
		return -ENOMEM;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;

		if (!gelf_getshdr(scn, &shdr)) {
			err = -EBADMSG;
			goto out_free;
		}
		if (shdr.sh_type == SHT_SYMTAB && !sym_scn) {
			sym_scn = scn;
			sym_shdr = shdr;
		} else if (shdr.sh_type == SHT_DYNSYM && !dyn_scn) {
			dyn_scn = scn;
			dyn_shdr = shdr;
		}
		if ((shdr.sh_flags & (SHF_EXECINSTR | SHF_ALLOC)) == (SHF_EXECINSTR | SHF_ALLOC) &&
		    shdr.sh_type == SHT_PROGBITS && n_secs < n_scn) {
			uint64_t end;

			if (__builtin_add_overflow(shdr.sh_addr, shdr.sh_size, &end)) {
				err = -EBADMSG;
				goto out_free;
			}
			secs[n_secs].shndx = elf_ndxscn(scn);
			secs[n_secs].start = shdr.sh_addr;
			secs[n_secs].end = end;
			if (end > st->exec_end)
				st->exec_end = end;
			n_secs++;
		}
	}
	if (!sym_scn && !dyn_scn) {
		pr_debug(LOG_KSYM, "%s: no .symtab nor .dynsym", path);
		err = -ENODATA;
		goto out_free;
	}

	err = sym_scn ? symtab_load_syms(st, elf, sym_scn, &sym_shdr, secs, n_secs)
		      : symtab_load_syms(st, elf, dyn_scn, &dyn_shdr, secs, n_secs);
	if (err)
		goto out_free;
	err = symtab_index(st, secs, n_secs);
	if (err)
		goto out_free;
	err = symtab_read_phdrs(st, elf);
	if (err)
		goto out_free;
	symtab_read_build_id(st, elf);
	err = 0;
out_free:
	free(secs);
	return err;
}

int symtab_open_elf(const char *path, struct symtab **out)
{
	struct symtab *st;
	Elf *elf;
	int fd, err;

	if (!path || !out)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		pr_err("libelf initialization failed: %s", elf_errmsg(-1));
		return -ENOTSUP;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		pr_debug(LOG_KSYM, "open %s: %s", path, hvp_strerror(err));
		goto err_free;
	}
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf) {
		pr_debug(LOG_KSYM, "failed to open %s as ELF file: %s", path, elf_errmsg(-1));
		err = -EBADMSG;
		goto err_close;
	}
	err = symtab_read_elf(st, elf, path);
	if (err)
		goto err_end;

	elf_end(elf);
	close(fd);
	pr_debug(LOG_KSYM, "%s: %zu symbols, %zu code addresses, build-id '%s'", path, st->n_syms,
		 st->n_addr, st->build_id);
	*out = st;
	return 0;

err_end:
	elf_end(elf);
err_close:
	close(fd);
err_free:
	symtab_free(st);
	return err;
}

int symtab_open_elf_mem(const void *buf, size_t len, const char *name, struct symtab **out)
{
	struct symtab *st;
	Elf *elf;
	int err;

	if (!buf || !name || !out)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	elf = elf_memory((char *)buf, len);
	if (!elf) {
		pr_debug(LOG_KSYM, "failed to open %s as ELF image: %s", name, elf_errmsg(-1));
		err = -EBADMSG;
		goto err_free;
	}
	err = symtab_read_elf(st, elf, name);
	elf_end(elf);
	if (err)
		goto err_free;
	*out = st;
	return 0;

err_free:
	symtab_free(st);
	return err;
}

int symtab_lookup(const struct symtab *st, uint64_t addr, const char **name, uint64_t *offset)
{
	size_t lo = 0, hi;
	const struct symtab_sym *s;

	if (!st || !name)
		return -EINVAL;
	/* Find the last code symbol with s->addr <= addr. */
	hi = st->n_addr;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (st->syms[st->by_addr[mid]].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -ENOENT;
	s = &st->syms[st->by_addr[lo - 1]];
	if (addr >= s->end)
		return -ENOENT;
	*name = symtab_name(st, s);
	if (offset)
		*offset = addr - s->addr;
	return 0;
}

int symtab_find(const struct symtab *st, const char *name, uint64_t *addr)
{
	size_t lo = 0, hi;

	if (!st || !name || !addr)
		return -EINVAL;
	/* Lower bound: the first entry whose name is >= @name; ties go to the best rank. */
	hi = st->n_syms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(symtab_name(st, &st->syms[st->by_name[mid]]), name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == st->n_syms || strcmp(symtab_name(st, &st->syms[st->by_name[lo]]), name) != 0)
		return -ENOENT;
	*addr = st->syms[st->by_name[lo]].addr;
	return 0;
}

size_t symtab_count(const struct symtab *st)
{
	return st ? st->n_addr : 0;
}

int symtab_code_addr(const struct symtab *st, size_t i, uint64_t *addr)
{
	if (!st || !addr)
		return -EINVAL;
	if (i >= st->n_addr)
		return -ERANGE;
	*addr = st->syms[st->by_addr[i]].addr;
	return 0;
}

void symtab_elf_info(const struct symtab *st, unsigned int *e_type, uint64_t *text_vaddr)
{
	if (e_type)
		*e_type = st ? st->e_type : 0;
	if (text_vaddr)
		*text_vaddr = st ? st->text_vaddr : 0;
}

const char *symtab_build_id(const struct symtab *st)
{
	return st ? st->build_id : "";
}

void symtab_free(struct symtab *st)
{
	if (!st)
		return;
	free(st->syms);
	free(st->by_addr);
	free(st->by_name);
	free(st->names);
	free(st);
}

/* ---------------------------------------------------------------- kernel symbol lists */

static const struct ksym_entry *ksym_by_name(const struct ksym_entry *e, size_t n,
					     const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (e[i].name && !strcmp(e[i].name, name))
			return &e[i];
	return NULL;
}

static uint8_t ksym_rank(char type)
{
	switch (type) {
	case 'T':
		return 0;
	case 'W':
		return 1;
	case 't':
		return 2;
	case 'w':
		return 3;
	default:
		return (type >= 'A' && type <= 'Z') ? 4 : 5;
	}
}

int symtab_from_entries(const struct ksym_entry *e, size_t n, struct symtab **out)
{
	struct symtab_exec_sec secs[2];
	size_t n_secs = 0, cap_names = 0;
	const struct ksym_entry *a, *b;
	struct symtab *st;
	int err;

	if ((!e && n) || !out || n > UINT32_MAX)
		return -EINVAL;
	/* Code ranges: the kernel text and the init text (include/asm-generic/sections.h). */
	a = ksym_by_name(e, n, "_stext");
	if (!a)
		a = ksym_by_name(e, n, "_text");
	b = ksym_by_name(e, n, "_etext");
	if (a && b && a->addr < b->addr)
		secs[n_secs++] = (struct symtab_exec_sec){ .shndx = 1, .start = a->addr, .end = b->addr };
	a = ksym_by_name(e, n, "_sinittext");
	b = ksym_by_name(e, n, "_einittext");
	if (a && b && a->addr < b->addr)
		secs[n_secs++] = (struct symtab_exec_sec){ .shndx = 2, .start = a->addr, .end = b->addr };

	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->syms = calloc(n ? n : 1, sizeof(*st->syms));
	if (!st->syms) {
		err = -ENOMEM;
		goto err_free;
	}
	if (!n_secs) {
		/* No text bounds: the span of the code symbols (the last one covers nothing). */
		uint64_t lo = UINT64_MAX, hi = 0;

		for (size_t i = 0; i < n; i++) {
			if (e[i].type != 't' && e[i].type != 'T')
				continue;
			lo = e[i].addr < lo ? e[i].addr : lo;
			hi = e[i].addr > hi ? e[i].addr : hi;
		}
		if (lo < hi)
			secs[n_secs++] = (struct symtab_exec_sec){ .shndx = 1, .start = lo, .end = hi };
	}
	for (size_t i = 0; i < n; i++) {
		struct symtab_sym *s = &st->syms[st->n_syms];
		bool in_text = false;

		if (!e[i].name || !e[i].name[0])
			continue;
		for (size_t k = 0; k < n_secs; k++)
			in_text |= e[i].addr >= secs[k].start && e[i].addr < secs[k].end;
		memset(s, 0, sizeof(*s));
		s->addr = e[i].addr;
		s->is_code = e[i].type == 't' || e[i].type == 'T' ||
			     ((e[i].type == 'w' || e[i].type == 'W') && in_text);
		s->rank = rank_with_name(ksym_rank(e[i].type), e[i].name);
		err = symtab_add_name(st, &cap_names, e[i].name, &s->name_off);
		if (err)
			goto err_free;
		st->n_syms++;
	}
	for (size_t k = 0; k < n_secs; k++)
		if (secs[k].end > st->exec_end)
			st->exec_end = secs[k].end;
	err = symtab_index(st, secs, n_secs);
	if (err)
		goto err_free;
	if (!st->n_addr) {
		err = -ENODATA;
		goto err_free;
	}
	st->e_type = ET_EXEC;
	*out = st;
	return 0;

err_free:
	symtab_free(st);
	return err;
}
