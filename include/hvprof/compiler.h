/* SPDX-License-Identifier: MIT */
/* Compiler attributes used across hvprof (GCC/Clang). */
#ifndef HVPROF_COMPILER_H
#define HVPROF_COMPILER_H

#define __must_check __attribute__((warn_unused_result))
#define __printf(a, b) __attribute__((format(printf, a, b)))
#define __unused __attribute__((unused))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif /* HVPROF_COMPILER_H */
