// SPDX-License-Identifier: MIT
// The default guest image's files for the tests of real kernels (imagefile.h).
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "imagefile.h"

int test_image_file(const char *name, char *path, size_t size)
{
	const char *dir = getenv("HVPROF_IMAGE_DIR");
	const char *cache = getenv("HVPROF_CACHE");
	const char *home = getenv("HOME");
	struct stat st;

	if (dir && *dir)
		snprintf(path, size, "%s/%s", dir, name);
	else if (cache && *cache)
		snprintf(path, size, "%s/images/default/%s", cache, name);
	else
		snprintf(path, size, "%s/.cache/hvprof/images/default/%s", home ? home : "/root",
			 name);
	if (stat(path, &st) != 0) {
		printf("# skip: %s does not exist (images/build-image.sh builds it)\n", path);
		return -1;
	}
	return 0;
}

int test_image_config(char *vmlinux, char *btf, struct gi_config *cfg)
{
	if (test_image_file("vmlinux", vmlinux, 4096) || test_image_file("vmlinux.btf", btf, 4096))
		return -1;
	cfg->vmlinux = vmlinux;
	cfg->btf = btf;
	return 0;
}
