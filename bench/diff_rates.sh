#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# diff's false-alarm and detection rates on the bundled demo (docs/diff.md "Measured rates").
# Not run by CI: it boots the default image once per recording (30-70 s each on PVM).
#
# usage: diff_rates.sh record HVPROF DIR NBASE NSLOW   # NBASE runs of 'hvprof-demo 4 2' and
#                                                      # NSLOW of 'hvprof-demo 6 2', one at a time
#        diff_rates.sh diff HVPROF DIR [PCT]           # the comparisons, on what is in DIR
#
# The slowdown: cpu_phase() runs CPU_SECONDS (the demo's first argument), so 'hvprof-demo 6 2'
# is cpu_phase() (burn_a and burn_b under it) taking 50% longer than in 'hvprof-demo 4 2', the
# rest unchanged: cpu_phase's total share goes from 4/6 = 66.7% to 6/8 = 75% (+12.5%), burn_a's
# self share from ~46.7% to ~52.5%. Recordings use --from workload, the defaults otherwise.
# The diff step prints one line per comparison: exit status, the first regression, and the
# largest |z| of any entry (how far the noise went, for the one-run factor).
set -euo pipefail
mode=$1 hv=$2 dir=$3
mkdir -p "$dir"

record() { # NAME ARGS
	local out=$dir/$1.data t0=$SECONDS
	[ -s "$out" ] && return 0
	"$hv" record --from workload -o "$out" --run "/bin/hvprof-demo $2" >"$dir/$1.log" 2>&1 ||
		echo "record $1 failed: see $dir/$1.log"
	echo "recorded $1 ($2) in $((SECONDS - t0)) s"
}

# One comparison: LABEL EXPECT(0 same, 1 slower) then diff arguments.
compare() {
	local label=$1 expect=$2 rc summary
	shift 2
	set +e
	"$hv" diff --format json --fail-on-regression "${pct:-10}" --min-samples 10 "$@" \
		>"$dir/cmp.json" 2>"$dir/cmp.err"
	rc=$?
	set -e
	summary=$(python3 - "$dir/cmp.json" <<'PY' 2>/dev/null || echo "? ?"
import json, sys
d = json.load(open(sys.argv[1]))
r = d["regressions"]
ch = lambda e: "new" if e["change_pct"] is None else "%+.1f%%" % e["change_pct"]
first = "%s:%s %s" % (r[0]["kind"], r[0]["name"], ch(r[0])) if r else "-"
print("first=%s reported=%d max|z|=%.2f z_crit=%.2f" % (first.replace(" ", "_"),
      len(r) + len(d["improvements"]), d["max_abs_z"], d["z_crit"]))
PY
)
	echo "$label expect=$expect exit=$rc $summary"
}

case $mode in
record)
	for i in $(seq 1 "$4"); do record "base$i" "4 2"; done
	for i in $(seq 1 "$5"); do record "slow$i" "6 2"; done
	;;
diff)
	pct=${4:-10}
	shopt -s nullglob
	bases=("$dir"/base*.data) slows=("$dir"/slow*.data)
	nb=${NBASE:-${#bases[@]}} ns=${NSLOW:-${#slows[@]}}
	echo "== identical pairs, 1 vs 1 (false alarms)"
	for ((i = 1; i + 1 <= nb; i += 2)); do
		compare "same base$i base$((i + 1))" 0 "$dir/base$i.data" "$dir/base$((i + 1)).data"
	done
	echo "== identical, 2 vs 2 (false alarms)"
	for ((i = 1; i + 3 <= nb; i += 4)); do
		compare "same 2v2 from base$i" 0 --base "$dir/base$i.data" \
			--base "$dir/base$((i + 1)).data" --new "$dir/base$((i + 2)).data" \
			--new "$dir/base$((i + 3)).data"
	done
	echo "== cpu_phase 50% slower, 1 vs 1 (detection)"
	for ((i = 1; i <= ns && i <= nb; i++)); do
		compare "slow base$i slow$i" 1 "$dir/base$i.data" "$dir/slow$i.data"
	done
	if ((ns >= 3 && nb >= 3)); then
		echo "== cpu_phase 50% slower, 3 vs 3 (detection)"
		compare "slow 3v3" 1 --base "$dir/base1.data" --base "$dir/base2.data" \
			--base "$dir/base3.data" --new "$dir/slow1.data" --new "$dir/slow2.data" \
			--new "$dir/slow3.data"
	fi
	if ((nb >= 6)); then
		echo "== identical, 3 vs 3 (false alarms)"
		compare "same 3v3" 0 --base "$dir/base1.data" --base "$dir/base2.data" \
			--base "$dir/base3.data" --new "$dir/base4.data" --new "$dir/base5.data" \
			--new "$dir/base6.data"
	fi
	;;
*)
	echo "usage: $0 record|diff HVPROF DIR ..." >&2
	exit 2
	;;
esac
