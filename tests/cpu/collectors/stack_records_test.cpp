// Stack records (collectors/stack_records.cpp, LOCKSTEP_STACKS): a launch of a kernel the
// setting names records its call stack, tied to the launch by op_seq; other kernels and
// launches outside the step window record none. This test process runs no Python: the frames
// are native (python_frames_test.cpp reads Python frames in an embedded interpreter).
#include <sys/wait.h>

#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

// "_Z7kernel2PfS_i" demangles to kernel2(float*, float*, int).
ChildResult launch_both_kernels(std::map<std::string, std::string> environment) {
  return run_child(
      environment,
      [] {
        on_alloc(kMergeBase, 1 << 20);
        float* p = reinterpret_cast<float*>(kMergeBase);
        int n = 4;
        void* two[] = {&p, &p, &n};
        launch_function(kTwoPointerKernel, kStreamS, two, 1);
        void* three[] = {&p, &p, &p, &n};
        launch_function(kThreePointerKernel, kStreamS, three, 1);
      },
      &fake_resolver_with_gpu);
}

TEST_F(RuntimeTest, ALaunchOfANamedKernelRecordsItsCallStack) {
  for (const char* level : {"broad", "full"}) {
    auto environment = env(level);
    environment["LOCKSTEP_STACKS"] = "^kernel2\\(";
    ChildResult child = launch_both_kernels(environment);
    auto reader = only_trace(child);
    ASSERT_TRUE(reader) << level;
    const auto kernels = records_of_kind(*reader, trace::RecordKind::Kernel);
    const auto stacks = records_of_kind(*reader, trace::RecordKind::Stack);
    ASSERT_EQ(kernels.size(), 2u) << level;
    ASSERT_EQ(stacks.size(), 1u) << level << ": only kernel2 is named";
    const trace::Record& stack = stacks[0];
    EXPECT_EQ(reader->string(kernels[0].name), "kernel2(float*, float*, int)");
    EXPECT_EQ(stack.fields[trace::fields::Stack::op_seq], kernels[0].seq) << level;
    EXPECT_EQ(stack.step, kernels[0].step);
    EXPECT_EQ(reader->string(stack.name), "(no Python frames)");
    EXPECT_EQ(stack.fields[trace::fields::Stack::python_frames], 0u);
    const std::string frames(stack.payload.begin(), stack.payload.end());
    EXPECT_GT(stack.fields[trace::fields::Stack::native_frames], 0u) << frames;
    // The collectors are linked into this test binary, so all of its frames are the shim's
    // own and left out; what called it from outside remains (libc's start of the process).
    EXPECT_EQ(frames.find("collectors_runtime_tests"), std::string::npos) << frames;
    EXPECT_NE(frames.find("native __libc_start_main"), std::string::npos) << frames;
    fs::remove_all(dir_);
  }
}

TEST_F(RuntimeTest, NoStackOutsideTheStepWindowOrWithoutTheSetting) {
  auto windowed = env("full");
  windowed["LOCKSTEP_STACKS"] = "kernel";
  windowed["LOCKSTEP_STEPS"] = "5-6";
  auto reader = only_trace(launch_both_kernels(windowed));
  ASSERT_TRUE(reader);
  EXPECT_TRUE(records_of_kind(*reader, trace::RecordKind::Stack).empty());
  EXPECT_EQ(records_of_kind(*reader, trace::RecordKind::Kernel).size(), 2u);
  reader.reset();
  fs::remove_all(dir_);
  auto reader2 = only_trace(launch_both_kernels(env("full")));
  ASSERT_TRUE(reader2);
  EXPECT_TRUE(records_of_kind(*reader2, trace::RecordKind::Stack).empty());
}

}  // namespace
}  // namespace lockstep::collectors
