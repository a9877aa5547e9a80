#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""hvprof diff's sides without a VM (issue 16): the workload window is compared by default and
--window all compares everything; a recording without the mark is compared whole with a note;
a broken side (no samples, too few in the window, no END, an END other than a clean exit or
--duration) exits 3 naming the side, the file and why, unless --allow-incomplete; repeated runs
(--base/--new) give per-run shares in the JSON; a recording of N workload windows (record
--repeat N) is N runs, read once for all of them, as if each run were read alone.

usage: test_diff_sides.py HVPROF
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

HVPROF = sys.argv[1]
work = tempfile.mkdtemp(prefix="hvprof-diff-")
failures = 0
HEADER = b"HVPROF\x00\x01" + struct.pack("<II", 1, 16)
MS = 1000000
K_IN, K_OUT, K_IN2 = 0xffffffff81001000, 0xffffffff81002000, 0xffffffff81003000


def record(rtype, payload):
    head = struct.pack("<II", rtype, 8 + len(payload) + 4) + payload
    return head + struct.pack("<I", zlib.crc32(head))


def meta(key, value):
    k, v = key.encode(), value.encode()
    return record(1, struct.pack("<II", len(k), len(v)) + k + v)


def sample(t_ns, rip):
    # time, vcpu, cpl 0, flags KTHREAD, kernel_stop END, user_stop NONE, rip, cr3, task, pid,
    # tgid, cookie, period, n_kernel 1, n_user 0, reserved; then the kernel chain
    return record(2, struct.pack("<QIBBBBQQQiiQQHHI", t_ns, 0, 0, 2, 0, 4, rip, 0, 0, 3, 3, 0,
                                 MS, 1, 0, 0) + struct.pack("<Q", rip))


def event(t_ns, kind, value=0):
    return record(10, struct.pack("<QIi", t_ns, kind, value))


def end(reason, status=0):
    return record(7, struct.pack("<Ii", reason, status))


def write(name, inside=1500, outside=600, window=True, end_rec=end(1), in_rip=K_IN,
          extra=0):
    """outside/2 samples before the window (0.5 s), inside in it (1..2 s), outside/2 after."""
    body = [HEADER, meta("counter", "cpu-clock")]
    body += [sample(500 * MS, K_OUT)] * (outside // 2)
    if window:
        body.append(event(1000 * MS, 2))
    body += [sample(1000 * MS + i * 1000, in_rip if i >= extra else K_IN2)
             for i in range(inside)]
    if window:
        body.append(event(2000 * MS, 3, 0))
    body += [sample(2500 * MS, K_OUT)] * (outside - outside // 2)
    if end_rec:
        body.append(end_rec)
    path = os.path.join(work, name)
    with open(path, "wb") as f:
        f.write(b"".join(body))
    return path


def run(*args):
    r = subprocess.run([HVPROF, "diff", *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def check(name, ok, detail=""):
    global failures
    if ok:
        print(f"ok: {name}")
    else:
        failures += 1
        print(f"FAIL: {name}: {detail}")


good = write("good.data")
good2 = write("good2.data")
code, out, err = run("--format", "json", good, good2)
d = json.loads(out) if code == 0 else {}
check("the window by default", code == 0 and d["base"]["samples"] == 1500 and
      any("workload window" in n for n in d["notes"]), f"{code} {err} {out[:300]}")
code, out, err = run("--format", "json", "--window", "all", good, good2)
d = json.loads(out) if code == 0 else {}
check("--window all: everything", code == 0 and d["base"]["samples"] == 2100 and
      any("--window all" in n for n in d["notes"]), f"{code} {err} {out[:300]}")
code, out, err = run("--window", "some", good, good2)
check("--window some: usage", code == 2 and "--window 'some'" in err, f"{code} {err}")

nowin = write("nowin.data", window=False)
code, out, err = run(good, nowin)
check("no window mark: compared whole, with a note", code == 0 and
      f"NEW {nowin} has no workload window mark: compared whole" in out, f"{code} {err}")

broken = [
    ("no samples", write("empty.data", inside=0, outside=0), "no samples at all"),
    ("too few in the window", write("few.data", inside=500, outside=2000),
     "500 samples compared (of 2500), fewer than 1000"),
    ("no END", write("cut.data", end_rec=None), "no END record"),
    ("END by a signal", write("sig.data", end_rec=end(5)), "the run ended by signal"),
    ("a failed workload", write("fail.data", end_rec=end(1, 2)), "the guest exited with status 2"),
]
for what, path, why in broken:
    code, out, err = run(good, path)
    check(f"broken NEW, {what}: exit 3", code == 3 and f"NEW {path}: {why}" in err and
          "--allow-incomplete" in err, f"{code} {err}")
    code, out, err = run(path, good)
    check(f"broken BASE, {what}: exit 3", code == 3 and f"BASE {path}: {why}" in err,
          f"{code} {err}")
    code, out, err = run("--allow-incomplete", path, good)
    check(f"--allow-incomplete, {what}: compared, said", code == 0 and
          "(--allow-incomplete)" in out and "compared anyway" in err, f"{code} {err}")
dur = write("dur.data", end_rec=end(4))
code, out, err = run(good, dur)
check("--duration END is fine", code == 0, f"{code} {err}")

# repeats: per-run shares in the JSON; an outlier run with 300 other samples is noise
runs_b = [write(f"b{i}.data", extra=e) for i, e in enumerate((0, 100, 50))]
runs_n = [write(f"n{i}.data", extra=e) for i, e in enumerate((40, 120, 0))]
args = [a for p in runs_b for a in ("--base", p)] + [a for p in runs_n for a in ("--new", p)]
code, out, err = run("--format", "json", "--fail-on-regression", "10", *args)
d = json.loads(out) if out.startswith("{") else {}
check("3 vs 3: runs in the JSON, noise not alarmed", code == 0 and d["run_noise"] == "moderated"
      and [r["samples"] for r in d["base"]["runs"]] == [1500] * 3 and not d["regressions"],
      f"{code} {err} {out[:400]}")
runs_s = [write(f"s{i}.data", extra=e) for i, e in enumerate((500, 520, 480))]
args = [a for p in runs_b for a in ("--base", p)] + [a for p in runs_s for a in ("--new", p)]
code, out, err = run("--format", "json", "--fail-on-regression", "10", *args)
d = json.loads(out) if out.startswith("{") else {}
first = d["regressions"][0] if d.get("regressions") else {}
check("3 vs 3: a real shift is named first, exit 1", code == 1 and
      first.get("name", "").startswith("0xffffffff81003000") and len(first["base_runs"]) == 3
      and len(first["new_runs"]) == 3, f"{code} {err} {first}")
code, out, err = run("--base", good, good2)
check("--base with positional files: usage", code == 2, f"{code} {err}")


def write_repeat(name, extras, inside=1500, open_last=False, status=0, end_rec=True):
    """record --repeat: one window of `inside` samples per extra (1 s each, 2 s apart), the
    first `extra` of each in K_IN2; 300 samples between windows."""
    body = [HEADER, meta("counter", "cpu-clock")]
    for w, extra in enumerate(extras):
        t0 = (1000 + 2000 * w) * MS
        body += [sample(t0 - 500 * MS, K_OUT)] * 300
        body.append(event(t0, 2))
        body += [sample(t0 + i * 1000, in_rip if i >= extra else K_IN2)
                 for i, in_rip in ((i, K_IN) for i in range(inside))]
        if not (open_last and w == len(extras) - 1):
            body.append(event(t0 + 1000 * MS, 3, status if w == 1 else 0))
    if end_rec:
        body.append(end(1, status))
    path = os.path.join(work, name)
    with open(path, "wb") as f:
        f.write(b"".join(body))
    return path


# record --repeat: a recording of 3 windows is 3 runs (FILE#1..#3), the same test as 3 files
rb = write_repeat("rb.data", (0, 100, 50))
rn = write_repeat("rn.data", (40, 120, 0))
rs = write_repeat("rs.data", (500, 520, 480))
code, out, err = run("--format", "json", "--fail-on-regression", "10", rb, rn)
d = json.loads(out) if out.startswith("{") else {}
check("3 windows vs 3 windows: 3 runs a side, named FILE#N, noise not alarmed", code == 0 and
      [r["name"] for r in d["base"]["runs"]] == [f"{rb}#1", f"{rb}#2", f"{rb}#3"] and
      [r["samples"] for r in d["new"]["runs"]] == [1500] * 3 and d["run_noise"] == "moderated"
      and any("holds 3 workload windows" in n for n in d["notes"]) and not d["regressions"],
      f"{code} {err} {out[:400]}")
code, out, err = run("--format", "json", "--fail-on-regression", "10", rb, rs)
d = json.loads(out) if out.startswith("{") else {}
first = d["regressions"][0] if d.get("regressions") else {}
check("3 windows vs 3 windows: a real shift is named first, exit 1", code == 1 and
      first.get("name", "").startswith("0xffffffff81003000") and len(first["base_runs"]) == 3
      and len(first["new_runs"]) == 3 and first["df"] == 4, f"{code} {err} {first}")
code, out, err = run(rb, rs)
check("text: the runs named FILE#N", code == 0 and f"#   {rs}#3 (1500 samples)" in out,
      f"{code} {err} {out[:600]}")
code, out, err = run("--format", "json", "--window", "all", rb, rn)
d = json.loads(out) if out.startswith("{") else {}
check("--window all: a recording of 3 windows is one run", code == 0 and
      len(d["base"]["runs"]) == 1 and d["base"]["samples"] == 3 * 1800, f"{code} {err}")
code, out, err = run("--format", "json", f"{rb}#2", f"{rs}#3")
d = json.loads(out) if out.startswith("{") else {}
check("FILE#N: that window alone", code == 0 and d["base"]["name"] == f"{rb}#2" and
      d["base"]["samples"] == 1500, f"{code} {err} {out[:300]}")
code, out, err = run(f"{rb}#4", rs)
check("FILE#N beyond the windows: exit 3", code == 3 and "no such workload window" in err,
      f"{code} {err}")
ro = write_repeat("ro.data", (0, 100, 50), open_last=True)
code, out, err = run("--format", "json", "--base", ro, "--new", rn)
d = json.loads(out) if out.startswith("{") else {}
check("a last window without its end is left out, said", code == 0 and
      len(d["base"]["runs"]) == 2 and any("window 3 has no end" in n for n in d["notes"]),
      f"{code} {err} {out[:300]}")
# cut short in its last window (no END): the windows that ended are whole and compared, the
# open one is left out, and the cut is said (it used to fail naming window 1)
rc = write_repeat("rc.data", (0, 100, 50), open_last=True, end_rec=False)
code, out, err = run("--format", "json", "--base", rb, "--new", rc)
d = json.loads(out) if out.startswith("{") else {}
check("cut short in its last window: the ended windows compared, the cut said", code == 0 and
      [r["name"] for r in d["new"]["runs"]] == [f"{rc}#1", f"{rc}#2"] and
      any("window 3 has no end" in n for n in d["notes"]) and
      any("no END record (cut short after this window)" in n for n in d["notes"]),
      f"{code} {err} {out[:500]}")
rc1 = write_repeat("rc1.data", (0,), open_last=True, end_rec=False)
code, out, err = run(rb, rc1)
check("cut short in its only window: still an error naming it", code == 3 and
      "no END record" in err and rc1 in err, f"{code} {err}")
r = subprocess.run([HVPROF, "report", "-i", rb], capture_output=True, text=True, timeout=60)
check("report: how many windows", "# Workload windows: 3 (record --repeat; diff compares each as"
      " a run): 1.000 s to 2.000 s ... 5.000 s to 6.000 s\n# Workload windows: exit status 0 in "
      "every window\n" in r.stdout, r.stdout[:800])
# the recording named without -i (as diff takes its files): the same report, the same folded
r2 = subprocess.run([HVPROF, "report", rb], capture_output=True, text=True, timeout=60)
check("report FILE is report -i FILE", r2.returncode == 0 and r2.stdout == r.stdout,
      f"{r2.returncode} {r2.stderr}")
f1 = subprocess.run([HVPROF, "flamegraph", "--format", "folded", "-i", rb],
                    capture_output=True, text=True, timeout=60)
f2 = subprocess.run([HVPROF, "flamegraph", "--format", "folded", rb],
                    capture_output=True, text=True, timeout=60)
check("flamegraph FILE is flamegraph -i FILE", f1.returncode == 0 and f2.returncode == 0 and
      f1.stdout and f1.stdout == f2.stdout, f"{f2.returncode} {f2.stderr}")
rf = write_repeat("rf.data", (0, 100, 50), status=1)
code, out, err = run("--allow-incomplete", "--format", "json", rb, rf)
check("a window whose command failed is broken (said, --allow-incomplete)", code == 0 and
      f"NEW {rf}#2: the command of workload window 2 exited with status 1" in err,
      f"{code} {err}")

# one read per recording (its runs cut from it at once, also when it is on both sides) gives
# what one load per run gives: each run from a copy of its file, read for that run alone
def copies(path, n):
    out = []
    for k in range(n):
        c = f"{path[:-5]}-c{k + 1}.data"
        with open(path, "rb") as f, open(c, "wb") as g:
            g.write(f.read())
        out.append(c)
    return out


def runs_json(*args):
    code, out, err = run("--format", "json", "--min-samples", "0", "--threshold", "0", *args)
    d = json.loads(out) if out.startswith("{") else {}
    for side in ("base", "new"):
        for r in d.get(side, {}).get("runs", []):
            r.pop("name", None)
        d.get(side, {}).pop("name", None)
    d.pop("notes", None)
    return code, d, err


cb, cs = copies(rb, 3), copies(rs, 3)
filters = ["--kernel-only", "--time", "1.5,", "--allow-incomplete"]
for what, grouped, alone in (
        ("3 windows vs 3 windows", [rb, rs],
         [a for k in range(3) for a in ("--base", f"{cb[k]}#{k + 1}")] +
         [a for k in range(3) for a in ("--new", f"{cs[k]}#{k + 1}")]),
        ("one file on both sides", ["--base", f"{rb}#1", "--base", f"{rb}#3", "--new",
                                    f"{rb}#2", "--new", f"{rs}#2", "--new", f"{rb}#1"],
         ["--base", f"{cb[0]}#1", "--base", f"{cb[2]}#3", "--new", f"{cb[1]}#2", "--new",
          f"{cs[1]}#2", "--new", f"{cb[0]}#1"]),
        ("--kernel-only --time", [*filters, rb, rs],
         filters +
         [a for k in range(3) for a in ("--base", f"{cb[k]}#{k + 1}")] +
         [a for k in range(3) for a in ("--new", f"{cs[k]}#{k + 1}")])):
    c1, d1, e1 = runs_json(*grouped)
    c2, d2, e2 = runs_json(*alone)
    check(f"runs read at once = each run read alone: {what}", c1 == c2 and d1 and d1 == d2,
          f"{c1} {c2} {e1} {e2}")

# --fail-min-share: a regression fails the gate only when the function holds at least that much
# of NEW (default 1%); a smaller one is still reported.
fb, fn, fbig = (os.path.join(work, n) for n in ("gate-base.folded", "gate-new.folded",
                                                  "gate-big.folded"))
with open(fb, "w") as f:
    f.write("app;main;f 90000\napp;main;g 10000\n")
with open(fn, "w") as f:
    f.write("app;main;f 90000\napp;main;g 10000\napp;main;tiny 600\n")
with open(fbig, "w") as f:
    f.write("app;main;f 90000\napp;main;g 10000\napp;main;tiny 2500\n")
code, out, err = run("--format", "json", "--fail-on-regression", "10", fb, fn)
dj = json.loads(out) if code in (0, 1) else {}
reported = any(e["name"] == "tiny" for e in dj.get("regressions", []))
check("a new function at 0.6% of NEW is reported, and does not fail the gate (default 1%)",
      code == 0 and reported, f"exit {code} {err.strip()}")
check("... and the JSON's worst regression is the gate's (none), with the share it used",
      dj.get("worst_regression_pct") == 0 and dj.get("fail_min_share_pct") == 1
      and dj.get("worst_regression_is_new_function") is False, str(dj)[:300])
code, out, err = run("--fail-on-regression", "10", "--fail-min-share", "0.5", fb, fn)
check("... it does with --fail-min-share 0.5", code == 1 and "new function" in err,
      f"exit {code} {err.strip()}")
code, out, err = run("--fail-on-regression", "10", fb, fbig)
check("a new function at 2.4% of NEW fails the gate at the default", code == 1,
      f"exit {code} {err.strip()}")
for bad in ("x", "101"):
    code, out, err = run("--fail-min-share", bad, fb, fn)
    check(f"a bad --fail-min-share ({bad}) is a usage error naming it",
          code == 2 and f"--fail-min-share '{bad}'" in err, f"exit {code} {err.strip()}")
code, out, err = run("--format", "json", "--fail-on-regression", "10", "--fail-min-share", "0",
                     fb, fn)
check("--fail-min-share 0: every function counts", code == 1 and
      json.loads(out).get("worst_regression_is_new_function") is True, f"exit {code}")

sys.exit(1 if failures else 0)
