// trace_bench: records per second appended (1 and 8 threads; wall, and per core of the process's
// CPU time), the appending thread's own cost per record, and bytes per record on disk, for a realistic training mix and for kernel launches with two buffer
// fingerprints, and one append's cost at a training job's pace (caches cold). Targets (issue 2): >= 5 M records/s per core, <= 48 B per kernel record.
//
// usage: trace_bench [DIR] [RECORDS_PER_THREAD]   (DIR defaults to /dev/shm or /tmp)
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/writer.h"

using namespace lockstep::trace;

namespace {

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
double thread_cpu_seconds() { return cpu_seconds(CLOCK_THREAD_CPUTIME_ID); }

// A training loop's op catalog: each op has fixed launch parameters, sizes and allocations
// (a caching allocator returns the same blocks every iteration); fingerprints are new each time.
struct Catalog {
  std::vector<Record> ops;
  std::vector<int> weights;  // draw order
};

Catalog make_catalog(TraceWriter& writer, bool kernels_only, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Catalog catalog;
  auto buffer = [&](Role role, const char* label, DType dtype) {
    BufferFingerprint b;
    b.role = role;
    b.dtype = dtype;
    b.flags = kFingerprintValid | kExtentExact;
    b.label = writer.intern(label);
    b.bytes = (1 + rng() % 64) << 20;
    b.alloc_ordinal = 1 + rng() % 500;
    b.alloc_offset = (rng() % 4096) * 512;
    return b;
  };
  for (int k = 0; k < 200; ++k) {
    Record r;
    r.stream = 1;
    const int pick = kernels_only ? 0 : static_cast<int>(rng() % 100);
    if (pick < 80) {
      r.kind = RecordKind::Kernel;
      r.name = writer.intern("void at::native::elementwise_kernel<128, 4, " + std::to_string(k) +
                             ">(int, ...)");
      r.fields[fields::Kernel::grid_x] = 1 + rng() % 8192;
      r.fields[fields::Kernel::grid_y] = r.fields[fields::Kernel::grid_z] = 1;
      r.fields[fields::Kernel::block_x] = 128 << (rng() % 3);
      r.fields[fields::Kernel::block_y] = r.fields[fields::Kernel::block_z] = 1;
      r.fields[fields::Kernel::args_digest] = rng();
      r.fields[fields::Kernel::launch_api] = 1;
      r.buffers = {buffer(Role::In, "arg1", DType::BF16), buffer(Role::Out, "arg2", DType::BF16)};
      if (!kernels_only && rng() % 3 == 0)
        r.buffers.push_back(buffer(Role::In, "arg3", DType::F32));
    } else if (pick < 90) {
      r.kind = RecordKind::Gemm;
      r.name = writer.intern("cublasLtMatmul");
      r.fields[fields::Gemm::m] = 4096, r.fields[fields::Gemm::n] = 1024 << (rng() % 3);
      r.fields[fields::Gemm::k] = 4096, r.fields[fields::Gemm::batch] = 1;
      r.fields[fields::Gemm::compute_type] = 68;
      r.fields[fields::Gemm::algo] = rng() % 20;
      r.fields[fields::Gemm::workspace_bytes] = 32 << 20;
      r.buffers = {buffer(Role::In, "A", DType::BF16), buffer(Role::In, "B", DType::BF16),
                   buffer(Role::Out, "D", DType::BF16)};
    } else if (pick < 93) {
      r.kind = RecordKind::Collective;
      r.name = writer.intern("ncclAllReduce");
      r.fields[fields::Collective::comm_id] = 1;
      r.fields[fields::Collective::count] = 1 << 24;
      r.fields[fields::Collective::datatype] = 9;
      r.fields[fields::Collective::nranks] = 8;
      r.fields[fields::Collective::root_or_peer] = UINT64_MAX;
      r.buffers = {buffer(Role::In, "send", DType::BF16), buffer(Role::Out, "recv", DType::BF16)};
    } else if (pick < 97) {
      r.kind = RecordKind::Memcpy;
      r.name = writer.intern("cudaMemcpyAsync");
      r.fields[fields::Memcpy::direction] = 3, r.fields[fields::Memcpy::bytes] = 1 << 20;
      r.fields[fields::Memcpy::is_async] = 1;
      r.buffers = {buffer(Role::Out, "dst", DType::Bytes)};
    } else if (pick < 99) {
      r.kind = RecordKind::Memset;
      r.name = writer.intern("cudaMemsetAsync");
      r.fields[fields::Memset::bytes] = 1 << 22;
      r.buffers = {buffer(Role::Out, "dst", DType::Bytes)};
    } else {
      r.kind = RecordKind::Metric;
      r.name = writer.intern("cudaMemcpy");
      r.fields[fields::Metric::bytes] = 4;
      r.payload = {1, 2, 3, 4};
    }
    catalog.ops.push_back(r);
  }
  return catalog;
}

struct Result {
  uint64_t records = 0;
  double wall_s = 0, cpu_s = 0;  // cpu_s: the appending threads'
  double process_cpu_s = 0;      // every thread, the writer's own included, through close
  uint64_t file_bytes = 0;
  uint64_t dropped = 0;
};

// A writer on options.path, or the error and exit 1.
std::unique_ptr<TraceWriter> open_writer(const WriterOptions& options) {
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json{{"bench", true}}, &error);
  if (!writer) {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::exit(1);
  }
  return writer;
}

Result run(const std::string& dir, int threads, uint64_t per_thread, bool kernels_only) {
  static int counter = 0;
  WriterOptions options;
  options.path =
      dir + "/bench-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".lstrace";
  options.memory_budget = 512u << 20;  // measure encoding, not the disk of a shared machine
  auto writer = open_writer(options);
  const Catalog catalog = make_catalog(*writer, kernels_only, 1);
  std::atomic<uint64_t> seq{0};
  std::vector<double> cpu(threads);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      // Pre-draw op choices and fingerprints so that the timed loop measures append().
      std::vector<uint32_t> picks(4096);
      for (auto& p : picks) p = static_cast<uint32_t>(rng() % catalog.ops.size());
      std::vector<Record> ops = catalog.ops;
      ++ready;
      while (!go.load()) {}
      const double start = thread_cpu_seconds();
      uint32_t step = 0;
      for (uint64_t i = 0; i < per_thread; ++i) {
        Record& r = ops[picks[i & 4095]];
        r.seq = seq.fetch_add(1, std::memory_order_relaxed) + 1;  // the shim's process counter
        r.step = step;
        for (auto& b : r.buffers)
          b.fingerprint = (r.seq * 0x9e3779b97f4a7c15ull) ^ (&b - r.buffers.data());
        writer->append(r);
        if ((i & 0xffff) == 0xffff) ++step;
      }
      cpu[t] = thread_cpu_seconds() - start;
    });
  }
  while (ready.load() < threads) {}
  const auto wall_start = std::chrono::steady_clock::now();
  const double process_start = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
  go = true;
  for (auto& thread : pool) thread.join();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  writer->close();
  const double process_cpu = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - process_start;
  Result result;
  result.records = writer->stats().appended;
  result.dropped = writer->stats().dropped;
  result.wall_s = wall;
  for (double c : cpu) result.cpu_s += c;
  result.process_cpu_s = process_cpu;
  result.file_bytes = std::filesystem::file_size(options.path);
  std::filesystem::remove(options.path);
  return result;
}

// "per core": records per CPU-second of the whole process (the writer's thread, which hashes
// and encodes, included); "appender": what one append costs the calling thread.
void report(const char* what, const Result& r) {
  std::printf(
      "%-34s %9llu records  %6.2f M/s wall  %6.2f M/s per core  appender %5.0f ns/record  %5.1f "
      "B/record  dropped %llu\n",
      what, static_cast<unsigned long long>(r.records), r.records / r.wall_s / 1e6,
      r.records / r.process_cpu_s / 1e6, r.cpu_s / r.records * 1e9,
      static_cast<double>(r.file_bytes) / r.records, static_cast<unsigned long long>(r.dropped));
}

// A training job's pace: between two appends the job's own work (here: reading 512 KiB, as
// PyTorch's dispatcher and the driver do between launches) evicts the writer's code and tables
// from the CPU caches. Returns the median cost of one append to the calling thread, in ns.
double paced_append_ns(const std::string& dir, uint64_t records) {
  WriterOptions options;
  options.path = dir + "/bench-paced-" + std::to_string(::getpid()) + ".lstrace";
  auto writer = open_writer(options);
  const Catalog catalog = make_catalog(*writer, true, 2);
  std::vector<Record> ops = catalog.ops;
  std::vector<uint64_t> job_memory((512u << 10) / sizeof(uint64_t), 1);
  std::vector<double> costs;
  costs.reserve(records);
  uint64_t sink = 0;
  for (uint64_t i = 0; i < records; ++i) {
    for (size_t j = 0; j < job_memory.size(); j += 8) sink += job_memory[j];  // one line each
    Record& r = ops[i % ops.size()];
    r.seq = i + 1;
    r.step = static_cast<uint32_t>(i / 1000);
    for (auto& b : r.buffers) b.fingerprint = r.seq * 0x9e3779b97f4a7c15ull;
    const auto start = std::chrono::steady_clock::now();
    writer->append(r);
    costs.push_back(
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count());
    if (i % 1000 == 999) writer->end_step(static_cast<uint32_t>(i / 1000));
  }
  writer->close();
  std::filesystem::remove(options.path);
  std::nth_element(costs.begin(), costs.begin() + costs.size() / 2, costs.end());
  return costs[costs.size() / 2] + static_cast<double>(sink & 1) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  if (argc > 1) dir = argv[1];
  const uint64_t per_thread = argc > 2 ? std::stoull(argv[2]) : 2000000;
  std::printf("trace_bench: %u hardware threads, files in %s\n",
              std::thread::hardware_concurrency(), dir.c_str());
  report("kernel + 2 fingerprints, 1 thread", run(dir, 1, per_thread, true));
  report("realistic mix, 1 thread", run(dir, 1, per_thread, false));
  report("realistic mix, 8 threads", run(dir, 8, per_thread, false));
  report("kernel + 2 fingerprints, 8 threads", run(dir, 8, per_thread, true));
  std::printf("%-34s %9d records  appender %5.0f ns/record (median, clock read included)\n",
              "paced: 512 KiB of job reads between", 20000, paced_append_ns(dir, 20000));
  return 0;
}
