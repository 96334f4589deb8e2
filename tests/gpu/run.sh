#!/usr/bin/env bash
# tests/gpu/run.sh: lockstep's end-to-end checks on a GPU machine. One script; a table last.
#
#   tests/gpu/run.sh                      # from anywhere; uses <repo>/build
#   BUILD=build-x OUT=/tmp/o CHECKS=ag tests/gpu/run.sh
#
# Environment:
#   BUILD     build folder, relative to the repository root or absolute (default: build)
#   OUT       where run.log (everything), table.txt, overhead*.json and sample-traces.tar.gz
#             go (default: /tmp/lockstep-gpu); traces themselves go to a scratch folder
#   CHECKS    letters of the check groups to run (default: abcdefgovx)
#               a GPU  b GPU gtests + compute-sanitizer  c hashing benchmarks
#               d examples/cuda  e examples/pytorch  f overhead (+ per-launch cost)
#               g two GPUs (DDP)
#               o overhead on two GPUs (DDP at broad)
#               x tensor x data parallel (TP=2 over every visible GPU; issue 9 on 8 GPUs)
#               v CUPTI coverage validation (LOCKSTEP_VALIDATE=1)
#   BUDGET_S  seconds for the whole script (default: 540); a group that would not fit is SKIP
#   COVERAGE_MODES  jobs of group v (default: compile cuda-graph reduce-overhead, plus ddp with
#             two GPUs)
#   GPT_DET_LEVELS  levels of group e's "gpt det" pairs (default: broad full)
#   PYTHON    python with torch (default: python3)
#   OVERHEAD_CHUNKS, OVERHEAD_MODES  group f's turns of 5 steps per mode in each of 2 sets of
#             processes (default 30; one process per mode and set, the modes taking turns:
#             overhead.py --interleave chunks) and modes (default off,metrics,broad,full);
#             DDP_OVERHEAD_CHUNKS: the same for the ddp and tpdp overhead rows (groups o, x)
#   SELF_TIME_RUNS  LOCKSTEP_DEBUG runs per level behind the launch-bound self time (default 3:
#             the median; one run's figure moves by a tenth or more on one machine)
#   KEEP=1    keep the scratch folder of traces (each step's stdout/stderr: OUT/logs.tar.gz)
#   SAVE      globs of trace folders to archive into OUT/traces.tar.gz (e.g. 'gpt-det-*')
# Every row of the table is PASS, FAIL, KNOWN or SKIP with one key figure. KNOWN: a cost over
# its goal that README's "Known limits" names and explains, still under the limit that fails
# the row (one row: tpdp overhead broad). Exit status: 1 if any row is FAIL, else 0.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
OUTDIR=${OUT:-/tmp/lockstep-gpu}
CHECKS=${CHECKS:-abcdefgovx}
BUDGET_S=${BUDGET_S:-540}
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-gpu-work.XXXXXX")
LOG=$OUTDIR/run.log
TABLE=$OUTDIR/table.txt
: >"$LOG"
START=$SECONDS

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUBLAS_WORKSPACE_CONFIG=:4096:8
# The examples mark steps with lockstep_step(); count only those, so that trace step N is the
# example's step N.
export LOCKSTEP_STEP_ON=${LOCKSTEP_STEP_ON:-api}

LOCKSTEP=$BUILD/tools/lockstep
CUDA_EX=$BUILD/examples/cuda/lockstep_example_cuda
E2E=$ROOT/tests/gpu/e2e
GPT=$ROOT/examples/pytorch/train_gpt.py
DDP=$ROOT/examples/pytorch/train_ddp.py
TPDP=$ROOT/examples/pytorch/train_tp_dp.py

ROWS=()
FAILED=0

say() { echo "$*" | tee -a "$LOG"; }
elapsed() { echo $((SECONDS - START)); }
remaining() { echo $((BUDGET_S - (SECONDS - START))); }
want() { [[ $CHECKS == *"$1"* ]]; }

# row CHECK RESULT FIGURE
row() {
  ROWS+=("$1|$2|$3")
  [[ $2 == FAIL ]] && FAILED=1
  say "[$(elapsed)s] $2  $1  ($3)"
}

# fits SECONDS: true when the budget still has that much room.
fits() { (($(remaining) >= $1)); }

# runlog NAME TIMEOUT CMD...: stdout -> $WORK/NAME.out, stderr -> $WORK/NAME.err, both into
# the log. Returns the command's exit status (124 on timeout).
runlog() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS rc left
  # Never run far past the budget: the device machine stops commands at 10 minutes.
  left=$(($(remaining) + 30))
  ((left < limit)) && limit=$left
  ((limit < 10)) && limit=10
  timeout -k 10 "$limit" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  rc=$?
  {
    echo "=== $name: rc=$rc $((SECONDS - t0))s: $*"
    tail -n 60 "$WORK/$name.out"
    echo "--- stderr"
    tail -n 40 "$WORK/$name.err"
  } >>"$LOG"
  return $rc
}

# first_line PATTERN FILE: the first line matching, trimmed to 80 characters.
first_line() { grep -m1 -E "$1" "$2" 2>/dev/null | cut -c1-80; }

# check_diff REPORT ARGS...: runs tests/gpu/e2e/check_diff.py, echoes its line.
check_diff() { "$PY" "$E2E/check_diff.py" "$@" 2>&1 | tail -n 1; }
same_losses() { "$PY" "$E2E/losses.py" "$@" 2>&1 | tail -n 1; }
# metrics_row CHECK RUN: the losses RUN printed are Metric records of its trace (issue 5).
metrics_row() {
  local line
  line=$("$PY" "$E2E/metrics_match.py" "$LOCKSTEP" "$WORK/$2" "$WORK/$2.out" 2>&1 | tail -n 1)
  if [[ $line == PASS* ]]; then row "$1" PASS "${line#PASS: }"; else row "$1" FAIL "$line"; fi
}

# Libraries a binary cannot find (the GPU machine may keep NCCL or cuBLAS only in pip wheels):
# add the folders that hold them to EXTRA_LIBS.
EXTRA_LIBS=""
find_missing_libs() {
  local bin=$1 lib dir found
  for lib in $(ldd "$bin" 2>/dev/null | awk '/not found/ {print $1}'); do
    found=""
    for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/*/lib \
      $("$PY" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
      found=$(find "$dir" -name "$lib" -print -quit 2>/dev/null)
      [[ -n $found ]] && break
    done
    if [[ -n $found ]]; then
      EXTRA_LIBS="$(dirname "$found")${EXTRA_LIBS:+:$EXTRA_LIBS}"
      say "note: $bin: $lib from $found"
    else
      say "note: $bin: $lib not found anywhere"
    fi
  done
}

# with_libs CMD...: CMD with EXTRA_LIBS in front of LD_LIBRARY_PATH (no empty entries).
with_libs() {
  local path
  path=$(printf '%s' "$EXTRA_LIBS:${LD_LIBRARY_PATH:-}" | tr -s ':' | sed 's/^://; s/:$//')
  if [[ -n $path ]]; then LD_LIBRARY_PATH=$path "$@"; else "$@"; fi
}
# traced NAME LEVEL TIMEOUT CMD...: `lockstep run -o $WORK/NAME --level LEVEL -- CMD`.
traced() {
  local name=$1 level=$2 limit=$3
  shift 3
  with_libs runlog "$name" "$limit" "$LOCKSTEP" run -o "$WORK/$name" --level "$level" -- "$@"
}
untraced() {
  local name=$1 limit=$2
  shift 2
  with_libs runlog "$name" "$limit" "$@"
}
# diff_runs NAME A B: `lockstep diff --json`; the report is $WORK/NAME.out. Returns diff's code.
diff_runs() { runlog "$1" 120 "$LOCKSTEP" diff "$WORK/$2" "$WORK/$3" --json; }
# overhead_rows RC NAME PREFIX [unjudged]: a row per mode of bench/overhead/overhead.py's table
# in $WORK/NAME.out ("PREFIX MODE"), judged against the table's targets unless "unjudged".
overhead_rows() {
  local rc=$1 name=$2 prefix=$3 judge=${4:-judged} mode ms ratio target ok bytes runs figure
  cat "$WORK/$name.out"
  if [[ $rc -ne 0 ]]; then
    row "$prefix" FAIL "rc $rc: $(tail -n 1 "$WORK/$name.err" | cut -c1-70)"
    return
  fi
  while read -r mode ms ratio target ok bytes runs; do
    [[ $mode == untraced* ]] && { row "$prefix $mode" PASS "${ms} ms/step (${runs})"; continue; }
    [[ $judge == unjudged ]] && target=- ok=-
    figure="x${ratio} (target x${target}), ${ms} ms/step (${runs}), ${bytes} B/step/rank"
    if [[ $ok == yes ]]; then row "$prefix $mode" PASS "$figure"
    elif [[ $target == - ]]; then row "$prefix $mode" PASS "${figure/ (target x-)/ (no target)}"
    else row "$prefix $mode" FAIL "$figure"; fi
  done < <(grep -E '^(untraced|off|metrics|broad|full)(-[a-z]+)? ' "$WORK/$name.out")
}

# broad_overhead_row JOB NPROC CHUNKS JUDGE: bench/overhead/overhead.py for a multi-process job
# (ddp, tpdp) untraced and at broad, taking turns, plus one LOCKSTEP_DEBUG run for the shim's
# own time per step (the log has that run's hash counters: what broad's collective fingerprints
# cost each rank). JUDGE ratio: the row judges the turns' ratio against x1.020, the self time
# shown; JUDGE self (as the launch-bound GPT job): the row judges the shim's time per step as a
# share of the untraced step, the ratio shown (its sets of processes differ by several percent,
# more than the target): PASS within the 2% goal, KNOWN up to SELF_LIMIT_PCT, FAIL above.
# The shim's share of a step over which a self-judged row fails: the 7% that Megatron's own
# tracing work treats as blocking (issue 7); between the 2% goal and this, KNOWN.
SELF_LIMIT_PCT=7.0
broad_overhead_row() {
  local job=$1 nproc=$2 chunks=$3 judge=$4 rc line ms ratio target ok bytes
  if ! fits 90; then row "$job overhead broad" SKIP "time budget"; return; fi
  runlog "$job-overhead" 300 "$PY" "$ROOT/bench/overhead/overhead.py" --lockstep "$LOCKSTEP" \
    --python "$PY" --job "$job" --nproc "$nproc" --levels broad --sets 2 --chunks "$chunks" \
    --chunk-steps 5 --skip 5 --self-time --self-time-runs 1 \
    --json "$OUTDIR/overhead-$job.json" --log "$LOG"
  rc=$?
  cat "$WORK/$job-overhead.out"
  line=$(grep -E '^broad ' "$WORK/$job-overhead.out")
  if [[ $rc -ne 0 || -z $line ]]; then
    row "$job overhead broad" FAIL "rc $rc"
    return
  fi
  local runs self_us self_share self_ok rest result=PASS
  read -r _ ms ratio target ok bytes runs <<<"$line"
  rest="${ms} ms/step (${runs}), ${bytes} B/step/rank"
  # "  broad   1222.0 us  5.96% of the untraced step  target 2.0% NO" -> 1222.0 5.96% NO
  read -r self_us self_share self_ok < <(awk '$1 == "broad" && $3 == "us" {print $2, $4, $NF}' \
    "$WORK/$job-overhead.out")
  if [[ $judge == self ]]; then
    if [[ -z $self_us ]]; then
      row "$job overhead broad" FAIL "no shim self time printed; x${ratio}, ${rest}"
      return
    fi
    local verdict="goal 2.0%"
    if [[ $self_ok != yes ]]; then
      if awk -v s="${self_share%\%}" -v limit="$SELF_LIMIT_PCT" 'BEGIN { exit !(s <= limit) }'
      then
        result=KNOWN verdict="over the 2.0% goal: README, Known limits; FAIL above ${SELF_LIMIT_PCT}%"
      else
        result=FAIL verdict="over the ${SELF_LIMIT_PCT}% limit"
      fi
    fi
    row "$job overhead broad" "$result" "shim ${self_us} us/step (${self_share} of the untraced step, ${verdict}); x${ratio}, ${rest} (ratio not judged)"
  else
    [[ $ok == yes ]] || result=FAIL
    row "$job overhead broad" "$result" "x${ratio} (target x${target}), ${rest}${self_us:+; shim ${self_us} us/step (${self_share}, not judged)}"
  fi
}

have_lockstep() { [[ -x $LOCKSTEP ]]; }
TORCH_OK=""
have_torch() { # asked once: importing torch takes seconds
  if [[ -z $TORCH_OK ]]; then
    TORCH_OK=no
    "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
      >/dev/null 2>&1 && TORCH_OK=yes
  fi
  [[ $TORCH_OK == yes ]]
}
# GPUs this script may use: CUDA_VISIBLE_DEVICES when set (a lane of run_parallel.sh), else all.
gpu_count() {
  if [[ -n ${CUDA_VISIBLE_DEVICES+x} ]]; then
    local ids
    IFS=',' read -ra ids <<<"$CUDA_VISIBLE_DEVICES"
    echo "${#ids[@]}"
  else
    nvidia-smi -L 2>/dev/null | grep -c '^GPU'
  fi
}

say "lockstep GPU run: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), root $ROOT, build $BUILD, work $WORK"
for bin in "$LOCKSTEP" "$BUILD/interpose/liblockstep.so" "$CUDA_EX"; do
  [[ -e $bin ]] && find_missing_libs "$bin"
done

# ---- (a) the GPU ---------------------------------------------------------------------------
if want a; then
  if command -v nvidia-smi >/dev/null; then
    gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 |
      head -n 1)
    say "nvidia-smi: $gpu ($(gpu_count) GPUs)"
    if [[ $(gpu_count) -ge 1 ]]; then row "gpu" PASS "$(gpu_count)x $gpu"; else row "gpu" FAIL "$gpu"; fi
  else
    row "gpu" FAIL "nvidia-smi not found"
  fi
fi

# ---- (b) GPU gtests, compute-sanitizer on the hashing test ----------------------------------
if want b; then
  mapfile -t gtests < <(find "$BUILD/tests/gpu" -type f -perm -u+x ! -name '*.so*' \
    ! -path '*/CMakeFiles/*' 2>/dev/null | sort)
  if [[ ${#gtests[@]} -eq 0 ]]; then
    row "gtest (gpu)" SKIP "no binaries under $BUILD/tests/gpu"
  fi
  for bin in "${gtests[@]}"; do
    name=$(basename "$bin")
    if ! fits 30; then row "gtest $name" SKIP "time budget"; continue; fi
    untraced "gtest-$name" 180 "$bin" --gtest_color=no
    rc=$?
    out=$WORK/gtest-$name.out
    passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n 1)
    skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$out" | tail -n 1)
    failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n 1)
    figure="${passed:-0} passed, ${skipped:-0} skipped, ${failed:-0} failed"
    [[ $rc -eq 124 ]] && figure="timeout; $figure"
    # On the GPU machine a GPU test has no reason to skip: a skip here is a test not run (a shim
    # it could not find, say), not a pass. Its reason is the line after gtest's "Skipped".
    why=$(grep -A1 -m1 ': Skipped$' "$out" | tail -n 1 | cut -c1-60)
    if [[ $rc -eq 0 && -n $passed && ${skipped:-0} -eq 0 ]]; then row "gtest $name" PASS "$figure"
    elif [[ $rc -eq 0 && -n $passed ]]; then row "gtest $name" FAIL "$figure on a GPU: ${why:-?}"
    else row "gtest $name" FAIL "rc $rc; $figure"; fi
  done
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  hash_test=$(printf '%s\n' "${gtests[@]}" | grep -i hash | head -n 1)
  if [[ -z $hash_test ]]; then
    row "sanitizer hashing" SKIP "no hashing GPU test binary"
  elif [[ ! -x $sanitizer ]]; then
    row "sanitizer hashing" SKIP "compute-sanitizer not found"
  else
    for tool in memcheck racecheck; do
      if ! fits 60; then row "sanitizer $tool" SKIP "time budget"; continue; fi
      untraced "sanitizer-$tool" 240 "$sanitizer" --tool "$tool" --error-exitcode 99 \
        "$hash_test" --gtest_color=no
      rc=$?
      summary=$(first_line 'ERROR SUMMARY|RACECHECK SUMMARY|HAZARD' "$WORK/sanitizer-$tool.out" |
        sed 's/^=* *//')
      [[ -z $summary ]] && summary=$(first_line 'SUMMARY' "$WORK/sanitizer-$tool.err")
      if [[ $rc -eq 0 ]]; then row "sanitizer $tool" PASS "${summary:-clean}"
      else row "sanitizer $tool" FAIL "rc $rc; ${summary:-see run.log}"; fi
    done
  fi
fi

# ---- (c) hashing benchmarks ----------------------------------------------------------------
if want c; then
  # One table from one run: LSF1, a read-only u64 sum and torch.hash_tensor on the same data
  # (bench/hashing/run_bench.py drives hash_bench and times torch in the same process run).
  bench=$BUILD/bench/hashing/hash_bench
  if [[ ! -x $bench ]]; then
    row "hash bench" SKIP "no $bench"
  elif ! fits 120; then
    row "hash bench" SKIP "time budget"
  elif have_torch; then
    untraced hash-bench 240 "$PY" "$ROOT/bench/hashing/run_bench.py" "$bench" \
      --markdown "$OUTDIR/hash-bench.md"
    rc=$?
    figure=$(grep -E '1 GiB' "$WORK/hash-bench.out" | head -n 1 | tr -s ' ' | cut -c1-90)
    # run_bench.py prints one "- PASS: ..." / "- FAIL: ..." line per target.
    missed=$(grep -E '^- FAIL: ' "$WORK/hash-bench.out" | sed 's/^- FAIL: //' | paste -sd ';' - |
      cut -c1-100)
    if [[ $rc -eq 0 ]]; then row "hash bench" PASS "${figure:-ran}"
    else row "hash bench" FAIL "rc $rc: ${missed:-see run.log}"; fi
  else
    untraced hash-bench 120 "$bench"
    rc=$?
    if [[ $rc -eq 0 ]]; then row "hash bench (no torch)" PASS "ran"; else row "hash bench" FAIL "rc $rc"; fi
  fi
fi

# ---- (d) examples/cuda ---------------------------------------------------------------------
if want d; then
  CUDA_STEPS=6
  CUDA_PLANT_STEP=3
  cuda_args=(--steps "$CUDA_STEPS" --block-scaled)
  if [[ ! -x $CUDA_EX ]]; then
    row "cuda example" SKIP "no $CUDA_EX"
  elif ! have_lockstep; then
    row "cuda example" SKIP "no $LOCKSTEP"
  else
    untraced cuda-untraced 60 "$CUDA_EX" "${cuda_args[@]}"
    rc=$?
    if [[ $rc -ne 0 ]]; then
      row "cuda untraced" FAIL "rc $rc: $(tail -n 1 "$WORK/cuda-untraced.err" | cut -c1-70)"
    else
      row "cuda untraced" PASS "$(grep -c '^step' "$WORK/cuda-untraced.out") steps; \
$(grep -o 'block-scaled FP8 GEMM[^(]*' "$WORK/cuda-untraced.err" | head -n 1)"
      untraced cuda-probe 60 "$CUDA_EX" --probe-atomic 16
      probe=$(first_line '^probe-atomic' "$WORK/cuda-probe.out")
      if [[ $probe =~ ^probe-atomic:\ ([0-9]+)\ distinct ]] && ((BASH_REMATCH[1] > 1)); then
        row "cuda plant varies" PASS "${probe#probe-atomic: }"
      else
        row "cuda plant varies" FAIL "${probe:-probe failed}"
      fi
    fi
    # Deterministic job twice at every level: diff exits 0, numbers identical to untraced.
    for level in off metrics broad full; do
      if ! fits 30; then row "cuda det $level" SKIP "time budget"; continue; fi
      traced "cuda-det-$level-1" "$level" 120 "$CUDA_EX" "${cuda_args[@]}"
      rc1=$?
      traced "cuda-det-$level-2" "$level" 120 "$CUDA_EX" "${cuda_args[@]}"
      rc2=$?
      if [[ $rc1 -ne 0 || $rc2 -ne 0 ]]; then
        row "cuda det $level" FAIL "job exit $rc1/$rc2: $(tail -n 1 "$WORK/cuda-det-$level-1.err" | cut -c1-60)"
        continue
      fi
      numbers=$(same_losses "$WORK/cuda-untraced.out" "$WORK/cuda-det-$level-1.out")
      if [[ $level == off && -z $(find "$WORK/cuda-det-off-1" -name '*.lstrace' 2>/dev/null) ]]; then
        # `off` may write no trace at all: then only the numbers can be checked.
        if [[ $numbers == PASS* ]]; then row "cuda det off" PASS "no trace; vs untraced: ${numbers#PASS: }"
        else row "cuda det off" FAIL "no trace; vs untraced: $numbers"; fi
        continue
      fi
      diff_runs "cuda-det-$level-diff" "cuda-det-$level-1" "cuda-det-$level-2"
      drc=$?
      verdict=$(check_diff "$WORK/cuda-det-$level-diff.out" --expect identical)
      if [[ $drc -eq 0 && $verdict == PASS* && $numbers == PASS* ]]; then
        row "cuda det $level" PASS "diff 0; ${verdict#PASS: }; vs untraced: ${numbers#PASS: }"
      else
        row "cuda det $level" FAIL "diff $drc; ${verdict}; vs untraced: ${numbers}"
      fi
      [[ $level == metrics ]] && metrics_row "cuda metrics = printed" "cuda-det-metrics-1"
    done
    # Planted float atomicAdd reduction: two planted runs differ; the origin is that kernel.
    if fits 30; then
      plant_args=(--steps "$CUDA_STEPS" --plant atomic --plant-step "$CUDA_PLANT_STEP")
      traced cuda-atomic-full-1 full 120 "$CUDA_EX" "${plant_args[@]}"
      traced cuda-atomic-full-2 full 120 "$CUDA_EX" "${plant_args[@]}"
      diff_runs cuda-atomic-diff cuda-atomic-full-1 cuda-atomic-full-2
      drc=$?
      verdict=$(check_diff "$WORK/cuda-atomic-diff.out" --expect divergent \
        --step "$CUDA_PLANT_STEP" --name planted_atomic_sum_squares --classification origin)
      if [[ $drc -eq 1 && $verdict == PASS* ]]; then row "cuda plant atomic" PASS "${verdict#PASS: }"
      else row "cuda plant atomic" FAIL "diff $drc; $verdict"; fi
    else
      row "cuda plant atomic" SKIP "time budget"
    fi
    # Planted FP8 scale: a planted run against a clean one; the FP8 GEMM's A_scale shows up.
    if fits 20 && [[ -d $WORK/cuda-det-full-1 ]]; then
      traced cuda-scale-full full 120 "$CUDA_EX" "${cuda_args[@]}" --plant scale \
        --plant-step "$CUDA_PLANT_STEP"
      diff_runs cuda-scale-diff cuda-det-full-1 cuda-scale-full
      drc=$?
      verdict=$(check_diff "$WORK/cuda-scale-diff.out" --expect divergent \
        --step "$CUDA_PLANT_STEP" --buffer-label A_scale --buffer-op cublasLtMatmul)
      if [[ $drc -eq 1 && $verdict == PASS* ]]; then row "cuda plant scale" PASS "${verdict#PASS: }"
      else row "cuda plant scale" FAIL "diff $drc; $verdict"; fi
    else
      row "cuda plant scale" SKIP "time budget or no clean full run"
    fi
    # hunt, with no hints.
    if fits 40; then
      with_libs runlog cuda-hunt 240 "$LOCKSTEP" hunt -o "$WORK/cuda-hunt" --json -- "$CUDA_EX" \
        --steps "$CUDA_STEPS" --plant atomic --plant-step "$CUDA_PLANT_STEP"
      hrc=$?
      verdict=$(check_diff "$WORK/cuda-hunt.out" --expect divergent --step "$CUDA_PLANT_STEP" \
        --name planted_atomic_sum_squares --classification origin)
      if [[ $hrc -eq 1 && $verdict == PASS* ]]; then row "cuda hunt" PASS "${verdict#PASS: }"
      else row "cuda hunt" FAIL "hunt $hrc; $verdict"; fi
    else
      row "cuda hunt" SKIP "time budget"
    fi
    # Small real traces for examples/ (issue 6): a deterministic pair and a diverging pair.
    samples=(cuda-det-full-1 cuda-det-full-2 cuda-atomic-full-1 cuda-atomic-full-2)
    if (cd "$WORK" && ls -d "${samples[@]}" >/dev/null 2>&1); then
      size=$(cd "$WORK" && du -sbc "${samples[@]}" | tail -n 1 | cut -f1)
      if ((size < 50 * 1024 * 1024)); then
        tar -czf "$OUTDIR/sample-traces.tar.gz" -C "$WORK" "${samples[@]}"
        say "sample traces: $OUTDIR/sample-traces.tar.gz ($size bytes before compression)"
      fi
    fi
  fi
fi

# ---- (e) examples/pytorch ------------------------------------------------------------------
if want e; then
  GPT_STEPS=12
  GPT_PLANT_STEP=5
  GPT_PLANT_LAYER=1
  gpt=("$PY" "$GPT" --steps "$GPT_STEPS")
  plant=(--plant-step "$GPT_PLANT_STEP" --plant-layer "$GPT_PLANT_LAYER")
  index_kernel='index(Func|_add|Add)'
  if ! have_torch; then
    row "pytorch example" SKIP "no torch with CUDA in $PY"
  elif ! have_lockstep; then
    row "pytorch example" SKIP "no $LOCKSTEP"
  else
    untraced gpt-untraced 180 "${gpt[@]}"
    rc=$?
    if [[ $rc -ne 0 ]]; then
      row "gpt untraced" FAIL "rc $rc: $(tail -n 1 "$WORK/gpt-untraced.err" | cut -c1-70)"
    else
      row "gpt untraced" PASS "$(grep -c '^step' "$WORK/gpt-untraced.out") steps, last \
$(grep '^step' "$WORK/gpt-untraced.out" | tail -n 1 | cut -d' ' -f3-4)"
    fi
    untraced gpt-probe 120 "$PY" "$GPT" --probe-plant 8
    probe=$(first_line '^probe-plant' "$WORK/gpt-probe.out")
    if [[ $probe =~ ^probe-plant:\ ([0-9]+)\ distinct ]] && ((BASH_REMATCH[1] > 1)); then
      row "gpt plant varies" PASS "${probe#probe-plant: }"
    else
      row "gpt plant varies" FAIL "${probe:-probe failed}"
    fi
    for level in ${GPT_DET_LEVELS:-broad full}; do
      if ! fits 60; then row "gpt det $level" SKIP "time budget"; continue; fi
      traced "gpt-det-$level-1" "$level" 240 "${gpt[@]}"
      rc1=$?
      traced "gpt-det-$level-2" "$level" 240 "${gpt[@]}"
      rc2=$?
      if [[ $rc1 -ne 0 || $rc2 -ne 0 ]]; then
        row "gpt det $level" FAIL "job exit $rc1/$rc2: $(tail -n 1 "$WORK/gpt-det-$level-1.err" | cut -c1-60)"
        continue
      fi
      diff_runs "gpt-det-$level-diff" "gpt-det-$level-1" "gpt-det-$level-2"
      drc=$?
      verdict=$(check_diff "$WORK/gpt-det-$level-diff.out" --expect identical)
      numbers=$(same_losses "$WORK/gpt-untraced.out" "$WORK/gpt-det-$level-1.out")
      if [[ $drc -eq 0 && $verdict == PASS* && $numbers == PASS* ]]; then
        row "gpt det $level" PASS "diff 0; ${verdict#PASS: }; losses vs untraced: ${numbers#PASS: }"
      else
        row "gpt det $level" FAIL "diff $drc; $verdict; losses vs untraced: $numbers"
      fi
      [[ $level == broad ]] && metrics_row "gpt loss.item() = trace" "gpt-det-broad-1"
    done
    if fits 60; then
      traced gpt-plant-1 full 240 "${gpt[@]}" "${plant[@]}"
      traced gpt-plant-2 full 240 "${gpt[@]}" "${plant[@]}"
      varied=$(same_losses "$WORK/gpt-plant-1.out" "$WORK/gpt-plant-2.out" --expect differ \
        --differ-from-step "$GPT_PLANT_STEP")
      diff_runs gpt-plant-diff gpt-plant-1 gpt-plant-2
      drc=$?
      verdict=$(check_diff "$WORK/gpt-plant-diff.out" --expect divergent --step "$GPT_PLANT_STEP" \
        --name "$index_kernel" --classification origin)
      if [[ $drc -eq 1 && $verdict == PASS* ]]; then
        row "gpt plant" PASS "${verdict#PASS: }; losses: ${varied#*: }"
      else
        row "gpt plant" FAIL "diff $drc; $verdict; losses: $varied"
      fi
    else
      row "gpt plant" SKIP "time budget"
    fi
    if fits 90; then
      runlog gpt-hunt 300 "$LOCKSTEP" hunt -o "$WORK/gpt-hunt" --json -- "${gpt[@]}" "${plant[@]}"
      hrc=$?
      verdict=$(check_diff "$WORK/gpt-hunt.out" --expect divergent --step "$GPT_PLANT_STEP" \
        --name "$index_kernel" --classification origin)
      stages=$(grep -o '^stage [12][^:]*: [0-9.]* s' "$WORK/gpt-hunt.out" | sed 's/ (.*)//' |
        paste -sd';' -)
      if [[ $hrc -eq 1 && $verdict == PASS* ]]; then row "gpt hunt" PASS "${verdict#PASS: }; $stages"
      else row "gpt hunt" FAIL "hunt $hrc; $verdict"; fi
    else
      row "gpt hunt" SKIP "time budget"
    fi
    # A nondeterministic op captured into the CUDA graph at step S and replayed: the graph's
    # replay at step S is the origin (fingerprints run around every replay).
    if fits 90; then
      traced gpt-graph-plant-1 full 240 "${gpt[@]}" --cuda-graph --plant-step "$GPT_PLANT_STEP"
      traced gpt-graph-plant-2 full 240 "${gpt[@]}" --cuda-graph --plant-step "$GPT_PLANT_STEP"
      diff_runs gpt-graph-plant-diff gpt-graph-plant-1 gpt-graph-plant-2
      drc=$?
      verdict=$(check_diff "$WORK/gpt-graph-plant-diff.out" --expect divergent \
        --step "$GPT_PLANT_STEP" --name '^graph$' --classification origin)
      if [[ $drc -eq 1 && $verdict == PASS* ]]; then row "gpt cuda-graph plant" PASS "${verdict#PASS: }"
      else row "gpt cuda-graph plant" FAIL "diff $drc; $verdict"; fi
    else
      row "gpt cuda-graph plant" SKIP "time budget"
    fi
    # torch.compile (Triton) and CUDA graphs: deterministic twice, same losses as untraced.
    for variant in compile cuda-graph; do
      if ! fits 150; then row "gpt $variant" SKIP "time budget"; continue; fi
      untraced "gpt-$variant-untraced" 240 "${gpt[@]}" "--$variant"
      traced "gpt-$variant-1" full 240 "${gpt[@]}" "--$variant"
      rc1=$?
      traced "gpt-$variant-2" full 240 "${gpt[@]}" "--$variant"
      rc2=$?
      if [[ $rc1 -ne 0 || $rc2 -ne 0 ]]; then
        row "gpt $variant full" FAIL "job exit $rc1/$rc2: $(tail -n 1 "$WORK/gpt-$variant-1.err" | cut -c1-60)"
        continue
      fi
      diff_runs "gpt-$variant-diff" "gpt-$variant-1" "gpt-$variant-2"
      drc=$?
      verdict=$(check_diff "$WORK/gpt-$variant-diff.out" --expect identical)
      numbers=$(same_losses "$WORK/gpt-$variant-untraced.out" "$WORK/gpt-$variant-1.out")
      if [[ $drc -eq 0 && $verdict == PASS* && $numbers == PASS* ]]; then
        row "gpt $variant full" PASS "diff 0; losses vs untraced: ${numbers#PASS: }"
      else
        row "gpt $variant full" FAIL "diff $drc; $verdict; losses vs untraced: $numbers"
      fi
    done
  fi
fi

# ---- (v) CUPTI coverage validation (issue 4): every kernel the GPU ran was traced
if want v; then
  if ! have_lockstep || ! have_torch; then
    row "coverage" SKIP "needs lockstep and torch with CUDA"
  else
    # Triton (torch.compile), a CUDA graph, torch.compile's own CUDA graphs (reduce-overhead),
    # and with two GPUs the DDP job (NCCL): every source of kernels in one table each.
    if [[ -n ${COVERAGE_MODES:-} ]]; then read -ra modes <<<"$COVERAGE_MODES"
    else
      modes=(compile cuda-graph reduce-overhead)
      [[ $(gpu_count) -ge 2 ]] && modes+=(ddp)
    fi
    for mode in "${modes[@]}"; do
      if ! fits 90; then row "coverage $mode" SKIP "time budget"; continue; fi
      case $mode in
        reduce-overhead) job=("$PY" "$GPT" --steps 6 --compile --compile-mode reduce-overhead) ;;
        ddp) job=("$PY" -m torch.distributed.run --standalone --nproc-per-node 2 "$DDP" --steps 4
                  --grouped) ;;
        *) job=("$PY" "$GPT" --steps 4 "--$mode") ;;
      esac
      LOCKSTEP_VALIDATE=1 traced "validate-$mode" broad 300 "${job[@]}"
      out=$("$PY" "$E2E/coverage.py" "$WORK/validate-$mode" 2>&1)
      rc=$?
      echo "$out" >>"$LOG"
      line=$(tail -n 1 <<<"$out")
      if [[ $rc -eq 0 ]]; then row "coverage $mode" PASS "${line#PASS: }"
      else row "coverage $mode" FAIL "${line#FAIL: }"; fi
    done
  fi
fi

# ---- (f) overhead --------------------------------------------------------------------------
# Sizes of the GPT job (bench/overhead/overhead.py --size). gpu-bound, as production training
# is: the ratios to the untraced step are judged against the issue's targets. launch-bound, the
# worst case for a tracer's CPU cost: its ratios are shown but not judged (the idle GPU's clock
# moves between 345 and 1980 MHz within a run, so identical untraced runs differ by 20% and
# more); it is judged by the shim's own time per step against the same targets instead.
if want f; then
  if ! have_torch || ! have_lockstep; then
    row "overhead" SKIP "needs torch with CUDA and $LOCKSTEP"
  elif ! fits 200; then
    row "overhead" SKIP "time budget"
  else
    # full = cudaMallocAsync (the default of `lockstep run --level full`). Add full-caching (the
    # same level on PyTorch's caching allocator: x2.53 on 2026-11-30) through OVERHEAD_MODES.
    # One process per mode, taking turns of 5 steps: whole runs of the same untraced job differed
    # by up to 20% per step on one H200 host (slow phases of seconds within and across runs).
    runlog overhead 420 "$PY" "$ROOT/bench/overhead/overhead.py" --lockstep "$LOCKSTEP" \
      --python "$PY" --sets 2 --chunks "${OVERHEAD_CHUNKS:-30}" --chunk-steps 5 \
      --skip 5 --json "$OUTDIR/overhead.json" \
      --levels "${OVERHEAD_MODES:-off,metrics,broad,full}" --size gpu-bound \
      --log "$LOG"
    overhead_rows $? overhead "overhead"
    # The same job with attention written out (memory-bound: every head's scores in fp32 go
    # through memory, the most bytes per step for full to hash). Shown, not judged: the issue's
    # targets are for the training job as written, with fused attention.
    if fits 150; then
      runlog overhead-explicit 240 "$PY" "$ROOT/bench/overhead/overhead.py" --lockstep "$LOCKSTEP" \
        --python "$PY" --sets 1 --chunks 8 --chunk-steps 5 --skip 5 \
        --json "$OUTDIR/overhead-explicit.json" \
        --levels full --size gpu-bound-explicit --log "$LOG"
      overhead_rows $? overhead-explicit "overhead explicit-attention" unjudged
    else
      row "overhead explicit-attention" SKIP "time budget"
    fi
    runlog overhead-launch 420 "$PY" "$ROOT/bench/overhead/overhead.py" --lockstep "$LOCKSTEP" \
      --python "$PY" --sets 1 --chunks 8 --chunk-steps 5 --steps 25 --skip 5 \
      --json "$OUTDIR/overhead-launch-bound.json" \
      --levels off,metrics,broad,full --size launch-bound --self-time \
      --self-time-runs "${SELF_TIME_RUNS:-3}" --log "$LOG"
    rc=$?
    cat "$WORK/overhead-launch.out"
    if [[ $rc -ne 0 ]]; then
      row "launch-bound overhead" FAIL "rc $rc: $(tail -n 1 "$WORK/overhead-launch.err" | cut -c1-70)"
    else
      figure=$(awk '$1 ~ /^(untraced|off|metrics|broad|full)$/ && NF >= 7 {
                      printf "%s%s %s", sep, $1, ($1 == "untraced" ? $2 " ms" : "x" $3); sep = ", "}
                    /^shim self time per step/ {exit}' "$WORK/overhead-launch.out")
      row "launch-bound ratios" PASS "not judged (GPU clock): ${figure}"
      # The shim's own time per step (the median of SELF_TIME_RUNS LOCKSTEP_DEBUG=1 runs per
      # mode) against the targets.
      figure=$(awk '/^shim self time per step/ {on = 1; next}
                    on && $2 ~ /^[0-9.]+$/ && $4 ~ /%$/ {
                      printf "%s%s %s us (%s%s)", sep, $1, $2, $4, ($NF == "NO" ? " > " $(NF-1) : "")
                      sep = ", "}' "$WORK/overhead-launch.out")
      figure="per step, median of ${SELF_TIME_RUNS:-3} runs: $figure"
      if [[ $figure == *": " ]]; then row "launch-bound self time" FAIL "no LOCKSTEP_DEBUG self-time line"
      elif grep -A12 '^shim self time per step' "$WORK/overhead-launch.out" | grep -q ' NO$'; then
        row "launch-bound self time" FAIL "$figure"
      else row "launch-bound self time" PASS "$figure"; fi
    fi
  fi
fi

# Per-launch cost on the GPU at each level (one stream, back-to-back launches of a small
# kernel): what a launch-bound job pays per kernel; full with and without merged hash launches.
if want f; then
  if [[ ! -x $BUILD/bench/collectors/gpu_launch_bench ]] || ! have_lockstep; then
    row "launch cost" SKIP "needs $BUILD/bench/collectors/gpu_launch_bench and $LOCKSTEP"
  elif ! fits 60; then
    row "launch cost" SKIP "time budget"
  else
    with_libs runlog launch-cost 120 env BUILD="$BUILD" "$ROOT/bench/collectors/gpu_launch_bench.sh" 20000
    rc=$?
    cat "$WORK/launch-cost.out"
    # "mode launches N host_us_per_launch H done_us_per_launch D" -> "mode D"
    figure=$(awk '$2 == "launches" {printf "%s%s %s", sep, $1, $7; sep=", "}' "$WORK/launch-cost.out")
    if [[ $rc -eq 0 && $figure == *full-unmerged* ]]; then
      row "launch cost" PASS "us/launch: $figure"
    else
      row "launch cost" FAIL "rc $rc: ${figure:-no output}"
    fi
  fi
fi

# ---- (g) two GPUs: DDP, culprit rank -------------------------------------------------------
if want g; then
  DDP_STEPS=8
  DDP_PLANT_STEP=4
  DDP_PLANT_RANK=1
  ddp=("$PY" -m torch.distributed.run --standalone --nproc-per-node 2 "$DDP" --steps "$DDP_STEPS")
  if [[ $(gpu_count) -lt 2 ]]; then
    row "ddp 2 GPUs" SKIP "$(gpu_count) GPU visible"
  elif ! have_torch || ! have_lockstep; then
    row "ddp 2 GPUs" SKIP "needs torch with CUDA and $LOCKSTEP"
  elif ! fits 120; then
    row "ddp 2 GPUs" SKIP "time budget"
  else
    # The deterministic pair also issues grouped NCCL calls (batched send/recv, coalesced).
    untraced ddp-untraced 240 "${ddp[@]}" --grouped
    rc=$?
    if [[ $rc -ne 0 ]]; then
      row "ddp untraced" FAIL "rc $rc: $(grep -m1 -i error "$WORK/ddp-untraced.err" | cut -c1-70)"
    else
      row "ddp untraced" PASS "$(grep -c 'step' "$WORK/ddp-untraced.out") rank-steps"
    fi
    traced ddp-broad-1 broad 240 "${ddp[@]}" --grouped
    traced ddp-broad-2 broad 240 "${ddp[@]}" --grouped
    diff_runs ddp-det-diff ddp-broad-1 ddp-broad-2
    drc=$?
    verdict=$(check_diff "$WORK/ddp-det-diff.out" --expect identical)
    numbers=$(same_losses "$WORK/ddp-untraced.out" "$WORK/ddp-broad-1.out")
    ranks=$(find "$WORK/ddp-broad-1" -type f | wc -l)
    if [[ $drc -eq 0 && $verdict == PASS* && $numbers == PASS* ]]; then
      row "ddp det broad" PASS "grouped calls; diff 0; $ranks files; vs untraced: ${numbers#PASS: }"
    else
      row "ddp det broad" FAIL "diff $drc; $verdict; losses vs untraced: $numbers"
    fi
    # At full, `lockstep run` puts PyTorch on cudaMallocAsync (--torch-alloc auto): every
    # tensor its own allocation, so kernel regions are exact. Two clean runs must agree.
    if fits 60; then
      traced ddp-clean-full full 240 "${ddp[@]}"
      traced ddp-clean-full-2 full 240 "${ddp[@]}"
      diff_runs ddp-det-full-diff ddp-clean-full ddp-clean-full-2
      drc=$?
      verdict=$(check_diff "$WORK/ddp-det-full-diff.out" --expect identical)
      if [[ $drc -eq 0 && $verdict == PASS* ]]; then
        row "ddp det full" PASS "cudaMallocAsync: diff 0; ${verdict#PASS: }"
      else
        row "ddp det full" FAIL "cudaMallocAsync: diff $drc; $verdict"
      fi
    fi
    # The same pair on PyTorch's caching allocator: regions run to the end of shared segments
    # and cover bytes no kernel wrote; how many records differ between two clean runs.
    if fits 60; then
      with_libs runlog ddp-caching-1 240 "$LOCKSTEP" run -o "$WORK/ddp-caching-1" --level full \
        --torch-alloc keep -- "${ddp[@]}"
      with_libs runlog ddp-caching-2 240 "$LOCKSTEP" run -o "$WORK/ddp-caching-2" --level full \
        --torch-alloc keep -- "${ddp[@]}"
      diff_runs ddp-caching-diff ddp-caching-1 ddp-caching-2
      drc=$?
      figure=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1]))
st = d.get("stats", {}); first = d.get("first_divergence") or {}
print("%d of %d records differ; first: %s" % (st.get("divergent_records", 0),
      st.get("records_compared", 0), first.get("classification", "none")))' \
        "$WORK/ddp-caching-diff.out" 2>&1 | tail -n 1)
      if [[ $drc -le 1 ]]; then row "ddp full caching alloc" PASS "diff $drc; $figure"
      else row "ddp full caching alloc" FAIL "diff $drc; $figure"; fi
    fi
    if fits 60; then
      [[ -d $WORK/ddp-clean-full ]] || traced ddp-clean-full full 240 "${ddp[@]}"
      traced ddp-plant-full full 240 "${ddp[@]}" --plant-kind grad \
        --plant-rank "$DDP_PLANT_RANK" --plant-step "$DDP_PLANT_STEP"
      diff_runs ddp-plant-diff ddp-clean-full ddp-plant-full
      drc=$?
      verdict=$(check_diff "$WORK/ddp-plant-diff.out" --expect divergent --step "$DDP_PLANT_STEP" \
        --rank "$DDP_PLANT_RANK" --culprit-rank "$DDP_PLANT_RANK" --receiver-rank 0)
      if [[ $drc -eq 1 && $verdict == PASS* ]]; then row "ddp culprit rank" PASS "${verdict#PASS: }"
      else row "ddp culprit rank" FAIL "diff $drc; $verdict"; fi
    else
      row "ddp culprit rank" SKIP "time budget"
    fi
  fi
fi

# ---- (x) tensor x data parallel: TP=2 over every visible GPU (8 on nvidia-h200-x8) ----------
if want x; then
  n=$(gpu_count)
  ((n > 8)) && n=8
  ((n % 2)) && n=$((n - 1))
  TPDP_STEPS=6
  TPDP_PLANT_STEP=3
  TPDP_PLANT_RANK=$((n - 1))  # TP index 1 of the last TP group; its TP partner is n - 2
  tpdp=("$PY" -m torch.distributed.run --standalone --nproc-per-node "$n" "$TPDP" --tp 2
        --steps "$TPDP_STEPS")
  if ((n < 2)); then
    row "tpdp" SKIP "$(gpu_count) GPU visible"
  elif ! have_torch || ! have_lockstep; then
    row "tpdp" SKIP "needs torch with CUDA and $LOCKSTEP"
  elif ! fits 150; then
    row "tpdp" SKIP "time budget"
  else
    untraced tpdp-untraced 240 "${tpdp[@]}"
    rc=$?
    if [[ $rc -ne 0 ]]; then
      row "tpdp untraced" FAIL "rc $rc: $(grep -m1 -i error "$WORK/tpdp-untraced.err" | cut -c1-70)"
    else
      row "tpdp untraced" PASS "TP 2 x DP $((n / 2)); $(grep -c 'step' "$WORK/tpdp-untraced.out") rank-steps"
    fi
    traced tpdp-broad-1 broad 240 "${tpdp[@]}"
    traced tpdp-broad-2 broad 240 "${tpdp[@]}"
    diff_runs tpdp-det-diff tpdp-broad-1 tpdp-broad-2
    # What broad fingerprints in this job (the collectives' send and recv), into the run log:
    # a LOCKSTEP_DEBUG run on 2026-11-30 counted 2.2 GB hashed per step per rank, far more than
    # this model's tensors suggest. No row.
    runlog tpdp-broad-stats 60 "$LOCKSTEP" stats "$WORK/tpdp-broad-1" || true
    drc=$?
    verdict=$(check_diff "$WORK/tpdp-det-diff.out" --expect identical)
    numbers=$(same_losses "$WORK/tpdp-untraced.out" "$WORK/tpdp-broad-1.out")
    if [[ $drc -eq 0 && $verdict == PASS* && $numbers == PASS* ]]; then
      row "tpdp det broad" PASS "diff 0; ${verdict#PASS: }; vs untraced: ${numbers#PASS: }"
    else
      row "tpdp det broad" FAIL "diff $drc; $verdict; losses vs untraced: $numbers"
    fi
    if fits 90; then
      traced tpdp-clean-full full 240 "${tpdp[@]}"
      traced tpdp-plant-full full 240 "${tpdp[@]}" --plant-rank "$TPDP_PLANT_RANK" \
        --plant-step "$TPDP_PLANT_STEP"
      # The diff's own cost on these ranks: wall time and peak memory.
      runlog tpdp-plant-diff 120 python3 -c 'import resource, subprocess, sys, time
t = time.monotonic(); rc = subprocess.call(sys.argv[1:])
print("diff-cost %.2f s, peak %d MiB" % (time.monotonic() - t,
      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024), file=sys.stderr)
sys.exit(rc)' "$LOCKSTEP" diff "$WORK/tpdp-clean-full" "$WORK/tpdp-plant-full" --json
      drc=$?
      cost=$(grep -o 'diff-cost.*' "$WORK/tpdp-plant-diff.err" | sed 's/diff-cost //')
      verdict=$(check_diff "$WORK/tpdp-plant-diff.out" --expect divergent \
        --step "$TPDP_PLANT_STEP" --rank "$TPDP_PLANT_RANK" --classification origin \
        --culprit-rank "$TPDP_PLANT_RANK" --receiver-rank $((TPDP_PLANT_RANK - 1)))
      if [[ $drc -eq 1 && $verdict == PASS* ]]; then
        row "tpdp culprit rank" PASS "${verdict#PASS: }; diff ${cost:-?}"
      else
        row "tpdp culprit rank" FAIL "diff $drc; $verdict"
      fi
    else
      row "tpdp culprit rank" SKIP "time budget"
    fi
    # Judged by the shim's time per step: the TP job's turns' sets of processes differ by up to
    # 9% in wall time (x1.060, x1.129, x1.042, x1.096 over 4 sets, 2026-11-30; x1.018, x1.103
    # bucketed, 2026-12-01), so no affordable number of turns resolves 2% from wall time; the
    # self time does, as for the launch-bound GPT job. ~700 traced calls per 18 ms step put it
    # over the 2% goal (3.6%, 2026-12-01): KNOWN, README's Known limits say why.
    broad_overhead_row tpdp "$n" "${DDP_OVERHEAD_CHUNKS:-30}" self
  fi
fi

# ---- (o) overhead on two GPUs: the DDP job at broad -------------------------------------------
if want o; then
  if [[ $(gpu_count) -lt 2 ]]; then
    row "ddp overhead broad" SKIP "$(gpu_count) GPU visible"
  elif ! have_torch || ! have_lockstep; then
    row "ddp overhead broad" SKIP "needs torch with CUDA and $LOCKSTEP"
  else
    broad_overhead_row ddp 2 "${DDP_OVERHEAD_CHUNKS:-30}" ratio
  fi
fi

# ---- the table -----------------------------------------------------------------------------
{
  echo
  echo "lockstep GPU checks, $(date -u '+%Y-%m-%d %H:%M UTC'), $(elapsed) s"
  printf '%-24s %-6s %s\n' "check" "result" "key figure"
  printf '%-24s %-6s %s\n' "------------------------" "------" "----------"
  for r in "${ROWS[@]}"; do
    IFS='|' read -r check result figure <<<"$r"
    printf '%-24s %-6s %s\n' "$check" "$result" "$figure"
  done
} >"$TABLE"
cat "$TABLE" >>"$LOG"
cat "$TABLE"
# Every step's stdout/stderr (small text files only) in one archive next to the table (the
# device tool brings back at most 8 files), and the trace folders that SAVE names.
(cd "$WORK" && find . -maxdepth 1 -type f \( -name '*.out' -o -name '*.err' \) -size -2M -print0 |
  tar -czf "$OUTDIR/logs.tar.gz" --null -T -)
if [[ -n ${SAVE:-} ]]; then
  # shellcheck disable=SC2086  # SAVE is a list of globs
  (cd "$WORK" && tar -czf "$OUTDIR/traces.tar.gz" $SAVE 2>/dev/null)
fi
if [[ ${KEEP:-0} == 1 ]]; then echo "traces kept in $WORK"; else rm -rf "$WORK"; fi
exit "$FAILED"
