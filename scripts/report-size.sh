#!/usr/bin/env bash
# The size of report.html (and EVIDENCE.md) for a run of N steps
# (default 200) on `local`: the target is under 1 MB plus recordings.
# Prints the sizes and their ratio to the journal's, the baseline in the
# same run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
steps=${1:-200}
cargo build --release --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git init -q "$work/repo"
cd "$work/repo"
echo x > f && git add -A && git -c user.email=a@b -c user.name=rfs commit -qm init
cat > "$work/proof.rhai" <<RHAI
for i in 1..=$steps {
    step("step-" + i, "seq 1 40; echo 'step " + i + " warning' >&2");
}
RHAI
"$root/target/release/rfs" run "$work/proof.rhai" --out "$work/out" -q > /dev/null 2>&1
size() { stat -c %s "$work/out/$1"; }
j=$(size journal.jsonl); r=$(size report.html); e=$(size EVIDENCE.md)
awk -v n="$steps" -v j="$j" -v r="$r" -v e="$e" 'BEGIN {
  printf "%d steps: report.html %.0f KiB (%.2fx the journal), EVIDENCE.md %.0f KiB (%.2fx), journal.jsonl %.0f KiB\n",
    n, r/1024, r/j, e/1024, e/j, j/1024
  if (r >= 1048576) { print "report.html is over 1 MB" > "/dev/stderr"; exit 1 }
}'
