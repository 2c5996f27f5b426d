#!/usr/bin/env bash
# Per-step time on Daytona against added network latency (issue #24): the
# local Daytona-API server (tests/daytona-sim, release build) adds
# LATENCY ms to every HTTP response and WebSocket frame; for each latency
# a run of STEPS x step("x","true") is timed (first step.start to last
# step.end in the journal) and its HTTP requests per step counted.
# Prints per-step wall time, its ratio to the round trip (the target is
# at most 2.5x), and requests per step.
# Needs root (the server builds namespaced sandboxes).
# RFS_DAYTONA_STEP_AGENT=off measures the fallback (a session per step);
# BENCH_PROFILE=debug uses debug builds (default release).
# Usage: scripts/bench-daytona-latency.sh [LATENCIES...]   (default 0 25 50 100)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/rfs-bench-latency.XXXXXX)
trap 'kill "${sim:-}" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
steps=${STEPS:-20}
latencies=("$@"); [ ${#latencies[@]} -gt 0 ] || latencies=(0 25 50 100)
profile=${BENCH_PROFILE:-release}
if [ "$profile" = release ]; then flag=--release; else flag=; fi
cargo build $flag --quiet --manifest-path "$root/Cargo.toml" -p rfs -p rfs-daytona-sim
bin="${CARGO_TARGET_DIR:-$root/target}/$profile"
source "$root/scripts/bench-lib.sh"
small="$work/repo"; small_repo "$small"
{ echo 'sync_source();'; echo "for i in 0..$steps { step(\"x\", \"true\"); }"; } > "$work/steps.rhai"
printf "%-8s %-14s %-16s %s\n" "latency" "per step" "x round trip" "requests/step"
for ms in "${latencies[@]}"; do
  DAYTONA_SIM_LATENCY_MS=$ms DAYTONA_SIM_FRAME_LATENCY_MS=$ms "$bin/rfs-daytona-sim" > "$work/sim.env" 2> "$work/sim.err" &
  sim=$!
  for _ in $(seq 1 100); do grep -q DAYTONA_API_KEY "$work/sim.env" 2>/dev/null && break; sleep 0.1; done
  ( set -a; source "$work/sim.env"; set +a
    export RFS_STATE_DIR="$work/state"
    base=${DAYTONA_API_URL%/api}
    count() { python3 -c 'import json,os,sys,urllib.request
r=urllib.request.Request(sys.argv[1]+"/__sim/requests",headers={"Authorization":"Bearer "+os.environ["DAYTONA_API_KEY"]})
print(len([x for x in json.load(urllib.request.urlopen(r)) if not x["route"].startswith("/__sim")]))' "$base"; }
    out="$work/out-$ms"
    (cd "$small" && "$bin/rfs" run -q --provider daytona "$work/steps.rhai" --out "$out" >/dev/null)
    before=$(count)
    # Requests of the steps alone: a second run without steps.
    (cd "$small" && echo 'sync_source();' > "$work/none.rhai" && "$bin/rfs" run -q --provider daytona "$work/none.rhai" --out "$out-none" >/dev/null)
    after=$(count)
    secs=$(steps_seconds "$out/journal.jsonl")
    python3 - "$ms" "$secs" "$steps" "$before" "$after" <<'PY'
import sys
ms, secs, n, with_steps, total = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
none = total - with_steps
per = secs / n * 1000
rt = f"{per/ms:.1f}x" if ms else "-"
print(f"{int(ms):>4} ms  {per:8.1f} ms     {rt:>8}          {(with_steps - none)/n:.2f}")
PY
  )
  kill "$sim"; wait "$sim" 2>/dev/null || true
done
