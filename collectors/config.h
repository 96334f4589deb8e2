// Configuration of the shim from the environment (names in common/env.h). Parsed once, validated
// completely: a bad value yields one clear message and tracing stays off for the whole process
// (LOCKSTEP_FAIL_HARD=1 turns that into an abort with the same message).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::collectors {

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
  uint32_t first_step = 0;            // LOCKSTEP_STEPS window, inclusive
  uint32_t last_step = UINT32_MAX;
  std::string kernels;                // regex (ECMAScript); empty = every kernel
  uint64_t max_region = 256ull << 20; // bytes per pointer region at level full
  uint32_t metric_bytes = 64;         // D2H copies of at most this many bytes are metrics
  StepSource step_source = StepSource::Auto;
  std::string step_pattern;           // regex, case-insensitive, matched against marker text
  bool debug = false;
  bool debug_phases = false;  // LOCKSTEP_DEBUG=2: self time of the nested phases too
  std::string run_id;                 // empty: the run directory code picks one
  bool overwrite = false;
  bool fail_hard = false;
  uint64_t memory = 64ull << 20;      // trace writer budget
  uint64_t hash_memory = 16ull << 20; // hash engine device scratch
  bool validate = false;
  bool merge_hashes = true;           // a kernel's output hashes ride on the next launch's
  bool chain_hashes = true;           // ... also past calls that need no hash launch themselves
  bool reuse_digests = true;          // an input nothing wrote since its last hash: that digest
  bool skip_unwritten = false;        // inputs in allocations nothing wrote yet: not hashed
  bool learn_read_only = true;        // kernel pointer words seen not written: no output hash
  bool recall_fills = true;           // a known fill's output digest from an earlier same fill

  bool in_window(uint32_t step) const { return step >= first_step && step <= last_step; }
};

inline constexpr const char* kDefaultStepPattern = R"(^(train[ _-]?)?step\b)";

// One row of the configuration table (README.md carries the same table; a test compares them).
struct EnvVarDoc {
  const char* name;
  const char* default_value;
  const char* meaning;
};
const std::vector<EnvVarDoc>& env_var_table();
std::string env_var_table_markdown();

struct ConfigResult {
  Config config;
  std::vector<std::string> errors;  // one line each, "lockstep: ...; running untraced"
  bool ok() const { return errors.empty(); }
};

// getenv is injectable for tests. Every variable is checked, so all problems are reported.
using EnvLookup = std::function<const char*(const char* name)>;
ConfigResult parse_config(const EnvLookup& getenv_fn);

// Pieces, exposed for tests.
std::optional<uint64_t> parse_byte_size(std::string_view text);  // 123, 4K, 16M, 1G, 2GiB
std::optional<bool> parse_bool(std::string_view text);           // 0/1/true/false/yes/no/on/off
bool parse_step_window(std::string_view text, uint32_t* first, uint32_t* last);  // A-B, A-, A

}  // namespace lockstep::collectors
