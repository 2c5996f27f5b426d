#!/usr/bin/env bash
# Core benchmarks (issues #2 and #12), reported as ratios against baselines
# measured in the same run, interleaved (baseline and rfs alternate, the
# order flipping every run), on one machine:
#   1. sync_source (incl. the in-sandbox verification) vs
#      `git archive <sha> | tar -x -C dir` on `local` (and vs
#      `git archive <sha> | docker cp - <ctr>:<dir>` on `docker` when a
#      Docker engine and the test image are available), for three
#      repository shapes:
#        loose  >= 20,000 files, >= 200 MB, nested, 4 x 25 MiB files,
#               loose objects (as right after `git add`/`commit`);
#        packed the same history after `git gc` (one pack);
#        huge   one 1 GiB file (stored in a pack by `git add`);
#      in three regimes:
#        cache  writes stay in the page cache (time until extracted);
#        disk   time until the extracted tree is on disk (`sync` after the
#               baseline; a `sync` step right after sync_source in rfs), the
#               regime of a throttled disk;
#        memory both extract into a tmpfs ($SHM, default /dev/shm: the
#               baseline's directory and rfs's state directory), so no
#               disk is involved and the figure is the CPU cost alone;
#      plus the peak RSS of every rfs run (target <= 64 MiB);
#   2. 200 x step("x","true") vs 200 x `sh -c true` (STEPS=1 only).
# On docker the regimes are the baseline's destination instead: `cache`,
# the container's writable layer, and `volume`, a volume as rfs's sandbox
# home is (DOCKER_REGIMES="cache volume").
# rfs's figure is the sync phase from its journal (source.resolved to
# source.pin, or to the end of the `sync` step): provisioning included,
# process start-up and teardown not.
# Writes $work/samples.tsv (every sample), the table $TABLE (medians and
# ratios; default book/src/performance-table.md, included by the book's
# performance chapter) and the chart $SVG (default
# book/src/performance-sync.svg); a partial run (SHAPES, REGIMES or
# PROVIDERS set) defaults both to $work, leaving the book's alone.
# Not a test: never run in CI.
# Usage: scripts/bench-core.sh [WORKDIR]   (needs ~4 GB of free disk)
#   RUNS=3 SHAPES="loose packed huge" REGIMES="cache disk" DOCKER=auto
#   PROVIDERS="local docker" (docker only when an engine is there)
#   RFS=/path/to/rfs or RFS_BIN=/path/to/rfs, as in bench-isolation.sh
#   (default: release build of this checkout)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/rfs-bench.XXXXXX)}
mkdir -p "$work"
export RFS_STATE_DIR="$work/state"
runs=${RUNS:-3}
shapes=${SHAPES:-loose packed huge}
regimes=${REGIMES:-cache disk memory}
shm=$(mktemp -d "${SHM:-/dev/shm}/rfs-bench.XXXXXX")
cleanup() { rm -rf "$shm"; [ -n "${ctr:-}" ] && docker rm -f -v "$ctr" >/dev/null 2>&1; true; }
trap cleanup EXIT
providers=${PROVIDERS:-local docker}
# Only a full run (no SHAPES, REGIMES or PROVIDERS given) writes the
# book's table and chart by default; a partial run writes them in $work.
out=$root/book/src
if [ -n "${SHAPES:-}${REGIMES:-}${PROVIDERS:-}" ]; then out=$work; fi
svg=${SVG:-$out/performance-sync.svg}
table=${TABLE:-$out/performance-table.md}
RFS=${RFS:-${RFS_BIN:-}}
if [ -z "${RFS:-}" ]; then
  cargo build --release --quiet --manifest-path "$root/Cargo.toml"
  RFS="${CARGO_TARGET_DIR:-$root/target}/release/rfs"
fi
rfs=$RFS

source "$root/scripts/bench-lib.sh"

gen_huge() {
  local dir=$1
  [ -d "$dir/.git" ] && return
  mkdir -p "$dir"; head -c 1073741824 /dev/urandom > "$dir/huge.bin"; echo m > "$dir/small.txt"
  git -C "$dir" init -q -b main; git -C "$dir" add -A
  git -C "$dir" -c user.name=b -c user.email=b@b commit -qm huge
}

echo "== repositories in $work"
gen_repo "$work/loose"
case " $shapes " in *" packed "*) gen_packed "$work/loose" "$work/packed" ;; esac
case " $shapes " in *" huge "*) gen_huge "$work/huge" ;; esac
for s in $shapes; do
  r="$work/$s"
  printf '   %-6s %6s files, %5s MiB tree, .git %5s MiB, %s loose objects\n' "$s" \
    "$(git -C "$r" ls-files | wc -l)" "$(du -sm --exclude=.git "$r" | cut -f1)" \
    "$(du -sm "$r/.git" | cut -f1)" "$(git -C "$r" count-objects | cut -d' ' -f1)"
done

docker_ok=0
if [ "${DOCKER:-auto}" != 0 ] && docker info >/dev/null 2>&1; then
  bash "$root/scripts/docker-test-image.sh" >/dev/null && docker_ok=1
fi

printf 'sync_source();\n' > "$work/sync-cache.rhai"
printf 'sync_source();\nstep("flush", "sync");\n' > "$work/sync-disk.rhai"
samples="$work/samples.tsv"
printf 'shape\tprovider\tregime\trun\tbaseline_s\trfs_s\trfs_wall_s\trss_kib\n' > "$samples"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

baseline_local() { # shape regime
  local d="$work/extract"; [ "$2" = memory ] && d="$shm/extract"
  rm -rf "$d"; mkdir -p "$d"; sync
  local t0 t1; t0=$(now)
  git -C "$work/$1" archive "$(git -C "$work/$1" rev-parse HEAD)" | tar -x -C "$d"
  [ "$2" = disk ] && sync
  t1=$(now); elapsed "$t0" "$t1"
  rm -rf "$d"
}

# Docker's regimes name the baseline's destination: `cache`, a directory
# in the container's writable layer (the storage driver's, fuse-overlayfs
# on this machine); `volume`, a directory on a volume, the kind of place
# rfs's sandbox home is.
baseline_docker() { # shape regime
  local d=/tmp/x; [ "$2" = volume ] && d=/vol/x
  docker exec "$ctr" sh -c "rm -rf $d && mkdir -p $d"
  local t0 t1; t0=$(now)
  git -C "$work/$1" archive "$(git -C "$work/$1" rev-parse HEAD)" | docker cp - "$ctr:$d"
  t1=$(now); elapsed "$t0" "$t1"
  docker exec "$ctr" rm -rf "$d"
}

# Prints "sync_seconds wall_seconds rss_kib".
rfs_run() { # shape provider regime run
  local out="$work/out-$1-$2-$3-$4" t0 t1 script=$3 state=$RFS_STATE_DIR
  [ "$2" = docker ] && script=cache   # docker's regimes are the baseline's
  [ "$3" = memory ] && { script=cache; state="$shm/state"; }
  rm -rf "$out"; sync
  t0=$(now)
  (cd "$work/$1" && RFS_STATE_DIR="$state" /usr/bin/time -f '%M' -o "$work/rss" "$rfs" run -q --provider "$2" \
    "$work/sync-$script.rhai" --out "$out" >/dev/null 2>"$work/rfs.err") \
    || { cat "$work/rfs.err" >&2; exit 1; }
  t1=$(now)
  echo "$(phase_seconds "$out/journal.jsonl") $(elapsed "$t0" "$t1") $(tail -1 "$work/rss")"
}

measure() { # shape provider regime
  local i b r
  for i in $(seq 1 "$runs"); do
    if [ $((i % 2)) = 1 ]; then
      b=$(baseline_"$2" "$1" "$3"); r=$(rfs_run "$1" "$2" "$3" "$i")
    else
      r=$(rfs_run "$1" "$2" "$3" "$i"); b=$(baseline_"$2" "$1" "$3")
    fi
    read -r rs rw rss <<<"$r"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$i" "$b" "$rs" "$rw" "$rss" | tee -a "$samples"
  done
}

echo "== 1. sync_source vs git archive | tar -x ($runs paired runs each)"
case " $providers " in *" local "*)
  for s in $shapes; do
    for g in $regimes; do measure "$s" local "$g"; done
  done ;;
esac
if [ "$docker_ok" = 1 ] && case " $providers " in *" docker "*) true ;; *) false ;; esac; then
  export RFS_DOCKER_IMAGE=rfs-test-busybox:latest
  ctr=$(docker run -d -v /vol --label relayflows/bench=1 "$RFS_DOCKER_IMAGE" sleep 3600)
  for s in $shapes; do
    for g in ${DOCKER_REGIMES:-cache volume}; do measure "$s" docker "$g"; done
  done
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 "$root/scripts/bench-chart.py" "$samples" "$table" "$svg" \
  "$(nproc) cores, load average $load_before before / $load_after after, $(date -u +%Y-%m-%d)"
cat "$table"

if [ "${STEPS:-0}" = 1 ]; then
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
fi
