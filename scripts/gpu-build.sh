#!/usr/bin/env bash
# Builds what tests/gpu/run.sh needs into build-gpu/ and stages it, without object files and
# debug info, in .carry/build-gpu/ (ignored by git): small enough to travel to a GPU machine
# (about 18 MiB), where `BUILD=.carry/build-gpu tests/gpu/run.sh` runs it. The GPU tests find
# the shim next to themselves, so the staged folder works under any name; lockstep_python stages
# the Python package in python/ (lockstep run puts it on the job's PYTHONPATH).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(lockstep_shim lockstep-cli lockstep_example_cuda collectors_gpu_tests hashing_gpu_tests
         interpose_gpu_test lockstep_testshim hash_bench gpu_launch_bench launch_cost_bench
         hash_variants launch_floor midsize_bench grid_variants side_stream_bench lockstep_python)
# GPU_BUILD_DIR: build there instead (build/, already configured with CUDA, saves a second full
# build); only what the GPU suite runs is staged: CPU tests, fuzzers and test data stay behind.
dir=${GPU_BUILD_DIR:-build-gpu}
[[ -f $dir/CMakeCache.txt ]] || cmake -S . -B "$dir" -G Ninja -DLOCKSTEP_WITH_CUDA=ON >/dev/null
cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}"
rm -rf .carry/build-gpu
mkdir -p .carry/build-gpu
(cd "$dir" && find . -type f ! -path '*/CMakeFiles/*' ! -name '*.a' ! -name '*.o' \
   ! -name '.ninja*' ! -name build.ninja ! -name compile_commands.json ! -name '*.cmake' \
   ! -name CMakeCache.txt ! -path './tests/fuzz/*' ! -path './Testing/*' \
   \( ! -path './tests/cpu/*' -o -name 'liblockstep_testshim.so' \) -print0) |
  while IFS= read -r -d '' f; do
    mkdir -p ".carry/build-gpu/$(dirname "$f")"
    cp -p "$dir/$f" ".carry/build-gpu/$f"
    if head -c 4 ".carry/build-gpu/$f" | grep -q 'ELF'; then strip --strip-debug ".carry/build-gpu/$f"; fi
  done
echo "gpu-build.sh: .carry/build-gpu is $(du -sh .carry/build-gpu | cut -f1); carry [\".carry\"] and run BUILD=.carry/build-gpu tests/gpu/run.sh"
