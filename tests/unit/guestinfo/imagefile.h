/* SPDX-License-Identifier: MIT */
/* The default guest image's files for the tests of real kernels. */
#ifndef HVPROF_TESTS_IMAGEFILE_H
#define HVPROF_TESTS_IMAGEFILE_H

#include <stddef.h>

#include <hvprof/guestinfo.h>

/*
 * test_image_file - the path of @name (vmlinux, vmlinux.btf, System.map, ...) in the image named
 * by $HVPROF_IMAGE_DIR, else in the default image where images/build-image.sh puts it
 * ($HVPROF_CACHE or ~/.cache/hvprof, images/default/), into @path (@size bytes). Return: 0; -1
 * when the file does not exist, after printing "# skip: ..." with the reason (the test skips).
 */
int test_image_file(const char *name, char *path, size_t size);

/*
 * test_image_config - @cfg for the default image's vmlinux and vmlinux.btf (test_image_file),
 * whose paths go to @vmlinux and @btf (4096 bytes each, the caller's, outliving @cfg's use).
 * Return: 0; -1 when either is missing (the reason printed: the test skips).
 */
int test_image_config(char *vmlinux, char *btf, struct gi_config *cfg);

#endif /* HVPROF_TESTS_IMAGEFILE_H */
