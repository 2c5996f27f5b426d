#!/usr/bin/env bash
# Core benchmarks (issue #2), reported as ratios against named baselines
# measured in the same run:
#   1. sync_source on `local` (incl. in-sandbox verification) vs
#      `git archive <sha> | tar -x -C dir`, on a generated repository
#      (>= 20,000 files, >= 200 MB, nested dirs, a few large files);
#   2. 200 x step("x","true") vs 200 x `sh -c true` spawns;
#   3. peak RSS of a run syncing a repository holding a 1 GiB file
#      (target <= 64 MiB).
# Usage: scripts/bench-core.sh [WORKDIR]   (needs ~3 GB of free disk)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/rfs-bench.XXXXXX)}
mkdir -p "$work"
export RFS_STATE_DIR="$work/state"
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
rfs="${CARGO_TARGET_DIR:-$root/target}/release/rfs"
runs=${RUNS:-3}

source "$root/scripts/bench-lib.sh"

gen_repo() {
  local dir=$1
  [ -d "$dir/.git" ] && return
  mkdir -p "$dir"
  python3 - "$dir" <<'PY'
import os, sys, random
root = sys.argv[1]
rnd = random.Random(42)
n = 0
for a in range(20):
    for b in range(25):
        d = os.path.join(root, f"pkg{a:02d}", f"mod{b:02d}", "src")
        os.makedirs(d, exist_ok=True)
        for c in range(41):
            size = rnd.randint(1000, 9000)
            with open(os.path.join(d, f"file{c:03d}.txt"), "wb") as f:
                f.write(rnd.randbytes(size // 2).hex().encode()[:size])
            n += 1
os.makedirs(os.path.join(root, "assets"), exist_ok=True)
for i in range(4):
    with open(os.path.join(root, "assets", f"big{i}.bin"), "wb") as f:
        f.write(rnd.randbytes(25 * 1024 * 1024))
print(f"generated {n} small files + 4 x 25 MiB", file=sys.stderr)
PY
  echo marker > "$dir/reproducer-marker.txt"
  git -C "$dir" init -q -b main
  git -C "$dir" add -A
  git -C "$dir" -c user.name=bench -c user.email=b@b commit -qm bench
}

echo "== generating the benchmark repository in $work/repo"
gen_repo "$work/repo"
files=$(git -C "$work/repo" ls-files | wc -l)
bytes=$(du -sb --exclude=.git "$work/repo" | cut -f1)
sha=$(git -C "$work/repo" rev-parse HEAD)
echo "   $files files, $((bytes / 1024 / 1024)) MiB, commit $sha"

cat > "$work/sync.rhai" <<'RHAI'
sync_source();
RHAI
echo "== 1. sync_source (local, incl. verification) vs git archive | tar -x"
base=(); ours=(); syncms=()
for i in $(seq 1 "$runs"); do
  rm -rf "$work/extract"; mkdir -p "$work/extract"; sync
  t0=$(now); git -C "$work/repo" archive "$sha" | tar -x -C "$work/extract"; t1=$(now)
  base+=("$(elapsed "$t0" "$t1")")
  rm -rf "$work/extract"; sync
  out="$work/out-sync-$i"; rm -rf "$out"
  t0=$(now); (cd "$work/repo" && "$rfs" run -q "$work/sync.rhai" --out "$out" >/dev/null); t1=$(now)
  ours+=("$(elapsed "$t0" "$t1")")
  syncms+=("$(sync_seconds "$out/journal.jsonl")")
done
b=$(printf '%s\n' "${base[@]}" | median); o=$(printf '%s\n' "${ours[@]}" | median); s=$(printf '%s\n' "${syncms[@]}" | median)
echo "   baseline git archive | tar -x : ${b}s (median of $runs)"
echo "   rfs run (whole run: provision, sync, verify, teardown): ${o}s  ratio $(ratio "$o" "$b")x"
echo "   rfs sync_source alone (build+upload+verify, from the journal): ${s}s  ratio $(ratio "$s" "$b")x  (target <= 1.5x)"

echo "== 2. 200 x step(\"x\",\"true\") vs 200 x sh -c true"
{ echo 'sync_source();'; echo 'for i in 0..200 { step("x", "true"); }'; } > "$work/steps.rhai"
small="$work/small"; small_repo "$small"
base=(); ours=()
for i in $(seq 1 "$runs"); do
  t0=$(now); for _ in $(seq 1 200); do sh -c true; done; t1=$(now)
  base+=("$(elapsed "$t0" "$t1")")
  out="$work/out-steps-$i"; rm -rf "$out"
  (cd "$small" && "$rfs" run -q "$work/steps.rhai" --out "$out" >/dev/null)
  ours+=("$(steps_seconds "$out/journal.jsonl")")
done
b=$(printf '%s\n' "${base[@]}" | median); o=$(printf '%s\n' "${ours[@]}" | median)
echo "   baseline 200 x sh -c true: ${b}s"
echo "   rfs 200 steps (first step.start to last step.end): ${o}s  ratio $(ratio "$o" "$b")x  (target <= 1.5x)"

echo "== 3. peak RSS syncing a repository holding a 1 GiB file"
huge="$work/huge"
if [ ! -d "$huge/.git" ]; then
  mkdir -p "$huge"; head -c 1073741824 /dev/urandom > "$huge/huge.bin"; echo m > "$huge/small.txt"
  git -C "$huge" init -q -b main; git -C "$huge" add -A
  git -C "$huge" -c user.name=b -c user.email=b@b commit -qm huge
fi
out="$work/out-huge"; rm -rf "$out"
(cd "$huge" && /usr/bin/time -v "$rfs" run -q "$work/sync.rhai" --out "$out" >/dev/null 2>"$work/huge.time") || { cat "$work/huge.time"; exit 1; }
rss=$(awk -F: '/Maximum resident set size/ {gsub(/ /,"",$2); print $2}' "$work/huge.time")
echo "   peak RSS: $((rss / 1024)) MiB (target <= 64 MiB)"
