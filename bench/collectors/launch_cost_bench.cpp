// What one kernel launch costs the launching thread in collectors/, per level, on the CPU.
//
//   build/bench/collectors/launch_cost_bench [launches] [level]
//
// Each level runs in a forked child (the Tracer is one per process) with a fake driver behind
// the symbol resolver: a kernel with a PyTorch-like by-value parameter struct (an int, three
// pointers into one allocation, and 32 bytes of sizes and strides). kernel_launch_begin/end
// are called back to back and timed; the real launch (a few µs in the driver) is not included.
// "full" has no GPU, so the planned fingerprints are flagged dropped: the figure covers argument
// decoding, region planning and holding the record. "full+engine" adds a fake GPU behind the
// hash engine (its launch writes the digest slots at once): the engine's enqueue, slot
// bookkeeping and delivery through the collector thread, still without the real launch cost.
// "paced ns": the median launch with 512 KiB of other reads before each, a job's pace.
// "state": one lockstep_fingerprint_many call of 77 tensors at broad with the fake GPU (the
// PyTorch hook's parameter fingerprints after each optimizer step), per call, not per launch;
// paced: 3 ms apart, as once per step.
// "step": a launch-bound PyTorch step at broad with the fake GPU: 800 launches, the state call
// of 77 tensors, the job's wait for its loss (100 us), the next step's marker; result[0]: the
// median state call (ns), result[2]: the median marker (ns), over 300 steps. What the marker
// costs depends on the collector's thread, which the state call's held record keeps busy.
// "gemm-ex": one classic cublasGemmEx's begin + end at broad (no library needed: its identity is
// its arguments), per call.
// "copy": one device-to-device cudaMemcpyAsync's begin + end at broad (a DDP job makes ~190 a
// step, its gradient buckets' copies), per call; "memset" the same for a cudaMemsetAsync.
// "gemm": one cublasLtMatmul's begin + end at broad, with PyTorch's descriptors made by the real
// cuBLASLt (dlopen'd; skipped without it): the objects copied into the record (lt_copies.h);
// "gemm-read": the same with the copies off, every attribute read on the calling thread. A job
// makes new layouts for every GEMM; the bench makes them once per call too.
#include <cublasLt.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "collectors/events.h"
#include "collectors/lockstep.h"
#include "collectors/lt_copies.h"
#include "bench/collectors/fake_driver_entries.h"
#include "tests/cpu/collectors/fake_gpu.h"

namespace {
using namespace lockstep::collectors;

// The fake GPU of "full+engine" (tests/cpu/collectors/fake_gpu.h).
bool g_fake_gpu = false;

CUresult fake_get_proc_address(const char* symbol, void** pfn, int, cuuint64_t,
                               CUdriverProcAddressQueryResult* status) {
  const std::string s = symbol;
  *pfn = nullptr;
  // The fake GPU's entry points first (its context among them), then the launch's.
  if (g_fake_gpu) *pfn = lockstep::testing::FakeGpu::instance().proc(s);
  if (*pfn == nullptr) *pfn = lockstep::bench::fake_driver_entry(symbol);
  *status = *pfn != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *pfn != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
void* g_cublaslt = nullptr;  // the real libcublasLt ("gemm"), or null
void* fake_resolver(const char* name) {
  if (std::string(name) == "cuGetProcAddress_v2")
    return reinterpret_cast<void*>(&fake_get_proc_address);
  if (g_cublaslt != nullptr && std::string(name).starts_with("cublasLt"))
    return dlsym(g_cublaslt, name);
  return nullptr;
}

struct Params {
  int n;
  struct {
    uint64_t pointers[3];
    int64_t sizes[4];
  } tensors;
};

// The kernel launch the modes make: its parameters point into the allocation at `base`. Built in
// place (its parameter array points at its own members).
struct BenchLaunch {
  Params p{};
  void* params[2] = {&p.n, &p.tensors};
  KernelLaunch l;
  explicit BenchLaunch(CUdeviceptr base) {
    p.n = 1 << 20;
    for (int i = 0; i < 3; ++i) p.tensors.pointers[i] = base + (i + 1) * (1 << 20);
    for (int i = 0; i < 4; ++i) p.tensors.sizes[i] = 4096 >> i;
    l.api = LaunchApi::DriverLaunch;
    l.handle_kind = FunctionHandle::DriverFunction;
    l.handle = reinterpret_cast<const void*>(0x1234);
    l.grid[0] = 1024;
    l.block[0] = 256;
    l.kernel_params = params;
  }
  BenchLaunch(const BenchLaunch&) = delete;
  BenchLaunch& operator=(const BenchLaunch&) = delete;
};

// result[0]: ns per launch back to back; result[1]: hash launches per kernel; result[2]: the
// median ns of one launch at a training job's pace, 512 KiB of reads before each (PyTorch's
// dispatcher and the driver evict the shim's code and data between two launches).
void measure(long launches, double* result) {
  const CUdeviceptr base = 0x7f0000000000;
  on_alloc(base, 64 << 20);
  const BenchLaunch launch(base);
  const KernelLaunch& l = launch.l;
  for (int i = 0; i < 1000; ++i) kernel_launch_end(kernel_launch_begin(l), CUDA_SUCCESS);  // warm
  lockstep::testing::FakeGpu::instance().reset_count();
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < launches; ++i) kernel_launch_end(kernel_launch_begin(l), CUDA_SUCCESS);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result[1] = static_cast<double>(lockstep::testing::FakeGpu::instance().launch_count()) /
              static_cast<double>(launches);
  result[0] = s * 1e9 / static_cast<double>(launches);
  std::vector<uint64_t> job_memory((512u << 10) / sizeof(uint64_t), 1);
  std::vector<double> paced(std::min<long>(launches, 20000));
  uint64_t sink = 0;
  for (double& cost : paced) {
    for (size_t j = 0; j < job_memory.size(); j += 8) sink += job_memory[j];  // a line each
    const auto t0 = std::chrono::steady_clock::now();
    kernel_launch_end(kernel_launch_begin(l), CUDA_SUCCESS);
    cost = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  }
  std::nth_element(paced.begin(), paced.begin() + paced.size() / 2, paced.end());
  result[2] = paced[paced.size() / 2] + static_cast<double>(sink & 1) * 1e-9;
}

// "state": the parameters' fingerprints after an optimizer step (python/lockstep/_torch_hooks.py
// at broad: one lockstep_fingerprint_many call per step) of a GPT-like model's 77 tensors, with
// the fake GPU behind the hash engine. result[0]: ns per call; result[1]: hash launches per call;
// result[2]: the median call at a job's pace (as above).
constexpr int kStateTensors = 77;
// The state call's tensors, each in an allocation of its own from `base`.
struct StateTensors {
  std::vector<const void*> ptrs;
  std::vector<unsigned long long> bytes;
  std::vector<std::string> names;
  std::vector<const char*> name_ptrs;
  explicit StateTensors(CUdeviceptr base) {
    for (int i = 0; i < kStateTensors; ++i) {
      const CUdeviceptr at = base + static_cast<CUdeviceptr>(i) * (4 << 20);
      on_alloc(at, 4 << 20);
      ptrs.push_back(reinterpret_cast<const void*>(at));
      bytes.push_back(i % 3 == 0 ? 2048 : (1 << 20));
      names.push_back("blocks." + std::to_string(i / 12) + ".param" + std::to_string(i % 12));
    }
    for (const auto& n : names) name_ptrs.push_back(n.c_str());
  }
  // As the PyTorch hook's steady step sends them: the same arrays every step, promised so.
  void call() const {
    lockstep_fingerprint_many(kStateTensors, ptrs.data(), bytes.data(), name_ptrs.data(), nullptr,
                              LOCKSTEP_SAME_NAMES);
  }
};

void measure_state(long calls, double* result) {
  const StateTensors tensors(0x7f0000000000);
  auto call = [&] { tensors.call(); };
  for (int i = 0; i < 20; ++i) call();  // warm
  lockstep::testing::FakeGpu::instance().reset_count();
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < calls; ++i) call();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result[0] = s * 1e9 / static_cast<double>(calls);
  result[1] = static_cast<double>(lockstep::testing::FakeGpu::instance().launch_count()) /
              static_cast<double>(calls);
  std::vector<uint64_t> job_memory((512u << 10) / sizeof(uint64_t), 1);
  std::vector<double> paced(std::min<long>(calls, 1000));
  uint64_t sink = 0;
  CUdeviceptr elsewhere = 0x7e0000000000;
  for (double& cost : paced) {
    // A job calls once per optimizer step: by then the collector thread (polling every 1 ms)
    // has retired the last call's records, whose buffers the next call reuses. And it has
    // allocated meanwhile (PyTorch's launch-bound GPT job: 3 allocations a step), elsewhere.
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    on_alloc(elsewhere, 4 << 20);
    elsewhere += 4 << 20;
    for (size_t j = 0; j < job_memory.size(); j += 8) sink += job_memory[j];
    const auto t0 = std::chrono::steady_clock::now();
    call();
    cost = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  }
  std::nth_element(paced.begin(), paced.begin() + paced.size() / 2, paced.end());
  result[2] = paced[paced.size() / 2] + static_cast<double>(sink & 1) * 1e-9;
}

// "step" (above): result[0] the median state call, result[1] hash launches per step, result[2]
// the median marker, in ns.
void measure_step(long steps, double* result) {
  const CUdeviceptr base = 0x7f0000000000;
  const StateTensors tensors(base);
  const BenchLaunch launch(base);  // into the first tensor's allocation
  const KernelLaunch& l = launch.l;
  std::vector<uint64_t> job_memory((64u << 10) / sizeof(uint64_t), 1);
  uint64_t sink = 0;
  std::vector<double> state_ns, marker_ns;
  lockstep::testing::FakeGpu::instance().reset_count();
  for (long step = 0; step < steps + 20; ++step) {
    for (int k = 0; k < 800; ++k) {
      for (size_t j = 0; j < job_memory.size(); j += 8) sink += job_memory[j];
      kernel_launch_end(kernel_launch_begin(l), CUDA_SUCCESS);
    }
    auto t0 = std::chrono::steady_clock::now();
    tensors.call();
    const double state = std::chrono::duration<double, std::nano>(
                             std::chrono::steady_clock::now() - t0).count();
    const auto wait_until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
    while (std::chrono::steady_clock::now() < wait_until) {
    }
    t0 = std::chrono::steady_clock::now();
    lockstep_step_number(static_cast<unsigned long long>(step + 1));
    const double marker = std::chrono::duration<double, std::nano>(
                              std::chrono::steady_clock::now() - t0).count();
    if (step >= 20) state_ns.push_back(state), marker_ns.push_back(marker);
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  result[0] = median(state_ns);
  result[1] = static_cast<double>(lockstep::testing::FakeGpu::instance().launch_count()) /
              static_cast<double>(steps + 20);
  result[2] = median(marker_ns) + static_cast<double>(sink & 1) * 1e-9;
}

// one() `calls` times back to back after 1,000 to warm up (result[0]: ns per call), then up to
// 20,000 times at a job's pace, 512 KiB of other reads before each (result[2]: the median ns).
template <typename Call>
void time_calls(long calls, Call& one, double* result) {
  for (int i = 0; i < 1000; ++i) one();  // warm
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < calls; ++i) one();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result[0] = s * 1e9 / static_cast<double>(calls);
  std::vector<uint64_t> job_memory((512u << 10) / sizeof(uint64_t), 1);
  std::vector<double> paced(std::min<long>(calls, 20000));
  uint64_t sink = 0;
  for (double& cost : paced) {
    for (size_t j = 0; j < job_memory.size(); j += 8) sink += job_memory[j];
    const auto t0 = std::chrono::steady_clock::now();
    one();
    cost = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  }
  std::nth_element(paced.begin(), paced.begin() + paced.size() / 2, paced.end());
  result[2] = paced[paced.size() / 2] + static_cast<double>(sink & 1) * 1e-9;
}

// "copy" / "memset": result[0] ns per call back to back, result[2] the median call at a job's
// pace (as above); a step marked every 200 calls.
void measure_memory_op(long calls, bool set, double* result) {
  const CUdeviceptr base = 0x7f0000000000;
  on_alloc(base, 64 << 20);
  MemoryOp op;
  op.api = set ? "cudaMemsetAsync" : "cudaMemcpyAsync";
  op.is_set = set;
  op.is_async = true;
  op.direction = set ? 0 : 3;  // cudaMemcpyDeviceToDevice
  op.dst = reinterpret_cast<void*>(base + (8 << 20));
  op.src = set ? nullptr : reinterpret_cast<const void*>(base);
  op.bytes = 4 << 20;
  op.stream = reinterpret_cast<CUstream>(0x2000);
  long made = 0;
  auto one = [&] {
    memory_op_end(memory_op_begin(op), CUDA_SUCCESS);
    if (++made % 200 == 0) lockstep_step();
  };
  time_calls(calls, one, result);
}

// "gemm-ex": result[0] ns per call back to back, result[2] the median call at a job's pace; a
// step marked every 75 GEMMs.
void measure_gemm_ex(long calls, double* result) {
  const CUdeviceptr base = 0x7f0000000000;
  on_alloc(base, 64 << 20);
  CublasGemm g;
  g.api = "cublasGemmEx";
  g.m = 768, g.n = 4096, g.k = 2304, g.lda = 768, g.ldb = 2304, g.ldc = 768;
  g.A = reinterpret_cast<void*>(base), g.B = reinterpret_cast<void*>(base + (8 << 20));
  g.C = reinterpret_cast<void*>(base + (16 << 20));
  long made = 0;
  auto one = [&] {
    cublas_gemm_end(cublas_gemm_begin(g), 0);
    if (++made % 75 == 0) lockstep_step();
  };
  time_calls(calls, one, result);
}

// "gemm": a bf16 GEMM as PyTorch's addmm makes it (cuBLASLt descriptors with TRANSA, a bias
// epilogue, new layouts per call). result[0]: ns per GEMM (begin + end, the layouts' creation
// excluded; a step marked every 75); result[2]: the median GEMM at a job's pace.
template <typename Fn>
Fn lt(const char* name) {
  return reinterpret_cast<Fn>(dlsym(g_cublaslt, name));
}
void measure_gemm(long calls, double* result) {
  const auto desc_create = lt<decltype(&cublasLtMatmulDescCreate)>("cublasLtMatmulDescCreate");
  const auto desc_set =
      lt<decltype(&cublasLtMatmulDescSetAttribute)>("cublasLtMatmulDescSetAttribute");
  const auto layout_create =
      lt<decltype(&cublasLtMatrixLayoutCreate)>("cublasLtMatrixLayoutCreate");
  const auto layout_destroy =
      lt<decltype(&cublasLtMatrixLayoutDestroy)>("cublasLtMatrixLayoutDestroy");
  const CUdeviceptr base = 0x7f0000000000;
  on_alloc(base, 64 << 20);
  cublasLtMatmulDesc_t desc = nullptr;
  desc_create(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const int32_t trans = CUBLAS_OP_T;
  desc_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans));
  const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  desc_set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
  const void* bias = reinterpret_cast<const void*>(base + (40 << 20));
  desc_set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  LtMatmul mm;
  mm.desc = desc;
  mm.A = reinterpret_cast<const void*>(base);
  mm.B = reinterpret_cast<const void*>(base + (8 << 20));
  mm.C = mm.D = reinterpret_cast<void*>(base + (16 << 20));
  mm.workspace = reinterpret_cast<void*>(base + (32 << 20));
  mm.workspace_bytes = 4 << 20;
  cublasLtMatrixLayout_t layouts[3];
  auto one = [&](bool timed_only_the_gemm, std::chrono::steady_clock::duration* took) {
    layout_create(&layouts[0], CUDA_R_16BF, 768, 2304, 768);
    layout_create(&layouts[1], CUDA_R_16BF, 768, 4096, 768);
    layout_create(&layouts[2], CUDA_R_16BF, 2304, 4096, 2304);
    mm.a_layout = layouts[0], mm.b_layout = layouts[1];
    mm.c_layout = mm.d_layout = layouts[2];
    const auto t0 = std::chrono::steady_clock::now();
    lt_matmul_end(lt_matmul_begin(mm), CUBLAS_STATUS_SUCCESS);
    if (timed_only_the_gemm) *took += std::chrono::steady_clock::now() - t0;
    for (auto* l : layouts) layout_destroy(l);
  };
  // A step every 75 GEMMs, as the launch-bound GPT job's: the writer drains at each step's end.
  long made = 0;
  auto gemm = [&](bool timed, std::chrono::steady_clock::duration* into) {
    one(timed, into);
    if (++made % 75 == 0) lockstep_step();
  };
  std::chrono::steady_clock::duration took{};
  for (int i = 0; i < 1000; ++i) gemm(false, &took);  // warm
  for (long i = 0; i < calls; ++i) gemm(true, &took);
  result[0] = std::chrono::duration<double, std::nano>(took).count() / static_cast<double>(calls);
  std::vector<uint64_t> job_memory((512u << 10) / sizeof(uint64_t), 1);
  std::vector<double> paced(std::min<long>(calls, 20000));
  uint64_t sink = 0;
  for (double& cost : paced) {
    for (size_t j = 0; j < job_memory.size(); j += 8) sink += job_memory[j];
    std::chrono::steady_clock::duration one_took{};
    gemm(true, &one_took);
    cost = std::chrono::duration<double, std::nano>(one_took).count();
  }
  std::nth_element(paced.begin(), paced.begin() + paced.size() / 2, paced.end());
  result[2] = paced[paced.size() / 2] + static_cast<double>(sink & 1) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  const long launches = argc > 1 ? std::atol(argv[1]) : 1000000;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("lockstep-launch-bench-" + std::to_string(getpid()));
  std::printf("collectors: CPU time per kernel launch (begin + end), %ld launches per level\n",
              launches);
  std::printf("%-12s %10s %14s %13s\n", "level", "ns/launch", "hash launches", "paced ns");
  const std::string only = argc > 2 ? argv[2] : "";  // e.g. "broad": one level (for perf)
  // "state" (last): per call of 77 tensors, not per launch.
  for (const char* mode : {"off", "metrics", "broad", "full", "full+engine", "state", "step",
                           "copy", "memset", "gemm-ex", "gemm", "gemm-read"}) {
    const std::string name = mode;
    if (!only.empty() && only != name) continue;
    const bool at_broad = name == "state" || name == "step" || name == "copy" ||
                          name == "memset" || name.starts_with("gemm");
    const char* level = name == "full+engine" ? "full" : at_broad ? "broad" : mode;
    if (name == "gemm" || name == "gemm-read") {
      g_cublaslt = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
      if (g_cublaslt == nullptr) g_cublaslt = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
      if (g_cublaslt == nullptr) {
        std::printf("%-12s skipped: no libcublasLt.so to make its descriptors\n", mode);
        continue;
      }
    }
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return 2;
    std::fflush(stdout);  // or the child's exit prints the parent's buffered lines again
    const pid_t pid = fork();
    if (pid == 0) {
      close(pipe_fds[0]);
      std::filesystem::remove_all(dir);
      setenv("LOCKSTEP_DIR", dir.c_str(), 1);
      setenv("LOCKSTEP_LEVEL", level, 1);
      setenv("LOCKSTEP_RUN_ID", "bench", 1);
      g_fake_gpu = name == "full+engine" || name == "state" || name == "step";
      set_symbol_resolver(&fake_resolver);
      double result[3] = {0, 0, 0};
      if (name == "step")
        measure_step(std::max<long>(1, launches / 3000), result);
      else if (name == "state")
        measure_state(std::max<long>(1, launches / 1000), result);
      else if (name == "gemm-ex")
        measure_gemm_ex(std::max<long>(1, launches / 10), result);
      else if (name.starts_with("gemm"))
        set_lt_copies(name == "gemm"), measure_gemm(std::max<long>(1, launches / 10), result);
      else if (name == "copy" || name == "memset")
        measure_memory_op(std::max<long>(1, launches / 10), name == "memset", result);
      else
        measure(launches, result);
      (void)!write(pipe_fds[1], result, sizeof(result));
      std::exit(0);
    }
    close(pipe_fds[1]);
    double result[3] = {-1, 0, 0};
    (void)!read(pipe_fds[0], result, sizeof(result));
    close(pipe_fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (name == "step")
      std::printf("%-12s %10.0f %14.2f %13.0f   (state call ns, hash launches a step, marker ns;"
                  " %ld steps)\n", mode, result[0], result[1], result[2],
                  std::max<long>(1, launches / 3000));
    else if (name == "state")
      std::printf("%-12s %10.0f %14.2f %13.0f   (per call of %d tensors, %ld calls)\n", mode,
                  result[0], result[1], result[2], kStateTensors, std::max<long>(1, launches / 1000));
    else if (name == "copy" || name == "memset")
      std::printf("%-12s %10.0f %14.2f %13.0f   (per cudaMem%sAsync at broad, %ld calls)\n", mode,
                  result[0], result[1], result[2], name == "copy" ? "cpy" : "set",
                  std::max<long>(1, launches / 10));
    else if (name == "gemm-ex")
      std::printf("%-12s %10.0f %14.2f %13.0f   (per cublasGemmEx at broad, %ld calls)\n", mode,
                  result[0], result[1], result[2], std::max<long>(1, launches / 10));
    else if (name.starts_with("gemm"))
      std::printf("%-12s %10.0f %14.2f %13.0f   (per cublasLtMatmul at broad, %ld calls)\n", mode,
                  result[0], result[1], result[2], std::max<long>(1, launches / 10));
    else
      std::printf("%-12s %10.0f %14.2f %13.0f\n", mode, result[0], result[1], result[2]);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
