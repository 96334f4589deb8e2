// CUPTI validation mode: see cupti_validation.h. Every CUPTI call is checked; a failure prints
// one line and validation stops, the job carries on untouched.
#include "cupti_validation.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <cupti.h>

#include "collectors/events.h"
#include "interception.h"
#include "scope.h"
#include "common/env.h"

namespace lockstep::interpose::validation {

__attribute__((constructor)) static void read_validate_env() {
  hot_flags.validation.store(coverage::validation_requested(std::getenv(env::kValidate)),
                             std::memory_order_relaxed);
}

namespace {

struct Cupti {
  decltype(&cuptiActivityEnable) activity_enable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) push = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) pop = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
};

enum State : int { kUnstarted, kActive, kOff };
std::atomic<int> g_state{kUnstarted};
std::once_flag g_start_once;
Cupti g_cupti;
std::atomic<unsigned long long> g_sequence{0};
pid_t g_pid = 0;
thread_local bool t_starting = false;

// Records gathered from CUPTI's buffers (heap, never freed: read during exit).
std::mutex g_records_mutex;
coverage::Activity* g_activity = nullptr;
std::unordered_map<const char*, std::string>* g_names = nullptr;

std::string result_text(CUptiResult r) {
  const char* text = nullptr;
  if (g_cupti.result_string != nullptr && g_cupti.result_string(r, &text) == CUPTI_SUCCESS &&
      text != nullptr)
    return text;
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

void say(const std::string& line) {
  std::fprintf(stderr, "lockstep[%d]: validation: %s\n", static_cast<int>(getpid()), line.c_str());
}

constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t,
                               size_t valid_bytes) {
  if (buffer == nullptr) return;
  {
    std::lock_guard lock(g_records_mutex);
    CUpti_Activity* record = nullptr;
    while (valid_bytes > 0 && g_cupti.next_record(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
          coverage::KernelActivity kernel;
          kernel.correlation_id = k->correlationId;
          kernel.graph_id = k->graphId;
          if (k->name != nullptr) {
            auto [it, inserted] = g_names->try_emplace(k->name);
            if (inserted) it->second = k->name;
            kernel.name = it->second;
          }
          g_activity->kernels.push_back(std::move(kernel));
          break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
          const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
          g_activity->apis.push_back({a->correlationId,
                                      record->kind == CUPTI_ACTIVITY_KIND_RUNTIME
                                          ? coverage::ApiDomain::Runtime
                                          : coverage::ApiDomain::Driver,
                                      static_cast<uint32_t>(a->cbid)});
          break;
        }
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
          const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
          if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
            g_activity->externals.push_back({e->correlationId, e->externalId});
          break;
        }
        default:
          break;
      }
    }
    size_t dropped = 0;
    if (g_cupti.dropped != nullptr && g_cupti.dropped(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
      g_activity->dropped_records += dropped;
  }
  std::free(buffer);
}

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// libcupti: by soname (the job's copy if it already loaded one), next to the job's libcudart,
// then the toolkit's.
void* open_cupti() {
  for (const char* name : {"libcupti.so.13", "libcupti.so"}) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
  }
  std::vector<std::string> dirs;
  if (void* cudart_fn = lookup_real("cudaRuntimeGetVersion", "libcudart")) {
    Dl_info info{};
    if (dladdr(cudart_fn, &info) != 0 && info.dli_fname != nullptr) {
      std::string dir = info.dli_fname;
      dir.erase(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/'));
      if (!dir.empty()) {
        dirs.push_back(dir);
        dirs.push_back(dir + "/../../cuda_cupti/lib");   // pip wheels, one package per library
        dirs.push_back(dir + "/../extras/CUPTI/lib64");  // a toolkit's lib64
      }
    }
  }
  if (const char* home = std::getenv("CUDA_HOME"))
    dirs.push_back(std::string(home) + "/extras/CUPTI/lib64");
  dirs.push_back("/usr/local/cuda/extras/CUPTI/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  for (const std::string& dir : dirs) {
    for (const char* name : {"/libcupti.so.13", "/libcupti.so"}) {
      if (void* h = dlopen((dir + name).c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    }
  }
  return nullptr;
}

template <typename T>
bool bind(void* handle, const char* name, T* slot) {
  *slot = reinterpret_cast<T>(real_dlsym()(handle, name));
  return *slot != nullptr;
}

void flush_and_report();

bool start() {
  if (const char* injection = std::getenv("CUDA_INJECTION64_PATH");
      injection != nullptr && *injection != '\0') {
    say(std::string("another CUPTI client is injected (CUDA_INJECTION64_PATH=") + injection +
        "); running without validation");
    return false;
  }
  void* handle = open_cupti();
  if (handle == nullptr) {
    say("libcupti.so.13 not found; running without validation");
    return false;
  }
  Cupti c;
  const bool bound = bind(handle, "cuptiActivityEnable", &c.activity_enable) &&
                     bind(handle, "cuptiActivityRegisterCallbacks", &c.register_callbacks) &&
                     bind(handle, "cuptiActivityFlushAll", &c.flush_all) &&
                     bind(handle, "cuptiActivityGetNextRecord", &c.next_record) &&
                     bind(handle, "cuptiActivityPushExternalCorrelationId", &c.push) &&
                     bind(handle, "cuptiActivityPopExternalCorrelationId", &c.pop) &&
                     bind(handle, "cuptiActivityGetNumDroppedRecords", &c.dropped) &&
                     bind(handle, "cuptiGetResultString", &c.result_string) &&
                     bind(handle, "cuptiSubscribe", &c.subscribe);
  if (!bound) {
    say("libcupti lacks an activity API function; running without validation");
    return false;
  }
  g_cupti = c;
  g_activity = new coverage::Activity;
  g_names = new std::unordered_map<const char*, std::string>;

  // Holding the one subscriber slot tells us nobody else (Nsight, Kineto) has it, and keeps
  // them from taking it later. No domain is enabled: the callback never runs.
  CUpti_SubscriberHandle subscriber = nullptr;
  CUptiResult r = c.subscribe(&subscriber, &ignore_callback, nullptr);
  if (r != CUPTI_SUCCESS) {
    say(r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
            ? "another CUPTI subscriber is active (Nsight, Kineto?); running without validation"
            : "cuptiSubscribe: " + result_text(r) + "; running without validation");
    return false;
  }
  if ((r = c.register_callbacks(&buffer_requested, &buffer_completed)) != CUPTI_SUCCESS) {
    say("cuptiActivityRegisterCallbacks: " + result_text(r) + "; running without validation");
    return false;
  }
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME,
        CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL}) {
    if ((r = c.activity_enable(kind)) != CUPTI_SUCCESS) {
      say("cuptiActivityEnable(" + std::to_string(static_cast<int>(kind)) + "): " + result_text(r) +
          "; running without validation");
      return false;
    }
  }
  g_pid = getpid();
  pthread_atfork(nullptr, nullptr, [] { g_state.store(kOff, std::memory_order_release); });
  std::atexit(&flush_and_report);
  say("CUPTI activity enabled; coverage is written at exit");
  return true;
}

bool ensure_started() {
  const int state = g_state.load(std::memory_order_acquire);
  if (state != kUnstarted) return state == kActive;
  if (t_starting) return false;  // CUPTI reaching one of our hooks while it starts
  std::call_once(g_start_once, [] {
    t_starting = true;
    bool ok = false;
    try {
      collectors::ShimCallGuard guard;  // CUPTI's own CUDA calls are not the job's
      ok = start();
    } catch (...) {
      ok = false;
    }
    t_starting = false;
    g_state.store(ok ? kActive : kOff, std::memory_order_release);
  });
  return g_state.load(std::memory_order_acquire) == kActive;
}

coverage::PushScope open_library() {
  if (scope_depth(Scope::Nccl) > 0) return coverage::PushScope::Nccl;
  if (scope_depth(Scope::Blas) > 0) return coverage::PushScope::Blas;
  return coverage::PushScope::None;
}

void flush_and_report() {
  static std::atomic<bool> done{false};
  if (done.exchange(true) || getpid() != g_pid ||
      g_state.load(std::memory_order_acquire) != kActive)
    return;
  try {
    collectors::ShimCallGuard guard;
    // Exit only: wait for the job's queued kernels, so that their records exist.
    using CtxGetCurrent = CUresult (*)(CUcontext*);
    using CtxSynchronize = CUresult (*)();
    auto get_current = reinterpret_cast<CtxGetCurrent>(resolve_symbol("cuCtxGetCurrent"));
    auto synchronize = reinterpret_cast<CtxSynchronize>(resolve_symbol("cuCtxSynchronize"));
    CUcontext ctx = nullptr;
    if (get_current != nullptr && synchronize != nullptr && get_current(&ctx) == CUDA_SUCCESS &&
        ctx != nullptr)
      (void)synchronize();
    const CUptiResult r = g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS) say("cuptiActivityFlushAll: " + result_text(r));
    coverage::Report report;
    {
      std::lock_guard lock(g_records_mutex);
      report = coverage::aggregate(*g_activity);
    }
    const char* dir_env = std::getenv(env::kDir);
    const std::string dir = dir_env != nullptr && *dir_env != '\0' ? dir_env : "lockstep-trace";
    (void)mkdir(dir.c_str(), 0777);  // the tracer made it already when tracing runs
    const std::string path = dir + "/coverage-" + std::to_string(getpid()) + ".json";
    const std::string text = coverage::to_json(report, static_cast<long>(getpid()));
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
      if (std::fclose(f) != 0 || !ok) say("cannot write " + path);
    } else {
      say("cannot write " + path + ": " + std::strerror(errno));
    }
    std::fprintf(stderr, "%s (%s)\n", coverage::summary_line(report).c_str(), path.c_str());
  } catch (...) {
    say("coverage report failed");
  }
}

}  // namespace

Bracket::Bracket(coverage::PushScope scope, bool traced) {
  if (!ensure_started()) return;
  coverage::ExternalId id;
  id.sequence = g_sequence.fetch_add(1, std::memory_order_relaxed) + 1;
  id.scope = scope;
  id.library = open_library();
  id.traced = traced;
  pushed_ =
      g_cupti.push(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, coverage::encode(id)) == CUPTI_SUCCESS;
}

Bracket::~Bracket() {
  if (!pushed_) return;
  uint64_t last = 0;
  (void)g_cupti.pop(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

}  // namespace lockstep::interpose::validation
