// Stream-ordered steps (collectors/stream_steps.h): a JAX-like job whose worker thread launches
// each program's kernels on a compute stream while the main thread marks the steps (one step
// ahead: asynchronous dispatch) and reads the loss back on another stream. Two runs of the same
// job differ only in how far the worker lags; every record must land in the same step.
#include <condition_variable>
#include <deque>
#include <mutex>

#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

// One thread that runs what it is given, one thing at a time, the caller waiting: the test
// decides the interleaving, and the thread keeps its identity (thread-local state) throughout.
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    run(nullptr);
    thread_.join();
  }
  void run(std::function<void()> fn) {
    std::unique_lock lock(mutex_);
    const bool stop = !fn;
    tasks_.push_back(std::move(fn));
    cv_.notify_all();
    if (!stop) cv_.wait(lock, [&] { return tasks_.empty() && !busy_; });
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return !tasks_.empty(); });
        fn = std::move(tasks_.front());
        tasks_.pop_front();
        if (!fn) return;
        busy_ = true;
      }
      fn();
      std::lock_guard lock(mutex_);
      busy_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false;
  std::thread thread_;
};

const CUstream kCompute = kStreamS, kTransfer = kStreamT;
const CUstream kInit = reinterpret_cast<CUstream>(0x53);
const CUstream kTransfer2 = reinterpret_cast<CUstream>(0x54);
// Program k's definition event (XLA records one on the compute stream after each program).
CUevent program_event(unsigned k) { return reinterpret_cast<CUevent>(uintptr_t{0xe000} + k); }

// Program k's kernel i (grid 10 k + i): what the diff pairs.
void kernel(unsigned k, unsigned i) {
  float* p = nullptr;
  void* params[] = {&p, &p, &p};
  launch_function(reinterpret_cast<CUfunction>(0x1234), kCompute, params, 10 * k + i);
}
void program_end(unsigned k = 0) { stream_event_recorded(program_event(k), kCompute, false); }
void read_loss(CUstream stream = kTransfer) {
  static float loss = 0;
  MemoryOp copy;
  copy.api = "cuMemcpyDtoHAsync_v2";
  copy.direction = 2;
  copy.stream = stream;
  copy.src = reinterpret_cast<void*>(kMergeBase);
  copy.dst = &loss;
  copy.bytes = 4;
  memory_op_end(memory_op_begin(copy), 0);
}

// The job: main thread m0 m1 loss0 m2 loss1 m3 loss2 (each marker before the loss of the step
// before it); worker: program k = kernels (k, 1), (k, 2), then its event, after marker k, and
// before loss k. `lag`: the worker launches each program's second kernel after the next marker
// (a slow worker) instead of right after its first one.
void job(bool stream_rule, bool lag) {
  if (stream_rule) lockstep_step_order_streams();
  on_alloc(kMergeBase, 1 << 20);
  launch_function(reinterpret_cast<CUfunction>(0x1234), kInit, nullptr, 1000);  // opens the trace
  Worker worker;
  auto program_rest = [&](unsigned k) {
    worker.run([k] {
      kernel(k, 2);
      program_end();
    });
  };
  for (unsigned k = 0; k < 3; ++k) {
    if (k == 0) lockstep_step_number(0);
    worker.run([k] { kernel(k, 1); });
    if (!lag) program_rest(k);
    lockstep_step_number(k + 1);  // the next step is dispatched before this one's loss is read
    if (lag) program_rest(k);
    read_loss();
  }
}

// Each record of the trace that is work, by what identifies it (grid for kernels, "loss k"),
// with its step.
std::map<std::string, uint32_t> steps_of(trace::TraceReader& reader) {
  std::map<std::string, uint32_t> out;
  unsigned losses = 0;
  std::vector<trace::Record> records;
  reader.for_each_record([&](const trace::Record& r) {
    records.push_back(r);
    return true;
  });
  std::sort(records.begin(), records.end(), [](auto& a, auto& b) { return a.seq < b.seq; });
  for (const trace::Record& r : records) {
    if (r.kind == trace::RecordKind::Kernel)
      out["kernel " + std::to_string(r.fields[trace::fields::Kernel::grid_x])] = r.step;
    if (r.kind == trace::RecordKind::Metric) out["loss " + std::to_string(losses++)] = r.step;
  }
  return out;
}

// As XLA reads losses back: program k runs on the compute stream from one worker thread, and
// another thread copies its loss on one of two device-to-host streams in turn, after waiting
// (`waits`) on the program's event; the main thread marks step k before dispatching program k.
void xla_copies(bool waits) {
  lockstep_step_order_streams();
  on_alloc(kMergeBase, 1 << 20);
  launch_function(reinterpret_cast<CUfunction>(0x1234), kInit, nullptr, 1000);  // opens the trace
  Worker compute, copier;
  for (unsigned k = 0; k < 5; ++k) {
    lockstep_step_number(k);
    compute.run([k] {
      kernel(k, 1);
      kernel(k, 2);
      program_end(k);
    });
    copier.run([k, waits] {
      const CUstream stream = k % 2 ? kTransfer2 : kTransfer;
      if (waits) stream_event_waited(stream, false, program_event(k));
      read_loss(stream);
    });
  }
  lockstep_step_number(5);
}

class StreamStepsTest : public RuntimeTest {
 protected:
  std::map<std::string, uint32_t> run_xla(bool waits) {
    fs::remove_all(dir_);
    ChildResult child =
        run_child(env("broad"), [&] { xla_copies(waits); }, &fake_resolver_with_driver);
    auto reader = only_trace(child);
    if (!reader) return {};
    return steps_of(*reader);
  }
  std::map<std::string, uint32_t> run(bool stream_rule, bool lag) {
    fs::remove_all(dir_);
    ChildResult child = run_child(env("broad"), [&] { job(stream_rule, lag); },
                                  &fake_resolver_with_driver);
    auto reader = only_trace(child);
    if (!reader) return {};
    return steps_of(*reader);
  }
};

// The process's rule keeps its switch in the line every traced call reads (common/hot_flags.h),
// where a record's stamp reads it without the rule object.
TEST(StreamStepsSwitch, ARuleGivenItsSwitchTurnsThatOneOn) {
  std::atomic<bool> flag{false};
  StreamSteps rule(&flag);
  EXPECT_FALSE(rule.enabled());
  rule.enable();
  EXPECT_TRUE(flag.load());
  StreamSteps own;
  own.enable();
  flag.store(false);
  EXPECT_FALSE(rule.enabled()) << "the switch is the flag, not a copy";
  EXPECT_TRUE(own.enabled());
}

TEST_F(StreamStepsTest, ASlowWorkerPutsEachProgramInTheSameStepAsAFastOne) {
  const auto fast = run(true, false), slow = run(true, true);
  ASSERT_EQ(fast.size(), 10u);  // 1 + 3 x 2 kernels, 3 losses
  EXPECT_EQ(fast, slow);
  // Program k is in the step that marker k started (trace step k + 2: step 1 is the job's
  // step 0), both its kernels.
  for (unsigned k = 0; k < 3; ++k) {
    EXPECT_EQ(slow.at("kernel " + std::to_string(10 * k + 1)), k + 1) << k;
    EXPECT_EQ(slow.at("kernel " + std::to_string(10 * k + 2)), k + 1) << k;
  }
}

// Why the rule is needed: stamped with the counter as it is, the slow worker's second kernels
// fall into the next step.
TEST_F(StreamStepsTest, WithoutItASlowWorkersKernelsFallIntoTheNextStep) {
  const auto fast = run(false, false), slow = run(false, true);
  ASSERT_EQ(fast.size(), 10u);
  EXPECT_NE(fast, slow);
  EXPECT_EQ(fast.at("kernel 2"), 1u);
  EXPECT_EQ(slow.at("kernel 2"), 2u);
}

// Each step has one summary (written once the step after it ended), which counts every record
// of the step: none came after it.
TEST_F(StreamStepsTest, EveryStepsSummaryCountsTheRecordsOfThatStep) {
  fs::remove_all(dir_);
  ChildResult child = run_child(env("broad"), [] { job(true, true); }, &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  std::map<uint32_t, uint64_t> counted, summarized, summaries;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::StepSummary) ++counted[r.step];
    return true;
  });
  for (const trace::StepSummary& s : reader->step_summaries()) {
    summarized[s.step] += s.record_count;
    ++summaries[s.step];
  }
  EXPECT_EQ(counted, summarized);
  for (const auto& [step, n] : summaries) EXPECT_EQ(n, 1u) << "step " << step;
}

// XLA's loss copies, on two streams in turn, each after a wait on its program's event: every
// loss is in its program's step.
TEST_F(StreamStepsTest, ALossCopiedOnEitherOfTwoStreamsIsInItsProgramsStep) {
  const auto steps = run_xla(true);
  ASSERT_EQ(steps.size(), 16u);  // 1 + 5 x 2 kernels, 5 losses
  for (unsigned k = 0; k < 5; ++k)
    EXPECT_EQ(steps.at("loss " + std::to_string(k)), steps.at("kernel " + std::to_string(10 * k + 1)))
        << "loss " << k;
}

// Why the waits count: without them a copy stream used every other step moves one step per use
// and falls behind the step it copies.
TEST_F(StreamStepsTest, WithoutTheWaitsALossOnAStreamUsedEveryOtherStepFallsBehind) {
  const auto steps = run_xla(false);
  ASSERT_EQ(steps.size(), 16u);
  EXPECT_LT(steps.at("loss 4"), steps.at("kernel 41"));
}

}  // namespace
}  // namespace lockstep::collectors
