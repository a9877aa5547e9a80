#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install what hvprof needs to build, build its guest image and run its tests (Debian 12 packages
# only). Skips apt when everything is already there. Needs root (or sudo) for apt-get.
set -euo pipefail
pkgs=(meson ninja-build pkg-config gcc libc6-dev libelf-dev libdw-dev libbpf-dev libcapstone-dev
      zlib1g-dev liblzma-dev libzstd-dev liblz4-dev libbz2-dev libarchive-dev python3 linux-source-6.1 busybox-static dwarves bc flex bison lz4
      libssl-dev cpio xz-utils file patch make libvirt-dev libxml2-dev libseccomp-dev)
# the Debian image (images/debian/build.sh): its userland, its disk, distribution build flags
pkgs+=(mmdebstrap e2fsprogs dpkg-dev)
# user frames: files read out of guest disk images (libext2fs), by build-id (libdebuginfod)
pkgs+=(libext2fs-dev libdebuginfod-dev)
# pprof export (protobuf-c) and the consumer tests (tests/consumers: Chromium, Node.js, npm)
pkgs+=(protobuf-c-compiler libprotobuf-c-dev chromium nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
	echo "install-deps: all ${#pkgs[@]} packages present"
	exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
