// collectors/slot_waiters.h: records waiting on a hash slot's digest, served by slot id.
#include "collectors/slot_waiters.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

namespace lockstep::collectors {
namespace {

TEST(SlotWaiters, ServesEachSlotsWaitersInTheOrderTheyCameAndOnlyThem) {
  SlotWaiters<int> waiters;
  waiters.reset(8);
  waiters.add(3, 30);
  waiters.add(5, 50);
  waiters.add(3, 31);
  waiters.add(11, 110);  // the same ring index as 3: a later slot id, kept apart
  waiters.add(3, 32);
  EXPECT_EQ(waiters.size(), 5u);
  std::vector<int> served;
  waiters.take(3, [&](int t) { served.push_back(t); });
  EXPECT_EQ(served, (std::vector<int>{30, 31, 32}));
  EXPECT_EQ(waiters.size(), 2u);
  served.clear();
  waiters.take(3, [&](int t) { served.push_back(t); });
  EXPECT_TRUE(served.empty()) << "served twice";
  waiters.take(11, [&](int t) { served.push_back(t); });
  waiters.take(5, [&](int t) { served.push_back(t); });
  EXPECT_EQ(served, (std::vector<int>{110, 50}));
  EXPECT_TRUE(waiters.empty());
}

// Slots taken and reused as a ring goes round, with waiters added and served in between: the
// same answers as a multimap by slot id, and the pool stops growing once it holds the most that
// ever waited at once.
TEST(SlotWaiters, AgreesWithAMultimapBySlotAndReusesItsNodes) {
  constexpr uint64_t kRing = 16;
  SlotWaiters<uint64_t> waiters;
  waiters.reset(kRing);
  std::multimap<uint64_t, uint64_t> model;
  uint64_t state = 99, next_slot = 0, value = 0;
  size_t most = 0;
  for (int round = 0; round < 20000; ++round) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    // Waiters only on the slots in flight: the last kRing handed out.
    if (state >> 62 != 0 && next_slot > 0) {
      const uint64_t in_flight = std::min<uint64_t>(next_slot, kRing);
      const uint64_t slot = next_slot - 1 - (state >> 20) % in_flight;
      waiters.add(slot, value);
      model.emplace(slot, value);
      ++value;
    } else {
      if (next_slot >= kRing) {  // the oldest slot's digest arrives before its index is reused
        const uint64_t slot = next_slot - kRing;
        std::vector<uint64_t> got, want;
        waiters.take(slot, [&](uint64_t t) { got.push_back(t); });
        const auto [first, last] = model.equal_range(slot);
        for (auto it = first; it != last; ++it) want.push_back(it->second);
        model.erase(first, last);
        ASSERT_EQ(got, want) << "slot " << slot;
      }
      ++next_slot;
    }
    ASSERT_EQ(waiters.size(), model.size());
    most = std::max(most, model.size());
  }
  EXPECT_EQ(waiters.pooled(), most) << "a node allocated beyond the most that waited at once";
  size_t counted = 0;
  waiters.for_each([&](uint64_t) { ++counted; });
  EXPECT_EQ(counted, model.size());
  waiters.clear();
  EXPECT_TRUE(waiters.empty());
  counted = 0;
  waiters.for_each([&](uint64_t) { ++counted; });
  EXPECT_EQ(counted, 0u);
  EXPECT_GT(most, 0u);
}

}  // namespace
}  // namespace lockstep::collectors
