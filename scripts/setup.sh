#!/usr/bin/env bash
# Installs the build dependencies (Debian packages), configures and builds lockstep into build/.
# Safe to run again: it only installs what is missing and rebuilds what changed.
#   scripts/setup.sh [--target T]... [CMAKE_ARGS...]   (--target: build only T, e.g. lockstep-cli)
set -euo pipefail
cd "$(dirname "$0")/.."

targets=()
while [[ ${1-} == --target ]]; do
  targets+=(--target "$2")
  shift 2
done

# pybind11-dev, python3-dev: the Python package's extension; python3-pandas: its DataFrames (the
# tests use them); dpkg-dev, file: cpack's .deb (dpkg-shlibdeps names its dependencies);
# valgrind: callgrind counts a cold launch's path (bench/collectors/launch_lines.py, a CPU test).
packages=(cmake ninja-build g++ clang libxxhash-dev libfmt-dev nlohmann-json3-dev libgtest-dev
          libcli11-dev python3-pytest libprotobuf-dev libprotoc-dev protobuf-compiler pybind11-dev
          python3-dev python3-pandas dpkg-dev file valgrind)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup.sh: missing packages: ${missing[*]} (run as root, or install them)" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cuda=ON
if ! command -v nvcc >/dev/null 2>&1 && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "setup.sh: no CUDA toolkit (nvcc) found: building the trace library and tools only" >&2
  cuda=OFF
fi
cmake -S . -B build -G Ninja -DLOCKSTEP_WITH_CUDA=$cuda "$@" >/dev/null
cmake --build build -j"$(nproc)" "${targets[@]}"
