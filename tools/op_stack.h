// The call stack a run recorded for one of its ops (Stack records: LOCKSTEP_STACKS, `lockstep
// run --stacks`, `lockstep hunt`'s last run): how diff and hunt answer with the job's file and
// line. Reads only the op's step of the op's rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::tools {

struct RunSet;

struct OpStack {
  std::vector<std::string> python;  // "model.py:42 in Block.forward", innermost first
  std::vector<std::string> native;  // "at::native::index_add_cuda_impl(...)+0x1c (libtorch_cuda.so)"
};

// The Stack record of the op with `seq` in trace step `step` of `rank` in the run at `dir`;
// nullopt when the run recorded none (or cannot be read: the caller's report stands without).
std::optional<OpStack> stack_of_op(const std::string& dir, int rank, uint32_t step, uint64_t seq);
// The same in a run already opened (diff's): no second integrity pass over every file.
std::optional<OpStack> stack_of_op(const RunSet& run, int rank, uint32_t step, uint64_t seq);

// The same for the `occurrence`-th (1-based) kernel named `name` on stream ordinal `stream` in
// `step`: the culprit of another run of the same job (hunt's last run).
std::optional<OpStack> stack_of_kernel(const std::string& dir, int rank, uint32_t step,
                                       uint32_t stream, const std::string& name,
                                       uint32_t occurrence);

// The frames of the job's own code: those outside installed packages and the standard library
// (site-packages, dist-packages, lib/pythonX.Y, <frozen ...>), innermost first; all of them
// when none is the job's.
std::vector<std::string> job_frames(const std::vector<std::string>& python);

// ECMAScript regex matching exactly `text` (a demangled kernel name for LOCKSTEP_STACKS).
std::string exact_regex(const std::string& text);

}  // namespace lockstep::tools
