// Deferred hashes held across a host synchronization (LOCKSTEP_HOLD_ACROSS_SYNC,
// collectors/tracer_host_sync.cpp): a small device-to-host copy (a metric: PyTorch's .item())
// and the synchronization after it leave the deferred set to the stream's next hash launch;
// once issued, an event follows it and every other stream's call waits on that event until the
// host has seen the stream's work done again. The fake GPU logs the driver calls in order
// (hash_launches(): "S2" a launch of two regions on stream S, "S+" an event recorded on S, "T<"
// T made to wait on an event).
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

class HostSyncTest : public MergeTest {
 protected:
  // `body` under LOCKSTEP_HOLD_ACROSS_SYNC=hold, with a step marker first (so that the metric
  // copies end no step: a step's end flushes the set); LOCKSTEP_DEBUG's lines in *err.
  std::string run_held(const std::function<void(std::string*)>& body, bool hold,
                       std::string* err = nullptr) {
    setenv("LOCKSTEP_HOLD_ACROSS_SYNC", hold ? "1" : "0", 1);  // inherited by the child
    std::string local;
    const std::string log = run(
        [&](std::string* text) {
          lockstep_step();
          body(text);
        },
        true, /*reuse=*/false, err != nullptr ? err : &local);
    unsetenv("LOCKSTEP_HOLD_ACROSS_SYNC");
    return log;
  }
};

// The host waits for `stream` (cudaStreamSynchronize) and the wait returns `result`.
void synchronize(CUstream stream, int result = CUDA_SUCCESS) {
  stream_host_wait_end(stream_host_wait_begin(stream, false, false), result);
}

// PyTorch's .item(): 4 bytes copied to host memory, here pageable (the call returns with the copy
// done), on `stream`, then the stream synchronized (at::cuda::memcpy_and_sync).
MemoryOp item_copy(CUstream stream, CUdeviceptr src) {
  static float host = 0;
  MemoryOp copy;
  copy.api = "cudaMemcpyAsync";
  copy.is_async = true;
  copy.direction = 2;  // device to host
  copy.dst = &host;
  copy.src = reinterpret_cast<const void*>(src);
  copy.bytes = 4;
  copy.stream = stream;
  return copy;
}
void item(CUstream stream, CUdeviceptr src) {
  memory_op_end(memory_op_begin(item_copy(stream, src)), 0);
  synchronize(stream);
}

constexpr CUdeviceptr kP = kMergeBase + 256;
const CUstream kStreamU = reinterpret_cast<CUstream>(0x53);  // shows as '?'
const CUstream kStreamV = reinterpret_cast<CUstream>(0x54);  // shows as '?'

// The kernel's output waits past the copy and the synchronization and rides on the next kernel's
// launch, its input with it, an event after them; held off, it goes out alone before the copy.
TEST_F(HostSyncTest, AMetricCopyAndItsSynchronizeLeaveTheSetToTheNextLaunch) {
  auto body = [](std::string* text) {
    on_alloc(kSecondBase, 4096);
    launch_on(kStreamS, kP);  // S1: in p; out p deferred
    item(kStreamS, kP);
    launch_on(kStreamS, kSecondBase);  // out p + in q, then the event
    stream_order_point();              // out q
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run_held(body, true, &err), "S1 S2 S+ S1");
  expect_kernel_fingerprints(2);
  EXPECT_NE(err.find("deferred sets held across a host wait: 1, issued with an event "
                     "after them 1, other streams made to wait on it 0, failed event calls 0"),
            std::string::npos)
      << err;
  fs::remove_all(dir_);
  EXPECT_EQ(run_held(body, false), "S1 S1 S1 S1");
  expect_kernel_fingerprints(2);
}

// A synchronization alone (a copy into pinned memory returns before its work is done; any
// stream's, the context's) holds the set too; held off, it goes out before the wait.
TEST_F(HostSyncTest, ASynchronizeAloneHoldsTheSet) {
  auto body = [](std::string* text) {
    on_alloc(kSecondBase, 4096);
    launch_on(kStreamS, kP);  // S1
    synchronize(kStreamT);
    stream_host_wait_end(stream_host_wait_begin(nullptr, false, true), CUDA_SUCCESS);
    launch_on(kStreamS, kSecondBase);  // S2 S+
    stream_order_point();              // S1
    *text = hash_launches();
  };
  EXPECT_EQ(run_held(body, true), "S1 S2 S+ S1");
  expect_kernel_fingerprints(2);
  fs::remove_all(dir_);
  EXPECT_EQ(run_held(body, false), "S1 S1 S1 S1");
}

// After the synchronization the host may order another stream's work after the set's writers
// with no call on their stream: a call on T takes the set out (on S, its stream) and T waits on
// the event after it, once; a call on a third stream U waits too. The next .item() on S shows the
// host S's work done: a fourth stream's call after it waits no more.
TEST_F(HostSyncTest, OtherStreamsCallsWaitForTheHeldHashesUntilTheHostSeesThemDone) {
  std::string err;
  const std::string log = run_held(
      [&](std::string* text) {
        on_alloc(kSecondBase, 4096);
        launch_on(kStreamS, kP);  // S1
        item(kStreamS, kP);
        launch_on(kStreamT, kSecondBase);  // out p on S, S+; in q on T; T waits
        launch_on(kStreamT, kSecondBase);  // T1: out q and in q, one region (waited already)
        launch_on(kStreamU, kSecondBase);  // U waits; T1: T's set; ?1: in q on U
        item(kStreamS, kP);                // ?1: U's set; S's hashes seen done
        launch_on(kStreamV, kSecondBase);  // ?1: in q on V, no wait
        stream_order_point();              // ?1
        *text = hash_launches();
      },
      true, &err);
  EXPECT_EQ(log, "S1 S1 S+ T1 T< T1 ?< T1 ?1 ?1 ?1 ?1");
  expect_kernel_fingerprints(5);
  EXPECT_NE(err.find("other streams made to wait on it 2,"), std::string::npos) << err;
}

// The waits end only with a wait that covered the issue's stream and succeeded: a synchronize of
// T, or a failed one of S, leave them (U waits); one of S ends them (V does not).
TEST_F(HostSyncTest, OnlyASuccessfulWaitOnTheIssuesStreamEndsTheWaits) {
  const std::string log = run_held(
      [](std::string* text) {
        on_alloc(kSecondBase, 4096);
        launch_on(kStreamS, kP);  // S1
        synchronize(kStreamS);    // out p held, synced
        launch_on(kStreamS, kSecondBase);  // S2 S+: out p, in q
        synchronize(kStreamT);                // out q held, synced (any wait holds)
        synchronize(kStreamS, /*result=*/1);  // failed: S's issue not seen done
        launch_on(kStreamU, kP);  // U waits; S1 S+: out q, a second issue; ?1: in p; U waits
        synchronize(kStreamS);    // ?1: U's set goes out (S's issue is outstanding); ends it
        launch_on(kStreamV, kP);  // ?1: in p, no wait
        *text = hash_launches();
      },
      true);
  EXPECT_EQ(log, "S1 S2 S+ ?< S1 S+ ?1 ?< ?1 ?1");
  expect_kernel_fingerprints(4);
}

// cuCtxSynchronize_v2 names the context it waits for: another context's leaves the issue
// unseen (U waits), the current context's ends it (V does not).
TEST_F(HostSyncTest, AnotherContextsSynchronizeLeavesTheWaits) {
  const CUcontext other = reinterpret_cast<CUcontext>(0xc7c7);
  auto ctx_synchronize = [](CUcontext ctx) {
    stream_host_wait_end(stream_host_wait_begin(nullptr, false, true, ctx), CUDA_SUCCESS);
  };
  const std::string log = run_held(
      [&](std::string* text) {
        on_alloc(kSecondBase, 4096);
        launch_on(kStreamS, kP);           // S1
        synchronize(kStreamS);             // out p held, synced
        launch_on(kStreamS, kSecondBase);  // S2 S+: out p, in q
        ctx_synchronize(other);            // out q held, synced; S's issue not seen done
        launch_on(kStreamU, kP);           // U waits; S1 S+: out q, a second issue; ?1; U waits
        ctx_synchronize(nullptr);          // ?1: U's set goes out; the current context: ends it
        launch_on(kStreamV, kP);           // ?1: in p, no wait
        *text = hash_launches();
      },
      true);
  EXPECT_EQ(log, "S1 S2 S+ ?< S1 S+ ?1 ?< ?1 ?1");
  expect_kernel_fingerprints(4);
}

// Only a set of the copy's own stream is held at the copy: a copy on T sends S's set out before
// it, as any other call does.
TEST_F(HostSyncTest, AMetricCopyOnAnotherStreamSendsTheSetOut) {
  const std::string log = run_held(
      [](std::string* text) {
        launch_on(kStreamS, kP);                                     // S1
        memory_op_end(memory_op_begin(item_copy(kStreamT, kP)), 0);  // S1
        *text = hash_launches();
      },
      true);
  EXPECT_EQ(log, "S1 S1");
  expect_kernel_fingerprints(1);
}

// Once a capture has begun nothing is held (a capturing stream cannot wait on an event recorded
// outside it): the synchronization sends the set out, as without holding.
TEST_F(HostSyncTest, NothingIsHeldOnceACaptureBegan) {
  const std::string log = run_held(
      [](std::string* text) {
        capture_begins();
        launch_on(kStreamS, kP);  // S1
        item(kStreamS, kP);       // S1 before the copy
        *text = hash_launches();
      },
      true);
  EXPECT_EQ(log, "S1 S1");
  expect_kernel_fingerprints(1);
}

}  // namespace
}  // namespace lockstep::collectors
