// hash_variants: a look inside the shipped kernels (diagnostics, not the benchmark table).
// Times the bulk and the compact kernel of the embedded fatbin directly on sizes from 4 KiB to
// 1 GiB, aligned and misaligned, and once with the digest slots in device memory instead of
// pinned host memory (what the host-visible write costs); each digest is checked against the
// engine. Usage: hash_variants PATH/TO/hash_kernels.fatbin
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "hashing/engine.h"
#include "hashing/layout.h"
#include "bench_support.cuh"

namespace {

using namespace lockstep::hashing;
using lockstep::bench::spin;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: hash_variants FATBIN\n"), 2;
  BENCH_CHECK(cudaSetDevice(0));
  BENCH_CHECK(cudaFree(nullptr));
  int sms = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t kPool = 4ull << 30;
  unsigned char* pool = nullptr;
  BENCH_CHECK(cudaMalloc(&pool, kPool + 256));
  lockstep::bench::fill_words<<<4096, 256>>>(reinterpret_cast<unsigned*>(pool), (kPool + 256) / 4, 12345u);
  const lockstep::bench::DirectLaunchBuffers buffers = lockstep::bench::direct_launch_buffers(1024);
  lsf1::DigestSlot* const host_slots = buffers.host_slots;
  lsf1::DigestSlot* const device_slots = buffers.device_slots;
  void* const scratch = buffers.scratch;
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  BENCH_CHECK(cudaDeviceSynchronize());

  const auto engine = lockstep::bench::engine_or_exit();

  struct Case {
    const char* name;
    size_t offset, bytes;
    bool device_slots;
  };
  const Case cases[] = {
      {"4KiB", 0, 4096, false},         {"4KiB_slots_in_device_mem", 0, 4096, true},
      {"4KiB+3", 3, 4096, false},       {"64KiB", 0, 65536, false},
      {"1MiB", 0, 1u << 20, false},     {"16MiB", 0, 16u << 20, false},
      {"256MiB", 0, 256u << 20, false}, {"1GiB", 0, 1ull << 30, false},
      {"1GiB+3", 3, 1ull << 30, false}};
  std::vector<uint64_t> want;
  for (const Case& c : cases) {
    const Region r{reinterpret_cast<CUdeviceptr>(pool + c.offset), c.bytes};
    engine->enqueue(reinterpret_cast<CUstream>(stream), &r, 1, nullptr);
  }
  BENCH_CHECK(cudaStreamSynchronize(stream));
  engine->poll([&](uint64_t, uint64_t d) { want.push_back(d); });

  std::ifstream file(argv[1], std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(file)), {});
  CUmodule module;
  BENCH_CHECK(cuModuleLoadData(&module, image.data()));
  std::printf("kernel,regs,blocks_per_sm,case,median_us,tb_per_s,digest\n");
  for (const char* kernel : {lsf1::kSmallKernelName, lsf1::kSmallCompactKernelName}) {
    CUfunction fn;
    BENCH_CHECK(cuModuleGetFunction(&fn, module, kernel));
    int regs = 0, per_sm = 0;
    BENCH_CHECK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn));
    BENCH_CHECK(
        cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, lsf1::kThreadsPerBlock, 0));
    uint64_t slot_id = 0;
    for (size_t ci = 0; ci < std::size(cases); ++ci) {
      const Case& c = cases[ci];
      const int runs = c.bytes >= (256u << 20) ? 30 : 200;
      const size_t slices = std::max<size_t>(1, kPool / std::max<size_t>(c.bytes, 1u << 20)) - 1;
      std::vector<float> us;
      bool ok = true;
      for (int run = -3; run < runs; ++run) {
        // Fresh slices (no L2 reuse); every 10th run hashes slice 0, the engine's region.
        const size_t at =
            (run % 10 == 0 ? 0 : size_t(run + 3) % slices * std::max<size_t>(c.bytes, 1u << 20)) +
            c.offset;
        lsf1::BatchParams<lsf1::kSmallBatch> p{};
        p.first_slot = slot_id;
        p.slots = reinterpret_cast<uint64_t>(c.device_slots ? device_slots : host_slots);
        p.scratch = reinterpret_cast<uint64_t>(scratch);
        p.slot_mask = 1023;
        p.count = 1;
        p.regions[0] = {reinterpret_cast<uint64_t>(pool + at), c.bytes, 0,
                        uint32_t((c.bytes + lsf1::kTileBytes - 1) / lsf1::kTileBytes)};
        p.total_units = p.regions[0].units;
        const unsigned blocks = std::min<unsigned>(per_sm * sms, (p.total_units + 7) / 8);
        void* args[] = {&p};
        spin<<<1, 1, 0, stream>>>(100000);
        BENCH_CHECK(cudaEventRecord(start, stream));
        BENCH_CHECK(cuLaunchKernel(fn, blocks, 1, 1, lsf1::kThreadsPerBlock, 1, 1, 0,
                                   reinterpret_cast<CUstream>(stream), args, nullptr));
        BENCH_CHECK(cudaEventRecord(stop, stream));
        BENCH_CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (run >= 0) us.push_back(ms * 1000);
        if (run % 10 == 0 && !c.device_slots && host_slots[slot_id & 1023].digest != want[ci])
          ok = false;
        ++slot_id;
      }
      std::sort(us.begin(), us.end());
      const double med = us[us.size() / 2];
      std::printf("%s,%d,%d,%s,%.2f,%.3f,%s\n", kernel, regs, per_sm, c.name, med,
                  c.bytes / med / 1e6,
                  c.device_slots ? "-"
                  : ok           ? "ok"
                                 : "MISMATCH");
    }
  }
  cuModuleUnload(module);
  return 0;
}
