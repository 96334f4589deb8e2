// The hash engine's tile kernels as the host sees them, on the fake GPU: a launch of few tiles
// returns one sum per tile in the partial ring, and poll() adds a region's sums, finalizes them
// (LSF1's last step) and delivers every region in slot order, interleaved with regions whose
// digests the batch kernels wrote whole. The kernels' arithmetic is tested against the
// reference elsewhere (hashing/: on the host and on the GPU).
#include <gtest/gtest.h>
#include <xxhash.h>

#include <string>
#include <vector>

#include "hashing/engine.h"
#include "hashing/layout.h"
#include "tests/cpu/collectors/fake_gpu.h"

namespace lockstep::hashing {
namespace {

CUresult fake_get_proc_address(const char* symbol, void** pfn, int, cuuint64_t,
                               CUdriverProcAddressQueryResult* status) {
  *pfn = testing::FakeGpu::instance().proc(symbol);
  if (status)
    *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

// What the fake GPU's tile kernel gives, finished on the host: its tile sums add to ptr ^ bytes.
uint64_t finalized(const Region& r) {
  const uint64_t words[2] = {r.ptr ^ r.bytes, r.bytes};
  return XXH64(words, sizeof words, lsf1::kFinalSeed);
}

// The engine on the fake GPU's driver entry points (null, with the reason printed, if it fails).
std::unique_ptr<HashEngine> fake_engine() {
  DriverApi api;
  std::string error;
  std::unique_ptr<HashEngine> engine;
  if (load_driver_api(fake_get_proc_address, &api, &error))
    engine = HashEngine::create(api, {}, &error);
  if (!engine) ADD_FAILURE() << error;
  return engine;
}

TEST(HashEngineTiles, TileSumsAreFinalizedOnTheHostAndDeliveredInSlotOrder) {
  testing::FakeGpu& gpu = testing::FakeGpu::instance();
  gpu.tile_kernels(true);
  auto engine = fake_engine();
  ASSERT_TRUE(engine);
  const CUstream stream = reinterpret_cast<CUstream>(0x77);
  // Few tiles (the tile kernels): empty, one short tile, three tiles and a bit.
  const std::vector<Region> small = {{0x10000, 0}, {0x20000, 100}, {0x40000, 3 * 16384 + 5}};
  // 1024 tiles, over the tile kernels' 512: the batch kernels write the digest whole.
  const std::vector<Region> big = {{0x1000000, 1024 * 16384}};
  gpu.hold(true);
  uint64_t first = 0;
  ASSERT_TRUE(engine->enqueue(stream, small.data(), 3, &first));
  ASSERT_TRUE(engine->enqueue(stream, big.data(), 1, nullptr));
  ASSERT_TRUE(engine->enqueue(stream, small.data(), 2, nullptr));
  std::vector<std::pair<uint64_t, uint64_t>> got;
  auto collect = [&](uint64_t slot, uint64_t digest) { got.emplace_back(slot, digest); };
  EXPECT_EQ(engine->poll(collect), 0u) << "nothing delivered before the GPU wrote it";
  gpu.release();
  gpu.hold(false);
  EXPECT_EQ(engine->poll(collect), 6u);
  const std::vector<uint64_t> expected = {finalized(small[0]),
                                          finalized(small[1]),
                                          finalized(small[2]),
                                          big[0].ptr ^ big[0].bytes,
                                          finalized(small[0]),
                                          finalized(small[1])};
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, first + i) << "slot order";
    EXPECT_EQ(got[i].second, expected[i]) << "region " << i;
  }
  // The partial ring turns over: many more tile launches than it has slots.
  size_t delivered = 0;
  for (int round = 0; round < 40000; ++round) {
    ASSERT_TRUE(engine->enqueue(stream, &small[2], 1, nullptr)) << "round " << round;
    delivered += engine->poll([&](uint64_t, uint64_t digest) {
      EXPECT_EQ(digest, finalized(small[2]));
    });
  }
  EXPECT_EQ(delivered, 40000u);
  gpu.tile_kernels(false);
}

// A launch copies its kernel's whole parameter struct (layout.h): 1024 regions' room is 24.6 KB,
// which cost the PyTorch hook's one launch of 77 parameters 12-17 us on the H200's host.
TEST(HashEngineCapacities, ALaunchTakesTheSmallestKernelThatHoldsItsRegions) {
  testing::FakeGpu& gpu = testing::FakeGpu::instance();
  auto engine = fake_engine();
  ASSERT_TRUE(engine);
  const CUstream stream = reinterpret_cast<CUstream>(0x78);
  std::vector<Region> regions;
  for (uint64_t i = 0; i < 1024; ++i) regions.push_back({0x100000 + i * 4096, 4096});
  std::vector<std::pair<uint32_t, uint32_t>> got;  // (regions, capacity) per launch
  for (uint32_t n : {1u, 32u, 33u, 77u, 128u, 129u, 1024u}) {
    gpu.reset_launches();
    ASSERT_TRUE(engine->enqueue(stream, regions.data(), n, nullptr)) << n;
    ASSERT_EQ(gpu.launches().size(), 1u) << n;
    got.emplace_back(gpu.launches()[0].regions, gpu.launches()[0].capacity);
    size_t delivered = 0;
    engine->poll([&](uint64_t, uint64_t digest) {
      EXPECT_EQ(digest, regions[delivered].ptr ^ regions[delivered].bytes) << n;
      ++delivered;
    });
    EXPECT_EQ(delivered, n);
  }
  const std::vector<std::pair<uint32_t, uint32_t>> expected = {
      {1, lsf1::kSmallBatch},   {32, lsf1::kSmallBatch},   {33, lsf1::kMediumBatch},
      {77, lsf1::kMediumBatch}, {128, lsf1::kMediumBatch}, {129, lsf1::kLargeBatch},
      {1024, lsf1::kLargeBatch}};
  EXPECT_EQ(got, expected);
}

}  // namespace
}  // namespace lockstep::hashing
