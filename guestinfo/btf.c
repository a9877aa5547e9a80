// SPDX-License-Identifier: MIT
// Guest kernel structure layouts (struct gi_layout) from the kernel's BTF, parsed with libbpf.
#define pr_fmt(fmt) "btf: " fmt

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/guestinfo.h>
#include <hvprof/log.h>

#define BTF_NEST_MAX 8 /* anonymous struct/union nesting followed; 6.1 uses 1-2 */

static pthread_once_t btf_print_once = PTHREAD_ONCE_INIT;

/* libbpf prints through a callback: send its messages to our sink as BTF debug output. */
__printf(2, 0) static int btf_libbpf_print(enum libbpf_print_level level, const char *fmt,
					  va_list ap)
{
	char msg[512];
	size_t len;

	if (!hvp_log_enabled(HVP_LOG_DEBUG, LOG_BTF))
		return 0;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	len = strlen(msg);
	if (len && msg[len - 1] == '\n')
		msg[len - 1] = '\0';
	pr_debug(LOG_BTF, "libbpf (level %d): %s", (int)level, msg);
	return 0;
}

static void btf_install_print(void)
{
	libbpf_set_print(btf_libbpf_print);
}

/* Follow typedefs and qualifiers to the underlying type id (bounded: BTF may be hostile). */
static __u32 btf_skip_mods(const struct btf *btf, __u32 id)
{
	for (int i = 0; i < 32; i++) {
		const struct btf_type *t = btf__type_by_id(btf, id);

		if (!t)
			return 0;
		if (!btf_is_typedef(t) && !btf_is_mod(t))
			return id;
		id = t->type;
	}
	return 0;
}

/*
 * btf_member_find - byte offset and type of member @name of the struct/union @type_id,
 * looking into anonymous struct/union members (task_struct's randomized_struct_fields in 6.1
 * is wrapped in one) and adding their offsets. Bitfields are not byte addressable: not found.
 */
static int btf_member_find(const struct btf *btf, __u32 type_id, const char *name, int depth,
			   uint32_t *off, __u32 *member_type)
{
	const struct btf_type *t = btf__type_by_id(btf, type_id);
	const struct btf_member *m;
	__u16 vlen;

	if (!t || !btf_is_composite(t) || depth > BTF_NEST_MAX)
		return -ENOENT;
	m = btf_members(t);
	vlen = btf_vlen(t);
	for (__u16 i = 0; i < vlen; i++, m++) {
		const char *mname = btf__name_by_offset(btf, m->name_off);
		__u32 bit_off = btf_member_bit_offset(t, i);

		if (mname && mname[0]) {
			if (strcmp(mname, name) != 0)
				continue;
			if (bit_off % 8 || btf_member_bitfield_size(t, i))
				return -ENOENT;
			*off = bit_off / 8;
			*member_type = m->type;
			return 0;
		}
		/* Anonymous member: search inside it if it is a struct or union. */
		{
			__u32 inner = btf_skip_mods(btf, m->type);
			uint32_t inner_off;

			if (inner && bit_off % 8 == 0 &&
			    !btf_member_find(btf, inner, name, depth + 1, &inner_off, member_type)) {
				if (__builtin_add_overflow(inner_off, bit_off / 8, off))
					return -ERANGE;
				return 0;
			}
		}
	}
	return -ENOENT;
}

static int btf_struct_id(const struct btf *btf, const char *name, __u32 *id)
{
	__s32 r = btf__find_by_name_kind(btf, name, BTF_KIND_STRUCT);

	if (r <= 0)
		return -ENOENT;
	*id = (__u32)r;
	return 0;
}

/* Offset of @member in struct @sname, or UINT32_MAX (missing); *@size: member size, optional. */
static uint32_t btf_offset(const struct btf *btf, const char *sname, const char *member,
			   uint32_t *size)
{
	__u32 id, mtype;
	uint32_t off;

	if (size)
		*size = UINT32_MAX;
	if (btf_struct_id(btf, sname, &id) || btf_member_find(btf, id, member, 0, &off, &mtype)) {
		pr_debug(LOG_BTF, "%s.%s not found", sname, member);
		return UINT32_MAX;
	}
	if (size) {
		__s64 sz = btf__resolve_size(btf, mtype);

		if (sz > 0 && sz < UINT32_MAX)
			*size = (uint32_t)sz;
	}
	return off;
}

/* Number of elements of the array member @member of struct @sname, or UINT32_MAX. */
static uint32_t btf_array_len(const struct btf *btf, const char *sname, const char *member)
{
	const struct btf_type *t;
	__u32 id, mtype;
	uint32_t off;

	if (btf_struct_id(btf, sname, &id) || btf_member_find(btf, id, member, 0, &off, &mtype))
		return UINT32_MAX;
	t = btf__type_by_id(btf, btf_skip_mods(btf, mtype));
	if (!t || !btf_is_array(t))
		return UINT32_MAX;
	return btf_array(t)->nelems;
}

/* @a + @b, or UINT32_MAX when either is missing. */
static uint32_t btf_add(uint32_t a, uint32_t b)
{
	return a == UINT32_MAX || b == UINT32_MAX ? UINT32_MAX : a + b;
}

/* The layouts of the VMA maple tree and of vm_area_struct (optional: mappings need them). */
static void btf_fill_vma_layout(struct btf *btf, struct gi_layout *l)
{
	__u32 id;
	__s64 sz;

	l->mm_mt_root = btf_add(btf_offset(btf, "mm_struct", "mm_mt", NULL),
				btf_offset(btf, "maple_tree", "ma_root", NULL));
	l->mm_map_count = btf_offset(btf, "mm_struct", "map_count", NULL);
	l->mr64_pivot = btf_offset(btf, "maple_range_64", "pivot", NULL);
	l->mr64_slot = btf_offset(btf, "maple_range_64", "slot", NULL);
	l->mr64_slots = btf_array_len(btf, "maple_range_64", "slot");
	l->mr64_meta = btf_add(btf_offset(btf, "maple_range_64", "meta", NULL),
			       btf_offset(btf, "maple_metadata", "end", NULL));
	l->ma64_pivot = btf_offset(btf, "maple_arange_64", "pivot", NULL);
	l->ma64_slot = btf_offset(btf, "maple_arange_64", "slot", NULL);
	l->ma64_slots = btf_array_len(btf, "maple_arange_64", "slot");
	l->ma64_meta = btf_add(btf_offset(btf, "maple_arange_64", "meta", NULL),
			       btf_offset(btf, "maple_metadata", "end", NULL));
	if (!btf_struct_id(btf, "maple_node", &id)) {
		sz = btf__resolve_size(btf, id);
		if (sz > 0 && sz < UINT32_MAX)
			l->maple_node_size = (uint32_t)sz;
	}
	l->vma_start = btf_offset(btf, "vm_area_struct", "vm_start", NULL);
	l->vma_end = btf_offset(btf, "vm_area_struct", "vm_end", NULL);
	l->vma_mm = btf_offset(btf, "vm_area_struct", "vm_mm", NULL);
	l->vma_flags = btf_offset(btf, "vm_area_struct", "vm_flags", NULL);
	l->vma_pgoff = btf_offset(btf, "vm_area_struct", "vm_pgoff", NULL);
	l->vma_file = btf_offset(btf, "vm_area_struct", "vm_file", NULL);
	l->file_f_inode = btf_offset(btf, "file", "f_inode", NULL);
	l->inode_i_ino = btf_offset(btf, "inode", "i_ino", NULL);
	l->inode_i_sb = btf_offset(btf, "inode", "i_sb", NULL);
	l->sb_s_dev = btf_offset(btf, "super_block", "s_dev", NULL);
}

/* Does @path start with the ELF magic? (To tell "ELF without .BTF" from "not BTF at all".) */
static bool btf_file_is_elf(const char *path)
{
	unsigned char magic[4];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, magic, sizeof(magic));
	close(fd);
	return n == 4 && !memcmp(magic, "\177ELF", 4);
}

/* Fill @out from a parsed BTF; @what names it in messages. */
static int btf_fill_layout(struct btf *btf, const char *path, struct gi_layout *out)
{
	struct gi_layout l;
	__u32 id;
	__s64 sz;
	int err;

	memset(&l, 0xff, sizeof(l)); /* every offset UINT32_MAX: missing */
	if (btf_struct_id(btf, "task_struct", &id) || btf_struct_id(btf, "mm_struct", &id)) {
		pr_warn("%s: no struct task_struct or mm_struct", path);
		err = -ENODATA;
		return err;
	}

	l.task_pid = btf_offset(btf, "task_struct", "pid", NULL);
	l.task_tgid = btf_offset(btf, "task_struct", "tgid", NULL);
	l.task_comm = btf_offset(btf, "task_struct", "comm", &l.task_comm_len);
	l.task_mm = btf_offset(btf, "task_struct", "mm", NULL);
	l.task_flags = btf_offset(btf, "task_struct", "flags", NULL);
	l.task_stack = btf_offset(btf, "task_struct", "stack", NULL);
	{
		uint32_t ti = btf_offset(btf, "task_struct", "thread_info", NULL),
			 fl = btf_offset(btf, "thread_info", "flags", NULL);

		l.task_ti_flags = ti == UINT32_MAX || fl == UINT32_MAX ? UINT32_MAX : ti + fl;
	}
	l.task_task_works = btf_offset(btf, "task_struct", "task_works", NULL);
	l.task_rseq = btf_offset(btf, "task_struct", "rseq", NULL);
	l.task_nvcsw = btf_offset(btf, "task_struct", "nvcsw", NULL);
	l.task_nivcsw = btf_offset(btf, "task_struct", "nivcsw", NULL);
	{
		uint32_t irq = btf_offset(btf, "paravirt_patch_template", "irq", NULL),
			 en = btf_offset(btf, "pv_irq_ops", "irq_enable", NULL),
			 dis = btf_offset(btf, "pv_irq_ops", "irq_disable", NULL);

		l.pv_irq_enable = irq == UINT32_MAX || en == UINT32_MAX ? UINT32_MAX : irq + en;
		l.pv_irq_disable = irq == UINT32_MAX || dis == UINT32_MAX ? UINT32_MAX : irq + dis;
	}
	l.mm_start_code = btf_offset(btf, "mm_struct", "start_code", NULL);
	l.mm_end_code = btf_offset(btf, "mm_struct", "end_code", NULL);
	l.mm_exe_file = btf_offset(btf, "mm_struct", "exe_file", NULL);
	l.mm_pgd = btf_offset(btf, "mm_struct", "pgd", NULL);
	l.mm_start_stack = btf_offset(btf, "mm_struct", "start_stack", NULL);
	l.file_f_path = btf_offset(btf, "file", "f_path", NULL);
	l.path_dentry = btf_offset(btf, "path", "dentry", NULL);
	l.dentry_d_parent = btf_offset(btf, "dentry", "d_parent", NULL);
	l.dentry_d_name = btf_offset(btf, "dentry", "d_name", NULL);
	l.qstr_name = btf_offset(btf, "qstr", "name", NULL);
	l.pt_regs_ip = btf_offset(btf, "pt_regs", "ip", NULL);
	l.pt_regs_sp = btf_offset(btf, "pt_regs", "sp", NULL);
	l.pt_regs_bp = btf_offset(btf, "pt_regs", "bp", NULL);
	l.pt_regs_cs = btf_offset(btf, "pt_regs", "cs", NULL);
	l.pt_regs_orig_ax = btf_offset(btf, "pt_regs", "orig_ax", NULL);
#define BTF_PT_REGS_GPR(name) l.pt_regs_##name = btf_offset(btf, "pt_regs", #name, NULL);
	GI_PT_REGS_GPRS(BTF_PT_REGS_GPR)
#undef BTF_PT_REGS_GPR
	l.pcpu_hot_current_task = btf_offset(btf, "pcpu_hot", "current_task", NULL);
	if (!btf_struct_id(btf, "pt_regs", &id)) {
		sz = btf__resolve_size(btf, id);
		if (sz > 0 && sz < UINT32_MAX)
			l.pt_regs_size = (uint32_t)sz;
	}
	btf_fill_vma_layout(btf, &l);

	if (l.task_pid == UINT32_MAX || l.task_tgid == UINT32_MAX || l.task_comm == UINT32_MAX ||
	    l.task_comm_len == UINT32_MAX || l.task_comm_len == 0 || l.task_mm == UINT32_MAX ||
	    l.task_stack == UINT32_MAX) {
		pr_warn("%s: task_struct lacks pid, tgid, comm, mm or stack", path);
		err = -ENODATA;
		return err;
	}
	pr_debug(LOG_BTF, "%s: task_struct pid@%u tgid@%u comm@%u/%u mm@%u", path, l.task_pid,
		 l.task_tgid, l.task_comm, l.task_comm_len, l.task_mm);
	*out = l;
	return 0;
}

int gi_layout_from_btf(const char *path, struct gi_layout *out)
{
	struct btf *btf;
	struct stat stbuf;
	int err;

	if (!path || !out)
		return -EINVAL;
	if (stat(path, &stbuf) != 0) {
		err = -errno;
		pr_debug(LOG_BTF, "stat %s: %s", path, hvp_strerror(err));
		return err;
	}
	if (!S_ISREG(stbuf.st_mode))
		return -EBADMSG;

	/* libbpf's default sink is stderr, which a library must not write to. */
	pthread_once(&btf_print_once, btf_install_print);
	btf = btf__parse(path, NULL);
	if (!btf) {
		err = -errno;
		pr_debug(LOG_BTF, "failed to parse BTF of %s: %s", path, hvp_strerror(err));
		/* An ELF file without .BTF has no BTF; anything else is not BTF. */
		if (btf_file_is_elf(path) && (err == -ENOENT || err == -ENODATA))
			return -ENODATA;
		return err == -ENOMEM ? -ENOMEM : -EBADMSG;
	}

	err = btf_fill_layout(btf, path, out);
	btf__free(btf);
	return err;
}

int gi_layout_from_btf_data(const void *data, size_t size, struct gi_layout *out)
{
	struct btf *btf;
	int err;

	if (!data || !size || size > UINT32_MAX || !out)
		return -EINVAL;
	pthread_once(&btf_print_once, btf_install_print);
	btf = btf__new(data, (__u32)size);
	if (!btf) {
		err = -errno;
		pr_debug(LOG_BTF, "failed to parse %zu bytes of BTF: %s", size, hvp_strerror(err));
		return err == -ENOMEM ? -ENOMEM : -EBADMSG;
	}
	err = btf_fill_layout(btf, "the image's .BTF", out);
	btf__free(btf);
	return err;
}
