#!/usr/bin/env bash
# A Rust crate's suite, setup once and fork per proof (issue #46): a crate
# with 40-odd dependencies from crates.io (clap, serde, serde_json, regex,
# tempfile, ...) and 40 tests split into 4 proofs by name. The setup builds
# the crate and its tests (`cargo test --no-run --locked`) with the host's
# rustup toolchain shown read-only in the sandbox (`--mount-ro`); each
# proof forks it and runs its share (`cargo test --locked -- share_N`).
# crates.io's downloads are kept between runs in a cache (as the book's
# Rust chapter does), so every run after the first is warm.
# Baseline, in the same invocation: the same work by hand on the host — a
# fresh copy of the project, `cargo test --no-run --locked`, then the 4
# shares 2 at a time, with the same toolchain and a warm ~/.cargo.
# Figures (medians of the warm runs, RUNS runs in all):
#  1. rfs test --jobs 2 with its setup / by hand — target <= 1.2x;
#  2. whether any fork compiled something (`Compiling` in a proof's log:
#     with the home at one path, none does).
# Not a test: never run in CI. Needs root (overlayfs), a rustup toolchain
# and crates.io. Usage:
#   [RFS_BIN=path/to/rfs] [RUNS=3] scripts/bench-rust-suite.sh [WORKDIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/rfs-bench-rust.XXXXXX)}
mkdir -p "$work"
runs=${RUNS:-3}
source "$root/scripts/bench-lib.sh"
rfs=$(rfs_release)
export RFS_STATE_DIR="$work/state" RELAYFLOWS_SANDBOX_PROVIDER=local
toolchain=$(rustc --print sysroot)
[ -x "$toolchain/bin/cargo" ] || { echo "no cargo in $toolchain" >&2; exit 1; }

project() {
  local dir=$1
  [ -d "$dir/.git" ] && return
  mkdir -p "$dir/src" "$dir/proofs"
  cat > "$dir/Cargo.toml" <<'TOML'
[package]
name = "bench-crate"
version = "0.1.0"
edition = "2021"

[dependencies]
anyhow = "1"
clap = { version = "4", features = ["derive"] }
regex = "1"
serde = { version = "1", features = ["derive"] }
serde_json = "1"
tempfile = "3"
sha2 = "0.10"
TOML
  {
    echo 'use serde::{Deserialize, Serialize};'
    echo '#[derive(Serialize, Deserialize, Debug, PartialEq, clap::Parser)]'
    echo 'pub struct Item { #[arg(long)] pub name: String, #[arg(long)] pub n: u64 }'
    echo 'pub fn digest(s: &str) -> String { use sha2::Digest; format!("{:x}", sha2::Sha256::digest(s)) }'
    echo '#[cfg(test)] mod tests { use super::*;'
    for s in 1 2 3 4; do
      for i in $(seq 1 10); do
        echo "#[test] fn share_${s}_case_$i() { let it = Item { name: \"x$i\".into(), n: $i }; let j = serde_json::to_string(&it).unwrap(); assert_eq!(serde_json::from_str::<Item>(&j).unwrap(), it); assert!(regex::Regex::new(r\"^[0-9a-f]{64}\$\").unwrap().is_match(&digest(&j))); let d = tempfile::tempdir().unwrap(); std::fs::write(d.path().join(\"f\"), &j).unwrap(); }"
      done
    done
    echo '}'
  } > "$dir/src/lib.rs"
  printf '/target\n' > "$dir/.gitignore"
  (cd "$dir" && cargo generate-lockfile -q)
  printf 'proofs = "proofs"\nsetup = "proofs/_setup.rhai"\n' > "$dir/rfs.toml"
  local env='export PATH=/toolchains/rust/bin:$PATH'
  printf 'sandbox(#{ caches: #{ cargo: "~/.cargo/registry" } });\nsync_source();\nstep("build", "%s && cargo test --no-run --locked");\ncheckpoint("built");\n' "$env" > "$dir/proofs/_setup.rhai"
  for s in 1 2 3 4; do
    printf 'sandbox(#{ caches: #{ cargo: "~/.cargo/registry" } });\nsync_source();\nstep("test", "%s && cargo test --locked -- share_%s 2>&1");\n' "$env" "$s" > "$dir/proofs/share$s.rhai"
  done
  git -C "$dir" init -q
  git -C "$dir" add -A
  git -C "$dir" -c user.name=b -c user.email=b@b commit -qm "a crate and its proofs"
}

# The same work by hand on the host in a fresh copy of $1; prints seconds.
by_hand() {
  local dir="$work/by-hand" t0
  rm -rf "$dir"; cp -a "$1" "$dir"; rm -rf "$dir/target"
  t0=$(now)
  (cd "$dir" && cargo test -q --no-run --locked \
    && printf '%s\n' 1 2 3 4 | xargs -P 2 -I{} cargo test -q --locked -- share_{}) >/dev/null 2>&1
  elapsed "$t0" "$(now)"
}

project "$work/crate"
(cd "$work/crate" && cargo fetch -q --locked)
walls=() hands=() ratios=() compiled=0
for r in $(seq 1 "$runs"); do
  out="$work/out-$r"
  wall=$(timed_suite "$work/crate" "$out" --jobs 2 --mount-ro "$toolchain:/toolchains/rust")
  hand=$(by_hand "$work/crate")
  n=$(cat "$out"/proofs-*/steps/*-test.stdout.log | grep -c 'Compiling' || true)
  compiled=$((compiled + n))
  printf "run %s: rfs test with setup %.2f s; by hand on the host %.2f s; forks compiled %s crates\n" "$r" "$wall" "$hand" "$n"
  # Warm: the first run fills crates.io's cache; it is not counted.
  if [ "$r" -gt 1 ] || [ "$runs" -eq 1 ]; then
    walls+=("$wall"); hands+=("$hand"); ratios+=("$(ratio "$wall" "$hand")")
  fi
done
m() { printf '%s\n' "$@" | median; }
printf "Rust crate, setup once, 4 proofs, --jobs 2:  %6.2f s  by hand %6.2f s  ratio %sx (target <= 1.2x)\n" \
  "$(m "${walls[@]}")" "$(m "${hands[@]}")" "$(m "${ratios[@]}")"
echo "crates compiled again in forks, all runs: $compiled (0 expected)"
