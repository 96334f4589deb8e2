// Which step of run A is compared with which step of run B.
//
// Ordinal alignment pairs trace step i of A with trace step i of B (the shim's own counter):
// right for two runs of the same job from the start. Number alignment pairs the steps that the
// job itself numbered alike (StepMarker job_step: "step 12", lockstep_step_number(12)), so that a
// run resumed from a checkpoint at step 4 compares its steps 4-7 with steps 4-7 of a run that
// went straight through, although they are its trace steps 1-4 and the other's 5-8.
//
// Under number alignment, a step only one run has is not compared and is not a divergence:
//   - before the steps both runs have: the resumed run's (the one whose first number is later)
//     unnumbered steps are its restore prologue (loading the checkpoint: a phase of its own,
//     reported, not compared); the other run's earlier steps were simply not run by the resumed
//     one ("only in A");
//   - after them: one run went on longer;
//   - in between (a gap: a number one run has inside the other's range): something is missing,
//     which makes a verdict without divergence INCOMPLETE.
// Unnumbered steps are labelled by the numbered step before them (the k-th unnumbered step after
// step n) and pair by that label. Those before the first numbered step, when both runs start at
// the same number and both have some, are the set-up phase (setup_phase.h): all of them one
// pair, under run A's first set-up step, however many trace steps each run's set-up spans;
// when the runs start at different numbers they are the prologue above.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace lockstep::tools {

struct StepInfo;  // engine.h

enum class AlignMode { Auto, Number, Ordinal };
const char* align_mode_name(AlignMode mode);  // "auto" | "number" | "ordinal"
// "auto" / "number" / "ordinal"; nullopt for anything else.
std::optional<AlignMode> parse_align_mode(const std::string& text);

// Consecutive trace steps of one run that the alignment puts in one category.
struct StepSpan {
  uint32_t first = 0, last = 0;                     // trace steps of that run
  std::optional<uint64_t> job_first, job_last;      // the job's numbers among them, if any
  uint64_t records = 0;                             // records in them (summaries or estimate)
};

// What one run held that was not compared, and why.
struct UnpairedSteps {
  enum class Where { Before, After, Gap, Restore };
  Where where = Where::Before;
  char run = 'a';  // 'a' or 'b'
  StepSpan span;
};
const char* unpaired_where_name(UnpairedSteps::Where where);  // "before" "after" "gap" "restore"

struct StepPairing {
  uint32_t a = 0, b = 0;             // trace steps; the diff keys the pair by `a`
  std::optional<uint64_t> job_step;  // the job's number (nullopt: an unnumbered step)
  // The job's number of this step or, for an unnumbered one, of the numbered step before it;
  // nullopt before the first numbered step (set-up).
  std::optional<uint64_t> within;
};

// The set-up phase of both runs: trace steps a.first-a.last of A with b.first-b.last of B, the
// diff's key `key` (= a.first). Its pair is also in `pairs` (within: nullopt).
struct SetupSpans {
  StepSpan a, b;
  uint32_t key = 0;
};

struct StepAlignment {
  AlignMode mode = AlignMode::Ordinal;  // as resolved (never Auto)
  std::string reason;                   // why auto chose ordinal ("run B has no numbered steps")
  std::vector<StepPairing> pairs;       // number mode: every pair compared, by `a`
  std::vector<UnpairedSteps> unpaired;  // number mode: what was not compared, in trace order
  // The resumed run ('a' or 'b'): its first numbered step is later than the other run's; 0 when
  // both start at the same number (or the mode is ordinal).
  char resumed = 0;
  std::optional<SetupSpans> setup;  // number mode, both runs with set-up steps
  // restrict_alignment dropped pairs before its range: both runs hold steps, left out, that
  // come before the compared ones (a hunt's window), where a difference may have been made.
  bool pairs_before_range = false;

  bool by_number() const { return mode == AlignMode::Number; }
  // The pair keyed by run A's trace step `a_step`; null in ordinal mode or when there is none.
  const StepPairing* pair_of(uint32_t a_step) const;
  // Run B's trace step and the job's number for the diff's step `a_step` (the key): under
  // ordinal alignment the same step and nothing.
  uint32_t b_step(uint32_t a_step) const;
  std::optional<uint64_t> job_step(uint32_t a_step) const;
  bool has_gap() const;
};

// Labels and pairs the steps of one rank's two runs. `mode` Auto: Number when both have numbered
// steps, else Ordinal (reason says why). Number asked for but impossible (a run without numbers,
// numbers that go back) throws AlignmentError; Auto then falls back to Ordinal with the reason.
struct AlignmentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
StepAlignment align_steps(const std::vector<StepInfo>& a, const std::vector<StepInfo>& b,
                          AlignMode mode);

// Keeps the pairs and unpaired spans within the job's steps [first, last] (`--steps` under
// number alignment; an unnumbered step goes with the numbered step before it). The restore
// prologue is kept: it says what the resumed run did before the steps compared.
void restrict_alignment(StepAlignment& alignment, uint64_t first, uint64_t last);

// "job steps 4-7" / "job step 4" / "trace steps 0-2 (unnumbered)" for a span of one run.
std::string span_text(const StepSpan& span);
// One line per unpaired span: "steps 0-3 only in A (B did not run them)", "B's restore
// prologue (trace step 0, 1 234 records): not compared".
std::string unpaired_text(const UnpairedSteps& u);

}  // namespace lockstep::tools
