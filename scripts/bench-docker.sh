#!/usr/bin/env bash
# Micro-benchmark: N execs of `true` through the Docker provider vs
# `docker exec <ctr> true` via the CLI, and create+destroy per sandbox.
# Usage: scripts/bench-docker.sh [EXECS=100] [SANDBOXES=10]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/docker-test-image.sh
cargo bench --quiet --bench docker -- "${1:-100}" "${2:-10}"
