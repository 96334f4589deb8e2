// lockstep_example_cuda: a framework-free CUDA "training" job for lockstep's end-to-end tests.
// Each step: input init, GELU, a sum-of-squares reduction, RMS normalisation to bf16, a cuBLAS
// bf16 GEMM, FP8 quantisation, a cuBLASLt FP8 e4m3 GEMM with per-tensor scales and amax
// (optionally a block-scaled one), an NCCL all-reduce on a one-rank communicator, an SGD-like
// weight update and one small device-to-host copy of the step's numbers (the "loss").
// stdout carries only those numbers, so two runs can be compared byte for byte.
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "check.h"
#include "fp8_gemm.h"
#include "kernels.cuh"
#include "options.h"

namespace {

constexpr int kTokens = 256;    // M: rows of the activations
constexpr int kHidden = 512;    // K: contraction dimension (a multiple of 128 for block scales)
constexpr int kFeatures = 256;  // N: output features
constexpr size_t kWorkspaceBytes = 32u << 20;
constexpr float kActivationQuant = 16.0f;  // fp8 = bf16 activation * this
constexpr float kWeightQuant = 8192.0f;    // fp8 = weight * this
constexpr float kOutputQuant = 64.0f;      // D_SCALE: fp8 D = D * this
constexpr float kLearningRate = 1e-3f;
// Per-tensor scales {A_scale, B_scale, D_scale}, each at its own 16-byte aligned slot.
constexpr int kScaleSlot = 4;
constexpr int kScaleFloats = 3 * kScaleSlot;

template <typename T>
T* device_alloc(size_t count) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
  return p;
}

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// Step markers: lockstep_step() when the shim is preloaded, nothing otherwise.
using StepMarker = void (*)();
StepMarker find_step_marker() {
  return reinterpret_cast<StepMarker>(dlsym(RTLD_DEFAULT, "lockstep_step"));
}

struct Buffers {
  float* x = device_alloc<float>(kTokens * kHidden);
  float* h = device_alloc<float>(kTokens * kHidden);
  float* partials = device_alloc<float>(kPartialBlocks);
  float* sumsq = device_alloc<float>(1);
  __nv_bfloat16* a_bf16 = device_alloc<__nv_bfloat16>(kTokens * kHidden);
  float* w = device_alloc<float>(kHidden * kFeatures);
  __nv_bfloat16* w_bf16 = device_alloc<__nv_bfloat16>(kHidden * kFeatures);
  float* c = device_alloc<float>(kTokens * kFeatures);
  __nv_fp8_e4m3* a8 = device_alloc<__nv_fp8_e4m3>(kTokens * kHidden);
  __nv_fp8_e4m3* w8 = device_alloc<__nv_fp8_e4m3>(kFeatures * kHidden);
  float* scales_device = device_alloc<float>(kScaleFloats);
  float* amax = device_alloc<float>(1);
  __nv_bfloat16* c_bf16 = device_alloc<__nv_bfloat16>(kTokens * kFeatures);  // C, beta = 0
  __nv_fp8_e4m3* d8 = device_alloc<__nv_fp8_e4m3>(kTokens * kFeatures);
  float* d = device_alloc<float>(kTokens * kFeatures);
  float* block_scale_a = device_alloc<float>(block_scale_floats(kFeatures, kHidden));
  float* block_scale_b = device_alloc<float>(block_scale_floats(kTokens, kHidden));
  __nv_bfloat16* d_block = device_alloc<__nv_bfloat16>(kTokens * kFeatures);
  float* g = device_alloc<float>(kTokens * kFeatures);
  float* g_sum = device_alloc<float>(kTokens * kFeatures);
  float* colsum = device_alloc<float>(kFeatures);
  float* stats = device_alloc<float>(kStatsCount);
  void* workspace = device_alloc<char>(kWorkspaceBytes);
};

// --probe-atomic: how often does the planted reduction give a different answer?
int probe_atomic(const Options& opt, Buffers& buf, cudaStream_t stream) {
  const int n = kTokens * kHidden;
  init_input<<<blocks_for(n), kThreads, 0, stream>>>(buf.x, n, opt.seed, 1);
  gelu_forward<<<blocks_for(n), kThreads, 0, stream>>>(buf.x, buf.h, n);
  CUDA_CHECK_LAUNCH();
  std::set<uint32_t> distinct;
  float first = 0.0f;
  for (int i = 0; i < opt.probe_atomic; ++i) {
    CUDA_CHECK(cudaMemsetAsync(buf.sumsq, 0, sizeof(float), stream));
    planted_atomic_sum_squares<<<blocks_for(n), kThreads, 0, stream>>>(buf.h, n, buf.sumsq);
    CUDA_CHECK_LAUNCH();
    float value = 0.0f;
    CUDA_CHECK(cudaMemcpyAsync(&value, buf.sumsq, sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (i == 0) first = value;
    distinct.insert(float_bits(value));
  }
  std::printf("probe-atomic: %zu distinct results of %d runs (first %.9g)\n", distinct.size(),
              opt.probe_atomic, first);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);
  const StepMarker step_marker = find_step_marker();

  CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::fprintf(stderr,
               "lockstep_example_cuda: %s (sm_%d%d), steps %d, plant %s at step %d, "
               "scales %s, markers %s\n",
               prop.name, prop.major, prop.minor, opt.steps, plant_name(opt.plant), opt.plant_step,
               opt.scales_mapped ? "mapped" : "copy", step_marker ? "lockstep_step()" : "none");

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Buffers buf;
  if (opt.probe_atomic > 0) return probe_atomic(opt, buf, stream);

  cublasHandle_t blas;
  CUBLAS_CHECK(cublasCreate(&blas));
  CUBLAS_CHECK(cublasSetStream(blas, stream));
  cublasLtHandle_t lt;
  CUBLAS_CHECK(cublasLtCreate(&lt));
  ncclComm_t comm;
  int devices[1] = {0};
  NCCL_CHECK(ncclCommInitAll(&comm, 1, devices));

  // Per-tensor scales: the host writes scales_host each step; the GEMM reads `scales` (the same
  // pinned memory when mapped, else a device copy).
  float* scales_host = nullptr;
  float* scales = buf.scales_device;
  CUDA_CHECK(cudaHostAlloc(&scales_host, kScaleFloats * sizeof(float),
                           opt.scales_mapped ? cudaHostAllocMapped : cudaHostAllocDefault));
  if (opt.scales_mapped) CUDA_CHECK(cudaHostGetDevicePointer(&scales, scales_host, 0));

  // Lt's A is the weight matrix stored N x K (k x m column-major, transposed: TN), B the
  // activations stored M x K (k x n column-major); D is M x N row-major (m x n column-major).
  Fp8Gemm fp8;
  std::string why;
  if (!make_fp8_tensorwise(lt, kFeatures, kTokens, kHidden, scales, scales + kScaleSlot,
                           scales + 2 * kScaleSlot, buf.amax, kWorkspaceBytes, &fp8, &why)) {
    std::fprintf(stderr, "lockstep_example_cuda: FP8 e4m3 GEMM unavailable: %s (needs sm_89+)\n",
                 why.c_str());
    return 1;
  }
  Fp8Gemm fp8_block;
  bool block_scaled = false;
  if (opt.block_scaled) {
    block_scaled = make_fp8_block_scaled(lt, kFeatures, kTokens, kHidden, buf.block_scale_a,
                                         buf.block_scale_b, kWorkspaceBytes, &fp8_block, &why);
    if (block_scaled)
      std::fprintf(stderr, "lockstep_example_cuda: block-scaled FP8 GEMM: %s\n",
                   fp8_block.scale_modes.c_str());
    else
      std::fprintf(stderr, "lockstep_example_cuda: block-scaled FP8 GEMM skipped: %s\n",
                   why.c_str());
  }

  const int n_in = kTokens * kHidden, n_w = kHidden * kFeatures, n_out = kTokens * kFeatures;
  init_weights<<<blocks_for(n_w), kThreads, 0, stream>>>(buf.w, n_w, opt.seed);
  const int n_bsa = static_cast<int>(block_scale_floats(kFeatures, kHidden));
  const int n_bsb = static_cast<int>(block_scale_floats(kTokens, kHidden));
  fill<<<blocks_for(n_bsa), kThreads, 0, stream>>>(buf.block_scale_a, n_bsa, 1.0f / kWeightQuant);
  fill<<<blocks_for(n_bsb), kThreads, 0, stream>>>(buf.block_scale_b, n_bsb,
                                                   1.0f / kActivationQuant);
  CUDA_CHECK_LAUNCH();

  float* stats_host = nullptr;
  CUDA_CHECK(cudaMallocHost(&stats_host, kStatsCount * sizeof(float)));

  for (int step = 1; step <= opt.steps; ++step) {
    if (step_marker) step_marker();
    const bool planted_here = step == opt.plant_step;

    init_input<<<blocks_for(n_in), kThreads, 0, stream>>>(buf.x, n_in, opt.seed, step);
    gelu_forward<<<blocks_for(n_in), kThreads, 0, stream>>>(buf.x, buf.h, n_in);
    if (opt.plant == Plant::Atomic && planted_here) {
      CUDA_CHECK(cudaMemsetAsync(buf.sumsq, 0, sizeof(float), stream));
      planted_atomic_sum_squares<<<blocks_for(n_in), kThreads, 0, stream>>>(buf.h, n_in, buf.sumsq);
    } else {
      sum_squares_partial<<<kPartialBlocks, kThreads, 0, stream>>>(buf.h, n_in, buf.partials);
      sum_partials<<<1, kThreads, 0, stream>>>(buf.partials, kPartialBlocks, buf.sumsq);
    }
    rms_normalize_bf16<<<blocks_for(n_in), kThreads, 0, stream>>>(buf.h, buf.sumsq, n_in,
                                                                  buf.a_bf16);
    cast_bf16<<<blocks_for(n_w), kThreads, 0, stream>>>(buf.w, n_w, buf.w_bf16);
    CUDA_CHECK_LAUNCH();

    // C (M x N row-major) = A (M x K) x W (K x N): column-major C^T = W^T A^T.
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, kFeatures, kTokens, kHidden, &one,
                              buf.w_bf16, CUDA_R_16BF, kFeatures, buf.a_bf16, CUDA_R_16BF, kHidden,
                              &zero, buf.c, CUDA_R_32F, kFeatures, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));

    quantize_fp8<<<blocks_for(n_in), kThreads, 0, stream>>>(buf.a_bf16, n_in, kActivationQuant,
                                                            buf.a8);
    quantize_fp8_transposed<<<blocks_for(n_w), kThreads, 0, stream>>>(buf.w, kHidden, kFeatures,
                                                                      kWeightQuant, buf.w8);
    CUDA_CHECK_LAUNCH();
    // Host-side per-tensor scales, written every step (the scale plant changes one of them).
    // The previous step is finished (synchronized below), so no GPU work reads them now.
    for (int i = 0; i < kScaleFloats; ++i) scales_host[i] = 0.0f;
    scales_host[0] = 1.0f / kWeightQuant;               // Lt A_scale (weights)
    scales_host[kScaleSlot] = 1.0f / kActivationQuant;  // Lt B_scale (activations)
    scales_host[2 * kScaleSlot] = kOutputQuant;         // Lt D_scale
    if (opt.plant == Plant::Scale && planted_here) scales_host[0] *= 1.25f;
    std::atomic_thread_fence(std::memory_order_seq_cst);  // host stores before the launches
    if (!opt.scales_mapped)
      CUDA_CHECK(cudaMemcpyAsync(scales, scales_host, kScaleFloats * sizeof(float),
                                 cudaMemcpyHostToDevice, stream));
    run_fp8_gemm(lt, fp8, buf.w8, buf.a8, buf.c_bf16, buf.d8, buf.workspace, kWorkspaceBytes,
                 stream);
    if (block_scaled)
      run_fp8_gemm(lt, fp8_block, buf.w8, buf.a8, buf.c_bf16, buf.d_block, buf.workspace,
                   kWorkspaceBytes, stream);

    dequantize_fp8<<<blocks_for(n_out), kThreads, 0, stream>>>(buf.d8, n_out, buf.d);
    combine_grad<<<blocks_for(n_out), kThreads, 0, stream>>>(buf.c, buf.d, n_out, buf.g);
    CUDA_CHECK_LAUNCH();
    NCCL_CHECK(ncclAllReduce(buf.g, buf.g_sum, n_out, ncclFloat32, ncclSum, comm, stream));
    column_sums<<<blocks_for(kFeatures), kThreads, 0, stream>>>(buf.g_sum, kTokens, kFeatures,
                                                                buf.colsum);
    sgd_update<<<blocks_for(n_w), kThreads, 0, stream>>>(buf.w, buf.colsum, kHidden, kFeatures,
                                                         kLearningRate);
    step_stats<<<1, kStatsThreads, 0, stream>>>(buf.g_sum, buf.c, buf.d, n_out, buf.amax, buf.sumsq,
                                                block_scaled ? buf.d_block : nullptr,
                                                block_scaled ? n_out : 0, buf.stats);
    CUDA_CHECK_LAUNCH();
    // The step's one small device-to-host copy (lockstep records it as a metric).
    CUDA_CHECK(cudaMemcpyAsync(stats_host, buf.stats, kStatsCount * sizeof(float),
                               cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::printf(
        "step %d loss %.9g loss_hex %08x c_sum %.9g d_sum %.9g amax %.9g sumsq %.9g "
        "dbs_sum %.9g\n",
        step, stats_host[0], float_bits(stats_host[0]), stats_host[1], stats_host[2], stats_host[3],
        stats_host[4], stats_host[5]);
    std::fflush(stdout);
  }

  destroy_fp8_gemm(&fp8);
  if (block_scaled) destroy_fp8_gemm(&fp8_block);
  NCCL_CHECK(ncclCommDestroy(comm));
  CUBLAS_CHECK(cublasLtDestroy(lt));
  CUBLAS_CHECK(cublasDestroy(blas));
  CUDA_CHECK(cudaFreeHost(scales_host));
  CUDA_CHECK(cudaFreeHost(stats_host));
  CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf("done %d steps\n", opt.steps);
  return 0;
}
