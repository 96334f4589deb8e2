// Configuration of the shim from the environment (the settings in common/settings.def, whose
// parsers validate every value). Parsed once, when the shim loads, validated completely: a bad
// value yields one clear line and tracing stays off for the whole process
// (LOCKSTEP_FAIL_HARD=1: the line says the job stops, and it stops with exit code
// settings::kFailHardExitCode).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::collectors {

// In the order of settings::kLevelNames, which names them.
enum class Level : uint8_t { Off = 0, Metrics = 1, Broad = 2, Full = 3 };
std::string_view level_name(Level level);

// How the step counter advances when no explicit lockstep_step() is used. See README.md.
enum class StepSource : uint8_t {
  Auto,     // markers matching the pattern; Metric records end steps until the first marker
  Markers,  // only markers matching the pattern (and the explicit API)
  Metric,   // only Metric records (and the explicit API)
  Api,      // only lockstep_step() / lockstep_mark()
};

struct Config {
  std::string dir = "lockstep-trace";
  Level level = Level::Broad;
  uint32_t first_step = 0;  // LOCKSTEP_STEPS window, inclusive
  uint32_t last_step = UINT32_MAX;
  std::string kernels;                 // regex (ECMAScript); empty = every kernel
  std::string stacks;                  // LOCKSTEP_STACKS regex; empty = no kernel's stack
  uint64_t max_region = 256ull << 20;  // bytes per pointer region at level full
  uint64_t host_hash_bytes = 64ull << 20;  // H2D copies: host source hashed on the CPU, capped
  uint32_t metric_bytes = 64;          // D2H copies of at most this many bytes are metrics
  StepSource step_source = StepSource::Auto;
  std::string step_pattern;  // regex, case-insensitive, matched against marker text
  bool debug = false;
  bool debug_phases = false;  // LOCKSTEP_DEBUG=2: self time of the nested phases too
  std::string run_id;         // empty: the run directory code picks one
  bool overwrite = false;
  bool fail_hard = false;
  uint64_t memory = 64ull << 20;       // trace writer budget
  uint64_t hash_memory = 16ull << 20;  // hash engine device scratch
  bool validate = false;
  bool merge_hashes = true;     // a kernel's output hashes ride on the next launch's
  bool chain_hashes = true;     // ... also past calls that need no hash launch themselves
  bool reuse_digests = true;    // an input nothing wrote since its last hash: that digest
  bool skip_unwritten = false;  // inputs in allocations nothing wrote yet: not hashed
  bool carry_freed = false;     // a freed pool allocation's digest goes to its successor
  bool side_hashes = false;     // hash launches on a side stream, beside the job's kernels
  bool hold_across_sync = true;  // deferred hashes held across a metric copy and its sync
  bool learn_read_only = true;  // kernel pointer words seen not written: no output hash
  bool recall_fills = true;     // a known fill's output digest from an earlier same fill
  bool from_cli = false;        // started by `lockstep run`: messages name its flags
  std::string record_env;       // regex: more variables for the header's environment; "": none
  std::string replay;           // LOCKSTEP_REPLAY: STEP:STREAM:kernel:NAME:OCCURRENCE; "": none
  uint32_t replays = 16;        // LOCKSTEP_REPLAYS
  bool nccl_profiler = true;    // serve as NCCL's profiler plugin (NCCL's algorithm, protocol)

  bool in_window(uint32_t step) const { return step >= first_step && step <= last_step; }
  bool operator==(const Config&) const = default;
};

inline constexpr const char* kDefaultStepPattern = R"(^(train[ _-]?)?step\b)";

struct ConfigResult {
  Config config;
  std::vector<std::string> errors;    // one line each: failure_line()
  std::vector<std::string> warnings;  // one line each, never fatal (unknown LOCKSTEP_* names)
  bool ok() const { return errors.empty(); }
};

// getenv is injectable for tests. Every variable is checked, so all problems are reported.
using EnvLookup = std::function<const char*(const char* name)>;
ConfigResult parse_config(const EnvLookup& getenv_fn);

// What the shim does when it loads: parse_config, a warning for each LOCKSTEP_* variable of
// `envp` that is no setting, and (when tracing is on) trace_dir_problem() as one more error, so
// that a directory that cannot be written is said at load, not at the first CUDA call.
ConfigResult load_config(const EnvLookup& getenv_fn, const char* const* envp);

// Why the trace directory cannot be used, or nullopt. Touches no CUDA and leaves nothing behind:
// an existing directory gets an unnamed temporary file (O_TMPFILE, else a named one removed at
// once); a missing one is not created (every preloaded process, a shell included, runs this)
// but its nearest existing parent must take a file.
std::optional<std::string> trace_dir_problem(const std::string& dir);

// "lockstep: WHAT; running untraced", or with LOCKSTEP_FAIL_HARD=1 "lockstep: WHAT; stopping the
// job (LOCKSTEP_FAIL_HARD=1, exit code 78)"; through `lockstep run`, flags for variables.
std::string failure_line(const Config& config, std::string_view what);

}  // namespace lockstep::collectors
