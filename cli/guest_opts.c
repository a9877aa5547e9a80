// SPDX-License-Identifier: MIT
// Guest options of `run` and `record`: the image manifest (docs/guest-interface.md), kernel,
// initrd (+ --add files), command line (+ --run), memory, vCPUs, duration.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/file.h>
#include <hvprof/log.h>

#include "cli.h"
#include "domain.h"

#define DEFAULT_MEM_MIB 256 /* struct page init and freeing cost ~10 s per 512 MiB of emulated boot on PVM */

void guest_opts_init(struct guest_opts *g)
{
	memset(g, 0, sizeof(*g));
	g->mem_mib = DEFAULT_MEM_MIB;
	g->cpus = 1;
	g->cmd_out_fd = -1;
}

static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* --duration S: seconds, > 0. */
static int parse_duration(struct guest_opts *g, const char *arg)
{
	char *end;

	errno = 0;
	g->duration_s = strtod(arg, &end);
	if (errno || end == arg || *end || !(g->duration_s > 0) || g->duration_s > 1e7) {
		cli_error("--duration '%s': want a number of seconds > 0", arg);
		return -EINVAL;
	}
	return 0;
}

/* --add HOST_PATH:/GUEST_PATH (split at the last ':' followed by '/'). */
static int parse_add(struct guest_opts *g, const char *arg)
{
	const char *colon = strrchr(arg, ':');
	struct vmm_initramfs_file *n;

	if (!colon || colon == arg || colon[1] != '/') {
		cli_error("--add '%s': want HOST_PATH:/GUEST_PATH", arg);
		return -EINVAL;
	}
	n = realloc(g->adds, (g->n_adds + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	g->adds = n;
	g->adds[g->n_adds].host_path = strndup(arg, (size_t)(colon - arg));
	g->adds[g->n_adds].guest_path = colon + 1;
	if (!g->adds[g->n_adds].host_path)
		return -ENOMEM;
	g->n_adds++;
	return 0;
}

int guest_opt_parse(struct guest_opts *g, int code, const char *arg)
{
	uint64_t v;

	switch (code) {
	case 1001:
		g->image_dir = arg;
		return 0;
	case 1002:
		g->kernel = arg;
		return 0;
	case 1003:
		g->initrd = arg;
		return 0;
	case 1004:
		g->append = arg;
		return 0;
	case 1005:
		if (parse_u64(arg, 64, 1 << 20, &v) || (v & 1)) {
			cli_error("--mem '%s': want an even number of MiB, 64 to 1048576 (1 TiB)",
				  arg);
			return -EINVAL;
		}
		g->mem_mib = v;
		g->mem_set = 1;
		return 0;
	case 1006:
		if (parse_u64(arg, 1, VMM_MAX_VCPUS, &v)) {
			cli_error("--cpus '%s': want 1 to %d", arg, VMM_MAX_VCPUS);
			return -EINVAL;
		}
		g->cpus = (unsigned int)v;
		g->cpus_set = 1;
		return 0;
	case 1007:
		return parse_duration(g, arg);
	case 1008:
		return parse_add(g, arg);
	case 1009:
		if (!arg[0]) {
			cli_error("--run '': the command must not be empty");
			return -EINVAL;
		}
		g->run_cmd = arg;
		return 0;
	case 1010:
		g->domain = arg;
		return 0;
	case 1011:
		g->connect = arg;
		return 0;
	case 1012:
		g->domain_xml = arg;
		return 0;
	case 1013:
		g->strict = 1;
		return 0;
	case 1014: {
		char *end;

		if (!strcmp(arg, "auto")) {
			g->kaslr = VMM_KASLR_AUTO;
			return 0;
		}
		if (!strcmp(arg, "off")) {
			g->kaslr = VMM_KASLR_OFF;
			return 0;
		}
		errno = 0;
		g->kaslr_slide = strtoull(arg, &end, 0);
		if (errno || end == arg || *end || arg[0] == '-' || g->kaslr_slide % (2u << 20) ||
		    g->kaslr_slide >= (1ull << 30)) {
			cli_error("--kaslr '%s': want auto, off, or a slide in bytes: a multiple of "
				  "2 MiB (0x200000) below 1 GiB",
				  arg);
			return -EINVAL;
		}
		g->kaslr = VMM_KASLR_SLIDE;
		return 0;
	}
	case 1015:
		g->vmlinux_opt = arg;
		return 0;
	case 1030:
		g->btf_opt = arg;
		return 0;
	case 1031:
		g->no_seccomp = 1;
		return 0;
	case 1050:
		return guest_disk_opt(g, arg);
	case 1051:
		return guest_root_set(g, arg);
	default:
		return -ENOENT;
	}
}

static char *path_join(const char *dir, const char *file)
{
	char *p;

	if (file[0] == '/')
		return strdup(file);
	if (asprintf(&p, "%s/%s", dir, file) < 0)
		return NULL;
	return p;
}

/* Read DIR/manifest: key=value lines, '#' comments. */
static int read_manifest(struct guest_opts *g, const char *dir)
{
	char path[PATH_MAX], line[4096];
	FILE *f;
	int format = 0;

	snprintf(path, sizeof(path), "%s/manifest", dir);
	f = fopen(path, "re");
	if (!f) {
		int err = -errno;

		cli_error("cannot read image manifest %s: %s", path, hvp_strerror(err));
		return err;
	}
	while (fgets(line, sizeof(line), f)) {
		char *eq, *val, **dst = NULL;

		line[strcspn(line, "\n")] = '\0';
		if (!line[0] || line[0] == '#')
			continue;
		eq = strchr(line, '=');
		if (!eq) {
			cli_error("image manifest %s: line '%s' is not key=value", path, line);
			fclose(f);
			return -EBADMSG;
		}
		*eq = '\0';
		val = eq + 1;
		if (!strcmp(line, "format"))
			format = atoi(val);
		else if (!strcmp(line, "kernel"))
			dst = &g->m_kernel;
		else if (!strcmp(line, "bzimage"))
			dst = &g->m_bzimage;
		else if (!strcmp(line, "bzimage_lz4"))
			dst = &g->m_bzimage_lz4;
		else if (!strcmp(line, "initrd"))
			dst = &g->m_initrd;
		else if (!strcmp(line, "btf"))
			dst = &g->m_btf;
		else if (!strcmp(line, "rootfs"))
			dst = &g->m_rootfs;
		else if (!strcmp(line, "kernel_version"))
			dst = &g->m_kernel_version;
		else if (!strcmp(line, "disk"))
			dst = &g->m_disk;
		else if (!strcmp(line, "add_initrd"))
			dst = &g->m_add_initrd;
		else if (!strcmp(line, "add_dir"))
			dst = &g->m_add_dir;
		else if (!strcmp(line, "cmdline")) {
			free(g->m_cmdline);
			g->m_cmdline = strdup(val);
			continue;
		}
		if (dst) {
			free(*dst);
			*dst = !strcmp(line, "kernel_version") || !strcmp(line, "add_dir")
				       ? strdup(val) /* not host paths */
				       : path_join(dir, val);
			if (!*dst) {
				fclose(f);
				return -ENOMEM;
			}
		}
	}
	fclose(f);
	if (format != 1 || !g->m_kernel) {
		cli_error("image manifest %s: %s", path,
			  format != 1 ? "unknown format (want format=1)" : "no kernel= line");
		return -EBADMSG;
	}
	return 0;
}

static int read_whole(const char *path, const char *what, void **buf, size_t *len)
{
	int err = hvp_read_file(path, 0, SIZE_MAX - 1, buf, len);

	if (err == -EINVAL)
		cli_error("%s %s is not a regular file", what, path);
	else if (err)
		cli_error("cannot open %s %s: %s", what, path, hvp_strerror(err));
	return err;
}

/*
 * The image's command line for @cpus vCPUs, allocated. The default image boots with `nolapic`
 * (8259 PIC + PIT tick), the fastest uniprocessor boot on PVM hosts; but `nolapic` also makes
 * Linux use only its first CPU. With more than one vCPU the word becomes `nolapic_timer`: the
 * local APICs stay on for IPIs and INIT/SIPI, and the tick stays on the PIT, through the IOAPIC
 * and broadcast to the other CPUs, because the LAPIC timer storms or hangs on PVM hosts
 * (docs/smp-on-pvm.md). Other words, and --append, are left as they are.
 */
static char *image_cmdline_for_cpus(const char *cmdline, unsigned int cpus)
{
	static const char word[] = "nolapic", smp_word[] = "nolapic_timer";
	size_t len = strlen(cmdline), n = 0, start = 0;
	char *out;

	out = malloc(2 * len + 1); /* each replaced word at most doubles: 13 < 2 * 7 bytes */
	if (!out)
		return NULL;
	while (start <= len) {
		size_t end = start + strcspn(cmdline + start, " ");
		bool match = cpus > 1 && end - start == sizeof(word) - 1 &&
			     !memcmp(cmdline + start, word, sizeof(word) - 1);

		if (match) {
			memcpy(out + n, smp_word, sizeof(smp_word) - 1);
			n += sizeof(smp_word) - 1;
		} else {
			memcpy(out + n, cmdline + start, end - start);
			n += end - start;
		}
		if (end < len)
			out[n++] = ' ';
		start = end + 1;
	}
	out[n] = '\0';
	return out;
}

/*
 * The command line word that gives /init the --run command: hvprof_run="CMD", or, when CMD holds
 * what a kernel command line cannot quote (a double quote, a newline), hvprof_run_esc="..." with
 * those, and backslashes, written as printf %b octal escapes (\0042, \0012, \0134), which /init
 * decodes (docs/guest-interface.md). Allocated; NULL when out of memory.
 */
static char *run_word(const char *cmd)
{
	size_t n = strlen(cmd);
	char *out, *p;

	if (!strpbrk(cmd, "\"\n")) {
		if (asprintf(&out, " hvprof_run=\"%s\"", cmd) < 0)
			return NULL;
		return out;
	}
	out = malloc(sizeof(" hvprof_run_esc=\"\"") + 5 * n);
	if (!out)
		return NULL;
	p = stpcpy(out, " hvprof_run_esc=\"");
	for (; *cmd; cmd++) {
		if (*cmd == '"')
			p = stpcpy(p, "\\0042");
		else if (*cmd == '\n')
			p = stpcpy(p, "\\0012");
		else if (*cmd == '\\')
			p = stpcpy(p, "\\0134");
		else
			*p++ = *cmd;
	}
	stpcpy(p, "\"");
	return out;
}

/* Is @dir (--image's resolved argument) a directory? Else say what it is not. Return: 0;
 * -ENOENT. */
static int image_dir_check(const char *dir)
{
	struct stat st;
	int rc = stat(dir, &st);

	if (rc == 0 && S_ISDIR(st.st_mode))
		return 0;
	if (!strchr(dir, '/')) /* a name: neither a directory here nor a bundled one */
		cli_error("--image %s: not a directory, nor a bundled image (default, debian)", dir);
	else
		cli_error("--image %s: %s", dir,
			  rc != 0 && errno == ENOENT ? "no such file or directory"
						     : "not a directory");
	return -ENOENT;
}

int guest_opts_read_image(struct guest_opts *g, const char *arg)
{
	const char *dir;
	int err = image_resolve(g, arg, false, &dir);

	err = err ?: image_dir_check(dir);
	return err ?: read_manifest(g, dir);
}

int guest_opts_finish(struct guest_opts *g)
{
	static char dflt[PATH_MAX];
	const char *dir = g->image_dir;
	const char *initrd;
	char *cmd = NULL, repeat[32];
	int err;

	err = guest_opts_apply_domain(g); /* fills g->kernel, ->image_dir... where flags did not */
	if (err)
		return err;
	err = guest_disks_finish(g); /* before anything is read: a bad disk is one clear line */
	if (err)
		return err;
	dir = g->image_dir;
	if (dir) {
		/* a bundled image's name: built when missing (not without KVM: it would boot) */
		err = image_resolve(g, dir, true, &dir);
		if (err)
			return err;
	}
	if (!dir && !g->kernel) {
		dir = image_default_dir(dflt, sizeof(dflt));
		if (access(dir, F_OK) != 0) {
			cli_error("no guest image at %s: build the default image with "
				  "'images/build-image.sh', or give --image DIR or --kernel FILE",
				  dir);
			return -ENOENT;
		}
	}
	if (dir) {
		err = image_dir_check(dir);
		if (err)
			return err;
		err = read_manifest(g, dir);
		if (err)
			return err;
		g->image_dir = dir;
	}
	if (!g->kernel)
		g->kernel = g->m_kernel;
	if (access(g->kernel, R_OK) != 0) {
		err = -errno;
		cli_error("cannot read kernel %s: %s", g->kernel, hvp_strerror(err));
		return err;
	}
	{
		struct stat st;

		/* what cannot be a kernel is said now, before /dev/kvm is opened */
		if (stat(g->kernel, &st) == 0 && (!S_ISREG(st.st_mode) || st.st_size == 0)) {
			cli_error("kernel %s: %s", g->kernel,
				  S_ISDIR(st.st_mode) ? "is a directory, not a kernel image"
				  : S_ISREG(st.st_mode) ? "is empty, not a kernel image"
							: "is not a regular file");
			return -EINVAL;
		}
	}
	/* Symbols and BTF: the kernel itself when it is an ELF with a symtab, else the image's. */
	/* guestinfo reads symbols and BTF from a vmlinux, or from the kallsyms tables and .BTF
	 * embedded in a compressed bzImage (stock kernels) */
	g->vmlinux = g->kernel;
	if ((g->m_bzimage && cli_same_file(g->kernel, g->m_bzimage)) ||
	    (g->m_bzimage_lz4 && cli_same_file(g->kernel, g->m_bzimage_lz4)))
		g->vmlinux = g->m_kernel; /* the image's bzImage: its vmlinux has the symbols */
	if (g->vmlinux_opt) {
		if (access(g->vmlinux_opt, R_OK) != 0) {
			err = -errno;
			cli_error("--vmlinux %s: %s", g->vmlinux_opt, hvp_strerror(err));
			return err;
		}
		g->vmlinux = g->vmlinux_opt;
	}
	g->btf = g->m_btf;
	if (!cli_same_file(g->vmlinux, g->m_kernel) && g->m_btf)
		g->btf = NULL; /* another kernel: the image's BTF does not describe it */
	if (g->btf_opt) {
		if (access(g->btf_opt, R_OK) != 0) {
			err = -errno;
			cli_error("--btf %s: %s", g->btf_opt, hvp_strerror(err));
			return err;
		}
		g->btf = g->btf_opt;
	}

	initrd = g->initrd ? g->initrd : g->dom ? NULL : g->m_initrd; /* a domain's: none */
	err = image_disk_setup(g, &initrd); /* a disk-rooted image: its disk, its --add initramfs */
	if (err)
		return err;
	if (initrd) {
		err = read_whole(initrd, "initrd", &g->initrd_buf, &g->initrd_len);
		if (err)
			return err;
	}
	if (g->n_adds) {
		err = image_add_files(g);
		if (err) {
			cli_error("cannot add files to the initramfs: %s", hvp_strerror(err));
			return err;
		}
	}
	if (g->m_cmdline && !g->base_cmdline) {
		char *c = image_cmdline_for_cpus(g->m_cmdline, g->cpus);

		if (!c)
			return -ENOMEM;
		free(g->m_cmdline);
		g->m_cmdline = c;
	}
	if (g->run_cmd && !(cmd = run_word(g->run_cmd)))
		return -ENOMEM;
	/* run --control without --run: /init serves hvprof exec's commands on COM2 instead */
	if (!g->run_cmd && g->serve && !(cmd = strdup(" hvprof_serve=1")))
		return -ENOMEM;
	/* record --repeat N: /init runs the command N times, a workload window each
	 * (docs/guest-interface.md) */
	snprintf(repeat, sizeof(repeat), g->repeat ? " hvprof_repeat=%u" : "", g->repeat);
	/* --root after the image's or the domain's line (the kernel takes the last root=) */
	if (asprintf(&g->cmdline, "%s%s%s%s%s%s%s",
		     g->base_cmdline ? g->base_cmdline
				     : g->m_cmdline ? g->m_cmdline : "console=ttyS0",
		     g->root ? " root=" : "", g->root ? g->root : "",
		     cmd ? cmd : "", repeat, g->append ? " " : "",
		     g->append ? g->append : "") < 0) {
		free(cmd);
		return -ENOMEM;
	}
	free(cmd);
	return 0;
}

void guest_opts_to_config(const struct guest_opts *g, struct vmm_config *cfg)
{
	cfg->kernel = g->kernel;
	cfg->initrd = g->initrd_buf;
	cfg->initrd_size = g->initrd_len;
	cfg->cmdline = g->cmdline;
	cfg->mem_bytes = g->mem_mib << 20;
	cfg->cpus = g->cpus;
	cfg->duration_ns = (uint64_t)(g->duration_s * 1e9);
	cfg->kaslr = g->kaslr;
	cfg->kaslr_slide = g->kaslr_slide;
	cfg->disks = g->disks;
	cfg->n_disks = g->n_disks;
}

void guest_opts_free(struct guest_opts *g)
{
	for (size_t i = 0; i < g->n_adds; i++)
		free((char *)g->adds[i].host_path);
	free(g->adds);
	free(g->m_kernel);
	free(g->m_bzimage);
	free(g->m_bzimage_lz4);
	free(g->m_initrd);
	free(g->m_btf);
	free(g->m_rootfs);
	free(g->m_cmdline);
	free(g->m_kernel_version);
	free(g->m_disk);
	free(g->m_add_initrd);
	free(g->m_add_dir);
	free(g->image_path);
	free(g->cmdline);
	free(g->initrd_buf);
	guest_disks_free(g);
	domain_map_free(g->dom);
}
