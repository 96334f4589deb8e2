// The subcommands. Each add_* registers its CLI11 subcommand (options, --help text with
// examples) and returns what to run once parsing succeeded; the int is the exit code.
#pragma once

#include <charconv>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "tools/diff/result.h"

namespace lockstep::tools {

using CommandRunner = std::function<int()>;
struct DiffContext;

CommandRunner add_run_command(CLI::App& app);
CommandRunner add_diff_command(CLI::App& app);
CommandRunner add_check_command(CLI::App& app);
CommandRunner add_hunt_command(CLI::App& app);
CommandRunner add_show_command(CLI::App& app);
CommandRunner add_stats_command(CLI::App& app);
CommandRunner add_verify_command(CLI::App& app);
CommandRunner add_export_command(CLI::App& app);
CommandRunner add_gather_command(CLI::App& app);
CommandRunner add_audit_command(CLI::App& app);
CommandRunner add_replay_command(CLI::App& app);

// Exit codes shared by diff, check and hunt. Incomplete (no divergence in what was compared, but
// not everything was compared) shares 2 with invalid input: a gate must not pass either.
inline constexpr int kExitIdentical = 0, kExitDivergent = 1, kExitInvalid = 2, kExitIncomplete = 2;
int exit_code(Verdict verdict);

struct DiffRequest {
  std::string a, b;
  bool json = false;
  std::optional<int> rank;
  std::string steps;  // A-B
  int context = 3;
  bool exhaustive = false;
  bool salvage = false;  // read the prefix before a corrupt block (the verdict says so)
  int threads = 0;
  std::string align = "auto";  // --align: auto | number | ordinal (tools/diff/alignment.h)
  bool print = true;           // write the report to stdout
};

// Diffs two runs; returns the exit code (throws InputError / TraceError for bad input). `context`
// receives what the reports need besides the result (the Python package builds its JSON).
int run_diff(const DiffRequest& request, DiffResult* result = nullptr,
             DiffContext* context = nullptr);

// audit's check of one run (tools/audit.h): 0 clean, 1 suspect; the report on stdout. Throws
// InputError / TraceError for bad input.
int run_audit(const std::string& dir, bool json, bool salvage);

// verify's check: 0 certified, 2 not (reasons on stderr when printing).
int run_verify(const std::string& dir, bool print);

// stats' report of a run (throws InputError for a corrupt block unless salvaging).
std::string stats_report(const std::string& dir, int top, bool salvage);

// The flags of common/settings.def that set a TraceRequest field (--level, --steps, --kernels,
// --stacks, --state; -o/--output and --overwrite too unless the command has its own), with the
// table's help: the one home of the trace flags of run and check (run.cpp).
struct TraceRequest;
void add_setting_flags(CLI::App* sub, TraceRequest& request, bool own_output);

// The check of an option read into a uint64_t: decimal digits, within 64 bits. CLI11 2.1's own
// conversion wraps "-1" and saturates 2^64 without a word (`show --limit -1` was no limit).
inline CLI::Validator whole_number() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [at, error] = std::from_chars(text.data(), end, value);
        if (text.empty() || error != std::errc() || at != end)
          return "'" + text + "' is not a whole number from 0 to 18446744073709551615";
        return {};
      },
      "");
}

// "lockstep: warning: ..." on stderr.
void warn(const std::string& message);

// One line about a finished run's trace directory (ranks, records, steps, dropped).
std::string trace_summary_line(const std::string& dir);

}  // namespace lockstep::tools
