// The writer's string table: thread-safe interning, lock-free lookup of a string's text hash
// (the step digest hashes text, never ids), and the definitions not yet written to the file.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trace/digest.h"
#include "trace/format.h"
#include "trace/record.h"

namespace lockstep::trace {

class StringTable {
 public:
  static constexpr uint32_t kChunkBits = 12;
  static constexpr uint32_t kChunks = 1u << 12;
  static constexpr uint32_t kMaxIds = kChunks << kChunkBits;  // 16 M strings
  static constexpr size_t kMaxText = kMaxStringBytes;  // longer text is cut (names are ~KiB)

  StringTable();
  ~StringTable();

  // Same id for the same text; 0 for "" (and once kMaxIds strings exist).
  StringId intern(std::string_view text);

  // Text hash of a defined id; lock-free. An id never returned by intern() hashes to a value
  // derived from the id, so that misuse cannot crash.
  uint64_t hash(StringId id) const {
    if (id == 0) return empty_hash_;
    const std::atomic<uint64_t>* chunk =
        chunks_[(id >> kChunkBits) & (kChunks - 1)].load(std::memory_order_acquire);
    if (id >= kMaxIds || !chunk) return 0x9e3779b97f4a7c15ull * id;
    return chunk[id & ((1u << kChunkBits) - 1)].load(std::memory_order_acquire);
  }

  // Definitions interned since the last call, in id order.
  std::vector<std::pair<StringId, std::string_view>> take_pending();

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  std::mutex mutex_;
  std::unordered_map<std::string, StringId, Hash, std::equal_to<>> ids_;  // node keys are stable
  std::vector<std::pair<StringId, std::string_view>> pending_;
  uint32_t next_id_ = 1;
  uint64_t empty_hash_;
  std::unique_ptr<std::atomic<std::atomic<uint64_t>*>[]> chunks_;
};

}  // namespace lockstep::trace
