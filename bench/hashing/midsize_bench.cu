// midsize_bench: the LSF1 bulk kernel on the region sizes a training job's tensors have (1 to
// 256 MiB), launched back to back on one stream as the full level does, beside the read-only
// reduction of the same regions: what a hash launch costs beyond its bytes. Two grid policies
// (they measured the same on one H200, 2026-11-30: the loss is the launch's ramp, not a
// half-empty last round of tiles):
//   capped    blocks = min(resident, tiles / 8)                        (what the engine does)
//   balanced  the same number of rounds, with the tiles spread evenly over the warps
// and the compact kernel with the capped grid.
// Usage: midsize_bench [total MiB per case]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "hashing/layout.h"
#include "bench_support.cuh"

namespace lockstep::hashing {
extern const unsigned char lockstep_hash_kernels_fatbin[];
}

namespace {

using namespace lockstep::hashing;
using lockstep::bench::reduce_u64;
using lockstep::bench::spin;

}  // namespace

int main(int argc, char** argv) {
  const size_t total_mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 8192;
  BENCH_CHECK(cudaSetDevice(0));
  BENCH_CHECK(cudaFree(nullptr));
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  CUmodule module;
  BENCH_CHECK(cuModuleLoadData(&module, lockstep_hash_kernels_fatbin));
  CUfunction bulk, compact;
  BENCH_CHECK(cuModuleGetFunction(&bulk, module, lsf1::kSmallKernelName));
  BENCH_CHECK(cuModuleGetFunction(&compact, module, lsf1::kSmallCompactKernelName));
  int per_sm = 0;
  BENCH_CHECK(
      cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, bulk, lsf1::kThreadsPerBlock, 0));
  const uint32_t resident = uint32_t(per_sm * prop.multiProcessorCount);
  int reduce_per_sm = 0;
  BENCH_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&reduce_per_sm, reduce_u64, 256, 0));
  const int reduce_blocks = reduce_per_sm * prop.multiProcessorCount;
  std::printf("device %s, %d SMs, bulk kernel %d blocks/SM (%u resident warps)\n", prop.name,
              prop.multiProcessorCount, per_sm, resident * 8);

  const size_t kPool = 2ull << 30;  // larger than L2 many times over: every region from HBM
  unsigned char* pool = nullptr;
  BENCH_CHECK(cudaMalloc(&pool, kPool));
  BENCH_CHECK(cudaMemset(pool, 0x5A, kPool));
  unsigned long long* sink = nullptr;
  BENCH_CHECK(cudaMalloc(&sink, 8));
  const lockstep::bench::DirectLaunchBuffers buffers =
      lockstep::bench::direct_launch_buffers(1 << 16);
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));

  auto time_launches = [&](int n, auto&& launch_one) {
    float best = 1e30f;
    for (int round = 0; round < 3; ++round) {
      spin<<<1, 1, 0, stream>>>(20'000'000ull);
      BENCH_CHECK(cudaEventRecord(start, stream));
      for (int i = 0; i < n; ++i) launch_one(i);
      BENCH_CHECK(cudaEventRecord(stop, stream));
      BENCH_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
      best = std::min(best, ms);
    }
    return best * 1000.0 / n;  // us per launch
  };

  std::printf("%8s %6s %8s %10s %10s %10s %10s %9s %9s %9s\n", "MiB", "n", "tiles", "capped_us",
              "balanced_us", "compact_us", "reduce_us", "capped", "balanced", "reduce");
  for (double mib : {1.0, 4.0, 8.0, 16.0, 24.0, 32.0, 48.0, 64.0, 96.0, 128.0, 192.0, 256.0}) {
    const size_t bytes = size_t(mib * 1048576);
    const int n = int(std::max<size_t>(8, std::min<size_t>(4000, total_mib * 1048576 / bytes)));
    const size_t slots = kPool / bytes;
    auto region = [&](int i) { return pool + (size_t(i) % slots) * bytes; };
    const uint32_t tiles = uint32_t((bytes + lsf1::kTileBytes - 1) / lsf1::kTileBytes);
    const uint32_t capped = std::min<uint32_t>(resident, (tiles + 7) / 8);
    const uint32_t rounds = (tiles + resident * 8 - 1) / (resident * 8);
    const uint32_t balanced = ((tiles + rounds - 1) / rounds + 7) / 8;
    auto hash_launch = [&](int i, uint32_t blocks, CUfunction function = nullptr) {
      lsf1::BatchParams<lsf1::kSmallBatch> p{};
      p.first_slot = uint64_t(i);
      p.slots = reinterpret_cast<uint64_t>(buffers.host_slots);
      p.scratch = reinterpret_cast<uint64_t>(buffers.scratch);
      p.slot_mask = (1 << 16) - 1;
      p.count = 1;
      p.regions[0] = {reinterpret_cast<uint64_t>(region(i)), bytes, 0, tiles};
      p.total_units = tiles;
      void* args[] = {&p};
      BENCH_CHECK(cuLaunchKernel(function ? function : bulk, blocks, 1, 1, lsf1::kThreadsPerBlock,
                                 1, 1, 0, reinterpret_cast<CUstream>(stream), args, nullptr));
    };
    const double t_capped = time_launches(n, [&](int i) { hash_launch(i, capped); });
    const double t_balanced = time_launches(n, [&](int i) { hash_launch(i, balanced); });
    const double t_compact = time_launches(n, [&](int i) { hash_launch(i, capped, compact); });
    const int rblocks = int(std::min<size_t>(reduce_blocks, (bytes / 16 + 1023) / 1024));
    const double t_reduce = time_launches(n, [&](int i) {
      reduce_u64<<<std::max(1, rblocks), 256, 0, stream>>>(
          reinterpret_cast<const ulonglong2*>(region(i)), bytes / 16, sink);
    });
    std::printf("%8.0f %6d %8u %10.2f %10.2f %10.2f %10.2f %7.2fTB %7.2fTB %7.2fTB\n", mib, n,
                tiles, t_capped, t_balanced, t_compact, t_reduce, bytes / t_capped / 1e6,
                bytes / t_balanced / 1e6, bytes / t_reduce / 1e6);
    std::fflush(stdout);
  }
  return 0;
}
