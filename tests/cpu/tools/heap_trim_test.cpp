// tools/heap_trim.h: the diff's periodic heap trim (issue #34's 256 MiB at 2,432 ranks) runs once
// every `every` units, whichever thread finishes them and however their code returns.
#include "tools/heap_trim.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using lockstep::tools::HeapTrimmer;

std::atomic<int> g_trims{0};
void count_trim() { g_trims.fetch_add(1); }

class HeapTrimmerTest : public ::testing::Test {
 protected:
  void SetUp() override { g_trims = 0; }
};

TEST_F(HeapTrimmerTest, TrimsOnceEveryPeriodOfUnits) {
  HeapTrimmer trimmer(4, &count_trim);
  for (int i = 0; i < 3; ++i) trimmer.one_done();
  EXPECT_EQ(g_trims, 0);  // not before the 4th
  trimmer.one_done();
  EXPECT_EQ(g_trims, 1);
  for (int i = 0; i < 6; ++i) trimmer.one_done();
  EXPECT_EQ(g_trims, 2);  // 10 units: after the 4th and the 8th
}

TEST_F(HeapTrimmerTest, AUnitCountsWhenItsCodeThrows) {
  HeapTrimmer trimmer(2, &count_trim);
  { HeapTrimmer::Unit unit(trimmer); }
  try {
    HeapTrimmer::Unit unit(trimmer);
    throw std::runtime_error("a rank's file is bad");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(g_trims, 1);
}

TEST_F(HeapTrimmerTest, APeriodOfZeroNeverTrims) {
  HeapTrimmer trimmer(0, &count_trim);
  for (int i = 0; i < 1000; ++i) trimmer.one_done();
  EXPECT_EQ(g_trims, 0);
}

TEST_F(HeapTrimmerTest, UnitsOfManyThreadsTrimOncePerPeriodInAll) {
  HeapTrimmer trimmer(256, &count_trim);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) HeapTrimmer::Unit unit(trimmer);
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(g_trims, 8000 / 256);
}

// Resident pages of this process (/proc/self/statm), in bytes.
long resident_bytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * sysconf(_SC_PAGESIZE);
}

TEST_F(HeapTrimmerTest, TheDefaultTrimGivesFreePagesBetweenLiveChunksBack) {
  // 64 MiB of small chunks, written, then all freed but the last: the heap cannot shrink past
  // it, so the freed pages stay resident until a trim hands them back, as in a diff.
  constexpr int kChunks = 16384;
  constexpr size_t kChunk = 4096;
  std::vector<char*> chunks;
  for (int i = 0; i < kChunks; ++i) {
    chunks.push_back(static_cast<char*>(std::malloc(kChunk)));
    std::memset(chunks.back(), 1, kChunk);
  }
  for (int i = 0; i + 1 < kChunks; ++i) std::free(chunks[i]);
  const long before = resident_bytes();
  HeapTrimmer(1).one_done();
  const long after = resident_bytes();
  std::free(chunks.back());
  ASSERT_GT(before, 0);
  EXPECT_GT(before - after, 32L << 20) << "resident " << before << " -> " << after << " bytes";
}

}  // namespace
