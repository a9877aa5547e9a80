#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build hvprof into ./build (warnings are errors) and the default guest image into the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
	meson setup build -Dwerror=true
fi
meson compile -C build
images/build-image.sh
