#!/usr/bin/env bash
# What each local sandbox's init (and its parent) costs while it lives:
# page tables (VmPTE) and memory (VmRSS, RssAnon), against the `rfs test`
# process that started them (the baseline, measured in the same run).
# Usage: scripts/bench-sandbox-init.sh [JOBS]   (builds the release binary)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${1:-8}"
cargo build --release --quiet
rfs="$PWD/target/release/rfs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git init -q "$work/repo"
mkdir "$work/repo/proofs"
for i in $(seq 1 "$jobs"); do echo 'step("s", "sleep 4");' >"$work/repo/proofs/p$i.rhai"; done
git -C "$work/repo" add -A
git -C "$work/repo" -c user.email=bench@rfs -c user.name=bench commit -qm proofs
(cd "$work/repo" && RFS_STATE_DIR="$work/state" "$rfs" test --jobs "$jobs" >/dev/null 2>&1) &
sleep 2.5
field() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
main=$(pgrep -f -x "$rfs test --jobs $jobs" | head -1)
n=0 pte=0 rss=0 anon=0
for q in $({ pgrep -f "^rfs-sandbox-(init|outer)" || true; pgrep -P "$main" || true; } | sort -u); do
  [ "$(readlink "/proc/$q/exe" 2>/dev/null)" = "$rfs" ] || continue
  [ "$q" = "$main" ] && continue
  n=$((n + 1)); pte=$((pte + $(field "$q" VmPTE))); rss=$((rss + $(field "$q" VmRSS))); anon=$((anon + $(field "$q" RssAnon)))
done
mpte=$(field "$main" VmPTE)
wait
[ "$n" -gt 0 ] || { echo "no sandbox processes seen" >&2; exit 1; }
echo "rfs test --jobs $jobs: $n init/parent processes"
echo "  each: VmPTE $((pte / n)) kB, VmRSS $((rss / n)) kB, RssAnon $((anon / n)) kB"
echo "  baseline rfs test: VmPTE $mpte kB; ratio per process $(awk -v a=$((pte / n)) -v b="$mpte" 'BEGIN { printf "%.2f", a / b }')x"
