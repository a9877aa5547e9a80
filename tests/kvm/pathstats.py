# SPDX-License-Identifier: MIT
"""Ground-truth statistics of the hvprof-paths workload (images/workloads/hvprof-paths.c) from a
recording's folded stacks, shared by the integration tests that boot it."""
import bisect
import subprocess


def folded(hvprof, data):
    """The recording's folded stacks: [(frames, count)]."""
    r = subprocess.run([hvprof, "flamegraph", "-i", data, "--format", "folded"],
                       capture_output=True, text=True, timeout=120, check=True)
    out = []
    for line in r.stdout.splitlines():
        stack, _, count = line.rpartition(" ")
        out.append((stack.split(";"), int(count)))
    return out


def paths(stacks):
    """The mix phase's kernel samples: how many are getppid's, how many of those name their
    user call path, and the alpha/beta split."""
    mix_k = [(s, c) for s, c in stacks if s[0] == "hvprof-paths" and s[-1].endswith("_[k]")]
    getppid = [(s, c) for s, c in mix_k if any(f.startswith("__x64_sys_getppid") for f in s)]
    in_call = [(s, c) for s, c in mix_k if "make_the_call" in s]
    alpha = sum(c for s, c in in_call if "path_alpha" in s and "alpha_middle" in s)
    beta = sum(c for s, c in in_call if "path_beta" in s and "beta_middle" in s)
    named = sum(c for s, c in getppid
                if "make_the_call" in s and ("path_alpha" in s or "path_beta" in s))
    lost = sum(c for s, c in mix_k if any(f.startswith("[user stack lost") for f in s))
    return dict(kernel=sum(c for _, c in mix_k), getppid=sum(c for _, c in getppid),
                named=named, alpha=alpha, beta=beta, lost=lost,
                share=100.0 * alpha / (alpha + beta) if alpha + beta else None)


def threads(stacks):
    """The threads phase: samples showing the other thread's path, and the right one."""
    wrong = sum(c for s, c in stacks if (s[0] == "paths-alpha" and "path_beta" in s)
                or (s[0] == "paths-beta" and "path_alpha" in s))
    mine = sum(c for s, c in stacks if (s[0] == "paths-alpha" and "path_alpha" in s)
               or (s[0] == "paths-beta" and "path_beta" in s))
    return wrong, mine


def kernel_symbols(system_map):
    """A System.map's text symbols: (sorted start addresses, names)."""
    syms = sorted((int(a, 16), n) for a, t, n in (l.split()[:3] for l in open(system_map))
                  if t in "Tt")
    return [a for a, _ in syms], [n for _, n in syms]


def cross_check(rec, system_map):
    """--callchain-mode both: each kernel sample whose deferred walk was made (USER_STACK not
    lost) beside its eager one, as (sample, same user stack?, made from a system call?) — a
    system call's user stack cannot change between the sample and the return (a page fault's
    may: the fault maps the memory the walk reads). @system_map None (a stock kernel has none):
    no sample is known to be a system call's."""
    starts, names = kernel_symbols(system_map) if system_map else ([], [])

    def kname(addr):
        i = bisect.bisect_right(starts, addr) - 1
        return names[i] if i >= 0 else ""

    out = []
    for s in rec["samples"]:
        if s["ustop"] == 5 and s["cookie"] and s["uips"]:
            us = rec["user_stacks"].get(s["cookie"])
            if us is None or us["stop"] == 6 or not us["uips"]:
                continue
            out.append((s, tuple(s["uips"]) == tuple(us["uips"]),
                        any(kname(a) == "do_syscall_64" for a in s["kips"])))
    return out
