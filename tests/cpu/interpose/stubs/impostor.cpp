// An unrelated library that happens to define a hooked name: dlsym on its handle must return
// its own function, never our wrapper (GOTCHA's rule).
#include "interpose/cuda_api.h"

extern "C" __attribute__((visibility("default"))) CUresult cuLaunchKernel(
    CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
    void**, void**) {
  return static_cast<CUresult>(999);
}
