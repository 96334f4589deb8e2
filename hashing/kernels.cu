// LSF1 batch kernels: one launch fingerprints up to kCapacity regions (three capacities: a
// launch copies its kernel's whole parameter struct, layout.h). Warps walk the
// concatenated tiles ("units") of all regions grid-stride; a warp folds its lane leaf digests
// into one wrapping sum per region, and the warp that completes a region finalizes it and writes
// the digest to its slot in pinned, mapped host memory. Built to a fatbin and embedded.
#include "hashing/batch_body.cuh"

#ifndef LSF1_MIN_BLOCKS
#define LSF1_MIN_BLOCKS 1  // __launch_bounds__ minimum resident blocks per SM (register cap)
#endif

using lockstep::hashing::device::batch_body;
using lockstep::hashing::lsf1::BatchParams;
using lockstep::hashing::lsf1::kLargeBatch;
using lockstep::hashing::lsf1::kMediumBatch;
using lockstep::hashing::lsf1::kSmallBatch;
using lockstep::hashing::lsf1::kThreadsPerBlock;

// Bulk kernels (fully unrolled tile loop) for launches that read a lot; compact kernels for
// launches that read little. Same function, same results; the engine picks by total bytes.
extern "C" __global__ void __launch_bounds__(kThreadsPerBlock, LSF1_MIN_BLOCKS)
    lsf1_batch_small(const __grid_constant__ BatchParams<kSmallBatch> params) {
  batch_body<kSmallBatch, false>(params);
}

extern "C" __global__ void __launch_bounds__(kThreadsPerBlock, LSF1_MIN_BLOCKS)
    lsf1_batch_medium(const __grid_constant__ BatchParams<kMediumBatch> params) {
  batch_body<kMediumBatch, false>(params);
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
    lsf1_compact_medium(const __grid_constant__ BatchParams<kMediumBatch> params) {
  batch_body<kMediumBatch, true>(params);
}

extern "C" __global__ void __launch_bounds__(kThreadsPerBlock, LSF1_MIN_BLOCKS)
    lsf1_compact_large(const __grid_constant__ BatchParams<kLargeBatch> params) {
  batch_body<kLargeBatch, true>(params);
}

// Tile kernels (launches of at most kTileKernelMaxUnits tiles), kTileKernelThreads per block.
using lockstep::hashing::device::tiles_body;
using lockstep::hashing::lsf1::kTileKernelThreads;

extern "C" __global__ void __launch_bounds__(kTileKernelThreads)
    lsf1_tiles_small(const __grid_constant__ BatchParams<kSmallBatch> params) {
  tiles_body<kSmallBatch>(params);
}

extern "C" __global__ void __launch_bounds__(kTileKernelThreads)
    lsf1_tiles_medium(const __grid_constant__ BatchParams<kMediumBatch> params) {
  tiles_body<kMediumBatch>(params);
}

extern "C" __global__ void __launch_bounds__(kTileKernelThreads)
    lsf1_tiles_large(const __grid_constant__ BatchParams<kLargeBatch> params) {
  tiles_body<kLargeBatch>(params);
}
