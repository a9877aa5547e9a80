#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The sanitizer job: build hvprof with ASan+UBSan in ./build-asan and run the unit, cli, fuzz
# and kvm suites there (scripts/test.sh calls it and counts its results in its summary line).
# A sanitizer report fails the job even when it comes from a child process whose exit status a
# test does not look at: ASan and LSan reports are written under build-asan/sanitizer-logs/
# (gcc's UBSan ignores log_path: its reports are found in the test log instead), and any report
# found in either place is a failure, printed here.
# The kvm suite is included: a boot costs about the same with ASan (the guest runs natively; only
# the VMM is instrumented), and the VMM's exit and sampling paths are where guest-controlled
# data is parsed. HVPROF_ASAN_SUITES overrides the suites (e.g. "unit cli fuzz").
# Exit: 0 all passed, 1 a test failed or a sanitizer reported, 2 the build failed.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
build=build-asan
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=true \
		>"$top/$build.setup.log" 2>&1 || { cat "$top/$build.setup.log"; exit 2; }
	rm -f "$top/$build.setup.log"
fi
meson compile -C "$build" >/dev/null || { meson compile -C "$build"; exit 2; }

logs="$top/$build/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan"
export ASAN_OPTIONS="detect_leaks=1:exitcode=86:log_path=$logs/asan"
# hvprof's code stays in the file's mapping, where a report's addresses are read as before (moved
# onto a huge page it would be anonymous memory: cli/hugetext.c)
export HVPROF_HUGE_TEXT=0
suite_args=()
for s in ${HVPROF_ASAN_SUITES:-unit cli fuzz kvm}; do
	suite_args+=(--suite "$s")
done
meson test -C "$build" --print-errorlogs --num-processes 2 "${suite_args[@]}"
rc=$?
shopt -s nullglob
reports=("$logs"/*)
for f in "${reports[@]}"; do
	echo "=== sanitizer report $f"
	cat "$f"
	rc=1
done
pattern='runtime error:|ERROR: (Address|Leak|UndefinedBehavior)Sanitizer'
if grep -qE "$pattern" "$build/meson-logs/testlog.txt" 2>/dev/null; then
	echo "=== sanitizer reports in the test output ($build/meson-logs/testlog.txt):"
	grep -nE -B2 -A12 "$pattern" "$build/meson-logs/testlog.txt" | head -200
	rc=1
fi
exit $rc
