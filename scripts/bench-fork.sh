#!/usr/bin/env bash
# Setup once, fork per proof (issue #36). Two figures:
#  1. a suite of 8 proofs (each a 1 s step) whose setup takes 10 s (a
#     sleep), `rfs test --setup --jobs 2` on local: its wall time against
#     setup + the proofs' own time / jobs (each proof's steps, from its
#     journal) — target <= 1.5x;
#  2. fork cost on local for the 20,000-file benchmark tree: `fork_ms` of
#     every proof's `placement.forked` fact (mounting the overlays over
#     the checkpoint, namespaces included) — target <= 150 ms — with the
#     checkpoint's own cost (a copy of the synced tree, once).
# Not a test: never run in CI. Needs root (overlayfs).
# Usage: scripts/bench-fork.sh [WORKDIR]   RUNS=3 PARTS="suite fork" RFS_BIN=path/to/rfs
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/rfs-bench-fork.XXXXXX)}
mkdir -p "$work"
runs=${RUNS:-3}
parts=${PARTS:-suite fork}
source "$root/scripts/bench-lib.sh"
rfs=$(rfs_release)
export RFS_STATE_DIR="$work/state" RELAYFLOWS_SANDBOX_PROVIDER=local

# proofs/_setup.rhai (SETUP) and 8 proofs (PROOF) in the repository $1.
suite_repo() {
  local dir=$1 setup=$2 proof=$3
  mkdir -p "$dir/proofs"
  printf '%s\n' "$setup" > "$dir/proofs/_setup.rhai"
  for i in 1 2 3 4 5 6 7 8; do printf '%s\n' "$proof" > "$dir/proofs/p$i.rhai"; done
  git -C "$dir" add -A
  git -C "$dir" -c user.name=b -c user.email=b@b commit -qm "suite" || true
}

# Run the suite in $1 into $2; prints its wall seconds.
suite() { timed_suite "$1" "$2" --setup proofs/_setup.rhai --jobs 2; }

case " $parts " in *" suite "*)
  dir="$work/suite8"
  small_repo "$dir"
  suite_repo "$dir" 'sync_source(); step("deps", "sleep 10");' 'sync_source(); step("test", "sleep 1");'
  walls=() ideals=() ratios=()
  for r in $(seq 1 "$runs"); do
    out="$work/out-suite-$r"
    wall=$(suite "$dir" "$out")
    ideal=$(suite_ideal "$out" 2)
    walls+=("$wall"); ideals+=("$ideal"); ratios+=("$(ratio "$wall" "$ideal")")
  done
  printf "suite of 8 proofs, setup 10 s, --jobs 2: wall %.2f s, setup + own/jobs %.2f s, ratio %sx (target <= 1.5; runs: %s)\n" \
    "$(printf '%s\n' "${walls[@]}" | median)" "$(printf '%s\n' "${ideals[@]}" | median)" \
    "$(printf '%s\n' "${ratios[@]}" | median)" "${ratios[*]}" ;;
esac

case " $parts " in *" fork "*)
  big="$work/big"
  gen_repo "$big"
  suite_repo "$big" 'sync_source(); step("deps", "mkdir -p build && echo built > build/marker");' \
    'sync_source(); step("test", "cat build/marker && ls pkg00/mod00/src | wc -l");'
  forks=() cps=()
  for r in $(seq 1 "$runs"); do
    out="$work/out-fork-$r"
    suite "$big" "$out" > /dev/null
    while read -r ms; do forks+=("$ms"); done < <(python3 - "$out" <<'PY'
import json, sys, glob
for j in glob.glob(sys.argv[1] + "/proofs-*/journal.jsonl"):
    for l in open(j):
        e = json.loads(l)
        if e["kind"] == "placement.forked":
            print(e["payload"]["fork_ms"])
PY
)
    cps+=("$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e=json.loads(l)
    if e["kind"]=="checkpoint": print(e["payload"]["ms"])' "$out/_setup/journal.jsonl")")
    how=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e=json.loads(l)
    if e["kind"]=="placement.forked": print(e["payload"]["how"]); break' "$out/proofs-p1/journal.jsonl")
  done
  files=$(git -C "$big" ls-files | wc -l)
  printf "fork on local, %s-file tree: median %s ms, max %s ms over %s forks (target <= 150 ms); checkpoint (once) median %s ms; %s\n" \
    "$files" "$(printf '%s\n' "${forks[@]}" | median)" "$(printf '%s\n' "${forks[@]}" | sort -n | tail -1)" \
    "${#forks[@]}" "$(printf '%s\n' "${cps[@]}" | median)" "$how" ;;
esac
