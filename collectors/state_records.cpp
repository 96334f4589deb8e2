// State records (trace/record_kinds.def, State): fingerprints of tensors the job names, asked
// for through the C API (collectors/lockstep.h): the model's parameters after every optimizer
// step (python/lockstep/_torch_hooks.py arms that in a PyTorch job with no code change), or any
// tensor a job wants dated. They let broad, which fingerprints no kernel, date the earliest step
// whose state differs (a difference that bf16 rounding keeps out of the loss for steps). Hashed
// on the job's stream after the work queued there, in one launch for all of a call's tensors:
// nothing synchronizes.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectors/events.h"
#include "collectors/lockstep.h"
#include "collectors/runtime.h"
#include "common/self_time.h"

namespace lockstep::collectors {
namespace {

// What this thread's last call was given and looked up. A PyTorch job passes the same tensors in
// the same order every optimizer step (python/lockstep/_shim.py, Batch): a name that reads the
// same keeps its id, a pointer its allocation while the allocation map has not changed since
// (AllocationMap::generation). Each lookup is a hash-table or tree walk on lines the job's own
// work evicted since the last step. Entries of a call are rewritten where they differ.
struct Lookups {
  const Tracer* tracer = nullptr;  // ids are per trace file: a forked child's tracer starts over
  uint64_t generation = 0;
  std::vector<const void*> ptrs;
  std::vector<std::string> names;
  std::vector<trace::StringId> ids;
  std::vector<std::optional<AllocationHit>> hits;
};

void record_state(size_t n, const void* const* ptrs, const unsigned long long* bytes,
                  const char* const* names, void* stream_handle, int kind) {
  if (n == 0 || ptrs == nullptr || bytes == nullptr || inside_shim_call() || !active()) return;
  Tracer* tracer = Tracer::get();
  if (tracer == nullptr || tracer->level() < Level::Broad) return;
  self_time::Scope timed(self_time::Phase::State);
  // Like any traced call: a kernel's deferred output hashes go first (they may read what a later
  // call of the job overwrites once this one returned).
  tracer->flush_deferred(Tracer::FlushCause::OtherCall);
  auto stream = static_cast<CUstream>(stream_handle);
  const bool hash = tracer->fingerprint_step(Tracer::steps().current());
  const trace::StringId label = tracer->intern("value");
  // Reused from call to call (once per optimizer step, the same tensors): the plans keep their
  // capacity, and the records to hold are held under one lock. Heap, never freed (exit).
  thread_local auto* held_buffer = new std::vector<trace::Record>;
  thread_local auto* pendings_buffer = new std::vector<PendingRecord*>;
  thread_local auto* plans_buffer = new std::vector<std::vector<PlannedRegion>>;
  thread_local auto* lookups_buffer = new Lookups;
  Lookups& known = *lookups_buffer;
  const uint64_t generation = tracer->allocations().generation();
  const bool still_known = known.tracer == tracer && known.generation == generation;
  known.tracer = tracer, known.generation = generation;
  if (known.ptrs.size() < n) {
    known.ptrs.resize(n), known.names.resize(n), known.ids.resize(n), known.hits.resize(n);
  }
  std::vector<trace::Record>& held = *held_buffer;
  std::vector<PendingRecord*>& pendings = *pendings_buffer;
  std::vector<std::vector<PlannedRegion>>& plans = *plans_buffer;
  if (held.size() < n) held.resize(n);
  if (plans.size() < n) plans.resize(n);
  // The call's records differ only in seq, name and size: one identity (stream, step, thread,
  // scope), and n consecutive seqs taken at once. Each of them is appended below, held or not.
  thread_local auto* identity_buffer = new trace::Record;
  trace::Record& identity = *identity_buffer;
  identity.clear();
  const uint64_t first_seq = tracer->next_seqs(n);
  tracer->stamp_with_seq(&identity, trace::RecordKind::State, "", stream, false, first_seq);
  size_t planned = 0;  // held[k] with plans[k], k < planned
  for (size_t i = 0; i < n; ++i) {
    trace::Record& record = held[planned];
    record.copy_from(identity);
    record.seq = first_seq + i;
    const char* name = names != nullptr && names[i] != nullptr ? names[i] : "state";
    if (!still_known || known.ptrs[i] != ptrs[i] || known.names[i] != name) {
      known.ptrs[i] = ptrs[i];
      known.names[i] = name;
      known.ids[i] = tracer->intern(name);
      known.hits[i] = tracer->allocations().find(reinterpret_cast<uintptr_t>(ptrs[i]));
    }
    record.name = known.ids[i];
    record.fields[trace::fields::State::bytes] = bytes[i];
    record.fields[trace::fields::State::state_kind] = static_cast<uint64_t>(kind < 0 ? 3 : kind);
    std::vector<PlannedRegion>& plan = plans[planned];
    plan.clear();
    tracer->add_buffer(&record, &plan, label, trace::Role::Out, trace::DType::Bytes, ptrs[i],
                       bytes[i], /*exact=*/true, hash, UINT64_MAX, known.hits[i]);
    if (plan.empty()) {  // outside the step window, or nothing to read: identity only
      tracer->append(record);
      continue;
    }
    ++planned;
  }
  pendings.assign(planned, nullptr);
  tracer->hold_many(held.data(), planned, pendings.data());
  for (size_t k = 0; k < planned; ++k) {
    if (pendings[k] != nullptr) continue;  // refused (the pending ring is full): left alone
    for (auto& entry : held[k].buffers) entry.flags |= trace::kFingerprintDropped;
    tracer->append(held[k]);
  }
  // Refused ones (null) are skipped by both.
  tracer->fingerprint_batch(stream, false, pendings.data(), plans.data(), planned);
  tracer->release_many(pendings.data(), planned);
}

}  // namespace
}  // namespace lockstep::collectors

extern "C" void lockstep_fingerprint(const void* ptr, unsigned long long bytes, const char* name,
                                     void* stream, int kind) {
  lockstep::collectors::record_state(1, &ptr, &bytes, &name, stream, kind);
}

extern "C" void lockstep_fingerprint_many(unsigned long long n, const void* const* ptrs,
                                          const unsigned long long* bytes,
                                          const char* const* names, void* stream, int kind) {
  lockstep::collectors::record_state(static_cast<size_t>(n), ptrs, bytes, names, stream, kind);
}
