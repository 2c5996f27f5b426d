#!/usr/bin/env bash
# Isolation benchmarks (issue #11), as ratios against baselines measured in
# the same run:
#   1. 200 x step("x","true") in an isolated local sandbox vs 200 x
#      `sh -c true` spawns (target <= 1.1x, issue #35), and the same with
#      --isolation none;
#   2. provisioning: placement.intent -> placement (create) with namespaces
#      vs none, and a whole one-step run with each;
#   3. steps that are not back to back: 20 x step("x","sleep 0.05") vs
#      20 x `sh -c 'sleep 0.05'` (what a start costs after an idle gap).
# Usage: [RUNS=5] [RFS_BIN=path/to/rfs] scripts/bench-isolation.sh [WORKDIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/rfs-bench-iso.XXXXXX)}
mkdir -p "$work"
export RFS_STATE_DIR="$work/state"
source "$root/scripts/bench-lib.sh"
# RFS_BIN: measure that binary instead of building the release one.
rfs=$(rfs_release)
runs=${RUNS:-5}

# Seconds from placement.intent to placement (the provider's create).
place_seconds() {
  python3 -c 'import json,sys
from datetime import datetime
f=lambda s: datetime.strptime(s,"%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
t={e["kind"]:f(e["ts"]) for e in map(json.loads, open(sys.argv[1])) if e["kind"] in ("placement.intent","placement")}
print(t["placement"]-t["placement.intent"])' "$1"
}

small="$work/small"; small_repo "$small"
{ echo 'sync_source();'; echo 'for i in 0..200 { step("x", "true"); }'; } > "$work/steps.rhai"
echo 'sandbox(); step("x", "true");' > "$work/one.rhai"
{ echo 'sync_source();'; echo 'for i in 0..20 { step("x", "sleep 0.05"); }'; } > "$work/spaced.rhai"

echo "== 1. 200 x step(\"x\",\"true\") vs 200 x sh -c true"
base=(); ns=(); none=()
for i in $(seq 1 "$runs"); do
  t0=$(now); for _ in $(seq 1 200); do sh -c true; done; t1=$(now)
  base+=("$(elapsed "$t0" "$t1")")
  for mode in namespaces none; do
    out="$work/out-steps-$mode-$i"; rm -rf "$out"
    (cd "$small" && "$rfs" run -q "$work/steps.rhai" --isolation "$mode" --out "$out" >/dev/null)
    s=$(steps_seconds "$out/journal.jsonl")
    if [ "$mode" = namespaces ]; then ns+=("$s"); else none+=("$s"); fi
  done
done
b=$(printf '%s\n' "${base[@]}" | median)
n=$(printf '%s\n' "${ns[@]}" | median); o=$(printf '%s\n' "${none[@]}" | median)
echo "   baseline 200 x sh -c true: ${b}s (median of $runs)"
echo "   rfs 200 steps, isolation namespaces: ${n}s  ratio $(ratio "$n" "$b")x  (target <= 1.1x)"
echo "   rfs 200 steps, isolation none:       ${o}s  ratio $(ratio "$o" "$b")x"

echo "== 2. provisioning (create) and a whole one-step run"
pns=(); pnone=(); wns=(); wnone=()
for i in $(seq 1 "$runs"); do
  for mode in namespaces none; do
    out="$work/out-one-$mode-$i"; rm -rf "$out"
    t0=$(now); (cd "$small" && "$rfs" run -q "$work/one.rhai" --isolation "$mode" --out "$out" >/dev/null); t1=$(now)
    p=$(place_seconds "$out/journal.jsonl"); w=$(elapsed "$t0" "$t1")
    if [ "$mode" = namespaces ]; then pns+=("$p"); wns+=("$w"); else pnone+=("$p"); wnone+=("$w"); fi
  done
done
a=$(printf '%s\n' "${pns[@]}" | median); c=$(printf '%s\n' "${pnone[@]}" | median)
d=$(printf '%s\n' "${wns[@]}" | median); e=$(printf '%s\n' "${wnone[@]}" | median)
echo "   create, namespaces: ${a}s vs none: ${c}s  (+$(awk -v a="$a" -v c="$c" 'BEGIN{printf "%.1f", (a-c)*1000}') ms)"
echo "   whole one-step run, namespaces: ${d}s vs none: ${e}s  ratio $(ratio "$d" "$e")x"

echo "== 3. 20 x step(\"x\",\"sleep 0.05\") vs 20 x sh -c 'sleep 0.05' (steps not back to back)"
sbase=(); sns=()
for i in $(seq 1 "$runs"); do
  t0=$(now); for _ in $(seq 1 20); do sh -c 'sleep 0.05'; done; t1=$(now)
  sbase+=("$(elapsed "$t0" "$t1")")
  out="$work/out-spaced-$i"; rm -rf "$out"
  (cd "$small" && "$rfs" run -q "$work/spaced.rhai" --isolation namespaces --out "$out" >/dev/null)
  sns+=("$(steps_seconds "$out/journal.jsonl")")
done
b=$(printf '%s\n' "${sbase[@]}" | median); n=$(printf '%s\n' "${sns[@]}" | median)
echo "   baseline: ${b}s; rfs, isolation namespaces: ${n}s  ratio $(ratio "$n" "$b")x"
