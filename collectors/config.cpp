#include "collectors/config.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "common/settings.h"

namespace lockstep::collectors {
namespace {

using settings::Id;
using settings::Setting;

// A value that problem() accepted, into the Config. Every row of settings.def is here.
void apply(const Setting& setting, const std::string& value, Config& config) {
  switch (setting.id) {
    case Id::Dir:
      config.dir = value;
      break;
    case Id::Level:
      config.level = static_cast<Level>(*settings::parse_level(value));
      break;
    case Id::Steps: {
      const settings::StepWindow window = *settings::parse_step_window(value);
      config.first_step = window.first;
      config.last_step = window.last;
      break;
    }
    case Id::Kernels:
      config.kernels = value;
      break;
    case Id::Stacks:
      config.stacks = value;
      break;
    case Id::MaxRegion:
      config.max_region = *settings::parse_byte_size(value);
      break;
    case Id::HostHashBytes:
      config.host_hash_bytes = *settings::parse_byte_size(value);
      break;
    case Id::MetricBytes:
      config.metric_bytes = static_cast<uint32_t>(*settings::parse_byte_size(value));
      break;
    case Id::StepOn:
      if (value == "auto" || value.empty()) {
        config.step_source = StepSource::Auto;
      } else if (value == "metric") {
        config.step_source = StepSource::Metric;
      } else if (value == "api" || value == "optimizer") {  // optimizer: the Python hooks' API calls
        config.step_source = StepSource::Api;
      } else if (value.starts_with("auto:")) {
        config.step_source = StepSource::Auto;
        if (value.size() > 5) config.step_pattern = value.substr(5);
      } else {
        config.step_source = StepSource::Markers;
        config.step_pattern = value;
      }
      break;
    case Id::Debug:
      config.debug = value == "2" || *settings::parse_switch(value);
      config.debug_phases = value == "2";
      break;
    case Id::RunId:
      config.run_id = value;
      break;
    case Id::Overwrite:
      config.overwrite = *settings::parse_switch(value);
      break;
    case Id::FailHard:
      config.fail_hard = *settings::parse_switch(value);
      break;
    case Id::Memory:
      config.memory = *settings::parse_byte_size(value);
      break;
    case Id::HashMemory:
      config.hash_memory = *settings::parse_byte_size(value);
      break;
    case Id::Validate:
      config.validate = *settings::parse_switch(value);
      break;
    case Id::MergeHashes: {
      std::string word = value;
      for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (word == "adjacent") {
        config.merge_hashes = true;
        config.chain_hashes = false;
      } else {
        config.merge_hashes = config.chain_hashes = *settings::parse_switch(value);
      }
      break;
    }
    case Id::ReuseDigests:
      config.reuse_digests = *settings::parse_switch(value);
      break;
    case Id::SkipUnwritten:
      config.skip_unwritten = *settings::parse_switch(value);
      break;
    case Id::CarryFreed:
      config.carry_freed = *settings::parse_switch(value);
      break;
    case Id::SideHashes:
      config.side_hashes = *settings::parse_switch(value);
      break;
    case Id::HoldAcrossSync:
      config.hold_across_sync = *settings::parse_switch(value);
      break;
    case Id::LearnReadOnly:
      config.learn_read_only = *settings::parse_switch(value);
      break;
    case Id::RecallFills:
      config.recall_fills = *settings::parse_switch(value);
      break;
    case Id::FromCli:
      config.from_cli = *settings::parse_switch(value);
      break;
    case Id::RecordEnv:
      config.record_env = value == "none" ? std::string() : value;
      break;
    case Id::NcclProfiler: {
      const std::optional<bool> on = settings::parse_switch(value);  // else "auto" (validated)
      config.nccl_profiler = on.value_or(true);
      break;
    }
    case Id::Lib:
      break;  // read by the CLI, not the shim
    case Id::Commit:
      break;  // read by the benchmarks and the GPU suite, not the shim
    case Id::Replay:
      config.replay = value;
      break;
    case Id::Replays:
      config.replays = static_cast<uint32_t>(std::stoul(value));
      break;
    case Id::State:
    case Id::Scopes:
      break;  // read by the Python hook (python/lockstep/_torch_hooks.py), not the shim
    case Id::ResumeAt:
    case Id::Checkpoint:
      break;  // for the job (`lockstep check --resume-at`), not the shim
  }
}

// Can a file be made in `dir` (an existing directory)? 0 or the errno.
int probe_write(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0 && errno != EACCES && errno != EROFS && errno != EDQUOT && errno != ENOSPC) {
    // A file system without unnamed files: a named one, removed at once.
    const std::string probe = fmt::format("{}/.lockstep-probe-{}", dir, ::getpid());
    fd = ::open(probe.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd >= 0) ::unlink(probe.c_str());
  }
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

}  // namespace

std::string_view level_name(Level level) {
  const auto index = static_cast<size_t>(level);
  return index < std::size(settings::kLevelNames) ? settings::kLevelNames[index] : "?";
}

std::string failure_line(const Config& config, std::string_view what) {
  std::string line =
      config.fail_hard ? fmt::format("lockstep: {}; stopping the job ({}=1, exit code {})", what,
                                     settings::get(Id::FailHard).name, settings::kFailHardExitCode)
                       : fmt::format("lockstep: {}; running untraced", what);
  return config.from_cli ? settings::cli_wording(std::move(line)) : line;
}

ConfigResult parse_config(const EnvLookup& getenv_fn) {
  ConfigResult result;
  Config& config = result.config;
  config.step_pattern = kDefaultStepPattern;
  std::vector<std::pair<const Setting*, std::string>> rejected;
  auto read = [&](const Setting& setting) {
    const char* value = getenv_fn(setting.name);
    if (value == nullptr) return;
    if (auto why = settings::problem(setting, value))
      rejected.emplace_back(&setting, *why);
    else
      apply(setting, value, config);
  };
  // First how to word the messages (stop or run untraced; flags or variables), then the rest.
  read(settings::get(Id::FailHard));
  read(settings::get(Id::FromCli));
  for (const Setting& setting : settings::all())
    if (setting.id != Id::FailHard && setting.id != Id::FromCli) read(setting);
  for (const auto& [setting, why] : rejected) {
    const std::string given = settings::given_as(*setting, getenv_fn(setting->name), false);
    result.errors.push_back(failure_line(config, given + " " + why));
  }
  return result;
}

std::optional<std::string> trace_dir_problem(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string name = settings::get(Id::Dir).name;
  std::error_code ec;
  const fs::path target = fs::absolute(dir, ec).lexically_normal();
  if (ec) return fmt::format("{} {} cannot be used: {}", name, dir, ec.message());
  fs::path existing = target;
  while (!fs::exists(existing, ec) && existing.has_parent_path() &&
         existing != existing.parent_path())
    existing = existing.parent_path();
  if (!fs::is_directory(existing, ec)) {
    if (existing == target) return fmt::format("{} {} is not a directory", name, dir);
    return fmt::format("{} {} cannot be created: {} is not a directory", name, dir,
                       existing.string());
  }
  if (const int err = probe_write(existing.string())) {
    if (existing == target)
      return fmt::format("{} {} is not writable: {}", name, dir, std::strerror(err));
    return fmt::format("{} {} cannot be created in {}: {}", name, dir, existing.string(),
                       std::strerror(err));
  }
  return std::nullopt;
}

ConfigResult load_config(const EnvLookup& getenv_fn, const char* const* envp) {
  ConfigResult result = parse_config(getenv_fn);
  result.warnings = settings::unknown_variable_warnings(envp);
  if (result.ok() && result.config.level != Level::Off) {
    if (auto problem = trace_dir_problem(result.config.dir))
      result.errors.push_back(failure_line(result.config, *problem));
  }
  return result;
}

}  // namespace lockstep::collectors
