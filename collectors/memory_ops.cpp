// Copies and sets: destination fingerprinted after the call (level full); small device-to-host
// copies become Metric records carrying the copied bytes (loss.item(), grad norms); a
// host-to-device copy's host source is fingerprinted on the CPU (level full).
#include <algorithm>
#include <cstring>

#include "collectors/call_stack.h"
#include "collectors/driver_api.h"
#include "collectors/events.h"
#include "collectors/metric_snapshots.h"
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

  uint64_t token = 0;
  CallState& call = push_call(metric ? CallKind::Metric : CallKind::Memory, &token);
  call.tracer = tracer;
  call.stream = op.stream;
  call.per_thread_stream = op.per_thread_stream;
  call.dst = op.dst;
  call.src = op.src;
  call.bytes = op.bytes;
  call.is_async = op.is_async;
  trace::Record& r = call.record;
  if (metric) {
    tracer->stamp_literal(&r, trace::RecordKind::Metric, op.api, op.stream, op.per_thread_stream);
    r.fields[trace::fields::Metric::bytes] = op.bytes;
    r.fields[trace::fields::Metric::dtype_hint] = 0;  // the API does not say
    return token;
  }
  const bool hash =
      tracer->level() == Level::Full && tracer->fingerprint_step(Tracer::steps().current());
  std::vector<PlannedRegion> inputs;
  const uint64_t no_cap = UINT64_MAX;
  if (op.is_set) {
    tracer->stamp_literal(&r, trace::RecordKind::Memset, op.api, op.stream, op.per_thread_stream);
    r.fields[trace::fields::Memset::value] = op.set_value;
    r.fields[trace::fields::Memset::bytes] = op.bytes;
    r.fields[trace::fields::Memset::is_async] = op.is_async;
    tracer->add_buffer(&r, &call.outputs, tracer->intern_literal("dst"), trace::Role::Out,
                       trace::DType::Bytes, op.dst, op.bytes, dst_device, hash && dst_device,
                       no_cap, dst_hit);
  } else {
    tracer->stamp_literal(&r, trace::RecordKind::Memcpy, op.api, op.stream, op.per_thread_stream);
    r.fields[trace::fields::Memcpy::direction] = static_cast<uint64_t>(direction);
    r.fields[trace::fields::Memcpy::bytes] = op.bytes;
    r.fields[trace::fields::Memcpy::is_async] = op.is_async;
    if (dst_device) {
      tracer->add_buffer(&r, &call.outputs, tracer->intern_literal("dst"), trace::Role::Out,
                         trace::DType::Bytes, op.dst, op.bytes, true, hash, no_cap, dst_hit);
      if (hash && !src_device) add_host_source(tracer, &r, op);
    } else if (src_device) {
      // Host destination: the GPU cannot hash it; the device source is the content.
      tracer->add_buffer(&r, &inputs, tracer->intern_literal("src"), trace::Role::In,
                         trace::DType::Bytes, op.src, op.bytes, true, hash, no_cap, src_hit);
    }
  }
  // The destination is all it writes: planned when hashed, or host memory.
  call.writes_known = hash || !dst_device;
  start_fingerprints(call, inputs);
  return token;
}

LOCKSTEP_HOT void memory_op_end(uint64_t token, int result) {
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
