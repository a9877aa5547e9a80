#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build hvprof into ./build (warnings are errors) and the guest images into the cache: the default
# image, then the Debian image (~40 s the first time, cached after; README "The Debian image").
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
	meson setup build -Dwerror=true
fi
meson compile -C build
images/build-image.sh
# Only its own tests need it: without it (e.g. no apt access) they skip and say why.
images/build-image.sh debian ||
	echo "build: the Debian image could not be built (see above): kvm-debian-image will skip" >&2
