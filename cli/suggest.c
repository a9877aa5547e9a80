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

int cli_getopt_long(int argc, char *const argv[], const char *shortopts,
		    const struct option *longopts)
{
	const char *bad, *eq, *s, *names[160]; /* far more than a command has */
	char word[SUGGEST_MAX_LEN + 1];
	size_t n = 0, len;
	int c = getopt_long(argc, argv, shortopts, longopts, NULL);

	/* an unrecognized long option: getopt printed it; optopt is 0 and argv[optind - 1]
	 * is the word (ambiguous abbreviations are reported with their candidates already) */
	if (c != '?' || optopt != 0 || optind < 1 || optind > argc)
		return c;
	bad = argv[optind - 1];
	if (strncmp(bad, "--", 2) != 0)
		return c;
	eq = strchr(bad + 2, '=');
	len = eq ? (size_t)(eq - bad - 2) : strlen(bad + 2);
	if (len > SUGGEST_MAX_LEN)
		return c;
	memcpy(word, bad + 2, len);
	word[len] = '\0';
	for (const struct option *o = longopts; o->name; o++) {
		if (!strncmp(o->name, word, len))
			return c; /* a prefix of one: ambiguous, getopt named the candidates */
		if (n < ARRAY_SIZE(names))
			names[n++] = o->name;
	}
	s = cli_suggest(word, names, n);
	if (s)
		fprintf(stderr, "hvprof: did you mean '--%s'?\n", s);
	return c;
}
