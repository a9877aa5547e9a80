// SPDX-License-Identifier: MIT
// The code readers' fixture (codefixture.h): a buffer of kernel text and its symbols.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codefixture.h"

uint8_t code[4096];

int read_code(void *ctx, uint64_t kva, void *dst, size_t len)
{
	(void)ctx;
	if (kva < FN || len > sizeof(code) || kva - FN > sizeof(code) - len)
		return -EFAULT;
	memcpy(dst, code + (kva - FN), len);
	return 0;
}

struct symtab *symtab_of(struct ksym_entry *e, size_t n)
{
	struct symtab *st = NULL;

	if (symtab_from_entries(e, n, &st) != 0)
		st = NULL;
	for (size_t i = 0; i < n; i++)
		free(e[i].name);
	return st;
}

struct symtab *symtab_one(const char *name)
{
	struct ksym_entry e[2] = { { FN, 'T', strdup(name) },
				   { FN + sizeof(code) - 16, 'T', strdup("after") } };

	return symtab_of(e, 2);
}

void put_call(size_t at, size_t target)
{
	int32_t rel = (int32_t)((int64_t)target - (int64_t)(at + 5));

	code[at] = 0xe8;
	memcpy(code + at + 1, &rel, 4);
}

void put_jmp8(size_t at, size_t target)
{
	code[at] = 0xeb;
	code[at + 1] = (uint8_t)(int8_t)((int64_t)target - (int64_t)(at + 2));
}
