// One op of a run named by its identity, as the diff pairs ops: "STEP:STREAM:KIND:NAME:OCCURRENCE"
// (trace step, stream ordinal, record kind's cli name, the demangled name, 1-based occurrence of
// (kind, name) on that stream in that step). The one parser of LOCKSTEP_REPLAY and of `lockstep
// replay --op`. The name may hold colons (C++ names): the fields around it are split off from
// both ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep::settings {

struct OpSpec {
  uint32_t step = 0;
  uint32_t stream = 0;
  std::string kind;  // "kernel", "gemm", ...
  std::string name;
  uint32_t occurrence = 1;
  bool operator==(const OpSpec&) const = default;
};

// nullopt unless the text is STEP:STREAM:KIND:NAME:OCCURRENCE with whole numbers (occurrence
// >= 1), a kind of lowercase letters and a non-empty name.
std::optional<OpSpec> parse_op_spec(std::string_view text);
std::string op_spec_text(const OpSpec& op);  // the inverse

}  // namespace lockstep::settings
