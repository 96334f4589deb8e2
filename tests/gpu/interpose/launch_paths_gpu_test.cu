// Every way a kernel reaches the GPU, on real CUDA, under the preloaded test shim: nvcc <<<>>>
// stubs (__cudaLaunchKernel), cudaLaunchKernel, driver launches through
// cudaGetDriverEntryPointByVersion, cuBLAS (which launches with a dlsym'd cuLaunchKernelEx),
// and graph replays. The fake collectors log each event; the kernels' results are checked too,
// so a hook that forwards wrongly fails here.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "preload_test_support.h"

using namespace interpose_test;

namespace {

__global__ void add_one(int* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1;
}

class RealCuda : public PreloadedShim {
 protected:
  void SetUp() override {
    PreloadedShim::SetUp();
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      GTEST_SKIP() << "no CUDA device / libcuda.so.1 here";
    }
    ASSERT_EQ(cudaMalloc(&data_, kN * sizeof(int)), cudaSuccess);
    ASSERT_EQ(cudaMemset(data_, 0, kN * sizeof(int)), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    clear_fake_log();
  }
  void TearDown() override {
    if (data_ != nullptr) cudaFree(data_);
  }
  std::vector<int> read_back() {
    std::vector<int> host(kN);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, kN * sizeof(int), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }
  static constexpr int kN = 1000;
  int* data_ = nullptr;
};

TEST_F(RealCuda, TripleChevronIsOneRuntimeStubEvent) {
  add_one<<<4, 256>>>(data_, kN);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto begins = lines_starting(fake_log(), "launch_begin");
  ASSERT_EQ(begins.size(), 1u) << fake_log();
  EXPECT_TRUE(contains(begins[0], "api=1 ")) << begins[0];
  EXPECT_TRUE(contains(begins[0], "grid=4,1,1 block=256,1,1")) << begins[0];
  for (int v : read_back()) ASSERT_EQ(v, 1);
}

TEST_F(RealCuda, CudaLaunchKernelIsOneEvent) {
  int n = kN;
  void* args[] = {&data_, &n};
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&add_one), dim3(4), dim3(256), args, 0,
                             nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto begins = lines_starting(fake_log(), "launch_begin");
  ASSERT_EQ(begins.size(), 1u) << fake_log();
  EXPECT_TRUE(contains(begins[0], "api=2 ")) << begins[0];
  for (int v : read_back()) ASSERT_EQ(v, 1);
}

TEST_F(RealCuda, DriverLaunchThroughRuntimeEntryPointIsWrapped) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status;
  ASSERT_EQ(
      cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fn, 12000, cudaEnableDefault, &status),
      cudaSuccess);
  ASSERT_EQ(status, cudaDriverEntryPointSuccess);
  ASSERT_EQ(fn, dlsym(RTLD_DEFAULT, "cuLaunchKernel")) << "not our legacy-stream wrapper";
  cudaKernel_t kernel = nullptr;
  ASSERT_EQ(cudaGetKernel(&kernel, reinterpret_cast<const void*>(&add_one)), cudaSuccess);
  EXPECT_FALSE(lines_starting(fake_log(), "kernel_handle").empty()) << fake_log();
  clear_fake_log();
  int n = kN;
  void* args[] = {&data_, &n};
  auto launch =
      reinterpret_cast<CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**)>(fn);
  ASSERT_EQ(
      launch(reinterpret_cast<CUfunction>(kernel), 4, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr),
      CUDA_SUCCESS);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto begins = lines_starting(fake_log(), "launch_begin");
  ASSERT_EQ(begins.size(), 1u) << fake_log();
  EXPECT_TRUE(contains(begins[0], "api=5 ptsz=0")) << begins[0];
  for (int v : read_back()) ASSERT_EQ(v, 1);
}

TEST_F(RealCuda, CublasGemmIsOneGemmAndItsKernelsAreSeen) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const int m = 256, n = 128, k = 64;
  float *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_EQ(cudaMalloc(&a, m * k * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, k * n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&c, m * n * sizeof(float)), cudaSuccess);
  std::vector<float> ones(m * k, 1.0f);
  ASSERT_EQ(cudaMemcpy(a, ones.data(), m * k * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b, ones.data(), k * n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  clear_fake_log();
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, m, b, k, &beta, c, m),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::string log = fake_log();
  auto gemms = lines_starting(log, "gemm_begin");
  ASSERT_EQ(gemms.size(), 1u) << log;
  EXPECT_TRUE(contains(gemms[0], "api=cublasSgemm_v2 m=256 n=128 k=64")) << gemms[0];
  EXPECT_TRUE(lines_starting(log, "lt_begin").empty()) << log;
  EXPECT_GE(lines_starting(log, "launch_begin").size(), 1u) << "cuBLAS's kernel was not seen\n"
                                                            << log;
  std::vector<float> out(m * n);
  ASSERT_EQ(cudaMemcpy(out.data(), c, out.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (float v : out) ASSERT_EQ(v, static_cast<float>(k));
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cublasDestroy(handle);
}

TEST_F(RealCuda, GraphCaptureAndReplay) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  add_one<<<4, 256, 0, stream>>>(data_, kN);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, 0), cudaSuccess);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::string log = fake_log();
  EXPECT_EQ(lines_starting(log, "launch_begin").size(), 1u) << log;  // at capture time
  EXPECT_EQ(lines_starting(log, "graph_instantiated").size(), 1u) << log;
  EXPECT_EQ(lines_starting(log, "graph_launch exec").size(), 3u) << log;
  EXPECT_EQ(lines_starting(log, "graph_launch_end").size(), 3u) << log;
  for (int v : read_back()) ASSERT_EQ(v, 3);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace

// Run directly (tests/gpu/run.sh runs every binary under tests/gpu as is), the test re-executes
// itself with the test shim preloaded: the shim sits next door in the build folder.
int main(int argc, char** argv) {
  if (dlsym(RTLD_DEFAULT, "lockstep_fake_log") == nullptr &&
      std::getenv("LOCKSTEP_INTERPOSE_TEST_REEXEC") == nullptr) {
    char exe[PATH_MAX] = {};
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      std::string dir(exe, static_cast<size_t>(n));
      dir.resize(dir.rfind('/'));
      std::string shim = dir + "/../../cpu/interpose/liblockstep_testshim.so";
      if (access(shim.c_str(), R_OK) != 0) shim = TESTSHIM_PATH;
      setenv("LD_PRELOAD", shim.c_str(), 1);
      setenv("LOCKSTEP_INTERPOSE_TEST_REEXEC", "1", 1);
      execv(exe, argv);
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
