// Process-level parts of events.h: activity, the shim guard, the resolver, the allocation hooks,
// and the per-thread call stack behind every begin/end token.
#include "collectors/events.h"

#include "collectors/call_stack.h"
#include "collectors/lockstep.h"
#include "collectors/driver_api.h"
#include "collectors/runtime.h"
#include "common/self_time.h"
#include "common/hot.h"
#include "common/hot_flags.h"

namespace lockstep::collectors {

void set_resolver_internal(SymbolResolver resolver);  // driver_api.cpp

}  // namespace lockstep::collectors

// The shim's exported C entry points live in objects that nothing else references; this table
// makes every link that uses events.h (the shim) pull them out of the static library.
extern "C" int InitializeInjectionNvtx2(const void* (*)(uint32_t));
__attribute__((used)) static void* const g_keep_exported_entry_points[] = {
    reinterpret_cast<void*>(&lockstep_step), reinterpret_cast<void*>(&lockstep_mark),
    reinterpret_cast<void*>(&lockstep_step_number),
    reinterpret_cast<void*>(&lockstep_fingerprint),
    reinterpret_cast<void*>(&lockstep_fingerprint_many),
    reinterpret_cast<void*>(&InitializeInjectionNvtx2)};

namespace lockstep::collectors {

namespace {
constexpr uint64_t kTokenTag = 0x5a5a000000000000ull;

struct CallStack {
  std::vector<std::unique_ptr<CallState>> states;  // reused, never shrunk
  size_t depth = 0;
};
CallStack& call_stack() {
  // Heap, never freed: hooks can run during exit, after thread_local destructors.
  thread_local CallStack* stack = new CallStack;
  return *stack;
}
}  // namespace

// What the configuration allows, read once into the line of switches every traced call reads
// (common/hot_flags.h): a function's static would be a guard and a value on a line of their own.
[[gnu::noinline]] uint8_t configured_flags_first() {
  const ConfigResult& configured = Tracer::configuration();
  uint8_t flags = HotFlags::kConfigured;
  if (configured.ok()) {
    const Level level = configured.config.level;
    if (level != Level::Off) flags |= HotFlags::kPossible;
    if (level >= Level::Broad) flags |= HotFlags::kLaunchesTraced;
  }
  hot_flags.configured.store(flags, std::memory_order_relaxed);  // the same from every thread
  return flags;
}

ShimCallGuard::ShimCallGuard() { ++t_hot.shim_depth; }
ShimCallGuard::~ShimCallGuard() { --t_hot.shim_depth; }

void set_symbol_resolver(SymbolResolver resolver) {
  set_resolver_internal(resolver);
  (void)Tracer::configuration();  // validate the environment at load: one line per problem
}

namespace {
LOCKSTEP_HOT void plan_call_hashes(CallState& call, std::vector<PlannedRegion>& inputs,
                                   bool not_capturing) {
  Tracer* tracer = call.tracer;
  // Hash launches in flight on side streams that read what this call may write go first; all
  // of them before a synchronous copy, which returns with its work done: the host may then
  // write what they read.
  tracer->side_hashes_before_call(
      call.stream, call.per_thread_stream,
      call.writes_known && !(call.kind == CallKind::Memory && !call.is_async), call.outputs,
      call.writes_only);
  if (inputs.empty() && call.outputs.empty()) {
    // Nothing to ride on. A kernel whose writes are known (a recalled fill) leaves the deferred
    // set waiting for the next launch, unless it writes what the set has still to read; any
    // other call flushes it (a synchronous copy returns with its work done: the host may then
    // write what the set has still to read).
    if (call.kind != CallKind::Kernel || !call.writes_known ||
        tracer->deferred_overlaps(call.writes_only))
      tracer->flush_deferred(Tracer::FlushCause::KernelUnhashed);
    note_writes(call);
    return;
  }
  call.pending = tracer->hold(std::move(call.record));
  if (call.pending == nullptr) {  // hold() leaves the record alone when it refuses
    for (auto& entry : call.record.buffers) entry.flags |= trace::kFingerprintDropped;
    call.outputs.clear();
    call.writes_known = false;  // its outputs are gone: forget every reusable digest
    tracer->flush_deferred(Tracer::FlushCause::KernelUnhashed);
    note_writes(call);
    return;
  }
  // With the previous kernel's deferred output hashes when it ran on this stream.
  // Chained when it needs no hash launch: a kernel, GEMM or async device copy whose writes are
  // known (a synchronous copy returns with its work done: the host may then write what the set
  // has still to read).
  const bool chainable =
      call.writes_known && (call.kind == CallKind::Kernel || call.kind == CallKind::Gemm ||
                            (call.kind == CallKind::Memory && call.is_async));
  const Tracer::CallWrites writes{&call.outputs, &call.writes_only};
  tracer->fingerprint_inputs(call.pending, call.stream, call.per_thread_stream, inputs.data(),
                             inputs.size(), not_capturing, chainable ? &writes : nullptr);
  // Its inputs looked up, before the call itself runs: another thread launching after it onto
  // the same stream must not take a digest of bytes this call is about to change.
  note_writes(call);
}
}  // namespace

LOCKSTEP_HOT void start_fingerprints(CallState& call, std::vector<PlannedRegion>& inputs,
                                     bool not_capturing) {
  Tracer* tracer = call.tracer;
  const uint64_t issued = tracer->synced_issue_count();
  plan_call_hashes(call, inputs, not_capturing);
  // A synced set flushed on the way (another stream's call, one not hashed) is now outstanding:
  // this call's own stream waits for it too (push_call saw those issued before).
  if (tracer->synced_issue_count() != issued)
    tracer->before_work_on(call.stream, call.per_thread_stream);
}

LOCKSTEP_HOT CallState& push_call(CallKind kind, uint64_t* token, CUstream stream,
                                  bool per_thread_default) {
  // Any traced call may order work after the stream of a deferred kernel: its output hashes go
  // first. Kernel launches, GEMMs and device memory operations merge or flush them themselves
  // (every path of theirs reaches start_fingerprints, or flushes), a metric copy holds or
  // flushes them (Tracer::before_host_copy); a nested call (a library's own launch) belongs to
  // its enclosing call, which did. A call that queues work waits for held hashes the host
  // synchronized past (Tracer::before_work_on).
  if (kind != CallKind::Nested)
    if (Tracer* tracer = Tracer::existing()) {
      if (kind != CallKind::Kernel && kind != CallKind::Gemm && kind != CallKind::Memory &&
          kind != CallKind::Metric)
        tracer->flush_deferred(Tracer::FlushCause::OtherCall);
      if (kind != CallKind::Metric) tracer->before_work_on(stream, per_thread_default);
    }
  CallStack& stack = call_stack();
  if (stack.depth == stack.states.size()) stack.states.push_back(std::make_unique<CallState>());
  CallState& state = *stack.states[stack.depth++];
  state.kind = kind;
  state.tracer = nullptr;
  state.record.clear();
  // hold() moves the record out, buffers and all: one allocation here instead of a
  // reallocation per doubling as the call adds its buffers.
  state.record.buffers.reserve(8);
  state.pending = nullptr;
  state.outputs.clear();
  state.stream = nullptr;
  state.per_thread_stream = false;
  state.dst = nullptr;
  state.bytes = 0;
  state.is_async = false;
  state.host_copy_hold = {};
  state.comm = nullptr;
  state.graph_exec = nullptr;
  state.raised_depth = state.raised_gemm = state.raised_launch = false;
  state.writes_known = state.writes_noted = state.writes_open = false;
  state.writes_only.clear();
  state.recalled.clear();
  *token = kTokenTag | stack.depth;
  return state;
}

namespace {
CallState* top_call(uint64_t token) {
  if ((token & kTokenTag) != kTokenTag) return nullptr;
  CallStack& stack = call_stack();
  const size_t depth = token & ~kTokenTag;
  if (depth == 0 || depth != stack.depth) return nullptr;
  return stack.states[depth - 1].get();
}

// The call returned: its noted writes are in stream order now (before any later hash).
void close_writes(CallState& call) {
  if (!call.writes_open) return;
  call.writes_open = false;
  call.tracer->writes_end(&call, !call.writes_known);
}
}  // namespace

LOCKSTEP_HOT CallState* returned_call(uint64_t token) {
  CallState* call = top_call(token);
  if (call != nullptr) close_writes(*call);
  return call;
}

LOCKSTEP_HOT void note_writes(CallState& call) {
  if (call.writes_noted) return;
  call.writes_noted = true;
  Tracer* tracer = call.tracer;
  // Nested calls are their enclosing call's; a metric copy writes host memory only.
  if (tracer == nullptr || !tracer->reuses_digests() || call.kind == CallKind::Nested ||
      call.kind == CallKind::Metric)
    return;
  if (call.writes_known)
    tracer->writes_begin(&call, call.outputs, call.writes_only);
  else
    tracer->unknown_writes_begin();
  call.writes_open = true;
  if (call.writes_known)  // after the write is noted: the bytes it leaves
    for (const auto& [region, digest] : call.recalled)
      tracer->region_recalled(&call, region, call.stream, call.per_thread_stream, digest);
}

LOCKSTEP_HOT void finish_call(CallState* state) {
  note_writes(*state);
  close_writes(*state);
  OpenApi& api = open_api();
  if (state->raised_depth) --api.depth;
  if (state->raised_gemm) --api.gemm_depth;
  if (state->raised_launch) --api.launch_depth;
  if (api.depth == 0) api.outer_api = 0;
  CallStack& stack = call_stack();
  if (stack.depth > 0) --stack.depth;
}

// ---- allocations ------------------------------------------------------------------------------
namespace {
Tracer* tracer_for_allocations() {
  if (!active()) return nullptr;
  return Tracer::get();
}

// Freed memory may come back holding other bytes (a pool trimmed and grown again): the
// allocation being freed, whose digests are then forgotten (none when digests are not reused).
std::optional<AllocationHit> freed_allocation(Tracer* t, CUdeviceptr ptr) {
  if (!t->reuses_digests()) return std::nullopt;
  return t->allocations().find(ptr);
}
void forget(Tracer* t, const AllocationHit& freed, CUdeviceptr ptr) {
  t->region_written(freed.base, ptr + freed.readable, freed.base);
}
}  // namespace

void on_alloc(CUdeviceptr ptr, size_t bytes) {
  self_time::Scope timed(self_time::Phase::Alloc);
  if (Tracer* t = tracer_for_allocations()) {
    t->allocations().add(ptr, bytes);
    t->region_allocated(ptr, bytes);
  }
}
void on_stream_alloc(CUdeviceptr ptr, size_t bytes, CUstream stream, bool per_thread_default) {
  self_time::Scope timed(self_time::Phase::Alloc);
  Tracer* t = tracer_for_allocations();
  if (t == nullptr) return;
  uint64_t capture_id = 0;
  const bool capturing = t->capturing(stream, per_thread_default, &capture_id);
  t->allocations().add(ptr, bytes, capturing);
  if (!capturing) t->region_allocated(ptr, bytes, /*from_pool=*/true);
}
void on_free(CUdeviceptr ptr) {
  self_time::Scope timed(self_time::Phase::Free);
  if (Tracer* t = tracer_for_allocations()) {
    t->flush_deferred(Tracer::FlushCause::Free);  // before the memory goes: hashes may read it
    if (const auto freed = freed_allocation(t, ptr)) forget(t, *freed, ptr);
    t->allocations().remove(ptr);
  }
}
bool on_stream_free(CUdeviceptr ptr, CUstream stream, bool per_thread_default) {
  self_time::Scope timed(self_time::Phase::Free);
  Tracer* t = tracer_for_allocations();
  if (t == nullptr) return false;
  // Digests of the freed bytes are forgotten now and again once the held-back free is made.
  const auto freed = freed_allocation(t, ptr);
  const bool taken =
      t->defer_free(ptr, freed ? ptr + freed->readable : ptr, stream, per_thread_default);
  if (!taken) t->flush_deferred(Tracer::FlushCause::Free);  // before the memory goes
  if (freed) t->region_freed_to_pool(freed->base, ptr + freed->readable);
  t->allocations().remove(ptr);
  return taken;
}
void on_va_reserve(CUdeviceptr ptr, size_t bytes) {
  if (Tracer* t = tracer_for_allocations()) t->allocations().reserve(ptr, bytes);
}
void on_va_free(CUdeviceptr ptr, size_t bytes) {
  if (Tracer* t = tracer_for_allocations()) {
    t->flush_deferred(Tracer::FlushCause::Free);
    t->region_written(ptr, ptr + bytes, 0);
    t->allocations().release_reservation(ptr, bytes);
  }
}
void on_map(CUdeviceptr ptr, size_t bytes) {
  if (Tracer* t = tracer_for_allocations()) {
    t->allocations().map(ptr, bytes);
    t->region_allocated(ptr, bytes);  // new physical memory behind these addresses
  }
}
void on_unmap(CUdeviceptr ptr, size_t bytes) {
  if (Tracer* t = tracer_for_allocations()) {
    t->flush_deferred(Tracer::FlushCause::Free);
    t->region_written(ptr, ptr + bytes, 0);
    t->allocations().unmap(ptr, bytes);
  }
}

void capture_begins() { hot_flags.capture_begun.store(true, std::memory_order_release); }

void stream_order_point() {
  if (inside_shim_call()) return;  // the shim's own event records (metrics) and syncs
  self_time::Scope timed(self_time::Phase::OrderPoint);
  if (Tracer* t = Tracer::existing()) t->flush_deferred(Tracer::FlushCause::OrderPoint);
}

HostWait stream_host_wait_begin(CUstream stream, bool per_thread_default, bool whole_context,
                                CUcontext context) {
  if (inside_shim_call()) return {};  // the shim's own syncs
  self_time::Scope timed(self_time::Phase::OrderPoint);
  if (Tracer* t = Tracer::existing())
    return t->hold_at_host_wait(stream, per_thread_default, whole_context, context);
  return {};
}

void stream_host_wait_end(const HostWait& wait, int result) {
  if (wait.issue_generation == 0 || result != CUDA_SUCCESS) return;
  if (Tracer* t = Tracer::existing()) t->host_saw_issue_done(wait.issue_generation);
}

void stream_event_recorded(CUevent event, CUstream stream, bool per_thread_default) {
  if (inside_shim_call()) return;  // the shim's own event records
  if (StreamSteps& rule = Tracer::stream_steps(); rule.enabled())
    rule.event_recorded(reinterpret_cast<uintptr_t>(event),
                        Tracer::stream_key(stream, per_thread_default));
}

void stream_event_waited(CUstream stream, bool per_thread_default, CUevent event) {
  if (inside_shim_call()) return;  // the shim's own waits
  if (StreamSteps& rule = Tracer::stream_steps(); rule.enabled())
    rule.event_waited(Tracer::stream_key(stream, per_thread_default),
                      reinterpret_cast<uintptr_t>(event));
}

}  // namespace lockstep::collectors

extern "C" int lockstep_capture_begun(void) {
  return lockstep::collectors::capture_begun() ? 1 : 0;
}
