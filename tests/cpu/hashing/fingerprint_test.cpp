// LSF1 host reference: known answers and the properties the fingerprint promises.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "hashing/fingerprint.h"
#include "hashing/kat.h"
#include "hashing/layout.h"

namespace lockstep::hashing {
namespace {

using Bytes = std::vector<uint8_t>;

uint64_t fp(const Bytes& b) { return fingerprint(b.data(), b.size()); }

Bytes random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bytes out(n);
  for (auto& byte : out) byte = static_cast<uint8_t>(rng());
  return out;
}

TEST(Lsf1Kat, TableMatchesReference) {
  ASSERT_EQ(std::size(kKatTable), std::size(kKatLengths));
  for (size_t i = 0; i < std::size(kKatTable); ++i) {
    const KatEntry& entry = kKatTable[i];
    EXPECT_EQ(entry.length, kKatLengths[i]);
    EXPECT_EQ(entry.version, kFingerprintVersion);
    const Bytes data = kat_input(entry.length);
    EXPECT_EQ(fp(data), entry.expected) << "length " << entry.length;
  }
}

TEST(Lsf1Kat, AllDistinct) {
  std::set<uint64_t> seen;
  for (const KatEntry& entry : kKatTable) seen.insert(entry.expected);
  EXPECT_EQ(seen.size(), std::size(kKatTable));
}

TEST(Lsf1, AnyStartAddressSameValue) {
  const Bytes data = random_bytes(40000, 1);
  const uint64_t expected = fp(data);
  Bytes shifted(data.size() + 16);
  for (size_t offset = 1; offset < 16; ++offset) {
    std::copy(data.begin(), data.end(), shifted.begin() + offset);
    EXPECT_EQ(fingerprint(shifted.data() + offset, data.size()), expected) << offset;
  }
}

// A swap of two different elements changes the fingerprint, wherever the two sit: same
// stripe, same leaf, neighbouring leaves, different tiles. XOR/sum hashes cannot see this.
TEST(Lsf1, SwapOfTwoElementsChangesIt) {
  for (size_t element : {1u, 2u, 4u, 8u}) {
    const Bytes data = random_bytes(3 * lsf1::kTileBytes + 777, 10 + element);
    const uint64_t original = fp(data);
    const size_t count = data.size() / element;
    std::mt19937_64 rng(element);
    std::vector<std::pair<size_t, size_t>> pairs = {{0, 1},
                                                    {0, 16 / element},
                                                    {0, 512 / element},
                                                    {3, lsf1::kTileBytes / element + 3},
                                                    {count - 2, count - 1},
                                                    {0, count - 1}};
    for (int i = 0; i < 300; ++i) pairs.emplace_back(rng() % count, rng() % count);
    for (auto [a, b] : pairs) {
      if (std::memcmp(&data[a * element], &data[b * element], element) == 0) continue;
      Bytes swapped = data;
      std::swap_ranges(swapped.begin() + a * element, swapped.begin() + (a + 1) * element,
                       swapped.begin() + b * element);
      EXPECT_NE(fp(swapped), original) << "element " << element << " swap " << a << "," << b;
    }
  }
}

TEST(Lsf1, EqualElementsDoNotCancel) {
  // The torch.hash_tensor (XOR) collision: [1, 1, 2] and [2, 3, 3] as int64.
  const int64_t a[] = {1, 1, 2}, b[] = {2, 3, 3};
  EXPECT_NE(fingerprint(a, sizeof a), fingerprint(b, sizeof b));
  // Repeating a block of tiles twice is not the same as zero or as once.
  const Bytes block = random_bytes(lsf1::kTileBytes, 3);
  Bytes twice = block;
  twice.insert(twice.end(), block.begin(), block.end());
  Bytes zeros(twice.size(), 0);
  EXPECT_NE(fp(twice), fp(zeros));
  // Moving a whole tile changes it: leaves are keyed by position.
  Bytes moved(twice.size(), 0), other(twice.size(), 0);
  std::copy(block.begin(), block.end(), moved.begin());
  std::copy(block.begin(), block.end(), other.begin() + lsf1::kTileBytes);
  EXPECT_NE(fp(moved), fp(other));
}

TEST(Lsf1, EveryStripeBytesSingleBitFlipChangesIt) {
  const Bytes data = random_bytes(2 * lsf1::kTileBytes + 1000, 4);
  const uint64_t original = fp(data);
  std::set<uint64_t> seen{original};
  std::mt19937_64 rng(5);
  std::set<size_t> positions;
  for (size_t at = 0; at < data.size(); at += 15) positions.insert(at);  // hits every lane
  for (size_t at : {data.size() - 1, size_t{lsf1::kTileBytes} - 1, size_t{lsf1::kTileBytes}})
    positions.insert(at);
  for (size_t at : positions) {
    Bytes flipped = data;
    flipped[at] ^= uint8_t(1u << (rng() % 8));
    const uint64_t value = fp(flipped);
    EXPECT_NE(value, original) << "byte " << at;
    seen.insert(value);
  }
  EXPECT_EQ(seen.size(), positions.size() + 1)
      << "two different single-bit flips gave the same fingerprint";
}

TEST(Lsf1, LengthChangesIt) {
  // Zero bytes appended, for every length 0 .. a little over two tiles: all distinct.
  const Bytes zeros(2 * lsf1::kTileBytes + 70, 0);
  std::set<uint64_t> seen;
  for (size_t n = 0; n <= zeros.size(); ++n) seen.insert(fingerprint(zeros.data(), n));
  EXPECT_EQ(seen.size(), zeros.size() + 1);
  // Prefixes of random data.
  const Bytes data = random_bytes(3000, 6);
  seen.clear();
  for (size_t n = 0; n <= data.size(); ++n) seen.insert(fingerprint(data.data(), n));
  EXPECT_EQ(seen.size(), data.size() + 1);
}

TEST(Lsf1, Avalanche) {
  // One flipped input bit flips each output bit with probability 1/2.
  constexpr int kTrials = 3000;
  std::mt19937_64 rng(7);
  std::vector<int> flips(64, 0);
  double total = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const size_t n = 1 + rng() % (3 * lsf1::kTileBytes);
    Bytes data = random_bytes(n, rng());
    const uint64_t before = fp(data);
    data[rng() % n] ^= uint8_t(1u << (rng() % 8));
    const uint64_t diff = before ^ fp(data);
    total += std::popcount(diff);
    for (int bit = 0; bit < 64; ++bit) flips[bit] += (diff >> bit) & 1;
  }
  EXPECT_NEAR(total / kTrials, 32.0, 0.5);
  for (int bit = 0; bit < 64; ++bit) {
    const double p = double(flips[bit]) / kTrials;
    EXPECT_GT(p, 0.43) << "output bit " << bit;
    EXPECT_LT(p, 0.57) << "output bit " << bit;
  }
}

TEST(Lsf1, DistinctOnRandomInputs) {
  std::set<uint64_t> seen;
  for (int i = 0; i < 20000; ++i) seen.insert(fp(random_bytes(i % 97, 100 + i)));
  // Equal inputs repeat (i % 97 == 0 gives the empty input many times): count distinct inputs.
  std::set<Bytes> inputs;
  for (int i = 0; i < 20000; ++i) inputs.insert(random_bytes(i % 97, 100 + i));
  EXPECT_EQ(seen.size(), inputs.size());
}

}  // namespace
}  // namespace lockstep::hashing
