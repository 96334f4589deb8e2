// LSF1 batch kernels: one launch fingerprints up to kCapacity regions. Warps walk the
// concatenated tiles ("units") of all regions grid-stride; a warp folds its lane leaf digests
// into one wrapping sum per region, and the warp that completes a region finalizes it and writes
// the digest to its slot in pinned, mapped host memory. Built to a fatbin and embedded.
#include "hashing/kernel_common.cuh"

#ifndef LSF1_MIN_BLOCKS
#define LSF1_MIN_BLOCKS 1  // __launch_bounds__ minimum resident blocks per SM (register cap)
#endif

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

template <uint32_t kCapacity, bool kCompact>
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
    partial += lane_leaf_digest<kCompact>(view, unit - p.regions[index].first_unit, lane);
    ++units;
  }
  if (current != ~0u) flush_region(p, current, partial, units, lane);
}

}  // namespace lockstep::hashing::device

using lockstep::hashing::device::batch_body;
using lockstep::hashing::lsf1::BatchParams;
using lockstep::hashing::lsf1::kLargeBatch;
using lockstep::hashing::lsf1::kSmallBatch;
using lockstep::hashing::lsf1::kThreadsPerBlock;

// Bulk kernels (fully unrolled tile loop) for launches that read a lot; compact kernels for
// launches that read little. Same function, same results; the engine picks by total bytes.
extern "C" __global__ void __launch_bounds__(kThreadsPerBlock, LSF1_MIN_BLOCKS)
    lsf1_batch_small(const __grid_constant__ BatchParams<kSmallBatch> params) {
  batch_body<kSmallBatch, false>(params);
}

extern "C" __global__ void __launch_bounds__(kThreadsPerBlock, LSF1_MIN_BLOCKS)
    lsf1_batch_large(const __grid_constant__ BatchParams<kLargeBatch> params) {
  batch_body<kLargeBatch, false>(params);
}

extern "C" __global__ void __launch_bounds__(kThreadsPerBlock, LSF1_MIN_BLOCKS)
    lsf1_compact_small(const __grid_constant__ BatchParams<kSmallBatch> params) {
  batch_body<kSmallBatch, true>(params);
}

extern "C" __global__ void __launch_bounds__(kThreadsPerBlock, LSF1_MIN_BLOCKS)
    lsf1_compact_large(const __grid_constant__ BatchParams<kLargeBatch> params) {
  batch_body<kLargeBatch, true>(params);
}
