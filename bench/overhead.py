#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""hvprof's overhead benchmark (issue 6): one command that prints a table and writes it as JSON.

Every figure is a ratio measured in the same run, because absolute times differ from host to
host: the bundled workloads (hvprof-bench cpu: CPU-bound; hvprof-bench syscall: getppid in a
loop) time themselves with the vDSO clock, several repeats per boot, median taken; each
configuration is one boot of the default image:
  - unprofiled (`hvprof run`),
  - bare exits (`record --bare-exits`: the counter makes the vCPU exit at the same rate and
    nothing else happens: the physical floor of sampling by VM exit),
  - hvprof deferred and eager at 100 Hz, 1 kHz and 4 kHz.
Cost per sample = (T_profiled - T_unprofiled) / samples taken while the workload ran; the
floor ratio is hvprof's cost per sample over the bare exit's at the same rate (target <= 1.2).
The per-sample breakdown comes from the VMM's own counters (sample_ns_*, trap_ns_total).
Report side: the meson benchmark `report-export` (1 M samples, 10 k stacks). Boot: time to the
first user-mode sample, and the recording's start-up cost (startup_ns).

With 2 vCPUs only the 1 kHz configurations run, to keep the benchmark under 15 minutes.

--interleave N (issue 17): the 1 kHz configurations on 1 vCPU, both mark strategies side by
side (deferred with `--marks flag` and `--marks trap`), run in rounds A B C D E, A B C ..., the
order rotated each round, N rounds; each ratio is taken against the same round's unprofiled
boot and given as the median with its range over the rounds (a noisy host shows up as a wide
range, not as a wrong number), beside the VMM's own time per sample from the counters.

--phases N (issue 17): the comparison inside one boot. `record --bench-phases` lets the
workload (`hvprof-bench phases`) switch hvprof between no sampling, bare exits and sampling
before each slice of ~SLICE_MS of the same work, N rounds of the three in rotating order, so
unprofiled, floor and profiled run side by side within seconds of each other instead of in
boots minutes apart (whose spread on a shared host exceeds the effects). One boot per mark
strategy of --configs (flag; flag-all: flag with --mark-every-stay; trap; eager; flag-fp and
eager-fp: flag and eager with --call-graph fp), repeated --boots times; the floor ratio is taken from the sums
over the rounds (cost per sample = (T_phase - T_off) / (rate x T_phase)), with a bootstrap
interval over rounds, beside the VMM's counters.

Both print issue 17's targets at the end, PASS or FAIL each (bench/overhead_targets.py, which
also reads a stored result file).

usage: bench/overhead.py [--build DIR] [--json FILE] [--cpus LIST] [--quick] [--interleave N]
                         [--phases N [--slice-ms MS] [--boots B] [--kinds K,..] [--configs C,..]]
"""
import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "kvm"))
import hvprec  # noqa: E402
import overhead_targets  # noqa: E402

REPEATS = 3
RUN = f"/bin/hvprof-bench cpu {REPEATS}; /bin/hvprof-bench syscall {REPEATS}"


def runtimes(console):
    out = {}
    for kind, secs in re.findall(r"hvprof-bench: (\w+) run \d+: ([\d.]+) seconds", console):
        out.setdefault(kind, []).append(float(secs))
    return {k: statistics.median(v) for k, v in out.items()}


def boot(hvprof, args, cpus, work):
    data = os.path.join(work, "bench.data")
    cmd = [hvprof] + args + ["--cpus", str(cpus), "--run", RUN, "--duration", "400"]
    if args[0] == "record":
        cmd[2:2] = ["-o", data]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wall = time.time() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-500:]}")
    res = {"runtimes": runtimes(r.stdout), "wall_s": wall}
    if args[0] == "record":
        rec = hvprec.read(data)
        res["counters"] = rec["counters"]
        res["samples_s"] = None
        m = re.search(r"(\d+) samples \((\d+)/s", r.stderr)
        if m:
            res["samples_per_s"] = int(m.group(2))
    return res


def table_rows(configs, ncpu):
    """Ratios and per-sample costs of the configurations of one vCPU count."""
    b1, b2 = configs["unprofiled"]["runtimes"], configs["unprofiled-again"]["runtimes"]
    base = {k: min(b1[k], b2.get(k, b1[k])) for k in b1}

    rows = []
    for name, res in configs.items():
        if name == "unprofiled-again":
            continue
        row = {"config": name, "vcpus": ncpu}
        if name == "unprofiled":
            row["baseline_spread"] = {k: abs(b1[k] - b2.get(k, b1[k])) / base[k] for k in b1}
        for kind in ("cpu", "syscall"):
            t = res["runtimes"].get(kind)
            row[f"{kind}_ratio"] = t / base[kind] if t and base.get(kind) else None
        c = res.get("counters", {})
        if c.get("samples") and "@" in name:
            hz = int(name.split("@")[1])
            n_s = c["samples"]
            row["samples"] = n_s
            for kind in ("cpu", "syscall"):
                t = res["runtimes"].get(kind)
                if t and base.get(kind):
                    # samples during one timed run: rate x run time (CPU-clock counter)
                    row[f"{kind}_cost_us"] = (t - base[kind]) / (hz * t * ncpu) * 1e6
            if not name.startswith("bare"):
                row.update(stage_ns(c))
                row["ns_total"] = c.get("sample_ns_total", 0) / n_s
                if c.get("samples_in_workload"):
                    row["ns_workload"] = c["sample_ns_in_workload"] / c["samples_in_workload"]
                    row["ns_workload_median"] = workload_quantile(c, 0.5)
                    row.update(workload_by_mode(c))
                if c.get("traps_hit"):
                    row["trap_us"] = c["trap_ns_total"] / c["traps_hit"] / 1000
                    row["traps_per_mark"] = c["traps_hit"] / max(1, c.get("marks", 1))
            row["boot_to_user_s"] = c.get("first_user_ns", 0) / 1e9
            row["startup_ms"] = c.get("startup_ns", 0) / 1e6
        rows.append(row)
    for row in rows:
        if row["config"].startswith(("deferred", "eager")):
            bare = next((r for r in rows if r["config"] == "bare@" + row["config"].split("@")[1]
                        and r["vcpus"] == row["vcpus"]), None)
            for kind in ("cpu", "syscall"):
                hv, fl = row.get(f"{kind}_cost_us"), bare and bare.get(f"{kind}_cost_us")
                if hv is not None and fl and fl > 0:
                    row[f"{kind}_floor_ratio"] = hv / fl
    return rows


INTERLEAVED = [("unprofiled", ["run"]),
               ("bare", ["record", "-F", "1000", "--bare-exits"]),
               ("flag", ["record", "-F", "1000", "--callchain-mode", "deferred",
                         "--marks", "flag"]),
               ("trap", ["record", "-F", "1000", "--callchain-mode", "deferred",
                         "--marks", "trap"]),
               ("eager", ["record", "-F", "1000", "--callchain-mode", "eager"])]


def workload_quantile(c, q):
    """The q-quantile (ns) of the workload's sample times, from the workload_sample_le_*ns
    counters, whose bounds the names give (linear within a bucket; None without them or
    beyond the last bound)."""
    buckets = sorted((int(m.group(1)), n) for k, n in c.items()
                     if (m := re.fullmatch(r"workload_sample_le_(\d+)ns", k)))
    total = sum(n for _, n in buckets) + c.get("workload_sample_over_32000ns", 0)
    if not buckets or not total:
        return None
    want, seen, lo = q * total, 0, 0
    for bound, n in buckets:
        if n and seen + n >= want:
            return lo + (bound - lo) * (want - seen) / n
        seen, lo = seen + n, bound
    return None


STAGES = ("regs", "identity", "kernel_unwind", "user", "write")


def stage_ns(c):
    """The sampler's stages per sample over the whole boot (sample_ns_* / samples: ns_regs,
    ns_identity, ns_kernel_unwind, ns_user, ns_write), and the kernel unwind per kernel sample,
    the only samples that have one (ns_kernel_unwind_per_kernel_sample); {} without samples."""
    n = c.get("samples", 0)
    if not n:
        return {}
    out = {f"ns_{part}": c.get(f"sample_ns_{part}", 0) / n for part in STAGES}
    if c.get("samples_kernel"):
        out["ns_kernel_unwind_per_kernel_sample"] = \
            c.get("sample_ns_kernel_unwind", 0) / c["samples_kernel"]
    return out


def workload_by_mode(c):
    """The workload's VMM ns per sample of user-mode and of kernel samples apart
    (samples_in_workload_user and sample_ns_in_workload_user; the kernel samples are the rest),
    as {"ns_workload_user": .., "ns_workload_kernel": .., "user_share": ..}; {} for a recording
    without those counters (before them) or without samples of a mode."""
    n, ns = c.get("samples_in_workload", 0), c.get("sample_ns_in_workload", 0)
    nu, nsu = c.get("samples_in_workload_user"), c.get("sample_ns_in_workload_user")
    if nu is None or nsu is None or not n or not 0 < nu < n:
        return {}
    return {"ns_workload_user": nsu / nu, "ns_workload_kernel": (ns - nsu) / (n - nu),
            "user_share": nu / n}


def spread(values, fmt):
    v = [x for x in values if x is not None]
    if not v:
        return "-"
    return f"{fmt.format(statistics.median(v))} [{fmt.format(min(v))}-{fmt.format(max(v))}]"


def interleaved(hvprof, rounds, work):
    """Rounds of the 1 kHz configurations on 1 vCPU, rotated; per-round ratios."""
    per = {name: [] for name, _ in INTERLEAVED}
    n = len(INTERLEAVED)
    for r in range(rounds):
        order = INTERLEAVED[r % n:] + INTERLEAVED[:r % n]
        for name, args in order:
            print(f"bench: round {r + 1}/{rounds} {name} ...", flush=True)
            per[name].append(boot(hvprof, args, 1, work))
    rows = []
    for name, _ in INTERLEAVED:
        row = {"config": name, "rounds": []}
        for r in range(rounds):
            base = per["unprofiled"][r]["runtimes"]
            res = per[name][r]
            c = res.get("counters", {})
            rr = {}
            for kind in ("cpu", "syscall"):
                t = res["runtimes"].get(kind)
                if t and base.get(kind):
                    rr[f"{kind}_ratio"] = t / base[kind]
                    # samples during one timed run: rate x run time (CPU-clock counter)
                    rr[f"{kind}_cost_us"] = (t - base[kind]) / (1000 * t) * 1e6
            if c.get("samples"):
                # vCPU ioctls besides KVM_RUN (register writes, breakpoint changes): each a
                # vcpu_load, several us on a nested PVM host; the PVM SYSCALL fix-up's too
                rr["ioctl_us"] = (c.get("regs_write_ns", 0) + c.get("debug_set_ns", 0)) / \
                    c["samples"] / 1000
            if c.get("samples") and name != "bare":
                rr["ns_total"] = c.get("sample_ns_total", 0) / c["samples"]
                if c.get("samples_in_workload"):
                    # the workload's samples only: boot (kernel threads, first touches of
                    # every task) and shutdown left out; the median from the histogram
                    rr["ns_workload"] = c["sample_ns_in_workload"] / c["samples_in_workload"]
                    rr["ns_workload_median"] = workload_quantile(c, 0.5)
                    rr["ns_workload_p90"] = workload_quantile(c, 0.9)
                    rr.update(workload_by_mode(c))
                rr.update(stage_ns(c))
                if c.get("traps_hit"):
                    rr["trap_us"] = c["trap_ns_total"] / c["traps_hit"] / 1000
                    rr["no_mark_pct"] = 100 * c.get("traps_no_mark", 0) / c["traps_hit"]
                    rr["no_mark_idle_pct"] = 100 * c.get("loop_hits_idle", 0) / c["traps_hit"]
                    rr["traps_per_mark"] = c["traps_hit"] / max(1, c.get("marks", 1))
                if c.get("traps_in_workload"):
                    rr["no_mark_workload_pct"] = 100 * c.get("traps_no_mark_in_workload", 0) / \
                        c["traps_in_workload"]
                # the guest-side evidence (flag strategy): a new mark's flag on a task whose
                # return hvprof saw found the earlier one cleared; flagged tasks read back at
                # the end set for no reason the guest shows
                ev = overhead_targets.flag_evidence(c)
                if ev:
                    rr["cleared_pct"], rr["left_at_end"] = ev
            row["rounds"].append(rr)
        rows.append(row)
    bare = next(r for r in rows if r["config"] == "bare")
    for row in rows:
        for i, rr in enumerate(row["rounds"]):
            for kind in ("cpu", "syscall"):
                hv, fl = rr.get(f"{kind}_cost_us"), bare["rounds"][i].get(f"{kind}_cost_us")
                if hv is not None and fl and fl > 0 and row["config"] not in ("bare",
                                                                                "unprofiled"):
                    rr[f"{kind}_floor_ratio"] = hv / fl
    print(f"\nhvprof overhead, 1 vCPU at 1 kHz, {rounds} interleaved rounds: median [range]")
    print(f"{'config':10} {'cpu x':>22} {'sys x':>22} {'floor cpu':>20} {'floor sys':>20} "
          f"{'VMM ns/sample':>20} {'... in workload':>20} {'... median':>20} {'... p90':>20} "
          f"{'trap us':>8} {'no-mark %':>9} {'... in wl':>9} {'... idle':>9} {'traps/mark':>10} "
          f"{'ioctl us/sample':>18} {'cleared %':>20} {'left':>10}")
    for row in rows:
        col = lambda k, fmt: spread([rr.get(k) for rr in row["rounds"]], fmt)  # noqa: E731
        print(f"{row['config']:10} {col('cpu_ratio', '{:.3f}'):>22} "
              f"{col('syscall_ratio', '{:.3f}'):>22} {col('cpu_floor_ratio', '{:.2f}'):>20} "
              f"{col('syscall_floor_ratio', '{:.2f}'):>20} {col('ns_total', '{:.0f}'):>20} "
              f"{col('ns_workload', '{:.0f}'):>20} {col('ns_workload_median', '{:.0f}'):>20} "
              f"{col('ns_workload_p90', '{:.0f}'):>20} "
              f"{col('trap_us', '{:.1f}'):>8} {col('no_mark_pct', '{:.2f}'):>9} "
              f"{col('no_mark_workload_pct', '{:.2f}'):>9} {col('no_mark_idle_pct', '{:.2f}'):>9} "
              f"{col('traps_per_mark', '{:.2f}'):>10} {col('ioctl_us', '{:.1f}'):>18} "
              f"{col('cleared_pct', '{:.2f}'):>20} {col('left_at_end', '{:.0f}'):>10}")
    print("floor = hvprof's cost per sample / the bare exit's in the same round; VMM ns/sample "
          "= sample_ns_total / samples (counters: the whole boot), in workload = the same over the "
          "samples taken between the guest's WORKLOAD_START and WORKLOAD_END events (mean; median "
          "and p90 from the workload_sample_le_* histogram); no-mark % = traps_no_mark / traps_hit (in wl: the same over the hits between WORKLOAD_START and END; idle: the loop's hits with no mark pending, each disarming it); ioctl "
          "us/sample = time in KVM_SET_REGS/SREGS and KVM_SET_GUEST_DEBUG per sample (the whole "
          "boot's, the PVM SYSCALL fix-up's included); cleared % = flags_seen_clear over all "
          "flags_seen_*: a new mark's flag on a task whose return hvprof saw found the earlier "
          "one cleared by the guest kernel; left = flagged tasks read back at the end with the "
          "flag set for no reason the guest shows (flag_scan_set_other)")
    return {"rounds": rounds, "rows": rows, "raw": per}


PHASE_CONFIGS = [("flag", ["--callchain-mode", "deferred", "--marks", "flag"]),
                 ("flag-all", ["--callchain-mode", "deferred", "--marks", "flag",
                               "--mark-every-stay"]),
                 ("trap", ["--callchain-mode", "deferred", "--marks", "trap"]),
                 ("eager", ["--callchain-mode", "eager"]),
                 # the same with --call-graph fp: 64 bytes of stack per walk, not the DWARF copy
                 ("flag-fp", ["--callchain-mode", "deferred", "--marks", "flag",
                              "--call-graph", "fp"]),
                 ("eager-fp", ["--callchain-mode", "eager", "--call-graph", "fp"])]
PHASE_DEFAULT = "flag,flag-all,trap,eager"


def phase_times(console):
    """{kind: [[t_off, t_bare, t_on] per round]} from hvprof-bench phases' lines."""
    per = {}
    for kind, r, p, secs in re.findall(
            r"hvprof-bench: phases (\w+) round (\d+) phase (\d): ([\d.]+) seconds", console):
        per.setdefault(kind, {}).setdefault(int(r), [None] * 3)[int(p)] = float(secs)
    return {k: [v[r] for r in sorted(v) if None not in v[r]] for k, v in per.items()}


def phase_floor(rounds, hz):
    """Ratios and costs per sample from the rounds' sums: {x_bare, x_on, bare_us, on_us, floor}."""
    t0, t1, t2 = (sum(r[i] for r in rounds) for i in range(3))
    bare, on = (t1 - t0) / (hz * t1) * 1e6, (t2 - t0) / (hz * t2) * 1e6
    return {"x_bare": t1 / t0, "x_on": t2 / t0, "bare_us": bare, "on_us": on,
            "floor": on / bare if bare > 0 else None}


def bootstrap(rounds, hz, key, n=2000):
    """A 90% interval of phase_floor(...)[key] over rounds resampled with replacement."""
    rng = random.Random(17)
    vals = sorted(v for v in (phase_floor([rng.choice(rounds) for _ in rounds], hz)[key]
                              for _ in range(n)) if v is not None)
    if len(vals) < n // 2:
        return None
    return vals[int(0.05 * len(vals))], vals[int(0.95 * len(vals)) - 1]


def phases(hvprof, rounds, slice_ms, boots, kinds, work, configs):
    run = "; ".join(f"/bin/hvprof-bench phases {k} {rounds} {slice_ms}" for k in kinds)
    raw = []
    for b in range(boots):
        order = configs[b % len(configs):] + configs[:b % len(configs)]
        for name, args in order:
            print(f"bench: boot {b + 1}/{boots} {name} ...", flush=True)
            data = os.path.join(work, "phases.data")
            cmd = [hvprof, "record", "-o", data, "-F", "1000", "--bench-phases"] + args + \
                ["--cpus", "1", "--run", run, "--duration", "900"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-500:]}")
            c = hvprec.read(data)["counters"]
            res = {"config": name, "boot": b, "times": phase_times(r.stdout), "counters": c,
                   "stay_walked_inline": c.get("stay_walked_inline")}
            if c.get("samples_in_workload"):
                res["ns_workload"] = c["sample_ns_in_workload"] / c["samples_in_workload"]
                res["ns_workload_median"] = workload_quantile(c, 0.5)
                res.update(workload_by_mode(c))
            if c.get("traps_hit"):
                res["trap_us"] = c["trap_ns_total"] / c["traps_hit"] / 1000
                res["no_mark_pct"] = 100 * c.get("traps_no_mark", 0) / c["traps_hit"]
                res["hits_per_sample"] = c["traps_hit"] / max(1, c.get("samples", 1))
            raw.append(res)
    print(f"\nhvprof overhead inside one boot, 1 vCPU at 1 kHz: {rounds} rounds of ~{slice_ms} ms "
          f"slices (off, bare exits, on), {boots} boot(s) per strategy")
    print(f"{'config':8} {'boot':>4} {'kind':8} {'bare x':>7} {'on x':>7} {'bare us':>8} "
          f"{'on us':>8} {'floor':>6} {'floor 90%':>14} {'off cv %':>8} {'VMM ns':>7} "
          f"{'median':>7} {'user':>6} {'kernel':>6} {'trap us':>7} {'no-mark %':>9} "
          f"{'hits/smp':>8}")
    for res in raw:
        for kind in kinds:
            rs = res["times"].get(kind)
            if not rs:
                continue
            f = phase_floor(rs, 1000)
            ci = bootstrap(rs, 1000, "floor")
            offs = [r[0] for r in rs]
            f["floor_90"] = ci
            f["off_cv_pct"] = 100 * statistics.pstdev(offs) / statistics.mean(offs)
            res.setdefault("summary", {})[kind] = f
            g = lambda k, fmt: fmt.format(res[k]) if res.get(k) is not None else "-"  # noqa
            print(f"{res['config']:8} {res['boot'] + 1:>4} {kind:8} {f['x_bare']:7.3f} "
                  f"{f['x_on']:7.3f} {f['bare_us']:8.1f} {f['on_us']:8.1f} "
                  f"{f['floor'] if f['floor'] is not None else float('nan'):6.2f} "
                  f"{(f'{ci[0]:.2f}-{ci[1]:.2f}' if ci else '-'):>14} {f['off_cv_pct']:8.1f} "
                  f"{g('ns_workload', '{:.0f}'):>7} {g('ns_workload_median', '{:.0f}'):>7} "
                  f"{g('ns_workload_user', '{:.0f}'):>6} {g('ns_workload_kernel', '{:.0f}'):>6} "
                  f"{g('trap_us', '{:.1f}'):>7} {g('no_mark_pct', '{:.2f}'):>9} "
                  f"{g('hits_per_sample', '{:.2f}'):>8}")
    if boots > 1:
        print("pooled: every boot's rounds of a strategy together")
        for name, _ in configs:
            for kind in kinds:
                rs = [r for res in raw if res["config"] == name
                      for r in res["times"].get(kind, [])]
                if not rs:
                    continue
                f, ci = phase_floor(rs, 1000), bootstrap(rs, 1000, "floor")
                print(f"{name:8} {'all':>4} {kind:8} {f['x_bare']:7.3f} {f['x_on']:7.3f} "
                      f"{f['bare_us']:8.1f} {f['on_us']:8.1f} "
                      f"{f['floor'] if f['floor'] is not None else float('nan'):6.2f} "
                      f"{(f'{ci[0]:.2f}-{ci[1]:.2f}' if ci else '-'):>14}")
    print("x = slice time in the phase / with sampling off (sums over the rounds); us = cost per "
          "sample, (T - T_off) / (1000/s x T); floor = on us / bare us, 90% = bootstrap over "
          "rounds; off cv = spread of the off slices; VMM ns = sample_ns_in_workload / "
          "samples_in_workload (median from the histogram), user / kernel = the same over the "
          "user-mode and the kernel samples apart; hits/smp = trap hits per sample "
          "(whole boot)")
    return {"rounds": rounds, "slice_ms": slice_ms, "boots": boots, "kinds": kinds, "raw": raw}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--json", default=os.path.join(HERE, "results", "overhead.json"))
    ap.add_argument("--cpus", default="1,2", help="vCPU counts, e.g. 1,2")
    ap.add_argument("--quick", action="store_true", help="1 kHz only")
    ap.add_argument("--interleave", type=int, default=0,
                    help="N rounds of the 1 kHz configurations on 1 vCPU, both mark strategies")
    ap.add_argument("--phases", type=int, default=0,
                    help="N rounds of off/bare/on slices inside one boot per mark strategy")
    ap.add_argument("--slice-ms", type=int, default=250, help="--phases: ms per slice")
    ap.add_argument("--boots", type=int, default=1, help="--phases: boots per strategy")
    ap.add_argument("--kinds", default="syscall,cpu", help="--phases: workloads, e.g. syscall")
    ap.add_argument("--configs", default=PHASE_DEFAULT,
                    help="--phases: strategies, of " + ",".join(n for n, _ in PHASE_CONFIGS))
    a = ap.parse_args()
    hvprof = os.path.join(a.build, "cli", "hvprof")
    work = tempfile.mkdtemp(prefix="hvprof-bench-")
    results = {"machine": {"host": platform.node(), "kernel": platform.release(),
                           "cpus": os.cpu_count(),
                           "kvm": "pvm" if os.path.exists("/sys/module/kvm_pvm") else "kvm",
                           # scripts/nested-svm.sh: "nested-tcg" (timings are QEMU's TCG's)
                           "host_kind": os.environ.get("HVPROF_HOST", "")},
               "configs": {}, "rows": []}
    if a.phases or a.interleave:
        if a.phases:
            key = "phases"
            known = dict(PHASE_CONFIGS)
            names = [n for n in a.configs.split(",") if n]
            if not names or any(n not in known for n in names):
                ap.error(f"--configs '{a.configs}': want names of "
                         + ",".join(n for n, _ in PHASE_CONFIGS))
            results[key] = phases(hvprof, a.phases, a.slice_ms, a.boots,
                                  [k for k in a.kinds.split(",") if k], work,
                                  [(n, known[n]) for n in names])
        else:
            key = "interleaved"
            results[key] = interleaved(hvprof, a.interleave, work)
        # issue 17's "done when", target by target (bench/overhead_targets.py)
        results["issue17"] = overhead_targets.targets_of(results)
        print()
        overhead_targets.print_targets(results["issue17"], results)
        out = a.json.replace("overhead.json", f"overhead_{key}.json")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as fh:
            json.dump(results, fh, indent=1)
        print(f"bench: wrote {out}")
        return
    for ncpu in [int(x) for x in a.cpus.split(",") if x]:
        rates = [1000] if a.quick or ncpu > 1 else [100, 1000, 4000]
        configs = {}

        def step(name, args):
            print(f"bench: {ncpu} vCPU {name} ...", flush=True)
            configs[name] = boot(hvprof, args, ncpu, work)

        step("unprofiled", ["run"])
        for hz in rates:
            step(f"bare@{hz}", ["record", "-F", str(hz), "--bare-exits"])
            step(f"deferred@{hz}", ["record", "-F", str(hz), "--callchain-mode", "deferred"])
            if hz >= 1000:
                step(f"eager@{hz}", ["record", "-F", str(hz), "--callchain-mode", "eager"])
        # the baseline once more at the end: a busy host shows up as two different baselines
        step("unprofiled-again", ["run"])
        results["configs"][f"{ncpu}vcpu"] = configs
        results["rows"] += table_rows(configs, ncpu)
    rows = results["rows"]

    r = subprocess.run(["meson", "test", "-C", a.build, "--benchmark", "--verbose",
                        "report-export"], capture_output=True, text=True, timeout=900)
    results["report_side"] = [l for l in r.stdout.splitlines()
                              if re.search(r"samples/s|MiB|==", l)][:40]

    def f(v, fmt):
        return fmt.format(v) if isinstance(v, (int, float)) else "-"

    print(f"\nhvprof overhead on {results['machine']['host']} ({results['machine']['kvm']}, "
          f"{results['machine']['cpus']} host CPUs); ratios within this run")
    print(f"{'vCPUs':5} {'config':14} {'cpu x':>7} {'sys x':>7} {'cpu us':>9} {'sys us':>9} "
          f"{'floor cpu':>9} {'floor sys':>9} {'regs':>6} {'ident':>6} {'kunw':>6} "
          f"{'user':>6} {'write':>6} {'trap us':>7}")
    for row in rows:
        print(f"{row['vcpus']:5} {row['config']:14} {f(row.get('cpu_ratio'), '{:.3f}'):>7} "
              f"{f(row.get('syscall_ratio'), '{:.3f}'):>7} "
              f"{f(row.get('cpu_cost_us'), '{:.1f}'):>9} {f(row.get('syscall_cost_us'), '{:.1f}'):>9} "
              f"{f(row.get('cpu_floor_ratio'), '{:.2f}'):>9} "
              f"{f(row.get('syscall_floor_ratio'), '{:.2f}'):>9} "
              f"{f(row.get('ns_regs'), '{:.0f}'):>6} {f(row.get('ns_identity'), '{:.0f}'):>6} "
              f"{f(row.get('ns_kernel_unwind'), '{:.0f}'):>6} {f(row.get('ns_user'), '{:.0f}'):>6} "
              f"{f(row.get('ns_write'), '{:.0f}'):>6} {f(row.get('trap_us'), '{:.1f}'):>7}")
    boots = [r["boot_to_user_s"] for r in rows if r.get("boot_to_user_s")]
    starts = [r["startup_ms"] for r in rows if r.get("startup_ms")]
    if boots:
        print(f"boot to first user sample: median {statistics.median(boots):.1f} s; "
              f"record start-up: median {statistics.median(starts):.0f} ms")
    print("columns: x = workload runtime profiled/unprofiled; cpu/sys us = cost per sample in us "
          "(from runtimes); floor = hvprof cost / bare-exit cost per sample; regs..write = "
          "VMM ns per sample by stage (counters); trap us = VMM time per trap hit")
    for row in rows:
        if "baseline_spread" in row:
            print(f"baseline spread with {row['vcpus']} vCPU(s) (two unprofiled boots): " +
                  ", ".join(f"{k} {100 * v:.1f}%" for k, v in row["baseline_spread"].items()))
    print("report side (1 M samples, 10 k stacks):")
    for l in results["report_side"]:
        print("  " + l.strip())
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w") as fh:
        json.dump(results, fh, indent=1)
    print(f"bench: wrote {a.json}")


if __name__ == "__main__":
    main()
