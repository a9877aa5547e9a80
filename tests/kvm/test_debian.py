#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test of the Debian image (images/build-image.sh debian): a disk-rooted guest.

Boot 1 (record, the disk as root, no initramfs): `record --image debian` runs Debian's python3
(which also writes a file to the root file system and syncs it) and the distro-built workload;
the checks read its console and its one recording: the program ran, the recording has kernel
symbols and the thread names (comm python3), the guest wrote to its disk and the image file is
unchanged (the disk is attached as a snapshot).
Boot 2 (run, the --add path): a host file given with --add is visible in the guest at its path,
through the image's small initramfs and an overlayfs over the disk; the image is still unchanged.

usage: test_debian.py HVPROF
Exit: 0 all checks passed, 1 a check failed, 77 skipped (no /dev/kvm or no Debian image).
"""
import hashlib
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvprec  # noqa: E402
import hvtest  # noqa: E402

HVPROF = sys.argv[1]
IMG = hvtest.require_vm("debian")

manifest = dict(l.split("=", 1) for l in open(os.path.join(IMG, "manifest")).read().splitlines()
                if "=" in l and not l.startswith("#"))
disk = os.path.join(IMG, manifest["disk"])


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


disk_sum = sha256(disk)
work = tempfile.mkdtemp(prefix="hvprof-kvm-debian-")
data = os.path.join(work, "debian.data")
checks = hvtest.Checks()
check = checks.check
check("the disk image matches its manifest before the runs",
      disk_sum == manifest.get(f"sha256.{manifest['disk']}"), disk_sum)

# Double quotes in --run travel as hvprof_run_esc (docs/guest-interface.md).
PY = ('import os; open("/root/written-by-guest", "w").write("x" * 65536); os.sync(); '
      's = sum(i * i for i in range(4000000)); print("hvprof-py:", os.getpid(), s)')
cmd = [HVPROF, "record", "-F", "1000", "-o", data, "--image", "debian", "--duration", "400",
       "--run", f"python3 -c '{PY}'; /usr/bin/hvprof-distro 2"]
print("running:", " ".join(cmd), flush=True)
rec = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
console, summary = rec.stdout, rec.stderr
print(console)
print(summary)

check("record exits 0", rec.returncode == 0, f"status {rec.returncode}")
check("the image's init ran the command and reported status 0",
      "hvprof-init: exit status 0" in console and "guest exited with status 0" in summary)
py = re.search(r"hvprof-py: (\d+) (\d+)", console)
check("python3 ran and printed its result",
      py is not None and int(py.group(2)) == sum(i * i for i in range(4000000)),
      py.group(0) if py else "no hvprof-py line")
truth = re.search(r"hvprof-truth: distro checksum=([\d.]+) sort=([\d.]+)", console)
check("the distro-built workload (PIE, libhvdistro.so.1) ran and printed its ground truth",
      truth is not None and "unsorted=0" in console, truth.group(0) if truth else "")

rd = hvprec.read(data) if os.path.exists(data) else {"meta": {}, "counters": {}, "threads": {},
                                                   "mappings": []}
comms = {t["comm"] for t in rd["threads"].values()}
check("thread names: python3 and hvprof-distro", {"python3", "hvprof-distro"} <= comms,
      ", ".join(sorted(comms)))
# The address spaces (MAPPING records, issue 14): python3's executable and libc mapped r-x,
# with their paths, as /proc/PID/maps would show them.
py = {tgid for tgid, t in rd["threads"].items() if t["comm"] == "python3"}
rx = {m["path"] for m in rd["mappings"] if m["tgid"] in py and m["prot"] & 5 == 5}
check("python3's address space recorded: python3.11 and libc.so.6 mapped r-x",
      "/usr/bin/python3.11" in rx and "/usr/lib/x86_64-linux-gnu/libc.so.6" in rx,
      f"{len(rd['mappings'])} mappings; python3's r-x: {sorted(rx)[:6]}")
# ... with libc's build-id read from guest memory, the same as the file's in the image (readelf)
libc_ids = {m["build_id"] for m in rd["mappings"] if m["tgid"] in py and m["pgoff"] == 0
            and m["path"] == "/usr/lib/x86_64-linux-gnu/libc.so.6" and m["build_id"]}
libc_copy = os.path.join(tempfile.mkdtemp(prefix="hvprof-libc-"), "libc.so.6")
subprocess.run(["debugfs", "-R", f"dump /usr/lib/x86_64-linux-gnu/libc.so.6 {libc_copy}", disk],
               capture_output=True, timeout=60)
notes = subprocess.run(["readelf", "-n", libc_copy], capture_output=True, text=True,
                       timeout=60).stdout if os.path.exists(libc_copy) else ""
m_id = re.search(r"Build ID: ([0-9a-f]+)", notes)
want_id = m_id.group(1) if m_id else ""
check("libc.so.6's build-id read from guest memory matches the file in the disk image",
      bool(want_id) and libc_ids == {want_id}, f"guest {sorted(libc_ids)}, file {want_id}")
cnt = rd["counters"]
if "disk_writes" in cnt:
    check("the guest wrote to its disk (snapshot)", cnt["disk_writes"] > 0,
          f"disk_writes {cnt['disk_writes']}, disk_reads {cnt.get('disk_reads')}")

code, folded, err = hvtest.hv(HVPROF, "flamegraph", "-i", data, "--format", "folded")
check("folded export works", code == 0 and folded, err.strip())
py_stacks = []
for line in folded.splitlines():
    stack, _, count = line.rpartition(" ")
    frames = stack.split(";")
    if frames[0] == "python3":
        py_stacks.append((frames, int(count)))
ksyms = {f[:-4] for s, _ in py_stacks for f in s if f.endswith("_[k]")}
named = {k for k in ksyms if not k.startswith("0x") and not k.startswith("[")}
ksamples = sum(c for s, c in py_stacks if s[-1].endswith("_[k]"))
check("kernel samples of python3 named by kernel symbols",
      ksamples >= 50 and len(named) >= 5,
      f"{ksamples} samples, e.g. {', '.join(sorted(named)[:6])}")
paths = named & {"asm_exc_page_fault", "exc_page_fault", "handle_mm_fault", "do_user_addr_fault",
                 "filemap_map_pages", "__x64_sys_execve", "do_syscall_64"}
check("python3 startup runs the kernel's fault and exec paths", bool(paths),
      ", ".join(sorted(paths)))
check("the image file is unchanged after the run", sha256(disk) == disk_sum)

# Every mapping symbolized (issue 14 item 2): files read out of the disk image (libext2fs), the
# image's debug/ tree by build-id. Leaf samples, and main in the chains.
code, out, err = hvtest.hv(HVPROF, "report", "-i", data, "--no-children", "--format", "json",
                           "--sort", "comm,dso,sym")
rows = __import__("json").loads(out)["rows"] if code == 0 and out else []


def syms(comm, dso):
    """The named symbols of @comm's self rows in @dso, and their samples."""
    named = {}
    for r in rows:
        sym = r.get("sym", "")
        sym = sym[4:] if sym.startswith("[.] ") else sym
        if r.get("comm") == comm and r.get("dso") == dso and not sym.startswith(("[", "0x")):
            named[sym] = named.get(sym, 0) + r["samples"]
    return named


py_exe, py_libc = syms("python3", "python3.11"), syms("python3", "libc.so.6")
check("python3's frames named in python3.11 and libc.so.6 (files read out of the disk image)",
      sum(py_exe.values()) >= 20 and len(py_exe) >= 3 and len(py_libc) >= 1,
      f"python3.11: {sorted(py_exe, key=py_exe.get)[-5:]}, libc.so.6: {sorted(py_libc)[:5]}")
d_lib, d_exe = syms("hvprof-distro", "libhvdistro.so.1"), syms("hvprof-distro", "hvprof-distro")
# main's own leaf samples are few (3 in a plain run: its set-up loop), so main is looked for in
# the chains (--call-graph dwarf, the default: CFI unwinding of this -O2 PIE without frame
# pointers, from the recorded stack): the samples in mix_block (kernel frames above it, if any,
# set aside) stand on checksum_phase and main.
code, folded, err = hvtest.hv(HVPROF, "flamegraph", "-i", data, "--format", "folded")
mix = on_main = 0
for line in folded.splitlines() if code == 0 else []:
    stack, _, count = line.rpartition(" ")
    frames = [f for f in stack.split(";") if not f.endswith("_[k]")]
    if frames and frames[0] == "hvprof-distro" and frames[-1] == "mix_block":
        mix += int(count)
        on_main += int(count) if "main" in frames else 0
check("hvprof-distro: hvd_checksum/mix_block in libhvdistro.so.1, and main under >= 95% of the "
      "mix_block samples (the stripped files' symbols from the image's debug/ tree)",
      bool({"hvd_checksum", "mix_block"} & set(d_lib)) and mix > 0 and on_main >= 0.95 * mix,
      f"libhvdistro.so.1: {sorted(d_lib)}, hvprof-distro: {sorted(d_exe)}; main under "
      f"{on_main} of {mix} mix_block samples")
code, text, err = hvtest.hv(HVPROF, "report", "-i", data, "--max-rows", "1")
found = re.search(r"Mapped files: (\d+) found \(disk image (\d+),", text)
check("report says the mapped files came from the disk image",
      found is not None and int(found.group(2)) >= 3 and int(found.group(2)) == int(found.group(1)),
      found.group(0) if found else err.strip()[-300:])

# Boot 2: --add puts a host file into the disk-rooted guest.
added = os.path.join(work, "added.txt")
token = f"hvprof-added-{os.getpid()}"
with open(added, "w") as f:
    f.write(token + "\n")
cmd = [HVPROF, "run", "--image", "debian", "--duration", "300", "--add",
       f"{added}:/root/added/by-hvprof.txt", "--run", "cat /root/added/by-hvprof.txt; ls /usr/bin/python3"]
print("running:", " ".join(cmd), flush=True)
r = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
print(r.stdout)
print(r.stderr)
check("--add: the file is in the guest at its path, over the disk's tree",
      r.returncode == 0 and token in r.stdout and "/usr/bin/python3" in r.stdout,
      f"status {r.returncode}")
check("the image file is unchanged after the --add run", sha256(disk) == disk_sum)
checks.finish()
