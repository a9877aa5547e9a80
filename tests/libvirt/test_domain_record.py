#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test (suite 'kvm', one boot): the default image described as a libvirt domain in a
test-driver file, generated here so that os/kernel and os/initrd point at the image, with a raw
ext4 disk (made here with mke2fs -d, <transient/>), is profiled with
`hvprof record --connect test:///FILE.xml --domain NAME`; the guest reads a file from the disk.

usage: test_domain_record.py HVPROF
Exit: 0 all checks passed, 1 a check failed, 77 skipped (no /dev/kvm or no default image).
"""
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kvm"))
import hvprec  # noqa: E402

HVPROF = sys.argv[1]
NAME = "hvprof-libvirt-demo"


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def image_dir():
    cache = os.environ.get("HVPROF_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hvprof")
    return os.path.join(cache, "images", "default")


def manifest(path):
    values = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                values[k] = v
    return values


def xml_text(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


if not os.access("/dev/kvm", os.R_OK | os.W_OK):
    skip("/dev/kvm is missing or not accessible")
img = image_dir()
if not os.path.isfile(os.path.join(img, "manifest")):
    skip(f"no default image at {img} (build it with images/build-image.sh)")
m = manifest(os.path.join(img, "manifest"))
kernel = os.path.join(img, m.get("kernel", "vmlinux"))
initrd = os.path.join(img, m.get("initrd", "initramfs.cpio"))
for f in (kernel, initrd):
    if not os.path.isfile(f):
        skip(f"the default image at {img} has no {os.path.basename(f)}")

mke2fs = shutil.which("mke2fs") or shutil.which("mke2fs", path="/sbin:/usr/sbin")
if not mke2fs:
    skip("mke2fs is missing (apt-get install e2fsprogs)")

work = tempfile.mkdtemp(prefix="hvprof-libvirt-kvm-")
tree = os.path.join(work, "tree")
os.mkdir(tree)
with open(os.path.join(tree, "hello.txt"), "w") as f:
    f.write("hello from the domain's disk\n")
disk = os.path.join(work, "disk.img")
subprocess.run([mke2fs, "-q", "-F", "-t", "ext4", "-d", tree, disk, "8M"], check=True)
disk_sha = hashlib.sha256(open(disk, "rb").read()).hexdigest()
# memory in GiB and currentMemory in MiB: the guest gets currentMemory (256 MiB); vcpu
# current=1 of 2; a raw disk attached as vda (transient: a snapshot), and an interface hvprof
# leaves out, with one warning.
fixture = os.path.join(work, "hvprof-libvirt.xml")
with open(fixture, "w") as f:
    f.write(f"""<node>
  <domain type='test'>
    <name>{NAME}</name>
    <memory unit='GiB'>1</memory>
    <currentMemory unit='MiB'>256</currentMemory>
    <vcpu placement='static' current='1'>2</vcpu>
    <os>
      <type arch='x86_64'>hvm</type>
      <kernel>{xml_text(kernel)}</kernel>
      <initrd>{xml_text(initrd)}</initrd>
      <cmdline>{xml_text(m.get("cmdline", "console=ttyS0"))}</cmdline>
    </os>
    <devices>
      <disk type='file' device='disk'>
        <driver name='qemu' type='raw'/>
        <source file='{xml_text(disk)}'/>
        <target dev='vda' bus='virtio'/>
        <transient/>
      </disk>
      <interface type='network'><source network='default'/></interface>
      <serial type='pty'><target port='0'/></serial>
      <console type='pty'><target type='serial' port='0'/></console>
      <memballoon model='none'/>
    </devices>
  </domain>
</node>
""")

data = os.path.join(work, "domain.data")
cmd = [HVPROF, "-v", "record", "-o", data, "--connect", "test://" + fixture, "--domain", NAME,
       "--run", "mkdir -p /mnt && mount -t ext4 /dev/vda /mnt && cat /mnt/hello.txt && "
       "echo changed > /mnt/hello.txt && umount /mnt; /bin/hvprof-demo 2 1",
       "--duration", "240"]
print("running:", " ".join(cmd), flush=True)
rec = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
console, summary = rec.stdout, rec.stderr
print(console)
print(summary)

failures = 0


def check(name, ok, detail=""):
    global failures
    print(f"{'ok' if ok else 'FAIL'}: {name}{(' - ' + detail) if detail else ''}", flush=True)
    if not ok:
        failures += 1


def hv(*args):
    r = subprocess.run([HVPROF, *args], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


lines = summary.splitlines()
warnings = [l for l in lines if l.startswith("hvprof: warning:")]
check("record exits 0", rec.returncode == 0, f"status {rec.returncode}")
check("one warning line names the interface (the raw disk is attached)",
      len(warnings) == 1 and "disk" not in warnings[0] and "interface network (default)"
      in warnings[0], repr(warnings))
check("-v says the domain's disk is the guest's /dev/vda (transient: snapshot)",
      f"hvprof: info: domain '{NAME}': disk vda ({disk}, transient: snapshot) is the guest's "
      "/dev/vda" in lines)
check("the guest read a file from the domain's disk", "hello from the domain's disk" in console)
check("the transient disk's image is unchanged after the guest wrote to it",
      hashlib.sha256(open(disk, "rb").read()).hexdigest() == disk_sha)
mapping = [l for l in lines if l.startswith(f"hvprof: info: domain '{NAME}': kernel")]
check("mapping: kernel from the domain, 256 MiB (currentMemory), 1 vCPU (current=)",
      len(mapping) == 1 and f"kernel {kernel} (domain)" in mapping[0]
      and "256 MiB (domain), 1 vCPUs (domain)" in mapping[0], repr(mapping))
check("the guest ran the demo and exited 0",
      "hvprof-init: exit status 0" in console and "guest exited with status 0" in summary)
sm = re.search(r"hvprof: (\d+) samples", summary)
check("samples were recorded", sm is not None and int(sm.group(1)) > 0,
      sm.group(0) if sm else "no summary line")

code, rep, err = hv("report", "-i", data, "--sort", "comm")
rows = [l for l in rep.splitlines() if l and not l.startswith("#")]
demo = [l for l in rows if re.search(r"\bhvprof-demo\b", l)]
check("report works and has samples of comm hvprof-demo", code == 0 and len(demo) == 1,
      err.strip() or repr(rows[:5]))

def read_meta(path):
    """META records (docs/recording-format.md), read through tests/kvm/hvprec.py (either format
    version; META is u32 key_len, u32 value_len, key, value)."""
    with open(path, "rb") as f:
        blob = f.read()
    meta = {}
    try:
        for off, rtype, p, plen, size in hvprec.records(blob):
            if rtype == 1:
                klen, vlen = struct.unpack_from("<II", blob, p)
                key = blob[p + 8:p + 8 + klen].decode()
                meta[key] = blob[p + 8 + klen:p + 8 + klen + vlen].decode()
    except hvprec.Damaged:
        pass  # the META records before the damage
    return meta


meta = read_meta(data) if os.path.exists(data) else {}
check("the recording's meta: 1 vCPU, 256 MiB, the domain's cmdline, the image's BTF",
      meta.get("vcpus") == "1" and meta.get("mem_mib") == "256"
      and meta.get("cmdline", "").startswith(m.get("cmdline", "console=ttyS0"))
      and os.path.realpath(meta.get("image", "")) == os.path.realpath(img)
      and bool(meta.get("btf")), repr({k: meta.get(k) for k in ("vcpus", "mem_mib", "image", "btf")}))
code, folded, err = hv("flamegraph", "-i", data, "--format", "folded")
check("user frames of the demo resolve through the image found from os/kernel (main)",
      code == 0 and any(l.startswith("hvprof-demo;") and ";main;" in l
                        for l in folded.splitlines()), err.strip())

if failures == 0:
    shutil.rmtree(work, ignore_errors=True)
print(f"{failures} check(s) failed" if failures else "all checks passed")
sys.exit(1 if failures else 0)
