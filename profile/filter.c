// SPDX-License-Identifier: MIT
// The sample filters of profile_options (--comm, --pid, --tid, --time, --kernel-only,
// --user-only): parsed and checked once, then asked about each complete sample by the loader.
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/log.h>

#include "profile_internal.h"

#define NS_PER_S 1000000000ull

static void __printf(3, 4) filter_err(char *errbuf, size_t errbuf_len, const char *fmt, ...)
{
	va_list ap;

	if (!errbuf || !errbuf_len)
		return;
	va_start(ap, fmt);
	vsnprintf(errbuf, errbuf_len, fmt, ap);
	va_end(ap);
}

/*
 * The comma list @s cut into items: *@items (malloc'ed, each pointing into *@copy, also
 * malloc'ed) and *@n. Return: 0; -EINVAL an empty item (said in @errbuf as option @opt);
 * -ENOMEM.
 */
static int split_list(const char *opt, const char *s, char **copy, char ***items, size_t *n,
		      char *errbuf, size_t errbuf_len)
{
	size_t cap = 1;
	char *p;

	for (const char *c = s; *c; c++)
		cap += *c == ',';
	*copy = strdup(s);
	*items = calloc(cap, sizeof(**items));
	*n = 0;
	if (!*copy || !*items)
		return -ENOMEM;
	p = *copy;
	for (;;) {
		char *comma = strchr(p, ',');

		if (comma)
			*comma = '\0';
		if (!*p) {
			filter_err(errbuf, errbuf_len, "--%s '%s': %s", opt, s,
				   s[0] ? "empty item in the list" : "empty list");
			return -EINVAL;
		}
		(*items)[(*n)++] = p; /* SAFETY: *n < cap, one item per comma plus one */
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

/* The comma list of ids @s (0..INT32_MAX each) into *@ids, *@n (malloc'ed). */
static int parse_ids(const char *opt, const char *s, int32_t **ids, size_t *n, char *errbuf,
		     size_t errbuf_len)
{
	char *copy = NULL, **items = NULL;
	int err;

	*ids = NULL;
	err = split_list(opt, s, &copy, &items, n, errbuf, errbuf_len);
	if (!err && !(*ids = calloc(*n, sizeof(**ids))))
		err = -ENOMEM;
	for (size_t i = 0; i < *n && !err; i++) {
		uint64_t v = 0;
		const char *c = items[i];

		for (; *c >= '0' && *c <= '9' && v <= INT32_MAX; c++)
			v = v * 10 + (uint64_t)(*c - '0');
		if (*c && v <= INT32_MAX) {
			filter_err(errbuf, errbuf_len, "--%s '%s': not a number", opt, items[i]);
			err = -EINVAL;
		} else if (v > INT32_MAX) {
			filter_err(errbuf, errbuf_len, "--%s '%s': out of range (0 to %d)", opt,
				   items[i], INT32_MAX);
			err = -EINVAL;
		} else {
			(*ids)[i] = (int32_t)v;
		}
	}
	free(items);
	free(copy);
	if (err) {
		free(*ids);
		*ids = NULL;
	}
	return err;
}

/*
 * Seconds [@s, @end) ("12", "1.5", ".25", "3."; at most 9 decimals) into *@ns. Return: 0;
 * -EINVAL not such a number; -ERANGE beyond UINT64_MAX ns.
 */
static int parse_secs(const char *s, const char *end, uint64_t *ns)
{
	uint64_t whole = 0, frac = 0, scale = NS_PER_S;
	const char *c = s;
	int digits = 0;

	for (; c < end && *c >= '0' && *c <= '9'; c++, digits++)
		if (__builtin_mul_overflow(whole, 10, &whole) ||
		    __builtin_add_overflow(whole, (uint64_t)(*c - '0'), &whole))
			return -ERANGE;
	if (c < end && *c == '.')
		for (c++; c < end && *c >= '0' && *c <= '9'; c++, digits++) {
			if (scale == 1)
				return -EINVAL; /* a tenth of a nanosecond */
			scale /= 10;
			frac += (uint64_t)(*c - '0') * scale;
		}
	if (c != end || !digits)
		return -EINVAL;
	if (__builtin_mul_overflow(whole, NS_PER_S, &whole) ||
	    __builtin_add_overflow(whole, frac, ns))
		return -ERANGE;
	return 0;
}

/* "START,END" into @f's time range. */
static int parse_time(struct sample_filter *f, const char *s, char *errbuf, size_t errbuf_len)
{
	const char *comma = strchr(s, ',');
	const char *end = s + strlen(s);
	int err = 0;

	if (!comma || strchr(comma + 1, ',') || (comma == s && !comma[1])) {
		filter_err(errbuf, errbuf_len,
			   "--time '%s': want START,END in seconds since the recording started "
			   "(e.g. 1.5,3 or 2, or ,0.5)", s);
		return -EINVAL;
	}
	f->time_start = 0;
	f->time_end = UINT64_MAX;
	if (comma > s)
		err = parse_secs(s, comma, &f->time_start);
	if (!err && comma[1])
		err = parse_secs(comma + 1, end, &f->time_end);
	if (err == -ERANGE) {
		filter_err(errbuf, errbuf_len, "--time '%s': too large", s);
		return -EINVAL;
	}
	if (err) {
		filter_err(errbuf, errbuf_len,
			   "--time '%s': not a number of seconds (digits, '.', at most 9 decimals)",
			   s);
		return -EINVAL;
	}
	if (f->time_end < f->time_start) {
		filter_err(errbuf, errbuf_len, "--time '%s': END before START", s);
		return -EINVAL;
	}
	f->has_time = 1;
	return 0;
}

/* Append " --@opt @val" (or " --@opt" when @val is NULL) to f->desc. */
static int desc_add(struct sample_filter *f, const char *opt, const char *val)
{
	char *nd;
	int len;

	len = asprintf(&nd, "%s%s--%s%s%s", f->desc ? f->desc : "", f->desc ? " " : "", opt,
		       val ? " " : "", val ? val : "");
	if (len < 0)
		return -ENOMEM;
	free(f->desc);
	f->desc = nd;
	return 0;
}

/* The comm list of @opts into @f. */
static int parse_comms(struct sample_filter *f, const char *s, char *errbuf, size_t errbuf_len)
{
	return split_list("comm", s, &f->comm_buf, &f->comms, &f->n_comms, errbuf, errbuf_len);
}

/*
 * The time range [@start_ns, @end_ns] (a workload window) into @f's time range, which
 * --time may already have narrowed: a sample must be in both. Return: 0; -EINVAL an empty
 * range; -ENOMEM.
 */
static int add_window(struct sample_filter *f, uint64_t start_ns, uint64_t end_ns)
{
	char val[64];

	if (end_ns < start_ns)
		return -EINVAL;
	if (!f->has_time) {
		f->time_start = 0;
		f->time_end = UINT64_MAX;
	}
	f->time_start = start_ns > f->time_start ? start_ns : f->time_start;
	f->time_end = end_ns < f->time_end ? end_ns : f->time_end;
	f->has_time = 1;
	if (end_ns == UINT64_MAX)
		snprintf(val, sizeof(val), "%.3f,", (double)start_ns / 1e9);
	else
		snprintf(val, sizeof(val), "%.3f,%.3f", (double)start_ns / 1e9,
			 (double)end_ns / 1e9);
	return desc_add(f, "window", val);
}

int sample_filter_init(struct sample_filter *f, const struct profile_options *opts,
		       char *errbuf, size_t errbuf_len)
{
	const char *comm = OPT(opts, filter_comm, NULL), *pid = OPT(opts, filter_pid, NULL);
	const char *tid = OPT(opts, filter_tid, NULL), *time = OPT(opts, filter_time, NULL);
	int only = OPT(opts, filter_only, PROFILE_ONLY_ALL);
	int err = 0;

	*f = (struct sample_filter){ .only = only };
	if (only != PROFILE_ONLY_ALL && only != PROFILE_ONLY_KERNEL && only != PROFILE_ONLY_USER) {
		filter_err(errbuf, errbuf_len, "filter_only %d: want 0, 1 (kernel) or 2 (user)",
			   only);
		return -EINVAL;
	}
	if (comm)
		err = parse_comms(f, comm, errbuf, errbuf_len);
	if (!err && comm)
		err = desc_add(f, "comm", comm);
	if (!err && pid)
		err = parse_ids("pid", pid, &f->pids, &f->n_pids, errbuf, errbuf_len);
	if (!err && pid)
		err = desc_add(f, "pid", pid);
	if (!err && tid)
		err = parse_ids("tid", tid, &f->tids, &f->n_tids, errbuf, errbuf_len);
	if (!err && tid)
		err = desc_add(f, "tid", tid);
	if (!err && time)
		err = parse_time(f, time, errbuf, errbuf_len);
	if (!err && time)
		err = desc_add(f, "time", time);
	if (!err && only)
		err = desc_add(f, only == PROFILE_ONLY_KERNEL ? "kernel-only" : "user-only", NULL);
	if (!err && OPT(opts, window_set, 0))
		err = add_window(f, OPT(opts, window_start_ns, (uint64_t)0),
				 OPT(opts, window_end_ns, UINT64_MAX));
	if (err) {
		sample_filter_free(f);
		if (err == -ENOMEM)
			filter_err(errbuf, errbuf_len, "filters: %s", hvp_strerror(err));
		return err;
	}
	f->active = f->desc != NULL;
	return 0;
}

static int has_id(const int32_t *ids, size_t n, int32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

int sample_filter_keep(const struct sample_filter *f, const char *comm, int32_t tid,
		       int32_t tgid, uint64_t time_ns, uint8_t cpl)
{
	int kept = 0;

	if (!f->active)
		return 1;
	if (f->only == PROFILE_ONLY_KERNEL && cpl == 3)
		return 0;
	if (f->only == PROFILE_ONLY_USER && cpl != 3)
		return 0;
	if (f->has_time && (time_ns < f->time_start || time_ns > f->time_end))
		return 0;
	if (f->pids && !has_id(f->pids, f->n_pids, tgid))
		return 0;
	if (f->tids && !has_id(f->tids, f->n_tids, tid))
		return 0;
	if (!f->comms)
		return 1;
	for (size_t i = 0; i < f->n_comms && !kept; i++)
		kept = !strcmp(f->comms[i], comm);
	return kept;
}

void sample_filter_free(struct sample_filter *f)
{
	free(f->comms);
	free(f->comm_buf);
	free(f->pids);
	free(f->tids);
	free(f->desc);
	*f = (struct sample_filter){ 0 };
}

int profile_filter_check(const struct profile_options *opts, char *errbuf, size_t errbuf_len)
{
	struct sample_filter f;
	int err;

	if (!opts)
		return -EINVAL;
	err = sample_filter_init(&f, opts, errbuf, errbuf_len);
	if (!err)
		sample_filter_free(&f);
	return err;
}
