// The fuzz target's regression suite, built with g++ and run in CI: the seed corpus plus every
// truncation and every single-byte flip of small traces go through the reader. Only TraceError
// may come out (a crash or sanitizer report fails the run).
#include <gtest/gtest.h>

#include <random>

#include "sample_traces.h"
#include "test_util.h"

namespace lockstep::trace {
namespace {

// Returns true if the reader accepted the file, false on TraceError; anything else escapes.
bool accepts(const std::string& path) {
  try {
    testing::read_everything(path);
    return true;
  } catch (const TraceError&) {
    return false;
  }
}

TEST(ReaderRobustness, SeedCorpusTruncationsAndFlips) {
  testing::TempDir dir;
  const std::string probe = dir.file("probe.lstrace");
  std::mt19937_64 rng(77);
  for (int variant = 0; variant < testing::kSampleVariants; ++variant) {
    const std::string seed = dir.file("seed-" + std::to_string(variant) + ".lstrace");
    std::string error;
    ASSERT_TRUE(testing::write_sample_trace(seed, variant, &error)) << error;
    ASSERT_TRUE(accepts(seed)) << "variant " << variant;
    auto bytes = testing::read_bytes(seed);
    if (bytes.size() > 4096) bytes.resize(4096);  // keeps the loops short; a cut is a valid prefix
    testing::write_bytes(seed, bytes);
    auto full = TraceReader::open(seed);
    const uint64_t data_start =
        full->blocks().empty() ? bytes.size() : full->blocks().front().offset;

    for (size_t size = 0; size < bytes.size(); ++size) {
      testing::write_bytes(probe, {bytes.begin(), bytes.begin() + size});
      // A cut inside the file or JSON header is an error; after it, a valid prefix.
      EXPECT_EQ(accepts(probe), size >= data_start && size > 0)
          << "variant " << variant << " size " << size;
    }
    // Past a cut-off the bytes are not part of the trace: flips there go unnoticed by design.
    const uint64_t valid_end = full->truncated() ? full->truncation_offset() : bytes.size();
    for (size_t at = 0; at < valid_end; ++at) {
      auto flipped = bytes;
      flipped[at] ^= static_cast<uint8_t>(1 + rng() % 255);
      testing::write_bytes(probe, flipped);
      EXPECT_FALSE(accepts(probe)) << "variant " << variant << " flip at " << at;
    }
    // Random multi-byte damage and random splices: no expectation but "no crash".
    for (int round = 0; round < 300; ++round) {
      auto damaged = bytes;
      for (int k = 0; k < 8; ++k) damaged[rng() % damaged.size()] = static_cast<uint8_t>(rng());
      if (round % 3 == 0) damaged.resize(rng() % damaged.size());
      testing::write_bytes(probe, damaged);
      (void)accepts(probe);
    }
  }
}

}  // namespace
}  // namespace lockstep::trace
