// A stand-in libcuda.so.1 for shim_launch_bench (not a test, never evidence of GPU work): the
// entry points a kernel launch at broad reaches through the whole shim, each doing nothing. The
// launch itself returns at once, so the bench measures the shim's own time around it.
#include <cuda.h>

#include <cstring>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
CUresult ctx_get_current(CUcontext* ctx) {
  *ctx = nullptr;
  return CUDA_SUCCESS;
}
CUresult func_get_name(const char** name, CUfunction) {
  *name = "_Z6kernelPfif";
  return CUDA_SUCCESS;
}
// One 4-byte int, then a 56-byte struct (three pointers, 32 bytes of sizes and strides): a
// PyTorch elementwise kernel's shape.
CUresult func_get_param_info(CUfunction, size_t index, size_t* offset, size_t* size) {
  static const size_t offsets[] = {0, 8}, sizes[] = {4, 56};
  if (index >= 2) return CUDA_ERROR_INVALID_VALUE;
  *offset = offsets[index];
  *size = sizes[index];
  return CUDA_SUCCESS;
}
CUresult capture_info(CUstream, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph*,
                      const CUgraphNode**, const CUgraphEdgeData**, size_t*) {
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  *id = 0;
  return CUDA_SUCCESS;
}
CUresult driver_version(int* version) {
  *version = 13000;
  return CUDA_SUCCESS;
}
}  // namespace

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**) {
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) { return ctx_get_current(ctx); }
FAKE_EXPORT CUresult cuDriverGetVersion(int* version) { return driver_version(version); }

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t,
                                         CUdriverProcAddressQueryResult* status) {
  struct Entry {
    const char* name;
    void* fn;
  };
  static const Entry entries[] = {
      {"cuCtxGetCurrent", reinterpret_cast<void*>(&ctx_get_current)},
      {"cuFuncGetName", reinterpret_cast<void*>(&func_get_name)},
      {"cuFuncGetParamInfo", reinterpret_cast<void*>(&func_get_param_info)},
      {"cuStreamGetCaptureInfo", reinterpret_cast<void*>(&capture_info)},
      {"cuDriverGetVersion", reinterpret_cast<void*>(&driver_version)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&cuLaunchKernel)},
  };
  *pfn = nullptr;
  for (const Entry& entry : entries)
    if (std::strcmp(symbol, entry.name) == 0) *pfn = entry.fn;
  if (status != nullptr)
    *status = *pfn != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *pfn != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
