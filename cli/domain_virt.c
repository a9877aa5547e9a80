// SPDX-License-Identifier: MIT
// Fetch a libvirt domain's definition through the libvirt API (read-only connection).
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <libxml/xmlerror.h>

#include "domain.h"

/* libvirt prints every error to stderr unless a handler is set; we return the text instead. */
static void quiet_virt_error(void *data, virErrorPtr err)
{
}

/* libxml2's generic handler prints "I/O warning : failed to load external entity" when the
 * test driver cannot read its file; libvirt reports the same failure as an error. */
static void __printf(2, 3) quiet_xml_error(void *ctx, const char *msg, ...)
{
}

static int __printf(3, 4) fail(char **errmsg, int err, const char *f, ...)
{
	virErrorPtr verr = virGetLastError();
	char *what = NULL;
	va_list ap;
	int n;

	if (!errmsg)
		return err;
	va_start(ap, f);
	n = vasprintf(&what, f, ap);
	va_end(ap);
	if (n < 0)
		return err;
	if (verr && verr->message)
		n = asprintf(errmsg, "%s: %s", what, verr->message);
	else
		n = asprintf(errmsg, "%s", what);
	if (n < 0)
		*errmsg = NULL;
	free(what);
	return err;
}

int domain_fetch_xml(const char *uri, const char *name, char **xml, char **errmsg)
{
	const char *shown = uri ? uri : "the default URI";
	virConnectPtr conn;
	virDomainPtr dom;
	char *desc;
	int err = 0;

	if (errmsg)
		*errmsg = NULL;
	if (!name || !xml)
		return -EINVAL;
	/* Before any other libvirt call: it sets up libvirt's per-thread error object. */
	if (virInitialize() < 0)
		return fail(errmsg, -EIO, "cannot initialise libvirt");
	virSetErrorFunc(NULL, quiet_virt_error);
	xmlSetGenericErrorFunc(NULL, quiet_xml_error);

	/* Read-only is all GetXMLDesc needs, and works where a read-write socket would be
	 * refused (an unprivileged user and qemu:///system). */
	conn = virConnectOpenReadOnly(uri);
	if (!conn)
		return fail(errmsg, -EHOSTUNREACH, "cannot connect to libvirt at %s", shown);
	dom = virDomainLookupByName(conn, name);
	if (!dom) {
		virErrorPtr verr = virGetLastError();

		if (verr && verr->code == VIR_ERR_NO_DOMAIN) {
			err = -ENOENT;
			if (errmsg && asprintf(errmsg, "no libvirt domain named '%s' at %s", name,
					       shown) < 0)
				*errmsg = NULL;
		} else {
			err = fail(errmsg, -EIO, "cannot look up libvirt domain '%s' at %s", name,
				   shown);
		}
		goto out_close;
	}
	/* The persistent definition: what the user defined, without the live state (pty paths,
	 * device aliases) a running domain adds; for a transient domain, its live one. */
	desc = virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_INACTIVE);
	if (!desc) {
		err = fail(errmsg, -EIO, "cannot get the definition of libvirt domain '%s' at %s",
			   name, shown);
		goto out_free_dom;
	}
	*xml = desc;
out_free_dom:
	virDomainFree(dom);
out_close:
	virConnectClose(conn);
	return err;
}
