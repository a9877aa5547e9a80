#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What one sample touches (issue 17): instructions, taken branches, and the distinct 64-byte
lines and 4 KiB pages of code and data, by owner, for each shape of bench-sample.

Most of a sample's time on a cold core (bench-sample: 0.5-0.8 us warm, 1.7-2.5 us cold, as in
the boots) goes to the lines and pages it touches that the guest's run has evicted. Those counts
do not depend on the host's noise: a change that touches fewer lines shows here exactly, where
a timing would need many alternated runs to show it. The counts come from valgrind's lackey
tool (--trace-mem=yes) on `bench-sample` with BENCH_SAMPLE_CENSUS=1, which marks each timed
sample and return with stores to marker variables, names the address ranges of the sampler's
per-vCPU state, the sampler, the fake guest RAM, the stack and its own data in the trace, and
prints its mappings at the end (bench/bench_sample.c).

usage: python3 bench/sample_census.py [--build DIR | --bench BINARY] [--samples N]
       [--call-graph dwarf|fp] [--json FILE]
       (or: meson test -C build --benchmark sample-census -v)
needs valgrind (Debian package valgrind; exit 77, skipped, without it or without its header at
build time); ~25 s.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

LINE, PAGE = 64, 4096
DATA_OWNERS = ("vcpu", "sampler", "guest", "stack", "bench", "heap", "libs")
CODE_OWNERS = ("hvprof", "libs")


def parse_maps(err_text):
    """The client's mappings (lo, hi, path or "") the bench printed at its end."""
    maps = []
    for line in err_text.splitlines():
        if line.startswith("census map "):
            p = line.split(None, 7)
            lo, hi = (int(x, 16) for x in p[2].split("-"))
            maps.append((lo, hi, p[7].strip() if len(p) > 7 else ""))
    return maps


def owner_ranges(shape, maps):
    """The ranges the bench named, the stack's widened to the whole mapping it lies in (the
    caller's frames above the named part are the sample's too)."""
    ranges = dict(shape["ranges"])
    if "stack" in ranges:
        start = ranges["stack"][0]
        for lo, hi, _path in maps:
            if lo <= start < hi:
                ranges["stack"] = (lo, hi - lo)
    return ranges


def owner_of(addr, ranges, maps, binary):
    for name in ("vcpu", "sampler", "guest", "stack", "bench"):
        start, size = ranges.get(name, (0, 0))
        if start <= addr < start + size:
            return name
    for lo, hi, path in maps:
        if lo <= addr < hi:
            if path == binary:
                return "bench"  # its relocated read-only data and GOT
            return "libs" if path.startswith("/") else "heap"
    return "heap"


def code_owner(addr, maps, binary):
    for lo, hi, path in maps:
        if lo <= addr < hi:
            return "hvprof" if path == binary else "libs"
    return "libs"


def window_stats(shape, maps, binary):
    """Per window of @shape, in trace order: its kind, instructions, and for code and data the
    lines and pages by owner and the lines the window before it (whatever its kind) did not
    touch ("new"), by owner too."""
    ranges = owner_ranges(shape, maps)
    owner = {"code": lambda a: code_owner(a, maps, binary),
             "data": lambda a: owner_of(a, ranges, maps, binary)}
    stats, prev = [], None
    for kind, (instr, code, data, taken) in shape["windows"]:
        st = {"kind": kind, "instructions": instr, "taken_branches": len(taken),
              "taken_sites": len(set(taken))}
        for part, lines, owners in (("code", code, CODE_OWNERS), ("data", data, DATA_OWNERS)):
            by = {o: {"lines": 0, "pages": 0, "new": 0} for o in owners}
            pages = set()
            new = lines - prev[part] if prev else set()
            for ln in lines:
                o = owner[part](ln * LINE)
                by[o]["lines"] += 1
                pg = ln * LINE // PAGE
                if (o, pg) not in pages:
                    pages.add((o, pg))
                    by[o]["pages"] += 1
                if ln in new:
                    by[o]["new"] += 1
            st[part] = by
            st[part + "_pages"] = len({pg for _o, pg in pages})
            st[part + "_new"] = len(new) if prev else None
        stats.append(st)
        prev = {"code": code, "data": data}
    return stats


def summarize(stats, kind):
    """Means over the windows of @kind of window_stats()' figures (an owner's pages are the
    pages where it has lines: a page two owners share counts for both, once in the total)."""
    ws = [w for w in stats if w["kind"] == kind]
    n = len(ws)
    out = {"windows": n, "instructions": sum(w["instructions"] for w in ws) / n,
           "taken_branches": sum(w["taken_branches"] for w in ws) / n,
           "taken_sites": sum(w["taken_sites"] for w in ws) / n}
    for part, owners in (("code", CODE_OWNERS), ("data", DATA_OWNERS)):
        # "new" only where there was a window before (not the shape's first)
        after = [w for w in ws if w[part + "_new"] is not None]
        out[part] = {o: {f: sum(w[part][o][f] for w in ws) / n for f in ("lines", "pages")}
                     for o in owners}
        for o in owners:
            out[part][o]["new"] = (sum(w[part][o]["new"] for w in after) / len(after)
                                   if after else None)
        out[part + "_lines"] = sum(out[part][o]["lines"] for o in owners)
        out[part + "_pages"] = sum(w[part + "_pages"] for w in ws) / n
        out[part + "_new_lines"] = (sum(w[part + "_new"] for w in after) / len(after)
                                    if after else None)
    # the fewest guest RAM lines of a window after the shape's first (which may read what
    # later ones keep): the steady state
    out["guest_lines_min"] = min(w["data"]["guest"]["lines"] for w in ws[1:] or ws)
    return out


def check_guest_lines(report, out_text):
    """Cross-check of the cutting and the owners: the guest RAM lines the census saw in each
    shape against those bench-sample counted itself through its gmem wrapper (its "lines" per
    warm sample or return). The census sees every access to guest RAM, the wrapper the reads:
    at least as many, and no more than SLACK over (the sampler's writes to the guest, a mark's
    flag; a copy's bytes that straddle a line). The census's fewest of a shape is compared: the
    wrapper counts steady-state samples. Exits 1 naming the shape otherwise."""
    slack = 3
    counted = {}
    for line in out_text.splitlines():
        m = re.match(r"bench-sample: (.+?)\s+warm\s+median.* lines\s+([0-9.]+)\s+pages", line)
        if m:
            name = m.group(1).strip()
            counted["return" if name.startswith("return") else name] = float(m.group(2))
    for s in report["shapes"]:
        key = "return" if s["shape"].endswith(", its return") else s["shape"]
        if key not in counted:
            sys.exit(f"sample_census: bench-sample printed no warm line for {s['shape']!r}")
        seen = s["guest_lines_min"]
        if not counted[key] <= seen <= counted[key] + slack:
            sys.exit(f"sample_census: {s['shape']!r}: {seen:.1f} guest RAM lines in the trace "
                     f"against {counted[key]:.1f} bench-sample read (windows cut wrong, or the "
                     f"guest range)")


def cell(d):
    return f"{d['lines']:.0f}/{d['pages']:.0f}"


def scan(trace):
    """The shapes, in order, each with its ranges and its windows: ("sample" or "return",
    (instructions, code lines, data lines, the taken branches' addresses)). A taken branch: an
    instruction that
    does not follow the one before it in memory (a jump, call or return, a taken conditional);
    a string instruction's repeats (`rep movs`, one trace line per iteration at the same
    address) are not counted. The bench's notes (VALGRIND_PRINTF, lines
    "**PID** census ...") come in the trace ahead of the samples they describe; a window runs
    from a store to the sample's or the return's marker to a store to the end marker."""
    shapes = []
    marks = {}
    kind = None
    instr, code, data, taken, prev, prev_end = 0, set(), set(), [], None, None
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
                instr, code, data, taken, prev, prev_end = 0, set(), set(), [], None, None
            continue
        if line in marks:
            if marks[line] is None:
                shapes[-1]["windows"].append((kind, (instr, code, data, taken)))
                kind = None
            continue
        c = line[:2]
        if c == b"I ":
            instr += 1
        elif c not in (b" L", b" S", b" M"):
            continue
        a, _, sz = line[3:].partition(b",")
        a = int(a, 16)
        if c == b"I ":
            if prev is not None and a != prev_end and a != prev:
                taken.append(prev)
            prev, prev_end = a, a + int(sz)
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
    if not 2 <= args.samples <= 1000:
        sys.exit(f"sample_census: --samples {args.samples}: give 2 to 1000 (the first sample of "
                 "a shape may read what later ones keep; each costs ~1 s under valgrind)")
    binary = os.path.realpath(args.bench or os.path.join(args.build, "bench", "bench-sample"))
    if not os.access(binary, os.X_OK):
        sys.exit(f"sample_census: {binary}: not found or not executable (build it: ninja -C "
                 f"{args.build} bench/bench-sample)")
    if not shutil.which("valgrind"):
        print("sample_census: SKIP: valgrind not found (apt-get install valgrind)")
        sys.exit(77)
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        r, w = os.pipe()
        proc = subprocess.Popen(
            ["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-fd={w}", binary,
             str(args.samples), args.call_graph],
            env=dict(os.environ, BENCH_SAMPLE_CENSUS="1"), stdout=out,
            stderr=err, pass_fds=(w,))
        os.close(w)
        with os.fdopen(r, "rb", buffering=1 << 20) as trace:
            shapes = scan(trace)
        rc = proc.wait()
        err.seek(0)
        err_text = err.read().decode(errors="replace")
        out.seek(0)
        out_text = out.read().decode(errors="replace")
    if rc == 77:  # bench-sample built without <valgrind/valgrind.h>: it says so
        print(f"sample_census: SKIP: {err_text.strip()}")
        sys.exit(77)
    if rc != 0:
        sys.exit(f"sample_census: bench-sample under valgrind exited with {rc}:\n"
                 f"{err_text[-2000:]}")
    maps = parse_maps(err_text)
    if not shapes or not maps:
        sys.exit("sample_census: bench-sample wrote no census notes or mappings")
    for shape in shapes:
        n = sum(1 for kind, _ in shape["windows"] if kind == "sample")
        n_ret = sum(1 for kind, _ in shape["windows"] if kind == "return")
        if n != args.samples or n_ret not in (0, args.samples):
            sys.exit(f"sample_census: shape {shape['name']!r}: {n} samples and {n_ret} returns "
                     f"in the trace, not {args.samples} (and 0 or {args.samples})")
    report = {"call_graph": args.call_graph, "samples": args.samples, "shapes": []}
    for shape in shapes:
        stats = window_stats(shape, maps, binary)
        for kind in ("return", "sample"):
            if any(w["kind"] == kind for w in stats):
                s = summarize(stats, kind)
                s["shape"] = shape["name"] + (", its return" if kind == "return" else "")
                report["shapes"].append(s)
    check_guest_lines(report, out_text)
    print(f"sample_census: means over {args.samples} warm samples (or returns) per shape, "
          f"--call-graph {args.call_graph}; each cell: distinct 64-byte lines / 4 KiB pages")
    print(f"{'shape':<29} {'instr':>6} {'taken':>5} {'sites':>5} | {'code':>7} {'libs':>6} {'new':>4} | "
          + " ".join(f"{o:>7}" for o in DATA_OWNERS) + f" | {'data':>7} {'new':>4}")
    for s in report["shapes"]:
        new = ["-" if x is None else f"{x:.0f}" for x in (s["code_new_lines"],
                                                          s["data_new_lines"])]
        total = f"{s['data_lines']:.0f}/{s['data_pages']:.0f}"
        print(f"{s['shape']:<29} {s['instructions']:>6.0f} {s['taken_branches']:>5.0f} "
              f"{s['taken_sites']:>5.0f} | "
              f"{cell(s['code']['hvprof']):>7} "
              f"{cell(s['code']['libs']):>6} {new[0]:>4} | "
              + " ".join(f"{cell(s['data'][o]):>7}" for o in DATA_OWNERS)
              + f" | {total:>7} {new[1]:>4}")
        if s["data_new_lines"]:
            print(f"{'':<29} new data lines by owner: " + ", ".join(
                f"{o} {s['data'][o]['new']:.0f}" for o in DATA_OWNERS
                if s["data"][o]["new"] >= 0.5))
    print("taken: taken branches (jumps, calls, returns, taken conditionals), sites: the "
          "distinct instructions among them; after the guest ran the branch predictors are cold, "
          "and each site's first taken branch stalls the front end (README, Overhead); code: the "
          "bench binary's (hvprof's sample path, and the bench's counting wrapper of "
          "guest memory), libs: shared libraries'; data owners: vcpu = the vCPU's sampler state "
          "(struct svcpu: counters, translation cache, task cache, scratch), sampler = struct "
          "sampler (marks), guest = guest RAM, stack = the bench's stack, bench = the binary's "
          "data and bss (hvprof's statics, the recording writer, the bench's own), heap = the "
          "rest (the recording's ring, the guest session's tables), libs = shared libraries' "
          "data; new = lines the window before (sample or return) did not touch")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
