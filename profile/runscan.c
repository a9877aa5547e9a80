// SPDX-License-Identifier: MIT
// What a recording is, before it is compared: its samples, its workload window and how it
// ended, read in one pass without symbolizing; and whether it is fit to be a side of a diff.
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hvprof/log.h>

#include "profile_internal.h"

int profile_scan_recording(const char *path, struct profile_scan *out, char *errbuf,
			   size_t errbuf_len)
{
	static const struct profile_scan zero;
	struct window_list *wl;
	struct profile_scan *s;
	struct recfile_reader *r;
	struct recfile_record *rec;
	int ret, err;

	if (!path || !out)
		return -EINVAL;
	err = recfile_reader_open(path, &r, errbuf, errbuf_len);
	if (err)
		return err;
	rec = malloc(sizeof(*rec));
	s = malloc(sizeof(*s));
	wl = calloc(1, sizeof(*wl));
	if (!rec || !s || !wl) {
		ret = -ENOMEM;
		goto out;
	}
	*s = zero;
	while ((ret = recfile_reader_next(r, rec)) == 1) {
		if (rec->type == RECFILE_SAMPLE) {
			s->samples++;
		} else if (rec->type == RECFILE_EVENT) {
			window_add_event(&s->window, &s->has_window, &rec->event);
			window_list_add_event(wl, &rec->event);
		} else if (rec->type == RECFILE_END) { /* the last END wins */
			s->has_end = 1;
			s->end_reason = rec->end.reason;
			s->exit_status = rec->end.exit_status;
		}
	}
	/* A damaged tail is kept as profile_load() keeps it; it is said, not an error here. */
	s->damaged = ret < 0 && ret != -ENOMEM;
	if (ret == -ENOMEM)
		goto out;
	ret = 0;
	s->n_windows = wl->n;
	s->windows_seen = wl->seen;
	memcpy(s->windows, wl->w, wl->n * sizeof(wl->w[0]));
	*out = *s;
out:
	free(wl);
	free(s);
	free(rec);
	recfile_reader_close(r);
	return ret;
}

int profile_scan_window_at(const struct profile_scan *s, size_t idx, uint64_t *start_ns,
			   uint64_t *end_ns)
{
	struct window_list l;

	if (!s || idx >= s->n_windows || s->n_windows > PROFILE_MAX_WINDOWS)
		return -ENOENT;
	/* window_list_range() on the windows around @idx (it needs the next one's start) */
	l.n = idx + 2 <= s->n_windows ? 2 : 1;
	l.w[0] = s->windows[idx];
	if (l.n == 2)
		l.w[1] = s->windows[idx + 1];
	return window_list_range(&l, 0, start_ns, end_ns);
}

int profile_scan_window(const struct profile_scan *s, uint64_t *start_ns, uint64_t *end_ns)
{
	if (!s || !s->has_window)
		return -ENOENT;
	*start_ns = s->window.start_ns;
	*end_ns = s->window.has_end ? s->window.end_ns : UINT64_MAX;
	return 0;
}

int profile_scan_check(const struct profile_scan *s, uint64_t compared, uint64_t min_compared,
		       char *why, size_t why_len)
{
	char tmp[160];

	if (!s)
		return -EINVAL;
	if (!why || !why_len) {
		why = tmp;
		why_len = sizeof(tmp);
	}
	if (!s->samples) {
		snprintf(why, why_len, "no samples at all (did the guest boot? is the workload "
			 "running under --from?)");
		return -ENODATA;
	}
	if (compared < min_compared) {
		snprintf(why, why_len, "%" PRIu64 " samples compared (of %" PRIu64 "), fewer than "
			 "%" PRIu64 ": too few to tell a change from noise", compared, s->samples,
			 min_compared);
		return -ENODATA;
	}
	if (!s->has_end) {
		snprintf(why, why_len, "no END record: the recording was cut short");
		return -ECANCELED;
	}
	switch (s->end_reason) {
	case HVP_END_EXIT_DEVICE:
		if (s->exit_status == 0)
			return 0;
		snprintf(why, why_len, "the guest exited with status %" PRId32 " (the workload "
			 "failed?)", s->exit_status);
		return -ECANCELED;
	case HVP_END_DURATION:
	case HVP_END_DETACHED:
		return 0;
	default:
		snprintf(why, why_len, "the run ended by %s, not a clean guest exit or --duration",
			 recfile_end_reason_name(s->end_reason));
		return -ECANCELED;
	}
}
