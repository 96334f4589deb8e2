// What the hashing benchmarks share: a check macro that names the failed call and exits, the
// read-only reduction they compare against, a fill of nonzero pseudo-random words, and the spin
// kernel that keeps a stream busy while the host queues what is to be timed (so that CUDA events
// time the device alone, not the host's launch path).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "hashing/engine.h"
#include "hashing/layout.h"

namespace lockstep::bench {

inline const char* status_text(cudaError_t e) { return cudaGetErrorString(e); }
inline const char* status_text(CUresult) { return "driver error"; }  // no libcuda linked here

__global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// Fills n words with a hash of their index and seed, every byte nonzero (never a run of zeros a
// hash could shortcut): the data the diagnostics time the kernels on.
__global__ void fill_words(unsigned* out, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u ^ seed;
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    x *= 0x297A2D39u;
    x ^= x >> 15;
    out[i] = x | 0x01010101u;
  }
}

// The read-only baseline: sum of u64 words, 16-byte loads, 4 in flight per thread.
__global__ void __launch_bounds__(256)
    reduce_u64(const ulonglong2* p, size_t n16, unsigned long long* out) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  unsigned long long s = 0;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    const ulonglong2 a = __ldg(p + i), b = __ldg(p + i + stride), c = __ldg(p + i + 2 * stride),
                     d = __ldg(p + i + 3 * stride);
    s += a.x + a.y + b.x + b.y + c.x + c.y + d.x + d.y;
  }
  for (; i < n16; i += stride) {
    const ulonglong2 a = __ldg(p + i);
    s += a.x + a.y;
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

// What a direct launch of the LSF1 kernels needs besides the data: `count` digest slots in pinned
// host memory (as the engine uses) and in device memory (to time the host write), and zeroed
// per-slot scratch. Never freed (the benchmarks exit).
struct DirectLaunchBuffers {
  hashing::lsf1::DigestSlot* host_slots = nullptr;
  hashing::lsf1::DigestSlot* device_slots = nullptr;
  void* scratch = nullptr;
};
DirectLaunchBuffers direct_launch_buffers(uint32_t count);
// HashEngine::create through libcuda, or one line on stderr and exit 1.
std::unique_ptr<hashing::HashEngine> engine_or_exit(const hashing::EngineOptions& options = {});

}  // namespace lockstep::bench

#define BENCH_CHECK(x)                                                                \
  do {                                                                                \
    const auto status_ = (x);                                                         \
    if (static_cast<int>(status_) != 0) {                                             \
      std::fprintf(stderr, "%s:%d %s failed: %d (%s)\n", __FILE__, __LINE__, #x,      \
                   static_cast<int>(status_), lockstep::bench::status_text(status_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

inline lockstep::bench::DirectLaunchBuffers lockstep::bench::direct_launch_buffers(uint32_t count) {
  using namespace lockstep::hashing;
  DirectLaunchBuffers b;
  BENCH_CHECK(cudaHostAlloc(&b.host_slots, count * sizeof *b.host_slots, cudaHostAllocMapped));
  BENCH_CHECK(cudaMalloc(&b.device_slots, count * sizeof *b.device_slots));
  BENCH_CHECK(cudaMalloc(&b.scratch, count * sizeof(lsf1::RegionScratch)));
  BENCH_CHECK(cudaMemset(b.scratch, 0, count * sizeof(lsf1::RegionScratch)));
  return b;
}

// The hash engine the shim uses, on the current device through libcuda; one line and exit 1 when
// the driver or the engine cannot be had.
inline std::unique_ptr<lockstep::hashing::HashEngine> lockstep::bench::engine_or_exit(
    const lockstep::hashing::EngineOptions& options) {
  using namespace lockstep::hashing;
  DriverApi api;
  std::string error;
  std::unique_ptr<HashEngine> engine;
  if (load_driver_api_from_libcuda(&api, &error)) engine = HashEngine::create(api, options, &error);
  if (!engine) std::fprintf(stderr, "%s\n", error.c_str()), std::exit(1);
  return engine;
}
