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

// The payload: this header, then the descriptor's bytes, then the layouts and the algorithm
// that are there, in this order (C only when it is not D's).
struct CopyHeader {
  enum : uint8_t { kA = 1, kB = 2, kC = 4, kD = 8, kCIsD = 16, kAlgo = 32, kVerify = 64 };
  uint8_t version = 1;
  uint8_t present = 0;
  uint8_t unused[6] = {};
  uint64_t workspace_bytes = 0;
};
static_assert(sizeof(CopyHeader) == 16);
constexpr size_t kDescBytes = sizeof(cublasLtMatmulDescOpaque_t);
constexpr size_t kLayoutBytes = sizeof(cublasLtMatrixLayoutOpaque_t);
constexpr size_t kAlgoBytes = sizeof(cublasLtMatmulAlgo_t);

std::atomic<bool> g_copies_on{true};

// The open copied GEMM of this thread (one at a time: a nested GEMM takes the general path).
struct CopySlot {
  Tracer* tracer = nullptr;
  trace::TraceWriter::Staged ticket;
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
  trace::Record* staged = tracer->stage();
  if (staged == nullptr) return 0;
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
  const uint64_t seq = tracer->next_seq();  // before the stores to the record, as a launch's
  tracer->stamp_with_seq(staged, trace::RecordKind::Gemm, "", mm.stream, false, seq);
  staged->name = trace::kDeferredName;

  CopyHeader header;
  header.workspace_bytes = mm.workspace_bytes;
  const bool c_is_d = mm.c_layout == mm.d_layout;
  size_t bytes = sizeof(CopyHeader) + kDescBytes;
  auto present = [&](const void* object, uint8_t bit, size_t size) {
    if (object == nullptr) return;
    header.present |= bit;
    bytes += size;
  };
  present(mm.a_layout, CopyHeader::kA, kLayoutBytes);
  present(mm.b_layout, CopyHeader::kB, kLayoutBytes);
  present(mm.d_layout, CopyHeader::kD, kLayoutBytes);
  if (c_is_d)
    header.present |= CopyHeader::kCIsD;
  else
    present(mm.c_layout, CopyHeader::kC, kLayoutBytes);
  present(mm.algo, CopyHeader::kAlgo, kAlgoBytes);
  if (verify) header.present |= CopyHeader::kVerify;
  std::vector<uint8_t>& payload = staged->payload;  // empty; its capacity kept between records
  payload.resize(bytes);
  uint8_t* out = payload.data();
  auto put = [&out](const void* from, size_t size) {
    std::memcpy(out, from, size);
    out += size;
  };
  put(&header, sizeof header);
  put(mm.desc, kDescBytes);
  if (mm.a_layout != nullptr) put(mm.a_layout, kLayoutBytes);
  if (mm.b_layout != nullptr) put(mm.b_layout, kLayoutBytes);
  if (mm.d_layout != nullptr) put(mm.d_layout, kLayoutBytes);
  if (!c_is_d && mm.c_layout != nullptr) put(mm.c_layout, kLayoutBytes);
  if (mm.algo != nullptr) put(mm.algo, kAlgoBytes);

  slot.ticket = tracer->commit_staged();
  slot.tracer = tracer;
  slot.open = true;
  OpenApi& api = open_api();  // kernels it launches are its own (kernel_launch_begin)
  ++api.depth, ++api.gemm_depth;
  if (api.outer_api == 0) api.outer_api = static_cast<uint64_t>(trace::RecordKind::Gemm);
  return kCopiedGemmToken;
}

LOCKSTEP_HOT bool lt_copied_end(uint64_t token, int status) {
  if (token != kCopiedGemmToken) return false;
  CopySlot& slot = copy_slot();
  if (!slot.open) return true;
  slot.open = false;
  OpenApi& api = open_api();
  --api.depth, --api.gemm_depth;
  if (api.depth == 0) api.outer_api = 0;
  // A GEMM that failed ran nothing: its record is taken back (one already encoded stays,
  // counted as a failed launch is).
  if (status != 0 && !slot.tracer->retract(slot.ticket)) [[unlikely]]
    slot.tracer->stats.failed_launches_recorded.fetch_add(1, std::memory_order_relaxed);
  return true;
}

trace::StringId complete_copied_gemm(Tracer* tracer, trace::Record& r) {
  const std::vector<uint8_t>& payload = r.payload;
  CopyHeader header;
  if (payload.size() < sizeof header + kDescBytes) {
    r.payload.clear();
    return tracer->intern("cublasLtMatmul");
  }
  std::memcpy(&header, payload.data(), sizeof header);
  // The copies, aligned as the library's own objects are.
  cublasLtMatmulDescOpaque_t desc;
  cublasLtMatrixLayoutOpaque_t a, b, c, d;
  cublasLtMatmulAlgo_t algo;
  const uint8_t* in = payload.data() + sizeof header;
  const uint8_t* end = payload.data() + payload.size();
  auto take = [&](void* to, size_t size) {
    if (end - in < static_cast<ptrdiff_t>(size)) return false;
    std::memcpy(to, in, size);
    in += size;
    return true;
  };
  LtObjects objects;
  take(&desc, kDescBytes);
  objects.desc = reinterpret_cast<cublasLtMatmulDesc_t>(&desc);
  auto layout = [&](uint8_t bit, cublasLtMatrixLayoutOpaque_t* copy) -> cublasLtMatrixLayout_t {
    if (!(header.present & bit) || !take(copy, kLayoutBytes)) return nullptr;
    return reinterpret_cast<cublasLtMatrixLayout_t>(copy);
  };
  objects.a = layout(CopyHeader::kA, &a);
  objects.b = layout(CopyHeader::kB, &b);
  objects.d = layout(CopyHeader::kD, &d);
  objects.c = header.present & CopyHeader::kCIsD ? objects.d : layout(CopyHeader::kC, &c);
  if ((header.present & CopyHeader::kAlgo) && take(&algo, kAlgoBytes)) objects.algo = &algo;
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
  r.payload.clear();
  return tracer->intern("cublasLtMatmul");
}

}  // namespace lockstep::collectors
