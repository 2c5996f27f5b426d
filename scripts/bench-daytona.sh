#!/usr/bin/env bash
# Daytona benchmarks (issue #7), against the local Daytona-API server
# (tests/daytona-sim, release build), with the docker provider measured in
# the same run as the baseline for the sync:
#   1. HTTP requests per step: (requests of a run with N steps - requests
#      of the same run with none) / N, by route;
#   2. provisioning and teardown: round trips (requests from POST /sandbox
#      up to the first toolbox session, and from DELETE /sandbox to the
#      end) and their wall time as the server saw them;
#   3. sync_source of the benchmark repository (the generated one of
#      scripts/bench-docker.sh, or $2) on daytona vs docker.
# The server counts requests per route (test-only GET /__sim/requests).
# Needs root (the server builds namespaced sandboxes) and a Docker engine
# for the baseline.
# Usage: scripts/bench-daytona.sh [WORKDIR] [REPO]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/rfs-bench-daytona.XXXXXX)}
repo=${2:-$work/repo}
runs=${RUNS:-3}
steps=${STEPS:-20}
mkdir -p "$work"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p rfs -p rfs-daytona-sim
bin="${CARGO_TARGET_DIR:-$root/target}/release"
rfs="$bin/rfs"
source "$root/scripts/bench-lib.sh"

# The server, its URL and key.
"$bin/rfs-daytona-sim" > "$work/sim.env" 2> "$work/sim.err" &
sim=$!
trap 'kill "$sim" 2>/dev/null; wait "$sim" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do grep -q DAYTONA_API_KEY "$work/sim.env" 2>/dev/null && break; sleep 0.1; done
grep -q DAYTONA_API_KEY "$work/sim.env" || { cat "$work/sim.err" >&2; exit 1; }
set -a; source "$work/sim.env"; set +a
export RFS_STATE_DIR="$work/state-daytona"

# All requests so far, as JSON, without echoing the key.
requests() {
  python3 - "$DAYTONA_API_URL" <<'PY'
import json, os, sys, urllib.request
base = sys.argv[1].rsplit("/api", 1)[0]
req = urllib.request.Request(base + "/__sim/requests",
                             headers={"Authorization": "Bearer " + os.environ["DAYTONA_API_KEY"]})
print(urllib.request.urlopen(req).read().decode())
PY
}
# Run `rfs run` of script $1 from dir $2 with output $3; print the
# requests it made (JSON) to $3.requests.json.
run_counted() {
  local before; before=$(requests | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
  (cd "$2" && "$rfs" run -q --provider daytona "$1" --out "$3" >/dev/null)
  # (the counter's own requests are left out)
  requests | python3 -c 'import json,sys; print(json.dumps([r for r in json.load(sys.stdin)['"$before"':] if not r["route"].startswith("/__sim")]))' > "$3.requests.json"
}

small="$work/small"; small_repo "$small"

echo "== 1. HTTP requests per step (daytona, $steps x step(\"x\",\"true\"))"
echo 'sync_source();' > "$work/none.rhai"
{ echo 'sync_source();'; echo "for i in 0..$steps { step(\"x\", \"true\"); }"; } > "$work/steps.rhai"
rm -rf "$work/out-none" "$work/out-steps"
run_counted "$work/none.rhai" "$small" "$work/out-none"
run_counted "$work/steps.rhai" "$small" "$work/out-steps"
python3 - "$work/out-none.requests.json" "$work/out-steps.requests.json" "$steps" <<'PY'
import json, sys, collections
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2])); n = int(sys.argv[3])
# Queries that change the call (follow) are kept; per-run ones (paths) are not.
q = lambda r: "?" + r["query"] if r["query"].startswith("follow") else ""
count = lambda rs: collections.Counter((r["method"], r["route"] + q(r)) for r in rs)
ca, cb = count(a), count(b)
print(f"   requests: {len(b)} with {n} steps, {len(a)} without -> {(len(b)-len(a))/n:.2f} per step")
for k in sorted(cb, key=lambda k: -(cb[k]-ca.get(k, 0))):
    d = cb[k] - ca.get(k, 0)
    if d:
        print(f"     {d/n:5.2f}/step  {k[0]:6} {k[1]}")
PY
echo "   wall per step: $(awk -v s="$(steps_seconds "$work/out-steps/journal.jsonl")" -v n="$steps" 'BEGIN{printf "%.3f", s/n}')s"

echo "== 2. provisioning and teardown (round trips, server-side wall time; median of $runs)"
echo 'let id = sandbox().id;' > "$work/provision.rhai"
for i in $(seq 1 "$runs"); do
  out="$work/out-prov-$i"; rm -rf "$out"
  t0=$(now); run_counted "$work/provision.rhai" "$small" "$out"; t1=$(now)
  echo "$(elapsed "$t0" "$t1")" > "$out.wall"
done
python3 - "$work" "$runs" <<'PY'
import json, sys, statistics
work, runs = sys.argv[1], int(sys.argv[2])
prov, tear, wall = [], [], []
for i in range(1, runs + 1):
    rs = json.load(open(f"{work}/out-prov-{i}.requests.json"))
    c = next(j for j, r in enumerate(rs) if r["method"] == "POST" and r["route"] == "/sandbox")
    h = next(j for j, r in enumerate(rs) if r["route"].endswith("/user-home-dir"))
    d = next(j for j, r in enumerate(rs) if r["method"] == "DELETE" and r["route"] == "/sandbox/{}")
    prov.append((h - c + 1, rs[h]["at_ms"] - rs[c]["at_ms"]))
    tear.append((len(rs) - d, rs[-1]["at_ms"] - rs[d]["at_ms"]))
    wall.append(float(open(f"{work}/out-prov-{i}.wall").read()))
med = lambda xs: statistics.median(xs)
print(f"   provision: {med([p[0] for p in prov])} round trips (create .. toolbox home), {med([p[1] for p in prov])} ms")
print(f"   teardown:  {med([t[0] for t in tear])} round trips (DELETE .. verified gone), {med([t[1] for t in tear])} ms")
print(f"   whole rfs run (provision + verified teardown, process start incl.): {med(wall):.3f}s")
PY

echo "== 3. sync_source of the benchmark repository: daytona vs docker (same run)"
if [ ! -d "$repo/.git" ]; then
  mkdir -p "$repo"
  python3 - "$repo" <<'PY'
import os, sys, random
r = random.Random(7); root = sys.argv[1]
for a in range(40):
    d = os.path.join(root, f"d{a:02d}"); os.makedirs(d, exist_ok=True)
    for b in range(100):
        open(os.path.join(d, f"f{b:03d}.txt"), "w").write(r.randbytes(2000).hex())
PY
  git -C "$repo" init -q -b main; git -C "$repo" add -A
  git -C "$repo" -c user.name=b -c user.email=b@b commit -qm bench
fi
echo "   repository: $(git -C "$repo" ls-files | wc -l) files, $(du -sm --exclude=.git "$repo" | cut -f1) MiB"
echo 'sync_source();' > "$work/sync.rhai"
bash "$root/scripts/docker-test-image.sh" >/dev/null
dy=(); dk=()
for i in $(seq 1 "$runs"); do
  out="$work/out-ysync-$i"; rm -rf "$out"
  run_counted "$work/sync.rhai" "$repo" "$out"
  dy+=("$(sync_seconds "$out/journal.jsonl")")
  out="$work/out-ksync-$i"; rm -rf "$out"
  (cd "$repo" && RFS_STATE_DIR="$work/state-docker" RFS_DOCKER_IMAGE=rfs-test-busybox:latest \
    "$rfs" run -q --provider docker "$work/sync.rhai" --out "$out" >/dev/null)
  dk+=("$(sync_seconds "$out/journal.jsonl")")
done
y=$(printf '%s\n' "${dy[@]}" | median); k=$(printf '%s\n' "${dk[@]}" | median)
python3 - "$work/out-ysync-1/journal.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e["kind"] == "source.verify":
        p = e["payload"]
        print(f"   daytona transfer: {p.get('compression')}, {p.get('archive_bytes')} archive bytes -> {p.get('wire_bytes')} on the wire")
PY
echo "   docker  sync_source (build+upload+verify): ${k}s (median of $runs) = baseline"
echo "   daytona sync_source (build+upload+verify): ${y}s  ratio $(ratio "$y" "$k")x vs docker"
