#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A stackcollapse-perf.pl-compatible parser of `perf script` text (our own code, following the
rules of FlameGraph's stackcollapse-perf.pl): it is the consumer that checks hvprof's
perf-script export. Rules mirrored:
  - event line: /^(\\S.+?)\\s+(\\d+)\\/*(\\d+)*\\s+/ gives comm (then spaces become '_'), pid/tid;
    /:\\s*(\\d+)*\\s+(\\S+):\\s*$/ gives the period and event; the period counts (default 1);
    only the first event name seen is kept (as its event filter);
  - frame line: /^\\s*(\\w+)\\s*(.+) \\((\\S*)\\)/ gives pc, function, module; "+0x..." is
    stripped from the function; "[unknown]" becomes "[MODULE-BASENAME]" when the module is
    known; tidy: ';' -> ':', '<' '>' '"' "'" dropped, everything from the first '(' dropped
    (unless it looks like a Go method ".(...)."); with --kernel, kernel modules
    ([kernel.kallsyms], vmlinux) add "_[k]";
  - a blank line ends a sample: "comm;outer;...;inner" += period.
usage: stackcollapse_perf.py [--kernel] [FILE]  (prints folded stacks sorted by name)
"""
import re
import sys

EVENT = re.compile(r"^(\S.+?)\s+(\d+)/*(\d+)*\s+")
PERIOD = re.compile(r":\s*(\d+)*\s+(\S+):\s*$")
FRAME = re.compile(r"^\s*(\w+)\s*(.+) \((\S*)\)")


def tidy(func):
    func = func.replace(";", ":")
    for c in "<>":
        func = func.replace(c, "")
    if not re.search(r"\.\(.*\)\.", func):
        func = re.sub(r"\(.*", "", func)
    for c in "\"'":
        func = func.replace(c, "")
    return func


def collapse(lines, annotate_kernel=False):
    collapsed = {}
    stack, pname, period, event_filter, skip = [], None, 1, None, False
    for line in lines:
        line = line.rstrip("\n")
        if line.startswith("#"):
            continue
        if line == "":
            if pname is not None and not skip and stack:
                key = ";".join([pname] + stack)
                collapsed[key] = collapsed.get(key, 0) + period
            stack, pname, period, skip = [], None, 1, False
            continue
        m = EVENT.match(line) if pname is None else None
        if m:
            pname = m.group(1).replace(" ", "_")
            pm = PERIOD.search(line)
            period = 1
            if pm:
                period = int(pm.group(1)) if pm.group(1) else 1
                if event_filter is None:
                    event_filter = pm.group(2)
                elif pm.group(2) != event_filter:
                    skip = True
            continue
        m = FRAME.match(line)
        if m:
            pc, func, mod = m.groups()
            func = re.sub(r"\+0x[\da-f]+$", "", func)
            if func == "[unknown]" and mod != "[unknown]":
                func = "[" + mod.rsplit("/", 1)[-1] + "]"
            func = tidy(func)
            if annotate_kernel and (mod == "[kernel.kallsyms]" or mod.endswith("vmlinux")):
                func += "_[k]"
            stack.insert(0, func)
            continue
        print(f"Unrecognized line: {line}", file=sys.stderr)
    if pname is not None and not skip and stack:  # no blank line after the last sample
        key = ";".join([pname] + stack)
        collapsed[key] = collapsed.get(key, 0) + period
    return collapsed


def main():
    args = sys.argv[1:]
    kernel = "--kernel" in args
    args = [a for a in args if a != "--kernel"]
    f = open(args[0]) if args else sys.stdin
    for k, v in sorted(collapse(f, kernel).items()):
        print(f"{k} {v}")


if __name__ == "__main__":
    main()
