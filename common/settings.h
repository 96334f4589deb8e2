// lockstep's settings (settings.def) and the parsers of their values: one home for what the shim
// accepts, what `lockstep run` offers as flags and what README documents. Standard library only.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::settings {

// What a setting accepts: one parser each (problem() in settings.cpp says what it accepts).
enum class Kind : uint8_t {
  Text,         // any non-empty text
  Level,        // a level name, any case
  Steps,        // step window A-B, A- or A
  Regex,        // ECMAScript regular expression
  Bytes,        // byte size within [min, max]
  Switch,       // 1/true/yes/on or 0/false/no/off, any case; empty is 0
  Debug,        // a switch, or 2
  StepOn,       // auto, metric, api, auto:REGEX or REGEX
  RunId,        // 1 to 64 of [A-Za-z0-9._-]
  MergeHashes,  // a switch, or adjacent
  StateSet,     // off (or a false switch word), or a comma list of params, grads, optimizer; all
  AutoSwitch,   // auto, or a switch
  Op,           // one op by identity: STEP:STREAM:KIND:NAME:OCCURRENCE (op_spec.h)
  Count,        // a whole number within [min, max]
};
struct KindSpec {
  Kind kind;
  uint64_t min = 0;  // Bytes and Count only
  uint64_t max = 0;
};

enum class Id : uint8_t {
#define LOCKSTEP_SETTING(id, name, default_text, kind, flag, help) id,
#include "common/settings.def"
#undef LOCKSTEP_SETTING
};

struct Setting {
  Id id;
  const char* name;          // LOCKSTEP_...
  const char* default_text;  // as README shows it
  KindSpec kind;
  const char* cli_flag;  // CLI11 names ("-o,--output"), "" if `lockstep run` has none
  const char* help;
};

std::span<const Setting> all();  // in settings.def order
const Setting& get(Id id);
const Setting* find(std::string_view name);  // by environment variable name; null if none

// The levels, lowest first; collectors::Level numbers them in this order.
inline constexpr std::string_view kLevelNames[] = {"off", "metrics", "broad", "full"};
inline constexpr size_t kDefaultLevel = 2;                 // broad
std::optional<size_t> parse_level(std::string_view text);  // index into kLevelNames, any case

// A step window: A-B (A <= B), A- (A to the end) or A, whole numbers up to UINT32_MAX. The one
// parser of LOCKSTEP_STEPS, `lockstep run --steps` and `lockstep diff --steps`.
struct StepWindow {
  uint32_t first = 0;
  uint32_t last = UINT32_MAX;
};
std::optional<StepWindow> parse_step_window(std::string_view text);

std::optional<uint64_t> parse_byte_size(std::string_view text);  // 123, 4K, 16M, 1G, 2GiB, 1T
std::optional<bool> parse_switch(std::string_view text);         // see Kind::Switch
bool valid_regex(const std::string& pattern, std::string* why);  // ECMAScript

// Why `value` is not accepted by the setting, as the end of a sentence that lists exactly what
// is ("is not one of off|metrics|broad|full"); nullopt when it is accepted.
std::optional<std::string> problem(const Setting& setting, std::string_view value);

// How the user gave a setting: "LOCKSTEP_STEPS=7-3", or "--steps 7-3" through `lockstep run`.
std::string given_as(const Setting& setting, std::string_view value, bool from_cli);

// The long flag of a setting ("--output" for "-o,--output"); empty without one.
std::string long_flag(const Setting& setting);
// The help of a setting for `lockstep run --help`: a switch's leading "1: " dropped.
std::string cli_help(const Setting& setting);
// A message worded for a user of `lockstep run`: every "NAME=1" of a switch with a flag becomes
// the flag, every other NAME of a setting with a flag the flag ("--output /x ...").
std::string cli_wording(std::string message);

// The configuration table: every setting (collectors/README.md), or only those `lockstep run`
// has a flag for (README.md, which points to the full one).
enum class TableRows { All, WithFlag };
std::string markdown_table(TableRows rows = TableRows::All);

// One warning line per LOCKSTEP_* variable in `envp` (NAME=value strings, null-terminated) that
// is no setting, naming the nearest setting by edit distance. Never an error: a misspelled
// name must not stop a job, but must not pass in silence either.
std::vector<std::string> unknown_variable_warnings(const char* const* envp);
std::string_view nearest_setting(std::string_view name);
size_t edit_distance(std::string_view a, std::string_view b);

// LOCKSTEP_FAIL_HARD=1: the exit code of a job stopped for a bad setting or a trace directory
// that cannot be written: EX_CONFIG of sysexits.h, clear of the job's own 1/2, of a shell's
// 126/127 and of 128+signal. settings.def's help says it; a test keeps them equal.
inline constexpr int kFailHardExitCode = 78;
// Flushes stdio and ends the process with kFailHardExitCode at once: no atexit handlers or static
// destructors, which may run inside the CUDA call the shim stopped in (no abort: no core dump,
// no second line from the C library).
[[noreturn]] void stop_job();

}  // namespace lockstep::settings
