// The Tracer's lifecycle: the configuration, parsed once; whether tracing is possible; the
// process-wide tracer, created on the first CUDA event with its trace header; the exit and fork
// handlers; close().
#include <pthread.h>
#include <unistd.h>  // environ

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "collectors/driver_api.h"
#include "collectors/environment.h"
#include "collectors/fatal_signals.h"
#include "collectors/kernel_info.h"
#include "collectors/lt_copies.h"
#include "collectors/runtime.h"
#include "common/hot_flags.h"
#include "common/hot.h"
#include "common/self_time.h"
#include "common/settings.h"
#include "trace/header.h"
#include "trace/run_dir.h"

namespace lockstep::collectors {
namespace {

// In the line every traced call reads (common/hot_flags.h).
constexpr std::atomic<Tracer*>& g_tracer = hot_flags.tracer;
// Misconfigured, failed to start, or a forked child.
constexpr std::atomic<bool>& g_disabled = hot_flags.tracing_disabled;
std::mutex g_create_mutex;

void on_fork_child() {
  Tracer* tracer = g_tracer.exchange(nullptr);
  g_disabled.store(true);
  if (tracer != nullptr) tracer->abandon_after_fork();  // the parent's file stays the parent's
}

std::string uuid_text(const CUuuid& uuid) {
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    out += fmt::format("{:02x}", static_cast<unsigned char>(uuid.bytes[i]));
    if (i == 3 || i == 5 || i == 7 || i == 9) out += '-';
  }
  return out;
}

nlohmann::json config_json(const Config& c) {
  return {{"dir", c.dir},
          {"level", std::string(level_name(c.level))},
          {"first_step", c.first_step},
          {"last_step", c.last_step},
          {"kernels", c.kernels},
          {"max_region", c.max_region},
          {"metric_bytes", c.metric_bytes},
          {"host_hash_bytes", c.host_hash_bytes},
          {"step_source", static_cast<int>(c.step_source)},
          {"step_pattern", c.step_pattern},
          {"memory", c.memory},
          {"hash_memory", c.hash_memory},
          {"merge_hashes", c.merge_hashes},
          {"chain_hashes", c.chain_hashes},
          {"record_env", c.record_env}};
}

}  // namespace

void Tracer::close_at_exit() {
  if (Tracer* tracer = g_tracer.load()) tracer->close();
}

const ConfigResult& Tracer::configuration() {
  static const ConfigResult result = [] {
    // At load (set_symbol_resolver): settings, unknown LOCKSTEP_* names and the trace directory,
    // one line each. The error lines already say whether the job stops (failure_line).
    ConfigResult parsed = load_config([](const char* name) { return std::getenv(name); }, environ);
    for (const std::string& line : parsed.warnings) std::fprintf(stderr, "%s\n", line.c_str());
    for (const std::string& line : parsed.errors) std::fprintf(stderr, "%s\n", line.c_str());
    if (!parsed.ok() && parsed.config.fail_hard) settings::stop_job();
    return parsed;
  }();
  return result;
}

Tracer* Tracer::get_first() {
  if (g_disabled.load(std::memory_order_relaxed)) return nullptr;
  std::lock_guard lock(g_create_mutex);
  Tracer* tracer = g_tracer.load();
  if (tracer != nullptr || g_disabled.load()) return tracer;
  tracer = create();
  if (tracer == nullptr)
    g_disabled.store(true);
  else
    g_tracer.store(tracer, std::memory_order_release);
  return tracer;
}

Tracer* Tracer::create() {
  const ConfigResult& configured = configuration();
  if (!configured.ok() || configured.config.level == Level::Off) return nullptr;
  const Config& config = configured.config;
  ShimCallGuard guard;

  nlohmann::json extra = nlohmann::json::object();
  extra["lockstep_config"] = config_json(config);
  const Driver& d = driver();
  nlohmann::json gpu = nullptr;
  if (d.loaded) {
    int version = 0;
    if (d.driverGetVersion != nullptr && d.driverGetVersion(&version) == CUDA_SUCCESS)
      extra["driver_version"] = version;
    int count = 0;
    if (d.deviceGetCount != nullptr && d.deviceGetCount(&count) == CUDA_SUCCESS)
      extra[trace::kGpuCountKey] = count;
    CUcontext ctx = nullptr;
    CUdevice device = 0;
    if (d.ctxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != nullptr && d.ctxGetDevice != nullptr &&
        d.ctxGetDevice(&device) == CUDA_SUCCESS) {
      char name[256] = {};
      CUuuid uuid{};
      gpu = nlohmann::json::object();
      gpu["ordinal"] = static_cast<int>(device);
      if (d.deviceGetName != nullptr && d.deviceGetName(name, sizeof(name), device) == CUDA_SUCCESS)
        gpu["name"] = name;
      if (d.deviceGetUuid != nullptr && d.deviceGetUuid(&uuid, device) == CUDA_SUCCESS)
        gpu["uuid"] = uuid_text(uuid);
      // With the host name, what `lockstep audit` names a suspected faulty GPU by.
      char pci[32] = {};
      if (d.deviceGetPCIBusId != nullptr &&
          d.deviceGetPCIBusId(pci, sizeof(pci), device) == CUDA_SUCCESS)
        gpu["pci_bus_id"] = pci;
    }
  }
  extra["gpu"] = gpu;
  auto version_or_null = [](auto v) -> nlohmann::json {
    if (v == 0) return nullptr;
    return v;
  };
  extra["runtime_version"] = version_or_null(runtime_version());
  extra["nccl_version"] = version_or_null(nccl_version());
  extra["cublas_version"] = version_or_null(cublas_version());
  extra["cublaslt_version"] = version_or_null(cublaslt_version());
  // Variables, Python packages, cuDNN: what `lockstep diff` compares before the ops.
  extra.update(environment_facts(environ, config.record_env));
  nlohmann::json header = trace::build_trace_header(extra);
  // A rank variable the launcher set badly is not taken (the trace then has no rank): say so once.
  for (const std::string& problem : trace::rank_from_env().problems)
    std::fprintf(stderr, "lockstep: %s\n", problem.c_str());

  trace::RunDirOptions run;
  run.dir = config.dir;
  run.run_id = config.run_id;
  run.overwrite = config.overwrite;
  trace::WriterOptions options;
  options.memory_budget = config.memory;
  std::string error;
  std::unique_ptr<trace::TraceWriter> writer = trace::open_run_writer(run, options, header, &error);
  if (!writer) {
    const std::string line =
        failure_line(config, fmt::format("cannot write a trace in {}: {}", config.dir, error));
    std::fprintf(stderr, "%s\n", line.c_str());
    if (config.fail_hard) settings::stop_job();
    return nullptr;
  }
  auto* tracer = new Tracer(config, std::move(writer));  // lives until exit, never deleted
  // Kernel records at broad leave their names to the writer (kernels.cpp, deferred_kernel_name),
  // cuBLASLt GEMMs their names and identity fields (lt_copies.h).
  tracer->hot_.writer->set_name_resolver([tracer](trace::Record& record) {
    if (record.kind == trace::RecordKind::Gemm) return complete_copied_gemm(tracer, record);
    return deferred_kernel_name(tracer, record);
  });
  if (config.debug) self_time::enable(config.debug_phases);
  tracer->rank_known = header.contains("rank") && !header["rank"].is_null();
  std::atexit(close_at_exit);
  seal_trace_on_fatal_signals(tracer->hot_.writer.get());  // a killed job's trace says it was killed
  static std::once_flag fork_once;
  std::call_once(fork_once, [] { pthread_atfork(nullptr, nullptr, on_fork_child); });
  tracer->debug(fmt::format("tracing at level {} into {}", level_name(config.level), config.dir));
  return tracer;
}

// ---- shutdown -----------------------------------------------------------------------------------
void Tracer::close() {
  if (hot_.closed.load()) return;
  flush_deferred(FlushCause::Close);
  drain_at_close();
  report_at_close();
  hot_.closed.store(true);
  hot_.writer->close();
}

void Tracer::abandon_after_fork() {
  hot_.closed.store(true);
  hot_.writer->abandon_after_fork();
}

}  // namespace lockstep::collectors