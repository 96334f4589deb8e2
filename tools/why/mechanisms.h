// Why a culprit gave other bits on identical inputs: the known mechanism of nondeterminism its
// kernel name, GEMM configuration or collective matches (the table is tools/why/mechanisms.def),
// and the fix. Printed under the culprit by diff and hunt, text and JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::tools {

struct Divergence;

struct Mechanism {
  std::string_view id;         // "IndexAdd"
  std::string_view what, fix;  // the table's sentences
};

// The text a row's pattern is matched against, for a record of kind `kind` ("kernel", "gemm",
// "collective") named `name` with `fields`: the kernel name; "cublasLtMatmul split-K 4
// reduction in-place" for a GEMM; the NCCL function. Empty for kinds the table does not cover.
std::string mechanism_subject(std::string_view kind, std::string_view name,
                              std::span<const uint64_t> fields);

// The first row matching the op, or nullopt.
std::optional<Mechanism> match_mechanism(std::string_view kind, std::string_view name,
                                         std::span<const uint64_t> fields);

// Under a culprit: "mechanism: ..." and "fix: ..." (or one line saying the table has no row for
// it); none for a classification no mechanism explains (a host input, state, metric).
std::vector<std::string> mechanism_lines(const Divergence& culprit);
// {"id", "what", "fix"} or null: the culprit's "mechanism" member in the diff's JSON.
nlohmann::json mechanism_json(const Divergence& culprit);

// Every row's id, in table order (tests walk the table).
std::vector<std::string_view> mechanism_ids();

}  // namespace lockstep::tools
