// BytesKeyedCache: cuBLASLt layouts and algorithms known by their bytes (collectors/gemm.cpp).
#include "collectors/bytes_keyed_cache.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>

namespace lockstep::collectors {
namespace {

using Object = std::array<uint64_t, 8>;  // 64 bytes, as a layout or an algorithm
using Cache = BytesKeyedCache<sizeof(Object), uint64_t>;

// A stand-in for the library's getter: what it answers, how often and how deep it was asked.
struct Library {
  uint64_t answer = 0;
  int reads = 0;
  uint8_t last_depth = 0;
  auto reader() {
    return [this](uint8_t depth) {
      ++reads;
      last_depth = depth;
      return answer + depth;  // a deeper read says more
    };
  }
};

TEST(BytesKeyedCache, EqualBytesAreReadOnceOtherBytesAgain) {
  Cache cache;
  std::atomic<bool> off{false};
  Library lib{100};
  Object first{1, 2, 3}, same{1, 2, 3}, other{1, 2, 4};
  EXPECT_EQ(cache.get(&first, 1, off, lib.reader()), 101u);
  EXPECT_EQ(cache.get(&same, 1, off, lib.reader()), 101u);  // another object, the same bytes
  EXPECT_EQ(lib.reads, 1);
  lib.answer = 200;
  EXPECT_EQ(cache.get(&other, 1, off, lib.reader()), 201u);
  EXPECT_EQ(lib.reads, 2);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 2u);
}

TEST(BytesKeyedCache, ADeeperQuestionReadsDeeperAndThenAnswersShallowerOnes) {
  Cache cache;
  std::atomic<bool> off{false};
  Library lib{10};
  Object layout{7};
  EXPECT_EQ(cache.get(&layout, 1, off, lib.reader()), 11u);
  EXPECT_EQ(cache.get(&layout, 3, off, lib.reader()), 13u);  // deeper than known: read
  EXPECT_EQ(lib.last_depth, 3);
  EXPECT_EQ(cache.get(&layout, 2, off, lib.reader()), 13u);  // the depth-3 answer serves
  EXPECT_EQ(cache.get(&layout, 1, off, lib.reader()), 13u);
  EXPECT_EQ(lib.reads, 2);
}

TEST(BytesKeyedCache, EverySixteenthHitOfAnEntryIsReadAgain) {
  Cache cache;
  std::atomic<bool> off{false};
  Library lib{0};
  Object a{1}, b{2};
  cache.get(&a, 1, off, lib.reader());
  cache.get(&b, 1, off, lib.reader());
  for (uint32_t hit = 1; hit <= 2 * Cache::kVerifyEvery; ++hit) {
    const int before = lib.reads;
    cache.get(&a, 1, off, lib.reader());
    cache.get(&b, 1, off, lib.reader());
    EXPECT_EQ(lib.reads - before, hit % Cache::kVerifyEvery == 0 ? 2 : 0) << "hit " << hit;
  }
  EXPECT_EQ(cache.stats().verified, 4u);
  EXPECT_FALSE(off.load());
}

TEST(BytesKeyedCache, AnEntryFoundChangedTurnsEveryCacheOfItsKindOff) {
  Cache cache, other_thread;
  std::atomic<bool> off{false};
  Library lib{50};
  Object layout{9};
  cache.get(&layout, 1, off, lib.reader());
  other_thread.get(&layout, 1, off, lib.reader());
  lib.answer = 60;  // changed behind equal bytes
  for (uint32_t hit = 1; hit < Cache::kVerifyEvery; ++hit)
    EXPECT_EQ(cache.get(&layout, 1, off, lib.reader()), 51u);  // not seen until checked
  EXPECT_EQ(cache.get(&layout, 1, off, lib.reader()), 61u);    // the 16th hit: read, differs
  EXPECT_TRUE(off.load());
  EXPECT_EQ(cache.stats().mismatches, 1u);
  const int before = lib.reads;
  EXPECT_EQ(other_thread.get(&layout, 1, off, lib.reader()), 61u);  // off: read
  EXPECT_EQ(lib.reads, before + 1);
}

}  // namespace
}  // namespace lockstep::collectors
