// Exact fingerprints on the GPU, checked against the host reference.
//
// Parent (gtest, never touches CUDA): runs this binary again as `--child OUT.json` with
// LD_PRELOAD=<the shim>, LOCKSTEP_LEVEL=full, LOCKSTEP_DIR=<scratch>; then reads the child's
// trace and compares every expected buffer. Child: does the GPU work through the real libraries,
// copies every operand back (independently of the shim), and writes for each call the label,
// byte count and host fingerprint it expects. Exit code 77 = no GPU (the test skips).
#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <nlohmann/json.hpp>

#include "hashing/fingerprint.h"
#include "trace/reader.h"
#include "trace/run_dir.h"
#include "tests/gpu/collectors/shim_child.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// ---- child ---------------------------------------------------------------------------------
struct Expectations {
  json calls = json::array();  // [{kind, name, skip?, buffers: [{label, bytes, fingerprint}]}]
  json metrics = json::array();

  json& call(const std::string& kind, const std::string& name) {
    calls.push_back({{"kind", kind}, {"name", name}, {"buffers", json::array()}});
    return calls.back();
  }
  // Host copy of [ptr, ptr+bytes) on the device, fingerprinted on the host.
  static void expect(json& call, const std::string& label, const void* device, size_t bytes) {
    std::vector<uint8_t> host(bytes);
    if (cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) std::abort();
    call["buffers"].push_back(
        {{"label", label},
         {"bytes", bytes},
         {"fingerprint", lockstep::hashing::fingerprint(host.data(), bytes)}});
  }
};

template <typename T>
T* device_fill(size_t count, const std::vector<T>& host_values) {
  T* p = nullptr;
  cudaMalloc(&p, count * sizeof(T));
  cudaMemcpy(p, host_values.data(), count * sizeof(T), cudaMemcpyHostToDevice);
  return p;
}

template <typename T, typename Make>
std::vector<T> values(size_t count, Make make) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = make(i);
  return v;
}

#define CHECK_OK(expr)                                                 \
  do {                                                                 \
    if ((expr) != 0) {                                                 \
      std::fprintf(stderr, "%s failed at line %d\n", #expr, __LINE__); \
      std::exit(3);                                                    \
    }                                                                  \
  } while (0)

void gemm_ex_fp32(Expectations& ex, cublasHandle_t handle) {
  // transa = T: A stored k x m with lda = k + 3; B stored k x n, ldb = k + 1; C m x n, ldc = m + 2.
  const int m = 64, n = 48, k = 32, lda = k + 3, ldb = k + 1, ldc = m + 2;
  auto* A = device_fill<float>(
      lda * m, values<float>(lda * m, [](size_t i) { return float(i % 13) * 0.25f; }));
  auto* B = device_fill<float>(ldb * n,
                               values<float>(ldb * n, [](size_t i) { return float(i % 7) - 3.f; }));
  auto* C =
      device_fill<float>(ldc * n, values<float>(ldc * n, [](size_t i) { return float(i % 5); }));
  const float alpha = 1.f, beta = 0.5f;
  json& call = ex.call("gemm", "cublasGemmEx");
  Expectations::expect(call, "A", A, sizeof(float) * (lda * (m - 1) + k));
  Expectations::expect(call, "B", B, sizeof(float) * (ldb * (n - 1) + k));
  Expectations::expect(call, "C", C, sizeof(float) * (ldc * (n - 1) + m));
  CHECK_OK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, A, CUDA_R_32F, lda, B,
                        CUDA_R_32F, ldb, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
  cudaDeviceSynchronize();
  Expectations::expect(call, "D", C, sizeof(float) * (ldc * (n - 1) + m));
}

void strided_bf16(Expectations& ex, cublasHandle_t handle) {
  const int m = 32, n = 16, k = 24, batch = 3;
  const long long sa = m * k + 8, sb = k * n, sc = m * n + 4;
  auto* A = device_fill<__nv_bfloat16>(sa * batch, values<__nv_bfloat16>(sa * batch, [](size_t i) {
                                         return __float2bfloat16(float(i % 11) / 8);
                                       }));
  auto* B = device_fill<__nv_bfloat16>(sb * batch, values<__nv_bfloat16>(sb * batch, [](size_t i) {
                                         return __float2bfloat16(float(i % 3));
                                       }));
  auto* C = device_fill<__nv_bfloat16>(
      sc * batch, values<__nv_bfloat16>(sc * batch, [](size_t) { return __float2bfloat16(0.f); }));
  const float alpha = 1.f, beta = 0.f;
  json& call = ex.call("gemm", "cublasGemmStridedBatchedEx");
  Expectations::expect(call, "A", A, 2 * ((batch - 1) * sa + m * k));
  Expectations::expect(call, "B", B, 2 * ((batch - 1) * sb + k * n));
  // beta = 0: cuBLAS does not read C, so C is recorded without a fingerprint (gemm_ex_fp32
  // above has beta = 0.5: there C is an input).
  call["buffers"].push_back({{"label", "C"}, {"unread", true}});
  CHECK_OK(cublasGemmStridedBatchedEx(
      handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A, CUDA_R_16BF, m, sa, B, CUDA_R_16BF, k,
      sb, &beta, C, CUDA_R_16BF, m, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  cudaDeviceSynchronize();
  Expectations::expect(call, "D", C, 2 * ((batch - 1) * sc + m * n));
}

// FP8 e4m3 TN GEMM through cuBLASLt. block = false: tensor-wide scalar scales, D in FP8 with a
// D scale and amax. block = true: A VEC128_32F, B BLK128x128_32F scales, D in bf16.
void lt_fp8(Expectations& ex, cublasLtHandle_t lt, bool block) {
  const int m = 256, n = 256, k = 256;
  const cudaDataType d_type = block ? CUDA_R_16BF : CUDA_R_8F_E4M3;
  const size_t d_bytes = (block ? 2 : 1) * size_t(m) * n;
  auto fp8 = [](size_t i) { return uint8_t(0x30 + i % 16); };  // small positive e4m3 values
  auto* A = device_fill<uint8_t>(k * m, values<uint8_t>(k * m, fp8));
  auto* B = device_fill<uint8_t>(k * n, values<uint8_t>(k * n, fp8));
  auto* C = device_fill<__nv_bfloat16>(
      m * n, values<__nv_bfloat16>(m * n, [](size_t) { return __float2bfloat16(0.f); }));
  void* D = nullptr;
  cudaMalloc(&D, d_bytes);
  cudaMemset(D, 0, d_bytes);
  // Scale buffers with 64 bytes of zeroed slack after the dense size.
  const size_t a_scales = block ? size_t(m) * (k / 128) : 1,
               b_scales = block ? (n / 128) * (k / 128) : 1;
  auto* a_scale = device_fill<float>(a_scales + 16, values<float>(a_scales + 16, [&](size_t i) {
                                       return i < a_scales ? 0.5f + i % 3 : 0.f;
                                     }));
  auto* b_scale = device_fill<float>(b_scales + 16, values<float>(b_scales + 16, [&](size_t i) {
                                       return i < b_scales ? 2.f : 0.f;
                                     }));
  auto* d_scale = device_fill<float>(1, {0.25f});
  auto* amax = device_fill<float>(1, {0.f});

  cublasLtMatmulDesc_t desc;
  CHECK_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale,
                                 sizeof(void*));
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale,
                                 sizeof(void*));
  if (block) {
    const int32_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
                  blk = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec, sizeof(vec));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &blk, sizeof(blk));
  } else {
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &d_scale,
                                   sizeof(void*));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &amax, sizeof(void*));
  }
  cublasLtMatrixLayout_t la, lb, lc, ld;
  cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k);
  cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, m, n, m);
  cublasLtMatrixLayoutCreate(&ld, d_type, m, n, m);
  void* workspace = nullptr;
  const size_t workspace_bytes = 32 << 20;
  cudaMalloc(&workspace, workspace_bytes);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace_bytes, sizeof(workspace_bytes));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  json& call = ex.call("gemm", "cublasLtMatmul");
  if (cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 1, &heuristic, &found) != 0 ||
      found == 0) {
    call["skip"] = "no algorithm for this FP8 configuration";
    ex.calls.erase(ex.calls.size() - 1);  // no cublasLtMatmul call, so no record
    return;
  }
  Expectations::expect(call, "A", A, size_t(k) * m);
  Expectations::expect(call, "B", B, size_t(k) * n);
  call["buffers"].push_back({{"label", "C"}, {"unread", true}});  // beta = 0 below: C not read
  Expectations::expect(call, "A_scale", a_scale, 4 * a_scales);
  call["prefix_ok"] = json::array({"B_scale"});  // BLK128x128: padded extent, see README
  Expectations::expect(call, "B_scale", b_scale, 4 * (b_scales + 16));
  if (!block) Expectations::expect(call, "D_scale", d_scale, 4);
  const float alpha = 1.f, beta = 0.f;
  const cublasStatus_t status =
      cublasLtMatmul(lt, desc, &alpha, A, la, B, lb, &beta, C, lc, D, ld, &heuristic.algo,
                     workspace, workspace_bytes, nullptr);
  cudaDeviceSynchronize();
  if (status != CUBLAS_STATUS_SUCCESS) {
    call["skip"] = "cublasLtMatmul returned " + std::to_string(status);
    return;
  }
  Expectations::expect(call, "D", D, d_bytes);
  if (!block) Expectations::expect(call, "D_amax", amax, 4);
}

void nccl_allreduce(Expectations& ex) {
  ncclComm_t comm;
  int device = 0;
  CHECK_OK(ncclCommInitAll(&comm, 1, &device));
  const size_t count = 1000;
  auto* send =
      device_fill<float>(count, values<float>(count, [](size_t i) { return float(i) * 0.5f; }));
  float* recv = nullptr;
  cudaMalloc(&recv, count * 4);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  json& out_of_place = ex.call("collective", "ncclAllReduce");
  Expectations::expect(out_of_place, "send", send, count * 4);
  CHECK_OK(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream));
  cudaStreamSynchronize(stream);
  Expectations::expect(out_of_place, "recv", recv, count * 4);
  // In place, inside a group: the output fingerprint waits for ncclGroupEnd.
  json& grouped = ex.call("collective", "ncclAllReduce");
  Expectations::expect(grouped, "send", recv, count * 4);
  CHECK_OK(ncclGroupStart());
  CHECK_OK(ncclAllReduce(recv, recv, count, ncclFloat32, ncclSum, comm, stream));
  CHECK_OK(ncclGroupEnd());
  cudaStreamSynchronize(stream);
  Expectations::expect(grouped, "recv", recv, count * 4);
  ncclCommDestroy(comm);
}

// A captured SGEMM (beta = 1, so C changes at every replay), replayed twice: each replay's
// GraphLaunch record must fingerprint C before and after, as the host sees it.
json graph_replays(cublasHandle_t handle) {
  const int n = 64;
  auto* a =
      device_fill<float>(n * n, values<float>(n * n, [](size_t i) { return float(i % 7) - 3; }));
  auto* b =
      device_fill<float>(n * n, values<float>(n * n, [](size_t i) { return float(i % 5) * 0.5f; }));
  auto* c = device_fill<float>(n * n, std::vector<float>(n * n, 0.0f));
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  CHECK_OK(cublasSetStream(handle, stream));
  const float alpha = 1.0f, beta = 1.0f;
  // Once outside capture: cuBLAS sets itself up (workspace) before the capture.
  CHECK_OK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, n, b, n, &beta, c, n));
  cudaStreamSynchronize(stream);
  cudaGraph_t graph = nullptr;
  CHECK_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  CHECK_OK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, n, b, n, &beta, c, n));
  CHECK_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CHECK_OK(cudaGraphInstantiate(&exec, graph, 0));
  json replays = json::array();
  for (int replay = 0; replay < 2; ++replay) {
    json one = {{"c_bytes", n * n * 4}};
    std::vector<uint8_t> host(n * n * 4);
    cudaMemcpy(host.data(), c, host.size(), cudaMemcpyDeviceToHost);
    one["before"] = lockstep::hashing::fingerprint(host.data(), host.size());
    CHECK_OK(cudaGraphLaunch(exec, stream));
    cudaStreamSynchronize(stream);
    cudaMemcpy(host.data(), c, host.size(), cudaMemcpyDeviceToHost);
    one["after"] = lockstep::hashing::fingerprint(host.data(), host.size());
    replays.push_back(one);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  CHECK_OK(cublasSetStream(handle, nullptr));
  return replays;
}

}  // namespace

int lockstep::gpu_tests::fingerprints_child(const char* out_path) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return 77;
  Expectations ex;
  cublasHandle_t handle;
  cublasLtHandle_t lt;
  CHECK_OK(cublasCreate(&handle));
  CHECK_OK(cublasLtCreate(&lt));
  gemm_ex_fp32(ex, handle);
  strided_bf16(ex, handle);
  lt_fp8(ex, lt, false);
  lt_fp8(ex, lt, true);
  nccl_allreduce(ex);
  // A metric: loss.item() is a 4-byte device-to-host copy.
  float loss = 0.f;
  auto* device_loss = device_fill<float>(1, {2.75f});
  cudaMemcpy(&loss, device_loss, 4, cudaMemcpyDeviceToHost);
  ex.metrics.push_back(loss);
  json graphs = graph_replays(handle);  // last: its GEMM records come after the others
  cudaDeviceSynchronize();
  std::ofstream(out_path) << json{
      {"calls", ex.calls},
      {"metrics", ex.metrics},
      {"graphs", graphs}}.dump(1);
  return 0;
}

// ---- parent ----------------------------------------------------------------------------------
namespace {
using lockstep::gpu_tests::run_under_shim;
using lockstep::gpu_tests::shim_path;

TEST(CollectorsGpu, EveryFingerprintMatchesTheHostReference) {
  if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL) == nullptr)
    GTEST_SKIP() << "no libcuda.so.1: " << dlerror();
  const std::string shim = shim_path();
  if (!fs::exists(shim)) GTEST_SKIP() << "no shim at " << shim;
  const fs::path dir =
      fs::temp_directory_path() / ("lockstep-collectors-gpu-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string expected_path = (dir / "expected.json").string();
  const std::string trace_dir = (dir / "trace").string();

  const int status = run_under_shim("--child", expected_path, trace_dir, "full",
                                    {"LOCKSTEP_STEP_ON=api"});
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "no CUDA device";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;

  json expected;
  std::ifstream(expected_path) >> expected;
  auto files = lockstep::trace::list_trace_files(trace_dir);
  ASSERT_EQ(files.size(), 1u);
  auto reader = lockstep::trace::TraceReader::open(files[0].path);
  std::map<lockstep::trace::RecordKind, std::vector<lockstep::trace::Record>> by_kind;
  reader->for_each_record([&](const lockstep::trace::Record& r) {
    by_kind[r.kind].push_back(r);
    return true;
  });
  for (auto& [kind, records] : by_kind)
    std::sort(records.begin(), records.end(), [](auto& a, auto& b) { return a.seq < b.seq; });

  std::map<std::string, size_t> next;
  int compared = 0;
  for (const json& call : expected["calls"]) {
    const std::string kind = call["kind"];
    auto& records = by_kind[kind == "gemm" ? lockstep::trace::RecordKind::Gemm
                                           : lockstep::trace::RecordKind::Collective];
    const size_t index = next[kind]++;
    ASSERT_LT(index, records.size()) << "missing record for " << call["name"];
    const auto& record = records[index];
    EXPECT_EQ(reader->string(record.name), call["name"].get<std::string>());
    if (call.contains("skip")) continue;
    for (const json& want : call["buffers"]) {
      const std::string label = want["label"];
      const lockstep::trace::BufferFingerprint* got = nullptr;
      for (const auto& b : record.buffers)
        if (reader->string(b.label) == label) got = &b;
      ASSERT_NE(got, nullptr) << call["name"] << " has no " << label;
      if (want.contains("unread")) {
        EXPECT_FALSE(got->flags & lockstep::trace::kFingerprintValid)
            << call["name"] << " " << label;
        continue;
      }
      ASSERT_TRUE(got->flags & lockstep::trace::kFingerprintValid) << call["name"] << " " << label;
      const bool prefix_ok = call.contains("prefix_ok") && call["prefix_ok"][0] == label;
      if (!prefix_ok) {
        EXPECT_EQ(got->bytes, want["bytes"].get<uint64_t>()) << call["name"] << " " << label;
        EXPECT_EQ(got->fingerprint, want["fingerprint"].get<uint64_t>())
            << call["name"] << " " << label;
      } else {
        EXPECT_LE(got->bytes, want["bytes"].get<uint64_t>());
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 20);
  // The metric's payload is the value the job read.
  auto& metrics = by_kind[lockstep::trace::RecordKind::Metric];
  ASSERT_FALSE(metrics.empty());
  float value = 0;
  ASSERT_EQ(metrics.back().payload.size(), 4u);
  std::memcpy(&value, metrics.back().payload.data(), 4);
  EXPECT_EQ(value, expected["metrics"][0].get<float>());
  // Graph replays: C before and after each replay among the GraphLaunch record's regions, and
  // the replay's kernel nodes recorded after it.
  auto& launches = by_kind[lockstep::trace::RecordKind::GraphLaunch];
  ASSERT_EQ(launches.size(), expected["graphs"].size());
  for (size_t i = 0; i < launches.size(); ++i) {
    const json& want = expected["graphs"][i];
    auto has = [&](lockstep::trace::Role role, uint64_t fingerprint) {
      for (const auto& b : launches[i].buffers)
        if (b.role == role && (b.flags & lockstep::trace::kFingerprintValid) &&
            b.bytes == want["c_bytes"].get<uint64_t>() && b.fingerprint == fingerprint)
          return true;
      return false;
    };
    EXPECT_TRUE(has(lockstep::trace::Role::In, want["before"].get<uint64_t>())) << "replay " << i;
    EXPECT_TRUE(has(lockstep::trace::Role::Out, want["after"].get<uint64_t>())) << "replay " << i;
    EXPECT_EQ(launches[i].fields[lockstep::trace::fields::GraphLaunch::replay_index], i + 1);
    const uint64_t nodes = launches[i].fields[lockstep::trace::fields::GraphLaunch::node_count];
    EXPECT_GE(nodes, 1u);
    size_t node_records = 0;
    for (const auto& k : by_kind[lockstep::trace::RecordKind::Kernel])
      if (k.seq > launches[i].seq && (i + 1 == launches.size() || k.seq < launches[i + 1].seq) &&
          k.fields[lockstep::trace::fields::Kernel::launch_api] == 8 /* LaunchApi::GraphNode */)
        ++node_records;
    EXPECT_EQ(node_records, nodes) << "replay " << i;
    compared += 2;
  }
  std::printf("compared %d fingerprints\n", compared);
  fs::remove_all(dir);
}

}  // namespace
