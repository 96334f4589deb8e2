#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "tools/commands/commands.h"
#include "tools/launch.h"
#include "tools/report.h"
#include "tools/resume_check.h"
#include "tools/run_set.h"

namespace lockstep::tools {

namespace {
struct CheckRequest {
  int runs = 2;
  TraceRequest trace;
  bool json = false;
  std::optional<uint64_t> resume_at;  // --resume-at K: resume certification (resume_check.h)
};
}  // namespace

CommandRunner add_check_command(CLI::App& app) {
  auto request = std::make_shared<CheckRequest>();
  CLI::App* sub = app.add_subcommand("check",
                                     "Run a command traced several times and diff the "
                                     "runs: a determinism gate for CI");
  sub->add_option("--runs", request->runs, "How many runs (at least 2)")->capture_default_str();
  add_setting_flags(sub, request->trace, /*own_output=*/true);  // --level, --steps, ...
  sub->add_option("-o,--output", request->trace.dir,
                  "Directory for the runs (run-1, run-2, ...; default ./lockstep-trace-<time>)");
  sub->add_flag("--overwrite", request->trace.overwrite, "Reuse run directories");
  sub->add_option("--torch-alloc", request->trace.torch_alloc, kTorchAllocHelp)
      ->capture_default_str();
  sub->add_option("--jax-alloc", request->trace.jax_alloc, kJaxAllocHelp)
      ->capture_default_str();
  sub->add_option("--jax-graphs", request->trace.jax_graphs, kJaxGraphsHelp)
      ->capture_default_str();
  sub->add_flag("--json", request->json,
                "Print only one JSON document on stdout: the diff that decided the verdict, with "
                "every pair's verdict in it (the job's output goes to each run's job.log)");
  sub->add_option("--resume-at", request->resume_at,
                  "Run the job straight, then resumed from its own checkpoint of step K, and "
                  "diff them by the job's step numbers (the job's side: see below)")
      ->check(whole_number());
  sub->add_option("command", request->trace.command, "The command to run, after --")->required();
  sub->footer(
      R"(Run 1 is diffed against every other run. Each run's directory (run-1, run-2, ...) keeps
the job's stdout and stderr in job.log; they are shown on the terminal too, except with
--json, where stdout carries only the JSON document (progress and, on a terminal, the job's
output go to stderr).
Exit status: 0 all runs identical, 1 divergent, 2 incomplete (a trace cut off, unfinished
or dropping records: not everything was compared) or invalid (the command failed, or a trace
could not be read).

With --resume-at K (resume certification): the job runs twice, into DIR/straight and
DIR/resumed, both with LOCKSTEP_RESUME_AT=K and LOCKSTEP_CHECKPOINT=DIR/checkpoint in the
environment ({resume_at} and {checkpoint} in its arguments are replaced by the same). The
first run finds no checkpoint file: it runs from the start and saves its state there before
step K. The second finds it: it loads it and runs steps K to the end. Both must number their
steps (lockstep_step_number(n), lockstep.step(n), NVTX "step N"). The runs are diffed by those
numbers: exit 0 means the resume is bit-exact for the steps both ran.

Examples:
  lockstep check -- python train.py --steps 5
  lockstep check --json -- python train.py --steps 5 | jq .check.verdict
  lockstep check --runs 3 --level full -o /tmp/gate -- ./app
  lockstep check --resume-at 4 -- python examples/pytorch/train_gpt.py --steps 8
  lockstep check --resume-at 4 -- ./train --resume-step {resume_at} --ckpt {checkpoint})");
  return [request] {
    if (request->resume_at) {
      if (request->runs != 2)
        throw InputError("--runs: --resume-at runs the job twice (straight, then resumed)");
      return run_resume_check({*request->resume_at, request->trace, request->json});
    }
    if (request->runs < 2) throw InputError("--runs: needs at least 2");
    std::string base = request->trace.dir.empty() ? default_trace_dir() : request->trace.dir;
    std::vector<std::string> dirs;
    for (int i = 1; i <= request->runs; ++i) {
      TraceRequest trace = request->trace;
      trace.dir = (std::filesystem::path(base) / fmt::format("run-{}", i)).string();
      trace.output = request->json ? JobOutput::LogOnly : JobOutput::LogAndEcho;
      LaunchResult launched = launch_traced(trace);
      std::fprintf(stderr, "lockstep check: run %d: exit %d, %.2f s, %s\n", i, launched.exit_code,
                   launched.seconds, trace_summary_line(trace.dir).c_str());
      if (launched.exit_code != 0)
        throw InputError(
            fmt::format("{}: the command exited with code {} in run {} (its output: {})",
                        request->trace.command[0], launched.exit_code, i,
                        (std::filesystem::path(trace.dir) / kJobLogName).string()));
      dirs.push_back(trace.dir);
    }
    // A divergence anywhere is real whatever else is missing; otherwise one incomplete diff
    // makes the gate incomplete (exit 2), never deterministic.
    bool divergent = false, incomplete = false;
    // Under --json one document: the first divergent diff, else the first incomplete one, else
    // the last; every pair's verdict goes in its `check` member.
    nlohmann::json pairs = nlohmann::json::array();
    std::optional<nlohmann::json> reported;
    int reported_severity = -1;  // 2 divergent, 1 incomplete, 0 identical
    for (size_t i = 1; i < dirs.size(); ++i) {
      DiffRequest diff;
      diff.a = dirs[0];
      diff.b = dirs[i];
      diff.print = !request->json;
      DiffResult result;
      auto start = std::chrono::steady_clock::now();
      run_diff(diff, &result);
      Verdict verdict = verdict_of(result);
      divergent = divergent || verdict == Verdict::Divergent;
      incomplete = incomplete || verdict == Verdict::Incomplete;
      pairs.push_back({{"a", dirs[0]}, {"b", dirs[i]}, {"verdict", verdict_name(verdict)}});
      const int severity = verdict == Verdict::Divergent    ? 2
                           : verdict == Verdict::Incomplete ? 1
                                                            : 0;
      if (request->json &&
          (severity > reported_severity || (severity == 0 && reported_severity == 0))) {
        DiffContext context{
            dirs[0],
            dirs[i],
            0,
            {},
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
        for (const RankResult& r : result.ranks) context.ranks.push_back(r.rank);
        context.world_size = static_cast<int>(context.ranks.size());
        reported = diff_json(result, context);
        reported_severity = severity;
      }
    }
    int worst = divergent ? kExitDivergent : incomplete ? kExitIncomplete : kExitIdentical;
    const char* gate = divergent ? "DIVERGENT" : incomplete ? "INCOMPLETE" : "DETERMINISTIC";
    std::fprintf(request->json ? stderr : stdout, "lockstep check: %s (%d runs in %s)\n", gate,
                 request->runs, base.c_str());
    if (request->json && reported) {
      (*reported)["check"] = {{"verdict", divergent    ? "divergent"
                                          : incomplete ? "incomplete"
                                                       : "deterministic"},
                              {"runs", dirs},
                              {"pairs", pairs}};
      std::fputs((reported->dump(2) + "\n").c_str(), stdout);
    }
    return worst;
  };
}

}  // namespace lockstep::tools
