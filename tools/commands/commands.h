// The subcommands. Each add_* registers its CLI11 subcommand (options, --help text with
// examples) and returns what to run once parsing succeeded; the int is the exit code.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "tools/diff/result.h"

namespace lockstep::tools {

using CommandRunner = std::function<int()>;

CommandRunner add_run_command(CLI::App& app);
CommandRunner add_diff_command(CLI::App& app);
CommandRunner add_check_command(CLI::App& app);
CommandRunner add_hunt_command(CLI::App& app);
CommandRunner add_show_command(CLI::App& app);
CommandRunner add_stats_command(CLI::App& app);
CommandRunner add_verify_command(CLI::App& app);
CommandRunner add_export_command(CLI::App& app);

// Exit codes shared by diff, check and hunt.
inline constexpr int kExitIdentical = 0, kExitDivergent = 1, kExitInvalid = 2;

struct DiffRequest {
  std::string a, b;
  bool json = false;
  std::optional<int> rank;
  std::string steps;  // A-B
  int context = 3;
  bool exhaustive = false;
  int threads = 0;
  bool print = true;  // write the report to stdout
};

// Diffs two runs; returns the exit code (throws InputError / TraceError for bad input).
int run_diff(const DiffRequest& request, DiffResult* result = nullptr);

// "lockstep: warning: ..." on stderr.
void warn(const std::string& message);

// One line about a finished run's trace directory (ranks, records, steps, dropped).
std::string trace_summary_line(const std::string& dir);

}  // namespace lockstep::tools
