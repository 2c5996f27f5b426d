#!/usr/bin/env bash
# A real Python project's suite, setup once and fork per proof (issue #36):
# pallets/itsdangerous 2.2.0 (its sdist from PyPI, 297 pytest tests) split
# into 8 proofs, each running its share of the tests with pytest's real
# --junitxml collected into the suite's JUnit. The setup makes the
# virtualenv once (`pip install pytest freezegun .` from a local wheel
# folder committed with the project: no network inside the sandbox).
# Figures, on local with --jobs 2, medians of RUNS runs:
#  1. the suite with its setup: wall time against setup + the proofs' own
#     time / jobs (each from its journal) — target <= 1.5x;
#  2. the same 8 proofs each making its own virtualenv (what a user did
#     before setups existed): wall time, and the ratio of 1. to it;
#  3. the same work by hand on the host, no rfs (issue #46): a fresh
#     virtualenv, the same pip install, the 8 pytest shares 2 at a time —
#     the ratio of 1. to it, warm (every run after the first) — target
#     <= 1.1x;
#  4. the JUnit test cases `rfs test --junit` reports (297 expected).
# Not a test: never run in CI. Needs root (overlayfs) and PyPI (to fetch
# the sdist and the wheels once, with the system's python3 and pip).
# Usage: scripts/bench-python-suite.sh [WORKDIR]   RUNS=3 RFS_BIN=path/to/rfs
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/rfs-bench-python.XXXXXX)}
mkdir -p "$work"
runs=${RUNS:-3}
source "$root/scripts/bench-lib.sh"
# RFS_BIN: measure that binary instead of building the release one.
rfs=$(rfs_release)
export RFS_STATE_DIR="$work/state" RELAYFLOWS_SANDBOX_PROVIDER=local
py=/usr/bin/python3

# The project, its wheels, and the proofs; $1 is the repository, $2
# whether proofs make their own virtualenv (no setup).
project() {
  local dir=$1 own_venv=$2
  [ -d "$dir/.git" ] && return
  if [ ! -d "$work/dl/wheels" ]; then
    mkdir -p "$work/dl"
    "$py" -m pip download -q --no-deps --no-binary :all: itsdangerous==2.2.0 -d "$work/dl"
    "$py" -m pip download -q -d "$work/dl/wheels" pytest freezegun "flit_core<4"
  fi
  mkdir -p "$dir"
  tar xzf "$work/dl/itsdangerous-2.2.0.tar.gz" -C "$dir" --strip-components 1
  cp -a "$work/dl/wheels" "$dir/wheels"
  printf '.venv/\n__pycache__/\nreports/\n' > "$dir/.gitignore"
  mkdir -p "$dir/proofs"
  local venv='python3 -m venv .venv && .venv/bin/python -m pip install -q --no-index --find-links wheels pytest freezegun .'
  local t=tests/test_itsdangerous
  local shares=(
    "$t/test_encoding.py $t/test_signer.py"
    "$t/test_serializer.py"
    "$t/test_timed.py::TestSerializer $t/test_timed.py::TestSigner"
    "$t/test_timed.py::TestTimedSerializer"
    "$t/test_timed.py::TestTimestampSigner"
    "$t/test_url_safe.py::TestSerializer"
    "$t/test_url_safe.py::TestTimedSerializer $t/test_url_safe.py::TestURLSafeSerializer"
    "$t/test_url_safe.py::TestURLSafeTimedSerializer"
  )
  printf '%s\n' "${shares[@]}" > "$work/shares.txt"
  local i=0
  for share in "${shares[@]}"; do
    i=$((i + 1))
    {
      echo 'sync_source();'
      [ "$own_venv" = yes ] && echo "step(\"venv\", \"$venv\");"
      echo "step(\"pytest\", \"mkdir -p reports && .venv/bin/python -m pytest -q -p no:cacheprovider --junitxml=reports/junit.xml $share\");"
      echo 'collect("reports/junit.xml", #{ junit: true });'
    } > "$dir/proofs/p$i.rhai"
  done
  if [ "$own_venv" = no ]; then
    printf 'sync_source();\nstep("venv", "%s");\ncheckpoint("venv");\n' "$venv" > "$dir/proofs/_setup.rhai"
    printf 'proofs = "proofs"\nsetup = "proofs/_setup.rhai"\n' > "$dir/rfs.toml"
  else
    printf 'proofs = "proofs"\n' > "$dir/rfs.toml"
  fi
  git -C "$dir" init -q
  git -C "$dir" add -A
  git -C "$dir" -c user.name=b -c user.email=b@b commit -qm "itsdangerous 2.2.0 and its proofs"
}

# Run the suite in $1 into $2 with --junit $2.xml; prints its wall seconds.
suite() { timed_suite "$1" "$2" --jobs 2 --junit "$2.xml"; }

# The same work by hand on the host in a copy of the project $1: a fresh
# virtualenv, the same install, the shares 2 at a time; prints seconds.
by_hand() {
  local dir="$work/by-hand"
  rm -rf "$dir"; cp -a "$1" "$dir"
  local t0; t0=$(date +%s.%N)
  (cd "$dir" && "$py" -m venv .venv && .venv/bin/python -m pip install -q --no-index --find-links wheels pytest freezegun . \
    && mkdir -p reports && i=0 && while read -r share; do i=$((i + 1)); echo "$i $share"; done < "$work/shares.txt" \
    | xargs -P 2 -L 1 sh -c '.venv/bin/python -m pytest -q -p no:cacheprovider --junitxml=reports/junit-$0.xml $@ >/dev/null') >/dev/null
  awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {printf "%.3f", a - b}'
}

project "$work/with-setup" no
project "$work/own-venv" yes
walls=() ideals=() ratios=() owns=() vs=() hands=() hvs=() cases=""
for r in $(seq 1 "$runs"); do
  out="$work/out-setup-$r"
  wall=$(suite "$work/with-setup" "$out")
  ideal=$(suite_ideal "$out" 2)
  cases=$(grep -c '<testcase name="test_' "$out.xml" || true)
  alone=$(suite "$work/own-venv" "$work/out-own-$r")
  walls+=("$wall"); ideals+=("$ideal"); ratios+=("$(ratio "$wall" "$ideal")")
  owns+=("$alone"); vs+=("$(ratio "$wall" "$alone")")
  hand=$(by_hand "$work/with-setup")
  # Warm: the first run fills the page cache and pip's; it is not counted.
  [ "$r" -gt 1 ] && { hands+=("$hand"); hvs+=("$(ratio "$wall" "$hand")"); }
  printf "run %s: with setup %.2f s (ideal %.2f s: setup + proofs' own / 2); every proof its own venv %.2f s; by hand on the host %.2f s\n" \
    "$r" "$wall" "$ideal" "$alone" "$hand"
done
m() { printf '%s\n' "$@" | median; }
printf "itsdangerous, 8 proofs, --jobs 2, setup once:  %6.2f s  ideal %6.2f s  ratio %sx (target <= 1.5x)\n" \
  "$(m "${walls[@]}")" "$(m "${ideals[@]}")" "$(m "${ratios[@]}")"
printf "every proof making its own virtualenv:          %6.2f s  setup-once / own-venv %sx\n" \
  "$(m "${owns[@]}")" "$(m "${vs[@]}")"
printf "the same work by hand on the host (warm):     %6.2f s  setup-once / by hand %sx (target <= 1.1x)\n" \
  "$(m "${hands[@]}")" "$(m "${hvs[@]}")"
echo "pytest test cases in rfs test --junit: $cases (of 297)"
