#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Two builds of hvprof compared by the VMM's time per sample (issue 17): in each round both
boot at the same time, each pinned to one host core (swapped every round), so that the host's
noise, which moves one build by 2.5x within minutes on a shared PVM host, falls on both alike.

Each boot: `hvprof record -F 1000 --cpus 1` of the default image running `hvprof-bench syscall
3; hvprof-bench cpu 3`; the figure is the recording's sample_ns_in_workload /
samples_in_workload (host ns per sample while the workload ran), with the user-mode and kernel
samples apart where the recording has the counters, and in the JSON each stage per sample over
the whole boot (overhead.stage_ns); the kernel unwind per kernel sample is printed too (a change
to one stage shows there when the whole is lost in the noise). Per round: B / A. At the end:
each build's median, the pairs where B was lower, and a two-sided sign test over the pairs (the
chance of a split at least this uneven if neither build were faster). A change of layout or code
size needs this: an A/B inside one boot (a change applied to every other sample) runs one binary
for both.

usage: bench/pair_boots.py A=PATH/TO/hvprof B=PATH/TO/hvprof [--rounds N] [--json FILE]
       (needs /dev/kvm and two host cores; ~1 minute per round here)
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "kvm"))
import hvprec  # noqa: E402
import overhead  # noqa: E402

RUN = "/bin/hvprof-bench syscall 3; /bin/hvprof-bench cpu 3"
KUNWIND = "ns_kernel_unwind_per_kernel_sample"  # printed for each build (overhead.stage_ns)


def sign_test(lower, n):
    """Two-sided sign test: P(a split at least as uneven as @lower of @n | p = 1/2)."""
    if n == 0:
        return 1.0
    k = min(lower, n - lower)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def figures(counters):
    """VMM ns per workload sample, and of user-mode and kernel samples apart where the
    recording has their counters (overhead.workload_by_mode); None without workload samples."""
    n = counters.get("samples_in_workload", 0)
    if not n:
        return None
    out = {"ns": counters.get("sample_ns_in_workload", 0) / n}
    by_mode = overhead.workload_by_mode(counters)
    if by_mode:
        out["ns_user"], out["ns_kernel"] = by_mode["ns_workload_user"], \
            by_mode["ns_workload_kernel"]
    stages = overhead.stage_ns(counters)
    if stages:
        out["stages"] = stages
    return out


def build_arg(text):
    name, sep, path = text.partition("=")
    if not sep or not name or not os.access(path, os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME=PATH of an hvprof executable")
    return name, os.path.realpath(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=build_arg, help="NAME=PATH of the first build (the baseline)")
    ap.add_argument("b", type=build_arg, help="NAME=PATH of the second build")
    ap.add_argument("--rounds", type=int, default=10, help="rounds of two boots (default 10)")
    ap.add_argument("--json", help="also write the rounds and the summary to this file")
    args = ap.parse_args()
    if args.rounds < 1:
        sys.exit(f"pair_boots: --rounds {args.rounds}: give at least 1")
    if os.cpu_count() < 2:
        sys.exit("pair_boots: needs two host cores (one per build)")
    builds = [args.a, args.b]
    rounds = []
    with tempfile.TemporaryDirectory() as work:
        for r in range(args.rounds):
            procs = []
            try:
                for i, (name, path) in enumerate(builds):
                    core = (i + r) % 2
                    data = os.path.join(work, f"{i}.data")
                    cmd = ["taskset", "-c", str(core), path, "record", "-o", data, "-F",
                           "1000", "--cpus", "1", "--run", RUN, "--duration", "400"]
                    try:
                        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE, text=True)
                    except OSError as e:
                        sys.exit(f"pair_boots: {name}: cannot start {path}: {e}")
                    procs.append((name, core, data, p))
                errs = [p.communicate()[1] for _, _, _, p in procs]
            finally:  # interrupted or a build not started: no boot left running (and
                # writing into the removed dir)
                for _, _, _, p in procs:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
            row = {}
            for (name, core, data, p), err in zip(procs, errs):
                if p.returncode != 0:
                    sys.exit(f"pair_boots: {name} failed in round {r + 1} "
                             f"({p.returncode}): {err[-400:]}")
                if not os.path.exists(data):
                    sys.exit(f"pair_boots: {name} wrote no recording in round {r + 1}")
                f = figures(hvprec.read(data)["counters"])
                if f is None:
                    sys.exit(f"pair_boots: {name}: no samples in the workload window")
                row[name] = dict(f, core=core)
            rounds.append(row)
            a, b = (row[n] for n, _ in builds)
            print(f"round {r + 1}: " + " | ".join(
                f"{n}@{row[n]['core']} {row[n]['ns']:.0f} ns" +
                (f" (user {row[n]['ns_user']:.0f}, kernel {row[n]['ns_kernel']:.0f})"
                 if "ns_user" in row[n] else "") +
                (f" [kernel unwind {row[n]['stages'][KUNWIND]:.0f}]"
                 if KUNWIND in row[n].get("stages", {}) else "")
                for n, _ in builds) +
                f" | {builds[1][0]}/{builds[0][0]} {b['ns'] / a['ns']:.3f}", flush=True)
    (na, _), (nb, _) = builds
    ratios = [row[nb]["ns"] / row[na]["ns"] for row in rounds]
    lower = sum(1 for x in ratios if x < 1)
    summary = {
        "median_" + na: statistics.median(row[na]["ns"] for row in rounds),
        "median_" + nb: statistics.median(row[nb]["ns"] for row in rounds),
        "ratio_median": statistics.median(ratios),
        "b_lower": lower, "pairs": len(ratios),
        "sign_test_p": sign_test(lower, len(ratios)),
    }
    print(f"{na}: median {summary['median_' + na]:.0f} ns; {nb}: median "
          f"{summary['median_' + nb]:.0f} ns; {nb}/{na} median {summary['ratio_median']:.3f}, "
          f"{nb} lower in {lower} of {len(ratios)} pairs (sign test p = "
          f"{summary['sign_test_p']:.3f})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"builds": {na: builds[0][1], nb: builds[1][1]}, "rounds": rounds,
                       "summary": summary}, fh, indent=1)


if __name__ == "__main__":
    main()
