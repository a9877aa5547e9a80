#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The report/export benchmark: writes synthetic recordings with gen-recording (1 M samples over
# 10 k distinct stacks, and 250 k samples over the same 10 k stacks to show that memory follows
# distinct stacks, not samples), then runs bench-export on each. Prints figures; never fails
# on speed. usage: run_bench.sh GEN_RECORDING BENCH_EXPORT SYNTH_USER SYNTH_KERNEL
set -euo pipefail
gen=$1 bench=$2 user=$3 kernel=$4
dir=$(mktemp -d "${TMPDIR:-/tmp}/hvprof-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
for n in 1000000 250000; do
	"$gen" "$dir/rec-$n.data" "$user" "$kernel" --samples "$n" --stacks 10000 --seed 7
	echo "== $n samples, 10000 distinct stacks ($(du -m "$dir/rec-$n.data" | cut -f1) MiB)"
	"$bench" "$dir/rec-$n.data"
done
