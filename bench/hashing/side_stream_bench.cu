// side_stream_bench: would hashing on a side stream, launched by a helper thread, cost the job
// less than the hash launch the full level puts on the job's own stream today? (issue #34: the
// launching thread's own time is what the unseen job's x1.5 target runs out of, and the hash
// kernels' device time, serialized behind the job's kernels, is what the GPU-bound job's x1.25
// runs out of.) A model of the full level's pattern, not the shim: each iteration launches one
// job kernel that writes an output buffer, and that output is fingerprinted:
//   untraced     the job kernel alone
//   in-stream    the job kernel, then HashEngine::enqueue of its output on the job's stream (the
//                shim's way: the next kernel is ordered after the hash by the stream)
//   side-stream  the job kernel, then an event recorded after it on the job's stream; a helper
//                thread makes a side stream wait on that event, enqueues the hash there and
//                records a "hashed" event. Before a job kernel writes a buffer whose previous
//                hash may not have run, the job's stream waits on that hash's event (the rule
//                a shim would need: no writer overtakes the hash of what it overwrites).
//   side-batched the same, but the helper takes every post waiting when it looks: one wait on
//                the newest event, one launch for all their regions (fewer driver calls when
//                the job thread outpaces it).
//   side-value   (only with the argument "value", in place of the two above) side-batched, but
//                the helper signals "hashed through iteration k" by a stream memory write of k
//                (cuStreamWriteValue32) after its launch, and the job's stream waits on that
//                value (cuStreamWaitValue32, GEQ): the job thread never waits for the helper to
//                have launched, only the GPU does. Not in the default run: it never ended, on an
//                H100 (killed at 100 s, twice) and on an H200 (15 s), 2026-12-06. CUDA does not
//                see an order made by stream memory operations (its documentation: improper use
//                may deadlock); presumably the queued wait held the very write it waited for.
//                A shim must not risk that: its waits on the helper are events.
// Workloads: a 4 KiB axpy (launch-bound: the host's time is the step), a 16 MiB copy-like
// kernel (memory-bound), and a compute-bound kernel writing 4 MiB (the GEMM-like case where a
// memory-bound hash could run beside it); each with the output written in place (one buffer:
// every kernel waits on the previous hash) and rotating over 4 buffers.
// Figures per iteration: host_us (the job thread's own time to issue it, which is what the
// launching thread pays), wall_us (issue to both streams done: what a step pays), launches
// (hash launches per iteration), and the digests: the side stream's must equal the in-stream
// ones iteration by iteration (else it read bytes a later kernel had overwritten, and the
// scheme is unsound). Exit 1 on any mismatch.
// Usage: side_stream_bench [iterations] [value]
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench_support.cuh"
#include "hashing/engine.h"
#include "hashing/layout.h"

namespace {

using namespace lockstep::hashing;

__global__ void axpy(const float* x, float* y, size_t n, float step) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    y[i] = 0.5f * y[i] + x[i] + step;
}
// Compute-bound: `rounds` dependent FMAs per element, then one store.
__global__ void compute(const float* x, float* y, size_t n, float step, int rounds) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float a = x[i] + step, b = y[i];
    for (int r = 0; r < rounds; ++r) b = fmaf(b, 0.999f, a);
    y[i] = b;
  }
}

// Small values, every word different (the FMA chains stay finite).
__global__ void init(float* x, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    x[i] = float(i % 4093) * 1e-3f;
}

struct Workload {
  const char* name;
  size_t bytes;  // the output each iteration writes (and is hashed)
  int grid;
  int rounds;  // 0: axpy
};

enum class Mode { Untraced, InStream, SideStream, SideBatched, SideValue };
const char* mode_name(Mode m) {
  return m == Mode::Untraced      ? "untraced"
         : m == Mode::InStream    ? "in-stream"
         : m == Mode::SideStream  ? "side-stream"
         : m == Mode::SideBatched ? "side-batched"
                                  : "side-value";
}

// What the job thread hands the helper: one iteration's hash.
struct Post {
  long iteration;
  CUdeviceptr ptr;
  uint64_t bytes;
};

constexpr int kEvents = 64;  // events in flight per kind; the job thread never laps the helper

struct Harness {
  HashEngine* engine;
  cudaStream_t job, side;
  cudaEvent_t written[kEvents], hashed[kEvents];
  // Single-producer single-consumer ring of posts; counters only grow.
  std::vector<Post> ring = std::vector<Post>(kEvents);
  std::atomic<long> posted{0}, consumed{0}, recorded{0};
  std::atomic<bool> stop{false};
  std::vector<uint64_t> first_slot;  // per iteration: the hash's slot (its digest's key)
  std::vector<int> hashed_by;        // per iteration: the hashed event after its hash
  bool batch = false;                // the helper merges every post waiting into one launch
  bool value = false;                // "hashed through k" as a stream memory write, not an event
  CUdeviceptr hashed_through = 0;    // that word (device memory)
};

// The helper: for each post (or, batching, every post waiting when it looks), the side stream
// waits on the newest written event among them (events on one stream are ordered), one hash
// launch reads them all, and a hashed event follows it.
void helper_loop(Harness* h) {
  BENCH_CHECK(cudaSetDevice(0));
  const CUstream side = reinterpret_cast<CUstream>(h->side);
  std::vector<Region> regions;
  long next = 0, batches = 0;
  while (true) {
    const long posted = h->posted.load(std::memory_order_acquire);
    if (posted == next) {
      if (h->stop.load(std::memory_order_acquire) &&
          h->posted.load(std::memory_order_acquire) == next)
        return;
      continue;  // spins: a real helper would park; its core is not the job's
    }
    const long end = h->batch ? std::min(posted, next + long(kMaxRegionsPerEnqueue)) : next + 1;
    regions.clear();
    for (long k = next; k < end; ++k) {
      const Post& p = h->ring[k % kEvents];
      regions.push_back({p.ptr, p.bytes});
    }
    BENCH_CHECK(cudaStreamWaitEvent(h->side, h->written[(end - 1) % kEvents], 0));
    h->consumed.store(end, std::memory_order_release);
    uint64_t first = 0;
    if (!h->engine->enqueue(side, regions.data(), uint32_t(regions.size()), &first))
      std::fprintf(stderr, "enqueue refused\n"), std::exit(1);
    const int event = int(batches++ % kEvents);
    for (long k = next; k < end; ++k) {
      h->first_slot[k] = first + uint64_t(k - next);
      h->hashed_by[k] = event;
    }
    if (h->value)
      BENCH_CHECK(cuStreamWriteValue32(side, h->hashed_through, cuuint32_t(end),
                                       CU_STREAM_WRITE_VALUE_DEFAULT));
    else
      BENCH_CHECK(cudaEventRecord(h->hashed[event], h->side));
    h->recorded.store(end, std::memory_order_release);
    next = end;
  }
}

struct Result {
  double host_us, wall_us;
  double launches = 0;            // hash launches per iteration
  std::vector<uint64_t> digests;  // per iteration (empty untraced)
};

Result run(Harness& h, const Workload& w, Mode mode, int buffers, float* x, float* out, int n) {
  using clock = std::chrono::steady_clock;
  const size_t elems = w.bytes / sizeof(float);
  const bool side =
      mode == Mode::SideStream || mode == Mode::SideBatched || mode == Mode::SideValue;
  h.batch = mode == Mode::SideBatched || mode == Mode::SideValue;
  h.value = mode == Mode::SideValue;
  BENCH_CHECK(cuMemsetD32Async(h.hashed_through, 0, 1, reinterpret_cast<CUstream>(h.job)));
  h.first_slot.assign(n, ~0ull);
  h.hashed_by.assign(n, -1);
  h.posted = 0, h.consumed = 0, h.recorded = 0, h.stop = false;
  std::thread helper;
  if (side) helper = std::thread(helper_loop, &h);
  // Every buffer starts from the same bytes, so each mode computes the same outputs.
  BENCH_CHECK(cudaMemsetAsync(out, 0, w.bytes * buffers, h.job));
  BENCH_CHECK(cudaStreamSynchronize(h.job));
  const CUstream job = reinterpret_cast<CUstream>(h.job);
  std::vector<long> last_hash(buffers, -1);  // per buffer: the iteration whose hash reads it
  const uint64_t launches_before = h.engine->stats().launches;
  const auto t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    const int b = i % buffers;
    float* y = out + elems * b;
    if (side && last_hash[b] >= 0) {
      // This kernel overwrites what that hash reads: the job's stream waits for the hash.
      const long k = last_hash[b];
      if (h.value) {
        BENCH_CHECK(cuStreamWaitValue32(job, h.hashed_through, cuuint32_t(k + 1),
                                        CU_STREAM_WAIT_VALUE_GEQ));
      } else {
        while (h.recorded.load(std::memory_order_acquire) <= k) {}
        BENCH_CHECK(cudaStreamWaitEvent(h.job, h.hashed[h.hashed_by[k]], 0));
      }
    }
    if (w.rounds == 0)
      axpy<<<w.grid, 256, 0, h.job>>>(x, y, elems, float(i));
    else
      compute<<<w.grid, 256, 0, h.job>>>(x, y, elems, float(i), w.rounds);
    const Region r{reinterpret_cast<CUdeviceptr>(y), w.bytes};
    if (mode == Mode::InStream) {
      uint64_t first = 0;
      if (!h.engine->enqueue(job, &r, 1, &first))
        std::fprintf(stderr, "enqueue refused\n"), std::exit(1);
      h.first_slot[i] = first;
    } else if (side) {
      // The event may be re-recorded only after the helper made the side stream wait on it.
      while (h.consumed.load(std::memory_order_acquire) + kEvents <= i) {}
      BENCH_CHECK(cudaEventRecord(h.written[i % kEvents], h.job));
      h.ring[i % kEvents] = {i, r.ptr, r.bytes};
      h.posted.store(i + 1, std::memory_order_release);
      last_hash[b] = i;
    }
  }
  const auto t1 = clock::now();
  if (side) {
    h.stop.store(true, std::memory_order_release);
    helper.join();
  }
  BENCH_CHECK(cudaStreamSynchronize(h.job));
  BENCH_CHECK(cudaStreamSynchronize(h.side));
  const auto t2 = clock::now();
  Result result;
  result.host_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  result.wall_us = std::chrono::duration<double, std::micro>(t2 - t0).count() / n;
  result.launches = double(h.engine->stats().launches - launches_before) / n;
  if (mode != Mode::Untraced) {
    std::unordered_map<uint64_t, uint64_t> by_slot;
    h.engine->poll([&](uint64_t slot, uint64_t digest) { by_slot[slot] = digest; });
    result.digests.assign(n, 0);
    for (int i = 0; i < n; ++i) {
      const auto it = by_slot.find(h.first_slot[i]);
      if (it == by_slot.end()) std::fprintf(stderr, "iteration %d: no digest\n", i), std::exit(1);
      result.digests[i] = it->second;
    }
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  const bool value_only = argc > 2 && std::string(argv[2]) == "value";
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows survive a kill at a time limit
  BENCH_CHECK(cudaSetDevice(0));
  BENCH_CHECK(cudaFree(nullptr));
  EngineOptions options;
  options.ring_slots = 1u << 16;
  const auto engine = lockstep::bench::engine_or_exit(options);
  int sms = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  Harness h;
  h.engine = engine.get();
  BENCH_CHECK(cudaStreamCreateWithFlags(&h.job, cudaStreamNonBlocking));
  BENCH_CHECK(cudaStreamCreateWithFlags(&h.side, cudaStreamNonBlocking));
  BENCH_CHECK(cuMemAlloc(&h.hashed_through, 64));
  for (int e = 0; e < kEvents; ++e) {
    BENCH_CHECK(cudaEventCreateWithFlags(&h.written[e], cudaEventDisableTiming));
    BENCH_CHECK(cudaEventCreateWithFlags(&h.hashed[e], cudaEventDisableTiming));
  }
  const std::vector<Workload> workloads = {
      {"axpy 4 KiB", 4096, 4, 0},
      {"axpy 16 MiB", 16u << 20, 4 * sms, 0},
      {"compute 4 MiB", 4u << 20, 4 * sms, 2000},
  };
  size_t most = 0;
  for (const Workload& w : workloads) most = std::max(most, w.bytes);
  constexpr int kMostBuffers = 4;
  float *x = nullptr, *out = nullptr;
  BENCH_CHECK(cudaMalloc(&x, most));
  BENCH_CHECK(cudaMalloc(&out, most * kMostBuffers));
  init<<<4 * sms, 256>>>(x, most / sizeof(float));
  BENCH_CHECK(cudaDeviceSynchronize());

  std::printf("%-14s %-7s %-12s %9s %9s %8s %8s %8s %s\n", "workload", "buffers", "mode", "host_us",
              "wall_us", "host_x", "wall_x", "launches", "digests");
  int mismatches = 0;
  for (const Workload& w : workloads) {
    const int iterations = w.rounds > 0 || w.bytes > (1u << 20) ? std::max(50, n / 4) : n;
    for (const int buffers : {1, kMostBuffers}) {
      constexpr int kModes = 4;
      const Mode modes[kModes] = {Mode::Untraced, Mode::InStream,
                                  value_only ? Mode::SideValue : Mode::SideStream,
                                  value_only ? Mode::SideValue : Mode::SideBatched};
      // Warm-up, then the best of 3 rounds per mode, the modes interleaved round by round.
      for (Mode m : modes) run(h, w, m, buffers, x, out, std::min(iterations, 50));
      Result best[kModes];
      int differ[kModes] = {};  // digests unequal to the same round's in-stream ones
      for (auto& b : best) b.host_us = b.wall_us = 1e30;
      for (int round = 0; round < 3; ++round) {
        Result r[kModes];
        for (int k = 0; k < kModes; ++k) r[k] = run(h, w, modes[k], buffers, x, out, iterations);
        for (int k = 0; k < kModes; ++k) {
          best[k].host_us = std::min(best[k].host_us, r[k].host_us);
          best[k].wall_us = std::min(best[k].wall_us, r[k].wall_us);
          best[k].launches = r[k].launches;
          if (k >= 2)
            for (size_t i = 0; i < r[k].digests.size(); ++i)
              differ[k] += r[k].digests[i] != r[1].digests[i];
        }
      }
      for (int k = 0; k < kModes; ++k) {
        std::string digests = "-";
        if (modes[k] == Mode::InStream) digests = "reference";
        if (k >= 2) {
          mismatches += differ[k];
          digests = differ[k] == 0 ? "equal" : std::to_string(differ[k]) + " differ";
        }
        if (value_only && k == 3) continue;  // the same mode twice
        std::printf("%-14s %-7d %-12s %9.3f %9.3f %8.3f %8.3f %8.2f %s\n", w.name, buffers,
                    mode_name(modes[k]), best[k].host_us, best[k].wall_us,
                    best[k].host_us / best[0].host_us, best[k].wall_us / best[0].wall_us,
                    best[k].launches, digests.c_str());
        std::fflush(stdout);
      }
    }
  }
  const EngineStats s = engine->stats();
  std::printf("engine launches %llu failures %llu overflows %llu; digest mismatches %d\n",
              (unsigned long long)s.launches, (unsigned long long)s.launch_failures,
              (unsigned long long)s.overflows, mismatches);
  return mismatches == 0 ? 0 : 1;
}
