#!/usr/bin/env bash
# gVisor benchmarks (issue #35), against baselines measured in the same
# run on this machine:
#   1. a trivial step's cost: N x step("x","true") under --isolation
#      gvisor and namespaces vs N x `sh -c true` spawns (per step, in ms;
#      target: <= 30 ms a step under gvisor), and the floors under it: N x
#      `runsc exec <sandbox> /bin/true` by hand (what a step cost before
#      rfs's agent), and N x `sh -c true` started by a shell already inside
#      gVisor (a process start under gVisor's kernel, which every step pays);
#   2. provisioning (placement.intent -> placement) and teardown
#      (cleanup.verified's elapsed_ms) with gvisor vs namespaces.
# Needs root and runsc (apt-get install runsc). Not a test: never in CI.
# Usage: [RUNS=3] [N=100] [RFS_BIN=path/to/rfs] scripts/bench-gvisor.sh [WORKDIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/rfs-bench-gvisor.XXXXXX)}
mkdir -p "$work"
export RFS_STATE_DIR="$work/state"
source "$root/scripts/bench-lib.sh"
# RFS_BIN: measure that binary instead of building the release one.
rfs=$(rfs_release)
runs=${RUNS:-3}
n=${N:-100}
command -v runsc >/dev/null || { echo "runsc is not installed (apt-get install runsc)" >&2; exit 1; }
echo "runsc: $(runsc --version | head -1); kernel $(uname -r); $(nproc) cores"

journal_ms() {
  python3 -c 'import json,sys
from datetime import datetime
f=lambda s: datetime.strptime(s,"%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
t={}; clean=None
for e in map(json.loads, open(sys.argv[1])):
    if e["kind"] in ("placement.intent","placement"): t[e["kind"]]=f(e["ts"])
    if e["kind"]=="cleanup.verified": clean=e["payload"]["elapsed_ms"]
print(round((t["placement"]-t["placement.intent"])*1000), clean)' "$1"
}
per_step() { awk -v s="$1" -v n="$n" 'BEGIN{printf "%.1f", s*1000/n}'; }

small="$work/small"; small_repo "$small"
{ echo 'sync_source();'; echo "for i in 0..$n { step(\"x\", \"true\"); }"; } > "$work/steps.rhai"

echo "== 1. $n x step(\"x\",\"true\") vs $n x sh -c true (per step)"
base=(); gv=(); ns=(); raw=()
declare -A place clean
for i in $(seq 1 "$runs"); do
  t0=$(now); for _ in $(seq 1 "$n"); do sh -c true; done; t1=$(now)
  base+=("$(elapsed "$t0" "$t1")")
  for mode in gvisor namespaces; do
    out="$work/out-$mode-$i"; rm -rf "$out"
    (cd "$small" && "$rfs" run -q "$work/steps.rhai" --isolation "$mode" --out "$out" >/dev/null)
    s=$(steps_seconds "$out/journal.jsonl")
    if [ "$mode" = gvisor ]; then gv+=("$s"); else ns+=("$s"); fi
    read -r p c < <(journal_ms "$out/journal.jsonl")
    place[$mode]+="$p "; clean[$mode]+="$c "
  done
done
# The floor: runsc exec by hand into one sandbox rfs would build.
bundle="$work/raw"; mkdir -p "$bundle/rootfs/usr"
for d in bin lib lib64 sbin; do [ -L "/$d" ] && ln -sfn "$(readlink "/$d")" "$bundle/rootfs/$d"; done
cat > "$bundle/config.json" <<'EOF'
{"ociVersion":"1.0.0","process":{"user":{"uid":0,"gid":0},"args":["/bin/sh","-c","exec 3<&0; (read -r _ <&3) & wait"],"env":["PATH=/usr/bin:/bin"],"cwd":"/"},
 "root":{"path":"rootfs","readonly":true},
 "mounts":[{"destination":"/proc","type":"proc","source":"proc"},{"destination":"/usr","type":"bind","source":"/usr","options":["rbind","ro"]}],
 "linux":{"namespaces":[{"type":"pid"},{"type":"mount"}]}}
EOF
state="$work/runsc"; cid="rfs-bench-$$"
# Its first process waits on fd 7 (a pipe whose writer sleeps), as on rfs's lifeline.
exec 7< <(exec sleep 3600 2>/dev/null); sleeper=$!
runsc --root="$state" --network=none --ignore-cgroups run --detach --bundle "$bundle" "$cid" <&7 >/dev/null 2>&1
exec 7<&-
inner=()
for i in $(seq 1 "$runs"); do
  t0=$(now); for _ in $(seq 1 "$n"); do runsc --root="$state" exec "$cid" /bin/true; done; t1=$(now)
  raw+=("$(elapsed "$t0" "$t1")")
  t0=$(now)
  runsc --root="$state" exec "$cid" /bin/sh -c "i=0; while [ \$i -lt $n ]; do /bin/sh -c true; i=\$((i+1)); done"
  t1=$(now)
  inner+=("$(elapsed "$t0" "$t1")")
done
runsc --root="$state" delete --force "$cid" >/dev/null 2>&1 || true
kill "$sleeper" 2>/dev/null || true
b=$(printf '%s\n' "${base[@]}" | median); g=$(printf '%s\n' "${gv[@]}" | median)
s=$(printf '%s\n' "${ns[@]}" | median); r=$(printf '%s\n' "${raw[@]}" | median)
in=$(printf '%s\n' "${inner[@]}" | median)
echo "   sh -c true:                 $(per_step "$b") ms a step (median of $runs)"
echo "   rfs step, namespaces:       $(per_step "$s") ms a step  ($(ratio "$s" "$b")x sh -c)"
echo "   rfs step, gvisor:           $(per_step "$g") ms a step  ($(ratio "$g" "$b")x sh -c; target <= 30 ms)"
echo "   runsc exec /bin/true alone: $(per_step "$r") ms a call"
echo "   sh -c true inside gVisor:   $(per_step "$in") ms a start  ($(ratio "$in" "$b")x sh -c)"

echo "== 2. provisioning and teardown (ms, each run)"
for mode in gvisor namespaces; do
  echo "   $mode: create ${place[$mode]}; teardown ${clean[$mode]}"
done
