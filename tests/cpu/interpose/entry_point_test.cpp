// cuGetProcAddress(_v2) and cudaGetDriverEntryPoint*: per-variant wrappers chosen by version and
// per-thread flag, statuses written through.
#include "fake_driver_shim.h"

using namespace interpose_test;

namespace {

using ByVersion = cudaError_t (*)(const char*, void**, unsigned, unsigned long long,
                                  cudaDriverEntryPointQueryResult*);
using NoVersion = cudaError_t (*)(const char*, void**, unsigned long long,
                                  cudaDriverEntryPointQueryResult*);
using CuLaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**);

void* ours(const char* name) { return dlsym(RTLD_DEFAULT, name); }

class EntryPoints : public FakeDriverShim {
 protected:
  void SetUp() override {
    FakeDriverShim::SetUp();
    if (HasFatalFailure()) return;
    self_ = symbol<void* (*)(const char*)>(driver_, "fakecuda_self");
  }
  void* lookup(const char* name, int version, cuuint64_t flags,
               CUdriverProcAddressQueryResult* status_out = nullptr) {
    void* p = reinterpret_cast<void*>(0x1);
    CUdriverProcAddressQueryResult status = static_cast<CUdriverProcAddressQueryResult>(99);
    EXPECT_EQ(get_proc_(name, &p, version, flags, &status), CUDA_SUCCESS);
    if (status_out != nullptr) *status_out = status;
    return p;
  }
  void* (*self_)(const char*) = nullptr;
};

TEST_F(EntryPoints, DlsymOfTheResolverGivesOurWrapper) {
  EXPECT_EQ(reinterpret_cast<void*>(get_proc_), ours("cuGetProcAddress_v2"));
  EXPECT_NE(reinterpret_cast<void*>(get_proc_), self_("cuGetProcAddress_v2"));
}

TEST_F(EntryPoints, PerThreadFlagPicksThePerThreadWrapper) {
  CUdriverProcAddressQueryResult status;
  void* p = lookup("cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);  // written through by the real call
  EXPECT_EQ(p, ours("cuLaunchKernel_ptsz"));
  auto launch = reinterpret_cast<CuLaunchKernel>(p);
  EXPECT_EQ(launch(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(calls_("cuLaunchKernel_ptsz"), 1);
  EXPECT_EQ(calls_("cuLaunchKernel"), 0);  // a NULL stream kept its per-thread meaning
  auto begins = lines_starting(fake_log(), "launch_begin");
  ASSERT_EQ(begins.size(), 1u);
  EXPECT_TRUE(contains(begins[0], "api=5 ptsz=1")) << begins[0];
}

TEST_F(EntryPoints, LegacyAndDefaultFlagsPickTheLegacyWrapper) {
  for (cuuint64_t flags :
       {cuuint64_t{CU_GET_PROC_ADDRESS_LEGACY_STREAM}, cuuint64_t{CU_GET_PROC_ADDRESS_DEFAULT}}) {
    void* p = lookup("cuLaunchKernel", 12000, flags);
    EXPECT_EQ(p, ours("cuLaunchKernel")) << "flags " << flags;
  }
  auto launch = reinterpret_cast<CuLaunchKernel>(lookup("cuLaunchKernel", 12000, 0));
  EXPECT_EQ(launch(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(calls_("cuLaunchKernel"), 1);
  EXPECT_EQ(calls_("cuLaunchKernel_ptsz"), 0);
}

TEST_F(EntryPoints, PerThreadLookupBelowPerThreadVersionFallsBackToLegacy) {
  EXPECT_EQ(lookup("cuLaunchKernel", 6000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            ours("cuLaunchKernel"));
}

TEST_F(EntryPoints, ResolverLookupByVersionGivesTheMatchingResolverWrapper) {
  EXPECT_EQ(lookup("cuGetProcAddress", 12000, 0), ours("cuGetProcAddress_v2"));
  EXPECT_EQ(lookup("cuGetProcAddress", 13000, 0), ours("cuGetProcAddress_v2"));
  EXPECT_EQ(lookup("cuGetProcAddress", 11030, 0), ours("cuGetProcAddress"));
  // The v2 wrapper obtained this way writes symbolStatus too.
  auto v2 = reinterpret_cast<GetProcAddress>(lookup("cuGetProcAddress", 12000, 0));
  void* p = nullptr;
  CUdriverProcAddressQueryResult status = static_cast<CUdriverProcAddressQueryResult>(99);
  EXPECT_EQ(v2("cuNoSuchFunction", &p, 12000, 0, &status), CUDA_SUCCESS);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

TEST_F(EntryPoints, UnwrappedNamesAndMissesPassThrough) {
  EXPECT_EQ(lookup("cuCtxGetCurrent", 12000, 0), self_("cuCtxGetCurrent"));
  CUdriverProcAddressQueryResult status;
  EXPECT_EQ(lookup("cuLaunchKernelEx", 11000, 0, &status), nullptr);  // too old for Ex
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

// Unloads reach the collectors (which name the code's pending records and forget its handles
// before the driver frees them) through dlsym (XLA's driver stubs) and through cuGetProcAddress
// (cudart), then the driver's own function, once.
TEST_F(EntryPoints, UnloadingAModuleOrALibraryIsReportedThenForwarded) {
  using Unload = CUresult (*)(void*);
  auto by_dlsym = symbol<Unload>(driver_, "cuModuleUnload");
  EXPECT_EQ(reinterpret_cast<void*>(by_dlsym), ours("cuModuleUnload"));
  EXPECT_EQ(by_dlsym(reinterpret_cast<void*>(0x51)), CUDA_SUCCESS);
  auto module = reinterpret_cast<Unload>(lookup("cuModuleUnload", 12000, 0));
  auto library = reinterpret_cast<Unload>(lookup("cuLibraryUnload", 12000, 0));
  EXPECT_EQ(reinterpret_cast<void*>(module), ours("cuModuleUnload"));
  EXPECT_EQ(reinterpret_cast<void*>(library), ours("cuLibraryUnload"));
  EXPECT_EQ(module(reinterpret_cast<void*>(0x52)), CUDA_SUCCESS);
  EXPECT_EQ(library(reinterpret_cast<void*>(0x53)), CUDA_SUCCESS);
  EXPECT_EQ(calls_("cuModuleUnload"), 2);
  EXPECT_EQ(calls_("cuLibraryUnload"), 1);
  const std::string log = fake_log();
  EXPECT_EQ(lines_starting(log, "code_unloading module=0x51 library=(nil)").size(), 1u) << log;
  EXPECT_EQ(lines_starting(log, "code_unloading module=0x52 library=(nil)").size(), 1u) << log;
  EXPECT_EQ(lines_starting(log, "code_unloading module=(nil) library=0x53").size(), 1u) << log;
}

class RuntimeEntryPoints : public EntryPoints {
 protected:
  void SetUp() override {
    EntryPoints::SetUp();
    cudart_ = open_library(FAKE_CUDART_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(cudart_, nullptr);
  }
  void* cudart_ = nullptr;
};

TEST_F(RuntimeEntryPoints, ByVersionHonoursFlagsAndPtszVariant) {
  auto by_version = symbol<ByVersion>(cudart_, "cudaGetDriverEntryPointByVersion");
  auto by_version_ptsz = symbol<ByVersion>(cudart_, "cudaGetDriverEntryPointByVersion_ptsz");
  ASSERT_EQ(reinterpret_cast<void*>(by_version), ours("cudaGetDriverEntryPointByVersion"));
  ASSERT_EQ(reinterpret_cast<void*>(by_version_ptsz),
            ours("cudaGetDriverEntryPointByVersion_ptsz"));
  struct Case {
    ByVersion fn;
    unsigned long long flags;
    const char* expected;
  } cases[] = {
      {by_version, cudaEnableDefault, "cuLaunchKernel"},
      {by_version, cudaEnableLegacyStream, "cuLaunchKernel"},
      {by_version, cudaEnablePerThreadDefaultStream, "cuLaunchKernel_ptsz"},
      {by_version_ptsz, cudaEnableDefault, "cuLaunchKernel_ptsz"},  // default = per-thread here
      {by_version_ptsz, cudaEnableLegacyStream, "cuLaunchKernel"},
  };
  for (const Case& c : cases) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status = static_cast<cudaDriverEntryPointQueryResult>(99);
    EXPECT_EQ(c.fn("cuLaunchKernel", &p, 12000, c.flags, &status), cudaSuccess);
    EXPECT_EQ(status, cudaDriverEntryPointSuccess);
    EXPECT_EQ(p, ours(c.expected)) << c.expected << " flags " << c.flags;
  }
}

TEST_F(RuntimeEntryPoints, UnversionedResolverUsesTheRuntimeVersion) {
  auto no_version = symbol<NoVersion>(cudart_, "cudaGetDriverEntryPoint");
  auto no_version_ptsz = symbol<NoVersion>(cudart_, "cudaGetDriverEntryPoint_ptsz");
  void* p = nullptr;
  EXPECT_EQ(no_version("cuGetProcAddress", &p, cudaEnableDefault, nullptr), cudaSuccess);
  EXPECT_EQ(p, ours("cuGetProcAddress_v2"));  // runtime 13000 >= 12000: the 5-argument one
  EXPECT_EQ(no_version_ptsz("cuLaunchKernel", &p, cudaEnableDefault, nullptr), cudaSuccess);
  EXPECT_EQ(p, ours("cuLaunchKernel_ptsz"));
}

}  // namespace
