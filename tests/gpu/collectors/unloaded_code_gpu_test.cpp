// Code unloaded while the job is traced, on a real GPU (XLA's autotuner loads, runs and unloads
// candidate kernels; a broad launch's record is named later, on the writer's thread: a name
// looked up after the unload crashed a JAX job in the shim's demangler, 2026-12-05).
//
// Child: 64 rounds of loading a module from PTX (a kernel of its own name), launching its kernel
// four times with the round's grid width, waiting, checking what it wrote, and unloading it; the
// next round's module may get the freed handle. Parent: every kernel record carries the name of
// the kernel its round launched.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <type_traits>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/gpu/collectors/shim_child.h"
#include "trace/reader.h"
#include "trace/run_dir.h"

namespace {
namespace fs = std::filesystem;

constexpr int kRounds = 64, kLaunchesPerRound = 4;

std::string kernel_name(int round) { return fmt::format("lockstep_unload_k{}", round); }

// A kernel that stores `value` at its one pointer argument.
std::string ptx_of(int round) {
  return fmt::format(R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry {}(.param .u64 out)
{{
  .reg .b64 %rd<3>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, {};
  st.global.u32 [%rd2], %r1;
  ret;
}}
)",
                     kernel_name(round), round + 1000);
}

#define CHECK_CU(call)                                                     \
  do {                                                                     \
    if (CUresult r = (call); r != CUDA_SUCCESS) {                          \
      std::fprintf(stderr, "%s failed: %d\n", #call, static_cast<int>(r)); \
      return 1;                                                            \
    }                                                                      \
  } while (0)

}  // namespace

// The driver as XLA reaches it: dlopen and dlsym (the shim's dlsym hands out its wrappers).
struct DriverFns {
  decltype(&::cuInit) init;
  decltype(&::cuDeviceGetCount) device_count;
  decltype(&::cuDeviceGet) device_get;
  decltype(&::cuDevicePrimaryCtxRetain) retain;
  decltype(&::cuCtxSetCurrent) set_current;
  decltype(&::cuMemAlloc_v2) alloc;
  decltype(&::cuMemFree_v2) free;
  decltype(&::cuModuleLoadData) load;
  decltype(&::cuModuleGetFunction) get_function;
  decltype(&::cuLaunchKernel) launch;
  decltype(&::cuCtxSynchronize) synchronize;
  decltype(&::cuMemcpyDtoH_v2) copy_to_host;
  decltype(&::cuModuleUnload) unload;
};

int lockstep::gpu_tests::unloaded_code_child(const char*) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == nullptr) return 77;
  DriverFns d{};
  const auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(cuda, name));
    return fn != nullptr;
  };
  if (!get(d.init, "cuInit") || !get(d.device_count, "cuDeviceGetCount") ||
      !get(d.device_get, "cuDeviceGet") || !get(d.retain, "cuDevicePrimaryCtxRetain") ||
      !get(d.set_current, "cuCtxSetCurrent") || !get(d.alloc, "cuMemAlloc_v2") ||
      !get(d.free, "cuMemFree_v2") || !get(d.load, "cuModuleLoadData") ||
      !get(d.get_function, "cuModuleGetFunction") || !get(d.launch, "cuLaunchKernel") ||
      !get(d.synchronize, "cuCtxSynchronize") || !get(d.copy_to_host, "cuMemcpyDtoH_v2") ||
      !get(d.unload, "cuModuleUnload")) {
    std::fprintf(stderr, "a driver function is missing\n");
    return 1;
  }
  int devices = 0;
  if (d.init(0) != CUDA_SUCCESS || d.device_count(&devices) != CUDA_SUCCESS || devices == 0)
    return 77;
  CUdevice device;
  CUcontext context;
  CHECK_CU(d.device_get(&device, 0));
  CHECK_CU(d.retain(&context, device));
  CHECK_CU(d.set_current(context));
  CUdeviceptr out;
  CHECK_CU(d.alloc(&out, 4));
  for (int round = 0; round < kRounds; ++round) {
    const std::string ptx = ptx_of(round);
    CUmodule module;
    CUfunction function;
    CHECK_CU(d.load(&module, ptx.c_str()));
    CHECK_CU(d.get_function(&function, module, kernel_name(round).c_str()));
    void* params[] = {&out};
    for (int i = 0; i < kLaunchesPerRound; ++i)
      CHECK_CU(d.launch(function, round + 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    CHECK_CU(d.synchronize());
    unsigned value = 0;
    CHECK_CU(d.copy_to_host(&value, out, 4));
    if (value != static_cast<unsigned>(round + 1000)) {
      std::fprintf(stderr, "round %d wrote %u\n", round, value);
      return 1;
    }
    CHECK_CU(d.unload(module));
  }
  CHECK_CU(d.free(out));
  return 0;
}

namespace {

TEST(UnloadedCodeGpu, EveryBroadLaunchIsNamedAfterTheKernelItsUnloadedModuleHeld) {
  if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) == nullptr)
    GTEST_SKIP() << "no libcuda.so.1: " << dlerror();
  const std::string shim = lockstep::gpu_tests::shim_path();
  if (!fs::exists(shim)) GTEST_SKIP() << "no shim at " << shim;
  const fs::path dir =
      fs::temp_directory_path() / ("lockstep-unloaded-code-gpu-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string trace_dir = (dir / "trace").string();
  const int status =
      lockstep::gpu_tests::run_under_shim("--unload-child", "-", trace_dir, "broad");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "no CUDA device";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;

  auto files = lockstep::trace::list_trace_files(trace_dir);
  ASSERT_EQ(files.size(), 1u);
  auto reader = lockstep::trace::TraceReader::open(files[0].path);
  ASSERT_TRUE(reader);
  std::map<int, int> launches;  // round -> its kernel records
  int wrong = 0;
  reader->for_each_record([&](const lockstep::trace::Record& r) {
    if (r.kind != lockstep::trace::RecordKind::Kernel) return true;
    const int round = static_cast<int>(r.fields[lockstep::trace::fields::Kernel::grid_x]) - 1;
    const std::string name(reader->string(r.name));
    if (name != kernel_name(round) && wrong++ < 5)
      ADD_FAILURE() << "a launch of round " << round << " named '" << name << "'";
    ++launches[round];
    return true;
  });
  EXPECT_EQ(wrong, 0);
  ASSERT_EQ(launches.size(), static_cast<size_t>(kRounds));
  for (const auto& [round, count] : launches) EXPECT_EQ(count, kLaunchesPerRound) << round;
  fs::remove_all(dir);
}

}  // namespace
