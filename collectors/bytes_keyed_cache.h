// What cuBLASLt's attribute getters said about an object, remembered by the object's bytes.
//
// A cublasLtMatmul call is described by reading its matrix layouts and algorithm one attribute
// at a time, each read a library call (~20-50 ns); PyTorch makes new layouts for every GEMM, so
// their addresses say nothing, but their contents repeat: the same few shapes every step. Both
// are plain structs (cublasLtMatrixLayoutOpaque_t and cublasLtMatmulAlgo_t, 64 bytes), so equal
// bytes mean equal attributes: a hit compares the bytes and returns what was read before.
// Because that rests on cuBLASLt keeping a layout's state inside its struct (the header sizes
// it so; it is not promised), every 16th hit of an entry is read again: a difference turns the cache off
// for the process, and every later call reads the library as before.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>

namespace lockstep::collectors {

struct BytesKeyedCacheStats {
  uint64_t hits = 0, misses = 0, verified = 0, mismatches = 0;
};

// kSets sets of kWays entries (a direct-mapped table would let two shapes of one GEMM evict each
// other for good); an entry is replaced round robin within its set.
template <size_t kKeyBytes, typename Value, size_t kSets = 16, size_t kWays = 4>
class BytesKeyedCache {
  static_assert(kKeyBytes % 8 == 0 && (kSets & (kSets - 1)) == 0);

 public:
  static constexpr uint32_t kVerifyEvery = 16;
  using Stats = BytesKeyedCacheStats;

  // The value read() gives for the object at `object` (kKeyBytes readable bytes) with at least
  // `depth` (1 or more) of it read: a deeper read answers a shallower question. read(depth)
  // reads the library; `disabled` is shared by every thread's cache of this kind.
  template <typename Read>
  Value get(const void* object, uint8_t depth, std::atomic<bool>& disabled, Read&& read) {
    if (disabled.load(std::memory_order_relaxed)) return read(depth);
    Key key;
    std::memcpy(key.data(), object, kKeyBytes);
    Set& set = sets_[index_of(key)];
    Entry* same_key = nullptr;
    for (Entry& entry : set.entries) {
      if (entry.depth == 0 || entry.key != key) continue;
      if (entry.depth < depth) {  // known, not deep enough: read deeper into this entry
        same_key = &entry;
        break;
      }
      if (++entry.hits % kVerifyEvery != 0) {  // per entry: a GEMM's four layouts take turns
        ++stats_.hits;
        return entry.value;
      }
      ++stats_.verified;
      const Value fresh = read(entry.depth);
      if (!(fresh == entry.value)) {
        disabled.store(true, std::memory_order_relaxed);  // the bytes did not tell it all
        ++stats_.mismatches;
      }
      return fresh;
    }
    ++stats_.misses;
    const Value fresh = read(depth);
    Entry& slot = same_key != nullptr ? *same_key : set.entries[set.next++ % kWays];
    slot = {key, fresh, depth, 0};
    return fresh;
  }

  const Stats& stats() const { return stats_; }

 private:
  using Key = std::array<uint64_t, kKeyBytes / 8>;
  struct Entry {
    Key key{};
    Value value{};
    uint8_t depth = 0;  // 0: empty
    uint32_t hits = 0;
  };
  struct Set {
    std::array<Entry, kWays> entries{};
    uint32_t next = 0;  // the entry a miss replaces
  };
  static size_t index_of(const Key& key) {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (uint64_t word : key) h = (h ^ word) * 0xff51afd7ed558ccdull;
    return (h >> 40) & (kSets - 1);
  }

  std::array<Set, kSets> sets_{};
  Stats stats_;
};

}  // namespace lockstep::collectors
