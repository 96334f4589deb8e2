// launch_floor: what a small hash launch costs, piece by piece (diagnostics for the full level,
// where every job kernel brings one hash launch). For each case, N iterations back to back on
// one stream, two ways:
//   host_us    host time to issue one iteration (what a CPU-bound job pays)
//   device_us  device time per iteration with all N queued behind a spin kernel first (what a
//              GPU-bound job pays: the GPU never waits for the host)
// Cases: empty kernels with a small, an 808-byte and the medium batch's 3.1 KB parameter block
// (the floor), the read-only reduction of 4 KiB, cuStreamIsCapturing alone, the shipped compact
// kernel launched directly, HashEngine::enqueue of 1, 2 and 77 regions (the state call's), and
// the full-level pattern (a small job kernel followed by a 2-region hash launch) beside the job
// kernel alone. Then what a hashing kernel resident on the GPU would cost the launching thread
// instead of a launch per hashed set (docs/performance.md, "Full"): a stream memory operation
// that signals it (cuStreamWriteValue32), one that holds the job's stream until it is done
// (cuStreamWaitValue32, here already met), and the job kernel with a signal and a wait beside the
// job kernel with a hash launch; and what hashing on a side stream would cost it: an event record,
// a wait on an event (cuStreamWaitEvent), and the job kernel with an event recorded after it and a
// wait on the side stream's event (the side stream's own launch is another thread's time).
// Usage: launch_floor [iterations]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "hashing/engine.h"
#include "hashing/layout.h"
#include "bench_support.cuh"

namespace lockstep::hashing {
extern const unsigned char lockstep_hash_kernels_fatbin[];
}

namespace {

using namespace lockstep::hashing;
using lockstep::bench::spin;

struct Params808 {
  unsigned long long words[101];
};

__global__ void empty_small(unsigned long long a, unsigned long long b) {
  if (a == 1 && b == 2 && threadIdx.x == 999) asm volatile("trap;");
}
__global__ void empty_808(const __grid_constant__ Params808 p) {
  if (p.words[100] == 1 && threadIdx.x == 999) asm volatile("trap;");
}
// The medium batch's parameter block (lsf1::BatchParams<kMediumBatch>, 3.1 KB): what its size
// alone costs a launch, against the 16-byte one.
using ParamsMedium = lsf1::BatchParams<lsf1::kMediumBatch>;
__global__ void empty_medium(const __grid_constant__ ParamsMedium p) {
  if (p.count == 12345 && threadIdx.x == 999) asm volatile("trap;");
}
__global__ void __launch_bounds__(256)
    reduce_u64(const ulonglong2* p, size_t n16, unsigned long long* out) {
  unsigned long long s = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n16;
       i += size_t(gridDim.x) * blockDim.x)
    s += __ldg(p + i).x + __ldg(p + i).y;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}
__global__ void axpy_small(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 0.5f * y[i] + x[i];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2000;
  BENCH_CHECK(cudaSetDevice(0));
  BENCH_CHECK(cudaFree(nullptr));
  EngineOptions options;
  options.ring_slots = 1u << 20;  // room for every iteration of a case without polling
  options.device_scratch_bytes = size_t(options.ring_slots) * sizeof(lsf1::RegionScratch);
  const auto engine = lockstep::bench::engine_or_exit(options);

  const size_t kPool = 64u << 20;
  unsigned char* pool = nullptr;
  BENCH_CHECK(cudaMalloc(&pool, kPool));
  BENCH_CHECK(cudaMemset(pool, 0x5A, kPool));
  unsigned long long* sink = nullptr;
  BENCH_CHECK(cudaMalloc(&sink, 8));
  const lockstep::bench::DirectLaunchBuffers buffers = lockstep::bench::direct_launch_buffers(4096);
  lsf1::DigestSlot* const host_slots = buffers.host_slots;
  lsf1::DigestSlot* const device_slots = buffers.device_slots;
  void* const scratch = buffers.scratch;
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const CUstream cu_stream = reinterpret_cast<CUstream>(stream);
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));

  CUmodule module;
  BENCH_CHECK(cuModuleLoadData(&module, lockstep_hash_kernels_fatbin));
  CUfunction compact_small;
  BENCH_CHECK(cuModuleGetFunction(&compact_small, module, lsf1::kSmallCompactKernelName));
  CUfunction empty_small_fn, empty_808_fn, empty_medium_fn;
  BENCH_CHECK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&empty_small_fn),
                                  (const void*)empty_small));
  BENCH_CHECK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&empty_808_fn),
                                  (const void*)empty_808));
  BENCH_CHECK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t*>(&empty_medium_fn),
                                  (const void*)empty_medium));

  // Region i of an iteration: a different 4 KiB slice each time (no L2 reuse across iterations
  // within 64 MiB... the H200's L2 is 60 MB, so the pool is just larger than it).
  auto slice = [&](long i) { return pool + (size_t(i) * 4096 * 7) % (kPool - 4096); };
  auto direct = [&](long i, lsf1::DigestSlot* slots) {
    lsf1::BatchParams<lsf1::kSmallBatch> p{};
    p.first_slot = uint64_t(i);
    p.slots = reinterpret_cast<uint64_t>(slots);
    p.scratch = reinterpret_cast<uint64_t>(scratch);
    p.slot_mask = 4095;
    p.count = 1;
    p.regions[0] = {reinterpret_cast<uint64_t>(slice(i)), 4096, 0, 1};
    p.total_units = 1;
    void* args[] = {&p};
    BENCH_CHECK(cuLaunchKernel(compact_small, 1, 1, 1, lsf1::kThreadsPerBlock, 1, 1, 0, cu_stream,
                               args, nullptr));
  };
  // The state call's launch: 77 regions (the PyTorch hook's GPT parameters), the medium batch.
  constexpr uint32_t kStateRegions = 77;
  auto enqueue = [&](long i, uint32_t regions) {
    Region r[kStateRegions];
    for (uint32_t k = 0; k < regions; ++k)
      r[k] = {reinterpret_cast<CUdeviceptr>(slice(long(kStateRegions) * i + k)), 4096};
    if (!engine->enqueue(cu_stream, r, regions, nullptr))
      std::fprintf(stderr, "enqueue refused\n"), std::exit(1);
  };
  // A flag word for the stream memory operations (device memory; the wait is always met).
  CUdeviceptr flag = 0;
  BENCH_CHECK(cuMemAlloc(&flag, 64));
  BENCH_CHECK(cuMemsetD8(flag, 0, 64));
  cudaEvent_t marker, side_done;
  BENCH_CHECK(cudaEventCreateWithFlags(&marker, cudaEventDisableTiming));
  BENCH_CHECK(cudaEventCreateWithFlags(&side_done, cudaEventDisableTiming));
  cudaStream_t side;
  BENCH_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  BENCH_CHECK(cudaEventRecord(side_done, side));  // a recorded event for the waits to name
  auto write_value = [&](long i) {
    BENCH_CHECK(cuStreamWriteValue32(cu_stream, flag, cuuint32_t(i), CU_STREAM_WRITE_VALUE_DEFAULT));
  };
  auto wait_value = [&] {
    BENCH_CHECK(cuStreamWaitValue32(cu_stream, flag + 4, 0, CU_STREAM_WAIT_VALUE_GEQ));
  };
  float* x = reinterpret_cast<float*>(pool);
  float* y = reinterpret_cast<float*>(pool + 8192);

  struct Case {
    const char* name;
    std::function<void(long)> run;
  };
  const std::vector<Case> cases = {
      {"empty kernel, 16 B params",
       [&](long) {
         unsigned long long a = 3, b = 4;
         void* args[] = {&a, &b};
         BENCH_CHECK(
             cuLaunchKernel(empty_small_fn, 1, 1, 1, 256, 1, 1, 0, cu_stream, args, nullptr));
       }},
      {"empty kernel, 808 B params",
       [&](long) {
         Params808 p{};
         void* args[] = {&p};
         BENCH_CHECK(cuLaunchKernel(empty_808_fn, 1, 1, 1, 256, 1, 1, 0, cu_stream, args, nullptr));
       }},
      {"empty kernel, 3.1 KB params (medium)",
       [&](long) {
         ParamsMedium p{};
         void* args[] = {&p};
         BENCH_CHECK(
             cuLaunchKernel(empty_medium_fn, 1, 1, 1, 256, 1, 1, 0, cu_stream, args, nullptr));
       }},
      {"reduce 4 KiB",
       [&](long i) {
         reduce_u64<<<1, 256, 0, stream>>>(reinterpret_cast<const ulonglong2*>(slice(i)), 256,
                                           sink);
       }},
      {"cuStreamIsCapturing",
       [&](long) {
         CUstreamCaptureStatus s;
         BENCH_CHECK(cuStreamIsCapturing(cu_stream, &s));
       }},
      {"lsf1 compact, 1 x 4 KiB, host slots", [&](long i) { direct(i, host_slots); }},
      {"lsf1 compact, 1 x 4 KiB, device slots", [&](long i) { direct(i, device_slots); }},
      {"engine enqueue 1 x 4 KiB", [&](long i) { enqueue(i, 1); }},
      {"engine enqueue 2 x 4 KiB", [&](long i) { enqueue(i, 2); }},
      {"engine enqueue 77 x 4 KiB (state call)", [&](long i) { enqueue(i, kStateRegions); }},
      {"job kernel (axpy 4 KiB)", [&](long) { axpy_small<<<4, 256, 0, stream>>>(x, y, 1024); }},
      {"job kernel + enqueue 2 x 4 KiB",
       [&](long i) {
         axpy_small<<<4, 256, 0, stream>>>(x, y, 1024);
         enqueue(i, 2);
       }},
      {"cuStreamWriteValue32", [&](long i) { write_value(i); }},
      {"cuStreamWaitValue32 (met)", [&](long) { wait_value(); }},
      {"cuEventRecord", [&](long) { BENCH_CHECK(cudaEventRecord(marker, stream)); }},
      {"cuStreamWaitEvent", [&](long) { BENCH_CHECK(cudaStreamWaitEvent(stream, side_done, 0)); }},
      {"job kernel + event record + wait event",
       [&](long) {
         axpy_small<<<4, 256, 0, stream>>>(x, y, 1024);
         BENCH_CHECK(cudaEventRecord(marker, stream));
         BENCH_CHECK(cudaStreamWaitEvent(stream, side_done, 0));
       }},
      {"job kernel + write value + wait value",
       [&](long i) {
         axpy_small<<<4, 256, 0, stream>>>(x, y, 1024);
         write_value(i);
         wait_value();
       }},
  };
  using clock = std::chrono::steady_clock;
  std::printf("%-40s %9s %9s %12s\n", "case", "host_us", "device_us", "queue_ms");
  long counter = 0;
  for (const Case& c : cases) {
    for (int i = 0; i < 200; ++i) c.run(counter++);  // warm-up
    BENCH_CHECK(cudaStreamSynchronize(stream));
    engine->poll(nullptr);
    double host_best = 1e30, device_best = 1e30, queue_ms = 0;
    for (int round = 0; round < 3; ++round) {
      // Host cost: issue n iterations, nothing ahead on the stream.
      auto t0 = clock::now();
      for (int i = 0; i < n; ++i) c.run(counter++);
      auto t1 = clock::now();
      BENCH_CHECK(cudaStreamSynchronize(stream));
      engine->poll(nullptr);
      host_best =
          std::min(host_best, std::chrono::duration<double, std::micro>(t1 - t0).count() / n);
      // Device cost: the same n iterations queued behind a spin kernel long enough to queue them.
      spin<<<1, 1, 0, stream>>>(60'000'000ull);
      BENCH_CHECK(cudaEventRecord(start, stream));
      t0 = clock::now();
      for (int i = 0; i < n; ++i) c.run(counter++);
      t1 = clock::now();
      BENCH_CHECK(cudaEventRecord(stop, stream));
      BENCH_CHECK(cudaEventSynchronize(stop));
      engine->poll(nullptr);
      float ms = 0;
      BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
      device_best = std::min(device_best, ms * 1000.0 / n);
      queue_ms = std::max(queue_ms, std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    // queue_ms >= 60 means the host could not queue all n behind the spin: device_us is then
    // an upper bound.
    std::printf("%-40s %9.3f %9.3f %12.1f\n", c.name, host_best, device_best, queue_ms);
    std::fflush(stdout);
  }
  const EngineStats s = engine->stats();
  std::printf("engine launches %llu failures %llu overflows %llu\n", (unsigned long long)s.launches,
              (unsigned long long)s.launch_failures, (unsigned long long)s.overflows);
  cuModuleUnload(module);
  return 0;
}
