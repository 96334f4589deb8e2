// NCCL collectives and point-to-point: exact send/recv extents, stable communicator identity,
// group queuing of output fingerprints, non-blocking communicators.
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "collectors/call_stack.h"
#include "collectors/driver_api.h"
#include "collectors/events.h"
#include "collectors/extents.h"
#include "collectors/group_queue.h"
#include "collectors/nccl_choices.h"

namespace lockstep::collectors {
namespace {

using F = trace::fields::Collective;
constexpr auto kEnqueueTimeout = std::chrono::seconds(30);

// Output fingerprints waiting for the outermost ncclGroupEnd; with no fingerprints (outside
// the step window) the record itself, which NCCL's choices reach only when the group ends.
struct DeferredOutputs {
  Tracer* tracer = nullptr;
  PendingRecord* pending = nullptr;
  std::vector<PlannedRegion> outputs;
  CUstream stream = nullptr;
  ncclComm_t comm = nullptr;
  NcclOp op = NcclOp::AllReduce;
  const void* send = nullptr;
  const void* recv = nullptr;
  std::optional<trace::Record> record;  // when pending is null
};

GroupQueue<DeferredOutputs>& group_queue() {
  thread_local auto* queue = new GroupQueue<DeferredOutputs>;  // survives exit-time hooks
  return *queue;
}

ncclResult_t async_error(ncclComm_t comm) {
  using Fn = ncclResult_t (*)(ncclComm_t, ncclResult_t*);
  static auto get = reinterpret_cast<Fn>(resolve("ncclCommGetAsyncError"));
  if (get == nullptr) return ncclSuccess;
  ncclResult_t state = ncclSuccess;
  ShimCallGuard guard;
  if (get(comm, &state) != ncclSuccess) return ncclInternalError;
  return state;
}

void complete(DeferredOutputs& item, ncclResult_t result) {
  if (item.pending == nullptr) {
    if (item.record && (result == ncclSuccess || result == ncclInProgress))
      item.tracer->append(*item.record);
    return;
  }
  if (result == ncclInProgress)
    result = wait_until_enqueued([&] { return async_error(item.comm); }, kEnqueueTimeout);
  if (result == ncclSuccess) {
    item.tracer->fingerprint(item.pending, item.stream, false, item.outputs.data(),
                             item.outputs.size());
  } else if (item.pending != nullptr) {
    for (const PlannedRegion& region : item.outputs)
      item.pending->record.buffers[region.buffer_index].flags |= trace::kFingerprintDropped;
  }
  item.tracer->release(item.pending);
}

// Rank and size of a communicator from NCCL itself.
bool query_rank(ncclComm_t comm, int* nranks, int* rank) {
  using Fn = ncclResult_t (*)(const ncclComm_t, int*);
  static auto count = reinterpret_cast<Fn>(resolve("ncclCommCount"));
  static auto user_rank = reinterpret_cast<Fn>(resolve("ncclCommUserRank"));
  if (count == nullptr || user_rank == nullptr || comm == nullptr) return false;
  ShimCallGuard guard;
  return count(comm, nranks) == ncclSuccess && user_rank(comm, rank) == ncclSuccess;
}

}  // namespace

uint64_t nccl_begin(const NcclCall& c) {
  if (!active()) return 0;
  Tracer* tracer = Tracer::get();
  if (tracer == nullptr || tracer->level() < Level::Broad) return 0;
  uint64_t token = 0;
  CallState& call = push_call(CallKind::Nccl, &token, c.stream);
  OpenApi& api = open_api();
  ++api.depth;
  call.raised_depth = true;
  if (api.outer_api == 0) api.outer_api = static_cast<uint64_t>(trace::RecordKind::Collective);
  call.tracer = tracer;
  call.stream = c.stream;
  call.comm = c.comm;
  call.nccl_op = c.op;
  call.nccl_send = c.op == NcclOp::Bcast ? c.recv : c.send;
  call.nccl_recv = c.recv;

  CommInfo comm = tracer->comms().next_operation(c.comm);
  if (comm.nranks == 0 && query_rank(c.comm, &comm.nranks, &comm.rank))
    tracer->comms().set_rank(c.comm, comm.nranks, comm.rank);
  const void* send = c.op == NcclOp::Bcast ? c.recv : c.send;
  const NcclExtents e = nccl_extents(c.op, c.count, nccl_type_bytes(c.datatype), comm.nranks,
                                     comm.rank, c.root_or_peer, send, c.recv);
  trace::Record& r = call.record;
  tracer->stamp_literal(&r, trace::RecordKind::Collective, c.api, c.stream, false);
  r.fields[F::comm_id] = comm.id;
  r.fields[F::comm_seq] = comm.operations;
  r.fields[F::count] = c.count;
  r.fields[F::datatype] = static_cast<uint64_t>(c.datatype);
  const bool reduces =
      c.op == NcclOp::AllReduce || c.op == NcclOp::Reduce || c.op == NcclOp::ReduceScatter;
  r.fields[F::redop] = reduces ? static_cast<uint64_t>(c.redop) : UINT64_MAX;
  r.fields[F::root_or_peer] = nccl_op_has_root(c.op) || nccl_op_has_peer(c.op)
                                  ? static_cast<uint64_t>(c.root_or_peer)
                                  : UINT64_MAX;
  r.fields[F::nranks] = static_cast<uint64_t>(comm.nranks);
  r.fields[F::comm_rank] = static_cast<uint64_t>(comm.rank);
  r.fields[F::in_place] = e.in_place;

  // Collective inputs and outputs are fingerprinted at broad and full (inside the step window).
  const bool hash = tracer->fingerprint_step(r.step);
  const trace::DType dtype = nccl_dtype(c.datatype);
  std::vector<PlannedRegion> inputs;
  tracer->add_buffer(&r, &inputs, tracer->intern_literal("send"), trace::Role::In, dtype, send,
                     e.send_bytes, true, hash);
  tracer->add_buffer(&r, &call.outputs, tracer->intern_literal("recv"), trace::Role::Out, dtype,
                     c.recv, e.recv_bytes, true, hash);
  call.writes_known = hash;  // recv is all it writes
  // Inside a group nothing is on the stream yet, so the inputs' hashes still precede it.
  start_fingerprints(call, inputs);
  choices_open();  // NCCL's choices for this call arrive before nccl_end (nccl_choices.h)
  return token;
}

void nccl_end(uint64_t token, ncclResult_t result) {
  CallState* call = returned_call(token);
  if (call == nullptr) return;
  if (call->kind == CallKind::Nccl) {
    Tracer* tracer = call->tracer;
    const bool in_group = group_queue().in_group();
    // Ungrouped, NCCL planned it inside this call: its choice is queued (and the only one).
    apply_choice(call->live_record(), call->nccl_op, call->nccl_send, call->nccl_recv, !in_group);
    choices_close();
    const bool failed = result != ncclSuccess && result != ncclInProgress;
    DeferredOutputs item{tracer,          call->pending,   std::move(call->outputs),
                         call->stream,    call->comm,      call->nccl_op,
                         call->nccl_send, call->nccl_recv, std::nullopt};
    if (call->pending == nullptr) {
      if (failed) {
        // nothing ran: no record
      } else if (in_group) {
        item.record = std::move(call->record);  // appended when the group ends, with NCCL's choice
        group_queue().defer(std::move(item));
      } else {
        tracer->append(call->record);
      }
    } else if (failed || !group_queue().defer(item)) {
      complete(item, result);
    }
  }
  finish_call(call);
}

void nccl_group_start() {
  if (inside_shim_call()) return;
  group_queue().start();
  choices_open();
  ++open_api().nccl_group;
}

void nccl_group_end(ncclResult_t result) {
  if (inside_shim_call()) return;
  OpenApi& api = open_api();
  if (api.nccl_group > 0) --api.nccl_group;
  for (DeferredOutputs& item : group_queue().end()) {
    // NCCL planned the group's collectives inside the real ncclGroupEnd just returned.
    trace::Record& record = item.pending != nullptr ? item.pending->record : *item.record;
    apply_choice(record, item.op, item.send, item.recv, false);
    // An error of the group: the outputs were not produced.
    complete(item, result == ncclSuccess || result == ncclInProgress ? result : ncclInternalError);
  }
  choices_close();
}

void nccl_comm_created(const NcclCommCreated& created) {
  if (!active() || created.comm == nullptr) return;
  Tracer* tracer = Tracer::get();
  if (tracer == nullptr) return;
  int nranks = created.nranks, rank = created.rank;
  if (nranks <= 0) query_rank(created.comm, &nranks, &rank);
  const std::string api = created.api != nullptr ? created.api : "";
  uint64_t id;
  if (created.parent != nullptr) {
    id = tracer->comms().child_created(created.comm, created.parent, created.color, nranks, rank);
  } else {
    id = tracer->comms().root_created(created.comm, nranks, rank, api,
                                      group_queue().in_group() || api == "ncclCommInitAll");
    // The header had no rank (no launcher variable): say what NCCL says, once.
    bool expected = false;
    if (nranks > 0 && tracer->rank_known.compare_exchange_strong(expected, true))
      tracer->warn(WarningCode::RankFromNccl, static_cast<uint64_t>(rank),
                   fmt::format("rank {} of {} from NCCL communicator {}", rank, nranks, id));
  }
  tracer->debug(fmt::format("{}: communicator {:#x} ({} ranks, rank {})", api, id, nranks, rank));
}

void nccl_comm_destroyed(ncclComm_t comm) {
  if (Tracer* tracer = Tracer::existing()) tracer->comms().destroyed(comm);
}

}  // namespace lockstep::collectors
