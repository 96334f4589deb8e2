// A stand-in for collectors/: implements every events.h function by appending one line per
// event to an in-memory log that the tests read back (lockstep_fake_log / lockstep_fake_clear,
// found with dlsym(RTLD_DEFAULT, ...)). LOCKSTEP_FAKE_INACTIVE=1 makes active() false,
// LOCKSTEP_FAKE_NO_LAUNCHES=1 launches_traced() (through configured_flags_first, below).
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "collectors/events.h"
#include "collectors/replay.h"

namespace {

std::mutex& log_mutex() {
  static std::mutex m;
  return m;
}
std::string& log_text() {
  static std::string* text = new std::string;
  return *text;
}
std::atomic<uint64_t> next_token{1};

void add(const char* format, ...) __attribute__((format(printf, 1, 2)));
void add(const char* format, ...) {
  char line[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(log_mutex());
  log_text() += line;
  log_text() += '\n';
}

std::atomic<lockstep::collectors::SymbolResolver> resolver{nullptr};
std::atomic<bool> arm_replay{false};

}  // namespace

extern "C" __attribute__((visibility("default"))) char* lockstep_fake_log() {
  std::lock_guard<std::mutex> lock(log_mutex());
  return strdup(log_text().c_str());
}
extern "C" __attribute__((visibility("default"))) void lockstep_fake_clear() {
  std::lock_guard<std::mutex> lock(log_mutex());
  log_text().clear();
}
// The next launch_begin arms this thread's replay (kernel_launch_begin, replay_after below).
extern "C" __attribute__((visibility("default"))) void lockstep_fake_arm_replay() {
  arm_replay.store(true);
}
// The resolver interpose registered, so tests can exercise it.
extern "C" __attribute__((visibility("default"))) void* lockstep_fake_resolve(const char* name) {
  auto r = resolver.load();
  return r != nullptr ? r(name) : nullptr;
}

namespace lockstep::collectors {

// The inline gates (events.h: active, launches_traced) read the configuration's bits here on
// every call: unlike the real one, this never marks them read (HotFlags::kConfigured), so that a
// test may change the environment between calls.
uint8_t configured_flags_first() {
  auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && std::strcmp(v, "1") == 0;
  };
  uint8_t flags = 0;
  if (!set("LOCKSTEP_FAKE_INACTIVE")) flags |= HotFlags::kPossible;
  if (!set("LOCKSTEP_FAKE_NO_LAUNCHES")) flags |= HotFlags::kLaunchesTraced;  // below broad
  return flags;
}
ShimCallGuard::ShimCallGuard() { ++t_hot.shim_depth; }
ShimCallGuard::~ShimCallGuard() { --t_hot.shim_depth; }
void set_symbol_resolver(SymbolResolver r) {
  resolver.store(r);
  add("resolver registered");
}

uint64_t kernel_launch_begin(const KernelLaunch& l) {
  const uint64_t token = next_token++;
  // lockstep_fake_arm_replay(): this launch is the one LOCKSTEP_REPLAY names (a marker pointer,
  // never read: replay_armed() only tests it).
  if (arm_replay.exchange(false))
    open_api().replay_armed = reinterpret_cast<ReplayArmed*>(&arm_replay);
  add("launch_begin token=%llu api=%d ptsz=%d kind=%d handle=%p grid=%u,%u,%u block=%u,%u,%u "
      "cluster=%u,%u,%u smem=%zu stream=%p params=%p extra=%p",
      (unsigned long long)token, int(l.api), int(l.per_thread_stream), int(l.handle_kind), l.handle,
      l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.cluster[0],
      l.cluster[1], l.cluster[2], l.smem_bytes, (void*)l.stream, (void*)l.kernel_params,
      (void*)l.extra);
  return token;
}
void kernel_launch_end(uint64_t token, int result) {
  add("launch_end token=%llu result=%d", (unsigned long long)token, result);
}
void remember_kernel_handle(const void* handle) { add("kernel_handle %p", handle); }
void code_unloading(const void* module, const void* library) {
  add("code_unloading module=%p library=%p", module, library);
}
// After an armed launch (lockstep_fake_arm_replay): relaunches it through the hook's forward,
// once, as the real collector's replays do.
void replay_after(int result, const std::function<int()>& relaunch) {
  open_api().replay_armed = nullptr;
  add("replay_after result=%d", result);
  add("relaunch result=%d", relaunch());
}

void graph_instantiated(const void* graph, const void* exec) {
  add("graph_instantiated graph=%p exec=%p", graph, exec);
}
uint64_t graph_launch_begin(const void* exec, CUstream stream, bool per_thread) {
  add("graph_launch exec=%p stream=%p per_thread=%d", exec, (void*)stream, per_thread ? 1 : 0);
  return 7;
}
void graph_launch_end(uint64_t token, int result) {
  add("graph_launch_end token=%llu result=%d", (unsigned long long)token, result);
}

void on_alloc(CUdeviceptr p, size_t bytes) { add("alloc %#llx %zu", (unsigned long long)p, bytes); }
void on_stream_alloc(CUdeviceptr p, size_t bytes, CUstream, bool) {
  add("alloc %#llx %zu", (unsigned long long)p, bytes);
}
void on_free(CUdeviceptr p) { add("free %#llx", (unsigned long long)p); }
// Takes over the frees of pointers with 0xdefe in bits 16-31 (as collectors do while hashes
// that read the memory are deferred); forwards the others.
bool on_stream_free(CUdeviceptr p, CUstream stream, bool per_thread) {
  add("stream_free %#llx stream=%p per_thread=%d", (unsigned long long)p, (void*)stream,
      per_thread ? 1 : 0);
  return ((p >> 16) & 0xffff) == 0xdefe;
}
void on_va_reserve(CUdeviceptr p, size_t bytes) {
  add("va_reserve %#llx %zu", (unsigned long long)p, bytes);
}
void on_va_free(CUdeviceptr p, size_t bytes) {
  add("va_free %#llx %zu", (unsigned long long)p, bytes);
}
void on_map(CUdeviceptr p, size_t bytes) { add("map %#llx %zu", (unsigned long long)p, bytes); }
void on_unmap(CUdeviceptr p, size_t bytes) { add("unmap %#llx %zu", (unsigned long long)p, bytes); }

uint64_t memory_op_begin(const MemoryOp& op) {
  const uint64_t token = next_token++;
  add("memop_begin token=%llu api=%s set=%d async=%d dir=%d dst=%p src=%p bytes=%zu value=%u "
      "elem=%u stream=%p ptsz=%d",
      (unsigned long long)token, op.api, int(op.is_set), int(op.is_async), op.direction, op.dst,
      op.src, op.bytes, op.set_value, op.set_element_bytes, (void*)op.stream,
      int(op.per_thread_stream));
  return token;
}
void memory_op_end(uint64_t token, int result) {
  add("memop_end token=%llu result=%d", (unsigned long long)token, result);
}

uint64_t cublas_gemm_begin(const CublasGemm& g) {
  const uint64_t token = next_token++;
  add("gemm_begin token=%llu api=%s m=%lld n=%lld k=%lld batch=%lld ptrarrays=%d",
      (unsigned long long)token, g.api, (long long)g.m, (long long)g.n, (long long)g.k,
      (long long)g.batch, int(g.pointer_arrays));
  return token;
}
void cublas_gemm_end(uint64_t token, int status) {
  add("gemm_end token=%llu status=%d", (unsigned long long)token, status);
}
uint64_t lt_matmul_begin(const LtMatmul& m) {
  const uint64_t token = next_token++;
  add("lt_begin token=%llu D=%p ws=%zu stream=%p", (unsigned long long)token, m.D,
      m.workspace_bytes, (void*)m.stream);
  return token;
}
void lt_matmul_end(uint64_t token, int status) {
  add("lt_end token=%llu status=%d", (unsigned long long)token, status);
}

uint64_t nccl_begin(const NcclCall& c) {
  const uint64_t token = next_token++;
  add("nccl_begin token=%llu op=%d api=%s count=%zu root_or_peer=%d comm=%p stream=%p",
      (unsigned long long)token, int(c.op), c.api, c.count, c.root_or_peer, (void*)c.comm,
      (void*)c.stream);
  return token;
}
void nccl_end(uint64_t token, ncclResult_t result) {
  add("nccl_end token=%llu result=%d", (unsigned long long)token, int(result));
}
void nccl_group_start() { add("nccl_group_start"); }
void nccl_group_end(ncclResult_t result) { add("nccl_group_end result=%d", int(result)); }
void nccl_comm_created(const NcclCommCreated& c) {
  add("comm_created api=%s comm=%p parent=%p color=%d key=%d nranks=%d rank=%d", c.api,
      (void*)c.comm, (void*)c.parent, c.color, c.key, c.nranks, c.rank);
}
void nccl_comm_destroyed(ncclComm_t comm) { add("comm_destroyed %p", (void*)comm); }
void nccl_choice(const NcclChoice& c) {
  add("nccl_choice func=%s algo=%s proto=%s channels=%u seq=%llu", c.func, c.algo ? c.algo : "-",
      c.proto ? c.proto : "-", c.channels, (unsigned long long)c.seq_number);
}
void nccl_profiler_loaded(int nranks, int rank) {
  add("nccl_profiler_loaded nranks=%d rank=%d", nranks, rank);
}
// The real one decides from the configuration; the mechanics tests only need the shim's path.
void nccl_profiler_setup(const char* shim_path) {
  if (std::getenv("NCCL_PROFILER_PLUGIN") == nullptr) setenv("NCCL_PROFILER_PLUGIN", shim_path, 1);
}

void stream_order_point() { add("order_point"); }
HostWait stream_host_wait_begin(CUstream, bool, bool, CUcontext) {
  add("host_wait");
  return {};
}
void stream_host_wait_end(const HostWait&, int) {}
void stream_event_recorded(CUevent event, CUstream stream, bool per_thread_default) {
  add("event_recorded event=%p stream=%p per_thread=%d", (void*)event, (void*)stream,
      int(per_thread_default));
}
void stream_event_waited(CUstream stream, bool per_thread_default, CUevent event) {
  add("event_waited stream=%p per_thread=%d event=%p", (void*)stream, int(per_thread_default),
      (void*)event);
}
void capture_begins() { add("capture_begins"); }  // capture_begun() stays false

bool marker_range_push(const char* message) {
  add("range_push %s", message);
  return false;
}
void marker_step(const char* name) { add("step %s", name != nullptr ? name : ""); }

}  // namespace lockstep::collectors
