#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "common/env.h"

#include "tools/commands/commands.h"
#include "tools/json_text.h"
#include "tools/why/names.h"
#include "tools/hunt_plan.h"
#include "tools/launch.h"
#include "tools/op_stack.h"
#include "tools/replay_run.h"
#include "tools/report.h"
#include "tools/run_set.h"
#include "tools/term.h"

namespace lockstep::tools {

namespace {

using nlohmann::json;

struct HuntRequest {
  std::string dir;
  bool overwrite = false;
  bool json = false;
  int margin = 0;
  int attempts = 3;
  int windows = 4;
  bool no_stack = false;
  bool no_replay = false;
  int replays = 16;
  std::string torch_alloc = "auto";
  std::string jax_alloc = "auto";
  std::string jax_graphs = "auto";
  std::vector<std::string> command;
};

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Two traced runs of the command at one level and their diff.
struct Pair {
  std::string a, b;  // <dir>/<tag>-1 and <dir>/<tag>-2
  DiffResult result;
  int code = kExitInvalid;
};

// `steps`: the runs' LOCKSTEP_STEPS; `window`: how their diff takes them (window_diff), none for
// every step.
Pair traced_pair(const HuntRequest& request, const std::string& level, const std::string& tag,
                 const std::string& steps, const std::optional<WindowDiff>& window = std::nullopt) {
  Pair pair;
  std::string* dirs[2] = {&pair.a, &pair.b};
  for (int i = 0; i < 2; ++i) {
    TraceRequest trace;
    trace.dir = (std::filesystem::path(request.dir) / fmt::format("{}-{}", tag, i + 1)).string();
    trace.level = level;
    trace.steps = steps;
    trace.overwrite = request.overwrite;
    trace.torch_alloc = request.torch_alloc;
    trace.jax_alloc = request.jax_alloc;
    trace.jax_graphs = request.jax_graphs;
    trace.command = request.command;
    // Module scopes in every run, broad ones too, so that each answer names the module and
    // phase (LOCKSTEP_SCOPES; a user's own setting wins).
    if (std::getenv(env::kScopes) == nullptr) trace.job_env.emplace_back(env::kScopes, "1");
    // Every run's output is kept in its directory; under --json none reaches stdout.
    trace.output = request.json ? JobOutput::LogOnly : JobOutput::LogAndEcho;
    LaunchResult launched = launch_traced(trace);
    if (launched.exit_code != 0)
      throw InputError(
          fmt::format("{}: the command exited with code {} ({} run {}; its output: {})",
                      request.command[0], launched.exit_code, level, i + 1,
                      (std::filesystem::path(trace.dir) / kJobLogName).string()));
    *dirs[i] = trace.dir;
  }
  DiffRequest diff;
  diff.a = pair.a;
  diff.b = pair.b;
  if (window) diff.steps = window->steps, diff.align = window->align;
  diff.print = false;
  pair.code = run_diff(diff, &pair.result);
  return pair;
}

// Stage 3: one more run at broad, fingerprinting nothing, that records the call stack of the
// culprit's kernel in its step (LOCKSTEP_STACKS: op_stack.h) and attaches the one launch the
// diff named (same step, stream, name and occurrence) to the result. The message says what
// was found.
std::string find_culprit_stack(const HuntRequest& request, DiffResult* result) {
  const Divergence& d = *result->culprit;
  TraceRequest trace;
  trace.dir = (std::filesystem::path(request.dir) / "stacks").string();
  trace.level = "broad";
  trace.steps = std::to_string(d.step);
  trace.stacks = exact_regex(d.name);
  trace.overwrite = request.overwrite;
  trace.torch_alloc = request.torch_alloc;
  trace.jax_alloc = request.jax_alloc;
  // As stage 2's full runs launched it: a kernel XLA would run inside a command buffer (a graph)
  // is launched on its own there, and only then has a launch of its own to take a stack from.
  trace.jax_graphs = request.jax_graphs == "auto" ? "off" : request.jax_graphs;
  trace.command = request.command;
  trace.output = request.json ? JobOutput::LogOnly : JobOutput::LogAndEcho;
  LaunchResult launched = launch_traced(trace);
  if (launched.exit_code != 0)
    return fmt::format("the run exited with code {} (its output: {})", launched.exit_code,
                       (std::filesystem::path(trace.dir) / kJobLogName).string());
  std::optional<OpStack> stack =
      stack_of_kernel(trace.dir, d.rank, d.step, d.stream, d.name, d.occurrence);
  if (!stack) return "the culprit's launch was not found in this run (its steps differ)";
  result->culprit_stack_run = 's';
  result->culprit_python = std::move(stack->python);
  result->culprit_native = std::move(stack->native);
  if (result->culprit_python.empty())
    return "launched from a thread with no Python frames (a backward or library thread)";
  return "launched from " + job_frames(result->culprit_python).front();
}

// Stage 4: one more run at full within the culprit's step that relaunches the culprit's kernel
// --replays times from a snapshot of its regions (LOCKSTEP_REPLAY: collectors/replay.h), and the
// verdict it gives (replay_verdict.h), set on the result. Kinds other than a kernel are not
// replayed: the verdict says why. Returns the line to print.
std::string replay_culprit(const HuntRequest& request, DiffResult* result) {
  const Divergence& d = *result->culprit;
  const settings::OpSpec op{d.step, d.stream, d.kind, d.name, d.occurrence};
  if (std::optional<std::string> why = replay_refusal(op)) {
    ReplayVerdict refused;
    refused.outcome = ReplayVerdict::Outcome::Refused;
    refused.reason = *why;
    result->culprit_replay = refused;
    return replay_verdict_text(refused);
  }
  ReplayRunRequest replay;
  replay.dir = (std::filesystem::path(request.dir) / "replay").string();
  replay.op = op;
  replay.rank = d.rank;
  replay.replays = static_cast<uint32_t>(request.replays);
  replay.overwrite = request.overwrite;
  replay.torch_alloc = request.torch_alloc;
  replay.jax_alloc = request.jax_alloc;
  replay.command = request.command;
  replay.output = request.json ? JobOutput::LogOnly : JobOutput::LogAndEcho;
  if (std::getenv(env::kScopes) == nullptr) replay.job_env.emplace_back(env::kScopes, "1");
  result->culprit_replay = run_replay(replay);
  return replay_verdict_text(*result->culprit_replay);
}

DiffContext context_of(const Pair& pair) {
  DiffContext context{pair.a, pair.b, 0, {}, 0};
  for (const RankResult& r : pair.result.ranks) context.ranks.push_back(r.rank);
  context.world_size = static_cast<int>(context.ranks.size());
  return context;
}

json optional_json(const std::optional<uint32_t>& v) { return v ? json(*v) : json(nullptr); }

// The `hunt` member of hunt's JSON document: what each stage ran and found (tools/README.md).
class HuntLog {
 public:
  void broad(const Pair& pair, const std::optional<BroadFinding>& finding) {
    log_["broad"] = {{"a", pair.a},
                     {"b", pair.b},
                     {"verdict", verdict_name(verdict_of(pair.result))},
                     {"earliest_step", nullptr},
                     {"identical_through", nullptr},
                     {"state_step", nullptr},
                     {"first", nullptr}};
    if (!finding) return;
    log_["broad"]["earliest_step"] = finding->diverging_step;
    log_["broad"]["identical_through"] = optional_json(finding->identical_through);
    log_["broad"]["state_step"] = optional_json(finding->state_step);
    log_["broad"]["first"] = finding->what;
  }
  void window(const StepWindow& w, const Pair& pair, int attempts, const WindowVerdict& v) {
    log_["windows"].push_back({{"first", w.first},
                               {"last", w.last},
                               {"a", pair.a},
                               {"b", pair.b},
                               {"attempts", attempts},
                               {"outcome", window_outcome_name(v.outcome)},
                               {"why", v.why}});
  }
  // Prints the reported diff's document with this log in it.
  void print(const Pair& reported, const std::string& outcome,
             const std::optional<StepWindow>& fingerprinted) {
    log_["outcome"] = outcome;
    log_["fingerprinted_steps"] =
        fingerprinted ? json{{"first", fingerprinted->first}, {"last", fingerprinted->last}}
                      : json(nullptr);
    json doc = diff_json(reported.result, context_of(reported));
    doc["hunt"] = log_;
    std::fputs((json_text(doc, 2) + "\n").c_str(), stdout);
    std::fflush(stdout);
  }

 private:
  json log_ = {{"broad", nullptr}, {"windows", json::array()}};
};

}  // namespace

CommandRunner add_hunt_command(CLI::App& app) {
  auto request = std::make_shared<HuntRequest>();
  CLI::App* sub = app.add_subcommand(
      "hunt", "Find the earliest op whose inputs matched and outputs differed, progressively");
  sub->add_option("-o,--output", request->dir,
                  "Directory for the runs (default ./lockstep-trace-<time>)");
  sub->add_flag("--overwrite", request->overwrite, "Reuse run directories");
  sub->add_flag_callback(
      "--verbose", [] { set_full_names(true); },
      "Full kernel names in the text (template arguments, lambdas), not the shortened ones");
  sub->add_option("--margin", request->margin,
                  "Extra steps before the diverging step in the first full-level window")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--attempts", request->attempts,
                  "Pairs of full-level runs to try when the nondeterminism does not recur")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  sub->add_option("--windows", request->windows,
                  "Full-level windows to try, each starting earlier than the last")
      ->capture_default_str()
      ->check(CLI::Range(1, 32));
  sub->add_flag("--json", request->json,
                "Print only the final diff as JSON on stdout, with the hunt's stages in it "
                "(progress on stderr; the job's output in each run's job.log)");
  sub->add_flag("--no-stack", request->no_stack,
                "Skip stage 3 (the run that records the culprit's call stack)");
  sub->add_flag("--no-replay", request->no_replay,
                "Skip stage 4 (the run that relaunches the culprit on its own inputs)");
  sub->add_option("--replays", request->replays,
                  "Stage 4: relaunches of the culprit's kernel from the snapshot of its inputs")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  sub->add_option("--torch-alloc", request->torch_alloc, kTorchAllocHelp)->capture_default_str();
  sub->add_option("--jax-alloc", request->jax_alloc, kJaxAllocHelp)
      ->capture_default_str();
  sub->add_option("--jax-graphs", request->jax_graphs, kJaxGraphsHelp)->capture_default_str();
  sub->add_option("command", request->command, "The command to run, after --")->required();
  sub->footer(R"(Stage 1: two runs at --level broad give the earliest step S where anything differs
(a metric such as the loss, a collective, a State record: the model's state after a step).
Stage 2: two runs at --level full fingerprint only a window of steps, first S-margin..S, and
their diff names the first op whose inputs matched and whose outputs differed. The earliest
diverging bit can come long before the loss shows it: when the window's first divergence is
an op whose input already differed when the window began (a receiver of a difference made
before it), the window starts earlier, halfway toward the trace's first step (4-4, then 2-4,
1-4, 0-4), up to --windows windows; each window tried is printed with why. Nondeterminism
need not recur in every pair of runs: each window tries up to --attempts pairs. The answer
names the steps that were fingerprinted.
Stage 3: when the culprit is a kernel, one more run at --level broad records the call stack of
its launch (LOCKSTEP_STACKS): the Python file, line and function that launched it, and the
native frames above CUDA; a kernel launched from autograd's backward thread has no Python
frames.
Stage 4: when the culprit is a kernel, one more run at --level full within its step snapshots
every region the culprit's launch may read or write, relaunches the same kernel with the same
arguments --replays more times from that snapshot (on its own stream, no host sync), and puts
back what the job's own launch left, so the job goes on as before. The verdict: "nondeterministic
on identical inputs: 11 of 16 replays differ" (the kernel itself), or "deterministic on identical
inputs in 16 replays" (the difference needs another cause: an input no traced op wrote,
concurrency with another stream, the environment). Not replayed, with the reason: GEMMs, NCCL
collectives, graph launches, or when twice the regions do not fit in free GPU memory.
Each run's directory keeps the job's output in job.log (on the terminal too, unless
--json).
Exit status: 0 no divergence, 1 divergence found, 2 incomplete (a trace cut off or unfinished:
not everything was compared) or invalid (command failed, unreadable trace).

Examples:
  lockstep hunt -- python train.py --steps 20
  lockstep hunt --json -- python train.py --steps 20 | jq .hunt.windows
  lockstep hunt -o /tmp/hunt --margin 1 --windows 6 -- torchrun --nproc-per-node 2 train.py
  lockstep hunt --replays 32 -- python train.py --steps 20)");
  return [request] {
    if (request->dir.empty()) request->dir = default_trace_dir();
    // Under --json stdout carries the document alone: what people read goes to stderr.
    FILE* say = request->json ? stderr : stdout;
    Style style(say);
    HuntLog log;
    auto start = std::chrono::steady_clock::now();
    Pair broad = traced_pair(*request, "broad", "broad", "");
    std::optional<BroadFinding> finding = broad_finding(broad.result);
    log.broad(broad, finding);
    std::fprintf(say, "stage 1 (broad, 2 runs + diff): %.2f s: ", since(start));
    if (broad.code == kExitIdentical || broad.code == kExitIncomplete || !finding) {
      if (broad.code == kExitIncomplete)  // no divergence in what could be compared: not a pass
        std::fprintf(say, "%s: %s\n", style.yellow("INCOMPLETE").c_str(),
                     coverage_line(broad.result).c_str());
      else
        std::fprintf(say, "%s\n", style.green("no divergence").c_str());
      if (request->json) log.print(broad, verdict_name(verdict_of(broad.result)), std::nullopt);
      return broad.code;
    }
    std::fprintf(say, "earliest diverging step %u (%s); %s\n", finding->diverging_step,
                 finding->what.c_str(),
                 finding->identical_through
                     ? fmt::format("steps {}-{} identical", finding->trace_first_step,
                                   *finding->identical_through)
                           .c_str()
                     : "the trace's first step");
    std::fflush(say);

    StepWindow window = first_window(*finding, static_cast<uint32_t>(request->margin));
    std::string tried;  // "4-4, 2-4"
    Pair full;
    WindowVerdict verdict;
    for (int w = 1; w <= request->windows; ++w) {
      for (int attempt = 1; attempt <= request->attempts; ++attempt) {
        start = std::chrono::steady_clock::now();
        std::string tag = w == 1 ? "full" : fmt::format("full-window{}", w);
        if (attempt > 1) tag += fmt::format("-attempt{}", attempt);
        full = traced_pair(*request, "full", tag, window.text(),
                           window_diff(broad.result.alignment, window));
        std::fprintf(say, "stage 2 (full, steps %s, 2 runs + diff, attempt %d of %d): %.2f s: ",
                     window.text().c_str(), attempt, request->attempts, since(start));
        if (full.code == kExitIncomplete) {
          std::fprintf(say, "%s: %s\n", style.yellow("INCOMPLETE").c_str(),
                       coverage_line(full.result).c_str());
          if (request->json) log.print(full, "incomplete", window);
          return kExitIncomplete;
        }
        verdict = judge_window(full.result, window, finding->trace_first_step);
        if (verdict.outcome != WindowOutcome::Identical) {
          std::fprintf(say, "%s\n", style.red("divergent").c_str());
          log.window(window, full, attempt, verdict);
          break;
        }
        std::fprintf(say, "%s\n", style.yellow(verdict.why).c_str());
        std::fflush(say);
        if (attempt == request->attempts) log.window(window, full, attempt, verdict);
      }
      tried += (tried.empty() ? "" : ", ") + window.text();
      if (verdict.outcome == WindowOutcome::Identical) break;
      const bool move = verdict.next && w < request->windows;
      std::fprintf(say, "window %s: %s%s\n", window.text().c_str(), verdict.why.c_str(),
                   move ? fmt::format("; trying {}", verdict.next->text()).c_str() : "");
      std::fflush(say);
      if (!move) break;
      window = *verdict.next;
    }

    if (verdict.outcome == WindowOutcome::Identical) {
      std::fprintf(say,
                   "the nondeterminism did not recur in %d pair%s of full-level runs of steps %s; "
                   "the broad diff is all there is\n",
                   request->attempts, request->attempts == 1 ? "" : "s", window.text().c_str());
      if (request->json)
        log.print(broad, "did-not-recur", std::nullopt);
      else
        std::fprintf(say, "\n%s", diff_text(broad.result, context_of(broad), style).c_str());
      return kExitDivergent;
    }
    const std::string steps =
        fmt::format("fingerprinted steps {}; windows tried: {}", window.text(), tried);
    if (verdict.outcome == WindowOutcome::Origin && full.result.culprit &&
        full.result.culprit->kind == "kernel" && !request->no_stack) {
      start = std::chrono::steady_clock::now();
      const std::string found = find_culprit_stack(*request, &full.result);
      std::fprintf(say, "stage 3 (broad, 1 run recording the culprit's call stack): %.2f s: %s\n",
                   since(start), found.c_str());
      std::fflush(say);
    }
    if (verdict.outcome == WindowOutcome::Origin && full.result.culprit && !request->no_replay) {
      start = std::chrono::steady_clock::now();
      const std::string replayed = replay_culprit(*request, &full.result);
      if (full.result.culprit_replay->run.empty())  // refused before any run
        std::fprintf(say, "stage 4 (replay): %s\n", replayed.c_str());
      else
        std::fprintf(say,
                     "stage 4 (full, step %u, 1 run replaying the culprit %d times): %.2f s: %s\n",
                     full.result.culprit->step, request->replays, since(start), replayed.c_str());
      std::fflush(say);
    }
    const DiffResult& result = full.result;
    switch (verdict.outcome) {
      case WindowOutcome::Origin:
      case WindowOutcome::Structural:
        std::fprintf(say, "%s rank %d, step %s: %s (%s)\n",
                     style.red(classification_name(result.culprit->classification)).c_str(),
                     result.culprit->rank, step_label(*result.culprit).c_str(),
                     op_label(*result.culprit).c_str(), steps.c_str());
        break;
      case WindowOutcome::MadeBefore:
        std::fprintf(say,
                     "the difference was made before step %u, and %d window%s did not reach its "
                     "writer: try more --windows or a larger --margin (%s)\n",
                     window.first, request->windows, request->windows == 1 ? "" : "s",
                     steps.c_str());
        break;
      default:
        std::fprintf(say, "no op with matching inputs and differing outputs in the window (%s)\n",
                     steps.c_str());
    }
    if (request->json)
      log.print(full, window_outcome_name(verdict.outcome), window);
    else
      std::fprintf(say, "\n%s", diff_text(result, context_of(full), style).c_str());
    return kExitDivergent;
  };
}

}  // namespace lockstep::tools
