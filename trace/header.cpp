#include "trace/header.h"

#include <unistd.h>

#include <charconv>
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

template <size_t N>
std::optional<int> first_int_env(const char* const (&names)[N]) {
  for (const char* name : names) {
    const char* value = std::getenv(name);
    if (!value || !*value) continue;
    int parsed = 0;
    const char* end = value + std::strlen(value);
    auto [ptr, ec] = std::from_chars(value, end, parsed);
    if (ec == std::errc() && ptr == end && parsed >= 0) return parsed;
  }
  return std::nullopt;
}

nlohmann::json optional_int(const std::optional<int>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

const char* lockstep_version() { return LOCKSTEP_VERSION; }

RankInfo rank_from_env() {
  return {first_int_env(env::kRankVars), first_int_env(env::kWorldSizeVars),
          first_int_env(env::kLocalRankVars)};
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

}  // namespace lockstep::trace
