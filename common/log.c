// SPDX-License-Identifier: MIT
// The log sink and level filter shared by every hvprof component.
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <hvprof/log.h>

static hvp_log_fn log_fn;
static enum hvp_log_level log_level = HVP_LOG_WARN;
static unsigned int log_debug_mask;

void hvp_log_set_fn(hvp_log_fn fn)
{
	log_fn = fn;
}

void hvp_log_set_level(enum hvp_log_level level)
{
	log_level = level;
}

void hvp_log_set_debug_mask(unsigned int mask)
{
	log_debug_mask = mask;
}

int hvp_log_enabled(enum hvp_log_level level, unsigned int cat)
{
	if (!log_fn || level > log_level)
		return 0;
	if (level == HVP_LOG_DEBUG && !(cat & log_debug_mask))
		return 0;
	return 1;
}

void hvp_log(enum hvp_log_level level, unsigned int cat, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!hvp_log_enabled(level, cat))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_fn(level, msg);
}

const char *hvp_strerror(int err)
{
	if (err < 0)
		err = -err;
	/* strerror() of glibc returns static strings for known values and is MT-safe for them. */
	return strerror(err);
}
