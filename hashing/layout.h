// LSF1 layout constants and the host<->kernel launch structures. Shared by the host reference
// (fingerprint.cpp), the engine (engine.cpp) and the kernels (kernels.cu): one definition.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LOCKSTEP_HD __host__ __device__
#else
#define LOCKSTEP_HD
#endif

namespace lockstep::hashing::lsf1 {

// A tile is 16 KiB; within a tile, lane j of a 32-lane warp owns the 16-byte stripes
// j, j+32, j+64, ... Each (tile, lane) pair is one leaf of at most 512 bytes.
inline constexpr uint64_t kTileBytes = 16384;
inline constexpr uint32_t kLanes = 32;
inline constexpr uint32_t kStripeBytes = 16;
inline constexpr uint32_t kLeafBytes = kTileBytes / kLanes;  // 512
// Seed of the final XXH64 over {leaf sum, length}: "LSF1" and the version.
inline constexpr uint64_t kFinalSeed = 0x4C53463100000001ull;

// XXH64 primes (the same as xxhash.h; the kernels cannot include the host header).
inline constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
inline constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
inline constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;
inline constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;
inline constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ull;

LOCKSTEP_HD constexpr uint64_t avalanche64(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

// One digest slot in pinned, mapped host memory. The kernel writes both words with a single
// 16-byte store and no system fence; `check` = (slot id + 1) ^ slot_check_mix(digest), so the
// host accepts a slot only when both words belong to the same write (a torn or stale pair fails).
struct alignas(16) DigestSlot {
  uint64_t digest;
  uint64_t check;
};
LOCKSTEP_HD constexpr uint64_t slot_check(uint64_t slot_id, uint64_t digest) {
  return (slot_id + 1) ^ avalanche64(digest ^ 0x5A17C0DE5A17C0DEull);
}

// Per-slot device scratch for regions spread over several warps: wrapping leaf sum and the
// number of tiles folded in. The warp that completes the count finalizes and resets it.
struct alignas(16) RegionScratch {
  unsigned long long sum;
  unsigned int tiles_done;
  unsigned int unused;
};

struct RegionEntry {
  uint64_t ptr;
  uint64_t bytes;
  uint32_t first_unit;  // prefix sum of units over the earlier regions of this launch
  uint32_t units;       // max(1, ceil(bytes / kTileBytes)): an empty region still needs one
};

// A kernel's parameters are copied whole at every launch, however few regions it carries: a
// launch of 1024 regions' room costs the launching thread 12-17 us on the H200's host (issue
// #34: the PyTorch hook's 77 parameters after each optimizer step), one of 128 a few us.
inline constexpr uint32_t kSmallBatch = 32;
inline constexpr uint32_t kMediumBatch = 128;  // 3.1 KB of parameters
inline constexpr uint32_t kLargeBatch = 1024;  // 24.6 KB of parameters (limit 32764 bytes)
inline constexpr uint32_t kThreadsPerBlock = 256;

template <uint32_t kCapacity>
struct BatchParams {
  uint64_t first_slot;  // slot id of regions[0]; region i gets first_slot + i
  uint64_t slots;       // device address of DigestSlot[ring]
  uint64_t scratch;     // device address of RegionScratch[ring]
  uint32_t slot_mask;   // ring size - 1 (ring size is a power of two)
  uint32_t count;       // regions in this launch, 1..kCapacity
  uint32_t total_units;
  uint32_t partial_mask;   // tile kernel: partial ring size - 1
  uint64_t first_partial;  // tile kernel: partial id of unit 0; unit u gets first_partial + u
  uint64_t partials;       // tile kernel: device address of DigestSlot[partial ring]
  RegionEntry regions[kCapacity];
};

// Bulk kernels: tile loop fully unrolled (fastest on large data, ~90 KB of code).
inline constexpr char kSmallKernelName[] = "lsf1_batch_small";
inline constexpr char kMediumKernelName[] = "lsf1_batch_medium";
inline constexpr char kLargeKernelName[] = "lsf1_batch_large";
// Compact kernels: the same function with the tile loop rolled, for launches that read little
// (latency, not bandwidth, dominates there; a small kernel misses less in the instruction cache).
inline constexpr char kSmallCompactKernelName[] = "lsf1_compact_small";
inline constexpr char kMediumCompactKernelName[] = "lsf1_compact_medium";
inline constexpr char kLargeCompactKernelName[] = "lsf1_compact_large";
inline constexpr uint64_t kCompactBelowBytes = 32ull << 20;  // launches reading less use compact
// Tile kernels: a block of four warps per tile, four lanes per leaf (one XXH64 accumulator
// each), and no combine on the GPU: each tile's leaf sum goes to its own slot of a second ring
// (the partial ring) and the host adds a region's tile sums and finalizes. For launches of at
// most kTileKernelMaxUnits tiles, where the cross-warp combine (three dependent round trips to
// L2) and one warp's chain of 64 multiplies per tile cost more than the bytes (issue #34).
inline constexpr char kSmallTileKernelName[] = "lsf1_tiles_small";
inline constexpr char kMediumTileKernelName[] = "lsf1_tiles_medium";
inline constexpr char kLargeTileKernelName[] = "lsf1_tiles_large";
inline constexpr uint32_t kTileKernelMaxUnits = 512;  // 8 MiB
inline constexpr uint32_t kTileKernelThreads = 128;

}  // namespace lockstep::hashing::lsf1
