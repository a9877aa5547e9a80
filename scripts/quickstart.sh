#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# From a fresh clone to a flamegraph: install packages, build hvprof and the default image,
# profile the bundled demo workload (sampling from its start: --from workload, so the picture is
# the demo's, not the guest's boot), write hvprof.data, report.txt and flamegraph.svg here.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# hvprof boots a guest on KVM: without /dev/kvm nothing below would get far (say so before
# minutes of installing and building)
if [ ! -e /dev/kvm ]; then
	echo "quickstart: no /dev/kvm on this host: load kvm_intel, kvm_amd or kvm_pvm (inside a VM," \
		"its hypervisor must offer nested virtualization)" >&2
	exit 1
fi
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh"
"$top/build/cli/hvprof" record --from workload -o hvprof.data
"$top/build/cli/hvprof" report -i hvprof.data --sort comm,dso,sym > report.txt
"$top/build/cli/hvprof" flamegraph -i hvprof.data -o flamegraph.svg
echo "quickstart: open flamegraph.svg in a browser; the top of the report is in report.txt"
