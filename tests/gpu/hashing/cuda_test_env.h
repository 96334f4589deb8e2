// Driver-API access for the hashing GPU tests: libcuda.so.1 through dlopen only (no CUDA runtime,
// no link against libcuda), a primary context, and helpers to move test data.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cuda.h>

#include <string>
#include <vector>

#include "hashing/engine.h"

namespace lockstep::hashing::testing {

// Entry points the tests need beyond the engine's DriverApi.
struct TestDriver {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDeviceGetCount) deviceGetCount = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primaryCtxRetain = nullptr;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent = nullptr;
  decltype(&::cuCtxSynchronize) ctxSynchronize = nullptr;
  decltype(&::cuMemcpyHtoD_v2) memcpyHtoD = nullptr;
  decltype(&::cuMemcpyDtoH_v2) memcpyDtoH = nullptr;
  decltype(&::cuStreamBeginCapture_v2) streamBeginCapture = nullptr;
  decltype(&::cuStreamEndCapture) streamEndCapture = nullptr;
  decltype(&::cuGraphDestroy) graphDestroy = nullptr;

  // Empty string on success, else why the GPU tests must be skipped.
  std::string load() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return std::string("libcuda.so.1 cannot be loaded: ") + dlerror();
    std::string missing;
    auto sym = [&](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_reference_t<decltype(*fn)>>(dlsym(lib, name));
      if (*fn == nullptr) missing = name;
      return *fn != nullptr;
    };
    if (!sym(&init, "cuInit") || !sym(&deviceGetCount, "cuDeviceGetCount") ||
        !sym(&deviceGet, "cuDeviceGet") || !sym(&primaryCtxRetain, "cuDevicePrimaryCtxRetain") ||
        !sym(&ctxSetCurrent, "cuCtxSetCurrent") || !sym(&ctxSynchronize, "cuCtxSynchronize") ||
        !sym(&memcpyHtoD, "cuMemcpyHtoD_v2") || !sym(&memcpyDtoH, "cuMemcpyDtoH_v2") ||
        !sym(&streamBeginCapture, "cuStreamBeginCapture_v2") ||
        !sym(&streamEndCapture, "cuStreamEndCapture") || !sym(&graphDestroy, "cuGraphDestroy"))
      return "libcuda.so.1 lacks " + missing;
    return {};
  }
};

// PTX of a kernel that spins for `duration_ns` of %globaltimer: keeps a stream busy.
inline constexpr char kSpinPtx[] = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry lockstep_test_spin(.param .u64 duration_ns)
{
  .reg .pred %p;
  .reg .b64 %start, %now, %limit, %elapsed;
  ld.param.u64 %limit, [duration_ns];
  mov.u64 %start, %globaltimer;
LOOP:
  mov.u64 %now, %globaltimer;
  sub.u64 %elapsed, %now, %start;
  setp.lt.u64 %p, %elapsed, %limit;
  @%p bra LOOP;
  ret;
}
)";

}  // namespace lockstep::hashing::testing
