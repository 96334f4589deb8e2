// The Tracer's lifecycle (collectors/tracer_lifecycle.cpp): a bad setting, fail-hard, no CUDA,
// level off, a forked child.
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

TEST_F(RuntimeTest, BadSettingGivesOneLineAndNoTrace) {
  ChildResult child = run_child(env("fast"), [] {
    on_alloc(0x1000, 64);
    EXPECT_FALSE(active());
  });
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0);
  EXPECT_EQ(
      child.stderr_text,
      "lockstep: LOCKSTEP_LEVEL=fast is not one of off|metrics|broad|full; running untraced\n");
  EXPECT_TRUE(traces().empty());
}

TEST_F(RuntimeTest, FailHardStopsTheJob) {
  auto vars = env("fast");
  vars["LOCKSTEP_FAIL_HARD"] = "1";
  ChildResult child = run_child(vars, [] {});
  EXPECT_FALSE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0);
  EXPECT_NE(child.stderr_text.find("LOCKSTEP_LEVEL=fast"), std::string::npos);
}

TEST_F(RuntimeTest, AProcessThatNeverTouchesCudaWritesNothing) {
  ChildResult child = run_child(env("broad"), [] {
    marker_range_push("step");
    lockstep_step();
  });
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0);
  EXPECT_TRUE(traces().empty());
}

TEST_F(RuntimeTest, LevelOffRecordsNothing) {
  ChildResult child = run_child(env("off"), [] {
    on_alloc(0x1000, 64);
    EXPECT_FALSE(active());
  });
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0);
  EXPECT_TRUE(traces().empty());
}

TEST_F(RuntimeTest, ForkedChildNeverWritesTheParentsTrace) {
  ChildResult child = run_child(env("broad"), [] {
    on_alloc(0x1000, 64);
    marker_step("before fork");
    pid_t grandchild = fork();
    if (grandchild == 0) {
      // Tracing is off here; events are ignored and exit writes nothing.
      EXPECT_FALSE(active());
      marker_step("in child");
      on_alloc(0x2000, 64);
      std::exit(0);
    }
    int status = 0;
    waitpid(grandchild, &status, 0);
    marker_step("after fork");
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  reader->verify_all();
  std::vector<std::string> markers;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::StepMarker) markers.emplace_back(reader->string(r.name));
    return true;
  });
  EXPECT_EQ(markers, (std::vector<std::string>{"before fork", "after fork"}));
}

}  // namespace
}  // namespace lockstep::collectors

namespace lockstep::collectors {
namespace {

// What can change numbers is in the header (collectors/environment.h), for the diff to compare.
TEST_F(RuntimeTest, TheHeaderRecordsTheNumericsVariablesAndThoseTheUsersPatternNames) {
  auto vars = env("broad");
  vars["NVIDIA_TF32_OVERRIDE"] = "0";
  vars["MY_KNOB"] = "3";
  vars["LOCKSTEP_RECORD_ENV"] = "MY_.*";
  ChildResult child = run_child(vars, [] { on_alloc(0x7f0000000000, 1 << 20); });
  ASSERT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  const nlohmann::json& header = reader->header();
  ASSERT_TRUE(header.contains("environment")) << header.dump();
  EXPECT_EQ(header["environment"]["NVIDIA_TF32_OVERRIDE"], "0");
  EXPECT_EQ(header["environment"]["MY_KNOB"], "3");
  EXPECT_FALSE(header["environment"].contains("HOME"));
  EXPECT_TRUE(header.contains("python_packages"));
  EXPECT_TRUE(header.contains("cudnn_version")) << "null without cuDNN, but recorded";
}

}  // namespace
}  // namespace lockstep::collectors
