// The set-up phase: the work a job does before its first numbered step (compilation,
// autotuning, allocator warm-up, weight initialisation). Under number alignment it is one phase
// per run, whatever number of trace steps it spans (a compiler's small copies may end steps),
// compared as a whole and reported apart from the training steps: a difference there is never
// a training step's first divergence, and never the verdict's.
//
// And what autotuning chose: a compiler that benchmarks candidate kernels (XLA's autotuner,
// torch.compile's max-autotune) keeps the fastest, so two runs may run other GEMM algorithms
// or other kernel configurations from the first step on. compare_choices lists the choices
// that differ (a GEMM shape with another algorithm, a kernel name with another launch shape,
// kernels only one run ran), which the report puts first, with the fix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/diff/ops.h"

namespace lockstep::tools {

struct Divergence;  // result.h

// One choice the two runs made differently.
struct ChoiceDifference {
  std::string what;  // "gemm cublasLtMatmul m=1024 n=512 k=256 batch=1" / "kernel NAME"
  std::string a, b;  // "algo 21/...", "grid 128x1x1 block 256x1x1 smem 0", "not run"
};

// What the choices of tables a and b differ in, appended to `out` (a `what` already there is
// not repeated; at most kMaxChoices kept, *total counts them all). `kernel_sets`: also the
// kernels only one run ran (in a set-up phase: the autotuner's benchmarks; in a training step
// that would be a divergence, not a choice).
inline constexpr size_t kMaxChoices = 16;
void compare_choices(const OpTable& a, const OpTable& b, const StringPool& pool,
                     std::vector<ChoiceDifference>& out, uint64_t* total, bool kernel_sets);

// The fix for differing choices, by who made them: XLA (fusion or cuBLASLt kernels of a JAX
// job), torch.compile (Triton kernels named triton_*), or both.
std::string autotune_fix(const std::vector<ChoiceDifference>& choices);

}  // namespace lockstep::tools
