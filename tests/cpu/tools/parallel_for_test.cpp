// tools/parallel_for.h: the CLI's one worker pool (diff, integrity check, facts scan).
#include "tools/parallel_for.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace lockstep::tools {
namespace {

TEST(ParallelFor, EveryIndexRunsOnceWhateverTheThreadCount) {
  for (int threads : {0, 1, 4, 64, 5000}) {
    std::vector<std::atomic<int>> runs(1000);
    parallel_for(runs.size(), threads, [&](size_t i) { ++runs[i]; });
    for (size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i].load(), 1) << threads << " " << i;
  }
}

TEST(ParallelFor, TheLowestFailingIndexIsRethrownWhateverTheTiming) {
  std::atomic<int> ran{0};
  auto fn = [&](size_t i) {
    ++ran;
    if (i == 700 || i == 300) throw std::runtime_error("index " + std::to_string(i));
  };
  try {
    parallel_for(1000, 8, fn, OnFailure::Continue);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "index 300");
  }
  EXPECT_EQ(ran.load(), 1000);  // Continue: every index ran
}

TEST(ParallelFor, FailFastTakesNoNewIndexAfterAFailure) {
  std::vector<size_t> ran;
  EXPECT_THROW(parallel_for(
                   100, 1,
                   [&](size_t i) {
                     ran.push_back(i);
                     if (i == 5) throw std::runtime_error("stop");
                   }),
               std::runtime_error);
  EXPECT_EQ(ran, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
}

TEST(ParallelFor, NothingToDoIsNoError) {
  bool called = false;
  parallel_for(0, 4, [&](size_t) { called = true; });
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace lockstep::tools
