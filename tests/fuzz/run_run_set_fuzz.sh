#!/bin/sh
# ctest driver for the run-set fuzzer, like run_trace_reader_fuzz.sh: build it on demand, replay
# the inputs it once found (regressions/run_set/), make the seed corpus, fuzz for a bounded time
# from a fixed seed.
# usage: run_run_set_fuzz.sh BUILD_DIR FUZZER SEED_TOOL WORK_DIR SECONDS
set -eu
build_dir=$1 fuzzer=$2 seed_tool=$3 work=$4 seconds=$5
cmake --build "$build_dir" --target run_set_fuzz_build run_set_seed_corpus
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
"$seed_tool" "$work/corpus"
regressions=$(dirname "$0")/regressions/run_set
if [ -n "$(ls "$regressions" 2>/dev/null)" ]; then
  "$fuzzer" -runs=1 -rss_limit_mb=2048 -timeout=20 "$regressions"/*
fi
"$fuzzer" -seed=1 -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus"
