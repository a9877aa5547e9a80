// SPDX-License-Identifier: MIT
// Regression runner of a fuzz target without libFuzzer: feeds every regular file of the
// directories (or the files) given on the command line to LLVMFuzzerTestOneInput, in name order.
// Fails when nothing was fed: an empty or missing corpus is an error, not a pass.
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path, size_t *n_run)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fprintf(stderr, "%s: cannot size\n", path);
		fclose(f);
		return -1;
	}
	/* A copy of exactly len bytes, so ASan sees a read past the input as an overflow. */
	buf = malloc(len ? (size_t)len : 1);
	if (!buf || (len && fread(buf, 1, (size_t)len, f) != (size_t)len)) {
		fprintf(stderr, "%s: cannot read\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	fprintf(stderr, "running %s (%ld bytes)\n", path, len);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	(*n_run)++;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, size_t *n_run)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!d) {
		fprintf(stderr, "%s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*names));

			if (!nn) {
				rc = -1;
				break;
			}
			names = nn;
		}
		names[n] = malloc(strlen(dir) + strlen(de->d_name) + 2);
		if (!names[n]) {
			rc = -1;
			break;
		}
		sprintf(names[n], "%s/%s", dir, de->d_name);
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
			rc = run_file(names[i], n_run);
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	size_t n_run = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR|FILE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		int rc;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		rc = S_ISDIR(st.st_mode) ? run_dir(argv[i], &n_run) : run_file(argv[i], &n_run);
		if (rc)
			return 1;
	}
	if (n_run == 0) {
		fprintf(stderr, "no input found: an empty corpus tests nothing\n");
		return 1;
	}
	printf("%zu inputs ran without a crash or a violated invariant\n", n_run);
	return 0;
}
