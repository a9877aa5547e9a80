#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Ground truth of user-stack unwinding on distribution-built code (issue 14): one boot of the
Debian image recording `hvprof-distro` (PIE, its hot code in libhvdistro.so.1, a qsort callback
from libc, built without frame pointers) with `--call-graph dwarf --callchain-mode both`.

Checks:
- >= 99% of the workload's user-mode samples have a chain that reaches `main` (and `_start`), or
  stand on ld.so's entry point `_dl_start_user` (the start-up before main);
- the shares of its two phases (checksum_phase, sort_phase) within 4 percentage points of what
  the workload measured of itself (CLOCK_MONOTONIC around each unit of work);
- the frames are named in their DSOs: hvprof-distro, libhvdistro.so.1, libc.so.6, including
  the callback path qsort -> by_name and the library's non-exported mix_block;
- a frame in the vDSO (the workload calls clock_gettime) is named from the image read out of
  the vmlinux (`__vdso_clock_gettime` in DSO `[vdso]`, not `[vdso+0x...]`) and its chain still
  reaches `main`; when no sample falls in the vDSO (under PVM the clock may take the syscall)
  this check says SKIP and checks nothing;
- python3 running a script: >= 97% of its user samples stand on an entry point (_start, or
  ld.so's _dl_start_user before main), most under Py_BytesMain;
- deferred and eager give the same user chains: for >= 99.9% of kernel samples, the registers
  and stack copy taken at the sample (eager, from pt_regs) equal those taken at the thread's
  return to user (deferred), so both unwind to the same chain.

usage: test_unwind.py HVPROF
Exit: 0 all checks passed, 1 a check failed, 77 skipped (no /dev/kvm or no Debian image).
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvprec  # noqa: E402
import hvtest  # noqa: E402

HVPROF = sys.argv[1]
IMG = hvtest.require_vm("debian")


def user_regs_pairs(path):
    """([(follows type, pid, cookie, regs tuple, stack bytes)] of the USER_REGS records (type 9),
    each checked to follow the SAMPLE (2) or USER_STACK (5) record it names; the last record's
    type, or the damage met: the whole file must have been read)."""
    data = open(path, "rb").read()
    prev = None
    out = []
    try:
        for off, rtype, p, plen, size in hvprec.records(data):
            if rtype == 9:
                t, cookie, pid, vcpu, follows, nregs, slen, ssize = struct.unpack_from(
                    "<QQiIBBxxII", data, p)
                regs = struct.unpack_from("<17Q", data, p + 40)
                stack = data[p + 176:p + 176 + slen]
                out.append(dict(follows=follows, pid=pid, cookie=cookie, regs=regs,
                                stack=stack, prev=prev))
            prev = rtype
    except hvprec.Damaged as e:
        return out, f"damaged: {e}"
    return out, prev


work = tempfile.mkdtemp(prefix="hvprof-kvm-unwind-")
data = os.path.join(work, "unwind.data")
checks = hvtest.Checks()
check = checks.check

cmd = [HVPROF, "record", "-F", "1000", "-o", data, "--image", "debian", "--duration", "400",
       "--call-graph", "dwarf", "--callchain-mode", "both", "--run",
       "/usr/bin/hvprof-distro 4; python3 -c 'print(sum(i * i for i in range(5000000)))'"]
print("running:", " ".join(cmd), flush=True)
rec = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
console, summary = rec.stdout, rec.stderr
print(console[-3000:])
print(summary)
check("record exits 0", rec.returncode == 0, f"status {rec.returncode}")
truth = re.search(r"hvprof-truth: distro checksum=([\d.]+) sort=([\d.]+)", console)
check("the workload ran and printed its ground truth", truth is not None and "unsorted=0" in console,
      truth.group(0) if truth else "no hvprof-truth line")
if not truth or not os.path.exists(data):
    checks.finish()

# The chains as every reader shows them (folded: comm;root;...;leaf COUNT, kernel frames _[k]).
code, folded, err = hvtest.hv(HVPROF, "flamegraph", "-i", data, "--format", "folded", timeout=600)
check("folded export works", code == 0 and folded, err.strip()[-2000:])
user_total = user_main = user_ok = user_entry = user_ldso = 0
phase = {"checksum": 0, "sort": 0}
funcs = {}
for line in folded.splitlines():
    stack, _, count = line.rpartition(" ")
    frames = stack.split(";")
    if frames[0] != "hvprof-distro":
        continue
    n = int(count)
    for f in set(frames[1:]):
        funcs[f] = funcs.get(f, 0) + n
    # GCC names the clone checksum_phase.constprop.0; sort_phase tail-calls hvd_sort_records
    if any(f.startswith("checksum_phase") for f in frames):
        phase["checksum"] += n
    elif "sort_phase" in frames or "hvd_sort_records" in frames:
        phase["sort"] += n
    if frames[-1].endswith("_[k]"):
        continue
    user_total += n
    # the dynamic loader's start-up, before main: ld.so's entry point is _dl_start_user
    in_ldso = frames[1:2] == ["_dl_start_user"]
    user_main += n if "main" in frames else 0
    user_ldso += n if in_ldso else 0
    user_ok += n if "main" in frames or in_ldso else 0
    user_entry += n if "_start" in frames or in_ldso else 0
# Samples before main (ld.so relocating and loading the libraries, a fixed ~25) are correct
# chains that cannot reach main: the distro runs for a fixed wall-clock time, so on a loaded host
# it gets as few as ~1 450 user samples and those 25 are 1.6% of them. Both kinds are checked:
# main reached, or standing on ld.so's entry point.
# main reached, or standing on ld.so's entry point (each sample counted once); the start-up is a
# fixed amount of work (7-23 samples in 9 recordings), so more than 100 there is a fault.
share_main = user_ok / user_total if user_total else 0
check(">= 99% of the workload's user samples reach main (or run in ld.so's start-up)",
      user_total >= 1000 and share_main >= 0.99 and user_ldso <= 100,
      f"{user_ok} of {user_total} = {100 * share_main:.2f}% ({user_main} reach main, "
      f"{user_ldso} in ld.so's start-up)")
check("... and stand on an entry point (_start, ld.so's _dl_start_user)",
      user_total and user_entry / user_total >= 0.99, f"{user_entry} of {user_total}")
both = phase["checksum"] + phase["sort"]
want_ck = float(truth.group(1))
got_ck = 100.0 * phase["checksum"] / both if both else 0.0
# The workload times itself with the guest's wall clock, which also runs while the host runs
# something else; hvprof's counter is the vCPU thread's CPU clock, which also runs while the VMM
# handles the thread's exits (several times slower under the sanitizers). Beside the sampling
# noise (~0.8 points at ~3800 samples) both move the two measures apart: over 12 recordings of
# CI trials and development runs (main and ASan passes) the difference ran from -2.4 to +2.3
# points, mean +0.5, standard deviation 1.4. The bound is ~3 of those deviations: a lost phase
# or a misattributed tenth of the samples still fails it.
bound = 4.0
check(f"the checksum phase's share is within {bound:g} points of the workload's own measure",
      both >= 1000 and abs(got_ck - want_ck) <= bound,
      f"hvprof {got_ck:.2f}% vs workload {want_ck:.2f}% ({both} samples in the phases)")
want = {"main", "_start", "sort_phase", "hvd_checksum", "mix_block", "hvd_sort_records",
        "by_name"}
named = set(funcs) | {f.split(".")[0] for f in funcs}
# libc's sort: qsort, or qsort_r (glibc's alias of __qsort_r at one address: the name with fewer
# leading underscores is shown, as perf shows it)
libc_sort = named & {"qsort", "qsort_r", "__qsort_r"}
check("the workload's functions are named, in the program, its library and libc",
      want <= named and "checksum_phase" in named and libc_sort,
      f"missing {sorted((want | {'checksum_phase'}) - named)}; libc's sort as {sorted(libc_sort)}")
# qsort's callback path: by_name is called from libc's sort, which hvd_sort_records called.
cb = sum(c for f, c in funcs.items() if f == "by_name")
check("the qsort callback path is complete (by_name under qsort under hvd_sort_records)",
      cb > 0 and any(re.search(r";hvd_sort_records;(__)?qsort.*;by_name", line)
                     for line in folded.splitlines()), f"by_name in {cb} samples")

code, rep, err = hvtest.hv(HVPROF, "report", "-i", data, "--sort", "dso", "--format", "json",
                           timeout=600)
dsos = set()
if code == 0:
    try:
        for row in json.loads(rep).get("rows", []):
            dsos.add(row.get("dso", ""))
    except ValueError:
        pass
check("the DSOs are named: hvprof-distro, libhvdistro.so.1, libc.so.6",
      {"hvprof-distro", "libhvdistro.so.1", "libc.so.6"} <= dsos, f"{sorted(dsos)[:12]} {err[-500:]}")

# The vDSO (issue 14 item 2): its image is read out of the vmlinux the recording names, so a
# frame in it is named from the image's .dynsym and unwound by the image's CFI. perf-script
# text gives each frame's DSO: "\t<ip> <name>+0x<off> (<dso>)".
code, script, err = hvtest.hv(HVPROF, "export", "--format", "perf-script", "-i", data,
                              timeout=600)
check("perf-script export works", code == 0 and script, err.strip()[-2000:])
vdso_samples, vdso_named, vdso_main, vdso_bad = 0, 0, 0, []
for block in script.split("\n\n"):
    lines = block.strip("\n").splitlines()
    if not lines or not lines[0].startswith("hvprof-distro "):
        continue
    frames = [re.match(r"\s*[0-9a-f]+ (.*?)(?:\+0x[0-9a-f]+)? \((.*)\)$", l) for l in lines[1:]]
    frames = [(f.group(1), f.group(2)) for f in frames if f]
    in_vdso = [name for name, dso in frames if dso == "[vdso]"]
    if not in_vdso:
        continue
    vdso_samples += 1
    named = all(re.fullmatch(r"(__vdso_)?(clock_gettime|gettimeofday|time|clock_getres|getcpu)",
                             name) for name in in_vdso)
    vdso_named += named
    vdso_main += any(name == "main" for name, _ in frames)
    if not named or not any(name == "main" for name, _ in frames):
        vdso_bad.append(" <- ".join(name for name, _ in frames))
if vdso_samples:
    check("frames in the vDSO are named from the kernel's image (__vdso_clock_gettime)",
          vdso_named == vdso_samples, f"{vdso_named}/{vdso_samples} named; {vdso_bad[:3]}")
    check("... and their chains still reach main",
          vdso_main == vdso_samples, f"{vdso_main}/{vdso_samples}; {vdso_bad[:3]}")
else:
    # Under PVM the guest's clocksource may not be usable from user mode: clock_gettime then
    # takes the syscall and hardly runs vDSO code. Not a pass: say that nothing was checked.
    print("SKIP (this check only): no hvprof-distro sample has a frame in the vDSO, so the "
          "vDSO naming and unwinding were not checked", flush=True)

# A Debian program as shipped: python3 (python3.11, stripped; libc). Its chains stand on an
# entry point: _start, or the dynamic loader's _dl_start_user before main (ld.so maps and
# relocates ~10 libraries first); main tail-calls Py_BytesMain, so main's frame is gone (as in
# perf). Samples after main (exit handlers) stand on _start without Py_BytesMain. Measured: 98.3
# and 99.5% in two runs; the rest end in frames larger than the 8 KiB copy (python3.11's path
# functions keep 16 KiB buffers on the stack): `outside the stack copy`, as in perf.
py_total = py_entry = py_main = 0
for line in folded.splitlines():
    stack, _, count = line.rpartition(" ")
    frames = stack.split(";")
    if frames[0] != "python3" or frames[-1].endswith("_[k]"):
        continue
    n = int(count)
    py_total += n
    py_entry += n if frames[1] in ("_start", "_dl_start_user") else 0
    py_main += n if frames[1] == "_start" and {"main", "Py_BytesMain"} & set(frames) else 0
# (at least 200 of them: 411-458 in plain runs, 287 under ASan, whose slower VMM spends more of
# the vCPU thread's CPU time, which the cpu-clock counter also counts, per guest second)
check(">= 97% of python3's user samples stand on an entry point (_start, _dl_start_user)",
      py_total >= 200 and py_entry >= 0.97 * py_total,
      f"{py_entry}/{py_total} = {100 * py_entry / max(py_total, 1):.2f}%; "
      f"through Py_BytesMain: {py_main}")
check("... and most of them run under Py_BytesMain", py_main >= 0.8 * py_total,
      f"{py_main}/{py_total}")

# Deferred vs eager: the loader unwinds the eager copy (USER_REGS after a deferred SAMPLE of
# --callchain-mode both) and compares its chain with the deferred one of the same kernel entry.
pairs, last = user_regs_pairs(data)
check("USER_REGS records follow the records they name (the whole recording read, END last)",
      pairs and last == 7 and all(p["prev"] == p["follows"] for p in pairs),
      f"{len(pairs)} records, {sum(p['prev'] != p['follows'] for p in pairs)} misplaced, "
      f"last record {last}")
code, rep, err = hvtest.hv(HVPROF, "report", "-i", data, timeout=600)
m = re.search(r"Deferred vs eager: (\d+) of (\d+) deferred user chains equal", rep)
same, compared = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
checks.check_bp("deferred and eager give the same user chains on >= 99.9% of kernel entries",
      compared >= 200 and same >= 0.999 * compared, m.group(0) if m else "no such report line")
# A sanity check beside the ground truths above: the share of chains libdw ends at the outermost
# frame (the rest mostly end in a libdw error past the entry point) depends on the mix of
# programs: ~80% of hvprof-distro's, ~67% of python3's. The distro runs for a fixed wall-clock
# time and python3 for a fixed amount of work, so a loaded host gives python3 more of the chains:
# 83% of all on a quiet host, 76-80% on a loaded one (8 recordings). 70% still fails a DWARF
# unwinder that stops early.
m = re.search(r"DWARF unwinding: (\d+) user chains \(ended: (\d+) at the outermost", rep)
check("most DWARF chains end at the outermost frame",
      m is not None and int(m.group(2)) >= 0.7 * int(m.group(1)), m.group(0) if m else "")
print("\n".join(l for l in rep.splitlines() if l.startswith("#"))[:4000])
checks.finish()
