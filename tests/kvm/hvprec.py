# SPDX-License-Identifier: MIT
"""A minimal reader of hvprof recordings (docs/recording-format.md) for tests: it checks the
frame and CRC of every record (version 1) or block (version 2) and returns the records the tests
look at."""
import struct
import zlib

MAGIC = b"HVPROF\x00\x01"
BLOCK_TAG = b"BLCK"


class Damaged(ValueError):
    """The recording is damaged at .offset; the records before it were intact."""

    def __init__(self, offset, why):
        super().__init__(f"offset {offset}: {why}")
        self.offset = offset


def records(data):
    """Yield (offset, type, payload offset, payload size, record size) of each record of the recording bytes
    @data, in file order, through either version's framing; raise Damaged at the first damage
    (after yielding every intact record before it)."""
    if data[:8] != MAGIC:
        raise Damaged(0, "bad magic")
    version, header_size = struct.unpack_from("<II", data, 8)
    off = header_size
    if version == 1:
        while off < len(data):
            if off + 12 > len(data):
                raise Damaged(off, "truncated record header")
            rtype, size = struct.unpack_from("<II", data, off)
            if size < 12 or off + size > len(data):
                raise Damaged(off, f"bad record size {size}")
            if zlib.crc32(data[off:off + size - 4]) != struct.unpack_from("<I", data,
                                                                          off + size - 4)[0]:
                raise Damaged(off, "CRC mismatch")
            yield off, rtype, off + 8, size - 12, size
            off += size
        return
    while off < len(data):
        if off + 16 > len(data):
            raise Damaged(off, "truncated block header")
        tag, size, nrec, crc = struct.unpack_from("<4sIII", data, off)
        if tag != BLOCK_TAG or size < 24 or off + size > len(data):
            raise Damaged(off, f"bad block (tag {tag!r}, size {size})")
        if zlib.crc32(data[off + 16:off + size], zlib.crc32(data[off:off + 12])) != crc:
            raise Damaged(off, "block CRC mismatch")
        p, end = off + 16, off + size
        for _ in range(nrec):
            rtype, rsize = struct.unpack_from("<II", data, p)
            if rsize < 8 or p + rsize > end:
                raise Damaged(p, f"bad record size {rsize} in the block at {off}")
            yield p, rtype, p + 8, rsize - 8, rsize
            p += rsize
        if p != end:
            raise Damaged(p, f"the block at {off} does not end after its {nrec} records")
        off = end


def read(path):
    data = open(path, "rb").read()
    out = {"samples": [], "user_stacks": {}, "counters": {}, "meta": {}, "threads": {},
           "mappings": [], "user_regs": [], "events": [], "thread_history": {}}
    prev = None  # (type, record dict) of the record before, for USER_REGS
    try:
        recs = list(records(data))
    except Damaged as e:
        raise ValueError(f"{path}: {e}") from None
    for off, rtype, p, plen, size in recs:
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
            out["thread_history"].setdefault(pid, []).append((t, comm))
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
    return out


def comm_at(rec, pid, t):
    """The comm of thread pid at time t (ns): that of its last THREAD record up to t, or its
    first record's (a THREAD record follows the first sample that shows the thread). A forked
    child keeps its parent's comm until it execs: out["threads"] holds only the last one."""
    hist = rec["thread_history"].get(pid)
    if not hist:
        return None
    comm = hist[0][1]
    for ht, hc in hist:
        if ht > t:
            break
        comm = hc
    return comm


EVENT_INIT, EVENT_WORKLOAD_START, EVENT_WORKLOAD_END, EVENT_SAMPLING_START = 1, 2, 3, 256


def workload_window(rec):
    """(start_ns, end_ns or None, status or None) of the first workload window, or None."""
    start = next((e["t"] for e in rec["events"] if e["kind"] == EVENT_WORKLOAD_START), None)
    if start is None:
        return None
    end = next((e for e in rec["events"]
                if e["kind"] == EVENT_WORKLOAD_END and e["t"] >= start), None)
    return (start, end["t"] if end else None, end["value"] if end else None)
