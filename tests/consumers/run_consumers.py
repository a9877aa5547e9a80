#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Real consumers of hvprof's exports, on a synthetic recording (gen-recording, no VM).

usage: run_consumers.py HVPROF GEN_RECORDING SYNTH_USER SYNTH_KERNEL SRCDIR TEST
TEST: speedscope | pprof | svg | perf-script | diff
Exit: 0 pass, 1 fail, 77 skip (the reason is printed: a consumer is not installed).
"""
import functools
import http.server
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET

HVPROF, GEN, SYNTH_USER, SYNTH_KERNEL, SRCDIR, TEST = sys.argv[1:7]
NODE_MODULES = os.path.join(SRCDIR, "node_modules")
CHROMIUM = os.environ.get("HVPROF_CHROMIUM", "/usr/bin/chromium")
PERIOD = 1000000
work = tempfile.mkdtemp(prefix="hvprof-consumers-")


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def run(*args, check=True, **kw):
    r = subprocess.run(list(args), capture_output=True, text=kw.pop("text", True), timeout=170, **kw)
    if check and r.returncode != 0:
        fail(f"{' '.join(map(str, args))} exited {r.returncode}: {r.stderr if isinstance(r.stderr, str) else r.stderr.decode(errors='replace')}")
    return r


def need_node(*pkgs):
    if not shutil.which("node"):
        skip("node is not installed (Debian package nodejs)")
    for p in pkgs:
        if not os.path.isfile(os.path.join(NODE_MODULES, p, "package.json")):
            skip(f"npm package {p} is not installed in {NODE_MODULES} (scripts/install-npm-deps.sh)")


def need_chromium():
    if not os.access(CHROMIUM, os.X_OK):
        skip(f"{CHROMIUM} not found (Debian package chromium)")


def node(script, *args):
    env = dict(os.environ, NODE_PATH=NODE_MODULES)
    r = run("node", os.path.join(SRCDIR, script), *args, check=False, env=env, cwd=SRCDIR)
    if r.returncode != 0:
        fail(f"node {script} exited {r.returncode}: {r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def recording(name, *extra):
    path = os.path.join(work, name)
    run(GEN, path, SYNTH_USER, SYNTH_KERNEL, "--period", str(PERIOD), *extra)
    return path


def export(rec, fmt, out):
    run(HVPROF, "export", "--format", fmt, "-i", rec, "-o", out)
    return out


def report_json(rec, *args):
    return json.loads(run(HVPROF, "report", "-i", rec, "--format", "json", *args).stdout)


def folded_dict(text):
    d = {}
    for line in text.splitlines():
        stack, count = line.rsplit(" ", 1)
        d[stack] = d.get(stack, 0) + int(count)
    return d


def serve(root):
    """A static server of @root on 127.0.0.1 (an ephemeral port), in a daemon thread."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass
    handler = functools.partial(Quiet, directory=root)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_speedscope():
    need_node("playwright-core", "speedscope")
    need_chromium()
    rec = recording("rec.data", "--samples", "20000", "--stacks", "300")
    site = os.path.join(work, "site")
    shutil.copytree(os.path.join(NODE_MODULES, "speedscope", "dist", "release"), site)
    export(rec, "speedscope", os.path.join(site, "profile.speedscope.json"))
    doc = json.load(open(os.path.join(site, "profile.speedscope.json")))
    if doc["profiles"][0]["type"] != "sampled" or not doc["shared"]["frames"]:
        fail("speedscope export: no sampled profile or no shared frames")
    # The frame speedscope must show first in the sandwich view (sorted by self time): the
    # heaviest self symbol of the report, the same weights (periods) as the export.
    rep = report_json(rec, "--sort", "sym", "--no-children")
    expected = rep["rows"][0]["sym"]
    srv = serve(site)
    try:
        base = f"http://127.0.0.1:{srv.server_address[1]}"
        url = f"{base}/index.html#profileURL={base}/profile.speedscope.json&view=sandwich"
        out = node("browser_check.mjs", "speedscope", url)
    finally:
        srv.shutdown()
    if out["dialogs"]:
        fail(f"speedscope showed an alert (import error): {out['dialogs']}")
    if out["errors"]:
        fail(f"speedscope page errors: {out['errors'][:3]}")
    if "Something went wrong" in out["body"]:
        fail("speedscope shows its error screen")
    if not out["title"].endswith(" - speedscope") or "hvprof" not in out["title"]:
        fail(f"unexpected title {out['title']!r}")
    lines = [l.strip() for l in out["body"].splitlines() if l.strip()]
    # the sandwich table's rows: "Total", "Self", ... then per row: total, self, name
    names = [l for l in lines if l.startswith(("u_fn_", "k_fn_", "app", "db", "kworker"))]
    if not names:
        fail(f"no frame names in the sandwich view: {lines[:40]}")
    if names[0] != expected:
        fail(f"speedscope's top frame is {names[0]!r}, the report's is {expected!r}")
    print(f"ok: speedscope imported the export ({out['title']}), top frame {names[0]}")


def build_id_of(path):
    """The GNU build-id of an ELF64 little-endian file (hex), or ''."""
    data = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3a)
    for i in range(shnum):
        sh = shoff + i * shentsize
        stype, = struct.unpack_from("<I", data, sh + 4)
        off, size = struct.unpack_from("<QQ", data, sh + 0x18)
        if stype != 7:  # SHT_NOTE
            continue
        pos = off
        while pos + 12 <= off + size:
            namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
            name = data[pos + 12:pos + 12 + namesz]
            desc_off = pos + 12 + ((namesz + 3) & ~3)
            if ntype == 3 and name.rstrip(b"\0") == b"GNU":
                return data[desc_off:desc_off + descsz].hex()
            pos = desc_off + ((descsz + 3) & ~3)
    return ""


def test_pprof():
    need_node("pprof-format")
    rec = recording("rec.data", "--samples", "20000", "--stacks", "300")
    out = export(rec, "pprof", os.path.join(work, "profile.pb.gz"))
    got = node("pprof_decode.mjs", out)
    rep = report_json(rec, "--sort", "sym", "--no-children")
    if got["sampleTypes"] != ["samples/count", "cpu/nanoseconds"]:
        fail(f"sample types {got['sampleTypes']}")
    if int(got["totals"][0]) != rep["total_samples"]:
        fail(f"pprof samples total {got['totals'][0]} != report's {rep['total_samples']}")
    if int(got["totals"][1]) != rep["total_weight"] or rep["weight"] != "period":
        fail(f"pprof cpu total {got['totals'][1]} != report's period {rep['total_weight']}")
    if got["badRefs"]:
        fail(f"{got['badRefs']} dangling location/function ids")
    if got["labelKeys"] != ["comm", "process", "thread"]:
        fail(f"label keys {got['labelKeys']}")
    if got["topSelf"][0] != rep["rows"][0]["sym"]:
        fail(f"pprof top self {got['topSelf']} != report's {rep['rows'][0]['sym']}")
    if got["period"] != str(PERIOD) or got["periodType"] != "cpu/nanoseconds":
        fail(f"period {got['period']} {got['periodType']}")
    maps = {m["file"]: m for m in got["mappings"]}
    app = maps.get("/usr/bin/app")
    if not app or app["buildId"] != build_id_of(SYNTH_USER) or not app["buildId"]:
        fail(f"mapping of /usr/bin/app: {app}, want build-id {build_id_of(SYNTH_USER)}")
    if SYNTH_KERNEL not in maps or maps[SYNTH_KERNEL]["buildId"] != build_id_of(SYNTH_KERNEL):
        fail(f"kernel mapping: {got['mappings']}")
    print(f"ok: pprof-format decoded {got['samples']} samples, totals {got['totals']}, "
          f"{got['locations']} locations, {got['functions']} functions, build-ids match")


def test_svg():
    need_node("playwright-core")
    need_chromium()
    rec = recording("rec.data", "--samples", "20000", "--stacks", "300")
    svg = export(rec, "svg", os.path.join(work, "flame.svg"))
    ET.parse(svg)  # well-formed
    out = node("browser_check.mjs", "svg", svg)
    if out["errors"] or out["dialogs"]:
        fail(f"page errors {out['errors']} dialogs {out['dialogs']}")
    before, after, reset, pick = out["before"], out["after"], out["reset"], out["clicked"]
    full = out["width"] - 2 * 10
    i = before.index(pick)
    if abs(after[i]["w"] - full) > 0.5 or abs(after[i]["x"] - 10) > 0.5:
        fail(f"clicked frame {pick['name']} not zoomed to full width: {after[i]}")
    if pick["w"] >= full - 0.5:
        fail("picked a frame that was already full width: the check could not fail")
    hidden = [f for f, a in zip(before, after) if not a["shown"]]
    if not hidden:
        fail("zoom hid no frame outside the clicked subtree")
    inside = [a for f, a in zip(before, after) if a["shown"] and a["depth"] > pick["depth"]]
    if any(a["x"] < 10 - 0.5 or a["x"] + a["w"] > out["width"] - 10 + 0.5 for a in inside):
        fail("a frame of the zoomed subtree lies outside the view")
    if not after[i]["label"]:
        fail("the zoomed frame shows no label")
    if out["unzoomOpacity"] != "1":
        fail("Reset Zoom did not appear")
    if [(f["x"], f["w"], f["shown"]) for f in reset] != [(f["x"], f["w"], True) for f in before]:
        fail("Reset Zoom did not restore the layout")
    print(f"ok: SVG rendered {len(before)} frames; clicking {pick['name']} zoomed it to full "
          f"width and hid {len(hidden)} frames; Reset Zoom restored the layout")


def test_perf_script():
    sys.path.insert(0, SRCDIR)
    import stackcollapse_perf
    rec = recording("rec.data", "--samples", "20000", "--stacks", "300")
    text = run(HVPROF, "export", "--format", "perf-script", "-i", rec).stdout
    folded = folded_dict(run(HVPROF, "export", "--format", "folded", "-i", rec).stdout)
    got = stackcollapse_perf.collapse(text.splitlines(True), annotate_kernel=True)
    # stackcollapse-perf.pl counts periods: every sample here has the same period.
    want = {k: v * PERIOD for k, v in folded.items()}
    if got != want:
        missing = set(want) - set(got)
        extra = set(got) - set(want)
        diff = [k for k in want if k in got and got[k] != want[k]]
        fail(f"folded stacks differ: {len(missing)} missing (e.g. {sorted(missing)[:2]}), "
             f"{len(extra)} extra (e.g. {sorted(extra)[:2]}), {len(diff)} counts differ")
    if "+0x" not in text:
        fail("no sym+offset in the perf-script text")
    print(f"ok: stackcollapse-perf rules give back the same {len(got)} folded stacks "
          f"({sum(folded.values())} samples)")


def test_diff():
    # The generated runs differ by sampling noise alone, so the sampling test is the one to check
    # (--noise-factor 1); one run a side's conservative default factor is unit-tested
    # (profile-diff-runs) and measured (docs/diff.md).
    nf = ("--noise-factor", "1")
    samples = "100000"
    base = recording("base.data", "--samples", samples, "--stacks", "1000", "--seed", "1")
    same = recording("same.data", "--samples", samples, "--stacks", "1000", "--seed", "2")
    rep = report_json(base, "--sort", "sym", "--no-children")
    victim = next(r["sym"] for r in rep["rows"] if r["sym"].startswith("u_fn_") and not r["kernel"])
    new = recording("new.data", "--samples", samples, "--stacks", "1000", "--seed", "3",
                    "--slow", f"{victim}:30")
    r = run(HVPROF, "diff", *nf, "--format", "json", "--fail-on-regression", "10", base, new,
            "--svg", os.path.join(work, "d.svg"), "--svg-reverse", os.path.join(work, "r.svg"),
            check=False)
    if r.returncode != 1:
        fail(f"diff of a 30% slower {victim} with --fail-on-regression 10 exited {r.returncode}, "
             f"want 1: {r.stderr}")
    d = json.loads(r.stdout)
    first = d["regressions"][0]
    if first["name"] != victim or first["kind"] != "self" or first["delta_pp"] <= 0:
        fail(f"first regression is {first}, want {victim} self with a positive change")
    if not (15 <= first["change_pct"] <= 45):
        fail(f"{victim} change {first['change_pct']:.1f}%: want about +30% minus dilution")
    for f in ("d.svg", "r.svg"):
        root = ET.parse(os.path.join(work, f)).getroot()
        texts = "".join(root.itertext())
        if "BASE" not in texts or "NEW" not in texts or base not in texts or new not in texts:
            fail(f"{f}: title does not name BASE and NEW")
    text = run(HVPROF, "diff", *nf, base, new).stdout
    if "BASE -> NEW" not in text or victim not in text.split("Regressions")[1].split("\n")[2]:
        fail(f"text diff does not list {victim} first:\n{text[:2000]}")
    r = run(HVPROF, "diff", *nf, "--format", "json", "--fail-on-regression", "10", base, same,
            check=False)
    d2 = json.loads(r.stdout)
    if r.returncode != 0 or d2["regressions"] or d2["improvements"]:
        fail(f"two runs of the same workload: exit {r.returncode}, "
             f"{len(d2['regressions'])} regressions, {len(d2['improvements'])} improvements: "
             f"{(d2['regressions'] + d2['improvements'])[:3]}")
    # folded input gives the same answer as the recordings
    fb = os.path.join(work, "base.folded")
    fn = os.path.join(work, "new.folded")
    export(base, "folded", fb)
    export(new, "folded", fn)
    d3 = json.loads(run(HVPROF, "diff", *nf, "--format", "json", fb, fn).stdout)
    if d3["regressions"][0]["name"] != victim:
        fail(f"folded diff: first regression {d3['regressions'][0]}")
    print(f"ok: {victim} made 30% slower is the first regression ({first['change_pct']:+.1f}%, "
          f"z {first['z']:.1f}), exit 1 with --fail-on-regression 10; the same workload twice "
          f"reports nothing (z_crit {d2['z_crit']:.2f}, {d2['entries_tested']} entries)")


try:
    {"speedscope": test_speedscope, "pprof": test_pprof, "svg": test_svg,
     "perf-script": test_perf_script, "diff": test_diff}[TEST]()
finally:
    shutil.rmtree(work, ignore_errors=True)
