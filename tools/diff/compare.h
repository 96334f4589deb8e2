// The core of the diff: aligns one rank's records of a window of steps, run A against run B,
// per step and stream by identity, and classifies what differs. Works on in-memory tables only,
// so it is tested without files.
//
// Identity: a collective is the comm_seq-th operation of communicator comm_id; any other op is
// the k-th occurrence of its (kind, name) on its stream in its step. Timestamps, seq numbers and
// the interleaving of threads are never used to pair records, only to order what was found.
#pragma once

#include <cstddef>

#include "tools/diff/ops.h"
#include "tools/diff/result.h"

namespace lockstep::tools {

struct CompareOptions {
  int context = 3;               // ops shown before and after a structural divergence
  size_t structural_cap = 64;    // structural divergences kept per rank (all are counted)
  size_t collective_cap = 4096;  // differing collectives kept per rank
};

// Compares the ops of both tables (which hold the same window of steps) and folds what it finds
// into `result` (first divergence, structural list, metric, collectives, counters).
void compare_window(const OpTable& a, const OpTable& b, const StringPool& pool,
                    const CompareOptions& options, RankResult& result);

// "2.5 (0x40200000)" for a metric payload: element type guessed from dtype_hint, else from the
// byte count (2: bf16, 4: f32, 8: f64); at most 4 elements shown.
std::string format_metric_value(const std::vector<uint8_t>& payload, uint64_t dtype_hint);

// Blame order of first divergences: step, collective epoch, class (origin first), seq, rank.
bool blame_before(const Divergence& x, const Divergence& y);

}  // namespace lockstep::tools
