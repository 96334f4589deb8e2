#include "collectors/step_counter.h"

namespace lockstep::collectors {

StepCounter::StepCounter(StepSource source, const std::string& pattern)
    : source_(source),
      pattern_(pattern.empty() ? std::string(kDefaultStepPattern) : pattern,
               std::regex::ECMAScript | std::regex::icase | std::regex::optimize) {}

uint32_t StepCounter::advance() { return step_.fetch_add(1, std::memory_order_relaxed); }

bool StepCounter::matches(std::string_view text) {
  std::lock_guard lock(cache_mutex_);
  auto it = cache_.find(std::string(text));
  if (it != cache_.end()) return it->second;
  const bool match = std::regex_search(text.begin(), text.end(), pattern_);
  if (cache_.size() < 4096) cache_.emplace(std::string(text), match);
  return match;
}

bool StepCounter::on_marker(std::string_view text, uint32_t* finished) {
  if (source_ != StepSource::Auto && source_ != StepSource::Markers) return false;
  if (!matches(text)) return false;
  marker_seen_.store(true, std::memory_order_relaxed);
  *finished = advance();
  return true;
}

bool StepCounter::on_metric(uint32_t* finished) {
  const bool metric_steps =
      source_ == StepSource::Metric ||
      (source_ == StepSource::Auto && !marker_seen_.load(std::memory_order_relaxed));
  if (!metric_steps) return false;
  *finished = advance();
  return true;
}

uint32_t StepCounter::on_explicit() {
  marker_seen_.store(true, std::memory_order_relaxed);
  return advance();
}

}  // namespace lockstep::collectors
