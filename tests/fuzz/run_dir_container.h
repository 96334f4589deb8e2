// One fuzz input = one run directory: its files' bytes joined by a separator, so that libFuzzer's
// mutations cut, grow, merge and cross files as they would a single trace. A part that starts
// with '{' is the directory's manifest.json; the others are rank-0000N.lstrace in order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::fuzz {

inline constexpr std::string_view kFileSeparator = "\n--lockstep-fuzz-file--\n";
inline constexpr size_t kMaxFiles = 8;  // more parts are joined into the last file

inline std::vector<std::string_view> split_files(std::string_view bytes) {
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < kMaxFiles) {
    size_t at = bytes.find(kFileSeparator);
    if (at == std::string_view::npos) break;
    parts.push_back(bytes.substr(0, at));
    bytes.remove_prefix(at + kFileSeparator.size());
  }
  parts.push_back(bytes);
  return parts;
}

inline std::string join_files(const std::vector<std::string>& files) {
  std::string out;
  for (size_t i = 0; i < files.size(); ++i) {
    if (i) out += kFileSeparator;
    out += files[i];
  }
  return out;
}

}  // namespace lockstep::fuzz
