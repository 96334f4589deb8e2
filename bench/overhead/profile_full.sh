#!/usr/bin/env bash
# bench/overhead/profile_full.sh: where the time of a full-level run goes. Runs the GPT example
# under torch.profiler untraced (cudaMallocAsync, as full uses), at full, and at full with every
# pointer region capped to 64 bytes (the same hash launches, almost no bytes), and prints each
# run's device time per step for the job's kernels and for lockstep's hash kernels. MODES picks
# the runs (also full-skip: LOCKSTEP_SKIP_UNWRITTEN=1, full-adjacent:
# LOCKSTEP_MERGE_HASHES=adjacent, full-nolearn: LOCKSTEP_LEARN_READONLY=0, full-norecall:
# LOCKSTEP_RECALL_FILLS=0).
# Traced runs have LOCKSTEP_DEBUG=1; their logs (the shim's counters) land in OUT too.
#   BUILD=build OUT=/tmp/p bench/overhead/profile_full.sh [train_gpt.py args...]
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
OUTDIR=${OUT:-/tmp/lockstep-profile}
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-profile.XXXXXX")
GPT=("$PY" "$ROOT/examples/pytorch/train_gpt.py" --steps 14 "$@")
export CUBLAS_WORKSPACE_CONFIG=:4096:8
for mode in ${MODES:-untraced full full-64B}; do
  extra=()
  case $mode in
    untraced) ;;
    full) ;;
    full-64B) extra=(LOCKSTEP_MAX_REGION=64) ;;
    full-skip) extra=(LOCKSTEP_SKIP_UNWRITTEN=1) ;;
    full-adjacent) extra=(LOCKSTEP_MERGE_HASHES=adjacent) ;;
    full-nolearn) extra=(LOCKSTEP_LEARN_READONLY=0) ;;
    full-norecall) extra=(LOCKSTEP_RECALL_FILLS=0) ;;
    *) echo "profile_full.sh: unknown mode $mode" >&2; exit 2 ;;
  esac
  if [[ $mode = untraced ]]; then
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "${GPT[@]}" \
      --profile "$OUTDIR/profile-$mode.txt" >"$OUTDIR/$mode.log" 2>&1
  else
    env "${extra[@]}" LOCKSTEP_DEBUG=1 "$BUILD/tools/lockstep" run -o "$WORK/$mode" --level full \
      -- "${GPT[@]}" --profile "$OUTDIR/profile-$mode.txt" >"$OUTDIR/$mode.log" 2>&1
  fi
  echo "== $mode: rc $?"
  head -n 3 "$OUTDIR/profile-$mode.txt" 2>/dev/null || tail -n 5 "$OUTDIR/$mode.log"
done
rm -rf "$WORK"
