#!/usr/bin/env bash
# bench/overhead/profile_full.sh: where a traced run's device time goes. Runs a PyTorch example
# under torch.profiler (its last 4 steps) untraced and traced, and prints each run's device time
# per step for the job's kernels and for lockstep's own hash kernels: what tracing adds on the
# GPU, free of the run-to-run noise that step times carry.
#   JOB=gpt (default): examples/pytorch/train_gpt.py; MODES default "untraced full full-64B"
#   JOB=unseen: bench/overhead/train_unseen.py (overhead.py --job unseen), the same modes
#   JOB=tpdp or ddp: examples/pytorch/train_tp_dp.py or train_ddp.py on NPROC (2) GPUs, one
#             profile per rank; MODES default "untraced-caching broad"
# Modes: untraced (cudaMallocAsync, as full uses), untraced-caching (PyTorch's own allocator, as
# broad keeps), broad, full, full-64B (every pointer region capped to 64 bytes: almost no
# bytes, but more hash launches, a clamped region never being learned read-only), full-carry
# (LOCKSTEP_CARRY_FREED=1), full-skip
# (LOCKSTEP_SKIP_UNWRITTEN=1), full-adjacent (LOCKSTEP_MERGE_HASHES=adjacent), full-nolearn
# (LOCKSTEP_LEARN_READONLY=0), full-norecall (LOCKSTEP_RECALL_FILLS=0). Traced runs have
# LOCKSTEP_DEBUG=1; their logs (the shim's counters) land in OUT too. Extra arguments go to the
# job (for example overhead.py's gpu-bound size: --dim 1024 --layers 8 --batch 32 --seq 512).
#   BUILD=build OUT=/tmp/p bench/overhead/profile_full.sh [job args...]
#   JOB=tpdp BUILD=build OUT=/tmp/p bench/overhead/profile_full.sh --dim 1024 --layers 8 ...
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
OUTDIR=${OUT:-/tmp/lockstep-profile}
PY=${PYTHON:-python3}
JOB=${JOB:-gpt}
mkdir -p "$OUTDIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-profile.XXXXXX")
case $JOB in
  gpt) CMD=("$PY" "$ROOT/examples/pytorch/train_gpt.py" --steps 14 "$@")
       DEFAULT_MODES="untraced full full-64B" ;;
  unseen) CMD=("$PY" "$ROOT/bench/overhead/train_unseen.py" --steps 14 "$@")
       DEFAULT_MODES="untraced full full-64B" ;;
  tpdp|ddp) script=train_tp_dp.py
        [[ $JOB = ddp ]] && script=train_ddp.py
        CMD=("$PY" -m torch.distributed.run --standalone --nproc-per-node "${NPROC:-2}"
             "$ROOT/examples/pytorch/$script" --steps 14 "$@")
        DEFAULT_MODES="untraced-caching broad" ;;
  *) echo "profile_full.sh: JOB=$JOB: expected gpt, unseen, tpdp or ddp" >&2; exit 2 ;;
esac
export CUBLAS_WORKSPACE_CONFIG=:4096:8
for mode in ${MODES:-$DEFAULT_MODES}; do
  extra=()
  level=full
  case $mode in
    untraced|untraced-caching) ;;
    broad) level=broad ;;
    full) ;;
    full-64B) extra=(LOCKSTEP_MAX_REGION=64) ;;
    full-skip) extra=(LOCKSTEP_SKIP_UNWRITTEN=1) ;;
    full-carry) extra=(LOCKSTEP_CARRY_FREED=1) ;;
    full-adjacent) extra=(LOCKSTEP_MERGE_HASHES=adjacent) ;;
    full-nolearn) extra=(LOCKSTEP_LEARN_READONLY=0) ;;
    full-norecall) extra=(LOCKSTEP_RECALL_FILLS=0) ;;
    *) echo "profile_full.sh: unknown mode $mode" >&2; exit 2 ;;
  esac
  profile=$OUTDIR/profile-$mode.txt
  [[ $JOB = tpdp || $JOB = ddp ]] && profile=$OUTDIR/profile-$mode.rank{rank}.txt
  case $mode in
    untraced)
      PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "${CMD[@]}" --profile "$profile" \
        >"$OUTDIR/$mode.log" 2>&1 ;;
    untraced-caching)
      "${CMD[@]}" --profile "$profile" >"$OUTDIR/$mode.log" 2>&1 ;;
    *)
      env "${extra[@]}" LOCKSTEP_DEBUG=1 "$BUILD/tools/lockstep" run -o "$WORK/$mode" \
        --level "$level" -- "${CMD[@]}" --profile "$profile" >"$OUTDIR/$mode.log" 2>&1 ;;
  esac
  echo "== $mode: rc $?"
  shown=0
  files=("$profile")
  [[ $JOB = tpdp || $JOB = ddp ]] && files=("$OUTDIR/profile-$mode.rank"[0-9]*.txt)
  for f in "${files[@]}"; do
    [[ -f $f ]] || continue
    [[ $JOB = tpdp || $JOB = ddp ]] && echo "-- ${f##*/}"
    head -n 5 "$f"
    shown=1
  done
  [[ $shown = 1 ]] || tail -n 5 "$OUTDIR/$mode.log"
done
rm -rf "$WORK"
