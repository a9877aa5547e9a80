#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test: disks. One recorded boot of the default image with three virtio-blk disks
made here without root (mke2fs -d):
  vda  ext4, ,snapshot  read a known file and a 1 MiB file (checksum), write, remount, read back;
                        the image file's sha256 must not change
  vdb  ext4, ,ro        readable; the guest cannot write it (read-only device and file system)
  vdc  raw, read-write  the guest writes a marker that must reach the host file; a second hvprof
                        asking for it while the guest runs is refused (locked)
Every check reads that one boot's console, the recording's disk_* counters and the files.

usage: test_disk.py HVPROF
Exit: 0 all checks passed, 1 a check failed, 77 skipped (no /dev/kvm, no default image, no
mke2fs).
"""
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvprec  # noqa: E402
import hvtest  # noqa: E402

HVPROF = sys.argv[1]
hvtest.require_vm()
MKE2FS = shutil.which("mke2fs") or shutil.which("mke2fs", path="/sbin:/usr/sbin")
if not MKE2FS:
    hvtest.skip("mke2fs is missing (apt-get install e2fsprogs)")

HELLO = "hello from vda, made by mke2fs -d"
work = tempfile.mkdtemp(prefix="hvprof-disk-")


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def ext4_image(name, files, size="16M"):
    tree = os.path.join(work, name + ".d")
    os.mkdir(tree)
    for rel, data in files.items():
        with open(os.path.join(tree, rel), "wb") as f:
            f.write(data)
    img = os.path.join(work, name + ".img")
    subprocess.run([MKE2FS, "-q", "-F", "-t", "ext4", "-d", tree, img, size], check=True,
                   env=dict(os.environ, E2FSPROGS_FAKE_TIME="1700000000"))
    return img


blob = random.Random(13).randbytes(1 << 20)
vda = ext4_image("vda", {"hello.txt": HELLO.encode() + b"\n", "blob.bin": blob})
vdb = ext4_image("vdb", {"hello.txt": b"hello from vdb\n"})
vdc = os.path.join(work, "vdc.img")
with open(vdc, "wb") as f:
    f.truncate(1 << 20)
sums = {p: sha256(p) for p in (vda, vdb)}

script = os.path.join(work, "disk-check")
with open(script, "w") as f:
    f.write("""#!/bin/sh
mkdir -p /mnt/a /mnt/b
echo "DISK-CMDLINE: $(cat /proc/cmdline)"
mount -t ext4 /dev/vda /mnt/a || echo "DISK-ERR: mount vda"
echo "DISK-READ: $(cat /mnt/a/hello.txt)"
echo "DISK-SUM: $(md5sum /mnt/a/blob.bin)"
echo "written in the guest" > /mnt/a/new.txt && sync
umount /mnt/a && mount -t ext4 /dev/vda /mnt/a && echo "DISK-REREAD: $(cat /mnt/a/new.txt)"
umount /mnt/a
echo "DISK-SERIAL: $(cat /sys/block/vda/serial)"
echo "DISK-RO-FLAG: $(cat /sys/block/vdb/ro) $(cat /sys/block/vda/ro)"
mount -t ext4 -o ro /dev/vdb /mnt/b && echo "DISK-RO-READ: $(cat /mnt/b/hello.txt)"
if (echo x > /mnt/b/x) 2>/dev/null; then echo "DISK-RO-FS: written"; else echo "DISK-RO-FS: refused"; fi
umount /mnt/b
if dd if=/dev/zero of=/dev/vdb bs=512 count=1 2>/dev/null; then echo "DISK-RO-DEV: written"; \
else echo "DISK-RO-DEV: refused"; fi
printf HVPROF-RW-OK > /tmp/rw && dd if=/tmp/rw of=/dev/vdc bs=512 conv=sync 2>/dev/null && sync
echo "DISK-RW: done"
""")

data = os.path.join(work, "disk.data")
cmd = [HVPROF, "record", "-F", "100", "-o", data, "--add", f"{script}:/bin/disk-check",
       "--disk", vda + ",snapshot", "--disk", vdb + ",ro", "--disk", vdc,
       "--run", "/bin/sh /bin/disk-check", "--duration", "300"]
print("running:", " ".join(cmd), flush=True)
t0 = time.monotonic()
rec = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

# While it runs: vdc (read-write, so locked exclusively) is refused to a second hvprof. The
# probe fails before any kernel is read, so this never boots a second guest: until the first
# hvprof has opened its disks, it stops at the missing kernel instead.
lock_msg, locked = "", False
# The probe itself locks vdc for an instant: only once the recording holds more than its
# 16-byte header (record writes META after the VM, with its disks locked, was created) can it
# not take the lock from under the first hvprof (a fresh-clone CI trial failed that way: the
# first hvprof found vdc "in use").
while time.monotonic() - t0 < 60 and rec.poll() is None and \
        not (os.path.exists(data) and os.path.getsize(data) > 16):
    time.sleep(0.2)
while time.monotonic() - t0 < 60 and rec.poll() is None and not locked:
    r = subprocess.run([HVPROF, "run", "--kernel", "/nonexistent/vmlinux", "--disk", vdc],
                       capture_output=True, text=True, timeout=30)
    lock_msg = r.stderr.strip()
    locked = r.returncode == 3 and "is in use by another process" in lock_msg
    if not locked:
        time.sleep(0.5)
console, summary = rec.communicate(timeout=600)
print(console)
print(summary)

checks = hvtest.Checks()
check = checks.check
check("record exits 0 (the disk checks ran and returned 0)", rec.returncode == 0,
      f"status {rec.returncode}")
check("a second hvprof cannot take the read-write disk while the guest runs", locked, lock_msg)
cmdline = re.search(r"DISK-CMDLINE: (.*)", console)
check("the kernel command line declares the three virtio-mmio disks",
      cmdline is not None and all(f"virtio_mmio.device=4K@0x{0xd0001000 + 0x1000 * i:x}:{irq}"
                                  in cmdline.group(1) for i, irq in enumerate((5, 6, 9))),
      cmdline.group(1) if cmdline else "no DISK-CMDLINE line")
check("vda (snapshot): a file made by mke2fs -d reads back", f"DISK-READ: {HELLO}" in console)
want_md5 = hashlib.md5(blob).hexdigest()
check("vda: a 1 MiB file reads back intact (md5)", f"DISK-SUM: {want_md5}" in console,
      want_md5)
check("vda: a file written in the guest reads back after a remount",
      "DISK-REREAD: written in the guest" in console)
check("GET_ID: the disk's serial is hvprof-vda", "DISK-SERIAL: hvprof-vda" in console)
check("vdb is a read-only device, vda is not", "DISK-RO-FLAG: 1 0" in console)
check("vdb (ro) is readable", "DISK-RO-READ: hello from vdb" in console)
check("vdb (ro): the file system refuses a write", "DISK-RO-FS: refused" in console)
check("vdb (ro): the block device refuses a write", "DISK-RO-DEV: refused" in console)
for path, want in sums.items():
    check(f"{os.path.basename(path)}: the image file is unchanged (sha256)",
          sha256(path) == want)
with open(vdc, "rb") as f:
    head = f.read(512)
check("vdc (read-write): the guest's write reached the host file",
      head == b"HVPROF-RW-OK" + bytes(500), repr(head[:16]))

recording = hvprec.read(data) if os.path.exists(data) else {"counters": {}, "meta": {}}
cnt = recording["counters"]
check("META disk names the last disk, its mode and its path",
      recording["meta"].get("disk") == f"vdc rw {os.path.realpath(vdc)}",
      recording["meta"].get("disk", "none"))
print("disk counters:", {k: v for k, v in cnt.items() if k.startswith("disk_")})
check("counters: reads, writes and flushes were served",
      cnt.get("disk_reads", 0) > 0 and cnt.get("disk_writes", 0) > 0
      and cnt.get("disk_flushes", 0) > 0, str(cnt.get("disk_reads")))
check("counters: at least the 1 MiB file was read", cnt.get("disk_read_bytes", 0) >= 1 << 20)
check("counters: no error status, no broken device",
      cnt.get("disk_errors", -1) == 0 and cnt.get("disk_broken", -1) == 0)
m = re.search(r"disk_reads=(\d+)", subprocess.run([HVPROF, "report", "-i", data],
                                                  capture_output=True, text=True).stdout)
check("report shows the disk counters", m is not None)

if not checks.failures:
    shutil.rmtree(work, ignore_errors=True)
checks.finish()
