// Kernel launches: their records, arguments and pointer regions (kernel_info.cpp: what is known
// of each kernel function; graphs.cpp: CUDA graphs).
#include <atomic>
#include <memory>
#include <optional>
#include <algorithm>
#include <unordered_map>

#include "collectors/call_stack.h"
#include "collectors/driver_api.h"
#include "collectors/events.h"
#include "collectors/kernel_info.h"
#include "collectors/kernel_params.h"
#include "collectors/replay.h"
#include "collectors/stack_records.h"
#include "common/self_time.h"
#include "common/hot.h"

namespace lockstep::collectors {

// The interned label of a pointer argument: the same few "argN" / "argN+M" recur on every
// launch, so they are formatted and interned once per thread.
trace::StringId arg_label_id(Tracer* tracer, const PointerArg& arg,
                             const std::vector<ParamInfo>& layout) {
  const uint64_t key = (uint64_t{arg.param} << 32) | (arg.byte_offset - layout[arg.param].offset);
  thread_local auto* cache = new std::unordered_map<uint64_t, trace::StringId>;  // never freed
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  const trace::StringId id = tracer->intern(arg_label(arg, layout));
  if (cache->size() < 4096) cache->emplace(key, id);
  return id;
}

// The pointer words a known kernel's semantics decide (kernel_writes.h), each passed once (a
// region passed in two words keeps the usual rules): `overwritten`, a region the launch writes
// whole (a contiguous elementwise output or fill of N elements, or a strided one whose offset
// calculator, `strided`, lays them out densely, where the region is those elements; a
// reduction's output elements, where the region is exactly them); `scratch`, a buffer allocated
// right before its companion's. args.pointers.size() when none.
struct KnownWords {
  size_t overwritten;
  size_t scratch;
};
KnownWords known_words(const KernelInfo& info, const DecodedArgs& args,
                       const std::vector<uint8_t>& bytes, const KernelLaunch& launch,
                       const std::optional<StridedOutput>& strided,
                       const std::optional<CatOutput>& cat,
                       const std::optional<ReductionConfig>& reduction) {
  const size_t none = args.pointers.size();
  KnownWords known{none, none};
  if (!info.whole_write && !strided && !cat && !info.scratch && !info.reduced) return known;
  auto passed_once = [&](size_t i) {
    size_t n = 0;
    for (const PointerArg& other : args.pointers) n += other.value == args.pointers[i].value;
    return n == 1;
  };
  auto word_at = [&](uint32_t param, uint32_t offset) {
    const uint32_t at = info.layout[param].offset + offset;
    for (size_t i = 0; i < args.pointers.size(); ++i)
      if (args.pointers[i].byte_offset == at) return i;
    return none;
  };
  if (info.whole_write) {
    const size_t i = word_at(info.whole_write->pointer_param, 0);
    if (i != none && passed_once(i) &&
        whole_write_bytes(*info.whole_write, info.layout, bytes) >= args.pointers[i].hit.readable)
      known.overwritten = i;
  }
  if (strided && strided->bytes > 0) {  // this launch's offset calculator lays them densely
    const size_t i = word_at(info.strided_write->closure_param, strided->data_offset);
    if (i != none && passed_once(i) && strided->bytes >= args.pointers[i].hit.readable)
      known.overwritten = i;
  }
  if (cat && cat->bytes > 0) {  // its inputs tile the whole output
    const size_t i = word_at(0, 0);
    if (i != none && passed_once(i) && cat->bytes >= args.pointers[i].hit.readable)
      known.overwritten = i;
  }
  if (info.reduced) {
    const ReducedElement& reduced = *info.reduced;
    const size_t i = word_at(reduced.param, reduced.dst_offset);
    // One element, or a vector of as many elements as the launch's config says it writes.
    const auto is_the_output = [&](uint64_t readable) {
      if (readable == reduced.element_bytes) return true;
      if (readable % reduced.element_bytes != 0) return false;
      return reduction && reduction->outputs * reduced.element_bytes == readable;
    };
    if (i != none && passed_once(i) && is_the_output(args.pointers[i].hit.readable) &&
        reduction_overwrites_output(reduced, info.layout, bytes))
      known.overwritten = i;
  }
  if (info.scratch) {
    const size_t i = word_at(info.scratch->param, info.scratch->offset);
    const size_t companion = word_at(info.scratch->param, info.scratch->companion_offset);
    if (i != none && companion != none && passed_once(i) && args.pointers[i].hit.offset == 0 &&
        args.pointers[companion].hit.ordinal == args.pointers[i].hit.ordinal + 1)
      known.scratch = i;
  }
  return known;
}

// A multi-tensor-apply launch's address words of tensors none of its blocks works on (stale
// entries, kernel_writes.h): not pointers of this launch.
void drop_untouched_tensors(Tracer* tracer, const KernelInfo& info,
                            const std::vector<uint8_t>& bytes, uint32_t grid_x, DecodedArgs* args) {
  thread_local auto* touched_buffer = new std::vector<uint8_t>;  // never freed (exit)
  std::vector<uint8_t>& touched = *touched_buffer;
  if (!touched_tensors(*info.tensor_list, info.layout, bytes, grid_x, &touched)) return;
  const size_t before = args->pointers.size();
  std::erase_if(args->pointers, [&](const PointerArg& arg) {
    const int t = tensor_of_word(*info.tensor_list, info.layout, arg.byte_offset);
    return t >= 0 && !touched[t];
  });
  if (args->pointers.size() != before)
    tracer->stats.stale_tensor_words.fetch_add(before - args->pointers.size(),
                                               std::memory_order_relaxed);
}

namespace {
// The launch record's identity fields, the same on both paths below.
LOCKSTEP_HOT void set_launch_fields(trace::Record& r, const KernelLaunch& launch) {
  using F = trace::fields::Kernel;
  r.fields[F::grid_x] = launch.grid[0], r.fields[F::grid_y] = launch.grid[1];
  r.fields[F::grid_z] = launch.grid[2];
  r.fields[F::block_x] = launch.block[0], r.fields[F::block_y] = launch.block[1];
  r.fields[F::block_z] = launch.block[2];
  r.fields[F::smem_bytes] = launch.smem_bytes;
  r.fields[F::cluster_x] = launch.cluster[0], r.fields[F::cluster_y] = launch.cluster[1];
  r.fields[F::cluster_z] = launch.cluster[2];
  r.fields[F::launch_api] = static_cast<uint64_t>(launch.api);
  // Every other field of the kind too (what the paths after the stamp know, they set again): the
  // record's fields are written once, not cleared first and then written.
  r.fields[F::args_digest] = 0, r.fields[F::capture_id] = 0, r.fields[F::outer_api] = 0;
  static_assert(F::kCount == 14, "a new Kernel field: set it here");
}

// label_capture's query, once some capture has begun: out of the broad launch's lines. The
// launch's capture id into *capture_id (0: none).
[[gnu::noinline]] LOCKSTEP_HOT bool launch_captured(Tracer* tracer, const KernelLaunch& launch,
                                                    uint64_t* capture_id) {
  CUgraph graph = nullptr;
  const bool capturing =
      tracer->capturing(launch.stream, launch.per_thread_stream, capture_id, &graph);
  if (*capture_id != 0) note_captured_kernel(*capture_id, graph);
  return capturing;
}
bool label_captured(Tracer* tracer, trace::Record& r, const KernelLaunch& launch) {
  uint64_t capture_id = 0;
  const bool capturing = launch_captured(tracer, launch, &capture_id);
  r.fields[trace::fields::Kernel::capture_id] = capture_id;
  return capturing;
}
// Whether the launch's stream is capturing (or its state unknown), its capture id in the record.
// No driver query before any capture began (Tracer::capturing's rule, checked here first: the
// broad launch's path makes no call for it). The test inline (one flag in the line of hot
// flags), the query out of line.
[[gnu::always_inline]] inline bool label_capture(Tracer* tracer, trace::Record& r,
                                                 const KernelLaunch& launch) {
  if (!capture_begun()) [[likely]]
    return false;
  return label_captured(tracer, r, launch);
}

// A launch at broad that is the job's own (not a library's, not inside an NCCL group): its
// identity alone. Everything the general path does for it beyond the record is for fingerprints
// (level full), and broad's cost is the cache lines a launch touches (collectors/README.md, "A
// call's cost at broad"). So the record is built where the writer stages it (no copy), committed
// before the real call (nothing left to do after it but to take the record back if the launch
// failed), and without its name: the writer's resolver looks the handle up on the thread that
// encodes the record (deferred_kernel_name). Where the launching thread needs the name (a
// LOCKSTEP_STACKS filter) or the handle is a host stub (its lookup is a runtime call, which on
// another thread could make a context on the wrong device), or the writer refuses to stage, the
// record is built in the thread's unstaged record below, named here, and appended after the
// call. What the launch's end needs to know is in the thread's OpenApi line (OpenApi::BroadLaunch).
using BroadLaunch = OpenApi::BroadLaunch;
constexpr uint64_t kBroadLaunchToken = 0xb40ad00000000001ull;  // no call-stack token looks so

// A staged launch's record is written in its first cache line only (trace::Record is
// line-aligned: the identity, then fields 0-3): the launch's shape, handle and entry point packed
// into those four fields, which the writer's thread unpacks into the Kernel kind's own before it
// names, hashes or encodes the record (deferred_kernel_name). Its 14 fields and the handle
// written as they are took three lines, each one the collector's core had last (the drain read
// them) and the launching thread took back cold (bench/collectors/launch_lines.py). A launch
// whose values do not fit these widths (grid y or z, a block dimension past 16 bits, a cluster
// dimension past 8, dynamic shared memory past 32: all beyond CUDA's limits, a launch that fails)
// is not staged. The capture id, once a capture has begun, goes in field 4 (flag kCaptured).
namespace packed {
constexpr int kHandle = 0;  // the function handle
constexpr int kGrid = 1;    // grid x (32 bits), y (16), z (16)
constexpr int kBlock = 2;   // block x, y, z (16 bits each), cluster x, y (8 each)
constexpr int kRest = 3;    // smem bytes (32), cluster z (8), launch api (8), handle kind (8), flags
constexpr int kCaptureId = 4;
constexpr uint64_t kCaptured = uint64_t{1} << 56;  // in kRest: field 4 holds the capture id

[[gnu::always_inline]] inline bool fits(const KernelLaunch& l) {
  const uint64_t wide = (l.grid[1] | l.grid[2] | l.block[0] | l.block[1] | l.block[2]) >> 16 |
                        (l.cluster[0] | l.cluster[1] | l.cluster[2]) >> 8 | l.smem_bytes >> 32;
  return wide == 0;
}
[[gnu::always_inline]] inline void pack(trace::Record& r, const KernelLaunch& l) {
  r.fields[kHandle] = reinterpret_cast<uintptr_t>(l.handle);
  r.fields[kGrid] = uint64_t{l.grid[0]} | uint64_t{l.grid[1]} << 32 | uint64_t{l.grid[2]} << 48;
  r.fields[kBlock] = uint64_t{l.block[0]} | uint64_t{l.block[1]} << 16 |
                     uint64_t{l.block[2]} << 32 | uint64_t{l.cluster[0]} << 48 |
                     uint64_t{l.cluster[1]} << 56;
  r.fields[kRest] = l.smem_bytes | uint64_t{l.cluster[2]} << 32 |
                    uint64_t{static_cast<uint8_t>(l.api)} << 40 |
                    uint64_t{static_cast<uint8_t>(l.handle_kind)} << 48;
}
// The record's Kernel fields from its packed ones; returns the handle and its kind.
std::pair<const void*, FunctionHandle> unpack(trace::Record& r) {
  using F = trace::fields::Kernel;
  const uint64_t handle = r.fields[kHandle], grid = r.fields[kGrid], block = r.fields[kBlock],
                 rest = r.fields[kRest];
  const uint64_t capture_id = rest & kCaptured ? r.fields[kCaptureId] : 0;
  r.fields[F::grid_x] = grid & 0xffffffff, r.fields[F::grid_y] = grid >> 32 & 0xffff;
  r.fields[F::grid_z] = grid >> 48;
  r.fields[F::block_x] = block & 0xffff, r.fields[F::block_y] = block >> 16 & 0xffff;
  r.fields[F::block_z] = block >> 32 & 0xffff;
  r.fields[F::smem_bytes] = rest & 0xffffffff;
  r.fields[F::cluster_x] = block >> 48 & 0xff, r.fields[F::cluster_y] = block >> 56;
  r.fields[F::cluster_z] = rest >> 32 & 0xff;
  r.fields[F::launch_api] = rest >> 40 & 0xff;
  r.fields[F::args_digest] = 0, r.fields[F::capture_id] = capture_id, r.fields[F::outer_api] = 0;
  static_assert(F::kCount == 14, "a new Kernel field: pack it (or leave it 0) here");
  return {reinterpret_cast<const void*>(handle), static_cast<FunctionHandle>(rest >> 48 & 0xff)};
}
}  // namespace packed
// The record of a launch that is not staged. Heap, never freed: hooks run during exit, after
// thread_local destructors.
thread_local trace::Record* t_unstaged_record = nullptr;

[[gnu::noinline, gnu::cold]] trace::Record* new_unstaged_record() {
  return t_unstaged_record = new trace::Record;
}
inline trace::Record& unstaged_record() {
  trace::Record* record = t_unstaged_record;
  if (record == nullptr) [[unlikely]]
    record = new_unstaged_record();
  return *record;
}

// The launch's identity into the unstaged record `r` with its `seq`: stamp, launch shape, capture
// label; the rest of its fields cleared (a reused record's, from another kind); buffers and
// payload stay empty on this path.
void stamp_launch(Tracer* tracer, trace::Record& r, const KernelLaunch& launch, uint64_t seq) {
  tracer->stamp_with_seq(&r, trace::RecordKind::Kernel, "", launch.stream,
                         launch.per_thread_stream, seq);
  set_launch_fields(r, launch);  // fields [0, Kernel::kCount)
  for (int i = trace::fields::Kernel::kCount; i < trace::kMaxFields; ++i) r.fields[i] = 0;
  label_capture(tracer, r, launch);
}

// A staged record's capture id, once some capture has begun (packed, above).
[[gnu::noinline]] void pack_capture(Tracer* tracer, trace::Record& r, const KernelLaunch& launch) {
  uint64_t capture_id = 0;
  launch_captured(tracer, launch, &capture_id);
  if (capture_id == 0) return;
  r.fields[packed::kRest] |= packed::kCaptured;
  r.fields[packed::kCaptureId] = capture_id;
}

LOCKSTEP_HOT uint64_t broad_launch_begin(Tracer* tracer, OpenApi& api, BroadLaunch& slot,
                                         const KernelLaunch& launch) {
  // The sequence number first, before this launch's first store: its locked add waits until
  // every earlier store has reached the cache, and stage()'s own (the thread's staging slot,
  // evicted by the job's work since the last launch) would be among them.
  const uint64_t seq = tracer->next_seq();
  trace::Record* staged = nullptr;
  if (!tracer->stacks_by_name() && launch.handle_kind != FunctionHandle::HostStub &&
      packed::fits(launch)) [[likely]]
    staged = tracer->stage();
  if (staged != nullptr) [[likely]] {
    tracer->stamp_with_seq(staged, trace::RecordKind::Kernel, "", launch.stream,
                           launch.per_thread_stream, seq);
    staged->name = trace::kDeferredName;
    packed::pack(*staged, launch);
    if (capture_begun()) [[unlikely]]
      pack_capture(tracer, *staged, launch);
    slot.ticket = tracer->commit_staged();
    slot.state = BroadLaunch::State::Staged;
  } else {
    trace::Record& r = unstaged_record();
    stamp_launch(tracer, r, launch, seq);
    KernelBrief brief;
    {
      self_time::Scope timed(self_time::Phase::Describe);
      brief = kernel_brief(tracer, launch.handle_kind, launch.handle);  // may throw
      r.name = brief.name_id;
    }
    if (brief.stacks) [[unlikely]]
      record_stack(tracer, r, launch.stream, launch.per_thread_stream);
    slot.state = BroadLaunch::State::Unstaged;
  }
  // No deferred output hashes to flush, unlike the general path: only held records defer them
  // (kernels, GEMMs and copies with fingerprints), and below full none is held.
  slot.tracer = tracer;
  ++api.launch_depth;
  return kBroadLaunchToken;
}

// A library's own launch at broad (a cuBLAS kernel): its call's, only counted. The general path
// would set up a call-stack entry for it (a whole CallState's lines) that nothing reads.
LOCKSTEP_HOT uint64_t broad_nested_begin(Tracer* tracer, OpenApi& api, BroadLaunch& slot) {
  tracer->stats.nested_kernels.fetch_add(1, std::memory_order_relaxed);
  slot.tracer = tracer;
  slot.state = BroadLaunch::State::Nested;
  ++api.launch_depth;
  return kBroadLaunchToken;
}

LOCKSTEP_HOT void broad_launch_end(int result) {
  OpenApi& api = open_api();
  BroadLaunch& slot = api.broad;
  const BroadLaunch::State state = slot.state;
  if (state == BroadLaunch::State::Closed) return;
  slot.state = BroadLaunch::State::Closed;
  if (state == BroadLaunch::State::Staged) [[likely]] {
    // A launch that failed ran nothing: its record is taken back (one already encoded stays,
    // counted and warned about at exit).
    if (result != CUDA_SUCCESS && !slot.tracer->retract(slot.ticket)) [[unlikely]]
      slot.tracer->stats.failed_launches_recorded.fetch_add(1, std::memory_order_relaxed);
  } else if (state == BroadLaunch::State::Unstaged && result == CUDA_SUCCESS) {
    slot.tracer->append(unstaged_record());
  }  // Nested: counted at begin; the enclosing call's record stands for it.
  --api.launch_depth;
  if (api.depth == 0) api.outer_api = 0;
}
}  // namespace

trace::StringId deferred_kernel_name(Tracer* tracer, trace::Record& record) {
  if (record.kind != trace::RecordKind::Kernel) return 0;
  const auto [handle, kind] = packed::unpack(record);
  try {
    return kernel_brief(tracer, kind, handle).name_id;
  } catch (...) {
    return 0;
  }
}

namespace {

// Every launch kernel_launch_begin does not take the broad path for (level full, a library's or
// NCCL group's launch, a second launch inside an open one): out of line, in .text.hot, so that
// the broad path's own code (LOCKSTEP_LAUNCH_PATH) stays a few lines long.
[[gnu::noinline]] LOCKSTEP_HOT uint64_t general_launch_begin(Tracer* tracer, OpenApi& api,
                                                             const KernelLaunch& launch,
                                                             bool in_library) {
  if (!in_library) prefetch_kernel_brief(launch.handle);
  auto describe = [&] {
    self_time::Scope timed(self_time::Phase::Describe);
    return kernel_brief(tracer, launch.handle_kind, launch.handle);
  };
  KernelBrief brief;  // info null: not read yet
  if (!in_library && api.nccl_group > 0) brief = describe();
  uint64_t token = 0;
  if (in_library || (api.nccl_group > 0 && brief.is_nccl)) {
    // Made by the open cuBLAS/cuBLASLt/NCCL call: attributed to it.
    tracer->stats.nested_kernels.fetch_add(1, std::memory_order_relaxed);
    CallState& nested = push_call(CallKind::Nested, &token);
    nested.raised_launch = true;
    ++api.launch_depth;
    return token;
  }
  CallState& call =
      push_call(CallKind::Kernel, &token, launch.stream, launch.per_thread_stream);
  call.raised_launch = true;
  ++api.launch_depth;
  call.tracer = tracer;
  call.stream = launch.stream;
  call.per_thread_stream = launch.per_thread_stream;

  trace::Record& r = call.record;
  std::optional<self_time::Scope> stamping(std::in_place, self_time::Phase::Stamp);
  tracer->stamp(&r, trace::RecordKind::Kernel, "", launch.stream, launch.per_thread_stream);
  using F = trace::fields::Kernel;
  set_launch_fields(r, launch);
  const bool capturing = label_capture(tracer, r, launch);
  stamping.reset();
  if (brief.info == nullptr) brief = describe();
  r.name = brief.name_id;
  if (brief.stacks) [[unlikely]]
    record_stack(tracer, r, launch.stream, launch.per_thread_stream);
  if (brief.replay) [[unlikely]]
    replay_before(tracer, r, launch, *brief.info, capturing);

  // Arguments, only where they are fingerprinted (level full, inside the step window, kernel
  // selected, not capturing): scalars digested, pointers recorded as allocation ordinal +
  // offset. Elsewhere a launch is its identity alone, which keeps broad cheap: decoding is
  // most of a launch's cost, and unfingerprinted regions tell a diff nothing.
  const bool hash = tracer->level() == Level::Full && brief.selected && !capturing &&
                    tracer->fingerprint_step(r.step);
  const KernelInfo& info = *brief.info;
  thread_local auto* bytes_buffer = new std::vector<uint8_t>;
  std::vector<uint8_t>& bytes = *bytes_buffer;
  if (!hash || !info.layout_known ||
      !gather_param_bytes(info.layout, launch.kernel_params, launch.extra, &bytes)) {
    tracer->flush_deferred(Tracer::FlushCause::KernelUnhashed);  // nothing to ride on
    note_writes(call);  // at full: writes not known, reusable digests forgotten
    return token;
  }
  {
    AllocationMap& allocations = tracer->allocations();
    std::optional<self_time::Scope> decoding(std::in_place, self_time::Phase::Decode);
    // One shared lock for all of a launch's words (AllocationMap::Reader), released before
    // anything below may take the map's unique lock on this thread. Into this thread's buffer:
    // no allocation per launch once it has grown (nothing below launches through the shim).
    thread_local auto* args_buffer = new DecodedArgs;  // never freed (exit)
    DecodedArgs& args = *args_buffer;
    {
      AllocationMap::Reader reader(allocations);
      decode_args(info.layout, bytes, [&](uintptr_t p) { return reader.find(p); }, &args,
                  reader.range());
    }
    decoding.reset();
    std::optional<self_time::Scope> planning(std::in_place, self_time::Phase::Plan);
    if (info.tensor_list) drop_untouched_tensors(tracer, info, bytes, launch.grid[0], &args);
    // Parameter bytes the kernel's struct holds no pointers in: words there that look like one
    // are stack leftovers (counted).
    const auto drop_words = [&](uint64_t from, uint64_t to) {
      const size_t before = args.pointers.size();
      std::erase_if(args.pointers, [&](const PointerArg& arg) {
        return arg.byte_offset >= from && arg.byte_offset < to;
      });
      if (args.pointers.size() != before)
        tracer->stats.calculator_words.fetch_add(before - args.pointers.size(),
                                                 std::memory_order_relaxed);
    };
    // A strided elementwise launch's offset calculator: leftovers in its unused dimensions (one
    // was the output's own address, which then counted as passed twice).
    std::optional<StridedOutput> strided;
    if (info.strided_write) {
      strided = strided_output(*info.strided_write, info.layout, bytes);
      if (strided) {
        const uint64_t from = uint64_t{info.layout[info.strided_write->closure_param].offset} +
                              strided->calculator_offset;
        drop_words(from, from + strided->calculator_bytes);
      }
    }
    // A reduction's two calculators likewise (between its config and src); the config found
    // once, for them and for its output count (known_words).
    std::optional<ReductionConfig> reduction;
    if (info.reduced) {
      reduction = reduction_config(*info.reduced, info.layout, bytes, launch.grid, launch.block);
      if (reduction) {
        const uint64_t base = info.layout[info.reduced->param].offset;
        drop_words(base + reduction->calculators_from, base + reduction->calculators_to);
      }
    }
    // A concatenation's metadata past the inputs its block rows copy: leftovers likewise.
    std::optional<CatOutput> cat;
    if (info.cat_write) {
      cat = cat_output(*info.cat_write, info.layout, bytes, launch.grid[1]);
      if (cat)
        drop_words(info.layout[1].offset + cat->pointers_to,
                   uint64_t{info.layout[1].offset} + info.layout[1].size);
    }
    r.fields[F::args_digest] = args.scalar_digest;
    thread_local auto* inputs_buffer = new std::vector<PlannedRegion>;  // never freed (exit)
    std::vector<PlannedRegion>& inputs = *inputs_buffer;
    inputs.clear();
    thread_local auto* pairs_buffer = new std::vector<PendingRecord::RolePair>;  // never freed
    std::vector<PendingRecord::RolePair>& pairs = *pairs_buffer;
    pairs.clear();
    const uint64_t cap = tracer->config().max_region;
    // Pointer words learned read-only (pointer_roles.h) get no output entry, unless this launch
    // verifies them, or every region of this launch is one (it writes somewhere: hash them all).
    PointerRoles* roles = info.roles.get();
    const bool verify = roles != nullptr && roles->next_launch_verifies();
    // Per pointer, decided once (the collector may learn meanwhile): a region once however often
    // its pointer is passed (a handful: no set); its role known per word only when passed once
    // (a region passed twice is skipped only if every word passing it is learned read-only, and
    // teaches nothing: which word changed it is not known). A clamped region may be written
    // past its clamp: never learned, never skipped.
    enum PointerUse : uint8_t { kRepeat = 0, kHashOut = 1, kLearnable = 2, kReadOnly = 4 };
    thread_local auto* uses_buffer = new std::vector<uint8_t>;  // never freed (exit)
    std::vector<uint8_t>& uses = *uses_buffer;
    uses.assign(args.pointers.size(), kHashOut);
    bool any_hashed_out = false;
    for (size_t i = 0; i < args.pointers.size(); ++i) {
      const PointerArg& arg = args.pointers[i];
      size_t first = 0;
      while (args.pointers[first].value != arg.value) ++first;
      const bool learnable = roles != nullptr && arg.hit.readable <= cap;
      const bool read_only = learnable && !verify && roles->read_only(arg.byte_offset);
      if (first == i) {
        uses[i] = kHashOut | (learnable ? kLearnable : 0) | (read_only ? kReadOnly : 0);
        continue;
      }
      uses[i] = kRepeat;
      uses[first] &= static_cast<uint8_t>(~kLearnable);
      if (!read_only) uses[first] &= static_cast<uint8_t>(~kReadOnly);
    }
    // Words a known kernel's semantics decide (kernel_writes.h): a region a whole writer
    // overwrites takes no input entry; a scratch buffer takes none at all (noted as written).
    const KnownWords known = known_words(info, args, bytes, launch, strided, cat, reduction);
    // Words the kernel's known semantics name as operands (PlannedRegion::operand): an
    // elementwise kernel's data array, its own parameter or inside a strided closure; a
    // concatenation's output and the inputs it copies.
    const auto operand_word = [&](uint32_t byte_offset) {
      if (cat) {
        const uint32_t meta = info.layout[1].offset;
        if (byte_offset == info.layout[0].offset ||
            (byte_offset >= meta && byte_offset < meta + cat->pointers_to))
          return true;
      }
      if (info.whole_write) {
        const ParamInfo& data = info.layout[info.whole_write->pointer_param];
        if (byte_offset >= data.offset && byte_offset < data.offset + data.size) return true;
      }
      if (strided) {
        const uint64_t from =
            uint64_t{info.layout[info.strided_write->closure_param].offset} + strided->data_offset;
        if (byte_offset >= from && byte_offset < from + 8ull * info.strided_write->args)
          return true;
      }
      return false;
    };
    const size_t overwritten = known.overwritten, scratch = known.scratch;
    if (overwritten < uses.size()) uses[overwritten] = kHashOut;  // teaches nothing
    for (size_t i = 0; i < uses.size(); ++i)
      any_hashed_out |= i != scratch && uses[i] != kRepeat && !(uses[i] & kReadOnly);
    // Every region learned read-only: it writes somewhere all the same (hash them all).
    const bool skip_read_only = any_hashed_out;
    bool overwritten_out = false;  // the whole write has its Out entry (evidence for learning)
    std::optional<FillKind> fill_kind;  // a fill whose output is hashed: it teaches its digest
    uint32_t fill_index = 0;
    for (size_t i = 0; i < args.pointers.size(); ++i) {
      const PointerArg& arg = args.pointers[i];
      if (uses[i] == kRepeat) continue;
      const uint64_t bytes_to_end = arg.hit.readable;
      if (i == scratch) {  // no entry: only noted as written
        tracer->stats.scratch_regions.fetch_add(1, std::memory_order_relaxed);
        tracer->stats.bytes_scratch.fetch_add(std::min(bytes_to_end, cap),
                                              std::memory_order_relaxed);
        call.writes_only.push_back({static_cast<CUdeviceptr>(arg.value), bytes_to_end, 0,
                                    arg.hit.base, arg.value + bytes_to_end});
        continue;
      }
      const trace::StringId label = arg_label_id(tracer, arg, info.layout);
      const void* ptr = reinterpret_cast<const void*>(arg.value);
      const std::optional<AllocationHit> hit = arg.hit;
      if (i == overwritten) {
        tracer->stats.inputs_overwritten.fetch_add(1, std::memory_order_relaxed);
        tracer->stats.bytes_overwritten.fetch_add(std::min(bytes_to_end, cap),
                                                  std::memory_order_relaxed);
        // A fill: its output is the digest of an earlier same fill's (fill_digests.h).
        FillKind kind{{}, info.whole_write ? info.whole_write->element_bytes : 0,
                      std::min(bytes_to_end, cap)};
        const bool fill = info.whole_write && tracer->recalls_fills() &&
                          whole_write_value(*info.whole_write, info.layout, bytes, &kind.value);
        const std::optional<uint64_t> digest =
            fill ? tracer->fill_digests().recall(kind) : std::nullopt;
        const size_t out_index = r.buffers.size();
        tracer->add_buffer(&r, digest ? nullptr : &call.outputs, label, trace::Role::Out,
                           trace::DType::Bytes, ptr, bytes_to_end, false, true, cap, hit);
        if (r.buffers.size() == out_index) continue;
        overwritten_out = true;
        if (!digest) {
          if (fill) fill_kind.emplace(kind), fill_index = static_cast<uint32_t>(out_index);
          continue;
        }
        trace::BufferFingerprint& out = r.buffers[out_index];
        out.fingerprint = *digest;
        out.flags |= trace::kFingerprintValid | trace::kFingerprintRecalled;
        const PlannedRegion region{static_cast<CUdeviceptr>(arg.value), out.bytes,
                                   static_cast<uint32_t>(out_index), arg.hit.base,
                                   arg.value + bytes_to_end};
        call.writes_only.push_back(region);
        call.recalled.emplace_back(region, *digest);
        tracer->stats.fills_recalled.fetch_add(1, std::memory_order_relaxed);
        tracer->stats.bytes_recalled.fetch_add(out.bytes, std::memory_order_relaxed);
        continue;
      }
      const size_t in_index = r.buffers.size(), planned = inputs.size();
      tracer->add_buffer(&r, &inputs, label, trace::Role::In, trace::DType::Bytes, ptr,
                         bytes_to_end, false, true, cap, hit);
      if (r.buffers.size() == in_index) continue;  // nothing to hash there
      if (inputs.size() > planned && operand_word(arg.byte_offset)) inputs.back().operand = true;
      if (skip_read_only && (uses[i] & kReadOnly)) {
        r.buffers[in_index].flags |= trace::kLearnedReadOnly;
        tracer->stats.outputs_read_only.fetch_add(1, std::memory_order_relaxed);
        tracer->stats.bytes_read_only.fetch_add(r.buffers[in_index].bytes,
                                                std::memory_order_relaxed);
        continue;
      }
      tracer->add_buffer(&r, &call.outputs, label, trace::Role::Out, trace::DType::Bytes, ptr,
                         bytes_to_end, false, true, cap, hit);
      if (uses[i] & kLearnable)
        pairs.push_back({arg.byte_offset, static_cast<uint32_t>(in_index),
                         static_cast<uint32_t>(in_index + 1)});
    }
    planning.reset();
    // Its writes go through its pointers (README, Known limits: what is not seen); a kernel
    // with no pointer into a known allocation writes through something else, if at all.
    call.writes_known = !call.outputs.empty() || !call.writes_only.empty();
    start_fingerprints(call, inputs, /*not_capturing=*/true);
    // Read at retire, after the call released its reference (kernel_launch_end).
    if (call.pending != nullptr && !pairs.empty()) {
      call.pending->roles = roles;
      call.pending->role_pairs.assign(pairs.begin(), pairs.end());
      call.pending->writes_whole = overwritten_out;
    }
    if (call.pending != nullptr && fill_kind) {
      call.pending->fill = fill_kind;
      call.pending->fill_index = fill_index;
    }
  }
  return token;
}

// general_launch_begin in its self-time scope: out of line with it, so that the broad launch's
// begin is the checks and broad_launch_begin, straight through (the scope's code between them was
// three code lines that a broad launch jumped over).
[[gnu::noinline]] LOCKSTEP_HOT uint64_t timed_general_launch_begin(Tracer* tracer, OpenApi& api,
                                                                   const KernelLaunch& launch,
                                                                   bool in_library) {
  self_time::Scope timed(self_time::Phase::KernelBegin);
  return general_launch_begin(tracer, api, launch, in_library);
}

}  // namespace

LOCKSTEP_LAUNCH_PATH uint64_t kernel_launch_begin(const KernelLaunch& launch) {
  if (!active()) return 0;
  OpenApi& api = open_api();
  if (api.launch_depth > 0) return 0;  // a runtime launch reaching the driver: one record
  Tracer* tracer = Tracer::get();
  if (tracer == nullptr || tracer->level() < Level::Broad) return 0;
  // A library's own launch (inside cuBLAS) is its call's: no name needed. Otherwise the name's
  // slot is asked for now and read after the call is set up: its miss (the slot of a kernel not
  // launched lately) overlaps that work instead of coming first.
  const bool in_library = api.depth > 0;
  BroadLaunch& slot = api.broad;
  if (api.nccl_group == 0 && tracer->level() == Level::Broad &&
      slot.state == BroadLaunch::State::Closed) [[likely]] {
    if (in_library) return broad_nested_begin(tracer, api, slot);
    return broad_launch_begin(tracer, api, slot, launch);
  }
  return timed_general_launch_begin(tracer, api, launch, in_library);
}

namespace {
// kernel_launch_end of a launch the general path began: out of line, so that the broad launch's
// end (the token test, then broad_launch_end) saves no registers and spans no lines of this.
[[gnu::noinline]] LOCKSTEP_HOT void general_launch_end(uint64_t token, int result) {
  CallState* call = returned_call(token);
  if (call == nullptr) return;
  self_time::Scope timed(self_time::Phase::KernelEnd);
  if (call->kind == CallKind::Kernel && call->tracer != nullptr) {
    Tracer* tracer = call->tracer;
    if (call->pending != nullptr) {
      // The outputs wait for the next kernel on this stream (one hash launch for both), or
      // for whatever comes first that could order other work after this stream.
      if (result == CUDA_SUCCESS)
        tracer->defer_outputs(call->pending, call->stream, call->per_thread_stream, call->outputs,
                              /*not_capturing=*/true);
      tracer->release(call->pending, result == CUDA_SUCCESS);
    } else if (result == CUDA_SUCCESS) {
      tracer->append(call->record);
    }
  }
  finish_call(call);
}
}  // namespace

LOCKSTEP_LAUNCH_PATH void kernel_launch_end(uint64_t token, int result) {
  if (token == kBroadLaunchToken) [[likely]]
    broad_launch_end(result);
  else
    general_launch_end(token, result);
}

}  // namespace lockstep::collectors
