// SPDX-License-Identifier: MIT
// Libvirt domain XML -> hvprof guest options (docs/howto-libvirt.md has the mapping table).
// Pure: libxml2 XPath over a string, no libvirt, no printing; errors come back as text.
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>

#include "domain.h"
#include "domain_internal.h"

char *domain_fmt(const char *f, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, f);
	n = vasprintf(&s, f, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

/* Append a malloc'ed item (NULL = out of memory) to a list. */
static int list_add(char ***items, size_t *n, char *item)
{
	char **grown;

	if (!item)
		return -ENOMEM;
	grown = realloc(*items, (*n + 1) * sizeof(**items));
	if (!grown) {
		free(item);
		return -ENOMEM;
	}
	grown[(*n)++] = item;
	*items = grown;
	return 0;
}

static void list_free(char **items, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(items[i]);
	free(items);
}

char *domain_map_join(char *const *items, size_t n)
{
	size_t len = 1;
	char *s, *p;

	for (size_t i = 0; i < n; i++)
		len += strlen(items[i]) + 2;
	s = malloc(len);
	if (!s)
		return NULL;
	p = s;
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? ", " : "", items[i]);
	*p = '\0';
	return s;
}

void domain_map_free(struct domain_map *m)
{
	if (!m)
		return;
	free(m->name);
	free(m->kernel);
	free(m->initrd);
	free(m->cmdline);
	free(m->firmware);
	for (size_t i = 0; i < m->n_disks; i++) {
		free(m->disks[i].path);
		free(m->disks[i].target);
		free(m->disks[i].format);
	}
	free(m->disks);
	list_free(m->unsupported, m->n_unsupported);
	list_free(m->ignored, m->n_ignored);
	free(m);
}

/* libxml2 strings are xmlMalloc'ed; the map holds plain malloc'ed ones. */
static char *xml_take(xmlChar *x)
{
	char *s;

	if (!x)
		return NULL;
	s = strdup((const char *)x);
	xmlFree(x);
	return s;
}

/* An attribute as a malloc'ed string; NULL when absent (or out of memory: callers that must
 * tell the two apart check with xmlHasProp first). */
static char *attr(xmlNodePtr n, const char *name)
{
	return n ? xml_take(xmlGetProp(n, BAD_CAST name)) : NULL;
}

static bool attr_is(xmlNodePtr n, const char *name, const char *want)
{
	char *v = attr(n, name);
	bool eq = v && !strcmp(v, want);

	free(v);
	return eq;
}

static bool name_is(xmlNodePtr n, const char *name)
{
	return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

static xmlNodePtr child(xmlNodePtr parent, const char *name)
{
	for (xmlNodePtr c = parent ? parent->children : NULL; c; c = c->next)
		if (name_is(c, name))
			return c;
	return NULL;
}

/* First node that @expr selects relative to @ctx->node, or NULL. */
static xmlNodePtr xp_node(xmlXPathContextPtr ctx, const char *expr)
{
	xmlXPathObjectPtr o = xmlXPathEvalExpression(BAD_CAST expr, ctx);
	xmlNodePtr n = NULL;

	if (o && o->type == XPATH_NODESET && o->nodesetval && o->nodesetval->nodeNr > 0)
		n = o->nodesetval->nodeTab[0];
	xmlXPathFreeObject(o);
	return n;
}

/* Text of the first node @expr selects; *out stays NULL when there is none. */
static int xp_text(xmlXPathContextPtr ctx, const char *expr, char **out)
{
	xmlNodePtr n = xp_node(ctx, expr);

	*out = NULL;
	if (!n)
		return 0;
	*out = xml_take(xmlNodeGetContent(n));
	return *out ? 0 : -ENOMEM;
}

struct parse {
	struct domain_map *m;
	char **errmsg;
};

static int __printf(3, 4) fail(struct parse *p, int err, const char *f, ...)
{
	va_list ap;

	if (p->errmsg) {
		va_start(ap, f);
		if (vasprintf(p->errmsg, f, ap) < 0)
			*p->errmsg = NULL;
		va_end(ap);
	}
	return err;
}

static int unsupported(struct parse *p, char *item)
{
	return list_add(&p->m->unsupported, &p->m->n_unsupported, item);
}

static int ignored(struct parse *p, char *item)
{
	return list_add(&p->m->ignored, &p->m->n_ignored, item);
}

/*
 * libvirt's virScaleInteger: "" = the default scale (KiB for memory); b/byte/bytes = 1; one of
 * k m g t p e alone or followed by "iB" = powers of 1024, followed by "B" = powers of 1000; any
 * case. Returns -EINVAL for anything else.
 */
static int unit_scale(const char *unit, uint64_t *scale)
{
	static const char letters[] = "kmgtpe";
	const char *pos;
	uint64_t base, s = 1;

	if (!unit || !unit[0]) {
		*scale = 1024;
		return 0;
	}
	if (!strcasecmp(unit, "b") || !strcasecmp(unit, "byte") || !strcasecmp(unit, "bytes")) {
		*scale = 1;
		return 0;
	}
	if (!unit[1] || !strcasecmp(unit + 1, "iB"))
		base = 1024;
	else if (tolower((unsigned char)unit[1]) == 'b' && !unit[2])
		base = 1000;
	else
		return -EINVAL;
	pos = strchr(letters, tolower((unsigned char)unit[0]));
	if (!pos)
		return -EINVAL;
	/* At most 1024^6 = 2^60: no overflow. */
	for (const char *l = letters; l <= pos; l++)
		s *= base;
	*scale = s;
	return 0;
}

/* A non-negative decimal integer, surrounding blanks allowed (libvirt's virStrToLong_ullp). */
static int parse_ull(const char *text, unsigned long long *out)
{
	const char *s = text;
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	*out = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	while (isspace((unsigned char)*end))
		end++;
	return *end ? -EINVAL : 0;
}

/* <memory unit='U'>N</memory> and friends, in bytes rounded up to KiB (virDomainParseMemory). */
static int parse_memory(struct parse *p, xmlNodePtr n, uint64_t *bytes)
{
	const char *what = (const char *)n->name;
	char *text = xml_take(xmlNodeGetContent(n));
	char *unit = attr(n, "unit");
	unsigned long long v;
	uint64_t scale, b;
	int err;

	if (!text) {
		err = -ENOMEM;
		goto out;
	}
	err = unit_scale(unit, &scale);
	if (err) {
		err = fail(p, err,
			   "<%s unit='%s'>: not a libvirt unit (b, bytes, KB, k, KiB, MB, M, MiB, "
			   "GB, G, GiB, TB, T, TiB, ...)",
			   what, unit);
		goto out;
	}
	err = parse_ull(text, &v);
	if (err == -ERANGE || (!err && (__builtin_mul_overflow((uint64_t)v, scale, &b) ||
					b > UINT64_MAX - 1023))) {
		err = fail(p, -ERANGE, "<%s unit='%s'>%s</%s>: too large for 64 bits of bytes",
			   what, unit ? unit : "KiB", text, what);
		goto out;
	}
	if (err || v == 0) {
		err = fail(p, -EINVAL, "<%s>%s</%s>: want a positive whole number%s%s", what, text,
			   what, unit ? " of " : "", unit ? unit : " of KiB");
		goto out;
	}
	*bytes = (b + 1023) / 1024 * 1024;
out:
	free(text);
	free(unit);
	return err;
}

static int parse_vcpu(struct parse *p, xmlNodePtr n)
{
	char *text = xml_take(xmlNodeGetContent(n));
	char *current = attr(n, "current");
	char *cpuset = attr(n, "cpuset");
	const char *use = current ? current : text;
	unsigned long long v;
	int err = 0;

	if (!text) {
		err = -ENOMEM;
		goto out;
	}
	if (parse_ull(use, &v) || v == 0 || v > UINT_MAX) {
		err = fail(p, -EINVAL, "<vcpu%s%s%s>%s</vcpu>: want a positive number of vCPUs",
			   current ? " current='" : "", current ? current : "",
			   current ? "'" : "", text);
		goto out;
	}
	p->m->vcpus = (unsigned int)v;
	if (cpuset)
		err = unsupported(p, domain_fmt("vcpu cpuset '%s' (pinning)", cpuset));
out:
	free(text);
	free(current);
	free(cpuset);
	return err;
}

/* "loader /x", "boot dev='hd'": what a domain without os/kernel boots from (takes @what). */
static int add_firmware(struct parse *p, char *what)
{
	char *s;

	if (!what)
		return -ENOMEM;
	if (!p->m->firmware) {
		p->m->firmware = what;
		return 0;
	}
	s = domain_fmt("%s, %s", p->m->firmware, what);
	free(what);
	if (!s)
		return -ENOMEM;
	free(p->m->firmware);
	p->m->firmware = s;
	return 0;
}

static int parse_os(struct parse *p, xmlXPathContextPtr ctx, xmlNodePtr os)
{
	xmlNodePtr type = child(os, "type");
	char *type_text, *s;
	int err = 0;

	type_text = type ? xml_take(xmlNodeGetContent(type)) : NULL;
	if (type && !type_text)
		return -ENOMEM;
	if (type_text && strcmp(type_text, "hvm") != 0) {
		err = fail(p, -ENOTSUP,
			   "os type '%s': hvprof boots hvm guests (a kernel on an x86-64 PC) only",
			   type_text);
		free(type_text);
		return err;
	}
	free(type_text);
	if (type) {
		s = attr(type, "arch");
		if (s && strcmp(s, "x86_64") != 0)
			err = unsupported(p, domain_fmt("os arch '%s' (hvprof runs x86_64)", s));
		free(s);
		s = attr(type, "machine");
		if (!err && s)
			err = ignored(p, domain_fmt("machine '%s'", s));
		free(s);
		if (err)
			return err;
	}
	err = xp_text(ctx, "/domain/os/kernel", &p->m->kernel);
	err = err ?: xp_text(ctx, "/domain/os/initrd", &p->m->initrd);
	err = err ?: xp_text(ctx, "/domain/os/cmdline", &p->m->cmdline);
	if (err)
		return err;
	if (p->m->kernel && !p->m->kernel[0]) {
		free(p->m->kernel);
		p->m->kernel = NULL;
	}
	if (p->m->initrd && !p->m->initrd[0]) {
		free(p->m->initrd);
		p->m->initrd = NULL;
	}
	s = attr(os, "firmware");
	if (s)
		err = p->m->kernel ? unsupported(p, domain_fmt("os firmware '%s'", s))
				   : add_firmware(p, domain_fmt("firmware '%s'", s));
	free(s);
	for (xmlNodePtr c = os->children; c && !err; c = c->next) {
		const char *name = (const char *)c->name;

		if (c->type != XML_ELEMENT_NODE || name_is(c, "type") || name_is(c, "kernel") ||
		    name_is(c, "initrd") || name_is(c, "cmdline"))
			continue;
		if (name_is(c, "boot")) {
			/* With a kernel, libvirt boots it directly whatever the boot order says
			 * (the test driver even adds <boot dev='hd'/> to such domains). */
			s = attr(c, "dev");
			err = p->m->kernel ? ignored(p, domain_fmt("os boot dev='%s'", s ? s : "?"))
					   : add_firmware(p, domain_fmt("boot dev='%s'", s ? s : "?"));
			free(s);
		} else if (name_is(c, "bootmenu") || name_is(c, "bios") || name_is(c, "smbios")) {
			err = ignored(p, domain_fmt("os %s", name));
		} else if (name_is(c, "loader")) {
			s = xml_take(xmlNodeGetContent(c));
			err = p->m->kernel ? unsupported(p, domain_fmt("os loader %s", s ? s : ""))
					   : add_firmware(p, domain_fmt("loader %s", s ? s : ""));
			free(s);
		} else {
			err = unsupported(p, domain_fmt("os %s", name));
		}
	}
	if (!err && !p->m->kernel && !p->m->firmware)
		err = add_firmware(p, strdup("the firmware's default boot order"));
	return err;
}

/* The "model" attribute (rng, watchdog, sound, tpm, memballoon), else "type" (interface,
 * hostdev, graphics, channel), else <model type=...> (video). */
static char *device_kind(xmlNodePtr d)
{
	char *s = attr(d, "model");

	if (!s)
		s = attr(d, "type");
	if (!s)
		s = attr(child(d, "model"), "type");
	return s;
}

/* A PCI address part ("0x03"), or -1. */
static long hex_part(xmlNodePtr a, const char *name)
{
	char *s = attr(a, name), *end;
	long v = -1;

	if (s) {
		v = strtol(s, &end, 0);
		if (end == s || *end || v < 0)
			v = -1;
	}
	free(s);
	return v;
}

/* What the host side of a disk/interface/filesystem/channel is, for the message. */
static char *device_detail(xmlNodePtr d)
{
	static const char *const source_attrs[] = { "file", "dev", "dir", "name", "volume",
						    "network", "bridge", "path" };
	xmlNodePtr src = child(d, "source");
	char *s = NULL;

	if (name_is(d, "hostdev") && src) {
		xmlNodePtr a = child(src, "address");
		long dom = hex_part(a, "domain"), bus = hex_part(a, "bus");
		long slot = hex_part(a, "slot"), fn = hex_part(a, "function");

		if (bus >= 0 && slot >= 0 && fn >= 0)
			return domain_fmt("%04lx:%02lx:%02lx.%lx", dom >= 0 ? dom : 0, bus, slot, fn);
	}
	for (size_t i = 0; src && !s && i < ARRAY_SIZE(source_attrs); i++)
		s = attr(src, source_attrs[i]);
	if (!s && name_is(d, "channel"))
		s = attr(child(d, "target"), "name");
	return s;
}

static int describe_device(struct parse *p, xmlNodePtr d)
{
	const char *name = (const char *)d->name;
	char *noun = NULL, *kind, *detail, *item;

	if (name_is(d, "disk"))
		noun = attr(d, "device");
	kind = name_is(d, "disk") ? attr(child(d, "target"), "dev") : device_kind(d);
	if (kind && !strcmp(kind, "none")) {
		/* <video><model type='none'/>, <audio type='none'>, <memballoon model='none'>:
		 * the domain asks for no such device, and hvprof has none. */
		free(kind);
		free(noun);
		return 0;
	}
	detail = device_detail(d);
	item = domain_fmt("%s%s%s%s%s%s", noun ? noun : name, kind ? " " : "", kind ? kind : "",
		   detail ? " (" : "", detail ? detail : "", detail ? ")" : "");
	free(noun);
	free(kind);
	free(detail);
	return unsupported(p, item);
}

/*
 * A <disk> hvprof attaches: type 'file' or 'block', device 'disk' (libvirt's default), with a
 * source, and room left (DOMAIN_MAX_DISKS). Anything else (cdrom, floppy, lun, network or
 * volume sources, an empty drive) is listed as unsupported. The driver's format is kept for
 * domain_map_resolve to judge.
 */
static int parse_disk(struct parse *p, xmlNodePtr d)
{
	char *type = attr(d, "type"), *device = attr(d, "device"), *path = NULL;
	bool attach = type && (!strcmp(type, "file") || !strcmp(type, "block")) &&
		      (!device || !strcmp(device, "disk")) &&
		      p->m->n_disks < DOMAIN_MAX_DISKS;
	struct domain_disk *grown, *k;

	if (attach)
		path = attr(child(d, "source"), !strcmp(type, "file") ? "file" : "dev");
	free(type);
	free(device);
	if (!path || !path[0]) {
		free(path);
		return describe_device(p, d);
	}
	grown = realloc(p->m->disks, (p->m->n_disks + 1) * sizeof(*grown));
	if (!grown) {
		free(path);
		return -ENOMEM;
	}
	p->m->disks = grown;
	k = &grown[p->m->n_disks++];
	memset(k, 0, sizeof(*k));
	k->path = path;
	k->target = attr(child(d, "target"), "dev");
	k->format = attr(child(d, "driver"), "type");
	if (k->format && !strcmp(k->format, "raw")) {
		free(k->format);
		k->format = NULL;
	}
	k->readonly = child(d, "readonly") != NULL;
	k->transient = child(d, "transient") != NULL;
	return 0;
}

/* Target order, as the guest would number them: virtio targets first (vda < ... < vdz < vdaa),
 * then the other buses' (sda, hda...), then disks without a target. */
static int disk_cmp(const void *a, const void *b)
{
	const struct domain_disk *x = a, *y = b;
	bool vx = x->target && !strncmp(x->target, "vd", 2);
	bool vy = y->target && !strncmp(y->target, "vd", 2);
	size_t lx = x->target ? strlen(x->target) : SIZE_MAX;
	size_t ly = y->target ? strlen(y->target) : SIZE_MAX;

	if (vx != vy)
		return vx ? -1 : 1;
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return x->target && y->target ? strcmp(x->target, y->target) : 0;
}

/* The target port of a serial/console, or @dflt when not given. */
static long target_port(xmlNodePtr d, long dflt)
{
	char *s = attr(child(d, "target"), "port");
	long port = dflt;

	if (s) {
		char *end;

		port = strtol(s, &end, 10);
		if (end == s || *end)
			port = -1;
	}
	free(s);
	return port;
}

static int parse_devices(struct parse *p, xmlNodePtr devices)
{
	long n_serial = 0;
	int err = 0;

	for (xmlNodePtr d = devices->children; d && !err; d = d->next) {
		if (d->type != XML_ELEMENT_NODE)
			continue;
		if (name_is(d, "serial")) {
			/* libvirt numbers serial ports in order when target/@port is absent. */
			long port = target_port(d, n_serial++);

			if (port == 0)
				p->m->serial_console = true;
			else
				err = unsupported(p, domain_fmt("serial port %ld", port));
		} else if (name_is(d, "console")) {
			char *ttype = attr(child(d, "target"), "type");

			if (!ttype || !strcmp(ttype, "serial")) {
				/* An alias of serial port N: port 0 is hvprof's ttyS0, another
				 * port is already listed with its <serial>. */
				if (target_port(d, 0) == 0)
					p->m->serial_console = true;
			} else {
				err = unsupported(p, domain_fmt("console %s", ttype));
			}
			free(ttype);
		} else if (name_is(d, "emulator") || name_is(d, "controller") ||
			   name_is(d, "input")) {
			/* Buses and input devices of the PC hvprof replaces: each device that
			 * would sit on a controller is listed on its own. */
			char *kind = device_kind(d);

			err = ignored(p, domain_fmt("%s%s%s", (const char *)d->name, kind ? " " : "",
					     kind ? kind : ""));
			free(kind);
		} else if (name_is(d, "disk")) {
			err = parse_disk(p, d);
		} else {
			err = describe_device(p, d);
		}
	}
	if (!err && p->m->n_disks > 1)
		qsort(p->m->disks, p->m->n_disks, sizeof(*p->m->disks), disk_cmp);
	return err;
}

/* <features>: hvprof has an in-kernel local APIC and IOAPIC, and long mode implies PAE. */
static int parse_features(struct parse *p, xmlNodePtr features)
{
	int err = 0;

	for (xmlNodePtr f = features->children; f && !err; f = f->next) {
		if (f->type != XML_ELEMENT_NODE || name_is(f, "apic") || name_is(f, "pae"))
			continue;
		if (attr_is(f, "state", "off"))
			continue; /* asked off, and hvprof does not have it */
		err = unsupported(p, domain_fmt("feature %s", (const char *)f->name));
	}
	return err;
}

static int parse_cpu(struct parse *p, xmlNodePtr cpu)
{
	char *mode = attr(cpu, "mode");
	char *model = xml_take(child(cpu, "model") ? xmlNodeGetContent(child(cpu, "model")) : NULL);
	int err;

	err = unsupported(p, domain_fmt("cpu%s%s%s%s%s%s%s%s", mode ? " mode '" : "", mode ? mode : "",
				 mode ? "'" : "", model ? " model '" : "", model ? model : "",
				 model ? "'" : "", child(cpu, "topology") ? " topology" : "",
				 child(cpu, "numa") ? " numa" : ""));
	free(mode);
	free(model);
	return err;
}

static int parse_domain(struct parse *p, xmlXPathContextPtr ctx, xmlNodePtr root)
{
	uint64_t mem = 0, cur = 0;
	int err = 0;

	err = xp_text(ctx, "/domain/name", &p->m->name);
	for (xmlNodePtr c = root->children; c && !err; c = c->next) {
		const char *name = (const char *)c->name;

		if (c->type != XML_ELEMENT_NODE)
			continue;
		if (name_is(c, "name") || name_is(c, "uuid") || name_is(c, "genid") ||
		    name_is(c, "title") || name_is(c, "description") || name_is(c, "metadata"))
			continue; /* identity, not the guest */
		if (name_is(c, "memory"))
			err = parse_memory(p, c, &mem);
		else if (name_is(c, "currentMemory"))
			err = parse_memory(p, c, &cur);
		else if (name_is(c, "vcpu"))
			err = parse_vcpu(p, c);
		else if (name_is(c, "os"))
			err = parse_os(p, ctx, c);
		else if (name_is(c, "devices"))
			err = parse_devices(p, c);
		else if (name_is(c, "features"))
			err = parse_features(p, c);
		else if (name_is(c, "cpu"))
			err = parse_cpu(p, c);
		else if (name_is(c, "clock") || name_is(c, "on_poweroff") ||
			 name_is(c, "on_reboot") || name_is(c, "on_crash") ||
			 name_is(c, "on_lockfailure") || name_is(c, "pm") ||
			 name_is(c, "seclabel") || name_is(c, "resource") || name_is(c, "idmap"))
			err = ignored(p, strdup(name));
		else
			err = unsupported(p, strdup(name));
	}
	if (err)
		return err;
	if (!child(root, "os"))
		err = add_firmware(p, strdup("the firmware's default boot order (no <os>)"));
	/* libvirt clamps currentMemory to memory; the balloon holds the difference. */
	p->m->mem_bytes = cur && (!mem || cur < mem) ? cur : mem;
	return err;
}

static int __printf(2, 3) fail_doc(char **errmsg, const char *f, ...)
{
	va_list ap;

	if (errmsg) {
		va_start(ap, f);
		if (vasprintf(errmsg, f, ap) < 0)
			*errmsg = NULL;
		va_end(ap);
	}
	return -EBADMSG;
}

int domain_map_parse(const char *xml, size_t len, struct domain_map **out, char **errmsg)
{
	xmlParserCtxtPtr pctx;
	xmlXPathContextPtr ctx = NULL;
	xmlDocPtr doc;
	xmlNodePtr root;
	struct parse p = { .errmsg = errmsg };
	int err;

	if (errmsg)
		*errmsg = NULL;
	if (!xml || !out)
		return -EINVAL;
	if (len > INT_MAX)
		return fail_doc(errmsg, "domain XML of %zu bytes: too large", len);
	pctx = xmlNewParserCtxt();
	if (!pctx)
		return -ENOMEM;
	/* No network, no entity expansion, no DTD loading; errors come back, never printed. */
	doc = xmlCtxtReadMemory(pctx, xml, (int)len, "domain.xml", NULL,
				XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (!doc) {
		const xmlError *e = xmlCtxtGetLastError(pctx);
		char *msg = e && e->message ? strdup(e->message) : NULL;

		if (msg)
			msg[strcspn(msg, "\n")] = '\0';
		err = fail_doc(errmsg, "domain XML is not well-formed (line %d: %s)",
				 e ? e->line : 0, msg ? msg : "parse error");
		free(msg);
		xmlFreeParserCtxt(pctx);
		return err;
	}
	xmlFreeParserCtxt(pctx);
	root = xmlDocGetRootElement(doc);
	if (!root || !name_is(root, "domain")) {
		err = fail_doc(errmsg, "the XML's root element is <%s>, not <domain>",
				 root ? (const char *)root->name : "");
		goto out;
	}
	p.m = calloc(1, sizeof(*p.m));
	ctx = xmlXPathNewContext(doc);
	if (!p.m || !ctx) {
		err = -ENOMEM;
		goto out;
	}
	err = parse_domain(&p, ctx, root);
	if (!err) {
		*out = p.m;
		p.m = NULL;
	}
out:
	domain_map_free(p.m);
	xmlXPathFreeContext(ctx);
	xmlFreeDoc(doc);
	return err;
}
