#include "tools/diff/alignment.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "tools/diff/engine.h"

namespace lockstep::tools {
namespace {

// A step's place in the job's numbering: (number, k) for the k-th unnumbered step after the
// numbered step `number` (k = 0: that step itself); number -1 for the steps before the first
// numbered one.
struct Label {
  int64_t number = -1;
  uint32_t sub = 0;
  auto operator<=>(const Label&) const = default;
};

struct Labelled {
  Label label;
  const StepInfo* info = nullptr;
};

std::vector<Labelled> label_steps(const std::vector<StepInfo>& steps, char run) {
  std::vector<Labelled> out;
  out.reserve(steps.size());
  Label current;
  std::optional<uint64_t> previous;
  uint32_t previous_step = 0;
  for (const StepInfo& s : steps) {
    if (s.job_step) {
      if (previous && *s.job_step <= *previous)
        throw AlignmentError(fmt::format(
            "run {}: the job's step numbers do not increase (step {} at trace step {} after "
            "step {} at trace step {})",
            static_cast<char>(run - 'a' + 'A'), *s.job_step, s.step, *previous, previous_step));
      if (*s.job_step > static_cast<uint64_t>(INT64_MAX))
        throw AlignmentError(fmt::format("run {}: step number {} at trace step {} is out of range",
                                         static_cast<char>(run - 'a' + 'A'), *s.job_step, s.step));
      previous = s.job_step;
      previous_step = s.step;
      current = Label{static_cast<int64_t>(*s.job_step), 0};
    } else if (!out.empty()) {
      ++current.sub;
    }
    out.push_back({current, &s});
  }
  return out;
}

bool numbered(const std::vector<StepInfo>& steps) {
  return std::any_of(steps.begin(), steps.end(), [](const StepInfo& s) { return s.job_step; });
}

char upper(char run) { return static_cast<char>(run - 'a' + 'A'); }

}  // namespace

const char* align_mode_name(AlignMode mode) {
  switch (mode) {
    case AlignMode::Auto:
      return "auto";
    case AlignMode::Number:
      return "number";
    case AlignMode::Ordinal:
      return "ordinal";
  }
  return "?";
}

std::optional<AlignMode> parse_align_mode(const std::string& text) {
  for (AlignMode mode : {AlignMode::Auto, AlignMode::Number, AlignMode::Ordinal})
    if (text == align_mode_name(mode)) return mode;
  return std::nullopt;
}

const char* unpaired_where_name(UnpairedSteps::Where where) {
  switch (where) {
    case UnpairedSteps::Where::Before:
      return "before";
    case UnpairedSteps::Where::After:
      return "after";
    case UnpairedSteps::Where::Gap:
      return "gap";
    case UnpairedSteps::Where::Restore:
      return "restore";
  }
  return "?";
}

const StepPairing* StepAlignment::pair_of(uint32_t a_step) const {
  if (!by_number()) return nullptr;
  auto it = std::lower_bound(pairs.begin(), pairs.end(), a_step,
                             [](const StepPairing& p, uint32_t step) { return p.a < step; });
  return it != pairs.end() && it->a == a_step ? &*it : nullptr;
}

uint32_t StepAlignment::b_step(uint32_t a_step) const {
  const StepPairing* p = pair_of(a_step);
  return p ? p->b : a_step;
}

std::optional<uint64_t> StepAlignment::job_step(uint32_t a_step) const {
  const StepPairing* p = pair_of(a_step);
  return p ? p->job_step : std::nullopt;
}

bool StepAlignment::has_gap() const {
  return std::any_of(unpaired.begin(), unpaired.end(),
                     [](const UnpairedSteps& u) { return u.where == UnpairedSteps::Where::Gap; });
}

StepAlignment align_steps(const std::vector<StepInfo>& a, const std::vector<StepInfo>& b,
                          AlignMode mode) {
  StepAlignment out;
  if (mode == AlignMode::Ordinal) return out;
  const bool numbered_a = numbered(a), numbered_b = numbered(b);
  if (!numbered_a || !numbered_b) {
    std::string why = !numbered_a && !numbered_b ? "neither run has numbered steps"
                      : !numbered_a              ? "run A has no numbered steps"
                                                 : "run B has no numbered steps";
    if (mode == AlignMode::Number)
      throw AlignmentError(why + " (the job numbers its steps with lockstep_step_number(n), "
                                 "lockstep.step(n) or markers named \"step N\")");
    out.reason = why;
    return out;
  }
  std::vector<Labelled> la, lb;
  try {
    la = label_steps(a, 'a');
    lb = label_steps(b, 'b');
  } catch (const AlignmentError& e) {
    if (mode == AlignMode::Number) throw;
    out.reason = e.what();
    return out;
  }
  out.mode = AlignMode::Number;
  auto first_number = [](const std::vector<Labelled>& l) {
    for (const Labelled& x : l)
      if (x.label.number >= 0) return x.label.number;
    return int64_t{-1};
  };
  const int64_t first_a = first_number(la), first_b = first_number(lb);
  out.resumed = first_b > first_a ? 'b' : first_a > first_b ? 'a' : 0;
  // The steps before the first number pair with each other only when both runs start at the
  // same number: their set-up. Otherwise they are different work (one run's restore prologue).
  const bool prefixes_pair = out.resumed == 0;
  // Both runs' set-up steps: one phase each, paired as one (setup_phase.h).
  auto setup_span = [](const std::vector<Labelled>& l) {
    std::optional<StepSpan> span;
    for (const Labelled& x : l) {
      if (x.label.number >= 0) break;
      if (!span) span = StepSpan{x.info->step, x.info->step, std::nullopt, std::nullopt, 0};
      span->last = x.info->step;
      span->records += x.info->record_count;
    }
    return span;
  };
  const std::optional<StepSpan> setup_a = setup_span(la), setup_b = setup_span(lb);
  size_t i = 0, j = 0;
  if (prefixes_pair && setup_a && setup_b) {
    out.setup = SetupSpans{*setup_a, *setup_b, setup_a->first};
    out.pairs.push_back({setup_a->first, setup_b->first, std::nullopt, std::nullopt});
    while (i < la.size() && la[i].label.number < 0) ++i;
    while (j < lb.size() && lb[j].label.number < 0) ++j;
  }

  // Merge the two label sequences (both ascending).
  struct Slot {
    char run;
    const Labelled* step;
  };
  std::vector<Slot> alone;
  std::optional<Label> first_pair, last_pair;
  if (out.setup) first_pair = last_pair = Label{};
  while (i < la.size() || j < lb.size()) {
    if (i < la.size() && j < lb.size() && la[i].label == lb[j].label &&
        (la[i].label.number >= 0 || prefixes_pair)) {
      const int64_t number = la[i].label.number;
      out.pairs.push_back({la[i].info->step, lb[j].info->step, la[i].info->job_step,
                           number >= 0 ? std::optional<uint64_t>(number) : std::nullopt});
      if (!first_pair) first_pair = la[i].label;
      last_pair = la[i].label;
      ++i, ++j;
    } else if (j == lb.size() || (i < la.size() && la[i].label <= lb[j].label)) {
      alone.push_back({'a', &la[i++]});
    } else {
      alone.push_back({'b', &lb[j++]});
    }
  }
  // Where each step compared with nothing lies relative to the pairs, and spans of them.
  std::stable_sort(alone.begin(), alone.end(), [](const Slot& x, const Slot& y) {
    return std::tuple(x.run, x.step->info->step) < std::tuple(y.run, y.step->info->step);
  });
  for (const Slot& slot : alone) {
    const Label& label = slot.step->label;
    using Where = UnpairedSteps::Where;
    Where where;
    if (label.number < 0 && slot.run == out.resumed)
      where = Where::Restore;
    else if (!first_pair || label < *first_pair)
      where = Where::Before;
    else if (label > *last_pair)
      where = Where::After;
    else
      where = Where::Gap;
    const StepInfo& info = *slot.step->info;
    UnpairedSteps* last = out.unpaired.empty() ? nullptr : &out.unpaired.back();
    if (last && last->run == slot.run && last->where == where && last->span.last + 1 == info.step) {
      last->span.last = info.step;
      last->span.records += info.record_count;
      if (info.job_step) {
        if (!last->span.job_first) last->span.job_first = info.job_step;
        last->span.job_last = info.job_step;
      }
      continue;
    }
    UnpairedSteps u;
    u.where = where;
    u.run = slot.run;
    u.span = {info.step, info.step, info.job_step, info.job_step, info.record_count};
    out.unpaired.push_back(u);
  }
  return out;
}

void restrict_alignment(StepAlignment& alignment, uint64_t first, uint64_t last) {
  std::erase_if(alignment.pairs, [&](const StepPairing& p) {
    const bool before = p.within && *p.within < first;
    if (before) alignment.pairs_before_range = true;
    return !p.within || before || *p.within > last;
  });
  alignment.setup.reset();  // before the job's steps asked for
  std::erase_if(alignment.unpaired, [&](const UnpairedSteps& u) {
    if (u.where == UnpairedSteps::Where::Restore) return false;
    return !u.span.job_first || *u.span.job_last < first || *u.span.job_first > last;
  });
}

std::string span_text(const StepSpan& span) {
  const std::string trace = span.first == span.last
                                ? fmt::format("trace step {}", span.first)
                                : fmt::format("trace steps {}-{}", span.first, span.last);
  if (!span.job_first) return trace;
  const std::string job = *span.job_first == *span.job_last
                              ? fmt::format("step {}", *span.job_first)
                              : fmt::format("steps {}-{}", *span.job_first, *span.job_last);
  return job + " (" + trace + ")";
}

std::string unpaired_text(const UnpairedSteps& u) {
  const char run = upper(u.run), other = u.run == 'a' ? 'B' : 'A';
  switch (u.where) {
    case UnpairedSteps::Where::Restore:
      return fmt::format("run {}'s restore prologue, {} ({} records): not compared", run,
                         span_text(u.span), u.span.records);
    case UnpairedSteps::Where::Before:
      return fmt::format("{} only in {} ({} started later)", span_text(u.span), run, other);
    case UnpairedSteps::Where::After:
      return fmt::format("{} only in {} ({} stopped earlier)", span_text(u.span), run, other);
    case UnpairedSteps::Where::Gap:
      return fmt::format("{} only in {} (missing from {}'s numbering)", span_text(u.span), run,
                         other);
  }
  return "?";
}

}  // namespace lockstep::tools
