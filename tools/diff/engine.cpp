#include "tools/diff/engine.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "tools/diff/aligned_input.h"
#include "tools/heap_trim.h"
#include "tools/parallel_for.h"

namespace lockstep::tools {
namespace {

struct StepPair {
  uint32_t step = 0;
  std::optional<StepInfo> a, b;
  bool summaries_match() const {
    return a && b && a->has_summary && b->has_summary && a->record_count == b->record_count &&
           a->digest == b->digest;
  }
  uint64_t estimate() const { return std::max(a ? a->record_count : 0, b ? b->record_count : 0); }
};

std::vector<StepPair> merge_steps(const std::vector<StepInfo>& a, const std::vector<StepInfo>& b,
                                  const DiffOptions& options) {
  std::vector<StepPair> merged;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    StepPair p;
    if (j == b.size() || (i < a.size() && a[i].step < b[j].step)) {
      p.step = a[i].step, p.a = a[i++];
    } else if (i == a.size() || b[j].step < a[i].step) {
      p.step = b[j].step, p.b = b[j++];
    } else {
      p.step = a[i].step, p.a = a[i++], p.b = b[j++];
    }
    if (p.step >= options.first_step && p.step <= options.last_step) merged.push_back(p);
  }
  return merged;
}

bool has_kind(const OpTable& table, trace::RecordKind kind) {
  for (const Op& op : table.ops())
    if (op.kind == kind) return true;
  return false;
}

// The first step of the window whose writers the diff can see: the later of the runs'
// fingerprint windows and the compared range, when that is after the trace's first step.
std::optional<uint32_t> window_start(RankInput& a, RankInput& b, const std::vector<StepInfo>& sa,
                                     const std::vector<StepInfo>& sb, const DiffOptions& options) {
  if (sa.empty() && sb.empty()) return std::nullopt;
  uint32_t trace_first = std::min(sa.empty() ? UINT32_MAX : sa.front().step,
                                  sb.empty() ? UINT32_MAX : sb.front().step);
  uint32_t first = options.first_step;
  for (RankInput* input : {&a, &b})
    if (auto fp = input->fingerprint_first_step()) first = std::max(first, *fp);
  if (first > trace_first) return first;
  // The compared steps start after steps the runs hold that the step alignment left out (job
  // steps paired by number: a hunt's window, `--steps`): as an ordinal diff's --steps does.
  if (a.left_out_steps_before() || b.left_out_steps_before()) return trace_first;
  return std::nullopt;
}

}  // namespace

RankResult diff_rank(int rank, RankInput& a, RankInput& b, const DiffOptions& options) {
  RankResult result;
  result.rank = rank;
  const std::vector<StepInfo> steps_a = a.steps(), steps_b = b.steps();
  std::vector<StepPair> steps = merge_steps(steps_a, steps_b, options);
  CompareOptions compare = options.compare;
  compare.window_first_step = window_start(a, b, steps_a, steps_b, options);
  result.window_first_step = compare.window_first_step;
  for (RankInput* input : {&a, &b})
    for (std::string& w : input->warnings()) result.warnings.push_back(std::move(w));
  std::optional<int64_t> complete;
  for (RankInput* input : {&a, &b})
    if (auto through = input->complete_through())
      complete = complete ? std::min(*complete, *through) : *through;
  if (complete)
    std::erase_if(steps,
                  [&](const StepPair& p) { return static_cast<int64_t>(p.step) > *complete; });
  StringPool pool;
  thread_local OpTable table_a, table_b;  // reused: no fresh pages for every rank
  // The set-up phase: compared on its own, into its own result (setup_phase.h).
  if (const std::optional<uint32_t> key = a.setup_key(); key && b.setup_key() == key) {
    auto it = std::find_if(steps.begin(), steps.end(),
                           [&](const StepPair& p) { return p.step == *key; });
    if (it != steps.end() && it->a && it->b) {
      SetupResult setup;
      setup.rank = rank;
      if (!options.exhaustive && it->summaries_match()) {
        setup.equal_by_summary = true;
      } else {
        table_a.clear();
        table_b.clear();
        a.load(*key, *key, pool, table_a);
        b.load(*key, *key, pool, table_b);
        RankResult phase;
        CompareOptions setup_compare = compare;
        setup_compare.window_first_step.reset();
        compare_window(table_a, table_b, pool, setup_compare, phase);
        setup.compared = true;
        setup.records_compared = phase.records_compared;
        setup.differences = phase.structural_total + phase.divergent_records;
        setup.first = phase.first ? phase.first
                      : phase.structural.empty() ? std::nullopt
                                                 : std::optional(phase.structural.front());
        compare_choices(table_a, table_b, pool, result.choices, &result.choices_total, true);
      }
      result.setup = setup;
      steps.erase(it);
    }
  }
  bool metrics_seen = false, states_seen = false, choices_noted = false;
  // Steps per window: one at first, doubling up to window_records. The first divergence is
  // usually in the first step compared: a rank of thousands then decodes one step, not the
  // next window_records records (issue #34: 81 steps a rank). --exhaustive compares everything
  // anyway: full windows from the start.
  size_t window_steps = options.exhaustive || options.full_windows ? SIZE_MAX : 1;
  size_t i = 0;
  while (i < steps.size()) {
    if (!result.first_step) result.first_step = steps[i].step;
    if (!options.exhaustive && steps[i].summaries_match()) {
      ++result.steps_skipped;
      result.last_step = steps[i].step;
      ++i;
      continue;
    }
    // A window: consecutive steps that need comparing, up to window_records per run.
    size_t end = i + 1;
    uint64_t records = steps[i].estimate();
    while (end < steps.size() && end - i < window_steps &&
           (options.exhaustive || !steps[end].summaries_match()) &&
           records + steps[end].estimate() <= options.window_records) {
      records += steps[end].estimate();
      ++end;
    }
    table_a.clear();
    table_b.clear();
    a.load(steps[i].step, steps[end - 1].step, pool, table_a);
    b.load(steps[i].step, steps[end - 1].step, pool, table_b);
    if (options.align == AlignMode::Number) align_collective_sequences(table_a, table_b);
    using trace::RecordKind;
    metrics_seen = metrics_seen || has_kind(table_a, RecordKind::Metric) ||
                   has_kind(table_b, RecordKind::Metric);
    states_seen =
        states_seen || has_kind(table_a, RecordKind::State) || has_kind(table_b, RecordKind::State);
    compare_window(table_a, table_b, pool, compare, result);
    if (!choices_noted) {  // the first steps compared: what the compiler chose shows there
      compare_choices(table_a, table_b, pool, result.choices, &result.choices_total, false);
      choices_noted = true;
    }
    result.steps_compared += end - i;
    result.last_step = steps[end - 1].step;
    if (window_steps < SIZE_MAX / 2) window_steps *= 2;
    i = end;
    // The first divergence is final once its window is done; keep going only to find the
    // first differing metric and state, if the runs record any.
    if (!options.exhaustive && result.first && (result.metric || !metrics_seen) &&
        (result.state || !states_seen))
      break;
  }
  return result;
}

void combine_ranks(DiffResult& result) {
  std::vector<Divergence> firsts;
  for (RankResult& r : result.ranks) {
    if (r.first_unexplained) {
      const Divergence& u = *r.first_unexplained;
      const bool earlier = !r.first || std::tuple(u.step, u.anchor_seq) <
                                           std::tuple(r.first->step, r.first->anchor_seq);
      const bool only_dated = !r.first || r.first->classification == Classification::Metric ||
                              r.first->classification == Classification::State;
      // Nothing traced explains this rank's differing metric or state: show the unexplained
      // kernel. One that received a difference made before the window is shown also when the
      // rank diverges later anyway: it is the earliest evidence there is, and an op after it
      // cannot be the first place the runs parted.
      if (earlier && (((r.metric || r.state) && only_dated) ||
                      (u.made_before_step && (r.first || r.metric || r.state))))
        r.first = r.first_unexplained;
    }
    if (r.first) firsts.push_back(*r.first);
  }
  std::sort(firsts.begin(), firsts.end(), blame_before);

  // A collective whose inputs matched here but whose output differed only carried a difference
  // if another rank fed it a differing input, or had already diverged before it.
  for (Divergence& d : firsts) {
    if (!d.is_collective || d.classification != Classification::Origin) continue;
    for (const RankResult& other : result.ranks) {
      if (other.rank == d.rank) continue;
      bool fed = std::any_of(
          other.collectives.begin(), other.collectives.end(), [&](const CollectiveStatus& c) {
            return c.comm_id == d.comm_id && c.comm_seq == d.comm_seq && c.in_differs;
          });
      bool earlier = other.first && other.first->classification != Classification::Metric &&
                     blame_before(*other.first, d);
      if (fed || earlier) {
        d.classification = Classification::Receiver;
        d.received_from = other.rank;
        d.detail = fed ? "inputs matched here; rank " + std::to_string(other.rank) +
                             " fed this collective a differing input"
                       : "inputs matched here; rank " + std::to_string(other.rank) +
                             " had already diverged";
        if (fed) break;
      }
    }
  }
  std::sort(firsts.begin(), firsts.end(), blame_before);
  for (RankResult& r : result.ranks)
    for (const Divergence& d : firsts)
      if (d.rank == r.rank) r.first = d;
  result.first_by_epoch = firsts;
  result.culprit.reset();
  // Where the difference entered: an op that made it, a different op, or bytes from the host.
  // A State record only dates a divergence: even one that differs in shape names no op.
  for (const Divergence& d : firsts)
    if ((d.classification == Classification::Origin ||
         d.classification == Classification::HostInput ||
         d.classification == Classification::Structural) &&
        d.kind != trace::record_kind_name(trace::RecordKind::State)) {
      result.culprit = d;
      break;
    }
  // What read the culprit's difference next on its rank: the GEMM that used a host-side scale.
  result.culprit_receivers.clear();
  if (result.culprit)
    for (const RankResult& r : result.ranks)
      if (r.rank == result.culprit->rank)
        for (const Divergence& d : r.receivers_after)
          if (std::tuple(d.step, d.anchor_seq) >
              std::tuple(result.culprit->step, result.culprit->anchor_seq))
            result.culprit_receivers.push_back(d);

  result.metric.reset();
  result.state.reset();
  result.window_first_step.reset();
  result.structural.clear();
  result.structural_total = 0;
  result.records_compared = result.steps_compared = result.steps_skipped = 0;
  result.first_step.reset();
  result.last_step.reset();
  result.divergent_records = 0;
  result.unexplained = 0;
  for (const RankResult& r : result.ranks) {
    if (r.metric && (!result.metric || std::tuple(r.metric->step, r.metric->rank) <
                                           std::tuple(result.metric->step, result.metric->rank)))
      result.metric = r.metric;
    if (r.state && (!result.state || std::tuple(r.state->step, r.state->rank) <
                                         std::tuple(result.state->step, result.state->rank)))
      result.state = r.state;
    if (r.window_first_step &&
        (!result.window_first_step || *r.window_first_step > *result.window_first_step))
      result.window_first_step = r.window_first_step;
    result.structural.insert(result.structural.end(), r.structural.begin(), r.structural.end());
    result.structural_total += r.structural_total;
    result.records_compared += r.records_compared;
    result.divergent_records += r.divergent_records;
    result.unexplained += r.unexplained;
    result.steps_compared += r.steps_compared;
    result.steps_skipped += r.steps_skipped;
    if (r.first_step && (!result.first_step || *r.first_step < *result.first_step))
      result.first_step = r.first_step;
    if (r.last_step && (!result.last_step || *r.last_step > *result.last_step))
      result.last_step = r.last_step;
    for (const std::string& w : r.warnings) result.warnings.push_back(w);
  }
  // NCCL's choices, the set-up phase and the autotuner's choices: apart, never in the verdict.
  result.nccl_choices = {};
  for (const RankResult& r : result.ranks) result.nccl_choices.merge(r.nccl_choices);
  result.setup.reset();
  result.choices.clear();
  result.choices_total = 0;
  for (const RankResult& r : result.ranks) {
    if (r.setup && (!result.setup || (result.setup->identical() && !r.setup->identical())))
      result.setup = r.setup;
    for (const ChoiceDifference& c : r.choices) {
      if (std::any_of(result.choices.begin(), result.choices.end(),
                      [&](const ChoiceDifference& x) { return x.what == c.what; }))
        continue;
      if (result.choices.size() < kMaxChoices) result.choices.push_back(c);
    }
    result.choices_total = std::max(result.choices_total, r.choices_total);
  }
  std::stable_sort(result.structural.begin(), result.structural.end(),
                   [](const Divergence& x, const Divergence& y) {
                     return std::tuple(x.step, x.rank, x.anchor_seq, x.anchor_sub) <
                            std::tuple(y.step, y.rank, y.anchor_seq, y.anchor_sub);
                   });
  result.divergent = !firsts.empty() || result.metric || result.state;
}

namespace {

// Under number alignment: why steps were not compared that make the verdict incomplete (a gap
// in one run's numbering, no step in common), once per distinct reason; and a warning when a
// rank pairs its steps unlike the first.
template <class AlignmentOf>
void note_unpaired(size_t count, AlignmentOf&& alignment_of, const std::vector<RankPair>& ranks,
                   DiffResult& result) {
  std::map<std::string, std::vector<int>> reasons;
  for (size_t i = 0; i < count; ++i) {
    const StepAlignment& alignment = alignment_of(i);
    if (alignment.pairs.empty())
      reasons["the runs have no numbered step in common"].push_back(ranks[i].rank);
    for (const UnpairedSteps& u : alignment.unpaired)
      if (u.where == UnpairedSteps::Where::Gap) reasons[unpaired_text(u)].push_back(ranks[i].rank);
    if (i > 0) {
      const StepAlignment& first = alignment_of(0);
      auto same = [](const StepPairing& x, const StepPairing& y) {
        return x.a == y.a && x.b == y.b && x.job_step == y.job_step;
      };
      if (!std::equal(alignment.pairs.begin(), alignment.pairs.end(), first.pairs.begin(),
                      first.pairs.end(), same))
        result.warnings.push_back(fmt::format(
            "rank {} pairs its steps unlike rank {} (the report's step ranges are rank {}'s)",
            ranks[i].rank, ranks[0].rank, ranks[0].rank));
    }
  }
  for (const auto& [reason, with] : reasons)
    result.not_compared.push_back(with.size() == count
                                      ? reason
                                      : fmt::format("rank {}: {}", with.front(), reason));
}

// Fills in run B's trace step and the job's number of every divergence found.
template <class AlignmentOf>
void annotate_steps(DiffResult& result, AlignmentOf&& alignment_of) {
  auto one = [&](auto& d) {
    const StepAlignment& alignment = alignment_of(d.rank);
    d.step_b = alignment.b_step(d.step);
    d.job_step = alignment.job_step(d.step);
  };
  auto divergence = [&](Divergence& d) {
    one(d);
    // Its detail names the step (compare_window knew only the key): the job's number when the
    // steps paired by it.
    if (d.classification == Classification::HostInput && d.job_step && d.buffer)
      d.detail = host_input_detail(*d.job_step, d.name, d.buffer->bytes);
  };
  for (Divergence& d : result.first_by_epoch) divergence(d);
  for (Divergence& d : result.structural) divergence(d);
  if (result.culprit) divergence(*result.culprit);
  for (Divergence& d : result.culprit_receivers) divergence(d);
  if (result.metric) one(*result.metric);
  if (result.state) one(*result.state);
  for (RankResult& r : result.ranks) {
    if (r.first) divergence(*r.first);
    if (r.first_unexplained) divergence(*r.first_unexplained);
    for (Divergence& d : r.structural) divergence(d);
    if (r.metric) one(*r.metric);
    if (r.state) one(*r.state);
  }
}

}  // namespace

DiffResult diff_ranks(const std::vector<RankPair>& ranks, const DiffOptions& options) {
  DiffResult result;
  result.ranks.resize(ranks.size());
  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  // Collectives tie the ranks together: when one file is not whole, every rank is compared only
  // up to the last step complete everywhere.
  struct Survey {
    std::optional<int64_t> complete;
    std::vector<std::string> incomplete;
    std::optional<uint32_t> first, last;  // steps the inputs hold (keys, under number alignment)
    StepAlignment alignment;
  };
  std::vector<Survey> surveys(ranks.size());
  const bool ranged = options.first_step != 0 || options.last_step != UINT32_MAX;
  // One pass opens each rank's inputs once (a run of thousands of ranks must not hold a file
  // open per rank, and opening them again per pass cost a tenth of a diff, issue #34): each
  // rank's steps and how they pair, and what its inputs hold seen both ways, in trace order
  // and through its alignment by number. Auto aligns by number only when every rank can: the
  // ranks of one run are tied together by their collectives; the survey of the way not taken
  // is dropped, and so is any error it met.
  std::vector<Survey> by_number(ranks.size());
  std::vector<std::exception_ptr> number_errors(ranks.size());
  auto survey_of = [](RankInput& a, RankInput& b, Survey& survey) {
    for (RankInput* input : {&a, &b}) {
      std::vector<StepInfo> steps = input->steps();
      if (!steps.empty()) {
        survey.first = std::min(survey.first.value_or(UINT32_MAX), steps.front().step);
        survey.last = std::max(survey.last.value_or(0), steps.back().step);
      }
      if (auto through = input->complete_through())
        survey.complete = survey.complete ? std::min(*survey.complete, *through) : *through;
      for (std::string& reason : input->incomplete())
        survey.incomplete.push_back(std::move(reason));
    }
  };
  // Both passes below count their ranks on it (heap_trim.h: resident memory near the live heap).
  HeapTrimmer trimmer(/*every=*/256);
  parallel_for(ranks.size(), threads, [&](size_t i) {
    const HeapTrimmer::Unit unit(trimmer);
    std::unique_ptr<RankInput> a = ranks[i].open_a(), b = ranks[i].open_b();
    if (options.align != AlignMode::Ordinal)
      surveys[i].alignment = align_steps(a->steps(), b->steps(), options.align);
    survey_of(*a, *b, surveys[i]);
    if (!surveys[i].alignment.by_number()) return;
    try {
      Survey& number = by_number[i];
      number.alignment = surveys[i].alignment;
      if (ranged) restrict_alignment(number.alignment, options.first_step, options.last_step);
      AlignedRankInput aligned_a(std::move(a), number.alignment, false);
      AlignedRankInput aligned_b(std::move(b), number.alignment, true);
      survey_of(aligned_a, aligned_b, number);
    } catch (...) {
      number_errors[i] = std::current_exception();
    }
  });
  AlignMode mode = AlignMode::Ordinal;
  if (!surveys.empty() && std::all_of(surveys.begin(), surveys.end(), [](const Survey& s) {
        return s.alignment.by_number();
      }))
    mode = AlignMode::Number;
  std::string ordinal_reason;
  if (mode == AlignMode::Number) {
    for (const std::exception_ptr& e : number_errors)
      if (e) std::rethrow_exception(e);
    surveys = std::move(by_number);
  } else {
    for (Survey& survey : surveys) {
      if (ordinal_reason.empty()) ordinal_reason = survey.alignment.reason;
      survey.alignment = StepAlignment{};
    }
  }
  if (!surveys.empty()) {
    result.alignment = surveys.front().alignment;
    if (mode == AlignMode::Ordinal) result.alignment.reason = ordinal_reason;
  }
  std::optional<int64_t> complete;
  for (const Survey& survey : surveys) {
    if (survey.first)
      result.trace_first_step =
          std::min(result.trace_first_step.value_or(UINT32_MAX), *survey.first);
    if (survey.last)
      result.trace_last_step = std::max(result.trace_last_step.value_or(0), *survey.last);
    if (survey.complete)
      complete = complete ? std::min(*complete, *survey.complete) : *survey.complete;
    result.not_compared.insert(result.not_compared.end(), survey.incomplete.begin(),
                               survey.incomplete.end());
  }
  // A range outside the trace compares nothing: that is a mistake, not a verdict.
  if (ranged && mode == AlignMode::Number && !result.trace_first_step)
    throw StepRangeError("steps " + std::to_string(options.first_step) + "-" +
                         std::to_string(options.last_step) +
                         " hold no numbered step that both runs have");
  if (ranged && mode == AlignMode::Ordinal &&
      (!result.trace_first_step || options.first_step > *result.trace_last_step ||
       options.last_step < *result.trace_first_step))
    throw StepRangeError(result.trace_first_step
                             ? "steps " + std::to_string(options.first_step) + "-" +
                                   std::to_string(options.last_step) +
                                   " hold no step of either run (they hold " +
                                   std::to_string(*result.trace_first_step) + "-" +
                                   std::to_string(*result.trace_last_step) + ")"
                             : std::string("the runs hold no steps"));
  DiffOptions effective = options;
  effective.align = mode;
  if (mode == AlignMode::Number) {
    // The job's step range is in the alignment now; the engine sees keys.
    effective.first_step = 0;
    effective.last_step = UINT32_MAX;
    note_unpaired(surveys.size(), [&](size_t i) -> const StepAlignment& {
      return surveys[i].alignment;
    }, ranks, result);
  }
  if (complete) {
    int64_t last = std::min<int64_t>(effective.last_step, *complete);
    if (last < static_cast<int64_t>(effective.first_step)) {
      effective.last_step = 0, effective.first_step = 1;  // nothing to compare
    } else {
      effective.last_step = static_cast<uint32_t>(last);
    }
  }
  std::atomic<int> done{0};
  parallel_for(ranks.size(), threads, [&](size_t i) {
    const HeapTrimmer::Unit unit(trimmer);
    std::unique_ptr<RankInput> a = ranks[i].open_a();
    std::unique_ptr<RankInput> b = ranks[i].open_b();
    if (mode == AlignMode::Number) {
      a = std::make_unique<AlignedRankInput>(std::move(a), surveys[i].alignment, false);
      b = std::make_unique<AlignedRankInput>(std::move(b), surveys[i].alignment, true);
    }
    result.ranks[i] = diff_rank(ranks[i].rank, *a, *b, effective);
    if (result.ranks[i].setup && surveys[i].alignment.setup) {
      result.ranks[i].setup->a = surveys[i].alignment.setup->a;
      result.ranks[i].setup->b = surveys[i].alignment.setup->b;
    }
    if (options.progress) options.progress(++done, static_cast<int>(ranks.size()));
  });
  std::vector<std::string> warnings = std::move(result.warnings);
  combine_ranks(result);
  // Windows start with one step, so the culprit's window may end before the ops that read its
  // difference next: its rank alone is compared again with full windows, for those.
  if (result.culprit && !options.exhaustive) {
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i].rank != result.culprit->rank) continue;
      std::unique_ptr<RankInput> a = ranks[i].open_a();
      std::unique_ptr<RankInput> b = ranks[i].open_b();
      if (mode == AlignMode::Number) {
        a = std::make_unique<AlignedRankInput>(std::move(a), surveys[i].alignment, false);
        b = std::make_unique<AlignedRankInput>(std::move(b), surveys[i].alignment, true);
      }
      DiffOptions full = effective;
      full.full_windows = true;
      const RankResult again = diff_rank(ranks[i].rank, *a, *b, full);
      result.culprit_receivers.clear();
      for (const Divergence& d : again.receivers_after)
        if (std::tuple(d.step, d.anchor_seq) >
            std::tuple(result.culprit->step, result.culprit->anchor_seq))
          result.culprit_receivers.push_back(d);
      break;
    }
  }
  result.warnings.insert(result.warnings.begin(), warnings.begin(), warnings.end());
  std::map<int, const StepAlignment*> by_rank;
  for (size_t i = 0; i < ranks.size(); ++i) by_rank[ranks[i].rank] = &surveys[i].alignment;
  annotate_steps(result, [&](int rank) -> const StepAlignment& { return *by_rank.at(rank); });
  return result;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Identical:
      return "identical";
    case Verdict::Divergent:
      return "divergent";
    case Verdict::Incomplete:
      return "incomplete";
  }
  return "?";
}

std::optional<uint32_t> earliest_diverging_step(const DiffResult& r) {
  std::optional<uint32_t> step;
  auto take = [&](uint32_t s) { step = std::min(step.value_or(UINT32_MAX), s); };
  if (!r.first_by_epoch.empty()) take(r.first_by_epoch.front().step);
  if (r.metric) take(r.metric->step);
  if (r.state) take(r.state->step);
  return step;
}

const Divergence* first_made_before_window(const DiffResult& r) {
  for (const Divergence& d : r.first_by_epoch)
    if (d.made_before_step) return &d;
  return nullptr;
}

const Divergence* first_diverging_scope(const DiffResult& r) {
  if (r.first_by_epoch.empty()) return nullptr;
  const Divergence& first = r.first_by_epoch.front();
  if (first.classification != Classification::Receiver || first.scope.empty()) return nullptr;
  return &first;
}

std::optional<JobStepRange> compared_job_steps(const DiffResult& r) {
  if (!r.alignment.by_number() || !r.first_step || !r.last_step) return std::nullopt;
  std::optional<JobStepRange> range;
  for (const StepPairing& p : r.alignment.pairs) {
    if (p.a < *r.first_step || p.a > *r.last_step) continue;
    if (!range) range = JobStepRange{UINT64_MAX, 0, false};
    if (!p.within) {
      range->with_setup = true;
      continue;
    }
    range->first = std::min(range->first, *p.within);
    range->last = std::max(range->last, *p.within);
  }
  if (range && r.setup) range->with_setup = true;  // the set-up phase, compared on its own
  return range;
}

std::string job_steps_text(const JobStepRange& range) {
  if (range.first > range.last) return "set-up";  // nothing numbered among them
  std::string steps = range.first == range.last
                          ? "step " + std::to_string(range.first)
                          : "steps " + std::to_string(range.first) + "-" +
                                std::to_string(range.last);
  return range.with_setup ? "set-up and " + steps : steps;
}

std::string coverage_line(const DiffResult& r) {
  std::string line;
  const std::optional<JobStepRange> job = compared_job_steps(r);
  if (job) {
    // The job's numbers first: those are what the user's loop printed.
    const StepPairing* first = r.alignment.pair_of(*r.first_step);
    const StepPairing* last = r.alignment.pair_of(*r.last_step);
    line = "compared " + job_steps_text(*job) + " by the job's numbers (trace steps " +
           std::to_string(first->a) + "-" + std::to_string(last->a) + " of A, " +
           std::to_string(first->b) + "-" + std::to_string(last->b) + " of B; " +
           std::to_string(r.records_compared) + " records decoded, " +
           std::to_string(r.steps_skipped) + " steps equal by their summaries)";
  } else if (r.first_step && r.last_step) {
    line = "compared steps " + std::to_string(*r.first_step) + "-" + std::to_string(*r.last_step) +
           " (" + std::to_string(r.records_compared) + " records decoded, " +
           std::to_string(r.steps_skipped) + " steps equal by their summaries)";
  } else {
    line = "compared nothing";
  }
  // Steps one run has and the other does not, before or after the steps both have, or the
  // resumed run's restore prologue: not compared, and not missing either.
  for (const UnpairedSteps& u : r.alignment.unpaired)
    if (u.where != UnpairedSteps::Where::Gap) line += "; " + unpaired_text(u);
  if (r.trace_last_step && (!r.last_step || *r.last_step < *r.trace_last_step) &&
      !r.not_compared.empty()) {
    uint32_t from = r.last_step ? *r.last_step + 1 : *r.trace_first_step;
    // Under number alignment the steps here are run A's trace steps (the diff's keys).
    const std::string of_a = r.alignment.by_number() ? " of A" : "";
    line += from == *r.trace_last_step
                ? "; step " + std::to_string(from) + of_a + " not compared"
                : "; steps " + std::to_string(from) + "-" + std::to_string(*r.trace_last_step) +
                      of_a + " not compared";
  }
  for (const std::string& reason : r.not_compared) line += "; " + reason;
  return line;
}

}  // namespace lockstep::tools
