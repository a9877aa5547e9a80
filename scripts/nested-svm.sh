#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run a command where /dev/kvm exists, on a host that has none: inside a QEMU guest under TCG
# (software emulation) whose CPU emulates AMD SVM, so that its own KVM (kvm_amd, nested paging)
# gives /dev/kvm. That guest (L1) mounts the host's / read-only over virtio-9p, /work and the
# hvprof cache read-write, runs COMMAND from the repository's top as root, and powers off.
#
#   scripts/nested-svm.sh [-b | -B] [-c CPUS] [-m MEM] COMMAND...
#   scripts/nested-svm.sh python3 -u tests/kvm/test_record.py build/cli/hvprof build/tests/kvm/mybench
#
# Output: COMMAND's, then "nested-svm: exit status N" (the script exits with N; 125: L1 did not
# report one; 124: L1 ran past NESTED_SVM_TIMEOUT seconds, default 1800, and was stopped). L1's kernel is built once from the image's cached linux-source tree (x86_64
# defconfig + kvm_guest.config + KVM_AMD, 9p: ~15 min on 2 cores) into $cache/l1-kernel.
#
# What it is good for: every path of a VMX/SVM host (kernel code runs at CPL0 natively, no
# PVM emulation), boots in seconds. It runs the QEMU that scripts/nested-qemu.sh builds
# (Debian's source with two changes to its emulated SVM; built on first use, ~25 min;
# NESTED_SVM_QEMU names another such QEMU; -b, the default, says so) and tells L1
# HVPROF_NESTED_BP=1. Debian's own QEMU 7.2 (-B) cannot test deferred callchains: its VMRUN
# loads the guest's DR7 without arming TCG's breakpoints, so hvprof's guest-debug breakpoints
# never fire in L2 and deferred marks fall back to walks at the sample (counter
# bp_never_fired; INT3 is no way round: TCG does not give it to the #BP intercept); and its
# VMRUN delivers an injected interrupt a second time at the next exit request, so L2 guests
# oops or hang in some runs, eager ones too (docs/nested-svm.md). L1 gets
# HVPROF_HOST=nested-tcg, with which the kvm tests' checks that need a host's timing, or
# breakpoints without HVPROF_NESTED_BP, say SKIP (tests/kvm/hvtest.py).
# NESTED_SVM_APPEND adds to L1's kernel command line (e.g. kvm_amd.vgif=0, for experiments).
# Timings are TCG's, not a host's. L1 runs on single-threaded TCG (see the qemu line); keep
# its runs to a few tests, and do not rebuild what a running L1 executes (its /work is the
# host's, over 9p).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${HVPROF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvprof}
# one L1 vCPU by default: single-threaded TCG runs L1's vCPUs in turn on one host thread, so a
# second gains nothing, and with two the kvm-smp runs of 2026-12-05 hung or timed out where
# with one they took ~30 s (an L2 with 2 vCPUs runs them as two threads on L1's one)
cpus=1 mem=8G bp=1
while getopts bBc:m: o; do
	case $o in
	b) bp=1 ;;
	B) bp=0 ;;
	c) cpus=$OPTARG ;;
	m) mem=$OPTARG ;;
	*) echo "usage: $0 [-b | -B] [-c CPUS] [-m MEM] COMMAND..." >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: $0 [-b | -B] [-c CPUS] [-m MEM] COMMAND..." >&2; exit 2; }
case $top in /work/*) ;; *) echo "nested-svm: the repository must be under /work (shared with L1 as /work)" >&2; exit 2 ;; esac
command -v qemu-system-x86_64 >/dev/null || apt-get install -y qemu-system-x86 >/dev/null
# -b: the QEMU whose emulated SVM arms the nested guest's breakpoints (-B: the system's)
qemu_bin=qemu-system-x86_64 nested_bp=0
if [ "$bp" = 1 ]; then
	if [ -z "${NESTED_SVM_QEMU:-}" ]; then
		qemu_bin=$("$top/scripts/nested-qemu.sh" | tail -1) ||
			{ echo "nested-svm: building its QEMU failed (above; -B runs Debian's)" >&2; exit 2; }
	else
		qemu_bin=$NESTED_SVM_QEMU
	fi
	[ -x "$qemu_bin" ] || { echo "nested-svm: no QEMU at '$qemu_bin'" >&2; exit 2; }
	nested_bp=1
fi

l1k=$cache/l1-kernel
if [ ! -f "$l1k/arch/x86/boot/bzImage" ]; then
	tree=$(ls -d "$cache"/src/linux-6.1-* 2>/dev/null | head -1)
	[ -n "$tree" ] || { echo "nested-svm: no kernel tree in $cache/src (run images/build-image.sh)" >&2; exit 2; }
	echo "nested-svm: building L1's kernel from $tree into $l1k" >&2
	mkdir -p "$l1k"
	make -s -C "$tree" O="$l1k" x86_64_defconfig kvm_guest.config >/dev/null
	"$tree/scripts/config" --file "$l1k/.config" -e VIRTUALIZATION -e KVM -e KVM_AMD \
		-e NET_9P -e NET_9P_VIRTIO -e 9P_FS -e VIRTIO_PCI -e DEVTMPFS -e DEVTMPFS_MOUNT \
		-e PERF_EVENTS -e TMPFS -e DEBUG_INFO_NONE
	make -s -C "$l1k" olddefconfig >/dev/null
	nice make -s -C "$l1k" -j"$(nproc)" bzImage >/dev/null
fi

run=$(mktemp -d /work/.nested-svm.XXXXXX)
trap 'rm -rf "$run"' EXIT
printf '%q ' "$@" > "$run/cmd"
cat > "$run/init" <<EOF
#!/bin/bash
mount -t proc proc /proc; mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mkdir -p /dev/shm; mount -t tmpfs shm /dev/shm; mount -t tmpfs tmp /tmp; mount -t tmpfs run /run
mount -t tmpfs vartmp /var/tmp
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap work /work
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 cache "$cache"
echo 0 > /proc/sys/kernel/kptr_restrict; cat /proc/kallsyms > "$run/kallsyms"
export HOME=$HOME PATH=$PATH
# QEMU's emulated SVM (TCG) emulates the CPU clock, and Debian's delivers no guest-debug
# breakpoint (docs/nested-svm.md): the kvm tests' checks that need either say SKIP here
# (tests/kvm/hvtest.py); HVPROF_NESTED_BP=1: this QEMU delivers them
export HVPROF_HOST=nested-tcg HVPROF_NESTED_BP=$nested_bp
cd "$top" && bash "$run/cmd" 2>&1 | tee "$run/out"
echo "\${PIPESTATUS[0]}" > "$run/status"
sync; echo o > /proc/sysrq-trigger
EOF
chmod +x "$run/init"
# thread=single: with multi-threaded TCG, L1 stopped for good every few hvprof runs, one vCPU
# looping at asm_exc_int3 (IF=0) while the other waited in __schedule: L1's KVM flips static
# keys as VMs come and go, the kernel patches them with INT3 (text_poke_bp), and TCG's
# cross-vCPU code invalidation lost that race
"$qemu_bin" -L /usr/share/qemu -L /usr/share/seabios -accel tcg,thread=single,tb-size=1024 -cpu max -smp "$cpus" -m "$mem" \
	-nographic -no-reboot -nodefaults -serial file:"$run/console" \
	-monitor unix:"$run/monitor",server,nowait \
	-kernel "$l1k/arch/x86/boot/bzImage" \
	-append "console=ttyS0 root=host rootfstype=9p rootflags=trans=virtio,version=9p2000.L,msize=512000,cache=loose ro init=$run/init panic=-1 quiet ${NESTED_SVM_APPEND:-}" \
	-fsdev local,id=root,path=/,security_model=none,readonly=on,multidevs=remap \
	-device virtio-9p-pci,fsdev=root,mount_tag=host \
	-fsdev local,id=work,path=/work,security_model=none -device virtio-9p-pci,fsdev=work,mount_tag=work \
	-fsdev local,id=cache,path="$cache",security_model=none -device virtio-9p-pci,fsdev=cache,mount_tag=cache \
	>/dev/null &
qemu=$!
# An L1 that stops making progress (its own timers never fire again; seen with multi-threaded
# TCG) is stopped after NESTED_SVM_TIMEOUT seconds (default 1800), status 124, with its vCPUs'
# registers from QEMU's monitor, named from L1's /proc/kallsyms (an RIP not there: L2's).
waited=0
while kill -0 "$qemu" 2>/dev/null && [ "$waited" -lt "${NESTED_SVM_TIMEOUT:-1800}" ]; do
	sleep 2
	waited=$((waited + 2))
done
if kill -0 "$qemu" 2>/dev/null; then
	echo "nested-svm: L1 still running after ${NESTED_SVM_TIMEOUT:-1800} s: its vCPUs, then stopped" >&2
	python3 - "$run/monitor" "$run/kallsyms" >&2 <<'PY' || true
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(5)
for cmd in (b"info cpus\n", b"info registers -a\n"):
    s.sendall(cmd)
    time.sleep(1)
out = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
except OSError:
    pass
syms = []
try:  # L1's own symbols, saved at its boot: an RIP there is L1's kernel, else the L2 guest's
    for line in open(sys.argv[2]):
        a, t, name = line.split()[:3]
        if t in "tT":
            syms.append((int(a, 16), name))
    syms.sort()
except (OSError, ValueError):
    pass
import bisect, re
for l in out.decode(errors="replace").splitlines():
    if not any(k in l for k in ("CPU", "RIP", "CS =", "HLT", "thread")):
        continue
    m = re.search(r"RIP=([0-9a-f]+)", l)
    if m and syms:
        rip = int(m.group(1), 16)
        i = bisect.bisect_right(syms, (rip, "~")) - 1
        if i >= 0 and rip - syms[i][0] < 0x10000:
            l += f"  (L1: {syms[i][1]}+{rip - syms[i][0]:#x})"
    print(l)
PY
	kill "$qemu"
	wait "$qemu" 2>/dev/null
	[ -f "$run/out" ] && cat "$run/out"
	tail -20 "$run/console" >&2
	echo "nested-svm: exit status 124"
	exit 124
fi
wait "$qemu" 2>/dev/null
[ -f "$run/out" ] && cat "$run/out"
status=$(cat "$run/status" 2>/dev/null || echo 125)
# no status: L1 did not run COMMAND to its end (no boot, a panic): its console says why
[ "$status" = 125 ] && tail -20 "$run/console" >&2
echo "nested-svm: exit status $status"
exit "$status"
