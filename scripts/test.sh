#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run every test: install packages if missing, build (warnings are errors), build the default
# image, run meson's suites (unit, cli, fuzz, kvm, ...), then the sanitizer job
# (scripts/test-asan.sh: the unit, cli, fuzz and kvm suites again under ASan+UBSan in build-asan;
# skipped when arguments select tests, or with HVPROF_NO_ASAN=1), and end with the one line
# "N passed, N failed, N skipped" counting both.
# Tests that need /dev/kvm or the image skip with the reason printed; they never pass silently.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
"$top/scripts/install-deps.sh" || { echo "0 passed, 1 failed"; exit 1; }
"$top/scripts/build.sh" || { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }
# Debian's stock kernels for the guestinfo tests (cached; those tests skip with the reason if absent).
"$top/tests/fixtures/get-stock-kernel.sh" || true
# npm packages of the consumer tests (tests/consumers/node_modules); without them those tests skip
"$top/scripts/install-npm-deps.sh" || echo "install-npm-deps failed: the consumer tests will skip"
meson test -C build --print-errorlogs --num-processes 2 "$@"
rc=$?
asan_rc=none
rm -f "$top/build-asan/meson-logs/testlog.json"
if [ $# -eq 0 ] && [ -z "${HVPROF_NO_ASAN:-}" ]; then
	echo "=== sanitizer job (scripts/test-asan.sh)"
	"$top/scripts/test-asan.sh"
	asan_rc=$?
	[ "$asan_rc" -eq 0 ] || rc=1
fi
python3 - "$top/build/meson-logs/testlog.json" "$top/build-asan/meson-logs/testlog.json" \
	"$asan_rc" <<'PY'
import json, os, sys
passed = failed = skipped = 0
asan_failed = 0
for path, prefix in ((sys.argv[1], ""), (sys.argv[2], "asan: ")):
    if not os.path.exists(path):
        continue
    for line in open(path):
        r = json.loads(line)
        res = r.get("result")
        if res in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif res == "SKIP":
            skipped += 1
            out = (r.get("stdout") or "").strip().splitlines()
            why = next((l for l in out if "SKIP" in l or "skip" in l), out[-1] if out else "")
            print(f"skipped: {prefix}{r['name']}: {why}")
        else:
            failed += 1
            asan_failed += bool(prefix)
            print(f"failed: {prefix}{r['name']} ({res})")
# The sanitizer job failed without a failing test: a build failure or a sanitizer report.
if sys.argv[3] not in ("none", "0") and asan_failed == 0:
    failed += 1
    print(f"failed: asan: sanitizer job (exit {sys.argv[3]}: build failure or sanitizer report)")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $rc
