#!/usr/bin/env bash
# The book's screenshot of a report (book/src/report-screenshot.png): runs
# the terminal chapter's first example on `local` in a throwaway
# repository, plus a failing step, and photographs its report.html with
# headless Chromium (Debian's `chromium`; scripts/test.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cargo build --quiet
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git init -q "$work/repo"
cd "$work/repo"
echo "wordcount" > README
git add -A && git -c user.email=a@b -c user.name=rfs commit -qm init
{
  awk '/^```rhai$/{f=1;next} /^```/{if(f)exit} f' "$root/book/src/terminal.md"
  echo 'step("unit-tests", "echo running 3 tests; echo FAIL wordcount: expected 4, got 2; exit 1", #{ allow_failure: true });'
} > "$work/proof.rhai"
"$root/target/debug/rfs" run "$work/proof.rhai" --out "$work/out" -q || true
chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
  --virtual-time-budget=2000 --window-size=1100,1500 \
  --screenshot="$root/book/src/report-screenshot.png" "file://$work/out/report.html" 2>/dev/null
echo "wrote book/src/report-screenshot.png ($(stat -c %s "$root/book/src/report-screenshot.png") bytes)"
