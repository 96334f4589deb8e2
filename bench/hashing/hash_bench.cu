// hash_bench: the LSF1 HashEngine (the shim's engine and embedded kernels, via the driver API)
// against a read-only reduction (u64 sum, 16-byte loads) on the same buffers. CUDA events after
// warm-up (queued behind a spin kernel: device time), median of many runs, bytes counted; each run reads a different slice of a 4 GiB
// buffer of fresh random data so that small sizes are not served from L2.
// Output: one CSV row per measurement (run_bench.py merges torch.hash_tensor and prints the table).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hashing/engine.h"
#include "hashing/fingerprint.h"
#include "bench_support.cuh"

namespace {

using lockstep::bench::reduce_u64;
using lockstep::bench::spin;
using lockstep::hashing::HashEngine;
using lockstep::hashing::Region;

__device__ unsigned long long splitmix(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Random values of the dtype (never zeros): fp32 and bf16 in (-2, 2), fp8 e4m3 without NaN.
__global__ void fill_random(unsigned* out, size_t words, unsigned long long seed, int dtype) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words;
       i += size_t(gridDim.x) * blockDim.x) {
    const unsigned long long r = splitmix(seed ^ (i * 0x632BE59BD9B4E019ull));
    unsigned w;
    if (dtype == 0) {                                 // fp32
      w = (unsigned(r) & 0x807FFFFFu) | 0x3F800000u;  // +-[1, 2)
    } else if (dtype == 1) {                          // two bf16
      const unsigned a = (unsigned(r) & 0x807Fu) | 0x3F80u,
                     b = (unsigned(r >> 16) & 0x807Fu) | 0x3F80u;
      w = a | (b << 16);
    } else {  // four fp8 e4m3: clear the NaN pattern (S.1111.111)
      w = unsigned(r >> 13);
      for (int k = 0; k < 4; ++k)
        if (((w >> (8 * k)) & 0x7F) == 0x7F) w ^= 1u << (8 * k);
      if (w == 0) w = 0x38383838u;
    }
    out[i] = w;
  }
}

struct Timer {
  cudaEvent_t start, stop;
  Timer() {
    BENCH_CHECK(cudaEventCreate(&start));
    BENCH_CHECK(cudaEventCreate(&stop));
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  BENCH_CHECK(cudaSetDevice(0));
  BENCH_CHECK(cudaFree(nullptr));  // primary context current: the engine uses it
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));

  const auto engine = lockstep::bench::engine_or_exit();
  auto drain = [&] { engine->poll([](uint64_t, uint64_t) {}); };

  const size_t kPool = quick ? (256ull << 20) : (4ull << 30);
  unsigned char* pool = nullptr;
  BENCH_CHECK(cudaMalloc(&pool, kPool + 4096));
  unsigned long long* sink = nullptr;
  BENCH_CHECK(cudaMalloc(&sink, sizeof *sink));
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int reduce_blocks_per_sm = 0;
  BENCH_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&reduce_blocks_per_sm, reduce_u64, 256, 0));
  const int reduce_max_blocks = reduce_blocks_per_sm * prop.multiProcessorCount;

  Timer timer;
  auto time_it = [&](int runs, auto&& launch_run) {
    for (int i = 0; i < 5; ++i) launch_run(i);  // warm-up
    BENCH_CHECK(cudaStreamSynchronize(stream));
    drain();
    std::vector<double> us;
    for (int i = 0; i < runs; ++i) {
      spin<<<1, 1, 0, stream>>>(200000);
      BENCH_CHECK(cudaEventRecord(timer.start, stream));
      launch_run(i);
      BENCH_CHECK(cudaEventRecord(timer.stop, stream));
      BENCH_CHECK(cudaEventSynchronize(timer.stop));
      float ms = 0;
      BENCH_CHECK(cudaEventElapsedTime(&ms, timer.start, timer.stop));
      us.push_back(ms * 1000.0);
      drain();
    }
    return median(us);
  };

  // The memory's peak bandwidth (double data rate: two transfers a clock), for run_bench.py's
  // bulk target, which is a share of it: 4.0 TB/s on the H200, unreachable on an H100's 3.35.
  // A device that does not say leaves the field out (run_bench.py then holds it to 4.0 TB/s).
  int memory_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&memory_khz, cudaDevAttrMemoryClockRate, 0) == cudaSuccess &&
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0) == cudaSuccess &&
      memory_khz > 0 && bus_bits > 0) {
    const double peak_tb_s = 2.0 * memory_khz * 1e3 * (bus_bits / 8.0) / 1e12;
    std::printf("device,%s,sms,%d,peak_tb_s,%.3f\n", prop.name, prop.multiProcessorCount,
                peak_tb_s);
  } else {
    (void)cudaGetLastError();  // the failed query's error, not the benchmark's
    std::printf("device,%s,sms,%d\n", prop.name, prop.multiProcessorCount);
  }
  std::printf("kind,dtype,bytes,method,median_us,tb_per_s,check\n");
  const char* dtypes[] = {"fp32", "bf16", "fp8"};
  std::vector<size_t> sizes = {4096,      64u << 10,  256u << 10, 1u << 20,   4u << 20,
                               16u << 20, 64u << 20, 256u << 20, 1ull << 30, 4ull << 30};
  for (int dtype = 0; dtype < 3; ++dtype) {
    const unsigned long long seed = std::chrono::steady_clock::now().time_since_epoch().count();
    fill_random<<<4096, 256, 0, stream>>>(reinterpret_cast<unsigned*>(pool), (kPool + 4096) / 4,
                                          seed, dtype);
    BENCH_CHECK(cudaStreamSynchronize(stream));
    for (size_t bytes : sizes) {
      if (bytes > kPool) continue;
      const int runs = bytes >= (1ull << 30) ? 30 : bytes >= (256u << 20) ? 60 : 300;
      const size_t slices = std::max<size_t>(1, kPool / bytes);
      auto at = [&](int i) { return pool + (size_t(i) % slices) * bytes; };

      // Correctness of the engine on this very data (host reference), up to 16 MiB.
      std::string check = "-";
      if (bytes <= (16u << 20)) {
        std::vector<unsigned char> host(bytes);
        BENCH_CHECK(cudaMemcpy(host.data(), at(1), bytes, cudaMemcpyDeviceToHost));
        const Region region{reinterpret_cast<CUdeviceptr>(at(1)), bytes};
        uint64_t digest = 0;
        engine->enqueue(reinterpret_cast<CUstream>(stream), &region, 1, nullptr);
        BENCH_CHECK(cudaStreamSynchronize(stream));
        engine->poll([&](uint64_t, uint64_t d) { digest = d; });
        check = digest == lockstep::hashing::fingerprint(host.data(), bytes) ? "ok" : "MISMATCH";
      }
      const double ours = time_it(runs, [&](int i) {
        const Region region{reinterpret_cast<CUdeviceptr>(at(i)), bytes};
        if (!engine->enqueue(reinterpret_cast<CUstream>(stream), &region, 1, nullptr)) {
          std::fprintf(stderr, "enqueue refused\n");
          std::exit(1);
        }
      });
      const double reduce = time_it(runs, [&](int i) {
        const size_t n16 = bytes / 16;
        const int blocks = int(std::min<size_t>(reduce_max_blocks, (n16 + 1023) / 1024));
        reduce_u64<<<std::max(1, blocks), 256, 0, stream>>>(
            reinterpret_cast<const ulonglong2*>(at(i)), n16, sink);
      });
      std::printf("single,%s,%zu,lsf1,%.3f,%.4f,%s\n", dtypes[dtype], bytes, ours,
                  bytes / ours / 1e6, check.c_str());
      std::printf("single,%s,%zu,reduce_u64,%.3f,%.4f,-\n", dtypes[dtype], bytes, reduce,
                  bytes / reduce / 1e6);
      std::fflush(stdout);
    }
  }
  // 1000 regions of 4 KiB in one launch, each batch on fresh slices.
  {
    constexpr int kRegions = 1000;
    constexpr size_t kBytes = 4096;
    const size_t slices = kPool / kBytes;
    std::vector<Region> regions(kRegions);
    const double batch = time_it(200, [&](int i) {
      for (int r = 0; r < kRegions; ++r)
        regions[r] = {reinterpret_cast<CUdeviceptr>(
                          pool + ((size_t(i) * kRegions + r) * 7919 % slices) * kBytes),
                      kBytes};
      if (!engine->enqueue(reinterpret_cast<CUstream>(stream), regions.data(), kRegions, nullptr)) {
        std::fprintf(stderr, "batch enqueue refused\n");
        std::exit(1);
      }
    });
    std::printf("batch1000x4KiB,bf16,%zu,lsf1,%.3f,%.4f,-\n", kRegions * kBytes, batch,
                kRegions * kBytes / batch / 1e6);
  }
  // The regions of one launch, of mixed sizes and alignments (issue #34: at the efficiency of
  // their total size): each region at its own offset in a fresh slice, against the reduction of
  // one buffer of the same total bytes. "large": a GEMM's output beside a bias and norm
  // statistics (16.6 MB); "small": 24 regions of 0.5-256 KiB (the many small tensors of a step).
  const std::vector<size_t> large_set = {1u << 20,  4096,   3u << 20, 65536 + 52, 262144, 2048,
                                         8u << 20,  100,    524288,   1u << 20,   12288,  2u << 20};
  std::vector<size_t> small_set;
  for (int r = 0; r < 24; ++r) small_set.push_back(size_t(512) << (r % 10));  // 512 B..256 KiB
  const std::vector<size_t>* sets[] = {&large_set, &small_set};
  for (const std::vector<size_t>* set : sets) {
    size_t total = 0, span = 0;
    for (size_t b : *set) total += b, span += (b + 255) / 256 * 256;
    const size_t slices = kPool / span;
    std::vector<Region> regions(set->size());
    const double ours = time_it(300, [&](int i) {
      size_t at = (size_t(i) % slices) * span;
      for (size_t r = 0; r < set->size(); ++r) {
        regions[r] = {reinterpret_cast<CUdeviceptr>(pool + at), (*set)[r]};
        at += ((*set)[r] + 255) / 256 * 256;
      }
      if (!engine->enqueue(reinterpret_cast<CUstream>(stream), regions.data(),
                           uint32_t(regions.size()), nullptr)) {
        std::fprintf(stderr, "mixed enqueue refused\n");
        std::exit(1);
      }
    });
    const double reduce = time_it(300, [&](int i) {
      const size_t n16 = total / 16;
      const int blocks = int(std::min<size_t>(reduce_max_blocks, (n16 + 1023) / 1024));
      reduce_u64<<<std::max(1, blocks), 256, 0, stream>>>(
          reinterpret_cast<const ulonglong2*>(pool + (size_t(i) % slices) * span), n16, sink);
    });
    const char* label = set == &large_set ? "mixed-large" : "mixed-small";
    std::printf("mixed,%s,%zu,%zu,lsf1,%.3f\n", label, set->size(), total, ours);
    std::printf("mixed,%s,%zu,%zu,reduce_u64,%.3f\n", label, set->size(), total, reduce);
  }
  const auto s = engine->stats();
  std::printf("engine,launches,%llu,overflows,%llu,launch_failures,%llu\n",
              (unsigned long long)s.launches, (unsigned long long)s.overflows,
              (unsigned long long)s.launch_failures);
  return 0;
}
