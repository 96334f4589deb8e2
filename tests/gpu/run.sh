#!/usr/bin/env bash
# tests/gpu/run.sh: lockstep's GPU suite (tests/gpu/test_<group>_*.py, pytest) on a GPU
# machine; one table last. The one entry point; the checks, their thresholds and the table are
# in the suite (conftest.py, gpu_suite.py, test_*.py). Equivalent to
#   python3 -m pytest tests/gpu/test_a_gpu.py tests/gpu/test_d_cuda_example.py ...
#
#   tests/gpu/run.sh                                  # every group; uses <repo>/build
#   BUILD=.carry/build-gpu OUT=/tmp/o CHECKS=abcd tests/gpu/run.sh
#   CHECKS=e tests/gpu/run.sh -k "det"                # arguments go to pytest
#
# Environment:
#   BUILD     build folder, relative to the repository root or absolute (default: build)
#   OUT       where run.log (everything), table.txt, the results JSON
#             (<date>T<time>Z-<commit>-<groups>.json, for results/), logs.tar.gz (each step's
#             output, the benchmarks' JSON) and sample-traces.tar.gz go (at most 6 files: the
#             device machine brings back 8; default: /tmp/lockstep-gpu)
#   CHECKS    letters of the groups to run (default: all, in the order of ORDER below)
#               a GPU  b GPU gtests + compute-sanitizer  c hashing benchmark
#               d examples/cuda  e examples/pytorch  v CUPTI coverage (LOCKSTEP_VALIDATE=1)
#               f overhead (+ per-launch cost)  g two GPUs (DDP)
#               x tensor x data parallel (TP=2 over every visible GPU)  o DDP overhead at broad
#               p replay verdict (hunt's stage 4: the planted atomics, a Triton tl.atomic_add)
#   BUDGET_S  seconds for the whole run (default: 540); a check that would not fit is SKIP
#             (what it needs: 1.5 times its longest time in RESULTS plus 15 s, or its own bound)
#   RESULTS   earlier runs' results JSONs, for those times (default: <repo>/results)
#   COVERAGE_MODES  jobs of group v (default: compile cuda-graph reduce-overhead ddp; ddp needs
#             two GPUs)
#   GPT_DET_LEVELS  levels of group e's "gpt det" pairs (default: broad full)
#   PYTHON    python with torch for the jobs (default: python3)
#   PYTEST_PYTHON  python with pytest that runs the suite (default: python3)
#   OVERHEAD_CHUNKS, OVERHEAD_MODES  group f's turns of 5 steps per mode in each of 2 sets of
#             processes (default 30) and modes (default off,metrics,broad,full);
#             DDP_OVERHEAD_CHUNKS: the same for the ddp and tpdp overhead rows (groups o, x)
#   UNSEEN_CHUNKS  turns of 5 steps per mode of the unseen job's row (group f; default 8)
#   SELF_TIME_RUNS  LOCKSTEP_DEBUG runs per level behind the launch-bound self time (default 3;
#             9 or more for an interval narrower than the runs' whole range; ~50 s a run of all)
#   KEEP=1    keep the scratch folder of traces
#   SAVE      globs of trace folders to archive into OUT/traces.tar.gz (e.g. 'gpt-det-*')
#   REQUIRE_GPU  1 (default here): no GPU is a FAIL row; plain pytest skips instead
#   LOCKSTEP_COMMIT  the commit for the results JSON where the tree has no .git (else git's)
# Every row of the table is PASS, FAIL, KNOWN or SKIP with one key figure. KNOWN: a cost over
# its goal that README's "Known limits" names and explains, still under the limit that fails
# the row (one row: tpdp overhead broad). Exit status: 1 if any row is FAIL, else 0.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ORDER=abcdesmrwpvjfgxo  # every group, in the order they run: the one list of them
CHECKS=${CHECKS:-$ORDER}
files=()
for ((i = 0; i < ${#CHECKS}; i++)); do
  letter=${CHECKS:i:1}
  [[ $ORDER == *"$letter"* ]] || { echo "run.sh: no group '$letter' (CHECKS)" >&2; exit 2; }
done
for ((i = 0; i < ${#ORDER}; i++)); do
  letter=${ORDER:i:1}
  [[ $CHECKS == *"$letter"* ]] && files+=("$ROOT"/tests/gpu/test_"$letter"_*.py)
done
# No file: pytest would collect everything under the working directory (the suite's own CPU
# tests in e2e/ among it) and run it on the GPU machine's time.
((${#files[@]})) || { echo "run.sh: CHECKS='$CHECKS' selects no test file" >&2; exit 2; }
export REQUIRE_GPU=${REQUIRE_GPU:-1}
PY=${PYTEST_PYTHON:-python3}
if ! "$PY" -c 'import pytest' 2>/dev/null; then
  echo "run.sh: no pytest in $PY (Debian: python3-pytest; or set PYTEST_PYTHON)" >&2
  exit 2
fi
cd "$ROOT" || exit 2
"$PY" -m pytest --tb=short -q "${files[@]}" "$@"
rc=$?
# 5: no test selected (a -k or -m that matches nothing here): nothing failed.
((rc == 5)) && rc=0
exit "$rc"
