// SPDX-License-Identifier: MIT
// An output file named on the command line, checked before the work that fills it.
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hvprof/log.h>

#include "cli.h"

int cli_check_output_path(const char *what, const char *path)
{
	char dir[PATH_MAX];
	struct stat st;
	int err = 0;

	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			err = -EISDIR;
		else if (access(path, W_OK) != 0)
			err = -errno;
	} else if (errno != ENOENT) {
		err = -errno;
	} else if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
		err = -ENAMETOOLONG;
	} else if (access(dirname(dir), W_OK) != 0) {
		err = -errno; /* no such directory, or not ours to write in */
	}
	if (err)
		cli_error("%s: cannot create %s: %s", what, path, hvp_strerror(err));
	return err;
}

int cli_check_output_not_input(const char *what, const char *out, const char *in)
{
	struct stat so, si;

	if (!out || !in || stat(out, &so) != 0 || stat(in, &si) != 0 ||
	    so.st_dev != si.st_dev || so.st_ino != si.st_ino)
		return 0;
	cli_error("%s: the output %s is the input %s: it would be overwritten (name another "
		  "output file)", what, out, in);
	return -EINVAL;
}

int cli_check_input_exists(const char *what, const char *path)
{
	if (access(path, F_OK) == 0 || errno != ENOENT)
		return 0; /* there (or another error, said by the reader with its reason) */
	cli_error("%s: %s: %s (make one with 'hvprof record', or name one: '-i FILE' or FILE)",
		  what, path, hvp_strerror(-ENOENT));
	return -ENOENT;
}

int cli_positional_input(const char *what, int argc, char **argv, int optind, int input_set,
			 const char **input)
{
	if (optind >= argc)
		return 0;
	if (input_set) {
		cli_error("%s: two recordings: -i %s and '%s' (name one)", what, *input,
			  argv[optind]);
		return -EINVAL;
	}
	if (optind + 1 < argc) {
		cli_error("%s: unexpected argument '%s' after the recording '%s' (one recording; "
			  "'hvprof diff' compares two)", what, argv[optind + 1], argv[optind]);
		return -EINVAL;
	}
	*input = argv[optind];
	return 0;
}
