#include "collectors/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <regex>

#include <fmt/format.h>

#include "common/env.h"

namespace lockstep::collectors {
namespace {

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

bool valid_regex(const std::string& pattern, std::string* why) {
  try {
    std::regex compiled(pattern, std::regex::ECMAScript);
    return true;
  } catch (const std::regex_error& error) {
    *why = error.what();
    return false;
  }
}

bool valid_run_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
  });
}

}  // namespace

std::string_view level_name(Level level) {
  switch (level) {
    case Level::Off: return "off";
    case Level::Metrics: return "metrics";
    case Level::Broad: return "broad";
    case Level::Full: return "full";
  }
  return "?";
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
      case 'k': multiplier = 1ull << 10; break;
      case 'm': multiplier = 1ull << 20; break;
      case 'g': multiplier = 1ull << 30; break;
      case 't': multiplier = 1ull << 40; break;
      default: break;
    }
    if (multiplier != 1) value.pop_back();
  }
  auto number = parse_u64(value);
  if (!number || (*number != 0 && *number > UINT64_MAX / multiplier)) return std::nullopt;
  return *number * multiplier;
}

std::optional<bool> parse_bool(std::string_view text) {
  std::string value = lower(text);
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off" || value.empty())
    return false;
  return std::nullopt;
}

bool parse_step_window(std::string_view text, uint32_t* first, uint32_t* last) {
  size_t dash = text.find('-');
  auto as_u32 = [](std::string_view part) -> std::optional<uint32_t> {
    auto value = parse_u64(part);
    if (!value || *value > UINT32_MAX) return std::nullopt;
    return static_cast<uint32_t>(*value);
  };
  if (dash == std::string_view::npos) {
    auto only = as_u32(text);
    if (!only) return false;
    *first = *last = *only;
    return true;
  }
  auto a = as_u32(text.substr(0, dash));
  std::string_view tail = text.substr(dash + 1);
  auto b = tail.empty() ? std::optional<uint32_t>(UINT32_MAX) : as_u32(tail);
  if (!a || !b || *a > *b) return false;
  *first = *a;
  *last = *b;
  return true;
}

const std::vector<EnvVarDoc>& env_var_table() {
  static const std::vector<EnvVarDoc> table = {
      {env::kDir, "lockstep-trace",
       "trace directory; each process writes its own file in it"},
      {env::kLevel, "broad",
       "off (hooks forward, nothing recorded), metrics (metrics and steps only), broad (every "
       "op by identity, collective and metric fingerprints), full (broad plus every kernel's "
       "pointer regions and every GEMM/copy buffer)"},
      {env::kSteps, "all steps",
       "A-B, A- or A: fingerprint only inside this inclusive window of steps; outside it ops "
       "are recorded by identity only"},
      {env::kKernels, "every kernel",
       "regular expression (ECMAScript, searched in the demangled name): kernels that do not "
       "match are recorded by identity only"},
      {env::kMaxRegion, "256M",
       "cap in bytes (K/M/G suffixes) on a kernel pointer region at level full; cut regions "
       "are flagged clamped"},
      {env::kMetricBytes, "64",
       "device-to-host copies of at most this many bytes are Metric records with their bytes; "
       "0 disables metrics"},
      {env::kStepOn, "auto",
       "auto: NVTX ranges/marks matching `(?i)^(train[ _-]?)?step\\b` advance the step, and until "
       "the first such marker each Metric record ends a step; metric: only Metric records; "
       "api: only lockstep_step()/lockstep_mark(); auto:REGEX: auto with REGEX; any other "
       "value: a regex, markers only"},
      {env::kDebug, "0",
       "1: log the shim's decisions to stderr, and at exit its hash launch counts, why "
       "deferred fingerprints went out alone, and its own time per call; 2: as 1, and the "
       "time of each part of a call (the extra timing makes the totals a little higher)"},
      {env::kRunId, "chosen by the run directory",
       "identifier shared by all processes of one run ([A-Za-z0-9._-], at most 64)"},
      {env::kOverwrite, "0", "1: write into a trace directory that already holds traces"},
      {env::kFailHard, "0",
       "1: a bad setting or a failure to open the trace aborts the job instead of running "
       "untraced"},
      {env::kMemory, "64M", "memory budget of the trace writer (records beyond it are dropped "
       "and counted)"},
      {env::kHashMemory, "16M", "device scratch memory of the hash engine, per device"},
      {env::kValidate, "0", "1: CUPTI coverage check (interpose; slow, validation runs only)"},
      {env::kMergeHashes, "1",
       "level full: a kernel's output fingerprints wait for the next hash launch on its stream "
       "and go in it: with the next op's input fingerprints, or later when the next ops need "
       "no hash launch (inputs already hashed, nothing deferred written); any event record, "
       "synchronize, free or other traced call flushes them first. adjacent: only with the next "
       "op's inputs; 0: every kernel's outputs right after it"},
      {env::kReuseDigests, "1",
       "level full: an input region that an earlier op already hashed, with no write seen "
       "since (no traced op's output, no free), takes that digest instead of being read again; "
       "a write the shim cannot see (a copy API it does not hook, the host writing mapped "
       "memory) would then go unnoticed in the input digests: 0 hashes every input"},
      {env::kSkipUnwritten, "0",
       "1 (level full, with reused digests): an input inside an allocation no traced op wrote "
       "since it was made (a kernel's output tensor before the kernel writes it) is not hashed "
       "and flagged unwritten (x1.60 instead of x1.71 on the GPT example with attention written "
       "out, one H200, 2026-11-30); but a kernel that writes only part of such a region then shows the leftover "
       "bytes as an output difference with no input evidence: identical runs can diverge (seen "
       "with DDP on two GPUs, and on the one-GPU GPT example)"},
      {env::kLearnReadOnly, "1",
       "level full: a kernel's pointer argument whose region came out of 8 launches over 2 "
       "steps or more unchanged (each launch changing another of its regions) and never "
       "changed is learned read-only: later launches hash it before the kernel only "
       "(flagged read-only) and its digest stays reusable; every 16th launch of the kernel "
       "hashes every region again, and one found written is unlearned and reported (trace "
       "warning): 0 hashes every output"},
      {env::kRecallFills, "1",
       "level full: a known fill (PyTorch's contiguous fill: every torch.empty under "
       "deterministic algorithms) writes one value over its whole region, so its output digest "
       "is that of an earlier fill of the same value and size: taken without reading the bytes "
       "(flagged recalled); every 16th fill of a kind is hashed all the same, and one whose "
       "digest differs is reported (trace warning) and the kind hashed from then on: 0 hashes "
       "every fill's output"},
  };
  return table;
}

std::string env_var_table_markdown() {
  std::string out = "| variable | default | meaning |\n| --- | --- | --- |\n";
  for (const EnvVarDoc& row : env_var_table()) {
    std::string meaning = row.meaning;
    // A literal | would split the Markdown cell.
    for (size_t at = meaning.find('|'); at != std::string::npos; at = meaning.find('|', at + 2))
      meaning.replace(at, 1, "\\|");
    out += fmt::format("| `{}` | {} | {} |\n", row.name, row.default_value, meaning);
  }
  return out;
}

ConfigResult parse_config(const EnvLookup& getenv_fn) {
  ConfigResult result;
  Config& config = result.config;
  auto get = [&](const char* name) -> std::optional<std::string> {
    const char* value = getenv_fn(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  auto fail = [&](const std::string& what) {
    result.errors.push_back(fmt::format("lockstep: {}; running untraced", what));
  };

  if (auto value = get(env::kDir)) {
    if (value->empty()) fail(fmt::format("{} is empty", env::kDir));
    else config.dir = *value;
  }
  if (auto value = get(env::kLevel)) {
    std::string level = lower(*value);
    if (level == "off") config.level = Level::Off;
    else if (level == "metrics") config.level = Level::Metrics;
    else if (level == "broad") config.level = Level::Broad;
    else if (level == "full") config.level = Level::Full;
    else fail(fmt::format("{}={} is not one of off|metrics|broad|full", env::kLevel, *value));
  }
  if (auto value = get(env::kSteps)) {
    if (!parse_step_window(*value, &config.first_step, &config.last_step))
      fail(fmt::format("{}={} is not a step window A-B (A <= B), A- or A", env::kSteps, *value));
  }
  if (auto value = get(env::kKernels)) {
    std::string why;
    if (!valid_regex(*value, &why))
      fail(fmt::format("{}={} is not a valid regular expression ({})", env::kKernels, *value,
                       why));
    else config.kernels = *value;
  }
  auto size_var = [&](const char* name, uint64_t min, uint64_t max, uint64_t* out) {
    auto value = get(name);
    if (!value) return;
    auto bytes = parse_byte_size(*value);
    if (!bytes || *bytes < min || *bytes > max)
      fail(fmt::format("{}={} is not a byte size between {} and {} (suffixes K, M, G)", name,
                       *value, min, max));
    else *out = *bytes;
  };
  size_var(env::kMaxRegion, 1, 1ull << 40, &config.max_region);
  uint64_t metric_bytes = config.metric_bytes;
  size_var(env::kMetricBytes, 0, 1u << 20, &metric_bytes);
  config.metric_bytes = static_cast<uint32_t>(metric_bytes);
  size_var(env::kMemory, 1u << 20, 1ull << 40, &config.memory);
  size_var(env::kHashMemory, 1u << 20, 1ull << 40, &config.hash_memory);

  config.step_pattern = kDefaultStepPattern;
  if (auto value = get(env::kStepOn)) {
    std::string pattern;
    if (*value == "auto" || value->empty()) config.step_source = StepSource::Auto;
    else if (*value == "metric") config.step_source = StepSource::Metric;
    else if (*value == "api") config.step_source = StepSource::Api;
    else if (value->starts_with("auto:")) {
      config.step_source = StepSource::Auto;
      pattern = value->substr(5);
    } else {
      config.step_source = StepSource::Markers;
      pattern = *value;
    }
    std::string why;
    if (!pattern.empty() && !valid_regex(pattern, &why))
      fail(fmt::format("{}={} is not auto, metric, api or a valid regular expression ({})",
                       env::kStepOn, *value, why));
    else if (!pattern.empty()) config.step_pattern = pattern;
  }

  auto bool_var = [&](const char* name, bool* out) {
    auto value = get(name);
    if (!value) return;
    auto parsed = parse_bool(*value);
    if (!parsed) fail(fmt::format("{}={} is not 0 or 1", name, *value));
    else *out = *parsed;
  };
  if (auto value = get(env::kDebug); value && *value == "2") {
    config.debug = config.debug_phases = true;
  } else {
    bool_var(env::kDebug, &config.debug);
  }
  bool_var(env::kOverwrite, &config.overwrite);
  bool_var(env::kFailHard, &config.fail_hard);
  bool_var(env::kValidate, &config.validate);
  if (auto value = get(env::kMergeHashes); value && lower(*value) == "adjacent") {
    config.chain_hashes = false;
  } else if (value) {
    auto parsed = parse_bool(*value);
    if (!parsed) fail(fmt::format("{}={} is not 1, adjacent or 0", env::kMergeHashes, *value));
    else config.merge_hashes = config.chain_hashes = *parsed;
  }
  bool_var(env::kReuseDigests, &config.reuse_digests);
  bool_var(env::kSkipUnwritten, &config.skip_unwritten);
  bool_var(env::kLearnReadOnly, &config.learn_read_only);
  bool_var(env::kRecallFills, &config.recall_fills);

  if (auto value = get(env::kRunId)) {
    if (!valid_run_id(*value))
      fail(fmt::format("{}={} must be 1 to 64 characters of [A-Za-z0-9._-]", env::kRunId,
                       *value));
    else config.run_id = *value;
  }
  return result;
}

}  // namespace lockstep::collectors
