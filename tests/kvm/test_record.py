#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test: one boot of the default image profiles the demo workload and a user's own
static binary (--add), and every check reads that one recording. It is recorded with
--call-graph dwarf: every user walk carries a USER_REGS record (registers and 8 KiB of stack).

usage: test_record.py HVPROF MYBENCH
Exit: 0 all checks passed, 1 a check failed, 77 skipped (no /dev/kvm or no default image).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvprec  # noqa: E402
import hvtest  # noqa: E402

HVPROF, MYBENCH = sys.argv[1], sys.argv[2]
hvtest.require_vm()


def steal_ns():
    """The host's steal time so far, all CPUs (/proc/stat, field 8 of "cpu"): time this machine's
    own hypervisor ran something else while a CPU wanted to run."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) * 1e9 / os.sysconf("SC_CLK_TCK") if fields[0] == "cpu" else 0
    except (OSError, IndexError, ValueError):
        return 0


work = tempfile.mkdtemp(prefix="hvprof-kvm-")
data = os.path.join(work, "demo.data")
cmd = [HVPROF, "record", "-F", "1000", "-o", data, "--add", f"{MYBENCH}:/bin/mybench",
       "--call-graph", "dwarf",
       "--run", "/bin/hvprof-demo 4 3; /bin/mybench", "--duration", "240"]
print("running:", " ".join(cmd), flush=True)
steal0 = steal_ns()
rec = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
steal = max(0, steal_ns() - steal0)
console, summary = rec.stdout, rec.stderr
print(console)
print(summary)

checks = hvtest.Checks()
check = checks.check


def hv(*args):
    return hvtest.hv(HVPROF, *args)


check("record exits 0", rec.returncode == 0, f"status {rec.returncode}")
check("guest ran /init's command and reported status 0",
      "hvprof-init: exit status 0" in console and "guest exited with status 0" in summary)

truth = re.search(r"hvprof-truth: cpu burn_a=([\d.]+) burn_b=([\d.]+)", console)
pidm = re.search(r"hvprof-demo: pid (\d+)", console)
check("workload printed its ground truth", truth is not None and pidm is not None)

# The cpu-clock counter counts the vCPU thread's CPU time (not wall time, which a busy host
# stretches): samples per second of vCPU CPU time must match -F. How many overflows merge into
# one sample (a signal while one is pending) is the host's timing: under TCG ~20% did; the
# accounting that holds everywhere is the "samples + overflows merged" check below.
cnt = hvprec.read(data)["counters"] if os.path.exists(data) else {}
rate = cnt.get("samples", 0) / (cnt.get("vcpu_cpu_ns", 0) / 1e9) if cnt.get("vcpu_cpu_ns") else 0
checks.check_timing("1000 samples per second of vCPU time (within 10%)", 900 <= rate <= 1100,
                    f"{rate:.0f}/s")
# Each sample's period is the counter's real count since its vCPU's previous sample
# (docs/recording-format.md, SAMPLE): they add up to the vCPU time sampled (from boot: all of it,
# but the tail after each vCPU's last sample). cpu-clock counts with the scheduler's local_clock
# while the thread runs, CLOCK_THREAD_CPUTIME_ID with its task clock: 1.2% apart in a run here.
# On a machine that is itself a guest (this project's CI host), the task clock leaves out steal
# time (CONFIG_PARAVIRT_TIME_ACCOUNTING) and local_clock does not: the periods may exceed the
# vCPU time by the steal the vCPU thread met, at most the machine's (a run here: 5.2% over on a
# busy moment). The samples plus the overflows merged into them are what -F asked of the
# periods' time.
periods = [s["period"] for s in hvprec.read(data)["samples"]] if os.path.exists(data) else []
vcpu_ns = cnt.get("vcpu_cpu_ns", 0)
check("sum of sample periods is the vCPU time (within 5%, plus the machine's steal time)",
      periods and vcpu_ns and 0.95 * vcpu_ns <= sum(periods) <= 1.05 * vcpu_ns + steal,
      f"{sum(periods)} ns of periods, {vcpu_ns} ns of vCPU time, {steal:.0f} ns stolen")
check("every period is a real count: > 0, <= 1024 nominal periods, no fallback",
      periods and all(0 < p <= 1024 * 1000000 for p in periods)
      and cnt.get("period_fallbacks", -1) == 0,
      f"min {min(periods) if periods else '-'} max {max(periods) if periods else '-'}, "
      f"{cnt.get('period_fallbacks')} fallbacks")
asked = sum(periods) * 1000 / 1e9
got = cnt.get("samples", 0) + cnt.get("overflows_merged", 0)
check("samples + overflows merged = -F x the periods' time (within 1%)",
      asked and abs(got - asked) <= 0.01 * asked,
      f"{cnt.get('samples')} + {cnt.get('overflows_merged')} merged vs {asked:.0f} asked")
mean = sum(periods) / len(periods) if periods else 0
check("samples/s of vCPU time x mean period = 1e9 ns (within 5%, plus the steal's share)",
      rate and vcpu_ns and 0.95e9 <= rate * mean <= (1.05 + steal / vcpu_ns) * 1e9,
      f"{rate:.0f}/s x {mean:.0f} ns")

code, folded, err = hv("flamegraph", "-i", data, "--format", "folded")
check("folded export works", code == 0 and folded, err.strip())
stacks = []
for line in folded.splitlines():
    stack, _, count = line.rpartition(" ")
    stacks.append((stack.split(";"), int(count)))

# Shares of burn_a and burn_b among the demo's samples in either, against what it measured.
a = sum(c for s, c in stacks if s[0] == "hvprof-demo" and "burn_a" in s)
b = sum(c for s, c in stacks if s[0] == "hvprof-demo" and "burn_b" in s)
if truth and a + b > 0:
    share_a = 100.0 * a / (a + b)
    want = float(truth.group(1))
    check("burn_a share within 5 points of the workload's own measure",
          abs(share_a - want) <= 5.0, f"profile {share_a:.1f}% vs truth {want:.1f}% ({a}+{b} samples)")
else:
    check("burn_a/burn_b sampled", False, f"{a}+{b} samples")
# The DWARF chain (--call-graph dwarf) stands on _start; the frame-pointer one ended at
# __libc_start_call_main: both hold this run of frames.
check("user frames by name: __libc_start_call_main;main;cpu_phase;...;burn_a",
      any(s[0] == "hvprof-demo" and s[-1] == "burn_a" and
          ";__libc_start_call_main;main;cpu_phase;" in ";".join(s) + ";"
          for s, _ in stacks))

# Kernel samples of the syscall phase: user path then kernel frames, resolved to symbols.
sys_stacks = [(s, c) for s, c in stacks if s[0] == "hvprof-demo" and "ask_kernel_path_one" in s]
ksamples = sum(c for s, c in sys_stacks if s[-1].endswith("_[k]"))
getppid = sum(c for s, c in sys_stacks if "__x64_sys_getppid_[k]" in s)
check("kernel samples of the syscall phase sit on syscall_phase;ask_kernel_path_one",
      ksamples >= 100, f"{ksamples} samples")
check("getppid's kernel frames resolve (__x64_sys_getppid)", getppid >= 10, f"{getppid} samples")
demo_k = [(s, c) for s, c in stacks if s[0] == "hvprof-demo" and s[-1].endswith("_[k]")]
unresolved = sum(c for s, c in demo_k if s[-1].startswith("0x"))
total_k = sum(c for s, c in demo_k)
check("kernel frames of the demo resolve to kernel symbols",
      total_k > 0 and unresolved <= 0.01 * total_k, f"{unresolved}/{total_k} unresolved")
check("kernel threads have no user frames",
      not any(s[0].startswith("kworker") and not s[1].endswith("_[k]") for s, _ in stacks))
# execve: kernel samples under begin_new_exec (exec_mmap switched the task to the new program's
# mm, then mmput -> exit_mmap tears the old one down) are the old program's system call. Their
# user frames are the old program's (busybox: stripped, [busybox+0x...]), made before the
# switch, or lost with the reason execve; never the old registers walked in the new program's
# page tables and named by its symbols (hvprof-demo's __wunderflow, mybench's, ...).
execs = [(s, c) for s, c in stacks if "begin_new_exec_[k]" in s]
bad_exec = [(s, c) for s, c in execs
            if not all(f.startswith("[busybox+") or f.startswith("[user stack lost:")
                       for f in s[1:] if not f.endswith("_[k]"))]
check("no kernel sample under begin_new_exec has a user frame of the new program",
      execs and not bad_exec, f"{sum(c for _, c in bad_exec)} of {sum(c for _, c in execs)} samples: "
      + "; ".join(";".join(s[:3]) for s, _ in bad_exec[:3]))

code, rep, err = hv("report", "-i", data, "--sort", "comm,pid,sym")
rows = [l for l in rep.splitlines() if l and not l.startswith("#")]
rl = re.search(r"^# Rate: (\d+) samples/s of vCPU time at -F 1000 \(overflows merged: (\d+); "
               r"weights are the counter's real periods", rep, re.M)
check("report's Rate line: samples/s of the periods' vCPU time, the counter overflows_merged",
      rl and periods and abs(int(rl.group(1)) - len(periods) * 1e9 / sum(periods)) <= 1
      and int(rl.group(2)) == cnt.get("overflows_merged"), rl.group(0) if rl else "no line")
pid_ok = pidm and any(re.search(rf"\bhvprof-demo\s+{pidm.group(1)}\s+\[\.\] burn_a\b", l) for l in rows)
check("report shows hvprof-demo's pid and comm as the guest printed them", bool(pid_ok),
      f"pid {pidm.group(1) if pidm else '?'}")

mb = [(s, c) for s, c in stacks if s[0] == "mybench"]
parse = sum(c for s, c in mb if "mybench_parse" in s)
render = sum(c for s, c in mb if "mybench_render" in s)
check("--add binary's functions appear by name (mybench_parse, mybench_render)",
      parse > 50 and render > 10, f"{parse}/{render} samples")
code, rep2, err = hv("report", "-i", data, "--sort", "comm,dso,sym")
check("report names the --add binary's symbols and its dso",
      re.search(r"mybench\s+mybench\s+\[\.\] mybench_parse", rep2) is not None)

# USER_REGS (docs/recording-format.md): right after every user walk's SAMPLE or USER_STACK, with
# the walk's first ip as rip, a user RSP and the stack above it.
raw = hvprec.read(data) if os.path.exists(data) else {"user_regs": [], "meta": {}, "counters": {}}
ur = raw["user_regs"]
after = {2: [r for r in ur if r["prev_type"] == 2], 5: [r for r in ur if r["prev_type"] == 5]}
check("META call_graph is dwarf,8192", raw["meta"].get("call_graph") == "dwarf,8192",
      raw["meta"].get("call_graph"))


def build_options(hvprof):
    """What cli/meson.build puts in HVPROF_BUILD, from the options of @hvprof's build directory
    (meson introspect; None: not readable)."""
    r = subprocess.run(["meson", "introspect", os.path.dirname(os.path.dirname(hvprof)),
                        "--buildoptions"], capture_output=True, text=True)
    if r.returncode:
        return None
    o = {x["name"]: x["value"] for x in json.loads(r.stdout)}
    return f"{o['buildtype']} pgo={o['b_pgo']} lto={str(o['b_lto']).lower()}"


want_build = build_options(HVPROF)
check("META hvprof_build says how this hvprof was built (its build directory's options)",
      want_build is not None and raw["meta"].get("hvprof_build") == want_build,
      f"{raw['meta'].get('hvprof_build')} (build directory: {want_build})")
checks.check_bp("USER_REGS records follow both SAMPLE and USER_STACK records",
      len(after[2]) >= 100 and len(after[5]) >= 100, f"{len(after[2])} / {len(after[5])}")
check("every USER_REGS directly follows the record it names (follows, time, pid, cookie)",
      all(r["prev"] is not None and r["follows"] == r["prev_type"] and r["t"] == r["prev"]["t"]
          and r["pid"] == r["prev"]["pid"] and r["cookie"] == r["prev"]["cookie"] for r in ur),
      f"{len(ur)} records")
first_ip = sum(1 for r in ur if r["prev"]["uips"] and r["regs"][16] == r["prev"]["uips"][0])
check("regs[16] (rip) is the preceding record's first user ip",
      ur and first_ip == sum(1 for r in ur if r["prev"]["uips"]), f"{first_ip} of {len(ur)}")
user_rsp = sum(1 for r in ur if 0 < r["regs"][7] < (1 << 47))
with_stack = sum(1 for r in ur if r["stack_len"] >= 8 and len(r["stack"]) == r["stack_len"])
copied = [r for r in ur if r["stack_len"] or r["stack_size"]]
check("regs[7] (rsp) is a user address", user_rsp == len(ur), f"{user_rsp} of {len(ur)}")
# Walks saved at a mark (a thread that exits or execs: its stack is gone or belongs to another
# mm by the time the mark ends) carry registers and no stack by design: user_stack_not_copied.
not_copied = raw["counters"].get("user_stack_not_copied", 0)
# (saved walks were 0.7% of USER_REGS in the runs that set this bound: at most 2%, or a loss of
# stacks counted as "saved walks" would pass)
check("the first 8 stack bytes were copied (>= 99% of USER_REGS but the saved walks')",
      with_stack >= 0.99 * (len(ur) - not_copied) and not_copied <= 0.02 * len(ur),
      f"{with_stack} of {len(ur)}, {not_copied} saved walks without a stack")
cnt = raw["counters"]
walks = sum(1 for s in raw["samples"] if s["uips"]) + sum(
    1 for u in raw["user_stacks"].values() if u["uips"] and u["stop"] != 6)
check("one USER_REGS per user walk (counter user_regs)",
      cnt.get("user_regs") == len(ur) and len(ur) == walks, f"{cnt.get('user_regs')} {len(ur)} {walks}")
if ur:
    size = os.path.getsize(data)
    print(f"USER_REGS: {len(ur)} records, {sum(r['size'] for r in ur) / len(ur):.0f} bytes each "
          f"(mean stack_len {sum(r['stack_len'] for r in ur) / len(ur):.0f}); recording "
          f"{size} bytes, {size / max(1, len(raw['samples'])):.0f} bytes per sample; stack copy "
          f"{cnt.get('user_stack_copy_ns', 0) / max(1, cnt.get('user_stack_copies', 1)):.0f} ns "
          f"of VMM time each ({cnt.get('user_stack_short', 0)} short, "
          f"{cnt.get('user_stack_refused', 0)} refused)")

# Deferred mode: a kernel sample in the exit tail of a thread with no mark of its stay walks its
# pt_regs into the sample itself (no mark, no USER_STACK), and so does a sample of a kind of
# entry whose stays see too few samples for a mark to pay (getppid, once it has 32 marks):
# the syscall phase has many of both. Those of the demo carry its user path (libc's syscall
# wrapper, ask_kernel_path_one, syscall_phase, main: >= 3 frames), as a USER_STACK would.
demo_tids = {p for p, t in raw["threads"].items() if t["comm"] == "hvprof-demo"}
# Not counted: the demo's pid before its exec (a forked shell: page faults in busybox's code, no
# frame pointers) and the demo's first 0.5 s (glibc's start-up code, built without frame
# pointers: the walk at the sample has one frame there; the offline DWARF unwind has the rest).
exec_t = {p: min((t for t, c in raw["thread_history"][p] if c == "hvprof-demo"), default=0)
          for p in demo_tids}
inline = [s for s in raw["samples"] if s["cpl"] == 0 and s["cookie"] == 0 and s["uips"]
          and s["pid"] in demo_tids and hvprec.comm_at(raw, s["pid"], s["t"]) == "hvprof-demo"
          and s["t"] >= exec_t[s["pid"]] + 500_000_000]
deep = sum(1 for s in inline if len(s["uips"]) >= 3)
checks.check_bp("samples walked into the sample with no mark, in the exit tail "
                "(tail_walked_inline) and "
      "of short stays (stay_walked_inline), with the demo's user path",
      cnt.get("tail_walked_inline", 0) > 0 and cnt.get("stay_walked_inline", 0) > 0 and inline
      and deep >= 0.95 * len(inline),
      f"counters {cnt.get('tail_walked_inline')} / {cnt.get('stay_walked_inline')}, demo {deep} "
      f"of {len(inline)} with >= 3 frames")

# The workload window (docs/guest-interface.md events, EVENT records), also with --from boot.
ev = raw.get("events", [])
kinds = [e["kind"] for e in ev]
check("EVENT records: init, workload start, workload end (status 0), in time order",
      kinds == [hvprec.EVENT_INIT, hvprec.EVENT_WORKLOAD_START, hvprec.EVENT_WORKLOAD_END]
      and [e["t"] for e in ev] == sorted(e["t"] for e in ev) and ev[-1]["value"] == 0,
      str(ev))
check("META sampling_from is boot", raw["meta"].get("sampling_from") == "boot",
      raw["meta"].get("sampling_from"))
win = hvprec.workload_window(raw)
demo_pids = {p for p, t in raw["threads"].items() if t["comm"] in ("hvprof-demo", "mybench")}
demo_t = [s["t"] for s in raw["samples"] if s["pid"] in demo_pids]
check("every sample of the workload's programs lies in the window",
      win and win[1] and demo_t and win[0] <= min(demo_t) and max(demo_t) <= win[1],
      f"window {win}, samples {min(demo_t) if demo_t else '-'}..{max(demo_t) if demo_t else '-'}")
# samples_in_workload / sample_ns_in_workload (the overhead benchmark's VMM cost of the
# workload's samples): on one vCPU, exactly the samples whose time lies in the window.
in_win = sum(1 for s in raw["samples"] if win and win[1] and win[0] <= s["t"] < win[1])
check("samples_in_workload counts the samples in the workload window, with their VMM ns",
      in_win > 0 and cnt.get("samples_in_workload") == in_win < cnt.get("samples", 0) and
      0 < cnt.get("sample_ns_in_workload", 0) < cnt.get("sample_ns_total", 0),
      f"{in_win} in the window, counters {cnt.get('samples_in_workload')} samples "
      f"{cnt.get('sample_ns_in_workload')} ns (of {cnt.get('samples')}, "
      f"{cnt.get('sample_ns_total')} ns)")
# ... and of them the user-mode samples apart (the SAMPLE's cpl: 3)
in_win_user = sum(1 for s in raw["samples"]
                  if win and win[1] and win[0] <= s["t"] < win[1] and s["cpl"] == 3)
check("samples_in_workload_user counts the user-mode samples in the window, with their VMM ns",
      0 < in_win_user < in_win and cnt.get("samples_in_workload_user") == in_win_user and
      0 < cnt.get("sample_ns_in_workload_user", 0) < cnt.get("sample_ns_in_workload", 0),
      f"{in_win_user} of {in_win} in the window, counters "
      f"{cnt.get('samples_in_workload_user')} samples "
      f"{cnt.get('sample_ns_in_workload_user')} ns")
hist = [v for k, v in cnt.items() if k.startswith("workload_sample_")]
check("the workload's histogram (workload_sample_le_*, 16 buckets) adds up to its samples",
      len(hist) == 16 and sum(hist) == cnt.get("samples_in_workload"),
      f"{len(hist)} buckets, {sum(hist)} samples")
wl = re.search(r"^# Workload window: ([\d.]+) s to ([\d.]+) s \(exit status 0\)$", rep, re.M)
check("report prints the workload window",
      wl is not None and win and abs(float(wl.group(1)) - win[0] / 1e9) < 0.001,
      wl.group(0) if wl else "no line")

svg = os.path.join(work, "demo.svg")
code, out, err = hv("flamegraph", "-i", data, "-o", svg)
body = open(svg, encoding="utf-8").read() if os.path.exists(svg) else ""
check("SVG flamegraph written with the demo's functions",
      code == 0 and body.startswith("<?xml") and "burn_a" in body and "mybench_render" in body)

checks.finish()
