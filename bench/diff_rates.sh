#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# diff's false-alarm and detection rates on the bundled demo (docs/diff.md "Measured rates").
# Not run by CI: it boots the default image once per recording, one boot at a time.
#
# usage: diff_rates.sh record HVPROF DIR [N]   # 5 boots of record --repeat N (default 30):
#                                              # base1, base2 ('hvprof-demo 4 2'), slow10
#                                              # ('4.4 2'), slow25 ('5 2'), slow50 ('6 2'); and
#                                              # slow50b ('6 2', --repeat 20)
#        diff_rates.sh diff HVPROF DIR [T]     # the comparisons (T trials each, default 10;
#                                              # SLOWS='slow25 slow50': those only; ONLY_SLOW=1:
#                                              # no identical pairs)
#        diff_rates.sh time HVPROF DIR         # a 3-against-3 comparison end to end: two boots of
#                                              # record --repeat 3 (the defaults) and the diff
#        diff_rates.sh work-record HVPROF DIR [N]  # fixed work ('hvprof-demo --work', docs/diff.md):
#                                              # 4 boots of the base (wb1..wb4), 2 each of burn_a
#                                              # 10%, 25%, 50% slower (ws10a/b, ws25a/b, ws50a/b),
#                                              # record --repeat N each (default 10)
#        diff_rates.sh work-diff HVPROF DIR    # their comparisons: 1 vs 1 (FACTORS='2 3.5': at
#                                              # those --noise-factor values), 3 vs 3 with each
#                                              # side's runs from several boots, 10 vs 10 (a
#                                              # recording a side); "caught": exit 1 with the
#                                              # slowed function the first regression
#
# The slowdown: cpu_phase() runs CPU_SECONDS (the demo's first argument), so 'hvprof-demo 5 2'
# is cpu_phase() (burn_a and burn_b under it) taking 25% longer than in 'hvprof-demo 4 2', the
# rest unchanged: cpu_phase holds ~2/3 of the window. Each window of a recording is one run
# (FILE#N, docs/diff.md); record uses --from workload and --call-graph fp (the demo has frame
# pointers; DWARF stacks would make 30-window files of ~1.5 GB), the defaults otherwise. Every
# comparison is 'diff --fail-on-regression 10' at the defaults: exit 1 is an alarm.
set -euo pipefail
mode=$1 hv=$2 dir=$3
WORK=${WORK:-150 1500} # the fixed-work base: CPU rounds and system calls (~5 s a window here)
mkdir -p "$dir"

load() { cut -d' ' -f1-3 /proc/loadavg; }

record() { # NAME ARGS N [record options]
	local name=$1 args=$2 n=$3 t0=$SECONDS
	shift 3
	[ -s "$dir/$name.data" ] && return 0
	echo "$(date -u +%T) record $name ('hvprof-demo $args', --repeat $n), load $(load)"
	"$hv" record --from workload --repeat "$n" "$@" -o "$dir/$name.data" \
		--run "/bin/hvprof-demo $args" >"$dir/$name.log" 2>&1 ||
		echo "record $name failed: see $dir/$name.log"
	echo "$(date -u +%T) recorded $name in $((SECONDS - t0)) s, load $(load)"
}

# One comparison: LABEL EXPECT(0 same, 1 slower) then diff arguments; prints exit and the first
# regression; counts alarms in $alarms.
compare() {
	local label=$1 expect=$2 rc first
	shift 2
	set +e
	"$hv" diff --format json --fail-on-regression 10 "$@" >"$dir/cmp.json" 2>"$dir/cmp.err"
	rc=$?
	set -e
	first=$(python3 - "$dir/cmp.json" <<'PY' 2>/dev/null || echo "?"
import json, sys
d = json.load(open(sys.argv[1]))
r = [e for e in d["regressions"] if e["kind"] != "stack"]
e = r[0] if r else None
pr = d.get("prior", {})
print("%s t=%s df=%s max|z|=%.1f d0=%s phi0=%s" % (
    "%s:%s_%+.1f%%" % (e["kind"], e["name"], e["change_pct"] or 0) if e else "-",
    "%.1f" % e["t"] if e else "-", e["df"] if e else "-", d["max_abs_z"],
    pr.get("d0"), pr.get("phi0")))
PY
)
	# The slowed function's own sampling z (the factor-1 test, every entry kept): what a
	# noise factor F would leave of it is z / F.
	if [ "$expect" = 1 ]; then
		"$hv" diff --format json --noise-factor 1 --threshold 0 --max-rows 100000 "$@" \
			>"$dir/cmp1.json" 2>/dev/null || true
		first="$first $(python3 - "$dir/cmp1.json" <<'PY' 2>/dev/null || echo "z=?"
import json, sys
d = json.load(open(sys.argv[1]))
z = {(e["kind"], e["name"]): e["z"] for e in d["regressions"] + d["improvements"]}
print("z(self burn_a)=%s z(total cpu_phase)=%s" % (z.get(("self", "burn_a"), "-"),
                                                   z.get(("total", "cpu_phase"), "-")))
PY
)"
	fi
	echo "$label expect=$expect exit=$rc $first"
	if [ "$rc" = 1 ]; then alarms=$((alarms + 1)); fi
	case "$first" in # caught: the gate failed and named the slowed function first
	self:burn_a_* | total:burn_a_* | total:cpu_phase_*) [ "$rc" = 1 ] && caught=$((caught + 1)) ;;
	esac
	if [ "$rc" != 0 ] && [ "$rc" != 1 ]; then errors=$((errors + 1)); fi
}

summary() {
	echo "## $1: $alarms alarms (exit 1) of $2 trials, $caught caught (exit 1, the slowed" \
		"function first), $errors errors"
	caught=0
}
caught=0

w() { echo "$dir/$1.data#$2"; } # window N of recording NAME

# Trials T of 3 against 3: triple k of A against triple k of B (windows 3k-2..3k)
three() {
	local a=$1 b=$2 expect=$3 t=$4
	alarms=0 errors=0
	for ((k = 1; k <= t; k++)); do
		compare "3v3 $a/$b triple $k" "$expect" \
			--base "$(w "$a" $((3 * k - 2)))" --base "$(w "$a" $((3 * k - 1)))" \
			--base "$(w "$a" $((3 * k)))" --new "$(w "$b" $((3 * k - 2)))" \
			--new "$(w "$b" $((3 * k - 1)))" --new "$(w "$b" $((3 * k)))"
	done
	summary "3 vs 3, $a -> $b" "$t"
}

one() {
	local a=$1 b=$2 expect=$3 t=$4
	alarms=0 errors=0
	for ((i = 1; i <= t; i++)); do
		compare "1v1 $a#$i/$b#$i" "$expect" "$(w "$a" "$i")" "$(w "$b" "$i")"
	done
	summary "1 vs 1, $a -> $b" "$t"
}

case $mode in
record)
	n=${4:-30}
	record base1 "4 2" "$n" --call-graph fp
	record slow50 "6 2" "$n" --call-graph fp
	record slow25 "5 2" "$n" --call-graph fp
	record base2 "4 2" "$n" --call-graph fp
	record slow10 "4.4 2" "$n" --call-graph fp
	record slow50b "6 2" 20 --call-graph fp # a second boot of the 50% slowdown
	;;
diff)
	t=${4:-10}
	echo "# host load at the start: $(load)"
	if [ -z "${ONLY_SLOW:-}" ]; then
	echo "== identical, 1 vs 1, two boots (false alarms)"
	one base1 base2 0 "$((3 * t))"
	echo "== identical, 1 vs 1, one boot: window 2k-1 against 2k (false alarms)"
	alarms=0 errors=0
	for ((k = 1; k <= t; k++)); do
		compare "1v1 base1#$((2 * k - 1))/#$((2 * k))" 0 "$(w base1 $((2 * k - 1)))" \
			"$(w base1 $((2 * k)))"
	done
	summary "1 vs 1, base1 -> base1 (one boot)" "$t"
	echo "== identical, 3 vs 3, two boots (false alarms)"
	three base1 base2 0 "$t"
	echo "== identical, 3 vs 3, one boot: triple k against triple k + 5 (false alarms)"
	alarms=0 errors=0
	for ((k = 1; k <= 5; k++)); do
		j=$((k + 5))
		compare "3v3 base1 triple $k/triple $j" 0 \
			--base "$(w base1 $((3 * k - 2)))" --base "$(w base1 $((3 * k - 1)))" \
			--base "$(w base1 $((3 * k)))" --new "$(w base1 $((3 * j - 2)))" \
			--new "$(w base1 $((3 * j - 1)))" --new "$(w base1 $((3 * j)))"
	done
	summary "3 vs 3, base1 -> base1 (one boot)" 5
	echo "== identical, 3 vs 3, each side's runs from both boots (false alarms)"
	alarms=0 errors=0
	for ((k = 1; k <= t; k++)); do
		compare "3v3 mixed $k" 0 --base "$(w base1 "$k")" --base "$(w base2 $((k + 10)))" \
			--base "$(w base1 $((k + 20)))" --new "$(w base2 "$k")" \
			--new "$(w base1 $((k + 10)))" --new "$(w base2 $((k + 20)))"
	done
	summary "3 vs 3, base1+base2 -> base2+base1 (runs of both boots a side)" "$t"
	fi
	for s in ${SLOWS:-slow10 slow25 slow50}; do
		[ -s "$dir/$s.data" ] || continue
		echo "== $s, 1 vs 1 (detection)"
		one base1 "$s" 1 "$t"
		echo "== $s, 3 vs 3 (detection)"
		three base1 "$s" 1 "$t"
	done
	if [ -s "$dir/slow50b.data" ]; then
		echo "== slow50, 3 vs 3, each side from two boots (detection)"
		alarms=0 errors=0
		for ((k = 1; k <= t; k++)); do
			compare "3v3 mixed slow50 $k" 1 --base "$(w base1 "$k")" \
				--base "$(w base2 $((k + 10)))" --base "$(w base1 $((k + 20)))" \
				--new "$(w slow50 "$k")" --new "$(w slow50b "$k")" \
				--new "$(w slow50 $((k + 10)))"
		done
		summary "3 vs 3, base1+base2 -> slow50+slow50b" "$t"
	fi
	echo "# host load at the end: $(load)"
	;;
time)
	t0=$SECONDS
	record t_base "4 2" 3
	record t_new "5 2" 3
	t1=$SECONDS
	alarms=0 errors=0
	compare "3v3 t_base/t_new" 1 "$dir/t_base.data" "$dir/t_new.data"
	echo "3 against 3 (record --repeat 3 twice, defaults): records $((t1 - t0)) s, diff" \
		"$((SECONDS - t1)) s"
	;;
work-record)
	n=${4:-10}
	for b in 1 2 3 4; do
		record "wb$b" "--work $WORK" "$n" --call-graph fp
		[ "$b" -gt 2 ] && continue
		for s in 10 25 50; do
			record "ws$s$(echo _ab | cut -c$((b + 1)))" "--work $WORK 1.$(printf %02d "$s")" \
				"$n" --call-graph fp
		done
	done
	;;
work-diff)
	echo "# host load at the start: $(load)"
	for f in ${FACTORS:-default}; do
	nf=() && [ "$f" != default ] && nf=(--noise-factor "$f")
	echo "== fixed work, identical, 1 vs 1, two boots (false alarms), noise factor $f"
	alarms=0 errors=0
	for ((k = 1; k <= 5; k++)); do
		compare "1v1 wb1#$k/wb2#$k" 0 "${nf[@]}" "$(w wb1 "$k")" "$(w wb2 "$k")"
		compare "1v1 wb3#$k/wb4#$k" 0 "${nf[@]}" "$(w wb3 "$k")" "$(w wb4 "$k")"
		compare "1v1 wb1#$((k + 5))/wb3#$((k + 5))" 0 "${nf[@]}" "$(w wb1 $((k + 5)))" \
			"$(w wb3 $((k + 5)))"
		compare "1v1 wb2#$((k + 5))/wb4#$((k + 5))" 0 "${nf[@]}" "$(w wb2 $((k + 5)))" \
			"$(w wb4 $((k + 5)))"
	done
	summary "fixed work, 1 vs 1, identical, two boots, noise factor $f" 20
	for s in 10 25 50; do
		echo "== fixed work, burn_a $s% slower, 1 vs 1 (detection), noise factor $f"
		alarms=0 errors=0
		for ((k = 1; k <= 5; k++)); do
			compare "1v1 wb1#$k/ws${s}a#$k" 1 "${nf[@]}" "$(w wb1 "$k")" "$(w "ws${s}a" "$k")"
			compare "1v1 wb3#$((k + 5))/ws${s}b#$((k + 5))" 1 "${nf[@]}" \
				"$(w wb3 $((k + 5)))" "$(w "ws${s}b" $((k + 5)))"
		done
		summary "fixed work, 1 vs 1, burn_a $s% slower, noise factor $f" 10
	done
	done
	echo "== fixed work, 10 vs 10: record --repeat 10, one boot a side (false alarms)"
	alarms=0 errors=0
	for p in "wb1 wb2" "wb3 wb4" "wb1 wb3" "wb2 wb4" "wb1 wb4" "wb2 wb3" "wb2 wb1" "wb4 wb3"; do
		set -- $p
		compare "10v10 $1/$2" 0 "$dir/$1.data" "$dir/$2.data"
	done
	summary "fixed work, 10 vs 10, identical, one boot a side" 8
	for s in 10 25 50; do
		echo "== fixed work, burn_a $s% slower, 10 vs 10 (detection)"
		alarms=0 errors=0
		for b in wb1 wb2 wb3 wb4; do
			compare "10v10 $b/ws${s}a" 1 "$dir/$b.data" "$dir/ws${s}a.data"
			compare "10v10 $b/ws${s}b" 1 "$dir/$b.data" "$dir/ws${s}b.data"
		done
		summary "fixed work, 10 vs 10, burn_a $s% slower" 8
	done
	echo "== fixed work, identical, 1 vs 1, one boot (false alarms)"
	alarms=0 errors=0
	for b in 1 2; do
		for ((k = 1; k <= 5; k++)); do
			compare "1v1 wb$b#$k/#$((k + 5))" 0 "$(w "wb$b" "$k")" "$(w "wb$b" $((k + 5)))"
		done
	done
	summary "fixed work, 1 vs 1, identical, one boot" 10
	echo "== fixed work, identical, 3 vs 3, each side's runs from three boots (false alarms)"
	alarms=0 errors=0
	for ((k = 1; k <= 5; k++)); do
		j=$((k + 5))
		compare "3v3 wb1,2,3#$k/wb4,1,2#$j" 0 --base "$(w wb1 "$k")" --base "$(w wb2 "$k")" \
			--base "$(w wb3 "$k")" --new "$(w wb4 "$j")" --new "$(w wb1 "$j")" \
			--new "$(w wb2 "$j")"
		compare "3v3 wb2,3,4#$k/wb3,4,1#$j" 0 --base "$(w wb2 "$k")" --base "$(w wb3 "$k")" \
			--base "$(w wb4 "$k")" --new "$(w wb3 "$j")" --new "$(w wb4 "$j")" \
			--new "$(w wb1 "$j")"
	done
	summary "fixed work, 3 vs 3, identical, three boots a side" 10
	echo "== fixed work, identical, 3 vs 3, one boot a side (false alarms)"
	alarms=0 errors=0
	for ((k = 1; k <= 5; k++)); do
		compare "3v3 wb1/wb2 triple $k" 0 --base "$(w wb1 "$k")" --base "$(w wb1 $((k + 5)))" \
			--base "$(w wb1 $((k % 5 + 1)))" --new "$(w wb2 "$k")" --new "$(w wb2 $((k + 5)))" \
			--new "$(w wb2 $((k % 5 + 1)))"
		compare "3v3 wb3/wb4 triple $k" 0 --base "$(w wb3 "$k")" --base "$(w wb3 $((k + 5)))" \
			--base "$(w wb3 $((k % 5 + 1)))" --new "$(w wb4 "$k")" --new "$(w wb4 $((k + 5)))" \
			--new "$(w wb4 $((k % 5 + 1)))"
	done
	summary "fixed work, 3 vs 3, identical, one boot a side" 10
	for s in 10 25 50; do
		echo "== fixed work, burn_a $s% slower, 3 vs 3, base from three boots, new from two"
		alarms=0 errors=0
		for ((k = 1; k <= 5; k++)); do
			j=$((k + 5))
			compare "3v3 wb1,2,3#$k/ws${s}a,b,a#$k,$k,$j" 1 --base "$(w wb1 "$k")" \
				--base "$(w wb2 "$k")" --base "$(w wb3 "$k")" --new "$(w "ws${s}a" "$k")" \
				--new "$(w "ws${s}b" "$k")" --new "$(w "ws${s}a" "$j")"
			compare "3v3 wb2,3,4#$j/ws${s}b,a,b#$j,$j,$k" 1 --base "$(w wb2 "$j")" \
				--base "$(w wb3 "$j")" --base "$(w wb4 "$j")" --new "$(w "ws${s}b" "$j")" \
				--new "$(w "ws${s}a" "$j")" --new "$(w "ws${s}b" "$k")"
		done
		summary "fixed work, 3 vs 3, burn_a $s% slower" 10
	done
	echo "# host load at the end: $(load)"
	;;
*)
	echo "usage: $0 record|diff|time|work-record|work-diff HVPROF DIR [N]" >&2
	exit 2
	;;
esac
