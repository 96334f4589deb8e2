// The kernels' leaf code (hashing/kernel_common.cuh) compiled for the host with a tiny shim,
// one "warp" emulated lane by lane: it must equal the reference for every length and start
// misalignment, and must never load a byte outside the allocation that holds the region.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

// --- host shim for the CUDA bits kernel_common.cuh uses ---
#define __device__
#define __forceinline__ inline
#define __noinline__
struct ulonglong2 {
  unsigned long long x, y;
};
inline ulonglong2 make_ulonglong2(unsigned long long x, unsigned long long y) { return {x, y}; }
namespace shim {
const unsigned char* allowed_begin = nullptr;
const unsigned char* allowed_end = nullptr;
int violations = 0;
inline void check(const void* p, size_t n) {
  auto* b = static_cast<const unsigned char*>(p);
  if (b < allowed_begin || b + n > allowed_end) ++violations;
}
}  // namespace shim
inline ulonglong2 __ldg(const ulonglong2* p) {
  shim::check(p, sizeof *p);
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) ++shim::violations;  // vector loads: aligned
  return *p;
}
inline unsigned long long __ldg(const unsigned long long* p) {
  shim::check(p, sizeof *p);
  if (reinterpret_cast<uintptr_t>(p) % 8 != 0) ++shim::violations;  // 8-byte loads: aligned
  return *p;
}
inline unsigned char __ldg(const unsigned char* p) {
  shim::check(p, 1);
  return *p;
}
inline unsigned long long __shfl_xor_sync(unsigned, unsigned long long v, int) { return v; }
// --- end of shim ---

#include "hashing/fingerprint.h"
#include "hashing/kernel_common.cuh"

namespace lockstep::hashing {
namespace {

template <bool kCompact>
uint64_t emulated_fingerprint(const unsigned char* base, uint64_t bytes) {
  device::RegionView view{base, base + bytes, bytes,
                          uint32_t(reinterpret_cast<uintptr_t>(base) % 16)};
  const uint64_t tiles = bytes == 0 ? 1 : (bytes + lsf1::kTileBytes - 1) / lsf1::kTileBytes;
  uint64_t sum = 0;
  for (uint64_t tile = 0; tile < tiles; ++tile)
    for (uint32_t lane = 0; lane < lsf1::kLanes; ++lane)
      sum += device::lane_leaf_digest<kCompact>(view, tile, lane);
  return device::lsf1_finalize(sum, bytes);
}

// `length` random bytes at `misalign` past a 16-aligned allocation that ends exactly where the
// region ends; the shim's load checks allow that allocation only (and start counting afresh).
struct GuardedRegion {
  GuardedRegion(uint64_t length, uint32_t misalign, std::mt19937_64& rng) {
    const size_t alloc = misalign + length;
    block = static_cast<unsigned char*>(std::aligned_alloc(16, (alloc + 15) / 16 * 16 + 16));
    for (size_t i = 0; i < alloc; ++i) block[i] = static_cast<unsigned char>(rng());
    shim::allowed_begin = block;
    shim::allowed_end = block + alloc;
    shim::violations = 0;
    region = block + misalign;
  }
  ~GuardedRegion() { std::free(block); }
  GuardedRegion(const GuardedRegion&) = delete;
  GuardedRegion& operator=(const GuardedRegion&) = delete;
  unsigned char* block = nullptr;
  const unsigned char* region = nullptr;
};

TEST(Lsf1DeviceCodeOnHost, MatchesReferenceAtEveryMisalignment) {
  std::mt19937_64 rng(11);
  std::vector<uint64_t> lengths = {0,     1,     2,     15,         16,    17,    31,   32,
                                   33,    48,    500,   512,        513,   1000,  4096, 16383,
                                   16384, 16385, 16400, 32768 + 15, 65536, 100000};
  for (int i = 0; i < 40; ++i) lengths.push_back(rng() % (3 * lsf1::kTileBytes));
  for (uint64_t length : lengths) {
    for (uint32_t misalign = 0; misalign < 16; ++misalign) {
      GuardedRegion guarded(length, misalign, rng);
      const unsigned char* region = guarded.region;
      const uint64_t expected = fingerprint(region, length);
      EXPECT_EQ(emulated_fingerprint<false>(region, length), expected)
          << "bulk code, length " << length << " misalign " << misalign;
      EXPECT_EQ(emulated_fingerprint<true>(region, length), expected)
          << "compact code, length " << length << " misalign " << misalign;
      EXPECT_EQ(shim::violations, 0)
          << "out-of-allocation or misaligned load, length " << length << " misalign " << misalign;
    }
  }
}

// The tile kernel's split (tiles_body): four lanes per leaf, one XXH64 accumulator each, on
// every full tile of an aligned region; short tiles and misaligned regions take the whole-leaf
// code above. Emulated with its host-side finish (engine.cpp: add the tile sums, finalize).
uint64_t emulated_tile_kernel_fingerprint(const unsigned char* base, uint64_t bytes) {
  const auto misalign = uint32_t(reinterpret_cast<uintptr_t>(base) % 16);
  device::RegionView view{base, base + bytes, bytes, misalign};
  const uint64_t tiles = bytes == 0 ? 1 : (bytes + lsf1::kTileBytes - 1) / lsf1::kTileBytes;
  uint64_t sum = 0;
  for (uint64_t tile = 0; tile < tiles; ++tile) {
    const uint64_t tile_at = tile * lsf1::kTileBytes;
    uint64_t tile_sum = 0;
    for (uint32_t leaf = 0; leaf < lsf1::kLanes; ++leaf) {
      if (misalign == 0 && bytes - tile_at >= lsf1::kTileBytes) {
        uint64_t v[4];
        for (uint32_t acc = 0; acc < 4; ++acc)
          v[acc] = device::quarter_accumulator(view, tile_at, leaf, acc, tile * lsf1::kLanes + leaf);
        tile_sum += device::leaf_from_accumulators(v[0], v[1], v[2], v[3]);
      } else {
        tile_sum += device::lane_leaf_digest<true>(view, tile, leaf);
      }
    }
    sum += tile_sum;
  }
  return device::lsf1_finalize(sum, bytes);
}

TEST(Lsf1DeviceCodeOnHost, TheTileKernelsFourLanesPerLeafMatchTheReference) {
  std::mt19937_64 rng(13);
  std::vector<uint64_t> lengths = {0, 1, 4096, 16383, 16384, 16385, 32768, 65536 + 100, 100000};
  for (int i = 0; i < 20; ++i) lengths.push_back(rng() % (4 * lsf1::kTileBytes));
  for (uint64_t length : lengths) {
    for (uint32_t misalign : {0u, 3u, 8u}) {
      GuardedRegion guarded(length, misalign, rng);
      const unsigned char* region = guarded.region;
      EXPECT_EQ(emulated_tile_kernel_fingerprint(region, length), fingerprint(region, length))
          << "length " << length << " misalign " << misalign;
      EXPECT_EQ(shim::violations, 0) << "length " << length << " misalign " << misalign;
    }
  }
}

}  // namespace
}  // namespace lockstep::hashing
