#include "trace/header.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>

#include "common/env.h"
#include "trace/format.h"

#ifndef LOCKSTEP_VERSION
#define LOCKSTEP_VERSION "0.0.0"
#endif

namespace lockstep::trace {
namespace {

// The first variable of `names` that is set and not empty, or nullptr.
template <size_t N>
const char* first_set(const char* const (&names)[N], const char** value) {
  for (const char* name : names) {
    const char* text = std::getenv(name);
    if (text && *text) {
      *value = text;
      return name;
    }
  }
  return nullptr;
}

// A value as a problem line shows it: at most 32 characters, printable ones.
std::string shown(const char* value) {
  std::string out;
  for (const char* c = value; *c && out.size() < 32; ++c)
    out += (*c >= 0x20 && *c < 0x7f) ? *c : '?';
  if (std::strlen(value) > 32) out += "...";
  return out;
}

// Strict decimal: digits only (no sign, space or hex), at most 9 of them, value in [low, high].
std::optional<int> parse_decimal(const char* text, int low, int high) {
  const size_t length = std::strlen(text);
  if (length == 0 || length > 9) return std::nullopt;
  int value = 0;
  for (size_t i = 0; i < length; ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    value = value * 10 + (text[i] - '0');
  }
  if (value < low || value > high) return std::nullopt;
  return value;
}

// Reads the first set variable of `names`; a bad value adds a problem line and is not taken.
template <size_t N>
std::optional<int> read_int(const char* const (&names)[N], const char* what, int low, int high,
                            const std::string& bound, std::vector<std::string>& problems) {
  const char* value = nullptr;
  const char* name = first_set(names, &value);
  if (!name) return std::nullopt;
  if (auto parsed = parse_decimal(value, low, high)) return parsed;
  problems.push_back(std::string(name) + "=" + shown(value) + " is not " + what +
                     ": expected decimal digits " + std::to_string(low) + ".." +
                     std::to_string(high) + bound + "; the trace records none");
  return std::nullopt;
}

nlohmann::json optional_int(const std::optional<int>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

const char* lockstep_version() { return LOCKSTEP_VERSION; }

RankInfo rank_from_env() {
  RankInfo info;
  info.world_size =
      read_int(env::kWorldSizeVars, "a world size", 1, kMaxWorldSize, "", info.problems);
  // Ranks are checked against the world size when it is known.
  const int limit = info.world_size.value_or(kMaxWorldSize) - 1;
  const std::string bound =
      info.world_size ? " (below the world size " + std::to_string(*info.world_size) + ")" : "";
  info.rank = read_int(env::kRankVars, "a rank", 0, limit, bound, info.problems);
  info.local_rank = read_int(env::kLocalRankVars, "a local rank", 0, limit, bound, info.problems);
  info.local_world_size = read_int(env::kLocalWorldSizeVars, "a local world size", 1,
                                   info.world_size.value_or(kMaxWorldSize), "", info.problems);
  return info;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || !name[0]) return "unknown";
  return name;
}

std::vector<std::string> command_line() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    args.emplace_back(all, start, end - start);
    start = end + 1;
  }
  return args;
}

std::string iso8601_now() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t seconds = system_clock::to_time_t(now);
  const auto millis = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[40];
  const size_t n = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof(text) - n, ".%03dZ", static_cast<int>(millis));
  return text;
}

nlohmann::json build_trace_header(const nlohmann::json& extra) {
  const RankInfo rank = rank_from_env();
  nlohmann::json header = {
      {"rank", optional_int(rank.rank)},
      {"world_size", optional_int(rank.world_size)},
      {"local_rank", optional_int(rank.local_rank)},
      {"local_world_size", optional_int(rank.local_world_size)},
      {"host", host_name()},
      {"pid", static_cast<int64_t>(::getpid())},
      {"command_line", command_line()},
      {"start_time", iso8601_now()},
      {"lockstep_version", lockstep_version()},
      {"format_version", kFormatVersion},
  };
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it) header[it.key()] = it.value();
  return header;
}

nlohmann::json config_window_json(uint32_t first_step, uint32_t last_step) {
  return {{"first_step", first_step}, {"last_step", last_step}};
}

std::optional<uint32_t> fingerprint_first_step(const nlohmann::json& header) {
  if (!header.is_object()) return std::nullopt;
  auto config = header.find(kConfigKey);
  if (config == header.end() || !config->is_object()) return std::nullopt;
  auto first = config->find("first_step");
  if (first == config->end() || !first->is_number_unsigned()) return std::nullopt;
  const uint64_t value = first->get<uint64_t>();
  if (value > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(value);
}

}  // namespace lockstep::trace
