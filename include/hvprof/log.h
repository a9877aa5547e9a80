/* SPDX-License-Identifier: MIT */
/* One log sink for every hvprof component: libraries log through pr_*(), the CLI installs the sink. */
#ifndef HVPROF_LOG_H
#define HVPROF_LOG_H

#include <hvprof/compiler.h>

#ifdef __cplusplus
extern "C" {
#endif

enum hvp_log_level {
	HVP_LOG_ERR = 0,
	HVP_LOG_WARN = 1,
	HVP_LOG_INFO = 2,
	HVP_LOG_DEBUG = 3,
};

/* Debug categories, filtered at run time (hvp_log_set_debug_mask). */
enum hvp_log_cat {
	LOG_GENERAL = 1u << 0,
	LOG_PGWALK = 1u << 1,
	LOG_KSYM = 1u << 2,
	LOG_BTF = 1u << 3,
	LOG_VMM = 1u << 4,
	LOG_EXIT = 1u << 5,
	LOG_RECFILE = 1u << 6,
};

/**
 * hvp_log_fn - the sink: receives one formatted message (no trailing newline).
 * @level: HVP_LOG_*; @msg: NUL-terminated, valid only during the call.
 */
typedef void (*hvp_log_fn)(enum hvp_log_level level, const char *msg);

/**
 * hvp_log_set_fn - install the sink; NULL discards every message (the default).
 * Thread-safety: call before other threads log.
 */
void hvp_log_set_fn(hvp_log_fn fn);

/**
 * hvp_log_set_level - messages above @level are dropped (each level filters on its own:
 * HVP_LOG_WARN passes errors and warnings, not info).
 */
void hvp_log_set_level(enum hvp_log_level level);

/** hvp_log_set_debug_mask - debug categories (enum hvp_log_cat bits) that pass at HVP_LOG_DEBUG. */
void hvp_log_set_debug_mask(unsigned int mask);

/** hvp_log - format and deliver one message; prefer the pr_*() macros. */
void hvp_log(enum hvp_log_level level, unsigned int cat, const char *fmt, ...) __printf(3, 4);

/** hvp_log_enabled - whether a message at @level (and @cat for debug) would be delivered. */
int hvp_log_enabled(enum hvp_log_level level, unsigned int cat);

/**
 * hvp_strerror - text of a negative errno as returned by hvprof functions (thread-safe; the
 * returned string is static).
 */
const char *hvp_strerror(int err);

#ifndef pr_fmt
#define pr_fmt(fmt) fmt
#endif

#define pr_err(fmt, ...) hvp_log(HVP_LOG_ERR, LOG_GENERAL, pr_fmt(fmt), ##__VA_ARGS__)
#define pr_warn(fmt, ...) hvp_log(HVP_LOG_WARN, LOG_GENERAL, pr_fmt(fmt), ##__VA_ARGS__)
#define pr_info(fmt, ...) hvp_log(HVP_LOG_INFO, LOG_GENERAL, pr_fmt(fmt), ##__VA_ARGS__)
#define pr_debug(cat, fmt, ...) hvp_log(HVP_LOG_DEBUG, (cat), pr_fmt(fmt), ##__VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif /* HVPROF_LOG_H */
