#include "trace/string_table.h"

namespace lockstep::trace {

StringTable::StringTable()
    : empty_hash_(text_hash({})), chunks_(new std::atomic<std::atomic<uint64_t>*>[kChunks]) {
  for (uint32_t i = 0; i < kChunks; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

StringTable::~StringTable() {
  for (uint32_t i = 0; i < kChunks; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
}

StringId StringTable::intern(std::string_view text) {
  if (text.size() > kMaxText) text = text.substr(0, kMaxText);
  if (text.empty()) return 0;
  std::lock_guard lock(mutex_);
  if (auto it = ids_.find(text); it != ids_.end()) return it->second;
  if (next_id_ >= kMaxIds) return 0;
  const StringId id = next_id_++;
  auto& slot = chunks_[id >> kChunkBits];
  std::atomic<uint64_t>* chunk = slot.load(std::memory_order_relaxed);
  if (!chunk) {
    chunk = new std::atomic<uint64_t>[1u << kChunkBits]();
    slot.store(chunk, std::memory_order_release);
  }
  chunk[id & ((1u << kChunkBits) - 1)].store(text_hash(text), std::memory_order_release);
  auto [it, inserted] = ids_.emplace(std::string(text), id);
  pending_.emplace_back(id, std::string_view(it->first));
  return id;
}

std::vector<std::pair<StringId, std::string_view>> StringTable::take_pending() {
  std::lock_guard lock(mutex_);
  return std::exchange(pending_, {});
}

}  // namespace lockstep::trace
