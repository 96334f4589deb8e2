#!/usr/bin/env bash
# bench/collectors/gpu_launch_bench.sh: gpu_launch_bench untraced and under `lockstep run` at
# each level, side by side; one line per mode (host µs per launch, µs per launch until done).
#   BUILD=build bench/collectors/gpu_launch_bench.sh [launches]
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
BENCH=$BUILD/bench/collectors/gpu_launch_bench
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-launch.XXXXXX")
printf '%-9s %s\n' mode result
# full-unmerged: full with LOCKSTEP_MERGE_HASHES=0 (two hash launches per kernel).
for mode in untraced off metrics broad full full-unmerged untraced; do
  if [[ $mode == untraced ]]; then line=$("$BENCH" "$@" 2>&1 | tail -n 1)
  else
    merge=1 level=$mode
    [[ $mode == full-unmerged ]] && merge=0 level=full
    line=$(LOCKSTEP_MERGE_HASHES=$merge "$BUILD/tools/lockstep" run -o "$WORK/$mode" \
      --level "$level" -- "$BENCH" "$@" 2>&1 | grep -m1 '^launches')
  fi
  printf '%-9s %s\n' "$mode" "${line:-failed}"
done
rm -rf "$WORK"
