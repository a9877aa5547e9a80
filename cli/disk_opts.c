// SPDX-License-Identifier: MIT
// --disk FILE[,ro][,snapshot] and --root DEV of run and record: the guest's virtio-blk disks
// (vda, vdb, ... in order), checked before anything boots so a bad disk is one clear line.
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/log.h>

#include "cli.h"

/* Whether @w looks like an option word (ro, cache=none, format=raw) rather than a file name. */
static bool is_option_word(const char *w, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!islower((unsigned char)w[i]) && !isdigit((unsigned char)w[i]) &&
		    w[i] != '=' && w[i] != '_' && w[i] != '-')
			return false;
	return true;
}

int guest_disk_append(struct guest_opts *g, const char *path, bool readonly, bool snapshot)
{
	struct vmm_disk *n;
	char *copy;

	if (g->n_disks >= VMM_MAX_DISKS) {
		cli_error("disk %s: at most %d disks (vda to vd%c)", path, VMM_MAX_DISKS,
			  'a' + VMM_MAX_DISKS - 1);
		return -EINVAL;
	}
	copy = strdup(path);
	n = realloc(g->disks, (g->n_disks + 1) * sizeof(*n));
	if (n)
		g->disks = n;
	if (!copy || !n) {
		free(copy);
		return -ENOMEM;
	}
	g->disks[g->n_disks++] = (struct vmm_disk){ .path = copy, .readonly = readonly,
						    .snapshot = snapshot };
	return 0;
}

int guest_disk_opt(struct guest_opts *g, const char *arg)
{
	bool readonly = false, snapshot = false;
	size_t len = strlen(arg);
	char *path;
	int err;

	/* options come off the end, so a path may itself hold commas */
	for (;;) {
		const char *comma = memrchr(arg, ',', len);
		const char *w = comma ? comma + 1 : NULL;
		size_t wlen = comma ? len - (size_t)(w - arg) : 0;

		if (comma && wlen == 2 && !memcmp(w, "ro", 2)) {
			readonly = true;
		} else if (comma && wlen == 8 && !memcmp(w, "snapshot", 8)) {
			snapshot = true;
		} else if (comma && is_option_word(w, wlen)) {
			cli_error("--disk '%s': unknown option '%.*s' (want FILE[,ro][,snapshot])",
				  arg, (int)wlen, w);
			return -EINVAL;
		} else {
			break;
		}
		len = (size_t)(comma - arg);
	}
	if (len == 0) {
		cli_error("--disk '%s': no file (want FILE[,ro][,snapshot])", arg);
		return -EINVAL;
	}
	path = strndup(arg, len);
	if (!path)
		return -ENOMEM;
	g->disks_set = 1;
	err = guest_disk_append(g, path, readonly, snapshot);
	free(path);
	return err;
}

int guest_root_set(struct guest_opts *g, const char *arg)
{
	if (!arg[0] || strpbrk(arg, " \t\n\"")) {
		cli_error("--root '%s': want a device such as /dev/vda (no spaces or quotes)", arg);
		return -EINVAL;
	}
	g->root = arg;
	return 0;
}

int guest_disks_finish(struct guest_opts *g)
{
	for (size_t i = 0; i < g->n_disks; i++) {
		int err = vmm_disk_probe(&g->disks[i]); /* logs the reason, naming the file */

		if (err)
			return err;
	}
	return 0;
}

void guest_disks_free(struct guest_opts *g)
{
	for (size_t i = 0; i < g->n_disks; i++)
		free((char *)g->disks[i].path);
	free(g->disks);
	g->disks = NULL;
	g->n_disks = 0;
}
