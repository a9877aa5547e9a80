#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run every test: install packages if missing, build (warnings are errors), build the default
# image, run meson's suites (unit, cli, kvm), and end with the line "N passed, N failed, N skipped".
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
python3 - "$top/build/meson-logs/testlog.json" <<'PY'
import json, sys
passed = failed = skipped = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    res = r.get("result")
    if res in ("OK", "EXPECTEDFAIL"):
        passed += 1
    elif res == "SKIP":
        skipped += 1
        out = (r.get("stdout") or "").strip().splitlines()
        why = next((l for l in out if "SKIP" in l or "skip" in l), out[-1] if out else "")
        print(f"skipped: {r['name']}: {why}")
    else:
        failed += 1
        print(f"failed: {r['name']} ({res})")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $rc
