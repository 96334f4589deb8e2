// gpu_launch_bench: what one kernel launch costs on a real GPU, run under `lockstep run` at each
// level (bench/collectors/gpu_launch_bench.sh does that). A loop launches small kernels with two
// pointer arguments (4 KiB each, separate cudaMalloc allocations) back to back on one stream,
// as a launch-bound training step does; it reports the host time per launch (the launching
// thread's cost: what slows a CPU-bound job) and the time per launch until the GPU is done.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

__global__ void axpy_small(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 0.5f * y[i] + x[i];
}

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int n = 1024;  // 4 KiB of floats
  float *x = nullptr, *y = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess ||
      cudaMalloc(&y, n * sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "gpu_launch_bench: no GPU (%s)\n", cudaGetErrorString(cudaGetLastError()));
    return 2;
  }
  cudaMemsetAsync(x, 0, n * sizeof(float), stream);
  cudaMemsetAsync(y, 0, n * sizeof(float), stream);
  for (int i = 0; i < 1000; ++i) axpy_small<<<n / 256, 256, 0, stream>>>(x, y, n);  // warm-up
  cudaStreamSynchronize(stream);
  using clock = std::chrono::steady_clock;
  double best_host = 1e30, best_done = 1e30;
  for (int round = 0; round < 3; ++round) {
    const auto t0 = clock::now();
    for (int i = 0; i < launches; ++i) axpy_small<<<n / 256, 256, 0, stream>>>(x, y, n);
    const auto t1 = clock::now();
    cudaStreamSynchronize(stream);
    const auto t2 = clock::now();
    const double host = std::chrono::duration<double, std::micro>(t1 - t0).count() / launches;
    const double done = std::chrono::duration<double, std::micro>(t2 - t0).count() / launches;
    if (host < best_host) best_host = host;
    if (done < best_done) best_done = done;
  }
  if (cudaGetLastError() != cudaSuccess) {
    std::fprintf(stderr, "gpu_launch_bench: a launch failed\n");
    return 1;
  }
  std::printf("launches %d host_us_per_launch %.3f done_us_per_launch %.3f\n", launches, best_host,
              best_done);
  return 0;
}
