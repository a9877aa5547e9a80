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
targets=(pgwalk unwind btf symtab kallsyms krelocs recfile folded virtq)
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
ls -l "$dir"/*/seed-* | awk '{ s += $5 } END { print NR " seeds, " s " bytes" }'
