// JSON read from files that anyone may have written (a trace's header, a run's manifest, a
// diff's report handed to `lockstep replay --from`): parsed with a bound on nesting. nlohmann's
// parser keeps its own stack, but dump(), the comparisons and the tools' walks recurse: a header
// whose "rank" was a 100,000-deep array crashed every reading command (found by fuzzing the CLI).
// No file lockstep writes nests past a handful of levels.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace lockstep::trace {

inline constexpr int kMaxJsonDepth = 64;

// The document, or nullopt with *problem set ("not JSON: ..." / "nested deeper than 64 levels").
std::optional<nlohmann::json> parse_bounded_json(std::string_view text, std::string* problem);

// The same read from `path`, which must be a regular file of at most `max_bytes`: a FIFO in its
// place blocked the reader, a link to /dev/zero read until memory ran out (found by fuzzing).
// Else *problem: "not a regular file", "larger than N bytes", "cannot be read", or the parse's.
std::optional<nlohmann::json> read_bounded_json(const std::string& path, uint64_t max_bytes,
                                                std::string* problem);

}  // namespace lockstep::trace
