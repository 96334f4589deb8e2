// The example's own kernels. Everything is deterministic except planted_atomic_sum_squares,
// whose float atomicAdd order follows the block schedule and varies run to run.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

inline constexpr int kThreads = 256;        // block size of every kernel but step_stats
inline constexpr int kPartialBlocks = 128;  // fixed grid of the deterministic reduction

__global__ void init_weights(float* w, int n, uint32_t seed);
// Values spread over five decades and both signs, so that sums of them round differently
// in different orders.
__global__ void init_input(float* x, int n, uint32_t seed, int step);
__global__ void gelu_forward(const float* x, float* h, int n);
// Deterministic sum of squares: fixed grid of kPartialBlocks blocks, then one block.
__global__ void sum_squares_partial(const float* h, int n, float* partials);
__global__ void sum_partials(const float* partials, int n, float* out);
// The plant: one float atomicAdd per element into *out (which must be zero).
__global__ void planted_atomic_sum_squares(const float* h, int n, float* out);
__global__ void rms_normalize_bf16(const float* h, const float* sumsq, int n, __nv_bfloat16* a);
__global__ void cast_bf16(const float* w, int n, __nv_bfloat16* out);
__global__ void quantize_fp8(const __nv_bfloat16* a, int n, float scale, __nv_fp8_e4m3* out);
// w is K x N row-major; out is N x K row-major (each output feature's K weights contiguous).
__global__ void quantize_fp8_transposed(const float* w, int K, int N, float scale,
                                        __nv_fp8_e4m3* out);
__global__ void dequantize_fp8(const __nv_fp8_e4m3* d, int n, float* out);
__global__ void combine_grad(const float* c, const float* d, int n, float* g);
// colsum[j] = sum over rows of g[i * cols + j], in row order.
__global__ void column_sums(const float* g, int rows, int cols, float* colsum);
__global__ void sgd_update(float* w, const float* colsum, int K, int N, float lr);
__global__ void fill(float* p, int n, float value);
// One block of kStatsThreads: stats = {loss, sum(c), sum(d), amax, sumsq, sum(dbs)}.
inline constexpr int kStatsThreads = 1024;
inline constexpr int kStatsCount = 6;
__global__ void step_stats(const float* g_sum, const float* c, const float* d, int n,
                           const float* amax, const float* sumsq, const __nv_bfloat16* dbs,
                           int n_dbs, float* stats);

inline int blocks_for(int n) { return (n + kThreads - 1) / kThreads; }
