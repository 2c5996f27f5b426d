#!/usr/bin/env bash
# Developer speed (#33): the time to rebuild and re-run one test after
# touching a CLI file, a provider file and an evidence file, for this
# checkout and, as the baseline in the same run, another commit
# (default: c031d48, the last commit before the workspace split).
#
#   scripts/bench-dev-speed.sh [BASELINE_COMMIT] [ROUNDS]
#
# The baseline is checked out in a worktree with its own target dir
# (removed at the end). Rounds alternate between the two trees so that a
# busy machine slows both alike; the figures are medians, and each line
# gives the ratio of this checkout to the baseline.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=${1:-c031d48}
rounds=${2:-3}
work=$(mktemp -d /tmp/rfs-devspeed.XXXXXX)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add -q --detach "$work/base" "$base"

# The file of each kind in each layout (the workspace split moved them).
pick() { # tree kind
  local t=$1 k=$2
  case $k in
    cli) echo "$t/src/cli/mod.rs" ;;
    provider) [ -d "$t/crates/sandbox" ] && echo "$t/crates/sandbox/src/provider/local/commands.rs" || echo "$t/src/provider/local/commands.rs" ;;
    evidence)
      if [ -d "$t/crates/evidence/src/journal/fold" ]; then echo "$t/crates/evidence/src/journal/fold/mod.rs"
      elif [ -d "$t/crates/evidence" ]; then echo "$t/crates/evidence/src/journal/fold.rs"
      else echo "$t/src/journal/summary.rs"; fi ;;
  esac
}
run_test() { (cd "$1" && cargo test -q --test cli_conventions >/dev/null 2>&1); }
timed() { local s e; s=$(date +%s.%N); "$@"; e=$(date +%s.%N); echo "$e - $s" | bc; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "warming both trees (a full build of the test each)..." >&2
run_test "$root"; run_test "$work/base"
declare -A t
for k in cli provider evidence; do
  for r in $(seq "$rounds"); do
    for tree in "$root" "$work/base"; do
      f=$(pick "$tree" $k)
      echo "// touched $(date +%s%N)" >> "$f"
      t[$tree,$k]+="$(timed run_test "$tree")"$'\n'
      # undo the edit, then rebuild outside the timing so the next round
      # starts from a built tree
      sed -i '$d' "$f"; run_test "$tree"
    done
  done
done
printf '%-10s %12s %12s %8s\n' touched "this (s)" "baseline (s)" ratio
for k in cli provider evidence; do
  a=$(printf '%s' "${t[$root,$k]}" | median); b=$(printf '%s' "${t[$work/base,$k]}" | median)
  printf '%-10s %12.1f %12.1f %8.2f\n' $k "$a" "$b" "$(echo "$a / $b" | bc -l)"
done
