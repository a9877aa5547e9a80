// SPDX-License-Identifier: MIT
// --image NAME|DIR: the bundled images by name (default, debian: in the cache where
// images/build-image.sh puts them, built on first use), and what a disk-rooted image needs at
// boot (docs/guest-interface.md): its disk as /dev/vda, attached as a snapshot so the image is
// never modified, and --add files through the image's small initramfs, whose /init lays them
// over the disk.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hvprof/log.h>
#include <hvprof/vmm.h>

#include "cli.h"

extern char **environ;

/* Images that images/build-image.sh NAME builds. */
static const char *const bundled_images[] = { "default", "debian" };

#ifndef HVPROF_SOURCE_DIR
#define HVPROF_SOURCE_DIR ""
#endif
#ifndef HVPROF_DATA_DIR
#define HVPROF_DATA_DIR ""
#endif

static bool image_is_bundled(const char *name)
{
	for (size_t i = 0; i < sizeof(bundled_images) / sizeof(bundled_images[0]); i++)
		if (!strcmp(name, bundled_images[i]))
			return true;
	return false;
}

/* $HVPROF_CACHE/images/NAME, else $XDG_CACHE_HOME/hvprof/images/NAME, else ~/.cache/... */
static void image_cache_dir(const char *name, char *buf, size_t len)
{
	const char *cache = getenv("HVPROF_CACHE");
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");

	if (cache && cache[0])
		snprintf(buf, len, "%s/images/%s", cache, name);
	else if (xdg && xdg[0])
		snprintf(buf, len, "%s/hvprof/images/%s", xdg, name);
	else
		snprintf(buf, len, "%s/.cache/hvprof/images/%s", home ? home : "/root", name);
}

const char *image_default_dir(char *buf, size_t len)
{
	const char *env = getenv("HVPROF_IMAGE");

	if (env && env[0])
		return env;
	image_cache_dir("default", buf, len);
	return buf;
}

/*
 * The image recipe: $HVPROF_BUILD_IMAGE, else images/build-image.sh of the source tree hvprof was
 * built from, else of its installed data directory. NULL when none is there.
 */
static const char *image_recipe(char *buf, size_t len)
{
	const char *env = getenv("HVPROF_BUILD_IMAGE");
	const char *const dirs[] = { HVPROF_SOURCE_DIR, HVPROF_DATA_DIR };

	if (env && env[0])
		return access(env, X_OK) == 0 ? env : NULL;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (!dirs[i][0])
			continue;
		snprintf(buf, len, "%s/images/build-image.sh", dirs[i]);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	return NULL;
}

/*
 * Run `RECIPE NAME --print-dir`, its progress lines going to our stderr, and take the image
 * directory from the last line of its output. Return: 0 and *@out (malloc'd); -errno, or -EIO
 * when the recipe failed.
 */
static int image_build(const char *recipe, const char *name, char **out)
{
	char *argv[] = { (char *)recipe, (char *)name, "--print-dir", NULL };
	posix_spawn_file_actions_t fa;
	char buf[PATH_MAX + 1], last[PATH_MAX + 1] = "";
	size_t have = 0;
	int pipefd[2], status, err;
	pid_t pid;
	FILE *f;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	err = -posix_spawn_file_actions_init(&fa);
	if (!err)
		err = -posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
	if (!err)
		err = -posix_spawn(&pid, recipe, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (err) {
		close(pipefd[0]);
		return err;
	}
	f = fdopen(pipefd[0], "r");
	if (!f) {
		err = -errno;
		close(pipefd[0]);
	} else {
		while (fgets(buf, sizeof(buf), f)) {
			buf[strcspn(buf, "\n")] = '\0';
			if (buf[0]) {
				snprintf(last, sizeof(last), "%s", buf);
				have = 1;
			}
		}
		fclose(f);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -ECHILD;
	}
	if (err)
		return err;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !have)
		return -EIO;
	*out = strdup(last);
	return *out ? 0 : -ENOMEM;
}

/*
 * The bundled image @name, built now when its directory has no manifest yet; @for_vm: for a
 * guest to boot, so not built (minutes) on a host without KVM.
 */
static int image_bundled(struct guest_opts *g, const char *name, bool for_vm, const char **dir)
{
	char path[PATH_MAX], manifest[PATH_MAX + 16], rbuf[PATH_MAX];
	const char *recipe;
	char *built = NULL;
	int err;

	if (!strcmp(name, "default"))
		snprintf(path, sizeof(path), "%s", image_default_dir(rbuf, sizeof(rbuf)));
	else
		image_cache_dir(name, path, sizeof(path));
	snprintf(manifest, sizeof(manifest), "%s/manifest", path);
	if (access(manifest, R_OK) == 0) {
		g->image_path = strdup(path);
		*dir = g->image_path;
		return g->image_path ? 0 : -ENOMEM;
	}
	if (!strcmp(name, "default") && getenv("HVPROF_IMAGE") && getenv("HVPROF_IMAGE")[0]) {
		char cached[PATH_MAX];

		/* building the bundled one would make another directory an image, unless that is
		 * where $HVPROF_IMAGE points */
		image_cache_dir("default", cached, sizeof(cached));
		if (strcmp(cached, path) != 0) {
			cli_error("HVPROF_IMAGE=%s is not an image directory (no %s): point it at "
				  "one, or unset it for the bundled default image",
				  path, manifest);
			return -ENOENT;
		}
	}
	if (for_vm) {
		/* the VMM opens it so (effective ids): what a guest to boot needs first */
		int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);

		if (fd < 0) {
			err = -errno;
			cli_error("/dev/kvm: %s (%s), so the %s image is not built now (minutes) for a "
				  "guest that could not boot; build it with 'images/build-image.sh "
				  "%s' (kernel-info needs no KVM)",
				  hvp_strerror(err),
				  err == -ENOENT ? "no KVM on this host"
				  : err == -EACCES || err == -EPERM
					  ? "no permission: run as root or as a member of the "
					    "device's group, usually kvm"
					  : "KVM cannot be used",
				  name, name);
			return err;
		}
		close(fd);
	}
	recipe = image_recipe(rbuf, sizeof(rbuf));
	if (!recipe) {
		cli_error("the %s image is not built (no %s) and hvprof has no recipe to build it "
			  "with: run 'images/build-image.sh %s' in hvprof's source tree "
			  "(or set HVPROF_BUILD_IMAGE to that script)",
			  name, manifest, name);
		return -ENOENT;
	}
	/* shown at every log level: the recipe's progress lines follow on stderr */
	fprintf(stderr, "hvprof: the %s image is not built yet: building it now with '%s %s' (a few "
		"minutes, once)\n", name, recipe, name);
	err = image_build(recipe, name, &built);
	if (err) {
		cli_error("building the %s image failed (%s): run '%s %s' to see why", name,
			  err == -EIO ? "see the lines above" : hvp_strerror(err), recipe, name);
		return err;
	}
	g->image_path = built;
	*dir = built;
	return 0;
}

int image_resolve(struct guest_opts *g, const char *arg, bool for_vm, const char **dir)
{
	if (strchr(arg, '/') || !image_is_bundled(arg)) {
		*dir = arg; /* a directory: guest_opts_finish checks it */
		return 0;
	}
	return image_bundled(g, arg, for_vm, dir);
}

/* Put the image's disk first (/dev/vda, the manifest's root=), as a snapshot. */
static int image_attach_disk(struct guest_opts *g)
{
	struct vmm_disk d;
	int err;

	err = guest_disk_append(g, g->m_disk, false, true);
	if (err)
		return err;
	d = g->disks[g->n_disks - 1];
	memmove(&g->disks[1], &g->disks[0], (g->n_disks - 1) * sizeof(g->disks[0]));
	g->disks[0] = d;
	err = vmm_disk_probe(&g->disks[0]); /* logs the reason, naming the file */
	return err;
}

int image_disk_setup(struct guest_opts *g, const char **initrd)
{
	int err;

	if (!g->m_disk || g->dom)
		return 0;
	err = image_attach_disk(g);
	if (err)
		return err;
	if (!g->n_adds || g->initrd)
		return 0;
	if (!g->m_add_initrd || !g->m_add_dir) {
		cli_error("--add: image %s boots from its disk and has no add_initrd/add_dir in its "
			  "manifest to bring the files in",
			  g->image_dir);
		return -EINVAL;
	}
	*initrd = g->m_add_initrd;
	return 0;
}

int image_add_files(struct guest_opts *g)
{
	struct vmm_initramfs_file *files;
	bool under = g->m_disk && g->m_add_dir && !g->initrd && !g->dom;
	int err = 0;

	if (!under)
		return vmm_initramfs_append(&g->initrd_buf, &g->initrd_len, g->adds, g->n_adds);
	/* The add initramfs's /init makes add_dir the upper layer over the disk: GUEST there. */
	files = calloc(g->n_adds, sizeof(*files));
	if (!files)
		return -ENOMEM;
	for (size_t i = 0; i < g->n_adds && !err; i++) {
		char *p;

		files[i].host_path = g->adds[i].host_path;
		if (asprintf(&p, "%s%s", g->m_add_dir, g->adds[i].guest_path) < 0)
			err = -ENOMEM;
		else
			files[i].guest_path = p;
	}
	if (!err)
		err = vmm_initramfs_append(&g->initrd_buf, &g->initrd_len, files, g->n_adds);
	for (size_t i = 0; i < g->n_adds; i++)
		free((char *)files[i].guest_path);
	free(files);
	return err;
}
