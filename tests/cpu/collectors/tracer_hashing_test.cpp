// Hash scheduling (collectors/tracer_hashing.cpp): merged and deferred hash launches, what
// flushes them, stream-ordered frees that wait for them, merging off.
#include <sys/wait.h>
#include <unistd.h>

#include "common/self_time.h"
#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

// Three kernels on one stream: the first hashes its inputs alone, each later launch carries the
// previous kernel's outputs with its own inputs, and the last outputs wait for an order point.
// A region that is one kernel's output and the next one's input (same pointer, same extent) is
// hashed once in the merged launch, its digest filling both records. (Each region runs to the
// allocation's end: a later pointer's region would lie inside an earlier one's, see
// ARegionInsideAnotherTakesItsDigest; here the later ones start lower.)
TEST_F(MergeTest, OneHashLaunchPerKernelOnAStream) {
  const std::string log = run([](std::string* text) {
    launch_on(kStreamS, kMergeBase + 512);
    launch_on(kStreamS, kMergeBase + 256);  // out 512 + in 256: two regions
    launch_on(kStreamS, kMergeBase + 256);  // out 256 + in 256: one region, two records
    *text = hash_launches() + " |";
    stream_order_point();  // e.g. cuEventRecord: the deferred outputs go first
    *text += " " + hash_launches();
  });
  EXPECT_EQ(log, "S1 S2 S1 | S1 S2 S1 S1");
  expect_kernel_fingerprints(3);
}

TEST_F(MergeTest, AKernelOnAnotherStreamFlushesFirst) {
  const std::string log = run([](std::string* text) {
    launch_on(kStreamS, kMergeBase + 256);
    launch_on(kStreamT, kMergeBase + 256);
    stream_order_point();
    *text = hash_launches();
  });
  EXPECT_EQ(log, "S1 S1 T1 T1");
  expect_kernel_fingerprints(2);
}

// Deferred outputs are hashed before their memory is freed, and before any other traced call.
TEST_F(MergeTest, FreesAndOtherCallsFlushFirst) {
  const std::string log = run([](std::string* text) {
    launch_on(kStreamS, kMergeBase + 256);
    *text = hash_launches() + " |";
    on_free(kMergeBase + (1 << 30));  // not ours, but a free: flushes
    *text += " " + hash_launches() + " |";
    launch_on(kStreamS, kMergeBase + 256);
    marker_step("step");
    *text += " " + hash_launches() + " |";
    launch_on(kStreamS, kMergeBase + 256);
    const void* exec = reinterpret_cast<const void*>(0x9000);  // a graph never instantiated
    graph_launch_end(graph_launch_begin(exec, kStreamS, false), CUDA_SUCCESS);
    *text += " " + hash_launches();
  });
  EXPECT_EQ(log, "S1 | S1 S1 | S1 S1 S1 S1 | S1 S1 S1 S1 S1 S1");
  expect_kernel_fingerprints(3);
}

// PyTorch on cudaMallocAsync frees a tensor right after the op that used it last. A stream-
// ordered free while outputs are deferred is taken over (the job's call succeeds at once) and
// made on its own stream right after the deferred hashes are enqueued: no launch of its own,
// and the memory stays valid until the hashes have read it. With nothing deferred, or with
// merging off, the free goes through at once.
TEST_F(MergeTest, StreamOrderedFreesWaitForTheDeferredHashes) {
  const std::string log = run([](std::string* text) {
    const CUdeviceptr temp = kMergeBase + (1 << 30);
    on_alloc(temp, 4096);
    *text = on_stream_free(temp, kStreamT, false) ? "taken" : "forwarded";  // nothing deferred
    on_alloc(temp, 4096);
    launch_on(kStreamS, kMergeBase + 256);
    *text += on_stream_free(temp, kStreamT, false) ? " taken" : " forwarded";
    *text += " " + hash_launches() + " |";
    launch_on(kStreamS, kMergeBase + 256);  // merged launch, then the free
    *text += " " + hash_launches() + " |";
    on_alloc(temp, 4096);
    *text += on_stream_free(temp, kStreamS, false) ? " taken" : " forwarded";
    stream_order_point();  // flush alone, then the free
    *text += " " + hash_launches();
  });
  EXPECT_EQ(log, "forwarded taken S1 | S1 S1 free@T | taken S1 S1 free@T S1 free@S");
  expect_kernel_fingerprints(2);
  const std::string off = run(
      [](std::string* text) {
        const CUdeviceptr temp = kMergeBase + (1 << 30);
        on_alloc(temp, 4096);
        launch_on(kStreamS, kMergeBase + 256);
        *text = on_stream_free(temp, kStreamT, false) ? "taken" : "forwarded";
      },
      /*merge=*/false);
  EXPECT_EQ(off, "forwarded");
}

// The shim makes a held-back free itself, later, inside another of the job's calls (the launch
// whose merged hash launch it follows). Its driver time is the job's own allocation call, moved:
// LOCKSTEP_DEBUG's self time keeps it out of the shim's (a free of 3 ms here would otherwise be
// a slow call of the launch's) and counts it as an allocation call.
TEST_F(MergeTest, AHeldBackFreesDriverTimeIsTheJobsAllocCallNotTheShimsTime) {
  std::string debug;
  const std::string log = run(
      [](std::string* text) {
        using self_time::Phase;
        const CUdeviceptr temp = kMergeBase + (1 << 30);
        on_alloc(temp, 4096);
        launch_on(kStreamS, kMergeBase + 256);
        *text = on_stream_free(temp, kStreamT, false) ? "taken" : "forwarded";
        lockstep::testing::FakeGpu::instance().free_takes_ns(3'000'000);
        const self_time::Totals shim = self_time::totals(Phase::CallBegin);
        const self_time::Totals real = self_time::totals(Phase::AllocCall);
        {
          self_time::Scope call(Phase::CallBegin);  // as the launch's hook opens it
          launch_on(kStreamS, kMergeBase + 256);     // merged launch, then the free
        }
        lockstep::testing::FakeGpu::instance().free_takes_ns(0);
        *text += " " + hash_launches();
        // Time added to each phase (steady and slow calls alike), against margins a preempted
        // launch would not reach: the shim's under half the free, the real calls' most of it.
        const auto added_ms = [](Phase phase, const self_time::Totals& before) {
          const self_time::Totals now = self_time::totals(phase);
          const uint64_t ticks = now.ticks + now.slow_ticks - before.ticks - before.slow_ticks;
          return double(ticks) * self_time::ns_per_tick() / 1e6;
        };
        *text += std::string(" | shim under 1.5 ms: ") +
                 (added_ms(Phase::CallBegin, shim) < 1.5 ? "yes" : "no") +
                 ", alloc calls over 2.5 ms: " +
                 (added_ms(Phase::AllocCall, real) > 2.5 ? "yes" : "no");
      },
      /*merge=*/true, /*reuse=*/false, &debug);
  EXPECT_EQ(log, "taken S1 S1 free@T | shim under 1.5 ms: yes, alloc calls over 2.5 ms: yes")
      << debug;
}

// GEMMs and async device copies merge like kernels: their inputs ride with the previous
// outputs, their outputs wait for the next launch on their stream. (No cuBLAS here: the GEMM's
// stream is the legacy default stream, '?'.) A synchronous copy hashes its output at once.
TEST_F(MergeTest, GemmsAndAsyncCopiesMergeLikeKernels) {
  const std::string log = run([](std::string* text) {
    launch_on(nullptr, kMergeBase + 256);  // ?1: its input
    CublasGemm gemm;
    gemm.api = "cublasSgemm_v2";
    gemm.m = gemm.n = gemm.k = 2, gemm.lda = gemm.ldb = gemm.ldc = 2;
    gemm.A = reinterpret_cast<void*>(kMergeBase), gemm.B = reinterpret_cast<void*>(kMergeBase + 64);
    gemm.C = reinterpret_cast<void*>(kMergeBase + 128);
    cublas_gemm_end(cublas_gemm_begin(gemm), 0);  // ?4: kernel output + A, B, C
    MemoryOp copy = async_copy(nullptr);
    memory_op_end(memory_op_begin(copy), 0);  // ?1: D (device to device: no input region)
    launch_on(nullptr, kMergeBase + 256);     // ?2: the copy's dst + the kernel's input
    copy.is_async = false;
    copy.api = "cudaMemcpy";
    memory_op_end(memory_op_begin(copy), 0);  // ?1: the kernel's output; ?1: dst at once
    *text = hash_launches();
  });
  EXPECT_EQ(log, "?1 ?4 ?1 ?2 ?1 ?1");
}

// A call on a capturing stream has not run: its outputs are not deferred (a flush after the
// capture ended would hash whatever is there then), and nothing is launched for it.
TEST_F(MergeTest, OutputsOfACapturedCallAreNotDeferred) {
  const std::string log = run([](std::string* text) {
    capture_begins();  // the capture-begin hook's, as in a job
    memory_op_end(memory_op_begin(async_copy(kCapturingStream)), 0);
    launch_on(kStreamS, kMergeBase + 256);  // would flush the copy's dst first, had it waited
    stream_order_point();
    *text = hash_launches();
  });
  EXPECT_EQ(log, "S1 S1");
}
TEST_F(MergeTest, MergingOffHashesOutputsRightAway) {
  const std::string log = run(
      [](std::string* text) {
        for (int i = 0; i < 2; ++i) launch_on(kStreamS, kMergeBase + 256);
        *text = hash_launches();
      },
      /*merge=*/false);
  EXPECT_EQ(log, "S1 S1 S1 S1");
  expect_kernel_fingerprints(2);
}

}  // namespace
}  // namespace lockstep::collectors
