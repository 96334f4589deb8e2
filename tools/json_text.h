// JSON as the tools print it. A trace's strings are bytes the job gave (a kernel's name, a
// header's command line), not always UTF-8: one 0xff byte in a kernel name made `diff --json` and
// `export` fail with nlohmann's type_error 316 (found by fuzzing the CLI). Invalid sequences are
// printed as U+FFFD instead.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace lockstep::tools {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace lockstep::tools
