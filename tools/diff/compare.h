// The core of the diff: aligns one rank's records of a window of steps, run A against run B,
// per step and stream by identity, and classifies what differs. Works on in-memory tables only,
// so it is tested without files.
//
// Identity: what the kind's row of trace/record_kinds.def says (its identity column): a
// collective is the comm_seq-th operation of communicator comm_id; any other op is the k-th
// occurrence of its (kind, name) on its stream in its step. Timestamps, seq numbers and the
// interleaving of threads are never used to pair records, only to order what was found. Which
// kinds are compared, which fields are volatile and whose regions are guesses come from the same
// row (trace::kind_diff).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "tools/diff/ops.h"
#include "tools/diff/result.h"

namespace lockstep::tools {

struct CompareOptions {
  int context = 3;               // ops shown before and after a structural divergence
  size_t structural_cap = 64;    // structural divergences kept per rank (all are counted)
  size_t collective_cap = 4096;  // differing collectives kept per rank
  size_t receivers_cap = 3;      // receivers after the rank's first divergence kept
  // Set (by diff_rank) when the window of fingerprinted and compared steps starts after the
  // trace's first step: a receiver with no traced divergence before it then receives a
  // difference made before this step (Divergence::made_before_step).
  std::optional<uint32_t> window_first_step;
};

// Compares the ops of both tables (which hold the same window of steps) and folds what it finds
// into `result` (first divergence, structural list, metric, collectives, counters).
void compare_window(const OpTable& a, const OpTable& b, const StringPool& pool,
                    const CompareOptions& options, RankResult& result);

// Blame order of first divergences: step, collective epoch, class (origin first), seq, rank.
bool blame_before(const Divergence& x, const Divergence& y);

}  // namespace lockstep::tools
