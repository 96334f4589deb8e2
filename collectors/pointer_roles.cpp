#include "collectors/pointer_roles.h"

namespace lockstep::collectors {

PointerRoles::Change PointerRoles::observe(uint32_t byte_offset, uint32_t step, bool changed,
                                           bool evidence) {
  const uint32_t word = byte_offset / 8;
  if (word >= kMaxWords) return Change::None;
  const uint8_t state = state_[word].load(std::memory_order_relaxed);
  if (state == kWritten) return Change::None;
  if (changed) {
    state_[word].store(kWritten, std::memory_order_relaxed);
    return state == kReadOnly ? Change::Contradicted : Change::None;
  }
  if (state == kReadOnly || !evidence) return Change::None;
  Unchanged& seen = unchanged_[word];
  if (seen.count == 0) seen.first_step = step;
  if (seen.count < 255) ++seen.count;
  if (seen.count < kLearnAfter || step == seen.first_step) return Change::None;
  state_[word].store(kReadOnly, std::memory_order_relaxed);
  return Change::Learned;
}

}  // namespace lockstep::collectors
