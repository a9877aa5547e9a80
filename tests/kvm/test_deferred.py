#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Integration test of deferred user callchains (issue 4), one boot of the default image with
--callchain-mode both (deferred, plus the eager walk kept in each sample as a cross-check):
- kernel samples of getppid made through two call paths (3:1 by count) name the right path
  for >= 99% of them and split 75:25 within 5 points;
- deferred and eager user stacks are identical on >= 99.9% of the kernel samples that have both;
- two threads with one path each: no sample of one thread shows the other's path;
- kernel threads never get a user stack; nothing stays armed after the run; every mark is
  accounted for;
- kernel samples of an exiting process (exit_mmap) carry the user path or a lost frame.

usage: test_deferred.py HVPROF
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hvprec  # noqa: E402
import hvtest  # noqa: E402
import pathstats  # noqa: E402
from hvtest import image_dir  # noqa: E402

HVPROF = sys.argv[1]
hvtest.require_vm()

work = tempfile.mkdtemp(prefix="hvprof-deferred-")
data = os.path.join(work, "paths.data")
cmd = [HVPROF, "record", "-F", "1000", "-o", data, "--callchain-mode", "both",
       "--run", "/bin/hvprof-paths mix 6; /bin/hvprof-paths threads 3", "--duration", "240"]
print("running:", " ".join(cmd), flush=True)
rec = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
print(rec.stdout)
print(rec.stderr)
checks = hvtest.Checks()
check = checks.check


check("record exits 0 and the guest reports status 0",
      rec.returncode == 0 and "guest exited with status 0" in rec.stderr, f"{rec.returncode}")
truth = re.findall(r"hvprof-truth: paths alpha=(\d+) beta=(\d+)", rec.stdout)
check("both workload phases printed their truth", len(truth) == 2, str(truth))

stacks = pathstats.folded(HVPROF, data)
st = pathstats.paths(stacks)
check("getppid kernel samples name their user call path (>= 99%)",
      st["getppid"] >= 50 and st["named"] >= 0.99 * st["getppid"],
      f"{st['named']}/{st['getppid']}")
if st["share"] is not None:
    check("kernel samples split 75:25 between path_alpha and path_beta (within 5 points)",
          abs(st["share"] - 75.0) <= 5.0,
          f"alpha {st['share']:.1f}% ({st['alpha']}+{st['beta']} samples)")
else:
    check("kernel samples on the two paths", False, "none")
check("few kernel samples of the workload lost their user stack (< 2%)",
      st["lost"] <= 0.02 * max(1, st["kernel"]), f"{st['lost']} lost")

# A process that exits (exit_group -> exit_mmap tears its user memory down): its kernel samples
# still show the user path that made the system call, or a visible lost frame (issue 12).
exiting = [(f, c) for f, c in stacks if f[0] in {"hvprof-paths", "paths-alpha", "paths-beta"}
           and "exit_mmap_[k]" in f]
exiting_n = sum(c for _, c in exiting)
exiting_user = sum(c for f, c in exiting if len(f) > 1 and not f[1].endswith("_[k]"))
check("kernel samples of an exiting workload process carry a user path or a lost frame",
      exiting_n > 0 and exiting_user == exiting_n, f"{exiting_user}/{exiting_n}")

# Threads: each thread uses only its own path.
wrong, mine = pathstats.threads(stacks)
checks.check_threads("threads", wrong, mine)

# Raw records: the cross-check, kernel threads, counters.
rec_data = hvprec.read(data)
# Cross-check, on the workload's system-call samples (kernel callchain through do_syscall_64):
# there the user stack cannot change between the sample and the return. Page-fault entries are
# reported but not held to the bound: the fault itself maps the memory the walk reads.
workload = {"hvprof-paths", "paths-alpha", "paths-beta"}
both = pathstats.cross_check(rec_data, os.path.join(image_dir(), "System.map"))
all_pairs, all_same = len(both), sum(agree for _, agree, _ in both)
mine = [agree for s, agree, sysc in both
        if sysc and rec_data["threads"].get(s["pid"], {}).get("comm", "") in workload]
pairs, same = len(mine), sum(mine)
print(f"cross-check over all kernel samples with both walks: {all_same}/{all_pairs} identical")
checks.check_bp("deferred and eager user stacks agree on >= 99.9% of the workload's syscall "
                "samples",
      pairs >= 100 and same >= 0.999 * pairs, f"{same}/{pairs} identical")
kthread_user = sum(1 for s in rec_data["samples"] if s["flags"] & 2 and (s["uips"] or s["cookie"]))
kthread_total = sum(1 for s in rec_data["samples"] if s["flags"] & 2)
check("kernel threads never get a user stack or a cookie", kthread_total > 0 and kthread_user == 0,
      f"{kthread_user} of {kthread_total}")
c = rec_data["counters"]
print("counters:", {k: v for k, v in c.items() if v and not k.startswith("exits_")})
checks.check_window_truth(c)
check("no breakpoint armed after the run", c.get("traps_armed_at_end", 1) == 0)
checks.check_bp_delivery(c)
ended = sum(c.get(k, 0) for k in ("resolved_at_return", "resolved_from_ptregs", "resolved_stale",
                                    "resolved_exiting", "dropped_exited", "dropped_no_regs"))
check("every mark is resolved or dropped, none silently", c.get("marks", 0) > 0
      and ended == c.get("marks"), f"marks {c.get('marks')} vs accounted {ended}")
checks.check_bp("most marks resolve at the return to user (>= 90%)",
      c.get("resolved_at_return", 0) >= 0.9 * max(1, c.get("marks", 0)),
      f"{c.get('resolved_at_return')} of {c.get('marks')}")
if c.get("loop_hits"):
    # guest-visible marks: the exit-work loop's breakpoint stays armed across marks (arming and
    # disarming it around each would take two KVM_SET_GUEST_DEBUG per mark; 2 969 for 8 691
    # marks when this was set, ~15% of them trapped at sysretq/iretq, which still arm per mark)
    check("fewer KVM_SET_GUEST_DEBUG ioctls than marks (the loop stays armed)",
          c.get("debug_sets", 0) < c.get("marks", 0),
          f"{c.get('debug_sets')} for {c.get('marks')} marks, {c.get('marks_trapped')} trapped")
    # samples in the exit tail (the thread may have read its flags for the last time) resolve
    # their mark at once from pt_regs: the sysretq/iretq trap is left for flags that could not
    # be set (2 554 of 7 949 marks were trapped before, each two KVM_SET_GUEST_DEBUG); the
    # agreement of both walks above is what shows those resolutions right
    check("exit-tail marks are resolved at their sample, none trapped but failed flags",
          c.get("marks_resolved_in_tail", 0) > 0
          and c.get("marks_trapped", 0) <= c.get("flag_set_failed", 0),
          f"{c.get('marks_resolved_in_tail')} resolved in the tail, {c.get('marks_trapped')} "
          f"trapped, {c.get('flag_set_failed')} flags not set")
    # the flagged tasks read back from guest RAM at the end (sampler/flagscan.c): the kernel
    # cleared the flag of every one whose return hvprof saw (hvprof never clears it) but for
    # task work it queued itself; one with no return seen is still in the kernel (it clears
    # the flag at its return). At most one read between a loop hit and its clear (the run
    # ended there) may show as "other". And all along: a new mark's flag on a task whose
    # return was seen found the earlier one cleared (set: the kernel's own task work)
    seen_c, seen_w = c.get("flags_seen_clear", 0), c.get("flags_seen_kernel", 0)
    seen_s = c.get("flags_seen_set", 0)
    print(f"new flags after a return seen: found clear {seen_c}, set by the kernel for itself "
          f"{seen_w}, set otherwise {seen_s}")
    # (nested SVM: 2 236 clear, 18 with task work, 0 otherwise)
    check("a new mark's flag after a return seen finds the earlier one cleared (>= 98%; set "
          "for no reason the guest shows <= 1%)",
          seen_c >= 100 and seen_w + seen_s <= 0.02 * (seen_c + seen_w + seen_s)
          and seen_s <= 0.01 * (seen_c + seen_w + seen_s),
          f"{seen_c} clear, {seen_w} set by the kernel for itself, {seen_s} set otherwise")
    check("flags read back at the end: clear, or set for a reason the guest shows",
          c.get("flag_scans") == 1 and c.get("flag_scan_tasks", 0) >= 1
          and c.get("flag_scan_clear", 0) >= 1 and c.get("flag_scan_set_other", 2) <= 1,
          f"{c.get('flag_scan_tasks')} tasks: {c.get('flag_scan_clear')} clear, "
          f"{c.get('flag_scan_set_unreturned')} set with no return seen, "
          f"{c.get('flag_scan_set_kernel')} set by the kernel for itself, "
          f"{c.get('flag_scan_set_other')} set otherwise, {c.get('flag_scan_gone')} gone")
    # the loop's hits that found no mark, told apart: none pending (the disarm), or another
    # thread's kernel-set flag while marks were pending; the sysretq/iretq trap's are the rest
    loop_nm = c.get("loop_hits_idle", 0) + c.get("loop_hits_unmarked", 0)
    check("the loop's no-mark hits are counted by kind, within traps_no_mark",
          0 < c.get("loop_hits_idle", 0) and loop_nm <= c.get("traps_no_mark", 0)
          and loop_nm <= c["loop_hits"],
          f"idle {c.get('loop_hits_idle')} + unmarked {c.get('loop_hits_unmarked')} of "
          f"{c.get('traps_no_mark')} no-mark, {c['loop_hits']} loop hits")
    # those of a thread without a mark while others were pending, by the flag ledger: nearly
    # all are the kernel's own flag (nested SVM, aef58b6: 1 234 of 1 239 with task work
    # queued, ____fput: the workload closes files), not hvprof's acting late or left
    nm_k, nm_o = c.get("no_mark_kernel", 0), c.get("no_mark_other", 0)
    nm_u, nm_l = c.get("no_mark_unflagged", 0), c.get("no_mark_flagged_late", 0)
    # hvprof's own flags acting late or unexplained are judged against the flags hvprof set,
    # not against the kernel's: a workload that queues more task work must not loosen the
    # bound (native PVM, 69d9105: 3 late and 5 unexplained of 15 902 flags set, 47 the
    # kernel's, which the bound of 2% of the no-mark hits + 5 taken before refused)
    flagged = c.get("marks_flagged", 0)
    check("hits without a mark while others were pending are the kernel's own flag (hvprof's "
          "late or unexplained <= 0.1% of its flags + 5)",
          nm_k + nm_o + nm_u + nm_l <= c.get("traps_no_mark", 0)
          and nm_o + nm_l <= 0.001 * flagged + 5,
          f"{nm_k} task work or rseq, {nm_u} never flagged, {nm_l} flagged with no return "
          f"seen, {nm_o} returned and set for no reason the guest shows; {flagged} flags set")
    if os.path.exists("/sys/module/kvm_pvm"):
        # RF ignored: hvprof completes the loop's clear, through the sync-regs area. The write
        # is counted when it is handed to the next KVM_RUN, and goes by ioctl when the last
        # exit left no sync-regs copy: a hit as the VM stops, or after such an exit, is not
        # counted here (an ASan run: 5 293 writes for 5 294 hits). A per-hit ioctl would
        # fail this by thousands.
        vcpus = int(rec_data["meta"].get("vcpus", "1"))
        check("the loop's clear is completed without a KVM_SET_REGS ioctl (sync regs)",
              c.get("regs_sync_writes", 0) >= c["loop_hits"] - max(vcpus, c["loop_hits"] // 200),
              f"{c.get('regs_sync_writes')} sync-regs writes, {c['loop_hits']} loop hits")
# The mark walks at once only where the stack may go before the return (execve, exit,
# rt_sigreturn, interrupt and exception entries...): this workload's marks are mostly getppid
# system calls, walked once, by their return (859 of 8 319 walked at the mark when this was set;
# with every entry walked at the mark, 4 688 of 8 301: the rest are marks made in the entry
# window, which have no registers to walk yet). A mark whose return showed other registers
# and no signal frame loses its user part instead (0 and 2 in the CI runs that set this bound).
checks.check_bp("system-call marks are walked by their return, not at the mark (< 30% walked "
                "at the mark)",
      0 < c.get("marks_walked_at_mark", 0) < 0.3 * c.get("marks", 0),
      f"{c.get('marks_walked_at_mark')} of {c.get('marks')} marks")
checks.check_bp("marks that lost their walk are rare (<= 0.5%)",
      c.get("marks_walk_lost", 0) <= 0.005 * c.get("marks", 0),
      f"{c.get('marks_walk_lost', 0)} of {c.get('marks')} marks")
# A mark whose thread was sampled in a later kernel entry with other user registers counts a
# return no breakpoint saw (or registers rewritten inside the stay: signal delivery,
# rt_sigreturn). In nested SVM runs (1 vCPU, breakpoints stepped with RF) 120-213 of ~6 700
# marks (1.8-3.2%) before samples on a stepped breakpoint or in an interrupt taken on the loop's
# clear were resolved at once (tail_stepped_site); 2-5 after.
checks.check_bp("marks that outlived a return no breakpoint saw are rare (<= 0.5%)",
      c.get("returns_unseen", 0) <= 0.005 * c.get("marks", 0),
      f"{c.get('returns_unseen', 0)} of {c.get('marks')} marks, "
      f"{c.get('tail_stepped_site', 0)} samples on a stepped breakpoint")
# the workload (hvprof-paths: getppid loops) makes most of the run's marks, and its hits are
# counted apart from the boot's
checks.check_bp("the workload's trap hits are counted apart, most of the run's",
      c.get("traps_no_mark_in_workload", 0) <= c.get("traps_in_workload", 0)
      < c.get("traps_hit", 0) and c.get("traps_in_workload", 0) >= 0.5 * c.get("traps_hit", 0),
      f"{c.get('traps_no_mark_in_workload')} no-mark of {c.get('traps_in_workload')} in the "
      f"workload, {c.get('traps_hit')} in the run")
if c.get("traps_hit"):
    print(f"trap cost: {c.get('trap_ns_total', 0) / c['traps_hit'] / 1000:.1f} us of VMM time per hit")

checks.finish()
