// SPDX-License-Identifier: MIT
// --domain/--connect/--domain-xml/--strict of run and record: a libvirt domain as the guest,
// with the command line's own flags winning (glue over cli/domain.c and cli/domain_virt.c).
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/file.h>
#include <hvprof/log.h> /* no pr_fmt prefix: every message starts with "domain 'NAME'" */

#include "cli.h"
#include "domain.h"

#define DOMAIN_XML_MAX (16u << 20) /* a domain definition is a few KiB */

int guest_opts_check(const struct guest_opts *g)
{
	if (g->domain && g->domain_xml) {
		cli_error("--domain and --domain-xml both name the guest: give one");
		return -EINVAL;
	}
	if (g->connect && !g->domain) {
		cli_error("--connect %s needs --domain NAME", g->connect);
		return -EINVAL;
	}
	if (g->strict && !g->domain && !g->domain_xml) {
		cli_error("--strict applies to --domain or --domain-xml");
		return -EINVAL;
	}
	return 0;
}

bool cli_same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0)
		return false;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int read_xml_file(const char *path, char **out, size_t *len)
{
	int err = hvp_read_file(path, 0, DOMAIN_XML_MAX, (void **)out, len);

	if (err == -EINVAL || err == -EFBIG) {
		cli_error("domain XML %s: not a regular file of at most %u MiB", path,
			  DOMAIN_XML_MAX >> 20);
		return -EINVAL;
	}
	if (err)
		cli_error("cannot open domain XML %s: %s", path, hvp_strerror(err));
	return err;
}

/*
 * A kernel that sits in an hvprof image directory whose manifest names it (the default image,
 * or one built by images/build-image.sh) brings that image's BTF, rootfs and kernel version,
 * which record needs for identities and symbols. Returns @dir filled, or NULL.
 */
static const char *image_of_kernel(const char *kernel, char *dir, size_t len)
{
	char line[PATH_MAX + 16], path[2 * PATH_MAX + 32];
	const char *slash = strrchr(kernel, '/');
	bool found = false;
	FILE *f;

	if (!slash || (size_t)(slash - kernel) >= len)
		return NULL;
	snprintf(dir, len, "%.*s", (int)(slash == kernel ? 1 : slash - kernel), kernel);
	snprintf(path, sizeof(path), "%s/manifest", dir);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "kernel=", 7) != 0)
			continue;
		if (line[7] == '/')
			snprintf(path, sizeof(path), "%s", line + 7);
		else
			snprintf(path, sizeof(path), "%s/%s", dir, line + 7);
		found = cli_same_file(kernel, path);
	}
	fclose(f);
	return found ? dir : NULL;
}

static void log_mapping(const struct guest_opts *g, const struct domain_flags *flags,
			const struct domain_map *m, const struct domain_guest *r)
{
	char *ignored;

	pr_info("domain '%s': kernel %s (%s), initrd %s (%s), %llu MiB (%s), %u vCPUs (%s), "
		"cmdline '%s', serial console %s", m->name ? m->name : "?", r->kernel,
		r->kernel_from_domain ? "domain" : "--kernel", r->initrd ? r->initrd : "none",
		flags->initrd ? "--initrd" : "domain", (unsigned long long)g->mem_mib,
		flags->mem_mib ? "--mem" : r->mem_mib ? "domain" : "default", g->cpus,
		flags->cpus ? "--cpus" : r->cpus ? "domain" : "default", r->cmdline,
		m->serial_console ? "ttyS0 on stdout" : "not defined (hvprof's ttyS0 on stdout)");
	for (size_t i = 0; i < r->n_disks; i++)
		pr_info("domain '%s': disk %s (%s%s%s) is the guest's /dev/vd%c",
			m->name ? m->name : "?", r->disks[i].target ? r->disks[i].target : "?",
			r->disks[i].path, r->disks[i].readonly ? ", read-only" : "",
			r->disks[i].transient ? ", transient: snapshot" : "", (char)('a' + i));
	if (!m->n_ignored || !hvp_log_enabled(HVP_LOG_INFO, LOG_GENERAL))
		return;
	ignored = domain_map_join(m->ignored, m->n_ignored);
	if (ignored)
		pr_info("domain '%s': replaced by hvprof's own minimal PC: %s",
			m->name ? m->name : "?", ignored);
	free(ignored);
}

int guest_opts_apply_domain(struct guest_opts *g)
{
	struct domain_flags flags = {
		.kernel = g->kernel,
		.initrd = g->initrd,
		.mem_mib = g->mem_set ? g->mem_mib : 0,
		.cpus = g->cpus_set ? g->cpus : 0,
		.strict = g->strict,
		.disks = g->disks_set,
	};
	static char image_dir[PATH_MAX];
	struct domain_map *m = NULL;
	struct domain_guest r;
	char *xml = NULL, *msg = NULL;
	size_t len = 0;
	int err;

	if (!g->domain && !g->domain_xml)
		return 0;
	if (g->domain) {
		err = domain_fetch_xml(g->connect, g->domain, &xml, &msg);
		if (err) {
			cli_error("%s", msg ? msg : hvp_strerror(err));
			goto out;
		}
		len = strlen(xml);
	} else {
		err = read_xml_file(g->domain_xml, &xml, &len);
		if (err)
			goto out;
	}
	err = domain_map_parse(xml, len, &m, &msg);
	if (err) {
		if (g->domain)
			cli_error("libvirt domain '%s': %s", g->domain,
				  msg ? msg : hvp_strerror(err));
		else
			cli_error("domain XML %s: %s", g->domain_xml,
				  msg ? msg : hvp_strerror(err));
		goto out;
	}
	err = domain_map_resolve(m, &flags, &r, &msg);
	if (err) {
		cli_error("%s", msg ? msg : hvp_strerror(err));
		goto out;
	}
	if (msg)
		pr_warn("%s", msg);

	/* Flags were parsed first and left in place; the domain fills only what they did not. */
	g->kernel = r.kernel;
	g->initrd = r.initrd;
	if (r.mem_mib)
		g->mem_mib = r.mem_mib;
	if (r.cpus)
		g->cpus = r.cpus;
	g->base_cmdline = r.cmdline;
	for (size_t i = 0; i < r.n_disks && !err; i++) /* vda, vdb, ... in target order */
		err = guest_disk_append(g, r.disks[i].path, r.disks[i].readonly,
					r.disks[i].transient);
	if (err)
		goto out;
	if (!g->image_dir && r.kernel_from_domain)
		g->image_dir = image_of_kernel(r.kernel, image_dir, sizeof(image_dir));
	log_mapping(g, &flags, m, &r);
	g->dom = m;
	m = NULL;
out:
	domain_map_free(m);
	free(msg);
	free(xml);
	return err;
}
