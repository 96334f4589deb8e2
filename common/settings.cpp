#include "common/settings.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <regex>

#include "common/op_spec.h"

namespace lockstep::settings {
namespace {

// The kinds as settings.def writes them.
constexpr KindSpec text() { return {Kind::Text}; }
constexpr KindSpec level() { return {Kind::Level}; }
constexpr KindSpec steps() { return {Kind::Steps}; }
constexpr KindSpec regex() { return {Kind::Regex}; }
constexpr KindSpec bytes(uint64_t min, uint64_t max) { return {Kind::Bytes, min, max}; }
constexpr KindSpec switch_() { return {Kind::Switch}; }
constexpr KindSpec debug() { return {Kind::Debug}; }
constexpr KindSpec step_on() { return {Kind::StepOn}; }
constexpr KindSpec run_id() { return {Kind::RunId}; }
constexpr KindSpec merge_hashes() { return {Kind::MergeHashes}; }
constexpr KindSpec state_set() { return {Kind::StateSet}; }
constexpr KindSpec auto_switch() { return {Kind::AutoSwitch}; }
constexpr KindSpec op() { return {Kind::Op}; }
constexpr KindSpec count(uint64_t min, uint64_t max) { return {Kind::Count, min, max}; }

constexpr Setting kTable[] = {
#define LOCKSTEP_SETTING(id, name, default_text, kind, flag, help) \
  {Id::id, name, default_text, kind, flag, help},
#include "common/settings.def"
#undef LOCKSTEP_SETTING
};

constexpr std::string_view kPrefix = "LOCKSTEP_";

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t value = 0;
  if (text.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// 1048576 -> "1M": the limits in a message as the user would write them.
std::string byte_text(uint64_t bytes) {
  const char* suffixes = "KMGT";
  int power = 0;
  while (power < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++power;
  }
  std::string out = std::to_string(bytes);
  if (power > 0) out += suffixes[power - 1];
  return out;
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

constexpr const char* kSwitchWords = "1, true, yes, on or 0, false, no, off (any case; empty is 0)";

}  // namespace

std::span<const Setting> all() { return kTable; }

const Setting& get(Id id) { return kTable[static_cast<size_t>(id)]; }

const Setting* find(std::string_view name) {
  for (const Setting& setting : kTable)
    if (name == setting.name) return &setting;
  return nullptr;
}

std::optional<size_t> parse_level(std::string_view text) {
  const std::string value = lower(text);
  for (size_t i = 0; i < std::size(kLevelNames); ++i)
    if (value == kLevelNames[i]) return i;
  return std::nullopt;
}

std::optional<StepWindow> parse_step_window(std::string_view text) {
  auto as_u32 = [](std::string_view part) -> std::optional<uint32_t> {
    auto value = parse_u64(part);
    if (!value || *value > UINT32_MAX) return std::nullopt;
    return static_cast<uint32_t>(*value);
  };
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    auto only = as_u32(text);
    if (!only) return std::nullopt;
    return StepWindow{*only, *only};
  }
  auto first = as_u32(text.substr(0, dash));
  std::string_view tail = text.substr(dash + 1);
  auto last = tail.empty() ? std::optional<uint32_t>(UINT32_MAX) : as_u32(tail);
  if (!first || !last || *first > *last) return std::nullopt;
  return StepWindow{*first, *last};
}

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  std::string value = lower(text);
  uint64_t multiplier = 1;
  for (std::string_view suffix : {"ib", "b"}) {
    if (value.size() > suffix.size() && value.ends_with(suffix)) {
      value.resize(value.size() - suffix.size());
      break;
    }
  }
  if (!value.empty()) {
    switch (value.back()) {
      case 'k':
        multiplier = 1ull << 10;
        break;
      case 'm':
        multiplier = 1ull << 20;
        break;
      case 'g':
        multiplier = 1ull << 30;
        break;
      case 't':
        multiplier = 1ull << 40;
        break;
      default:
        break;
    }
    if (multiplier != 1) value.pop_back();
  }
  auto number = parse_u64(value);
  if (!number || (*number != 0 && *number > UINT64_MAX / multiplier)) return std::nullopt;
  return *number * multiplier;
}

std::optional<bool> parse_switch(std::string_view text) {
  const std::string value = lower(text);
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off" || value.empty())
    return false;
  return std::nullopt;
}

bool valid_regex(const std::string& pattern, std::string* why) {
  try {
    std::regex compiled(pattern, std::regex::ECMAScript);
    return true;
  } catch (const std::regex_error& error) {
    *why = error.what();
    return false;
  }
}

std::optional<std::string> problem(const Setting& setting, std::string_view value) {
  std::string why;
  switch (setting.kind.kind) {
    case Kind::Text:
      if (value.empty()) return "is empty";
      return std::nullopt;
    case Kind::Level: {
      if (parse_level(value)) return std::nullopt;
      std::string names;
      for (std::string_view name : kLevelNames)
        names += (names.empty() ? "" : "|") + std::string(name);
      return "is not one of " + names;
    }
    case Kind::Steps:
      if (parse_step_window(value)) return std::nullopt;
      return "is not a step window A-B (A <= B), A- or A (whole numbers up to " +
             std::to_string(UINT32_MAX) + ")";
    case Kind::Regex:
      if (valid_regex(std::string(value), &why)) return std::nullopt;
      return "is not a valid regular expression (" + why + ")";
    case Kind::Bytes: {
      auto bytes = parse_byte_size(value);
      if (bytes && *bytes >= setting.kind.min && *bytes <= setting.kind.max) return std::nullopt;
      return "is not a byte size between " + byte_text(setting.kind.min) + " and " +
             byte_text(setting.kind.max) +
             " (a whole number, with K, M, G or T for powers of 1024, and B or iB after it)";
    }
    case Kind::Switch:
      if (parse_switch(value)) return std::nullopt;
      return std::string("is not ") + kSwitchWords;
    case Kind::Debug:
      if (value == "2" || parse_switch(value)) return std::nullopt;
      return "is not 0, 1 or 2 (1 also as true, yes, on; 0 as false, no, off; any case; empty "
             "is 0)";
    case Kind::StepOn: {
      std::string pattern;
      if (value == "auto" || value == "metric" || value == "api" || value == "optimizer" ||
          value.empty())
        return std::nullopt;
      pattern = value.starts_with("auto:") ? value.substr(5) : value;
      if (pattern.empty() || valid_regex(pattern, &why)) return std::nullopt;
      return "is not auto, metric, api, optimizer, auto:REGEX or a valid regular expression "
             "REGEX (" + why + ")";
    }
    case Kind::RunId: {
      const bool ok = !value.empty() && value.size() <= 64 &&
                      std::all_of(value.begin(), value.end(), [](unsigned char c) {
                        return std::isalnum(c) || c == '-' || c == '_' || c == '.';
                      });
      if (ok) return std::nullopt;
      return "is not 1 to 64 characters of [A-Za-z0-9._-]";
    }
    case Kind::MergeHashes:
      if (lower(value) == "adjacent" || parse_switch(value)) return std::nullopt;
      return "is not 1, adjacent or 0 (adjacent in any case; 1 also as true, yes, on; 0 as "
             "false, no, off; empty is 0)";
    case Kind::AutoSwitch:
      if (lower(value) == "auto" || parse_switch(value)) return std::nullopt;
      return std::string("is not auto or ") + kSwitchWords;
    case Kind::Op:
      if (parse_op_spec(value)) return std::nullopt;
      return "is not STEP:STREAM:KIND:NAME:OCCURRENCE (whole numbers, OCCURRENCE from 1; the "
             "kind as the diff prints it, e.g. 7:1:kernel:my_kernel:2)";
    case Kind::Count: {
      uint64_t n = 0;
      auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (!value.empty() && error == std::errc() && end == value.data() + value.size() &&
          n >= setting.kind.min && n <= setting.kind.max)
        return std::nullopt;
      return "is not a whole number from " + std::to_string(setting.kind.min) + " to " +
             std::to_string(setting.kind.max);
    }
    case Kind::StateSet: {
      const std::string words = lower(value);
      if (words == "all" || parse_switch(words) == false) return std::nullopt;
      bool ok = !words.empty();
      for (size_t start = 0; ok && start <= words.size();) {
        size_t end = words.find(',', start);
        if (end == std::string::npos) end = words.size();
        const std::string_view word = std::string_view(words).substr(start, end - start);
        ok = word == "params" || word == "grads" || word == "optimizer";
        start = end + 1;
      }
      if (ok) return std::nullopt;
      return "is not off, all, or a comma list of params, grads and optimizer";
    }
  }
  return "is not accepted";
}

std::string long_flag(const Setting& setting) {
  std::string_view flags = setting.cli_flag;
  const size_t at = flags.rfind("--");
  return at == std::string_view::npos ? std::string() : std::string(flags.substr(at));
}

std::string given_as(const Setting& setting, std::string_view value, bool from_cli) {
  const std::string flag = long_flag(setting);
  if (from_cli && !flag.empty()) {
    if (setting.kind.kind == Kind::Switch) return flag;
    return flag + " " + std::string(value);
  }
  return std::string(setting.name) + "=" + std::string(value);
}

std::string cli_help(const Setting& setting) {
  std::string_view help = setting.help;
  if (setting.kind.kind == Kind::Switch && help.starts_with("1: ")) help.remove_prefix(3);
  return std::string(help);
}

std::string cli_wording(std::string message) {
  for (const Setting& setting : kTable) {
    const std::string flag = long_flag(setting);
    if (flag.empty()) continue;
    if (setting.kind.kind == Kind::Switch)
      replace_all(message, std::string(setting.name) + "=1", flag);
    replace_all(message, setting.name, flag);
  }
  return message;
}

std::string markdown_table(TableRows rows) {
  std::string out =
      "| variable | `lockstep run` | default | meaning |\n| --- | --- | --- | --- |\n";
  for (const Setting& setting : kTable) {
    if (rows == TableRows::WithFlag && long_flag(setting).empty()) continue;
    std::string help = setting.help;
    replace_all(help, "|", "\\|");  // a literal | would split the Markdown cell
    const std::string flag = long_flag(setting);
    out += "| `" + std::string(setting.name) + "` | " + (flag.empty() ? "" : "`" + flag + "`") +
           " | " + setting.default_text + " | " + help + " |\n";
  }
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string_view nearest_setting(std::string_view name) {
  std::string_view best;
  size_t best_distance = SIZE_MAX;
  for (const Setting& setting : kTable) {
    const size_t distance = edit_distance(name, setting.name);
    if (distance < best_distance) {
      best = setting.name;
      best_distance = distance;
    }
  }
  return best;
}

std::vector<std::string> unknown_variable_warnings(const char* const* envp) {
  std::vector<std::string> out;
  if (envp == nullptr) return out;
  for (const char* const* entry = envp; *entry != nullptr; ++entry) {
    std::string_view text = *entry;
    if (!text.starts_with(kPrefix)) continue;
    const std::string_view name = text.substr(0, text.find('='));
    if (find(name) != nullptr) continue;
    out.push_back("lockstep: warning: " + std::string(name) +
                  " is not a lockstep setting, ignored (nearest: " +
                  std::string(nearest_setting(name)) + ")");
  }
  return out;
}

void stop_job() {
  std::fflush(nullptr);
  _exit(kFailHardExitCode);
}

}  // namespace lockstep::settings
