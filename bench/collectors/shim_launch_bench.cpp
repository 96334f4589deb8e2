// What a kernel launch costs through the whole shim (interposer and collectors) on the CPU, with
// a stand-in driver (fake_driver.cpp: every entry point returns at once; at full the hash engine's
// launches too, their digests delivered at once by the stand-in, fake_hash_engine.h). Not a test
// and not evidence of GPU work: the CPU side of a launch only, so that the shim's path can be
// measured on a machine without a GPU. At full every launch writes the region the launch before
// wrote (the set its hashes wait in), so each one carries a merged hash launch: the shim's
// costliest path, one call in three of the unseen job's. Run it through shim_launch_bench.py (untraced and at each level,
// interleaved, one or two shims); alone:
//
//   build/bench/collectors/shim_launch_bench [launches] [driver|runtime-stub] [narrow|wide]
//                                            [launch|free|alloc] [live allocations]
//
// driver (the default): cuLaunchKernel, as JAX's XLA and Triton launch; runtime-stub:
// __cudaLaunchKernel with a cudaKernel_t, as every kernel of PyTorch's own is launched (nvcc 13's
// `<<<...>>>`; a stand-in libcudart beside the stand-in driver). The two reach the collectors
// through different interceptors, laid out apart. narrow (the default): the kernel's parameters
// are an int and a struct of three pointers and four sizes; wide (driver only): the struct has
// fake_driver_entries.h's kWideExtraWords more nonzero words that are no pointer, as an
// elementwise kernel's offset calculator or a reduction's config has: at full each is a word the
// decoding reads and rules out. launch (the default) times and counts the launches; free
// (driver only) the job's stream-ordered frees instead, as PyTorch's cudaMallocAsync backend makes
// them (the allocator full runs on): each paced round allocates 1 MiB (cuMemAllocAsync), launches
// a kernel that writes it, and counts the cuMemFreeAsync of it, made while the launch's outputs
// wait in the set of deferred hashes (its "unpaced" figure is the whole round's); alloc counts the
// round's cuMemAllocAsync instead (the allocation hook). live allocations
// (default 0): that many stream-ordered allocations made first and kept, as a job's tensors are,
// so that the shim's allocation map is a job's size (a tree's depth: its lookups' data lines).
//
// prints "unpaced <ns>" (back-to-back launches: everything stays in the caches) and "paced <ns>"
// (the median launch with a job's work between two: 512 KiB of data read and 128 KiB of code
// run, which evicts the shim's lines from L1 and much of L2, as Python and the dispatcher do
// between a PyTorch job's launches). The untraced run's figures are the reference: the shim's
// own time is the difference.
#include <cuda.h>
#include <cuda_runtime_api.h>
// Under callgrind (launch_lines.py), only the paced launches are counted: their instructions and
// the cache lines they miss are what a launch costs when the job's work left the shim's lines
// cold. Outside valgrind the toggles are a few no-op instructions, alike in every mode.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#define CALLGRIND_TOGGLE_COLLECT
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "bench/collectors/fake_driver_entries.h"  // the wide kernel's handle and words

namespace {

// 2,048 distinct functions of straight-line code (constants differ, so none are merged).
template <int N>
[[gnu::noinline]] uint64_t job_code(uint64_t x) {
  x ^= x >> (N % 29 + 3);
  x *= 0x9e3779b97f4a7c15ull + 2 * N;
  x ^= x >> 31;
  x += 0xbf58476d1ce4e5b9ull ^ (uint64_t{N} << 17);
  x *= 0x94d049bb133111ebull - N;
  x ^= x >> (N % 13 + 7);
  x += uint64_t{N} * 0x2545f4914f6cdd1dull;
  return x;
}
template <size_t... I>
constexpr auto code_table(std::index_sequence<I...>) {
  return std::array<uint64_t (*)(uint64_t), sizeof...(I)>{&job_code<static_cast<int>(I)>...};
}
constexpr auto kJobCode = code_table(std::make_index_sequence<2048>{});

struct Params {
  int n;
  struct {
    uint64_t pointers[3];
    int64_t sizes[4];
    uint64_t calculator[lockstep::bench::kWideExtraWords];  // the wide kernel's alone
  } tensor;
};

}  // namespace

// nvcc 13's launch stub (crt/host_runtime.h declares it for generated code only).
extern "C" cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);

int main(int argc, char** argv) {
  const long launches = argc > 1 ? std::atol(argv[1]) : 200000;
  const char* api = argc > 2 ? argv[2] : "driver";
  const bool runtime_stub = std::strcmp(api, "runtime-stub") == 0;
  const char* params_kind = argc > 3 ? argv[3] : "narrow";
  const bool wide = std::strcmp(params_kind, "wide") == 0;
  const char* op = argc > 4 ? argv[4] : "launch";
  const bool frees = std::strcmp(op, "free") == 0, allocs = std::strcmp(op, "alloc") == 0;
  const bool rounds = frees || allocs;  // an allocation, a launch writing it, its free
  const long live = argc > 5 ? std::atol(argv[5]) : 0;
  if (launches <= 0 || (!runtime_stub && std::strcmp(api, "driver") != 0) ||
      (!wide && std::strcmp(params_kind, "narrow") != 0) || (wide && runtime_stub) ||
      (!rounds && std::strcmp(op, "launch") != 0) || (rounds && runtime_stub) || live < 0) {
    std::fprintf(stderr,
                 "usage: shim_launch_bench [launches > 0] [driver|runtime-stub] "
                 "[narrow|wide] [launch|free|alloc] [live allocations >= 0] (wide, free and "
                 "alloc with driver only)\n");
    return 2;
  }
  Params params{};
  params.n = 1 << 20;
  params.tensor.pointers[0] = params.tensor.pointers[1] = params.tensor.pointers[2] = 0x7f0000000000;
  // Dividers and strides: small numbers, none of them inside an allocation.
  for (size_t i = 0; i < lockstep::bench::kWideExtraWords; ++i)
    params.tensor.calculator[i] = 0x100000001ull * (i % 25 + 1);
  void* args[] = {&params.n, &params.tensor};
  auto* function = wide ? lockstep::bench::kWideFunction : reinterpret_cast<CUfunction>(0x1000);
  auto* stream = reinterpret_cast<CUstream>(0x2000);
  auto* kernel = reinterpret_cast<cudaKernel_t>(0x1000);
  auto launch = [&] {
    if (runtime_stub)
      return static_cast<int>(__cudaLaunchKernel(kernel, dim3(256), dim3(128), args, 0,
                                                 reinterpret_cast<cudaStream_t>(stream)));
    return static_cast<int>(
        cuLaunchKernel(function, 256, 1, 1, 128, 1, 1, 0, stream, args, nullptr));
  };
  // An allocation first, as a job makes: the shim's tracer is made by it at every level (at
  // metrics, where a launch is no event, nothing else would make it), so that LOCKSTEP_DEBUG's
  // report at exit covers the launches at metrics too (their real calls).
  CUdeviceptr allocation = 0;
  if (cuMemAlloc(&allocation, 1 << 20) != CUDA_SUCCESS) {
    std::fprintf(stderr, "shim_launch_bench: the stand-in cuMemAlloc failed\n");
    return 1;
  }
  for (long i = 0; i < live; ++i) {
    CUdeviceptr kept = 0;
    if (cuMemAllocAsync(&kept, 1 << 20, stream) != CUDA_SUCCESS) {
      std::fprintf(stderr, "shim_launch_bench: the stand-in cuMemAllocAsync failed\n");
      return 1;
    }
  }
  for (int i = 0; i < 1000; ++i) launch();  // warm: the kernel's name, the stream's ordinal
  int failed = 0;
  const auto start = std::chrono::steady_clock::now();
  // One op: a launch, or (free, alloc) a fresh allocation, a launch writing it, then its free.
  auto allocate = [&] {
    CUdeviceptr fresh = 0;
    failed += cuMemAllocAsync(&fresh, 1 << 20, stream) != CUDA_SUCCESS;
    return fresh;
  };
  auto write = [&](CUdeviceptr fresh) {
    params.tensor.pointers[2] = fresh;
    failed += launch() != 0;
    return fresh;
  };
  auto alloc_and_write = [&] { return write(allocate()); };
  for (long i = 0; i < launches; ++i) {
    if (!rounds) {
      failed += launch() != 0;
      continue;
    }
    failed += cuMemFreeAsync(alloc_and_write(), stream) != CUDA_SUCCESS;
  }
  const double unpaced =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
      static_cast<double>(launches);

  // At full under valgrind, where one thread runs at a time, a pause before each counted launch
  // lets the collector (it polls every millisecond, and hands retired records back for reuse) do
  // its work between two, as it does beside a job's: else it hardly runs, and each launch
  // allocates a new record. Broad's counts keep their method (launch_lines.py's bounds).
  const char* level = std::getenv("LOCKSTEP_LEVEL");
  const bool pause_for_collector =
      RUNNING_ON_VALGRIND && level != nullptr && std::strcmp(level, "full") == 0;
  std::vector<uint64_t> job_memory((512u << 10) / sizeof(uint64_t), 1);
  std::vector<double> paced(static_cast<size_t>(std::min<long>(launches / 20, 20000)) + 1);
  uint64_t sink = 0;
  for (double& cost : paced) {
    for (size_t j = 0; j < job_memory.size(); j += 8) sink += job_memory[j];
    if (pause_for_collector) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    for (auto* code : kJobCode) sink = code(sink);
    const CUdeviceptr fresh = frees ? alloc_and_write() : 0;
    CUdeviceptr made = 0;
    const auto t0 = std::chrono::steady_clock::now();
    CALLGRIND_TOGGLE_COLLECT;
    if (frees)
      failed += cuMemFreeAsync(fresh, stream) != CUDA_SUCCESS;
    else if (allocs)
      failed += cuMemAllocAsync(&made, 1 << 20, stream) != CUDA_SUCCESS;
    else
      failed += launch() != 0;
    CALLGRIND_TOGGLE_COLLECT;
    cost = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    if (allocs) failed += cuMemFreeAsync(write(made), stream) != CUDA_SUCCESS;
  }
  // And freed, as a job does: LOCKSTEP_DEBUG times the job's allocation calls apart ("alloc
  // call", real_calls_timed.py counts them).
  if (cuMemFree(allocation) != CUDA_SUCCESS) ++failed;
  std::nth_element(paced.begin(), paced.begin() + paced.size() / 2, paced.end());
  std::printf("%s%s %s %ld: unpaced %.1f ns, paced %.1f ns (median of %zu)%s\n", api,
              wide ? " wide" : "",
              frees    ? "frees"
              : allocs ? "allocations"
                       : "launches",
              launches, unpaced, paced[paced.size() / 2] + static_cast<double>(sink & 1) * 1e-9,
              paced.size(), failed ? " FAILED LAUNCHES" : "");
  return failed ? 1 : 0;
}
