// The driver entry points a kernel launch at broad asks the driver for, answered as for a PyTorch
// elementwise kernel and returning at once. One set for both CPU benches: launch_cost_bench
// (behind the collectors' symbol resolver) and fake_driver.cpp (a stand-in libcuda.so.1 behind
// the whole shim). Not a stand-in for GPU work.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstring>

namespace lockstep::bench {

inline CUresult fake_ctx_get_current(CUcontext* ctx) {
  *ctx = nullptr;
  return CUDA_SUCCESS;
}
// The handle of the wide kernel (shim_launch_bench's "wide" parameters); every other handle is
// the narrow one.
inline CUfunction const kWideFunction = reinterpret_cast<CUfunction>(0x1040);
// Words of sizes and strides past the narrow struct's in the wide kernel's: an elementwise
// kernel's offset calculator (PyTorch's OffsetCalculator: 25 dimensions' dividers and strides),
// nonzero words that are no pointer.
inline constexpr size_t kWideExtraWords = 96;

inline CUresult fake_func_get_name(const char** name, CUfunction function) {
  *name = function == kWideFunction ? "_Z11wide_kernelPfif" : "_Z6kernelPfif";
  return CUDA_SUCCESS;
}
// One 4-byte int, then a 56-byte struct: three pointers and 32 bytes of sizes and strides (the
// wide kernel's struct: kWideExtraWords more words of them).
inline CUresult fake_func_get_param_info(CUfunction function, size_t index, size_t* offset,
                                         size_t* size) {
  if (index >= 2) return CUDA_ERROR_INVALID_VALUE;
  *offset = index == 0 ? 0 : 8;
  *size = index == 0 ? 4 : 56 + (function == kWideFunction ? 8 * kWideExtraWords : 0);
  return CUDA_SUCCESS;
}
inline CUresult fake_capture_info(CUstream, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph*,
                                  const CUgraphNode**, const CUgraphEdgeData**, size_t*) {
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  *id = 0;
  return CUDA_SUCCESS;
}

// A table of stand-in entry points by name (this file's and fake_hash_engine.h's).
struct FakeEntry {
  const char* name;
  void* fn;
};
template <size_t N>
void* find_fake_entry(const FakeEntry (&entries)[N], const char* symbol) {
  for (const FakeEntry& entry : entries)
    if (std::strcmp(symbol, entry.name) == 0) return entry.fn;
  return nullptr;
}

// The entry point named `symbol` among the above, or null.
inline void* fake_driver_entry(const char* symbol) {
  static const FakeEntry entries[] = {
      {"cuCtxGetCurrent", reinterpret_cast<void*>(&fake_ctx_get_current)},
      {"cuFuncGetName", reinterpret_cast<void*>(&fake_func_get_name)},
      {"cuFuncGetParamInfo", reinterpret_cast<void*>(&fake_func_get_param_info)},
      {"cuStreamGetCaptureInfo", reinterpret_cast<void*>(&fake_capture_info)},
  };
  return find_fake_entry(entries, symbol);
}

}  // namespace lockstep::bench
