// LSF1 known-answer table: lengths that reach every code path of the reference and the kernels
// (empty, XXH64 tail sizes, short stripes, one leaf, one tile, tile +- 1, many tiles, large).
// Input bytes: kat_byte(i) below. Expected values were generated once from the reference
// (tools: lsf1_kat_gen) and are checked in; they must never change for version 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lockstep::hashing {

struct KatEntry {
  uint64_t length;
  uint32_t version;
  uint64_t expected;
};

// Byte i of the KAT input: little-endian bytes of splitmix64(i / 8).
inline uint8_t kat_byte(uint64_t i) {
  uint64_t z = (i >> 3) + 0x9E3779B97F4A7C15ull * ((i >> 3) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint8_t>(z >> (8 * (i & 7)));
}

inline std::vector<uint8_t> kat_input(size_t bytes) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = kat_byte(i);
  return data;
}

inline constexpr uint64_t kKatLengths[] = {
    0,     1,     3,     4,     7,      8,       15,      16,      17,      31,    32,    33,
    63,    64,    65,    100,   255,    256,     511,     512,     513,     527,   528,   1023,
    1024,  1025,  4095,  4096,  4097,   8191,    16383,   16384,   16385,   16399, 16400, 16401,
    32767, 32768, 32769, 65543, 262144, 1048576, 1048579, 3158073, 16777217};

#ifndef LOCKSTEP_KAT_GENERATOR
inline const KatEntry kKatTable[] = {
#include "hashing/kat_table.inc"
};
#endif

}  // namespace lockstep::hashing
