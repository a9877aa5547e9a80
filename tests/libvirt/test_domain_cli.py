#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""--domain/--connect/--domain-xml/--strict without a VM, through libvirt's test driver (it runs
inside libvirt.so: test:///default and test:///ABS_PATH.xml need no libvirtd). Every case stops
before a guest would start (a kernel that does not exist, or an error in the definition), so
nothing here boots.

usage: test_domain_cli.py HVPROF
Exit: 0 all cases passed, 1 a case failed.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HVPROF = sys.argv[1]
work = tempfile.mkdtemp(prefix="hvprof-libvirt-cli-")
NOKERNEL = os.path.join(work, "no-such-vmlinux")
failures = 0


def domain(name="cli-demo", memory="<memory unit='MiB'>256</memory>", vcpu="<vcpu>1</vcpu>",
           os_extra="", devices="", kernel=NOKERNEL, dtype="test"):
    kern = f"<kernel>{kernel}</kernel>" if kernel else "<boot dev='hd'/>"
    return (f"<domain type='{dtype}'><name>{name}</name>{memory}{vcpu}"
            f"<os><type arch='x86_64'>hvm</type>{kern}<cmdline>console=ttyS0 quiet</cmdline>"
            f"{os_extra}</os><devices><serial type='pty'><target port='0'/></serial>"
            f"<memballoon model='none'/>{devices}</devices></domain>")


def fixture(name, *domains):
    """A test-driver connection file (root <node>) holding @domains; returns its URI."""
    path = os.path.join(work, name + ".xml")
    with open(path, "w") as f:
        f.write("<node>" + "".join(domains) + "</node>\n")
    return "test://" + path


def xml_file(name, text):
    path = os.path.join(work, name + ".xml")
    with open(path, "w") as f:
        f.write(text)
    return path


def run(*args):
    r = subprocess.run([HVPROF, *args], capture_output=True, text=True, timeout=60,
                       cwd=work)
    return r.returncode, r.stdout, [l for l in r.stderr.splitlines() if l.strip()]


def check(name, ok, detail):
    global failures
    print(f"{'ok' if ok else 'FAIL'}: {name}{'' if ok else ' - ' + repr(detail)}", flush=True)
    failures += not ok


plain = fixture("plain", domain())
units = fixture("units", domain(name="units-demo",
                                memory="<memory unit='GiB'>1</memory>"
                                       "<currentMemory unit='MiB'>384</currentMemory>",
                                vcpu="<vcpu current='2'>4</vcpu>"))
with_devices = fixture("devices", domain(
    name="dev-demo",
    devices="<disk type='file' device='cdrom'><source file='/iso/x.iso'/>"
            "<target dev='hdc' bus='ide'/><readonly/></disk>"
            "<interface type='network'><source network='default'/></interface>"))
# Disks: a qcow2 one is refused with the conversion; a raw one that is missing is named; real raw
# ones are attached in target order (vda before vdb whatever the document order).
qcow = fixture("qcow", domain(
    name="qcow-demo",
    devices="<disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
            "<source file='/var/lib/x.qcow2'/><target dev='vda' bus='virtio'/></disk>"))
missing_disk = fixture("missingdisk", domain(
    name="md-demo",
    devices="<disk type='file' device='disk'><driver name='qemu' type='raw'/>"
            f"<source file='{work}/missing.img'/><target dev='vda' bus='virtio'/></disk>"))
raw_a, raw_b = os.path.join(work, "a.img"), os.path.join(work, "b.img")
for path in (raw_a, raw_b):
    with open(path, "wb") as f:
        f.truncate(1 << 20)
disks = fixture("disks", domain(
    name="disk-demo",
    devices=f"<disk type='file' device='disk'><source file='{raw_b}'/><target dev='vdb'/>"
            "<transient/></disk>"
            f"<disk type='file' device='disk'><driver name='qemu' type='raw'/>"
            f"<source file='{raw_a}'/><target dev='vda'/><readonly/></disk>"))
bad_unit = fixture("badunit", domain(memory="<memory unit='furlong'>1</memory>"))
sock = os.path.join(work, "no-libvirtd.sock")

# (name, args, exit status, text the one error line must contain)
ERRORS = [
    ("unknown domain name", ["run", "--connect", "test:///default", "--domain", "nope"], 3,
     "no libvirt domain named 'nope' at test:///default"),
    ("unknown domain name (record)",
     ["record", "-o", "x.data", "--connect", plain, "--domain", "other"], 3,
     "no libvirt domain named 'other'"),
    ("unreachable URI", ["run", "--connect", f"qemu+unix:///system?socket={sock}",
                         "--domain", "x"], 3, f"cannot connect to libvirt at qemu+unix"),
    ("test driver file that does not exist",
     ["run", "--connect", "test://" + os.path.join(work, "none.xml"), "--domain", "x"], 3,
     "cannot connect to libvirt at test://"),
    ("missing kernel: test:///default's firmware-booted domain",
     ["run", "--connect", "test:///default", "--domain", "test"], 3,
     "domain 'test' has no os/kernel (it boots from boot dev='hd')"),
    ("missing kernel: a fixture domain",
     ["record", "-o", "x.data", "--connect", fixture("nokernel", domain(kernel=None)),
      "--domain", "cli-demo"], 3, "has no os/kernel"),
    ("unit libvirt rejects", ["run", "--connect", bad_unit, "--domain", "cli-demo"], 3,
     "unknown suffix 'furlong'"),
    ("unit hvprof rejects (--domain-xml)",
     ["run", "--domain-xml", xml_file("u1", domain(memory="<memory unit='parsec'>1</memory>"))],
     3, "<memory unit='parsec'>: not a libvirt unit"),
    ("size that overflows (--domain-xml)",
     ["run", "--domain-xml",
      xml_file("u2", domain(memory="<memory unit='EiB'>100</memory>"))], 3, "too large"),
    ("memory below hvprof's minimum (KiB default unit)",
     ["run", "--domain-xml", xml_file("u3", domain(memory="<memory>32768</memory>"))], 3,
     "memory of 32768 KiB is outside what hvprof runs"),
    ("too many vCPUs", ["run", "--domain-xml", xml_file("v", domain(vcpu="<vcpu>200</vcpu>"))],
     3, "200 vCPUs"),
    ("--strict and a cdrom", ["run", "--strict", "--connect", with_devices, "--domain", "dev-demo"],
     3, "domain 'dev-demo' has what hvprof does not implement (--strict): cdrom hdc "
        "(/iso/x.iso), interface network (default)"),
    ("a qcow2 disk", ["run", "--connect", qcow, "--domain", "qcow-demo"], 3,
     "domain 'qcow-demo': disk vda (/var/lib/x.qcow2) is a qcow2 image; hvprof boots raw "
     "images: convert it with 'qemu-img convert -O raw /var/lib/x.qcow2 /var/lib/x.qcow2.raw'"),
    ("a raw disk that does not exist", ["run", "--connect", missing_disk, "--domain", "md-demo"],
     3, f"cannot open disk image {work}/missing.img: No such file or directory"),
    ("not well-formed XML", ["run", "--domain-xml", xml_file("broken", "<domain><name>x")], 3,
     "not well-formed"),
    ("a test-driver <node> file given as --domain-xml",
     ["run", "--domain-xml", plain[len("test://"):]], 3, "root element is <node>"),
    ("--domain-xml that does not exist", ["run", "--domain-xml", os.path.join(work, "nope.xml")],
     3, "cannot open domain XML"),
    ("--connect without --domain", ["run", "--connect", "test:///default"], 2,
     "--connect test:///default needs --domain NAME"),
    ("--domain and --domain-xml", ["run", "--domain", "a", "--domain-xml", "b.xml"], 2,
     "give one"),
    ("--strict alone", ["record", "--strict"], 2, "--strict applies to --domain"),
]

for name, args, want_status, want in ERRORS:
    status, _, lines = run(*args)
    ok = (status == want_status and len(lines) == 1 and lines[0].startswith("hvprof: error: ")
          and want in lines[0])
    check(name, ok, (status, lines))

# Units through libvirt (GiB memory, MiB currentMemory, vcpu current=) and the default image's
# absence: -v shows the mapping before the (missing) kernel stops the run.
status, _, lines = run("-v", "run", "--connect", units, "--domain", "units-demo")
info = [l for l in lines if l.startswith("hvprof: info: domain 'units-demo': kernel")]
check("units via the test driver: currentMemory 384 MiB, vcpu current=2",
      status == 3 and len(info) == 1 and "384 MiB (domain), 2 vCPUs (domain)" in info[0]
      and f"kernel {NOKERNEL} (domain)" in info[0] and lines[-1].endswith(NOKERNEL + ": No such file or directory"),
      lines)

# Flags win over the domain, whichever side of --domain they are on.
flag_kernel = os.path.join(work, "flag-vmlinux")
for order in (["--kernel", flag_kernel, "--mem", "128", "--cpus", "3", "--domain", "units-demo",
               "--connect", units],
              ["--connect", units, "--domain", "units-demo", "--cpus", "3", "--mem", "128",
               "--kernel", flag_kernel]):
    status, _, lines = run("-v", "run", *order)
    info = [l for l in lines if l.startswith("hvprof: info: domain 'units-demo': kernel")]
    check(f"flags override the domain ({' '.join(order[:2])} ...)",
          status == 3 and len(info) == 1
          and f"kernel {flag_kernel} (--kernel)" in info[0]
          and "128 MiB (--mem), 3 vCPUs (--cpus)" in info[0]
          and lines[-1] == f"hvprof: error: run: cannot read kernel {flag_kernel}: No such file or directory",
          lines)

# --kernel supplies what a firmware-booted domain lacks.
status, _, lines = run("run", "--connect", "test:///default", "--domain", "test", "--kernel",
                       flag_kernel)
check("--kernel makes test:///default's domain usable (then: unsupported items, its disk)",
      status == 3 and len(lines) == 2 and lines[0].startswith("hvprof: warning: domain 'test' has")
      and "os arch 'i686'" in lines[0] and "disk" not in lines[0]
      and "cannot open disk image /guest/diskimage1" in lines[1], lines)

# A qcow2 disk is no error when --disk replaces the domain's disks.
status, _, lines = run("run", "--connect", qcow, "--domain", "qcow-demo", "--disk", raw_a + ",ro")
check("--disk replaces the domain's (qcow2) disks",
      status == 3 and len(lines) == 1 and "cannot read kernel" in lines[0], lines)

# Raw disks: attached in target order with <readonly/> and <transient/> (-v says which is which).
status, _, lines = run("-v", "run", "--connect", disks, "--domain", "disk-demo")
dinfo = [l for l in lines if "is the guest's /dev/vd" in l]
check("raw disks in target order, readonly and transient",
      status == 3 and len(dinfo) == 2
      and dinfo[0].endswith(f"disk vda ({raw_a}, read-only) is the guest's /dev/vda")
      and dinfo[1].endswith(f"disk vdb ({raw_b}, transient: snapshot) is the guest's /dev/vdb")
      and lines[-1].startswith("hvprof: error: run: cannot read kernel"), lines)

# One warning line lists everything unsupported; -q silences it; the same from --domain-xml.
status, _, lines = run("run", "--connect", with_devices, "--domain", "dev-demo")
check("one warning line for what hvprof lacks",
      status == 3 and len(lines) == 2 and lines[0] ==
      "hvprof: warning: domain 'dev-demo' has what hvprof does not implement, left out: "
      "cdrom hdc (/iso/x.iso), interface network (default) (--strict makes this an error)"
      and lines[1].startswith("hvprof: error: run: cannot read kernel"), lines)
status, _, lines = run("-q", "run", "--connect", with_devices, "--domain", "dev-demo")
check("-q keeps only the error", status == 3 and len(lines) == 1, lines)
dev_xml = xml_file("devfile", domain(name="dev-demo", devices="<graphics type='vnc'/>"))
status, _, lines = run("run", "--domain-xml", dev_xml)
check("--domain-xml warns the same way",
      status == 3 and len(lines) == 2 and "left out: graphics vnc (" in lines[0], lines)

if not failures:
    shutil.rmtree(work, ignore_errors=True)
print(f"{failures} case(s) failed" if failures else "all cases passed")
sys.exit(1 if failures else 0)
