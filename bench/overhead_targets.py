#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 17's "done when", target by target, from one run of bench/overhead.py.

The targets hold for the deferred mode's flag strategy (config "flag") at 1 kHz on 1 vCPU:
  - system-call-heavy workload: cost per sample <= 1.2 x the bare-exit floor;
  - CPU-bound workload: within noise of the floor (its 90% interval, or its range over rounds,
    reaches down to 1.0);
  - traps_no_mark under 1% of trap hits, in every boot;
  - hvprof's own VMM time per sample <= 1500 ns (the mean over the workload's samples,
    sample_ns_in_workload / samples_in_workload; the whole boot's where a recording lacks them);
  - the guest-side evidence of cleared flags (counters flags_seen_* and flag_scan_set_other, in
    recordings since 30f7b7e): >= 98% of new flags on tasks whose return was seen found the
    earlier one cleared, and at most one flag read back at the end set for no reason the guest
    shows (a run may end between a loop hit and the clear it completes; as the kvm tests).
The ground truth (same user paths as eager, no thread with another's stack, 1 and 2 vCPUs) is
the kvm tests' (kvm-deferred-callchains, kvm-smp), not this benchmark's.

Either mode of overhead.py gives the figures: --phases (floors pooled over the boots of the
strategy, 90% bootstrap interval) or --interleave (median and range of the per-round ratios).

usage: bench/overhead_targets.py RESULTS.json   (a file overhead.py wrote; prints one line per
                                                 target: PASS, FAIL or "not measured")
"""
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

FLOOR_MAX = 1.2
NS_MAX = 1500
NO_MARK_MAX_PCT = 1.0
CLEARED_MIN_PCT = 98.0
LEFT_MAX = 1  # flags read back set at the end for no reason the guest shows, per boot
CONFIG = "flag"


def _verdict(ok):
    return "not measured" if ok is None else ("PASS" if ok else "FAIL")


def _fmt_range(vals, fmt):
    return (f"{fmt.format(statistics.median(vals))} [{fmt.format(min(vals))}-"
            f"{fmt.format(max(vals))}]")


def flag_evidence(counters):
    """(cleared %, flags left set for no reason) of one boot's counters, or None when the
    recording has no flag evidence (older than 30f7b7e, or no new flag after a seen return)."""
    seen = sum(counters.get(k, 0) for k in ("flags_seen_clear", "flags_seen_kernel",
                                            "flags_seen_set"))
    if not seen or "flag_scan_set_other" not in counters:
        return None
    return 100 * counters.get("flags_seen_clear", 0) / seen, counters["flag_scan_set_other"]


def _vmm_ns(counters):
    if counters.get("samples_in_workload"):
        return counters["sample_ns_in_workload"] / counters["samples_in_workload"], "workload"
    if counters.get("samples"):
        return counters.get("sample_ns_total", 0) / counters["samples"], "whole boot"
    return None, None


def _per_boot(targets, boots):
    """The targets read from each boot's counters: no-mark %, VMM ns, the flag evidence."""
    pcts = [100 * c.get("traps_no_mark", 0) / c["traps_hit"] for c in boots if c.get("traps_hit")]
    ok = all(p < NO_MARK_MAX_PCT for p in pcts) if pcts else None
    measured = f"{_fmt_range(pcts, '{:.2f}')}% over {len(pcts)} boot(s)" if pcts else "-"
    # recordings since aef58b6 tell the hits without a mark apart (flag ledger): the kernel's
    # own flag (task work, rseq; or a task hvprof never flagged) against hvprof's (acting late,
    # or set for no reason the guest shows)
    told = [c for c in boots if c.get("traps_hit") and "no_mark_other" in c]
    if told:
        own = [100 * (c.get("no_mark_flagged_late", 0) + c["no_mark_other"]) / c["traps_hit"]
               for c in told]
        measured += f"; hvprof's own flag (late, unexplained) {_fmt_range(own, '{:.2f}')}%"
    targets.append({"target": f"traps_no_mark < {NO_MARK_MAX_PCT:g}% of trap hits, every boot",
                    "measured": measured, "verdict": _verdict(ok)})
    ns = [(v, how) for v, how in map(_vmm_ns, boots) if v is not None]
    vals = [v for v, _ in ns]
    ok = statistics.median(vals) <= NS_MAX if vals else None
    hows = sorted({how for _, how in ns})
    targets.append({"target": f"VMM time per sample <= {NS_MAX} ns (each boot's mean, their "
                              "median)",
                    "measured": (f"{_fmt_range(vals, '{:.0f}')} ns, mean over the "
                                 f"{' or '.join(hows)}'s samples" if vals else "-"),
                    "verdict": _verdict(ok)})
    ev = [e for e in map(flag_evidence, boots) if e is not None]
    # at most one left per boot, as kvm-deferred-callchains allows: a run may end between a
    # loop hit and the clear that hit completes
    ok = (all(p >= CLEARED_MIN_PCT and left <= LEFT_MAX for p, left in ev)) if ev else None
    targets.append({"target": f"flags found cleared >= {CLEARED_MIN_PCT:g}%, at most "
                              f"{LEFT_MAX} left at the end, every boot",
                    "measured": (f"cleared {_fmt_range([p for p, _ in ev], '{:.1f}')}%, left "
                                 f"{sum(left for _, left in ev)} in all" if ev else "-"),
                    "verdict": _verdict(ok)})


def from_phases(ph):
    """Targets of an overhead.py --phases result (its "phases" object)."""
    import overhead  # noqa: E402  (phase_floor, bootstrap: the figures the table printed)

    runs = [r for r in ph["raw"] if r["config"] == CONFIG]
    targets = []
    for kind, want in (("syscall", "floor"), ("cpu", "noise")):
        rs = [r for res in runs for r in res["times"].get(kind, [])]
        f = overhead.phase_floor(rs, 1000) if rs else {"floor": None}
        ci = overhead.bootstrap(rs, 1000, "floor") if rs else None
        ok = None
        if f["floor"] is not None:
            ok = f["floor"] <= FLOOR_MAX if want == "floor" else (ci is not None and ci[0] <= 1.0)
        measured = "-"
        if f["floor"] is not None:
            measured = (f"floor {f['floor']:.2f}, 90% {ci[0]:.2f}-{ci[1]:.2f}" if ci else
                        f"floor {f['floor']:.2f}, no interval") + \
                f", {len(rs)} rounds of {len(runs)} boot(s)"
            if want == "floor" and ci and ci[0] <= FLOOR_MAX < ci[1]:
                measured += f"; the interval crosses {FLOOR_MAX:g}"
        targets.append({"target": (f"{kind}: cost per sample <= {FLOOR_MAX:g} x the bare-exit "
                                   "floor" if want == "floor" else
                                   f"{kind}: within noise of the floor (90% interval reaches 1.0)"),
                        "measured": measured, "verdict": _verdict(ok)})
    _per_boot(targets, [r["counters"] for r in runs if "counters" in r])
    return targets


def from_interleaved(il):
    """Targets of an overhead.py --interleave result (its "interleaved" object)."""
    row = next((r for r in il["rows"] if r["config"] == CONFIG), None)
    rounds = row["rounds"] if row else []
    targets = []
    for kind, want in (("syscall", "floor"), ("cpu", "noise")):
        vals = [rr[f"{kind}_floor_ratio"] for rr in rounds
                if rr.get(f"{kind}_floor_ratio") is not None]
        ok = None
        if vals:
            ok = statistics.median(vals) <= FLOOR_MAX if want == "floor" else min(vals) <= 1.0
        targets.append({"target": (f"{kind}: cost per sample <= {FLOOR_MAX:g} x the bare-exit "
                                   "floor (median over rounds)" if want == "floor" else
                                   f"{kind}: within noise of the floor (range reaches 1.0)"),
                        "measured": (f"floor {_fmt_range(vals, '{:.2f}')} over {len(vals)} "
                                     "round(s)" + (f"; the range crosses {FLOOR_MAX:g}"
                                                   if want == "floor" and
                                                   min(vals) <= FLOOR_MAX < max(vals) else "")
                                     if vals else "-"),
                        "verdict": _verdict(ok)})
    raw = il.get("raw", {}).get(CONFIG, [])
    _per_boot(targets, [r["counters"] for r in raw if "counters" in r])
    return targets


def targets_of(results):
    """The targets of a whole overhead.py result file's object; [] for neither mode."""
    if "phases" in results:
        return from_phases(results["phases"])
    if "interleaved" in results:
        return from_interleaved(results["interleaved"])
    return []


def print_targets(targets, results, out=sys.stdout):
    """Print @targets (targets_of(@results)), one line each, and which mode measured them."""
    mode = ("--phases: in-boot slices, floors pooled over the boots" if "phases" in results else
            "--interleave: ratios across boots (the --phases interval is the stronger test)")
    print(f"issue 17 targets, deferred mode with --marks {CONFIG}, 1 kHz, 1 vCPU; {mode}; the "
          "ground truth is the kvm tests' (kvm-deferred-callchains, kvm-smp):", file=out)
    for t in targets:
        print(f"  {t['verdict']:12} {t['target']}: {t['measured']}", file=out)
    if results.get("machine", {}).get("host_kind") == "nested-tcg":
        print("  (measured under scripts/nested-svm.sh: every time is QEMU's TCG's, so the floors "
              "and the VMM time say nothing of a host; the counts stand)", file=out)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench/overhead_targets.py RESULTS.json (written by bench/overhead.py "
                 "--phases N or --interleave N)")
    path = sys.argv[1]
    try:
        with open(path) as fh:
            results = json.load(fh)
    except (OSError, ValueError) as e:
        sys.exit(f"overhead_targets: {path}: {e}")
    targets = targets_of(results)
    if not targets:
        sys.exit(f"overhead_targets: {path}: no \"phases\" or \"interleaved\" result (written by "
                 "bench/overhead.py --phases N or --interleave N)")
    print_targets(targets, results)


if __name__ == "__main__":
    main()
