#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/overhead_targets.py on the stored results of earlier runs (bench/results: real boots of
this project's PVM host) and on counters made to sit on each side of a bound: each target's
verdict and the figure it was judged by. Also the arithmetic of bench/overhead.py's split by
mode, of bench/pair_boots.py (its sign test, its figures of one boot) and of
bench/sample_census.py's count of taken branches."""
import copy
import io
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import overhead_targets as ot  # noqa: E402

failures = 0


def check(cond, what):
    global failures
    print(f"{'ok' if cond else 'FAIL'}: {what}")
    if not cond:
        failures += 1


def load(name):
    with open(os.path.join(HERE, "results", name)) as fh:
        return json.load(fh)


def by_target(targets):
    """{first word(s) of the target up to ':' or ' <': (verdict, measured)}"""
    out = {}
    for t in targets:
        key = t["target"].split(":")[0] if t["target"][:4] in ("sysc", "cpu:") else \
            t["target"].split(" ")[0]
        out[key] = (t["verdict"], t["measured"])
    return out


# --phases, 150 rounds x 2 boots of the system-call loop (README: "floor pooled 1.15 [1.04-1.27]")
t = by_target(ot.targets_of(load("overhead_phases_942ef44.json")))
check(t["syscall"] == ("PASS", "floor 1.15, 90% 1.04-1.27, 300 rounds of 2 boot(s); "
                               "the interval crosses 1.2"),
      f"942ef44: the system-call floor as the README's table has it: {t['syscall']}")
check(t["cpu"] == ("not measured", "-"), f"942ef44: no CPU-bound run: {t['cpu']}")
check(t["traps_no_mark"][0] == "PASS" and "0.08-0.36" in t["traps_no_mark"][1],
      f"942ef44: no-mark 0.08 and 0.36%: {t['traps_no_mark']}")
check(t["VMM"][0] == "FAIL" and t["VMM"][1].startswith("2830 [2711-2950] ns"),
      f"942ef44: VMM time above 1500 ns: {t['VMM']}")
check(t["flags"] == ("not measured", "-"), f"942ef44: recorded before the flag evidence: "
      f"{t['flags']}")

# the README's other pooled floor: 1.22, above the bound by its point
t = by_target(ot.targets_of(load("overhead_phases_d276071.json")))
check(t["syscall"] == ("FAIL", "floor 1.22, 90% 1.02-1.47, 300 rounds of 2 boot(s); the "
                               "interval crosses 1.2"),
      f"d276071: the system-call floor 1.22 fails: {t['syscall']}")

# --phases 24 with the CPU-bound loop: its 90% interval stays above 1.0
t = by_target(ot.targets_of(load("overhead_phases_24.json")))
check(t["cpu"][0] == "FAIL" and t["cpu"][1].startswith("floor 1.10, 90% 1.01-1.21"),
      f"phases_24: CPU-bound floor's interval above 1.0: {t['cpu']}")
check(t["syscall"][0] == "FAIL" and t["syscall"][1].startswith("floor 1.54"),
      f"phases_24: system-call floor 1.54: {t['syscall']}")

# --interleave 3: one of three boots had 1.155% no-mark hits
t = by_target(ot.targets_of(load("overhead_interleaved_ioctl_after.json")))
check(t["traps_no_mark"][0] == "FAIL" and "0.62-1.15" in t["traps_no_mark"][1],
      f"ioctl_after: one boot at 1.15% no-mark fails: {t['traps_no_mark']}")
check(t["VMM"][1].endswith("mean over the whole boot's samples"),
      f"ioctl_after: no workload counters, the whole boot's mean: {t['VMM']}")
t = by_target(ot.targets_of(load("overhead_interleaved.json")))
check(t["syscall"] == ("FAIL", "floor 2.02 [1.20-3.13] over 3 round(s); the range crosses 1.2"),
      f"interleaved: the README's 2.02 [1.20-3.13]: {t['syscall']}")
check(t["cpu"][0] == "FAIL" and "[1.04-1.18]" in t["cpu"][1],
      f"interleaved: every round's CPU floor above 1.0: {t['cpu']}")

# --phases 4 under scripts/nested-svm.sh (TCG's timings; df465c7): the flag evidence of a real
# guest kernel, read from its counters (flags_seen_clear 100% of new flags, none left)
nested = load("overhead_phases_nested_tcg_df465c7.json")
t = by_target(ot.targets_of(nested))
check(t["flags"] == ("PASS", "cleared 100.0 [100.0-100.0]%, left 0 in all"),
      f"nested: the flag evidence from the recording's counters: {t['flags']}")
check(t["traps_no_mark"][0] == "FAIL" and t["traps_no_mark"][1].startswith("2.15"),
      f"nested: 2.15% no-mark: {t['traps_no_mark']}")
buf = io.StringIO()
ot.print_targets(ot.targets_of(nested), dict(nested, machine=dict(nested["machine"],
                                                                  host_kind="nested-tcg")), buf)
check("every time is QEMU's TCG's" in buf.getvalue(), "a nested run says its times are TCG's")
buf = io.StringIO()
ot.print_targets(ot.targets_of(nested), nested, buf)
check("TCG" not in buf.getvalue(), "a run not marked nested says nothing of TCG")

# counters made to sit on each side of the bounds, in an interleaved result
base = load("overhead_interleaved_ioctl_after.json")
good = {"traps_hit": 10000, "traps_no_mark": 99, "samples": 1000, "sample_ns_total": 9_000_000,
        "samples_in_workload": 800, "sample_ns_in_workload": 1_200_000,
        "flags_seen_clear": 980, "flags_seen_kernel": 20, "flags_seen_set": 0,
        "flag_scan_set_other": 0}


def with_counters(*boots):
    r = copy.deepcopy(base)
    r["interleaved"]["raw"]["flag"] = [{"counters": c} for c in boots]
    return by_target(ot.targets_of(r))


# slice times made for the CPU-bound loop: hvprof's slices as long as the bare exits' but for
# noise either way (the interval reaches 1.0), then longer in every round (cost 27% above)
def phases_cpu(on_over_bare):
    rounds = [[1.0, 1.1, 1.1 + on_over_bare + (0.02 if i % 2 else -0.02)] for i in range(20)]
    return by_target(ot.targets_of({"phases": {"raw": [
        {"config": "flag", "boot": 0, "times": {"cpu": rounds}, "counters": good}]}}))


t = phases_cpu(0.0)
check(t["cpu"][0] == "PASS" and t["cpu"][1].startswith("floor 1.00, 90% 0.9"),
      f"CPU-bound slices as long as the bare exits' but for noise: {t['cpu']}")
t = phases_cpu(0.03)
check(t["cpu"][0] == "FAIL" and t["cpu"][1].startswith("floor 1.27, 90% 1.20-1.33"),
      f"CPU-bound slices costlier than the bare exits' in every round: {t['cpu']}")
check(t["syscall"] == ("not measured", "-"), f"no system-call slices: {t['syscall']}")

# interleaved CPU-bound floors whose range reaches 1.0 though their median does not
r = copy.deepcopy(base)
row = next(x for x in r["interleaved"]["rows"] if x["config"] == "flag")
for rr, v in zip(row["rounds"], (0.98, 1.10, 1.20)):
    rr["cpu_floor_ratio"] = v
t = by_target(ot.targets_of(r))
check(t["cpu"] == ("PASS", "floor 1.10 [0.98-1.20] over 3 round(s)"),
      f"a range reaching 1.0 is within noise: {t['cpu']}")

t = with_counters(good, good)
check(t["traps_no_mark"][0] == "PASS", f"0.99% no-mark passes: {t['traps_no_mark']}")
check(t["VMM"] == ("PASS", "1500 [1500-1500] ns, mean over the workload's samples"),
      f"1500 ns in the workload passes (9000 over the whole boot not taken): {t['VMM']}")
check(t["flags"] == ("PASS", "cleared 98.0 [98.0-98.0]%, left 0 in all"),
      f"98% cleared, none left: {t['flags']}")
t = with_counters(dict(good, no_mark_other=3, no_mark_flagged_late=2),
                  dict(good, no_mark_other=0, no_mark_flagged_late=0))
check(t["traps_no_mark"] == ("PASS", "0.99 [0.99-0.99]% over 2 boot(s); hvprof's own flag "
                                     "(late, unexplained) 0.03 [0.00-0.05]%"),
      f"hvprof's own share of the no-mark hits, where the recording tells it: "
      f"{t['traps_no_mark']}")
t = with_counters(good, dict(good, traps_no_mark=100))
check(t["traps_no_mark"][0] == "FAIL", f"1.00% in one boot fails: {t['traps_no_mark']}")
t = with_counters(dict(good, sample_ns_in_workload=1_201_000), good,
                  dict(good, sample_ns_in_workload=1_201_000))
check(t["VMM"][0] == "FAIL", f"1501 ns in two boots of three fails: {t['VMM']}")
t = with_counters(good, dict(good, flag_scan_set_other=1))
check(t["flags"] == ("PASS", "cleared 98.0 [98.0-98.0]%, left 1 in all"),
      f"one flag left at the end of a boot passes (a run may end before the clear): "
      f"{t['flags']}")
t = with_counters(good, dict(good, flag_scan_set_other=2))
check(t["flags"] == ("FAIL", "cleared 98.0 [98.0-98.0]%, left 2 in all"),
      f"two flags left at the end of a boot fail: {t['flags']}")
t = with_counters(good, dict(good, flags_seen_clear=979, flags_seen_set=1))
check(t["flags"][0] == "FAIL", f"97.9% cleared in one boot fails: {t['flags']}")

# the command: a result file without either mode, and one that is not JSON
script = os.path.join(HERE, "overhead_targets.py")
r = subprocess.run([sys.executable, script, os.path.join(HERE, "results", "overhead.json")],
                   capture_output=True, text=True)
check(r.returncode != 0 and "overhead.json: no \"phases\" or \"interleaved\"" in r.stderr,
      f"a result of the plain table is refused by name: {r.stderr.strip()}")
r = subprocess.run([sys.executable, script, os.path.join(HERE, "overhead_targets.py")],
                   capture_output=True, text=True)
check(r.returncode != 0 and "overhead_targets.py:" in r.stderr,
      f"a file that is not JSON is named: {r.stderr.strip()}")
r = subprocess.run([sys.executable, script,
                    os.path.join(HERE, "results", "overhead_phases_942ef44.json")],
                   capture_output=True, text=True)
check(r.returncode == 0 and "PASS         syscall: cost per sample <= 1.2 x" in r.stdout and
      "FAIL         VMM time per sample" in r.stdout, "the command prints one line per target")

# overhead.py's split of the workload's VMM time by mode (counters samples_in_workload_user and
# sample_ns_in_workload_user; the kernel samples are the rest)
import overhead  # noqa: E402

m = overhead.workload_by_mode({"samples_in_workload": 10, "sample_ns_in_workload": 25000,
                               "samples_in_workload_user": 4,
                               "sample_ns_in_workload_user": 4000})
check(m == {"ns_workload_user": 1000.0, "ns_workload_kernel": 3500.0, "user_share": 0.4},
      f"user 4 samples / 4000 ns, kernel 6 / 21000: {m}")
check(overhead.workload_by_mode(load("overhead_phases_inplace.json")["phases"]["raw"][0]
                                ["counters"]) == {},
      "a recording from before the counters: no split, not a wrong one")
check(overhead.workload_by_mode({"samples_in_workload": 5, "sample_ns_in_workload": 9,
                                 "samples_in_workload_user": 5,
                                 "sample_ns_in_workload_user": 9}) == {},
      "only user-mode samples: no kernel figure to give")

# overhead.py's table rows: the stages per sample (overhead.stage_ns) on a sampling configuration's
# row, none on a bare-exit one, and the kernel unwind also per kernel sample
rows = overhead.table_rows({
    "unprofiled": {"runtimes": {"cpu": 10.0, "syscall": 20.0}},
    "unprofiled-again": {"runtimes": {"cpu": 11.0, "syscall": 20.0}},
    "bare@1000": {"runtimes": {"cpu": 10.5, "syscall": 21.0},
                  "counters": {"samples": 100, "sample_ns_regs": 9000}},
    "deferred@1000": {"runtimes": {"cpu": 10.5, "syscall": 22.0},
                      "counters": {"samples": 100, "samples_kernel": 40,
                                   "sample_ns_regs": 10000, "sample_ns_identity": 30000,
                                   "sample_ns_kernel_unwind": 20000, "sample_ns_user": 50000,
                                   "sample_ns_write": 25000, "sample_ns_total": 135000}}}, 1)
by_name = {r["config"]: r for r in rows}
check({k: v for k, v in by_name["deferred@1000"].items() if k.startswith("ns_")} ==
      {"ns_regs": 100.0, "ns_identity": 300.0, "ns_kernel_unwind": 200.0, "ns_user": 500.0,
       "ns_write": 250.0, "ns_kernel_unwind_per_kernel_sample": 500.0, "ns_total": 1350.0},
      f"a sampling configuration's stages per sample: {by_name['deferred@1000']}")
check(not any(k.startswith("ns_") for k in by_name["bare@1000"]),
      f"bare exits: no stages (hvprof takes no sample there): {by_name['bare@1000']}")

# bench/pair_boots.py: the sign test over pairs and the figures of one boot's counters
import pair_boots  # noqa: E402

check(abs(pair_boots.sign_test(0, 5) - 0.0625) < 1e-12 and
      abs(pair_boots.sign_test(5, 5) - 0.0625) < 1e-12,
      "5 of 5 pairs one way: p = 2/32")
check(pair_boots.sign_test(2, 4) == 1.0 and pair_boots.sign_test(0, 0) == 1.0,
      "an even split, or no pairs: p = 1")
check(abs(pair_boots.sign_test(9, 13) - 0.2668) < 1e-4, "9 of 13: p = 0.267")
f = pair_boots.figures({"samples_in_workload": 10, "sample_ns_in_workload": 25000,
                        "samples_in_workload_user": 4, "sample_ns_in_workload_user": 4000})
check(f == {"ns": 2500.0, "ns_user": 1000.0, "ns_kernel": 3500.0}, f"the figures: {f}")
check(pair_boots.figures({"samples_in_workload": 0}) is None and
      pair_boots.figures({"samples_in_workload": 2, "sample_ns_in_workload": 10}) ==
      {"ns": 5.0}, "no workload samples: none; no split counters: the whole only")
f = pair_boots.figures({"samples_in_workload": 2, "sample_ns_in_workload": 10, "samples": 10,
                        "samples_kernel": 4, "sample_ns_kernel_unwind": 2000,
                        "sample_ns_identity": 500, "sample_ns_write": 30})
check(f["stages"] == {"ns_regs": 0.0, "ns_identity": 50.0, "ns_kernel_unwind": 200.0,
                      "ns_user": 0.0, "ns_write": 3.0,
                      "ns_kernel_unwind_per_kernel_sample": 500.0},
      f"the stages: per sample, the kernel unwind per kernel sample: {f}")

# bench/sample_census.py's reading of a lackey trace: a window's taken branches (an instruction
# that does not follow the one before it) and their sites; a rep instruction's repeats (one
# trace line per iteration at the same address) are none
import sample_census  # noqa: E402

trace = [b"**1** census shape 0 synthetic\n", b"**1** census markers a b c\n",
         b" S 0000000a,4\n",
         b"I  00001000,3\n", b"I  00001003,2\n",    # straight on
         b"I  00001010,5\n",                         # taken: 0x1003 -> 0x1010
         b"I  00001015,2\n", b"I  00001015,2\n", b"I  00001015,2\n",  # rep movs repeats
         b"I  00001003,2\n",                         # taken: 0x1015 -> 0x1003
         b"I  00001010,5\n",                         # taken: 0x1003 again, one site
         b" S 0000000c,4\n"]
shapes = sample_census.scan(trace)
w = shapes[0]["windows"] if shapes else []
taken = w[0][1][3] if len(w) == 1 else None
check(w and w[0][0] == "sample" and w[0][1][0] == 8 and taken == [0x1003, 0x1015, 0x1003],
      f"3 taken branches from 2 sites, the repeats none: {taken}")

print(f"{failures} failed")
sys.exit(1 if failures else 0)
