#!/usr/bin/env bash
# Re-sync benchmark (issue #9 item 5): in one run, sync_source() of the
# 20,000-file benchmark repository, then sync_source(#{ rev }) of a commit
# that changes one file. Reported per run as the ratio
#   re-sync phase / full sync phase   (target <= 0.05x)
# both from the run's journal: full = first source.resolved to first
# source.pin (provisioning included); re-sync = second source.resolved to
# second source.pin (diff, in-sandbox listing, delta build, upload, apply,
# in-sandbox verification). Both halves run in the same process on the
# same machine, back to back, so the ratio is paired by construction.
# The change commit is written beside HEAD (refs/heads/bench-change), so
# the working tree stays clean and HEAD is the full-sync commit.
# Not a test: never run in CI.
# Usage: scripts/bench-resync.sh [WORKDIR]
#   RUNS=5 SHAPES="loose packed" PROVIDERS="local docker"
#   RFS=/path/to/rfs or RFS_BIN=/path/to/rfs, as in bench-isolation.sh
#   (default: release build of this checkout)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/rfs-bench.XXXXXX)}
mkdir -p "$work"
export RFS_STATE_DIR="$work/state"
runs=${RUNS:-5}
shapes=${SHAPES:-loose packed}
providers=${PROVIDERS:-local docker}
RFS=${RFS:-${RFS_BIN:-}}
if [ -z "${RFS:-}" ]; then
  cargo build --release --quiet --manifest-path "$root/Cargo.toml"
  RFS="${CARGO_TARGET_DIR:-$root/target}/release/rfs"
fi
rfs=$RFS

source "$root/scripts/bench-lib.sh"

# refs/heads/bench-change: HEAD with one small file's content changed.
change_commit() {
  local dir=$1 f=pkg07/mod13/src/file021.txt
  git -C "$dir" rev-parse -q --verify refs/heads/bench-change >/dev/null && return
  local blob tree idx
  blob=$(printf 'changed by bench-resync\n' | git -C "$dir" hash-object -w --stdin)
  idx=$(mktemp); rm -f "$idx"
  GIT_INDEX_FILE=$idx git -C "$dir" read-tree HEAD
  GIT_INDEX_FILE=$idx git -C "$dir" update-index --cacheinfo "100644,$blob,$f"
  tree=$(GIT_INDEX_FILE=$idx git -C "$dir" write-tree); rm -f "$idx"
  git -C "$dir" update-ref refs/heads/bench-change \
    "$(git -C "$dir" -c user.name=bench -c user.email=b@b commit-tree "$tree" -p HEAD -m change)"
}

echo "== repositories in $work"
gen_repo "$work/loose"
case " $shapes " in *" packed "*) gen_packed "$work/loose" "$work/packed" ;; esac
for s in $shapes; do change_commit "$work/$s"; done

if case " $providers " in *" docker "*) true ;; *) false ;; esac; then
  if docker info >/dev/null 2>&1 && bash "$root/scripts/docker-test-image.sh" >/dev/null; then
    export RFS_DOCKER_IMAGE=rfs-test-busybox:latest
  else
    echo "   (no Docker engine: docker skipped)"; providers=${providers//docker/}
  fi
fi

printf 'sync_source();\nsync_source(#{ rev: "bench-change" });\n' > "$work/resync.rhai"

# Prints "full_s resync_s shipped" from a journal.
phases() {
  python3 -c 'import json,sys
from datetime import datetime
f=lambda s: datetime.strptime(s,"%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
res=[]; pins=[]; shipped=None
for e in map(json.loads, open(sys.argv[1])):
    if e["kind"]=="source.resolved": res.append(f(e["ts"]))
    if e["kind"]=="source.pin": pins.append(f(e["ts"]))
    if e["kind"]=="source.resync": shipped=e["payload"]["shipped"]
assert len(res)==2 and len(pins)==2 and shipped is not None, "no re-sync in the journal"
print(round(pins[0]-res[0],3), round(pins[1]-res[1],3), shipped)' "$1"
}

samples="$work/resync-samples.tsv"
printf 'shape\tprovider\trun\tfull_s\tresync_s\tratio\tshipped\n' > "$samples"
echo "== re-sync after a one-file change vs the full sync, same run ($runs runs each)"
for s in $shapes; do
  for p in $providers; do
    for i in $(seq 1 "$runs"); do
      out="$work/out-resync-$s-$p-$i"; rm -rf "$out"; sync
      (cd "$work/$s" && "$rfs" run -q --provider "$p" "$work/resync.rhai" --out "$out" \
        >/dev/null 2>"$work/rfs.err") || { cat "$work/rfs.err" >&2; exit 1; }
      read -r full re shipped <<<"$(phases "$out/journal.jsonl")"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$p" "$i" "$full" "$re" \
        "$(awk -v a="$re" -v b="$full" 'BEGIN {printf "%.4f", a/b}')" "$shipped" | tee -a "$samples"
    done
  done
done

echo "== medians (ratio = median of per-run re-sync/full)"
python3 - "$samples" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
groups = {}
for r in rows:
    groups.setdefault((r["shape"], r["provider"]), []).append(r)
print("| shape | provider | runs | full sync s | re-sync s | ratio | entries shipped |")
print("|---|---|---|---|---|---|---|")
for (s, p), rs in groups.items():
    med = lambda k: statistics.median(float(r[k]) for r in rs)
    print(f"| {s} | {p} | {len(rs)} | {med('full_s'):.2f} | {med('resync_s'):.3f} | {med('ratio'):.3f}x | {rs[0]['shipped']} |")
PY
