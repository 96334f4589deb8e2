#!/usr/bin/env bash
# Everything hashing needs on a GPU machine, in one go: GPU tests, compute-sanitizer memcheck and
# racecheck (small sizes), then the benchmark table. Usage: run_on_gpu.sh BUILD_DIR [OUT_DIR]
set -u
build=${1:?build dir}
out=${2:-/tmp/lsf1-gpu}
mkdir -p "$out"
tests=$build/tests/gpu/hashing/hashing_gpu_tests
bench=$build/bench/hashing/hash_bench
here=$(cd "$(dirname "$0")" && pwd)
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader

echo "== GPU tests"
"$tests" > "$out/gpu_tests.log" 2>&1 || status=1
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|FAILED  \]|Failure|enqueue behind|error" "$out/gpu_tests.log" | head -40

echo "== benchmark"
PYTHONUNBUFFERED=1 python3 "$here/run_bench.py" "$bench" --markdown "$out/bench_table.md" 2>&1 || status=1
if [ -x "$build/bench/hashing/hash_variants" ]; then
  echo "== kernels timed directly (bulk vs compact; slots in host vs device memory)"
  "$build/bench/hashing/hash_variants" "$build/hashing/hash_kernels.fatbin" 2>&1 | tee "$out/variants.csv"
fi
command -v cuobjdump > /dev/null && cuobjdump -sass "$build/hashing/hash_kernels.fatbin" > "$out/kernels.sass" 2>&1

small="LSF1_GPU_TEST_MAX_BYTES=300000"
filter="--gtest_filter=-*EnqueueReturnsWhileStreamIsBusy"
for tool in memcheck racecheck; do
  echo "== compute-sanitizer --tool $tool"
  env $small timeout ${SANITIZER_TIMEOUT:-100} compute-sanitizer --tool $tool --error-exitcode 3 "$tests" "$filter" > "$out/$tool.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  echo "exit $rc"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED|Invalid|Race" "$out/$tool.log" | sort | uniq -c | head -12
done

exit $status
