/* SPDX-License-Identifier: MIT */
/* Libvirt domain XML -> hvprof guest options: a pure mapper (libxml2; no libvirt, no printing). */
#ifndef HVPROF_CLI_DOMAIN_H
#define HVPROF_CLI_DOMAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hvprof/compiler.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Same bounds as --mem and --cpus (cli/guest_opts.c, VMM_MAX_VCPUS). */
#define DOMAIN_MEM_MIN_MIB 64ull
#define DOMAIN_MEM_MAX_MIB (1ull << 20)
#define DOMAIN_MAX_VCPUS 64u
#define DOMAIN_MAX_DISKS 8u /* VMM_MAX_DISKS: vda to vdh */

/**
 * struct domain_disk - a <disk type='file'|'block' device='disk'> hvprof attaches as a virtio-blk
 * disk (docs/howto-libvirt.md).
 * @path: source file= (type='file') or dev= (type='block').
 * @target: target dev= ("vda", "sdb"), or NULL; disks are ordered by it: the first is the
 *   guest's /dev/vda, the next /dev/vdb, ...
 * @format: driver type= other than "raw" ("qcow2"), or NULL for a raw image (also when the
 *   driver gives no type, as libvirt takes it).
 * @readonly: <readonly/>. @transient: <transient/> (writes are discarded: hvprof's snapshot).
 */
struct domain_disk {
	char *path;
	char *target;
	char *format;
	bool readonly;
	bool transient;
};

/**
 * struct domain_map - what a libvirt domain definition says, in hvprof's terms.
 * @name: /domain/name, or NULL.
 * @kernel: os/kernel, or NULL (the domain boots from firmware; see @firmware).
 * @initrd: os/initrd, or NULL.
 * @cmdline: os/cmdline, or NULL when the element is absent ("" when it is empty).
 * @mem_bytes: currentMemory when present (what the guest has after ballooning), else memory;
 *             in bytes, rounded up to KiB as libvirt does. 0 when neither is given.
 * @vcpus: the vcpu element's current= attribute, else its value; 0 when absent.
 * @serial_console: a serial port 0 (or a console whose target is serial port 0) is defined:
 *                  hvprof's 16550A at ttyS0, written to stdout, stands for it.
 * @firmware: when @kernel is NULL, what the domain boots from instead (e.g. "boot dev='hd'").
 * @disks/@n_disks: the disks hvprof attaches, in target order (at most DOMAIN_MAX_DISKS;
 *   more are listed as unsupported).
 * @unsupported: items hvprof does not implement and will leave out, one short phrase each
 *               ("disk vda (/var/lib/x.qcow2)"), in document order.
 * @ignored: items hvprof leaves out by design because its own minimal PC replaces them
 *           (machine type, clock, lifecycle actions, controllers, ...), for -v output.
 */
struct domain_map {
	char *name;
	char *kernel;
	char *initrd;
	char *cmdline;
	uint64_t mem_bytes;
	unsigned int vcpus;
	bool serial_console;
	char *firmware;
	struct domain_disk *disks;
	size_t n_disks;
	char **unsupported;
	size_t n_unsupported;
	char **ignored;
	size_t n_ignored;
};

/**
 * domain_map_parse - map a domain definition (virsh dumpxml / virDomainGetXMLDesc output).
 * @xml: the document; need not be NUL-terminated.
 * @len: its length in bytes.
 * @out: on success, a new map owned by the caller (domain_map_free); untouched on failure.
 * @errmsg: on failure, a malloc'ed one-line reason (NULL if out of memory); caller frees.
 *
 * Memory units follow libvirt (virScaleInteger): no unit means KiB; b/byte/bytes; a single
 * letter k, m, g, t, p, e or a letter + "iB" is a power of 1024; a letter + "B" is a power of
 * 1000; case does not matter. External entities and the network are never loaded.
 *
 * Return: 0; -EBADMSG for XML that is not well-formed or whose root is not <domain>;
 * -EINVAL for a memory/vcpu value or unit libvirt would reject; -ERANGE when a size overflows
 * 64 bits; -ENOTSUP for an os type other than hvm; -ENOMEM.
 * Thread-safety: safe on distinct arguments (libxml2 must be initialised by the caller when
 * threads parse at once).
 */
int domain_map_parse(const char *xml, size_t len, struct domain_map **out,
		     char **errmsg) __must_check;

/** domain_map_free - free a map from domain_map_parse; NULL is fine. */
void domain_map_free(struct domain_map *m);

/**
 * struct domain_flags - what the command line set itself (it wins over the domain).
 * @kernel, @initrd: --kernel/--initrd, or NULL.
 * @mem_mib: --mem, or 0 when not given. @cpus: --cpus, or 0 when not given.
 * @strict: --strict: anything unsupported is an error rather than a warning.
 * @disks: --disk was given: the domain's disks are left out (and a qcow2 one is no error).
 */
struct domain_flags {
	const char *kernel;
	const char *initrd;
	uint64_t mem_mib;
	unsigned int cpus;
	bool strict;
	bool disks;
};

/**
 * struct domain_guest - the guest options that result (pointers into the map or the flags).
 * @kernel, @initrd: what boots (either may be NULL: initrd none / kernel from the flags).
 * @cmdline: the base kernel command line: os/cmdline as it is, "console=ttyS0" when absent.
 * @mem_mib: guest RAM: --mem, else the domain's rounded up to an even MiB, else 0 (default).
 * @cpus: vCPUs: --cpus, else the domain's, else 0 (hvprof's default).
 * @kernel_from_domain: @kernel is os/kernel (not --kernel).
 * @disks/@n_disks: the domain's disks to attach (the map's), none when --disk was given.
 */
struct domain_guest {
	const char *kernel;
	const char *initrd;
	const char *cmdline;
	uint64_t mem_mib;
	unsigned int cpus;
	bool kernel_from_domain;
	const struct domain_disk *disks;
	size_t n_disks;
};

/**
 * domain_map_resolve - apply the command line over the map and judge what cannot be honoured.
 * @m: a parsed map.
 * @flags: what the command line set.
 * @out: the resulting guest options, filled on success (pointers live as long as @m/@flags).
 * @msg: on success, a malloc'ed one-line warning listing everything unsupported ("domain 'x'
 *       has what hvprof does not implement, left out: a, b"), or NULL when nothing is; on
 *       failure, a malloc'ed one-line error. Caller frees. NULL if out of memory.
 *
 * Return: 0; -ENOENT when no kernel is given by os/kernel or --kernel (firmware boot);
 * -ERANGE when the domain's memory or vCPUs (not overridden) are outside hvprof's bounds;
 * -ENOTSUP when @flags->strict and something is unsupported, or a disk hvprof would attach is
 * not a raw image (a qcow2 driver: the message says how to convert it); -ENOMEM.
 */
int domain_map_resolve(const struct domain_map *m, const struct domain_flags *flags,
		       struct domain_guest *out, char **msg) __must_check;

/**
 * domain_map_join - the @n items of @items joined by ", " (malloc'ed; NULL if out of memory).
 */
char *domain_map_join(char *const *items, size_t n);

/**
 * domain_fetch_xml - the definition of a libvirt domain, through the libvirt API
 * (cli/domain_virt.c; the only part of this module that needs libvirt).
 * @uri: connection URI (e.g. "qemu:///system", "test:///default"), or NULL for libvirt's
 *       default ($LIBVIRT_DEFAULT_URI, then the driver's).
 * @name: the domain's name.
 * @xml: on success, the inactive (persistent) definition, malloc'ed; caller frees.
 * @errmsg: on failure, a malloc'ed one-line reason including libvirt's own; caller frees.
 *
 * The connection is read-only and closed before returning. libvirt's and libxml2's default
 * error printers are silenced for the calling thread: the reason is returned instead.
 *
 * Return: 0; -EHOSTUNREACH when the connection cannot be opened; -ENOENT when no domain has
 * that name; -EIO when libvirt fails otherwise; -ENOMEM.
 */
int domain_fetch_xml(const char *uri, const char *name, char **xml, char **errmsg) __must_check;

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_CLI_DOMAIN_H */
