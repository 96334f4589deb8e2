#include "tools/hunt_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "tools/report.h"
#include "tools/scope_text.h"

namespace lockstep::tools {
namespace {
// " in blocks.1.mlp (backward)" when the op ran inside ranges: the stage lines name the module.
std::string in_scope(const Divergence& d) {
  return d.scope.empty() ? std::string() : " in " + scope_text(d.scope);
}
}  // namespace

std::string StepWindow::text() const { return fmt::format("{}-{}", first, last); }

std::optional<BroadFinding> broad_finding(const DiffResult& broad) {
  std::optional<uint32_t> step = earliest_diverging_step(broad);
  if (!step) return std::nullopt;
  BroadFinding finding;
  finding.diverging_step = *step;
  finding.trace_first_step = std::min(broad.trace_first_step.value_or(0), *step);
  if (broad.state) finding.state_step = broad.state->step;
  if (*step > finding.trace_first_step) finding.identical_through = *step - 1;
  if (!broad.first_by_epoch.empty() && broad.first_by_epoch.front().step == *step) {
    const Divergence& d = broad.first_by_epoch.front();
    finding.what = d.classification == Classification::State
                       ? fmt::format("state '{}' on rank {}", d.name, d.rank)
                       : fmt::format("{} {} on rank {}{}", classification_name(d.classification),
                                     op_label(d), d.rank, in_scope(d));
  } else if (broad.state && broad.state->step == *step) {
    finding.what = fmt::format("state '{}' on rank {}", broad.state->name, broad.state->rank);
  } else if (broad.metric) {
    finding.what = fmt::format("metric {} on rank {}", broad.metric->name, broad.metric->rank);
  }
  return finding;
}

StepWindow first_window(const BroadFinding& finding, uint32_t margin) {
  const uint32_t s = finding.diverging_step;
  const uint32_t room = s - finding.trace_first_step;
  return {s - std::min(margin, room), s};
}

std::string step_label(const Divergence& d) {
  return d.job_step ? fmt::format("{} (trace step {})", *d.job_step, d.step)
                    : fmt::format("{}", d.step);
}

WindowDiff window_diff(const StepAlignment& broad_alignment, const StepWindow& window) {
  const StepPairing* first = broad_alignment.pair_of(window.first);
  const StepPairing* last = broad_alignment.pair_of(window.last);
  if (first != nullptr && last != nullptr && first->within && last->within)
    return {fmt::format("{}-{}", *first->within, *last->within), "number"};
  return {window.text(), "ordinal"};
}

StepWindow earlier_window(const StepWindow& window, uint32_t trace_first_step) {
  if (window.first <= trace_first_step) return window;
  return {trace_first_step + (window.first - trace_first_step) / 2, window.last};
}

const char* window_outcome_name(WindowOutcome outcome) {
  switch (outcome) {
    case WindowOutcome::Identical:
      return "identical";
    case WindowOutcome::Origin:
      return "origin";
    case WindowOutcome::Structural:
      return "structural";
    case WindowOutcome::MadeBefore:
      return "made-before";
    case WindowOutcome::NoCulprit:
      return "no-culprit";
  }
  return "?";
}

WindowVerdict judge_window(const DiffResult& full, const StepWindow& window,
                           uint32_t trace_first_step) {
  WindowVerdict verdict;
  if (!full.divergent) {
    verdict.outcome = WindowOutcome::Identical;
    verdict.why = "no divergence in the window this time";
    return verdict;
  }
  if (const Divergence* before = first_made_before_window(full);
      before && window.first > trace_first_step) {
    verdict.outcome = WindowOutcome::MadeBefore;
    verdict.why = fmt::format(
        "first divergence is a receiver of a difference made before {}step {} (rank {}, step {}: "
        "{})",
        before->job_step ? "trace " : "", *before->made_before_step, before->rank,
        step_label(*before), op_label(*before));
    verdict.next = earlier_window(window, trace_first_step);
    return verdict;
  }
  if (full.culprit) {
    const Divergence& d = *full.culprit;
    verdict.outcome = d.classification == Classification::Structural ? WindowOutcome::Structural
                                                                     : WindowOutcome::Origin;
    verdict.why = fmt::format("{} rank {}, step {}: {}{}", classification_name(d.classification),
                              d.rank, step_label(d), op_label(d), in_scope(d));
    return verdict;
  }
  verdict.outcome = WindowOutcome::NoCulprit;
  verdict.why = "no op with matching inputs and differing outputs in the window";
  return verdict;
}

}  // namespace lockstep::tools
