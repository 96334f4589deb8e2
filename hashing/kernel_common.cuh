// Device side of LSF1: XXH64 pieces and the leaf hashes of one tile, per lane.
// Every function here must agree bit for bit with fingerprint.cpp (the reference).
#pragma once

#include "hashing/layout.h"

// Tuning knobs for experiments (-D...); the defaults are what ships and what was measured.
#ifndef LSF1_LOAD_BATCH
#define LSF1_LOAD_BATCH 4  // XXH64 rounds (2 x 16-byte loads each) in flight per lane
#endif
#ifndef LSF1_LOAD_HINT
#define LSF1_LOAD_HINT 0  // 1: streaming loads (L1 no-allocate, 256-byte L2 prefetch)
#endif

namespace lockstep::hashing::device {

using u64 = unsigned long long;
using u32 = unsigned int;
using namespace lsf1;

__device__ __forceinline__ u64 rotl64(u64 x, int r) { return (x << r) | (x >> (64 - r)); }

__device__ __forceinline__ u64 xxh_round(u64 acc, u64 input) {
  acc += input * kPrime2;
  acc = rotl64(acc, 31);
  return acc * kPrime1;
}

__device__ __forceinline__ u64 xxh_merge_round(u64 acc, u64 value) {
  acc ^= xxh_round(0, value);
  return acc * kPrime1 + kPrime4;
}

// The four XXH64 accumulators of one lane's leaf.
struct Xxh64Lanes {
  u64 v1, v2, v3, v4;
  __device__ __forceinline__ explicit Xxh64Lanes(u64 seed)
      : v1(seed + kPrime1 + kPrime2), v2(seed + kPrime2), v3(seed), v4(seed - kPrime1) {}
  // One 32-byte XXH64 stripe: the lane's stripes a (first 16 bytes) and b (next 16 bytes).
  __device__ __forceinline__ void consume(const ulonglong2& a, const ulonglong2& b) {
    v1 = xxh_round(v1, a.x);
    v2 = xxh_round(v2, a.y);
    v3 = xxh_round(v3, b.x);
    v4 = xxh_round(v4, b.y);
  }
  __device__ __forceinline__ u64 converge() const {
    u64 h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
    h = xxh_merge_round(h, v1);
    h = xxh_merge_round(h, v2);
    h = xxh_merge_round(h, v3);
    return xxh_merge_round(h, v4);
  }
};

// XXH64's tail (len < 32 bytes held little-endian in w[0..3]) and final avalanche.
__device__ __forceinline__ u64 xxh_tail_avalanche(u64 h, const u64 (&w)[4], u32 len) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (len >= 8) {
      h ^= xxh_round(0, w[i]);
      h = rotl64(h, 27) * kPrime1 + kPrime4;
      len -= 8;
    } else if (len > 0) {
      u64 x = w[i];
      if (len >= 4) {
        h ^= (x & 0xFFFFFFFFull) * kPrime1;
        h = rotl64(h, 23) * kPrime2 + kPrime3;
        x >>= 32;
        len -= 4;
      }
#pragma unroll 1
      for (; len > 0; --len, x >>= 8) {
        h ^= (x & 0xFF) * kPrime5;
        h = rotl64(h, 11) * kPrime1;
      }
    }
  }
  return avalanche64(h);
}

// XXH64(le64(leaf_sum) || le64(bytes), 16, kFinalSeed).
__device__ __forceinline__ u64 lsf1_finalize(u64 leaf_sum, u64 bytes) {
  u64 h = kFinalSeed + kPrime5 + 16;
  h ^= xxh_round(0, leaf_sum);
  h = rotl64(h, 27) * kPrime1 + kPrime4;
  h ^= xxh_round(0, bytes);
  h = rotl64(h, 27) * kPrime1 + kPrime4;
  return avalanche64(h);
}

// A region as the loads see it. `misalign` = address % 16 is the same for every stripe of the
// region, so the branch on it is uniform.
struct RegionView {
  const unsigned char* base;
  const unsigned char* end;
  u64 bytes;
  u32 misalign;
};

__device__ __forceinline__ ulonglong2 load16(const unsigned char* p) {
#if LSF1_LOAD_HINT && defined(__CUDA_ARCH__)
  ulonglong2 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v2.u64 {%0, %1}, [%2];"
      : "=l"(v.x), "=l"(v.y)
      : "l"(p));
  return v;
#else
  return __ldg(reinterpret_cast<const ulonglong2*>(p));
#endif
}

__device__ __forceinline__ u64 load8(const unsigned char* p) {
  return __ldg(reinterpret_cast<const unsigned long long*>(p));
}

// n (< 16) bytes one by one, zero filled: only for the ragged end of a region.
__device__ __noinline__ ulonglong2 load_bytes(const unsigned char* p, u32 n) {
  u64 w[2] = {0, 0};
  for (u32 i = 0; i < n; ++i) w[i >> 3] |= u64(__ldg(p + i)) << (8 * (i & 7));
  return make_ulonglong2(w[0], w[1]);
}

__device__ __forceinline__ u64 funnel_bytes(u64 lo, u64 hi, u32 shift_bytes) {
  return (lo >> (8 * shift_bytes)) | (hi << (64 - 8 * shift_bytes));  // shift_bytes in 1..7
}

// The full 16-byte stripe at logical offset `at` (at + 16 <= bytes). Misaligned regions read
// the two aligned words around it (never a byte past the region's end) and funnel-shift.
template <bool kAligned>
__device__ __forceinline__ ulonglong2 load_stripe(const RegionView& r, u64 at) {
  const unsigned char* p = r.base + at;
  if (kAligned) return load16(p);
  const unsigned char* lo = p - r.misalign;
  const ulonglong2 a = load16(lo);
  const ulonglong2 b =
      (lo + 32 <= r.end) ? load16(lo + 16) : load_bytes(lo + 16, u32(r.end - lo - 16));
  const u32 m = r.misalign;
  if (m < 8) return make_ulonglong2(funnel_bytes(a.x, a.y, m), funnel_bytes(a.y, b.x, m));
  if (m == 8) return make_ulonglong2(a.y, b.x);
  return make_ulonglong2(funnel_bytes(a.y, b.x, m - 8), funnel_bytes(b.x, b.y, m - 8));
}

// Leaf digest of `lane` in a full tile starting at logical offset tile_at. kCompact keeps the
// loop over load batches rolled: a few KB of code instead of tens, so a launch that touches
// little data does not wait on instruction-cache misses; bulk launches unroll it fully.
// kBatch rounds (2 x 16-byte loads each) are in flight together: a launch of few tiles is
// latency-bound (a lane's 16 rounds in 4 batches wait on memory 4 times in a row), a bulk launch
// has enough warps in flight that 4 suffice and fewer registers keep more warps resident.
// (Misaligned regions keep 4: each stripe is two loads and a funnel shift.)
template <bool kAligned, bool kCompact, u32 kBatch = LSF1_LOAD_BATCH>
__device__ __forceinline__ u64 leaf_full_tile(const RegionView& r, u64 tile_at, u32 lane,
                                              u64 seed) {
  Xxh64Lanes acc(seed);
  const u64 lane_at = tile_at + u64(lane) * kStripeBytes;
  constexpr u32 kRounds = kLeafBytes / 32;  // 16
  static_assert(kRounds % kBatch == 0, "a lane's 16 rounds split into whole batches");
  constexpr int kOuterUnroll = kCompact ? 1 : int(kRounds / kBatch);
#pragma unroll kOuterUnroll
  for (u32 k0 = 0; k0 < kRounds; k0 += kBatch) {
    ulonglong2 s[2 * kBatch];
#pragma unroll
    for (u32 i = 0; i < kBatch; ++i) {
      const u64 at = lane_at + u64(k0 + i) * (2 * kLanes * kStripeBytes);
      s[2 * i] = load_stripe<kAligned>(r, at);
      s[2 * i + 1] = load_stripe<kAligned>(r, at + kLanes * kStripeBytes);
    }
#pragma unroll
    for (u32 i = 0; i < kBatch; ++i) acc.consume(s[2 * i], s[2 * i + 1]);
  }
  return avalanche64(acc.converge() + kLeafBytes);
}

// How the short-tile path loads: kAnyLoads picks per region at run time (one instance, used by
// the bulk kernels); kAlignedLoads / kMisalignedLoads are one instance per kind (compact
// kernels: the code an aligned region runs through stays small).
enum LoadKind { kAnyLoads, kAlignedLoads, kMisalignedLoads };

template <int kKind>
__device__ __forceinline__ ulonglong2 load_stripe_of(const RegionView& r, u64 at) {
  if constexpr (kKind == kAlignedLoads) return load_stripe<true>(r, at);
  if constexpr (kKind == kMisalignedLoads) return load_stripe<false>(r, at);
  return r.misalign == 0 ? load_stripe<true>(r, at) : load_stripe<false>(r, at);
}

// Leaf digest of `lane` in the last, short tile (tile_bytes < kTileBytes); 0 for an empty leaf.
template <int kKind>
__device__ __noinline__ u64 leaf_short_tile(const RegionView& r, u64 tile_at, u32 tile_bytes,
                                            u32 lane, u64 seed) {
  const u32 full = tile_bytes / kStripeBytes;  // full stripes in the tile
  const u32 rem = tile_bytes % kStripeBytes;   // bytes of the short stripe number `full`
  const u32 lane_full = full > lane ? (full - lane + kLanes - 1) / kLanes : 0;
  const bool owns_short = rem != 0 && full % kLanes == lane;
  const u32 len = lane_full * kStripeBytes + (owns_short ? rem : 0);
  if (len == 0) return 0;
  const u32 rounds = lane_full / 2;
  const u64 lane_at = tile_at + u64(lane) * kStripeBytes;
  u64 h = seed + kPrime5;
  if (rounds > 0) {
    Xxh64Lanes acc(seed);
    constexpr u32 kBatch = kKind == kMisalignedLoads ? 2 : 4;  // misaligned: two loads a stripe
    u32 k = 0;
#pragma unroll 1
    for (; k + kBatch <= rounds; k += kBatch) {  // whole batches: loads in flight together
      ulonglong2 s[2 * kBatch];
#pragma unroll
      for (u32 i = 0; i < kBatch; ++i) {
        const u64 at = lane_at + u64(k + i) * (2 * kLanes * kStripeBytes);
        s[2 * i] = load_stripe_of<kKind>(r, at);
        s[2 * i + 1] = load_stripe_of<kKind>(r, at + kLanes * kStripeBytes);
      }
#pragma unroll
      for (u32 i = 0; i < kBatch; ++i) acc.consume(s[2 * i], s[2 * i + 1]);
    }
#pragma unroll 1
    for (; k < rounds; ++k) {  // the rest, one round at a time
      const u64 at = lane_at + u64(k) * (2 * kLanes * kStripeBytes);
      acc.consume(load_stripe_of<kKind>(r, at),
                  load_stripe_of<kKind>(r, at + kLanes * kStripeBytes));
    }
    h = acc.converge();
  }
  h += len;
  u64 w[4] = {0, 0, 0, 0};
  u32 next = 0;  // words of w filled so far
  if (lane_full & 1) {
    const u64 at = lane_at + u64(lane_full - 1) * kLanes * kStripeBytes;
    const ulonglong2 s = load_stripe_of<kKind>(r, at);
    w[0] = s.x;
    w[1] = s.y;
    next = 2;
  }
  if (owns_short) {
    const ulonglong2 s = load_bytes(r.base + tile_at + u64(full) * kStripeBytes, rem);
    if (next == 0) {
      w[0] = s.x;
      w[1] = s.y;
    } else {
      w[2] = s.x;
      w[3] = s.y;
    }
  }
  return xxh_tail_avalanche(h, w, len - rounds * 32);
}

// This lane's leaf digest for tile `tile` of region r (0 when the lane's leaf is empty).
// kOnlyAligned: the caller promises r.misalign == 0 (a launch whose regions all start 16-byte
// aligned): the misaligned paths are not compiled in, which keeps the kernel's code a fraction
// of the size (a small launch waits on instruction fetches, not only on its data).
template <bool kCompact, u32 kBatch = LSF1_LOAD_BATCH, bool kOnlyAligned = false>
__device__ __forceinline__ u64 lane_leaf_digest(const RegionView& r, u64 tile, u32 lane) {
  const u64 tile_at = tile * kTileBytes;
  const u64 seed = tile * kLanes + lane;
  if (r.bytes - tile_at >= kTileBytes) {
    if (kOnlyAligned || r.misalign == 0)
      return leaf_full_tile<true, kCompact, kBatch>(r, tile_at, lane, seed);
    return leaf_full_tile<false, kCompact, LSF1_LOAD_BATCH>(r, tile_at, lane, seed);
  }
  if (r.bytes == 0) return 0;
  const u32 tile_bytes = u32(r.bytes - tile_at);
  if constexpr (kOnlyAligned)
    return leaf_short_tile<kAlignedLoads>(r, tile_at, tile_bytes, lane, seed);
  if constexpr (!kCompact) return leaf_short_tile<kAnyLoads>(r, tile_at, tile_bytes, lane, seed);
  return r.misalign == 0 ? leaf_short_tile<kAlignedLoads>(r, tile_at, tile_bytes, lane, seed)
                         : leaf_short_tile<kMisalignedLoads>(r, tile_at, tile_bytes, lane, seed);
}

// A full, 16-byte aligned tile hashed by four lanes per leaf (the tile kernel, tiles.cu): lane
// `acc` (0..3) of leaf `leaf` runs one of XXH64's four accumulators over the leaf's 16 rounds,
// reading the 8-byte word that accumulator takes from each 32-byte stripe pair: v1 the first
// word of stripe a, v2 the second, v3 and v4 the two words of stripe b (512 bytes on). The
// same digest as leaf_full_tile, a quarter of the dependent multiplies per lane: a launch of
// few tiles waits on that chain, not on memory.
__device__ __forceinline__ u64 quarter_accumulator(const RegionView& r, u64 tile_at, u32 leaf,
                                                   u32 acc, u64 seed) {
  u64 v = seed + (acc == 0 ? kPrime1 + kPrime2 : acc == 1 ? kPrime2 : acc == 2 ? 0 : 0 - kPrime1);
  const unsigned char* p = r.base + tile_at + u64(leaf) * kStripeBytes +
                           (acc >= 2 ? kLanes * kStripeBytes : 0) + (acc & 1) * 8;
  constexpr u32 kRounds = kLeafBytes / 32;  // 16, all loads in flight together
  u64 w[kRounds];
#pragma unroll
  for (u32 k = 0; k < kRounds; ++k)
    w[k] = load8(p + u64(k) * (2 * kLanes * kStripeBytes));
#pragma unroll
  for (u32 k = 0; k < kRounds; ++k) v = xxh_round(v, w[k]);
  return v;
}

// The leaf digest from its four accumulators (what leaf_full_tile returns).
__device__ __forceinline__ u64 leaf_from_accumulators(u64 v1, u64 v2, u64 v3, u64 v4) {
  Xxh64Lanes lanes(0);
  lanes.v1 = v1;
  lanes.v2 = v2;
  lanes.v3 = v3;
  lanes.v4 = v4;
  return avalanche64(lanes.converge() + kLeafBytes);
}

__device__ __forceinline__ u64 warp_sum(u64 v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  return v;
}

}  // namespace lockstep::hashing::device
