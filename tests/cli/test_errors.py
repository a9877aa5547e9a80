#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CLI error handling without a VM: bad flags, a missing kernel, an unreadable image and a
corrupt recording each give one clear error line (naming the thing) and a non-zero exit; a
recording damaged after intact records still reports what is intact.

usage: test_errors.py HVPROF
"""
import os
import struct
import subprocess
import sys
import tempfile
import zlib

HVPROF = sys.argv[1]
work = tempfile.mkdtemp(prefix="hvprof-cli-")
failures = 0


def run(*args):
    r = subprocess.run([HVPROF, *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def err_lines(err):
    """The non-empty lines of a stderr."""
    return [l for l in err.splitlines() if l.strip()]


def record(rtype, payload):
    head = struct.pack("<II", rtype, 8 + len(payload) + 4) + payload
    return head + struct.pack("<I", zlib.crc32(head))


def meta(key, value):
    k, v = key.encode(), value.encode()
    return record(1, struct.pack("<II", len(k), len(v)) + k + v)


HEADER = b"HVPROF\x00\x01" + struct.pack("<II", 1, 16)

empty_dir = os.path.join(work, "not-an-image")
os.mkdir(empty_dir)
garbage = os.path.join(work, "garbage.data")
with open(garbage, "wb") as f:
    f.write(b"this is not a recording at all\n")
empty_rec = os.path.join(work, "empty.data")
open(empty_rec, "wb").close()
newer = os.path.join(work, "newer.data")
with open(newer, "wb") as f:
    f.write(b"HVPROF\x00\x01" + struct.pack("<II", 99, 16))
damaged = os.path.join(work, "damaged.data")
with open(damaged, "wb") as f:
    good = HEADER + meta("counter", "cpu-clock") + meta("vcpus", "1")
    bad = bytearray(meta("cmdline", "x" * 40))
    bad[20] ^= 0xFF  # CRC mismatch in the third record
    f.write(good + bytes(bad))

# Disks: an empty file, a qcow2 image (by its magic), a good raw image held locked by this
# process (as another hvprof would hold it), and nine of them (vda..vdi: one too many).
import fcntl  # noqa: E402
empty_img = os.path.join(work, "empty.img")
open(empty_img, "wb").close()
qcow_img = os.path.join(work, "disk.qcow2")
with open(qcow_img, "wb") as f:
    f.write(b"QFI\xfb\x00\x00\x00\x03" + bytes(4088))
raw_img = os.path.join(work, "raw.img")
with open(raw_img, "wb") as f:
    f.truncate(1 << 20)
locked_img = os.path.join(work, "locked.img")
with open(locked_img, "wb") as f:
    f.truncate(1 << 20)
lock_holder = open(locked_img, "r+b")
fcntl.lockf(lock_holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
nine_disks = [a for _ in range(9) for a in ("--disk", raw_img + ",ro")]
folded_a = os.path.join(work, "a.folded")
with open(folded_a, "w") as f:
    f.write("sh;main 3\n")

# (name, args, expected exit status, text the single error line must contain)
CASES = [
    ("unknown command", ["frobnicate"], 2, "unknown command 'frobnicate' (see"),
    ("misspelled command", ["reprot"], 2, "unknown command 'reprot': did you mean 'report'?"),
    ("misspelled command after help", ["help", "reprot"], 2,
     "unknown command 'reprot': did you mean 'report'?"),
    ("two recordings given to report", ["report", "x.data", "y.data"], 2,
     "report: unexpected argument 'y.data' after the recording 'x.data'"),
    ("a recording given both ways", ["flamegraph", "-i", "x.data", "y.data"], 2,
     "flamegraph: two recordings: -i x.data and 'y.data'"),
    ("unknown global option", ["--bogus", "report"], 2, "unknown option '--bogus' (see"),
    ("misspelled global option", ["--verison"], 2,
     "unknown option '--verison': did you mean '--version'?"),
    ("bad -F value", ["record", "-F", "0"], 2, "-F '0'"),
    ("bad --call-graph mode", ["record", "--call-graph", "lbr"], 2, "--call-graph 'lbr'"),
    ("--bench-phases with --bare-exits", ["record", "--bench-phases", "--bare-exits"], 2,
     "not with --bare-exits"),
    ("--bench-phases with --from", ["record", "--bench-phases", "--from", "init"], 2,
     "not with --from"),
    ("--call-graph SIZE too big", ["record", "--call-graph", "dwarf,65536"], 2,
     "--call-graph 'dwarf,65536'"),
    ("bad --mem value", ["run", "--mem", "12"], 2, "--mem '12': want an even number of MiB, 64 to 1048576"),
    ("bad --cpus value", ["run", "--cpus", "0"], 2, "--cpus '0'"),
    ("bad --add value", ["run", "--add", "nocolon"], 2, "--add 'nocolon'"),
    ("bad --kaslr word", ["run", "--kaslr", "random"], 2, "--kaslr 'random'"),
    ("--kaslr slide not 2 MiB-aligned", ["run", "--kaslr", "0x1234"], 2, "--kaslr '0x1234'"),
    ("--kaslr slide beyond 1 GiB", ["run", "--kaslr", "0x40000000"], 2, "--kaslr '0x40000000'"),
    ("--kaslr negative", ["run", "--kaslr", "-0x200000"], 2, "--kaslr '-0x200000'"),
    ("missing --vmlinux", ["run", "--kernel", sys.argv[0], "--vmlinux", "/nonexistent/vml"], 3,
     "--vmlinux /nonexistent/vml"),
    ("bad --sort key", ["report", "--sort", "comm,bogus"], 2, "'bogus'"),
    ("missing kernel", ["run", "--kernel", "/nonexistent/vmlinux"], 3, "/nonexistent/vmlinux"),
    ("image without manifest", ["run", "--image", empty_dir], 3, empty_dir + "/manifest"),
    ("image that is a file", ["run", "--image", garbage], 3, garbage),
    ("missing disk", ["run", "--disk", "/nonexistent/d.img"], 3,
     "cannot open disk image /nonexistent/d.img: No such file or directory"),
    ("disk that is a directory", ["run", "--disk", empty_dir + ",snapshot"], 3,
     f"{empty_dir} is a directory, not a disk image"),
    ("empty disk", ["run", "--disk", empty_img], 3, f"{empty_img} is empty"),
    ("qcow2 disk", ["run", "--disk", qcow_img + ",snapshot"], 3,
     f"{qcow_img} is a qcow2 image; hvprof boots raw images: convert it with "
     f"'qemu-img convert -O raw {qcow_img} {qcow_img}.raw'"),
    ("disk locked by another process", ["run", "--disk", locked_img], 3,
     f"{locked_img} is in use by another process"),
    ("disk locked, even for a snapshot", ["run", "--disk", locked_img + ",snapshot"], 3,
     f"{locked_img} is being written by another process"),
    ("unknown --disk option", ["run", "--disk", raw_img + ",cache=none"], 2,
     "unknown option 'cache=none'"),
    ("--disk without a file", ["run", "--disk", ",ro"], 2, "--disk ',ro': no file"),
    ("nine disks", ["run", *nine_disks], 2, "at most 8 disks"),
    ("bad --root", ["run", "--root", "/dev/vda rw"], 2, "--root '/dev/vda rw'"),
    ("missing recording", ["report", "-i", os.path.join(work, "nope.data")], 3, "nope.data"),
    ("garbage recording", ["report", "-i", garbage], 3, "bad magic"),
    ("garbage recording, named without -i", ["report", garbage], 3, "bad magic"),
    ("empty recording", ["export", "--format", "folded", empty_rec], 3,
     "empty file (0 bytes): not an hvprof recording"),
    ("newer recording", ["report", "-i", newer], 3, "newer"),
    ("flamegraph of garbage", ["flamegraph", "-i", garbage, "-o", os.path.join(work, "x.svg")],
     3, "bad magic"),
    # the filters of report, flamegraph, export and diff (cli/filter_opts.c)
    ("--time END before START", ["report", "--time", "3,1"], 2, "--time '3,1': END before START"),
    ("--time without a comma", ["flamegraph", "--time", "3"], 2, "--time '3': want START,END"),
    ("--time not seconds", ["export", "--format", "folded", "--time", "1s,"], 2,
     "--time '1s,': not a number of seconds"),
    ("--time both sides empty", ["diff", "--time", ",", "a", "b"], 2, "--time ',': want"),
    ("--pid not a number", ["report", "--pid", "x"], 2, "--pid 'x': not a number"),
    ("--pid out of range", ["export", "--format", "folded", "--pid", "1,9999999999"], 2,
     "--pid '9999999999': out of range"),
    ("--tid empty item", ["diff", "--tid", "1,,2", "a", "b"], 2,
     "--tid '1,,2': empty item in the list"),
    ("--comm empty", ["flamegraph", "--comm", ""], 2, "--comm '': empty list"),
    ("--kernel-only with --user-only", ["report", "--kernel-only", "--user-only"], 2,
     "--kernel-only and --user-only exclude each other"),
    ("diff filters on folded stacks", ["diff", "--comm", "sh", folded_a, folded_a], 3,
     "folded stacks cannot be filtered (--comm sh): the filters need a recording"),
]

for name, args, want_status, want_text in CASES:
    status, out, err = run(*args)
    lines = err_lines(err)
    ok = (status == want_status and len(lines) == 1 and want_text in lines[0]
          and lines[0].startswith("hvprof: error:"))
    print(f"{'ok' if ok else 'FAIL'}: {name}: exit {status}, stderr {lines!r}")
    failures += not ok

# what getopt refuses, in one line of our own: a misspelled long option with the closest of that
# command's options (none when nothing is close), an abbreviation of several with them, a
# missing value, a value given to a flag, an unknown short option
for args, want in (
        (["record", "--mark-evry-stay"], "record: unknown option '--mark-evry-stay': did you "
         "mean '--mark-every-stay'? (see 'hvprof record --help')"),
        (["diff", "--treshold", "5", "a", "b"], "diff: unknown option '--treshold': did you "
         "mean '--threshold'?"),
        (["report", "--zzzzzzz=1"], "report: unknown option '--zzzzzzz' (see"),
        (["record", "--ma"], "record: option '--ma' is ambiguous: --marks, --mark-every-stay"),
        (["record", "--duration"], "record: option '--duration' needs a value"),
        (["record", "-F"], "record: option '-F' needs a value"),
        (["record", "--bare-exits=1"], "record: option '--bare-exits' takes no value"),
        (["export", "-Z"], "export: unknown option '-Z' (see 'hvprof export --help')"),
        # an abbreviation of one option is that option
        (["record", "--out"], "record: option '--output' needs a value"),
        (["report", "--no-child=1"], "report: option '--no-children' takes no value"),
        # a short option refused inside a cluster, after a long option: the short one
        (["report", "--no-children", "-Zq"], "report: unknown option '-Z' (see")):
    status, out, err = run(*args)
    lines = err_lines(err)
    ok = (status == 2 and len(lines) == 1 and lines[0].startswith("hvprof: error: " + want)
          and ("did you mean" in want) == ("did you mean" in lines[0]))
    print(f"{'ok' if ok else 'FAIL'}: {' '.join(args)}: exit {status}, stderr {lines!r}")
    failures += not ok

status, out, err = run("report", "-i", damaged)
ok = (status == 0 and "damaged" in err and "CRC" in err and "# Samples: 0" in out
      and "cpu-clock" in out)
print(f"{'ok' if ok else 'FAIL'}: damaged recording keeps its intact records: exit {status}, "
      f"stderr {err.strip()!r}")
failures += not ok

status, out, err = run("report", "-i", damaged, "--comm", "sh", "--time", "1.5,")
ok = status == 0 and "# Filtered: --comm sh --time 1.5,: kept 0 of 0 samples (0.0%)" in out
print(f"{'ok' if ok else 'FAIL'}: filtered report says what was filtered: exit {status}")
failures += not ok

# Filters that leave no sample of a recording that has some: a warning names the file (the
# report itself stays, exit 0). A user-mode SAMPLE (docs/recording-format.md: 72 fixed bytes).
sampled = os.path.join(work, "sampled.data")
with open(sampled, "wb") as f:
    smp = struct.pack("<QIBBBBQQQiiQQHHI", 1000000, 0, 3, 1, 0, 0, 0x401000, 0x1000, 0, 42, 42,
                      0, 1000000, 0, 0, 0)
    f.write(HEADER + meta("counter", "cpu-clock") + meta("vcpus", "1") + record(2, smp))
for args in (("report", "-i", sampled, "--comm", "nosuchcomm"),
             ("flamegraph", "-i", sampled, "--pid", "7", "-o", os.path.join(work, "f.svg"))):
    status, out, err = run(*args)
    ok = status == 0 and f"warning: {sampled}: no sample matched the filters (all 1 left out)" in err
    print(f"{'ok' if ok else 'FAIL'}: {args[0]}: filters that keep nothing warn: exit {status}, "
          f"stderr {err.strip()!r}")
    failures += not ok
status, out, err = run("report", "-i", sampled, "--pid", "42")
ok = status == 0 and "no sample matched" not in err and "kept 1 of 1" in out
print(f"{'ok' if ok else 'FAIL'}: filters that keep a sample do not warn: exit {status}, "
      f"stderr {err.strip()!r}")
failures += not ok

# A record whose guest never starts (here a kernel file of junk: it gets past the checks made
# before the output is opened, and fails when the guest is set up, on any host) leaves the
# existing recording and its .old as they were, and no file of its own
keep = os.path.join(work, "keep")
os.mkdir(keep)
for name, text in (("r.data", b"GOOD"), ("r.data.old", b"OLDER")):
    with open(os.path.join(keep, name), "wb") as f:
        f.write(text)
junk_kernel = os.path.join(work, "junk-kernel")
with open(junk_kernel, "wb") as f:
    f.write(b"not a kernel\n" * 400)
status, out, err = run("record", "--kernel", junk_kernel, "-o", os.path.join(keep, "r.data"))
files = {n: open(os.path.join(keep, n), "rb").read() for n in sorted(os.listdir(keep))}
ok = status != 0 and files == {"r.data": b"GOOD", "r.data.old": b"OLDER"}
print(f"{'ok' if ok else 'FAIL'}: a record that never started keeps the recordings there: "
      f"exit {status}, files {files!r}")
failures += not ok

# an output that cannot be written is said before any work (exit 3), never after it
for args in ((["diff", "--svg", work, "x.data", "y.data"], f"diff --svg: cannot create {work}: "
              "Is a directory"),
             (["export", "-f", "folded", "-o", "/nonexistent-dir/a.folded", "-i", "x.data"],
              "export: cannot create /nonexistent-dir/a.folded: No such file or directory"),
             (["flamegraph", "-o", work, "-i", "x.data"],
              f"flamegraph: cannot create {work}: Is a directory")):
    status, out, err = run(*args[0])
    lines = err_lines(err)
    ok = status == 3 and lines == ["hvprof: error: " + args[1]]
    print(f"{'ok' if ok else 'FAIL'}: {' '.join(args[0][:3])}: an unwritable output first: "
          f"exit {status}, stderr {lines!r}")
    failures += not ok

# No kernel image named (no META kernel, no --vmlinux): said once when kernel frames need it, not
# for a recording without any (here only its header)
kernel_rec = os.path.join(work, "kernel-no-image.data")
with open(kernel_rec, "wb") as f:
    smp = b"".join(struct.pack("<QIBBBBQQQiiQQHHI", 1000000 * (i + 1), 0, 0, 2, 0, 0,
                               0xffffffff81000100 + i, 0x1000, 0, 0, 0, 0, 1000000, 1, 0, 0)
                   + struct.pack("<Q", 0xffffffff81000100 + i) for i in range(3))
    f.write(HEADER + meta("counter", "cpu-clock") + meta("vcpus", "1")
            + b"".join(record(2, smp[i * 80:(i + 1) * 80]) for i in range(3)))
header_only = os.path.join(work, "header-only.data")
with open(header_only, "wb") as f:
    f.write(HEADER)
for path, want in ((kernel_rec, 1), (header_only, 0)):
    status, out, err = run("report", "-i", path)
    n = err.count("no kernel image named")
    ok = status == 0 and n == want
    print(f"{'ok' if ok else 'FAIL'}: {os.path.basename(path)}: 'no kernel image named' said "
          f"{n} time(s), want {want}: exit {status}, stderr {err.strip()!r}")
    failures += not ok

# A reader's output that is its input (also through a link) is refused before any work: one
# swapped -i/-o must not cost the recording
same = os.path.join(work, "same.data")
with open(same, "wb") as f:
    f.write(HEADER)
os.symlink(same, os.path.join(work, "same-link.data"))
for args, what in ((["flamegraph", "-i", same, "-o", same], "flamegraph"),
                   (["export", "-i", same, "-f", "folded", "-o",
                     os.path.join(work, "same-link.data")], "export"),
                   (["diff", same, sampled, "--svg", same], "diff --svg")):
    status, out, err = run(*args)
    lines = err_lines(err)
    ok = (status == 2 and len(lines) == 1
          and lines[0].startswith(f"hvprof: error: {what}: the output ")
          and "it would be overwritten" in lines[0] and open(same, "rb").read() == HEADER)
    print(f"{'ok' if ok else 'FAIL'}: {what}: output = input refused: exit {status}, "
          f"stderr {lines!r}")
    failures += not ok

# exec --attach where no VM could ever listen (a plain file, a missing directory): at once
plain = os.path.join(work, "plain-file")
open(plain, "wb").close()
for path, why in ((plain, "not a control socket"),
                  ("/nonexistent-dir/vm.sock", "No such file or directory")):
    status, out, err = run("exec", "--attach", path, "--wait", "30", "--", "true")
    ok = status == 255 and why in err and "waiting for a VM" not in err
    print(f"{'ok' if ok else 'FAIL'}: exec --attach {path}: fails at once: exit {status}, "
          f"stderr {err.strip()!r}")
    failures += not ok

# no recording at all (the default hvprof.data here): the line says how to get one
r = subprocess.run([HVPROF, "report"], capture_output=True, text=True, timeout=60, cwd=work)
ok = (r.returncode == 3 and r.stderr.strip() == "hvprof: error: report: hvprof.data: No such "
      "file or directory (make one with 'hvprof record', or name one: '-i FILE' or FILE)")
print(f"{'ok' if ok else 'FAIL'}: report without a recording says how to get one: exit "
      f"{r.returncode}, stderr {r.stderr.strip()!r}")
failures += not ok

# what cannot be a kernel is said before anything else (here no /dev/kvm, or a VM, is needed)
empty_file = os.path.join(work, "empty-file")
open(empty_file, "wb").close()
for kernel, why in ((empty_file, "is empty, not a kernel image"),
                    (work, "is a directory, not a kernel image")):
    status, out, err = run("record", "--kernel", kernel, "-o", os.path.join(work, "k.data"))
    lines = err_lines(err)
    ok = (status == 3 and lines == [f"hvprof: error: record: kernel {kernel}: {why}"]
          and not os.path.exists(os.path.join(work, "k.data")))
    print(f"{'ok' if ok else 'FAIL'}: record --kernel {os.path.basename(kernel)}: said first: "
          f"exit {status}, stderr {lines!r}")
    failures += not ok

# A guest that cannot start says why in one line, naming the command: without /dev/kvm the
# VMM's line, which says what to load; with it the kernel loader's (junk is not a bzImage)
status, out, err = run("run", "--kernel", junk_kernel)
lines = [l for l in err_lines(err) if l.startswith("hvprof: error:")]  # a PVM host adds a note
no_kvm = not os.path.exists("/dev/kvm")
ok = (status != 0 and len(lines) == 1 and lines[0].startswith("hvprof: error: run: ")
      and (not no_kvm or "cannot open /dev/kvm: No such file or directory (no KVM on this "
                         "host: load kvm_intel, kvm_amd or kvm_pvm" in lines[0]))
print(f"{'ok' if ok else 'FAIL'}: run --kernel junk ({'no ' if no_kvm else ''}/dev/kvm): one "
      f"error line: exit {status}, stderr {lines!r}")
failures += not ok

# hvprof help [COMMAND]
for args, want in ((["help"], "usage: hvprof [-v|-vv|-q] COMMAND"),
                   (["help", "help"], "usage: hvprof [-v|-vv|-q] COMMAND"),
                   (["help", "diff"], "usage: hvprof diff"),
                   (["help", "record", "--foo"], "usage: hvprof record")):
    status, out, err = run(*args)
    ok = status == 0 and out.startswith(want) and not err
    print(f"{'ok' if ok else 'FAIL'}: hvprof {' '.join(args)}: exit {status}, "
          f"stdout {out[:40]!r}")
    failures += not ok

# An existing empty file (here mode 600, as mktemp makes them) is written in place; a run that
# never starts leaves it empty, with its mode
empty_out = os.path.join(keep, "e.data")
open(empty_out, "wb").close()
os.chmod(empty_out, 0o600)
status, out, err = run("record", "--kernel", junk_kernel, "-o", empty_out)
st = os.stat(empty_out)
ok = status != 0 and st.st_size == 0 and (st.st_mode & 0o777) == 0o600
print(f"{'ok' if ok else 'FAIL'}: an empty -o file stays empty after a run that never started: "
      f"exit {status}, size {st.st_size}, mode {oct(st.st_mode & 0o777)}")
failures += not ok
os.unlink(empty_out)

# A directory where FILE.old would go: said before any guest starts (it would refuse the move)
os.mkdir(os.path.join(keep, "dd.data.old"))
with open(os.path.join(keep, "dd.data"), "wb") as f:
    f.write(b"GOOD")
status, out, err = run("record", "--kernel", junk_kernel, "-o", os.path.join(keep, "dd.data"))
lines = err_lines(err)
ok = (status == 3 and len(lines) == 1 and "cannot keep the previous" in lines[0]
      and "dd.data.old: Is a directory" in lines[0]
      and open(os.path.join(keep, "dd.data"), "rb").read() == b"GOOD"
      and not [n for n in os.listdir(keep) if "partial" in n])
print(f"{'ok' if ok else 'FAIL'}: a directory at FILE.old is said first: exit {status}, "
      f"stderr {lines!r}")
failures += not ok

print(f"{failures} failure(s)" if failures else "all passed")
sys.exit(1 if failures else 0)
