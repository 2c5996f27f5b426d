#!/usr/bin/env bash
# Docker benchmarks (issue #4), as ratios against baselines measured in the
# same run, on the local test image:
#   1. sync_source on docker (incl. in-container verification) vs
#      `git archive <sha> | docker cp - <ctr>:<dir>`, on the generated
#      repository of scripts/bench-core.sh (or any repo given as $2);
#   2. 100 x step("x","true") vs 100 x `docker exec <ctr> true` (CLI);
#   3. provisioning + teardown per run (rfs run of a script that only
#      provisions), and the provider-level exec/create/destroy
#      micro-benchmark (`cargo bench --bench docker`).
# Usage: scripts/bench-docker.sh [WORKDIR] [REPO]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/rfs-bench-docker.XXXXXX)}
repo=${2:-$work/repo}
runs=${RUNS:-3}
mkdir -p "$work"
export RFS_STATE_DIR="$work/state-docker"
export RFS_DOCKER_IMAGE=rfs-test-busybox:latest
bash "$root/scripts/docker-test-image.sh" >/dev/null
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
rfs="${CARGO_TARGET_DIR:-$root/target}/release/rfs"
source "$root/scripts/bench-lib.sh"

if [ ! -d "$repo/.git" ]; then
  echo "== generating a repository (scripts/bench-core.sh makes the big one)"
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
sha=$(git -C "$repo" rev-parse HEAD)
echo "   repository: $(git -C "$repo" ls-files | wc -l) files, $(du -sm --exclude=.git "$repo" | cut -f1) MiB"

ctr=$(docker run -d --label relayflows/bench=1 "$RFS_DOCKER_IMAGE" sleep 3600)
trap 'docker rm -f "$ctr" >/dev/null 2>&1 || true' EXIT

echo "== 1. sync_source (docker, incl. verification) vs git archive | docker cp -"
echo 'sync_source();' > "$work/sync.rhai"
base=(); ours=()
for i in $(seq 1 "$runs"); do
  docker exec "$ctr" sh -c "rm -rf /tmp/x$i && mkdir -p /tmp/x$i"
  t0=$(now); git -C "$repo" archive "$sha" | docker cp - "$ctr:/tmp/x$i"; t1=$(now)
  base+=("$(elapsed "$t0" "$t1")")
  out="$work/out-dsync-$i"; rm -rf "$out"
  (cd "$repo" && "$rfs" run -q --provider docker "$work/sync.rhai" --out "$out" >/dev/null)
  ours+=("$(sync_seconds "$out/journal.jsonl")")
done
b=$(printf '%s\n' "${base[@]}" | median); o=$(printf '%s\n' "${ours[@]}" | median)
echo "   baseline git archive | docker cp - : ${b}s (median of $runs; no verification)"
echo "   rfs sync_source (build+upload+verify, from the journal): ${o}s  ratio $(ratio "$o" "$b")x  (target <= 1.3x)"

echo "== 2. 100 x step(\"x\",\"true\") vs 100 x docker exec <ctr> true"
{ echo 'sync_source();'; echo 'for i in 0..100 { step("x", "true"); }'; } > "$work/steps.rhai"
small="$work/small"; small_repo "$small"
base=(); ours=()
for i in $(seq 1 "$runs"); do
  t0=$(now); for _ in $(seq 1 100); do docker exec "$ctr" true; done; t1=$(now)
  base+=("$(elapsed "$t0" "$t1")")
  out="$work/out-dsteps-$i"; rm -rf "$out"
  (cd "$small" && "$rfs" run -q --provider docker "$work/steps.rhai" --out "$out" >/dev/null)
  ours+=("$(steps_seconds "$out/journal.jsonl")")
done
b=$(printf '%s\n' "${base[@]}" | median); o=$(printf '%s\n' "${ours[@]}" | median)
echo "   baseline 100 x docker exec (CLI): ${b}s"
echo "   rfs 100 steps (first step.start to last step.end): ${o}s  ratio $(ratio "$o" "$b")x  (target <= 1.0x)"

echo "== 3. provisioning + teardown per run"
echo 'let id = sandbox().id;' > "$work/provision.rhai"
walls=()
for i in $(seq 1 "$runs"); do
  out="$work/out-dprov-$i"; rm -rf "$out"
  t0=$(now); (cd "$small" && "$rfs" run -q --provider docker "$work/provision.rhai" --out "$out" >/dev/null); t1=$(now)
  walls+=("$(elapsed "$t0" "$t1")")
done
echo "   rfs run (provision, verified teardown): $(printf '%s\n' "${walls[@]}" | median)s per run"
echo "   provider micro-benchmark:"
cargo bench --quiet --manifest-path "$root/Cargo.toml" --bench docker -- 100 5 | sed 's/^/   /'
