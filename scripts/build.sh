#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build hvprof into ./build (warnings are errors) and the guest images into the cache: the default
# image, then the Debian image (~40 s the first time, cached after; README "The Debian image").
set -euo pipefail
cd "$(dirname "$0")/.."

# The training runs of a profile-guided build: every shape bench-sample times, both call-graph
# modes, and marks of other threads pending (~3 s instrumented). Warm only: the cold modes'
# loops that evict the caches would be the profile's hottest code, and GCC would find little
# of the sample path hot enough to lay out together (.text.hot).
pgo_train() {
	BENCH_SAMPLE_WARM=1 "$1" 2000 dwarf >/dev/null &&
		BENCH_SAMPLE_WARM=1 "$1" 2000 fp >/dev/null &&
		BENCH_SAMPLE_WARM=1 "$1" 500 dwarf 8 >/dev/null
}
# The build directory $1's option $2 (b_pgo: off, generate or use; b_lto: true or false).
build_opt() {
	meson introspect "$1" --buildoptions | python3 -c 'import json, sys
v = next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1])
print(str(v).lower())' "$2"
}

# Profile-guided (README, "The build is profile-guided"): the sample path's code laid out for
# the way it runs. bench-sample is the training: hvprof's real sample path on the unit tests'
# fake kernel, no /dev/kvm needed; then everything is built again with its profile
# (meson.build). HVPROF_PGO=0, or a training that fails: a plain build.
# Link-time optimised as well (README Overhead, "Link-time optimisation"): fewer taken branches
# on the sample path, lower in 19 of 25 pairs of builds booted at once. HVPROF_LTO=0: without.
lto=true
[ "${HVPROF_LTO:-1}" != 0 ] || lto=false
if [ ! -f build/build.ninja ]; then
	if [ "${HVPROF_PGO:-1}" != 0 ]; then
		meson setup build -Dwerror=true -Db_pgo=generate -Db_lto=$lto
	else
		meson setup build -Dwerror=true -Db_lto=$lto
	fi
fi
# a build directory made before, with the other choice of link-time optimisation
[ "$(build_opt build b_lto)" = $lto ] || meson configure build -Db_lto=$lto
# also a build left instrumented by an interrupted run of this script
if [ "$(build_opt build b_pgo)" = generate ]; then
	if [ "${HVPROF_PGO:-1}" = 0 ]; then
		meson configure build -Db_pgo=off
	else
		meson compile -C build bench/bench-sample
		if pgo_train build/bench/bench-sample; then
			meson configure build -Db_pgo=use
		else
			echo "build: the profile-guided training failed (above): a plain build" >&2
			meson configure build -Db_pgo=off
		fi
	fi
fi
meson compile -C build
images/build-image.sh
# Only its own tests need it: without it (e.g. no apt access) they skip and say why.
images/build-image.sh debian ||
	echo "build: the Debian image could not be built (see above): kvm-debian-image will skip" >&2
