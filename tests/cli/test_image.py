#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""--image NAME|DIR without a VM: a bundled image's name is looked up in the cache and built on
first use with the image recipe (faked here through $HVPROF_BUILD_IMAGE), a missing recipe or a
failed build says which command to run, an unknown name says what is known, and a disk-rooted
image whose manifest cannot bring --add files in says so.

usage: test_image.py HVPROF
"""
import json
import os
import subprocess
import sys
import tempfile

HVPROF = sys.argv[1]
work = tempfile.mkdtemp(prefix="hvprof-cli-image-")
failures = 0


def run(*args, env=None):
    e = dict(os.environ)
    e.pop("HVPROF_IMAGE", None)
    e.update(env or {})
    r = subprocess.run([HVPROF, *args], capture_output=True, text=True, timeout=60, env=e)
    return r.returncode, r.stdout, r.stderr


def check(name, ok, detail):
    global failures
    print(f"{'ok' if ok else 'FAIL'}: {name}: {detail}")
    failures += not ok


def script(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\nset -eu\n" + body)
    os.chmod(path, 0o755)
    return path


def last_error(err):
    lines = [l for l in err.splitlines() if l.startswith("hvprof: error:")]
    return lines[-1] if lines else ""


# A path that does not exist, and one that is a file: each said as it is.
status, _, err = run("run", "--image", os.path.join(work, "nowhere", "img"))
check("--image of a missing path", status == 3 and last_error(err).endswith(
      "nowhere/img: no such file or directory"), f"exit {status}, {err.strip()!r}")
status, _, err = run("run", "--image", sys.argv[0])
check("--image of a file", status == 3 and last_error(err).endswith(": not a directory"),
      f"exit {status}, {err.strip()!r}")

# An unknown name is neither a directory nor a bundled image.
status, _, err = run("run", "--image", "no-such-image")
check("unknown image name", status == 3 and "no-such-image: not a directory, nor a bundled image "
      "(default, debian)" in last_error(err), f"exit {status}, {err.strip()!r}")
status, _, err = run("kernel-info", "--image", "no-such-image")
check("kernel-info: unknown image name", status == 3 and "--image no-such-image: not a "
      "directory, nor a bundled image (default, debian)" in last_error(err),
      f"exit {status}, {err.strip()!r}")

# No recipe to build with: the error names the command to run.
cache = os.path.join(work, "cache-none")
status, _, err = run("kernel-info", "--image", "debian",
                     env={"HVPROF_CACHE": cache, "HVPROF_BUILD_IMAGE": os.path.join(work, "nope")})
check("no recipe: names the command", status == 3 and "images/build-image.sh debian" in
      last_error(err) and "not built" in last_error(err), f"exit {status}, {err.strip()!r}")

# A recipe that fails: its progress lines are shown, then one error naming the command.
failing = script(os.path.join(work, "failing.sh"),
                 'echo "build-image: $1: something is missing" >&2\nexit 1\n')
status, _, err = run("kernel-info", "--image", "debian",
                     env={"HVPROF_CACHE": cache, "HVPROF_BUILD_IMAGE": failing})
check("failed build", status == 3 and "something is missing" in err and
      "building the debian image failed" in last_error(err) and f"'{failing} debian'" in
      last_error(err), f"exit {status}, {err.strip()!r}")

# A recipe that works: called once as `RECIPE debian --print-dir`, its last stdout line is the
# image directory; the second use finds the image in the cache and builds nothing.
cache = os.path.join(work, "cache-built")
calls = os.path.join(work, "calls.txt")
fake = script(os.path.join(work, "fake.sh"), f"""
echo "$*" >> {calls}
echo "build-image: $1: building (fake)" >&2
d=$HVPROF_CACHE/images/$1-0123
mkdir -p "$d"
printf 'format=1\\nkernel=no-such-vmlinux\\n' > "$d/manifest"
ln -sfn "$1-0123" "$HVPROF_CACHE/images/$1"
echo "build-image: noise on stdout"
echo "$d"
""")
env = {"HVPROF_CACHE": cache, "HVPROF_BUILD_IMAGE": fake}
# (to boot it, `run` would not build it on a host without KVM: below)
status, _, err = run("kernel-info", "--image", "debian", env=env)
built = os.path.join(cache, "images", "debian-0123")
check("first use builds the image", status == 3 and "building it now" in err and
      "building (fake)" in err and f"{built}/no-such-vmlinux" in last_error(err),
      f"exit {status}, {err.strip()!r}")
status, _, err = run("kernel-info", "--image", "debian", env=env)
ncalls = len(open(calls).read().splitlines()) if os.path.exists(calls) else 0
check("second use takes the cached image", status == 3 and "building" not in err and
      "no-such-vmlinux" in last_error(err) and ncalls == 1 and
      open(calls).read().split("\n")[0] == "debian --print-dir", f"{ncalls} build(s), {err!r}")

# To boot it (run, record), an image is not built on a host without KVM: minutes for nothing.
# $HVPROF_IMAGE set for the default image: that directory, never a build in its stead.
nokvm = not os.access("/dev/kvm", os.R_OK | os.W_OK)
cache = os.path.join(work, "cache-nokvm")
calls = os.path.join(work, "calls-nokvm.txt")
env = {"HVPROF_CACHE": cache, "HVPROF_BUILD_IMAGE": script(
    os.path.join(work, "count.sh"), f'echo "$*" >> {calls}\nexit 1\n')}
if nokvm:
    status, _, err = run("run", "--image", "debian", env=env)
    check("no KVM: the image is not built to boot", status == 3 and not os.path.exists(calls)
          and "/dev/kvm" in last_error(err) and "no KVM on this host" in last_error(err)
          and "not built now" in last_error(err),
          f"exit {status}, {err.strip()!r}")
else:
    print("skip: no KVM: the image is not built to boot (this host has /dev/kvm)")
status, _, err = run("kernel-info", "--image", "default",
                     env={**env, "HVPROF_IMAGE": os.path.join(work, "nowhere")})
check("$HVPROF_IMAGE not an image: said, nothing built", status == 3 and
      not os.path.exists(calls) and "HVPROF_IMAGE=" in last_error(err) and
      "not an image directory" in last_error(err), f"exit {status}, {err.strip()!r}")

# A disk-rooted image without add_initrd cannot bring --add files in: one clear error.
img = os.path.join(work, "diskimg")
os.mkdir(img)
with open(os.path.join(img, "disk.raw"), "wb") as f:
    f.truncate(1 << 20)
with open(os.path.join(img, "vmlinux"), "wb") as f:
    f.write(b"\0" * 4096)
with open(os.path.join(img, "manifest"), "w") as f:
    f.write("format=1\nkernel=vmlinux\ndisk=disk.raw\ncmdline=console=ttyS0 root=/dev/vda\n")
status, _, err = run("run", "--image", img, "--add", f"{sys.argv[0]}:/root/t.py")
check("--add on a disk image without add_initrd", status == 3 and "has no add_initrd" in
      last_error(err) and img in last_error(err), f"exit {status}, {err.strip()!r}")

# kernel-info --image: the manifest's kernel is the one described (this one is not an ELF:
# the error names it), and --kernel with --image is a usage error.
status, _, err = run("kernel-info", "--image", img)
check("kernel-info --image DIR reads the manifest's kernel", status == 3 and
      f"{img}/vmlinux: neither an x86-64 vmlinux ELF" in last_error(err),
      f"exit {status}, {err.strip()!r}")
# A program is not a kernel (an x86-64 ELF without linux_banner): said, not described.
status, _, err = run("kernel-info", "--kernel", "/bin/ls")
check("kernel-info of a program", status == 3 and "not a Linux kernel" in last_error(err),
      f"exit {status}, {err.strip()!r}")
status, _, err = run("kernel-info", "--kernel", "/bin/ls", "--symbols", os.path.join(work, "no"))
check("kernel-info --symbols of a missing file", status == 3 and "--symbols" in last_error(err),
      f"exit {status}, {err.strip()!r}")
status, _, err = run("kernel-info", "--image", img, "--kernel", os.path.join(img, "vmlinux"))
check("kernel-info: --kernel and --image together", status == 2 and "give one" in err,
      f"exit {status}, {err.strip()!r}")
# The bundled default image, when this machine has it built: its BTF comes from vmlinux.btf
# (the kernel itself has no .BTF section), as record and run take it.
cache = os.environ.get("HVPROF_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hvprof")
if os.path.exists(os.path.join(cache, "images", "default", "manifest")):
    status, out, err = run("kernel-info", "--image", "default")
    btf = next((line for line in out.splitlines() if line.startswith("BTF:")), "")
    check("kernel-info --image default: BTF from the image's vmlinux.btf", status == 0 and
          "vmlinux.btf; task_struct pid=" in btf and "missing:       nothing" in out,
          f"exit {status}, {btf!r}, {err.strip()!r}")
    # the banner of the linux_banner symbol (6.1's vmlinux also holds a placeholder copy
    # without the build's number: "... # SMP "), and where RBP is not a frame yet: both sources
    banner = next((line for line in out.splitlines() if line.startswith("banner:")), "")
    stacks = next((line for line in out.splitlines() if line.startswith("kernel stacks:")), "")
    check("kernel-info --image default: the linux_banner symbol's banner", "# SMP" not in banner
          and " SMP " in banner, banner)
    check("kernel-info --image default: frames not built, from CFI and code",
          "known for " in stacks and "call-frame information" in stacks, stacks)
    # the trap's interrupt-return breakpoint: the branch to native_irq_return_iret that only
    # returns to user mode take, in swapgs_restore_regs_and_return_to_usermode (JSON too)
    status, out, err = run("kernel-info", "--image", "default", "--json")
    try:
        d = json.loads(out)
        iret = next(s for s in d["exit_sites"] if s["symbol"] == "native_irq_return_iret")
        br = d["iret_user_branch"]
        ok = (status == 0 and br["symbol"] == "swapgs_restore_regs_and_return_to_usermode" and
              0 < int(iret["kva"], 16) - int(br["kva"], 16) <= 0x100)
    except (ValueError, KeyError, TypeError, StopIteration) as e:
        ok, br = False, repr(e)
    check("kernel-info --image default --json: the branch to the iretq on returns to user", ok,
          f"exit {status}, {br}")
    # one exit-work loop, out of line, which both exit paths reach: the one breakpoint
    try:
        loops = d["exit_work_loops"]
        m = d["guest_visible_marks"]
        ok = len(loops) == 1 and loops[0]["clear"] == d["exit_work_loop"]["clear"] and \
            loops[0]["symbol"] == d["exit_work_loop"]["symbol"] and \
            m["possible"] is True and m["breakpoints"] == 3 and m["pvm"] is True
    except (KeyError, TypeError, IndexError) as e:
        ok, loops = False, repr(e)
    check("kernel-info --image default --json: one exit-work loop, marks possible on PVM too",
          ok, str(loops)[:200])
    # files named on the command line must exist
    status, _, err = run("kernel-info", "--image", "default", "--btf", os.path.join(work, "no"))
    check("kernel-info --btf of a missing file", status == 3 and "--btf" in last_error(err) and
          "No such file" in last_error(err), f"exit {status}, {err.strip()!r}")
else:
    print("skip: kernel-info --image default: the default image is not built on this machine")
# Debian's 6.12 (tests/fixtures/get-stock-kernel.sh fetches it as "newer"): its exit paths each
# hold an inlined copy of the exit-work loop, so kernel-info names both, a breakpoint each
newer = os.path.join(cache, "stock-kernel", "newer", "vmlinuz")
if os.path.exists(newer):
    status, text, err = run("kernel-info", "--kernel", newer)
    line = next((x for x in text.splitlines() if x.startswith("exit-work loop:")), "")
    copies = [x for x in text.splitlines() if x.startswith("  copy: TIF_NOTIFY_RESUME")]
    check("kernel-info of Debian's 6.12: the exit-work loop inlined into each exit path",
          status == 0 and "inlined into each exit path" in line and
          "guest-visible marks possible" in line and "4 breakpoints with sysretq/iretq" in line and
          len(copies) == 2 and "syscall_exit_to_user_mode+0x" in copies[0] and
          "irqentry_exit_to_user_mode+0x" in copies[1] and
          not any("not completable" in c for c in copies),
          f"exit {status}, {line!r}, {copies!r}, {err.strip()[-200:]!r}")
    status, out, _ = run("kernel-info", "--kernel", newer, "--json")
    try:
        d = json.loads(out)
        loops = d["exit_work_loops"]
        m = d["guest_visible_marks"]
        ok = d["exit_work_loop"] is None and \
            d["exit_work_loop_missing"] == "inlined into the exit paths (exit_work_loops)" and \
            m["possible"] is True and m["breakpoints"] == 4 and m["pvm"] is False and \
            [c["symbol"] for c in loops] == [
                "syscall_exit_to_user_mode", "irqentry_exit_to_user_mode"] and \
            all(c["completable"] is True and
                int(c["head"], 16) < int(c["clear"], 16) < int(c["loop_end"], 16)
                for c in loops)
    except (ValueError, KeyError, TypeError) as e:
        ok, d = False, repr(e)
    check("kernel-info --json of Debian's 6.12: no one loop, a loop per exit path", ok,
          f"exit {status}, {str(d)[:200]}")
else:
    print(f"skip: kernel-info of Debian's 6.12: {newer} missing (tests/fixtures/get-stock-kernel.sh)")

# Debian's cloud kernel (fetched as "cloud"): an lz4 payload, read on the host for its symbols,
# BTF and loop, but booted by the guest's own decompressor, which chooses the slide
cloud = os.path.join(cache, "stock-kernel", "cloud", "vmlinuz")
if os.path.exists(cloud):
    status, text, err = run("kernel-info", "--kernel", cloud)
    lines = {x.split(":", 1)[0]: x for x in text.splitlines() if ":" in x}
    check("kernel-info of Debian's cloud kernel: an lz4 payload read, its loop found, the slide "
          "the guest's",
          status == 0 and "payload lz4" in lines.get("kernel", "") and
          "from kallsyms tables in the image" in lines.get("symbols", "") and
          "guest-visible marks possible" in lines.get("exit-work loop", "") and
          "the guest's decompressor chooses the slide" in lines.get("KASLR", ""),
          f"exit {status}, {text[:300]!r}, {err.strip()[-200:]!r}")
    status, out, _ = run("kernel-info", "--kernel", cloud, "--json")
    try:
        d = json.loads(out)
        ok = d["compression"] == "lz4" and d["kaslr_relocations"]["placed_by"] == "guest" and \
            d["kaslr_relocations"]["64"] > 100000
    except (ValueError, KeyError, TypeError) as e:
        ok, d = False, repr(e)
    check("kernel-info --json of Debian's cloud kernel: lz4, relocations placed by the guest", ok,
          f"exit {status}, {str(d)[:200]}")
else:
    print(f"skip: kernel-info of Debian's cloud kernel: {cloud} missing "
          "(tests/fixtures/get-stock-kernel.sh)")

print(f"{failures} failure(s)" if failures else "all passed")
sys.exit(1 if failures else 0)
