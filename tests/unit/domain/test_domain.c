// SPDX-License-Identifier: MIT
// Unit tests of cli/domain.c: libvirt domain XML strings -> hvprof guest options (no libvirt).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/compiler.h>

#include "domain.h"
#include "test.h"

#define OS_KERNEL                                                       \
	"<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type>"      \
	"<kernel>/k/vmlinux</kernel></os>"
#define DOM_OPEN "<domain type='kvm'><name>t</name>"
#define DOM(inner) DOM_OPEN inner "</domain>"

/* Parse @xml; on failure *errmsg holds the reason (caller frees both). */
static int parse(const char *xml, struct domain_map **m, char **errmsg)
{
	*m = NULL;
	return domain_map_parse(xml, strlen(xml), m, errmsg);
}

static char *joined_unsupported(const struct domain_map *m)
{
	return domain_map_join(m->unsupported, m->n_unsupported);
}

/* ---- memory units (libvirt's virScaleInteger, default KiB, rounded up to KiB) ---- */

struct unit_row {
	const char *value;
	const char *unit; /* NULL: no unit attribute */
	int err;
	unsigned long long bytes;
	const char *msg_has; /* for errors: text the message must contain */
};

static const struct unit_row unit_rows[] = {
	{ "262144", NULL, 0, 256ull << 20, NULL },
	{ "4", "", 0, 4096, NULL },
	{ "1", "b", 0, 1024, NULL },         /* rounded up to a KiB, as libvirt does */
	{ "1025", "bytes", 0, 2048, NULL },
	{ "4096", "byte", 0, 4096, NULL },
	{ "1", "KB", 0, 1024, NULL },        /* 1000 bytes, rounded up */
	{ "2", "k", 0, 2048, NULL },
	{ "2", "KiB", 0, 2048, NULL },
	{ "1", "MB", 0, 1000448, NULL },     /* 10^6 rounded up to KiB */
	{ "256", "M", 0, 256ull << 20, NULL },
	{ "256", "MiB", 0, 256ull << 20, NULL },
	{ "256", "mib", 0, 256ull << 20, NULL }, /* case does not matter */
	{ "1", "GB", 0, 1000000512ull, NULL },
	{ "1", "G", 0, 1ull << 30, NULL },
	{ "1", "GiB", 0, 1ull << 30, NULL },
	{ "1", "gIb", 0, 1ull << 30, NULL },
	{ "1", "TB", 0, 1000000000000ull, NULL },
	{ "1", "T", 0, 1ull << 40, NULL },
	{ "1", "TiB", 0, 1ull << 40, NULL },
	{ " 512 ", "MiB", 0, 512ull << 20, NULL },
	{ "1", "furlong", -EINVAL, 0, "unit='furlong'" },
	{ "1", "KiBs", -EINVAL, 0, "KiBs" },
	{ "1", "Mi", -EINVAL, 0, "'Mi'" },
	{ "1", "x", -EINVAL, 0, "'x'" },
	{ "-1", NULL, -EINVAL, 0, "-1" },
	{ "12abc", "MiB", -EINVAL, 0, "12abc" },
	{ "0", "MiB", -EINVAL, 0, "positive" },
	{ "", "MiB", -EINVAL, 0, "positive" },
	{ "17179869184", "GiB", -ERANGE, 0, "too large" }, /* 2^64 bytes */
	{ "99999999999", "TiB", -ERANGE, 0, "too large" },
	{ "18446744073709551616", "b", -ERANGE, 0, "too large" },
};

static int test_units(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(unit_rows); i++) {
		const struct unit_row *r = &unit_rows[i];
		struct domain_map *m;
		char xml[512], unit[64] = "", *msg = NULL;
		int err;

		if (r->unit)
			snprintf(unit, sizeof(unit), " unit='%s'", r->unit);
		snprintf(xml, sizeof(xml), DOM("<memory%s>%s</memory>" OS_KERNEL), unit, r->value);
		err = parse(xml, &m, &msg);
		if (err != r->err || (!err && m->mem_bytes != r->bytes) ||
		    (err && (!msg || !strstr(msg, r->msg_has) || strchr(msg, '\n')))) {
			fprintf(stderr,
				"row %zu (%s %s): err %d want %d, bytes %llu want %llu, '%s'\n", i,
				r->value, r->unit ? r->unit : "-", err, r->err,
				m ? (unsigned long long)m->mem_bytes : 0ull, r->bytes,
				msg ? msg : "");
			domain_map_free(m);
			free(msg);
			return TEST_FAIL;
		}
		domain_map_free(m);
		free(msg);
	}
	return TEST_OK;
}

/* ---- memory/currentMemory and vcpu, through resolve to hvprof's MiB and vCPUs ---- */

struct size_row {
	const char *xml;
	uint64_t flag_mem_mib;
	unsigned int flag_cpus;
	int err;
	uint64_t mem_mib;
	unsigned int cpus;
};

static const struct size_row size_rows[] = {
	/* currentMemory is what the guest has (the balloon holds the rest) */
	{ DOM("<memory unit='GiB'>1</memory>"
	      "<currentMemory unit='MiB'>512</currentMemory>" OS_KERNEL),
	  0, 0, 0, 512, 0 },
	/* a currentMemory above memory is clamped, as libvirt does */
	{ DOM("<memory unit='MiB'>256</memory>"
	      "<currentMemory unit='GiB'>4</currentMemory>" OS_KERNEL),
	  0, 0, 0, 256, 0 },
	{ DOM("<currentMemory unit='MiB'>384</currentMemory>" OS_KERNEL), 0, 0, 0, 384, 0 },
	/* rounded up to even MiB: the guest gets at least what the domain says */
	{ DOM("<memory>102401</memory>" OS_KERNEL), 0, 0, 0, 102, 0 },
	{ DOM("<memory unit='MB'>200</memory>" OS_KERNEL), 0, 0, 0, 192, 0 },
	/* no memory element: hvprof's default (0 = keep it) */
	{ DOM(OS_KERNEL), 0, 0, 0, 0, 0 },
	/* below hvprof's minimum, unless --mem says otherwise */
	{ DOM("<memory unit='MiB'>32</memory>" OS_KERNEL), 0, 0, -ERANGE, 0, 0 },
	{ DOM("<memory unit='MiB'>32</memory>" OS_KERNEL), 128, 0, 0, 128, 0 },
	{ DOM("<memory unit='TiB'>2</memory>" OS_KERNEL), 0, 0, -ERANGE, 0, 0 },
	{ DOM("<vcpu placement='static'>4</vcpu>" OS_KERNEL), 0, 0, 0, 0, 4 },
	{ DOM("<vcpu current='2'>8</vcpu>" OS_KERNEL), 0, 0, 0, 0, 2 },
	{ DOM("<vcpu>128</vcpu>" OS_KERNEL), 0, 0, -ERANGE, 0, 0 },
	{ DOM("<vcpu>128</vcpu>" OS_KERNEL), 0, 3, 0, 0, 3 },
};

static int test_sizes(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(size_rows); i++) {
		const struct size_row *r = &size_rows[i];
		struct domain_flags flags = { .mem_mib = r->flag_mem_mib, .cpus = r->flag_cpus };
		struct domain_guest g = { 0 };
		struct domain_map *m;
		char *msg = NULL;
		int err;

		err = parse(r->xml, &m, &msg);
		if (err) {
			fprintf(stderr, "row %zu: parse %d: %s\n", i, err, msg ? msg : "");
			free(msg);
			return TEST_FAIL;
		}
		err = domain_map_resolve(m, &flags, &g, &msg);
		if (err != r->err || (!err && (g.mem_mib != r->mem_mib || g.cpus != r->cpus)) ||
		    (err && (!msg || !strstr(msg, "domain 't'")))) {
			fprintf(stderr,
				"row %zu: err %d want %d, mem %llu want %llu, cpus %u want %u, "
				"'%s'\n", i, err, r->err, (unsigned long long)g.mem_mib,
				(unsigned long long)r->mem_mib, g.cpus, r->cpus, msg ? msg : "");
			domain_map_free(m);
			free(msg);
			return TEST_FAIL;
		}
		domain_map_free(m);
		free(msg);
	}
	return TEST_OK;
}

/* ---- flags win over the domain, field by field ---- */

#define FULL DOM("<memory unit='MiB'>512</memory><vcpu>2</vcpu><os><type>hvm</type>" \
		 "<kernel>/dom/vmlinux</kernel><initrd>/dom/initrd</initrd>"            \
		 "<cmdline>console=ttyS0 quiet</cmdline></os>")

struct override_row {
	const char *xml;
	struct domain_flags flags;
	const char *kernel, *initrd, *cmdline;
	uint64_t mem_mib;
	unsigned int cpus;
	bool kernel_from_domain;
};

static const struct override_row override_rows[] = {
	{ FULL, { 0 }, "/dom/vmlinux", "/dom/initrd", "console=ttyS0 quiet", 512, 2, true },
	{ FULL, { .kernel = "/flag/bzImage" }, "/flag/bzImage", "/dom/initrd",
	  "console=ttyS0 quiet", 512, 2, false },
	{ FULL, { .initrd = "/flag/initrd" }, "/dom/vmlinux", "/flag/initrd",
	  "console=ttyS0 quiet", 512, 2, true },
	{ FULL, { .mem_mib = 64, .cpus = 1 }, "/dom/vmlinux", "/dom/initrd",
	  "console=ttyS0 quiet", 64, 1, true },
	{ FULL, { .kernel = "/f/k", .initrd = "/f/i", .mem_mib = 1024, .cpus = 4 }, "/f/k", "/f/i",
	  "console=ttyS0 quiet", 1024, 4, false },
	/* no os/cmdline: hvprof's console, as for --kernel; an empty one stays empty */
	{ DOM("<os><type>hvm</type><kernel>/k</kernel></os>"), { 0 }, "/k", NULL, "console=ttyS0",
	  0, 0, true },
	{ DOM("<os><type>hvm</type><kernel>/k</kernel><cmdline/></os>"), { 0 }, "/k", NULL, "",
	  0, 0, true },
	/* no os/kernel, but --kernel: the guest can boot */
	{ DOM("<os><type>hvm</type><boot dev='hd'/></os>"), { .kernel = "/f/k" }, "/f/k", NULL,
	  "console=ttyS0", 0, 0, false },
};

static int test_overrides(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(override_rows); i++) {
		const struct override_row *r = &override_rows[i];
		struct domain_guest g = { 0 };
		struct domain_map *m;
		char *msg = NULL;
		int err;

		err = parse(r->xml, &m, &msg);
		if (!err)
			err = domain_map_resolve(m, &r->flags, &g, &msg);
		if (err) {
			fprintf(stderr, "row %zu: %d %s\n", i, err, msg ? msg : "");
			free(msg);
			domain_map_free(m);
			return TEST_FAIL;
		}
		fprintf(stderr, "row %zu\n", i);
		ASSERT_EQ_STR(g.kernel, r->kernel);
		if (r->initrd)
			ASSERT_EQ_STR(g.initrd, r->initrd);
		else
			ASSERT_TRUE(g.initrd == NULL);
		ASSERT_EQ_STR(g.cmdline, r->cmdline);
		ASSERT_EQ_U64(g.mem_mib, r->mem_mib);
		ASSERT_EQ_INT(g.cpus, r->cpus);
		ASSERT_EQ_INT(g.kernel_from_domain, r->kernel_from_domain);
		ASSERT_TRUE(msg == NULL); /* nothing unsupported in these rows */
		domain_map_free(m);
	}
	return TEST_OK;
}

/* ---- what hvprof leaves out: the unsupported list (warned) and the ignored one (-v) ---- */

struct list_row {
	const char *xml;
	const char *unsupported; /* exact ", "-joined list */
	const char *ignored_has; /* text the ignored list must contain, or NULL */
	bool serial_console;
};

static const struct list_row list_rows[] = {
	{ DOM(OS_KERNEL), "", "machine 'pc-q35-7.2'", false },
	{ DOM(OS_KERNEL "<devices><disk type='file' device='disk'>"
		"<driver name='qemu' type='qcow2'/>"
		"<source file='/var/lib/libvirt/images/a.qcow2'/><target dev='vda' bus='virtio'/>"
		"</disk><disk type='file' device='cdrom'><source file='/iso/d.iso'/>"
		"<target dev='sda' bus='sata'/><readonly/></disk></devices>"),
	  "cdrom sda (/iso/d.iso)", NULL, false }, /* the disk is attached (test_disks) */
	{ DOM(OS_KERNEL "<devices><interface type='network'><mac address='52:54:00:00:00:01'/>"
		"<source network='default'/><model type='virtio'/></interface>"
		"<interface type='bridge'><source bridge='br0'/></interface></devices>"),
	  "interface network (default), interface bridge (br0)", NULL, false },
	{ DOM(OS_KERNEL "<devices><hostdev mode='subsystem' type='pci' managed='yes'><source>"
		"<address domain='0x0000' bus='0x03' slot='0x00' function='0x1'/>"
		"</source></hostdev>"
		"</devices>"),
	  "hostdev pci (0000:03:00.1)", NULL, false },
	{ DOM(OS_KERNEL "<devices><graphics type='vnc' port='-1'/>"
		"<video><model type='qxl'/></video>"
		"<sound model='ich9'/><audio id='1' type='none'/></devices>"),
	  "graphics vnc, video qxl, sound ich9", NULL, false },
	/* asked to be absent: hvprof honours that by having none */
	{ DOM(OS_KERNEL "<devices><video><model type='none'/></video><memballoon model='none'/>"
		"</devices>"),
	  "", NULL, false },
	{ DOM(OS_KERNEL "<devices><memballoon model='virtio'/><rng model='virtio'>"
		"<backend model='random'>/dev/urandom</backend></rng><watchdog model='i6300esb'/>"
		"</devices>"),
	  "memballoon virtio, rng virtio, watchdog i6300esb", NULL, false },
	/* serial port 0 (and its console alias) is hvprof's ttyS0; others are not */
	{ DOM(OS_KERNEL "<devices><serial type='pty'><target port='0'/></serial>"
		"<console type='pty'><target type='serial' port='0'/></console></devices>"),
	  "", NULL, true },
	{ DOM(OS_KERNEL "<devices><serial type='pty'/>"
		"<serial type='file'><source path='/l'/></serial>"
		"<console type='pty'><target type='virtio' port='0'/></console></devices>"),
	  "serial port 1, console virtio", NULL, true },
	{ DOM(OS_KERNEL "<devices><channel type='unix'><target type='virtio' "
		"name='org.qemu.guest_agent.0'/></channel><filesystem type='mount'>"
		"<source dir='/srv'/><target dir='share'/></filesystem></devices>"),
	  "channel unix (org.qemu.guest_agent.0), filesystem mount (/srv)", NULL, false },
	/* buses, input and the emulator belong to the PC hvprof replaces */
	{ DOM(OS_KERNEL "<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>"
		"<controller type='usb' index='0' model='qemu-xhci'/>"
		"<input type='mouse' bus='ps2'/>"
		"</devices>"),
	  "", "emulator, controller qemu-xhci, input mouse", false },
	{ DOM("<cpu mode='host-model' check='partial'/>" OS_KERNEL), "cpu mode 'host-model'", NULL,
	  false },
	{ DOM("<cpu mode='custom' match='exact'><model fallback='forbid'>Skylake-Client</model>"
	      "<topology sockets='1' dies='1' cores='2' threads='1'/></cpu>" OS_KERNEL),
	  "cpu mode 'custom' model 'Skylake-Client' topology", NULL, false },
	/* apic and pae hvprof has; a feature asked off is honoured */
	{ DOM("<features><acpi/><apic/><pae/><vmport state='off'/><smm state='on'/></features>"
	      OS_KERNEL),
	  "feature acpi, feature smm", NULL, false },
	{ DOM("<vcpu cpuset='0-1'>2</vcpu><cputune><vcpupin vcpu='0' cpuset='0'/></cputune>"
	      "<memoryBacking><hugepages/></memoryBacking><numatune/>"
	      "<maxMemory slots='4'>8</maxMemory>"
	      OS_KERNEL),
	  "vcpu cpuset '0-1' (pinning), cputune, memoryBacking, numatune, maxMemory", NULL, false },
	{ DOM("<os firmware='efi'><type arch='i686'>hvm</type><loader readonly='yes'>/ovmf.fd"
	      "</loader><nvram>/var/nv.fd</nvram><kernel>/k</kernel><boot dev='hd'/></os>"),
	  "os arch 'i686' (hvprof runs x86_64), os firmware 'efi', os loader /ovmf.fd, os nvram",
	  "os boot dev='hd'", false },
	{ DOM(OS_KERNEL "<clock offset='utc'/><on_poweroff>destroy</on_poweroff>"
	      "<on_reboot>restart</on_reboot><pm><suspend-to-mem enabled='no'/></pm>"),
	  "", "clock, on_poweroff, on_reboot, pm", false },
};

static int test_lists(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(list_rows); i++) {
		const struct list_row *r = &list_rows[i];
		struct domain_map *m;
		char *msg = NULL, *got, *ign;
		int err, ok;

		err = parse(r->xml, &m, &msg);
		if (err) {
			fprintf(stderr, "row %zu: parse %d: %s\n", i, err, msg ? msg : "");
			free(msg);
			return TEST_FAIL;
		}
		got = joined_unsupported(m);
		ign = domain_map_join(m->ignored, m->n_ignored);
		ok = got && ign && !strcmp(got, r->unsupported) &&
		     (!r->ignored_has || strstr(ign, r->ignored_has)) &&
		     m->serial_console == r->serial_console;
		if (!ok)
			fprintf(stderr,
				"row %zu: unsupported '%s' want '%s'; ignored '%s' want '%s'; "
				"serial %d want %d\n",
				i, got ? got : "", r->unsupported, ign ? ign : "",
				r->ignored_has ? r->ignored_has : "", m->serial_console,
				r->serial_console);
		free(got);
		free(ign);
		domain_map_free(m);
		if (!ok)
			return TEST_FAIL;
	}
	return TEST_OK;
}

/* ---- disks: file and block disks attached in target order, the rest listed ---- */

static int test_disks(void)
{
	static const char xml[] = DOM(OS_KERNEL "<devices>"
		"<disk type='file' device='disk'><driver name='qemu' type='raw'/>"
		"<source file='/img/b.raw'/><target dev='vdb' bus='virtio'/><readonly/></disk>"
		"<disk type='block' device='disk'><source dev='/dev/sdz'/>"
		"<target dev='vda' bus='virtio'/></disk>"
		"<disk type='file'><source file='/img/c.raw'/><target dev='sdc' bus='sata'/>"
		"<transient/></disk>"
		"<disk type='file' device='cdrom'><source file='/iso/d.iso'/>"
		"<target dev='sda' bus='sata'/><readonly/></disk>"
		"<disk type='network' device='disk'><source protocol='nbd' name='x'/>"
		"<target dev='vdc'/></disk>"
		"<disk type='file' device='disk'><target dev='vdd'/></disk>"
		"</devices>");
	struct domain_flags flags = { 0 };
	struct domain_guest g;
	struct domain_map *m;
	char *msg = NULL, *got;

	ASSERT_EQ_INT(parse(xml, &m, &msg), 0);
	ASSERT_EQ_INT(m->n_disks, 3);
	/* virtio targets first, in the guest's order (vda < vdb), then the others (sdc) */
	ASSERT_EQ_STR(m->disks[0].path, "/dev/sdz");
	ASSERT_EQ_STR(m->disks[0].target, "vda");
	ASSERT_EQ_STR(m->disks[1].path, "/img/b.raw");
	ASSERT_TRUE(m->disks[1].readonly && !m->disks[1].transient && !m->disks[1].format);
	ASSERT_EQ_STR(m->disks[2].path, "/img/c.raw");
	ASSERT_TRUE(m->disks[2].transient && !m->disks[2].readonly);
	got = joined_unsupported(m);
	ASSERT_EQ_STR(got, "cdrom sda (/iso/d.iso), disk vdc (x), disk vdd");
	free(got);
	ASSERT_EQ_INT(domain_map_resolve(m, &flags, &g, &msg), 0);
	ASSERT_EQ_INT(g.n_disks, 3);
	ASSERT_TRUE(g.disks == m->disks);
	free(msg);
	domain_map_free(m);
	return TEST_OK;
}

/* Past DOMAIN_MAX_DISKS, the rest are listed as unsupported. */
static int test_too_many_disks(void)
{
	char xml[4096] = DOM_OPEN OS_KERNEL "<devices>";
	struct domain_map *m;
	char *msg = NULL, *got;

	for (unsigned int i = 0; i < DOMAIN_MAX_DISKS + 2; i++)
		snprintf(xml + strlen(xml), sizeof(xml) - strlen(xml),
			 "<disk type='file' device='disk'><source file='/d%u'/>"
			 "<target dev='vd%c'/></disk>", i, 'a' + i);
	snprintf(xml + strlen(xml), sizeof(xml) - strlen(xml), "</devices></domain>");
	ASSERT_EQ_INT(parse(xml, &m, &msg), 0);
	ASSERT_EQ_INT(m->n_disks, DOMAIN_MAX_DISKS);
	got = joined_unsupported(m);
	ASSERT_EQ_STR(got, "disk vdi (/d8), disk vdj (/d9)");
	free(got);
	domain_map_free(m);
	return TEST_OK;
}

/* ---- no os/kernel: firmware boot is an error unless --kernel gives one ---- */

struct firmware_row {
	const char *xml;
	const char *firmware;
};

static const struct firmware_row firmware_rows[] = {
	{ DOM("<os><type arch='x86_64'>hvm</type><boot dev='hd'/></os>"), "boot dev='hd'" },
	{ DOM("<os><type>hvm</type><loader type='pflash'>/ovmf.fd</loader><boot dev='cdrom'/>"
	      "<boot dev='hd'/></os>"),
	  "loader /ovmf.fd, boot dev='cdrom', boot dev='hd'" },
	{ DOM("<os firmware='efi'><type>hvm</type></os>"), "firmware 'efi'" },
	{ DOM("<os><type>hvm</type></os>"), "the firmware's default boot order" },
	{ DOM("<os><type>hvm</type><kernel></kernel></os>"), "the firmware's default boot order" },
	{ DOM("<memory>262144</memory>"), "the firmware's default boot order (no <os>)" },
};

static int test_missing_kernel(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(firmware_rows); i++) {
		const struct firmware_row *r = &firmware_rows[i];
		struct domain_flags flags = { 0 };
		struct domain_guest g;
		struct domain_map *m;
		char *msg = NULL;
		int err;

		fprintf(stderr, "row %zu\n", i);
		ASSERT_EQ_INT(parse(r->xml, &m, &msg), 0);
		ASSERT_TRUE(m->kernel == NULL);
		ASSERT_EQ_STR(m->firmware, r->firmware);
		err = domain_map_resolve(m, &flags, &g, &msg);
		ASSERT_EQ_INT(err, -ENOENT);
		ASSERT_TRUE(msg && strstr(msg, "domain 't' has no os/kernel") &&
			    strstr(msg, r->firmware) && strstr(msg, "--kernel") &&
			    !strchr(msg, '\n'));
		free(msg);
		msg = NULL;
		flags.kernel = "/k";
		ASSERT_EQ_INT(domain_map_resolve(m, &flags, &g, &msg), 0);
		free(msg);
		domain_map_free(m);
	}
	return TEST_OK;
}

/* ---- one warning line, or one error with --strict ---- */

static int test_warning_and_strict(void)
{
	static const char xml[] = DOM(OS_KERNEL "<devices><disk type='file' device='disk'>"
				      "<source file='/d.img'/><target dev='vda'/></disk>"
				      "<interface type='user'/></devices>");
	struct domain_flags flags = { 0 };
	struct domain_guest g;
	struct domain_map *m;
	char *msg = NULL;

	ASSERT_EQ_INT(parse(xml, &m, &msg), 0);
	ASSERT_EQ_INT(domain_map_resolve(m, &flags, &g, &msg), 0);
	ASSERT_EQ_STR(msg, "domain 't' has what hvprof does not implement, left out: "
			   "interface user (--strict makes this an error)");
	free(msg);
	flags.strict = true;
	ASSERT_EQ_INT(domain_map_resolve(m, &flags, &g, &msg), -ENOTSUP);
	ASSERT_EQ_STR(msg, "domain 't' has what hvprof does not implement (--strict): "
			   "interface user");
	free(msg);
	domain_map_free(m);

	/* --strict with nothing unsupported: no message at all */
	ASSERT_EQ_INT(parse(DOM(OS_KERNEL), &m, &msg), 0);
	ASSERT_EQ_INT(domain_map_resolve(m, &flags, &g, &msg), 0);
	ASSERT_TRUE(msg == NULL);
	domain_map_free(m);
	return TEST_OK;
}

/* ---- documents that are not a usable domain ---- */

struct bad_row {
	const char *xml;
	int err;
	const char *msg_has;
};

static const struct bad_row bad_rows[] = {
	{ "<domain><name>t</name>", -EBADMSG, "not well-formed (line 1" },
	{ "", -EBADMSG, "not well-formed" },
	{ "<node><domain type='test'><name>t</name></domain></node>", -EBADMSG, "<node>" },
	{ DOM("<os><type>exe</type><init>/bin/sh</init></os>"), -ENOTSUP, "os type 'exe'" },
	{ DOM("<vcpu>0</vcpu>" OS_KERNEL), -EINVAL, "<vcpu>0</vcpu>" },
	{ DOM("<vcpu current='x'>2</vcpu>" OS_KERNEL), -EINVAL, "current='x'" },
	{ DOM("<memory unit='KiB'>lots</memory>" OS_KERNEL), -EINVAL, "lots" },
	{ DOM("<currentMemory unit='parsec'>1</currentMemory>" OS_KERNEL), -EINVAL,
	  "<currentMemory unit='parsec'>" },
};

static int test_bad_documents(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad_rows); i++) {
		struct domain_map *m;
		char *msg = NULL;
		int err = parse(bad_rows[i].xml, &m, &msg);

		if (err != bad_rows[i].err || m || !msg || !strstr(msg, bad_rows[i].msg_has) ||
		    strchr(msg, '\n')) {
			fprintf(stderr, "row %zu: err %d want %d, msg '%s' want '%s'\n", i, err,
				bad_rows[i].err, msg ? msg : "", bad_rows[i].msg_has);
			free(msg);
			domain_map_free(m);
			return TEST_FAIL;
		}
		free(msg);
	}
	return TEST_OK;
}

/* External entities are never loaded: a definition cannot pull host files into the guest. */
static int test_no_external_entities(void)
{
	static const char xml[] =
		"<?xml version='1.0'?><!DOCTYPE domain [<!ENTITY x SYSTEM 'file:///etc/hostname'>]>"
		DOM("<os><type>hvm</type><kernel>/k</kernel><cmdline>a&x;b</cmdline></os>");
	struct domain_map *m;
	char *msg = NULL;

	ASSERT_EQ_INT(parse(xml, &m, &msg), 0);
	ASSERT_EQ_STR(m->cmdline, "ab");
	domain_map_free(m);
	return TEST_OK;
}

/* A whole definition as virt-install and `virsh dumpxml` write it. */
static int test_virsh_dumpxml(void)
{
	static const char xml[] =
		"<domain type='kvm' id='3'>\n"
		"  <name>web1</name>\n"
		"  <uuid>0b9f3b7c-7d53-4a0e-9d3c-2f8e3b1f0a11</uuid>\n"
		"  <metadata><libosinfo:libosinfo "
		"xmlns:libosinfo='http://libosinfo.org/xmlns/libvirt/domain/1.0'>"
		"<libosinfo:os id='http://debian.org/debian/12'/></libosinfo:libosinfo>"
		"</metadata>\n"
		"  <memory unit='KiB'>2097152</memory>\n"
		"  <currentMemory unit='KiB'>1048576</currentMemory>\n"
		"  <vcpu placement='static'>2</vcpu>\n"
		"  <os>\n"
		"    <type arch='x86_64' machine='pc-q35-7.2'>hvm</type>\n"
		"    <kernel>/var/lib/libvirt/boot/vmlinuz-6.1</kernel>\n"
		"    <initrd>/var/lib/libvirt/boot/initrd.img-6.1</initrd>\n"
		"    <cmdline>root=/dev/vda1 console=ttyS0,115200n8</cmdline>\n"
		"    <boot dev='hd'/>\n"
		"  </os>\n"
		"  <features><acpi/><apic/><vmport state='off'/></features>\n"
		"  <cpu mode='host-passthrough' check='none' migratable='on'/>\n"
		"  <clock offset='utc'><timer name='rtc' tickpolicy='catchup'/></clock>\n"
		"  <on_poweroff>destroy</on_poweroff>\n"
		"  <on_reboot>restart</on_reboot>\n"
		"  <on_crash>destroy</on_crash>\n"
		"  <pm><suspend-to-mem enabled='no'/><suspend-to-disk enabled='no'/></pm>\n"
		"  <devices>\n"
		"    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n"
		"    <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
		"<source file='/var/lib/libvirt/images/web1.qcow2'/>"
		"<target dev='vda' bus='virtio'/></disk>\n"
		"    <controller type='usb' index='0' model='qemu-xhci' ports='15'/>\n"
		"    <controller type='pci' index='0' model='pcie-root'/>\n"
		"    <interface type='network'><mac address='52:54:00:6b:3c:58'/>"
		"<source network='default'/><model type='virtio'/></interface>\n"
		"    <serial type='pty'><target type='isa-serial' port='0'>"
		"<model name='isa-serial'/>"
		"</target></serial>\n"
		"    <console type='pty'><target type='serial' port='0'/></console>\n"
		"    <channel type='unix'>"
		"<target type='virtio' name='org.qemu.guest_agent.0'/></channel>\n"
		"    <input type='mouse' bus='ps2'/><input type='keyboard' bus='ps2'/>\n"
		"    <graphics type='spice' autoport='yes'><listen type='address'/></graphics>\n"
		"    <video><model type='virtio' heads='1' primary='yes'/></video>\n"
		"    <memballoon model='virtio'/>\n"
		"    <rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>\n"
		"  </devices>\n"
		"  <seclabel type='dynamic' model='apparmor' relabel='yes'/>\n"
		"</domain>\n";
	struct domain_flags flags = { 0 };
	struct domain_guest g;
	struct domain_map *m;
	char *msg = NULL, *got;

	ASSERT_EQ_INT(parse(xml, &m, &msg), 0);
	ASSERT_EQ_STR(m->name, "web1");
	ASSERT_EQ_STR(m->kernel, "/var/lib/libvirt/boot/vmlinuz-6.1");
	ASSERT_EQ_STR(m->initrd, "/var/lib/libvirt/boot/initrd.img-6.1");
	ASSERT_EQ_STR(m->cmdline, "root=/dev/vda1 console=ttyS0,115200n8");
	ASSERT_EQ_U64(m->mem_bytes, 1ull << 30);
	ASSERT_EQ_INT(m->vcpus, 2);
	ASSERT_TRUE(m->serial_console);
	got = joined_unsupported(m);
	ASSERT_EQ_STR(got, "feature acpi, cpu mode 'host-passthrough', "
			   "interface network (default), "
			   "channel unix (org.qemu.guest_agent.0), graphics spice, video virtio, "
			   "memballoon virtio, rng virtio");
	free(got);
	got = domain_map_join(m->ignored, m->n_ignored);
	ASSERT_EQ_STR(got, "machine 'pc-q35-7.2', os boot dev='hd', clock, on_poweroff, on_reboot, "
			   "on_crash, pm, emulator, controller qemu-xhci, controller pcie-root, "
			   "input mouse, input keyboard, seclabel");
	free(got);
	/* its disk is qcow2: an error that says how to convert it, unless --disk replaces it */
	ASSERT_EQ_INT(domain_map_resolve(m, &flags, &g, &msg), -ENOTSUP);
	ASSERT_TRUE(msg && strstr(msg, "disk vda (/var/lib/libvirt/images/web1.qcow2) is a qcow2 "
				       "image") && strstr(msg, "qemu-img convert -O raw"));
	free(msg);
	flags.disks = true;
	ASSERT_EQ_INT(domain_map_resolve(m, &flags, &g, &msg), 0);
	ASSERT_EQ_INT(g.n_disks, 0);
	ASSERT_EQ_U64(g.mem_mib, 1024);
	ASSERT_EQ_INT(g.cpus, 2);
	ASSERT_TRUE(msg && strstr(msg, "domain 'web1' has what hvprof does not implement, "
				       "left out: feature acpi, "));
	free(msg);
	domain_map_free(m);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "memory units (libvirt rules, default KiB)", test_units },
	{ "memory/currentMemory/vcpu to MiB and vCPUs", test_sizes },
	{ "command-line flags override the domain", test_overrides },
	{ "unsupported and ignored items", test_lists },
	{ "disks: file and block, raw, ro, transient, target order", test_disks },
	{ "more disks than hvprof attaches are listed", test_too_many_disks },
	{ "missing os/kernel (firmware boot)", test_missing_kernel },
	{ "one warning line; --strict makes it an error", test_warning_and_strict },
	{ "documents that are not a usable domain", test_bad_documents },
	{ "external entities are not loaded", test_no_external_entities },
	{ "a virsh dumpxml definition", test_virsh_dumpxml },
};

TEST_MAIN(tests)
