// SPDX-License-Identifier: MIT
// Unit tests of the newer outputs: hostile folded input, diff on normalized shares, report
// children and JSON, JSON escaping, speedscope, perf-script, and a pprof round trip through
// protobuf-c's own decoder and zlib.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include <hvprof/profile.h>

#include "profile.pb-c.h"
#include "profile_internal.h"
#include "rec_helpers.h"
#include "test.h"

#define K1 0xffffffff81001000ULL
#define K2 0xffffffff81002000ULL

/* ---------------------------------------------------------------- folded input */

struct folded_case {
	const char *name;
	const char *text;   /* NULL: built by the test (long line, many frames) */
	int err;
	const char *msg;    /* substring of the error line */
	uint64_t total;
	size_t stacks;
};

static const struct folded_case folded_cases[] = {
	{ "plain", "a;b 3\n", 0, NULL, 3, 1 },
	{ "CRLF, blank lines, repeats add up", "a;b 3\r\n\na;b 2\nc 1", 0, NULL, 6, 2 },
	{ "zero count", "a 0\n", 0, NULL, 0, 1 },
	{ "no count", "a;b\n", -EBADMSG, "x:1: no count", 0, 0 },
	{ "count not a number", "ok 1\na;b x3\n", -EBADMSG, "x:2: the count is not", 0, 0 },
	{ "negative count", "a -3\n", -EBADMSG, "x:1: the count is not", 0, 0 },
	{ "decimal count", "a 1.5\n", -EBADMSG, "x:1: the count is not", 0, 0 },
	{ "empty frame", "ok 1\n\na;;b 2\n", -EBADMSG, "x:3: empty frame name", 0, 0 },
	{ "trailing separator", "a; 2\n", -EBADMSG, "x:1: empty frame name", 0, 0 },
	{ "empty stack", " 5\n", -EBADMSG, "x:1: empty stack", 0, 0 },
	{ "count overflow", "a 18446744073709551616\n", -ERANGE, "x:1: the count does not fit",
	  0, 0 },
	{ "largest count", "a 18446744073709551615\n", 0, NULL, UINT64_MAX, 1 },
	{ "total overflow", "a 18446744073709551615\nb 1\n", -ERANGE, "x:2: the total", 0, 0 },
	{ "NUL byte", "a\0b 1\n", -EBADMSG, "x:1: NUL byte", 0, 0 },
	{ "line too long", NULL, -EBADMSG, "x:2: line longer than", 0, 0 },
	{ "too many frames", NULL, -EBADMSG, "x:1: more than 4096 frames", 0, 0 },
};

static int parse_text(const char *text, size_t len, struct profile_stacks **s, char *eb,
		      size_t eblen)
{
	int fd = mem_file_from(text, len), err;

	if (fd < 0)
		return -EIO;
	err = profile_stacks_read_folded(fd, "x", s, eb, eblen);
	close(fd);
	return err;
}

static int test_folded_hostile(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(folded_cases); i++) {
		const struct folded_case *c = &folded_cases[i];
		struct profile_stacks *s = NULL;
		char eb[256] = "", *text = NULL;
		size_t len;
		int err;

		if (c->text) {
			/* "NUL byte" has an embedded NUL: its length is that of the literal */
			len = !strcmp(c->name, "NUL byte") ? 6 : strlen(c->text);
			err = parse_text(c->text, len, &s, eb, sizeof(eb));
		} else if (!strcmp(c->name, "line too long")) {
			len = 4 + PROFILE_FOLDED_MAX_LINE + 1; /* line 2: one byte too long */
			text = malloc(len + 1);
			ASSERT_TRUE(text);
			memcpy(text, "a 1\n", 4);
			memset(text + 4, 'x', len - 4);
			err = parse_text(text, len, &s, eb, sizeof(eb));
		} else {
			/* PROFILE_FOLDED_MAX_FRAMES + 1 frames "f;f;...;f 1" */
			size_t n = PROFILE_FOLDED_MAX_FRAMES + 1;

			len = 2 * n - 1 + 2;
			text = malloc(len + 1);
			ASSERT_TRUE(text);
			for (size_t k = 0; k < n; k++)
				memcpy(text + 2 * k, k + 1 < n ? "f;" : "f ", 2);
			text[len - 1] = '1';
			err = parse_text(text, len, &s, eb, sizeof(eb));
		}
		free(text);
		if (err != c->err || (c->msg && !strstr(eb, c->msg)) ||
		    (!err && (profile_stacks_total(s) != c->total ||
			      profile_stacks_count(s) != c->stacks))) {
			fprintf(stderr, "folded case '%s': err %d (want %d), message \"%s\" (want "
					"\"%s\"), total %llu stacks %zu\n",
				c->name, err, c->err, eb, c->msg ? c->msg : "",
				(unsigned long long)profile_stacks_total(s), profile_stacks_count(s));
			profile_stacks_free(s);
			return TEST_FAIL;
		}
		profile_stacks_free(s);
	}
	return TEST_OK;
}

/* ---------------------------------------------------------------- diff */

struct diff_case {
	const char *name;
	const char *base, *new_;
	uint64_t min_samples; /* 0: default */
	double threshold;     /* < 0: default */
	const char *first_reg; /* expected first regression "kind:name", NULL: none */
	const char *first_imp; /* expected first improvement, NULL: none */
	double worst;          /* expected worst regression (percent, INFINITY new) */
};

static const struct diff_case diff_cases[] = {
	{ "f 60% slower", "main;f 1000\nmain;g 1000\n", "main;f 1600\nmain;g 1000\n", 0, -1,
	  "self:f", "self:g", 23.0769 },
	{ "same shares, other totals (normalized)", "main;f 1000\nmain;g 1000\n",
	  "main;f 3000\nmain;g 3000\n", 0, -1, NULL, NULL, 0 },
	{ "0 vs 9 samples is noise (min-samples 10)", "main;f 5000\n", "main;f 5000\nmain;h 9\n",
	  0, -1, NULL, NULL, 0 },
	{ "a new function with enough samples", "main;f 5000\n", "main;f 5000\nmain;h 300\n", 0,
	  -1, "self:h", "self:f", INFINITY },
	{ "small change under the threshold", "main;f 1000000\nmain;g 1000000\n",
	  "main;f 1020000\nmain;g 1000000\n", 0, 5, NULL, NULL, 0 },
	{ "same change over a 0.5% threshold", "main;f 1000000\nmain;g 1000000\n",
	  "main;f 1020000\nmain;g 1000000\n", 0, 0.5, "self:f", "self:g", 0.990099 },
	{ "+10% on 1000 samples is within noise", "main;f 1000\nmain;g 1000\n",
	  "main;f 1100\nmain;g 1000\n", 0, 0, NULL, NULL, 0 },
	{ "recursion counts once in total", "main;f;f;f 1000\nmain;g 1000\n",
	  "main;f;f;f 1000\nmain;g 1000\n", 0, -1, NULL, NULL, 0 },
};

static int check_first(const struct profile_diff *d, int reg, const char *want)
{
	static const char *const kinds[] = { "self", "total", "stack" };
	const struct profile_diff_entry *e;
	char got[256];
	size_t n;

	e = profile_diff_entries(d, reg, &n);
	if (!want)
		return n == 0 ? 0 : -1;
	if (!n)
		return -1;
	snprintf(got, sizeof(got), "%s:%s", kinds[e[0].kind], e[0].name);
	if (strcmp(got, want)) {
		fprintf(stderr, "first %s: %s, want %s\n", reg ? "regression" : "improvement", got,
			want);
		return -1;
	}
	return (reg ? e[0].delta_pp > 0 : e[0].delta_pp < 0) ? 0 : -1;
}

static int test_diff_table(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(diff_cases); i++) {
		const struct diff_case *c = &diff_cases[i];
		/* the sampling test's rules alone: one run a side has its own factor
		 * (profile-diff-runs) */
		struct profile_diff_options o = { .size = sizeof(o), .min_samples = c->min_samples,
						  .threshold_pct = c->threshold,
						  .run_noise_factor = 1 };
		struct profile_stacks *b = NULL, *n = NULL;
		struct profile_diff *d = NULL;
		double worst;

		ASSERT_EQ_INT(parse_text(c->base, strlen(c->base), &b, NULL, 0), 0);
		ASSERT_EQ_INT(parse_text(c->new_, strlen(c->new_), &n, NULL, 0), 0);
		ASSERT_EQ_INT(profile_diff_compute(b, n, &o, &d), 0);
		worst = profile_diff_worst_regression(d);
		if (check_first(d, 1, c->first_reg) || check_first(d, 0, c->first_imp) ||
		    (isinf(c->worst) ? !isinf(worst) : fabs(worst - c->worst) > 0.001)) {
			fprintf(stderr, "diff case '%s' failed (worst %f, want %f)\n", c->name, worst,
				c->worst);
			return TEST_FAIL;
		}
		profile_diff_free(d);
		profile_stacks_free(b);
		profile_stacks_free(n);
	}
	return TEST_OK;
}

static int test_diff_output(void)
{
	const char *base = "main;f 1000\nmain;g 1000\n", *new_ = "main;f 1600\nmain;g 1000\n";
	struct profile_diff_svg_options so = { .size = sizeof(so), .base_name = "before.data",
					       .new_name = "after.data" };
	struct profile_stacks *b = NULL, *n = NULL;
	struct str_sink txt = { 0 }, js = { 0 }, svg = { 0 };
	struct profile_sink ts = { .write = str_sink_write, .ctx = &txt };
	struct profile_sink jss = { .write = str_sink_write, .ctx = &js };
	struct profile_sink ss = { .write = str_sink_write, .ctx = &svg };
	struct profile_diff_options o = { .size = sizeof(o), .run_noise_factor = 1 };
	struct profile_diff *d = NULL;

	ASSERT_EQ_INT(parse_text(base, strlen(base), &b, NULL, 0), 0);
	ASSERT_EQ_INT(parse_text(new_, strlen(new_), &n, NULL, 0), 0);
	ASSERT_EQ_INT(profile_diff_compute(b, n, &o, &d), 0);
	ASSERT_EQ_INT(profile_diff_write(d, "before.data", "after.data", 0, &ts), 0);
	ASSERT_TRUE(strstr(txt.s, "# BASE: before.data (2000 samples, 2 stacks)\n"));
	ASSERT_TRUE(strstr(txt.s, "# NEW:  after.data (2600 samples, 2 stacks)\n"));
	ASSERT_TRUE(strstr(txt.s, "Regressions (share grew), BASE -> NEW, functions by self share"));
	/* f: 50% -> 61.54%, +11.54 pp, +23.1% */
	ASSERT_TRUE(strstr(txt.s, " 50.00%   61.54%      +11.54       +23.1%"));
	ASSERT_EQ_INT(profile_diff_write(d, "before.data", "after.data", 1, &jss), 0);
	ASSERT_TRUE(strstr(js.s, "{\"direction\":\"BASE -> NEW\",\"base\":{\"name\":\"before.data\""));
	ASSERT_TRUE(strstr(js.s, "\"regressions\":[{\"kind\":\"self\",\"name\":\"f\""));
	ASSERT_EQ_INT(profile_diff_flamegraph(b, n, &so, &ss), 0);
	ASSERT_TRUE(strstr(svg.s, "BASE = before.data (2000 samples), NEW = after.data (2600"));
	/* f grew: red; g shrank: blue; main unchanged (100%): white */
	ASSERT_TRUE(strstr(svg.s, "data-name=\"f\"><title>f: BASE 50.00% (1000) \xe2\x86\x92 NEW "
				  "61.54% (1600)"));
	ASSERT_TRUE(strstr(svg.s, "fill=\"rgb(255,"));
	ASSERT_TRUE(strstr(svg.s, ",255)\" rx"));
	ASSERT_TRUE(strstr(svg.s, "data-name=\"main\"><title>main: BASE 100.00% (1000) \xe2\x86\x92"
				  " NEW 100.00% (1600)") ||
		    strstr(svg.s, "data-name=\"main\"><title>main: BASE 100.00% (2000)"));
	profile_diff_free(d);
	profile_stacks_free(b);
	profile_stacks_free(n);
	free(txt.s);
	free(js.s);
	free(svg.s);
	return TEST_OK;
}

/* ---------------------------------------------------------------- a small recording */

/* main (u 0x401010) calls f (0x401020) x2 and g (0x401030) x1 in "app"; K1 under f x1. */
static int small_profile(struct profile **p, int keep)
{
	static const uint64_t uf[] = { 0x401020, 0x401010, 0 }, ug[] = { 0x401030, 0x401010, 0 };
	static const uint64_t k1[] = { K1, 0 };
	struct hvp_thread t = mk_thread(100, 100, "app", 0);
	struct profile_options po = { .size = sizeof(po), .no_symbols = 1, .keep_samples = keep };
	struct hvp_sample *s = malloc(sizeof(*s));
	struct recfile_writer *w;
	int fd = mem_file(), err;

	if (fd < 0 || !s)
		return -ENOMEM;
	err = recfile_writer_open(fd, &w);
	err = err ? err : recfile_write_meta(w, "counter", "cpu-clock");
	err = err ? err : recfile_write_thread(w, &t);
	mk_sample(s, 100, 100, 3, HVP_WALK_END, 0, NULL, uf);
	s->time_ns = 1500000000ULL;
	err = err ? err : recfile_write_sample(w, s);
	mk_sample(s, 100, 100, 0, HVP_WALK_END, 0, k1, uf);
	s->time_ns = 1500001000ULL;
	s->vcpu = 1;
	err = err ? err : recfile_write_sample(w, s);
	mk_sample(s, 100, 100, 3, HVP_WALK_END, 0, NULL, ug);
	s->time_ns = 1500002000ULL;
	err = err ? err : recfile_write_sample(w, s);
	if (recfile_writer_close(w) && !err)
		err = -EIO;
	free(s);
	lseek(fd, 0, SEEK_SET);
	err = err ? err : profile_load_fd(fd, "small", &po, p, NULL, 0);
	close(fd);
	return err;
}

static int test_report_children(void)
{
	struct profile_report_options ro = { .size = sizeof(ro), .sort = "sym", .children = 1 };
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile *p;

	ASSERT_EQ_INT(small_profile(&p, 0), 0);
	ASSERT_EQ_INT(profile_report(p, &ro, &sink), 0);
	/* main is in every stack (children 100%, self 0); f in 2 of 3; K1 leaf once */
	ASSERT_TRUE(strstr(ss.s, "# Children      Self  Samples  Symbol\n"));
	ASSERT_TRUE(strstr(ss.s, "\n   100.00%     0.00%        0  [.] 0x401010\n"
				 "    66.67%    33.33%        1  [.] 0x401020\n"
				 "    33.33%    33.33%        1  [.] 0x401030\n"
				 "    33.33%    33.33%        1  [k] 0xffffffff81001000\n"));
	free(ss.s);
	ss = (struct str_sink){ 0 };
	ro.format = PROFILE_REPORT_JSON;
	ro.min_percent = 50;
	ASSERT_EQ_INT(profile_report(p, &ro, &sink), 0);
	ASSERT_TRUE(strstr(ss.s, "\"weight\":\"period\",\"total_samples\":3,\"total_weight\":3000000,"));
	ASSERT_TRUE(strstr(ss.s, "\"rows\":[{\"samples\":0,\"weight\":0,\"self\":0.0000,"
				 "\"children_weight\":3000000,\"children\":100.0000,\"sym\":\"0x401010\","
				 "\"kernel\":false},{\"samples\":1,"));
	ASSERT_TRUE(!strstr(ss.s, "0x401030")); /* under --percent-limit 50 */
	ro.format = 7;
	ASSERT_EQ_INT(profile_report(p, &ro, &sink), -EINVAL);
	profile_free(p);
	free(ss.s);
	return TEST_OK;
}

/* ---------------------------------------------------------------- JSON strings */

struct json_case {
	const char *in, *out;
};

static const struct json_case json_cases[] = {
	{ "plain", "\"plain\"" },
	{ "q\"b\\s", "\"q\\\"b\\\\s\"" },
	{ "nl\ntab\tbell\x07", "\"nl\\ntab\\tbell\\u0007\"" },
	{ "caf\xc3\xa9", "\"caf\xc3\xa9\"" },                  /* valid UTF-8 stays */
	{ "bad\xff\xc3", "\"bad\\ufffd\\ufffd\"" },             /* invalid bytes: U+FFFD */
	{ "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"" },        /* a UTF-16 surrogate */
	{ "\xc0\xaf", "\"\\ufffd\\ufffd\"" },                   /* overlong */
};

static int test_json_string(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(json_cases); i++) {
		struct str_sink ss = { 0 };
		struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
		struct outbuf *ob = malloc(sizeof(*ob));

		ASSERT_TRUE(ob);
		outbuf_init(ob, &sink);
		json_string(ob, json_cases[i].in);
		ASSERT_EQ_INT(outbuf_flush(ob), 0);
		free(ob);
		ASSERT_EQ_STR(ss.s, json_cases[i].out);
		free(ss.s);
	}
	return TEST_OK;
}

/* ---------------------------------------------------------------- speedscope, perf-script */

static int test_speedscope(void)
{
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile *p;

	ASSERT_EQ_INT(small_profile(&p, 0), 0);
	ASSERT_EQ_INT(profile_speedscope(p, &sink), 0);
	ASSERT_TRUE(!strncmp(ss.s, "{\"$schema\":\"https://www.speedscope.app/file-format-schema."
				   "json\",", 60));
	ASSERT_TRUE(strstr(ss.s, "{\"type\":\"sampled\",\"name\":\"all (comm as the root frame)\","
				 "\"unit\":\"nanoseconds\",\"startValue\":0,\"endValue\":3000000,"));
	ASSERT_TRUE(strstr(ss.s, "{\"name\":\"0x401020\",\"file\":\"[unknown]\"}"));
	ASSERT_TRUE(strstr(ss.s, "\"weights\":[2000000,1000000]") ||
		    strstr(ss.s, "\"weights\":[1000000,1000000,1000000]") ||
		    strstr(ss.s, "\"weights\":[1000000,2000000]"));
	ASSERT_TRUE(strstr(ss.s, "{\"type\":\"sampled\",\"name\":\"app\","));
	profile_free(p);
	free(ss.s);
	return TEST_OK;
}

static int test_perf_script(void)
{
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	struct profile *p;

	ASSERT_EQ_INT(small_profile(&p, 0), 0);
	ASSERT_EQ_INT(profile_perf_script(p, &sink), -ENODATA);
	profile_free(p);
	ASSERT_EQ_INT(small_profile(&p, 1), 0);
	ASSERT_EQ_INT(profile_perf_script(p, &sink), 0);
	ASSERT_EQ_STR(ss.s,
		      "app 100/100 [000] 1.500000: 1000000 cpu-clock:\n"
		      "\t          401020 0x401020 ([unknown])\n"
		      "\t          401010 0x401010 ([unknown])\n"
		      "\n"
		      "app 100/100 [001] 1.500001: 1000000 cpu-clock:\n"
		      "\tffffffff81001000 0xffffffff81001000 ([kernel.kallsyms])\n"
		      "\t          401020 0x401020 ([unknown])\n"
		      "\t          401010 0x401010 ([unknown])\n"
		      "\n"
		      "app 100/100 [000] 1.500002: 1000000 cpu-clock:\n"
		      "\t          401030 0x401030 ([unknown])\n"
		      "\t          401010 0x401010 ([unknown])\n"
		      "\n");
	profile_free(p);
	free(ss.s);
	return TEST_OK;
}

/* ---------------------------------------------------------------- pprof */

static int test_pprof_roundtrip(void)
{
	struct str_sink ss = { 0 };
	struct profile_sink sink = { .write = str_sink_write, .ctx = &ss };
	Perftools__Profiles__Profile *pp;
	uint64_t samples = 0, nanos = 0;
	unsigned char *raw = malloc(1 << 20);
	uLongf raw_len = 1 << 20;
	struct profile *p;
	z_stream zs = { 0 };

	ASSERT_TRUE(raw);
	ASSERT_EQ_INT(small_profile(&p, 0), 0);
	ASSERT_EQ_INT(profile_pprof(p, &sink), 0);
	ASSERT_TRUE(ss.len > 18 && (unsigned char)ss.s[0] == 0x1f && (unsigned char)ss.s[1] == 0x8b);
	ASSERT_EQ_INT(inflateInit2(&zs, 15 + 16), Z_OK);
	zs.next_in = (unsigned char *)ss.s;
	zs.avail_in = (uInt)ss.len;
	zs.next_out = raw;
	zs.avail_out = (uInt)raw_len;
	ASSERT_EQ_INT(inflate(&zs, Z_FINISH), Z_STREAM_END);
	raw_len = zs.total_out;
	inflateEnd(&zs);
	pp = perftools__profiles__profile__unpack(NULL, raw_len, raw);
	ASSERT_TRUE(pp);
	ASSERT_EQ_STR(pp->string_table[0], "");
	ASSERT_EQ_INT(pp->n_sample_type, 2);
	ASSERT_EQ_STR(pp->string_table[pp->sample_type[0]->type], "samples");
	ASSERT_EQ_STR(pp->string_table[pp->sample_type[1]->unit], "nanoseconds");
	for (size_t i = 0; i < pp->n_sample; i++) {
		samples += (uint64_t)pp->sample[i]->value[0];
		nanos += (uint64_t)pp->sample[i]->value[1];
		ASSERT_EQ_INT(pp->sample[i]->n_label, 3);
		for (size_t j = 0; j < pp->sample[i]->n_location_id; j++) {
			size_t k;

			for (k = 0; k < pp->n_location; k++)
				if (pp->location[k]->id == pp->sample[i]->location_id[j])
					break;
			ASSERT_TRUE(k < pp->n_location); /* no dangling location id */
		}
	}
	ASSERT_EQ_U64(samples, 3);
	ASSERT_EQ_U64(nanos, 3000000);
	/* the leaf of the kernel sample: K1 in the [kernel.kallsyms] mapping */
	for (size_t k = 0; k < pp->n_location; k++) {
		if (pp->location[k]->address != K1)
			continue;
		ASSERT_TRUE(pp->location[k]->mapping_id > 0);
		ASSERT_EQ_STR(pp->string_table[pp->mapping[pp->location[k]->mapping_id - 1]->filename],
			      "[kernel.kallsyms]");
		samples = 0;
	}
	ASSERT_EQ_U64(samples, 0);
	perftools__profiles__profile__free_unpacked(pp, NULL);
	profile_free(p);
	free(raw);
	free(ss.s);
	return TEST_OK;
}

static const struct test_case tests[] = {
	{ "folded input is hostile input", test_folded_hostile },
	{ "diff table", test_diff_table },
	{ "diff text, JSON and SVG", test_diff_output },
	{ "report children and JSON", test_report_children },
	{ "JSON strings", test_json_string },
	{ "speedscope", test_speedscope },
	{ "perf-script", test_perf_script },
	{ "pprof round trip", test_pprof_roundtrip },
};

TEST_MAIN(tests)
