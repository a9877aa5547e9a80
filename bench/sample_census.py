#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What one sample touches (issue 17): instructions, and the distinct 64-byte lines and 4 KiB
pages of code and data, by owner, for each shape of bench-sample.

A sample's time on a cold core (bench-sample "cold", and the boots) is set less by the
instructions it runs than by the lines and pages it touches that the guest's run has evicted.
Those counts do not depend on the host's noise: a change that touches fewer lines shows here
exactly, where a timing would need many alternated runs to show it. The counts come from
valgrind's lackey tool (--trace-mem=yes) on `bench-sample` with BENCH_SAMPLE_CENSUS=1, which
marks each timed sample and return with stores to marker variables and prints the address
ranges of the sampler's per-vCPU state, the sampler, the fake guest RAM and the stack, and the
process's mappings (bench/bench_sample.c).

usage: python3 bench/sample_census.py [--build DIR | --bench BINARY] [--samples N]
       [--call-graph dwarf|fp] [--json FILE]
       (or: meson test -C build --benchmark sample-census -v)
needs valgrind (Debian package valgrind; exit 77, skipped, without it); ~25 s.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

LINE, PAGE = 64, 4096
DATA_OWNERS = ("vcpu", "sampler", "guest", "stack", "bench", "heap", "libs")
CODE_OWNERS = ("hvprof", "libs")


def parse_maps(err_text):
    """The client's mappings (lo, hi, perms, path) the bench printed at its end."""
    maps = []
    for line in err_text.splitlines():
        if line.startswith("census map "):
            p = line.split()
            lo, hi = (int(x, 16) for x in p[2].split("-"))
            maps.append((lo, hi, p[3], p[-1] if len(p) > 7 else ""))
    return maps


def owner_of(addr, ranges, maps, binary):
    for name, (start, size) in ranges.items():
        if start <= addr < start + size:
            return name
    for lo, hi, _perm, path in maps:
        if lo <= addr < hi:
            if path == binary:
                return "bench"  # the bench's own statics and hvprof's (the writer's state)
            return "libs" if path.startswith("/") else "heap"
    return "heap"


def code_owner(addr, maps, binary):
    for lo, hi, _perm, path in maps:
        if lo <= addr < hi:
            return "hvprof" if path == binary else "libs"
    return "libs"


def summarize(windows, shape, maps, binary):
    """Means per window of a list of (instructions, code lines, data lines): lines and pages
    by owner, and the lines a window touched that the one before it did not ("new": on a core
    where the sampler's own lines stay cached between exits, roughly the ones that miss)."""
    n = len(windows)
    out = {"windows": n, "instructions": sum(w[0] for w in windows) / n}
    for kind, owners, pick in (("code", CODE_OWNERS, 1), ("data", DATA_OWNERS, 2)):
        lines = {o: 0 for o in owners}
        pages = {o: 0 for o in owners}
        for w in windows:
            seen_pages = set()
            for ln in w[pick]:
                o = (code_owner(ln * LINE, maps, binary) if kind == "code" else
                     owner_of(ln * LINE, shape["ranges"], maps, binary))
                lines[o] += 1
                pg = ln * LINE // PAGE
                if pg not in seen_pages:
                    seen_pages.add(pg)
                    pages[o] += 1
        out[kind] = {o: {"lines": lines[o] / n, "pages": pages[o] / n} for o in owners}
        new = [len(windows[i][pick] - windows[i - 1][pick]) for i in range(1, n)]
        out[kind + "_new_lines"] = sum(new) / len(new) if new else None
    return out


def cell(d):
    return f"{d['lines']:.0f}/{d['pages']:.0f}"


def scan(trace):
    """The shapes, in order, each with its ranges and its windows: ("sample" or "return",
    (instructions, code lines, data lines)). The bench's notes (VALGRIND_PRINTF, lines
    "**PID** census ...") come in the trace ahead of the samples they describe; a window runs
    from a store to the sample's or the return's marker to a store to the end marker."""
    shapes = []
    marks = {}
    kind = None
    instr, code, data = 0, set(), set()
    for line in trace:
        if kind is None:
            if line.startswith(b"**"):
                note = line.split(b"census ", 1)
                if len(note) != 2:
                    continue
                p = note[1].decode().split()
                if p[0] == "shape":
                    shapes.append({"name": " ".join(p[2:]), "ranges": {}, "windows": []})
                elif p[0] == "markers":
                    a = [int(x, 16) for x in p[1:4]]
                    marks = {b" S %08x,4\n" % a[0]: "sample", b" S %08x,4\n" % a[1]: "return",
                             b" S %08x,4\n" % a[2]: None}
                elif p[0] == "range":
                    shapes[-1]["ranges"][p[1]] = (int(p[2], 16), int(p[3]))
            elif line in marks:
                kind = marks[line]
                instr, code, data = 0, set(), set()
            continue
        if line in marks:
            if marks[line] is None:
                shapes[-1]["windows"].append((kind, (instr, code, data)))
                kind = None
            continue
        c = line[:2]
        if c == b"I ":
            instr += 1
        elif c not in (b" L", b" S", b" M"):
            continue
        a, _, sz = line[3:].partition(b",")
        a = int(a, 16)
        lines = code if c == b"I " else data
        lines.add(a // LINE)
        lines.add((a + int(sz) - 1) // LINE)
    return shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="meson build directory (default: build)")
    ap.add_argument("--bench", help="the bench-sample binary (default: BUILD/bench/bench-sample)")
    ap.add_argument("--samples", type=int, default=3, help="timed samples per shape (default 3)")
    ap.add_argument("--call-graph", choices=("dwarf", "fp"), default="dwarf")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    binary = os.path.realpath(args.bench or os.path.join(args.build, "bench", "bench-sample"))
    if not os.access(binary, os.X_OK):
        sys.exit(f"sample_census: {binary}: not built (ninja -C {args.build} bench/bench-sample)")
    if not shutil.which("valgrind"):
        print("sample_census: SKIP: valgrind not found (apt-get install valgrind)")
        sys.exit(77)
    with tempfile.TemporaryFile() as err:
        r, w = os.pipe()
        proc = subprocess.Popen(
            ["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-fd={w}", binary,
             str(args.samples), args.call_graph],
            env=dict(os.environ, BENCH_SAMPLE_CENSUS="1"), stdout=subprocess.DEVNULL,
            stderr=err, pass_fds=(w,))
        os.close(w)
        with os.fdopen(r, "rb", buffering=1 << 20) as trace:
            shapes = scan(trace)
        rc = proc.wait()
        err.seek(0)
        err_text = err.read().decode(errors="replace")
    if rc != 0:
        sys.exit(f"sample_census: bench-sample under valgrind exited with {rc}:\n"
                 f"{err_text[-2000:]}")
    maps = parse_maps(err_text)
    if not shapes or not maps:
        sys.exit("sample_census: no census notes or mappings from bench-sample (built "
                 "without <valgrind/valgrind.h>?)")
    for shape in shapes:
        n = sum(1 for kind, _ in shape["windows"] if kind == "sample")
        if n != args.samples:
            sys.exit(f"sample_census: shape {shape['name']!r}: {n} samples in the trace, "
                     f"not {args.samples}")
    report = {"call_graph": args.call_graph, "samples": args.samples, "shapes": []}
    for shape in shapes:
        for kind in ("return", "sample"):
            wins = [w for k, w in shape["windows"] if k == kind]
            if not wins:
                continue
            s = summarize(wins, shape, maps, binary)
            s["shape"] = shape["name"] + (", its return" if kind == "return" else "")
            report["shapes"].append(s)
    print(f"sample_census: means over {args.samples} warm samples (or returns) per shape, "
          f"--call-graph {args.call_graph}; each cell: distinct 64-byte lines / 4 KiB pages")
    print(f"{'shape':<29} {'instr':>6} | {'code':>7} {'libs':>6} {'new':>4} | "
          + " ".join(f"{o:>7}" for o in DATA_OWNERS) + f" | {'data':>4} {'new':>4}")
    for s in report["shapes"]:
        data_lines = sum(s["data"][o]["lines"] for o in DATA_OWNERS)
        new = [s["code_new_lines"], s["data_new_lines"]]
        new = ["-" if x is None else f"{x:.0f}" for x in new]
        print(f"{s['shape']:<29} {s['instructions']:>6.0f} | {cell(s['code']['hvprof']):>7} "
              f"{cell(s['code']['libs']):>6} {new[0]:>4} | "
              + " ".join(f"{cell(s['data'][o]):>7}" for o in DATA_OWNERS)
              + f" | {data_lines:>4.0f} {new[1]:>4}")
    print("code: hvprof's (the bench binary's), libs: shared libraries'; data owners: vcpu = "
          "the vCPU's sampler state (struct svcpu: counters, translation cache, task cache, "
          "scratch), sampler = struct sampler (marks), guest = guest RAM, stack = the vCPU "
          "thread's stack, bench = the binary's static data (hvprof's and the bench's counting "
          "wrapper of guest memory), heap = the rest (the recording's ring and writer, the "
          "guest session's tables), libs = shared libraries' data; new = lines not touched "
          "by the window before")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
