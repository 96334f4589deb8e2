// Real-symbol lookup: RTLD_LOCAL libraries, versioned symbols, dlsym substitution, RTLD_NEXT
// relative to the caller, the resolver given to collectors.
#include "interpose/cuda_api.h"
#include "preload_test_support.h"

using namespace interpose_test;

namespace {

using CuLaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**);

TEST_F(PreloadedShim, CallThroughRtldLocalVersionedLibraryRunsHookAndRealOnce) {
  void* app = open_library(FAKE_APP_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(app, nullptr);
  void* cudart = dlopen(FAKE_CUDART_PATH, RTLD_NOLOAD | RTLD_LAZY);
  ASSERT_NE(cudart, nullptr);
  // The stub's symbols are versioned, and invisible to the global scope.
  EXPECT_NE(dlvsym(cudart, "cudaLaunchKernel", "libcudart.so.13"), nullptr);
  EXPECT_EQ(dlvsym(cudart, "cudaLaunchKernel", "libcudart.so.12"), nullptr);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "fakecudart_calls"), nullptr);
  auto calls = symbol<int (*)(const char*)>(cudart, "fakecudart_calls");
  ASSERT_NE(calls, nullptr);

  auto launch = symbol<int (*)()>(app, "app_launch_runtime");
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch(), 0);
  EXPECT_EQ(calls("cudaLaunchKernel"), 1);
  const std::string log = fake_log();
  auto begins = lines_starting(log, "launch_begin");
  ASSERT_EQ(begins.size(), 1u) << log;
  EXPECT_TRUE(contains(begins[0], "api=2 ptsz=0 kind=1")) << begins[0];  // RuntimeLaunch, stub
  EXPECT_TRUE(contains(begins[0], "grid=5,1,1 block=64,1,1")) << begins[0];
  auto ends = lines_starting(log, "launch_end");
  ASSERT_EQ(ends.size(), 1u) << log;
  EXPECT_TRUE(contains(ends[0], "result=0")) << ends[0];
}

TEST_F(PreloadedShim, LaunchExReportsClusterDims) {
  void* app = open_library(FAKE_APP_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(symbol<int (*)()>(app, "app_launch_ex_with_cluster")(), 0);
  auto begins = lines_starting(fake_log(), "launch_begin");
  ASSERT_EQ(begins.size(), 1u);
  EXPECT_TRUE(contains(begins[0], "api=3 ")) << begins[0];
  EXPECT_TRUE(contains(begins[0], "grid=8,1,1 block=128,1,1 cluster=2,1,1")) << begins[0];
}

TEST_F(PreloadedShim, DlsymOnHandleReturnsWrapperForHookedNamesOnly) {
  void* driver = open_library(FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(driver, nullptr);
  auto self = symbol<void* (*)(const char*)>(driver, "fakecuda_self");
  auto calls = symbol<int (*)(const char*)>(driver, "fakecuda_calls");
  ASSERT_NE(self, nullptr);
  void* real_launch = self("cuLaunchKernel");
  void* wrapper = dlsym(RTLD_DEFAULT, "cuLaunchKernel");  // the shim's (it is first in scope)
  ASSERT_NE(wrapper, nullptr);
  ASSERT_NE(wrapper, real_launch);

  void* looked_up = dlsym(driver, "cuLaunchKernel");
  EXPECT_EQ(looked_up, wrapper);
  // The real function we forward to is the stub's, never a wrapper.
  EXPECT_EQ(fake_resolve("cuLaunchKernel"), real_launch);
  // Unhooked names come back untouched.
  EXPECT_EQ(dlsym(driver, "cuCtxGetCurrent"), self("cuCtxGetCurrent"));

  auto launch = reinterpret_cast<CuLaunchKernel>(looked_up);
  EXPECT_EQ(launch(nullptr, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(calls("cuLaunchKernel"), 1);
  auto begins = lines_starting(fake_log(), "launch_begin");
  ASSERT_EQ(begins.size(), 1u);
  EXPECT_TRUE(contains(begins[0], "api=5 ptsz=0 kind=5")) << begins[0];  // DriverLaunch, unknown
}

TEST_F(PreloadedShim, DlsymLeavesAnotherLibrarysSameNamedSymbolAlone) {
  void* driver = open_library(FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(driver, nullptr);
  // Resolve our forwarding target first (the driver stub), then look at the impostor.
  ASSERT_EQ(dlsym(driver, "cuLaunchKernel"), dlsym(RTLD_DEFAULT, "cuLaunchKernel"));
  void* impostor = open_library(IMPOSTOR_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(impostor, nullptr);
  auto theirs = symbol<CuLaunchKernel>(impostor, "cuLaunchKernel");
  ASSERT_NE(theirs, nullptr);
  EXPECT_NE(reinterpret_cast<void*>(theirs), dlsym(RTLD_DEFAULT, "cuLaunchKernel"));
  EXPECT_EQ(theirs(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), 999);
  EXPECT_TRUE(lines_starting(fake_log(), "launch_begin").empty());
}

TEST_F(PreloadedShim, RtldNextResolvesRelativeToTheCallingLibrary) {
  // Global scope order: ..., probe_a (1), caller, probe_b (2).
  ASSERT_NE(open_library(PROBE_A_PATH, RTLD_NOW | RTLD_GLOBAL), nullptr);
  void* caller = open_library(CALLER_PATH, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(open_library(PROBE_B_PATH, RTLD_NOW | RTLD_GLOBAL), nullptr);
  ASSERT_NE(caller, nullptr);
  auto next = symbol<void* (*)(const char*)>(caller, "caller_next");
  auto next_versioned =
      symbol<void* (*)(const char*, const char*)>(caller, "caller_next_versioned");
  ASSERT_NE(next, nullptr);
  auto from_caller = reinterpret_cast<int (*)()>(next("probe_value"));
  ASSERT_NE(from_caller, nullptr);
  EXPECT_EQ(from_caller(), 2) << "RTLD_NEXT was anchored at the shim, not at the caller";
  // From the test program (loaded before probe_a) the next definition is probe_a's.
  auto from_main = reinterpret_cast<int (*)()>(dlsym(RTLD_NEXT, "probe_value"));
  ASSERT_NE(from_main, nullptr);
  EXPECT_EQ(from_main(), 1);
  // Data objects and IFUNCs follow the same rule; an IFUNC comes back resolved.
  auto data = static_cast<int*>(next("probe_data"));
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(*data, 20);
  auto ifunc = reinterpret_cast<int (*)()>(next("probe_ifunc"));
  ASSERT_NE(ifunc, nullptr);
  EXPECT_EQ(ifunc(), 200);
  // Nothing after the caller defines this: null, with a dlerror() message.
  dlerror();
  EXPECT_EQ(next("lockstep_no_such_symbol"), nullptr);
  EXPECT_NE(dlerror(), nullptr);
  // dlvsym(RTLD_NEXT) follows the same rule (the probes version their symbols PROBE_1).
  auto versioned = reinterpret_cast<int (*)()>(next_versioned("probe_value", "PROBE_1"));
  ASSERT_NE(versioned, nullptr);
  EXPECT_EQ(versioned(), 2);
  EXPECT_EQ(next_versioned("probe_value", "NO_SUCH_VERSION"), nullptr);
}

TEST_F(PreloadedShim, ResolverFindsLibrariesLoadedLater) {
  using LtMatmul = cublasStatus_t (*)(
      cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t,
      const void*, cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t, void*,
      cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t);
  auto wrapper = reinterpret_cast<LtMatmul>(dlsym(RTLD_DEFAULT, "cublasLtMatmul"));
  ASSERT_NE(wrapper, nullptr);
  auto call = [&] {
    return wrapper(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                   nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr);
  };
  // Nothing to forward to yet: an error status, no crash.
  EXPECT_EQ(call(), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(fake_resolve("fakecublaslt_calls"), nullptr);
  EXPECT_EQ(fake_resolve("cublasLtMatmul"), nullptr);
  void* lt = open_library(FAKE_CUBLASLT_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lt, nullptr);
  // The earlier miss is forgotten once a new object is loaded.
  EXPECT_EQ(call(), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(symbol<int (*)(const char*)>(lt, "fakecublaslt_calls")("cublasLtMatmul"), 1);
  void* real = fake_resolve("cublasLtMatmul");
  EXPECT_NE(real, nullptr);
  EXPECT_NE(real, dlsym(RTLD_DEFAULT, "cublasLtMatmul"));  // not our wrapper
  EXPECT_EQ(fake_resolve("fakecublaslt_calls"), dlsym(lt, "fakecublaslt_calls"));
}

}  // namespace

namespace {

TEST_F(PreloadedShim, RtldDefaultFromLocalLibrarySeesItsDependencies) {
  void* app = open_library(FAKE_APP_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(app, nullptr);
  void* cudart = dlopen(FAKE_CUDART_PATH, RTLD_NOLOAD | RTLD_LAZY);
  ASSERT_NE(cudart, nullptr);
  auto lookup = symbol<void* (*)(const char*)>(app, "app_default_lookup");
  ASSERT_NE(lookup, nullptr);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "fakecudart_calls"), nullptr);  // not global
  EXPECT_EQ(lookup("fakecudart_calls"), dlsym(cudart, "fakecudart_calls"));
  // A hooked name found this way is our wrapper (the global scope has it first).
  EXPECT_EQ(lookup("cudaLaunchKernel"), dlsym(RTLD_DEFAULT, "cudaLaunchKernel"));
}

}  // namespace

namespace {

TEST_F(PreloadedShim, DlmopenIsForwardedWithTheCallersIdentity) {
  ASSERT_NE(dlsym(RTLD_DEFAULT, "dlmopen"), nullptr);
  void* h = dlmopen(LM_ID_BASE, PROBE_A_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto probe = symbol<int (*)()>(h, "probe_value");
  ASSERT_NE(probe, nullptr);
  EXPECT_EQ(probe(), 1);
  dlerror();
  EXPECT_EQ(dlmopen(LM_ID_BASE, "/nonexistent/libnothing.so", RTLD_NOW), nullptr);
  EXPECT_NE(dlerror(), nullptr);
  dlclose(h);
}

}  // namespace
