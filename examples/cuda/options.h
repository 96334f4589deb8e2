// Command line of the CUDA example.
#pragma once

#include <cstdint>
#include <string>

enum class Plant { None, Atomic, Scale };

struct Options {
  int steps = 8;
  Plant plant = Plant::None;
  int plant_step = 3;         // 1-based training step that carries the plant
  bool block_scaled = false;  // also run the VEC128 x BLK128x128 block-scaled FP8 GEMM
  int probe_atomic = 0;       // >0: run the planted reduction this many times, print, exit
  uint32_t seed = 1234;
  // Where the per-tensor FP8 scales live: "mapped" = pinned host memory the GPU reads directly
  // (the host writes it with no CUDA call, so the FP8 GEMM is the first op to see a planted
  // scale); "copy" = device memory filled by a cudaMemcpyAsync each step.
  bool scales_mapped = true;
};

// Parses argv; prints usage and exits (0 for --help, 2 for bad input).
Options parse_options(int argc, char** argv);
const char* plant_name(Plant plant);
