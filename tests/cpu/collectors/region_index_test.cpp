// collectors/region_index.h: the first position of each (pointer, extent), however many.
#include "collectors/region_index.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace lockstep::collectors {
namespace {

TEST(RegionIndex, FindsTheFirstPositionOfEachPointerAndExtent) {
  RegionIndex index;
  index.reset(4);
  EXPECT_EQ(index.find(0x1000, 64), RegionIndex::kNone);
  index.insert(0x1000, 64, 0);
  index.insert(0x1000, 128, 1);  // the same start, another extent: another region
  index.insert(0x1000, 64, 2);   // again: the first position stays
  EXPECT_EQ(index.find(0x1000, 64), 0u);
  EXPECT_EQ(index.find(0x1000, 128), 1u);
  EXPECT_EQ(index.find(0x2000, 64), RegionIndex::kNone);
}

// Many regions, with pointers that share their low bits (allocations are aligned) and repeats:
// the index answers what comparing with every earlier one answers.
TEST(RegionIndex, AgreesWithComparingEveryEarlierRegion) {
  std::vector<std::pair<uint64_t, uint64_t>> regions;
  uint64_t state = 12345;
  for (int i = 0; i < 5000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t ptr = 0x7f0000000000ull + ((state >> 33) % 700) * (2u << 20);
    const uint64_t bytes = 512u << ((state >> 20) % 3);
    regions.emplace_back(ptr, bytes);
  }
  RegionIndex index;
  index.reset(regions.size());
  for (size_t i = 0; i < regions.size(); ++i) {
    size_t first = 0;
    while (regions[first] != regions[i]) ++first;
    const uint32_t found = index.find(regions[i].first, regions[i].second);
    if (first == i)
      ASSERT_EQ(found, RegionIndex::kNone) << i;
    else
      ASSERT_EQ(found, first) << i;
    index.insert(regions[i].first, regions[i].second, static_cast<uint32_t>(i));
  }
  index.reset(2);  // emptied, and smaller
  EXPECT_EQ(index.find(regions[0].first, regions[0].second), RegionIndex::kNone);
}

}  // namespace
}  // namespace lockstep::collectors
