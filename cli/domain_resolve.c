// SPDX-License-Identifier: MIT
// Libvirt domain map -> the guest hvprof boots: the command line's flags applied over the
// domain, bounds checked, the disks judged (raw only), and the one warning line of what is left
// out (docs/howto-libvirt.md). Pure: no libvirt, no printing.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "domain.h"
#include "domain_internal.h"

#define MIB (1ull << 20)

int domain_map_resolve(const struct domain_map *m, const struct domain_flags *flags,
		       struct domain_guest *out, char **msg)
{
	const char *name = m->name ? m->name : "(unnamed)";
	struct domain_guest g = { 0 };
	char *list;

	*msg = NULL;
	g.kernel = flags->kernel ? flags->kernel : m->kernel;
	g.kernel_from_domain = !flags->kernel && m->kernel;
	if (!g.kernel) {
		*msg = domain_fmt("domain '%s' has no os/kernel (it boots from %s); hvprof boots a kernel "
			   "directly: add <kernel> to the domain's <os>, or give --kernel FILE",
			   name, m->firmware ? m->firmware : "firmware");
		return -ENOENT;
	}
	g.initrd = flags->initrd ? flags->initrd : m->initrd;
	g.cmdline = m->cmdline ? m->cmdline : "console=ttyS0";

	g.mem_mib = flags->mem_mib;
	if (!g.mem_mib && m->mem_bytes) {
		/* Whole, even MiB as --mem wants; round up so the guest gets at least as much. */
		uint64_t mib = (m->mem_bytes + 2 * MIB - 1) / (2 * MIB) * 2;

		if (m->mem_bytes > DOMAIN_MEM_MAX_MIB * MIB || mib < DOMAIN_MEM_MIN_MIB) {
			*msg = domain_fmt("domain '%s': memory of %llu KiB is outside what hvprof runs "
				   "(%llu MiB to %llu GiB); give --mem MIB", name,
				   (unsigned long long)(m->mem_bytes / 1024), DOMAIN_MEM_MIN_MIB,
				   DOMAIN_MEM_MAX_MIB >> 10);
			return -ERANGE;
		}
		g.mem_mib = mib;
	}
	g.cpus = flags->cpus;
	if (!g.cpus && m->vcpus) {
		if (m->vcpus > DOMAIN_MAX_VCPUS) {
			*msg = domain_fmt("domain '%s': %u vCPUs, hvprof runs 1 to %u; give --cpus N",
				   name, m->vcpus, DOMAIN_MAX_VCPUS);
			return -ERANGE;
		}
		g.cpus = m->vcpus;
	}
	if (!flags->disks) {
		for (size_t i = 0; i < m->n_disks; i++) {
			const struct domain_disk *k = &m->disks[i];

			if (!k->format)
				continue;
			*msg = domain_fmt("domain '%s': disk %s (%s) is a %s image; hvprof boots raw "
				   "images: convert it with 'qemu-img convert -O raw %s %s.raw' and "
				   "give the domain that file with <driver type='raw'/>, or give "
				   "--disk FILE", name, k->target ? k->target : "?", k->path,
				   k->format, k->path, k->path);
			return *msg ? -ENOTSUP : -ENOMEM;
		}
		g.disks = m->disks;
		g.n_disks = m->n_disks;
	}
	if (m->n_unsupported) {
		list = domain_map_join(m->unsupported, m->n_unsupported);
		if (!list)
			return -ENOMEM;
		if (flags->strict)
			*msg = domain_fmt("domain '%s' has what hvprof does not implement (--strict): %s",
				   name, list);
		else
			*msg = domain_fmt("domain '%s' has what hvprof does not implement, left out: %s "
				   "(--strict makes this an error)", name, list);
		free(list);
		if (flags->strict)
			return -ENOTSUP;
		if (!*msg)
			return -ENOMEM;
	}
	*out = g;
	return 0;
}
