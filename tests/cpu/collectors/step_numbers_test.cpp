// Numbered steps in the runtime (collectors/markers.cpp): lockstep_step_number(n), NVTX markers
// and lockstep_mark names like "step N" record the job's number in the StepMarker record and, through the
// writer, in the step's summary, which is where `lockstep diff --align number` reads it.
#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

// The StepMarker records of a trace, in seq order.
std::vector<trace::Record> markers(trace::TraceReader& reader) {
  return records_of_kind(reader, trace::RecordKind::StepMarker);
}

// The trace opens on the first CUDA event; a metric copy is one at every level.
void open_trace() {
  static float loss = 0;
  MemoryOp copy;
  copy.api = "cudaMemcpy";
  copy.direction = 2;
  copy.src = reinterpret_cast<void*>(kMergeBase);
  copy.dst = &loss;
  copy.bytes = 4;
  memory_op_end(memory_op_begin(copy), 0);
}

TEST_F(RuntimeTest, NumberedStepsCarryTheJobsNumberInTheirMarkerAndSummary) {
  ChildResult child = run_child(env("broad"), [] {
    on_alloc(kMergeBase, 1 << 20);
    open_trace();                // step 0 ends here (a metric step: no marker seen yet)
    lockstep_step_number(4);     // step 2 is the job's step 4
    marker_range_push("step 5");  // step 3: NVTX, "step 5"
    lockstep_step();             // step 4: unnumbered
    lockstep_mark("step 9");     // step 5: a mark's name is read as an NVTX marker's
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  const auto records = markers(*reader);
  ASSERT_EQ(records.size(), 5u);
  using F = trace::fields::StepMarker;
  const uint64_t numbered[] = {0, 1, 1, 0, 1};
  const uint64_t number[] = {0, 4, 5, 0, 9};
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].fields[F::new_step], i + 1) << i;
    EXPECT_EQ(records[i].fields[F::numbered], numbered[i]) << i;
    EXPECT_EQ(records[i].fields[F::job_step], number[i]) << i;
  }
  std::map<uint32_t, std::optional<uint64_t>> by_step;
  for (const trace::StepSummary& s : reader->step_summaries()) by_step[s.step] = s.job_step;
  EXPECT_EQ(by_step[1], std::nullopt);
  EXPECT_EQ(by_step[2], std::optional<uint64_t>(4));
  EXPECT_EQ(by_step[3], std::optional<uint64_t>(5));
  EXPECT_EQ(by_step[4], std::nullopt);
}

}  // namespace
}  // namespace lockstep::collectors
