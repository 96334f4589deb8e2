// HashEngine on a real GPU: digests equal the host reference (KAT, random lengths, offsets and
// fresh random data), batched equals one at a time, the ring overflows loudly, capture is
// refused, and enqueue() returns at once while the stream is busy. Skips without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "cuda_test_env.h"
#include "hashing/engine.h"
#include "hashing/fingerprint.h"
#include "hashing/kat.h"
#include "hashing/layout.h"

namespace lockstep::hashing {
namespace {

using testing::TestDriver;
using Bytes = std::vector<uint8_t>;

// Caps the sizes (for compute-sanitizer runs): LSF1_GPU_TEST_MAX_BYTES.
uint64_t max_test_bytes() {
  const char* v = std::getenv("LSF1_GPU_TEST_MAX_BYTES");
  return v ? std::strtoull(v, nullptr, 0) : (17ull << 20);
}

class HashEngineGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = cuda_.load();
    if (why.empty()) load_driver_api_from_libcuda(&api_, &why);
    if (!why.empty()) GTEST_SKIP() << why;
    if (cuda_.init(0) != CUDA_SUCCESS) GTEST_SKIP() << "cuInit failed: no usable GPU";
    int count = 0;
    if (cuda_.deviceGetCount(&count) != CUDA_SUCCESS || count == 0)
      GTEST_SKIP() << "no CUDA device";
    CUdevice device = 0;
    ASSERT_EQ(cuda_.deviceGet(&device, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuda_.primaryCtxRetain(&context_, device), CUDA_SUCCESS);
    ASSERT_EQ(cuda_.ctxSetCurrent(context_), CUDA_SUCCESS);
    ASSERT_EQ(api_.streamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    const uint64_t seed = std::random_device{}();  // fresh data every run
    rng_.seed(seed);
    RecordProperty("seed", std::to_string(seed));
    std::printf("random seed %llu\n", static_cast<unsigned long long>(seed));
  }
  void TearDown() override {
    for (CUdeviceptr p : allocations_) api_.memFree(p);
    if (stream_) api_.streamDestroy(stream_);
  }

  std::unique_ptr<HashEngine> make_engine(EngineOptions options = {}) {
    std::string error;
    auto engine = HashEngine::create(api_, options, &error);
    EXPECT_NE(engine, nullptr) << error;
    return engine;
  }
  CUdeviceptr device_copy(const Bytes& host, size_t extra_front = 0) {
    CUdeviceptr p = 0;
    EXPECT_EQ(api_.memAlloc(&p, host.size() + extra_front + 1), CUDA_SUCCESS);
    allocations_.push_back(p);
    if (!host.empty())
      EXPECT_EQ(cuda_.memcpyHtoD(p + extra_front, host.data(), host.size()), CUDA_SUCCESS);
    // From pageable memory the copy may still be in flight on return; our stream does not
    // wait for the legacy stream (non-blocking), so wait here.
    EXPECT_EQ(cuda_.ctxSynchronize(), CUDA_SUCCESS);
    return p;
  }
  Bytes random_bytes(size_t n) {
    Bytes out(n);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const uint64_t v = rng_();
      std::memcpy(&out[i], &v, 8);
    }
    for (; i < n; ++i) out[i] = static_cast<uint8_t>(rng_());
    return out;
  }
  // Waits for the stream, then one poll() must hand back everything enqueued, in order.
  std::map<uint64_t, uint64_t> drain(HashEngine& engine, size_t expected) {
    EXPECT_EQ(api_.streamSynchronize(stream_), CUDA_SUCCESS);
    std::map<uint64_t, uint64_t> digests;
    uint64_t last = 0;
    bool first = true;
    const size_t n = engine.poll([&](uint64_t slot, uint64_t digest) {
      if (!first) EXPECT_EQ(slot, last + 1) << "out of order";
      first = false;
      last = slot;
      digests[slot] = digest;
    });
    EXPECT_EQ(n, expected);
    return digests;
  }

  TestDriver cuda_;
  DriverApi api_;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  std::vector<CUdeviceptr> allocations_;
  std::mt19937_64 rng_;
};

TEST_F(HashEngineGpu, KnownAnswersAtSeveralStartOffsets) {
  auto engine = make_engine();
  ASSERT_NE(engine, nullptr);
  size_t expected_count = 0;
  std::vector<uint64_t> expected;
  for (const KatEntry& entry : kKatTable) {
    if (entry.length > max_test_bytes()) continue;
    const Bytes data = kat_input(entry.length);
    for (size_t offset : {0, 1, 8, 13}) {
      const CUdeviceptr p = device_copy(data, offset);
      const Region region{p + offset, entry.length};
      uint64_t slot = 0;
      ASSERT_TRUE(engine->enqueue(stream_, &region, 1, &slot));
      expected.push_back(entry.expected);
      ++expected_count;
    }
  }
  const auto digests = drain(*engine, expected_count);
  size_t i = 0;
  for (const auto& [slot, digest] : digests)
    EXPECT_EQ(digest, expected[i++]) << "KAT row " << i / 4;
}

TEST_F(HashEngineGpu, RandomLengthsOffsetsAndDataMatchReference) {
  auto engine = make_engine();
  ASSERT_NE(engine, nullptr);
  const uint64_t cap = max_test_bytes();
  const Bytes data = random_bytes(cap + 64);
  const CUdeviceptr buffer = device_copy(data);
  struct Case {
    uint64_t offset, length;
  };
  std::vector<Case> cases;
  for (int i = 0; i < 300; ++i) {
    // Log-uniform lengths: every scale from a few bytes to the cap.
    const double scale = std::ldexp(1.0, int(rng_() % 64 == 0 ? 0 : rng_() % 24));
    uint64_t length = std::min<uint64_t>(cap, uint64_t(scale) + rng_() % uint64_t(scale));
    if (i % 50 == 0) length = 0;
    cases.push_back({rng_() % 64, length});
  }
  for (const Case& c : cases) {
    const Region region{buffer + c.offset, c.length};
    ASSERT_TRUE(engine->enqueue(stream_, &region, 1, nullptr));
  }
  // Regions that end exactly at the end of their allocation, misaligned (memcheck's view).
  std::vector<std::pair<Bytes, uint64_t>> tight;
  for (int i = 0; i < 20; ++i) {
    const uint64_t offset = 1 + rng_() % 15;
    Bytes bytes = random_bytes(rng_() % std::min<uint64_t>(cap, 100000));
    CUdeviceptr p = 0;
    ASSERT_EQ(api_.memAlloc(&p, offset + bytes.size() + (bytes.empty() ? 1 : 0)), CUDA_SUCCESS);
    allocations_.push_back(p);
    if (!bytes.empty())
      ASSERT_EQ(cuda_.memcpyHtoD(p + offset, bytes.data(), bytes.size()), CUDA_SUCCESS);
    ASSERT_EQ(cuda_.ctxSynchronize(), CUDA_SUCCESS);
    const Region region{p + offset, bytes.size()};
    ASSERT_TRUE(engine->enqueue(stream_, &region, 1, nullptr));
    tight.emplace_back(std::move(bytes), offset);
  }
  const auto digests = drain(*engine, cases.size() + tight.size());
  auto it = digests.begin();
  for (const Case& c : cases) {
    ASSERT_NE(it, digests.end());
    EXPECT_EQ(it->second, fingerprint(data.data() + c.offset, c.length))
        << "offset " << c.offset << " length " << c.length;
    ++it;
  }
  for (const auto& [bytes, offset] : tight) {
    ASSERT_NE(it, digests.end());
    EXPECT_EQ(it->second, fingerprint(bytes.data(), bytes.size()))
        << "tight, length " << bytes.size();
    ++it;
  }
}

TEST_F(HashEngineGpu, BatchedEqualsOneAtATime) {
  auto engine = make_engine();
  ASSERT_NE(engine, nullptr);
  const uint64_t cap = max_test_bytes();
  const Bytes data = random_bytes(cap + 64);
  const CUdeviceptr buffer = device_copy(data);
  for (uint32_t batch : {3u, 32u, 33u, 77u, 128u, 129u, 1000u, kMaxRegionsPerEnqueue}) {
    std::vector<Region> regions;
    for (uint32_t i = 0; i < batch; ++i) {
      // Mostly small, some spanning many tiles (the cross-warp scratch path), some empty.
      uint64_t length = i % 7 == 0 ? rng_() % cap : rng_() % 70000;
      if (i % 31 == 5) length = 0;
      const uint64_t offset = rng_() % 64;
      regions.push_back({buffer + offset, std::min<uint64_t>(length, cap)});
    }
    const uint64_t launches_before = engine->stats().launches;
    uint64_t first = 0;
    ASSERT_TRUE(engine->enqueue(stream_, regions.data(), batch, &first));
    EXPECT_EQ(engine->stats().launches, launches_before + 1) << "one launch per batch";
    const auto batched = drain(*engine, batch);
    for (const Region& r : regions) ASSERT_TRUE(engine->enqueue(stream_, &r, 1, nullptr));
    const auto single = drain(*engine, batch);
    ASSERT_EQ(batched.size(), batch);
    ASSERT_EQ(single.size(), batch);
    auto b = batched.begin();
    auto s = single.begin();
    for (uint32_t i = 0; i < batch; ++i, ++b, ++s) {
      EXPECT_EQ(b->first, first + i);
      EXPECT_EQ(b->second, s->second) << "batch " << batch << " region " << i;
      EXPECT_EQ(b->second, fingerprint(data.data() + (regions[i].ptr - buffer), regions[i].bytes))
          << "batch " << batch << " region " << i;
    }
  }
}

// 33 to 128 regions take the medium kernels (layout.h: a launch copies its whole parameter
// struct), whichever of the three kinds the bytes choose: tiles (few tiles), compact, bulk.
TEST_F(HashEngineGpu, MediumBatchesMatchReferenceOnEveryKernel) {
  auto engine = make_engine();
  ASSERT_NE(engine, nullptr);
  const Bytes data = random_bytes(48u << 20);
  const CUdeviceptr buffer = device_copy(data);
  // (regions, longest region): 77 short ones (77 tiles: the tile kernel), 100 of up to 256 KiB
  // (over 512 tiles, under 32 MiB: compact), 100 of 400-480 KiB (over 32 MiB: bulk).
  for (const auto& [count, longest, shortest] :
       {std::tuple{77u, 8000u, 0u}, std::tuple{100u, 256u << 10, 100u << 10},
        std::tuple{100u, 480u << 10, 400u << 10}}) {
    std::vector<Region> regions;
    for (uint32_t i = 0; i < count; ++i) {
      const uint64_t length = shortest + rng_() % (longest - shortest + 1);
      regions.push_back({buffer + rng_() % 64, length});
    }
    uint64_t first = 0;
    ASSERT_TRUE(engine->enqueue(stream_, regions.data(), count, &first));
    const auto digests = drain(*engine, count);
    ASSERT_EQ(digests.size(), count);
    size_t i = 0;
    for (const auto& [slot, digest] : digests) {
      const Region& r = regions[i];
      EXPECT_EQ(slot, first + i);
      EXPECT_EQ(digest, fingerprint(data.data() + (r.ptr - buffer), r.bytes))
          << count << " regions, region " << i << " length " << r.bytes;
      ++i;
    }
  }
}

// Launches that read 32 MiB or more take the unrolled bulk kernels: the same function.
TEST_F(HashEngineGpu, BulkKernelsMatchReference) {
  auto engine = make_engine();
  ASSERT_NE(engine, nullptr);
  const Bytes data = random_bytes(80u << 20);
  const CUdeviceptr buffer = device_copy(data);
  const std::vector<Region> singles = {{buffer, 80u << 20},
                                       {buffer + 5, (40u << 20) + 777},
                                       {buffer + 16, (33u << 20) + 3},
                                       {buffer + 9, (32u << 20) + 1}};
  for (const Region& r : singles) ASSERT_TRUE(engine->enqueue(stream_, &r, 1, nullptr));
  ASSERT_TRUE(engine->enqueue(stream_, singles.data(), uint32_t(singles.size()), nullptr));
  std::vector<Region> many;  // more than 32 regions, more than 32 MiB: the large bulk kernel
  for (int i = 0; i < 40; ++i) many.push_back({buffer + rng_() % 64, 1 + rng_() % (2u << 20)});
  ASSERT_TRUE(engine->enqueue(stream_, many.data(), uint32_t(many.size()), nullptr));
  std::vector<Region> all = singles;
  all.insert(all.end(), singles.begin(), singles.end());
  all.insert(all.end(), many.begin(), many.end());
  const auto digests = drain(*engine, all.size());
  size_t i = 0;
  for (const auto& [slot, digest] : digests) {
    const Region& r = all[i++];
    EXPECT_EQ(digest, fingerprint(data.data() + (r.ptr - buffer), r.bytes))
        << "region " << i - 1 << " offset " << r.ptr - buffer << " length " << r.bytes;
  }
}

TEST_F(HashEngineGpu, ConcurrentStreamsAndManyRingWraps) {
  EngineOptions options;
  options.ring_slots = 16;
  auto engine = make_engine(options);
  ASSERT_NE(engine, nullptr);
  const uint64_t cap = std::min<uint64_t>(max_test_bytes(), 2u << 20);
  const Bytes data = random_bytes(cap);
  const CUdeviceptr buffer = device_copy(data);
  CUstream other = nullptr;
  ASSERT_EQ(api_.streamCreate(&other, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  uint64_t next_slot = 0;
  for (int round = 0; round < 40; ++round) {
    std::vector<Region> regions;
    for (int i = 0; i < 6; ++i) regions.push_back({buffer + rng_() % 16, cap - 16 - rng_() % 1000});
    ASSERT_TRUE(engine->enqueue(stream_, regions.data(), 3, nullptr));
    ASSERT_TRUE(engine->enqueue(other, regions.data() + 3, 3, nullptr));
    ASSERT_EQ(api_.streamSynchronize(other), CUDA_SUCCESS);
    const auto digests = drain(*engine, 6);
    ASSERT_EQ(digests.size(), 6u);
    size_t i = 0;
    for (const auto& [slot, digest] : digests) {
      EXPECT_EQ(slot, next_slot++);
      EXPECT_EQ(digest, fingerprint(data.data() + (regions[i].ptr - buffer), regions[i].bytes))
          << "round " << round << " region " << i;
      ++i;
    }
  }
  api_.streamDestroy(other);
}

TEST_F(HashEngineGpu, FullRingRefusesAndCountsOverflow) {
  EngineOptions options;
  options.ring_slots = 8;
  auto engine = make_engine(options);
  ASSERT_NE(engine, nullptr);
  const Bytes data = random_bytes(4096);
  const CUdeviceptr buffer = device_copy(data);
  const std::vector<Region> regions(8, Region{buffer, 4096});
  ASSERT_TRUE(engine->enqueue(stream_, regions.data(), 5, nullptr));
  EXPECT_FALSE(engine->enqueue(stream_, regions.data(), 4, nullptr));
  EXPECT_EQ(engine->stats().overflows, 4u);
  ASSERT_TRUE(engine->enqueue(stream_, regions.data(), 3, nullptr));  // exactly full
  EXPECT_FALSE(engine->enqueue(stream_, regions.data(), 1, nullptr));
  EXPECT_EQ(engine->stats().overflows, 5u);
  const auto digests = drain(*engine, 8);
  for (const auto& [slot, digest] : digests) EXPECT_EQ(digest, fingerprint(data.data(), 4096));
  uint64_t first = 0;
  ASSERT_TRUE(engine->enqueue(stream_, regions.data(), 8, &first));  // room again after poll
  EXPECT_EQ(first, 8u);
  drain(*engine, 8);
  EXPECT_EQ(engine->stats().delivered, 16u);
}

TEST_F(HashEngineGpu, RefusesWhileCapturing) {
  auto engine = make_engine();
  ASSERT_NE(engine, nullptr);
  const Bytes data = random_bytes(1000);
  const CUdeviceptr buffer = device_copy(data);
  const Region region{buffer, 1000};
  ASSERT_EQ(cuda_.streamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  EXPECT_FALSE(engine->enqueue(stream_, &region, 1, nullptr));
  CUgraph graph = nullptr;
  ASSERT_EQ(cuda_.streamEndCapture(stream_, &graph), CUDA_SUCCESS);
  if (graph) cuda_.graphDestroy(graph);
  EXPECT_EQ(engine->stats().capture_refusals, 1u);
  EXPECT_EQ(engine->stats().launches, 0u);
  ASSERT_TRUE(engine->enqueue(stream_, &region, 1, nullptr));  // fine again after capture
  drain(*engine, 1);
}

// enqueue() must not wait for the stream: behind a 300 ms spin kernel it returns in far less,
// and the digest is not there until the spin is over.
TEST_F(HashEngineGpu, EnqueueReturnsWhileStreamIsBusy) {
  auto engine = make_engine();
  ASSERT_NE(engine, nullptr);
  CUmodule module = nullptr;
  CUfunction spin = nullptr;
  ASSERT_EQ(api_.moduleLoadData(&module, testing::kSpinPtx), CUDA_SUCCESS);
  ASSERT_EQ(api_.moduleGetFunction(&spin, module, "lockstep_test_spin"), CUDA_SUCCESS);
  const Bytes data = random_bytes(std::min<uint64_t>(max_test_bytes(), 64u << 20));
  const CUdeviceptr buffer = device_copy(data);
  const Region region{buffer, data.size()};
  ASSERT_TRUE(engine->enqueue(stream_, &region, 1, nullptr));  // warm-up: first launch costs
  drain(*engine, 1);

  constexpr uint64_t kSpinNs = 300'000'000;
  uint64_t spin_ns = kSpinNs;
  void* args[] = {&spin_ns};
  const auto spin_start = std::chrono::steady_clock::now();
  ASSERT_EQ(api_.launchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream_, args, nullptr), CUDA_SUCCESS);
  const auto before = std::chrono::steady_clock::now();
  ASSERT_TRUE(engine->enqueue(stream_, &region, 1, nullptr));
  const auto after = std::chrono::steady_clock::now();
  const size_t early = engine->poll([](uint64_t, uint64_t) {});
  const double enqueue_ms = std::chrono::duration<double, std::milli>(after - before).count();
  RecordProperty("enqueue_us", std::to_string(enqueue_ms * 1000));
  std::printf("enqueue behind a %.0f ms spin kernel took %.1f us\n", kSpinNs / 1e6,
              enqueue_ms * 1000);
  EXPECT_LT(enqueue_ms, 10.0) << "enqueue waited for the stream";
  const double since_spin_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - spin_start)
          .count();
  if (since_spin_ms < kSpinNs / 1e6 * 0.8) EXPECT_EQ(early, 0u) << "digest before the spin ended";
  const auto digests = drain(*engine, 1 - early);
  if (!digests.empty()) EXPECT_EQ(digests.begin()->second, fingerprint(data.data(), data.size()));
  api_.moduleUnload(module);
}

}  // namespace
}  // namespace lockstep::hashing
