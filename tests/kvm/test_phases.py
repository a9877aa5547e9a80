#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test: `record --bench-phases` with `hvprof-bench phases` on the default image, the
mechanism of bench/overhead.py --phases. The workload asks for each slice's phase on the exit
register (event 16: 0 no sampling, 1 bare exits, 2 sampling); hvprof must sample only in the
phase-2 slices, count the phase-1 overflows apart (bench_bare_exits, never as samples), take no
sample in a phase-0 slice, and give the first sample of a phase-2 slice a period counted from
the slice's start (not over the bare exits before it).

usage: test_phases.py HVPROF
Exit: 0 all checks passed, 1 a check failed, 77 skipped (no /dev/kvm or no default image).
"""
import itertools
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvprec  # noqa: E402
import hvtest  # noqa: E402

HVPROF = sys.argv[1]
hvtest.require_vm()

ROUNDS, SLICE_MS = 6, 40
EVENT_BENCH_PHASE = 16
work = tempfile.mkdtemp(prefix="hvprof-kvm-")
data = os.path.join(work, "phases.data")
cmd = [HVPROF, "record", "-F", "1000", "-o", data, "--bench-phases", "--cpus", "1",
       "--run", f"/bin/hvprof-bench phases syscall {ROUNDS} {SLICE_MS}; "
                f"/bin/hvprof-bench phases cpu {ROUNDS} {SLICE_MS}", "--duration", "240"]
print("running:", " ".join(cmd), flush=True)
rec = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
console, summary = rec.stdout, rec.stderr
print(console[-1500:])
print(summary)

checks = hvtest.Checks()
check = checks.check
check("record exits 0, the guest with status 0", rec.returncode == 0 and
      "guest exited with status 0" in summary, f"status {rec.returncode}")
slices = re.findall(r"hvprof-bench: phases (\w+) round (\d+) phase (\d): ([\d.]+) seconds", console)
check("the workload timed every slice", len(slices) == 2 * ROUNDS * 3 and
      all(float(s[3]) > 0 for s in slices), f"{len(slices)} slices")

raw = hvprec.read(data) if os.path.exists(data) else {"events": [], "samples": [], "meta": {},
                                                       "counters": {}}
meta, cnt, ev = raw["meta"], raw["counters"], raw["events"]
check("META sampling_from is bench-phase, the strategy says bench-phases",
      meta.get("sampling_from") == "bench-phase" and "bench-phases" in meta.get("strategy", ""),
      f"{meta.get('sampling_from')} / {meta.get('strategy', '')[-80:]}")
phases = [e for e in ev if e["kind"] == EVENT_BENCH_PHASE]
perms = [0, 1, 2, 1, 2, 0, 2, 0, 1, 2, 1, 0, 1, 0, 2, 0, 2, 1]  # hvprof-bench's six orders
want = ([0] + perms[:3 * ROUNDS] + [0]) * 2
check("bench-phase events: calibration off, the rounds' rotating orders, off at the end (twice)",
      [e["value"] for e in phases] == want, str([e["value"] for e in phases]))
start = next((e["t"] for e in ev if e["kind"] == hvprec.EVENT_SAMPLING_START), None)
check("sampling started at the first bench-phase event",
      phases and start == phases[0]["t"], f"{start} / {phases[0]['t'] if phases else None}")

# each phase event opens a window up to the next one; the last phase 0 lasts to the end
windows = [(a["t"], b["t"], a["value"]) for a, b in itertools.pairwise(phases)]
samples = raw["samples"]


def window_of(t):
    return next((w for w in windows if w[0] <= t < w[1]), None)


outside = [s for s in samples if (w := window_of(s["t"])) is None or w[2] != 2]
check("every sample lies in a phase-2 slice (none in an off or bare-exit slice, none before "
      "the first phase or after the last)", samples and not outside,
      f"{len(samples)} samples, {len(outside)} outside, first outside at "
      f"{outside[0]['t'] / 1e9 if outside else 0:.3f} s in "
      f"{window_of(outside[0]['t']) if outside else None}")
on_ms = sum(b - a for a, b, v in windows if v == 2) / 1e6
bare_ms = sum(b - a for a, b, v in windows if v == 1) / 1e6
n_bare = cnt.get("bench_bare_exits", 0)
# the counter runs on the vCPU thread's CPU time, at most the slices' wall time
check("bare-exit slices: overflows counted in bench_bare_exits, about one per ms of the slices",
      0.3 * bare_ms <= n_bare <= 1.1 * bare_ms + 5,
      f"{n_bare} in {bare_ms:.0f} ms of bare-exit slices")
check("phase-2 slices: about one sample per ms", 0.3 * on_ms <= len(samples) <= 1.1 * on_ms + 5,
      f"{len(samples)} samples in {on_ms:.0f} ms of phase-2 slices")
firsts = {}
for s in samples:
    w = window_of(s["t"])
    if w and w[0] not in firsts:
        firsts[w[0]] = s
worst = max((s["period"] for s in firsts.values()), default=0)
check("the first sample of each phase-2 slice counts its period from the slice's start (at "
      "most 3 ms, not the 40 ms slice before it)", firsts and worst <= 3000000,
      f"{len(firsts)} slices, largest first period {worst / 1e6:.2f} ms")
check("samples counted in the recording: the bare exits are not among them",
      cnt.get("samples", 0) == len(samples), f"counter {cnt.get('samples')}, {len(samples)} records")
checks.finish()
