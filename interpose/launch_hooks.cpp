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

// ---- how a launch interceptor is written --------------------------------------------------
// Each entry point is a Hook: a struct of its per-thread-stream flag and two static,
// always-inlined functions of the entry point's own arguments (taken by const reference),
//   static constexpr bool ptsz                  // a _ptsz variant (the per-thread default stream)
//   static R forward(const Args&...)            // LOCKSTEP_FORWARD to the real function
//   static KernelLaunch describe(const Args&...)     // the event (collectors/events.h)
// and its interceptor is one line: return traced_launch<Hook>(args...). traced_launch
// writes out the plain path (launches traced, no timing, no validation: every launch of a job at
// broad or full) straight through, first in the interceptor. Every other path is other_launch,
// out of line, given the arguments themselves: a closure kept past an inlined call (a replay's
// relaunch, the timed untraced launch) was built in memory on entry on every path, with two more
// copies of the arguments (18 stores a launch; bench/collectors/launch_lines.py).
// To add an entry point: its row in hooked_symbols.def, a Hook below, and its interceptor at the
// end of this file (LOCKSTEP_LAUNCH_INTERCEPTOR for an entry point jobs launch most kernels
// through, so that it lies in the launch's section, common/hot.h; else LOCKSTEP_INTERCEPTOR).

// A launch below broad with LOCKSTEP_DEBUG on: forwarded inside the "real call" phase (once, at
// the outermost layer), so that the job's own launches are timed at every level that has a
// tracer and a level's real calls compare with another's: whether tracing makes the driver's
// launch itself slower (its lines evicted by the shim's work, the hash launches between) is
// then measured, not guessed.
template <typename Forward>
auto timed_untraced_launch(const Forward& forward) {
  Nesting nesting(Scope::Launch);
  if (!nesting.outermost() || !trace_operations()) return forward();
  collectors::self_time::Scope timed(collectors::self_time::Phase::RealCall);
  return forward();
}

// The launch LOCKSTEP_REPLAY armed this thread for (collectors/replay.h), relaunched with the same
// arguments: the caller's argument memory stays valid until the call returns.
template <typename Hook, typename... Args>
[[gnu::noinline, gnu::cold]] void replay_launch(int result, const Args&... args) {
  collectors::replay_after(result, [=] { return static_cast<int>(Hook::forward(args...)); });
}

template <typename Hook, typename... Args>
[[gnu::noinline, gnu::cold]] auto other_launch(const Args&... args) {
  auto forward = [&]() __attribute__((always_inline)) { return Hook::forward(args...); };
  // Below broad a launch is no event (CUPTI validation still brackets it).
  if (!collectors::launches_traced() && !validation::enabled()) {
    if (collectors::self_time::enabled.load(std::memory_order_relaxed))
      return timed_untraced_launch(forward);
    return forward();
  }
  auto forward_then_replay = [&]() __attribute__((always_inline)) {
    auto result = forward();
    if (collectors::replay_armed()) [[unlikely]]
      replay_launch<Hook>(static_cast<int>(result), args...);
    return result;
  };
  return traced_call(
      Scope::Launch, forward_then_replay,
      [&] { return collectors::kernel_launch_begin(Hook::describe(args...)); },
      [](uint64_t token, auto result) {
        collectors::kernel_launch_end(token, static_cast<int>(result));
      });
}

template <typename Hook, typename... Args>
[[gnu::always_inline]] inline auto traced_launch(const Args&... args) {
  // The plain path: launches traced, neither timed nor validated.
  if (collectors::launches_traced() && !timed_or_validated()) [[likely]] {
    Nesting nesting(Scope::Launch);
    // Not: a runtime launch reaching a driver entry point of ours, or the shim's own launch.
    if (nesting.outermost() && trace_operations()) [[likely]] {
      uint64_t token = 0;
      try {
        token = collectors::kernel_launch_begin(Hook::describe(args...));
      } catch (...) {
      }
      auto result = Hook::forward(args...);
      if (collectors::replay_armed()) [[unlikely]]
        replay_launch<Hook>(static_cast<int>(result), args...);
      try {
        collectors::kernel_launch_end(token, static_cast<int>(result));
      } catch (...) {
      }
      return result;
    }
    return Hook::forward(args...);
  }
  return other_launch<Hook>(args...);
}

#define LOCKSTEP_HOOK_FN static __attribute__((always_inline)) inline

void set_dims(KernelLaunch& e, dim3 grid, dim3 block) {
  e.grid[0] = grid.x;
  e.grid[1] = grid.y;
  e.grid[2] = grid.z;
  e.block[0] = block.x;
  e.block[1] = block.y;
  e.block[2] = block.z;
}

// The cluster shape among an extended launch's attributes: the runtime's and the driver's have
// the same layout under other names (`dim` reads one's shape).
template <typename Attribute, typename Id, typename Dim>
void set_cluster(KernelLaunch& e, const Attribute* attrs, unsigned count, Id cluster_id, Dim dim) {
  for (unsigned i = 0; attrs != nullptr && i < count; ++i) {
    if (attrs[i].id != cluster_id) continue;
    const auto shape = dim(attrs[i]);
    e.cluster[0] = shape.x;
    e.cluster[1] = shape.y;
    e.cluster[2] = shape.z;
  }
}

// ---- runtime ----
// A launch by runtime handle: a kernel handle (the stubs) or a host stub (the rest).
[[gnu::always_inline]] inline KernelLaunch runtime_event(LaunchApi api, bool ptsz,
                                                         FunctionHandle kind, const void* handle,
                                                         dim3 grid, dim3 block, void** args,
                                                         size_t smem, cudaStream_t stream) {
  KernelLaunch e;
  e.api = api;
  e.per_thread_stream = ptsz;
  e.handle_kind = kind;
  e.handle = handle;
  set_dims(e, grid, block);
  e.smem_bytes = smem;
  e.stream = stream;
  e.kernel_params = args;
  return e;
}

// nvcc 13's stubs: PyTorch's every kernel comes this way (FIELD-NOTES.md).
template <bool per_thread>
struct RuntimeStub {
  static constexpr bool ptsz = per_thread;
  LOCKSTEP_HOOK_FN cudaError_t forward(cudaKernel_t const& kernel, const dim3& grid,
                                       const dim3& block, void** const& args, const size_t& smem,
                                       cudaStream_t const& stream) {
    if constexpr (ptsz)
      return LOCKSTEP_FORWARD(__cudaLaunchKernel_ptsz, kernel, grid, block, args, smem, stream);
    else
      return LOCKSTEP_FORWARD(__cudaLaunchKernel, kernel, grid, block, args, smem, stream);
  }
  LOCKSTEP_HOOK_FN KernelLaunch describe(cudaKernel_t const& kernel, const dim3& grid,
                                         const dim3& block, void** const& args,
                                         const size_t& smem, cudaStream_t const& stream) {
    return runtime_event(LaunchApi::RuntimeStub, ptsz, FunctionHandle::RuntimeKernel, kernel,
                         grid, block, args, smem, stream);
  }
};

// By host stub: cudaLaunchKernel, cudaLaunchCooperativeKernel and their _ptsz twins.
#define LOCKSTEP_RUNTIME_HOOK(Hook, name, kind, per_thread)                                    \
  struct Hook {                                                                                 \
    static constexpr bool ptsz = per_thread;                                                    \
    LOCKSTEP_HOOK_FN cudaError_t forward(const void* const& func, const dim3& grid,            \
                                         const dim3& block, void** const& args,                \
                                         const size_t& smem, cudaStream_t const& stream) {     \
      return LOCKSTEP_FORWARD(name, func, grid, block, args, smem, stream);                    \
    }                                                                                           \
    LOCKSTEP_HOOK_FN KernelLaunch describe(const void* const& func, const dim3& grid,          \
                                           const dim3& block, void** const& args,              \
                                           const size_t& smem, cudaStream_t const& stream) {   \
      return runtime_event(kind, ptsz, FunctionHandle::HostStub, func, grid, block, args, smem, \
                           stream);                                                             \
    }                                                                                           \
  };
LOCKSTEP_RUNTIME_HOOK(RuntimeLaunch, cudaLaunchKernel, LaunchApi::RuntimeLaunch, false)
LOCKSTEP_RUNTIME_HOOK(RuntimeLaunchPtsz, cudaLaunchKernel_ptsz, LaunchApi::RuntimeLaunch, true)
LOCKSTEP_RUNTIME_HOOK(RuntimeCooperative, cudaLaunchCooperativeKernel,
                      LaunchApi::RuntimeCooperative, false)
LOCKSTEP_RUNTIME_HOOK(RuntimeCooperativePtsz, cudaLaunchCooperativeKernel_ptsz,
                      LaunchApi::RuntimeCooperative, true)
#undef LOCKSTEP_RUNTIME_HOOK

KernelLaunch runtime_ex_event(bool ptsz, const cudaLaunchConfig_t* config, const void* func,
                              void** args) {
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
    set_cluster(e, config->attrs, config->numAttrs, cudaLaunchAttributeClusterDimension,
                [](const cudaLaunchAttribute& a) { return a.val.clusterDim; });
  }
  return e;
}
template <bool per_thread>
struct RuntimeLaunchEx {
  static constexpr bool ptsz = per_thread;
  LOCKSTEP_HOOK_FN cudaError_t forward(const cudaLaunchConfig_t* const& config,
                                       const void* const& func, void** const& args) {
    if constexpr (ptsz)
      return LOCKSTEP_FORWARD(cudaLaunchKernelExC_ptsz, config, func, args);
    else
      return LOCKSTEP_FORWARD(cudaLaunchKernelExC, config, func, args);
  }
  LOCKSTEP_HOOK_FN KernelLaunch describe(const cudaLaunchConfig_t* const& config,
                                         const void* const& func, void** const& args) {
    return runtime_ex_event(ptsz, config, func, args);
  }
};

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

// cuLaunchKernel and its _ptsz twin (JAX's and Triton's kernels).
template <bool per_thread>
struct DriverLaunch {
  static constexpr bool ptsz = per_thread;
  LOCKSTEP_HOOK_FN CUresult forward(CUfunction const& f, const unsigned& gx, const unsigned& gy,
                                    const unsigned& gz, const unsigned& bx, const unsigned& by,
                                    const unsigned& bz, const unsigned& smem,
                                    CUstream const& stream, void** const& params,
                                    void** const& extra) {
    if constexpr (ptsz)
      return LOCKSTEP_FORWARD(cuLaunchKernel_ptsz, f, gx, gy, gz, bx, by, bz, smem, stream, params,
                              extra);
    else
      return LOCKSTEP_FORWARD(cuLaunchKernel, f, gx, gy, gz, bx, by, bz, smem, stream, params,
                              extra);
  }
  LOCKSTEP_HOOK_FN KernelLaunch describe(CUfunction const& f, const unsigned& gx,
                                         const unsigned& gy, const unsigned& gz,
                                         const unsigned& bx, const unsigned& by,
                                         const unsigned& bz, const unsigned& smem,
                                         CUstream const& stream, void** const& params,
                                         void** const& extra) {
    return driver_event(LaunchApi::DriverLaunch, ptsz, f, gx, gy, gz, bx, by, bz, smem,
                        stream, params, extra);
  }
};

template <bool per_thread>
struct DriverCooperative {
  static constexpr bool ptsz = per_thread;
  LOCKSTEP_HOOK_FN CUresult forward(CUfunction const& f, const unsigned& gx, const unsigned& gy,
                                    const unsigned& gz, const unsigned& bx, const unsigned& by,
                                    const unsigned& bz, const unsigned& smem,
                                    CUstream const& stream, void** const& params) {
    if constexpr (ptsz)
      return LOCKSTEP_FORWARD(cuLaunchCooperativeKernel_ptsz, f, gx, gy, gz, bx, by, bz, smem,
                              stream, params);
    else
      return LOCKSTEP_FORWARD(cuLaunchCooperativeKernel, f, gx, gy, gz, bx, by, bz, smem, stream,
                              params);
  }
  LOCKSTEP_HOOK_FN KernelLaunch describe(CUfunction const& f, const unsigned& gx,
                                         const unsigned& gy, const unsigned& gz,
                                         const unsigned& bx, const unsigned& by,
                                         const unsigned& bz, const unsigned& smem,
                                         CUstream const& stream, void** const& params) {
    return driver_event(LaunchApi::DriverCooperative, ptsz, f, gx, gy, gz, bx, by, bz, smem,
                        stream, params, nullptr);
  }
};

KernelLaunch driver_ex_event(bool ptsz, const CUlaunchConfig* config, CUfunction f,
                             void** params, void** extra) {
  if (config == nullptr)
    return driver_event(LaunchApi::DriverLaunchEx, ptsz, f, 0, 0, 0, 0, 0, 0, 0, nullptr, params,
                        extra);
  KernelLaunch e =
      driver_event(LaunchApi::DriverLaunchEx, ptsz, f, config->gridDimX, config->gridDimY,
                   config->gridDimZ, config->blockDimX, config->blockDimY, config->blockDimZ,
                   config->sharedMemBytes, config->hStream, params, extra);
  set_cluster(e, config->attrs, config->numAttrs, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
              [](const CUlaunchAttribute& a) { return a.value.clusterDim; });
  return e;
}
template <bool per_thread>
struct DriverLaunchEx {
  static constexpr bool ptsz = per_thread;
  LOCKSTEP_HOOK_FN CUresult forward(const CUlaunchConfig* const& config, CUfunction const& f,
                                    void** const& params, void** const& extra) {
    if constexpr (ptsz)
      return LOCKSTEP_FORWARD(cuLaunchKernelEx_ptsz, config, f, params, extra);
    else
      return LOCKSTEP_FORWARD(cuLaunchKernelEx, config, f, params, extra);
  }
  LOCKSTEP_HOOK_FN KernelLaunch describe(const CUlaunchConfig* const& config,
                                         CUfunction const& f, void** const& params,
                                         void** const& extra) {
    return driver_ex_event(ptsz, config, f, params, extra);
  }
};
#undef LOCKSTEP_HOOK_FN

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
  return traced_launch<RuntimeStub<false>>(kernel, gridDim, blockDim, args, sharedMem, stream);
}
LOCKSTEP_LAUNCH_TWIN_INTERCEPTOR cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel,
                                                                     dim3 gridDim, dim3 blockDim,
                                                                     void** args, size_t sharedMem,
                                                                     cudaStream_t stream) {
  return traced_launch<RuntimeStub<true>>(kernel, gridDim, blockDim, args, sharedMem, stream);
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

// ---- driver: code unloaded ----
// Before the real unload: the shim still holds launches of this code whose names it looks up
// later (broad's staged records) and caches keyed by function handles the driver may give out
// again. XLA's autotuner loads, runs and unloads candidate kernels while a job is traced.
namespace {
void report_unloading(const void* module, const void* library) {
  if (!track_state()) return;
  try {
    collectors::code_unloading(module, library);
  } catch (...) {}
}
}  // namespace
LOCKSTEP_INTERCEPTOR CUresult cuModuleUnload(CUmodule hmod) {
  report_unloading(hmod, nullptr);
  return LOCKSTEP_FORWARD(cuModuleUnload, hmod);
}
LOCKSTEP_INTERCEPTOR CUresult cuLibraryUnload(CUlibrary library) {
  report_unloading(nullptr, library);
  return LOCKSTEP_FORWARD(cuLibraryUnload, library);
}

// ---- runtime: launches by host stub ----
#define LOCKSTEP_RUNTIME_LAUNCH(name, Hook)                                                    \
  LOCKSTEP_INTERCEPTOR cudaError_t name(const void* func, dim3 gridDim, dim3 blockDim,         \
                                        void** args, size_t sharedMem, cudaStream_t stream) {  \
    return traced_launch<Hook>(func, gridDim, blockDim, args, sharedMem, stream);              \
  }
LOCKSTEP_RUNTIME_LAUNCH(cudaLaunchKernel, RuntimeLaunch)
LOCKSTEP_RUNTIME_LAUNCH(cudaLaunchKernel_ptsz, RuntimeLaunchPtsz)
LOCKSTEP_RUNTIME_LAUNCH(cudaLaunchCooperativeKernel, RuntimeCooperative)
LOCKSTEP_RUNTIME_LAUNCH(cudaLaunchCooperativeKernel_ptsz, RuntimeCooperativePtsz)
#undef LOCKSTEP_RUNTIME_LAUNCH

LOCKSTEP_INTERCEPTOR cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config,
                                                     const void* func, void** args) {
  return traced_launch<RuntimeLaunchEx<false>>(config, func, args);
}
LOCKSTEP_INTERCEPTOR cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config,
                                                          const void* func, void** args) {
  return traced_launch<RuntimeLaunchEx<true>>(config, func, args);
}

// ---- driver ----
#define LOCKSTEP_DRIVER_ARGS                                                                  \
  CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,          \
      unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                 \
      unsigned int sharedMemBytes, CUstream hStream, void **kernelParams
#define LOCKSTEP_DRIVER_NAMES                                                                 \
  f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, \
      kernelParams
LOCKSTEP_LAUNCH_INTERCEPTOR CUresult cuLaunchKernel(LOCKSTEP_DRIVER_ARGS, void** extra) {
  return traced_launch<DriverLaunch<false>>(LOCKSTEP_DRIVER_NAMES, extra);
}
LOCKSTEP_LAUNCH_TWIN_INTERCEPTOR CUresult cuLaunchKernel_ptsz(LOCKSTEP_DRIVER_ARGS, void** extra) {
  return traced_launch<DriverLaunch<true>>(LOCKSTEP_DRIVER_NAMES, extra);
}
LOCKSTEP_INTERCEPTOR CUresult cuLaunchCooperativeKernel(LOCKSTEP_DRIVER_ARGS) {
  return traced_launch<DriverCooperative<false>>(LOCKSTEP_DRIVER_NAMES);
}
LOCKSTEP_INTERCEPTOR CUresult cuLaunchCooperativeKernel_ptsz(LOCKSTEP_DRIVER_ARGS) {
  return traced_launch<DriverCooperative<true>>(LOCKSTEP_DRIVER_NAMES);
}
#undef LOCKSTEP_DRIVER_NAMES
#undef LOCKSTEP_DRIVER_ARGS

LOCKSTEP_LAUNCH_INTERCEPTOR CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f,
                                                      void** kernelParams, void** extra) {
  return traced_launch<DriverLaunchEx<false>>(config, f, kernelParams, extra);
}
LOCKSTEP_LAUNCH_TWIN_INTERCEPTOR CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config,
                                                                CUfunction f, void** kernelParams,
                                                                void** extra) {
  return traced_launch<DriverLaunchEx<true>>(config, f, kernelParams, extra);
}
