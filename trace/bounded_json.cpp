#include "trace/bounded_json.h"

#include <filesystem>
#include <fstream>
#include <string>

namespace lockstep::trace {
namespace {
struct TooDeep {};
}  // namespace

std::optional<nlohmann::json> parse_bounded_json(std::string_view text, std::string* problem) {
  // The callback sees each value's depth as it opens: the parse stops there, so no deep value is
  // ever built (nor destroyed).
  auto bound = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) throw TooDeep{};
    return true;
  };
  try {
    return nlohmann::json::parse(text, bound);
  } catch (const TooDeep&) {
    if (problem) *problem = "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
  } catch (const std::exception& error) {
    std::string what = error.what();
    // nlohmann's own wording past its "[json.exception.parse_error.101] " tag, one line.
    if (const size_t tag = what.find("] "); what.starts_with("[json.") && tag != std::string::npos)
      what = what.substr(tag + 2);
    if (const size_t newline = what.find('\n'); newline != std::string::npos)
      what = what.substr(0, newline);
    if (problem) *problem = "not JSON: " + what;
  }
  return std::nullopt;
}

std::optional<nlohmann::json> read_bounded_json(const std::string& path, uint64_t max_bytes,
                                                std::string* problem) {
  auto fail = [&](std::string text) {
    if (problem) *problem = std::move(text);
    return std::nullopt;
  };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return fail("not a regular file");
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return fail("cannot be read");
  if (size > max_bytes) return fail("larger than " + std::to_string(max_bytes) + " bytes");
  std::ifstream file(path, std::ios::binary);
  if (!file) return fail("cannot be read");
  std::string text(size, '\0');
  file.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<size_t>(file.gcount()));
  return parse_bounded_json(text, problem);
}

}  // namespace lockstep::trace
