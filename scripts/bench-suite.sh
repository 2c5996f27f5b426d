#!/usr/bin/env bash
# Suites and bisect (issue #23). Three figures, each a ratio against its
# baseline measured in the same run:
#  1. local: 40 one-step proofs, `rfs test --jobs 2` / `--jobs 1`
#     (target <= 0.6x on 2 cores);
#  2. daytona (local Daytona-API server, 50 ms added to every response and
#     WebSocket frame): 20 proofs, `--jobs 10` / `--jobs 1` (target <= 0.2x);
#  3. bisect over 64 commits on top of the 20,000-file benchmark
#     repository: full syncs and re-syncs in the bisect's journal
#     (target: 1 full sync + at most 7 re-syncs).
# Not a test: never run in CI. Needs root for the Daytona-API server.
# Usage: scripts/bench-suite.sh [WORKDIR]   RUNS=3 PARTS="local daytona bisect"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/rfs-bench-suite.XXXXXX)}
mkdir -p "$work"
runs=${RUNS:-3}
parts=${PARTS:-local daytona bisect}
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p rfs -p rfs-daytona-sim
bin="${CARGO_TARGET_DIR:-$root/target}/release"
source "$root/scripts/bench-lib.sh"
export RFS_STATE_DIR="$work/state"

# A repository with N one-step proofs in proofs/.
proof_repo() {
  local dir=$1 n=$2
  [ -d "$dir/.git" ] && return
  small_repo "$dir"
  mkdir -p "$dir/proofs"
  for i in $(seq -w 1 "$n"); do echo "step(\"s\", \"true\");" > "$dir/proofs/p$i.rhai"; done
  git -C "$dir" add -A; git -C "$dir" -c user.name=b -c user.email=b@b commit -qm proofs
}

# Median wall seconds of `rfs test --jobs J` in DIR over $runs runs,
# alternating with the other job count by the caller.
suite_seconds() {
  local dir=$1 jobs=$2 t0 t1
  t0=$(now)
  (cd "$dir" && "$bin/rfs" test --jobs "$jobs" --json > /dev/null 2>&1) || { echo "rfs test failed" >&2; exit 1; }
  t1=$(now)
  elapsed "$t0" "$t1"
}

paired() {
  local dir=$1 base=$2 par=$3 label=$4 target=$5
  local a=() b=()
  for _ in $(seq 1 "$runs"); do
    a+=("$(suite_seconds "$dir" "$base")")
    b+=("$(suite_seconds "$dir" "$par")")
  done
  local ma mb
  ma=$(printf '%s\n' "${a[@]}" | median); mb=$(printf '%s\n' "${b[@]}" | median)
  printf "%-40s jobs %-2s %6.2f s   jobs %-2s %6.2f s   ratio %sx (target <= %s)\n" \
    "$label" "$base" "$ma" "$par" "$mb" "$(ratio "$mb" "$ma")" "$target"
}

case " $parts " in *" local "*)
  proof_repo "$work/local40" 40
  RELAYFLOWS_SANDBOX_PROVIDER=local paired "$work/local40" 1 2 "local, 40 one-step proofs" 0.6 ;;
esac

case " $parts " in *" daytona "*)
  proof_repo "$work/day20" 20
  DAYTONA_SIM_LATENCY_MS=50 DAYTONA_SIM_FRAME_LATENCY_MS=50 "$bin/rfs-daytona-sim" > "$work/sim.env" 2> "$work/sim.err" &
  sim=$!
  trap 'kill "$sim" 2>/dev/null || true' EXIT
  for _ in $(seq 1 100); do grep -q DAYTONA_API_KEY "$work/sim.env" 2>/dev/null && break; sleep 0.1; done
  ( set -a; source "$work/sim.env"; set +a
    RELAYFLOWS_SANDBOX_PROVIDER=daytona paired "$work/day20" 1 10 "daytona +50 ms, 20 one-step proofs" 0.2 )
  kill "$sim"; wait "$sim" 2>/dev/null || true ;;
esac

case " $parts " in *" bisect "*)
  big="$work/big"
  gen_repo "$big"
  if [ "$(git -C "$big" rev-list --count HEAD)" -lt 65 ]; then
    # 64 commits, each changing one small file; from commit 40 on,
    # `marker` says "broken".
    for i in $(seq 1 64); do
      f=$(printf 'pkg%02d/mod%02d/src/file%03d.txt' $((i % 20)) $((i % 25)) $((i % 41)))
      echo "edit $i" >> "$big/$f"
      if [ "$i" -ge 40 ]; then echo broken > "$big/marker"; else echo fine > "$big/marker"; fi
      git -C "$big" add -A
      git -C "$big" -c user.name=b -c user.email=b@b commit -qm "change $i"
    done
  fi
  echo 'step("check", "! grep -q broken marker");' > "$work/bisect-proof.rhai"
  good=$(git -C "$big" rev-parse HEAD~64)
  out="$work/bisect-out-$(date +%s%N)"
  t0=$(now)
  (cd "$big" && "$bin/rfs" bisect "$good" HEAD "$work/bisect-proof.rhai" --provider local --out "$out" > "$work/bisect.txt" 2> "$work/bisect.err") || true
  t1=$(now)
  full=$(grep -c '"kind":"source.verify"' "$out/journal.jsonl")
  resyncs=$(grep -c '"kind":"source.resync"' "$out/journal.jsonl")
  tested=$(grep -c '"kind":"bisect.commit"' "$out/journal.jsonl")
  printf "%-40s %s full sync + %s re-syncs, %s commits tested, %.1f s (target: 1 + <= 7)\n" \
    "bisect, 64 commits of 20,000 files" "$full" "$resyncs" "$tested" "$(elapsed "$t0" "$t1")"
  head -1 "$work/bisect.txt"
  ;;
esac
