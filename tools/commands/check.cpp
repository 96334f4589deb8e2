#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "tools/commands/commands.h"
#include "tools/launch.h"
#include "tools/run_set.h"

namespace lockstep::tools {

namespace {
struct CheckRequest {
  int runs = 2;
  TraceRequest trace;
  bool json = false;
};
}  // namespace

CommandRunner add_check_command(CLI::App& app) {
  auto request = std::make_shared<CheckRequest>();
  CLI::App* sub = app.add_subcommand("check",
                                     "Run a command traced several times and diff the "
                                     "runs: a determinism gate for CI");
  sub->add_option("--runs", request->runs, "How many runs (at least 2)")->capture_default_str();
  sub->add_option("--level", request->trace.level, "Trace level: off, metrics, broad, full");
  sub->add_option("--steps", request->trace.steps, "Fingerprint only steps A-B");
  sub->add_option("-o,--output", request->trace.dir,
                  "Directory for the runs (run-1, run-2, ...; default ./lockstep-trace-<time>)");
  sub->add_flag("--overwrite", request->trace.overwrite, "Reuse run directories");
  sub->add_option("--torch-alloc", request->trace.torch_alloc, kTorchAllocHelp)
      ->capture_default_str();
  sub->add_flag("--json", request->json, "Print each diff as JSON");
  sub->add_option("command", request->trace.command, "The command to run, after --")->required();
  sub->footer(
      R"(Exit status: 0 all runs identical, 1 divergent, 2 incomplete (a trace cut off, unfinished
or dropping records: not everything was compared) or invalid (the command failed, or a trace
could not be read).

Examples:
  lockstep check -- python train.py --steps 5
  lockstep check --runs 3 --level full -o /tmp/gate -- ./app)");
  return [request] {
    if (request->runs < 2) throw InputError("--runs: needs at least 2");
    std::string base = request->trace.dir.empty() ? default_trace_dir() : request->trace.dir;
    std::vector<std::string> dirs;
    for (int i = 1; i <= request->runs; ++i) {
      TraceRequest trace = request->trace;
      trace.dir = (std::filesystem::path(base) / fmt::format("run-{}", i)).string();
      LaunchResult launched = launch_traced(trace);
      std::fprintf(stderr, "lockstep check: run %d: exit %d, %.2f s, %s\n", i, launched.exit_code,
                   launched.seconds, trace_summary_line(trace.dir).c_str());
      if (launched.exit_code != 0)
        throw InputError(fmt::format("{}: the command exited with code {} in run {}",
                                     request->trace.command[0], launched.exit_code, i));
      dirs.push_back(trace.dir);
    }
    // A divergence anywhere is real whatever else is missing; otherwise one incomplete diff
    // makes the gate incomplete (exit 2), never deterministic.
    bool divergent = false, incomplete = false;
    for (size_t i = 1; i < dirs.size(); ++i) {
      DiffRequest diff;
      diff.a = dirs[0];
      diff.b = dirs[i];
      diff.json = request->json;
      DiffResult result;
      run_diff(diff, &result);
      Verdict verdict = verdict_of(result);
      divergent = divergent || verdict == Verdict::Divergent;
      incomplete = incomplete || verdict == Verdict::Incomplete;
    }
    int worst = divergent ? kExitDivergent : incomplete ? kExitIncomplete : kExitIdentical;
    std::printf("lockstep check: %s (%d runs in %s)\n",
                divergent    ? "DIVERGENT"
                : incomplete ? "INCOMPLETE"
                             : "DETERMINISTIC",
                request->runs, base.c_str());
    return worst;
  };
}

}  // namespace lockstep::tools
