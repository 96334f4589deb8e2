// The diff driver: per rank, skips steps whose summaries match, loads the rest a window of steps
// at a time, compares them (compare.h), then orders the ranks' first divergences for blame.
// Ranks run in parallel, one worker per core; each worker holds at most one window per run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/diff/alignment.h"
#include "tools/diff/compare.h"
#include "tools/diff/ops.h"
#include "tools/diff/result.h"

namespace lockstep::tools {

struct StepInfo {
  uint32_t step = 0;
  uint64_t record_count = 0;  // estimate when there is no summary
  bool has_summary = false;
  uint64_t digest = 0;
  std::optional<uint64_t> job_step;  // the job's own number of the step (its summary says)
};

// One run's records of one rank: a trace file, or a table in a test.
class RankInput {
 public:
  virtual ~RankInput() = default;
  // Every step that has records or a summary, ascending.
  virtual std::vector<StepInfo> steps() = 0;
  // Appends the records whose step is in [first, last] to `out`, names translated into `pool`.
  virtual void load(uint32_t first, uint32_t last, StringPool& pool, OpTable& out) = 0;
  // Problems worth telling the user that do not stop the diff (a cut-off file). After steps().
  virtual std::vector<std::string> warnings() { return {}; }
  // For a file that is not whole (cut off, salvaged, no end record): the last step known
  // complete (-1: none). nullopt: the file is whole. After steps(). The diff compares only steps
  // complete in both runs.
  virtual std::optional<int64_t> complete_through() { return std::nullopt; }
  // Why this input is not whole, one reason each ("FILE: no end record ..."); empty when it
  // is. After steps(). Any reason makes a diff without divergence INCOMPLETE, never IDENTICAL.
  virtual std::vector<std::string> incomplete() { return {}; }
  // The first step the run fingerprinted (its LOCKSTEP_STEPS window, from the trace header);
  // nullopt: every step, or not recorded (an older trace). Outside the window ops are recorded
  // by identity only, so a difference made there is not seen where it was made.
  virtual std::optional<uint32_t> fingerprint_first_step() { return std::nullopt; }
  // Whether the run holds steps before the first one steps() lists that steps() leaves out: an
  // aligned run's steps before the paired range (a --steps window of a hunt). A difference made
  // there reaches the compared steps as a receiver's input.
  virtual bool left_out_steps_before() { return false; }
  // The step (key) that holds the run's set-up phase (setup_phase.h): compared on its own and
  // reported apart. nullopt: none (ordinal alignment, or a run without set-up steps).
  virtual std::optional<uint32_t> setup_key() { return std::nullopt; }
};

using RankInputFactory = std::function<std::unique_ptr<RankInput>()>;

struct RankPair {
  int rank = 0;
  RankInputFactory open_a, open_b;
};

struct DiffOptions {
  uint32_t first_step = 0, last_step = UINT32_MAX;
  bool exhaustive = false;  // compare every step, even those whose summaries match
  // Full windows from the first (window_records), not one step first: how the culprit's rank is
  // compared again for what read its difference in the steps after it (diff_ranks).
  bool full_windows = false;
  // Records per run held at once (a step is never split). Small enough that both runs' tables of
  // both workers stay in cache: 1 << 16 (tables of ~13 MB each) was ~20% slower, measured.
  size_t window_records = 1u << 14;
  int threads = 0;  // 0: one per core
  // Which steps pair (alignment.h). Number: first_step/last_step are the job's numbers.
  AlignMode align = AlignMode::Ordinal;
  CompareOptions compare;
  std::function<void(int ranks_done, int ranks_total)> progress;  // called from workers
};

// Throws what the inputs throw (trace::TraceError for a bad file), from the calling thread, and
// StepRangeError when options' step range holds no step of either run.
struct StepRangeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
DiffResult diff_ranks(const std::vector<RankPair>& ranks, const DiffOptions& options);

// The per-rank part, exposed for tests.
RankResult diff_rank(int rank, RankInput& a, RankInput& b, const DiffOptions& options);

// Cross-rank part: receiver collectives, blame order, culprit, earliest metric.
void combine_ranks(DiffResult& result);

}  // namespace lockstep::tools
