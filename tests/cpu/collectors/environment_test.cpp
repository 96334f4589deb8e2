// What the shim records of the job's environment for the trace header (collectors/environment.h):
// the numerics variables that are set, and the Python packages beside the loaded libraries.
#include "collectors/environment.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace lockstep::collectors {
namespace {

namespace fs = std::filesystem;

TEST(Environment, TheNumericsVariablesThatAreSetAreRecordedAndOthersAreNot) {
  const char* envp[] = {
      "NVIDIA_TF32_OVERRIDE=0", "CUBLAS_WORKSPACE_CONFIG=:4096:8",       "HOME=/root",
      "NCCL_DEBUG=INFO",        "XLA_FLAGS=--xla_gpu_deterministic_ops", nullptr};
  const nlohmann::json recorded = recorded_variables(envp, "");
  EXPECT_EQ(recorded, nlohmann::json({{"NVIDIA_TF32_OVERRIDE", "0"},
                                      {"CUBLAS_WORKSPACE_CONFIG", ":4096:8"},
                                      {"XLA_FLAGS", "--xla_gpu_deterministic_ops"}}));
}

TEST(Environment, TheUsersPatternAddsVariablesMatchedByTheirWholeName) {
  const char* envp[] = {"NCCL_DEBUG=INFO", "NCCL_IB_HCA=mlx5", "MY_NCCL=1", nullptr};
  const nlohmann::json recorded = recorded_variables(envp, "NCCL_.*");
  EXPECT_TRUE(recorded.contains("NCCL_DEBUG"));
  EXPECT_TRUE(recorded.contains("NCCL_IB_HCA"));
  EXPECT_FALSE(recorded.contains("MY_NCCL")) << "the pattern matches whole names only";
}

TEST(Environment, PackageVersionsComeFromTheDistInfoBesideALoadedLibrary) {
  const fs::path site = fs::temp_directory_path() /
                        ("lockstep-env-test-" + std::to_string(::getpid())) / "site-packages";
  fs::create_directories(site / "torch" / "lib");
  for (const char* dir : {"torch-2.11.0+cu130.dist-info", "triton-3.5.1.dist-info",
                          "torch_tb_profiler-0.4.3.dist-info", "requests-2.32.0.dist-info"})
    fs::create_directories(site / dir);
  const nlohmann::json found =
      python_packages({"/usr/lib/libc.so.6", (site / "torch/lib/libtorch_cuda.so").string()});
  EXPECT_EQ(found, nlohmann::json({{"torch", "2.11.0+cu130"}, {"triton", "3.5.1"}}));
  EXPECT_EQ(python_packages({"/usr/lib/libc.so.6"}), nlohmann::json::object())
      << "a job with no library in a site directory has no packages";
  fs::remove_all(site.parent_path());
}

}  // namespace
}  // namespace lockstep::collectors
