// SPDX-License-Identifier: MIT
// ELF fixture for the symtab unit test: known functions, NOTYPE labels and exact boundaries.
// Built by meson at build time; the test never runs it.

/*
 * Hand-laid code so that every boundary is known:
 *   fx_sized:   FUNC, size 16, then 16 bytes that belong to no symbol;
 *   fx_label:   NOTYPE global label without size (like entry_SYSCALL_64), 8 bytes, with a
 *               NOTYPE global alias __fx_label_start (a section marker: the name loses),
 *   fx_inner:   NOTYPE local label without size, 8 bytes, up to
 *   fx_tail:    FUNC, size 4, with a FUNC alias __fx_tail_start declared after it (whichever
 *               order the symbol table has, the name with fewer underscores wins).
 */
__asm__(".text\n"
	".balign 64\n"
	".globl fx_sized\n"
	".type fx_sized, @function\n"
	"fx_sized:\n"
	".fill 15, 1, 0x90\n"
	"ret\n"
	".size fx_sized, 16\n"
	".fill 16, 1, 0xcc\n"
	".globl __fx_label_start\n"
	"__fx_label_start:\n"
	".globl fx_label\n"
	"fx_label:\n"
	".fill 8, 1, 0x90\n"
	"fx_inner:\n"
	".fill 8, 1, 0x90\n"
	".globl fx_tail\n"
	".type fx_tail, @function\n"
	"fx_tail:\n"
	".globl __fx_tail_start\n"
	".type __fx_tail_start, @function\n"
	"__fx_tail_start:\n"
	".fill 3, 1, 0x90\n"
	"ret\n"
	".size fx_tail, 4\n"
	".fill 12, 1, 0xcc\n");

int fx_data_object = 42;

__attribute__((noinline)) int fx_alpha(int x)
{
	return x * 3 + fx_data_object;
}

__attribute__((noinline)) int fx_beta(int x)
{
	return fx_alpha(x) - 1;
}

int main(int argc, char **argv)
{
	(void)argv;
	return fx_beta(argc) > 1000;
}
