// One event per call seen at two layers, gating, and the other hook families end to end
// through the stub libraries.
#include <atomic>
#include <thread>

#include "interpose/cuda_api.h"
#include "preload_test_support.h"

using namespace interpose_test;

namespace {

class Stubs : public PreloadedShim {
 protected:
  void SetUp() override {
    PreloadedShim::SetUp();
    app_ = open_library(FAKE_APP_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(app_, nullptr);
    void* cudart = dlopen(FAKE_CUDART_PATH, RTLD_NOLOAD | RTLD_LAZY);
    void* driver = dlopen(FAKE_CUDA_PATH, RTLD_NOLOAD | RTLD_LAZY);
    ASSERT_NE(cudart, nullptr);
    ASSERT_NE(driver, nullptr);
    runtime_calls_ = symbol<int (*)(const char*)>(cudart, "fakecudart_calls");
    driver_calls_ = symbol<int (*)(const char*)>(driver, "fakecuda_calls");
    driver_ = driver;
  }
  void* app_ = nullptr;
  void* driver_ = nullptr;
  int (*runtime_calls_)(const char*) = nullptr;
  int (*driver_calls_)(const char*) = nullptr;
};

TEST_F(Stubs, RuntimeLaunchForwardedToDriverWrapperIsOneEvent) {
  auto launch = symbol<int (*)(bool)>(app_, "app_launch_stub");
  ASSERT_EQ(launch(false), 0);
  EXPECT_EQ(runtime_calls_("__cudaLaunchKernel"), 1);
  EXPECT_EQ(driver_calls_("cuLaunchKernel"), 1);  // reached through our driver wrapper
  const std::string log = fake_log();
  auto begins = lines_starting(log, "launch_begin");
  ASSERT_EQ(begins.size(), 1u) << log;
  EXPECT_TRUE(contains(begins[0], "api=1 ptsz=0 kind=2")) << begins[0];  // the runtime stub
  EXPECT_TRUE(contains(begins[0], "grid=2,3,4 block=32,1,1 cluster=0,0,0 smem=16")) << begins[0];
  EXPECT_EQ(lines_starting(log, "launch_end").size(), 1u);

  // The driver wrapper alone does report: the single event above is de-duplication.
  clear_fake_log();
  auto driver_launch =
      reinterpret_cast<CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**)>(
          dlsym(driver_, "cuLaunchKernel"));
  ASSERT_EQ(driver_launch(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  begins = lines_starting(fake_log(), "launch_begin");
  ASSERT_EQ(begins.size(), 1u);
  EXPECT_TRUE(contains(begins[0], "api=5")) << begins[0];
}

// The launch LOCKSTEP_REPLAY names is relaunched right after it returns, through the hook's own
// forward (launch_hooks.cpp, replay_launch): the real function again with the same arguments, no
// second event. Through the runtime stub (PyTorch's path) and the driver (JAX's, Triton's).
TEST_F(Stubs, AnArmedReplayRelaunchesTheSameLaunchOnceWithoutASecondEvent) {
  auto arm = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "lockstep_fake_arm_replay"));
  ASSERT_NE(arm, nullptr);
  arm();
  ASSERT_EQ(symbol<int (*)(bool)>(app_, "app_launch_stub")(false), 0);
  EXPECT_EQ(runtime_calls_("__cudaLaunchKernel"), 2);
  std::string log = fake_log();
  EXPECT_EQ(lines_starting(log, "launch_begin").size(), 1u) << log;
  EXPECT_EQ(lines_starting(log, "replay_after result=0").size(), 1u) << log;
  EXPECT_EQ(lines_starting(log, "relaunch result=0").size(), 1u) << log;

  clear_fake_log();
  auto driver_launch =
      reinterpret_cast<CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**)>(
          dlsym(driver_, "cuLaunchKernel"));
  const int before = driver_calls_("cuLaunchKernel");
  arm();
  ASSERT_EQ(driver_launch(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(driver_calls_("cuLaunchKernel") - before, 2);
  log = fake_log();
  EXPECT_EQ(lines_starting(log, "launch_begin").size(), 1u) << log;
  EXPECT_EQ(lines_starting(log, "relaunch result=0").size(), 1u) << log;

  // Not armed: one call, no replay.
  clear_fake_log();
  ASSERT_EQ(symbol<int (*)(bool)>(app_, "app_launch_stub")(false), 0);
  EXPECT_EQ(runtime_calls_("__cudaLaunchKernel"), 3);
  EXPECT_TRUE(lines_starting(fake_log(), "replay_after").empty());
}

TEST_F(Stubs, PerThreadStubReachesPerThreadDriverFunction) {
  ASSERT_EQ(symbol<int (*)(bool)>(app_, "app_launch_stub")(true), 0);
  EXPECT_EQ(runtime_calls_("__cudaLaunchKernel_ptsz"), 1);
  EXPECT_EQ(driver_calls_("cuLaunchKernel_ptsz"), 1);
  EXPECT_EQ(driver_calls_("cuLaunchKernel"), 0);
  auto begins = lines_starting(fake_log(), "launch_begin");
  ASSERT_EQ(begins.size(), 1u);
  EXPECT_TRUE(contains(begins[0], "api=1 ptsz=1")) << begins[0];
}

TEST_F(Stubs, InactiveTracingForwardsWithoutEvents) {
  setenv("LOCKSTEP_FAKE_INACTIVE", "1", 1);
  ASSERT_EQ(symbol<int (*)(bool)>(app_, "app_launch_stub")(false), 0);
  unsetenv("LOCKSTEP_FAKE_INACTIVE");
  EXPECT_EQ(runtime_calls_("__cudaLaunchKernel"), 1);
  EXPECT_EQ(driver_calls_("cuLaunchKernel"), 1);
  EXPECT_TRUE(lines_starting(fake_log(), "launch_begin").empty()) << fake_log();
}

// Below broad (launches_traced() false) both layers forward a launch without building an
// event, while other hooks still report (a copy, which metrics may need).
TEST_F(Stubs, LaunchesBelowBroadForwardWithoutEvents) {
  setenv("LOCKSTEP_FAKE_NO_LAUNCHES", "1", 1);
  ASSERT_EQ(symbol<int (*)(bool)>(app_, "app_launch_stub")(false), 0);
  ASSERT_EQ(symbol<int (*)()>(app_, "app_malloc_copy_free")(), 0);
  unsetenv("LOCKSTEP_FAKE_NO_LAUNCHES");
  EXPECT_EQ(runtime_calls_("__cudaLaunchKernel"), 1);
  EXPECT_EQ(driver_calls_("cuLaunchKernel"), 1);
  const std::string log = fake_log();
  EXPECT_TRUE(lines_starting(log, "launch_begin").empty()) << log;
  EXPECT_EQ(lines_starting(log, "memop_begin").size(), 1u) << log;
}

TEST_F(Stubs, AllocationsCopiesAndGraphs) {
  ASSERT_EQ(symbol<int (*)()>(app_, "app_malloc_copy_free")(), 0);
  ASSERT_EQ(symbol<int (*)()>(app_, "app_graph")(), 0);
  const std::string log = fake_log();
  ASSERT_EQ(lines_starting(log, "alloc 0x100000 256").size(), 1u) << log;
  ASSERT_EQ(lines_starting(log, "free 0x100000").size(), 1u) << log;
  auto copies = lines_starting(log, "memop_begin");
  ASSERT_EQ(copies.size(), 1u) << log;
  EXPECT_TRUE(contains(copies[0], "api=cudaMemcpyAsync set=0 async=1 dir=2")) << copies[0];
  EXPECT_TRUE(contains(copies[0], "bytes=16")) << copies[0];
  EXPECT_EQ(lines_starting(log, "graph_instantiated graph=0x5000 exec=0x6000").size(), 1u) << log;
  EXPECT_EQ(lines_starting(log, "graph_launch exec=0x6000").size(), 1u) << log;
  EXPECT_EQ(runtime_calls_("cudaMalloc"), 1);
  EXPECT_EQ(runtime_calls_("cudaGraphLaunch"), 1);
}

TEST_F(Stubs, VirtualMemoryReservationsAndMappings) {
  using Reserve = CUresult (*)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
  using Map =
      CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  using Range = CUresult (*)(CUdeviceptr, size_t);
  CUdeviceptr base = 0;
  ASSERT_EQ(symbol<Reserve>(driver_, "cuMemAddressReserve")(&base, 1 << 30, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(symbol<Map>(driver_, "cuMemMap")(base, 2 << 20, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(symbol<Range>(driver_, "cuMemUnmap")(base, 2 << 20), CUDA_SUCCESS);
  ASSERT_EQ(symbol<Range>(driver_, "cuMemAddressFree")(base, 1 << 30), CUDA_SUCCESS);
  const std::string log = fake_log();
  EXPECT_EQ(lines_starting(log, "va_reserve 0x7f0000000000 1073741824").size(), 1u) << log;
  EXPECT_EQ(lines_starting(log, "map 0x7f0000000000 2097152").size(), 1u) << log;
  EXPECT_EQ(lines_starting(log, "unmap 0x7f0000000000 2097152").size(), 1u) << log;
  EXPECT_EQ(lines_starting(log, "va_free 0x7f0000000000 1073741824").size(), 1u) << log;
  EXPECT_EQ(driver_calls_("cuMemMap"), 1);
}

TEST_F(PreloadedShim, CublasOverCublasLtIsOneGemm) {
  void* blas = open_library(FAKE_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(blas, nullptr);
  void* lt = dlopen(FAKE_CUBLASLT_PATH, RTLD_NOLOAD | RTLD_LAZY);
  ASSERT_NE(lt, nullptr);
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void*, cudaDataType, int, const void*,
                                    cudaDataType, int, const void*, void*, cudaDataType, int,
                                    cublasComputeType_t, cublasGemmAlgo_t);
  auto gemm = symbol<GemmEx>(blas, "cublasGemmEx");
  ASSERT_EQ(gemm(nullptr, CUBLAS_OP_N, CUBLAS_OP_T, 64, 32, 16, nullptr, nullptr, CUDA_R_16BF, 64,
                 nullptr, CUDA_R_16BF, 32, nullptr, nullptr, CUDA_R_16BF, 64, CUBLAS_COMPUTE_32F,
                 CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  auto lt_calls = symbol<int (*)(const char*)>(lt, "fakecublaslt_calls");
  EXPECT_EQ(lt_calls("cublasLtMatmul"), 1);  // the real Lt ran, through our Lt hook
  std::string log = fake_log();
  auto gemms = lines_starting(log, "gemm_begin");
  ASSERT_EQ(gemms.size(), 1u) << log;
  EXPECT_TRUE(contains(gemms[0], "api=cublasGemmEx m=64 n=32 k=16")) << gemms[0];
  EXPECT_TRUE(lines_starting(log, "lt_begin").empty()) << log;

  // Called directly, the Lt hook reports.
  clear_fake_log();
  using LtMatmul = cublasStatus_t (*)(
      cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,
      const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t, void*,
      cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t);
  auto matmul = symbol<LtMatmul>(lt, "cublasLtMatmul");
  int d = 0;
  ASSERT_EQ(matmul(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                   nullptr, &d, nullptr, nullptr, nullptr, 4096, nullptr),
            CUBLAS_STATUS_SUCCESS);
  log = fake_log();
  auto lts = lines_starting(log, "lt_begin");
  ASSERT_EQ(lts.size(), 1u) << log;
  EXPECT_TRUE(contains(lts[0], "ws=4096")) << lts[0];
  EXPECT_EQ(lt_calls("cublasLtMatmul"), 2);
}

TEST_F(PreloadedShim, NcclCollectivesGroupsAndCommunicators) {
  void* nccl = open_library(FAKE_NCCL_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(nccl, nullptr);
  auto calls = symbol<int (*)(const char*)>(nccl, "fakenccl_calls");
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ASSERT_EQ(symbol<decltype(&ncclCommInitRank)>(nccl, "ncclCommInitRank")(&comm, 2, id, 1),
            ncclSuccess);
  ASSERT_EQ(symbol<ncclResult_t (*)()>(nccl, "ncclGroupStart")(), ncclSuccess);
  float buf[4] = {};
  auto all_reduce = symbol<decltype(&ncclAllReduce)>(nccl, "ncclAllReduce");
  auto p_all_reduce = symbol<decltype(&ncclAllReduce)>(nccl, "pncclAllReduce");
  ASSERT_NE(reinterpret_cast<void*>(all_reduce), reinterpret_cast<void*>(p_all_reduce));
  ASSERT_EQ(all_reduce(buf, buf, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  ASSERT_EQ(p_all_reduce(buf, buf, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  ASSERT_EQ(symbol<ncclResult_t (*)()>(nccl, "ncclGroupEnd")(), ncclSuccess);
  ASSERT_EQ(symbol<decltype(&ncclCommDestroy)>(nccl, "ncclCommDestroy")(comm), ncclSuccess);
  EXPECT_EQ(calls("AllReduce"), 2);
  const std::string log = fake_log();
  EXPECT_EQ(lines_starting(log, "comm_created api=ncclCommInitRank comm=0x1234").size(), 1u) << log;
  EXPECT_TRUE(contains(lines_starting(log, "comm_created")[0], "nranks=2 rank=1")) << log;
  EXPECT_EQ(lines_starting(log, "nccl_group_start").size(), 1u) << log;
  auto ops = lines_starting(log, "nccl_begin");
  ASSERT_EQ(ops.size(), 2u) << log;
  EXPECT_TRUE(contains(ops[0], "op=1 api=ncclAllReduce count=4")) << ops[0];
  EXPECT_TRUE(contains(ops[1], "api=pncclAllReduce")) << ops[1];
  EXPECT_EQ(lines_starting(log, "nccl_group_end result=0").size(), 1u) << log;
  EXPECT_EQ(lines_starting(log, "comm_destroyed 0x1234").size(), 1u) << log;
}

// NCCL finds the shim as its profiler plugin through NCCL_PROFILER_PLUGIN (set by the shim's
// constructor: the test shim's fake setup sets it to the shim's own path), dlopen and a dlsym
// that goes through the shim's own dlsym hook; the plugin's choice for a collective reaches
// collectors between that collective's begin and end. The stub NCCL is a stand-in for the
// mechanics only.
TEST_F(PreloadedShim, NcclLoadsTheShimAsItsProfilerAndItsChoiceArrivesInsideTheCall) {
  const char* plugin = std::getenv("NCCL_PROFILER_PLUGIN");
  ASSERT_NE(plugin, nullptr) << "the shim's constructor did not offer itself to NCCL";
  Dl_info info{};
  ASSERT_NE(dladdr(dlsym(RTLD_DEFAULT, "lockstep_fake_log"), &info), 0);
  EXPECT_STREQ(plugin, info.dli_fname);

  void* nccl = open_library(FAKE_NCCL_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(nccl, nullptr);
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ASSERT_EQ(symbol<decltype(&ncclCommInitRank)>(nccl, "ncclCommInitRank")(&comm, 2, id, 1),
            ncclSuccess);
  ASSERT_EQ(symbol<int (*)()>(nccl, "fakenccl_profiler_loaded")(), 1);
  clear_fake_log();
  float buf[4] = {};
  auto all_reduce = symbol<decltype(&ncclAllReduce)>(nccl, "ncclAllReduce");
  ASSERT_EQ(all_reduce(buf, buf, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  const std::string log = fake_log();
  const size_t begin = log.find("nccl_begin");
  const size_t choice = log.find("nccl_choice func=AllReduce algo=Ring proto=LL128 channels=4");
  const size_t end = log.find("nccl_end");
  ASSERT_NE(begin, std::string::npos) << log;
  ASSERT_NE(choice, std::string::npos) << log;
  ASSERT_NE(end, std::string::npos) << log;
  EXPECT_LT(begin, choice) << log;
  EXPECT_LT(choice, end) << log;
}

}  // namespace

namespace {

TEST_F(Stubs, ConcurrentFirstUseFromManyThreads) {
  // A fresh hook (cuLaunchKernelEx, not resolved yet) hit by many threads at once.
  using LaunchEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
  // Our wrapper, taken without resolving its target: the threads race on the first lookup.
  auto launch = reinterpret_cast<LaunchEx>(dlsym(RTLD_DEFAULT, "cuLaunchKernelEx"));
  ASSERT_NE(launch, nullptr);
  constexpr int kThreads = 8, kCalls = 500;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      CUlaunchConfig config{};
      config.gridDimX = config.gridDimY = config.gridDimZ = 1;
      config.blockDimX = config.blockDimY = config.blockDimZ = 1;
      for (int i = 0; i < kCalls; ++i) {
        if (launch(&config, nullptr, nullptr, nullptr) != CUDA_SUCCESS) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(driver_calls_("cuLaunchKernelEx"), kThreads * kCalls);
  const std::string log = fake_log();
  EXPECT_EQ(lines_starting(log, "launch_begin").size(), size_t{kThreads * kCalls});
  EXPECT_EQ(lines_starting(log, "launch_end").size(), size_t{kThreads * kCalls});
}

}  // namespace
