/* SPDX-License-Identifier: MIT */
/* For the tests of the code readers (exitwork.c, loopbody.c, exitepilogue.c): a 4 KiB buffer of
 * kernel text at FN that the test fills, read as guest code through gi_kva_read_fn, and the
 * symbol tables and branch encodings the fixtures are made of. */
#ifndef HVPROF_TESTS_CODEFIXTURE_H
#define HVPROF_TESTS_CODEFIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "kimage_internal.h"

/* The KVA of code[0] (our 6.1 test kernel's exit_to_user_mode_prepare). */
#define FN 0xffffffff810760dfull

/* The text at [FN, FN + sizeof(code)); the tests fill it (int3, 0xcc, where nothing is). */
extern uint8_t code[4096];

/* A gi_kva_read_fn over code[]: 0, or -EFAULT for bytes outside [FN, FN + sizeof(code)). */
int read_code(void *ctx, uint64_t kva, void *dst, size_t len);

/* A symbol table of @e[0..@n) (their names strdup'd by the caller, freed here whatever
 * happens), or NULL. The caller frees it with symtab_free. */
struct symtab *symtab_of(struct ksym_entry *e, size_t n);

/* A symbol table of one function, @name, over all of code[]; NULL on failure. */
struct symtab *symtab_one(const char *name);

/* `call rel32` at code[@at] to FN + @target (5 bytes). */
void put_call(size_t at, size_t target);

/* `jmp rel8` at code[@at] to FN + @target (2 bytes; @target within -128..127 of @at + 2). */
void put_jmp8(size_t at, size_t target);

#endif
