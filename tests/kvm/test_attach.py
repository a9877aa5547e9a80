#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test: one boot of the default image with `run --control`, two `record --attach`
windows (docs/control-protocol.md): each recording loads, holds the demo's samples and ends
with END detached; a concurrent second attach is refused; after a detach the VM's sampling exits
stop (exits_intr/exits_overflow grow far slower than while attached), no breakpoint is armed,
and the socket goes away with the VM.

usage: test_attach.py HVPROF
Exit: 0 all checks passed, 1 a check failed, 77 skipped (no /dev/kvm or no default image).
"""
import os
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


def rate(key, secs=2.0):
    a = status()
    time.sleep(secs)
    b = status()
    return (int(b[key]) - int(a[key])) / secs, b


cmd = [HVPROF, "run", "--control", sock, "--run", "/bin/hvprof-demo 40 8", "--duration", "300"]
print("running:", " ".join(cmd), flush=True)
vm = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
check("the control socket appears", wait_for(lambda: os.path.exists(sock), 60))
mode = os.stat(sock).st_mode & 0o777 if os.path.exists(sock) else None
check("the socket is owner-only (0600)", mode == 0o600, oct(mode or 0))
# the demo starts after the boot: wait until the guest is past it (user-mode work under way)
check("the guest's workload started", wait_for(lambda: int(status()["exits_mmio"]) > 0, 120))
time.sleep(3)

idle_intr, _ = rate("exits_intr")
print(f"unprofiled: {idle_intr:.0f} exits_intr/s", flush=True)


def window(n):
    data = os.path.join(work, f"w{n}.data")
    rec = subprocess.Popen([HVPROF, "record", "--attach", sock, "-F", "1000", "--duration", "4",
                            "-o", data], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    time.sleep(1.5)
    att_intr, st = rate("exits_intr", 1.5)
    check(f"window {n}: STATUS says attached", st.get("attached") == "1", str(st))
    second = subprocess.run([HVPROF, "record", "--attach", sock, "--duration", "1", "-o",
                             os.path.join(work, f"second{n}.data")], capture_output=True,
                            text=True, timeout=60)
    check(f"window {n}: a concurrent attach is refused (exit 3, EBUSY)",
          second.returncode == 3 and "EBUSY" in second.stderr,
          f"{second.returncode}: {second.stderr.strip()}")
    out, err = rec.communicate(timeout=120)
    print(err.strip(), flush=True)
    check(f"window {n}: record --attach exits 0", rec.returncode == 0, f"{rec.returncode}")
    raw = hvprec.read(data)
    check(f"window {n}: END detached", raw.get("end", (0,))[0] == END_DETACHED,
          str(raw.get("end")))
    comm = {p: t["comm"] for p, t in raw["threads"].items()}
    demo = sum(1 for s in raw["samples"] if comm.get(s["pid"]) == "hvprof-demo")
    check(f"window {n}: samples of the demo (>= 1000 of ~4000)",
          demo >= 1000, f"{demo} of {len(raw['samples'])}")
    check(f"window {n}: META kernel_slide and pti known", "kernel_slide" in raw["meta"] and
          "pti" in raw["meta"], f"{raw['meta'].get('kernel_slide')} {raw['meta'].get('pti')}")
    code, rep, rerr = hvtest.hv(HVPROF, "report", "-i", data)
    check(f"window {n}: report loads it", code == 0 and "burn_" in rep, rerr.strip()[-300:])
    time.sleep(1)
    after_intr, st = rate("exits_intr")
    after_ovf, st2 = rate("exits_overflow")
    print(f"window {n}: attached {att_intr:.0f} exits_intr/s, after detach "
          f"{after_intr:.0f}/s, overflow {after_ovf:.0f}/s", flush=True)
    check(f"window {n}: after the detach no sampling exits (overflow 0/s, exits_intr < 10% "
          f"of attached)", after_ovf == 0 and after_intr < 0.1 * att_intr,
          f"attached {att_intr:.0f}/s, after {after_intr:.0f}/s, overflow {after_ovf:.0f}/s")
    # the flagged tasks read back at the detach: clear (the kernel cleared the flag at their
    # return), or set with no return seen (in the kernel), or set by the kernel for itself (task
    # work queued, rseq after a switch); at most one read between a loop hit and its clear may
    # show as "other"
    c = raw["counters"]
    if c.get("marks_flagged", 0) > 0:  # the flag strategy (not on kernels without it)
        print(f"window {n}: flags read back: {c.get('flag_scan_tasks')} tasks, "
              f"{c.get('flag_scan_clear')} clear, {c.get('flag_scan_set_unreturned')} set with "
              f"no return seen, {c.get('flag_scan_set_kernel')} set by the kernel for itself, "
              f"{c.get('flag_scan_set_other')} otherwise, {c.get('flag_scan_gone')} gone; "
              f"new flags after a return seen: found clear {c.get('flags_seen_clear')}, set "
              f"by the kernel {c.get('flags_seen_kernel')}, set otherwise "
              f"{c.get('flags_seen_set')}", flush=True)
        check(f"window {n}: flags read back at the detach, none left by hvprof",
              c.get("flag_scans") == 1 and c.get("flag_scan_tasks", 0) >= 1
              and c.get("flag_scan_set_other", 2) <= 1,
              f"{c.get('flag_scans')} scans, {c.get('flag_scan_tasks')} tasks, "
              f"{c.get('flag_scan_set_other')} set for no reason the guest shows")
    check(f"window {n}: no breakpoint armed but the PVM fix-up's (slot 0)",
          int(st2["bp_armed"]) & ~1 == 0, st2["bp_armed"])
    return raw


w1 = window(1)
w2 = window(2)
t1 = max(s["t"] for s in w1["samples"]) if w1["samples"] else 0
t2 = min(s["t"] for s in w2["samples"]) if w2["samples"] else 0
check("the second window's samples come after the first's", t2 > t1, f"{t1} < {t2}")
st = status()
check("marks_dropped_detach is counted", "marks_dropped_detach" in st, str(st))

vm.send_signal(2)
out, err = vm.communicate(timeout=120)
print(err[-1500:])
check("the VM stops on SIGINT (130)", vm.returncode == 130, str(vm.returncode))
check("the socket is removed at exit", not os.path.exists(sock))
checks.finish()
