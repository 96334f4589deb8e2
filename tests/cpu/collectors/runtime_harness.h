// What the runtime tests share (tracer_*_test.cpp): fakes behind the symbol resolver
// (cuBLASLt descriptor reads, NCCL rank queries, a driver with kernel names, parameter
// layouts, capture state and a graph, optionally a fake GPU behind the hash engine), the
// forked-child harness, and the fixtures RuntimeTest and MergeTest. Each scenario runs in a
// forked child (the Tracer is one per process) with its own environment; no libcuda, so
// without the fake GPU fingerprints are flagged dropped. The parent reads the trace.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "collectors/events.h"
#include "collectors/lockstep.h"
#include "collectors/lt_copies.h"
#include "collectors/runtime.h"
#include "tests/cpu/collectors/fake_gpu.h"
#include "trace/reader.h"

namespace lockstep::collectors {
namespace fs = std::filesystem;

// ---- fakes ---------------------------------------------------------------------------------------
// A stand-in for a cuBLASLt descriptor or layout. The shim knows a layout by its first 64 bytes
// (collectors/bytes_keyed_cache.h), as cuBLASLt's own struct keeps its attributes in them: so
// every set changes those bytes here too (a process-wide version), and nothing else is in them
// (the map's pointers would make the cache's sets differ from run to run).
inline uint64_t g_fake_attribute_version = 0;
struct FakeAttributes {
  uint64_t version = 0;
  uint64_t padding[7] = {};
  std::map<int, std::vector<uint8_t>> values;
  template <typename T>
  void set(int attr, T value) {
    std::vector<uint8_t> bytes(sizeof(T));
    std::memcpy(bytes.data(), &value, sizeof(T));
    values[attr] = bytes;
    version = ++g_fake_attribute_version;
  }
};
static_assert(sizeof(FakeAttributes) >= sizeof(cublasLtMatrixLayoutOpaque_t));

inline cublasStatus_t fake_get(const FakeAttributes* attrs, int attr, void* buf, size_t size,
                               size_t* written) {
  auto it = attrs->values.find(attr);
  if (it == attrs->values.end() || it->second.size() != size) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, it->second.data(), size);
  *written = size;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t fake_desc_get(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                    void* buf, size_t size, size_t* written) {
  return fake_get(reinterpret_cast<const FakeAttributes*>(desc), attr, buf, size, written);
}
inline int g_layout_reads = 0;  // calls of the fake cublasLtMatrixLayoutGetAttribute
inline cublasStatus_t fake_layout_get(cublasLtMatrixLayout_t layout,
                                      cublasLtMatrixLayoutAttribute_t attr, void* buf, size_t size,
                                      size_t* written) {
  ++g_layout_reads;
  return fake_get(reinterpret_cast<const FakeAttributes*>(layout), attr, buf, size, written);
}
// A cuBLASLt algorithm whose configuration attributes are `attrs`: its bytes hold the pointer and
// the attributes' version, so that other attributes are other bytes (the shim caches by them).
inline cublasLtMatmulAlgo_t fake_algo(const FakeAttributes* attrs) {
  cublasLtMatmulAlgo_t algo{};
  algo.data[0] = reinterpret_cast<uint64_t>(attrs);
  algo.data[1] = attrs->version;
  return algo;
}
inline int g_algo_reads = 0;  // calls of the fake cublasLtMatmulAlgoConfigGetAttribute
inline cublasStatus_t fake_algo_get(const cublasLtMatmulAlgo_t* algo,
                                    cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
                                    size_t size, size_t* written) {
  ++g_algo_reads;
  return fake_get(reinterpret_cast<const FakeAttributes*>(algo->data[0]), attr, buf, size, written);
}
inline ncclResult_t fake_count(const ncclComm_t, int* n) {
  *n = 4;
  return ncclSuccess;
}
inline ncclResult_t fake_user_rank(const ncclComm_t, int* r) {
  *r = 1;
  return ncclSuccess;
}

inline void* fake_resolver(const char* name) {
  const std::string n = name;
  if (n == "cublasLtMatmulDescGetAttribute") return reinterpret_cast<void*>(&fake_desc_get);
  if (n == "cublasLtMatrixLayoutGetAttribute") return reinterpret_cast<void*>(&fake_layout_get);
  if (n == "cublasLtMatmulAlgoConfigGetAttribute") return reinterpret_cast<void*>(&fake_algo_get);
  if (n == "ncclCommCount") return reinterpret_cast<void*>(&fake_count);
  if (n == "ncclCommUserRank") return reinterpret_cast<void*>(&fake_user_rank);
  return nullptr;  // no libcuda in this process
}

// A cuBLASLt call over fake descriptors; C (and its layout) may be 0/null.
inline LtMatmul fake_lt(FakeAttributes* desc, CUdeviceptr A, FakeAttributes* a, CUdeviceptr B,
                        FakeAttributes* b, CUdeviceptr C, FakeAttributes* c, CUdeviceptr D,
                        FakeAttributes* d) {
  LtMatmul mm;
  mm.desc = reinterpret_cast<cublasLtMatmulDesc_t>(desc);
  mm.A = reinterpret_cast<void*>(A);
  mm.a_layout = reinterpret_cast<cublasLtMatrixLayout_t>(a);
  mm.B = reinterpret_cast<void*>(B);
  mm.b_layout = reinterpret_cast<cublasLtMatrixLayout_t>(b);
  mm.C = reinterpret_cast<void*>(C);
  mm.c_layout = reinterpret_cast<cublasLtMatrixLayout_t>(c);
  mm.D = reinterpret_cast<void*>(D);
  mm.d_layout = reinterpret_cast<cublasLtMatrixLayout_t>(d);
  return mm;
}

// Runs `mm` in the child; exits 9 (a failed status) unless it read `expected` layout attributes.
inline void lt_call_reading(const LtMatmul& mm, int expected) {
  g_layout_reads = 0;
  lt_matmul_end(lt_matmul_begin(mm), 0);
  if (g_layout_reads != expected) {
    std::fprintf(stderr, "layout reads: %d, expected %d\n", g_layout_reads, expected);
    std::fflush(stderr);  // _Exit does not flush (stderr is a file in the child)
    std::_Exit(9);
  }
}

// cublasGemmEx 16 x 8 x 4 on fp32 operands from `base`.
inline CublasGemm small_gemm_ex(CUdeviceptr base) {
  CublasGemm gemm;
  gemm.api = "cublasGemmEx";
  gemm.m = 16, gemm.n = 8, gemm.k = 4, gemm.lda = 16, gemm.ldb = 4, gemm.ldc = 16;
  gemm.A = reinterpret_cast<void*>(base), gemm.B = reinterpret_cast<void*>(base + 1024);
  gemm.C = reinterpret_cast<void*>(base + 2048);
  return gemm;
}

inline FakeAttributes layout(cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
  FakeAttributes l;
  l.set<uint32_t>(CUBLASLT_MATRIX_LAYOUT_TYPE, type);
  l.set<uint64_t>(CUBLASLT_MATRIX_LAYOUT_ROWS, rows);
  l.set<uint64_t>(CUBLASLT_MATRIX_LAYOUT_COLS, cols);
  l.set<int64_t>(CUBLASLT_MATRIX_LAYOUT_LD, ld);
  return l;
}

// A fake driver behind cuGetProcAddress_v2: kernel names and parameter layouts, no context (so
// no hash engine: planned fingerprints are flagged dropped).
inline CUresult fake_ctx_get_current(CUcontext* ctx) {
  *ctx = nullptr;
  return CUDA_SUCCESS;
}
// Function kTwoPointerKernel is kernel2(float* out, float* in, int), kThreePointerKernel
// kernel3(float*, float*, float*, int); every other one is kernel(float*, int, float).
const CUfunction kTwoPointerKernel = reinterpret_cast<CUfunction>(0x1236);
const CUfunction kThreePointerKernel = reinterpret_cast<CUfunction>(0x1237);
// kFillKernel is PyTorch's contiguous float fill (kernel_writes.h), its real name and layout;
// kReduceKernel a PyTorch reduction, its ReduceOp struct cut to 64 bytes (src at 0, dst at 8,
// cta_buf at 32, semaphores at 40).
const CUfunction kFillKernel = reinterpret_cast<CUfunction>(0x1238);
const CUfunction kReduceKernel = reinterpret_cast<CUfunction>(0x1239);
// kTensorListKernel is PyTorch's multi_tensor_apply_kernel<TensorListMetadata<1>, Functor>: one
// 3368-byte table of 110 tensors (kernel_writes.h).
const CUfunction kTensorListKernel = reinterpret_cast<CUfunction>(0x123a);
// kMulKernel is PyTorch's contiguous float multiply of two tensors (BinaryFunctor<float, float,
// float, MulFunctor<float>>, (int N, functor, std::array<char*, 3>)): data[0] written whole;
// kWideReduceKernel kReduceKernel's name with the whole 1048-byte ReduceOp of PyTorch 2.11 (its
// ReduceConfig at 8, src at 984, dst at 992, cta_buf at 1016).
const CUfunction kMulKernel = reinterpret_cast<CUfunction>(0x123b);
const CUfunction kWideReduceKernel = reinterpret_cast<CUfunction>(0x123c);
// kStridedMulKernel is the same multiply on strided tensors (gpu_kernel_impl_nocast's lambda:
// (int N, closure of 640 bytes), tests/cpu/collectors/offset_calculator.h builds its bytes).
const CUfunction kStridedMulKernel = reinterpret_cast<CUfunction>(0x123d);
// kCatKernel is PyTorch's concatenation of bf16 tensors, CatArrayBatchedCopy<OpaqueType<2u>,
// unsigned int, 4, 64, 64> (kernel_writes.h): (output, 3392-byte metadata, TensorSizeStride, int
// concatDim, unsigned dimStride), its mangled name as g++ spells that declaration.
const CUfunction kCatKernel = reinterpret_cast<CUfunction>(0x123e);
inline CUresult fake_func_get_name(const char** name, CUfunction f) {
  *name =
      f == kTwoPointerKernel     ? "_Z7kernel2PfS_i"
      : f == kThreePointerKernel ? "_Z7kernel3PfS_S_i"
      : f == kFillKernel         ? "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_"
                                   "11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
      : f == kReduceKernel || f == kWideReduceKernel
          ? "_ZN2at6native13reduce_kernelILi128ELi4ENS0_8ReduceOpIfNS0_6SumOpsEjfLi4ELi4EEEEEvT1_"
      : f == kMulKernel ? "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIfff"
                          "NS0_15binary_internal10MulFunctorIfEEEESt5arrayIPcLm3EEEEviT0_T1_"
      : f == kStridedMulKernel
          ? "_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastINS0_"
            "13BinaryFunctorIfffNS0_15binary_internal10MulFunctorIfEEEEEEvRNS_18TensorIteratorBase"
            "ERKT_EUliE_EEviT1_"
      : f == kCatKernel
          ? "_ZN2at6native12_GLOBAL__N_119CatArrayBatchedCopyINS1_10OpaqueTypeILj2EEEjLi4ELi64E"
            "Li64EEEvPT_NS1_25CatArrInputTensorMetadataIS5_T0_XT2_EXT3_EEENS1_16TensorSizeStride"
            "IS8_Lj4EEEiS8_"
      : f == kTensorListKernel ? "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_"
                                 "18TensorListMetadataILi1EEENS1_7FunctorEJEEEvT_T0_DpT1_"
                               : "_Z6kernelPfif";
  return CUDA_SUCCESS;
}
inline CUresult fake_func_get_param_info(CUfunction f, size_t index, size_t* offset, size_t* size) {
  if (f == kReduceKernel || f == kWideReduceKernel || f == kTensorListKernel) {  // one struct
    if (index >= 1) return CUDA_ERROR_INVALID_VALUE;
    *offset = 0, *size = f == kReduceKernel ? 64 : f == kWideReduceKernel ? 1048 : 3368;
    return CUDA_SUCCESS;
  }
  if (f == kMulKernel) {  // (int N, BinaryFunctor<...> (empty), std::array<char*, 3>)
    static const size_t mul_offsets[] = {0, 4, 8}, mul_sizes[] = {4, 1, 24};
    if (index >= 3) return CUDA_ERROR_INVALID_VALUE;
    *offset = mul_offsets[index], *size = mul_sizes[index];
    return CUDA_SUCCESS;
  }
  if (f == kStridedMulKernel) {  // (int N, the lambda's closure)
    if (index >= 2) return CUDA_ERROR_INVALID_VALUE;
    *offset = index == 0 ? 0 : 8, *size = index == 0 ? 4 : 640;
    return CUDA_SUCCESS;
  }
  if (f == kCatKernel) {  // (T*, metadata, TensorSizeStride<unsigned, 4>, int, unsigned)
    static const size_t cat_offsets[] = {0, 8, 3400, 3432, 3436}, cat_sizes[] = {8, 3392, 32, 4, 4};
    if (index >= 5) return CUDA_ERROR_INVALID_VALUE;
    *offset = cat_offsets[index], *size = cat_sizes[index];
    return CUDA_SUCCESS;
  }
  if (f == kFillKernel) {  // (int N, FillFunctor<float>, std::array<char*, 1>)
    static const size_t fill_offsets[] = {0, 4, 8}, fill_sizes[] = {4, 4, 8};
    if (index >= 3) return CUDA_ERROR_INVALID_VALUE;
    *offset = fill_offsets[index], *size = fill_sizes[index];
    return CUDA_SUCCESS;
  }
  static const size_t offsets[] = {0, 8, 12}, sizes[] = {8, 4, 4};
  static const size_t two_offsets[] = {0, 8, 16}, two_sizes[] = {8, 8, 4};
  static const size_t three_offsets[] = {0, 8, 16, 24}, three_sizes[] = {8, 8, 8, 4};
  if (index >= (f == kThreePointerKernel ? 4u : 3u)) return CUDA_ERROR_INVALID_VALUE;
  *offset = (f == kThreePointerKernel ? three_offsets
             : f == kTwoPointerKernel ? two_offsets
                                      : offsets)[index];
  *size = (f == kThreePointerKernel ? three_sizes
           : f == kTwoPointerKernel ? two_sizes
                                    : sizes)[index];
  return CUDA_SUCCESS;
}
// Stream kCapturingStream is capturing (capture fake_capture_id, 42 unless a test sets another,
// into graph fake_capture_graph); every other stream is not. The shim asks only once a capture
// began (Tracer::capturing): a test that captures calls capture_begins().
const CUstream kCapturingStream = reinterpret_cast<CUstream>(0xcafe);
inline cuuint64_t fake_capture_id = 42;
inline CUgraph fake_capture_graph = nullptr;
inline CUresult fake_capture_info(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id,
                                  CUgraph* graph, const CUgraphNode**, const CUgraphEdgeData**,
                                  size_t*) {
  const bool capturing = stream == kCapturingStream;
  *status = capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  *id = capturing ? fake_capture_id : 0;
  if (graph != nullptr) *graph = capturing ? fake_capture_graph : nullptr;
  return CUDA_SUCCESS;
}

// A graph (kGraph) of four nodes: kernel 1, a memset, a child graph holding kernel 4, kernel 5.
// Kernel 1 and 5 write the same pointer (one region); kernel 4 writes graph-owned memory.
const CUgraph kGraph = reinterpret_cast<CUgraph>(0x6000);
const CUgraph kChildGraph = reinterpret_cast<CUgraph>(0x7000);
constexpr CUdeviceptr kGraphBase = 0x7e0000000000, kGraphOwned = 0x7d0000000000;
struct NodeArgs {
  float* p;
  int n;
  float s;
};
inline NodeArgs g_node_args[6];
inline void* g_node_params[6][3];
inline CUresult fake_graph_get_nodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  static const uintptr_t top[] = {1, 2, 3, 5}, child[] = {4};
  const uintptr_t* list = graph == kGraph ? top : graph == kChildGraph ? child : nullptr;
  const size_t n = graph == kGraph ? 4 : graph == kChildGraph ? 1 : 0;
  if (list == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (nodes != nullptr)
    for (size_t i = 0; i < std::min(n, *count); ++i)
      nodes[i] = reinterpret_cast<CUgraphNode>(list[i]);
  *count = n;
  return CUDA_SUCCESS;
}
inline CUresult fake_node_get_type(CUgraphNode node, CUgraphNodeType* type) {
  const auto id = reinterpret_cast<uintptr_t>(node);
  *type = id == 2   ? CU_GRAPH_NODE_TYPE_MEMSET
          : id == 3 ? CU_GRAPH_NODE_TYPE_GRAPH
                    : CU_GRAPH_NODE_TYPE_KERNEL;
  return CUDA_SUCCESS;
}
inline CUresult fake_child_graph(CUgraphNode, CUgraph* graph) {
  *graph = kChildGraph;
  return CUDA_SUCCESS;
}
inline CUresult fake_kernel_node_params(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* p) {
  const auto id = reinterpret_cast<uintptr_t>(node);
  *p = CUDA_KERNEL_NODE_PARAMS{};
  p->func = reinterpret_cast<CUfunction>(0x1234);
  p->gridDimX = static_cast<unsigned>(10 + id), p->gridDimY = p->gridDimZ = 1;
  p->blockDimX = 128, p->blockDimY = p->blockDimZ = 1;
  NodeArgs& args = g_node_args[id];
  args = {reinterpret_cast<float*>(id == 4 ? kGraphOwned : kGraphBase + 256), int(id), 1.f};
  g_node_params[id][0] = &args.p, g_node_params[id][1] = &args.n, g_node_params[id][2] = &args.s;
  p->kernelParams = g_node_params[id];
  return CUDA_SUCCESS;
}
inline CUresult fake_get_proc_address(const char* symbol, void** pfn, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult* status) {
  const std::string s = symbol;
  *pfn = nullptr;
  if (s == "cuCtxGetCurrent") *pfn = reinterpret_cast<void*>(&fake_ctx_get_current);
  if (s == "cuFuncGetName") *pfn = reinterpret_cast<void*>(&fake_func_get_name);
  if (s == "cuFuncGetParamInfo") *pfn = reinterpret_cast<void*>(&fake_func_get_param_info);
  if (s == "cuStreamGetCaptureInfo") *pfn = reinterpret_cast<void*>(&fake_capture_info);
  if (s == "cuGraphGetNodes") *pfn = reinterpret_cast<void*>(&fake_graph_get_nodes);
  if (s == "cuGraphNodeGetType") *pfn = reinterpret_cast<void*>(&fake_node_get_type);
  if (s == "cuGraphChildGraphNodeGetGraph") *pfn = reinterpret_cast<void*>(&fake_child_graph);
  if (s == "cuGraphKernelNodeGetParams") *pfn = reinterpret_cast<void*>(&fake_kernel_node_params);
  *status = *pfn != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *pfn != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

inline void* fake_resolver_with_driver(const char* name) {
  if (std::string(name) == "cuGetProcAddress_v2")
    return reinterpret_cast<void*>(&fake_get_proc_address);
  return fake_resolver(name);
}

// The same driver plus a fake GPU behind the hash engine (fake_gpu.h): fingerprints arrive.
inline CUresult fake_get_proc_address_gpu(const char* symbol, void** pfn, int version,
                                          cuuint64_t flags,
                                          CUdriverProcAddressQueryResult* status) {
  if (void* fn = lockstep::testing::FakeGpu::instance().proc(symbol)) {
    *pfn = fn;
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  return fake_get_proc_address(symbol, pfn, version, flags, status);
}
inline void* fake_resolver_with_gpu(const char* name) {
  if (std::string(name) == "cuGetProcAddress_v2")
    return reinterpret_cast<void*>(&fake_get_proc_address_gpu);
  return fake_resolver(name);
}

// ---- harness ----------------------------------------------------------------------------------
struct ChildResult {
  int status = -1;
  std::string stderr_text;
};

inline ChildResult run_child(const std::map<std::string, std::string>& env,
                             const std::function<void()>& body,
                             SymbolResolver resolver = &fake_resolver) {
  const fs::path err = fs::temp_directory_path() / ("lockstep-stderr-" + std::to_string(getpid()));
  pid_t pid = fork();
  if (pid == 0) {
    std::freopen(err.c_str(), "w", stderr);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    set_symbol_resolver(resolver);
    // FakeAttributes keep their attributes outside their bytes: copies of them would not read
    // back (collectors/lt_copies.h). lt_copies_test.cpp turns them on over fakes that do.
    set_lt_copies(false);
    body();
    std::exit(0);  // atexit closes the trace
  }
  ChildResult result;
  waitpid(pid, &result.status, 0);
  std::ifstream in(err);
  std::stringstream text;
  text << in.rdbuf();
  result.stderr_text = text.str();
  fs::remove(err);
  return result;
}

class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lockstep-collectors-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::map<std::string, std::string> env(const std::string& level) {
    return {{"LOCKSTEP_DIR", dir_.string()},
            {"LOCKSTEP_LEVEL", level},
            {"RANK", "0"},
            {"WORLD_SIZE", "4"},
            {"LOCKSTEP_RUN_ID", "test"}};
  }
  std::vector<fs::path> traces() const {
    std::vector<fs::path> out;
    if (!fs::exists(dir_)) return out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().extension() == ".lstrace") out.push_back(e.path());
    return out;
  }
  // The one trace of a child that exited 0, opened; null (and a failure naming the child's
  // status and stderr) when it did not exit 0, or wrote no trace or several.
  std::unique_ptr<trace::TraceReader> only_trace(const ChildResult& child) const {
    const bool clean = WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0;
    EXPECT_TRUE(clean) << "status " << child.status << ": " << child.stderr_text;
    if (!clean) return nullptr;
    return the_trace(child.stderr_text);
  }
  // The one trace in the test's folder, opened; null (and a failure) when there are none or
  // several. `context`: what the failure shows.
  std::unique_ptr<trace::TraceReader> the_trace(const std::string& context = "") const {
    auto files = traces();
    EXPECT_EQ(files.size(), 1u) << context;
    if (files.size() != 1) return nullptr;
    return trace::TraceReader::open(files[0].string());
  }
  fs::path dir_;
};

// The records of one kind in a trace, in seq order.
inline std::vector<trace::Record> records_of_kind(trace::TraceReader& reader,
                                                  trace::RecordKind kind) {
  std::vector<trace::Record> out;
  reader.for_each_record([&](const trace::Record& r) {
    if (r.kind == kind) out.push_back(r);
    return true;
  });
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.seq < b.seq; });
  return out;
}

inline const trace::BufferFingerprint* find_buffer(trace::TraceReader& reader,
                                                   const trace::Record& r, std::string_view label) {
  for (const auto& b : r.buffers)
    if (reader.string(b.label) == label) return &b;
  return nullptr;
}

// ---- merged hash launches (LOCKSTEP_MERGE_HASHES) ------------------------------------------------
const CUstream kStreamS = reinterpret_cast<CUstream>(0x51),
               kStreamT = reinterpret_cast<CUstream>(0x52);
constexpr CUdeviceptr kMergeBase = 0x7c0000000000;
constexpr CUdeviceptr kSecondBase = kMergeBase + (4 << 20);  // a second allocation (reuse tests)

// A driver launch of fake function `f` on `stream` with these parameters, returned at once.
// `written`: the fake GPU sees other bytes there from the launch on (its write), 0 for none.
inline void launch_function(CUfunction f, CUstream stream, void** params, unsigned grid,
                            unsigned grid_y = 1, unsigned block_x = 1, unsigned block_y = 1,
                            CUdeviceptr written = 0) {
  KernelLaunch l;
  l.api = LaunchApi::DriverLaunch;
  l.handle_kind = FunctionHandle::DriverFunction;
  l.handle = reinterpret_cast<const void*>(f);
  l.grid[0] = grid, l.grid[1] = grid_y;
  l.block[0] = block_x, l.block[1] = block_y;
  l.stream = stream;
  l.kernel_params = params;
  const uint64_t token = kernel_launch_begin(l);
  if (written != 0) lockstep::testing::FakeGpu::instance().write(written);
  kernel_launch_end(token, CUDA_SUCCESS);
}

// PyTorch's contiguous fill (kFillKernel) of `count` floats at p: a known whole writer
// (kernel_writes.h), so a fill of a whole region reads nothing and writes only that region.
inline void fill_on(CUstream stream, CUdeviceptr p, int count, float value = 0.f) {
  struct {
    int n;
    float value;
    float* data;
  } args{count, value, reinterpret_cast<float*>(p)};
  void* params[] = {&args.n, &args.value, &args.data};
  launch_function(kFillKernel, stream, params, 1);
}

// PyTorch's contiguous float multiply (kMulKernel) of 1024 elements, out = x * y: a known whole
// writer of `out` where its region is those 4096 bytes. `writes`: the fake GPU sees other bytes
// at `out` afterwards.
inline void mul_on(CUstream stream, CUdeviceptr out, CUdeviceptr x, CUdeviceptr y,
                   bool writes = false) {
  struct {
    int n;
    uint8_t functor;
    uint64_t data[3];
  } args{1024, 0, {out, x, y}};
  void* params[] = {&args.n, &args.functor, &args.data};
  launch_function(kMulKernel, stream, params, 1, 1, 1, 1, writes ? out : 0);
}

inline void launch_on(CUstream stream, CUdeviceptr p) {
  struct {
    float* p;
    int n;
    float s;
  } args{reinterpret_cast<float*>(p), 1, 2.f};
  void* params[] = {&args.p, &args.n, &args.s};
  launch_function(reinterpret_cast<CUfunction>(0x1234), stream, params, 3);
}

// The hash launches so far, as "S2 T1 ..." (stream letter, regions in the launch; X: a side
// stream the shim made), the cuMemFreeAsync calls the shim made among them, as "free@T", and
// its event records and waits, as "S+" (an event recorded on S) and "S<" (S waits on one).
inline std::string hash_launches() {
  using lockstep::testing::FakeGpu;
  std::string out;
  for (const auto& launch : FakeGpu::instance().launches()) {
    if (!out.empty()) out += ' ';
    const char stream = launch.stream == kStreamS          ? 'S'
                        : launch.stream == kStreamT        ? 'T'
                        : FakeGpu::made_stream(launch.stream) ? 'X'
                                                              : '?';
    if (launch.event != nullptr) {
      out += stream;
      out += launch.waits ? '<' : '+';
      continue;
    }
    if (launch.freed != 0) {
      out += std::string("free@") + stream;
      continue;
    }
    out += stream;
    out += std::to_string(launch.regions);
  }
  return out;
}

// An async device-to-device copy of 64 bytes inside the merge test allocation, on `stream`.
inline MemoryOp async_copy(CUstream stream) {
  MemoryOp copy;
  copy.api = "cudaMemcpyAsync";
  copy.is_async = true;
  copy.dst = reinterpret_cast<void*>(kMergeBase + 4096);
  copy.src = reinterpret_cast<void*>(kMergeBase + 8192);
  copy.bytes = 64;
  copy.stream = stream;
  return copy;
}

class MergeTest : public RuntimeTest {
 protected:
  const char* merge_mode_ = "1";  // LOCKSTEP_MERGE_HASHES when merging
  const char* side_hashes_ = "0";  // LOCKSTEP_SIDE_HASHES
  // Runs `body` in a child with the fake GPU; returns the hash launch log(s) it wrote. Reused
  // digests are off unless asked for: these tests count what merging alone launches.
  std::string run(const std::function<void(std::string*)>& body, bool merge = true,
                  bool reuse = false, std::string* stderr_text = nullptr,
                  bool skip_unwritten = true, bool carry_freed = false) {
    const fs::path log = dir_.string() + ".log";
    auto environment = env("full");
    environment["LOCKSTEP_MERGE_HASHES"] = merge ? merge_mode_ : "0";
    environment["LOCKSTEP_REUSE_DIGESTS"] = reuse ? "1" : "0";
    environment["LOCKSTEP_SKIP_UNWRITTEN"] = reuse && skip_unwritten ? "1" : "0";
    environment["LOCKSTEP_CARRY_FREED"] = carry_freed ? "1" : "0";
    environment["LOCKSTEP_SIDE_HASHES"] = side_hashes_;
    if (stderr_text != nullptr) environment["LOCKSTEP_DEBUG"] = "1";
    ChildResult child = run_child(
        environment,
        [&] {
          on_alloc(kMergeBase, 1 << 20);
          std::string text;
          body(&text);
          std::ofstream(log) << text;
        },
        &fake_resolver_with_gpu);
    EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0)
        << "status " << child.status << ": " << child.stderr_text;
    if (stderr_text != nullptr) *stderr_text = child.stderr_text;
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fs::remove(log);
    return text;
  }
  // Every kernel record's regions carry the fake GPU's digest of exactly their region
  // (allocation ordinal 1 at kMergeBase, any later one at kSecondBase), but for `unwritten`
  // inputs flagged as not written since their allocation (no value).
  void expect_kernel_fingerprints(size_t kernels, size_t unwritten = 0) {
    auto files = traces();
    ASSERT_EQ(files.size(), 1u);
    auto reader = trace::TraceReader::open(files[0].string());
    size_t seen = 0, flagged = 0;
    reader->for_each_record([&](const trace::Record& r) {
      if (r.kind != trace::RecordKind::Kernel) return true;
      ++seen;
      EXPECT_EQ(r.buffers.size(), 2u);
      for (const auto& b : r.buffers) {
        if (b.flags & trace::kNotWrittenSinceAlloc) {
          EXPECT_EQ(b.role, trace::Role::In);
          EXPECT_FALSE(b.flags & trace::kFingerprintValid);
          ++flagged;
          continue;
        }
        EXPECT_TRUE(b.flags & trace::kFingerprintValid) << "seq " << r.seq;
        EXPECT_NE(b.alloc_ordinal, 0u);
        const CUdeviceptr base = b.alloc_ordinal == 1 ? kMergeBase : kSecondBase;
        EXPECT_EQ(b.fingerprint, (base + b.alloc_offset) ^ b.bytes) << "seq " << r.seq;
      }
      return true;
    });
    EXPECT_EQ(seen, kernels);
    EXPECT_EQ(flagged, unwritten);
  }
  // Each kernel record's entries as `entry` writes them, records in launch order (they are
  // written as their digests arrive, in any order: sorted by seq here).
  using Entries = std::vector<std::vector<std::string>>;
  Entries kernel_entries(const std::function<std::string(const trace::BufferFingerprint&)>& entry) {
    auto files = traces();
    EXPECT_EQ(files.size(), 1u);
    if (files.size() != 1) return {};
    std::map<uint64_t, std::vector<std::string>> by_seq;
    trace::TraceReader::open(files[0].string())->for_each_record([&](const trace::Record& r) {
      if (r.kind != trace::RecordKind::Kernel) return true;
      std::vector<std::string>& entries = by_seq[r.seq];
      for (const auto& buffer : r.buffers) entries.push_back(entry(buffer));
      return true;
    });
    Entries in_order;
    for (auto& [seq, entries] : by_seq) in_order.push_back(std::move(entries));
    return in_order;
  }
};
}  // namespace lockstep::collectors
