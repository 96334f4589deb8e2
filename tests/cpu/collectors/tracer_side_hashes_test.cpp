// Hash launches on side streams (LOCKSTEP_SIDE_HASHES, collectors/side_hashes.h): which launches
// go beside the next kernel, and every later writer, order point and newer set that makes the
// job's stream wait for them. The fake GPU logs the driver calls in order (hash_launches():
// "S1" a launch of one region on stream S, "X1" on a side stream, "S+" an event recorded on S,
// "S<" S made to wait on an event). Merging without chaining ("adjacent"): every kernel after
// the first brings one merged launch, the previous kernel's outputs with its own inputs.
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

// hash_launches() from here on: what a part of a test made.
class FakeGpuMark {
 public:
  std::string since() const {
    std::string all = hash_launches(), out;
    size_t skipped = 0, at = 0;
    while (skipped < first_ && at != std::string::npos) {
      at = all.find(' ', at);
      if (at != std::string::npos) ++at;
      ++skipped;
    }
    return at == std::string::npos ? "" : all.substr(at);
  }

 private:
  size_t first_ = lockstep::testing::FakeGpu::instance().launches().size();
};

class SideHashesTest : public MergeTest {
 protected:
  void SetUp() override {
    MergeTest::SetUp();
    merge_mode_ = "adjacent";
    side_hashes_ = "1";
  }
  // Every kernel record's every region arrived with a valid fingerprint.
  void expect_every_fingerprint(size_t kernels) {
    auto reader = the_trace();
    ASSERT_NE(reader, nullptr);
    const auto records = records_of_kind(*reader, trace::RecordKind::Kernel);
    EXPECT_EQ(records.size(), kernels);
    for (const trace::Record& r : records)
      for (const auto& b : r.buffers)
        EXPECT_TRUE(b.flags & trace::kFingerprintValid) << "seq " << r.seq;
  }
};

constexpr CUdeviceptr kB = kSecondBase, kC = kSecondBase + (1 << 20);

// The fill writes only its own allocation: the launch of the kernel's outputs before it goes
// beside it (S records an event, the side stream waits on it, hashes, records its own); the
// kernel's inputs, which the kernel itself may write, stay on S. The order point joins.
TEST_F(SideHashesTest, ALaunchTheNextKernelDoesNotWriteGoesBesideIt) {
  std::string err;
  const std::string log = run(
      [](std::string* text) {
        on_alloc(kB, 4096);
        launch_on(kStreamS, kMergeBase + 256);  // its inputs: it may write them, so on S
        fill_on(kStreamS, kB, 1024, 1.f);       // the kernel's outputs, beside the fill
        *text = hash_launches() + " |";
        FakeGpuMark mark;
        stream_order_point();  // the fill's outputs on S (nothing after them), then S waits
        *text += " " + mark.since();
      },
      true, false, &err);
  EXPECT_EQ(log, "S1 S+ X< X1 X+ | S1 S<");
  expect_every_fingerprint(2);
  EXPECT_NE(err.find("side streams (LOCKSTEP_SIDE_HASHES): 1 hash launches beside the job's "
                     "kernels, 1 kept on its stream (the next call may write what they read), 1 "
                     "not candidates"),
            std::string::npos)
      << err;
}

// A later kernel that may write what a set in flight reads waits for it before it is launched;
// its own merged launch then stays on S (it may write its inputs). Waited for on its own job
// stream, the set is done with: the order point after joins nothing.
TEST_F(SideHashesTest, AWriterOfWhatASideHashReadsWaitsForIt) {
  const std::string log = run([](std::string* text) {
    on_alloc(kB, 4096);
    launch_on(kStreamS, kMergeBase + 256);
    fill_on(kStreamS, kB, 1024, 1.f);
    FakeGpuMark mark;
    launch_on(kStreamS, kMergeBase + 256);  // writes the allocation the side hash reads
    stream_order_point();
    *text = mark.since();
  });
  EXPECT_EQ(log, "S< S2 S1");
  expect_every_fingerprint(3);
}

// A writer on another stream waits too, but the set stays pending for its own job stream: the
// next order point makes S wait for it as well (another stream or the host may be ordered after
// S from there on).
TEST_F(SideHashesTest, AWriterOnAnotherStreamWaitsAndTheSetStaysForItsOwnStream) {
  const std::string log = run([](std::string* text) {
    on_alloc(kB, 4096);
    launch_on(kStreamS, kMergeBase + 256);
    fill_on(kStreamS, kB, 1024, 1.f);
    FakeGpuMark mark;
    launch_on(kStreamT, kMergeBase + 256);  // T writes the side hash's allocation
    stream_order_point();
    *text = mark.since();
  });
  // T waits; S's deferred outputs go out first, on S (another stream's call); the kernel's
  // inputs on T (it may write them); at the order point its outputs, then S waits.
  EXPECT_EQ(log, "T< S1 T1 T1 S<");
  expect_every_fingerprint(3);
}

// A copy elsewhere on the device leaves the sets in flight, its own launch going beside it too;
// a synchronous one returns with its work done (the host may then write what they read): every
// set is joined before it, and its launches stay on S.
TEST_F(SideHashesTest, ASynchronousCopyJoinsTheSetsInFlightAnAsyncOneDoesNot) {
  auto body = [](bool async, std::string* text) {
    on_alloc(kB, 4096);
    on_alloc(kC, 4096);
    launch_on(kStreamS, kMergeBase + 256);
    fill_on(kStreamS, kB, 1024, 1.f);
    FakeGpuMark mark;
    MemoryOp copy = async_copy(kStreamS);
    copy.dst = reinterpret_cast<void*>(kC);
    copy.src = reinterpret_cast<void*>(kC + 2048);
    copy.is_async = async;
    copy.api = async ? "cudaMemcpyAsync" : "cudaMemcpy";
    memory_op_end(memory_op_begin(copy), 0);
    *text = mark.since();
  };
  EXPECT_EQ(run([&](std::string* text) { body(true, text); }), "S+ X< X1 X+");
  fs::remove_all(dir_);
  EXPECT_EQ(run([&](std::string* text) { body(false, text); }), "S< S1 S1");
}

// Each fill's launch carries the previous fill's output beside it: after eight sets in flight,
// each newer one makes the oldest's job stream wait for it first.
TEST_F(SideHashesTest, AtMostEightSetsStayInFlight) {
  std::string err;
  const std::string log = run(
      [](std::string* text) {
        for (int i = 0; i < 11; ++i) {
          on_alloc(kC + i * 65536, 4096);
          fill_on(kStreamS, kC + i * 65536, 1024, float(i));
        }
        *text = hash_launches();
      },
      true, false, &err);
  // Ten side launches (the first fill has nothing before it); the ninth and tenth evict.
  size_t side = 0, waits = 0;
  for (size_t at = log.find("X1"); at != std::string::npos; at = log.find("X1", at + 1)) ++side;
  for (size_t at = log.find("S<"); at != std::string::npos; at = log.find("S<", at + 1)) ++waits;
  EXPECT_EQ(side, 10u) << log;
  EXPECT_EQ(waits, 2u) << log;
  EXPECT_NE(err.find("side streams (LOCKSTEP_SIDE_HASHES): 10 hash launches beside the job's "
                     "kernels, 0 kept on its stream (the next call may write what they read), 1 "
                     "not candidates (order points, frees held back, captures); a writer waited 0 "
                     "times, 8 joined at an order point, 2 when newer ones came; "
                     "0 failed driver calls"),
            std::string::npos)
      << err;
}

// Once a graph capture has begun, nothing goes beside (a capturing stream cannot wait on an event
// recorded outside its capture); with the setting off, nothing ever does.
TEST_F(SideHashesTest, NothingGoesBesideAfterACaptureBeganOrWithTheSettingOff) {
  auto body = [](std::string* text) {
    on_alloc(kB, 4096);
    launch_on(kStreamS, kMergeBase + 256);
    fill_on(kStreamS, kB, 1024, 1.f);
    stream_order_point();
    *text = hash_launches();
  };
  const std::string on = run(body);
  EXPECT_EQ(on, "S1 S+ X< X1 X+ S1 S<");
  fs::remove_all(dir_);
  side_hashes_ = "0";
  EXPECT_EQ(run(body), "S1 S1 S1");
  fs::remove_all(dir_);
  side_hashes_ = "1";
  EXPECT_EQ(run([&](std::string* text) {
              capture_begins();
              body(text);
            }),
            "S1 S1 S1");
}

// Frees held back for a deferred set are made on the job's stream right after its hashes: that
// set is hashed there too, not beside.
TEST_F(SideHashesTest, ASetWithFreesHeldBackStaysOnTheJobsStream) {
  const std::string log = run([](std::string* text) {
    on_alloc(kB, 4096);
    const CUdeviceptr temp = kMergeBase + (1 << 30);
    on_alloc(temp, 4096);
    launch_on(kStreamS, kMergeBase + 256);
    on_stream_free(temp, kStreamS, false);  // held back for the deferred outputs
    fill_on(kStreamS, kB, 1024, 1.f);
    stream_order_point();
    *text = hash_launches();
  });
  EXPECT_EQ(log, "S1 S1 free@S S1");
}

}  // namespace
}  // namespace lockstep::collectors
