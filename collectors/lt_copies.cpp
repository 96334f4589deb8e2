// cuBLASLt GEMMs below full, recorded from copies of their objects (lt_copies.h).
#include "collectors/lt_copies.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <cublasLt.h>

#include "collectors/lt_identity.h"
#include "collectors/runtime.h"
#include "common/hot.h"

namespace lockstep::collectors {
namespace {

using F = trace::fields::Gemm;
constexpr uint64_t kCopiedGemmToken = 0xb40ad00000000002ull;  // kernels.cpp's is ...0001
constexpr uint32_t kVerifyEvery = 64;

// Which of a GEMM's objects its entry holds (a bit each; C only when it is not D's layout),
// whether the record is a verification turn, and what the call said of its workspace.
struct CopyHeader {
  enum : uint8_t { kA = 1, kB = 2, kC = 4, kD = 8, kCIsD = 16, kAlgo = 32, kVerify = 64 };
  uint8_t present = 0;
  uint64_t workspace_bytes = 0;
};
constexpr size_t kDescBytes = sizeof(cublasLtMatmulDescOpaque_t);
constexpr size_t kLayoutBytes = sizeof(cublasLtMatrixLayoutOpaque_t);
struct alignas(64) CopyEntry {
  std::atomic<bool> busy{false};  // filled by the launching thread, not read yet by the writer
  CopyHeader header;
  cublasLtMatmulDescOpaque_t desc;
  cublasLtMatrixLayoutOpaque_t a, b, c, d;
  cublasLtMatmulAlgo_t algo;
};
// The copies of a thread's GEMMs not read yet, in a ring (heap, never freed: a record may be
// read after its thread ended). The record names its entry in a field past the Gemm kind's own
// (never hashed or encoded: fast_field_count). An entry is the writer's from the commit until
// it has read it (or the launching thread's again when it took its record back): a GEMM that
// finds its thread's next entry still busy (the writer 1,024 GEMMs behind) is read on the
// launching thread instead.
constexpr size_t kRingEntries = 1024;
constexpr int kEntryField = F::kCount;
static_assert(kEntryField < trace::kMaxFields);

std::atomic<bool> g_copies_on{true};

// The open copied GEMM of this thread (one at a time: a nested GEMM takes the general path).
struct CopySlot {
  Tracer* tracer = nullptr;
  trace::TraceWriter::Staged ticket;
  CopyEntry* entry = nullptr;  // the open GEMM's
  CopyEntry* ring = new CopyEntry[kRingEntries];
  uint32_t next = 0;    // the ring's next entry
  uint32_t copies = 0;  // this thread's, for the verification's turn
  bool open = false;
};
// Heap, never freed: hooks run during exit, after thread_local destructors.
thread_local CopySlot* t_slot = nullptr;
CopySlot& copy_slot() {
  if (t_slot == nullptr) [[unlikely]]
    t_slot = new CopySlot;
  return *t_slot;
}

// At exit, before libcublasLt's own destructors: no copies from here on, and every record
// appended so far completed and written while the getters can still be called.
void before_cublaslt_exits() {
  g_copies_on.store(false, std::memory_order_relaxed);
  if (Tracer* tracer = Tracer::existing()) tracer->flush_writer();
}

}  // namespace

void set_lt_copies(bool on) { g_copies_on.store(on, std::memory_order_relaxed); }

LOCKSTEP_HOT uint64_t lt_copied_begin(Tracer* tracer, const LtMatmul& mm) {
  if (!g_copies_on.load(std::memory_order_relaxed) || mm.desc == nullptr) return 0;
  CopySlot& slot = copy_slot();
  if (slot.open) return 0;
  static std::once_flag exit_handler;
  std::call_once(exit_handler, [] { std::atexit(before_cublaslt_exits); });
  CopyEntry& entry = slot.ring[slot.next];
  // Its lines are the writer's since it read them: asked for now, they come while the record
  // is staged and stamped.
  for (size_t line = 0; line < sizeof(CopyEntry); line += 64)
    __builtin_prefetch(reinterpret_cast<const char*>(&entry) + line, 1);
  trace::Record* staged = tracer->stage();
  if (staged == nullptr) return 0;
  if (entry.busy.load(std::memory_order_acquire)) [[unlikely]] {
    tracer->stats.lt_copies_ring_full.fetch_add(1, std::memory_order_relaxed);
    return 0;  // the staged slot is left as it was: stage() hands the same one out again
  }
  slot.next = (slot.next + 1) % kRingEntries;
  const bool verify = slot.copies++ % kVerifyEvery == 0;
  if (verify) [[unlikely]] {
    // Read from the objects too (fields of the kind: the writer compares them with the copies').
    ShimCallGuard reading;
    staged->clear_fields_below(F::kCount);
    const LtIdentity id = read_lt_identity(
        {mm.desc, mm.a_layout, mm.b_layout, mm.c_layout, mm.d_layout, mm.algo},
        LtDepth::Identity, nullptr);
    set_lt_identity_fields(*staged, id, mm.workspace_bytes);
  }
  // Before the stores to the record, though after stage()'s (a launch takes it before those):
  // a GEMM that finds its ring entry busy returns above and takes its seq on the general path.
  const uint64_t seq = tracer->next_seq();
  tracer->stamp_with_seq(staged, trace::RecordKind::Gemm, "", mm.stream, false, seq);
  staged->name = trace::kDeferredName;
  staged->fields[kEntryField] = reinterpret_cast<uintptr_t>(&entry);

  CopyHeader& header = entry.header;
  header.workspace_bytes = mm.workspace_bytes;
  header.present = verify ? CopyHeader::kVerify : 0;
  std::memcpy(&entry.desc, mm.desc, kDescBytes);
  auto copy = [&](const void* object, uint8_t bit, void* to, size_t size) {
    if (object == nullptr) return;
    header.present |= bit;
    std::memcpy(to, object, size);
  };
  copy(mm.a_layout, CopyHeader::kA, &entry.a, kLayoutBytes);
  copy(mm.b_layout, CopyHeader::kB, &entry.b, kLayoutBytes);
  copy(mm.d_layout, CopyHeader::kD, &entry.d, kLayoutBytes);
  if (mm.c_layout == mm.d_layout)
    header.present |= CopyHeader::kCIsD;
  else
    copy(mm.c_layout, CopyHeader::kC, &entry.c, kLayoutBytes);
  copy(mm.algo, CopyHeader::kAlgo, &entry.algo, sizeof(cublasLtMatmulAlgo_t));
  entry.busy.store(true, std::memory_order_relaxed);  // published by the commit (release)

  slot.ticket = tracer->commit_staged();
  if (slot.ticket.batch == nullptr) [[unlikely]]  // refused: the writer closed meanwhile
    entry.busy.store(false, std::memory_order_relaxed);
  slot.tracer = tracer;
  slot.entry = &entry;
  slot.open = true;
  open_api().gemm_opened();  // kernels it launches are its own (kernel_launch_begin)
  return kCopiedGemmToken;
}

LOCKSTEP_HOT bool lt_copied_end(uint64_t token, int status) {
  if (token != kCopiedGemmToken) return false;
  CopySlot& slot = copy_slot();
  if (!slot.open) return true;
  slot.open = false;
  open_api().gemm_closed();
  // A GEMM that failed ran nothing: its record is taken back (one already encoded stays,
  // counted as a failed launch is).
  if (status != 0) [[unlikely]] {
    if (slot.tracer->retract(slot.ticket))
      slot.entry->busy.store(false, std::memory_order_release);  // no writer will read it
    else
      slot.tracer->stats.failed_launches_recorded.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

trace::StringId complete_copied_gemm(Tracer* tracer, trace::Record& r) {
  auto* entry = reinterpret_cast<CopyEntry*>(static_cast<uintptr_t>(r.fields[kEntryField]));
  r.fields[kEntryField] = 0;
  const trace::StringId name = tracer->intern("cublasLtMatmul");
  if (entry == nullptr) return name;
  // The copies, aligned as the library's own objects are (the ring's entries are).
  const CopyHeader header = entry->header;
  LtObjects objects;
  objects.desc = reinterpret_cast<cublasLtMatmulDesc_t>(&entry->desc);
  auto layout = [&](uint8_t bit, cublasLtMatrixLayoutOpaque_t* copy) -> cublasLtMatrixLayout_t {
    return header.present & bit ? reinterpret_cast<cublasLtMatrixLayout_t>(copy) : nullptr;
  };
  objects.a = layout(CopyHeader::kA, &entry->a);
  objects.b = layout(CopyHeader::kB, &entry->b);
  objects.d = layout(CopyHeader::kD, &entry->d);
  objects.c = header.present & CopyHeader::kCIsD ? objects.d : layout(CopyHeader::kC, &entry->c);
  if (header.present & CopyHeader::kAlgo) objects.algo = &entry->algo;
  ShimCallGuard reading;  // the library's calls on this thread are the shim's, never the job's
  const LtIdentity id = read_lt_identity(objects, LtDepth::Identity, nullptr);
  if (header.present & CopyHeader::kVerify) {
    // The launching thread read the objects themselves into the record: the copies must agree.
    trace::Record copied;
    set_lt_identity_fields(copied, id, header.workspace_bytes);
    bool same = true;
    for (int i = 0; i < F::kCount; ++i) same = same && copied.fields[i] == r.fields[i];
    if (!same) {
      g_copies_on.store(false, std::memory_order_relaxed);
      tracer->stats.lt_copy_mismatches.fetch_add(1, std::memory_order_relaxed);
      tracer->debug(
          "a cuBLASLt GEMM's copied descriptor, layouts or algorithm read other attributes "
          "than the objects themselves: copies are off");
    }
  } else {
    r.clear_fields_below(F::kCount);
    set_lt_identity_fields(r, id, header.workspace_bytes);
  }
  entry->busy.store(false, std::memory_order_release);  // the launching thread's again
  return name;
}

}  // namespace lockstep::collectors
