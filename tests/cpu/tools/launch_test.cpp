// What `lockstep run` checks and gives the job: its flags (from common/settings.def), the
// default trace directory, the PyTorch allocator settings and their note, its messages.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "common/settings.h"
#include "tools/launch.h"
#include "tools/python_env.h"
#include "tools/resume_check.h"
#include "tools/run_set.h"
#include "trace/run_dir.h"

namespace lockstep::tools {
namespace {

std::string value_of(const EnvChange& change, const std::string& name) {
  for (const auto& [n, v] : change.set)
    if (n == name) return v;
  return "<unset>";
}

TEST(TorchAllocator, AutoUsesCudaMallocAsyncAtFullOnly) {
  EnvChange full = torch_allocator_env("auto", "full", nullptr);
  EXPECT_EQ(value_of(full, "PYTORCH_CUDA_ALLOC_CONF"), "backend:cudaMallocAsync");
  EXPECT_FALSE(full.note.empty());
  for (const char* level : {"off", "metrics", "broad"}) {
    EnvChange other = torch_allocator_env("auto", level, nullptr);
    EXPECT_TRUE(other.set.empty()) << level;
    EXPECT_TRUE(other.note.empty()) << level;
  }
}

TEST(TorchAllocator, AutoKeepsTheUsersOwnConfiguration) {
  EXPECT_TRUE(torch_allocator_env("auto", "full", "expandable_segments:True").set.empty());
  EXPECT_EQ(value_of(torch_allocator_env("auto", "full", ""), "PYTORCH_CUDA_ALLOC_CONF"),
            "backend:cudaMallocAsync");  // set but empty: as unset
}

TEST(TorchAllocator, ExplicitModes) {
  EXPECT_EQ(value_of(torch_allocator_env("async", "broad", "max_split_size_mb:128"),
                     "PYTORCH_CUDA_ALLOC_CONF"),
            "max_split_size_mb:128,backend:cudaMallocAsync");
  EXPECT_TRUE(torch_allocator_env("async", "full", "backend:native").set.empty());
  EnvChange none = torch_allocator_env("none", "full", nullptr);
  EXPECT_EQ(value_of(none, "PYTORCH_NO_CUDA_MEMORY_CACHING"), "1");
  EXPECT_EQ(value_of(none, "PYTORCH_CUDA_ALLOC_CONF"), "<unset>");
  EXPECT_TRUE(torch_allocator_env("keep", "full", nullptr).set.empty());
  EXPECT_THROW(torch_allocator_env("fast", "full", nullptr), InputError);
}

TEST(TorchAllocator, TheNoteIsOnlyForJobsThatLookLikePyTorch) {
  EXPECT_TRUE(looks_like_pytorch({"python", "train.py"}));
  EXPECT_TRUE(looks_like_pytorch({"/usr/bin/python3.11", "-m", "x"}));
  EXPECT_TRUE(looks_like_pytorch({"torchrun", "--nproc-per-node", "8", "train.py"}));
  EXPECT_TRUE(looks_like_pytorch({"mpirun", "-np", "2", "./train.py"}));
  EXPECT_FALSE(looks_like_pytorch({"./my_cuda_app", "--steps", "5"}));
  EXPECT_FALSE(looks_like_pytorch({"mpirun", "-np", "2", "/opt/bin/bench"}));
  EXPECT_FALSE(looks_like_pytorch({".py"}));
}

TEST(XlaAllocator, AutoPutsJaxOnItsPlatformAllocatorAtFullOnly) {
  EnvChange full = xla_allocator_env("auto", "full", nullptr, nullptr);
  EXPECT_EQ(value_of(full, "XLA_PYTHON_CLIENT_ALLOCATOR"), "platform");
  EXPECT_EQ(value_of(full, "XLA_PYTHON_CLIENT_PREALLOCATE"), "false");
  EXPECT_NE(full.note.find("--jax-alloc keep"), std::string::npos) << full.note;
  for (const char* level : {"off", "metrics", "broad"}) {
    EnvChange other = xla_allocator_env("auto", level, nullptr, nullptr);
    EXPECT_TRUE(other.set.empty()) << level;
    EXPECT_TRUE(other.note.empty()) << level;
  }
}

TEST(XlaAllocator, AutoKeepsTheUsersOwnAllocatorAndPreallocation) {
  EXPECT_TRUE(xla_allocator_env("auto", "full", "bfc", nullptr).set.empty());
  EXPECT_EQ(value_of(xla_allocator_env("auto", "full", "", nullptr),
                     "XLA_PYTHON_CLIENT_ALLOCATOR"),
            "platform");  // set but empty: as unset
  EnvChange with_prealloc = xla_allocator_env("auto", "full", nullptr, "true");
  EXPECT_EQ(value_of(with_prealloc, "XLA_PYTHON_CLIENT_ALLOCATOR"), "platform");
  EXPECT_EQ(value_of(with_prealloc, "XLA_PYTHON_CLIENT_PREALLOCATE"), "<unset>");
}

TEST(XlaAllocator, PlatformIsForcedAtAnyLevelAndKeepChangesNothing) {
  EXPECT_EQ(value_of(xla_allocator_env("platform", "broad", "bfc", nullptr),
                     "XLA_PYTHON_CLIENT_ALLOCATOR"),
            "platform");
  EXPECT_TRUE(xla_allocator_env("keep", "full", nullptr, nullptr).set.empty());
  EXPECT_TRUE(xla_allocator_env("keep", "full", nullptr, nullptr).note.empty());
  EXPECT_THROW(xla_allocator_env("bfc", "full", nullptr, nullptr), InputError);
}

TEST(XlaCommandBuffers, AutoTurnsThemOffAtFullOnlyKeepingTheUsersFlags) {
  EnvChange full = xla_command_buffer_env("auto", "full", "--xla_gpu_autotune_level=0");
  EXPECT_EQ(value_of(full, "XLA_FLAGS"),
            "--xla_gpu_autotune_level=0 --xla_gpu_enable_command_buffer=");
  EXPECT_NE(full.note.find("--jax-graphs keep"), std::string::npos) << full.note;
  EXPECT_EQ(value_of(xla_command_buffer_env("auto", "full", nullptr), "XLA_FLAGS"),
            "--xla_gpu_enable_command_buffer=");
  for (const char* level : {"off", "metrics", "broad"})
    EXPECT_TRUE(xla_command_buffer_env("auto", level, nullptr).set.empty()) << level;
}

TEST(XlaCommandBuffers, AutoLeavesACommandBufferFlagTheUserGaveAndOffOverridesIt) {
  const char* user = "--xla_gpu_enable_command_buffer=FUSION";
  EXPECT_TRUE(xla_command_buffer_env("auto", "full", user).set.empty());
  EXPECT_EQ(value_of(xla_command_buffer_env("off", "broad", user), "XLA_FLAGS"),
            "--xla_gpu_enable_command_buffer=FUSION --xla_gpu_enable_command_buffer=");
  EXPECT_TRUE(xla_command_buffer_env("keep", "full", nullptr).set.empty());
  EXPECT_THROW(xla_command_buffer_env("none", "full", nullptr), InputError);
}

std::string error_of(const TraceRequest& request) {
  try {
    check_request(request);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A Python job gets the package and its start-up hook first, its own PYTHONPATH after them.
TEST(PythonPath, ThePackageAndItsBootDirectoryComeBeforeTheJobsOwnPath) {
  EXPECT_EQ(python_path("/a:/b", "/opt/py"), "/opt/py/lockstep/_boot:/opt/py:/a:/b");
  EXPECT_EQ(python_path(nullptr, "/opt/py"), "/opt/py/lockstep/_boot:/opt/py");
  EXPECT_EQ(python_path("", "/opt/py"), "/opt/py/lockstep/_boot:/opt/py");
}

TEST(PythonPath, WithoutThePackageTheJobsPathIsLeftAlone) {
  EXPECT_EQ(python_path("/a:/b", ""), "/a:/b");
  EXPECT_EQ(python_path(nullptr, ""), "");
}

TEST(RunFlags, EveryFlagOfTheSettingsTableSetsARequestField) {
  TraceRequest request;
  int flags = 0;
  for (const settings::Setting& setting : settings::all()) {
    RequestField field = request_field(request, setting.id);
    const bool has_field = field.text != nullptr || field.flag != nullptr;
    EXPECT_EQ(has_field, *setting.cli_flag != '\0') << setting.name;
    if (field.flag != nullptr) EXPECT_EQ(setting.kind.kind, settings::Kind::Switch) << setting.name;
    flags += has_field;
  }
  EXPECT_EQ(flags, 7);  // -o, --level, --steps, --kernels, --stacks, --overwrite, --state
}

TEST(RunFlags, ABadKernelsRegexIsRefusedBeforeTheJobStarts) {
  TraceRequest request;
  request.kernels = "(";
  EXPECT_TRUE(error_of(request).starts_with("--kernels: '(' is not a valid regular expression"))
      << error_of(request);
  request.kernels = "gemm|reduce";
  EXPECT_EQ(error_of(request), "");
  request.command = {"true"};
  request.kernels = "(";
  request.dir = ::testing::TempDir() + "launch-test-never-made";
  EXPECT_THROW(launch_traced(request), InputError);
  EXPECT_FALSE(std::filesystem::exists(request.dir));
}

TEST(RunFlags, AnUnknownAllocatorModeIsRefusedBeforeTheJobStarts) {
  TraceRequest request;
  request.jax_alloc = "bfc";
  EXPECT_EQ(error_of(request), "--jax-alloc: 'bfc' is not auto, platform or keep");
  request.jax_alloc = "platform";
  request.torch_alloc = "fast";
  EXPECT_EQ(error_of(request), "--torch-alloc: 'fast' is not auto, async, none or keep");
  request.torch_alloc = "keep";
  request.jax_graphs = "none";
  EXPECT_EQ(error_of(request), "--jax-graphs: 'none' is not auto, off or keep");
  request.jax_graphs = "off";
  EXPECT_EQ(error_of(request), "");
}

TEST(RunFlags, LevelsAndStepsAreCheckedByTheShimsParsers) {
  TraceRequest request;
  request.level = "loud";
  EXPECT_EQ(error_of(request), "--level: 'loud' is not one of off|metrics|broad|full");
  request.level = "FULL";  // the shim takes any case
  EXPECT_EQ(error_of(request), "");
  request.steps = "7-3";
  EXPECT_TRUE(error_of(request).starts_with("--steps: '7-3' is not a step window"))
      << error_of(request);
}

TEST(RunFlags, ABadValueInTheEnvironmentIsRefusedUnlessAFlagReplacesIt) {
  ::setenv("LOCKSTEP_STEPS", "7-3", 1);
  TraceRequest request;
  const std::string error = error_of(request);
  request.steps = "1-2";
  const std::string replaced = error_of(request);
  ::unsetenv("LOCKSTEP_STEPS");
  EXPECT_TRUE(error.starts_with("LOCKSTEP_STEPS=7-3 (from the environment) is not a step window"))
      << error;
  EXPECT_EQ(replaced, "");
}

// One set of limits: what LOCKSTEP_STEPS takes, --steps of run and diff take.
TEST(RunFlags, StepRangesTakeWhatTheShimTakes) {
  uint32_t first = 0, last = 0;
  parse_step_range("4000000000-", "--steps", first, last);
  EXPECT_EQ(first, 4000000000u);
  EXPECT_EQ(last, UINT32_MAX);
  EXPECT_THROW(parse_step_range("4294967296", "--steps", first, last), InputError);
  EXPECT_THROW(parse_step_range("3-1", "--steps", first, last), InputError);
}

class InTempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    old_ = std::filesystem::current_path();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("launch-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::filesystem::current_path(dir_);
  }
  void TearDown() override {
    std::filesystem::current_path(old_);
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path old_, dir_;
};

TEST_F(InTempDir, DefaultTraceDirectoriesOfOneSecondDiffer) {
  const std::string a = default_trace_dir();
  const std::string b = default_trace_dir();
  const std::string c = default_trace_dir();
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  EXPECT_TRUE(a.starts_with("lockstep-trace-")) << a;
  for (const std::string& dir : {a, b, c}) EXPECT_TRUE(std::filesystem::is_directory(dir)) << dir;
}

TEST_F(InTempDir, TheRefusalOfAnotherRunsDirectoryNamesTheFlag) {
  std::string error;
  ASSERT_TRUE(trace::prepare_run_dir({(dir_ / "t").string(), "other-run", false}, &error)) << error;
  std::ofstream(dir_ / "shim.so") << "";
  ::setenv("LOCKSTEP_LIB", (dir_ / "shim.so").c_str(), 1);
  TraceRequest request;
  request.dir = (dir_ / "t").string();
  request.command = {"true"};
  std::string message;
  try {
    launch_traced(request);
  } catch (const InputError& e) {
    message = e.what();
  }
  ::unsetenv("LOCKSTEP_LIB");
  EXPECT_NE(message.find("--overwrite"), std::string::npos) << message;
  EXPECT_EQ(message.find("LOCKSTEP_"), std::string::npos) << message;
}

// check --resume-at's contract: the job's arguments may name the resume step and the file.
TEST(ResumeArguments, PlaceholdersAreReplacedEverywhereInEveryArgument) {
  const std::vector<std::string> command = {"train", "--resume-step={resume_at}", "--ckpt",
                                            "{checkpoint}", "{resume_at}-{resume_at}", "{other}"};
  EXPECT_EQ(resume_arguments(command, 4, "/d/checkpoint"),
            (std::vector<std::string>{"train", "--resume-step=4", "--ckpt", "/d/checkpoint", "4-4",
                                      "{other}"}));
  // A value that contains a placeholder is not replaced again.
  EXPECT_EQ(resume_arguments({"{checkpoint}"}, 4, "/{checkpoint}"),
            (std::vector<std::string>{"/{checkpoint}"}));
}

}  // namespace
}  // namespace lockstep::tools
