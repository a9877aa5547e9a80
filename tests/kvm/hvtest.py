# SPDX-License-Identifier: MIT
"""What the integration tests that boot a guest share: where the default image is, the skip
rule (exit 77 with the reason printed), named checks, and running hvprof."""
import os
import socket
import subprocess
import sys
import time


def image_dir(name="default"):
    """The bundled image @name where images/build-image.sh NAME puts it ($HVPROF_IMAGE for the
    default image, as hvprof itself)."""
    if name == "default" and os.environ.get("HVPROF_IMAGE"):
        return os.environ["HVPROF_IMAGE"]
    cache = os.environ.get("HVPROF_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hvprof")
    return os.path.join(cache, "images", name)


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def require_vm(name="default"):
    """Skip (77) unless /dev/kvm is usable and the image @name is built; its directory."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        skip("/dev/kvm is missing or not accessible")
    img = image_dir(name)
    if not os.path.isfile(os.path.join(img, "manifest")):
        build = "images/build-image.sh" + ("" if name == "default" else f" {name}")
        skip(f"no {'default' if name == 'default' else name} image at {img} (build it with {build})")
    return img


# The nested harness (scripts/nested-svm.sh sets HVPROF_HOST=nested-tcg): QEMU's emulated SVM
# under TCG (docs/nested-svm.md) delivers no guest-debug breakpoint, so hvprof gives deferred marks
# up for walks at the sample and the checks that need a mark resolved at its return cannot
# hold; and its CPU clock and instruction timing are emulated, so rates and the spread of
# samples over kernel functions are TCG's. Such checks say SKIP there, with the reason.
NESTED_TCG = os.environ.get("HVPROF_HOST") == "nested-tcg"
# ... unless its QEMU arms the nested guest's DR7 (scripts/nested-qemu.sh): then breakpoints fire
NESTED_NO_BP = NESTED_TCG and os.environ.get("HVPROF_NESTED_BP") != "1"


class Checks:
    """Named checks: each prints ok/FAIL with a detail; finish() exits 1 if any failed."""

    def __init__(self):
        self.failures = 0

    def check(self, name, ok, detail=""):
        print(f"{'ok' if ok else 'FAIL'}: {name}{(' - ' + detail) if detail else ''}", flush=True)
        self.failures += not ok

    def check_bp(self, name, ok, detail=""):
        """A check that needs the host to deliver guest-debug breakpoints (a deferred mark
        resolved at its thread's return to user): SKIP with the reason where it does not."""
        if NESTED_NO_BP:
            print(f"SKIP (this check only): {name} - needs guest-debug breakpoints, which "
                  "Debian's QEMU's emulated SVM does not deliver (HVPROF_HOST=nested-tcg; "
                  "scripts/nested-qemu.sh builds one that does)", flush=True)
            return
        self.check(name, ok, detail)

    def check_timing(self, name, ok, detail=""):
        """A check of rates or of how samples spread over code, which an emulated CPU skews:
        SKIP with the reason there."""
        if NESTED_TCG:
            print(f"SKIP (this check only): {name} - timing under TCG's emulated CPU is not a "
                  f"host's (HVPROF_HOST=nested-tcg){' - ' + detail if detail else ''}", flush=True)
            return
        self.check(name, ok, detail)

    def check_threads(self, name, wrong, mine):
        """The threads phase (pathstats.threads): no sample with the other thread's path, and
        some with the right one; and the phase's sample floor (more than 50 right ones), which
        depends on how much of the phase's CPU time the guest got: a rate check, SKIP under TCG
        (2 s of threads there gave 6-54)."""
        self.check(f"{name}: no sample carries the other thread's path", wrong == 0 and mine >= 1,
                   f"{wrong} wrong, {mine} right")
        self.check_timing(f"{name}: more than 50 samples of the threads' own paths", mine > 50,
                          f"{mine} right")

    def check_bp_delivery(self, counters):
        """Where breakpoints are delivered none of the 32 unseen returns that give them up may
        happen (bp_never_fired 0); where they are not, hvprof must have given them up for walks
        at the sample (bp_never_fired 1) rather than lose the user stacks."""
        never = counters.get("bp_never_fired", 0)
        if NESTED_NO_BP:
            self.check("no breakpoint fires on this host: deferred marks were given up for walks "
                       "at the sample (bp_never_fired 1)", never == 1,
                       f"bp_never_fired {never}, returns_unseen {counters.get('returns_unseen')}")
        else:
            self.check("guest-debug breakpoints fired (bp_never_fired 0)", never == 0,
                       f"bp_never_fired {never}, returns_unseen {counters.get('returns_unseen')}")

    def check_window_truth(self, counters):
        """Ground truth for entry-window registers (gi_entry_user_regs) in deferred mode: a mark
        whose entry registers a sample found in the entry window is checked at its return against
        the registers the thread returns with (marks_window_returns, marks_window_other_regs).
        They differ only where a signal frame was set up: >= 99% must agree."""
        n = counters.get("marks_window_returns", 0)
        other = counters.get("marks_window_other_regs", 0)
        if n == 0:
            print("SKIP (this check only): no mark of this run took its registers in the entry "
                  "window", flush=True)
            return
        self.check_bp("entry-window registers equal those the thread returned with (>= 99%)",
                      other <= max(1, 0.01 * n), f"{n - other} of {n}")

    def finish(self):
        print(f"{self.failures} check(s) failed" if self.failures else "all checks passed")
        sys.exit(1 if self.failures else 0)


def hv(hvprof, *args, timeout=120):
    """Run hvprof with @args: (status, stdout, stderr)."""
    r = subprocess.run([hvprof, *args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def ctl_status(sock):
    """STATUS over a `run --control` socket (docs/control-protocol.md): its key=value words."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock)
    f = s.makefile("rw")
    f.write("HELLO 1\n")
    f.flush()
    f.readline()
    f.write("STATUS\n")
    f.flush()
    line = f.readline().split()
    s.close()
    assert line and line[0] == "OK", line
    return {k: v for k, _, v in (w.partition("=") for w in line[1:])}


def wait_for(pred, secs):
    """Poll @pred every 0.5 s for up to @secs: whether it became true."""
    end = time.time() + secs
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.5)
    return False
