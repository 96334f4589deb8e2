// Text from a trace matched against a regular expression. libstdc++'s std::regex matches by
// recursion, as deep as the text a repetition runs over: a 30 KB kernel name crashed `show --grep
// 'k+$'` and the diff's mechanism table (found by fuzzing the CLI), and a long pattern crashed
// its compilation. Real kernel names run to a few KiB of templates.
#pragma once

#include <cstddef>
#include <regex>
#include <string_view>

namespace lockstep::tools {

// Text past this is not looked at: a name is matched on its first 8 KiB.
inline constexpr size_t kMaxRegexText = 8192;
// Longest --grep pattern accepted.
inline constexpr size_t kMaxRegexPattern = 1024;

inline bool regex_search_bounded(std::string_view text, const std::regex& pattern) {
  text = text.substr(0, kMaxRegexText);
  return std::regex_search(text.begin(), text.end(), pattern);
}

}  // namespace lockstep::tools
