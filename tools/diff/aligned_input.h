// The diff's view of one run under number alignment (alignment.h): only the steps paired with
// the other run, each under its pair's key (run A's trace step), so that the engine pairs them
// as it pairs equal trace steps. Under ordinal alignment inputs are used as they are.
#pragma once

#include <map>
#include <memory>

#include "tools/diff/alignment.h"
#include "tools/diff/engine.h"

namespace lockstep::tools {

class AlignedRankInput : public RankInput {
 public:
  // side_b: this is run B (its trace steps are StepPairing::b), else run A.
  AlignedRankInput(std::unique_ptr<RankInput> inner, const StepAlignment& alignment, bool side_b);

  std::vector<StepInfo> steps() override;
  // Loads this run's trace steps of the keys in [first, last]; the ops keep only the paired
  // steps, renumbered to their keys.
  void load(uint32_t first, uint32_t last, StringPool& pool, OpTable& out) override;
  std::vector<std::string> warnings() override { return inner_->warnings(); }
  // The last key whose trace step is complete in this run (-1: none).
  std::optional<int64_t> complete_through() override;
  std::vector<std::string> incomplete() override { return inner_->incomplete(); }
  // The first key whose trace step is in this run's fingerprint window.
  std::optional<uint32_t> fingerprint_first_step() override;
  // Whether the alignment left out pairs of steps before its range (restrict_alignment: both
  // runs hold them; steps() lists only the compared ones).
  bool left_out_steps_before() override { return pairs_before_range_; }
  // The set-up phase's key: every set-up step of this run is loaded under it.
  std::optional<uint32_t> setup_key() override { return setup_key_; }

 private:
  std::unique_ptr<RankInput> inner_;
  std::map<uint32_t, uint32_t> key_of_;  // this run's trace step -> key
  // key -> this run's trace steps (first, last): one, or the set-up phase's
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> step_of_;
  std::optional<uint32_t> setup_key_;
  bool pairs_before_range_ = false;  // StepAlignment::pairs_before_range
};

// Number alignment pairs steps that sit at different points of two processes, and a
// collective's comm_seq counts the operations on its communicator since the process began: a
// resumed run's first step has other numbers than the same step of a run that went straight
// through. Shifts run B's comm_seq per step and communicator so that the first collective on
// each communicator in each step has run A's number (the tables hold the same keys). Inside a
// step the sequences still have to agree op for op.
void align_collective_sequences(const OpTable& a, OpTable& b);

}  // namespace lockstep::tools
