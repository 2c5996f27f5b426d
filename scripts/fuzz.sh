#!/usr/bin/env bash
# Run every cargo-fuzz target for a fixed budget (not part of CI).
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
# Needs cargo-fuzz (`cargo install cargo-fuzz`). Only a stable toolchain is
# required: RUSTC_BOOTSTRAP=1 unlocks the sanitizer flags cargo-fuzz uses.
# A crash leaves its input in fuzz/artifacts/<target>/; turn it into a
# regression test named after the bug before fixing it.
set -euo pipefail
cd "$(dirname "$0")/.."
budget="${1:-60}"
command -v cargo-fuzz >/dev/null || { echo "scripts/fuzz.sh: installing cargo-fuzz" >&2; cargo install --locked cargo-fuzz; }
export RUSTC_BOOTSTRAP=1
targets=(cwd_mapper journal_verifier report_parser tar_round_trip)
failed=()
for t in "${targets[@]}"; do
  echo "== fuzz $t for ${budget}s" >&2
  mkdir -p "fuzz/corpus/$t"
  if ! cargo fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$budget" -rss_limit_mb=2048; then
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "scripts/fuzz.sh: crashes in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
  exit 1
fi
echo "scripts/fuzz.sh: no crashes in ${#targets[@]} targets (${budget}s each)" >&2
