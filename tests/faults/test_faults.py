#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Faults `hvprof record` must survive, on the default image (docs/hostile-guests.md).

Unwritable outputs fail before any guest starts (no boot). Then three boots:
  A  the guest's workload is running when hvprof gets SIGINT and, at once, SIGTERM
     (Ctrl-C followed by a supervisor's TERM): exit 130, END says "signal", every record intact;
  B  --duration 8 while the guest boots: exit 0, END says "duration", the samples so far kept;
  C  the guest kernel panics (no init: `--append 'rdinit=/nonexistent init=/nonexistent'`;
     the image's panic=-1 reboots at once): exit 1 (the guest failed), END says reset or
     triple fault, the kernel samples kept.
Every recording is read back by the small reader below (docs/recording-format.md: framing and
CRC of every record) and by `hvprof report`.

usage: test_faults.py HVPROF
Exit: 0 all checks passed, 1 a check failed, 77 skipped (no /dev/kvm or no default image).
"""
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

HVPROF = sys.argv[1]
END_REASONS = {1: "exit", 2: "reset", 3: "shutdown", 4: "duration", 5: "signal", 6: "error"}


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kvm"))
import hvprec  # noqa: E402
import hvtest  # noqa: E402

hvtest.require_vm()

failures = 0


def check(name, ok, detail=""):
    global failures
    print(f"{'ok' if ok else 'FAIL'}: {name}{(' - ' + str(detail)) if detail else ''}", flush=True)
    if not ok:
        failures += 1


def read_recording(path):
    """Every record, checked: framing, CRC, and nothing after the last intact record."""
    data = open(path, "rb").read()
    out = {"samples": 0, "user_samples": 0, "end": None, "counters": {}, "damaged": None,
           "records": 0, "after_end": 0}
    try:
        for off, rtype, p, plen, size in hvprec.records(data):
            out["records"] += 1
            if out["end"] is not None:
                out["after_end"] += 1
            if rtype == 2:
                out["samples"] += 1
                out["user_samples"] += data[p + 12] == 3
            elif rtype == 6:
                value, nl = struct.unpack_from("<QI", data, p)
                out["counters"][data[p + 12:p + 12 + nl].decode(errors="replace")] = value
            elif rtype == 7:
                reason, status = struct.unpack_from("<Ii", data, p)
                out["end"] = (reason, status)
    except hvprec.Damaged as e:
        out["damaged"] = str(e)
    return out


def check_recording(tag, path, want_reasons, min_samples=1, min_user=0):
    rec = read_recording(path)
    end = rec["end"]
    check(f"{tag}: every record intact", rec["damaged"] is None, rec["damaged"])
    check(f"{tag}: END record says {'/'.join(END_REASONS[r] for r in want_reasons)}",
          end is not None and end[0] in want_reasons,
          f"END {end and END_REASONS.get(end[0], end[0])}")
    check(f"{tag}: END is the last record", rec["after_end"] == 0, rec["after_end"])
    check(f"{tag}: samples kept", rec["samples"] >= min_samples,
          f"{rec['samples']} samples, {rec['user_samples']} in user mode")
    if min_user:
        check(f"{tag}: samples of the guest workload kept", rec["user_samples"] >= min_user,
              rec["user_samples"])
    check(f"{tag}: counters written", "samples" in rec["counters"], sorted(rec["counters"])[:4])
    r = subprocess.run([HVPROF, "report", "-i", path], capture_output=True, text=True,
                       timeout=120)
    check(f"{tag}: hvprof report reads it", r.returncode == 0,
          r.stderr.strip().splitlines()[-1:] if r.returncode else "")
    return rec


work = tempfile.mkdtemp(prefix="hvprof-faults-")

# ---- unwritable outputs: a clear error before the guest starts (no boot, no console output)
for what, out, needle in [
        ("output in /proc", "/proc/hvprof-faults.data", "/proc/hvprof-faults.data"),
        ("output on a full disk (/dev/full)", "/dev/full", "No space left"),
        ("output is a directory", work, work)]:
    t0 = time.monotonic()
    r = subprocess.run([HVPROF, "record", "-o", out, "--run", "true"], capture_output=True,
                       text=True, timeout=120)
    took = time.monotonic() - t0
    check(f"{what}: exit 3 with a message naming it", r.returncode == 3 and needle in r.stderr,
          f"exit {r.returncode}: {r.stderr.strip()}")
    check(f"{what}: fails before the guest starts", r.stdout == "" and took < 20,
          f"{took:.1f} s, {len(r.stdout)} bytes of console")


def record(tag, args, timeout=400):
    data = os.path.join(work, f"{tag}.data")
    cmd = [HVPROF, "record", "-F", "1000", "-o", data, *args]
    print("running:", " ".join(cmd), flush=True)
    return data, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# ---- A: SIGINT then SIGTERM while the workload runs
data, proc = record("signal", ["--run", "echo faults-ready; while :; do :; done",
                               "--duration", "300"])
ready = threading.Event()
console = []


def pump():
    for line in proc.stdout:
        console.append(line)
        if "faults-ready" in line and "run:" not in line:
            ready.set()


threading.Thread(target=pump, daemon=True).start()
if ready.wait(240):
    time.sleep(3)  # samples of the busy loop
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGTERM)
try:
    _, err = proc.communicate(timeout=60)
except subprocess.TimeoutExpired:
    proc.kill()
    _, err = proc.communicate()
check("A: the workload started", ready.is_set(), "".join(console[-5:]))
check("A: exit status 130 after SIGINT+SIGTERM", proc.returncode == 130,
      f"exit {proc.returncode}: {err.strip()}")
check("A: says it was interrupted", "interrupted" in err, err.strip())
check_recording("A", data, {5}, min_samples=100, min_user=100)

# ---- B: --duration while the guest boots
data, proc = record("duration", ["--run", "while :; do :; done", "--duration", "8"])
out, err = proc.communicate(timeout=120)
check("B: exit 0 when --duration elapses", proc.returncode == 0,
      f"exit {proc.returncode}: {err.strip()}")
check("B: says the duration elapsed", "duration" in err, err.strip())
check_recording("B", data, {4}, min_samples=100)

# ---- C: the guest kernel panics (no init)
data, proc = record("panic", ["--run", "true", "--append", "rdinit=/nonexistent init=/nonexistent",
                              "--duration", "240"])
out, err = proc.communicate(timeout=400)
check("C: the guest kernel panicked", "Kernel panic" in out, out.strip().splitlines()[-3:])
check("C: exit 1 (the guest failed)", proc.returncode == 1,
      f"exit {proc.returncode}: {err.strip()}")
check_recording("C", data, {2, 3}, min_samples=100)

print(f"{failures} check(s) failed" if failures else "all checks passed")
sys.exit(1 if failures else 0)
