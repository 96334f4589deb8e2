// The two runs' environments, compared before their ops: what in the trace headers can change
// numbers (GPU model and count, driver, CUDA runtime, cuBLAS, cuBLASLt, cuDNN, NCCL, Python and
// its packages, the layout of the ranks, the command line, the numerics variables). A difference
// here never decides the verdict (the ops do), but the diff always shows it, first.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::tools {

struct EnvironmentDifference {
  std::string key;                  // "cublas_version", "environment.NCCL_ALGO", "nodes"
  std::string what;                 // as people say it: "cuBLAS", "NCCL_ALGO", "PyTorch"
  std::optional<std::string> a, b;  // the values as text; nullopt: unset, not loaded, none
  std::vector<int> ranks;           // the ranks where it differs; empty: the run as a whole
};

struct EnvironmentComparison {
  bool compared = false;  // both runs' headers were read (false: a diff of records in memory)
  size_t ranks = 0;       // ranks whose headers were compared
  std::vector<EnvironmentDifference> differences;
};

// Headers by rank (the same ranks in both runs; a missing rank: nullptr). A fact absent from
// either header (a trace written before it was recorded) is not compared; a variable or package
// present in one run's list and not in the other's is (unset vs its value).
EnvironmentComparison compare_environments(const std::vector<const nlohmann::json*>& a,
                                           const std::vector<const nlohmann::json*>& b);

// The text report's lines (no indentation, no newline); none when nothing differs.
std::vector<std::string> environment_lines(const EnvironmentComparison& comparison);
// The JSON report's "environment" member (tools/README.md, schema version 5).
nlohmann::json environment_json(const EnvironmentComparison& comparison);

// Version numbers as the libraries print them: CUDA 13000 -> "13.0", NCCL 22805 -> "2.28.5",
// cuBLAS/cuDNN 130100 -> "13.1.0".
std::string cuda_version_text(int64_t version);
std::string nccl_version_text(int64_t version);
std::string library_version_text(int64_t version);

}  // namespace lockstep::tools
