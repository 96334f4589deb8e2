// The step counter and its policy (see README.md "Steps"). Thread-safe: markers arrive from
// any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "collectors/config.h"

namespace lockstep::collectors {

enum class MarkerSource : uint8_t { Nvtx = 1, Api = 2, Metric = 3 };

// The job's own number of the step a marker starts, read from its text: the first "step",
// "iteration" or "iter" (a word of its own, or after "_": "train_step"), then an optional "_num"
// (JAX's "step_num=12"), at most a few separators (space, '=', ':', '#', '-') and decimal digits:
// "step 12", "Step=12", "train_step 12", "iteration 12", "iter 12", "step: 12/100". nullopt
// when there is none ("step", "steps 3", "step -"), or the digits overflow 64 bits.
std::optional<uint64_t> marker_step_number(std::string_view text);

class StepCounter {
 public:
  // `step`: where the count is kept (the process's counter: common/hot_flags.h, which every
  // record's stamp reads); by default in the counter itself.
  StepCounter(StepSource source, const std::string& pattern, std::atomic<uint32_t>* step = nullptr);

  uint32_t current() const { return step_.load(std::memory_order_relaxed); }

  // Each returns true when the step advanced, with the finished step in *finished (the new step
  // is *finished + 1).
  bool on_marker(std::string_view text, uint32_t* finished);  // NVTX range push/start, mark
  bool on_metric(uint32_t* finished);                         // a Metric record was taken
  uint32_t on_explicit();                                     // lockstep_step/mark: finished

  bool matches(std::string_view text);

 private:
  uint32_t advance();

  StepSource source_;
  std::regex pattern_;
  std::atomic<uint32_t> own_step_{0};
  std::atomic<uint32_t>& step_;
  std::atomic<bool> marker_seen_{false};
  std::mutex cache_mutex_;
  std::unordered_map<std::string, bool> cache_;  // marker text -> matches (bounded)
};

}  // namespace lockstep::collectors
