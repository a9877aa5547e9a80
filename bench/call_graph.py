#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Record-side cost of `--call-graph` (issue 14 item 3, "costs"): one boot of the default image
per mode, the same workload (the demo: CPU phase in user code, system-call phase), and from each
recording: bytes per sample (file size / SAMPLE records), bytes per USER_REGS record, the mean
stack bytes copied, the share of short copies, and the VMM time per stack copy
(user_stack_copy_ns / user_stack_copies: the copy through the guest page tables alone, from the
sampler's own counters). Prints a table and writes it as JSON.

usage: bench/call_graph.py [--build DIR] [--json FILE] [--modes fp,dwarf,dwarf,65528]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "kvm"))
import hvprec  # noqa: E402

RUN = "/bin/hvprof-demo 4 3"


def measure(hvprof, mode, work):
    data = os.path.join(work, mode.replace(",", "-") + ".data")
    cmd = [hvprof, "record", "-F", "1000", "-o", data, "--call-graph", mode, "--run", RUN,
           "--duration", "240"]
    rec = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if rec.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: status {rec.returncode}\n{rec.stderr}")
    raw = hvprec.read(data)
    c, ur = raw["counters"], raw["user_regs"]
    size = os.path.getsize(data)
    n = max(1, len(raw["samples"]))
    copies = max(1, c.get("user_stack_copies", 0))
    row = {
        "mode": mode,
        "samples": len(raw["samples"]),
        "user_regs": len(ur),
        "file_bytes": size,
        "bytes_per_sample": round(size / n, 1),
        "user_regs_bytes_each": round(sum(r["size"] for r in ur) / max(1, len(ur)), 1),
        "user_regs_bytes_per_sample": round(sum(r["size"] for r in ur) / n, 1),
        "mean_stack_len": round(sum(r["stack_len"] for r in ur) / max(1, len(ur)), 1),
        "short_copies_pct": round(100.0 * c.get("user_stack_short", 0) / copies, 1),
        "refused": c.get("user_stack_refused", 0),
        "copy_ns_each": round(c.get("user_stack_copy_ns", 0) / copies),
        "sample_ns_each": round(c.get("sample_ns_total", 0) / n),
    }
    os.unlink(data)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--json", default=os.path.join(HERE, "results", "call_graph.json"))
    ap.add_argument("--modes", default="fp;dwarf;dwarf,65528",
                    help="modes separated by ';' (default fp;dwarf;dwarf,65528)")
    a = ap.parse_args()
    hvprof = os.path.join(a.build, "cli", "hvprof")
    work = tempfile.mkdtemp(prefix="hvprof-cg-")
    rows = []
    for mode in a.modes.split(";"):
        print(f"recording with --call-graph {mode} ...", flush=True)
        rows.append(measure(hvprof, mode, work))
    cols = ["mode", "samples", "user_regs", "bytes_per_sample", "user_regs_bytes_each",
            "mean_stack_len", "short_copies_pct", "copy_ns_each", "sample_ns_each"]
    print(" ".join(f"{c:>22}" for c in cols))
    for r in rows:
        print(" ".join(f"{str(r[c]):>22}" for c in cols))
    with open(a.json, "w") as f:
        json.dump({"workload": RUN, "frequency_hz": 1000, "rows": rows}, f, indent=1)
        f.write("\n")
    print("written to", a.json)


if __name__ == "__main__":
    main()
