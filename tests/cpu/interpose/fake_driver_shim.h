// The test shim preloaded and the fake driver (stubs/fake_cuda.cpp) opened RTLD_LOCAL, as
// cudart opens libcuda: its cuGetProcAddress_v2 and per-symbol call counts.
#pragma once

#include "interpose/cuda_api.h"
#include "preload_test_support.h"

namespace interpose_test {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

class FakeDriverShim : public PreloadedShim {
 protected:
  void SetUp() override {
    PreloadedShim::SetUp();
    driver_ = open_library(FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(driver_, nullptr);
    get_proc_ = symbol<GetProcAddress>(driver_, "cuGetProcAddress_v2");
    calls_ = symbol<int (*)(const char*)>(driver_, "fakecuda_calls");
    ASSERT_NE(get_proc_, nullptr);
    ASSERT_NE(calls_, nullptr);
  }

  void* driver_ = nullptr;
  GetProcAddress get_proc_ = nullptr;
  int (*calls_)(const char*) = nullptr;  // times the fake driver's `name` ran
};

}  // namespace interpose_test
