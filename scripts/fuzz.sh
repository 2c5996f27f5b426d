#!/usr/bin/env bash
# Run the cargo-fuzz targets for a fixed budget each (not part of CI).
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 60, all)
# Needs cargo-fuzz (installed from crates.io when missing). Only a stable
# toolchain is required: RUSTC_BOOTSTRAP=1 unlocks the sanitizer flags
# cargo-fuzz uses. Each target starts from its committed seeds
# (fuzz/seeds/<target>/) and the corpus earlier runs grew
# (fuzz/corpus/<target>/, not committed). A crash or timeout leaves its
# input in fuzz/artifacts/<target>/: turn it into a regression test named
# after the bug, then fix it.
set -euo pipefail
cd "$(dirname "$0")/.."
budget="${1:-60}"
shift || true
all=(cwd_mapper journal_verifier report_parser tar_round_trip)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all[@]}"); fi
command -v cargo-fuzz >/dev/null || { echo "scripts/fuzz.sh: installing cargo-fuzz" >&2; cargo install --locked cargo-fuzz; }
export RUSTC_BOOTSTRAP=1
failed=()
summary=()
for t in "${targets[@]}"; do
  echo "== fuzz $t for ${budget}s" >&2
  mkdir -p "fuzz/corpus/$t" "fuzz/seeds/$t"
  log="$(mktemp)"
  # New inputs go to the first directory (the corpus); seeds stay as committed.
  if cargo fuzz run "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
    -max_total_time="$budget" -timeout=10 -rss_limit_mb=2048 2>&1 | tee "$log"; then
    summary+=("$t: $(grep -E '^Done [0-9]+ runs' "$log" | tail -1)")
  else
    failed+=("$t")
    summary+=("$t: FAILED (see fuzz/artifacts/$t/)")
  fi
  rm -f "$log"
done
printf 'scripts/fuzz.sh: %s\n' "${summary[@]}" >&2
if [ ${#failed[@]} -gt 0 ]; then
  echo "scripts/fuzz.sh: crashes or timeouts in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
  exit 1
fi
echo "scripts/fuzz.sh: no crashes or timeouts in ${#targets[@]} target(s) (${budget}s each)" >&2
