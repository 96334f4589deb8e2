#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "collectors/alloc_map.h"

namespace lockstep::collectors {
namespace {

constexpr uintptr_t MiB = 1 << 20;

TEST(AllocationMap, PlainAllocationsGiveOrdinalAndOffset) {
  AllocationMap map;
  map.add(0x10000, 4096);
  map.add(0x20000, 100);
  auto hit = map.find(0x10000 + 17);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->ordinal, 1u);
  EXPECT_EQ(hit->offset, 17u);
  EXPECT_EQ(hit->readable, 4096u - 17);
  EXPECT_EQ(map.find(0x20000)->ordinal, 2u);
  EXPECT_FALSE(map.find(0x10000 + 4096));  // one past the end
  EXPECT_FALSE(map.find(0x0fff0));
  EXPECT_FALSE(map.find(0x20000 + 100));
  map.remove(0x10000);
  EXPECT_FALSE(map.find(0x10000));
  map.add(0x10000, 64);  // reuse of the address: a new ordinal
  EXPECT_EQ(map.find(0x10010)->ordinal, 3u);
}

TEST(AllocationMap, VmmReservationReadsOnlyItsContiguousMappedRun) {
  AllocationMap map;
  const uintptr_t base = 0x7f0000000000;
  map.reserve(base, 64 * MiB);
  EXPECT_EQ(map.find(base + 5)->readable, 0u) << "reserved but unmapped";
  EXPECT_EQ(map.find(base + 5)->ordinal, 1u);
  map.map(base, 2 * MiB);
  map.map(base + 2 * MiB, 2 * MiB);   // adjacent: one run
  map.map(base + 8 * MiB, 20 * MiB);  // a gap before it
  auto hit = map.find(base + MiB);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->offset, MiB);
  EXPECT_EQ(hit->readable, 3 * MiB);
  EXPECT_EQ(map.find(base + 5 * MiB)->readable, 0u);
  EXPECT_EQ(map.find(base + 10 * MiB)->readable, 18 * MiB);
  EXPECT_EQ(map.find(base + 10 * MiB)->offset, 10 * MiB);
  // Unmap the middle of a run: it splits.
  map.unmap(base + MiB, MiB);
  EXPECT_EQ(map.find(base)->readable, MiB);
  EXPECT_EQ(map.find(base + MiB + 1)->readable, 0u);
  EXPECT_EQ(map.find(base + 2 * MiB)->readable, 2 * MiB);
  // Unmap across two pieces.
  map.unmap(base + 3 * MiB, 6 * MiB);
  EXPECT_EQ(map.find(base + 2 * MiB)->readable, MiB);
  EXPECT_EQ(map.find(base + 9 * MiB)->readable, 19 * MiB);
  EXPECT_EQ(map.find(base + 8 * MiB)->readable, 0u);
  // Release the reservation: pointers are unknown, mappings gone.
  map.release_reservation(base, 64 * MiB);
  EXPECT_FALSE(map.find(base + 9 * MiB));
  EXPECT_EQ(map.mapped_pieces(), 0u);
}

TEST(AllocationMap, AReaderAnswersEveryPointerAsFindDoes) {
  AllocationMap map;
  const uintptr_t base = 0x7f0000000000;
  map.add(0x10000, 4096);
  map.add(0x20000, 100, /*graph_owned=*/true);
  map.reserve(base, 64 * MiB);
  map.map(base, 2 * MiB);
  map.add(base + 128 * MiB, MiB);
  // Words as a launch's parameters give them: repeats of one allocation (the last hit's
  // shortcut), others in between, a reservation's mapped run, scalars in and out of range.
  const std::vector<uintptr_t> words = {
      0,          17,          0x10000,          0x10000 + 8,      0x10000 + 4095, 0x10000 + 4096,
      0x20000,    0x20000 + 99, 0x20000 + 100,   0x10000 + 12,     base + 5,       base + 3 * MiB,
      base + 5,   base + MiB,   base + 128 * MiB + 1, base + 129 * MiB, base + 128 * MiB,
      0x0fff0,    UINT64_MAX};
  AllocationMap::Reader reader(map);
  for (uintptr_t word : words) {
    const auto want = map.find(word);  // a second shared lock on this thread: allowed
    const auto got = reader.find(word);
    ASSERT_EQ(got.has_value(), want.has_value()) << std::hex << word;
    if (!want) continue;
    EXPECT_EQ(got->ordinal, want->ordinal) << std::hex << word;
    EXPECT_EQ(got->offset, want->offset) << std::hex << word;
    EXPECT_EQ(got->base, want->base) << std::hex << word;
    EXPECT_EQ(got->readable, want->readable) << std::hex << word;
    EXPECT_EQ(got->graph_owned, want->graph_owned) << std::hex << word;
  }
}

TEST(AllocationMap, AReaderHoldsOffWritersOnlyWhileItLives) {
  AllocationMap map;
  map.add(0x10000, 4096);
  std::atomic<bool> added{false};
  std::thread writer;
  {
    AllocationMap::Reader reader(map);
    ASSERT_TRUE(reader.find(0x10000));  // takes the shared lock
    writer = std::thread([&] {
      map.add(0x30000, 64);
      added = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(added) << "an allocation hook changed the map under a reader";
  }
  writer.join();
  EXPECT_TRUE(added);
  EXPECT_TRUE(map.find(0x30000));
}

TEST(AllocationMap, MappedRunStopsAtTheReservationEnd) {
  AllocationMap map;
  map.reserve(0x100000, 4 * MiB);
  map.reserve(0x100000 + 4 * MiB, 4 * MiB);
  map.map(0x100000, 4 * MiB);
  map.map(0x100000 + 4 * MiB, 4 * MiB);
  EXPECT_EQ(map.find(0x100000 + MiB)->readable, 3 * MiB);
  EXPECT_EQ(map.find(0x100000 + 5 * MiB)->ordinal, 2u);
}

// Lookups by exact base (a second index beside the tree) answer as the tree's walk does: the
// entry with the last base at or before the pointer, also where entries overlap (an allocation
// made inside a known one whose free was not seen, a reservation's range), after replacements
// at one base and frees. Checked against a plain model of the tree's rule over random
// operations: a base index left stale by a free or a replacement gives another answer.
TEST(AllocationMap, LookupsByBaseAnswerAsTheTreesWalkAfterAnyAddsAndFrees) {
  struct Model {
    uint64_t bytes;
    uint32_t ordinal;
    bool reservation;
  };
  std::map<uintptr_t, Model> model;
  uint32_t next_ordinal = 1;
  const auto model_find = [&](uintptr_t ptr) -> std::optional<std::pair<uintptr_t, Model>> {
    auto it = model.upper_bound(ptr);
    if (it == model.begin()) return std::nullopt;
    --it;
    if (ptr - it->first >= it->second.bytes) return std::nullopt;
    return *it;
  };
  AllocationMap map;
  std::mt19937_64 random(7);
  const auto pick_base = [&] { return 0x100000 + (random() % 64) * 0x1000; };  // they collide
  for (int op = 0; op < 20000; ++op) {
    const uintptr_t base = pick_base();
    const uint64_t bytes = 1 + random() % 0x6000;  // often past the next base: overlaps
    switch (random() % 5) {
      case 0:
      case 1:
        map.add(base, bytes);
        model[base] = {bytes, next_ordinal++, false};
        break;
      case 2:
        map.remove(base);
        if (auto it = model.find(base); it != model.end() && !it->second.reservation)
          model.erase(it);
        break;
      case 3:
        if (random() % 8 == 0) {
          map.reserve(base, bytes);
          model[base] = {bytes, next_ordinal++, true};
        } else if (random() % 2 == 0) {
          map.release_reservation(base, bytes);
          if (auto it = model.find(base); it != model.end() && it->second.reservation)
            model.erase(it);
        }
        break;
      default:
        break;
    }
    ASSERT_EQ(map.size(), model.size());
    AllocationMap::Reader reader(map);
    for (int probe = 0; probe < 4; ++probe) {
      // A base (the index's case), or a pointer inside or past one (the tree's).
      const uintptr_t ptr = pick_base() + (probe % 2 == 0 ? 0 : random() % 0x3000);
      const auto want = model_find(ptr);
      const auto got = map.find(ptr);
      const auto read = reader.find(ptr);
      ASSERT_EQ(got.has_value(), want.has_value()) << "op " << op << std::hex << " ptr " << ptr;
      ASSERT_EQ(read.has_value(), want.has_value()) << "op " << op << std::hex << " ptr " << ptr;
      if (!want) continue;
      EXPECT_EQ(got->base, want->first) << "op " << op;
      EXPECT_EQ(got->ordinal, want->second.ordinal) << "op " << op;
      EXPECT_EQ(read->ordinal, want->second.ordinal) << "op " << op;
      if (!want->second.reservation) {
        EXPECT_EQ(got->readable, want->second.bytes - (ptr - want->first)) << "op " << op;
        EXPECT_EQ(read->readable, got->readable) << "op " << op;
      }
    }
  }
}

TEST(AllocationMap, FreeDoesNotDropAReservation) {
  AllocationMap map;
  map.reserve(0x100000, MiB);
  map.remove(0x100000);
  EXPECT_TRUE(map.find(0x100000));
}

// The state call keeps its tensors' hits while the generation holds (state_records.cpp): a job
// that allocates every step elsewhere must not move it; whatever may change a hit must.
TEST(AllocationMap, OnlyAChangeThatMayAlterAnAnswerMovesTheGeneration) {
  AllocationMap map;
  map.add(0x100000, MiB);
  uint64_t seen = map.generation();
  const auto moved = [&] {
    const bool changed = map.generation() != seen;
    seen = map.generation();
    return changed;
  };
  map.add(0x400000, MiB);  // elsewhere: every earlier answer stands
  EXPECT_FALSE(moved());
  map.reserve(0x1000000, 4 * MiB);
  EXPECT_FALSE(moved());
  map.add(0x100000 + MiB / 2, MiB);  // inside a known allocation (a free not seen): replaces
  EXPECT_TRUE(moved());
  map.add(0x300000, 2 * MiB);  // runs into the allocation at 0x400000
  EXPECT_TRUE(moved());
  map.reserve(0x800000, 16 * MiB);  // over the earlier reservation
  EXPECT_TRUE(moved());
  map.map(0x1000000, MiB);  // a mapped run may lengthen
  EXPECT_TRUE(moved());
  map.unmap(0x1000000, MiB);
  EXPECT_TRUE(moved());
  map.remove(0x400000);
  EXPECT_TRUE(moved());
  map.release_reservation(0x800000, 16 * MiB);
  EXPECT_TRUE(moved());
}

}  // namespace
}  // namespace lockstep::collectors
