#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Report-side cost of DWARF unwinding (issue 14): samples/s and peak memory of `hvprof report`
on a recording whose user-mode samples carry USER_REGS (--call-graph dwarf), grown to N samples
by repeating its SAMPLE+USER_REGS pairs (each repeat is a real guest stack, unwound afresh: the
loader caches sessions and files, never chains). Not a test: prints figures, never fails on speed.

usage: unwind_bench.py HVPROF RECORDING [N ...]   (RECORDING: e.g. the kvm-unwind test's, made
       with `record --image debian --call-graph dwarf --run "/usr/bin/hvprof-distro 4"`)
"""
import os
import struct
import subprocess
import sys
import tempfile
import time
import zlib


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "kvm"))
import hvprec  # noqa: E402


def records(data):
    """(type, the record as a version-1 record: frame, payload, CRC) of each intact record of a
    recording of either format version (docs/recording-format.md); the grown copy is written in
    version 1, which needs no blocks."""
    try:
        for off, rtype, p, plen, size in hvprec.records(data):
            head = struct.pack("<II", rtype, 8 + plen + 4) + data[p:p + plen]
            yield rtype, head + struct.pack("<I", zlib.crc32(head))
    except hvprec.Damaged:
        return


def grow(src, dst, n_target):
    """Copy @src, then append its user-mode SAMPLE+USER_REGS pairs until @n_target samples."""
    data = open(src, "rb").read()
    recs = list(records(data))
    pairs, samples, tail = [], 0, []
    for i, (rtype, rec) in enumerate(recs):
        if rtype == 2:
            samples += 1
            cpl = rec[8 + 12]
            if cpl == 3 and i + 1 < len(recs) and recs[i + 1][0] == 9:
                pairs.append(rec + recs[i + 1][1])
        if rtype in (6, 7):  # COUNTER and END stay last
            tail.append(rec)
    if not pairs:
        sys.exit(f"{src}: no user-mode SAMPLE with USER_REGS (record with --call-graph dwarf)")
    with open(dst, "wb") as f:
        f.write(hvprec.MAGIC + struct.pack("<II", 1, 16))  # a version-1 header
        for rtype, rec in recs:
            if rtype not in (6, 7):
                f.write(rec)
        k = 0
        while samples < n_target:
            f.write(pairs[k % len(pairs)])
            k += 1
            samples += 1
        for rec in tail:
            f.write(rec)
    return samples, len(pairs)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    hvprof, src = sys.argv[1], sys.argv[2]
    targets = [int(x) for x in sys.argv[3:]] or [100000, 1000000]
    with tempfile.TemporaryDirectory(prefix="hvprof-unwind-bench-") as d:
        for n in targets:
            dst = os.path.join(d, f"grown-{n}.data")
            samples, distinct = grow(src, dst, n)
            size = os.path.getsize(dst)
            t0 = time.monotonic()
            r = subprocess.run(["/usr/bin/time", "-f", "%M", hvprof, "report", "-i", dst],
                               capture_output=True, text=True)
            dt = time.monotonic() - t0
            rss_kb = int(r.stderr.strip().splitlines()[-1]) if r.stderr.strip() else 0
            line = next((l for l in r.stdout.splitlines() if l.startswith("# DWARF unwinding")),
                        "")
            print(f"{samples} samples ({distinct} distinct user states repeated), "
                  f"{size / samples:.0f} bytes/sample, {size >> 20} MiB: report {dt:.1f} s = "
                  f"{samples / dt:,.0f} samples/s, peak RSS {rss_kb >> 10} MiB")
            print("   ", line[:200])
            os.unlink(dst)


if __name__ == "__main__":
    main()
