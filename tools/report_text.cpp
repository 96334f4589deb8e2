#include <fmt/format.h>

#include "tools/metric_value.h"
#include "tools/op_stack.h"
#include "tools/report.h"
#include "tools/scope_text.h"
#include "tools/why/mechanisms.h"
#include "tools/why/names.h"

namespace lockstep::tools {
namespace {

std::string shorten(std::string_view text, size_t width) {
  if (text.size() <= width) return std::string(text);
  return std::string(text.substr(0, width - 3)) + "...";
}

std::string seqs(const Divergence& d) {
  auto one = [](uint64_t s) { return s ? std::to_string(s) : std::string("-"); };
  return "seq " + one(d.seq_a) + "/" + one(d.seq_b);
}

void side_by_side(std::string& out, const Divergence& d, const Style& style) {
  constexpr size_t kWidth = 56;
  auto cell = [&](const ContextLine* line) {
    return line ? fmt::format("{:>7} {}", line->seq, shorten(line->text, kWidth - 8))
                : std::string();
  };
  auto row = [&](const ContextLine* left, const ContextLine* right) {
    bool lm = left && left->marked, rm = right && right->marked;
    std::string l = fmt::format("{:<{}}", cell(left), kWidth);
    std::string r = cell(right);
    out += fmt::format("      {}{} | {}{}\n", lm ? ">" : " ", lm ? style.yellow(l) : l,
                       rm ? ">" : " ", rm ? style.yellow(r) : r);
  };
  // Split each side into: lines before the divergence point, the op there (if this run has
  // it), lines after; then print the parts against each other.
  struct Parts {
    std::vector<const ContextLine*> before, at, after;
  };
  auto split = [](const std::vector<ContextLine>& lines, size_t before) {
    Parts p;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i < before)
        p.before.push_back(&lines[i]);
      else if (i == before && lines[i].marked)
        p.at.push_back(&lines[i]);
      else
        p.after.push_back(&lines[i]);
    }
    return p;
  };
  Parts a = split(d.context_a, d.context_before_a), b = split(d.context_b, d.context_before_b);
  out += fmt::format("      {:<{}} | {}\n", " run A", kWidth + 1, " run B");
  size_t pre = std::max(a.before.size(), b.before.size());
  for (size_t i = 0; i < pre; ++i) {
    size_t ia = i + a.before.size(), ib = i + b.before.size();  // bottom-aligned
    row(ia >= pre ? a.before[ia - pre] : nullptr, ib >= pre ? b.before[ib - pre] : nullptr);
  }
  if (!a.at.empty() || !b.at.empty())
    row(a.at.empty() ? nullptr : a.at[0], b.at.empty() ? nullptr : b.at[0]);
  for (size_t i = 0; i < std::max(a.after.size(), b.after.size()); ++i)
    row(i < a.after.size() ? a.after[i] : nullptr, i < b.after.size() ? b.after[i] : nullptr);
}

// "out parameter 1 at +632 B ('arg1+632') f32 4096 bytes: A ... B ...": the label in words.
std::string buffer_line(const std::string& kind, const BufferDiff& b) {
  return fmt::format("{} {} ('{}') {} {} bytes: A {:#018x}  B {:#018x}", b.role,
                     buffer_words(kind, b.label), b.label, b.dtype, b.bytes, b.fingerprint_a,
                     b.fingerprint_b);
}

}  // namespace

std::string op_label(const Divergence& d) {
  std::string label = d.kind + " " + display_name(d.kind, d.name);
  if (d.is_collective)
    label += fmt::format(" comm {} #{}", d.comm_id, d.comm_seq);
  else
    label += fmt::format(" #{}", d.occurrence);
  label += fmt::format(" stream {}", d.stream);
  return label;
}

std::string step_text(uint32_t step, uint32_t step_b, const std::optional<uint64_t>& job_step) {
  if (job_step) return fmt::format("{} (trace steps {}/{})", *job_step, step, step_b);
  if (step != step_b) return fmt::format("{} (B {})", step, step_b);
  return std::to_string(step);
}

// The autotuner's differing choices (setup_phase.h): the report's first finding, with the fix.
std::string choices_text(const DiffResult& result, const Style& style) {
  if (result.choices.empty()) return "";
  std::string out = fmt::format(
      "\n{} autotuning chose differently in the two runs ({} choice{}): their numbers can differ "
      "from the first step on\n",
      style.bold("autotune"), result.choices_total, result.choices_total == 1 ? "" : "s");
  for (const ChoiceDifference& c : result.choices)
    out += fmt::format("          {}: A {}, B {}\n", shorten(c.what, 100), c.a, c.b);
  if (result.choices_total > result.choices.size())
    out += fmt::format("          ... and {} more\n", result.choices_total - result.choices.size());
  out += fmt::format("          fix: {}\n", autotune_fix(result.choices));
  return out;
}

// The set-up phase (setup_phase.h), one line: compared apart, never the verdict's.
std::string setup_line(const DiffResult& result) {
  if (!result.setup) return "";
  const SetupResult& s = *result.setup;
  std::string line = fmt::format("  set-up before the first step (trace steps {}-{} of A, {}-{} of B; "
                                 "{}/{} records): ",
                                 s.a.first, s.a.last, s.b.first, s.b.last, s.a.records,
                                 s.b.records);
  if (s.identical())
    return line + (s.equal_by_summary ? "equal by its summaries\n" : "identical\n");
  line += fmt::format("{} difference{}, not part of the verdict", s.differences,
                      s.differences == 1 ? "" : "s");
  if (s.first)
    line += fmt::format("; first: rank {}, {} {} ({})", s.first->rank, s.first->kind,
                        shorten(s.first->name, 60), classification_name(s.first->classification));
  return line + "\n";
}

std::string resume_verdict(const DiffResult& result) {
  const StepAlignment& alignment = result.alignment;
  if (!alignment.by_number() || alignment.resumed == 0) return "";
  const std::optional<JobStepRange> steps = compared_job_steps(result);
  const Verdict verdict = verdict_of(result);
  if (verdict == Verdict::Identical && steps)
    return "resume bit-exact for " + job_steps_text(*steps);
  if (verdict != Verdict::Divergent) return "";
  const char resumed = alignment.resumed == 'a' ? 'A' : 'B';
  if (!result.first_by_epoch.empty()) {
    const Divergence& d = result.first_by_epoch.front();
    return fmt::format(
        "resume not bit-exact: run {}'s first divergence after its restore is at step {}, rank "
        "{}: {} ({}: {})",
        resumed, step_text(d.step, d.step_b, d.job_step), d.rank, op_label(d),
        classification_name(d.classification), d.detail);
  }
  if (result.metric) {
    const MetricDivergence& m = *result.metric;
    return fmt::format(
        "resume not bit-exact: run {}'s first divergence after its restore is metric {} at "
        "step {}, rank {}",
        resumed, m.name, step_text(m.step, m.step_b, m.job_step), m.rank);
  }
  if (result.state) {
    const StateDivergence& s = *result.state;
    return fmt::format(
        "resume not bit-exact: run {}'s state '{}' first differs after step {}, rank {}",
        resumed, s.name, step_text(s.step, s.step_b, s.job_step), s.rank);
  }
  return "resume not bit-exact";
}

namespace {
// The culprit's call stack (op_stack.h), when a run recorded it: the job's line first.
std::string culprit_stack_lines(const DiffResult& result) {
  if (result.culprit_stack_run == 0) return {};
  constexpr size_t kPython = 4, kNative = 3;
  const std::string run = result.culprit_stack_run == 'a'   ? "run A"
                          : result.culprit_stack_run == 'b' ? "run B"
                                                            : "hunt's stack run";
  const std::string label = fmt::format("launched from ({}):", run);
  const std::vector<std::string> frames = job_frames(result.culprit_python);  // the job's first
  std::string out;
  if (frames.empty())
    out += fmt::format("         {} no Python frames on its thread\n", label);
  for (size_t i = 0; i < frames.size() && i < kPython; ++i)
    out += fmt::format("         {} {}\n", i == 0 ? label : std::string(label.size(), ' '),
                       frames[i]);
  for (size_t i = 0; i < result.culprit_native.size() && i < kNative; ++i)
    out += fmt::format("         {} {}\n", i == 0 ? std::string("native:") : std::string(7, ' '),
                       result.culprit_native[i]);
  return out;
}
}  // namespace

std::string diff_text(const DiffResult& result, const DiffContext& context, const Style& style) {
  std::string out;
  Verdict verdict = verdict_of(result);
  out += fmt::format("lockstep diff: {}\n",
                     verdict == Verdict::Divergent    ? style.red(style.bold("DIVERGENT"))
                     : verdict == Verdict::Incomplete ? style.yellow(style.bold("INCOMPLETE"))
                                                      : style.green("IDENTICAL"));
  if (std::string resume = resume_verdict(result); !resume.empty())
    out += fmt::format("  {}\n", resume);
  out += fmt::format("  A: {}\n  B: {}\n", context.a, context.b);
  out += choices_text(result, style);
  if (!result.choices.empty()) out += "\n";
  for (const std::string& line : environment_lines(result.environment))  // before the ops
    out += fmt::format("  {}\n", line);
  if (const auto& first = result.nccl_choices.first)
    out += fmt::format(
        "  NCCL chose differently at {} collective{} (their results decide the verdict); first: "
        "rank {}, step {}, {} comm {} #{}: {}\n",
        result.nccl_choices.total, result.nccl_choices.total == 1 ? "" : "s", first->rank,
        first->step, first->name, first->comm_id, first->comm_seq,
        first->difference.substr(first->difference.rfind("NCCL ", 0) == 0 ? 5 : 0));
  if (result.alignment.by_number())
    out += "  steps paired by the job's own numbers (--align number); steps below are the "
           "job's numbers\n";
  out += fmt::format(
      "  {} rank{} compared; {} records in {} steps compared, {} steps skipped "
      "as equal by their summaries\n",
      context.ranks.size(), context.ranks.size() == 1 ? "" : "s", result.records_compared,
      result.steps_compared, result.steps_skipped);
  // What the verdict covers, and what it does not (cut off, salvaged, unfinished files).
  out += fmt::format("  {}\n", coverage_line(result));
  out += setup_line(result);
  if (result.window_first_step)
    out += fmt::format(
        "  fingerprinted and compared from step {} on ({}): a difference made earlier shows "
        "only where it is read\n",
        *result.window_first_step,
        result.alignment.pairs_before_range
            ? std::string("the runs' earlier steps left out")
            : fmt::format("the runs start at step {}", result.trace_first_step.value_or(0)));
  if (result.unexplained > 0)
    out += fmt::format(
        "  {} kernel record{} read differing bytes that no traced op {}wrote "
        "(scratch or uninitialised memory{}): not counted as divergences\n",
        result.unexplained, result.unexplained == 1 ? "" : "s",
        result.window_first_step ? "of the window " : "",
        result.window_first_step
            ? fmt::format(", or a difference made before step {}", *result.window_first_step)
            : "");
  if (!result.divergent) return out;

  if (result.metric) {
    const MetricDivergence& m = *result.metric;
    out += fmt::format(
        "\n{}   first differs at step {}, rank {}: {} #{} on stream {} (seq {}/{})\n",
        style.bold("metric"), step_text(m.step, m.step_b, m.job_step), m.rank, m.name,
        m.occurrence, m.stream, m.seq_a, m.seq_b);
    // The values people compare first ("f32 2.3456 vs 2.3457"), then both payloads with their bits.
    const std::string values = metric_difference(m.a, m.b, m.dtype_hint);
    if (!values.empty()) out += fmt::format("         {}\n", values);
    out += fmt::format("         A {}\n         B {}\n", format_metric_value(m.a, m.dtype_hint),
                       format_metric_value(m.b, m.dtype_hint));
  }
  if (result.state) {
    const StateDivergence& s = *result.state;
    out += fmt::format("\n{}    '{}' ({}) first differs after step {}, rank {} (seq {}/{})\n",
                       style.bold("state"), s.name, state_kind_name(s.state_kind),
                       step_text(s.step, s.step_b, s.job_step), s.rank, s.seq_a, s.seq_b);
    out += fmt::format("         A {:#018x}  B {:#018x}\n", s.fingerprint_a, s.fingerprint_b);
  }
  // A receiver of a difference made before the window: the earliest bit is not in it.
  if (const Divergence* before = first_made_before_window(result))
    out += fmt::format(
        "\n{}  rank {}, step {}: {} received a difference made before step {}: fingerprint "
        "from an earlier step to find its origin (lockstep hunt moves its window)\n",
        style.bold("earlier"), before->rank,
        step_text(before->step, before->step_b, before->job_step), op_label(*before),
        *before->made_before_step);
  if (result.culprit) {
    const Divergence& d = *result.culprit;
    out += fmt::format("\n{}  rank {}, step {}: {} ({})\n", style.bold("culprit"), d.rank,
                       step_text(d.step, d.step_b, d.job_step), op_label(d), seqs(d));
    out += fmt::format("         {}: {}\n", style.red(classification_name(d.classification)),
                       d.detail);
    if (d.buffer) out += fmt::format("         {}\n", buffer_line(d.kind, *d.buffer));
    if (!d.scope.empty()) out += fmt::format("         in scope {}\n", scope_text(d.scope));
    for (const std::string& line : mechanism_lines(d)) out += fmt::format("         {}\n", line);
    if (result.culprit_replay)
      out += fmt::format("         replay: {}\n", replay_verdict_text(*result.culprit_replay));
    out += culprit_stack_lines(result);
    for (const Divergence& r : result.culprit_receivers)
      out += fmt::format("         then step {}: {}, input '{}' differs ({})\n",
                         step_text(r.step, r.step_b, r.job_step), op_label(r),
                         r.buffer ? r.buffer->label : std::string("?"),
                         classification_name(r.classification));
  } else if (!result.first_by_epoch.empty() && !first_made_before_window(result) &&
             result.alignment.resumed != 0 && result.first_step &&
             result.first_by_epoch.front().step == *result.first_step) {
    // The first step compared already read differing state: it came from the restore.
    out += fmt::format(
        "\n{}  none in the steps compared: their first step already read differing state, "
        "which run {}'s restore prologue (not compared) loaded\n",
        style.bold("culprit"), result.alignment.resumed == 'a' ? 'A' : 'B');
  } else if (!result.first_by_epoch.empty() && !first_made_before_window(result)) {
    out += fmt::format(
        "\n{}  none: no rank has an op whose inputs matched and outputs "
        "differed (the difference entered through untraced work)\n",
        style.bold("culprit"));
  }
  // The diff by scope: a receiver first says where the difference was first seen, by module.
  if (const Divergence* d = first_diverging_scope(result))
    out += fmt::format("\n{}    rank {}, step {}: the first op to diverge, {}, ran in {}\n",
                       style.bold("scope"), d->rank, step_text(d->step, d->step_b, d->job_step),
                       op_label(*d), scope_text(d->scope));
  if (!result.first_by_epoch.empty()) {
    out += "\nfirst divergence per rank, in blame order (step, collective epoch, origins first):\n";
    out += fmt::format("  {:>5} {:>6} {:>6}  {:<11} {}\n", "rank", "step", "epoch", "class", "op");
    for (const Divergence& d : result.first_by_epoch) {
      std::string what = op_label(d);
      if (d.buffer)
        what += fmt::format("  {} {}", d.buffer->role, buffer_words(d.kind, d.buffer->label));
      if (d.structural != StructuralKind::None)
        what += fmt::format("  ({}: {})", structural_kind_name(d.structural), d.detail);
      if (d.received_from >= 0) what += fmt::format("  (from rank {})", d.received_from);
      if (d.made_before_step) what += fmt::format("  (made before step {})", *d.made_before_step);
      if (!d.scope.empty()) what += "  in " + scope_text(d.scope);
      const std::string step =
          d.job_step ? std::to_string(*d.job_step) : step_text(d.step, d.step_b, std::nullopt);
      out += fmt::format("  {:>5} {:>6} {:>6}  {:<11} {}\n", d.rank, step, d.epoch,
                         classification_name(d.classification), what);
    }
  }
  if (result.structural_total > 0) {
    out += fmt::format("\nstructural divergences: {}{}\n", result.structural_total,
                       result.structural.size() < result.structural_total
                           ? fmt::format(" (first {} shown)", result.structural.size())
                           : "");
    size_t shown = 0;
    for (const Divergence& d : result.structural) {
      if (++shown > 8) break;
      out += fmt::format("  rank {}, step {}, stream {}: {} {} {} ({})\n", d.rank,
                         step_text(d.step, d.step_b, d.job_step), d.stream,
                         structural_kind_name(d.structural), d.kind, display_name(d.kind, d.name),
                         d.detail);
      if (!d.context_a.empty() || !d.context_b.empty()) side_by_side(out, d, style);
    }
  }
  return out;
}

}  // namespace lockstep::tools
