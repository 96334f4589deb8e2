// The runtime without a GPU: each scenario runs in a forked child (the Tracer is one per
// process) with its own environment and a fake symbol resolver (cuBLASLt descriptor reads, NCCL
// rank queries; no libcuda, so fingerprints are flagged dropped). The parent reads the trace.
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
#include "collectors/runtime.h"
#include "tests/cpu/collectors/fake_gpu.h"
#include "trace/reader.h"

namespace lockstep::collectors {
namespace {
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

cublasStatus_t fake_get(const FakeAttributes* attrs, int attr, void* buf, size_t size,
                        size_t* written) {
  auto it = attrs->values.find(attr);
  if (it == attrs->values.end() || it->second.size() != size) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, it->second.data(), size);
  *written = size;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t fake_desc_get(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                             void* buf, size_t size, size_t* written) {
  return fake_get(reinterpret_cast<const FakeAttributes*>(desc), attr, buf, size, written);
}
int g_layout_reads = 0;  // calls of the fake cublasLtMatrixLayoutGetAttribute
cublasStatus_t fake_layout_get(cublasLtMatrixLayout_t layout,
                               cublasLtMatrixLayoutAttribute_t attr, void* buf, size_t size,
                               size_t* written) {
  ++g_layout_reads;
  return fake_get(reinterpret_cast<const FakeAttributes*>(layout), attr, buf, size, written);
}
ncclResult_t fake_count(const ncclComm_t, int* n) { *n = 4; return ncclSuccess; }
ncclResult_t fake_user_rank(const ncclComm_t, int* r) { *r = 1; return ncclSuccess; }

void* fake_resolver(const char* name) {
  const std::string n = name;
  if (n == "cublasLtMatmulDescGetAttribute") return reinterpret_cast<void*>(&fake_desc_get);
  if (n == "cublasLtMatrixLayoutGetAttribute") return reinterpret_cast<void*>(&fake_layout_get);
  if (n == "ncclCommCount") return reinterpret_cast<void*>(&fake_count);
  if (n == "ncclCommUserRank") return reinterpret_cast<void*>(&fake_user_rank);
  return nullptr;  // no libcuda in this process
}

// A cuBLASLt call over fake descriptors; C (and its layout) may be 0/null.
LtMatmul fake_lt(FakeAttributes* desc, CUdeviceptr A, FakeAttributes* a, CUdeviceptr B,
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
void lt_call_reading(const LtMatmul& mm, int expected) {
  g_layout_reads = 0;
  lt_matmul_end(lt_matmul_begin(mm), 0);
  if (g_layout_reads != expected) {
    std::fprintf(stderr, "layout reads: %d, expected %d\n", g_layout_reads, expected);
    std::fflush(stderr);  // _Exit does not flush (stderr is a file in the child)
    std::_Exit(9);
  }
}

// cublasGemmEx 16 x 8 x 4 on fp32 operands from `base`.
CublasGemm small_gemm_ex(CUdeviceptr base) {
  CublasGemm gemm;
  gemm.api = "cublasGemmEx";
  gemm.m = 16, gemm.n = 8, gemm.k = 4, gemm.lda = 16, gemm.ldb = 4, gemm.ldc = 16;
  gemm.A = reinterpret_cast<void*>(base), gemm.B = reinterpret_cast<void*>(base + 1024);
  gemm.C = reinterpret_cast<void*>(base + 2048);
  return gemm;
}

FakeAttributes layout(cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
  FakeAttributes l;
  l.set<uint32_t>(CUBLASLT_MATRIX_LAYOUT_TYPE, type);
  l.set<uint64_t>(CUBLASLT_MATRIX_LAYOUT_ROWS, rows);
  l.set<uint64_t>(CUBLASLT_MATRIX_LAYOUT_COLS, cols);
  l.set<int64_t>(CUBLASLT_MATRIX_LAYOUT_LD, ld);
  return l;
}

// A fake driver behind cuGetProcAddress_v2: kernel names and parameter layouts, no context (so
// no hash engine: planned fingerprints are flagged dropped).
CUresult fake_ctx_get_current(CUcontext* ctx) { *ctx = nullptr; return CUDA_SUCCESS; }
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
CUresult fake_func_get_name(const char** name, CUfunction f) {
  *name = f == kTwoPointerKernel     ? "_Z7kernel2PfS_i"
          : f == kThreePointerKernel ? "_Z7kernel3PfS_S_i"
          : f == kFillKernel
              ? "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
          : f == kReduceKernel
              ? "_ZN2at6native13reduce_kernelILi128ELi4ENS0_8ReduceOpIfNS0_6SumOpsEjfLi4ELi4EEEEEvT1_"
          : f == kTensorListKernel
              ? "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi1EEENS1_7FunctorEJEEEvT_T0_DpT1_"
              : "_Z6kernelPfif";
  return CUDA_SUCCESS;
}
CUresult fake_func_get_param_info(CUfunction f, size_t index, size_t* offset, size_t* size) {
  if (f == kReduceKernel || f == kTensorListKernel) {  // one struct: ReduceOp, the table
    if (index >= 1) return CUDA_ERROR_INVALID_VALUE;
    *offset = 0, *size = f == kReduceKernel ? 64 : 3368;
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
             : f == kTwoPointerKernel ? two_offsets : offsets)[index];
  *size = (f == kThreePointerKernel ? three_sizes : f == kTwoPointerKernel ? two_sizes : sizes)[index];
  return CUDA_SUCCESS;
}
// Stream kCapturingStream is capturing (capture 42); every other stream is not.
const CUstream kCapturingStream = reinterpret_cast<CUstream>(0xcafe);
CUresult fake_capture_info(CUstream stream, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph*,
                           const CUgraphNode**, const CUgraphEdgeData**, size_t*) {
  const bool capturing = stream == kCapturingStream;
  *status = capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  *id = capturing ? 42 : 0;
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
NodeArgs g_node_args[6];
void* g_node_params[6][3];
CUresult fake_graph_get_nodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  static const uintptr_t top[] = {1, 2, 3, 5}, child[] = {4};
  const uintptr_t* list = graph == kGraph ? top : graph == kChildGraph ? child : nullptr;
  const size_t n = graph == kGraph ? 4 : graph == kChildGraph ? 1 : 0;
  if (list == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (nodes != nullptr)
    for (size_t i = 0; i < std::min(n, *count); ++i) nodes[i] = reinterpret_cast<CUgraphNode>(list[i]);
  *count = n;
  return CUDA_SUCCESS;
}
CUresult fake_node_get_type(CUgraphNode node, CUgraphNodeType* type) {
  const auto id = reinterpret_cast<uintptr_t>(node);
  *type = id == 2 ? CU_GRAPH_NODE_TYPE_MEMSET : id == 3 ? CU_GRAPH_NODE_TYPE_GRAPH
                                                        : CU_GRAPH_NODE_TYPE_KERNEL;
  return CUDA_SUCCESS;
}
CUresult fake_child_graph(CUgraphNode, CUgraph* graph) {
  *graph = kChildGraph;
  return CUDA_SUCCESS;
}
CUresult fake_kernel_node_params(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* p) {
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
CUresult fake_get_proc_address(const char* symbol, void** pfn, int, cuuint64_t,
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

void* fake_resolver_with_driver(const char* name) {
  if (std::string(name) == "cuGetProcAddress_v2") return reinterpret_cast<void*>(&fake_get_proc_address);
  return fake_resolver(name);
}

// The same driver plus a fake GPU behind the hash engine (fake_gpu.h): fingerprints arrive.
CUresult fake_get_proc_address_gpu(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                   CUdriverProcAddressQueryResult* status) {
  if (void* fn = lockstep::testing::FakeGpu::instance().proc(symbol)) {
    *pfn = fn;
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  return fake_get_proc_address(symbol, pfn, version, flags, status);
}
void* fake_resolver_with_gpu(const char* name) {
  if (std::string(name) == "cuGetProcAddress_v2")
    return reinterpret_cast<void*>(&fake_get_proc_address_gpu);
  return fake_resolver(name);
}

// ---- harness ----------------------------------------------------------------------------------
struct ChildResult {
  int status = -1;
  std::string stderr_text;
};

ChildResult run_child(const std::map<std::string, std::string>& env,
                      const std::function<void()>& body, SymbolResolver resolver = &fake_resolver) {
  const fs::path err = fs::temp_directory_path() / ("lockstep-stderr-" + std::to_string(getpid()));
  pid_t pid = fork();
  if (pid == 0) {
    std::freopen(err.c_str(), "w", stderr);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    set_symbol_resolver(resolver);
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
    return {{"LOCKSTEP_DIR", dir_.string()}, {"LOCKSTEP_LEVEL", level}, {"RANK", "0"},
            {"WORLD_SIZE", "4"}, {"LOCKSTEP_RUN_ID", "test"}};
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
    auto files = traces();
    EXPECT_EQ(files.size(), 1u) << child.stderr_text;
    if (files.size() != 1) return nullptr;
    return trace::TraceReader::open(files[0].string());
  }
  fs::path dir_;
};

const trace::BufferFingerprint* find_buffer(trace::TraceReader& reader, const trace::Record& r,
                                            std::string_view label) {
  for (const auto& b : r.buffers)
    if (reader.string(b.label) == label) return &b;
  return nullptr;
}

// ---- scenarios ----------------------------------------------------------------------------------
// Launch hooks skip building events below broad: launches_traced() follows the level.
TEST_F(RuntimeTest, LaunchesAreTracedFromBroadUp) {
  for (const auto& [level, traced] : std::vector<std::pair<std::string, bool>>{
           {"off", false}, {"metrics", false}, {"broad", true}, {"full", true}, {"bogus", false}}) {
    ChildResult child = run_child(env(level), [] { std::_Exit(launches_traced() ? 10 : 11); });
    ASSERT_TRUE(WIFEXITED(child.status)) << level;
    EXPECT_EQ(WEXITSTATUS(child.status), traced ? 10 : 11) << level << ": " << child.stderr_text;
  }
}

TEST_F(RuntimeTest, CollectivesMetricsStepsAndGemmsReachTheTrace) {
  static float loss_on_host = 1.5f;  // what the D2H copy "wrote"
  ChildResult child = run_child(env("full"), [] {
    const CUdeviceptr base = 0x7f0000000000;
    on_alloc(base, 1 << 20);
    auto* world = reinterpret_cast<ncclComm_t>(0xc0);
    NcclCommCreated created;
    created.api = "ncclCommInitRank";
    created.comm = world;
    created.nranks = 4;
    created.rank = 1;
    nccl_comm_created(created);

    // A grouped all-gather: outputs complete after the outermost group end.
    nccl_group_start();
    NcclCall call;
    call.op = NcclOp::AllGather;
    call.api = "ncclAllGather";
    call.send = reinterpret_cast<void*>(base + 4096);
    call.recv = reinterpret_cast<void*>(base + 8192);
    call.count = 8;
    call.datatype = ncclFloat32;
    call.comm = world;
    uint64_t token = nccl_begin(call);
    EXPECT_NE(token, 0u);
    nccl_end(token, ncclSuccess);
    nccl_group_end(ncclSuccess);

    // loss.item(): a 4-byte synchronous device-to-host copy -> Metric, and (auto) a step.
    MemoryOp copy;
    copy.api = "cudaMemcpy";
    copy.direction = 2;
    copy.src = reinterpret_cast<void*>(base);
    copy.dst = &loss_on_host;
    copy.bytes = 4;
    memory_op_end(memory_op_begin(copy), 0);

    marker_range_push("forward");
    marker_range_push("step");  // the first marker: step 2, metrics stop ending steps
    memory_op_end(memory_op_begin(copy), 0);

    // An FP8 cuBLASLt GEMM with block scales and amax.
    static FakeAttributes desc, a, b, d;
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_32F);
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F);
    desc.set<const void*>(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, reinterpret_cast<void*>(base + 0x10000));
    desc.set<const void*>(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, reinterpret_cast<void*>(base + 0x20000));
    desc.set<const void*>(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, reinterpret_cast<void*>(base + 0x30000));
    a = layout(CUDA_R_8F_E4M3, 512, 256, 512);  // stored K x M (transa = T): M=256, K=512
    b = layout(CUDA_R_8F_E4M3, 512, 384, 512);  // K x N
    d = layout(CUDA_R_16BF, 256, 384, 256);
    LtMatmul mm = fake_lt(&desc, base + 0x40000, &a, base + 0x80000, &b, 0, nullptr,
                          base + 0xc0000, &d);
    mm.workspace_bytes = 1 << 20;
    lt_matmul_end(lt_matmul_begin(mm), 0);

    // A strided-batched bf16 GEMM with C and D in one layout (as PyTorch calls it): the shared
    // layout is read once, and a real (not complex) type's imaginary plane never.
    static FakeAttributes desc2, a2, b2, cd2;
    desc2.set<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_32F);
    desc2.set<int32_t>(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
    auto batched = [](FakeAttributes l, int64_t stride) {
      l.set<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 2);
      l.set<int64_t>(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
      return l;
    };
    a2 = batched(layout(CUDA_R_16BF, 64, 32, 64), 4096);   // M x K
    b2 = batched(layout(CUDA_R_16BF, 32, 16, 32), 1024);   // K x N
    cd2 = batched(layout(CUDA_R_16BF, 64, 16, 64), 2048);  // M x N
    LtMatmul mm2;
    mm2.desc = reinterpret_cast<cublasLtMatmulDesc_t>(&desc2);
    mm2.A = reinterpret_cast<void*>(base + 0x100000);
    mm2.a_layout = reinterpret_cast<cublasLtMatrixLayout_t>(&a2);
    mm2.B = reinterpret_cast<void*>(base + 0x110000);
    mm2.b_layout = reinterpret_cast<cublasLtMatrixLayout_t>(&b2);
    mm2.C = mm2.D = reinterpret_cast<void*>(base + 0x120000);
    mm2.c_layout = mm2.d_layout = reinterpret_cast<cublasLtMatrixLayout_t>(&cd2);
    lt_call_reading(mm2, 3 * 8);  // A, B, C=D: 7 attributes each, + the batch stride

    // cublasGemmEx calling cublasLtMatmul inside: one record.
    uint64_t outer = cublas_gemm_begin(small_gemm_ex(base));
    lt_matmul_end(lt_matmul_begin(mm), 0);
    cublas_gemm_end(outer, 0);

    lockstep_mark("phase");
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->header()["rank"], 0);

  std::vector<trace::Record> records;
  reader->for_each_record([&](const trace::Record& r) {
    records.push_back(r);
    return true;
  });
  std::map<trace::RecordKind, int> kinds;
  for (const auto& r : records) ++kinds[r.kind];
  EXPECT_EQ(kinds[trace::RecordKind::Collective], 1);
  EXPECT_EQ(kinds[trace::RecordKind::Metric], 2);
  EXPECT_EQ(kinds[trace::RecordKind::StepMarker], 3);  // metric, "step", lockstep_mark
  EXPECT_EQ(kinds[trace::RecordKind::Gemm], 3);

  for (const auto& r : records) {
    const std::string name(reader->string(r.name));
    if (r.kind == trace::RecordKind::Collective) {
      using F = trace::fields::Collective;
      EXPECT_EQ(name, "ncclAllGather");
      EXPECT_EQ(r.fields[F::comm_id], 1u);
      EXPECT_EQ(r.fields[F::comm_seq], 1u);
      EXPECT_EQ(r.fields[F::nranks], 4u);
      EXPECT_EQ(r.fields[F::comm_rank], 1u);
      const auto* send = find_buffer(*reader, r, "send");
      const auto* recv = find_buffer(*reader, r, "recv");
      ASSERT_TRUE(send && recv);
      EXPECT_EQ(send->bytes, 32u);
      EXPECT_EQ(recv->bytes, 128u);
      EXPECT_EQ(send->alloc_ordinal, 1u);
      EXPECT_EQ(send->alloc_offset, 4096u);
      EXPECT_EQ(recv->role, trace::Role::Out);
      // No GPU here: both were planned and could not be taken.
      EXPECT_TRUE(send->flags & trace::kFingerprintDropped);
      EXPECT_TRUE(recv->flags & trace::kFingerprintDropped);
      EXPECT_FALSE(recv->flags & trace::kFingerprintValid);
    } else if (r.kind == trace::RecordKind::Metric) {
      ASSERT_EQ(r.payload.size(), 4u);
      float value = 0;
      std::memcpy(&value, r.payload.data(), 4);
      EXPECT_EQ(value, 1.5f);
    } else if (r.kind == trace::RecordKind::Gemm && name == "cublasLtMatmul" &&
               r.fields[trace::fields::Gemm::m] == 64) {
      using F = trace::fields::Gemm;
      EXPECT_EQ(r.fields[F::n], 16u);
      EXPECT_EQ(r.fields[F::k], 32u);
      EXPECT_EQ(r.fields[F::batch], 2u);
      // No A scale pointer: no scale, and its mode is not read.
      EXPECT_EQ(r.fields[F::scale_mode_a], CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
      EXPECT_EQ(find_buffer(*reader, r, "A_scale"), nullptr);
      EXPECT_EQ(find_buffer(*reader, r, "A")->bytes, 2u * (4096 + 64 * 32));
      EXPECT_EQ(find_buffer(*reader, r, "B")->bytes, 2u * (1024 + 32 * 16));
      EXPECT_EQ(find_buffer(*reader, r, "D")->bytes, 2u * (2048 + 64 * 16));
      ASSERT_NE(find_buffer(*reader, r, "C"), nullptr);
      EXPECT_EQ(find_buffer(*reader, r, "C")->bytes, 2u * (2048 + 64 * 16));
    } else if (r.kind == trace::RecordKind::Gemm && name == "cublasLtMatmul") {
      using F = trace::fields::Gemm;
      EXPECT_EQ(r.fields[F::m], 256u);
      EXPECT_EQ(r.fields[F::n], 384u);
      EXPECT_EQ(r.fields[F::k], 512u);
      EXPECT_EQ(r.fields[F::algo], UINT64_MAX);
      EXPECT_EQ(r.fields[F::workspace_bytes], 1u << 20);
      EXPECT_EQ(r.fields[F::scale_mode_a], CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
      EXPECT_EQ(find_buffer(*reader, r, "A")->bytes, 512u * 256);
      EXPECT_EQ(find_buffer(*reader, r, "D")->bytes, 2u * 256 * 384);
      EXPECT_EQ(find_buffer(*reader, r, "A_scale")->bytes, 4u * 256 * 4);   // M x ceil(K/128)
      EXPECT_EQ(find_buffer(*reader, r, "B_scale")->bytes, 4u * (4 * 2 + 4));  // 3 x 4 blocks
      EXPECT_EQ(find_buffer(*reader, r, "D_amax")->bytes, 4u);
      EXPECT_EQ(find_buffer(*reader, r, "D_amax")->role, trace::Role::Out);
      EXPECT_EQ(find_buffer(*reader, r, "C"), nullptr);
    } else if (r.kind == trace::RecordKind::Gemm) {
      EXPECT_EQ(name, "cublasGemmEx");
      EXPECT_EQ(find_buffer(*reader, r, "D")->bytes, 4u * 16 * 8);
    }
  }
  // Steps 0, 1 (ended by the metric and the marker) and 2 (by lockstep_mark) were summarized.
  auto summaries = reader->step_summaries();
  ASSERT_GE(summaries.size(), 3u);
  EXPECT_EQ(summaries[0].step, 0u);
  EXPECT_EQ(summaries[2].step, 2u);
}

// Below full a GEMM is recorded by identity: the same fields as at full (shape, types, trans,
// scale modes), no operand buffers, and only the layout attributes those fields need (type for
// B and C; type, rows, cols and batch count for A and D): each read is a library call.
TEST_F(RuntimeTest, BroadGemmsAreTheirIdentityAndReadOnlyWhatItNeeds) {
  ChildResult child = run_child(env("broad"), [] {
    const CUdeviceptr base = 0x7f0000000000;
    on_alloc(base, 1 << 22);
    static FakeAttributes desc, a, b, c, d;
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_32F);
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
    desc.set<const void*>(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, reinterpret_cast<void*>(base + 0x10000));
    desc.set<const void*>(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, reinterpret_cast<void*>(base + 0x30000));
    a = layout(CUDA_R_8F_E4M3, 512, 256, 512);  // stored K x M (transa = T): M=256, K=512
    a.set<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
    b = layout(CUDA_R_8F_E4M3, 512, 384, 512);
    c = layout(CUDA_R_16BF, 256, 384, 256);
    d = layout(CUDA_R_16BF, 256, 384, 256);
    d.set<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 3);
    const LtMatmul mm = fake_lt(&desc, base + 0x40000, &a, base + 0x80000, &b, base + 0xc0000,
                                &c, base + 0x100000, &d);
    lt_call_reading(mm, 4 + 1 + 1 + 4);  // A shape, B type, C type, D shape
    cublas_gemm_end(cublas_gemm_begin(small_gemm_ex(base)), 0);
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  int gemms = 0;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::Gemm) return true;
    ++gemms;
    using F = trace::fields::Gemm;
    EXPECT_TRUE(r.buffers.empty()) << reader->string(r.name);
    if (reader->string(r.name) == "cublasLtMatmul") {
      EXPECT_EQ(r.fields[F::m], 256u);
      EXPECT_EQ(r.fields[F::n], 384u);
      EXPECT_EQ(r.fields[F::k], 512u);
      EXPECT_EQ(r.fields[F::batch], 3u);
      EXPECT_EQ(r.fields[F::trans_a], uint64_t{CUBLAS_OP_T});
      EXPECT_EQ(r.fields[F::type_a], uint64_t{CUDA_R_8F_E4M3});
      EXPECT_EQ(r.fields[F::type_b], uint64_t{CUDA_R_8F_E4M3});
      EXPECT_EQ(r.fields[F::type_c], uint64_t{CUDA_R_16BF});
      EXPECT_EQ(r.fields[F::type_d], uint64_t{CUDA_R_16BF});
      EXPECT_EQ(r.fields[F::compute_type], uint64_t{CUBLAS_COMPUTE_32F});
      EXPECT_EQ(r.fields[F::scale_mode_a], CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
      EXPECT_EQ(r.fields[F::scale_mode_b], CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
    } else {
      EXPECT_EQ(reader->string(r.name), "cublasGemmEx");
      EXPECT_EQ(r.fields[F::m], 16u);
      EXPECT_EQ(r.fields[F::k], 4u);
    }
    return true;
  });
  EXPECT_EQ(gemms, 2);
}

// A layout whose bytes were seen before is not read again (PyTorch makes new layouts for every
// GEMM, with the same bytes step after step); one with other bytes is. Every 16th hit of an
// entry is read all the same: bytes that match while the attributes do not turn the cache off
// (a Warning record at exit), and from then on every GEMM reads the library.
TEST_F(RuntimeTest, LayoutsSeenBeforeAreKnownByTheirBytesAndCheckedEverySixteenth) {
  ChildResult child = run_child(env("broad"), [] {
    const CUdeviceptr base = 0x7f0000000000;
    on_alloc(base, 1 << 22);
    static FakeAttributes desc, a, b, c, d;
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_32F);
    a = layout(CUDA_R_16BF, 64, 32, 64);
    b = layout(CUDA_R_16BF, 32, 16, 32);
    c = layout(CUDA_R_16BF, 64, 16, 64);
    d = layout(CUDA_R_16BF, 64, 16, 64);
    d.set<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 2);
    const LtMatmul mm = fake_lt(&desc, base + 0x40000, &a, base + 0x80000, &b, base + 0xc0000,
                                &c, base + 0x100000, &d);
    lt_call_reading(mm, 4 + 1 + 1 + 4);  // 1: every layout read
    lt_call_reading(mm, 0);              // 2: all four known by their bytes
    d.set<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 3);  // new bytes: D read again
    lt_call_reading(mm, 4);              // 3 (batch 3)
    // Attributes changed behind equal bytes (what the cache cannot see): the next GEMMs carry
    // the old batch count until D's entry is checked on its 16th hit (GEMM 19), which finds it
    // and turns the cache off. A, B and C are checked on their 16th hit (GEMM 17): unchanged.
    d.values[CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT] = {5, 0, 0, 0};
    for (int gemm = 4; gemm <= 18; ++gemm) lt_call_reading(mm, gemm == 17 ? 4 + 1 + 1 : 0);
    lt_call_reading(mm, 4 + 1);          // 19: D checked and changed; C, after it, read
    lt_call_reading(mm, 4 + 1 + 1 + 4);  // 20: off, everything read
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  std::vector<uint64_t> batches;
  uint64_t mismatches = 0;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::Gemm) batches.push_back(r.fields[trace::fields::Gemm::batch]);
    if (r.kind == trace::RecordKind::Warning &&
        r.fields[trace::fields::Warning::code] == uint64_t(WarningCode::LtCacheMismatch))
      mismatches += r.fields[trace::fields::Warning::count];
    return true;
  });
  std::vector<uint64_t> expected = {2, 2, 3};
  expected.resize(18, 3);  // GEMMs 4-18: D known by its bytes (the stale count)
  expected.push_back(5);   // 19: read again, found changed
  expected.push_back(5);   // 20
  EXPECT_EQ(batches, expected);
  EXPECT_EQ(mismatches, 1u);
}

TEST_F(RuntimeTest, BadSettingGivesOneLineAndNoTrace) {
  ChildResult child = run_child(env("fast"), [] {
    on_alloc(0x1000, 64);
    EXPECT_FALSE(active());
  });
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0);
  EXPECT_EQ(child.stderr_text,
            "lockstep: LOCKSTEP_LEVEL=fast is not one of off|metrics|broad|full; running untraced\n");
  EXPECT_TRUE(traces().empty());
}

TEST_F(RuntimeTest, FailHardStopsTheJob) {
  auto vars = env("fast");
  vars["LOCKSTEP_FAIL_HARD"] = "1";
  ChildResult child = run_child(vars, [] {});
  EXPECT_FALSE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0);
  EXPECT_NE(child.stderr_text.find("LOCKSTEP_LEVEL=fast"), std::string::npos);
}

TEST_F(RuntimeTest, AProcessThatNeverTouchesCudaWritesNothing) {
  ChildResult child = run_child(env("broad"), [] {
    marker_range_push("step");
    lockstep_step();
  });
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0);
  EXPECT_TRUE(traces().empty());
}

TEST_F(RuntimeTest, LevelOffRecordsNothing) {
  ChildResult child = run_child(env("off"), [] {
    on_alloc(0x1000, 64);
    EXPECT_FALSE(active());
  });
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0);
  EXPECT_TRUE(traces().empty());
}

TEST_F(RuntimeTest, MetricsLevelKeepsOnlyMetricsAndSteps) {
  static double grad_norm = 0.25;
  ChildResult child = run_child(env("metrics"), [] {
    on_alloc(0x100000, 4096);
    MemoryOp copy;
    copy.api = "cudaMemcpyAsync";
    copy.src = reinterpret_cast<void*>(0x100010);
    copy.direction = 4;  // cudaMemcpyDefault: inferred from the allocation map
    copy.dst = &grad_norm;
    copy.bytes = 8;
    memory_op_end(memory_op_begin(copy), 0);
    MemoryOp big = copy;
    big.bytes = 4096;  // larger than LOCKSTEP_METRIC_BYTES: not a metric, and not recorded here
    big.dst = std::malloc(4096);
    memory_op_end(memory_op_begin(big), 0);
    NcclCall call;
    call.api = "ncclAllReduce";
    call.comm = reinterpret_cast<ncclComm_t>(0x5);
    EXPECT_EQ(nccl_begin(call), 0u);
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  std::vector<trace::RecordKind> kinds;
  reader->for_each_record([&](const trace::Record& r) {
    kinds.push_back(r.kind);
    if (r.kind == trace::RecordKind::Metric) {
      double value = 0;
      EXPECT_EQ(r.payload.size(), 8u);
      std::memcpy(&value, r.payload.data(), 8);
      EXPECT_EQ(value, 0.25);
    }
    return true;
  });
  EXPECT_EQ(kinds, (std::vector<trace::RecordKind>{trace::RecordKind::Metric,
                                                   trace::RecordKind::StepMarker}));
}

TEST_F(RuntimeTest, ForkedChildNeverWritesTheParentsTrace) {
  ChildResult child = run_child(env("broad"), [] {
    on_alloc(0x1000, 64);
    marker_step("before fork");
    pid_t grandchild = fork();
    if (grandchild == 0) {
      // Tracing is off here; events are ignored and exit writes nothing.
      EXPECT_FALSE(active());
      marker_step("in child");
      on_alloc(0x2000, 64);
      std::exit(0);
    }
    int status = 0;
    waitpid(grandchild, &status, 0);
    marker_step("after fork");
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  reader->verify_all();
  std::vector<std::string> markers;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::StepMarker) markers.emplace_back(reader->string(r.name));
    return true;
  });
  EXPECT_EQ(markers, (std::vector<std::string>{"before fork", "after fork"}));
}


struct KernelArgs {
  float* p;
  int n;
  float s;
};
void launch(KernelArgs args, bool extra_form, LaunchApi api = LaunchApi::DriverLaunch) {
  KernelLaunch l;
  l.api = api;
  l.handle_kind = FunctionHandle::DriverFunction;
  l.handle = reinterpret_cast<const void*>(0x1234);
  l.grid[0] = 7;
  void* params[] = {&args.p, &args.n, &args.s};
  uint8_t buffer[16];
  std::memcpy(buffer, &args.p, 8);
  std::memcpy(buffer + 8, &args.n, 4);
  std::memcpy(buffer + 12, &args.s, 4);
  size_t size = sizeof(buffer);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  if (extra_form) l.extra = extra;
  else l.kernel_params = params;
  kernel_launch_end(kernel_launch_begin(l), CUDA_SUCCESS);
}

// A graph: kernel nodes walked once at instantiation (child graphs included, memsets skipped),
// then every replay is a GraphLaunch with the nodes' regions (each once, graph-owned memory
// never) and one Kernel record per kernel node, in node order.
TEST_F(RuntimeTest, GraphReplaysRecordTheirNodesAndRegions) {
  ChildResult child = run_child(env("full"), [] {
    on_alloc(kGraphBase, 1 << 20);
    on_stream_alloc(kGraphOwned, 4096, kCapturingStream, false);  // a graph memory node's
    const void* exec = reinterpret_cast<const void*>(0x8000);
    graph_instantiated(kGraph, exec);
    const CUstream stream = reinterpret_cast<CUstream>(0x10);
    for (int replay = 0; replay < 2; ++replay)
      graph_launch_end(graph_launch_begin(exec, stream, false), CUDA_SUCCESS);
    graph_launch_end(graph_launch_begin(exec, stream, false), CUDA_ERROR_LAUNCH_FAILED);
    on_free(kGraphBase);  // freed since instantiation: never read again
    graph_launch_end(graph_launch_begin(exec, stream, false), CUDA_SUCCESS);
  }, &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  std::vector<trace::Record> records;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::GraphLaunch || r.kind == trace::RecordKind::Kernel)
      records.push_back(r);
    return true;
  });
  std::sort(records.begin(), records.end(), [](auto& a, auto& b) { return a.seq < b.seq; });
  // Three successful replays (the failed launch records nothing): graph, then its 3 nodes.
  ASSERT_EQ(records.size(), 12u);
  EXPECT_EQ(records[8].kind, trace::RecordKind::GraphLaunch);
  EXPECT_EQ(records[8].fields[trace::fields::GraphLaunch::replay_index], 4u);
  EXPECT_TRUE(records[8].buffers.empty()) << "a freed region was planned";
  using G = trace::fields::GraphLaunch;
  using K = trace::fields::Kernel;
  for (int replay = 0; replay < 2; ++replay) {
    const trace::Record& g = records[replay * 4];
    ASSERT_EQ(g.kind, trace::RecordKind::GraphLaunch);
    EXPECT_EQ(g.fields[G::node_count], 3u);
    EXPECT_EQ(g.fields[G::replay_index], static_cast<uint64_t>(replay + 1));
    // One region (kernels 1 and 5 share it; kernel 4's memory belongs to the graph), before
    // and after: dropped here (no GPU, no hash engine), so planned but without a value.
    ASSERT_EQ(g.buffers.size(), 2u);
    for (const auto& b : g.buffers) {
      EXPECT_EQ(reader->string(b.label), "n0.arg0");
      EXPECT_EQ(b.bytes, (1u << 20) - 256u);
      EXPECT_TRUE(b.flags & trace::kFingerprintDropped);
    }
    EXPECT_EQ(g.buffers[0].role, trace::Role::In);
    EXPECT_EQ(g.buffers[1].role, trace::Role::Out);
    const uint64_t grids[] = {11, 14, 15};  // node order: 1, then the child's 4, then 5
    for (int n = 0; n < 3; ++n) {
      const trace::Record& k = records[replay * 4 + 1 + n];
      ASSERT_EQ(k.kind, trace::RecordKind::Kernel);
      EXPECT_EQ(reader->string(k.name), "kernel(float*, int, float)");
      EXPECT_EQ(k.fields[K::grid_x], grids[n]);
      EXPECT_EQ(k.fields[K::launch_api], static_cast<uint64_t>(LaunchApi::GraphNode));
      EXPECT_TRUE(k.buffers.empty());
    }
  }
}

// At broad a launch is recorded by identity: no argument decoding, no regions.
TEST_F(RuntimeTest, BroadKernelRecordsCarryNoArguments) {
  ChildResult child = run_child(env("broad"), [] {
    const CUdeviceptr base = 0x7f0000000000;
    on_alloc(base, 1 << 20);
    launch({reinterpret_cast<float*>(base + 64), 5, 2.f}, false);
    launch({reinterpret_cast<float*>(base + 64), 6, 2.f}, false);
  }, &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  std::vector<trace::Record> kernels;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::Kernel) kernels.push_back(r);
    return true;
  });
  ASSERT_EQ(kernels.size(), 2u);
  for (const auto& k : kernels) {
    EXPECT_TRUE(k.buffers.empty());
    EXPECT_EQ(k.fields[trace::fields::Kernel::args_digest], 0u);
    EXPECT_EQ(reader->string(k.name), "kernel(float*, int, float)");
  }
}

// At broad a launch of the job's own takes a path of its own (a per-thread record, no call
// stack: kernels.cpp). Its records must be what the general path writes: one per launch however
// the runtime reaches the driver, none for a failed launch, the library's launches attributed to
// it, and a launch after any of these recorded again.
TEST_F(RuntimeTest, BroadLaunchesAreOneRecordEachWhateverTheirNesting) {
  ChildResult child = run_child(env("broad"), [] {
    auto launch_shape = [](unsigned grid, LaunchApi api, CUstream stream) {
      KernelLaunch l;
      l.api = api;
      l.handle_kind = FunctionHandle::DriverFunction;
      l.handle = reinterpret_cast<const void*>(0x1234);
      l.grid[0] = grid, l.grid[1] = 2, l.grid[2] = 3;
      l.block[0] = 128, l.block[1] = 4, l.block[2] = 1;
      l.cluster[0] = 2, l.cluster[1] = 1, l.cluster[2] = 1;
      l.smem_bytes = 4096;
      l.stream = stream;
      return l;
    };
    const auto* stream_b = reinterpret_cast<CUstream>(0xb0b);
    auto once = [&](unsigned grid, int result = CUDA_SUCCESS, CUstream stream = nullptr) {
      kernel_launch_end(kernel_launch_begin(launch_shape(grid, LaunchApi::DriverLaunch, stream)),
                        result);
    };
    once(1);
    // A runtime launch that reaches the driver: one record, the runtime's.
    const uint64_t outer = kernel_launch_begin(launch_shape(2, LaunchApi::RuntimeLaunch, nullptr));
    once(99);
    kernel_launch_end(outer, CUDA_SUCCESS);
    once(98, CUDA_ERROR_INVALID_VALUE);  // failed: no record
    // Inside a cuBLAS call: the GEMM's (no Kernel record, counted).
    CublasGemm gemm;
    gemm.api = "cublasSgemm_v2";
    gemm.m = gemm.n = gemm.k = 2, gemm.lda = gemm.ldb = gemm.ldc = 2;
    const uint64_t g = cublas_gemm_begin(gemm);
    once(97);
    cublas_gemm_end(g, 0);
    // Inside an NCCL group a kernel not named nccl* is the job's (the general path).
    nccl_group_start();
    once(3);
    nccl_group_end(ncclSuccess);
    once(4, CUDA_SUCCESS, const_cast<CUstream>(stream_b));
    once(5);
  }, &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  std::vector<trace::Record> kernels;
  uint64_t nested = 0, last_seq = 0;
  reader->for_each_record([&](const trace::Record& r) {
    EXPECT_GT(r.seq, last_seq);
    last_seq = r.seq;
    if (r.kind == trace::RecordKind::Kernel) kernels.push_back(r);
    if (r.kind == trace::RecordKind::Warning &&
        r.fields[trace::fields::Warning::code] == uint64_t(WarningCode::NestedKernels))
      nested = r.fields[trace::fields::Warning::count];
    return true;
  });
  using F = trace::fields::Kernel;
  std::vector<uint64_t> grids, apis, streams;
  for (const auto& k : kernels) {
    grids.push_back(k.fields[F::grid_x]);
    apis.push_back(k.fields[F::launch_api]);
    streams.push_back(k.stream);
    EXPECT_EQ(reader->string(k.name), "kernel(float*, int, float)");
    EXPECT_TRUE(k.buffers.empty());
    EXPECT_EQ(k.fields[F::grid_y], 2u);
    EXPECT_EQ(k.fields[F::grid_z], 3u);
    EXPECT_EQ(k.fields[F::block_x], 128u);
    EXPECT_EQ(k.fields[F::block_y], 4u);
    EXPECT_EQ(k.fields[F::smem_bytes], 4096u);
    EXPECT_EQ(k.fields[F::cluster_x], 2u);
    EXPECT_EQ(k.fields[F::args_digest], 0u);
    EXPECT_EQ(k.thread, kernels[0].thread);
  }
  EXPECT_EQ(grids, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  const auto driver = uint64_t(LaunchApi::DriverLaunch), runtime = uint64_t(LaunchApi::RuntimeLaunch);
  EXPECT_EQ(apis, (std::vector<uint64_t>{driver, runtime, driver, driver, driver}));
  ASSERT_EQ(streams.size(), 5u);
  EXPECT_NE(streams[3], streams[0]);  // stream_b has an ordinal of its own
  EXPECT_EQ(streams[4], streams[0]);
  EXPECT_EQ(nested, 1u);
}

// Below full a kernel record's capture state is a label only, and the driver's capture query is
// skipped until some capture has begun (no stream can capture before): a launch on a capturing
// stream reads as uncaptured then. At full, where a wrong answer would put hash launches into
// the job's graph, the query always runs.
TEST_F(RuntimeTest, CaptureStateIsQueriedBelowFullOnlyOnceACaptureBegan) {
  for (const char* level : {"broad", "full"}) {
    SCOPED_TRACE(level);
    std::filesystem::remove_all(dir_);
    ChildResult child = run_child(env(level), [] {
      auto launch_captured = [] {
        KernelLaunch l;
        l.api = LaunchApi::DriverLaunch;
        l.handle_kind = FunctionHandle::DriverFunction;
        l.handle = reinterpret_cast<const void*>(0x1234);
        l.stream = kCapturingStream;
        kernel_launch_end(kernel_launch_begin(l), CUDA_SUCCESS);
      };
      launch_captured();
      capture_begins();
      launch_captured();
    }, &fake_resolver_with_driver);
    auto reader = only_trace(child);
    ASSERT_TRUE(reader);
    std::vector<uint64_t> capture_ids;
    reader->for_each_record([&](const trace::Record& r) {
      if (r.kind == trace::RecordKind::Kernel)
        capture_ids.push_back(r.fields[trace::fields::Kernel::capture_id]);
      return true;
    });
    const std::vector<uint64_t> expected =
        std::string(level) == "full" ? std::vector<uint64_t>{42, 42} : std::vector<uint64_t>{0, 42};
    EXPECT_EQ(capture_ids, expected);
  }
}

TEST_F(RuntimeTest, KernelLaunchesNamesArgumentsAndAttribution) {
  auto vars = env("full");
  vars["LOCKSTEP_MAX_REGION"] = "4K";
  ChildResult child = run_child(vars, [] {
    const CUdeviceptr base = 0x7f0000000000;
    on_alloc(base, 1 << 20);
    auto* p = reinterpret_cast<float*>(base + 64);
    launch({p, 5, 2.f}, false);                                         // 1
    launch({reinterpret_cast<float*>(base + 128), 5, 2.f}, false);      // 2: same scalars
    launch({p, 6, 2.f}, false);                                         // 3: other n
    launch({p, 5, 2.f}, true);                                          // 4: extra form
    // A runtime launch that reaches the driver: one record (5).
    KernelLaunch outer;
    outer.api = LaunchApi::RuntimeLaunch;
    outer.handle_kind = FunctionHandle::DriverFunction;
    outer.handle = reinterpret_cast<const void*>(0x1234);
    uint64_t token = kernel_launch_begin(outer);
    launch({p, 5, 2.f}, false);
    kernel_launch_end(token, CUDA_SUCCESS);
    // A kernel inside a cuBLAS call: attributed to the GEMM, no Kernel record.
    CublasGemm gemm;
    gemm.api = "cublasSgemm_v2";
    gemm.m = gemm.n = gemm.k = 2, gemm.lda = gemm.ldb = gemm.ldc = 2;
    uint64_t g = cublas_gemm_begin(gemm);
    launch({p, 5, 2.f}, false);
    cublas_gemm_end(g, 0);
  }, &fake_resolver_with_driver);
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  std::vector<trace::Record> kernels;
  uint64_t nested = 0;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::Kernel) kernels.push_back(r);
    if (r.kind == trace::RecordKind::Warning && r.fields[trace::fields::Warning::code] == 5)
      nested = r.fields[trace::fields::Warning::count];
    return true;
  });
  std::sort(kernels.begin(), kernels.end(), [](auto& a, auto& b) { return a.seq < b.seq; });
  ASSERT_EQ(kernels.size(), 5u);
  EXPECT_EQ(nested, 1u);
  using F = trace::fields::Kernel;
  EXPECT_EQ(reader->string(kernels[0].name), "kernel(float*, int, float)");
  EXPECT_EQ(kernels[0].fields[F::grid_x], 7u);
  EXPECT_EQ(kernels[0].fields[F::args_digest], kernels[1].fields[F::args_digest])
      << "addresses must not enter the digest";
  EXPECT_NE(kernels[0].fields[F::args_digest], kernels[2].fields[F::args_digest]);
  EXPECT_EQ(kernels[0].fields[F::args_digest], kernels[3].fields[F::args_digest])
      << "both launch forms decode alike";
  EXPECT_EQ(kernels[4].fields[F::launch_api], static_cast<uint64_t>(LaunchApi::RuntimeLaunch));
  // arg0 before (In) and after (Out): allocation 1, offset 64, cut at LOCKSTEP_MAX_REGION.
  ASSERT_EQ(kernels[0].buffers.size(), 2u);
  for (const auto& b : kernels[0].buffers) {
    EXPECT_EQ(reader->string(b.label), "arg0");
    EXPECT_EQ(b.alloc_ordinal, 1u);
    EXPECT_EQ(b.alloc_offset, 64u);
    EXPECT_EQ(b.bytes, 4096u);
    EXPECT_TRUE(b.flags & trace::kExtentClamped);
    EXPECT_TRUE(b.flags & trace::kFingerprintDropped);  // no GPU, no engine
  }
  EXPECT_EQ(kernels[0].buffers[0].role, trace::Role::In);
  EXPECT_EQ(kernels[0].buffers[1].role, trace::Role::Out);
  EXPECT_EQ(kernels[1].buffers[0].alloc_offset, 128u);
}

TEST_F(RuntimeTest, KernelFilterKeepsIdentityOnly) {
  auto vars = env("full");
  vars["LOCKSTEP_KERNELS"] = "^gemm";
  ChildResult child = run_child(vars, [] {
    on_alloc(0x7f0000000000, 4096);
    launch({reinterpret_cast<float*>(0x7f0000000000), 1, 1.f}, false);
  }, &fake_resolver_with_driver);
  ASSERT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
  auto reader = trace::TraceReader::open(traces().at(0).string());
  int kernels = 0;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::Kernel) return true;
    ++kernels;
    EXPECT_TRUE(r.buffers.empty());  // not selected: its identity, no arguments
    EXPECT_EQ(r.fields[trace::fields::Kernel::args_digest], 0u);
    return true;
  });
  EXPECT_EQ(kernels, 1);
}

}  // namespace
}  // namespace lockstep::collectors

namespace lockstep::collectors {
namespace {

// ---- merged hash launches (LOCKSTEP_MERGE_HASHES) ------------------------------------------------
const CUstream kStreamS = reinterpret_cast<CUstream>(0x51), kStreamT = reinterpret_cast<CUstream>(0x52);
constexpr CUdeviceptr kMergeBase = 0x7c0000000000;
constexpr CUdeviceptr kSecondBase = kMergeBase + (4 << 20);  // a second allocation (reuse tests)

// A driver launch of fake function `f` on `stream` with these parameters, returned at once.
void launch_function(CUfunction f, CUstream stream, void** params, unsigned grid) {
  KernelLaunch l;
  l.api = LaunchApi::DriverLaunch;
  l.handle_kind = FunctionHandle::DriverFunction;
  l.handle = reinterpret_cast<const void*>(f);
  l.grid[0] = grid;
  l.stream = stream;
  l.kernel_params = params;
  kernel_launch_end(kernel_launch_begin(l), CUDA_SUCCESS);
}

void launch_on(CUstream stream, CUdeviceptr p) {
  struct {
    float* p;
    int n;
    float s;
  } args{reinterpret_cast<float*>(p), 1, 2.f};
  void* params[] = {&args.p, &args.n, &args.s};
  launch_function(reinterpret_cast<CUfunction>(0x1234), stream, params, 3);
}

// The hash launches so far, as "S2 T1 ..." (stream letter, regions in the launch), and the
// cuMemFreeAsync calls the shim made among them, as "free@T".
std::string hash_launches() {
  std::string out;
  for (const auto& launch : lockstep::testing::FakeGpu::instance().launches()) {
    if (!out.empty()) out += ' ';
    const char stream = launch.stream == kStreamS ? 'S' : launch.stream == kStreamT ? 'T' : '?';
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
MemoryOp async_copy(CUstream stream) {
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
  // Runs `body` in a child with the fake GPU; returns the hash launch log(s) it wrote. Reused
  // digests are off unless asked for: these tests count what merging alone launches.
  std::string run(const std::function<void(std::string*)>& body, bool merge = true,
                  bool reuse = false, std::string* stderr_text = nullptr,
                  bool skip_unwritten = true) {
    const fs::path log = dir_.string() + ".log";
    auto environment = env("full");
    environment["LOCKSTEP_MERGE_HASHES"] = merge ? merge_mode_ : "0";
    environment["LOCKSTEP_REUSE_DIGESTS"] = reuse ? "1" : "0";
    environment["LOCKSTEP_SKIP_UNWRITTEN"] = reuse && skip_unwritten ? "1" : "0";
    if (stderr_text != nullptr) environment["LOCKSTEP_DEBUG"] = "1";
    ChildResult child = run_child(environment, [&] {
      on_alloc(kMergeBase, 1 << 20);
      std::string text;
      body(&text);
      std::ofstream(log) << text;
    }, &fake_resolver_with_gpu);
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

// Three kernels on one stream: the first hashes its inputs alone, each later launch carries the
// previous kernel's outputs with its own inputs, and the last outputs wait for an order point.
// A region that is one kernel's output and the next one's input (same pointer, same extent) is
// hashed once in the merged launch, its digest filling both records. (Each region runs to the
// allocation's end: a later pointer's region would lie inside an earlier one's, see
// ARegionInsideAnotherTakesItsDigest; here the later ones start lower.)
TEST_F(MergeTest, OneHashLaunchPerKernelOnAStream) {
  const std::string log = run([](std::string* text) {
    launch_on(kStreamS, kMergeBase + 512);
    launch_on(kStreamS, kMergeBase + 256);  // out 512 + in 256: two regions
    launch_on(kStreamS, kMergeBase + 256);  // out 256 + in 256: one region, two records
    *text = hash_launches() + " |";
    stream_order_point();  // e.g. cuEventRecord: the deferred outputs go first
    *text += " " + hash_launches();
  });
  EXPECT_EQ(log, "S1 S2 S1 | S1 S2 S1 S1");
  expect_kernel_fingerprints(3);
}

TEST_F(MergeTest, AKernelOnAnotherStreamFlushesFirst) {
  const std::string log = run([](std::string* text) {
    launch_on(kStreamS, kMergeBase + 256);
    launch_on(kStreamT, kMergeBase + 256);
    stream_order_point();
    *text = hash_launches();
  });
  EXPECT_EQ(log, "S1 S1 T1 T1");
  expect_kernel_fingerprints(2);
}

// Deferred outputs are hashed before their memory is freed, and before any other traced call.
TEST_F(MergeTest, FreesAndOtherCallsFlushFirst) {
  const std::string log = run([](std::string* text) {
    launch_on(kStreamS, kMergeBase + 256);
    *text = hash_launches() + " |";
    on_free(kMergeBase + (1 << 30));  // not ours, but a free: flushes
    *text += " " + hash_launches() + " |";
    launch_on(kStreamS, kMergeBase + 256);
    marker_step("step");
    *text += " " + hash_launches() + " |";
    launch_on(kStreamS, kMergeBase + 256);
    const void* exec = reinterpret_cast<const void*>(0x9000);  // a graph never instantiated
    graph_launch_end(graph_launch_begin(exec, kStreamS, false), CUDA_SUCCESS);
    *text += " " + hash_launches();
  });
  EXPECT_EQ(log, "S1 | S1 S1 | S1 S1 S1 S1 | S1 S1 S1 S1 S1 S1");
  expect_kernel_fingerprints(3);
}

// PyTorch on cudaMallocAsync frees a tensor right after the op that used it last. A stream-
// ordered free while outputs are deferred is taken over (the job's call succeeds at once) and
// made on its own stream right after the deferred hashes are enqueued: no launch of its own,
// and the memory stays valid until the hashes have read it. With nothing deferred, or with
// merging off, the free goes through at once.
TEST_F(MergeTest, StreamOrderedFreesWaitForTheDeferredHashes) {
  const std::string log = run([](std::string* text) {
    const CUdeviceptr temp = kMergeBase + (1 << 30);
    on_alloc(temp, 4096);
    *text = on_stream_free(temp, kStreamT, false) ? "taken" : "forwarded";  // nothing deferred
    on_alloc(temp, 4096);
    launch_on(kStreamS, kMergeBase + 256);
    *text += on_stream_free(temp, kStreamT, false) ? " taken" : " forwarded";
    *text += " " + hash_launches() + " |";
    launch_on(kStreamS, kMergeBase + 256);  // merged launch, then the free
    *text += " " + hash_launches() + " |";
    on_alloc(temp, 4096);
    *text += on_stream_free(temp, kStreamS, false) ? " taken" : " forwarded";
    stream_order_point();  // flush alone, then the free
    *text += " " + hash_launches();
  });
  EXPECT_EQ(log, "forwarded taken S1 | S1 S1 free@T | taken S1 S1 free@T S1 free@S");
  expect_kernel_fingerprints(2);
  const std::string off = run([](std::string* text) {
    const CUdeviceptr temp = kMergeBase + (1 << 30);
    on_alloc(temp, 4096);
    launch_on(kStreamS, kMergeBase + 256);
    *text = on_stream_free(temp, kStreamT, false) ? "taken" : "forwarded";
  }, /*merge=*/false);
  EXPECT_EQ(off, "forwarded");
}

// GEMMs and async device copies merge like kernels: their inputs ride with the previous
// outputs, their outputs wait for the next launch on their stream. (No cuBLAS here: the GEMM's
// stream is the legacy default stream, '?'.) A synchronous copy hashes its output at once.
TEST_F(MergeTest, GemmsAndAsyncCopiesMergeLikeKernels) {
  const std::string log = run([](std::string* text) {
    launch_on(nullptr, kMergeBase + 256);  // ?1: its input
    CublasGemm gemm;
    gemm.api = "cublasSgemm_v2";
    gemm.m = gemm.n = gemm.k = 2, gemm.lda = gemm.ldb = gemm.ldc = 2;
    gemm.A = reinterpret_cast<void*>(kMergeBase), gemm.B = reinterpret_cast<void*>(kMergeBase + 64);
    gemm.C = reinterpret_cast<void*>(kMergeBase + 128);
    cublas_gemm_end(cublas_gemm_begin(gemm), 0);  // ?4: kernel output + A, B, C
    MemoryOp copy = async_copy(nullptr);
    memory_op_end(memory_op_begin(copy), 0);  // ?1: D (device to device: no input region)
    launch_on(nullptr, kMergeBase + 256);     // ?2: the copy's dst + the kernel's input
    copy.is_async = false;
    copy.api = "cudaMemcpy";
    memory_op_end(memory_op_begin(copy), 0);  // ?1: the kernel's output; ?1: dst at once
    *text = hash_launches();
  });
  EXPECT_EQ(log, "?1 ?4 ?1 ?2 ?1 ?1");
}

// A call on a capturing stream has not run: its outputs are not deferred (a flush after the
// capture ended would hash whatever is there then), and nothing is launched for it.
TEST_F(MergeTest, OutputsOfACapturedCallAreNotDeferred) {
  const std::string log = run([](std::string* text) {
    memory_op_end(memory_op_begin(async_copy(kCapturingStream)), 0);
    launch_on(kStreamS, kMergeBase + 256);  // would flush the copy's dst first, had it waited
    stream_order_point();
    *text = hash_launches();
  });
  EXPECT_EQ(log, "S1 S1");
}

// LOCKSTEP_DEBUG=1 accounts at exit for every hash launch, every deferred set that went out alone
// (by cause) and the shim's own time: what the overhead benchmark reads for the small levels.
// =2 times the parts of each call as well; =1 leaves them untimed (their timing would count).
TEST_F(MergeTest, DebugCountsLaunchesFlushCausesAndSelfTime) {
  for (const char* debug : {"1", "2"}) {
    SCOPED_TRACE(std::string("LOCKSTEP_DEBUG=") + debug);
    auto environment = env("full");
    environment["LOCKSTEP_DEBUG"] = debug;
    environment["LOCKSTEP_REUSE_DIGESTS"] = "0";
    ChildResult child = run_child(environment, [] {
      on_alloc(kMergeBase, 1 << 20);
      for (int i = 0; i < 3; ++i) launch_on(kStreamS, kMergeBase + 256);  // S1 S2 S2
      marker_step("step");                                                  // S1: cause "step"
      launch_on(kStreamT, kMergeBase + 256);                                // T1
      on_free(kMergeBase + (1 << 30));                                      // T1: cause "free"
    }, &fake_resolver_with_gpu);
    ASSERT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
    const std::string& err = child.stderr_text;
    EXPECT_NE(err.find("hash launches: 6 (6 regions"), std::string::npos) << err;
    EXPECT_NE(err.find("; 2 regions hashed once for two records"), std::string::npos) << err;
    EXPECT_NE(err.find("2 carried two kernels' regions, 2 deferred sets enqueued on their own "
                       "(free 1, step 1)"),
              std::string::npos)
        << err;
    // Top level (these calls come straight to the collectors, not through a traced_call). On a
    // loaded machine the one free can take long enough to count as slow (apart).
    EXPECT_TRUE(err.find("free 1 x ") != std::string::npos ||
                err.find("free 0 x 0 ns (+1 slow") != std::string::npos)
        << err;
    // The step marker (its flush of the deferred set, its step end) is the shim's time too.
    // (1 call; a first call may be slow, counted apart: "marker 0 x 0 ns (+1 slow, ...").
    EXPECT_TRUE(err.find("marker 1 x ") != std::string::npos ||
                err.find("marker 0 x 0 ns (+1 slow") != std::string::npos)
        << err;
    // Parts of calls: kernel end ran 4 times (begin: the first is slow, counted apart).
    const bool phases = std::string(debug) == "2";
    EXPECT_EQ(err.find("kernel end 4 x ") != std::string::npos, phases) << err;
    EXPECT_NE(err.find("; timing taken out: "), std::string::npos) << err;
    EXPECT_NE(err.find(" ns per phase (empty reading)"), std::string::npos) << err;
    EXPECT_NE(err.find("shim self time per step: "), std::string::npos) << err;
  }
}

TEST_F(MergeTest, MergingOffHashesOutputsRightAway) {
  const std::string log = run([](std::string* text) {
    for (int i = 0; i < 2; ++i) launch_on(kStreamS, kMergeBase + 256);
    *text = hash_launches();
  }, /*merge=*/false);
  EXPECT_EQ(log, "S1 S1 S1 S1");
  expect_kernel_fingerprints(2);
}

// ---- reused input digests (LOCKSTEP_REUSE_DIGESTS, LOCKSTEP_SKIP_UNWRITTEN) -----------------------
// A kernel's input that an earlier launch hashed, with no write seen since, takes that digest:
// here the third kernel's input p1 is the first kernel's output, hashed in the second launch.
// The third kernel then needs no hash launch (its input known, the deferred out p2 not among
// what it writes): its outputs join the deferred set (chained).
TEST_F(MergeTest, AReusedDigestSavesTheInputsHash) {
  auto body = [](std::string* text) {
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kMergeBase + 256);  // S1: in p1
    launch_on(kStreamS, kSecondBase);       // S2: out p1, in p2
    launch_on(kStreamS, kMergeBase + 256);  // nothing (in p1: the digest of out p1)
    stream_order_point();                   // S2: out p2, out p1
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false), "S1 S2 S2");
  expect_kernel_fingerprints(3);
  EXPECT_NE(err.find("0 inputs not written since their allocation"), std::string::npos) << err;
}

// With LOCKSTEP_SKIP_UNWRITTEN=1 an input in an allocation nothing wrote since it was made is
// not hashed at all (flagged); the remaining tests run so.
TEST_F(MergeTest, AnInputNothingWroteSinceIsNotHashedAgain) {
  auto body = [](std::string* text) {
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kMergeBase + 256);  // in p1: fresh, nothing launched
    launch_on(kStreamS, kSecondBase);       // in p2: fresh, nothing launched (chained)
    launch_on(kStreamS, kMergeBase + 256);  // S2: out p1, out p2 (it writes p1; its in p1 is
                                            // out p1's bytes: hashed once for both)
    stream_order_point();                   // S1: out p1
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err), "S2 S1");
  expect_kernel_fingerprints(3, /*unwritten=*/2);
  EXPECT_NE(err.find("1 regions hashed once for two records; 1 calls chained"), std::string::npos)
      << err;
  EXPECT_NE(err.find("2 inputs not written since their allocation, not hashed"),
            std::string::npos) << err;
  fs::remove_all(dir_);
  EXPECT_EQ(run(body, true, /*reuse=*/false), "S1 S2 S2 S1");
  expect_kernel_fingerprints(3);
}

// Chained sets: a call that needs no hash launch of its own (its inputs are known, unwritten or
// deferred outputs, and it writes none of the deferred regions) launches nothing; the regions
// it reads from the set join it and its outputs follow, so one launch serves several calls.
// Here async memsets write b and c, and async copies read them back to the host: one launch at
// the order point hashes out b and out c, each copy's source being the same bytes (hashed once
// for both records). A call that writes a deferred region sends the set first. With
// LOCKSTEP_MERGE_HASHES=adjacent every call with a deferred set before it launches.
MemoryOp async_set(CUdeviceptr dst) {
  MemoryOp set;
  set.api = "cudaMemsetAsync";
  set.is_set = true;
  set.is_async = true;
  set.set_value = 7;
  set.dst = reinterpret_cast<void*>(dst);
  set.bytes = 4096;
  set.stream = kStreamS;
  return set;
}
MemoryOp async_read_back(CUdeviceptr src) {
  static std::vector<char> host(4096);
  MemoryOp copy;
  copy.api = "cudaMemcpyAsync";
  copy.is_async = true;
  copy.direction = 2;  // device to host
  copy.dst = host.data();
  copy.src = reinterpret_cast<const void*>(src);
  copy.bytes = 4096;
  copy.stream = kStreamS;
  return copy;
}

TEST_F(MergeTest, CallsThatNeedNoHashLaunchChain) {
  const CUdeviceptr b = kSecondBase, c = b + 65536;
  auto body = [&](std::string* text) {
    for (CUdeviceptr p : {b, c}) on_alloc(p, 4096);
    memory_op_end(memory_op_begin(async_set(b)), 0);        // nothing: out b deferred
    memory_op_end(memory_op_begin(async_read_back(b)), 0);  // in b: out b's bytes, nothing
    memory_op_end(memory_op_begin(async_read_back(b)), 0);  // a third record of those bytes
    memory_op_end(memory_op_begin(async_set(c)), 0);        // writes c only: nothing
    memory_op_end(memory_op_begin(async_read_back(c)), 0);  // in c: nothing
    stream_order_point();                                   // S2: out b, out c
    *text = hash_launches() + " |";
    memory_op_end(memory_op_begin(async_set(b)), 0);        // nothing
    memory_op_end(memory_op_begin(async_read_back(b)), 0);  // nothing
    memory_op_end(memory_op_begin(async_set(b)), 0);        // writes b: S1 (out b) first
    stream_order_point();                                   // S1: out b
    *text += " " + hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err), "S2 | S2 S1 S1");
  EXPECT_NE(err.find("; 5 calls chained"), std::string::npos) << err;
  // Out b filled three records (the third waits on the slot), out c two, b again two.
  EXPECT_NE(err.find("; 4 regions hashed once for two records"), std::string::npos) << err;
  // Every region's digest is the fake GPU's digest of it (no writes were simulated): the
  // copies that read from the set got theirs too.
  auto files = traces();
  ASSERT_EQ(files.size(), 1u);
  size_t records = 0, regions = 0;
  trace::TraceReader::open(files[0].string())->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::Memcpy && r.kind != trace::RecordKind::Memset) return true;
    ++records;
    for (const auto& buffer : r.buffers) {
      ++regions;
      EXPECT_TRUE(buffer.flags & trace::kFingerprintValid) << "seq " << r.seq;
      const CUdeviceptr base = buffer.alloc_ordinal == 2 ? b : c;
      EXPECT_EQ(buffer.fingerprint, (base + buffer.alloc_offset) ^ 4096u) << "seq " << r.seq;
    }
    return true;
  });
  EXPECT_EQ(records, 8u);
  EXPECT_EQ(regions, 8u);
  fs::remove_all(dir_);
  merge_mode_ = "adjacent";
  // (The log is cumulative; the second read-back of b waits for the digest in flight.)
  EXPECT_EQ(run(body, true, /*reuse=*/true), "S1 S1 | S1 S1 S1 S1");
}

// A known whole-region writer (PyTorch's fill, kernel_writes.h) that overwrites its region
// entirely takes no input entry: it needs no hash launch of its own and chains; its output is
// hashed with the next launch. A fill of part of its region hashes the input as any kernel.
void fill_on(CUstream stream, CUdeviceptr p, int count, float value = 0.f) {
  struct {
    int n;
    float value;
    float* data;
  } args{count, value, reinterpret_cast<float*>(p)};
  void* params[] = {&args.n, &args.value, &args.data};
  launch_function(kFillKernel, stream, params, 1);
}

TEST_F(MergeTest, AFillOfAWholeRegionTakesNoInputHash) {
  const CUdeviceptr b = kSecondBase, c = b + 65536;
  auto body = [&](std::string* text) {
    for (CUdeviceptr p : {b, c}) on_alloc(p, 4096);
    fill_on(kStreamS, b, 1024);  // all 4096 bytes: no input, nothing launched (out b deferred)
    fill_on(kStreamS, c, 1000);  // 4000 of 4096: S2 = in c + out b
    launch_on(kStreamS, b);      // in b: out b's digest in flight; writes b, not c: nothing
    stream_order_point();        // S2 = out c + out b
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false), "S2 S2");
  // The kernel chains onto out c; the first fill had no set to chain onto (it starts one).
  EXPECT_NE(err.find("; 1 calls chained"), std::string::npos) << err;
  EXPECT_NE(err.find("overwritten whole by known writers (fills), input not hashed: 1 (4096 "
                     "bytes)"), std::string::npos) << err;
  const Entries entries = kernel_entries([](const trace::BufferFingerprint& b) {
    EXPECT_TRUE(b.flags & trace::kFingerprintValid);
    return (b.role == trace::Role::In ? "in " : "out ") + std::to_string(b.bytes);
  });
  EXPECT_EQ(entries, (Entries{{"out 4096"}, {"in 4096", "out 4096"}, {"in 4096", "out 4096"}}));
}

// A fill of the same value and size as an earlier one, whose digest arrived, takes that digest
// for its output without a hash (recalled); a later reader of its region takes it too. (The
// fake GPU's digest of a region is its address ^ its length: the recalled digest is the first
// fill's, which is how the test tells it from a hash.)
bool wait_for_fill_digest(float value, uint64_t bytes) {
  FillKind kind;
  std::memcpy(kind.value.data(), &value, sizeof(value));
  kind.element_bytes = 4;
  kind.bytes = bytes;
  for (int i = 0; i < 5000; ++i) {
    Tracer* tracer = Tracer::existing();
    if (tracer != nullptr && tracer->fill_digests().known(kind)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST_F(MergeTest, ARepeatedFillTakesTheEarlierFillsDigest) {
  const CUdeviceptr b = kSecondBase, c = b + 65536, d = c + 65536;
  auto body = [&](std::string* text) {
    for (CUdeviceptr p : {b, c, d}) on_alloc(p, 4096);
    fill_on(kStreamS, b, 1024);       // the first of its kind: out b deferred
    stream_order_point();             // S1: out b
    if (!wait_for_fill_digest(0.f, 4096)) *text = "no digest ";
    fill_on(kStreamS, c, 1024);       // recalled: nothing hashed, the set stays empty
    fill_on(kStreamS, d, 1024, 1.f);  // another value: out d deferred
    launch_on(kStreamS, c);           // in c: the recalled digest, nothing to hash; chains
    stream_order_point();             // S2: out d + out c
    *text += hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false), "S1 S2");
  EXPECT_NE(err.find("fill outputs recalled, not hashed: 1 (4096 bytes); fills that differed "
                     "from an earlier same fill: 0"), std::string::npos) << err;
  // "in|out <digest> [recalled]" per entry.
  const Entries entries = kernel_entries([](const trace::BufferFingerprint& buffer) {
    EXPECT_TRUE(buffer.flags & trace::kFingerprintValid);
    std::ostringstream entry;
    entry << (buffer.role == trace::Role::In ? "in " : "out ") << std::hex << buffer.fingerprint
          << (buffer.flags & trace::kFingerprintRecalled ? " recalled" : "");
    return entry.str();
  });
  const auto digest = [](CUdeviceptr p) {
    std::ostringstream hex;
    hex << std::hex << (p ^ 4096u);
    return hex.str();
  };
  EXPECT_EQ(entries, (Entries{{"out " + digest(b)},
                              {"out " + digest(b) + " recalled"},
                              {"out " + digest(d)},
                              {"in " + digest(b), "out " + digest(c)}}));
}

// A call with nothing to hash other than a kernel flushes the deferred set, as before recalled
// fills: here a synchronous host-to-host copy (its writes known: host memory).
TEST_F(MergeTest, ACopyWithNothingToHashStillFlushes) {
  auto body = [&](std::string* text) {
    on_alloc(kSecondBase, 4096);
    launch_on(kStreamS, kSecondBase);  // S1: in p2; out p2 deferred
    static char from[64], to[64];
    MemoryOp copy;
    copy.api = "cudaMemcpy";
    copy.direction = 0;  // host to host
    copy.src = from;
    copy.dst = to;
    copy.bytes = sizeof(to);
    memory_op_end(memory_op_begin(copy), 0);  // S1: out p2, flushed
    *text = hash_launches();
  };
  EXPECT_EQ(run(body, true, /*reuse=*/true, nullptr, /*skip_unwritten=*/false), "S1 S1");
}

// Every 16th fill of a kind is hashed all the same. Here the fills alternate between two
// regions of the same size, so the fake GPU's digest of the 16th differs from the first's: it is
// reported (a trace warning) and the kind is hashed from then on.
TEST_F(MergeTest, AVerifyingFillThatDiffersIsReportedAndEndsRecalling) {
  const CUdeviceptr b = kSecondBase, c = b + 65536;
  auto body = [&](std::string* text) {
    for (CUdeviceptr p : {b, c}) on_alloc(p, 4096);
    fill_on(kStreamS, b, 1024);
    stream_order_point();
    if (!wait_for_fill_digest(0.f, 4096)) *text = "no digest ";
    for (int fill = 2; fill <= 16; ++fill) fill_on(kStreamS, fill % 2 ? b : c, 1024);
    stream_order_point();  // fill 16's output (on c)
    for (int i = 0; i < 5000 && Tracer::existing()->fills_differed.load() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int fill = 17; fill <= 20; ++fill) fill_on(kStreamS, fill % 2 ? b : c, 1024);
    stream_order_point();
    *text += hash_launches();
  };
  std::string err;
  // Fills 2-15 recalled; 16 verifies and differs; 17-20 hashed.
  run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false);
  EXPECT_NE(err.find("fill outputs recalled, not hashed: 14 (57344 bytes); fills that differed "
                     "from an earlier same fill: 1"), std::string::npos) << err;
  EXPECT_NE(err.find("a fill wrote other bytes than an earlier fill of the same value and size"),
            std::string::npos) << err;
  auto files = traces();
  ASSERT_EQ(files.size(), 1u);
  size_t recalled = 0, warned = 0;
  trace::TraceReader::open(files[0].string())->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::Warning && r.fields[0] == 7) warned = r.fields[1];
    for (const auto& buffer : r.buffers) recalled += (buffer.flags & trace::kFingerprintRecalled) != 0;
    return true;
  });
  EXPECT_EQ(recalled, 14u);
  EXPECT_EQ(warned, 1u);
}

// A kernel region inside a larger region of the same launch's own pointers, hashed at the same
// point of the stream (k and v views of one qkv tensor inside q's region, each running to the
// allocation's end), takes that region's digest: its entry describes the enclosing region and
// says so. In the same hash launch, or from a digest known from an earlier one (reused
// digests). A kernel whose own pointers hold no such region hashes its region itself.
void launch_qkv(CUdeviceptr qkv) {  // kernel3(q, k, v, n)
  float* words[] = {reinterpret_cast<float*>(qkv), reinterpret_cast<float*>(qkv + 256),
                    reinterpret_cast<float*>(qkv + 512)};
  int n = 1;
  void* params[] = {&words[0], &words[1], &words[2], &n};
  launch_function(kThreePointerKernel, kStreamS, params, 1);
}

TEST_F(MergeTest, ARegionInsideAnotherTakesItsDigest) {
  const CUdeviceptr qkv = kSecondBase;
  auto body = [&](std::string* text) {
    on_alloc(qkv, 4096);
    launch_on(kStreamS, qkv);  // S1: in qkv
    launch_qkv(qkv);       // S1: out qkv = in qkv (one region); in +256, +512 inside it
    stream_order_point();  // S1: out qkv; out +256, +512 inside it
    launch_qkv(qkv);  // in qkv known; in +256, +512 inside it: nothing launched
    launch_on(kStreamS, qkv + 256);  // S2: the qkv kernel's outs (two inside) + in +256 itself
    stream_order_point();            // S1: out +256
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false), "S1 S1 S1 S2 S1");
  EXPECT_NE(err.find("kernel regions inside a larger region of their allocation hashed at the "
                     "same point (its digest taken): 8 (29696 bytes not read)"),
            std::string::npos)
      << err;
  const Entries entries = kernel_entries([&](const trace::BufferFingerprint& b) {
    EXPECT_TRUE(b.flags & trace::kFingerprintValid);
    // The fake GPU's digest of the region the entry describes.
    EXPECT_EQ(b.fingerprint, (qkv + b.alloc_offset) ^ b.bytes);
    std::ostringstream text;
    text << (b.role == trace::Role::In ? "in+" : "out+") << b.alloc_offset << ":" << b.bytes
         << ((b.flags & trace::kDigestOfEnclosing) ? " enclosing" : "");
    return text.str();
  });
  // Both qkv kernels: every entry the whole region's, the inner two flagged. The reader of k
  // alone: its own region.
  const std::vector<std::string> qkv_entries{"in+0:4096", "out+0:4096",
                                             "in+0:4096 enclosing", "out+0:4096 enclosing",
                                             "in+0:4096 enclosing", "out+0:4096 enclosing"};
  EXPECT_EQ(entries, (Entries{{"in+0:4096", "out+0:4096"},
                              qkv_entries,
                              qkv_entries,
                              {"in+256:3840", "out+256:3840"}}));
}

// A multi-tensor-apply launch's address words of tensors none of its blocks works on (stale
// entries of the previous launch) are not pointers of the launch: no entries. A table that does
// not read as PyTorch's (blocks going back) keeps every word.
void tensor_list_on(CUstream stream, std::initializer_list<CUdeviceptr> addresses,
                    std::initializer_list<uint8_t> blocks) {
  std::vector<uint8_t> table(3368, 0);  // addresses[1][110], numel[110], block_to_tensor[320]...
  size_t t = 0;
  for (CUdeviceptr address : addresses) {
    const int64_t numel = 1024;
    std::memcpy(table.data() + 8 * t, &address, 8);
    std::memcpy(table.data() + 880 + 8 * t, &numel, 8);
    ++t;
  }
  std::copy(blocks.begin(), blocks.end(), table.begin() + 1760);
  void* params[] = {table.data()};
  launch_function(kTensorListKernel, stream, params, static_cast<unsigned>(blocks.size()));
}

TEST_F(MergeTest, StaleTensorListWordsAreNotPointersOfTheLaunch) {
  const CUdeviceptr a = kSecondBase, b = a + 65536, c = b + 65536;
  auto body = [&](std::string*) {
    for (CUdeviceptr p : {a, b, c}) on_alloc(p, 4096);
    tensor_list_on(kStreamS, {a, b, c}, {0, 0, 1});  // works on a and b; c is stale
    tensor_list_on(kStreamS, {a, b, c}, {1, 0});     // not PyTorch's: every word
    stream_order_point();
  };
  std::string err;
  run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false);
  EXPECT_NE(err.find("multi-tensor-apply address words of tensors the launch does not work on "
                     "(not pointers of the launch): 1"), std::string::npos) << err;
  // Allocation ordinals: a 2, b 3, c 4 (kMergeBase is 1); an In and an Out entry each.
  const Entries ordinals = kernel_entries(
      [](const trace::BufferFingerprint& b) { return std::to_string(b.alloc_ordinal); });
  EXPECT_EQ(ordinals, (Entries{{"2", "2", "3", "3"}, {"2", "2", "3", "3", "4", "4"}}));
}

// A PyTorch reduction's staging buffer (cta_buf, allocated right before the semaphores) is
// neither hashed before nor after the launch, but noted as written: a later reader of it hashes
// it (it is no longer an allocation nothing wrote). Allocated in another order, it is hashed as
// any region.
void reduce_on(CUstream stream, CUdeviceptr src, CUdeviceptr dst, CUdeviceptr cta,
               CUdeviceptr semaphores) {
  uint64_t op[8] = {src, dst, 0, 0, cta, semaphores, 0, 0};
  void* params[] = {op};
  launch_function(kReduceKernel, stream, params, 4);
}

TEST_F(MergeTest, AReductionsStagingBufferIsNotHashed) {
  const CUdeviceptr src = kSecondBase, dst = src + 65536, cta = dst + 65536, sem = cta + 65536;
  auto body = [&](std::string* text) {
    for (CUdeviceptr p : {src, dst, cta, sem}) on_alloc(p, 4096);  // cta, then sem: consecutive
    reduce_on(kStreamS, src, dst, cta, sem);
    launch_on(kStreamS, cta);  // reads cta: written by the reduction, so hashed
    stream_order_point();
    on_free(cta), on_free(sem);
    for (CUdeviceptr p : {sem, cta}) on_alloc(p, 4096);  // now sem first: not consecutive
    reduce_on(kStreamS, src, dst, cta, sem);
    stream_order_point();
    *text = hash_launches();
  };
  std::string err;
  run(body, true, /*reuse=*/true, &err);
  EXPECT_NE(err.find("kernel scratch buffers not hashed (reduce_kernel's cta_buf): 1 (4096 bytes)"),
            std::string::npos) << err;
  auto files = traces();
  ASSERT_EQ(files.size(), 1u);
  // Per kernel record in launch order (records are written as their digests arrive): its
  // entries' roles and labels, and the labels flagged unwritten.
  std::map<uint64_t, std::pair<std::string, std::vector<std::string>>> by_seq;
  auto reader = trace::TraceReader::open(files[0].string());
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::Kernel) return true;
    auto& [shape, flagged] = by_seq[r.seq];
    for (const auto& buffer : r.buffers) {
      const std::string label(reader->string(buffer.label));
      shape += std::string(shape.empty() ? "" : " ") +
               (buffer.role == trace::Role::In ? "in " : "out ") + label;
      if (buffer.flags & trace::kNotWrittenSinceAlloc) flagged.push_back(label);
    }
    return true;
  });
  std::vector<std::string> labels, unwritten;
  for (const auto& [seq, entry] : by_seq) {
    labels.push_back(entry.first);
    unwritten.insert(unwritten.end(), entry.second.begin(), entry.second.end());
  }
  EXPECT_EQ(labels, (std::vector<std::string>{
                        "in arg0 out arg0 in arg0+8 out arg0+8 in arg0+40 out arg0+40",
                        "in arg0 out arg0",
                        "in arg0 out arg0 in arg0+8 out arg0+8 in arg0+32 out arg0+32 in "
                        "arg0+40 out arg0+40"}));
  // Only what nothing wrote before is flagged: the first reduction's src, dst and semaphores,
  // the second's new staging buffer and semaphores. The kernel's read of the first staging
  // buffer was hashed: the reduction's write of it was noted.
  EXPECT_EQ(unwritten,
            (std::vector<std::string>{"arg0", "arg0+8", "arg0+40", "arg0+32", "arg0+40"}));
}

// On the per-thread default stream a digest in flight serves the thread that hashed it, also
// when a call chains: the second copy reads b, whose digest is still in flight on this thread's
// stream, and joins c's deferred set instead of hashing b again.
TEST_F(MergeTest, PerThreadStreamDigestsInFlightServeChainedCalls) {
  const CUdeviceptr b = kSecondBase, c = b + 65536;
  auto per_thread = [](MemoryOp op) {
    op.stream = nullptr;
    op.per_thread_stream = true;
    return op;
  };
  std::string err;
  const std::string log = run([&](std::string* text) {
    for (CUdeviceptr p : {b, c}) on_alloc(p, 4096);
    lockstep::testing::FakeGpu::instance().hold(true);
    memory_op_end(memory_op_begin(per_thread(async_set(b))), 0);        // out b deferred
    stream_order_point();                                               // ?1: out b, in flight
    memory_op_end(memory_op_begin(per_thread(async_set(c))), 0);        // out c deferred
    memory_op_end(memory_op_begin(per_thread(async_read_back(b))), 0);  // waits: chained
    stream_order_point();                                               // ?1: out c
    *text = hash_launches();
    lockstep::testing::FakeGpu::instance().release();
  }, true, /*reuse=*/true, &err);
  EXPECT_EQ(log, "?1 ?1");
  EXPECT_NE(err.find("input digests reused: 0 arrived, 1 in flight"), std::string::npos) << err;
  EXPECT_NE(err.find("; 1 calls chained"), std::string::npos) << err;
}

// Every write the shim sees takes the reuse away: a copy into the allocation, a graph launch
// (its writes are not known: everything is forgotten), a free and a new allocation there.
TEST_F(MergeTest, WritesFreesAndUnknownWritesForgetDigests) {
  const std::string copied = run([](std::string* text) {
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kMergeBase + 256);                     // fresh: nothing
    launch_on(kStreamS, kSecondBase);                          // fresh: nothing (chained)
    memory_op_end(memory_op_begin(async_copy(kStreamS)), 0);  // S2: out p1, out p2; it
                                                               // writes p1's bytes
    launch_on(kStreamS, kMergeBase + 256);                     // S2: the copy's dst + in p1
    stream_order_point();                                      // S1
    *text = hash_launches();
  }, true, true);
  EXPECT_EQ(copied, "S2 S2 S1");
  expect_kernel_fingerprints(3, 2);
  fs::remove_all(dir_);
  const std::string graph = run([](std::string* text) {
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kMergeBase + 256);  // fresh: nothing
    launch_on(kStreamS, kSecondBase);       // fresh: nothing (chained)
    const void* exec = reinterpret_cast<const void*>(0x9000);
    graph_launch_end(graph_launch_begin(exec, kStreamS, false), CUDA_SUCCESS);  // S2: out p1, p2
    launch_on(kStreamS, kMergeBase + 256);  // S1: in p1, hashed again
    stream_order_point();                   // S1
    *text = hash_launches();
  }, true, true);
  EXPECT_EQ(graph, "S2 S1 S1");
  expect_kernel_fingerprints(3, 2);
  fs::remove_all(dir_);
  const std::string freed = run([](std::string* text) {
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kSecondBase);  // fresh: nothing
    stream_order_point();              // S1: out p2
    on_free(kSecondBase);
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kSecondBase);  // fresh again, not the old digest: nothing
    stream_order_point();              // S1
    *text = hash_launches();
  }, true, true);
  EXPECT_EQ(freed, "S1 S1");
  expect_kernel_fingerprints(2, 2);
}

// Without skipping unwritten inputs (the default): a free forgets the freed memory's digests,
// also when the free was held back behind deferred output hashes (forgotten again once those are
// enqueued); a kernel with no pointer into a known allocation writes what nobody knows.
TEST_F(MergeTest, FreesAndKernelsWithoutKnownPointersForgetDigests) {
  auto run_reuse = [&](const std::function<void(std::string*)>& body) {
    fs::remove_all(dir_);
    return run(body, true, /*reuse=*/true, nullptr, /*skip_unwritten=*/false);
  };
  EXPECT_EQ(run_reuse([](std::string* text) {
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kSecondBase);  // S1: in p2
    stream_order_point();              // S1: out p2
    on_free(kSecondBase);
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kSecondBase);  // S1: in p2, hashed again
    stream_order_point();              // S1
    *text = hash_launches();
  }), "S1 S1 S1 S1");
  expect_kernel_fingerprints(2);
  EXPECT_EQ(run_reuse([](std::string* text) {
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kSecondBase);                // S1: in p2
    *text = on_stream_free(kSecondBase, kStreamS, false) ? "taken" : "forwarded";
    stream_order_point();                            // S1: out p2, then the free
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kSecondBase);                // S1: in p2, hashed again
    stream_order_point();                            // S1
    *text += " " + hash_launches();
  }), "taken S1 S1 free@S S1 S1");
  expect_kernel_fingerprints(2);
  EXPECT_EQ(run_reuse([](std::string* text) {
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kSecondBase);  // S1: in p2
    stream_order_point();              // S1: out p2
    launch_on(kStreamS, 0xdead000);    // no pointer the shim knows: nothing hashed, all forgotten
    launch_on(kStreamS, kSecondBase);  // S1: in p2, hashed again
    stream_order_point();              // S1
    *text = hash_launches();
  }), "S1 S1 S1 S1");
}

// A device-to-host copy of the whole second allocation (its source is an input only).
MemoryOp read_back(CUstream stream, void* host) {
  MemoryOp copy;
  copy.api = "cudaMemcpyAsync";
  copy.is_async = true;
  copy.direction = 2;  // device to host
  copy.dst = host;
  copy.src = reinterpret_cast<const void*>(kSecondBase);
  copy.bytes = 1 << 20;
  copy.stream = stream;
  return copy;
}

// The fake GPU holds its digests: the first copy waits for the digest still in flight on its
// own stream (nothing launched); the copy on another stream hashes the bytes itself. At the
// exit a waiter whose digest never came is flagged dropped, its record still written.
TEST_F(MergeTest, InFlightDigestsServeTheirOwnStreamOnly) {
  auto memcpy_sources = [&]() {
    std::vector<std::pair<uint64_t, uint8_t>> out;  // fingerprint, flags of each Memcpy src
    auto files = traces();
    EXPECT_EQ(files.size(), 1u);
    if (files.empty()) return out;
    auto reader = trace::TraceReader::open(files[0].string());
    reader->for_each_record([&](const trace::Record& r) {
      if (r.kind == trace::RecordKind::Memcpy && !r.buffers.empty())
        out.emplace_back(r.buffers[0].fingerprint, r.buffers[0].flags);
      return true;
    });
    return out;
  };
  std::string err;
  const std::string log = run([](std::string* text) {
    static std::vector<char> host(1 << 20);
    on_alloc(kSecondBase, 1 << 20);
    lockstep::testing::FakeGpu::instance().hold(true);
    launch_on(kStreamS, kSecondBase);  // S1: in p2
    stream_order_point();              // S1: out p2, held in flight
    memory_op_end(memory_op_begin(read_back(kStreamS, host.data())), 0);  // waits: nothing
    memory_op_end(memory_op_begin(read_back(kStreamT, host.data())), 0);  // T1
    *text = hash_launches();
    lockstep::testing::FakeGpu::instance().release();
  }, true, true, &err, /*skip_unwritten=*/false);
  EXPECT_EQ(log, "S1 S1 T1");
  EXPECT_NE(err.find("input digests reused: 0 arrived, 1 in flight"), std::string::npos) << err;
  const uint64_t digest = kSecondBase ^ (1u << 20);
  for (const auto& [fingerprint, flags] : memcpy_sources()) {
    EXPECT_TRUE(flags & trace::kFingerprintValid);
    EXPECT_EQ(fingerprint, digest);
  }
  EXPECT_EQ(memcpy_sources().size(), 2u);

  fs::remove_all(dir_);
  run([](std::string*) {
    static std::vector<char> host(1 << 20);
    on_alloc(kSecondBase, 1 << 20);
    lockstep::testing::FakeGpu::instance().hold(true);
    launch_on(kStreamS, kSecondBase);
    stream_order_point();
    memory_op_end(memory_op_begin(read_back(kStreamS, host.data())), 0);  // never released
  }, true, true, &err, false);
  const auto sources = memcpy_sources();
  ASSERT_EQ(sources.size(), 1u);
  EXPECT_FALSE(sources[0].second & trace::kFingerprintValid);
  EXPECT_TRUE(sources[0].second & trace::kFingerprintDropped);
}

// Once a digest has arrived it serves every stream. (In flight it serves only its own stream:
// region_digests_test.cpp; here the collector may or may not have polled it in time.)
TEST_F(MergeTest, ArrivedDigestsServeEveryStream) {
  const std::string log = run([](std::string* text) {
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kSecondBase);  // fresh: nothing
    stream_order_point();              // S1: out p2
    launch_on(kStreamT, kSecondBase);  // T1 unless the digest had arrived (the collector polls)
    stream_order_point();              // T1
    *text = hash_launches() + " |";
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the collector polls each ms
    launch_on(kStreamS, kSecondBase);  // arrived: reused from T's digest, nothing launched
    stream_order_point();              // S1
    *text += " " + hash_launches();
  }, true, true);
  const std::string after = log.substr(log.find('|'));
  EXPECT_EQ(after, "| " + log.substr(0, log.find(" |")) + " S1") << log;
  expect_kernel_fingerprints(3, 1);
}

// ---- learned read-only pointers (LOCKSTEP_LEARN_READONLY) -------------------------------------
// Launches `f` on stream S with pointer arguments `pointers` (then an int); the fake GPU sees
// other bytes from then on at each pointer in `written` (the kernel's writes).
void launch_writing(CUfunction f, std::initializer_list<CUdeviceptr> pointers,
                    std::initializer_list<CUdeviceptr> written) {
  std::vector<float*> words;
  for (CUdeviceptr p : pointers) words.push_back(reinterpret_cast<float*>(p));
  int n = 1;
  std::vector<void*> params;
  for (float*& word : words) params.push_back(&word);
  params.push_back(&n);
  KernelLaunch l;
  l.api = LaunchApi::DriverLaunch;
  l.handle_kind = FunctionHandle::DriverFunction;
  l.handle = f;
  l.stream = kStreamS;
  l.kernel_params = params.data();
  const uint64_t token = kernel_launch_begin(l);
  for (CUdeviceptr p : written) lockstep::testing::FakeGpu::instance().write(p);
  kernel_launch_end(token, CUDA_SUCCESS);
}

// kernel2(out, in): writes `out` and, when `writes_in`, `in` too; or neither when `writes` is
// false.
void launch_pair(CUdeviceptr out, CUdeviceptr in, bool writes = true, bool writes_in = false) {
  if (!writes) launch_writing(kTwoPointerKernel, {out, in}, {});
  else if (writes_in) launch_writing(kTwoPointerKernel, {out, in}, {out, in});
  else launch_writing(kTwoPointerKernel, {out, in}, {out});
}

// kernel3(a, b, c) writing b and c.
void launch_three(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) {
  launch_writing(kThreePointerKernel, {a, b, c}, {b, c});
}

// kernel2 learns that it does not write `in`: eight launches over two steps.
void teach_pair(CUdeviceptr out, CUdeviceptr in) {
  for (int i = 0; i < 7; ++i) launch_pair(out, in);
  lockstep_step();
  launch_pair(out, in);
}

// The collector learns from completed records: waits (bounded) until `n` pointers are learned.
bool wait_learned(uint64_t n) {
  stream_order_point();  // the last outputs go out
  for (int i = 0; i < 2000; ++i) {
    if (Tracer::existing()->roles_learned.load() >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

class LearnTest : public MergeTest {
 protected:
  std::string run_learning(const std::function<void(std::string*)>& body, bool learn = true) {
    fs::remove_all(dir_);
    auto environment = env("full");
    environment["LOCKSTEP_LEARN_READONLY"] = learn ? "1" : "0";
    environment["LOCKSTEP_DEBUG"] = "1";
    const fs::path log = dir_.string() + ".log";
    ChildResult child = run_child(environment, [&] {
      on_alloc(kMergeBase, 1 << 20);
      on_alloc(kSecondBase, 1 << 20);
      std::string text;
      body(&text);
      std::ofstream(log) << text;
    }, &fake_resolver_with_gpu);
    EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fs::remove(log);
    return text + "\n" + child.stderr_text;
  }
  // Per kernel record: "o" when `in` (arg1) got an output entry, "r" when its input is flagged
  // learned read-only (and has no output entry); every present region carries a digest.
  std::string arg1_outputs(uint64_t* warnings = nullptr) {
    auto files = traces();
    EXPECT_EQ(files.size(), 1u);
    if (files.size() != 1) return "";
    auto reader = trace::TraceReader::open(files[0].string());
    std::map<uint64_t, char> by_seq;  // appended as their digests arrive: ordered by seq here
    reader->for_each_record([&](const trace::Record& r) {
      if (r.kind == trace::RecordKind::Warning && warnings != nullptr &&
          r.fields[trace::fields::Warning::code] == uint64_t(WarningCode::ReadOnlyWritten))
        *warnings += r.fields[trace::fields::Warning::count];
      if (r.kind != trace::RecordKind::Kernel) return true;
      bool output = false, read_only = false;
      for (const auto& b : r.buffers) {
        EXPECT_TRUE(b.flags & trace::kFingerprintValid) << "seq " << r.seq;
        if (b.alloc_ordinal != 2) continue;  // arg1 lives in the second allocation
        if (b.role == trace::Role::Out) output = true;
        if (b.role == trace::Role::In && (b.flags & trace::kLearnedReadOnly)) read_only = true;
      }
      EXPECT_NE(output, read_only) << "seq " << r.seq;
      by_seq[r.seq] = output ? 'o' : 'r';
      return true;
    });
    std::string out;
    for (const auto& [seq, c] : by_seq) out += c;
    return out;
  }
};

// Eight launches over two steps that wrote `out` and left `in` alone teach that kernel2 does not
// write `in`: the next launches hash it before the kernel only (its digest reused, not read
// again), until the 16th launch of the kernel, which hashes every region again.
TEST_F(LearnTest, AnUnwrittenPointerIsLearnedReadOnlyAndVerified) {
  auto body = [](std::string* text) {
    teach_pair(kMergeBase + 256, kSecondBase);
    *text = wait_learned(1) ? "learned" : "not learned";
    for (int i = 8; i < 18; ++i) launch_pair(kMergeBase + 256, kSecondBase);
  };
  const std::string text = run_learning(body);
  EXPECT_EQ(text.substr(0, text.find('\n')), "learned") << text;
  EXPECT_EQ(arg1_outputs(), "oooooooo" "rrrrrrr" "o" "rr");
  EXPECT_NE(text.find("kernel pointers learned read-only: 1 (found written later: 0); 9 "
                      "outputs not hashed"), std::string::npos) << text;
  // Each output skipped is one region fewer to hash: its input digest stays reusable.
  auto regions = [](const std::string& t) {
    const size_t at = t.find("hash launches: ");
    const size_t open = t.find('(', at);
    return at == std::string::npos ? -1L : std::stol(t.substr(open + 1));
  };
  const long learned = regions(text);
  const std::string off = run_learning([](std::string*) {
    teach_pair(kMergeBase + 256, kSecondBase);
    for (int i = 8; i < 18; ++i) launch_pair(kMergeBase + 256, kSecondBase);
  }, /*learn=*/false);
  EXPECT_EQ(arg1_outputs(), std::string(18, 'o'));
  EXPECT_EQ(learned + 9, regions(off)) << text << off;
}

// A learned word found written in a verification launch is unlearned for good and reported.
TEST_F(LearnTest, AVerificationLaunchThatFindsAWriteUnlearns) {
  const std::string text = run_learning([](std::string* text) {
    teach_pair(kMergeBase + 256, kSecondBase);
    *text = wait_learned(1) ? "learned" : "not learned";
    for (int i = 8; i < 15; ++i) launch_pair(kMergeBase + 256, kSecondBase);
    launch_pair(kMergeBase + 256, kSecondBase, true, /*writes_in=*/true);  // the 16th
    stream_order_point();
    for (int i = 0; i < 2000 && Tracer::existing()->roles_contradicted.load() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int i = 16; i < 20; ++i) launch_pair(kMergeBase + 256, kSecondBase);
  });
  EXPECT_EQ(text.substr(0, text.find('\n')), "learned") << text;
  uint64_t warnings = 0;
  EXPECT_EQ(arg1_outputs(&warnings), "oooooooo" "rrrrrrr" "o" "oooo");
  EXPECT_EQ(warnings, 1u);
  EXPECT_NE(text.find("pointer learned read-only was written: kernel kernel2(float*, float*, "
                      "int), parameter byte 8"), std::string::npos) << text;
}

// A pointer passed in two words is one region, skipped only when every word passing it is learned
// read-only: kernel3 learns that it does not write through its first word, and then writes the
// same pointer through its second.
TEST_F(LearnTest, APointerPassedTwiceIsSkippedOnlyWhenEveryWordIsReadOnly) {
  const std::string text = run_learning([](std::string* text) {
    for (int i = 0; i < 7; ++i) launch_three(kSecondBase, kMergeBase + 256, kMergeBase + 8192);
    lockstep_step();
    launch_three(kSecondBase, kMergeBase + 256, kMergeBase + 8192);
    *text = wait_learned(1) ? "learned" : "not learned";
    launch_three(kSecondBase, kMergeBase + 256, kMergeBase + 8192);  // a: read-only
    launch_three(kSecondBase, kSecondBase, kMergeBase + 8192);       // a passed as b: written
  });
  EXPECT_EQ(text.substr(0, text.find('\n')), "learned") << text;
  EXPECT_EQ(arg1_outputs(), "oooooooo" "r" "o");
}

// Nothing is learned from launches that changed no region (a kernel whose writes the shim does
// not see, or that wrote what was there), nor within one step, nor with LOCKSTEP_LEARN_READONLY=0.
TEST_F(LearnTest, NoLearningWithoutEvidenceInOneStepOrWhenOff) {
  run_learning([](std::string*) {
    launch_pair(kMergeBase + 256, kSecondBase);  // `out` is written: never read-only
    for (int i = 0; i < 10; ++i) launch_pair(kMergeBase + 256, kSecondBase, /*writes=*/false);
    lockstep_step();
    for (int i = 0; i < 10; ++i) launch_pair(kMergeBase + 256, kSecondBase, /*writes=*/false);
    stream_order_point();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int i = 0; i < 5; ++i) launch_pair(kMergeBase + 256, kSecondBase, /*writes=*/false);
  });
  EXPECT_EQ(arg1_outputs(), std::string(26, 'o'));
  run_learning([](std::string*) {
    for (int i = 0; i < 10; ++i) launch_pair(kMergeBase + 256, kSecondBase);
    stream_order_point();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int i = 0; i < 10; ++i) launch_pair(kMergeBase + 256, kSecondBase);
  });
  EXPECT_EQ(arg1_outputs(), std::string(20, 'o'));
  const std::string text = run_learning([](std::string* text) {
    teach_pair(kMergeBase + 256, kSecondBase);
    stream_order_point();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int i = 8; i < 20; ++i) launch_pair(kMergeBase + 256, kSecondBase);
    *text = "done";
  }, /*learn=*/false);
  EXPECT_EQ(arg1_outputs(), std::string(20, 'o'));
  EXPECT_EQ(text.find("kernel pointers learned read-only"), std::string::npos) << text;
}

}  // namespace
}  // namespace lockstep::collectors
