// JSON read from files that anyone may have written (a trace's header, a run's manifest, a
// diff's report handed to `lockstep replay --from`): parsed with a bound on nesting. nlohmann's
// parser keeps its own stack, but dump(), the comparisons and the tools' walks recurse: a header
// whose "rank" was a 100,000-deep array crashed every reading command (found by fuzzing the CLI).
// No file lockstep writes nests past a handful of levels.
#pragma once

#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace lockstep::trace {

inline constexpr int kMaxJsonDepth = 64;

// The document, or nullopt with *problem set ("not JSON: ..." / "nested deeper than 64 levels").
std::optional<nlohmann::json> parse_bounded_json(std::string_view text, std::string* problem);

}  // namespace lockstep::trace
