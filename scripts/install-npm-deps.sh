#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the npm packages the consumer tests use (speedscope, pprof-format, playwright-core, at
# the versions pinned in tests/consumers/package.json) into tests/consumers/node_modules
# (git-ignored). Skips npm when they are already there. Without npm, says so and exits 0: the
# consumer tests then skip with that reason.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir="$top/tests/consumers"
if ! command -v npm >/dev/null 2>&1; then
	echo "install-npm-deps: npm not found; consumer tests will skip"
	exit 0
fi
need=0
for p in speedscope pprof-format playwright-core; do
	[ -f "$dir/node_modules/$p/package.json" ] || need=1
done
if [ "$need" = 0 ]; then
	echo "install-npm-deps: npm packages present in $dir/node_modules"
	exit 0
fi
echo "install-npm-deps: installing into $dir/node_modules"
# playwright-core drives the system Chromium (/usr/bin/chromium): never download a browser.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
cd "$dir"
npm install --no-audit --no-fund --no-package-lock --ignore-scripts --loglevel=error
