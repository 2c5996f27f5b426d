#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need
# (git, tmux, chromium for the report test, Debian's busybox-static for
# the tiny local Docker image,
# openssh-client and python3-cryptography for the signing tests, python3-venv
# and pytest's and setuptools' wheels for the pip tests; the book's Rust
# walkthrough mounts the toolchain that builds rfs, read-only),
# makes sure the Docker engine answers, builds the test image, then runs
# formatting, lints and every test.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v git >/dev/null || need+=(git)
command -v tmux >/dev/null || need+=(tmux)
command -v vi >/dev/null || need+=(vim-tiny)
command -v ps >/dev/null || need+=(procps)
# The network-policy tests make their own network namespaces and veth pairs.
command -v ip >/dev/null || need+=(iproute2)
# The report test opens report.html in a real browser.
command -v chromium >/dev/null || need+=(chromium)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v docker >/dev/null || need+=(docker.io)
# `isolation: "gvisor"` runs sandboxes under gVisor's runsc.
command -v runsc >/dev/null || need+=(runsc)
# Signing tests: the real ssh-keygen/ssh-agent, and an independent DSSE
# verifier in Python (`cryptography`).
command -v ssh-keygen >/dev/null && command -v ssh-agent >/dev/null || need+=(openssh-client)
python3 -c 'import cryptography' 2>/dev/null || /usr/bin/python3 -c 'import cryptography' 2>/dev/null \
  || need+=(python3 python3-cryptography)
# The sandbox's python is the system's: the pip test fetches pytest's
# wheels with it (below).
{ command -v pip3 >/dev/null && /usr/bin/python3 -m pip --version >/dev/null 2>&1; } || need+=(python3-pip)
# A virtualenv made in a sandbox (tests/proof_suites/one_home.rs).
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
# The cargo that builds rfs stays the one found now (rustup's, where the
# PATH would otherwise find Debian's first once it is installed).
build_cargo=$(command -v cargo || true)
if [ -z "$build_cargo" ]; then
  echo "scripts/test.sh: no cargo on PATH: install Rust with rustup (https://rustup.rs) first" >&2
  exit 1
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "scripts/test.sh: installing ${need[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ "$(command -v cargo)" != "$build_cargo" ]; then
  PATH="$(dirname "$build_cargo"):$PATH"
fi

# `rfs mcp` is tested with the official Python MCP SDK as its client.
if ! python3 -c 'import mcp' 2>/dev/null; then
  echo "scripts/test.sh: installing the Python MCP SDK (pip install mcp)" >&2
  python3 -m pip install -q mcp 2>/dev/null || python3 -m pip install -q --break-system-packages mcp
fi

# A real pip install in a sandbox (tests/proof_suites/real_python.rs)
# reads pytest's wheels from a local index the test serves, and an
# editable install in a virtualenv (tests/proof_suites/one_home.rs)
# builds with setuptools': fetched once here, with the
# system's python3 (the one a local sandbox sees).
export RFS_TEST_WHEELS="${RFS_TEST_WHEELS:-$HOME/.cache/rfs-test-wheels}"
# (A folder an interrupted download left half full is completed: the
# marker is written only once every wheel is there.)
if [ ! -f "$RFS_TEST_WHEELS/.complete-2" ]; then
  echo "scripts/test.sh: fetching pytest's and setuptools' wheels into $RFS_TEST_WHEELS" >&2
  /usr/bin/python3 -m pip download -q --disable-pip-version-check -d "$RFS_TEST_WHEELS" pytest setuptools
  touch "$RFS_TEST_WHEELS/.complete-2"
fi

# The Docker tests need a running engine; start one if this machine has
# the daemon but it is not running.
if ! docker info >/dev/null 2>&1; then
  echo "scripts/test.sh: starting the Docker engine" >&2
  (service docker start || (nohup dockerd >/tmp/dockerd.log 2>&1 &)) >/dev/null 2>&1 || true
  for _ in $(seq 1 30); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "scripts/test.sh: no Docker engine" >&2; exit 1; }
fi
if [ -f scripts/docker-test-image.sh ]; then
  bash scripts/docker-test-image.sh
fi

# CI has an engine: a missing one must fail the docker suites, not skip them.
export RFS_REQUIRE_DOCKER=1
export RFS_REQUIRE_DAYTONA=1
export RFS_REQUIRE_CHROMIUM=1
export RFS_REQUIRE_MCP=1
export RFS_REQUIRE_GVISOR=1
export RFS_REQUIRE_SYSTEM_CARGO=1
export RFS_REQUIRE_WHEELS=1
cargo fmt --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Benchmarks are not tests: scripts/bench-*.sh and `cargo bench` run them.
# --workspace: also the Daytona-API test server (tests/daytona-sim), which needs root and busybox-static.
# cargo-nextest (on this machine kind; settings in .config/nextest.toml)
# runs the tests of every binary side by side; without it, cargo test
# runs the same tests one binary after another.
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --lib --bins --tests
else
  echo "scripts/test.sh: cargo-nextest not found; running the same tests with cargo test (slower)" >&2
  cargo test --workspace --locked --lib --bins --tests
fi
cargo test --workspace --locked --doc
# The Daytona provider tests again, with 50 ms added to every response and
# WebSocket frame of the test server (they wait on the network, not the
# CPU: more at once).
if cargo nextest --version >/dev/null 2>&1; then
  RFS_TEST_DAYTONA_LATENCY_MS=50 cargo nextest run --locked --tests --test-threads 6 daytona
else
  RFS_TEST_DAYTONA_LATENCY_MS=50 cargo test --locked --tests daytona -- --test-threads 6
fi
