// SPDX-License-Identifier: MIT
// A symbol-rich ELF for synthetic recordings: 256 functions PREFIX_000 .. PREFIX_255 (PREFIX is
// u_fn for the "user executable", k_fn for the "vmlinux"), each a few bytes of real code.
#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)
#define FN(n) \
	__attribute__((noinline, used)) int CAT(PREFIX, n)(int x) { return x + 1##n; }
#define FN10(d) FN(d##0) FN(d##1) FN(d##2) FN(d##3) FN(d##4) FN(d##5) FN(d##6) FN(d##7) FN(d##8) \
	FN(d##9)

FN10(00) FN10(01) FN10(02) FN10(03) FN10(04) FN10(05) FN10(06) FN10(07) FN10(08) FN10(09)
FN10(10) FN10(11) FN10(12) FN10(13) FN10(14) FN10(15) FN10(16) FN10(17) FN10(18) FN10(19)
FN10(20) FN10(21) FN10(22) FN10(23) FN10(24)
FN(250) FN(251) FN(252) FN(253) FN(254) FN(255)

int main(void)
{
	return 0;
}
