#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`record --attach` and its recording file, against a stand-in for a `run --control` VM (a Unix
socket speaking docs/control-protocol.md): a refused ATTACH leaves the recording already at the
name, and its .old, as they were, with no file of its own left behind; an accepted one puts the
file the VM wrote at the name and keeps the earlier recording as .old; a VM that goes away
without answering, having written nothing, leaves both as they were and its file under its
temporary name, said (it may hold the fd still: nothing is removed under it).

usage: test_attach_output.py HVPROF
"""
import os
import socket
import subprocess
import sys
import tempfile
import threading

HVPROF = sys.argv[1]
work = tempfile.mkdtemp(prefix="hvprof-attach-")
failures = 0


def read_line(conn, fds):
    """One request line; fds passed with it (SCM_RIGHTS) are added to @fds."""
    data = b""
    while not data.endswith(b"\n"):
        msg, anc, _, _ = conn.recvmsg(1, socket.CMSG_SPACE(16))
        if not msg:
            return None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(int.from_bytes(payload[i:i + 4], "little")
                           for i in range(0, len(payload) - len(payload) % 4, 4))
        data += msg
    return data.decode()


def fake_vm(server, mode, log):
    conn, _ = server.accept()
    fds = []
    try:
        while True:
            line = read_line(conn, fds)
            if line is None:
                return
            log.append(line.strip())
            if line.startswith("HELLO"):
                conn.sendall(b"OK version=1\n")
            elif line.startswith("ATTACH") and mode == "gone":
                return
            elif line.startswith("ATTACH") and mode == "refused":
                conn.sendall(b"ERR EBUSY one window at a time\n")
            elif line.startswith("ATTACH"):
                os.write(fds[-1], b"RECORDED")  # the VM writes the recording
                conn.sendall(b"OK window=1 freq=1000 counter=cpu-clock\n")
            elif line.startswith("DETACH"):
                conn.sendall(b"DONE reason=detached status=0 samples=0 marks_dropped=0 "
                             b"vcpus_late=0\n")
                return
    finally:
        for fd in fds:
            os.close(fd)
        conn.close()


def attempt(name):
    global failures
    d = os.path.join(work, name)
    os.mkdir(d)
    for n, text in (("r.data", b"GOOD"), ("r.data.old", b"OLDER")):
        with open(os.path.join(d, n), "wb") as f:
            f.write(text)
    sock = os.path.join(d, "vm.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock)
    server.listen(1)
    log = []
    t = threading.Thread(target=fake_vm, args=(server, name, log), daemon=True)
    t.start()
    r = subprocess.run([HVPROF, "record", "--attach", sock, "--duration", "1", "-o",
                        os.path.join(d, "r.data")], capture_output=True, text=True, timeout=60)
    t.join(10)
    server.close()
    os.unlink(sock)
    files = {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))}
    want = ({"r.data": b"RECORDED", "r.data.old": b"GOOD"} if name == "accepted"
            else {"r.data": b"GOOD", "r.data.old": b"OLDER"})
    partial = [n for n in files if ".partial-" in n]
    if name == "gone":  # its file stays, empty, under the name the message gives
        ok = (len(partial) == 1 and files.pop(partial[0]) == b""
              and f"the recording stays {os.path.join(d, partial[0])}" in r.stderr)
    else:
        ok = not partial
    ok = (ok and r.returncode == (0 if name == "accepted" else 3) and files == want
          and any(l.startswith("ATTACH") for l in log))
    print(f"{'ok' if ok else 'FAIL'}: {name}: exit {r.returncode}, files {files!r}, "
          f"requests {log!r}, stderr {r.stderr.strip()!r}")
    failures += not ok


attempt("refused")
attempt("accepted")
attempt("gone")
print(f"{failures} failure(s)" if failures else "all passed")
sys.exit(1 if failures else 0)
