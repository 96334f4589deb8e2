#!/usr/bin/env bash
# Builds lockstep and runs every CPU test (tests that need a GPU skip themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
