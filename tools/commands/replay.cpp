// `lockstep replay`: the replay verdict (issue #30) for an op already found, without a hunt.
#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/commands/commands.h"
#include "tools/json_text.h"
#include "tools/launch.h"
#include "tools/replay_run.h"
#include "tools/report.h"
#include "tools/run_set.h"
#include "tools/why/names.h"
#include "trace/bounded_json.h"

namespace lockstep::tools {

namespace {

struct ReplayCliRequest {
  std::string dir;
  std::string op;
  std::string from;  // a diff's JSON (lockstep diff --json, lockstep hunt --json)
  int rank = -1;     // -1: the culprit's (--from), else 0
  int replays = 16;
  bool overwrite = false;
  bool json = false;
  std::string torch_alloc = "auto";
  std::string jax_alloc = "auto";
  std::vector<std::string> command;
};

// The culprit of a diff's JSON document as an op, and its rank. Throws InputError naming the
// file and the problem.
settings::OpSpec culprit_of(const std::string& path, int* rank) {
  // A regular file of a report's size (a FIFO blocked here, /dev/zero read on: found by fuzzing).
  constexpr uint64_t kMaxReportBytes = 256u << 20;
  std::string problem;
  std::optional<nlohmann::json> parsed = trace::read_bounded_json(path, kMaxReportBytes, &problem);
  if (!parsed || !parsed->is_object())
    throw InputError(fmt::format("{}: {} (expected `lockstep diff --json` output)", path,
                                 parsed ? "not a JSON object" : problem));
  const nlohmann::json& doc = *parsed;
  const nlohmann::json* c = doc.contains("culprit") ? &doc["culprit"] : nullptr;
  if (c == nullptr || c->is_null())
    throw InputError(fmt::format("{}: names no culprit (the runs did not diverge at an op)", path));
  try {
    settings::OpSpec op;
    op.step = c->at("step").get<uint32_t>();
    op.stream = c->at("stream").get<uint32_t>();
    op.kind = c->at("kind").get<std::string>();
    op.name = c->at("name").get<std::string>();
    op.occurrence = c->at("occurrence").get<uint32_t>();
    if (*rank < 0) *rank = c->at("rank").get<int>();
    if (op.occurrence == 0 || op.name.empty()) throw InputError("");
    return op;
  } catch (const std::exception&) {
    throw InputError(fmt::format(
        "{}: its culprit lacks step, stream, kind, name, occurrence or rank (not `lockstep diff "
        "--json` output?)",
        path));
  }
}

}  // namespace

CommandRunner add_replay_command(CLI::App& app) {
  auto request = std::make_shared<ReplayCliRequest>();
  CLI::App* sub = app.add_subcommand(
      "replay", "Relaunch one kernel of a run on its own inputs: is it nondeterministic?");
  sub->add_option("--op", request->op,
                  "The op, as STEP:STREAM:KIND:NAME:OCCURRENCE (trace step, stream ordinal, "
                  "kernel, the demangled name, its occurrence on that stream in that step: what "
                  "`lockstep diff` prints for a culprit)");
  sub->add_option("--from", request->from,
                  "The culprit of this diff's JSON (`lockstep diff --json`, `lockstep hunt "
                  "--json`) instead of --op");
  sub->add_option("--rank", request->rank, "Whose replay answers (default: the culprit's, or 0)")
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--replays", request->replays, "Relaunches from the snapshot of its inputs")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  sub->add_option("-o,--output", request->dir,
                  "Directory for the run (default ./lockstep-trace-<time>)");
  sub->add_flag("--overwrite", request->overwrite, "Reuse the run directory");
  sub->add_flag("--json", request->json,
                "Print the verdict as JSON on stdout (the job's output in the run's job.log)");
  sub->add_option("--torch-alloc", request->torch_alloc, kTorchAllocHelp)->capture_default_str();
  sub->add_option("--jax-alloc", request->jax_alloc, kJaxAllocHelp)->capture_default_str();
  sub->add_option("command", request->command, "The command to run, after --")->required();
  sub->footer(
      R"(Runs the command once at --level full within the op's step. At the one launch the op names,
the shim copies every region the launch may read or write aside (before it and after it),
relaunches the same kernel with the same arguments --replays more times from the copy taken
before, fingerprints each relaunch's output, and puts back what the job's own launch left: the
job goes on exactly as before. All on the launch's own stream, with no host synchronization;
it needs twice the regions' bytes of free GPU memory and says so when they do not fit.
The verdict:
  nondeterministic on identical inputs: 11 of 16 replays differ
    the kernel gives other bits on the same inputs (atomics, a race): the difference is its own
  deterministic on identical inputs in 16 replays: the difference needs another cause
    (an input no traced op wrote, concurrency with another stream, the environment)
Kernel ops only: GEMMs (cuBLAS/cuBLASLt), NCCL collectives and CUDA graph launches are not
replayed, and the answer says so. The run's trace holds the evidence (a Replay record:
`lockstep show DIR --step STEP`).
Exit status: 1 nondeterministic, 0 deterministic, 2 not replayed or incomplete (the reason on
stdout), or invalid input.

Examples:
  lockstep replay --op '3:1:kernel:planted_atomic_sum_squares(float const*, int, float*):1' \
      -- ./lockstep_example --steps 6
  lockstep diff --json run-a run-b > diff.json
  lockstep replay --from diff.json --replays 32 -- python train.py --steps 8)");
  return [request] {
    settings::OpSpec op;
    int rank = request->rank;
    if (request->op.empty() == request->from.empty())
      throw InputError("replay: give the op with exactly one of --op or --from");
    if (!request->op.empty()) {
      std::optional<settings::OpSpec> parsed = settings::parse_op_spec(request->op);
      if (!parsed)
        throw InputError(fmt::format(
            "--op: '{}' is not STEP:STREAM:KIND:NAME:OCCURRENCE (whole numbers, OCCURRENCE from "
            "1, e.g. 3:1:kernel:my_kernel:1)",
            request->op));
      op = *parsed;
    } else {
      op = culprit_of(request->from, &rank);
    }
    if (rank < 0) rank = 0;
    if (std::optional<std::string> why = replay_refusal(op))
      throw InputError(
          fmt::format("{}: not replayed: {}", request->op.empty() ? request->from : "--op", *why));
    ReplayRunRequest run;
    run.dir = request->dir.empty() ? default_trace_dir() : request->dir;
    run.op = op;
    run.rank = rank;
    run.replays = static_cast<uint32_t>(request->replays);
    run.overwrite = request->overwrite;
    run.torch_alloc = request->torch_alloc;
    run.jax_alloc = request->jax_alloc;
    run.command = request->command;
    run.output = request->json ? JobOutput::LogOnly : JobOutput::LogAndEcho;
    const ReplayVerdict verdict = run_replay(run);
    if (request->json) {
      nlohmann::json doc = replay_verdict_json(verdict);
      doc["op"] = {{"step", op.step}, {"stream", op.stream},         {"kind", op.kind},
                   {"name", op.name}, {"occurrence", op.occurrence}, {"rank", rank}};
      std::fputs((json_text(doc, 2) + "\n").c_str(), stdout);
    } else {
      std::printf("replay (rank %d, step %u, stream %u, %s #%u): %s\n", rank, op.step, op.stream,
                  short_kernel_name(op.name).c_str(), op.occurrence,
                  replay_verdict_text(verdict).c_str());
    }
    std::fflush(stdout);
    switch (verdict.outcome) {
      case ReplayVerdict::Outcome::Nondeterministic:
        return kExitDivergent;
      case ReplayVerdict::Outcome::Deterministic:
        return kExitIdentical;
      default:
        return kExitInvalid;
    }
  };
}

}  // namespace lockstep::tools
