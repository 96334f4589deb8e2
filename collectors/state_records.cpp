// State records (trace/record_kinds.def, State): fingerprints of tensors the job names, asked
// for through the C API (collectors/lockstep.h): the model's parameters after every optimizer
// step (python/lockstep/_torch_hooks.py arms that in a PyTorch job with no code change), or any
// tensor a job wants dated. They let broad, which fingerprints no kernel, date the earliest step
// whose state differs (a difference that bf16 rounding keeps out of the loss for steps). Hashed
// on the job's stream after the work queued there, in one launch for all of a call's tensors:
// nothing synchronizes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectors/events.h"
#include "collectors/lockstep.h"
#include "collectors/runtime.h"
#include "common/self_time.h"

namespace lockstep::collectors {
namespace {

// What this thread's last call was given and looked up. A PyTorch job passes the same tensors in
// the same order every optimizer step (python/lockstep/_shim.py, Batch): a name that reads the
// same keeps its id, a pointer its allocation while no change of the allocation map may have
// altered it (AllocationMap::generation: not a new allocation elsewhere, which the job makes
// every step). Each lookup is a hash-table or tree walk on lines the job's own work evicted since
// the last step. Entries of a call are rewritten where they differ; an empty hit is not kept.
// And what the last call made of them: a call that repeats it (the same tensors, sizes and names,
// every lookup holding, the same answer of the step window) takes its buffer entries, parts and
// regions as they were, instead of building 77 entries and looking for repeated regions again.
struct Lookups {
  const Tracer* tracer = nullptr;  // ids are per trace file: a forked child's tracer starts over
  uint64_t generation = 0;
  std::vector<const void*> ptrs;
  std::vector<std::string> names;
  const char* const* names_array = nullptr;  // the last call's `names` argument
  std::vector<trace::StringId> ids;
  std::vector<std::optional<AllocationHit>> hits;
  // The last call's outcome, for `made` tensors (0: none kept).
  size_t made = 0;
  bool hashed = false;  // fingerprint_step's answer then
  std::vector<unsigned long long> bytes;
  std::vector<trace::BufferFingerprint> buffers;
  std::vector<StatePart> parts;
  std::vector<PlannedRegion> plan;
  bool distinct = false;  // no region twice in `plan` (tied weights): none looked up among them
};

// Whether the call's tensors are the last call's, as `known` holds them. `same_names`: the
// caller promised (LOCKSTEP_SAME_NAMES) that an unchanged `names` array holds unchanged strings.
bool repeats_last_call(const Lookups& known, const Tracer* tracer, uint64_t generation, bool hash,
                       size_t n, const void* const* ptrs, const unsigned long long* bytes,
                       const char* const* names, bool same_names) {
  if (known.made != n || known.tracer != tracer || known.generation != generation ||
      known.hashed != hash)
    return false;
  if (std::memcmp(known.ptrs.data(), ptrs, n * sizeof(*ptrs)) != 0 ||
      std::memcmp(known.bytes.data(), bytes, n * sizeof(*bytes)) != 0)
    return false;
  const bool read_names = !same_names || names == nullptr || names != known.names_array;
  for (size_t i = 0; i < n; ++i) {
    if (!known.hits[i]) return false;  // looked up again each call: an allocation may come
    if (!read_names) continue;
    const char* name = names != nullptr && names[i] != nullptr ? names[i] : "state";
    if (known.names[i] != name) return false;
  }
  return true;
}

// No (pointer, extent) twice among the regions.
bool distinct_regions(const std::vector<PlannedRegion>& plan) {
  std::vector<std::pair<uint64_t, uint64_t>> keys;
  keys.reserve(plan.size());
  for (const PlannedRegion& r : plan) keys.emplace_back(r.ptr, r.bytes);
  std::sort(keys.begin(), keys.end());
  return std::adjacent_find(keys.begin(), keys.end()) == keys.end();
}

// The call's buffer entries (into `batch`), parts and regions (into known.parts and known.plan),
// built tensor by tensor (looked up where the last call's lookups do not hold), and kept in
// `known` for a call that repeats this one.
void describe_tensors(Tracer* tracer, Lookups& known, uint64_t generation, bool hash, size_t n,
                      const void* const* ptrs, const unsigned long long* bytes,
                      const char* const* names, trace::Record* batch) {
  std::vector<StatePart>* parts = &known.parts;
  std::vector<PlannedRegion>* plan = &known.plan;
  const trace::StringId label = tracer->intern("value");
  const bool same_tracer = known.tracer == tracer;
  const bool hits_hold = same_tracer && known.generation == generation;
  known.tracer = tracer, known.generation = generation;
  if (known.ptrs.size() < n) {
    known.ptrs.resize(n), known.names.resize(n), known.ids.resize(n), known.hits.resize(n);
  }
  parts->clear();
  plan->clear();
  // The held record's vectors come from a spare pending record, which other kinds' records
  // used too: grown once here, not entry by entry.
  batch->buffers.reserve(n), parts->reserve(n), plan->reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const char* name = names != nullptr && names[i] != nullptr ? names[i] : "state";
    if (!same_tracer || known.names[i] != name) {
      known.names[i] = name;
      known.ids[i] = tracer->intern(name);
    }
    if (!hits_hold || known.ptrs[i] != ptrs[i] || !known.hits[i]) {
      known.ptrs[i] = ptrs[i];
      known.hits[i] = tracer->allocations().find(reinterpret_cast<uintptr_t>(ptrs[i]));
    }
    const size_t entries = batch->buffers.size();
    tracer->add_buffer(batch, plan, label, trace::Role::Out, trace::DType::Bytes, ptrs[i],
                       bytes[i], /*exact=*/true, hash, UINT64_MAX, known.hits[i]);
    const bool entry = batch->buffers.size() > entries;  // none for a null or empty tensor
    parts->push_back({known.ids[i], bytes[i], entry});
  }
  known.made = n;
  known.hashed = hash;
  known.bytes.assign(bytes, bytes + n);
  known.buffers.assign(batch->buffers.begin(), batch->buffers.end());
  known.distinct = distinct_regions(*plan);
}

void record_state(size_t n, const void* const* ptrs, const unsigned long long* bytes,
                  const char* const* names, void* stream_handle, int kind) {
  const bool same_names = kind >= 0 && (kind & LOCKSTEP_SAME_NAMES) != 0;
  if (kind >= 0) kind &= ~LOCKSTEP_SAME_NAMES;
  if (n == 0 || ptrs == nullptr || bytes == nullptr || inside_shim_call() || !active()) return;
  Tracer* tracer = Tracer::get();
  if (tracer == nullptr || tracer->level() < Level::Broad) return;
  self_time::Scope timed(self_time::Phase::State);
  // Like any traced call: a kernel's deferred output hashes go first (they may read what a later
  // call of the job overwrites once this one returned).
  tracer->flush_deferred(Tracer::FlushCause::OtherCall);
  auto stream = static_cast<CUstream>(stream_handle);
  const bool hash = tracer->fingerprint_step(Tracer::steps().current());
  // Reused from call to call (once per optimizer step, the same tensors): the buffers keep
  // their capacity. Heap, never freed (exit).
  thread_local auto* lookups_buffer = new Lookups;
  Lookups& known = *lookups_buffer;
  const uint64_t generation = tracer->allocations().generation();
  // The call's records differ only in seq, name and size: one identity (stream, step, thread,
  // scope), and n consecutive seqs taken at once. Fingerprinted, the call is one held record:
  // `batch` (that identity, with the n tensors' entries as its buffers) and its parts, which
  // the collector's thread turns into the n records once the digests arrived
  // (Tracer::append_state_parts). Building, holding and appending 77 records on the job's
  // thread was most of a PyTorch step's state call (issue #34).
  thread_local auto* batch_buffer = new trace::Record;
  thread_local auto* parts_buffer = new std::vector<StatePart>;
  trace::Record& batch = *batch_buffer;
  std::vector<StatePart>& parts = *parts_buffer;  // the held record's, swapped into it
  batch.clear();
  const uint64_t first_seq = tracer->next_seqs(n);
  tracer->stamp_with_seq(&batch, trace::RecordKind::State, "", stream, false, first_seq);
  batch.fields[trace::fields::State::state_kind] = static_cast<uint64_t>(kind < 0 ? 3 : kind);
  if (repeats_last_call(known, tracer, generation, hash, n, ptrs, bytes, names, same_names))
    batch.buffers.assign(known.buffers.begin(), known.buffers.end());
  else
    describe_tensors(tracer, known, generation, hash, n, ptrs, bytes, names, &batch);
  known.names_array = names;  // read or described, or promised: the next promise is about it
  parts.assign(known.parts.begin(), known.parts.end());
  const std::vector<PlannedRegion>& plan = known.plan;
  if (plan.empty()) {  // outside the step window, or nothing to read: identities only
    tracer->append_state_parts(batch, parts);
    return;
  }
  PendingRecord* pending = tracer->hold(std::move(batch));
  if (pending == nullptr) {  // the pending ring is full: recorded, fingerprints dropped
    for (auto& e : batch.buffers) e.flags |= trace::kFingerprintDropped;
    tracer->append_state_parts(batch, parts);
    return;
  }
  pending->state_parts.swap(parts);  // before the enqueue: the collector reads them after it
  if (known.distinct)  // no tensor twice (tied weights): none is looked up among the others
    tracer->fingerprint(pending, stream, false, plan.data(), plan.size());
  else
    tracer->fingerprint_repeating(pending, stream, plan.data(), plan.size());
  tracer->release(pending);
}

}  // namespace

void Tracer::append_state_parts(const trace::Record& batch, const std::vector<StatePart>& parts) {
  // On the collector's thread, one record reused for the n (its buffer keeps its capacity).
  thread_local auto* record_buffer = new trace::Record;  // never freed (exit)
  trace::Record& record = *record_buffer;
  record.copy_identity(batch);
  record.payload.clear();
  size_t next = 0;  // batch.buffers' next entry
  for (size_t k = 0; k < parts.size(); ++k) {
    const StatePart& part = parts[k];
    record.seq = batch.seq + k;  // the call's consecutive seqs, from the batch's
    record.name = part.name;
    record.fields[trace::fields::State::bytes] = part.bytes;
    record.buffers.clear();
    if (part.entry && next < batch.buffers.size()) record.buffers.push_back(batch.buffers[next++]);
    append(record);
  }
}

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
