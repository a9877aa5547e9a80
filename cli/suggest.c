// SPDX-License-Identifier: MIT
// "Did you mean": the known name closest to a misspelled command or long option.
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <hvprof/compiler.h>

#include "cli.h"

#define SUGGEST_MAX_LEN 64 /* names longer than this are never suggested for */

/* Optimal-string-alignment distance (edits: insert, delete, substitute, swap two neighbours)
 * between @a and @b, both at most SUGGEST_MAX_LEN bytes. */
static unsigned int edit_distance(const char *a, const char *b)
{
	unsigned int d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];
	size_t la = strlen(a), lb = strlen(b);

	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned int)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned int)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			unsigned int cost = a[i - 1] != b[j - 1], v = d[i - 1][j - 1] + cost;

			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb];
}

/* cli_suggest for the first @len bytes of @word (at most SUGGEST_MAX_LEN). */
static const char *cli_suggest_n(const char *word, size_t len, const char *const *names,
				 size_t n)
{
	char w[SUGGEST_MAX_LEN + 1];

	memcpy(w, word, len);
	w[len] = '\0';
	return cli_suggest(w, names, n);
}

const char *cli_suggest(const char *word, const char *const *names, size_t n)
{
	const char *best = NULL;
	unsigned int best_d = 0;
	size_t len = strlen(word);

	if (!len || len > SUGGEST_MAX_LEN)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned int d;

		if (!names[i] || strlen(names[i]) > SUGGEST_MAX_LEN)
			continue;
		d = edit_distance(word, names[i]);
		/* close: at most 2 edits, and fewer than a third of the word */
		if (d <= 2 && 3 * d < len && (!best || d < best_d)) {
			best = names[i];
			best_d = d;
		}
	}
	return best;
}

/* The long option @name (@len bytes) stands for: its exact name, or the one option it
 * abbreviates; NULL when none or several (*@n_prefixed: how many it abbreviates). */
static const struct option *long_named(const struct option *longopts, const char *name,
				       size_t len, size_t *n_prefixed)
{
	const struct option *one = NULL;

	*n_prefixed = 0;
	for (const struct option *o = longopts; o->name; o++) {
		if (strncmp(o->name, name, len) != 0)
			continue;
		if (strlen(o->name) == len)
			return o;
		(*n_prefixed)++;
		one = o;
	}
	return *n_prefixed == 1 ? one : NULL;
}

/* A short option refused: unknown, or its value missing. */
static void bad_short(const char *cmd, const char *shortopts)
{
	const char *sc = optopt > 0 && optopt < 128 ? strchr(shortopts, optopt) : NULL;

	if (sc && sc[1] == ':')
		cli_error("%s: option '-%c' needs a value (see 'hvprof %s --help')", cmd, optopt,
			  cmd);
	else
		cli_error("%s: unknown option '-%c' (see 'hvprof %s --help')", cmd,
			  optopt > 32 && optopt < 127 ? optopt : '?', cmd);
}

/*
 * What getopt_long refused, as one error line of the CLI's own (opterr is 0): @word the
 * argument getopt last stepped past (argv[optind - 1]: the long option refused, or, for a
 * short option inside a cluster, possibly an earlier word), @cmd the command (argv[0]).
 */
static void bad_option(const char *cmd, const char *word, const char *shortopts,
		       const struct option *longopts)
{
	const char *names[160], *eq = NULL, *near; /* far more names than a command has */
	char cand[256] = "";
	size_t n = 0, len = 0, used = 0, n_prefixed = 0;
	const struct option *o = NULL;
	bool is_long = word && !strncmp(word, "--", 2) && word[2];

	if (is_long) {
		eq = strchr(word + 2, '=');
		len = eq ? (size_t)(eq - word - 2) : strlen(word + 2);
		o = long_named(longopts, word + 2, len, &n_prefixed);
		/* a long option refused sets optopt to its val (a missing or an unwanted value)
		 * or 0 (unknown, ambiguous): else the refusal was a short option's */
		is_long = optopt == 0 || (o && o->val == optopt && !o->flag);
	}
	if (!is_long) {
		if (optopt)
			bad_short(cmd, shortopts);
		else
			cli_error("%s: bad option '%s' (see 'hvprof %s --help')", cmd,
				  word ? word : "", cmd);
		return;
	}
	if (o && o->has_arg == required_argument && !eq) {
		cli_error("%s: option '--%s' needs a value (see 'hvprof %s --help')", cmd, o->name,
			  cmd);
		return;
	}
	if (o && o->has_arg == no_argument && eq) {
		cli_error("%s: option '--%s' takes no value (see 'hvprof %s --help')", cmd, o->name,
			  cmd);
		return;
	}
	for (const struct option *p = longopts; p->name; p++) {
		if (n_prefixed > 1 && !strncmp(p->name, word + 2, len)) {
			int k = snprintf(cand + used, sizeof(cand) - used, "%s--%s",
					 used ? ", " : "", p->name);

			if (k > 0 && (size_t)k < sizeof(cand) - used)
				used += (size_t)k;
		}
		if (n < ARRAY_SIZE(names))
			names[n++] = p->name;
	}
	if (used) {
		cli_error("%s: option '%.*s' is ambiguous: %s (see 'hvprof %s --help')", cmd,
			  (int)(len + 2), word, cand, cmd);
		return;
	}
	near = len <= SUGGEST_MAX_LEN ? cli_suggest_n(word + 2, len, names, n) : NULL;
	if (near)
		cli_error("%s: unknown option '%.*s': did you mean '--%s'? (see 'hvprof %s "
			  "--help')", cmd, (int)(len + 2), word, near, cmd);
	else
		cli_error("%s: unknown option '%.*s' (see 'hvprof %s --help')", cmd,
			  (int)(len + 2), word, cmd);
}

int cli_getopt_long(int argc, char *const argv[], const char *shortopts,
		    const struct option *longopts)
{
	int c;

	opterr = 0; /* bad_option says it, in the CLI's form */
	c = getopt_long(argc, argv, shortopts, longopts, NULL);
	if (c == '?')
		bad_option(argc > 0 ? argv[0] : "hvprof",
			   optind >= 1 && optind <= argc ? argv[optind - 1] : NULL, shortopts,
			   longopts);
	return c;
}
