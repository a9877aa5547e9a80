/* SPDX-License-Identifier: MIT */
/* Private to cli/domain*.c: what the domain mapper's files share. */
#ifndef HVPROF_CLI_DOMAIN_INTERNAL_H
#define HVPROF_CLI_DOMAIN_INTERNAL_H

#include <hvprof/compiler.h>

/* A malloc'ed printf-formatted string; NULL if out of memory. */
char *domain_fmt(const char *f, ...) __printf(1, 2);

#endif /* HVPROF_CLI_DOMAIN_INTERNAL_H */
