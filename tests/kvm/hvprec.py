# SPDX-License-Identifier: MIT
"""A minimal reader of hvprof recordings (docs/recording-format.md) for tests: it checks the
frame and CRC of every record and returns the ones the tests look at."""
import struct
import zlib

MAGIC = b"HVPROF\x00\x01"


def read(path):
    data = open(path, "rb").read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: bad magic")
    header_size = struct.unpack_from("<I", data, 12)[0]
    off = header_size
    out = {"samples": [], "user_stacks": {}, "counters": {}, "meta": {}, "threads": {},
           "mappings": [], "user_regs": [], "events": []}
    prev = None  # (type, record dict) of the record before, for USER_REGS
    while off + 12 <= len(data):
        rtype, size = struct.unpack_from("<II", data, off)
        if size < 12 or off + size > len(data):
            raise ValueError(f"{path}: bad record at {off}")
        crc = struct.unpack_from("<I", data, off + size - 4)[0]
        if zlib.crc32(data[off:off + size - 4]) != crc:
            raise ValueError(f"{path}: CRC mismatch at {off}")
        p = off + 8
        cur = None
        if rtype == 1:
            kl, vl = struct.unpack_from("<II", data, p)
            key = data[p + 8:p + 8 + kl].decode()
            out["meta"][key] = data[p + 8 + kl:p + 8 + kl + vl].decode(errors="replace")
        elif rtype == 2:
            (t, vcpu, cpl, flags, kstop, ustop, rip, cr3, task, pid, tgid, cookie, period,
             nk, nu) = struct.unpack_from("<QIBBBBQQQiiQQHH", data, p)
            ips = struct.unpack_from(f"<{nk + nu}Q", data, p + 72)
            cur = dict(t=t, vcpu=vcpu, cpl=cpl, flags=flags, kstop=kstop, ustop=ustop, rip=rip,
                       pid=pid, tgid=tgid, cookie=cookie, period=period, kips=ips[:nk],
                       uips=ips[nk:])
            out["samples"].append(cur)
        elif rtype == 3:
            t, task, pid, tgid, kthread = struct.unpack_from("<QQiiB", data, p)
            comm = data[p + 28:p + 44].split(b"\0")[0].decode(errors="replace")
            out["threads"][pid] = dict(kthread=kthread, comm=comm, tgid=tgid)
        elif rtype == 5:
            t, cookie, pid, vcpu, stop, nu = struct.unpack_from("<QQiIBxH", data, p)
            ips = struct.unpack_from(f"<{nu}Q", data, p + 32)
            cur = dict(t=t, cookie=cookie, pid=pid, vcpu=vcpu, stop=stop, uips=ips)
            out["user_stacks"][cookie] = cur
        elif rtype == 9:
            # USER_REGS: joined to the record just before it (prev_type, prev)
            t, cookie, pid, vcpu, follows, nregs, slen, ssize = struct.unpack_from(
                "<QQiIBBxxII", data, p)
            regs = struct.unpack_from(f"<{nregs}Q", data, p + 40)
            out["user_regs"].append(dict(
                t=t, cookie=cookie, pid=pid, vcpu=vcpu, follows=follows, regs=regs,
                stack_len=slen, stack_size=ssize, stack=data[p + 176:p + 176 + slen],
                size=size, prev_type=prev[0] if prev else 0, prev=prev[1] if prev else None))
        elif rtype == 8:
            (t, tgid, index, count, start, end, pgoff, ino, dev, prot,
             bl) = struct.unpack_from("<QiHHQQQQIIB", data, p)
            build_id = data[p + 60:p + 60 + min(bl, 20)].hex()
            pl = struct.unpack_from("<I", data, p + 80)[0]
            path = data[p + 84:p + 84 + pl].decode(errors="replace")
            out["mappings"].append(dict(tgid=tgid, index=index, count=count, start=start,
                                        end=end, pgoff=pgoff, ino=ino, dev=dev, prot=prot,
                                        build_id=build_id, path=path))
        elif rtype == 10:
            # EVENT: kind 1 init, 2 workload start, 3 workload end (value: status), 256
            # sampling started (record --from)
            t, kind, value = struct.unpack_from("<QIi", data, p)
            out["events"].append(dict(t=t, kind=kind, value=value))
        elif rtype == 7:
            # END: reason (7 detached), the guest's exit status
            out["end"] = struct.unpack_from("<Ii", data, p)
        elif rtype == 6:
            value, nl = struct.unpack_from("<QI", data, p)
            out["counters"][data[p + 12:p + 12 + nl].decode()] = value
        prev = (rtype, cur)
        off += size
    return out


EVENT_INIT, EVENT_WORKLOAD_START, EVENT_WORKLOAD_END, EVENT_SAMPLING_START = 1, 2, 3, 256


def workload_window(rec):
    """(start_ns, end_ns or None, status or None) of the first workload window, or None."""
    start = next((e["t"] for e in rec["events"] if e["kind"] == EVENT_WORKLOAD_START), None)
    if start is None:
        return None
    end = next((e for e in rec["events"]
                if e["kind"] == EVENT_WORKLOAD_END and e["t"] >= start), None)
    return (start, end["t"] if end else None, end["value"] if end else None)
