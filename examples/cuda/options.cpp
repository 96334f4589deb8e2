#include "options.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void usage(FILE* out) {
  std::fprintf(
      out,
      "usage: lockstep_example_cuda [--steps N] [--plant none|atomic|scale] [--plant-step S]\n"
      "                             [--block-scaled] [--probe-atomic K] [--seed N]\n"
      "                             [--scales mapped|copy]\n"
      "A small CUDA training-like job: kernels, a cuBLAS bf16 GEMM, a cuBLASLt FP8 e4m3 GEMM\n"
      "with per-tensor scales and amax, an NCCL all-reduce (one rank), one small D2H copy per\n"
      "step. Deterministic unless --plant is given:\n"
      "  --plant atomic  step S sums with float atomicAdd (order varies run to run)\n"
      "  --plant scale   step S uploads a different A_scale for the FP8 GEMM (deterministic)\n"
      "  --probe-atomic K  run the atomic reduction K times, print how many results differ\n"
      "  --scales mapped   FP8 scales in mapped pinned host memory, written by the host (default)\n"
      "  --scales copy     FP8 scales in device memory, uploaded by cudaMemcpyAsync each step\n");
}

int parse_int(const char* flag, const char* value, int min) {
  char* end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || v < min || v > 1000000) {
    std::fprintf(stderr, "lockstep_example_cuda: bad value for %s: '%s'\n", flag, value);
    std::exit(2);
  }
  return static_cast<int>(v);
}

}  // namespace

const char* plant_name(Plant plant) {
  switch (plant) {
    case Plant::None:
      return "none";
    case Plant::Atomic:
      return "atomic";
    case Plant::Scale:
      return "scale";
  }
  return "?";
}

Options parse_options(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "lockstep_example_cuda: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      std::exit(0);
    } else if (arg == "--steps") {
      opt.steps = parse_int("--steps", value("--steps"), 1);
    } else if (arg == "--plant-step") {
      opt.plant_step = parse_int("--plant-step", value("--plant-step"), 1);
    } else if (arg == "--probe-atomic") {
      opt.probe_atomic = parse_int("--probe-atomic", value("--probe-atomic"), 1);
    } else if (arg == "--seed") {
      opt.seed = static_cast<uint32_t>(parse_int("--seed", value("--seed"), 0));
    } else if (arg == "--block-scaled") {
      opt.block_scaled = true;
    } else if (arg == "--scales") {
      std::string v = value("--scales");
      if (v == "mapped")
        opt.scales_mapped = true;
      else if (v == "copy")
        opt.scales_mapped = false;
      else {
        std::fprintf(stderr, "lockstep_example_cuda: unknown --scales '%s' (mapped|copy)\n",
                     v.c_str());
        std::exit(2);
      }
    } else if (arg == "--plant") {
      std::string p = value("--plant");
      if (p == "none")
        opt.plant = Plant::None;
      else if (p == "atomic")
        opt.plant = Plant::Atomic;
      else if (p == "scale")
        opt.plant = Plant::Scale;
      else {
        std::fprintf(stderr, "lockstep_example_cuda: unknown plant '%s' (none|atomic|scale)\n",
                     p.c_str());
        std::exit(2);
      }
    } else {
      std::fprintf(stderr, "lockstep_example_cuda: unknown argument '%s'\n", arg.c_str());
      usage(stderr);
      std::exit(2);
    }
  }
  if (opt.plant != Plant::None && opt.plant_step > opt.steps) {
    std::fprintf(stderr, "lockstep_example_cuda: --plant-step %d is after the last step %d\n",
                 opt.plant_step, opt.steps);
    std::exit(2);
  }
  return opt;
}
