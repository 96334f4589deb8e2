// Kernel launches at the runtime and driver layers -> collectors::kernel_launch_begin/end.
// One Launch nesting scope for all of them: cudart forwarding to a driver wrapper of ours
// produces one event, from the runtime call.
#include "collectors/events.h"
#include "collectors/replay.h"
#include "hook_support.h"

using namespace lockstep::interpose;
namespace collectors = lockstep::collectors;

namespace {

using collectors::FunctionHandle;
using collectors::KernelLaunch;
using collectors::LaunchApi;

void set_dims(KernelLaunch& e, dim3 grid, dim3 block) {
  e.grid[0] = grid.x;
  e.grid[1] = grid.y;
  e.grid[2] = grid.z;
  e.block[0] = block.x;
  e.block[1] = block.y;
  e.block[2] = block.z;
}

// A launch below broad with LOCKSTEP_DEBUG on: forwarded inside the "real call" phase (once, at
// the outermost layer), so that the job's own launches are timed at every level that has a
// tracer and a level's real calls compare with another's: whether tracing makes the driver's
// launch itself slower (its lines evicted by the shim's work, the hash launches between) is
// then measured, not guessed. Out of line: the untimed path stays a load and a branch.
template <typename Forward>
[[gnu::noinline, gnu::cold]] auto timed_untraced_launch(Forward forward) {
  Nesting nesting(Scope::Launch);
  if (!nesting.outermost() || !trace_operations()) return forward();
  collectors::self_time::Scope timed(collectors::self_time::Phase::RealCall);
  return forward();
}

// Runs forward() as a traced launch described by describe(). Inlined into each interceptor, so
// that a launch's path is the interceptor (LOCKSTEP_LAUNCH_PATH, common/hot.h) and the
// collectors' own functions. The interceptors' forward lambdas capture the arguments by value:
// the paths that keep a forward past the call (a replay's relaunch, the timed untraced launch)
// take a copy of it, so the hot path's closure stays in registers; captured by reference, the
// arguments and a closure of pointers to them were stored to the stack on every launch (its
// cold lines: bench/collectors/launch_lines.py).
template <typename Forward, typename Describe>
[[gnu::always_inline]] inline auto traced_launch(Forward&& forward, Describe&& describe) {
  // Below broad a launch is no event (CUPTI validation still brackets it).
  if (!collectors::launches_traced() && !validation::enabled()) [[unlikely]] {
    if (collectors::self_time::enabled.load(std::memory_order_relaxed)) [[unlikely]]
      return timed_untraced_launch(forward);
    return forward();
  }
  // The launch LOCKSTEP_REPLAY names (collectors/replay.h) is relaunched right after it, with
  // this same forward: the caller's arguments stay valid until the call returns.
  auto forward_then_replay = [&]() __attribute__((always_inline)) {
    auto result = forward();
    if (collectors::replay_armed()) [[unlikely]]
      collectors::replay_after(static_cast<int>(result), [relaunch = forward]() mutable {
        return static_cast<int>(relaunch());
      });
    return result;
  };
  return traced_call(
      Scope::Launch, forward_then_replay,
      [&] { return collectors::kernel_launch_begin(describe()); },
      [](uint64_t token, auto result) {
        collectors::kernel_launch_end(token, static_cast<int>(result));
      });
}

// ---- runtime ----
// Inlined into each of its two interceptors, with traced_launch and traced_call: PyTorch's every
// kernel comes this way (FIELD-NOTES.md), and as one function called from both it was a chain of
// four calls, each a frame and code lines of its own (bench/collectors/launch_lines.py --api
// runtime-stub). The variant is a template argument: one forward each, not a choice of two
// whose lambdas stayed calls.
template <bool ptsz>
[[gnu::always_inline]] inline cudaError_t runtime_stub(cudaKernel_t kernel, dim3 grid, dim3 block,
                                                     void** args, size_t smem,
                                                     cudaStream_t stream) {
  auto forward = [=]() __attribute__((always_inline)) {
    if constexpr (ptsz)
      return LOCKSTEP_FORWARD(__cudaLaunchKernel_ptsz, kernel, grid, block, args, smem, stream);
    else
      return LOCKSTEP_FORWARD(__cudaLaunchKernel, kernel, grid, block, args, smem, stream);
  };
  return traced_launch(forward, [&] {
    KernelLaunch e;
    e.api = LaunchApi::RuntimeStub;
    e.per_thread_stream = ptsz;
    e.handle_kind = FunctionHandle::RuntimeKernel;
    e.handle = kernel;
    set_dims(e, grid, block);
    e.smem_bytes = smem;
    e.stream = stream;
    e.kernel_params = args;
    return e;
  });
}

template <typename Forward>
LOCKSTEP_HOT cudaError_t runtime_launch(Forward&& forward, LaunchApi api, bool ptsz, const void* func, dim3 grid,
                           dim3 block, void** args, size_t smem, cudaStream_t stream) {
  return traced_launch(forward, [&] {
    KernelLaunch e;
    e.api = api;
    e.per_thread_stream = ptsz;
    e.handle_kind = FunctionHandle::HostStub;
    e.handle = func;
    set_dims(e, grid, block);
    e.smem_bytes = smem;
    e.stream = stream;
    e.kernel_params = args;
    return e;
  });
}

template <typename Forward>
LOCKSTEP_HOT cudaError_t runtime_launch_ex(Forward&& forward, bool ptsz, const cudaLaunchConfig_t* config,
                              const void* func, void** args) {
  return traced_launch(forward, [&] {
    KernelLaunch e;
    e.api = LaunchApi::RuntimeLaunchEx;
    e.per_thread_stream = ptsz;
    e.handle_kind = FunctionHandle::HostStub;
    e.handle = func;
    e.kernel_params = args;
    if (config != nullptr) {
      set_dims(e, config->gridDim, config->blockDim);
      e.smem_bytes = config->dynamicSmemBytes;
      e.stream = config->stream;
      for (unsigned i = 0; config->attrs != nullptr && i < config->numAttrs; ++i) {
        if (config->attrs[i].id == cudaLaunchAttributeClusterDimension) {
          e.cluster[0] = config->attrs[i].val.clusterDim.x;
          e.cluster[1] = config->attrs[i].val.clusterDim.y;
          e.cluster[2] = config->attrs[i].val.clusterDim.z;
        }
      }
    }
    return e;
  });
}

// ---- driver ----
LOCKSTEP_HOT KernelLaunch driver_event(LaunchApi api, bool ptsz, CUfunction f, unsigned gx, unsigned gy,
                          unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem,
                          CUstream stream, void** params, void** extra) {
  KernelLaunch e;
  e.api = api;
  e.per_thread_stream = ptsz;
  e.handle_kind = FunctionHandle::DriverUnknown;  // a CUfunction or a CUkernel
  e.handle = f;
  e.grid[0] = gx;
  e.grid[1] = gy;
  e.grid[2] = gz;
  e.block[0] = bx;
  e.block[1] = by;
  e.block[2] = bz;
  e.smem_bytes = smem;
  e.stream = stream;
  e.kernel_params = params;
  e.extra = extra;
  return e;
}

template <typename Forward>
LOCKSTEP_HOT CUresult driver_launch_ex(Forward&& forward, bool ptsz, const CUlaunchConfig* config, CUfunction f,
                          void** params, void** extra) {
  return traced_launch(forward, [&] {
    if (config == nullptr) {
      return driver_event(LaunchApi::DriverLaunchEx, ptsz, f, 0, 0, 0, 0, 0, 0, 0, nullptr, params,
                          extra);
    }
    KernelLaunch e =
        driver_event(LaunchApi::DriverLaunchEx, ptsz, f, config->gridDimX, config->gridDimY,
                     config->gridDimZ, config->blockDimX, config->blockDimY, config->blockDimZ,
                     config->sharedMemBytes, config->hStream, params, extra);
    for (unsigned i = 0; config->attrs != nullptr && i < config->numAttrs; ++i) {
      if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
        e.cluster[0] = config->attrs[i].value.clusterDim.x;
        e.cluster[1] = config->attrs[i].value.clusterDim.y;
        e.cluster[2] = config->attrs[i].value.clusterDim.z;
      }
    }
    return e;
  });
}

void remember_kernel(bool ok, const void* handle) {
  if (!ok || handle == nullptr || !track_state()) return;
  try {
    collectors::remember_kernel_handle(handle);
  } catch (...) {}
}

}  // namespace

// ---- runtime: nvcc 13 stubs ----
LOCKSTEP_LAUNCH_INTERCEPTOR cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim,
                                                           dim3 blockDim, void** args,
                                                           size_t sharedMem, cudaStream_t stream) {
  return runtime_stub<false>(kernel, gridDim, blockDim, args, sharedMem, stream);
}
LOCKSTEP_LAUNCH_TWIN_INTERCEPTOR cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim,
                                                                dim3 blockDim, void** args,
                                                                size_t sharedMem,
                                                                cudaStream_t stream) {
  return runtime_stub<true>(kernel, gridDim, blockDim, args, sharedMem, stream);
}

// ---- runtime: kernel handles ----
LOCKSTEP_INTERCEPTOR cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* entry) {
  const cudaError_t r = LOCKSTEP_FORWARD(__cudaGetKernel, kernel, entry);
  remember_kernel(r == cudaSuccess && kernel != nullptr, kernel != nullptr ? *kernel : nullptr);
  return r;
}
LOCKSTEP_INTERCEPTOR cudaError_t cudaGetKernel(cudaKernel_t* kernelPtr, const void* entryFuncAddr) {
  const cudaError_t r = LOCKSTEP_FORWARD(cudaGetKernel, kernelPtr, entryFuncAddr);
  remember_kernel(r == cudaSuccess && kernelPtr != nullptr,
                  kernelPtr != nullptr ? *kernelPtr : nullptr);
  return r;
}
LOCKSTEP_INTERCEPTOR cudaError_t cudaLibraryGetKernel(cudaKernel_t* pKernel, cudaLibrary_t library,
                                                      const char* name) {
  const cudaError_t r = LOCKSTEP_FORWARD(cudaLibraryGetKernel, pKernel, library, name);
  remember_kernel(r == cudaSuccess && pKernel != nullptr, pKernel != nullptr ? *pKernel : nullptr);
  return r;
}
LOCKSTEP_INTERCEPTOR CUresult cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library,
                                                 const char* name) {
  const CUresult r = LOCKSTEP_FORWARD(cuLibraryGetKernel, pKernel, library, name);
  remember_kernel(r == CUDA_SUCCESS && pKernel != nullptr, pKernel != nullptr ? *pKernel : nullptr);
  return r;
}

// ---- runtime: launches by host stub ----
#define LOCKSTEP_RUNTIME_LAUNCH(name, api, ptsz)                                                  \
  LOCKSTEP_INTERCEPTOR cudaError_t name(const void* func, dim3 gridDim, dim3 blockDim,            \
                                        void** args, size_t sharedMem, cudaStream_t stream) {     \
    return runtime_launch(                                                                        \
        [=] { return LOCKSTEP_FORWARD(name, func, gridDim, blockDim, args, sharedMem, stream); }, \
        api, ptsz, func, gridDim, blockDim, args, sharedMem, stream);                             \
  }
LOCKSTEP_RUNTIME_LAUNCH(cudaLaunchKernel, LaunchApi::RuntimeLaunch, false)
LOCKSTEP_RUNTIME_LAUNCH(cudaLaunchKernel_ptsz, LaunchApi::RuntimeLaunch, true)
LOCKSTEP_RUNTIME_LAUNCH(cudaLaunchCooperativeKernel, LaunchApi::RuntimeCooperative, false)
LOCKSTEP_RUNTIME_LAUNCH(cudaLaunchCooperativeKernel_ptsz, LaunchApi::RuntimeCooperative, true)
#undef LOCKSTEP_RUNTIME_LAUNCH

LOCKSTEP_INTERCEPTOR cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config,
                                                     const void* func, void** args) {
  return runtime_launch_ex(
      [=] { return LOCKSTEP_FORWARD(cudaLaunchKernelExC, config, func, args); }, false, config,
      func, args);
}
LOCKSTEP_INTERCEPTOR cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config,
                                                          const void* func, void** args) {
  return runtime_launch_ex(
      [=] { return LOCKSTEP_FORWARD(cudaLaunchKernelExC_ptsz, config, func, args); }, true, config,
      func, args);
}

// ---- driver ----
#define LOCKSTEP_DRIVER_LAUNCH(name, api, ptsz, placement)                                      \
  placement CUresult name(                                                                      \
      CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,        \
      unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                   \
      unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {       \
    return traced_launch(                                                                       \
        [=] {                                                                                   \
          return LOCKSTEP_FORWARD(name, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,  \
                                  blockDimZ, sharedMemBytes, hStream, kernelParams, extra);     \
        },                                                                                      \
        [&] {                                                                                   \
          return driver_event(api, ptsz, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, \
                              blockDimZ, sharedMemBytes, hStream, kernelParams, extra);         \
        });                                                                                     \
  }
LOCKSTEP_DRIVER_LAUNCH(cuLaunchKernel, LaunchApi::DriverLaunch, false, LOCKSTEP_LAUNCH_INTERCEPTOR)
LOCKSTEP_DRIVER_LAUNCH(cuLaunchKernel_ptsz, LaunchApi::DriverLaunch, true,
                       LOCKSTEP_LAUNCH_TWIN_INTERCEPTOR)
#undef LOCKSTEP_DRIVER_LAUNCH

#define LOCKSTEP_DRIVER_COOPERATIVE(name, ptsz)                                                    \
  LOCKSTEP_INTERCEPTOR CUresult name(                                                              \
      CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,           \
      unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                      \
      unsigned int sharedMemBytes, CUstream hStream, void** kernelParams) {                        \
    return traced_launch(                                                                          \
        [=] {                                                                                      \
          return LOCKSTEP_FORWARD(name, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,     \
                                  blockDimZ, sharedMemBytes, hStream, kernelParams);               \
        },                                                                                         \
        [&] {                                                                                      \
          return driver_event(LaunchApi::DriverCooperative, ptsz, f, gridDimX, gridDimY, gridDimZ, \
                              blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,            \
                              kernelParams, nullptr);                                              \
        });                                                                                        \
  }
LOCKSTEP_DRIVER_COOPERATIVE(cuLaunchCooperativeKernel, false)
LOCKSTEP_DRIVER_COOPERATIVE(cuLaunchCooperativeKernel_ptsz, true)
#undef LOCKSTEP_DRIVER_COOPERATIVE

LOCKSTEP_LAUNCH_INTERCEPTOR CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f,
                                                      void** kernelParams, void** extra) {
  return driver_launch_ex(
      [=] { return LOCKSTEP_FORWARD(cuLaunchKernelEx, config, f, kernelParams, extra); }, false,
      config, f, kernelParams, extra);
}
LOCKSTEP_LAUNCH_TWIN_INTERCEPTOR CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config,
                                                           CUfunction f, void** kernelParams,
                                                           void** extra) {
  return driver_launch_ex(
      [=] { return LOCKSTEP_FORWARD(cuLaunchKernelEx_ptsz, config, f, kernelParams, extra); }, true,
      config, f, kernelParams, extra);
}
