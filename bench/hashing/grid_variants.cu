// grid_variants: how a small or mid-sized hash launch should be shaped (diagnostics, not the
// benchmark table). Instances of the shipped batch body (batch_body.cuh) with 4 or 16 XXH64
// rounds in flight per lane, the tile kernel (tiles_body: a block per tile, four lanes per leaf,
// tile sums to the host; its own grid), and two that split the time (wrong digests on purpose: loads and combine without XXH64; XXH64
// without the cross-warp combine), launched two ways:
//   b256     8 warps per block, blocks = ceil(tiles / 8)           (the engine)
//   b32      one warp per block
// (Measured on one H200 on 2026-12-02 and dropped: as many SMs as tiles, the same as both;
// only the aligned paths compiled in, 28-37 KB of code instead of 61-68 KB, the same times.)
// beside the read-only reduction of the same bytes, on sizes from 4 KiB to 64 MiB and on one
// batch of mixed sizes. Same method as hash_bench: each launch queued behind a 200 us spin
// kernel, CUDA events, median of 200 runs, each run on a fresh slice of a 2 GiB pool (never from
// L2); every instance's digest checked against the host reference. Usage: grid_variants
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hashing/batch_body.cuh"
#include "hashing/fingerprint.h"
#include "bench_support.cuh"

#include <xxhash.h>

namespace {

using namespace lockstep::hashing;
using lockstep::bench::reduce_u64;
using lockstep::bench::spin;
using Params = lsf1::BatchParams<lsf1::kSmallBatch>;

template <unsigned kBatch>
__global__ void __launch_bounds__(lsf1::kThreadsPerBlock, 1)
    compact_variant(const __grid_constant__ Params params) {
  device::batch_body<lsf1::kSmallBatch, true, kBatch>(params);
}

template <unsigned kBatch>
__global__ void __launch_bounds__(lsf1::kThreadsPerBlock, 1)
    lean_variant(const __grid_constant__ Params params) {
  device::batch_body<lsf1::kSmallBatch, true, kBatch, true>(params);
}

__global__ void __launch_bounds__(lsf1::kTileKernelThreads)
    tiles_variant(const __grid_constant__ Params params) {
  device::tiles_body<lsf1::kSmallBatch>(params);
}

// Diagnostics that give wrong digests on purpose, to split the time: kMode 0 loads each lane's
// leaf as the hash does but only adds its words (no XXH64) and combines as the hash does;
// kMode 1 hashes but stores each warp's sum to its own slot (no cross-warp combine, no atomics).
template <int kMode>
__global__ void __launch_bounds__(lsf1::kThreadsPerBlock, 1)
    split_variant(const __grid_constant__ Params p) {
  using namespace device;
  const u32 lane = threadIdx.x % kLanes;
  const u32 warp = (blockIdx.x * blockDim.x + threadIdx.x) / kLanes;
  const u32 warps = gridDim.x * blockDim.x / kLanes;
  for (u32 unit = warp; unit < p.total_units; unit += warps) {
    const u32 index = find_region(p, unit, 0);
    const RegionEntry& region = p.regions[index];
    RegionView view{reinterpret_cast<const unsigned char*>(region.ptr),
                    reinterpret_cast<const unsigned char*>(region.ptr) + region.bytes,
                    region.bytes, 0};
    const u64 tile = unit - region.first_unit;
    u64 partial = 0;
    if (kMode == 0) {
      const u64 at = tile * kTileBytes + lane * kStripeBytes;
      if (region.bytes - tile * kTileBytes >= kTileBytes) {
        ulonglong2 s[32];
#pragma unroll
        for (int i = 0; i < 32; ++i) s[i] = load16(view.base + at + u64(i) * kLanes * kStripeBytes);
#pragma unroll
        for (int i = 0; i < 32; ++i) partial += s[i].x ^ s[i].y;
      }
      flush_region(p, index, partial, region.units, lane);  // as if this warp held the region
      if (region.units > 1 && lane == 0) {  // and the cross-warp path's atomics and fences
        auto* scratch = reinterpret_cast<RegionScratch*>(p.scratch) + index;
        atomicAdd(&scratch->sum, partial);
        __threadfence();
        if (atomicAdd(&scratch->tiles_done, 1) + 1 == region.units) {
          __threadfence();
          atomicExch(&scratch->sum, 0ull);
          atomicExch(&scratch->tiles_done, 0u);
          __threadfence();
        }
      }
    } else {
      partial = warp_sum(lane_leaf_digest<true, 16, true>(view, tile, lane));
      if (lane == 0)
        reinterpret_cast<DigestSlot*>(p.scratch)[unit & p.slot_mask].digest = partial;
    }
  }
}

uint64_t units_of(uint64_t bytes) { return std::max<uint64_t>(1, (bytes + 16383) / 16384); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  BENCH_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  const unsigned sms = unsigned(prop.multiProcessorCount);
  const size_t kPool = 2ull << 30;
  unsigned char* pool = nullptr;
  BENCH_CHECK(cudaMalloc(&pool, kPool + 4096));
  lockstep::bench::fill_words<<<4096, 256>>>(reinterpret_cast<unsigned*>(pool), (kPool + 4096) / 4, 12345u);
  unsigned long long* sink = nullptr;
  BENCH_CHECK(cudaMalloc(&sink, 8));
  const auto buffers = lockstep::bench::direct_launch_buffers(1 << 14);
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  BENCH_CHECK(cudaDeviceSynchronize());
  int reduce_per_sm = 0;
  BENCH_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&reduce_per_sm, reduce_u64, 256, 0));

  auto time_it = [&](auto&& launch_run) {
    for (int i = 0; i < 5; ++i) launch_run(i);
    std::vector<double> us;
    for (int i = 0; i < 200; ++i) {
      spin<<<1, 1, 0, stream>>>(200000);
      BENCH_CHECK(cudaEventRecord(start, stream));
      launch_run(i + 5);
      BENCH_CHECK(cudaEventRecord(stop, stream));
      BENCH_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
      us.push_back(ms * 1000.0);
    }
    return median(us);
  };

  using Kernel = void (*)(Params);
  const struct {
    const char* name;
    Kernel kernel;
    bool lsf1;  // gives LSF1 digests (checked); the split diagnostics do not
  } kernels[] = {{"batch4", compact_variant<4>, true},
                 {"batch16", compact_variant<16>, true},
                 {"tiles", tiles_variant, true},
                 {"loads+combine", split_variant<0>, false},
                 {"hash-nocombine", split_variant<1>, false}};
  for (const auto& k : kernels) {
    cudaFuncAttributes attr{};
    BENCH_CHECK(cudaFuncGetAttributes(&attr, k.kernel));
    std::printf("kernel,%s,regs,%d,local_bytes,%zu\n", k.name, attr.numRegs, attr.localSizeBytes);
  }
  enum Policy { kB256, kSpread, kB32 };
  const char* policy_names[] = {"b256", "spread", "b32"};
  auto warps_per_block = [&](Policy p, uint64_t units) -> unsigned {
    if (p == kB256) return 8;
    if (p == kB32) return 1;
    return unsigned(std::clamp<uint64_t>((units + sms - 1) / sms, 1, 8));
  };

  // One launch over `sizes` regions laid out at slice i of the pool (each region 256-byte
  // aligned); returns the digests' slots' first index used.
  auto launch_regions = [&](Kernel kernel, Policy policy, const std::vector<size_t>& sizes,
                            size_t span, int i, bool device_slots) {
    Params p{};
    p.first_slot = 0;
    p.slots = reinterpret_cast<uint64_t>(device_slots ? static_cast<void*>(buffers.device_slots)
                                                      : static_cast<void*>(buffers.host_slots));
    p.scratch = reinterpret_cast<uint64_t>(buffers.scratch);
    p.slot_mask = (1 << 12) - 1;
    p.count = uint32_t(sizes.size());
    const size_t slices = kPool / span;
    unsigned char* base = pool + (size_t(i) % slices) * span;
    uint64_t units = 0, at = 0;
    for (size_t r = 0; r < sizes.size(); ++r) {
      p.regions[r] = {reinterpret_cast<uint64_t>(base + at), sizes[r], uint32_t(units),
                      uint32_t(units_of(sizes[r]))};
      units += units_of(sizes[r]);
      at += (sizes[r] + 255) / 256 * 256;
    }
    p.total_units = uint32_t(units);
    if (kernel == tiles_variant) {  // a block per tile; tile sums in the partial ring
      p.partials = reinterpret_cast<uint64_t>(device_slots ? buffers.device_slots
                                                           : buffers.host_slots) +
                   (1 << 13) * sizeof(lsf1::DigestSlot);
      p.first_partial = 0;
      p.partial_mask = (1 << 13) - 1;
      kernel<<<unsigned(units), lsf1::kTileKernelThreads, 0, stream>>>(p);
      return base;
    }
    const unsigned wpb = warps_per_block(policy, units);
    const unsigned blocks = unsigned((units + wpb - 1) / wpb);
    kernel<<<blocks, wpb * 32, 0, stream>>>(p);
    return base;
  };

  std::printf("case,bytes,method,median_us,pct_of_reduce,check\n");
  auto run_case = [&](const std::string& label, const std::vector<size_t>& sizes) {
    size_t total = 0, span = 0;
    for (size_t s : sizes) {
      total += s;
      span += (s + 255) / 256 * 256;
    }
    span = std::max<size_t>(span, 4096);
    const double reduce = time_it([&](int i) {
      const size_t slices = kPool / span;
      const size_t n16 = span / 16;
      const int blocks = int(std::min<size_t>(size_t(reduce_per_sm) * sms, (n16 + 1023) / 1024));
      reduce_u64<<<std::max(1, blocks), 256, 0, stream>>>(
          reinterpret_cast<const ulonglong2*>(pool + (size_t(i) % slices) * span), n16, sink);
    });
    std::printf("%s,%zu,reduce,%.2f,100,-\n", label.c_str(), total, reduce);
    for (const auto& k : kernels) {
      for (Policy policy : {kB256, kB32}) {
        if (k.kernel == tiles_variant && policy != kB256) continue;  // its own grid
        // Check first: digests of slice 1 against the host reference.
        BENCH_CHECK(cudaStreamSynchronize(stream));
        std::memset(buffers.host_slots, 0, sizes.size() * sizeof(lsf1::DigestSlot));
        unsigned char* base = launch_regions(k.kernel, policy, sizes, span, 1, false);
        BENCH_CHECK(cudaStreamSynchronize(stream));
        std::vector<unsigned char> host(span);
        BENCH_CHECK(cudaMemcpy(host.data(), base, span, cudaMemcpyDeviceToHost));
        bool ok = true;
        size_t at = 0;
        uint64_t unit = 0;
        for (size_t r = 0; r < sizes.size(); ++r) {
          uint64_t digest = buffers.host_slots[r].digest;
          if (k.kernel == tiles_variant) {  // the host's part: add the tile sums, finalize
            uint64_t sum = 0;
            for (uint64_t u = 0; u < units_of(sizes[r]); ++u)
              sum += buffers.host_slots[(1 << 13) + unit + u].digest;
            unit += units_of(sizes[r]);
            const uint64_t words[2] = {sum, sizes[r]};
            digest = XXH64(words, sizeof words, lsf1::kFinalSeed);
          }
          ok = ok && digest == fingerprint(host.data() + at, sizes[r]);
          at += (sizes[r] + 255) / 256 * 256;
        }
        const double us = time_it(
            [&](int i) { launch_regions(k.kernel, policy, sizes, span, i, false); });
        // The diagnostics leave junk in the scratch slots: zero them for the next instance.
        BENCH_CHECK(cudaMemsetAsync(buffers.scratch, 0, (1 << 12) * sizeof(lsf1::RegionScratch),
                                    stream));
        std::printf("%s,%zu,%s/%s,%.2f,%.0f,%s\n", label.c_str(), total, k.name,
                    policy_names[policy], us, 100.0 * reduce / us,
                    !k.lsf1 ? "-" : ok ? "ok" : "MISMATCH");
      }
    }
    // What the host-visible writes cost: the tile kernel with its sums in device memory.
    const double dev = time_it(
        [&](int i) { launch_regions(tiles_variant, kB256, sizes, span, i, true); });
    std::printf("%s,%zu,tiles/device-slots,%.2f,%.0f,-\n", label.c_str(), total, dev,
                100.0 * reduce / dev);
    std::fflush(stdout);
  };
  for (size_t bytes : {size_t(4) << 10, size_t(16) << 10, size_t(64) << 10, size_t(256) << 10,
                       size_t(1) << 20, size_t(4) << 20, size_t(16) << 20, size_t(64) << 20}) {
    run_case(std::to_string(bytes >> 10) + "KiB", {bytes});
  }
  // The regions of one launch: a GEMM's output, a bias, a norm's statistics, odd sizes.
  run_case("mixed12", {size_t(1) << 20, 4096, 3 << 20, 65536 + 52, 262144, 2048, 8 << 20, 100,
                       524288, 1 << 20, 12288, 2 << 20});
  return 0;
}
