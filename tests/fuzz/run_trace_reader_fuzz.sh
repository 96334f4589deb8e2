#!/bin/sh
# ctest driver: build the clang fuzzer on demand, replay every input the fuzzer once found
# (regressions/), make the seed corpus, fuzz for a bounded time from a fixed seed (so that a CI
# run is reproducible: the same code explores the same inputs).
# usage: run_trace_reader_fuzz.sh BUILD_DIR FUZZER SEED_TOOL WORK_DIR SECONDS
set -eu
build_dir=$1 fuzzer=$2 seed_tool=$3 work=$4 seconds=$5
cmake --build "$build_dir" --target trace_reader_fuzz_build
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
"$seed_tool" "$work/corpus"
regressions=$(dirname "$0")/regressions
"$fuzzer" -runs=1 -rss_limit_mb=2048 -timeout=10 "$regressions"/*
"$fuzzer" -seed=1 -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus"
