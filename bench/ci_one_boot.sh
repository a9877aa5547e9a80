#!/bin/bash
# SPDX-License-Identifier: MIT
# A CI job of five benchmarks, profiled two ways (issue 15's closing measurement):
#   five boots: `hvprof record --from workload --run BENCH` once per benchmark;
#   one boot:   `hvprof run --control` (no --run: the guest serves commands), then
#               `hvprof record --attach --exec BENCH` per benchmark, then `exec --poweroff`.
# Prints the wall time of each way and the samples of each recording (both ways hold only the
# benchmark's window). Not run by CI (minutes of boots).
# usage: bench/ci_one_boot.sh [HVPROF] [IMAGE]   (defaults: build/cli/hvprof, default)
set -u
hv=${1:-build/cli/hvprof}
image=${2:-default}
case $image in
debian) benches=("/usr/bin/hvprof-bench cpu 2" "/usr/bin/hvprof-bench syscall 2"
		"/usr/bin/hvprof-demo 2 1" "/usr/bin/hvprof-paths" "/usr/bin/hvprof-distro 2") ;;
*) benches=("/bin/hvprof-bench cpu 2" "/bin/hvprof-bench syscall 2" "/bin/hvprof-demo 2 1"
		"/bin/hvprof-paths" "/bin/hvprof-demo 1 2") ;;
esac
work=$(mktemp -d /tmp/hvprof-ci-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
samples() { "$hv" report -i "$1" 2>/dev/null | sed -n 's/^# Samples: *\([0-9]*\).*/\1/p' | head -1; }

echo "# $(date -u +%FT%TZ) image $image, load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
t0=$(date +%s.%N)
i=0
for b in "${benches[@]}"; do
	i=$((i + 1))
	"$hv" record --image "$image" --from workload --run "$b" -o "$work/five$i.data" \
		>/dev/null 2>"$work/five$i.err" || { echo "five boots: $b failed"; cat "$work/five$i.err"; }
done
t1=$(date +%s.%N)
sock=$work/vm.sock
"$hv" run --image "$image" --control "$sock" >"$work/console.log" 2>"$work/run.err" &
vm=$!
i=0
for b in "${benches[@]}"; do
	i=$((i + 1))
	"$hv" record --attach "$sock" --exec "$b" -o "$work/one$i.data" >/dev/null \
		2>"$work/one$i.err" || { echo "one boot: $b failed"; cat "$work/one$i.err"; }
done
"$hv" exec --attach "$sock" --poweroff || echo "poweroff failed"
wait "$vm"
rc=$?
t2=$(date +%s.%N)
echo "five boots: $(echo "$t1 - $t0" | bc) s"
echo "one boot:   $(echo "$t2 - $t1" | bc) s (run exited $rc)"
i=0
for b in "${benches[@]}"; do
	i=$((i + 1))
	echo "  $b: samples five-boots $(samples "$work/five$i.data"), one-boot $(samples "$work/one$i.data")"
done
