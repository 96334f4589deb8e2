// Copies and sets: destination fingerprinted after the call (level full); small device-to-host
// copies become Metric records carrying the copied bytes (loss.item(), grad norms); a
// host-to-device copy's host source is fingerprinted on the CPU (level full).
#include <algorithm>
#include <cstring>

#include "collectors/call_stack.h"
#include "collectors/driver_api.h"
#include "collectors/events.h"
#include "collectors/metric_snapshots.h"
#include "collectors/staged_call.h"
#include "common/hot.h"
#include "hashing/fingerprint.h"

namespace lockstep::collectors {
namespace {

enum Direction : int {
  kHostToHost = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3,
  kDefault = 4
};

// Is `host` page-locked (cudaHostAlloc / registered)? Then an async copy into it completes later.
bool pinned(const void* host) {
  const Driver& d = driver();
  if (d.pointerGetAttribute == nullptr) return false;
  ShimCallGuard guard;
  CUmemorytype type{};
  return d.pointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                               reinterpret_cast<CUdeviceptr>(host)) == CUDA_SUCCESS &&
         type == CU_MEMORYTYPE_HOST;
}

// May the CPU read `source`, a copy's source outside the allocation map? Not when the driver
// says it is device memory (managed memory, another process's imported allocation: a
// default-direction copy resolved to host-to-device by the map alone). Pageable memory is unknown
// to the driver (an error here): host memory, as a host-to-device copy's API says.
bool host_readable(const void* source) {
  const Driver& d = driver();
  if (d.pointerGetAttribute == nullptr) return true;
  ShimCallGuard guard;
  CUmemorytype type{};
  return d.pointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                               reinterpret_cast<CUdeviceptr>(source)) != CUDA_SUCCESS ||
         type == CU_MEMORYTYPE_HOST;
}

// A host-to-device copy's source, as an input buffer "host src" fingerprinted here on the CPU
// with the same LSF1 digest the GPU gives. The source is valid now, at the call: a synchronous
// copy reads it during the call, a pageable asynchronous one is staged by the driver before the
// call returns, and a pinned one must not be written by the job until the copy is done. A copy
// captured into a graph reads its source at each replay, not now: not hashed. At most
// host_hash_bytes are read (a longer source: its first bytes, flagged clamped).
void add_host_source(Tracer* tracer, trace::Record* record, const MemoryOp& op) {
  const uint64_t cap = tracer->config().host_hash_bytes;
  if (cap == 0 || op.src == nullptr || op.bytes == 0) return;
  uint64_t capture_id = 0;
  if (tracer->capturing(op.stream, op.per_thread_stream, &capture_id)) return;
  if (!host_readable(op.src)) return;
  trace::BufferFingerprint entry;
  entry.role = trace::Role::In;
  entry.dtype = trace::DType::Bytes;
  entry.label = tracer->intern(trace::kHostSourceLabel);
  entry.bytes = std::min(op.bytes, cap);
  entry.flags = trace::kFingerprintValid | trace::kExtentExact;
  if (entry.bytes < op.bytes) entry.flags |= trace::kExtentClamped;
  entry.fingerprint = hashing::fingerprint(op.src, entry.bytes);
  record->buffers.push_back(entry);
}

// A copy's or set's identity into `r`: its kind, the API's name, seq, stream, step, thread and
// scope, and every field of its kind (a staged slot holds a stale record: nothing is cleared).
void stamp_memory_op(Tracer* tracer, trace::Record* r, const MemoryOp& op, int direction) {
  static_assert(trace::fields::Memset::kCount == 3 && trace::fields::Memcpy::kCount == 3,
                "a new Memset or Memcpy field: set it here");
  if (op.is_set) {
    tracer->stamp_literal(r, trace::RecordKind::Memset, op.api, op.stream, op.per_thread_stream);
    r->fields[trace::fields::Memset::value] = op.set_value;
    r->fields[trace::fields::Memset::bytes] = op.bytes;
    r->fields[trace::fields::Memset::is_async] = op.is_async;
  } else {
    tracer->stamp_literal(r, trace::RecordKind::Memcpy, op.api, op.stream, op.per_thread_stream);
    r->fields[trace::fields::Memcpy::direction] = static_cast<uint64_t>(direction);
    r->fields[trace::fields::Memcpy::bytes] = op.bytes;
    r->fields[trace::fields::Memcpy::is_async] = op.is_async;
  }
}

// Its buffer entry (allocation ordinal + offset): a set's or a copy's device destination, else a
// copy's device source (a host destination: the GPU cannot hash it; the device source is the
// content). With `hash` (level full, inside the step window) each is planned, into `outputs` or
// `inputs`, and a host source is fingerprinted here; without, both may be null.
void add_memory_buffers(Tracer* tracer, trace::Record* r, const MemoryOp& op,
                        const std::optional<AllocationHit>& dst_hit,
                        const std::optional<AllocationHit>& src_hit, bool hash,
                        std::vector<PlannedRegion>* outputs, std::vector<PlannedRegion>* inputs) {
  const uint64_t no_cap = UINT64_MAX;
  const bool dst_device = dst_hit.has_value(), src_device = src_hit.has_value();
  if (op.is_set) {
    tracer->add_buffer(r, outputs, tracer->intern_literal("dst"), trace::Role::Out,
                       trace::DType::Bytes, op.dst, op.bytes, dst_device, hash && dst_device,
                       no_cap, dst_hit);
  } else if (dst_device) {
    tracer->add_buffer(r, outputs, tracer->intern_literal("dst"), trace::Role::Out,
                       trace::DType::Bytes, op.dst, op.bytes, true, hash, no_cap, dst_hit);
    if (hash && !src_device) add_host_source(tracer, r, op);
  } else if (src_device) {
    tracer->add_buffer(r, inputs, tracer->intern_literal("src"), trace::Role::In,
                       trace::DType::Bytes, op.src, op.bytes, true, hash, no_cap, src_hit);
  }
}

// Below full a copy's or set's record is its identity and its buffer's place, nothing to hash:
// built in the writer's staging slot and committed before the real call, taken back if the call
// fails, as a broad launch's (kernels.cpp) and a GEMM's (gemm.cpp); not a call-stack entry
// copied into the writer at its end (issue #34: a launch-bound PyTorch step's 34 sets, staged,
// took its calls' mean end from 57-68 to 40-48 ns on an H100's host; docs/performance.md).
constexpr uint64_t kStagedMemoryToken = 0xb40ad00000000004ull;  // gemm.cpp's is ...0003
thread_local constinit StagedCall t_staged_memory;

// A token for staged_memory_end, or 0 where the writer refuses to stage (then the general path).
LOCKSTEP_HOT uint64_t staged_memory_begin(Tracer* tracer, const MemoryOp& op, int direction,
                                          const std::optional<AllocationHit>& dst_hit,
                                          const std::optional<AllocationHit>& src_hit) {
  StagedCall& slot = t_staged_memory;
  if (slot.open) return 0;  // a copy inside a copy: the general path's, as before
  trace::Record* staged = tracer->stage();
  if (staged == nullptr) return 0;
  stamp_memory_op(tracer, staged, op, direction);
  add_memory_buffers(tracer, staged, op, dst_hit, src_hit, /*hash=*/false, nullptr, nullptr);
  slot.opened(tracer, tracer->commit_staged());
  return kStagedMemoryToken;
}

// False for any token but staged_memory_begin's (the call is then closed).
LOCKSTEP_HOT bool staged_memory_end(uint64_t token, int result) {
  if (token != kStagedMemoryToken) return false;
  t_staged_memory.close(result);
  return true;
}

}  // namespace

LOCKSTEP_HOT uint64_t memory_op_begin(const MemoryOp& op) {
  if (!active()) return 0;
  const OpenApi& api = open_api();
  if (api.depth > 0 || api.launch_depth > 0) return 0;  // a library's own copy
  Tracer* tracer = Tracer::get();
  if (tracer == nullptr) return 0;
  // Each pointer looked up once, under one shared lock, and its hit kept for its buffer entry
  // (a DDP step's ~190 bucket copies each took three lookups and two locks).
  std::optional<AllocationHit> dst_hit, src_hit;
  {
    AllocationMap::Reader reader(tracer->allocations());
    dst_hit = reader.find(reinterpret_cast<uintptr_t>(op.dst));
    if (!op.is_set) src_hit = reader.find(reinterpret_cast<uintptr_t>(op.src));
  }
  const bool dst_device = dst_hit.has_value();
  const bool src_device = src_hit.has_value();
  int direction = op.direction;
  if (direction == kDefault || direction < 0 || direction > kDefault)
    direction = dst_device ? (src_device ? kDeviceToDevice : kHostToDevice)
                           : (src_device ? kDeviceToHost : kHostToHost);
  const Config& config = tracer->config();
  const bool metric = !op.is_set && direction == kDeviceToHost && config.metric_bytes > 0 &&
                      op.bytes > 0 && op.bytes <= config.metric_bytes;
  if (!metric && tracer->level() < Level::Broad) return 0;
  if (!metric && tracer->level() != Level::Full) {  // identity only: staged, as launches are
    if (const uint64_t token = staged_memory_begin(tracer, op, direction, dst_hit, src_hit);
        token != 0)
      return token;
  }

  uint64_t token = 0;
  CallState& call = push_call(metric ? CallKind::Metric : CallKind::Memory, &token, op.stream,
                              op.per_thread_stream);
  call.tracer = tracer;
  call.stream = op.stream;
  call.per_thread_stream = op.per_thread_stream;
  call.dst = op.dst;
  call.src = op.src;
  call.bytes = op.bytes;
  call.is_async = op.is_async;
  trace::Record& r = call.record;
  if (metric) {
    // It writes host memory only: the deferred hashes of its stream may wait past it.
    call.host_copy_hold = tracer->before_host_copy(op.stream, op.per_thread_stream);
    tracer->stamp_literal(&r, trace::RecordKind::Metric, op.api, op.stream, op.per_thread_stream);
    r.fields[trace::fields::Metric::bytes] = op.bytes;
    r.fields[trace::fields::Metric::dtype_hint] = 0;  // the API does not say
    return token;
  }
  const bool hash =
      tracer->level() == Level::Full && tracer->fingerprint_step(Tracer::steps().current());
  std::vector<PlannedRegion> inputs;
  stamp_memory_op(tracer, &r, op, direction);
  add_memory_buffers(tracer, &r, op, dst_hit, src_hit, hash, &call.outputs, &inputs);
  // The destination is all it writes: planned when hashed, or host memory.
  call.writes_known = hash || !dst_device;
  start_fingerprints(call, inputs);
  return token;
}

LOCKSTEP_HOT void memory_op_end(uint64_t token, int result) {
  if (staged_memory_end(token, result)) return;
  CallState* call = returned_call(token);
  if (call == nullptr) return;
  Tracer* tracer = call->tracer;
  if (call->kind == CallKind::Metric && result == 0) {
    trace::Record& r = call->record;
    uint64_t capture_id = 0;
    const bool later = call->is_async && pinned(call->dst);
    if (!later) {
      // Synchronous, or a pageable destination: the bytes are there now.
      const auto* bytes = static_cast<const uint8_t*>(call->dst);
      r.payload.assign(bytes, bytes + call->bytes);
      tracer->append(r);
      // The host has seen its stream's work up to the copy done.
      tracer->host_copy_returned(call->stream, call->per_thread_stream, call->host_copy_hold);
    } else if (!tracer->capturing(call->stream, call->per_thread_stream, &capture_id)) {
      // Async into pinned memory: the job may overwrite its buffer before we read it, so
      // read our own stream-ordered snapshot of the same device bytes once the stream passed
      // it (the job's buffer only when no snapshot slot could be had).
      const uint64_t size = call->bytes;
      const uint8_t* snapshot = snapshot_metric(call->stream, call->per_thread_stream,
                                                reinterpret_cast<CUdeviceptr>(call->src), size);
      const auto* bytes = snapshot != nullptr ? snapshot : static_cast<const uint8_t*>(call->dst);
      tracer->when_stream_done(call->stream, call->per_thread_stream, r.step,
                               [tracer, record = r, bytes, size, snapshot]() mutable {
                                 record.payload.assign(bytes, bytes + size);
                                 release_metric_snapshot(snapshot);
                                 tracer->append(record);
                               });
    } else {
      tracer->append(r);  // captured: no bytes to read now
    }
    uint32_t finished = 0;
    if (Tracer::steps().on_metric(&finished))
      tracer->step_advanced(finished, "metric", static_cast<uint64_t>(MarkerSource::Metric));
    // The metric copy ends its stream's work of the step (stream_steps.h).
    if (StreamSteps& rule = Tracer::stream_steps(); rule.enabled())
      rule.order_point(Tracer::stream_key(call->stream, call->per_thread_stream));
  } else if (call->kind == CallKind::Memory) {
    if (call->pending != nullptr) {
      // An async operation's destination waits for the next kernel on its stream. A synchronous
      // one is hashed now: the host may touch managed memory right after, with no call between.
      if (result == 0 && call->is_async)
        tracer->defer_outputs(call->pending, call->stream, call->per_thread_stream, call->outputs,
                              /*not_capturing=*/false);
      else if (result == 0)
        tracer->fingerprint(call->pending, call->stream, call->per_thread_stream,
                            call->outputs.data(), call->outputs.size());
      tracer->release(call->pending, result == 0);
    } else if (result == 0) {
      tracer->append(call->record);
    }
  }
  finish_call(call);
}

}  // namespace lockstep::collectors
