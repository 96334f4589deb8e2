#include "kernels.cuh"

namespace {

__device__ uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

__device__ float unit(uint32_t x) { return (mix(x) >> 8) * (1.0f / 16777216.0f); }  // [0, 1)

// Deterministic block sum: fixed tree over shared memory. blockDim.x must be a power of two.
__device__ float block_sum(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  float total = shared[0];
  __syncthreads();
  return total;
}

}  // namespace

__global__ void init_weights(float* w, int n, uint32_t seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) w[i] = 0.04f * (unit(seed * 0x9e3779b9U + i) - 0.5f);
}

__global__ void init_input(float* x, int n, uint32_t seed, int step) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t base = mix(seed ^ (0x85ebca6bU * static_cast<uint32_t>(step + 1))) + 2u * i;
  float magnitude = exp10f(-3.0f + 4.0f * unit(base));  // 1e-3 .. 1e1
  float sign = (mix(base + 1) & 1u) ? 1.0f : -1.0f;
  x[i] = sign * magnitude * (0.5f + unit(base + 1));
}

__global__ void gelu_forward(const float* x, float* h, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    h[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f));
  }
}

__global__ void sum_squares_partial(const float* h, int n, float* partials) {
  __shared__ float shared[kThreads];
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    acc += h[i] * h[i];
  float total = block_sum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void sum_partials(const float* partials, int n, float* out) {
  __shared__ float shared[kThreads];
  float acc = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += partials[i];
  float total = block_sum(acc, shared);
  if (threadIdx.x == 0) *out = total;
}

__global__ void planted_atomic_sum_squares(const float* h, int n, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, h[i] * h[i]);
}

__global__ void rms_normalize_bf16(const float* h, const float* sumsq, int n, __nv_bfloat16* a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = __float2bfloat16(h[i] * rsqrtf(*sumsq / n + 1e-6f));
}

__global__ void cast_bf16(const float* w, int n, __nv_bfloat16* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(w[i]);
}

__global__ void quantize_fp8(const __nv_bfloat16* a, int n, float scale, __nv_fp8_e4m3* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i].__x = __nv_cvt_float_to_fp8(__bfloat162float(a[i]) * scale, __NV_SATFINITE, __NV_E4M3);
}

__global__ void quantize_fp8_transposed(const float* w, int K, int N, float scale,
                                        __nv_fp8_e4m3* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;  // index into out: n * K + k
  if (i >= K * N) return;
  int n = i / K, k = i % K;
  out[i].__x = __nv_cvt_float_to_fp8(w[k * N + n] * scale, __NV_SATFINITE, __NV_E4M3);
}

__global__ void dequantize_fp8(const __nv_fp8_e4m3* d, int n, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<float>(d[i]);
}

__global__ void combine_grad(const float* c, const float* d, int n, float* g) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) g[i] = 1e-2f * c[i] + 1e-3f * d[i];
}

__global__ void column_sums(const float* g, int rows, int cols, float* colsum) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  float acc = 0.0f;
  for (int i = 0; i < rows; ++i) acc += g[i * cols + j];
  colsum[j] = acc;
}

__global__ void sgd_update(float* w, const float* colsum, int K, int N, float lr) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= K * N) return;
  int k = i / N, n = i % N;
  w[i] -= lr * colsum[n] * (1.0f + 0.001f * k);
}

__global__ void fill(float* p, int n, float value) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}

__global__ void step_stats(const float* g_sum, const float* c, const float* d, int n,
                           const float* amax, const float* sumsq, const __nv_bfloat16* dbs,
                           int n_dbs, float* stats) {
  __shared__ float shared[kStatsThreads];
  float loss = 0.0f, c_sum = 0.0f, d_sum = 0.0f, dbs_sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    loss += g_sum[i] * g_sum[i];
    c_sum += c[i];
    d_sum += d[i];
  }
  for (int i = threadIdx.x; i < n_dbs; i += blockDim.x) dbs_sum += __bfloat162float(dbs[i]);
  loss = block_sum(loss, shared);
  c_sum = block_sum(c_sum, shared);
  d_sum = block_sum(d_sum, shared);
  dbs_sum = block_sum(dbs_sum, shared);
  if (threadIdx.x == 0) {
    stats[0] = loss / n;
    stats[1] = c_sum;
    stats[2] = d_sum;
    stats[3] = amax ? *amax : 0.0f;
    stats[4] = *sumsq;
    stats[5] = dbs_sum;
  }
}
