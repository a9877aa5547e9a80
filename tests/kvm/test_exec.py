#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test: one boot of the default image serving commands (`run --control` without
--run), issue 15's "one boot, three attach windows around three exec commands"
(docs/control-protocol.md, EXEC):

- `hvprof exec` returns the command's stdout and stderr byte for byte (9 KB of random bytes) and its
  exit status;
- three `record --attach` windows, each around one command of another program (two with
  `record --attach --exec`, one with `hvprof exec` inside a Ctrl-C'd window): each recording
  holds its own program's samples and none of the other two's, its workload window (the exec's
  start and end events), and ends detached; between the windows nothing is armed (no overflow
  exits, only the PVM fix-up's breakpoint slot);
- Ctrl-C on `hvprof exec` kills the command in the guest (130), and the next command runs;
- `hvprof exec --poweroff` ends the guest: `run` exits 0 and removes its socket.

usage: test_exec.py HVPROF
Exit: 0 all checks passed, 1 a check failed, 77 skipped (no /dev/kvm or no default image).
"""
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvprec  # noqa: E402
import hvtest  # noqa: E402

HVPROF = sys.argv[1]
hvtest.require_vm()
END_DETACHED = 7

work = tempfile.mkdtemp(prefix="hvprof-kvm-")
sock = os.path.join(work, "ctl.sock")
checks = hvtest.Checks()
check = checks.check


def status():
    return hvtest.ctl_status(sock)


wait_for = hvtest.wait_for


def hvexec(*words, timeout=300, text=False):
    return subprocess.run([HVPROF, "exec", "--attach", sock, "--", *words],
                          capture_output=True, timeout=timeout, text=text)


t0 = time.time()
cmd = [HVPROF, "run", "--control", sock, "--duration", "900"]
print("running:", " ".join(cmd), flush=True)
vm = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
check("the control socket appears", wait_for(lambda: os.path.exists(sock), 60))

# 1. output and status (the first exec also waits for the boot)
r = hvexec("echo out; echo err >&2; exit 3", text=True)
print(f"booted and ran the first command in {time.time() - t0:.0f} s", flush=True)
check("exec: the command's status (3)", r.returncode == 3, f"{r.returncode}: {r.stderr}")
check("exec: its stdout", r.stdout == "out\n", repr(r.stdout))
check("exec: its stderr", r.stderr.endswith("err\n") and "hvprof: error" not in r.stderr,
      repr(r.stderr))
r = hvexec("head -c 9000 /dev/urandom > /tmp/b; cat /tmp/b")
r2 = hvexec("md5sum /tmp/b", text=True)
got = hashlib.md5(r.stdout).hexdigest()
check("exec: 9000 random bytes of binary output, byte for byte (the guest's md5sum)",
      r.returncode == 0 and len(r.stdout) == 9000 and r2.stdout.split()[:1] == [got],
      f"{r.returncode}: {len(r.stdout)} bytes, md5 {got}, guest: {r2.stdout.strip()}")

r = hvexec("yes | head -3", text=True)
check("exec: commands get the default SIGPIPE (yes | head -3 ends quietly, status 0)",
      r.returncode == 0 and r.stdout == "y\ny\ny\n" and "Broken pipe" not in r.stderr,
      f"{r.returncode} {r.stdout!r} {r.stderr!r}")

# 2. three windows around three commands
programs = [("hvprof-demo", "/bin/hvprof-demo 3 1"), ("hvprof-paths", "/bin/hvprof-paths"),
            ("hvprof-bench", "/bin/hvprof-bench cpu 3")]
recs = []
for n, (comm, command) in enumerate(programs, 1):
    before = status()
    data = os.path.join(work, f"w{n}.data")
    if n < 3:
        # record --attach --exec: attach, run the command, detach at its end
        rec = subprocess.run([HVPROF, "record", "--attach", sock, "-F", "1000", "-o", data,
                              "--exec", command], capture_output=True, text=True, timeout=600)
        print(rec.stderr.strip(), flush=True)
        check(f"window {n}: record --attach --exec '{command}' exits 0", rec.returncode == 0,
              f"{rec.returncode}: {rec.stderr[-300:]}")
    else:
        # record --attach in the background, hvprof exec, Ctrl-C
        rec = subprocess.Popen([HVPROF, "record", "--attach", sock, "-F", "1000", "-o", data],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(f"window {n}: attached", wait_for(lambda: status().get("attached") == "1", 30))
        r = hvexec(command, text=True)
        check(f"window {n}: exec {command} exits 0", r.returncode == 0,
              f"{r.returncode}: {r.stderr[-300:]}")
        rec.send_signal(signal.SIGINT)
        out, err = rec.communicate(timeout=120)
        print(err.strip(), flush=True)
        check(f"window {n}: record --attach detaches at Ctrl-C", rec.returncode in (0, 130),
              str(rec.returncode))
    raw = hvprec.read(data)
    recs.append(raw)
    comms = {p: t["comm"] for p, t in raw["threads"].items()}
    counts = {c: sum(1 for s in raw["samples"] if comms.get(s["pid"]) == c)
              for c, _ in programs}
    others = sum(v for c, v in counts.items() if c != comm)
    print(f"window {n}: {len(raw['samples'])} samples, by program {counts}", flush=True)
    check(f"window {n}: {comm}'s samples (>= 300)", counts[comm] >= 300, str(counts))
    check(f"window {n}: none of the other programs'", others == 0, str(counts))
    win = hvprec.workload_window(raw)
    check(f"window {n}: the exec's workload window, ended with status 0",
          win is not None and win[1] is not None and win[2] == 0, str(win))
    check(f"window {n}: END detached", raw.get("end", (0,))[0] == END_DETACHED,
          str(raw.get("end")))
    # between windows: nothing armed
    time.sleep(1)
    a = status()
    time.sleep(2)
    b = status()
    check(f"after window {n}: no overflow exits, only the fix-up's breakpoint slot",
          a["attached"] == "0" and b["exits_overflow"] == a["exits_overflow"] and
          int(b["bp_armed"]) & ~1 == 0,
          f"attached {a['attached']} overflow {a['exits_overflow']}->{b['exits_overflow']} "
          f"bp_armed {b['bp_armed']}")
    check(f"window {n}: the window sampled (overflow exits grew during it, none after)",
          int(a["exits_overflow"]) > int(before["exits_overflow"]),
          f"{before['exits_overflow']} -> {a['exits_overflow']}")

# 3. Ctrl-C kills the command in the guest; the next one runs
p = subprocess.Popen([HVPROF, "exec", "--attach", sock, "--", "sleep 100"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
time.sleep(3)
p.send_signal(signal.SIGINT)
out, err = p.communicate(timeout=60)
check("exec: Ctrl-C gives 130", p.returncode == 130, f"{p.returncode}: {err}")
t = time.time()
r = hvexec("echo after", text=True, timeout=120)
check("exec: the next command runs at once (the killed one is gone)",
      r.returncode == 0 and r.stdout == "after\n" and time.time() - t < 30,
      f"{r.returncode} {r.stdout!r} {time.time() - t:.1f} s")

# 4. a second exec while one runs is refused; --poweroff ends the guest
p = subprocess.Popen([HVPROF, "exec", "--attach", sock, "--", "sleep 4"])
time.sleep(1.5)
r = hvexec("true", text=True, timeout=60)
check("exec: one command at a time (EBUSY, 255)", r.returncode == 255 and "EBUSY" in r.stderr,
      f"{r.returncode}: {r.stderr}")
p.wait(timeout=60)
r = subprocess.run([HVPROF, "exec", "--attach", sock, "--poweroff"], capture_output=True,
                   text=True, timeout=60)
check("exec --poweroff exits 0", r.returncode == 0, f"{r.returncode}: {r.stderr}")
try:
    out, err = vm.communicate(timeout=120)
except subprocess.TimeoutExpired:
    vm.kill()
    out, err = vm.communicate()
print(err.decode(errors="replace")[-1500:])
check("run exits 0 at the poweroff", vm.returncode == 0, str(vm.returncode))
check("the socket is removed at exit", not os.path.exists(sock))
print(f"the whole test: one boot, {time.time() - t0:.0f} s", flush=True)
checks.finish()
