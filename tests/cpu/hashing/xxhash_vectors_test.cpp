// The xxHash primitive LSF1 reuses (XXH64, inlined from xxhash.h) against xxHash's own
// published sanity vectors (cli/xsum_sanity_check.c), and the constants the kernels copy.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <vector>

#include "hashing/layout.h"

namespace {

// xxHash's sanity buffer: byte i = top byte of PRIME32 * PRIME64^i.
std::vector<unsigned char> sanity_buffer(size_t n) {
  std::vector<unsigned char> out(n);
  uint64_t generator = 2654435761u;
  for (auto& byte : out) {
    byte = static_cast<unsigned char>(generator >> 56);
    generator *= 11400714785074694797ull;
  }
  return out;
}

TEST(Xxh64, PublishedSanityVectors) {
  constexpr uint64_t kPrime32 = 2654435761u;
  struct Vector {
    size_t length;
    uint64_t seed;
    uint64_t expected;
  };
  const Vector vectors[] = {
      {0, 0, 0xEF46DB3751D8E999ull},          {0, kPrime32, 0xAC75FDA2929B17EFull},
      {1, 0, 0xE934A84ADB052768ull},          {1, kPrime32, 0x5014607643A9B4C3ull},
      {4, 0, 0x9136A0DCA57457EEull},          {14, 0, 0x8282DCC4994E35C8ull},
      {14, kPrime32, 0xC3BD6BF63DEB6DF0ull},  {222, 0, 0xB641AE8CB691C174ull},
      {222, kPrime32, 0x20CB8AB7AE10C14Aull},
  };
  const auto buffer = sanity_buffer(222);
  for (const auto& v : vectors) {
    EXPECT_EQ(XXH64(buffer.data(), v.length, v.seed), v.expected)
        << "length " << v.length << " seed " << v.seed;
  }
}

TEST(Xxh64, KernelConstantsMatchXxhash) {
  using namespace lockstep::hashing::lsf1;
  EXPECT_EQ(kPrime1, XXH_PRIME64_1);
  EXPECT_EQ(kPrime2, XXH_PRIME64_2);
  EXPECT_EQ(kPrime3, XXH_PRIME64_3);
  EXPECT_EQ(kPrime4, XXH_PRIME64_4);
  EXPECT_EQ(kPrime5, XXH_PRIME64_5);
  // XXH64 of nothing is the bare avalanche of seed + PRIME5: pins avalanche64 to xxHash's.
  for (uint64_t seed : {0ull, 1ull, 0x4C53463100000001ull, ~0ull})
    EXPECT_EQ(avalanche64(seed + kPrime5), XXH64(nullptr, 0, seed)) << seed;
}

}  // namespace
