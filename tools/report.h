// The diff's two reports: text for people (stable, colour only on a terminal) and JSON for
// machines (schema in tools/README.md, versioned by kDiffSchemaVersion).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/diff/result.h"
#include "tools/term.h"

namespace lockstep::tools {

// 2: verdict incomplete, compared, not_compared. 3: classification "state", state_divergence,
// made_before_step, compared.window_first_step; an op whose input differed is never an origin.
inline constexpr int kDiffSchemaVersion = 3;

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

}  // namespace lockstep::tools
