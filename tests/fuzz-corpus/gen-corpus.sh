#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Regenerate the generated seeds of the fuzz corpora (seed-* files; crash-* files are kept: they
# are regression inputs found by fuzzing). Usage: tests/fuzz-corpus/gen-corpus.sh [BUILD_DIR]
# BUILD_DIR (default build) must have fuzz/fuzz-gen-corpus built; gcc builds the ELF seeds.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
case "$build" in /*) ;; *) build="$top/$build" ;; esac
dir="$top/tests/fuzz-corpus"
targets=(pgwalk unwind btf symtab kallsyms krelocs recfile folded virtq codescan kimage dwarf buildid)
for t in "${targets[@]}"; do
	mkdir -p "$dir/$t"
	rm -f "$dir/$t"/seed-*
done
"$build/fuzz/fuzz-gen-corpus" "$dir"

# ELF seeds for the symtab target: a static executable without libc (symtab, build-id, PT_LOAD),
# an object file (symbols, no program headers) and its stripped twin (.dynsym-less: -ENODATA).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/tiny.c" <<'C'
static int helper(int x) { return x * 3 + 1; }
int counter;
int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += helper(i); return s; }
void _start(void) { counter = work(10); for (;;) __asm__ volatile("hlt"); }
C
gcc -O1 -fno-inline -fno-pie -no-pie -nostdlib -static -Wl,--build-id=sha1 -Wl,-n -Wl,--no-warn-rwx-segments \
	-o "$tmp/tiny" "$tmp/tiny.c"
gcc -O1 -fno-inline -c -o "$tmp/tiny.o" "$tmp/tiny.c"
cp "$tmp/tiny" "$dir/symtab/seed-exec"
cp "$tmp/tiny.o" "$dir/symtab/seed-object.o"
strip -o "$dir/symtab/seed-stripped" "$tmp/tiny"
# Kernel text for the codescan target (fuzz/fuzz_codescan.c: a 32-byte header, then the text),
# assembled with GNU as from the shapes of the generic entry code: 6.1's loop inlined into
# exit_to_user_mode_prepare, 6.12's copies in each exit path, a paravirt loop, a loop with a
# static key's site, a handler's epilogue, and the iretq branches of 6.1 and 6.12.
# hdr FLAGS NLABELS HEAD P1 P2 S IRET JT PV [LABEL_CODE LABEL_TARGET]...: the header's bytes
# (flags bit 2 with no entries: an empty __jump_table, as in a kernel without static keys, so
# the loops' bodies are computed).
u16() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $((($1 >> 8) & 255)))"; }
hdr() {
	printf "\\x$(printf %02x "$1")\\x$(printf %02x "$2")"
	shift 2
	for v in "$@"; do u16 "$v"; done
	for ((i = $#; i < 15; i++)); do u16 0; done
}
text() { # NAME: assemble $tmp/NAME.s into $tmp/NAME.bin
	as --64 -o "$tmp/$1.o" "$tmp/$1.s"
	objcopy -O binary -j .text "$tmp/$1.o" "$tmp/$1.bin"
}
cat > "$tmp/loop61.s" <<'S'
	.text
prepare:			/* 0x000 exit_to_user_mode_prepare, the loop inlined */
	push %rbp
	mov %rsp,%rbp
	push %r12
	push %rbx
	mov %gs:0x1ac00,%r12
	mov (%r12),%rbx
	test $0x2300e,%ebx
	je 3f
1:	sti
	test $0x8,%bl
	je 2f
	call work
2:	and $0x2,%bl
	je 4f
	lock andb $0xfd,(%r12)
	mov 0x600(%r12),%rax
	test %rax,%rax
	je 4f
	call work
4:	cli
	mov (%r12),%rbx
	test $0x2300e,%ebx
	jne 1b
3:	pop %rbx
	pop %r12
	pop %rbp
	ret
	.org 0x100, 0xcc
	call prepare		/* syscall_exit_to_user_mode */
	ret
	.org 0x120, 0xcc
	jmp prepare		/* irqentry_exit_to_user_mode */
	.org 0x140, 0xcc		/* swapgs_restore_regs_and_return_to_usermode */
	pop %r15
	pop %rdi
	swapgs
	jmp 5f
	verw 0x10(%rip)
5:	jmp 6f
	.org 0x180, 0xcc
6:	iretq
	.org 0x200, 0xcc
work:	ret
S
cat > "$tmp/copies612.s" <<'S'
	.text
sysexit:			/* 0x000 syscall_exit_to_user_mode, its own copy */
	push %rbp
	mov %rsp,%rbp
	push %rbx
	mov %gs:0x1ac00,%rbx
	call work		/* the system call's exit work */
	cli			/* prep_cli: then the first read */
	mov (%rbx),%rax
	test $0x2300e,%eax
	jne 1f
2:	pop %rbx
	pop %rbp
	ret
1:	sti
	test $0x8,%al
	je 3f
	call work
3:	test $0x2,%al
	je 4f
	lock andb $0xfd,(%rbx)
4:	cli
	mov (%rbx),%rax
	test $0x2300e,%eax
	jne 1b
	jmp 2b
	.org 0x100, 0xcc		/* irqentry_exit_to_user_mode, its own copy */
	push %rbp
	mov %rsp,%rbp
	push %r12
	mov %gs:0x1ac00,%r12
	mov (%r12),%rax
	test $0x2300e,%eax
	jne 1f
2:	pop %r12
	pop %rbp
	ret
1:	sti
	call work
	lock andb $0xfd,(%r12)
	cli
	mov (%r12),%rax
	test $0x2300e,%eax
	jne 1b
	jmp 2b
	.org 0x200, 0xcc		/* exit_to_user_mode_loop: the copy nothing calls */
1:	sti
	lock andb $0xfd,(%rdi)
	cli
	mov (%rdi),%rax
	test $0x2300e,%eax
	jne 1b
	ret
	.org 0x300, 0xcc		/* swapgs_restore_regs_and_return_to_usermode */
	pop %rdi
	add $8,%rsp
	swapgs
	nop
	testb $3,8(%rsp)
	jne 7f
	ud2
	.org 0x340, 0xcc
7:	testb $4,0x20(%rsp)
	jne 8f
	iretq
8:	ret
	.org 0x380, 0xcc
work:	ret
S
cat > "$tmp/pv61.s" <<'S'
	.text
prepare:			/* 0x000: the loop headed by pv_ops.irq.irq_enable's call */
	push %rbp
	mov %rsp,%rbp
	push %rbx
	mov %gs:0x1ac00,%rbx
1:	call *pv_enable(%rip)
	call work
	lock andb $0xfd,(%rbx)
	call *pv_disable(%rip)
	mov (%rbx),%rax
	test $0x2300e,%eax
	jne 1b
	pop %rbx
	pop %rbp
	ret
	.org 0x100, 0xcc
	call prepare
	ret
	.org 0x120, 0xcc
	jmp prepare
	.org 0x200, 0xcc
work:	ret
	.org 0x800, 0xcc
pv_disable: .quad 0
pv_enable: .quad 0
S
cat > "$tmp/site.s" <<'S'
	.text
head:	sti			/* 0x000: a static key's site at 0x08 may leave */
	call work
	test $1,%al
site:	xchg %ax,%ax
	lock andb $0xfd,(%rbx)
	cli
	test $2,%ebx
	jne head
out:	ret
	.org 0x100, 0xcc
	call head
	ret
	.org 0x120, 0xcc
	jmp head
	.org 0x200, 0xcc
work:	ret
	.org 0x400, 0xcc		/* __jump_table: code, target, key (relative to each field) */
	.long site - .
	.long out - .
	.quad 0
S
cat > "$tmp/epilogue.s" <<'S'
	.text
	ret			/* 0x000 */
	.org 0x100, 0xcc		/* a handler: its epilogue after irqentry_exit_to_user_mode */
	push %rbx
	call irqexit
	add $0x20,%rsp
	pop %rbx
	ret
	.org 0x120, 0xcc
irqexit:
	ret
S
for s in loop61 copies612 pv61 site epilogue; do text "$s"; done
{ hdr 4 0 0x1c 0x100 0x120 0x140 0x40 0x3f0 0; cat "$tmp/loop61.bin"; } > "$dir/codescan/seed-loop61"
{ hdr 5 0 0x21 0x200 0x100 0x300 0x47 0x3f0 0; cat "$tmp/copies612.bin"; } > "$dir/codescan/seed-copies612"
{ hdr 6 0 0x0e 0x100 0x120 0 0 0x7f0 0x808; cat "$tmp/pv61.bin"; } > "$dir/codescan/seed-pv61"
{ hdr $((4 | 8 | 16)) 1 0 0x100 0x120 0 0 0x400 0 0x08 0x17; cat "$tmp/site.bin"; } \
	> "$dir/codescan/seed-site"
{ hdr 0 0 0 0x100 0x120 0 0 0 0; cat "$tmp/epilogue.bin"; } > "$dir/codescan/seed-epilogue"
# Kernel images for the kimage target: a tiny x86-64 ELF with a banner in .rodata, and bzImages
# (boot protocol 2.15, one setup sector) around it, its payload uncompressed, gzip, xz, zstd,
# lz4 (legacy frame, as the kernel's `lz4 -l`), lzma and bzip2 (all but gzip with the
# decompressed size appended, as Linux's size_append does; gzip's own trailer holds it), each
# followed by an 8-byte relocation table as in the kernel's payload. xz and lzma with a 1 MiB
# dictionary (the kernel's are 32 and 64 MiB, which liblzma allocates whatever the input: the
# tests that open these seeds stay fast).
mkdir -p "$dir/kimage"
# Its .rodata holds the kallsyms seed's tables after the banner, and a .BTF section the BTF seed
# (both made above by fuzz-gen-corpus), so that symbols and structure layouts are found in it.
tail -c +2 "$dir/kallsyms/seed-tables-6.1" > "$tmp/kallsyms.bin"
cp "$dir/btf/seed-full.btf" "$tmp/btf.bin"
cat > "$tmp/kernel.c" <<'C'
const char linux_banner[] = "Linux version 6.1.0-fuzz (seed@hvprof) (gcc) #1 SMP\n";
__asm__(".section .rodata\n.balign 256\n.incbin \"kallsyms.bin\"\n.previous");
__asm__(".section .BTF,\"a\"\n.incbin \"btf.bin\"\n.previous");
void _start(void) { for (;;) __asm__ volatile("hlt"); }
C
gcc -O1 -fno-pie -no-pie -nostdlib -static -Wl,-n -Wl,--no-warn-rwx-segments -Wa,-I"$tmp" \
	-o "$tmp/kernel" "$tmp/kernel.c"
strip "$tmp/kernel"
cp "$tmp/kernel" "$dir/kimage/seed-elf"
le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) \
	$((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
put() { printf "$2" | dd of="$3" bs=1 seek=$(($1)) conv=notrunc status=none; }
bzimage() { # PAYLOAD OUT
	local n
	n=$(stat -c %s "$1")
	head -c 1024 /dev/zero > "$2"
	put 0x1f1 '\x01' "$2"
	put 0x1fe '\x55\xaa' "$2"
	put 0x202 'HdrS' "$2"
	put 0x206 '\x0f\x02' "$2"
	put 0x20e '\x00\x01' "$2"
	put 0x300 '6.1.0-fuzz (seed@hvprof) #1 SMP' "$2"
	put 0x24c "$(le32 "$n")" "$2"
	cat "$1" >> "$2"
}
{ cat "$tmp/kernel"; printf '\x10\x00\x00\x81\x00\x00\x00\x00'; } > "$tmp/vmlinux.bin"
size=$(stat -c %s "$tmp/vmlinux.bin")
bzimage "$tmp/vmlinux.bin" "$dir/kimage/seed-bz-none"
gzip -9 -n -c "$tmp/vmlinux.bin" > "$tmp/pay.gz"
bzimage "$tmp/pay.gz" "$dir/kimage/seed-bz-gzip"
{ xz --check=crc32 --x86 --lzma2=preset=9,dict=1MiB -c "$tmp/vmlinux.bin"; printf "$(le32 "$size")"; } > "$tmp/pay.xz"
bzimage "$tmp/pay.xz" "$dir/kimage/seed-bz-xz"
{ zstd -q -19 -c "$tmp/vmlinux.bin"; printf "$(le32 "$size")"; } > "$tmp/pay.zst"
bzimage "$tmp/pay.zst" "$dir/kimage/seed-bz-zstd"
{ lz4 -q -l -9 -c "$tmp/vmlinux.bin"; printf "$(le32 "$size")"; } > "$tmp/pay.lz4"
bzimage "$tmp/pay.lz4" "$dir/kimage/seed-bz-lz4"
{ lzma --lzma1=preset=9,dict=1MiB -c "$tmp/vmlinux.bin"; printf "$(le32 "$size")"; } > "$tmp/pay.lzma"
bzimage "$tmp/pay.lzma" "$dir/kimage/seed-bz-lzma"
{ bzip2 -9 -c "$tmp/vmlinux.bin"; printf "$(le32 "$size")"; } > "$tmp/pay.bz2"
bzimage "$tmp/pay.bz2" "$dir/kimage/seed-bz-bzip2"
# Patches of the dwarf target's own capture (fuzz/fuzz_dwarf.c: flags, max, cut; then kind,
# pad, where, value): none; the copy cut to 64 bytes; RIP one byte on; RSP 8 bytes up; the
# first stack word replaced by the capture's third; the RBX register made the RSP.
mkdir -p "$dir/dwarf"
printf '\x00\x7f\x00\x00' > "$dir/dwarf/seed-capture"
printf '\x01\x7f\x40\x00' > "$dir/dwarf/seed-cut"
printf '\x00\x7f\x00\x00\x01\x00\x10\x00\x01\x00\x00\x00' > "$dir/dwarf/seed-rip"
printf '\x00\x7f\x00\x00\x02\x00\x07\x00\x08\x00\x00\x00' > "$dir/dwarf/seed-rsp"
printf '\x00\x7f\x00\x00\x03\x00\x20\x00\x02\x00\x00\x00' > "$dir/dwarf/seed-word"
printf '\x00\x07\x00\x00\x02\x00\x03\x00\x00\x00\x00\x00' > "$dir/dwarf/seed-rbx"
# First pages of ELF files for the buildid target: the symtab seeds' executable (a build-id
# note after its headers) and object file (no program headers, no notes).
mkdir -p "$dir/buildid"
head -c 4096 "$dir/symtab/seed-exec" > "$dir/buildid/seed-exec"
head -c 4096 "$dir/symtab/seed-object.o" > "$dir/buildid/seed-object"
ls -l "$dir"/*/seed-* | awk '{ s += $5 } END { print NR " seeds, " s " bytes" }'
