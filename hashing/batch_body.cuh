// LSF1 batch kernel body: warps walk the concatenated tiles ("units") of all regions of one
// launch grid-stride; a warp folds its lane leaf digests into one wrapping sum per region, and
// the warp that completes a region finalizes it and writes the digest to its slot in pinned,
// mapped host memory. kernels.cu instantiates it (the shipped kernels); the benchmarks include
// it to time other instances beside them.
#pragma once

#include "hashing/kernel_common.cuh"

namespace lockstep::hashing::device {

template <uint32_t kCapacity>
__device__ __forceinline__ u32 find_region(const BatchParams<kCapacity>& p, u32 unit, u32 hint) {
  if (hint < p.count && unit - p.regions[hint].first_unit < p.regions[hint].units) return hint;
  // Every region has at least one unit, so the region index is at most `unit`; batches of
  // one-tile regions hit exactly there.
  if (unit < p.count && p.regions[unit].first_unit == unit) return unit;
  u32 lo = 0, hi = min(p.count, unit + 1);  // regions[lo].first_unit <= unit < regions[hi]...
  while (hi - lo > 1) {
    const u32 mid = (lo + hi) / 2;
    if (p.regions[mid].first_unit <= unit)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

__device__ __forceinline__ void store_slot(u64 slots, u64 slot_id, u32 slot_mask, u64 digest) {
  auto* slot = reinterpret_cast<DigestSlot*>(slots) + (slot_id & slot_mask);
  const u64 check = slot_check(slot_id, digest);
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(slot), "l"(digest), "l"(check)
               : "memory");
}

// Called by all lanes of a warp that folded `units` tiles of region `index` into `partial`.
template <uint32_t kCapacity>
__device__ __forceinline__ void flush_region(const BatchParams<kCapacity>& p, u32 index,
                                             u64 partial, u32 units, u32 lane) {
  const u64 warp_partial = warp_sum(partial);
  if (lane != 0) return;
  const RegionEntry& region = p.regions[index];
  const u64 slot_id = p.first_slot + index;
  u64 leaf_sum = warp_partial;
  if (units != region.units) {  // other warps share this region: meet in the scratch slot
    auto* scratch = reinterpret_cast<RegionScratch*>(p.scratch) + (slot_id & p.slot_mask);
    atomicAdd(&scratch->sum, warp_partial);
    __threadfence();  // our sum is in before our count
    if (atomicAdd(&scratch->tiles_done, units) + units != region.units) return;
    __threadfence();
    leaf_sum = atomicExch(&scratch->sum, 0ull);  // read the total and reset for the next user
    atomicExch(&scratch->tiles_done, 0u);
    __threadfence();  // reset done before the host can see the slot (and reuse it)
  }
  store_slot(p.slots, slot_id, p.slot_mask, lsf1_finalize(leaf_sum, region.bytes));
}

// The whole kernel: warps walk the units grid-stride. kBatch: see leaf_full_tile.
template <uint32_t kCapacity, bool kCompact, u32 kBatch = LSF1_LOAD_BATCH,
          bool kOnlyAligned = false>
__device__ __forceinline__ void batch_body(const BatchParams<kCapacity>& p) {
  const u32 lane = threadIdx.x % kLanes;
  const u32 warp = (blockIdx.x * blockDim.x + threadIdx.x) / kLanes;
  const u32 warps = gridDim.x * blockDim.x / kLanes;
  u32 current = ~0u;
  u64 partial = 0;
  u32 units = 0;
  RegionView view{};
  for (u32 unit = warp; unit < p.total_units; unit += warps) {
    const u32 index = find_region(p, unit, current);
    if (index != current) {
      if (current != ~0u) flush_region(p, current, partial, units, lane);
      current = index;
      partial = 0;
      units = 0;
      const RegionEntry& region = p.regions[index];
      view.base = reinterpret_cast<const unsigned char*>(region.ptr);
      view.end = view.base + region.bytes;
      view.bytes = region.bytes;
      view.misalign = u32(region.ptr % 16);
    }
    partial += lane_leaf_digest<kCompact, kBatch, kOnlyAligned>(view, unit - p.regions[index].first_unit, lane);
    ++units;
  }
  if (current != ~0u) flush_region(p, current, partial, units, lane);
}

// The tile kernel: block b takes tiles b, b + gridDim.x, ...; its four warps take eight leaves
// each (four lanes per leaf, quarter_accumulator) of a full aligned tile; a short or misaligned
// tile goes to warp 0 whole (lane_leaf_digest). The tile's leaf sum meets in shared memory and
// thread 0 writes it to the tile's partial slot; the host finalizes the region (engine.cpp).
template <uint32_t kCapacity>
__device__ __forceinline__ void tiles_body(const BatchParams<kCapacity>& p) {
  __shared__ u64 tile_sum;
  const u32 lane = threadIdx.x % kLanes;
  const u32 warp = threadIdx.x / kLanes;  // 0..3
  if (threadIdx.x == 0) tile_sum = 0;
  __syncthreads();
  u32 index = 0;
  for (u32 unit = blockIdx.x; unit < p.total_units; unit += gridDim.x) {
    index = find_region(p, unit, index);
    const RegionEntry& region = p.regions[index];
    const RegionView view{reinterpret_cast<const unsigned char*>(region.ptr),
                          reinterpret_cast<const unsigned char*>(region.ptr) + region.bytes,
                          region.bytes, u32(region.ptr % 16)};
    const u64 tile = unit - region.first_unit;
    const u64 tile_at = tile * kTileBytes;
    u64 leaf = 0;
    if (view.misalign == 0 && region.bytes - tile_at >= kTileBytes) {
      const u32 leaf_index = warp * 8 + lane / 4;
      const u64 v = quarter_accumulator(view, tile_at, leaf_index, lane % 4,
                                        tile * kLanes + leaf_index);
      const u32 first = lane & ~3u;
      const u64 v1 = __shfl_sync(0xFFFFFFFFu, v, first);
      const u64 v2 = __shfl_sync(0xFFFFFFFFu, v, first + 1);
      const u64 v3 = __shfl_sync(0xFFFFFFFFu, v, first + 2);
      const u64 v4 = __shfl_sync(0xFFFFFFFFu, v, first + 3);
      if (lane % 4 == 0) leaf = leaf_from_accumulators(v1, v2, v3, v4);
    } else if (warp == 0) {
      leaf = lane_leaf_digest<true>(view, tile, lane);
    }
    const u64 sum = warp_sum(leaf);
    if (lane == 0) atomicAdd(&tile_sum, sum);
    __syncthreads();
    if (threadIdx.x == 0) {
      store_slot(p.partials, p.first_partial + unit, p.partial_mask, tile_sum);
      tile_sum = 0;
    }
    __syncthreads();
  }
}

}  // namespace lockstep::hashing::device
