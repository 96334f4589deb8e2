// The diff's two reports: text for people (stable, colour only on a terminal) and JSON for
// machines (schema in tools/README.md, versioned by kDiffSchemaVersion).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/diff/result.h"
#include "tools/term.h"

namespace lockstep::tools {

// 2: verdict incomplete, compared, not_compared. 3: classification "state", state_divergence,
// made_before_step, compared.window_first_step; an op whose input differed is never an origin.
// 4: alignment, phases, step_b / job_step of divergences, classification "host_input".
// 5: environment (the headers' differences), culprit's mechanism, name_short (tools/why/);
//    scope of every divergence and first_scope (the diff by scope); culprit_receivers and
//    culprit_stack (additions).
inline constexpr int kDiffSchemaVersion = 5;

struct DiffContext {
  std::string a, b;  // run paths
  int world_size = 0;
  std::vector<int> ranks;  // ranks compared
  double seconds = 0;
};

std::string diff_text(const DiffResult& result, const DiffContext& context, const Style& style);
nlohmann::json diff_json(const DiffResult& result, const DiffContext& context);

// "gemm cublasLtMatmul #2 stream 1" for one divergence's op.
std::string op_label(const Divergence& d);

// A step as the reports show it: "5"; "5 (B 3)" when run B's trace step is another; under
// number alignment the job's number first, "4 (trace steps 5/1)".
std::string step_text(uint32_t step, uint32_t step_b, const std::optional<uint64_t>& job_step);

// For a run resumed from a checkpoint and compared by the job's numbers (alignment.resumed):
// "resume bit-exact for steps 4-7" when identical; "resume not bit-exact: ..." naming the first
// divergence after the restore when divergent; "" otherwise (incomplete, or not a resume pair).
std::string resume_verdict(const DiffResult& result);

}  // namespace lockstep::tools
