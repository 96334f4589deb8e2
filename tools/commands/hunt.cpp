#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "tools/commands/commands.h"
#include "tools/launch.h"
#include "tools/report.h"
#include "tools/run_set.h"
#include "tools/term.h"

namespace lockstep::tools {

namespace {

struct HuntRequest {
  std::string dir;
  bool overwrite = false;
  bool json = false;
  int margin = 0;
  int attempts = 3;
  std::string torch_alloc = "auto";
  std::vector<std::string> command;
};

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Two traced runs of the command at one level; returns the diff's exit code.
// Run directories are <dir>/<tag>-1 and <dir>/<tag>-2.
int traced_pair(const HuntRequest& request, const std::string& level, const std::string& tag,
                const std::string& steps, DiffResult& result) {
  std::string dirs[2];
  for (int i = 0; i < 2; ++i) {
    TraceRequest trace;
    trace.dir = (std::filesystem::path(request.dir) / fmt::format("{}-{}", tag, i + 1)).string();
    trace.level = level;
    trace.steps = steps;
    trace.overwrite = request.overwrite;
    trace.torch_alloc = request.torch_alloc;
    trace.command = request.command;
    LaunchResult launched = launch_traced(trace);
    if (launched.exit_code != 0)
      throw InputError(fmt::format("{}: the command exited with code {} ({} run {})",
                                   request.command[0], launched.exit_code, level, i + 1));
    dirs[i] = trace.dir;
  }
  DiffRequest diff;
  diff.a = dirs[0];
  diff.b = dirs[1];
  diff.steps = steps;
  diff.print = false;
  return run_diff(diff, &result);
}

}  // namespace

CommandRunner add_hunt_command(CLI::App& app) {
  auto request = std::make_shared<HuntRequest>();
  CLI::App* sub = app.add_subcommand(
      "hunt", "Find the first op whose inputs matched and outputs differed, progressively");
  sub->add_option("-o,--output", request->dir,
                  "Directory for the runs (default ./lockstep-trace-<time>)");
  sub->add_flag("--overwrite", request->overwrite, "Reuse run directories");
  sub->add_option("--margin", request->margin,
                  "Extra steps before the diverging step in the full-level window")
      ->capture_default_str();
  sub->add_option("--attempts", request->attempts,
                  "Pairs of full-level runs to try when the nondeterminism does not recur")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  sub->add_flag("--json", request->json, "Print the final diff as JSON");
  sub->add_option("--torch-alloc", request->torch_alloc, kTorchAllocHelp)->capture_default_str();
  sub->add_option("command", request->command, "The command to run, after --")->required();
  sub->footer(R"(Stage 1: two runs at --level broad find the earliest diverging step and its rank.
Stage 2: two runs at --level full, fingerprinting only that step, find the op whose inputs
matched and whose outputs differed; nondeterminism need not recur in every pair of runs, so
stage 2 tries up to --attempts pairs. Each stage prints how long it took.
Exit status: 0 no divergence, 1 divergence found, 2 incomplete (a trace cut off or unfinished:
not everything was compared) or invalid (command failed, unreadable trace).

Examples:
  lockstep hunt -- python train.py --steps 20
  lockstep hunt -o /tmp/hunt --margin 1 -- torchrun --nproc-per-node 2 train.py)");
  return [request] {
    if (request->dir.empty()) request->dir = default_trace_dir();
    Style style(stdout);
    auto start = std::chrono::steady_clock::now();
    DiffResult broad;
    int code = traced_pair(*request, "broad", "broad", "", broad);
    std::printf("stage 1 (broad, 2 runs + diff): %.2f s: ", since(start));
    if (code == kExitIdentical) {
      std::printf("%s\n", style.green("no divergence").c_str());
      return kExitIdentical;
    }
    if (code == kExitIncomplete) {  // no divergence in what could be compared: not a pass
      std::printf("%s: %s\n", style.yellow("INCOMPLETE").c_str(), coverage_line(broad).c_str());
      return kExitIncomplete;
    }
    uint32_t step =
        broad.first_by_epoch.empty() ? broad.metric->step : broad.first_by_epoch.front().step;
    std::string origin = broad.culprit ? fmt::format("rank {}", broad.culprit->rank)
                                       : std::string("no origin rank at this level");
    std::printf("earliest diverging step %u, %s\n", step, origin.c_str());
    std::fflush(stdout);

    uint32_t first = step > static_cast<uint32_t>(request->margin) ? step - request->margin : 0;
    std::string window = fmt::format("{}-{}", first, step);
    DiffResult full;
    std::string full_tag;
    for (int attempt = 1; attempt <= request->attempts; ++attempt) {
      start = std::chrono::steady_clock::now();
      full = DiffResult{};
      full_tag = attempt == 1 ? "full" : fmt::format("full-attempt{}", attempt);
      code = traced_pair(*request, "full", full_tag, window, full);
      std::printf("stage 2 (full, steps %s, 2 runs + diff, attempt %d of %d): %.2f s: ",
                  window.c_str(), attempt, request->attempts, since(start));
      if (code == kExitIncomplete) {
        std::printf("%s: %s\n", style.yellow("INCOMPLETE").c_str(), coverage_line(full).c_str());
        return kExitIncomplete;
      }
      if (code != kExitIdentical) break;
      std::printf("%s\n", style.yellow("no divergence in the window this time").c_str());
      std::fflush(stdout);
    }
    if (code == kExitIdentical) {
      std::printf(
          "the nondeterminism did not recur in %d pair%s of full-level runs; the broad "
          "diff above is all there is\n",
          request->attempts, request->attempts == 1 ? "" : "s");
      if (request->json) {
        DiffContext context{(std::filesystem::path(request->dir) / "broad-1").string(),
                            (std::filesystem::path(request->dir) / "broad-2").string(),
                            0,
                            {},
                            0};
        for (const RankResult& r : broad.ranks) context.ranks.push_back(r.rank);
        context.world_size = static_cast<int>(context.ranks.size());
        std::printf("%s\n", diff_json(broad, context).dump(2).c_str());
      }
      return kExitDivergent;
    }
    if (full.culprit)
      std::printf("%s rank %d, step %u: %s\n", style.red("origin").c_str(), full.culprit->rank,
                  full.culprit->step, op_label(*full.culprit).c_str());
    else
      std::printf("no op with matching inputs and differing outputs in the window\n");
    DiffContext context{(std::filesystem::path(request->dir) / (full_tag + "-1")).string(),
                        (std::filesystem::path(request->dir) / (full_tag + "-2")).string(),
                        0,
                        {},
                        0};
    for (const RankResult& r : full.ranks) context.ranks.push_back(r.rank);
    context.world_size = static_cast<int>(context.ranks.size());
    std::printf("\n%s", request->json ? (diff_json(full, context).dump(2) + "\n").c_str()
                                      : diff_text(full, context, style).c_str());
    return kExitDivergent;
  };
}

}  // namespace lockstep::tools
