// What interpose/ tells collectors/: one plain struct per intercepted call, no policy.
// interpose/ does the mechanics (finding real symbols, forwarding, thread-local nesting of API
// scopes); collectors/ decides what the call means (records, extents, fingerprints).
//
// Contract for every begin/end pair: interpose calls begin() before forwarding to the real
// function and end() after it returns, on the same thread, with the token begin() returned and
// the real function's result. A token of 0 means "not traced": end() is still called and must
// accept it. Neither side may synchronize the job's streams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <nccl.h>

#include "collectors/hot_thread.h"
#include "common/hot_flags.h"

namespace lockstep::collectors {

// ---- process ---------------------------------------------------------------------------
// The gates every hooked call passes, inline: loads from the thread's hot lines and the
// process's line of hot flags (collectors/hot_thread.h, common/hot_flags.h), where each was a
// call into events.cpp (four or five per launch, on code lines of their own).

// What the configuration allows, as HotFlags::configured's bits: read from the configuration
// once (configured_flags_first, events.cpp), then from the line of hot flags.
uint8_t configured_flags_first();
inline uint8_t configured_hot_flags() {
  const uint8_t flags = hot_flags.configured.load(std::memory_order_relaxed);
  if (flags & HotFlags::kConfigured) [[likely]]
    return flags;
  return configured_flags_first();
}

// Inside one of the shim's own calls (ShimCallGuard, below).
inline bool inside_shim_call() { return t_hot.shim_depth > 0; }

// False once tracing is known to be impossible (bad configuration, level off, start failed,
// forked child): Tracer::possible().
inline bool tracing_possible() {
  if (hot_flags.tracing_disabled.load(std::memory_order_relaxed)) return false;
  return configured_hot_flags() & HotFlags::kPossible;
}

// True when tracing is configured and running, and the calling thread is not inside one of the
// shim's own CUDA calls. interpose checks it before building an event.
inline bool active() { return !inside_shim_call() && tracing_possible(); }

// False when no kernel launch can become an event: the level is below broad (off, metrics) or
// the configuration is invalid. Launch hooks then forward at once, without building an event
// (at metrics that was ~180 ns per launch of the job's thread for nothing).
inline bool launches_traced() { return configured_hot_flags() & HotFlags::kLaunchesTraced; }

// RAII: marks the calling thread as "inside the shim" so that our own launches, copies and
// allocations (hash kernels, slot copies) are not traced. Nestable.
class ShimCallGuard {
 public:
  ShimCallGuard();
  ~ShimCallGuard();
  ShimCallGuard(const ShimCallGuard&) = delete;
  ShimCallGuard& operator=(const ShimCallGuard&) = delete;
};

// interpose registers its real-symbol lookup at load time, so that collectors can call library
// functions that are not hooked (cuGetProcAddress_v2 for driver entry points,
// cublasLtMatmulDescGetAttribute, cublasGetStream_v2, ncclCommCount, ...). The resolver returns
// null when no loaded object defines the symbol, and never returns a shim wrapper.
using SymbolResolver = void* (*)(const char* name);
void set_symbol_resolver(SymbolResolver resolver);

// ---- kernel launches -----------------------------------------------------------------------
enum class LaunchApi : uint8_t {
  RuntimeStub = 1,     // __cudaLaunchKernel(_ptsz): nvcc 13 <<<>>> stubs
  RuntimeLaunch,       // cudaLaunchKernel(_ptsz)
  RuntimeLaunchEx,     // cudaLaunchKernelExC(_ptsz)
  RuntimeCooperative,  // cudaLaunchCooperativeKernel(_ptsz)
  DriverLaunch,        // cuLaunchKernel(_ptsz)
  DriverLaunchEx,      // cuLaunchKernelEx(_ptsz)
  DriverCooperative,   // cuLaunchCooperativeKernel(_ptsz)
  GraphNode,           // a kernel node of a CUDA graph, recorded at each cudaGraphLaunch
};

enum class FunctionHandle : uint8_t {
  HostStub = 1,    // const void* entry (cudaLaunchKernel's func)
  RuntimeKernel,   // cudaKernel_t (__cudaLaunchKernel); same object as a CUkernel
  DriverFunction,  // CUfunction
  DriverKernel,    // CUkernel (remembered from cuLibraryGetKernel / cudaGetKernel)
  DriverUnknown,   // CUfunction or CUkernel, not known which
};

struct KernelLaunch {
  LaunchApi api = LaunchApi::RuntimeStub;
  bool per_thread_stream = false;  // a _ptsz variant: a null stream means per-thread default
  FunctionHandle handle_kind = FunctionHandle::HostStub;
  const void* handle = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned cluster[3] = {0, 0, 0};  // from launch attributes of Ex launches, 0 = none
  size_t smem_bytes = 0;
  CUstream stream = nullptr;  // as the caller gave it (cudaStream_t is the same object)
  void** kernel_params = nullptr;
  void** extra = nullptr;  // CU_LAUNCH_PARAM_BUFFER_POINTER form
};
uint64_t kernel_launch_begin(const KernelLaunch& launch);
void kernel_launch_end(uint64_t token, int result);

// A handle the driver gave out that names a CUkernel (so later launches can tell).
void remember_kernel_handle(const void* handle);
// Before cuModuleUnload (module) or cuLibraryUnload (library; the other one null): records that
// name a kernel of it get their names while the driver still answers for it, and what is cached
// about its functions is dropped (the driver may hand their handles out again for other code).
void code_unloading(const void* module, const void* library);

// ---- CUDA graphs ---------------------------------------------------------------------------
void graph_instantiated(const void* graph, const void* graph_exec);
// Around cudaGraphLaunch / cuGraphLaunch: begin before the launch (inputs fingerprinted at
// full), end after it returned (outputs, then one record per kernel node, in node order).
uint64_t graph_launch_begin(const void* graph_exec, CUstream stream, bool per_thread_default);
void graph_launch_end(uint64_t token, int result);

// ---- allocations (feeds the allocation interval map) ---------------------------------------
void on_alloc(CUdeviceptr ptr, size_t bytes);  // cuMemAlloc*, cudaMalloc*, async/pool
// cudaMallocAsync / cuMemAlloc(FromPool)Async: as on_alloc, and remembers whether `stream`
// was capturing (the allocation is then a graph memory node's).
void on_stream_alloc(CUdeviceptr ptr, size_t bytes, CUstream stream, bool per_thread_default);
void on_free(CUdeviceptr ptr);
// cudaFreeAsync / cuMemFreeAsync: true when the collectors took the free over (they make the
// real cuMemFreeAsync on `stream` later, right after the hashes that still read the memory):
// the hook then returns success without forwarding. False: forward it now (as on_free).
bool on_stream_free(CUdeviceptr ptr, CUstream stream, bool per_thread_default);
void on_va_reserve(CUdeviceptr ptr, size_t bytes);  // cuMemAddressReserve
void on_va_free(CUdeviceptr ptr, size_t bytes);     // cuMemAddressFree
void on_map(CUdeviceptr ptr, size_t bytes);         // cuMemMap: [ptr, ptr+bytes) now backed
void on_unmap(CUdeviceptr ptr, size_t bytes);       // cuMemUnmap

// ---- copies and sets -----------------------------------------------------------------------
struct MemoryOp {
  // "cudaMemcpyAsync", "cuMemcpyDtoHAsync_v2", ...: a string literal, as every api below (the
  // record's name, whose id the collectors cache by address: Tracer::intern_literal).
  const char* api = "";
  bool is_set = false;   // memset
  bool is_async = false;
  int direction = 0;  // cudaMemcpyKind value; 4 (default) when the API does not say
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  uint32_t set_value = 0;
  unsigned set_element_bytes = 1;
  CUstream stream = nullptr;  // null for the synchronous APIs (legacy default stream)
  bool per_thread_stream = false;
};
uint64_t memory_op_begin(const MemoryOp& op);
void memory_op_end(uint64_t token, int result);

// ---- cuBLAS / cuBLASLt ---------------------------------------------------------------------
struct CublasGemm {
  const char* api = "";  // "cublasGemmEx", "cublasSgemm_v2", ...: a string literal
  cublasHandle_t handle = nullptr;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0;
  const void* A = nullptr;
  int64_t lda = 0;
  cudaDataType type_a = CUDA_R_32F;
  const void* B = nullptr;
  int64_t ldb = 0;
  cudaDataType type_b = CUDA_R_32F;
  void* C = nullptr;
  int64_t ldc = 0;
  cudaDataType type_c = CUDA_R_32F;
  int compute_type = 0;  // cublasComputeType_t, or the data type for typed APIs
  int algo = -1;         // cublasGemmAlgo_t where given
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // strided batched, in elements
  bool pointer_arrays = false;           // GemmBatchedEx: A/B/C are device arrays of pointers
  const void* beta = nullptr;            // host or device, per cublasGetPointerMode
  cudaDataType scale_type = CUDA_R_32F;  // type of alpha and beta
};
// The type of alpha/beta of a cublas*Ex call: from the compute type, complex when C is.
inline cudaDataType cublas_scale_type(cublasComputeType_t compute_type, cudaDataType c_type) {
  const bool complex = c_type == CUDA_C_16F || c_type == CUDA_C_16BF || c_type == CUDA_C_32F ||
                       c_type == CUDA_C_64F || c_type == CUDA_C_8I || c_type == CUDA_C_32I;
  switch (compute_type) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
      return complex ? CUDA_C_16F : CUDA_R_16F;
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
      return complex ? CUDA_C_64F : CUDA_R_64F;
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC:
      return complex ? CUDA_C_32I : CUDA_R_32I;
    default:  // the 32F compute types, TF32/BF16/FP16-accelerated ones included
      return complex ? CUDA_C_32F : CUDA_R_32F;
  }
}

uint64_t cublas_gemm_begin(const CublasGemm& gemm);
void cublas_gemm_end(uint64_t token, int status);

struct LtMatmul {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  const void* alpha = nullptr;
  const void* beta = nullptr;
  const void* A = nullptr;
  cublasLtMatrixLayout_t a_layout = nullptr;
  const void* B = nullptr;
  cublasLtMatrixLayout_t b_layout = nullptr;
  const void* C = nullptr;
  cublasLtMatrixLayout_t c_layout = nullptr;
  void* D = nullptr;
  cublasLtMatrixLayout_t d_layout = nullptr;
  const cublasLtMatmulAlgo_t* algo = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  CUstream stream = nullptr;
};
uint64_t lt_matmul_begin(const LtMatmul& matmul);
void lt_matmul_end(uint64_t token, int status);

// ---- NCCL ----------------------------------------------------------------------------------
enum class NcclOp : uint8_t {
  AllReduce = 1,
  Broadcast,
  Bcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter,
  Send,
  Recv,
};
struct NcclCall {
  NcclOp op = NcclOp::AllReduce;
  const char* api = "";  // "ncclAllReduce", ...: a string literal
  const void* send = nullptr;
  void* recv = nullptr;  // for Bcast: the in-place buffer; for Send: null
  size_t count = 0;      // as passed to the API
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t redop = ncclSum;
  int root_or_peer = -1;
  ncclComm_t comm = nullptr;
  CUstream stream = nullptr;
};
uint64_t nccl_begin(const NcclCall& call);
void nccl_end(uint64_t token, ncclResult_t result);
void nccl_group_start();
void nccl_group_end(ncclResult_t result);  // after the real ncclGroupEnd returned

struct NcclCommCreated {
  const char* api = "";         // ncclCommInitRank, ncclCommInitRankConfig, ncclCommSplit, ...
  ncclComm_t comm = nullptr;    // the new communicator (after the real call returned)
  ncclComm_t parent = nullptr;  // for split / shrink
  int color = 0, key = 0;
  int nranks = 0, rank = 0;
};
void nccl_comm_created(const NcclCommCreated& created);
void nccl_comm_destroyed(ncclComm_t comm);

// NCCL's own choices for one collective, from its profiler plugin interface (the shim serves as
// the plugin: interpose/nccl_profiler.cpp). NCCL calls the plugin's startEvent when it plans the
// collective, on the thread that launches it: inside the job's ncclAllReduce... call, or inside
// the outermost ncclGroupEnd for grouped calls. The strings are NCCL's own names, valid only
// during the call ("AllReduce", "Ring", "LL128").
struct NcclChoice {
  const char* func = "";  // NCCL's function name: AllReduce, Broadcast, Reduce, AllGather, ...
  const void* send = nullptr;
  const void* recv = nullptr;
  uint64_t seq_number = 0;  // k-th collective of this function on the communicator
  const char* algo = nullptr;
  const char* proto = nullptr;
  unsigned channels = 0;
};
void nccl_choice(const NcclChoice& choice);
// The plugin's init: NCCL loaded the shim as its profiler for a new communicator.
void nccl_profiler_loaded(int nranks, int rank);
// At load, from the shim's constructor (before NCCL can initialise): points NCCL_PROFILER_PLUGIN
// at the shim (`shim_path`) when LOCKSTEP_NCCL_PROFILER and the level allow and the job has not
// set its own; a plugin the job set is kept, with one line saying that NCCL's choices will not be
// recorded.
void nccl_profiler_setup(const char* shim_path);

// ---- stream order points ----------------------------------------------------------------------
// The job is about to make later work, or the host, wait for what a stream has queued so far:
// cuEventRecord(WithFlags), cuStreamSynchronize, cuStreamQuery, cuCtxSynchronize,
// cuStreamBeginCapture(ToGraph), cuLaunchHostFunc, cuStreamAddCallback (every variant). Called
// before the real call. Fingerprints the shim has deferred (the outputs of a stream's last
// kernel, merged into the next kernel's launch on that stream) are enqueued first, so that
// whatever the job orders after this point is ordered after them too. Cheap when nothing waits.
void stream_order_point();
// The host waits for, or asks about, what a stream or the context has queued
// (cuStreamSynchronize, cuStreamQuery, cuCtxSynchronize, every variant): begin before the real
// call, end after it with its result. Deferred hashes stay held across it (nothing is queued by
// it), ordered before other streams' work from then on (Tracer::hold_at_host_wait); a wait that
// saw held hashes done ends that ordering. `whole_context`: the streams of `context`
// (cuCtxSynchronize; cuCtxSynchronize_v2 names it, null: the current one); `stream`,
// `per_thread_default` otherwise.
struct HostWait {
  uint64_t issue_generation = 0;  // the held hashes' issue this wait covers (0: none)
};
HostWait stream_host_wait_begin(CUstream stream, bool per_thread_default, bool whole_context,
                                CUcontext context = nullptr);
void stream_host_wait_end(const HostWait& wait, int result);
// `event` is recorded on `stream` (cuEventRecord, every variant; after stream_order_point):
// under stream-ordered steps (stream_steps.h) the stream's next record takes the current step,
// and the event carries the step of the work before it.
void stream_event_recorded(CUevent event, CUstream stream, bool per_thread_default);
// `stream` waits on `event` (cuStreamWaitEvent, every variant; before the real call): under
// stream-ordered steps its next record is in the event's step or a later one.
void stream_event_waited(CUstream stream, bool per_thread_default, CUevent event);
// A stream capture begins (any thread, traced or not; called before the real call). Until the
// first, no stream can be capturing: the shim makes no driver capture query before it
// (Tracer::capturing), which at broad was most of what a launch cost besides its record.
void capture_begins();
inline bool capture_begun() { return hot_flags.capture_begun.load(std::memory_order_acquire); }

// ---- markers (NVTX, explicit API) -----------------------------------------------------------
// NVTX range push / start, mark: true when the text was a step marker (the step advanced).
bool marker_range_push(const char* message);
// lockstep_step() / lockstep_mark(name) / lockstep_step_number(n): `job_step` is n.
void marker_step(const char* name, std::optional<uint64_t> job_step = std::nullopt);

}  // namespace lockstep::collectors
