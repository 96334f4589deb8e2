#!/usr/bin/env bash
# Sets up lockstep (dependencies, and a build of the CLI only: the demo needs nothing else) and
# runs its main job without a GPU: `lockstep diff` of the real sample traces in examples/traces,
# made by the shim on an H200 from examples/cuda.
#   1. two deterministic runs at level full: identical (exit 0)
#   2. two runs with a planted float atomicAdd reduction at step 3: divergent (exit 1), and the
#      report names the planted kernel as the origin
# LOCKSTEP=/path/to/lockstep scripts/demo.sh runs it with that (installed) binary instead: no
# setup, no build.
set -euo pipefail
cd "$(dirname "$0")/.."
lockstep=${LOCKSTEP:-}
if [[ -z $lockstep ]]; then
  # Measured 2026-12-02 from an empty build/ without ccache: configure 15 s, the CLI 6 CPU-minutes
  # (317 s user + 42 s sys; 10.9 min wall beside three other builds at load 6); the shim would
  # add 4.3 CPU-minutes, and the demo does not need it.
  echo "demo.sh: installing what is missing (apt), then building the lockstep CLI only: the first"
  echo "build takes about 3 minutes on an idle 2-core machine (6 CPU-minutes), later ones seconds."
  scripts/setup.sh --target lockstep-cli
  lockstep=build/tools/lockstep
fi
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
if [[ -z ${LOCKSTEP:-} ]]; then
  echo "To trace a job, build the shim too (cmake --build build --target lockstep_shim), or"
  echo "everything with scripts/test.sh; README.md, Install and Quick start."
fi
