#!/usr/bin/env bash
# Sets up lockstep (dependencies, build) and runs its main job without a GPU: `lockstep diff` of
# the real sample traces in examples/traces, made by the shim on an H200 from examples/cuda.
#   1. two deterministic runs at level full: identical (exit 0)
#   2. two runs with a planted float atomicAdd reduction at step 3: divergent (exit 1), and the
#      report names the planted kernel as the origin
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
lockstep=build/tools/lockstep
echo
echo "\$ lockstep diff examples/traces/cuda-det-full-1 examples/traces/cuda-det-full-2"
"$lockstep" diff examples/traces/cuda-det-full-1 examples/traces/cuda-det-full-2
echo
echo "\$ lockstep diff examples/traces/cuda-atomic-full-1 examples/traces/cuda-atomic-full-2"
rc=0
"$lockstep" diff examples/traces/cuda-atomic-full-1 examples/traces/cuda-atomic-full-2 || rc=$?
if [[ $rc -ne 1 ]]; then
  echo "demo.sh: expected exit 1 (divergent) from the planted pair, got $rc" >&2
  exit 1
fi
echo
echo "(exit 1: divergent, as planted. Exit codes: 0 identical, 1 divergent, 2 incomplete or invalid input.)"
