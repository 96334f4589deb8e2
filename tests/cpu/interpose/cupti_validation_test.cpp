// CUPTI validation mode (interpose/cupti_validation.h, cupti_coverage.h):
// - Coverage.*: the aggregation as a pure function of synthetic activity records;
// - ValidationOff.*: with LOCKSTEP_VALIDATE unset at load, the hooks push nothing;
// - ValidationOn.*: with LOCKSTEP_VALIDATE=1 at load, a child process launches through the
//   stub libraries with a fake libcupti.so.13 loaded, and its exit writes coverage-<pid>.json.
// ctest runs the Off and On groups as separate processes with the environment each needs.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <cupti.h>
#include <nlohmann/json.hpp>

#include "interpose/cupti_coverage.h"
#include "preload_test_support.h"

using namespace interpose_test;
namespace coverage = lockstep::interpose::coverage;
using coverage::ApiDomain;
using coverage::ExternalId;
using coverage::PushScope;
using coverage::Source;

namespace {

uint64_t id(uint64_t sequence, PushScope scope, PushScope library = PushScope::None,
            bool traced = true) {
  ExternalId e;
  e.sequence = sequence;
  e.scope = scope;
  e.library = library;
  e.traced = traced;
  return coverage::encode(e);
}

const coverage::SourceCounts& counts(const coverage::Report& r, Source s) {
  return r.sources[static_cast<int>(s)];
}

TEST(Coverage, ExternalIdRoundTrips) {
  const ExternalId e = coverage::decode(id(123456789, PushScope::Launch, PushScope::Nccl, false));
  EXPECT_EQ(e.sequence, 123456789u);
  EXPECT_EQ(e.scope, PushScope::Launch);
  EXPECT_EQ(e.library, PushScope::Nccl);
  EXPECT_FALSE(e.traced);
  const ExternalId g = coverage::decode(id(1, PushScope::Graph));
  EXPECT_EQ(g.scope, PushScope::Graph);
  EXPECT_EQ(g.library, PushScope::None);
  EXPECT_TRUE(g.traced);
}

TEST(Coverage, ValidationSwitch) {
  for (const char* on : {"1", "true", "YES", "On"})
    EXPECT_TRUE(coverage::validation_requested(on)) << on;
  for (const char* off : {"0", "", "false", "2", "off"})
    EXPECT_FALSE(coverage::validation_requested(off)) << off;
  EXPECT_FALSE(coverage::validation_requested(nullptr));
}

TEST(Coverage, EveryKindOfKernel) {
  coverage::Activity a;
  // 1: nvcc stub, hooked at the runtime (a driver record with the same correlation under it).
  a.apis.push_back({1, ApiDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel});
  a.apis.push_back({1, ApiDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000});
  a.externals.push_back({1, id(1, PushScope::Launch)});
  a.kernels.push_back({1, "elementwise_kernel", 0});
  // 2: missed, a driver launch nobody pushed for.
  a.apis.push_back({2, ApiDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx});
  a.kernels.push_back({2, "triton_poi_fused_0", 0});
  // 3: two kernels replayed from one cudaGraphLaunch.
  a.apis.push_back({3, ApiDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000});
  a.externals.push_back({3, id(2, PushScope::Graph)});
  a.kernels.push_back({3, "replayed_a", 9});
  a.kernels.push_back({3, "replayed_b", 9});
  // 4: a cuBLAS kernel launched through our driver wrapper inside cublasGemmEx.
  a.apis.push_back({4, ApiDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel});
  a.externals.push_back({4, id(4, PushScope::Launch, PushScope::Blas)});
  a.kernels.push_back({4, "sm90_xmma_gemm", 0});
  // 5: a cuBLASLt kernel whose launch path we did not hook, inside cublasLtMatmul.
  a.apis.push_back({5, ApiDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx});
  a.externals.push_back({5, id(5, PushScope::Blas, PushScope::Blas)});
  a.kernels.push_back({5, "cutlass_gemm", 0});
  // 6: Triton through our driver wrapper, outside any library.
  a.apis.push_back({6, ApiDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel});
  a.externals.push_back({6, id(6, PushScope::Launch)});
  a.kernels.push_back({6, "triton_red_fused_1", 0});
  // 7: NCCL kernel launched in ncclGroupEnd.
  a.apis.push_back({7, ApiDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx});
  a.externals.push_back({7, id(7, PushScope::Launch, PushScope::Nccl)});
  a.kernels.push_back({7, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0});
  // 8: NCCL communicator setup, forwarded untraced on purpose.
  a.externals.push_back({8, id(8, PushScope::Launch, PushScope::Nccl, false)});
  a.kernels.push_back({8, "ncclInitKernel", 0});
  // 9: our own hash kernel (no id: launched from inside the shim).
  a.kernels.push_back({9, "lsf1_batch_small", 0});
  // 10: a kernel with no API record at all, missed; and a second missed with a known name.
  a.kernels.push_back({10, "mystery", 0});
  a.kernels.push_back({2, "triton_poi_fused_0", 0});
  a.dropped_records = 3;

  const coverage::Report r = coverage::aggregate(a);
  EXPECT_EQ(r.kernels, 11u);
  EXPECT_EQ(r.accounted, 7u);
  EXPECT_EQ(r.missed, 3u);
  EXPECT_EQ(r.shim_internal, 1u);
  EXPECT_EQ(r.own_hash_kernels, 1u);
  EXPECT_EQ(r.dropped_records, 3u);
  EXPECT_EQ(counts(r, Source::NvccStub).accounted, 1u);
  EXPECT_EQ(counts(r, Source::Graph).accounted, 2u);
  EXPECT_EQ(counts(r, Source::Cublas).accounted, 2u);
  EXPECT_EQ(counts(r, Source::Cublas).by_launch_hook, 1u);  // the Lt one only by its API scope
  EXPECT_EQ(counts(r, Source::Triton).accounted, 1u);
  EXPECT_EQ(counts(r, Source::Triton).missed, 2u);
  EXPECT_EQ(counts(r, Source::Nccl).accounted, 1u);
  EXPECT_EQ(counts(r, Source::Other).missed, 1u);
  ASSERT_EQ(r.missed_names.size(), 2u);
  EXPECT_EQ(r.missed_names.at("triton_poi_fused_0"), 2u);
  EXPECT_EQ(r.missed_names.at("mystery"), 1u);

  const nlohmann::json j = nlohmann::json::parse(coverage::to_json(r, 42));
  EXPECT_EQ(j["pid"], 42);
  EXPECT_EQ(j["missed"], 3);
  EXPECT_EQ(j["sources"]["driver_triton"]["missed"], 2);
  EXPECT_EQ(j["sources"]["graph_replay"]["accounted"], 2);
  ASSERT_EQ(j["missed_apis"].size(), 2u);
  EXPECT_EQ(j["missed_apis"][0]["domain"], "driver");
  EXPECT_EQ(j["missed_apis"][0]["cbid"], CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx);
  EXPECT_EQ(j["missed_apis"][0]["count"], 2);
  EXPECT_EQ(j["missed_apis"][1]["domain"], "none");
  EXPECT_NE(coverage::summary_line(r).find("7/11 kernels accounted, 3 missed"), std::string::npos)
      << coverage::summary_line(r);
}

TEST(Coverage, MissedNamesAreCapped) {
  coverage::Activity a;
  for (uint32_t i = 0; i < 50; ++i) a.kernels.push_back({i + 1, "k" + std::to_string(i), 0});
  const coverage::Report r = coverage::aggregate(a);
  EXPECT_EQ(r.missed, 50u);
  EXPECT_EQ(r.missed_names.size(), coverage::Report::kMaxMissedNames);
}

// ---- the hooks, through the stub libraries and a fake libcupti.so.13 ----
class WithFakeCupti : public PreloadedShim {
 protected:
  void SetUp() override {
    PreloadedShim::SetUp();
    // Loaded first: the shim's dlopen("libcupti.so.13") finds it by its soname.
    cupti_ = open_library(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
    app_ = open_library(FAKE_APP_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(cupti_, nullptr);
    ASSERT_NE(app_, nullptr);
    pushes_ = symbol<int (*)()>(cupti_, "fake_cupti_pushes");
    pops_ = symbol<int (*)()>(cupti_, "fake_cupti_pops");
    pushed_ = symbol<uint64_t (*)(int)>(cupti_, "fake_cupti_pushed");
    ASSERT_NE(pushes_, nullptr);
  }
  int launch_and_replay() {
    if (symbol<int (*)(bool)>(app_, "app_launch_stub")(false) != 0) return 1;
    if (symbol<int (*)()>(app_, "app_graph")() != 0) return 2;
    return 0;
  }
  void* cupti_ = nullptr;
  void* app_ = nullptr;
  int (*pushes_)() = nullptr;
  int (*pops_)() = nullptr;
  uint64_t (*pushed_)(int) = nullptr;
};

using ValidationOff = WithFakeCupti;
TEST_F(ValidationOff, LaunchHooksPushNothing) {
  ASSERT_EQ(std::getenv("LOCKSTEP_VALIDATE"), nullptr);
  ASSERT_EQ(launch_and_replay(), 0);
  // The hooks did run (reported the launch and the graph launch) ...
  EXPECT_EQ(lines_starting(fake_log(), "launch_begin").size(), 1u) << fake_log();
  // ... and never touched CUPTI.
  EXPECT_EQ(pushes_(), 0);
  EXPECT_EQ(pops_(), 0);
}

// Runs body() in a child process whose exit (atexit) writes the coverage file; returns the
// child's pid and exit status.
template <typename Body>
std::pair<pid_t, int> in_child(Body&& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) std::exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return {pid, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)};
}

std::string temp_dir() {
  char pattern[] = "/tmp/lockstep-validate-XXXXXX";
  const char* dir = mkdtemp(pattern);
  return dir != nullptr ? dir : "";
}

using ValidationOn = WithFakeCupti;
TEST_F(ValidationOn, PushesAroundLaunchesAndWritesCoverageAtExit) {
  ASSERT_STREQ(std::getenv("LOCKSTEP_VALIDATE"), "1");
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  setenv("LOCKSTEP_DIR", dir.c_str(), 1);
  auto [pid, status] = in_child([&] {
    if (launch_and_replay() != 0) return 10;
    if (pushes_() != 2 || pops_() != 2) return 11;  // one stub launch, one graph launch
    const ExternalId launch = coverage::decode(pushed_(0));
    const ExternalId graph = coverage::decode(pushed_(1));
    if (launch.scope != PushScope::Launch || !launch.traced || launch.library != PushScope::None)
      return 12;
    if (graph.scope != PushScope::Graph || graph.sequence <= launch.sequence) return 13;
    return 0;
  });
  ASSERT_EQ(status, 0) << "child failed its check " << status;
  std::ifstream in(dir + "/coverage-" + std::to_string(pid) + ".json");
  ASSERT_TRUE(in.good()) << "no coverage file in " << dir;
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["pid"], pid);
  EXPECT_EQ(j["kernels"], 3);  // stub launch, replayed kernel, unhooked kernel
  EXPECT_EQ(j["accounted"], 2);
  EXPECT_EQ(j["missed"], 1);
  EXPECT_EQ(j["own_hash_kernels"], 1);
  EXPECT_EQ(j["dropped_records"], 2);
  EXPECT_EQ(j["sources"]["nvcc_stub"]["accounted"], 1);
  EXPECT_EQ(j["sources"]["graph_replay"]["accounted"], 1);
  EXPECT_EQ(j["sources"]["driver_triton"]["missed"], 1);
  ASSERT_EQ(j["missed_kernels"].size(), 1u);
  EXPECT_EQ(j["missed_kernels"][0]["name"], "unhooked_kernel");
  std::filesystem::remove_all(dir);
}

TEST_F(ValidationOn, AnotherSubscriberTurnsValidationOff) {
  const std::string dir = temp_dir();
  setenv("LOCKSTEP_DIR", dir.c_str(), 1);
  auto [pid, status] = in_child([&] {
    setenv("FAKE_CUPTI_BUSY", "1", 1);
    if (launch_and_replay() != 0) return 10;  // the job carries on
    return pushes_() == 0 ? 0 : 11;
  });
  ASSERT_EQ(status, 0);
  std::ifstream in(dir + "/coverage-" + std::to_string(pid) + ".json");
  EXPECT_FALSE(in.good());
  std::filesystem::remove_all(dir);
}

}  // namespace
