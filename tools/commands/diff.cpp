#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "tools/commands/commands.h"
#include "tools/json_text.h"
#include "tools/why/names.h"
#include "tools/diff/engine.h"
#include "tools/diff/file_input.h"
#include "tools/launch.h"
#include "tools/op_stack.h"
#include "tools/open_files.h"
#include "tools/report.h"
#include "tools/run_set.h"
#include "tools/term.h"

namespace lockstep::tools {

int exit_code(Verdict verdict) {
  switch (verdict) {
    case Verdict::Identical:
      return kExitIdentical;
    case Verdict::Divergent:
      return kExitDivergent;
    case Verdict::Incomplete:
      return kExitIncomplete;
  }
  return kExitInvalid;
}

void warn(const std::string& message) {
  std::fprintf(stderr, "lockstep: warning: %s\n", message.c_str());
}

namespace {
// The culprit's call stack, from whichever run recorded one (`lockstep run --stacks`).
// From the runs already opened: opening them again would check every file of both again.
void attach_culprit_stack(const RunSet& a, const RunSet& b, DiffResult* result) {
  if (!result->culprit || result->culprit->kind != "kernel") return;
  const Divergence& d = *result->culprit;
  std::optional<OpStack> stack;
  if (d.seq_a != 0) stack = stack_of_op(a, d.rank, d.step, d.seq_a);
  if (stack) {
    result->culprit_stack_run = 'a';
  } else if (d.seq_b != 0 && (stack = stack_of_op(b, d.rank, d.step_b, d.seq_b))) {
    result->culprit_stack_run = 'b';
  }
  if (!stack) return;
  result->culprit_python = std::move(stack->python);
  result->culprit_native = std::move(stack->native);
}
}  // namespace

int run_diff(const DiffRequest& request, DiffResult* result_out, DiffContext* context_out) {
  auto start = std::chrono::steady_clock::now();
  DiffOptions options;
  if (!request.steps.empty())
    parse_step_range(request.steps, "--steps", options.first_step, options.last_step);
  if (request.context < 0) throw InputError("--context: must be 0 or more");
  options.compare.context = request.context;
  options.exhaustive = request.exhaustive;
  // Each worker holds one rank's two files open at once.
  options.threads = open_file_workers(request.threads, 2);
  const std::optional<AlignMode> align = parse_align_mode(request.align);
  if (!align)
    throw InputError(
        fmt::format("--align: '{}' is not auto, number or ordinal", request.align));
  options.align = *align;

  OpenOptions open_options;
  open_options.salvage = request.salvage;
  RunSet a = open_run_set(request.a, open_options);
  RunSet b = open_run_set(request.b, open_options);
  for (const RunSet* run : {&a, &b})
    for (const std::string& w : run->warnings) warn(w);
  if (a.world_size != b.world_size)
    throw InputError(fmt::format("{}: world size {}, but {} has world size {}", request.b,
                                 b.world_size, request.a, a.world_size));
  std::vector<int> ranks;
  if (request.rank) {
    if (*request.rank < 0 || *request.rank >= a.world_size)
      throw InputError(fmt::format("--rank: {} is not a rank of {} (world size {})", *request.rank,
                                   request.a, a.world_size));
    ranks.push_back(*request.rank);
  } else {
    a.require_complete();
    b.require_complete();
    for (int r = 0; r < a.world_size; ++r) ranks.push_back(r);
  }
  std::vector<RankPair> pairs;
  for (int r : ranks) {
    const RankFile* fa = a.find(r);
    const RankFile* fb = b.find(r);
    if (!fa) throw InputError(fmt::format("{}: rank {} has no trace file", request.a, r));
    if (!fb) throw InputError(fmt::format("{}: rank {} has no trace file", request.b, r));
    auto opener = [](const RankFile& file) {
      return [file] {
        return std::unique_ptr<RankInput>(
            std::make_unique<FileRankInput>(file.open(), file.integrity, file.salvaged));
      };
    };
    pairs.push_back({r, opener(*fa), opener(*fb)});
  }
  Progress progress("diff: ranks");
  options.progress = [&](int done, int total) { progress.update(done, total); };
  DiffResult result;
  try {
    result = diff_ranks(pairs, options);
  } catch (const StepRangeError& e) {
    progress.clear();
    throw InputError(fmt::format("--steps {}: {}", request.steps, e.what()));
  } catch (const AlignmentError& e) {
    progress.clear();
    throw InputError(fmt::format("--align number: {}", e.what()));
  }
  progress.clear();
  for (const std::string& w : result.warnings) warn(w);
  attach_culprit_stack(a, b, &result);
  std::vector<const nlohmann::json*> headers_a, headers_b;
  for (int r : ranks) {
    headers_a.push_back(&a.find(r)->header);
    headers_b.push_back(&b.find(r)->header);
  }
  result.environment = compare_environments(headers_a, headers_b);

  DiffContext context{
      request.a, request.b, a.world_size, ranks,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  if (request.print) {
    if (request.json)
      std::fputs((json_text(diff_json(result, context), 2) + "\n").c_str(), stdout);
    else
      std::fputs(diff_text(result, context, Style(stdout)).c_str(), stdout);
    std::fflush(stdout);
  }
  int code = exit_code(verdict_of(result));
  if (result_out) *result_out = std::move(result);
  if (context_out) *context_out = std::move(context);
  return code;
}

CommandRunner add_diff_command(CLI::App& app) {
  auto request = std::make_shared<DiffRequest>();
  CLI::App* sub = app.add_subcommand("diff",
                                     "Compare two traced runs; name the first op whose "
                                     "inputs matched and outputs differed");
  sub->add_option("A", request->a, "First run: a trace directory (or one .lstrace file)")
      ->required();
  sub->add_option("B", request->b, "Second run")->required();
  sub->add_flag("--json", request->json, "Machine-readable report (schema: tools/README.md)");
  sub->add_option("--rank", request->rank, "Compare only this rank");
  sub->add_flag_callback(
      "--verbose", [] { set_full_names(true); },
      "Full kernel names in the text (template arguments, lambdas), not the shortened ones");
  sub->add_option("--steps", request->steps,
                  "Compare only steps A-B (A, A-, A-B): the job's numbers when aligned by them");
  sub->add_option("--align", request->align,
                  "Pair steps by the job's own numbers (number), by the trace's step counter "
                  "(ordinal), or by numbers when both runs have them (auto)")
      ->capture_default_str();
  sub->add_option("--context", request->context, "Ops shown around a structural divergence")
      ->capture_default_str();
  sub->add_flag("--exhaustive", request->exhaustive,
                "Decode and compare every step, even those whose summaries match");
  sub->add_option("--threads", request->threads, "Worker threads (default: one per core)");
  sub->add_flag("--salvage", request->salvage,
                "Read the valid prefix of a file with a corrupt block (else exit 2)");
  sub->footer(
      R"(Exit status: 0 identical: every step both runs hold was compared and nothing was cut off,
dropped, corrupt or unfinished; 1 divergent (in what was compared, whatever else is missing);
2 incomplete (no divergence, but not everything was compared: the report says what was) or
invalid input.

Examples:
  lockstep diff run-a run-b                 # text report: metric, culprit, per-rank blame
  lockstep diff run-a run-b --json | jq .culprit_rank
  lockstep diff run-a run-b --rank 3 --steps 100-120 --context 5
  lockstep diff continuous resumed          # a run resumed at step 4: compares steps 4-7 by
                                            # the job's numbers, its restore is a phase apart
  lockstep diff run-a run-b --align ordinal # pair trace step i with trace step i

Steps by the job's numbers: when the job numbers its steps (lockstep_step_number(n),
lockstep.step(n), markers named "step N"), both runs' steps pair by those numbers; steps only
one run has before or after the others (a run resumed from a checkpoint, a shorter run) are
listed, not compared, and do not make the verdict incomplete; a step missing in between does.

Why: the report first lists what differs in the two runs' environments (GPU, driver, CUDA
libraries, Python packages, layout, command line, the variables that change numerics: set more
with LOCKSTEP_RECORD_ENV when tracing); they never decide the verdict. Under the culprit it names
the known mechanism of nondeterminism its kernel, GEMM algorithm or collective matches, and the
fix (the table: tools/why/mechanisms.def). Kernels read by their short names (--verbose: full).)");
  return [request] { return run_diff(*request); };
}

}  // namespace lockstep::tools
