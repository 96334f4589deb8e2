#include "collectors/step_counter.h"

namespace lockstep::collectors {
namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool digit(char c) { return c >= '0' && c <= '9'; }

// Does `text` hold `word` (lower case) at `at`, case-insensitively?
bool word_at(std::string_view text, size_t at, std::string_view word) {
  if (text.size() - at < word.size()) return false;
  for (size_t i = 0; i < word.size(); ++i)
    if (lower(text[at + i]) != word[i]) return false;
  return true;
}

// The number after a keyword that ends at `at`: "_num", separators, digits.
std::optional<uint64_t> number_after(std::string_view text, size_t at) {
  if (word_at(text, at, "_num")) at += 4;
  for (int separators = 0; at < text.size() && separators < 3; ++separators) {
    const char c = text[at];
    if (c != ' ' && c != '=' && c != ':' && c != '#' && c != '-' && c != '\t') break;
    ++at;
  }
  if (at == text.size() || !digit(text[at])) return std::nullopt;
  uint64_t value = 0;
  for (; at < text.size() && digit(text[at]); ++at) {
    const uint64_t d = static_cast<uint64_t>(text[at] - '0');
    if (value > (UINT64_MAX - d) / 10) return std::nullopt;
    value = value * 10 + d;
  }
  return value;
}

}  // namespace

std::optional<uint64_t> marker_step_number(std::string_view text) {
  // Longest first: "iteration" before "iter", whose match would stop at "ation".
  static constexpr std::string_view kWords[] = {"iteration", "iter", "step"};
  for (size_t at = 0; at < text.size(); ++at) {
    if (at > 0 && alpha(text[at - 1])) continue;  // inside a word: "substep", "optimizer"
    for (std::string_view word : kWords) {
      if (!word_at(text, at, word)) continue;
      const size_t end = at + word.size();
      if (end < text.size() && alpha(text[end])) continue;  // "steps", "iterator"
      if (auto number = number_after(text, end)) return number;
    }
  }
  return std::nullopt;
}

StepCounter::StepCounter(StepSource source, const std::string& pattern, std::atomic<uint32_t>* step)
    : source_(source),
      pattern_(pattern.empty() ? std::string(kDefaultStepPattern) : pattern,
               std::regex::ECMAScript | std::regex::icase | std::regex::optimize),
      step_(step != nullptr ? *step : own_step_) {}

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
