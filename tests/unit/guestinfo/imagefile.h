/* SPDX-License-Identifier: MIT */
/* The default guest image's files for the tests of real kernels. */
#ifndef HVPROF_TESTS_IMAGEFILE_H
#define HVPROF_TESTS_IMAGEFILE_H

#include <stddef.h>

/*
 * test_image_file - the path of @name (vmlinux, vmlinux.btf, System.map, ...) in the image named
 * by $HVPROF_IMAGE_DIR, else in the default image where images/build-image.sh puts it
 * ($HVPROF_CACHE or ~/.cache/hvprof, images/default/), into @path (@size bytes). Return: 0; -1
 * when the file does not exist, after printing "# skip: ..." with the reason (the test skips).
 */
int test_image_file(const char *name, char *path, size_t size);

#endif /* HVPROF_TESTS_IMAGEFILE_H */
